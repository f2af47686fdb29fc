// SPDX-License-Identifier: Apache-2.0
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
//
// stack_shared_products (the proposal's "matmuls sharing an operand"): independent products
// A_i @ W with one right operand W, equal [M, K] left operands and equal attributes become one
// product concat(A_1..A_k) @ W whose rows are sliced back out: each member node becomes a
// slice of the stacked result (keeping its name, fetch and readers). One GEMM reads W once
// where k products of few rows each read all of it, at the price of copying the A_i in and
// the results out. Measured in this framework (scripts/stack-rule.sh: 30 products x_i W,
// sequential engine on 2 threads, every group stacked against none; bench/history.md, issue 12):
// where W holds 102-819 times the elements of one member's x_i and result together, stacked
// ran 1.06-1.7x faster; at 1.6-51 times, 1.11-1.9x slower (the unstacked products already
// run side by side in a parallel group). So a group is stacked only where
// K * N >= kStackRatio * M * (K + N), with kStackRatio between those two sets (64).
// HETGRAPH_STACK_RATIO=R sets another ratio (0: stack every group), for measuring the rule
// (bench workload shared-matmul-MxKxN). Members share the depth (longest chain of data
// dependencies from a source), so none depends on another.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>

#include "compiler/graph_stats.hpp"
#include "compiler/plan.hpp"
#include "util/env.hpp"

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
    case OpKind::ArgMax:
    case OpKind::ArgMin:
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

constexpr double kStackRatio = 64;
constexpr std::size_t kMinStacked = 4;

double stack_ratio() {
  return env_real<UsageError>("HETGRAPH_STACK_RATIO", 0, 1e9, kStackRatio);
}

// A product stack_shared_products may take: f32 rank-2 A not transposed (its rows stack), a
// rank-2 result, no accumulation (its addend would have to be stacked too).
bool stackable(const Plan& p, const PlanNode& n, double ratio) {
  if (n.op != OpKind::MatMul && n.op != OpKind::FusedMatMul) return false;
  if (n.storage != Storage::Computed || n.type.dtype != DType::f32 || n.attrs.trans_a) return false;
  if (n.op == OpKind::FusedMatMul && n.attrs.get<MatmulEpilogue>().accumulate) return false;
  const Shape& a = p.nodes[n.inputs[0]].type.shape;
  const Shape& b = p.nodes[n.inputs[1]].type.shape;
  if (a.rank() != 2 || b.rank() != 2 || n.type.shape.rank() != 2) return false;
  const std::int64_t m = a[0], k = a[1], cols = n.type.shape[1];
  return static_cast<double>(k * cols) >= ratio * static_cast<double>(m * (k + cols));
}

// ---- stack_shared_products's steps ----------------------------------------------------------

// Depth of each node over its data inputs (longest chain from a source): products of one depth
// cannot feed one another, so they may stack. It runs before link_dependencies, so there are no
// deps to follow yet. Passes that make nodes restore plan order (prune_and_sort), so one sweep
// settles it; the second only confirms.
std::vector<std::uint32_t> data_depths(const Plan& p) {
  const std::size_t n = p.nodes.size();
  std::vector<std::uint32_t> depth(n, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (std::uint32_t i = 0; i < n; ++i) {
      const PlanNode& node = p.nodes[i];
      for (std::size_t k = 0; k < node.inputs.size(); ++k) {
        if (!node.reads_input(k) || depth[node.inputs[k]] + 1 <= depth[i]) continue;
        depth[i] = depth[node.inputs[k]] + 1;
        moved = true;
      }
    }
  }
  return depth;
}

// (W, depth, M, K) of a stackable product: one key's products read one W and stack their [M, K]
// left operands; attributes must also match (split_by_attributes).
using StackKey = std::tuple<std::uint32_t, std::uint32_t, std::int64_t, std::int64_t>;

// The stackable products by key, each key's in plan order.
std::map<StackKey, std::vector<std::uint32_t>> stack_buckets(
    const Plan& p, const std::vector<std::uint32_t>& depth) {
  std::map<StackKey, std::vector<std::uint32_t>> buckets;
  const double ratio = stack_ratio();
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& node = p.nodes[i];
    if (!stackable(p, node, ratio)) continue;
    const Shape& a = p.nodes[node.inputs[0]].type.shape;
    buckets[{node.inputs[1], depth[i], a[0], a[1]}].push_back(i);
  }
  return buckets;
}

// One key's products split by attributes (transposed W, epilogue, alpha) and device, in plan
// order: the stacked product runs once, with one set of attributes, on one device.
std::vector<std::vector<std::uint32_t>> split_by_attributes(const Plan& p,
                                                            const std::vector<std::uint32_t>& all) {
  std::vector<std::vector<std::uint32_t>> groups;
  for (std::uint32_t m : all) {
    const PlanNode& node = p.nodes[m];
    auto same = [&](const std::vector<std::uint32_t>& g) {
      const PlanNode& f = p.nodes[g.front()];
      return f.op == node.op && f.attrs == node.attrs && f.device == node.device;
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end())
      groups.push_back({m});
    else
      it->push_back(m);
  }
  return groups;
}

