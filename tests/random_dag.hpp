// SPDX-License-Identifier: Apache-2.0
// Random DAGs of tiny nodes for the engine stress test (test_engine) and the soak
// (hetgraph-soak): every engine must run them with results bitwise equal to `sequential`.
// Random training graphs for the failure and placement tests (test_reliability, test_hetero).
//
//   std::mt19937 rng(seed);
//   auto dag = testing_util::next_random_dag(rng, d);   // DAG d of a stream
//   auto cg = GraphCompiler(platform).compile(dag.graph, testing_util::random_dag_shapes(),
//                                             dag.sinks);
//   cg.run(testing_util::random_dag_feeds());
#pragma once

#include <random>
#include <set>
#include <vector>

#include "hetgraph/hetgraph.hpp"

namespace testing_util {

struct RandomDag {
  hetgraph::Graph graph;
  std::vector<hetgraph::Node>
      sinks;  // nodes nothing reads (inputs too): what compile(g, shapes, {}) keeps
};

/// A DAG of `n` nodes in one of four shapes (`kind` 0-3): random fan-in, chains, wide
/// fan-out then fan-in, diamonds. Inputs x and y, shape [4] each.
RandomDag random_dag(std::mt19937& rng, int n, int kind);
/// DAG `index` of a stream drawn from `rng`: 1-200 nodes (every tenth up to 2000), shape
/// index % 4.
RandomDag next_random_dag(std::mt19937& rng, int index);
/// The input shapes and feeds every random DAG takes.
const hetgraph::InputShapes& random_dag_shapes();
std::vector<hetgraph::FeedItem> random_dag_feeds();

/// A random training graph on input x [4, 4]: 2-5 variables [4, 4] read by 4-15 random ops
/// (add, mul, tanh, matmul, sigmoid - b, softmax), a scalar loss that every variable counts
/// in, an SGD step (momentum or not; or a step of `optimizer` where given) and a step counter.
/// `vars` holds the variables, the counter last; `fetches` the loss, the step and the
/// counter's increment. With `dp`, the step averages the gradients across its ranks (every
/// rank draws the same graph from the same seed).
struct Training {
  hetgraph::Graph g;
  std::vector<hetgraph::Node> vars, fetches;
};
Training random_training(std::mt19937& rng, const hetgraph::Optimizer* optimizer = nullptr,
                         const hetgraph::DataParallel* dp = nullptr);

/// A random graph of `n` ops over inputs x and y [4, 4] and a variable w [4, 4], every value
/// [4, 4]: elementwise and reductions with broadcasts, softmax, matmul, transpose, reshape,
/// slice / strided_slice / concat / gather on either axis, casts, comparisons and logic into
/// where; up to 4 sinks (the last values, some skipped). Every op has an ONNX form (test_onnx
/// round-trips them).
hetgraph::Graph random_op_graph(std::mt19937& rng, int n, std::vector<hetgraph::Node>& sinks);

}  // namespace testing_util
