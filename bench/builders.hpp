// SPDX-License-Identifier: Apache-2.0
// Graph-building pieces the workload files share (workloads.cpp defines them): data, the
// 4-layer recurrent training step of lstm-S and phased-lstm-S, and the tiny-task graph.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "workloads.hpp"

namespace bench {

/// How a training workload updates its variables: plain SGD on the whole batch
/// (hetgraph-bench), or data parallel (hetgraph-dp-bench): each of `ranks` processes takes its
/// share of the global batch and sgd averages the gradients over dp's communicator. With dp
/// null and ranks > 1: one rank's share and plain SGD, the compute of one machine of a larger
/// job (the scaling model's input).
struct Training {
  const hetgraph::DataParallel* dp = nullptr;
  int ranks = 1;
  /// A rank's rows of a global batch (rounded up where the ranks cannot share it equally).
  std::int64_t local(std::int64_t batch) const { return (batch + ranks - 1) / ranks; }
  /// Another update rule than plain SGD (hetgraph::minimize; one process only), at the
  /// learning rate it names.
  std::optional<hetgraph::Optimizer> optimizer{};
  hetgraph::Node step(hetgraph::Node loss, std::span<const hetgraph::Node> params, float lr) const {
    if (optimizer) return hetgraph::minimize(loss, params, *optimizer);
    return dp ? hetgraph::sgd(loss, params, lr, 0.0f, *dp) : hetgraph::sgd(loss, params, lr);
  }
};

/// The MNIST softmax training step, global batch 500 (hetgraph-bench's mnist-softmax times an
/// epoch of them).
Case mnist_softmax_step(const Training& t);
/// The 4-layer LSTM training step of lstm-S from primitive ops.
Case lstm_training(int seq, int hidden, const Training& t, bool train = true);
/// Wide & deep inference or training with a global batch of `batch`.
Case wide_deep(int batch, bool train, const Training& t = {});

/// n values uniform in [lo, hi), deterministic in `seed`.
std::vector<float> random_data(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                               float hi = 1.0f);

struct LstmState {
  hetgraph::Node h, c;
};
/// The LSTM cell from primitive ops on fused gate weights: [x, h] W + b split into the input,
/// forget, cell and output gates.
LstmState lstm_cell(hetgraph::Node x, const LstmState& s, hetgraph::Node W, hetgraph::Node b,
                    std::int64_t hidden);

/// The cell of a recurrent training step.
class RecurrentCell {
 public:
  virtual ~RecurrentCell() = default;
  /// Adds the cell's own inputs (with data) and variables; variables appended to `params`
  /// are trained with the rest.
  virtual void setup(Case&, int /*layers*/, int /*seq*/, std::int64_t /*batch*/,
                     std::int64_t /*hidden*/, std::vector<hetgraph::Node>& /*params*/) {}
  /// One step of one layer: the new state from input x and the layer's previous state, given
  /// the layer's fused gate weights W [2H, 4H] and b [4H].
  virtual LstmState step(int layer, int t, hetgraph::Node x, const LstmState& s, hetgraph::Node W,
                         hetgraph::Node b, std::int64_t hidden) = 0;
};

/// A 4-layer recurrent training step, global batch `batch`, input size = hidden size: forward
/// over `seq` steps, a softmax classifier on every step's top-layer output, mean cross-entropy,
/// autodiff backward, SGD (0.01). `train` false: the forward pass alone, fetching every step's
/// class probabilities (the inference graph, which ONNX can hold).
Case recurrent_training_step(int seq, int hidden, RecurrentCell& cell, const Training& t = {},
                             bool train = true, std::int64_t batch = 64);

/// Scheduler overhead: n independent tiny nodes (one float each), all fetched.
Case threadpool_independent(int n);

}  // namespace bench
