// SPDX-License-Identifier: Apache-2.0
// Layers with training and inference modes, batch normalisation (running statistics kept in
// variables) and dropout, and layer normalisation. The normalisations are compositions of
// reductions and broadcasting arithmetic, so their gradients come from autodiff and they run
// on every platform; the compiler fuses the elementwise chains. Dropout is its own op.
//
// Usage: one model function serves both modes on the same variables.
//
//   hetgraph::Graph g;
//   auto bn = hetgraph::nn::BatchNorm::create(g, "bn1", 16);          // gamma, beta, stats
//   auto model = [&](hetgraph::Node x, hetgraph::nn::Mode mode, std::vector<hetgraph::Node>& up) {
//     auto [y, update] = bn(conv2d(x, w), mode);                        // update: train only
//     if (update.valid()) up.push_back(update);
//     return relu(y);
//   };
//   std::vector<hetgraph::Node> updates;
//   Node loss = ...model(x, nn::Mode::train, updates)...;
//   Node step = minimize(loss, params);                   // params include bn.gamma, bn.beta
//   // train: fetch {loss, step, updates...}; infer: compile model(x2, nn::Mode::infer, unused)
//   // and copy bn.variables() (with the weights) from the training graph before running it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetgraph/graph.hpp"

namespace hetgraph::nn {

enum class Mode { train, infer };

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
