// SPDX-License-Identifier: Apache-2.0
// Compiler passes up to the memory plan: prune, topological order, plan construction, shape
// inference, simplification and execution dependencies. Each is a plain function over the
// graph or the Plan so tests can run them one by one.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <optional>
#include <queue>
#include <sstream>

#include "compiler/order.hpp"
#include "compiler/placement.hpp"
#include "compiler/plan.hpp"
#include "hetgraph/error.hpp"
#include "util/env.hpp"

namespace hetgraph::detail {

// ---- plan construction ---------------------------------------------------------------------

namespace {

std::string node_label(const std::string& name, std::uint32_t id, OpKind op) {
  const std::string o(op_name(op));
  if (name.empty()) return "#" + std::to_string(id) + " (" + o + ")";
  return "'" + name + "' (#" + std::to_string(id) + ", " + o + ")";
}

}  // namespace

void reorder(Plan& p, const std::vector<std::uint32_t>& order) {
  const std::size_t n = p.nodes.size();
  constexpr std::uint32_t kGone = 0xFFFFFFFFu;
  std::vector<std::uint32_t> at(n, kGone);  // old index -> new index
  for (std::uint32_t i = 0; i < order.size(); ++i) at[order[i]] = i;
  auto remap = [&](std::vector<std::uint32_t>& v, bool drop) {
    std::size_t k = 0;
    for (std::uint32_t x : v) {
      if (at[x] != kGone)
        v[k++] = at[x];
      else if (!drop)
        throw InternalError("a kept node refers to a dropped one");
    }
    v.resize(k);
  };
  auto remap_one = [&](std::int64_t& x) {
    if (x >= 0) x = at[static_cast<std::size_t>(x)] == kGone ? -1 : at[static_cast<std::size_t>(x)];
  };
  std::vector<PlanNode> nodes;
  nodes.reserve(order.size());
  for (std::uint32_t old : order) nodes.push_back(std::move(p.nodes[old]));
  for (PlanNode& node : nodes) {
    remap(node.inputs, false);
    remap(node.deps, false);
    remap(node.succs, false);
    remap_one(node.fused_into);
    remap_one(node.into_variable);
    remap_one(node.group);
    remap(node.members, false);
  }
  p.nodes = std::move(nodes);
  remap(p.inputs, true);
  remap(p.variables, true);
  remap(p.fetches, false);
  p.index_of.reset(p.graph_size);
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].gid != kNoGid) p.index_of.set(p.nodes[i].gid, i);
  }
}

std::uint32_t Plan::add_node(OpKind op, std::vector<std::uint32_t> in, Attrs attrs) {
  PlanNode n;
  n.op = op;
  n.attrs = std::move(attrs);
  n.inputs = std::move(in);
  n.storage = op_def(op).storage;
  n.label = node_label("", next_label++, op);
  nodes.push_back(std::move(n));
  return static_cast<std::uint32_t>(nodes.size() - 1);
}

Plan build_plan(const GraphImpl& g, std::span<const std::uint32_t> fetches) {
  if (g.nodes.empty()) throw GraphError("cannot compile an empty graph (it has no nodes)");
  std::vector<std::uint32_t> roots(fetches.begin(), fetches.end());
  if (roots.empty()) {
    // No fetches given: every node nothing consumes.
    std::vector<char> consumed(g.nodes.size(), 0);
    for (const NodeRec& r : g.nodes) {
      for (std::uint32_t u : r.inputs) consumed[u] = 1;
    }
    for (std::uint32_t v = 0; v < g.nodes.size(); ++v) {
      if (!consumed[v]) roots.push_back(v);
    }
  }
  const auto order = topo_order(g, prune(g, roots), roots);
  Plan p;
  p.graph_id = g.id;
  p.stands_for = g.stands_for;
  p.stand_ins = g.stand_ins;
  p.graph_size = static_cast<std::uint32_t>(g.nodes.size());
  p.next_label = p.graph_size;
  p.names.reserve(g.by_name.size());
  for (const auto& [name, id] : g.by_name) {
    p.names.emplace(name, id);
    if (g.rec(id).op == OpKind::Input) p.graph_inputs.insert(name);
  }
  p.nodes.resize(order.size());
  p.index_of.reset(p.graph_size);
  for (std::size_t i = 0; i < order.size(); ++i) {
    p.index_of.set(order[i], static_cast<std::uint32_t>(i));
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    const NodeRec& r = g.rec(order[i]);
    PlanNode& n = p.nodes[i];
    n.gid = order[i];
    n.op = r.op;
    n.attrs = r.attrs;
    n.name = r.name;
    n.label = g.label(order[i]);
    for (std::uint32_t u : r.inputs) n.inputs.push_back(p.index_of.at(u));
    n.declared = {r.shape, r.dtype};
    n.grad_sum = r.grad_sum;
    n.pin = r.pin;
    n.init = r.init;
    n.f32_values = r.f32_values;
    n.i32_values = r.i32_values;
    n.storage = op_def(r.op).storage;
    if (n.storage == Storage::Input) p.inputs.push_back(static_cast<std::uint32_t>(i));
    if (n.storage == Storage::Variable) p.variables.push_back(static_cast<std::uint32_t>(i));
  }
  for (std::uint32_t f : roots) {
    const std::uint32_t i = p.index_of.at(f);
    if (!p.nodes[i].fetched) {
      p.nodes[i].fetched = true;
      p.fetches.push_back(i);
    }
  }
  return p;
}

