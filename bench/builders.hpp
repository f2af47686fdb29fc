// Graph-building pieces the workload files share (workloads.cpp defines them): data, the
// 4-layer recurrent training step of lstm-S and phased-lstm-S, and the tiny-task graph.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads.hpp"

namespace bench {

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

/// A 4-layer recurrent training step, batch 64, input size = hidden size: forward over `seq`
/// steps, a softmax classifier on every step's top-layer output, mean cross-entropy, autodiff
/// backward, SGD (0.01). `train` false: the forward pass alone, fetching every step's class
/// probabilities (the inference graph, which ONNX can hold).
Case recurrent_training_step(int seq, int hidden, RecurrentCell& cell, bool train = true);

/// Scheduler overhead: n independent tiny nodes (one float each), all fetched.
Case threadpool_independent(int n);

}  // namespace bench
