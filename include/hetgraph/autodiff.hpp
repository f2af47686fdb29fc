// SPDX-License-Identifier: Apache-2.0
// Reverse-mode automatic differentiation inside the graph, and optimizers built from it.
//
//   auto loss = reduce_mean(cross_entropy(softmax(matmul(x, W) + b), y));
//   std::vector<Node> grads = hetgraph::gradients(loss, {W, b});   // nodes of the same graph
//   Node step = hetgraph::sgd(loss, {W, b}, 0.1f);                 // W -= 0.1 * dW, b -= 0.1 * db
//   auto cg = GraphCompiler().compile(g, shapes, {loss, step});    // one run = one training step
//
// Gradients are ordinary nodes: they are compiled, planned and run like any other. The loss
// must be a scalar (one element); that is checked when the graph is compiled.
//
// Data-parallel training (one process per share of the global batch, see distributed.hpp):
//   Node step = hetgraph::sgd(loss, {W, b}, 0.1f, 0.0f, hetgraph::DataParallel{comm});
//
// Other optimizers (Adam, AdamW, RMSprop, Adagrad, SGD with momentum, Nesterov or weight
// decay), one fused update kernel per variable, state in variables that checkpoints carry:
//   Node train = hetgraph::minimize(loss, {W, b}, Optimizer::adam(1e-3f));
//   auto cg = GraphCompiler().compile(g, shapes, {loss, train});
//   cg.run(feeds);                 // one step: W, b, "W/exp_avg", "W/exp_avg_sq", "step" change
//   cg.save("run.ckpt");           // resumes bitwise: compile again, load, keep running
// With a learning-rate schedule computed in the graph from the step count (no recompilation):
//   Node step = hetgraph::step_counter(g);                            // variable "step", 0
//   Node lr = hetgraph::linear_warmup(step, hetgraph::cosine_decay(step, 1e-3f, 10000), 500);
//   Node train = hetgraph::minimize(loss, {W, b}, Optimizer::adamw(), {.learning_rate = lr,
//                                                                      .step = step});
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hetgraph/distributed.hpp"
#include "hetgraph/graph.hpp"

namespace hetgraph {

/// d(loss)/d(w) for each w in `wrt`, in order. Throws GraphError when a w does not influence
/// the loss or a path to it goes through an op that cannot be differentiated.
std::vector<Node> gradients(Node loss, std::span<const Node> wrt);
std::vector<Node> gradients(Node loss, std::initializer_list<Node> wrt);

/// One step of stochastic gradient descent as a group of assigns: v <- v - lr * dv, or with
/// momentum m: u <- m * u + dv, v <- v - lr * u (u a zero-initialised variable named
/// "<v>/velocity"). Variables stay in the compiled graph's memory between runs.
Node sgd(Node loss, std::span<const Node> variables, float learning_rate, float momentum = 0.0f);
Node sgd(Node loss, std::initializer_list<Node> variables, float learning_rate,
         float momentum = 0.0f);

/// Data parallelism for sgd: every rank of `comm` runs the same graph on its own share of the
/// global batch (its loss the mean over its rows), and the gradients are averaged across the
/// ranks before the update, so every replica takes the same step, the one a single process
/// would take on the whole batch when the shares are equal.
struct DataParallel {
  distributed::Communicator comm;
  /// Gradients are packed into fusion buffers of up to this many bytes (a larger gradient gets
  /// one of its own), one allreduce each, in the order the backward pass produces them: the
  /// first buckets' allreduces run while the backward pass goes on (PyTorch DDP's buckets,
  /// Horovod's fusion buffer).
  std::size_t bucket_bytes = 4u << 20;
};

/// sgd with gradients averaged across dp.comm (an allreduce of the mean per bucket). The
/// gradient of an embedding table looked up once travels sparse: the looked-up rows and their
/// indices are allgathered, and the update touches those rows only. With one rank it is plain
/// sgd. Every rank must start from the same variables: see distributed::broadcast_variables.
Node sgd(Node loss, std::span<const Node> variables, float learning_rate, float momentum,
         const DataParallel& dp);
Node sgd(Node loss, std::initializer_list<Node> variables, float learning_rate, float momentum,
         const DataParallel& dp);

/// An update rule and its hyper-parameters, with PyTorch's definitions (torch.optim) and
/// defaults. g is the gradient plus weight_decay * w (L2, added to the gradient) except for
/// adamw, whose decay is decoupled (w <- w * (1 - lr * weight_decay) before the Adam step); t
/// counts steps from 1.
///   sgd:      w <- w - lr g
///   momentum: u <- momentum u + (1 - dampening) g;  w <- w - lr u
///   nesterov: u as momentum;                        w <- w - lr (g + momentum u)
///   adam(w):  m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;
///             w <- w - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
///   rmsprop:  s <- alpha s + (1 - alpha) g^2;  w <- w - lr g / (sqrt(s) + eps)
///   adagrad:  s <- s + g^2;                    w <- w - lr g / (sqrt(s) + eps)
/// State is zero-initialised variables named after the variable: "<w>/velocity",
/// "<w>/exp_avg" and "<w>/exp_avg_sq", "<w>/square_avg", "<w>/sum"; Adam's step count is the
/// step variable (see StepOptions).
struct Optimizer {
  enum class Rule : std::uint8_t { sgd, momentum, nesterov, adam, adamw, rmsprop, adagrad };
  Rule rule = Rule::sgd;
  float learning_rate = 0.01f;
  float momentum = 0.0f, dampening = 0.0f;  // momentum, nesterov
  float beta1 = 0.9f, beta2 = 0.999f;       // adam, adamw
  float alpha = 0.99f;                      // rmsprop
  float eps = 1e-8f;                        // adam, adamw, rmsprop, adagrad
  float weight_decay = 0.0f;
  /// > 0: the gradients are scaled together so that their global norm is at most this
  /// (clip_by_global_norm) before the update.
  float clip_norm = 0.0f;