void prune_and_sort(Plan& p, bool keep_inputs) {
  const std::size_t n = p.nodes.size();
  auto inputs_of = [&](std::uint32_t v) -> const std::vector<std::uint32_t>& {
    return p.nodes[v].inputs;
  };
  std::vector<std::uint32_t> roots = p.fetches;
  if (keep_inputs) roots.insert(roots.end(), p.inputs.begin(), p.inputs.end());
  const std::vector<std::uint32_t> needed = reachable(n, roots, inputs_of);
  std::vector<char> remaining;
  const auto order = kahn_order(n, needed, roots, inputs_of, remaining);
  if (order.size() != needed.size()) {
    report_cycle(remaining, inputs_of, [&](std::uint32_t v) { return p.nodes[v].label; });
  }
  reorder(p, order);
  // As build_plan lists them: in plan order.
  p.inputs.clear();
  p.variables.clear();
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].storage == Storage::Input) p.inputs.push_back(i);
    if (p.nodes[i].storage == Storage::Variable) p.variables.push_back(i);
  }
}

// ---- regroup gradient sums -----------------------------------------------------------------

namespace {

// Products per chunk when per-step weight gradients are regrouped.
constexpr std::size_t kStepsPerProduct = 8;

// A gradient sum's parts (the contributions autodiff summed, in its order) rearranged the way
// regroup_gradients sums them: other parts first, then the slice gradients (as one
// slice_grad_n when they fit), then the weight-gradient products (as products over
// concatenated steps when there are several). New nodes are appended to the plan.
std::vector<std::uint32_t> regroup(Plan& p, const std::vector<std::uint32_t>& parts) {
  std::vector<std::uint32_t> rest, slices;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> products;  // (A_t, G_t), and their sum_to
  std::vector<std::uint32_t> product_nodes;
  std::int64_t like = -1;
  for (std::uint32_t q : parts) {
    const PlanNode& r = p.nodes[q];
    const SliceRange sr =
        r.op == OpKind::SliceGrad ? r.attrs.get_or_default<SliceRange>() : SliceRange{};
    if (r.op == OpKind::SliceGrad && sr.begin >= 0 && sr.end > sr.begin) {
      slices.push_back(q);
      continue;
    }
    if (r.op == OpKind::SumTo) {
      const PlanNode& m = p.nodes[r.inputs[0]];
      const std::uint32_t l = r.inputs[1];
      if (m.op == OpKind::MatMul && m.attrs.trans_a && !m.attrs.trans_b &&
          (like < 0 || like == static_cast<std::int64_t>(l))) {
        like = l;
        products.push_back({m.inputs[0], m.inputs[1]});
        product_nodes.push_back(q);
        continue;
      }
    }
    rest.push_back(q);
  }
  // slices: same tensor, same axis, disjoint ranges
  bool placed = false;
  if (slices.size() >= 2) {
    const PlanNode& s0 = p.nodes[slices[0]];
    bool ok = true;
    std::vector<std::array<std::int64_t, 2>> ranges;
    for (std::uint32_t q : slices) {
      const PlanNode& r = p.nodes[q];
      ok = ok && r.inputs[1] == s0.inputs[1] && r.attrs.axis == s0.attrs.axis;
      const SliceRange& sr = r.attrs.get_or_default<SliceRange>();
      ranges.push_back({sr.begin, sr.end});
    }
    auto sorted = ranges;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i) ok = ok && sorted[i][0] >= sorted[i - 1][1];
    if (ok) {
      Attrs at;
      at.axis = s0.attrs.axis;
      at.set(SliceRanges{ranges});
      std::vector<std::uint32_t> in{s0.inputs[1]};
      for (std::uint32_t q : slices) in.push_back(p.nodes[q].inputs[0]);
      rest.push_back(p.add_node(OpKind::SliceGradN, std::move(in), std::move(at)));
      placed = true;
    }
  }
  if (!placed) rest.insert(rest.end(), slices.begin(), slices.end());
  if (products.size() >= 2) {
    for (std::size_t c = 0; c < products.size(); c += kStepsPerProduct) {
      std::vector<std::uint32_t> as, gs;
      for (std::size_t i = c; i < std::min(products.size(), c + kStepsPerProduct); ++i) {
        as.push_back(products[i].first);
        gs.push_back(products[i].second);
      }
      auto joined = [&](std::vector<std::uint32_t>& v) {
        if (v.size() == 1) return v[0];
        Attrs at;
        at.axis = 0;
        return p.add_node(OpKind::Concat, std::move(v), at);
      };
      const std::uint32_t a = joined(as), g = joined(gs);
      Attrs mm;
      mm.trans_a = true;
      const std::uint32_t prod = p.add_node(OpKind::MatMul, {a, g}, mm);
      rest.push_back(p.add_node(OpKind::SumTo, {prod, static_cast<std::uint32_t>(like)}));
    }
  } else {
    rest.insert(rest.end(), product_nodes.begin(), product_nodes.end());
  }
  return rest;
}

}  // namespace

