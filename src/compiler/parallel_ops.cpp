// Parallel-op fusion (the MXNet proposal, seed 002): independent nodes of one kind run as one
// parallel_group node whose kernel runs their kernels side by side, one thread each. It pays
// where each kernel is too small to use its team's threads well (26 embedding lookups of a
// batch of 1, thousands of 200x100x200 products): one node instead of many to schedule, and
// the team's threads on different members instead of splitting one small member.
//
// A group's members:
//  - have the same op kind and the same depth (longest chain of dependencies from a source),
//    so none depends on another, and static costs within a factor of 8 (shapes and attributes
//    may differ: each member runs its own kernel);
//  - are thread-safe kernels (a whitelist), write no variable, and are cheap (static cost at
//    one thread under kMaxMemberUs);
//  - lie within 10% of the longest static level (time to a sink) among them, so a group never
//    holds back a node on the critical path behind lighter ones.
// Members keep their values (the planner gives each its buffer, none in place); the group
// takes every member's dependencies and each member depends on the group only, so the engines
// see one node. Groups hold at most kMaxMembers members and kMaxGroupBytes of outputs (their
// outputs are live together), and at least kMinGroupUs of work (starting the threads costs).
#include <algorithm>
#include <map>
#include <utility>

#include "compiler/graph_stats.hpp"
#include "compiler/plan.hpp"

namespace hetgraph::detail {

namespace {

constexpr std::size_t kMinMembers = 4;
constexpr std::size_t kMaxMembers = 64;
constexpr std::size_t kMaxGroupBytes = std::size_t{16} << 20;
constexpr double kMaxMemberUs = 200.0;
// A group's threads start and join once per run (an OpenMP region, some microseconds): below
// this much work in all, its members run better one after another (measured: 26 lookups of
// one row each, 22 us unfused, 35 us grouped).
constexpr double kMinGroupUs = 20.0;

bool thread_safe(OpKind op) {
  if (op_def(op).elementwise != Elementwise::none) return true;
  switch (op) {
    case OpKind::MatMul:
    case OpKind::FusedMatMul:
    case OpKind::Embedding:
    case OpKind::Conv2d:
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d:
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceMax:
    case OpKind::Slice:
    case OpKind::Transpose:
      return true;
    default:
      return false;
  }
}

// What members of one group share: the op kind and the depth. Shapes and attributes may differ
// (26 lookups in tables of different widths): each member runs its own kernel; costs within
// kMaxCostRatio of each other keep the threads' shares even.
constexpr double kMaxCostRatio = 8.0;

}  // namespace

void fuse_parallel_ops(Plan& p, const PlanOptions& options) {
  const std::size_t n = p.nodes.size();
  std::vector<std::uint32_t> depth(n, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t d : p.nodes[i].deps) depth[i] = std::max(depth[i], depth[d] + 1);
  }
  const std::vector<double> cost = static_costs(p);
  const std::vector<double> level = levels_from_costs(p, cost);

  std::map<std::pair<OpKind, std::uint32_t>, std::vector<std::uint32_t>> buckets;
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    if (!node.has_work() || node.writes_variable() || node.op == OpKind::ParallelGroup) continue;
    if (!thread_safe(node.op) || cost[i] > kMaxMemberUs) continue;
    buckets[{node.op, depth[i]}].push_back(i);
  }

  bool changed = false;
  for (auto& [key, members] : buckets) {
    const OpKind op = key.first;
    {
      if (members.size() < kMinMembers) continue;
      // Longest levels first; a group ends where a member is more than 10% lighter in level
      // (it would wait behind the critical one), or its cost is off by more than kMaxCostRatio.
      std::stable_sort(members.begin(), members.end(),
                       [&](std::uint32_t a, std::uint32_t b) { return level[a] > level[b]; });
      std::vector<std::vector<std::uint32_t>> groups;
      double top = -1, lo = 0, hi = 0;
      std::size_t bytes = 0;
      for (std::uint32_t m : members) {
        const std::size_t b = p.nodes[m].type.bytes();
        const double c = std::max(cost[m], 1e-3);
        if (groups.empty() || level[m] < 0.9 * top || groups.back().size() >= kMaxMembers ||
            bytes + b > kMaxGroupBytes || std::max(hi, c) > kMaxCostRatio * std::min(lo, c)) {
          top = level[m];
          lo = hi = c;
          groups.push_back({});
          bytes = 0;
        }
        groups.back().push_back(m);
        bytes += b;
        lo = std::min(lo, c);
        hi = std::max(hi, c);
      }
      for (std::vector<std::uint32_t>& g : groups) {
        double work = 0;
        for (std::uint32_t m : g) work += cost[m];
        if (g.size() < kMinMembers || work < kMinGroupUs) continue;
        if (options.capabilities != nullptr) {
          PlanNode probe;
          probe.op = OpKind::ParallelGroup;
          probe.storage = Storage::None;
          probe.members = g;
          if (!options.capabilities->unsupported(p, probe).empty()) continue;
        }
        std::sort(g.begin(), g.end());  // plan order inside the group
        const std::uint32_t gi = p.add_node(OpKind::ParallelGroup, {});
        PlanNode& group = p.nodes[gi];
        group.label = "parallel group of " + std::to_string(g.size()) + " " +
                      std::string(op_name(op)) + " (" + p.nodes[g.front()].label + ", ...)";
        group.members = g;
        for (std::uint32_t m : g) {
          PlanNode& member = p.nodes[m];
          for (std::uint32_t d : member.deps) group.deps.push_back(d);
          for (std::size_t k = 0; k < member.inputs.size(); ++k) {
            if (member.reads_input(k)) group.inputs.push_back(member.inputs[k]);
          }
          member.deps = {gi};
          member.group = gi;
        }
        for (auto* v : {&group.deps, &group.inputs}) {
          std::sort(v->begin(), v->end());
          v->erase(std::unique(v->begin(), v->end()), v->end());
        }
        changed = true;
      }
    }
  }
  if (!changed) return;
  for (PlanNode& node : p.nodes) node.succs.clear();
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    for (std::uint32_t d : p.nodes[i].deps) p.nodes[d].succs.push_back(i);
  }
  order_by_dependencies(p);
}

}  // namespace hetgraph::detail
