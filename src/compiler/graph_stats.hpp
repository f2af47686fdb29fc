// SPDX-License-Identifier: Apache-2.0
// Graph structure measures used to configure parallel execution: the graph-width guideline
// (framework-parallelism-guidelines paper, section 8) and static cost estimates and levels
// (critical-path scheduling before profiling).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/plan.hpp"

namespace hetgraph::detail {

struct GraphStats {
  std::size_t nodes = 0;  // plan nodes
  std::size_t heavy = 0;  // compute-intensive nodes (matmul, ...)
  int heavy_levels = 0;   // longest chain of heavy nodes
  int max_width = 0;      // most heavy nodes on one heavy level
  int avg_width = 1;      // floor(heavy / heavy_levels), at least 1
  /// work / span over every node, each weighted by its static cost, rounded (at least 1):
  /// how many nodes' worth of work can run at once at one thread per node. Reported; the
  /// guideline (cpu/engine_auto.hpp) models the teams' sizes too.
  int work_width = 1;
};

bool is_heavy(const PlanNode& n);
GraphStats graph_stats(const Plan& p);

/// Estimated time of each node in microseconds from its FLOPs and bytes, for one thread.
std::vector<double> static_costs(const Plan& p);
/// Level of each node: its cost plus the largest level among its successors (the longest
/// accumulated cost from the node to a sink).
std::vector<double> levels_from_costs(const Plan& p, std::span<const double> cost);

}  // namespace hetgraph::detail