void regroup_gradients(Plan& p) {
  const std::size_t n = p.nodes.size();
  std::vector<int> readers(n, 0);
  std::vector<std::int64_t> reader(n, -1);  // the reader, when there is one
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t u : p.nodes[i].inputs) {
      ++readers[u];
      reader[u] = i;
    }
  }
  // Links of a sum chain add(add(add(p0, p1), p2), p3): interior adds have one reader, the
  // next add, which takes them as input 0.
  auto interior = [&](std::uint32_t v) {
    const PlanNode& x = p.nodes[v];
    return x.op == OpKind::Add && x.grad_sum && readers[v] == 1 && reader[v] >= 0 &&
           p.nodes[static_cast<std::size_t>(reader[v])].grad_sum &&
           p.nodes[static_cast<std::size_t>(reader[v])].inputs[0] == v;
  };
  bool changed = false;
  for (std::uint32_t root = 0; root < n; ++root) {
    if (p.nodes[root].op != OpKind::Add || !p.nodes[root].grad_sum || interior(root)) continue;
    std::vector<std::uint32_t> parts;
    std::uint32_t v = root;
    for (;;) {
      parts.push_back(p.nodes[v].inputs[1]);
      const std::uint32_t u = p.nodes[v].inputs[0];
      if (!interior(u)) {
        parts.push_back(u);
        break;
      }
      v = u;
    }
    std::reverse(parts.begin(), parts.end());
    const std::size_t before = p.nodes.size();
    std::vector<std::uint32_t> sum = regroup(p, parts);
    if (sum == parts) continue;
    changed = true;
    // Sum left to right; the root takes the last step, so the gradient node the user holds
    // is the total.
    std::uint32_t acc = sum[0];
    for (std::size_t k = 1; k + 1 < sum.size(); ++k) acc = p.add_node(OpKind::Add, {acc, sum[k]});
    PlanNode& r = p.nodes[root];
    if (sum.size() >= 2) {
      r.inputs = {acc, sum.back()};
    } else {
      // One part left: a node regroup just made; the root becomes it.
      if (sum[0] < before) throw InternalError("regroup_gradients lost a sum");
      PlanNode& made = p.nodes[sum[0]];
      r.op = made.op;
      r.attrs = made.attrs;
      r.inputs = made.inputs;
      made.inputs.clear();  // unreferenced: dropped below
      r.label = node_label(r.name, r.gid, r.op);
    }
    r.grad_sum = false;
  }
  if (changed) prune_and_sort(p);
}

// ---- shape inference -----------------------------------------------------------------------

namespace {
// Variables hold state across runs and checkpoints: an empty one is a mistake where it is made.
// Every other value may be empty (fold_empty_tensors).
void check_nonempty_variable(const PlanNode& n) {
  if (n.storage != Storage::Variable || n.type.shape.numel() != 0) return;
  throw ShapeError("node " + n.label + ": variable of shape " + n.type.shape.str() +
                   " is empty; a variable must have at least one element");
}
}  // namespace

void infer_shapes(Plan& p, const InputShapes& shapes) {
  for (auto it = shapes.begin(); it != shapes.end(); ++it) {
    const std::string& name = it->first;
    if (!p.graph_inputs.count(name)) {
      throw GraphError("input shapes name '" + name + "', which is not an input of the graph");
    }
    // Two shapes for one input: the first was taken, silently.
    if (std::any_of(shapes.begin(), it, [&](const auto& s) { return s.first == name; })) {
      throw GraphError("input shapes give input '" + name + "' twice");
    }
  }
  std::vector<TensorType> in;
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    PlanNode& n = p.nodes[i];
    if (n.op == OpKind::Input) {
      auto it = std::find_if(shapes.begin(), shapes.end(),
                             [&](const auto& s) { return s.first == n.name; });
      if (it == shapes.end()) {
        throw ShapeError("input '" + n.name + "' has no shape: pass its shape to compile()");
      }
      n.type = {it->second, n.declared.dtype};
      continue;
    }
    in.clear();
    for (std::uint32_t u : n.inputs) in.push_back(p.nodes[u].type);
    const InferCtx ctx{p, i, n.op, n.attrs, n.declared, in};
    try {
      n.type = op_def(n.op).infer(ctx);
    } catch (const ShapeError& e) {
      // A shape the rule built that cannot exist (more elements than fit): name the node.
      const std::string m = e.what();
      if (m.rfind("node ", 0) == 0) throw;
      ctx.fail(m);
    }
    check_nonempty_variable(n);
  }
}

// ---- empty tensors -------------------------------------------------------------------------

namespace {

bool holds_no_values(const PlanNode& n) {
  return n.storage != Storage::None && n.type.shape.numel() == 0;  // groups have no values
}

// What an op gives from no elements where its result is not empty: the reduction's identity
// (a mean's 0 / 0), a product over K = 0 terms. Other ops have no such value.
std::optional<float> value_from_nothing(OpKind op) {
  switch (op) {
    case OpKind::ReduceSum:
    case OpKind::SumTo:
    case OpKind::MatMul:
      return 0.0f;
    case OpKind::ReduceMean:
      return std::numeric_limits<float>::quiet_NaN();
    case OpKind::ReduceMax:
      return -std::numeric_limits<float>::infinity();
    case OpKind::ReduceProd:
      return 1.0f;
    default:
      return std::nullopt;
  }
}

void become_constant(PlanNode& n, float value) {
  const auto count = static_cast<std::size_t>(n.type.shape.numel());
  n.op = OpKind::Constant;
  n.attrs = {};
  n.inputs.clear();
  n.storage = Storage::Constant;
  n.declared = n.type;
  n.grad_sum = false;
  if (n.type.dtype == DType::i32) {
    const std::int32_t v = std::isnan(value)   ? 0
                           : std::isinf(value) ? (value < 0 ? INT32_MIN : INT32_MAX)
                                               : static_cast<std::int32_t>(value);
    n.i32_values = std::make_shared<const std::vector<std::int32_t>>(count, v);
  } else {
    n.f32_values = std::make_shared<const std::vector<float>>(count, value);
  }
}

}  // namespace