// The nodes that stack one group of k products, as templates: the concat of their left
// operands, the product of it with W (first's attributes) and a slice of the result's rows.
// Built before anything is added, so that the platform can be asked about them first.
struct Stack {
  PlanNode cat, prod, piece;
};

Stack make_stack(const Plan& p, const PlanNode& first, const std::vector<std::uint32_t>& g,
                 std::int64_t rows, std::int64_t inner) {
  const auto k = static_cast<std::int64_t>(g.size());
  const std::int64_t cols = first.type.shape[1];
  Stack s;
  PlanNode& cat = s.cat;
  cat.op = OpKind::Concat;
  cat.storage = Storage::Computed;
  cat.attrs.axis = 0;
  for (std::uint32_t m : g) cat.inputs.push_back(p.nodes[m].inputs[0]);
  cat.type = {Shape{k * rows, inner}, DType::f32};
  cat.device = first.device;
  s.prod = first;
  PlanNode& prod = s.prod;
  prod.gid = kNoGid;
  prod.name.clear();
  prod.fetched = false;
  prod.type = {Shape{k * rows, cols}, DType::f32};
  s.piece = first;
  PlanNode& piece = s.piece;
  piece.op = OpKind::Slice;
  piece.attrs = Attrs{};
  piece.attrs.axis = 0;
  piece.attrs.set(SliceRange{0, rows});
  return s;
}

// Whether the platform has kernels for all three of the stack's nodes (a platform may lack a
// concat or a product of that size). The probes' inputs only need types: the stacked product
// reads the concat's shape. The two probe nodes are removed again.
bool platform_runs(Plan& p, const Capabilities& caps, const Stack& s, std::uint32_t w) {
  PlanNode prod = s.prod, piece = s.piece;
  const std::uint32_t c = p.add_node(OpKind::Concat, s.cat.inputs, s.cat.attrs);
  p.nodes[c].type = s.cat.type;
  prod.inputs = {c, w};
  const std::uint32_t q = p.add_node(prod.op, prod.inputs, prod.attrs);
  p.nodes[q].type = prod.type;
  piece.inputs = {q};
  const bool ok = caps.unsupported(p, s.cat).empty() && caps.unsupported(p, prod).empty() &&
                  caps.unsupported(p, piece).empty();
  p.nodes.resize(p.nodes.size() - 2);
  return ok;
}

// Adds the concat and the stacked product, and turns each member into the slice of its rows of
// the result: it keeps its name, fetch and readers, so nothing else in the plan changes.
void rewrite_as_stack(Plan& p, const PlanNode& first, const std::vector<std::uint32_t>& g,
                      const Stack& s, std::int64_t rows) {
  const auto k = static_cast<std::int64_t>(g.size());
  const PlanNode& cat = s.cat;
  const std::uint32_t c = p.add_node(OpKind::Concat, cat.inputs, cat.attrs);
  const std::string what = std::string(op_name(first.op)) + " (" + first.label + ", ...)";
  p.nodes[c].type = cat.type;
  p.nodes[c].device = cat.device;
  p.nodes[c].label = "stacked operands of " + std::to_string(k) + " " + what;
  const std::uint32_t q = p.add_node(first.op, {c, first.inputs[1]}, first.attrs);
  p.nodes[q].type = s.prod.type;
  p.nodes[q].device = first.device;
  p.nodes[q].label = "stacked product of " + std::to_string(k) + " " + what;
  for (std::int64_t j = 0; j < k; ++j) {
    PlanNode& member = p.nodes[g[static_cast<std::size_t>(j)]];
    member.op = OpKind::Slice;
    member.attrs = Attrs{};
    member.attrs.axis = 0;
    member.attrs.set(SliceRange{j * rows, (j + 1) * rows});
    member.inputs = {q};
  }
}

// Stacks one group of products sharing W (rows x inner left operands), unless it is too small
// to pay or the platform (caps; null: the CPU, which has every kernel) cannot run the stack.
// Returns whether it stacked them.
bool stack_group(Plan& p, const Capabilities* caps, const std::vector<std::uint32_t>& g,
                 std::int64_t rows, std::int64_t inner) {
  if (g.size() < kMinStacked) return false;
  const PlanNode first = p.nodes[g.front()];  // a copy: adding nodes moves the plan's
  const Stack s = make_stack(p, first, g, rows, inner);
  if (caps != nullptr && !platform_runs(p, *caps, s, first.inputs[1])) return false;
  rewrite_as_stack(p, first, g, s, rows);
  return true;
}

}  // namespace

