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
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
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

}  // namespace hetgraph