void fold_empty_tensors(Plan& p) {
  bool changed = false;
  for (PlanNode& n : p.nodes) {
    if (n.storage != Storage::Computed && n.storage != Storage::View) continue;
    if (n.type.shape.numel() == 0) {  // nothing to compute: its value is known
      become_constant(n, 0.0f);
      changed = true;
      continue;
    }
    const OpDef& def = op_def(n.op);
    std::size_t empty_input = n.inputs.size();
    for (std::size_t k = 0; k < n.inputs.size() && empty_input == n.inputs.size(); ++k) {
      if (!def.shape_only_input(k) && holds_no_values(p.nodes[n.inputs[k]])) empty_input = k;
    }
    if (empty_input == n.inputs.size()) continue;
    changed = true;
    if (n.op == OpKind::Concat) {  // empty pieces add nothing (one piece left is a copy)
      std::erase_if(n.inputs, [&](std::uint32_t u) { return holds_no_values(p.nodes[u]); });
    } else if (const auto v = value_from_nothing(n.op)) {
      become_constant(n, *v);
    } else {
      const PlanNode& in = p.nodes[n.inputs[empty_input]];
      throw ShapeError("node " + n.label + " (" + std::string(op_name(n.op)) + "): input " +
                       std::to_string(empty_input) + " (" + in.label + ") is empty " +
                       in.type.shape.str() + " but its result " + n.type.shape.str() + " is not; " +
                       std::string(op_name(n.op)) + " computes nothing from an empty tensor");
    }
  }
  // An input nothing reads now is still an input: its feeds are checked as before.
  if (changed) prune_and_sort(p, /*keep_inputs=*/true);
}

// ---- simplify ------------------------------------------------------------------------------

void simplify(Plan& p) {
  for (PlanNode& n : p.nodes) {
    if (n.storage != Storage::Computed) continue;
    const bool identity_sum_to =
        n.op == OpKind::SumTo && p.nodes[n.inputs[0]].type.shape == n.type.shape;
    bool identity_transpose = false;
    if (n.op == OpKind::Transpose) {
      const auto& perm = n.attrs.get<Permutation>().perm;
      identity_transpose = perm.empty() ? n.type.shape.rank() < 2 : [&] {
        for (std::size_t i = 0; i < perm.size(); ++i) {
          if (perm[i] != static_cast<std::int64_t>(i)) return false;
        }
        return true;
      }();
    }
    if (identity_sum_to || identity_transpose) n.storage = Storage::View;
  }
}

// ---- dependencies --------------------------------------------------------------------------

namespace {
// Readers of node v's memory: its data consumers, and through views theirs.
void collect_readers(const Plan& p, const std::vector<std::vector<std::uint32_t>>& consumers,
                     std::uint32_t v, std::vector<std::uint32_t>& out) {
  for (std::uint32_t c : consumers[v]) {
    if (p.nodes[c].storage == Storage::View)
      collect_readers(p, consumers, c, out);
    else
      out.push_back(c);
  }
}
}  // namespace

void link_dependencies(Plan& p) {
  const std::size_t n = p.nodes.size();
  std::vector<std::vector<std::uint32_t>> consumers(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    PlanNode& node = p.nodes[i];
    node.deps.clear();
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      if (!node.reads_input(k)) continue;
      const std::uint32_t u = node.inputs[k];
      if (std::find(node.deps.begin(), node.deps.end(), u) == node.deps.end()) {
        node.deps.push_back(u);
        consumers[u].push_back(i);
      }
    }
    // Group waits for its members even though it reads no data.
  }
  std::vector<std::int64_t> assigned_by(n, -1);
  std::vector<std::uint32_t> readers;
  for (std::uint32_t i = 0; i < n; ++i) {
    PlanNode& a = p.nodes[i];
    // Assigns, and optimizer updates (which write their variable and its state).
    for (const std::uint32_t var : a.written_inputs()) {
      if (assigned_by[var] >= 0) {
        throw GraphError("variable " + p.nodes[var].label + " is assigned twice in one run, by " +
                         p.nodes[static_cast<std::size_t>(assigned_by[var])].label + " and " +
                         a.label);
      }
      assigned_by[var] = i;
      readers.clear();
      collect_readers(p, consumers, var, readers);
      for (std::uint32_t r : readers) {
        if (r != i && std::find(a.deps.begin(), a.deps.end(), r) == a.deps.end()) {
          a.deps.push_back(r);
        }
      }
    }
  }
  for (PlanNode& node : p.nodes) node.succs.clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t d : p.nodes[i].deps) p.nodes[d].succs.push_back(i);
  }
}