void stack_shared_products(Plan& p, const Capabilities* caps) {
  const std::vector<std::uint32_t> depth = data_depths(p);
  bool changed = false;
  // Each key's groups are split when the key is reached: earlier keys' stacks add nodes, and
  // split_by_attributes reads the plan as it is then (the members themselves are unchanged).
  for (const auto& [key, all] : stack_buckets(p, depth)) {
    for (const std::vector<std::uint32_t>& g : split_by_attributes(p, all)) {
      if (stack_group(p, caps, g, std::get<2>(key), std::get<3>(key))) changed = true;
    }
  }
  if (changed) prune_and_sort(p);
}

namespace {

// ---- fuse_parallel_ops's steps --------------------------------------------------------------

// Depth of each node over its deps (longest chain from a source; the plan is in dependency
// order): nodes of one depth cannot depend on one another, so they may run side by side.
std::vector<std::uint32_t> dependency_depths(const Plan& p) {
  const std::size_t n = p.nodes.size();
  std::vector<std::uint32_t> depth(n, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t d : p.nodes[i].deps) depth[i] = std::max(depth[i], depth[d] + 1);
  }
  return depth;
}

// The nodes that may be members of a group, by (op kind, depth), each in plan order: work that
// is thread-safe, writes no variable, is not a group already and is cheap (kMaxMemberUs).
std::map<std::pair<OpKind, std::uint32_t>, std::vector<std::uint32_t>> parallel_buckets(
    const Plan& p, const std::vector<std::uint32_t>& depth, const std::vector<double>& cost) {
  std::map<std::pair<OpKind, std::uint32_t>, std::vector<std::uint32_t>> buckets;
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& node = p.nodes[i];
    if (!node.has_work() || node.writes_variable() || node.op == OpKind::ParallelGroup) continue;
    if (!thread_safe(node.op) || cost[i] > kMaxMemberUs) continue;
    buckets[{node.op, depth[i]}].push_back(i);
  }
  return buckets;
}

// One bucket's members cut into candidate groups. Longest levels first; a group ends where a
// member is more than 10% lighter in level (it would wait behind the critical one), its cost is
// off by more than kMaxCostRatio, or the group is full (kMaxMembers, kMaxGroupBytes).
std::vector<std::vector<std::uint32_t>> split_by_level(const Plan& p,
                                                       std::vector<std::uint32_t>& members,
                                                       const std::vector<double>& cost,
                                                       const std::vector<double>& level) {
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
  return groups;
}

// Whether a candidate group pays (kMinMembers members, kMinGroupUs of work in all: starting the
// threads costs) and the platform (options.capabilities; null: the CPU) runs it as a group.
bool worth_grouping(const Plan& p, const PlanOptions& options, const std::vector<std::uint32_t>& g,
                    const std::vector<double>& cost) {
  double work = 0;
  for (std::uint32_t m : g) work += cost[m];
  if (g.size() < kMinMembers || work < kMinGroupUs) return false;
  if (options.capabilities != nullptr) {
    PlanNode probe;
    probe.op = OpKind::ParallelGroup;
    probe.storage = Storage::None;
    probe.members = g;
    if (!options.capabilities->unsupported(p, probe).empty()) return false;
  }
  return true;
}

// Adds the group node for members g (of kind op): it takes every member's dependencies and data
// inputs, and each member depends on the group only, so the engines see one node.
void make_group(Plan& p, OpKind op, std::vector<std::uint32_t>& g) {
  std::sort(g.begin(), g.end());  // plan order inside the group
  const std::uint32_t gi = p.add_node(OpKind::ParallelGroup, {});
  PlanNode& group = p.nodes[gi];
  group.label = "parallel group of " + std::to_string(g.size()) + " " + std::string(op_name(op)) +
                " (" + p.nodes[g.front()].label + ", ...)";
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
}

// After grouping: successors again from the changed deps, and the plan back in dependency order
// (each group node was added at the end, after its members).
void relink_and_order(Plan& p) {
  for (PlanNode& node : p.nodes) node.succs.clear();
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    for (std::uint32_t d : p.nodes[i].deps) p.nodes[d].succs.push_back(i);
  }
  order_by_dependencies(p);
}

}  // namespace

void fuse_parallel_ops(Plan& p, const PlanOptions& options) {
  const std::vector<std::uint32_t> depth = dependency_depths(p);
  const std::vector<double> cost = static_costs(p);
  const std::vector<double> level = levels_from_costs(p, cost);
  bool changed = false;
  for (auto& [key, members] : parallel_buckets(p, depth, cost)) {
    if (members.size() < kMinMembers) continue;
    for (std::vector<std::uint32_t>& g : split_by_level(p, members, cost, level)) {
      if (!worth_grouping(p, options, g, cost)) continue;
      make_group(p, key.first, g);
      changed = true;
    }
  }
  if (changed) relink_and_order(p);
}

}  // namespace hetgraph::detail
