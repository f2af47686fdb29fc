// SPDX-License-Identifier: Apache-2.0
// Layers: fully connected layers with Xavier/He initial weights, layers with training and
// inference modes, batch normalisation (running statistics kept in variables) and dropout, and
// layer normalisation. The normalisations are compositions of
// reductions and broadcasting arithmetic, so their gradients come from autodiff and they run
// on every platform; the compiler fuses the elementwise chains. Dropout is its own op.
//
// A two-layer classifier (weights drawn as PyTorch's nn.init would, biases zero):
//
//   hetgraph::Graph g;
//   auto x = g.input("x");                                            // [batch, 784]
//   auto fc1 = hetgraph::nn::Linear::create(g, "fc1", 784, 128, hetgraph::nn::Init::he_uniform);
//   auto fc2 = hetgraph::nn::Linear::create(g, "fc2", 128, 10);      // Xavier uniform
//   auto logits = fc2(relu(fc1(x)));                                  // [batch, 10]
//   // parameters: fc1.parameters() and fc2.parameters() (weight, bias) for minimize()
//
// Usage of the normalisations: one model function serves both modes on the same variables.
//
//   hetgraph::Graph g;
//   auto x = g.input("x");                                            // [batch, 3, H, W]
//   auto w = g.variable("w", {16, 3, 3, 3}, hetgraph::nn::initializer(
//                                               hetgraph::nn::Init::he_uniform, 27, 144, 1));
//   auto bn = hetgraph::nn::BatchNorm::create(g, "bn1", 16);          // gamma, beta, stats
//   auto model = [&](hetgraph::Node x, hetgraph::nn::Mode mode, std::vector<hetgraph::Node>& up) {
//     auto [y, update] = bn(conv2d(x, w), mode);                        // update: train only
//     if (update.valid()) up.push_back(update);
//     return relu(y);
//   };
//   std::vector<hetgraph::Node> updates;
//   auto loss = reduce_mean(model(x, hetgraph::nn::Mode::train, updates));  // or a real loss
//   auto params = bn.parameters();                                   // gamma, beta
//   params.push_back(w);
//   auto step = minimize(loss, params, hetgraph::Optimizer::adam());
//   // train: fetch {loss, step, updates...}; infer: compile model(x2, nn::Mode::infer, unused)
//   // with the training graph's VariableStore (CompileOptions::variables, compiler.hpp) and
//   // it reads bn.variables() and the weights as training leaves them, nothing copied.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetgraph/graph.hpp"

namespace hetgraph::nn {

enum class Mode { train, infer };

/// How a weight's initial values are drawn from its fan-in and fan-out, as PyTorch's nn.init:
/// Glorot/Xavier keeps the variance of activations and gradients through linear, tanh and
/// sigmoid layers (variance 2 / (fan_in + fan_out)), He/Kaiming through relu layers (variance
/// 2 / fan_in); each uniform (on [-a, a], a = sqrt(3 variance)) or normal (mean 0).
enum class Init { xavier_uniform, xavier_normal, he_uniform, he_normal };

/// The Initializer for a weight with these fans, drawing from `seed`; UsageError for a fan
/// below 1.
///   g.variable("W", {256, 64}, nn::initializer(nn::Init::he_normal, 256, 64, /*seed=*/7));
Initializer initializer(Init kind, std::int64_t fan_in, std::int64_t fan_out, std::uint64_t seed);

/// A fully connected layer: y = x W + b with W [in, out] and b [out], x [..., in] of rank 2 or
/// 3 (PyTorch's nn.Linear computes the same from its W^T). The weight is drawn by `init`; the
/// bias starts at zero (none with `bias` false). Variables <name>.weight and <name>.bias; seed
/// 0 draws from the name's hash, so layers of different names differ and a rebuilt graph draws
/// the same weights.
struct Linear {
  Node weight, bias;  // bias invalid without one
  std::int64_t in_features = 0, out_features = 0;

  /// UsageError for a size below 1, naming the layer.
  static Linear create(Graph& g, const std::string& name, std::int64_t in_features,
                       std::int64_t out_features, Init init = Init::xavier_uniform,
                       std::uint64_t seed = 0, bool bias = true);
  /// x's last dim must be in_features: otherwise a ShapeError at compile time naming the
  /// product.
  Node operator()(Node x) const;
  /// The trainable parameters: weight and (where there is one) bias.
  std::vector<Node> parameters() const;
};

/// Output of a normalisation layer: the normalised value, and in training mode the node that
/// updates the running statistics (a group of assigns; fetch it with the training step).
struct Normalized {
  Node y;
  Node update;  // invalid in inference mode
};

/// Batch normalisation over the channel axis 1 of inputs of a fixed rank (2: [N, C];
/// 3: [N, C, L]; 4: [N, C, H, W]), as PyTorch's BatchNorm1d/2d: training mode normalises
/// with the batch's mean and biased variance and moves the running statistics towards the
/// batch's mean and unbiased variance by `momentum`; inference mode normalises with the
/// running statistics.
struct BatchNorm {
  Node gamma, beta;                // trainable, [C], initialised to 1 and 0
  Node running_mean, running_var;  // [C], initialised to 0 and 1, written by `update`
  std::int64_t channels = 0;
  int rank = 4;
  float momentum = 0.1f;
  float eps = 1e-5f;

  /// Variables named <name>.gamma, .beta, .running_mean, .running_var. UsageError for
  /// channels < 1, rank outside 2-4, momentum outside [0, 1] or eps <= 0.
  static BatchNorm create(Graph& g, const std::string& name, std::int64_t channels, int rank = 4,
                          float momentum = 0.1f, float eps = 1e-5f);
  /// x's dim 1 must be `channels` and its rank `rank`: otherwise a ShapeError at compile time
  /// (in inference mode a wrong rank is caught only where broadcasting [1, C, 1...] against x
  /// fails, so keep `rank` true).
  Normalized operator()(Node x, Mode mode) const;
  /// The trainable parameters (gamma, beta) and every variable (with the running statistics).
  std::vector<Node> parameters() const { return {gamma, beta}; }
  std::vector<Node> variables() const { return {gamma, beta, running_mean, running_var}; }
};

/// Dropout by mode: hetgraph::dropout(x, step, p, seed) in training mode (graph.hpp), x itself
/// in inference mode (PyTorch's eval(): the training scale 1 / (1 - p) already keeps the
/// expected activation). `step` (a float scalar, usually the optimizer's step counter) draws a
/// new mask each training run; give every dropout layer its own seed.
///   h = nn::dropout(relu(matmul(x, W1)), step, 0.25f, /*seed=*/1, mode);
Node dropout(Node x, Node step, float p, std::uint64_t seed, Mode mode);

/// Layer normalisation over the last axis (PyTorch's LayerNorm(D)): (x - mean) / sqrt(var +
/// eps) * gamma + beta, mean and biased variance over the last axis, gamma and beta of shape
/// [D]. A last axis of another size is a ShapeError at compile time.
Node layer_norm(Node x, Node gamma, Node beta, float eps = 1e-5f);

}  // namespace hetgraph::nn