// ---- order over all dependencies -----------------------------------------------------------

void order_by_dependencies(Plan& p) {
  const std::size_t n = p.nodes.size();
  std::vector<std::uint32_t> indeg(n, 0);
  for (std::uint32_t i = 0; i < n; ++i)
    indeg[i] = static_cast<std::uint32_t>(p.nodes[i].deps.size());
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (indeg[i] == 0) ready.push(i);
  }
  std::vector<std::uint32_t> order;  // old indices in the new order
  order.reserve(n);
  while (!ready.empty()) {
    const std::uint32_t v = ready.top();
    ready.pop();
    order.push_back(v);
    for (std::uint32_t s : p.nodes[v].succs) {
      if (--indeg[s] == 0) ready.push(s);
    }
    // A parallel group's members run at its place: they follow it in plan order with nothing
    // between them, or the memory planner would let a node placed between two members reuse
    // a buffer a member writes or reads at the group's (earlier) time.
    if (!p.nodes[v].members.empty()) {
      std::vector<std::uint32_t> rest;
      while (!ready.empty()) {
        rest.push_back(ready.top());
        ready.pop();
      }
      for (std::uint32_t m : p.nodes[v].members) {
        if (indeg[m] != 0)
          throw InternalError("a member of " + p.nodes[v].label + " waits for more than its group");
        order.push_back(m);
        for (std::uint32_t s : p.nodes[m].succs) {
          if (--indeg[s] == 0) ready.push(s);
        }
      }
      for (std::uint32_t r : rest) {
        if (p.nodes[r].group != static_cast<std::int64_t>(v)) ready.push(r);
      }
    }
  }
  if (order.size() != n) {
    // Only ordering edges can close a cycle (data edges were ordered before): walk
    // dependencies among the nodes left until one repeats.
    std::uint32_t v = 0;
    while (indeg[v] == 0) ++v;
    std::vector<std::int64_t> pos(n, -1);
    std::vector<std::uint32_t> path;
    while (pos[v] < 0) {
      pos[v] = static_cast<std::int64_t>(path.size());
      path.push_back(v);
      for (std::uint32_t d : p.nodes[v].deps) {
        if (indeg[d] > 0) {
          v = d;
          break;
        }
      }
    }
    std::vector<std::uint32_t> cycle(path.begin() + pos[v], path.end());
    std::reverse(cycle.begin(), cycle.end());
    std::string msg =
        "these assigns cannot be ordered (each must run after every read of its variable's old "
        "value): ";
    for (std::uint32_t c : cycle) msg += p.nodes[c].label + " -> ";
    msg += p.nodes[cycle.front()].label +
           ". Compute the new values into fresh nodes first (for example assign(a, b + 0.0f)).";
    throw GraphError(msg);
  }
  bool same = true;
  for (std::uint32_t i = 0; i < n && same; ++i) same = order[i] == i;
  if (!same) reorder(p, order);
}

std::vector<IndexUse> index_uses(const Plan& p, const PlanNode& n) {
  std::vector<IndexUse> r;
  if (n.op == OpKind::EmbeddingConcat) {
    for (const auto& [table, idx] : n.attrs.get<LookupPieces>().lookups())
      r.push_back({idx, p.nodes[n.inputs[table]].type.shape[0], false});
    return r;
  }
  const IndexInput& x = op_def(n.op).index;
  if (x.input < 0 || static_cast<std::size_t>(x.input) >= n.inputs.size()) return r;
  const auto k = static_cast<std::size_t>(x.input);
  if (p.nodes[n.inputs[k]].type.dtype != DType::i32) return r;
  const Shape& bounded = p.nodes[n.inputs[static_cast<std::size_t>(x.bound_input)]].type.shape;
  r.push_back({k, bounded.dim(x.dim_of(bounded, n.attrs)), x.wraps});
  return r;
}

void name_index_readers(Plan& p) {
  // The value read as indices, through transfers: the same data on another device.
  const auto source = [&](std::uint32_t v) {
    while (p.nodes[v].op == OpKind::Transfer && !p.nodes[v].inputs.empty())
      v = p.nodes[v].inputs[0];
    return v;
  };
  struct Use {
    std::uint32_t node, value;
    IndexUse use;
  };
  std::unordered_map<std::uint32_t, std::vector<Use>> users;  // by the value read
  std::vector<Use> derived;
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    if (n.op == OpKind::EmbeddingConcat) continue;  // several lookups: named per piece
    for (const IndexUse& u : index_uses(p, n)) {
      const Use x{i, source(n.inputs[u.input]), u};
      if (op_def(n.op).grad)
        users[x.value].push_back(x);
      else
        derived.push_back(x);
    }
  }
  for (const Use& d : derived) {
    PlanNode& n = p.nodes[d.node];
    // Named already, or a check its maker named (the ONNX importer's say what they check). An
    // optimizer's update has a name too ('E/sgd'), but not one the user gave the indices.
    if (!n.index_reader.empty() || (n.op == OpKind::CheckIndices && !n.name.empty())) continue;
    const PlanNode* best = nullptr;
    const auto it = users.find(d.value);
    if (it == users.end()) continue;
    for (const Use& u : it->second) {
      if (u.use.bound != d.use.bound || u.use.wraps != d.use.wraps) continue;
      const PlanNode& c = p.nodes[u.node];
      if (!best || (best->name.empty() && !c.name.empty())) best = &c;  // plan order, named first
    }
    if (best) n.index_reader = best->label;
  }
}