  static Optimizer sgd(float lr, float weight_decay = 0.0f);
  static Optimizer momentum_sgd(float lr, float momentum = 0.9f, float weight_decay = 0.0f);
  static Optimizer nesterov(float lr, float momentum = 0.9f, float weight_decay = 0.0f);
  static Optimizer adam(float lr = 1e-3f, float weight_decay = 0.0f);
  static Optimizer adamw(float lr = 1e-3f, float weight_decay = 1e-2f);
  static Optimizer rmsprop(float lr = 1e-2f, float weight_decay = 0.0f);
  static Optimizer adagrad(float lr = 1e-2f, float weight_decay = 0.0f);  // eps 1e-10
  /// The rule called `name` ("sgd", "momentum", "nesterov", "adam", "adamw", "rmsprop",
  /// "adagrad") with its defaults; an unknown name is a UsageError listing the known ones.
  static Optimizer named(std::string_view name, float lr, float weight_decay = 0.0f);
  /// The rule's name, as named() takes it.
  std::string_view name() const;
};

/// Graph values an optimizer step may take instead of constants.
struct StepOptions {
  /// A float scalar node, e.g. a schedule of the step count: replaces the optimizer's
  /// learning_rate; read at every run.
  Node learning_rate{};
  /// The step counter (step_counter): the step increments it, and adam reads it. Left
  /// invalid, adam and adamw make one ("step") and the other rules do without.
  Node step{};
};

/// One optimizer step of `variables` towards a lower `loss` as a group of nodes: per variable
/// one optimizer_update (one kernel that reads the gradient and writes the variable and its
/// state after the run's commit point), plus the step counter's increment. One run = one step.
/// Bad input is an Error: no variables, a node that is not a float32 variable (GraphError),
/// a negative or non-finite learning rate or hyper-parameter out of range (UsageError).
Node minimize(Node loss, std::span<const Node> variables, const Optimizer& optimizer,
              const StepOptions& options = {});
Node minimize(Node loss, std::initializer_list<Node> variables, const Optimizer& optimizer,
              const StepOptions& options = {});
/// minimize with data parallelism: the gradients are averaged across dp.comm's ranks as sgd's
/// are (buckets of allreduces overlapping the backward pass; an embedding table's gradient as
/// its looked-up rows), then every rank takes the same step with the same state. Clipping sees
/// the averaged gradients, so the step is the one a single process takes on the whole batch.
/// With one rank it is plain minimize. Every rank must start from the same variables (see
/// distributed::broadcast_variables); the state starts at zero on each.
///   Node step = minimize(loss, {W, b}, Optimizer::adam(1e-3f), {}, DataParallel{comm});
Node minimize(Node loss, std::span<const Node> variables, const Optimizer& optimizer,
              const StepOptions& options, const DataParallel& dp);
Node minimize(Node loss, std::initializer_list<Node> variables, const Optimizer& optimizer,
              const StepOptions& options, const DataParallel& dp);
/// The same with gradients computed elsewhere (gradients[i] for variables[i]).
Node apply_gradients(std::span<const Node> variables, std::span<const Node> gradients,
                     const Optimizer& optimizer, const StepOptions& options = {});

/// A float scalar variable holding the number of steps taken, 0 at first (exact up to 2^24):
/// give it to minimize (StepOptions::step), which increments it, and to the schedules below.
Node step_counter(Graph& graph, std::string name = "step");

/// Learning-rate schedules: float scalar nodes computed from the step count each run (values
/// as PyTorch's schedulers give them after `step` steps).
/// lr * gamma^floor(step / step_size) (StepLR).
Node step_decay(Node step, float lr, std::int64_t step_size, float gamma);
/// lr * gamma^step (ExponentialLR).
Node exponential_decay(Node step, float lr, float gamma);
/// min_lr + (lr - min_lr) (1 + cos(pi min(step, total_steps) / total_steps)) / 2
/// (CosineAnnealingLR for one half period, then min_lr).
Node cosine_decay(Node step, float lr, std::int64_t total_steps, float min_lr = 0.0f);
/// lr * min(1, (step + 1) / warmup_steps): a linear ramp over the first warmup_steps steps.
Node linear_warmup(Node step, Node lr, std::int64_t warmup_steps);

/// Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_): each gradient times
/// max_norm / max(norm, max_norm), norm = sqrt(sum of every element squared).
std::vector<Node> clip_by_global_norm(std::span<const Node> gradients, float max_norm);

}  // namespace hetgraph
