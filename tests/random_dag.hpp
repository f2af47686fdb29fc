// Random DAGs of tiny nodes for the engine stress test (test_engine) and the soak
// (hetgraph-soak): every engine must run them with results bitwise equal to `sequential`.
//
//   std::mt19937 rng(seed);
//   hetgraph::Graph g = testing_util::next_random_dag(rng, d);   // DAG d of a stream
//   auto cg = GraphCompiler(platform).compile(g, testing_util::random_dag_shapes(), {});
//   cg.run(testing_util::random_dag_feeds());
#pragma once

#include <random>
#include <vector>

#include "hetgraph/hetgraph.hpp"

namespace testing_util {

/// A DAG of `n` nodes in one of four shapes (`kind` 0-3): random fan-in, chains, wide
/// fan-out then fan-in, diamonds. Inputs x and y, shape [4] each.
hetgraph::Graph random_dag(std::mt19937& rng, int n, int kind);
/// DAG `index` of a stream drawn from `rng`: 1-200 nodes (every tenth up to 2000), shape
/// index % 4.
hetgraph::Graph next_random_dag(std::mt19937& rng, int index);
/// The input shapes and feeds every random DAG takes.
const hetgraph::InputShapes& random_dag_shapes();
std::vector<hetgraph::FeedItem> random_dag_feeds();

}  // namespace testing_util