// ---- commit point --------------------------------------------------------------------------

void commit_writes(Plan& p) {
  name_index_readers(p);  // the checks made here name what their writers name
  const std::size_t n = p.nodes.size();
  // A writer whose index input is computed gets a check_indices before the commit point: a
  // bad index then fails the run before anything is written.
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!p.nodes[i].writes_variable()) continue;
    const IndexInput& x = op_def(p.nodes[i].op).index;
    if (x.input < 0) continue;
    const std::uint32_t idx = p.nodes[i].inputs[static_cast<std::size_t>(x.input)];
    std::uint32_t b = idx;
    while (p.nodes[b].storage == Storage::View) b = p.nodes[b].inputs[0];
    if (p.nodes[b].storage == Storage::Input) continue;  // checked when fed
    const std::uint32_t like = p.nodes[i].inputs[static_cast<std::size_t>(x.bound_input)];
    const std::uint32_t c = p.add_node(OpKind::CheckIndices, {idx, like});
    PlanNode& check = p.nodes[c];
    check.type = {Shape{1}, DType::f32};
    check.label = "'check indices of " + p.nodes[i].label + "'";
    check.index_reader = p.nodes[i].index_label();
    check.deps = {idx};
    p.nodes[idx].succs.push_back(c);
  }
  std::vector<std::uint32_t> before;
  bool writes = false;
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& node = p.nodes[i];
    if (node.writes_variable())
      writes = true;
    else if (node.has_work())
      before.push_back(i);
  }
  if (!writes) return;
  const std::uint32_t c = p.add_node(OpKind::Group, {});
  PlanNode& commit = p.nodes[c];
  commit.storage = Storage::None;
  commit.commit = true;
  commit.label = "commit point";
  commit.deps = std::move(before);
  for (std::uint32_t d : commit.deps) p.nodes[d].succs.push_back(c);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!p.nodes[i].writes_variable()) continue;
    p.nodes[i].deps.push_back(c);
    p.nodes[c].succs.push_back(i);
  }
  order_by_dependencies(p);
}

// ---- pipeline ------------------------------------------------------------------------------

