// SPDX-License-Identifier: Apache-2.0
#include "compiler/graph_stats.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "hetgraph/compiler.hpp"

namespace hetgraph::detail {

// Heavy ops (the guideline paper's "compute-intensive or embedding operators") are marked in
// the op table: products, convolutions forward and backward, embedding lookups and their
// scatter-adds.
// A node fused into another (a convolution under its relu) does no work: the fused node counts.
bool is_heavy(const PlanNode& n) {
  return n.has_work() && op_def(n.op).heavy;
}

namespace {

// The guideline paper counts heavy operators per layer. Replayed at 16-64 cores (issue 15,
// results/2026-11-27-replay-guideline.jsonl) that misjudges graphs whose parallelism is in the
// light ops beside a narrow chain of heavy ones (phased LSTM's gates, wide & deep's 26
// optimizer steps: 1.4-2.0x slower than the best executor count) and graphs whose heavy ops
// differ in size by orders of magnitude. The parallelism of the work itself does better:
// work / span over every node, each weighted by its static cost (a parallel group is one node
// doing its members' work). When the nodes are alike it is the paper's count.
int work_width(const Plan& p) {
  // Nodes under the parallel engines' default inline threshold run in the thread that readied
  // them, never on an executor of their own.
  const double inline_us = CpuOptions{}.experimental.inline_below_us;
  const std::vector<double> cost = static_costs(p);
  std::vector<double> span(p.nodes.size(), 0.0);
  double work = 0.0, longest = 0.0;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    double before = 0.0;
    for (std::uint32_t u : p.nodes[i].deps) before = std::max(before, span[u]);
    const double c = cost[i] < inline_us ? 0.0 : cost[i];
    span[i] = before + c;
    work += c;
    longest = std::max(longest, span[i]);
  }
  if (longest <= 0.0) return 1;
  return std::max(1, static_cast<int>(std::lround(work / longest)));
}

}  // namespace

GraphStats graph_stats(const Plan& p) {
  GraphStats s;
  s.nodes = p.nodes.size();
  // Heavy depth of a node: heavy nodes on the longest path ending at it.
  std::vector<int> depth(p.nodes.size(), 0);
  std::map<int, int> per_level;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    int d = 0;
    for (std::uint32_t u : p.nodes[i].deps) d = std::max(d, depth[u]);
    if (is_heavy(p.nodes[i])) {
      ++d;
      ++s.heavy;
      ++per_level[d];
    }
    depth[i] = d;
  }
  for (const auto& [level, count] : per_level) {
    s.heavy_levels = std::max(s.heavy_levels, level);
    s.max_width = std::max(s.max_width, count);
  }
  s.avg_width =
      s.heavy_levels > 0 ? std::max<int>(1, static_cast<int>(s.heavy) / s.heavy_levels) : 1;
  s.work_width = work_width(p);
  return s;
}

std::vector<double> static_costs(const Plan& p) {
  // One core: ~50 GFLOP/s on vectorised float work, ~10 GB/s of memory traffic, and a fixed
  // cost per kernel call. Only the ratios matter (they order the ready nodes).
  constexpr double kFlopsPerUs = 50e3, kBytesPerUs = 10e3, kCallUs = 0.3;
  std::vector<double> c(p.nodes.size(), 0.0);
  std::vector<TensorType> in;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    if (!n.has_work() || n.op == OpKind::ParallelGroup) continue;
    in.clear();
    for (std::uint32_t u : n.inputs) in.push_back(p.nodes[u].type);
    const Cost k = op_cost(n.op, in, n.type, n.attrs);
    c[i] = kCallUs + std::max(k.flops / kFlopsPerUs, k.bytes / kBytesPerUs);
  }
  // A parallel group does its members' work (at one thread; its members then cost nothing).
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].op != OpKind::ParallelGroup) continue;
    for (std::uint32_t m : p.nodes[i].members) {
      c[i] += c[m];
      c[m] = 0.0;
    }
  }
  return c;
}

std::vector<double> levels_from_costs(const Plan& p, std::span<const double> cost) {
  std::vector<double> level(p.nodes.size(), 0.0);
  for (std::size_t i = p.nodes.size(); i-- > 0;) {
    double below = 0.0;
    for (std::uint32_t s : p.nodes[i].succs) below = std::max(below, level[s]);
    level[i] = cost[i] + below;
  }
  return level;
}

}  // namespace hetgraph::detail