namespace {

bool fusing(const PlanOptions& o) {
  return o.fuse;
}
bool conv_fusing(const PlanOptions& o) {
  return o.fuse && o.conv_post_ops;
}
bool laying_out(const PlanOptions& o) {
  return o.conv_layout != ActivationLayout::nchw && o.placer == nullptr;
}
bool planning(const PlanOptions& o) {
  return o.reuse != ReuseMode::none && o.placer == nullptr;
}
// Heterogeneous platforms: placement, transfers, then each device's part gets its own
// elision, commit point and memory plan (split_devices) instead of the whole plan.
bool placing(const PlanOptions& o) {
  return o.placer != nullptr;
}
bool single_device(const PlanOptions& o) {
  return o.placer == nullptr;
}

// The passes after build, in order; each can be dumped with HETGRAPH_DUMP_PLAN=after:<name>.
const Pass kPasses[] = {
    {"regroup_gradients", [](Plan& p, const PassContext&) { regroup_gradients(p); }},
    {"infer_shapes", [](Plan& p, const PassContext& c) { infer_shapes(p, c.shapes); }},
    {"fold_empty_tensors", [](Plan& p, const PassContext&) { fold_empty_tensors(p); }},
    {"simplify", [](Plan& p, const PassContext&) { simplify(p); }},
    {"place_devices", [](Plan& p, const PassContext& c) { c.options.placer->place(p); }, placing},
    {"fuse_silu", [](Plan& p, const PassContext& c) { fuse_silu(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.silu; }},
    {"fuse_layer_norm",
     [](Plan& p, const PassContext& c) { fuse_layer_norm(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.layer_norm; }},
    {"fuse_gelu", [](Plan& p, const PassContext& c) { fuse_gelu(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.gelu; }},
    {"fuse_lstm_cells",
     [](Plan& p, const PassContext& c) { fuse_lstm_cells(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.lstm_cells; }},
    {"fuse_gru_cells",
     [](Plan& p, const PassContext& c) { fuse_gru_cells(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.gru_cells; }},
    {"fuse_recurrent_sequences",
     [](Plan& p, const PassContext& c) { fuse_recurrent_sequences(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.recurrent_sequences; }},
    {"fuse_channel_affine",
     [](Plan& p, const PassContext& c) { fuse_channel_affine(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.channel_affine; }},
    {"fuse_attention",
     [](Plan& p, const PassContext& c) {
       fuse_attention(p, c.options.capabilities, c.options.attention_transposes);
     },
     [](const PlanOptions& o) { return o.fuse && o.attention; }},
    {"fuse_matmul_epilogue",
     [](Plan& p, const PassContext& c) { fuse_matmul_epilogue(p, c.options.capabilities); },
     fusing},
    {"fuse_matmul_accumulate",
     [](Plan& p, const PassContext& c) {
       fuse_matmul_accumulate(p, c.options.capabilities, c.options.matmul_bias);
     },
     fusing},
    {"fuse_conv_residual",
     [](Plan& p, const PassContext& c) { fuse_conv_residual(p, c.options.capabilities); },
     conv_fusing},
    {"fuse_conv_epilogue",
     [](Plan& p, const PassContext& c) { fuse_conv_epilogue(p, c.options.capabilities); },
     conv_fusing},
    {"assign_layouts",
     [](Plan& p, const PassContext& c) {
       assign_layouts(p, c.options.conv_layout, c.options.layouts_through_pool_concat,
                      c.options.winograd_layout,
                      c.options.grouped_conv_layouts ? c.options.capabilities : nullptr,
                      c.options.capabilities);
       p.own_winograd = c.options.own_winograd;
     },
     laying_out},
    {"fuse_sparse_update",
     [](Plan& p, const PassContext& c) { fuse_sparse_update(p, c.options.capabilities); }, fusing},
    {"fuse_embedding_concat",
     [](Plan& p, const PassContext& c) { fuse_embedding_concat(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.grouped_embeddings; }},
    {"fuse_collectives", [](Plan& p, const PassContext&) { fuse_collectives(p); }, fusing},
    // Before link_dependencies: the products it makes are ordered with the rest.
    {"stack_shared_products",
     [](Plan& p, const PassContext& c) { stack_shared_products(p, c.options.capabilities); },
     [](const PlanOptions& o) { return o.fuse && o.stacked_products && o.placer == nullptr; }},
    {"link_dependencies", [](Plan& p, const PassContext&) { link_dependencies(p); }},
    {"order_by_dependencies", [](Plan& p, const PassContext&) { order_by_dependencies(p); }},
    {"insert_transfers",
     [](Plan& p, const PassContext& c) { insert_transfers(p, *c.options.placer); }, placing},
    {"elide_assigns", [](Plan& p, const PassContext& c) { elide_assigns(p, c.options.reuse); },
     planning},
    // Heterogeneous plans: split_devices runs it on each part, with that device's threads.
    {"fuse_parallel_ops", [](Plan& p, const PassContext& c) { fuse_parallel_ops(p, c.options); },
     [](const PlanOptions& o) {
       return o.parallel_ops && o.kernel_threads > 1 && o.placer == nullptr;
     }},
    {"commit_writes", [](Plan& p, const PassContext&) { commit_writes(p); }, single_device},
    {"concat_in_place", [](Plan& p, const PassContext&) { concat_in_place(p); },
     [](const PlanOptions& o) {
       return o.concat_in_place && o.reuse != ReuseMode::none && o.arena && o.placer == nullptr;
     }},
    {"slice_views", [](Plan& p, const PassContext&) { slice_views(p); },
     [](const PlanOptions& o) {
       return o.slice_views && o.reuse != ReuseMode::none && o.arena && o.placer == nullptr;
     }},
    {"plan_memory",
     [](Plan& p, const PassContext& c) { plan_memory(p, c.options.reuse, c.options.arena); },
     single_device},
    {"split_devices",
     [](Plan& p, const PassContext& c) {
       split_devices(p, *c.options.placer, c.options.reuse, c.options.parallel_ops);
     },
     placing},
};

/// HETGRAPH_DUMP_PLAN: "1" (the final plan), "after:<pass>[,<pass>...]", or "after:all".
/// Dumps go to stderr.
struct DumpRequest {
  bool final = false, all = false;
  std::vector<std::string> after;

  static DumpRequest from_env() {
    DumpRequest r;
    const std::string d = env_value("HETGRAPH_DUMP_PLAN");
    if (d.empty() || d == "0") return r;
    std::string_view v(d);
    if (!v.starts_with("after:")) {
      r.final = true;
      return r;
    }
    v.remove_prefix(6);
    while (!v.empty()) {
      const std::size_t comma = v.find(',');
      const std::string_view name = v.substr(0, comma);
      if (name == "all")
        r.all = true;
      else if (!name.empty())
        r.after.emplace_back(name);
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
    for (const std::string& name : r.after) {
      const bool known =
          name == "build" || std::any_of(std::begin(kPasses), std::end(kPasses),
                                         [&](const Pass& ps) { return ps.name == name; });
      if (!known) {
        std::string names = "build";
        for (const Pass& ps : kPasses) names += ", " + std::string(ps.name);
        std::cerr << "hetgraph: HETGRAPH_DUMP_PLAN names no pass '" << name
                  << "' (passes: " << names << ")\n";
      }
    }
    return r;
  }
  void maybe_dump(const Plan& p, std::string_view pass, bool last) const {
    const bool want =
        all || (final && last) || std::find(after.begin(), after.end(), pass) != after.end();
    if (want) std::cerr << "after " << pass << ": " << dump(p);
  }
};

}  // namespace

std::span<const Pass> passes() {
  return kPasses;
}

std::shared_ptr<const Plan> compile_plan(const GraphImpl& g, const InputShapes& shapes,
                                         std::span<const std::uint32_t> fetches,
                                         const PlanOptions& options) {
  static const DumpRequest dumps = DumpRequest::from_env();
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto plan = std::make_shared<Plan>(build_plan(g, fetches));
  auto lap = [&](std::string_view name) {
    const auto t = clock::now();
    plan->pass_seconds.emplace_back(name, std::chrono::duration<double>(t - t0).count());
    t0 = t;
  };
  lap("build");
  dumps.maybe_dump(*plan, "build", false);
  // A communication node stays in flight while the nodes after it in plan order run (on the
  // CPU engines' communication lane): plan memory as for a parallel engine, so nothing reuses
  // its buffers before the nodes that depend on it.
  PlanOptions opts = options;
  if (opts.reuse == ReuseMode::sequential &&
      std::any_of(plan->nodes.begin(), plan->nodes.end(),
                  [](const PlanNode& n) { return op_def(n.op).communication; })) {
    opts.reuse = ReuseMode::dag;
  }
  const PassContext ctx{shapes, opts};
  auto enabled = [&](const Pass& pass) { return pass.enabled == nullptr || pass.enabled(opts); };
  std::size_t last = 0;
  for (std::size_t i = 0; i < std::size(kPasses); ++i)
    if (enabled(kPasses[i])) last = i;
  for (std::size_t i = 0; i < std::size(kPasses); ++i) {
    const Pass& pass = kPasses[i];
    if (!enabled(pass)) continue;
    pass.run(*plan, ctx);
    lap(pass.name);
    dumps.maybe_dump(*plan, pass.name, i == last);
  }
  plan->packed_weights = opts.packed_weights;
  for (const auto& part : plan->parts) {
    if (part) part->packed_weights = opts.packed_weights;
  }
  return plan;
}

// ---- lookups and dump ----------------------------------------------------------------------

bool fixed_between_runs(const Plan& p, std::uint32_t i) {
  while (p.nodes[i].storage == Storage::View) i = p.nodes[i].inputs[0];
  const Storage s = p.nodes[i].storage;
  if (s == Storage::Constant) return true;
  if (s != Storage::Variable) return false;
  for (std::uint32_t k = 0; k < p.nodes.size(); ++k) {
    const PlanNode& n = p.nodes[k];
    if (n.into_variable == static_cast<std::int64_t>(i)) return false;
    if (n.has_work() && p.output_of(k) == i && k != i) return false;
  }
  return true;
}

std::uint32_t Plan::index(const Node& n, std::string_view what) const {
  if (!n.valid()) throw GraphError(std::string(what) + ": invalid (default-constructed) node");
  std::uint32_t id = n.id();
  if (detail::graph_of(n)->id != graph_id) {
    const auto it = stand_ins.find(id);
    if (stands_for == 0 || detail::graph_of(n)->id != stands_for || it == stand_ins.end()) {
      throw GraphError(std::string(what) + ": node " + n.label() +
                       " belongs to another graph than the one compiled");
    }
    id = it->second;  // the same input, output or variable of the model built again
  }
  const std::int64_t at = index_of.find(id);
  if (at < 0) {
    throw GraphError(std::string(what) + ": node " + n.label() +
                     " was pruned: no fetched node needs it (fetch it at compile time)");
  }
  return static_cast<std::uint32_t>(at);
}

std::int64_t Plan::input_named(std::string_view name) const {
  for (std::uint32_t i : inputs) {
    if (nodes[i].name == name) return i;
  }
  return -1;
}

std::uint32_t Plan::named(std::string_view name, std::string_view what) const {
  auto it = names.find(std::string(name));
  if (it == names.end()) {
    throw GraphError(std::string(what) + ": no node named '" + std::string(name) + "'");
  }
  const std::int64_t at = index_of.find(it->second);
  if (at < 0) {
    throw GraphError(std::string(what) + ": node '" + std::string(name) +
                     "' was pruned: no fetched node needs it (fetch it at compile time)");
  }
  return static_cast<std::uint32_t>(at);
}

std::string dump(const Plan& p) {
  std::ostringstream os;
  os << "plan: " << p.nodes.size() << " nodes, arena " << p.arena_bytes << " B (naive "
     << p.naive_bytes << " B), " << p.buffers << " buffers, " << p.ordering_edges
     << " ordering edges\n";
  static const char* kStorage[] = {"none", "input", "var", "const", "buf", "view"};
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    os << "  " << i << ": " << n.label << " " << n.type.shape.str() << " "
       << kStorage[static_cast<int>(n.storage)];
    if (n.buffer >= 0) os << " b" << n.buffer << "@" << n.offset;
    if (n.in_place) os << " in-place";
    if (n.elided) os << " elided";
    if (n.into_variable >= 0) os << " into-variable";
    if (n.fused_into >= 0) os << " fused-into " << n.fused_into;
    if (n.layout != ActivationLayout::nchw) {
      const char* names[] = {"nchw", "nhwc", "nChw8c", "nChw16c"};
      os << " layout " << names[static_cast<int>(n.layout)];
    }
    if (n.grad_sum) os << " grad-sum";
    if (n.commit) os << " commit";
    if (n.fetched) os << " fetched";
    if (n.device >= 0) os << " @" << n.device;
    os << " deps[";
    for (std::size_t k = 0; k < n.deps.size(); ++k) os << (k ? "," : "") << n.deps[k];
    os << "]\n";
  }
  for (std::size_t d = 0; d < p.parts.size(); ++d) {
    if (p.parts[d]) os << "part @" << d << ": " << dump(*p.parts[d]);
  }
  return os.str();
}

}  // namespace hetgraph::detail
