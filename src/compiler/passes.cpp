// Compiler passes up to the memory plan: prune, topological order, plan construction, shape
// inference, simplification and execution dependencies. Each is a plain function over the
// graph or the Plan so tests can run them one by one.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <queue>
#include <sstream>

#include "compiler/plan.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail {

namespace {
bool shape_only_input(OpKind op, std::size_t i) {
  // Bit 31 is sticky: it covers every input from 31 on (variadic ops such as concat_grad).
  const std::uint32_t m = op_def(op).shape_only;
  return i < 31 ? ((m >> i) & 1u) != 0 : ((m >> 31) & 1u) != 0;
}
}  // namespace

bool PlanNode::reads_input(std::size_t i) const {
  return !shape_only_input(op, i);
}

// ---- prune --------------------------------------------------------------------------------

std::vector<std::uint32_t> prune(const GraphImpl& g, std::span<const std::uint32_t> fetches) {
  std::vector<char> seen(g.nodes.size(), 0);
  std::vector<std::uint32_t> stack(fetches.begin(), fetches.end()), out;
  while (!stack.empty()) {
    const std::uint32_t v = stack.back();
    stack.pop_back();
    if (seen[v]) continue;
    seen[v] = 1;
    out.push_back(v);
    for (std::uint32_t u : g.nodes[v].inputs) {
      if (!seen[u]) stack.push_back(u);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---- topological order --------------------------------------------------------------------

namespace {

[[noreturn]] void report_cycle(const GraphImpl& g, const std::vector<char>& remaining) {
  // Every node left over by Kahn's algorithm has an input that is left over too, so walking
  // inputs from any of them must revisit a node: that closes a cycle.
  std::uint32_t v = 0;
  while (!remaining[v]) ++v;
  std::vector<std::uint32_t> path;
  std::vector<std::int64_t> pos(g.nodes.size(), -1);
  while (pos[v] < 0) {
    pos[v] = static_cast<std::int64_t>(path.size());
    path.push_back(v);
    for (std::uint32_t u : g.nodes[v].inputs) {
      if (remaining[u]) {
        v = u;
        break;
      }
    }
  }
  // path[pos[v]..] walks against the edges; print it along them.
  std::vector<std::uint32_t> cycle(path.begin() + pos[v], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::string msg = "the graph has a cycle that no assign breaks: ";
  for (std::uint32_t n : cycle) msg += g.label(n) + " -> ";
  msg += g.label(cycle.front()) +
         " (only assign may feed a value back, into a variable for the next run)";
  throw GraphError(msg);
}

}  // namespace

std::vector<std::uint32_t> topo_order(const GraphImpl& g, std::span<const std::uint32_t> needed,
                                      std::span<const std::uint32_t> fetches) {
  const std::size_t n = g.nodes.size();
  std::vector<char> in_set(n, 0);
  for (std::uint32_t v : needed) in_set[v] = 1;

  // Depth-first post-order ranks from the fetches break ties in Kahn's queue.
  std::vector<std::uint32_t> rank(n, 0);
  {
    std::vector<char> state(n, 0);  // 0 new, 1 open, 2 done
    std::vector<std::pair<std::uint32_t, std::size_t>> stack;
    std::uint32_t next = 0;
    for (std::uint32_t f : fetches) {
      if (state[f]) continue;
      stack.push_back({f, 0});
      state[f] = 1;
      while (!stack.empty()) {
        auto& [v, i] = stack.back();
        const auto& ins = g.nodes[v].inputs;
        if (i < ins.size()) {
          const std::uint32_t u = ins[i++];
          if (!state[u]) {
            state[u] = 1;
            stack.push_back({u, 0});
          }
        } else {
          state[v] = 2;
          rank[v] = next++;
          stack.pop_back();
        }
      }
    }
  }

  std::vector<std::uint32_t> indeg(n, 0);
  std::vector<std::vector<std::uint32_t>> consumers(n);
  for (std::uint32_t v : needed) {
    for (std::uint32_t u : g.nodes[v].inputs) {
      ++indeg[v];
      consumers[u].push_back(v);
    }
  }
  auto later = [&](std::uint32_t a, std::uint32_t b) { return rank[a] > rank[b]; };
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, decltype(later)> ready(later);
  for (std::uint32_t v : needed) {
    if (indeg[v] == 0) ready.push(v);
  }
  std::vector<std::uint32_t> order;
  order.reserve(needed.size());
  while (!ready.empty()) {
    const std::uint32_t v = ready.top();
    ready.pop();
    order.push_back(v);
    for (std::uint32_t c : consumers[v]) {
      if (--indeg[c] == 0) ready.push(c);
    }
  }
  if (order.size() != needed.size()) {
    std::vector<char> remaining(n, 0);
    for (std::uint32_t v : needed) remaining[v] = indeg[v] > 0;
    report_cycle(g, remaining);
  }
  return order;
}

// ---- plan construction ---------------------------------------------------------------------

Plan build_plan(const GraphImpl& g, std::span<const std::uint32_t> order,
                std::span<const std::uint32_t> fetches) {
  Plan p;
  p.graph = &g;
  p.nodes.resize(order.size());
  p.index_of.reserve(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    p.index_of[order[i]] = static_cast<std::uint32_t>(i);
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
    n.init = r.init;
    n.f32_values = r.f32_values;
    n.i32_values = r.i32_values;
    switch (r.op) {
      case OpKind::Input:
        n.storage = Storage::Input;
        p.inputs.push_back(static_cast<std::uint32_t>(i));
        break;
      case OpKind::Variable:
        n.storage = Storage::Variable;
        p.variables.push_back(static_cast<std::uint32_t>(i));
        break;
      case OpKind::Constant:
        n.storage = Storage::Constant;
        break;
      case OpKind::Assign:
      case OpKind::Group:
        n.storage = Storage::None;
        break;
      default:
        n.storage = op_def(r.op).view ? Storage::View : Storage::Computed;
        break;
    }
  }
  for (std::uint32_t f : fetches) {
    const std::uint32_t i = p.index_of.at(f);
    if (!p.nodes[i].fetched) {
      p.nodes[i].fetched = true;
      p.fetches.push_back(i);
    }
  }
  return p;
}

// ---- shape inference -----------------------------------------------------------------------

namespace {
void check_nonempty(const PlanNode& n) {
  for (std::int64_t d : n.type.shape.dims()) {
    if (d == 0) {
      throw ShapeError("node " + n.label + ": shape " + n.type.shape.str() +
                       " has an empty dimension; tensors must have at least one element");
    }
  }
}
}  // namespace

void infer_shapes(Plan& p, const InputShapes& shapes) {
  for (const auto& [name, shape] : shapes) {
    auto it = p.graph->by_name.find(name);
    if (it == p.graph->by_name.end() || p.graph->rec(it->second).op != OpKind::Input) {
      throw GraphError("input shapes name '" + name + "', which is not an input of the graph");
    }
  }
  std::vector<TensorType> in;
  for (PlanNode& n : p.nodes) {
    if (n.op == OpKind::Input) {
      auto it = std::find_if(shapes.begin(), shapes.end(),
                             [&](const auto& s) { return s.first == n.name; });
      if (it == shapes.end()) {
        throw ShapeError("input '" + n.name + "' has no shape: pass its shape to compile()");
      }
      n.type = {it->second, p.graph->rec(n.gid).dtype};
      check_nonempty(n);
      continue;
    }
    in.clear();
    for (std::uint32_t u : n.inputs) in.push_back(p.nodes[u].type);
    const InferCtx ctx{*p.graph, n.gid, p.graph->rec(n.gid), in};
    n.type = op_def(n.op).infer(ctx);
    if (n.storage != Storage::None) check_nonempty(n);
  }
}

// ---- simplify ------------------------------------------------------------------------------

void simplify(Plan& p) {
  for (PlanNode& n : p.nodes) {
    if (n.storage != Storage::Computed) continue;
    const bool identity_sum_to =
        n.op == OpKind::SumTo && p.nodes[n.inputs[0]].type.shape == n.type.shape;
    bool identity_transpose = false;
    if (n.op == OpKind::Transpose) {
      const auto& perm = n.attrs.ints;
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
    if (a.op != OpKind::Assign) continue;
    const std::uint32_t var = a.inputs[0];
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
  if (same) return;
  std::vector<std::uint32_t> at(n);  // old index -> new index
  for (std::uint32_t i = 0; i < n; ++i) at[order[i]] = i;
  auto remap = [&](std::vector<std::uint32_t>& v) {
    for (std::uint32_t& x : v) x = at[x];
  };
  std::vector<PlanNode> nodes;
  nodes.reserve(n);
  for (std::uint32_t old : order) nodes.push_back(std::move(p.nodes[old]));
  for (PlanNode& node : nodes) {
    remap(node.inputs);
    remap(node.deps);
    remap(node.succs);
    if (node.fused_into >= 0) node.fused_into = at[static_cast<std::size_t>(node.fused_into)];
  }
  p.nodes = std::move(nodes);
  remap(p.inputs);
  remap(p.variables);
  remap(p.fetches);
  for (auto& [gid, idx] : p.index_of) idx = at[idx];
}

// ---- pipeline ------------------------------------------------------------------------------

std::shared_ptr<const Plan> compile_plan(const GraphImpl& g, const InputShapes& shapes,
                                         std::span<const std::uint32_t> fetches,
                                         const PlanOptions& options) {
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
  const auto needed = prune(g, roots);
  const auto order = topo_order(g, needed, roots);
  auto plan = std::make_shared<Plan>(build_plan(g, order, roots));
  infer_shapes(*plan, shapes);
  simplify(*plan);
  if (options.fuse) fuse(*plan);
  link_dependencies(*plan);
  order_by_dependencies(*plan);
  plan_memory(*plan, options.reuse);
  if (const char* d = std::getenv("HETGRAPH_DUMP_PLAN"); d != nullptr && *d == '1') {
    std::cerr << dump(*plan);
  }
  return plan;
}

// ---- lookups and dump ----------------------------------------------------------------------

std::uint32_t Plan::index(const Node& n, std::string_view what) const {
  if (!n.valid()) throw GraphError(std::string(what) + ": invalid (default-constructed) node");
  if (n.graph_impl() != graph) {
    throw GraphError(std::string(what) + ": node " + n.label() +
                     " belongs to another graph than the one compiled");
  }
  auto it = index_of.find(n.id());
  if (it == index_of.end()) {
    throw GraphError(std::string(what) + ": node " + n.label() +
                     " was pruned: no fetched node needs it (fetch it at compile time)");
  }
  return it->second;
}

std::int64_t Plan::input_named(std::string_view name) const {
  for (std::uint32_t i : inputs) {
    if (nodes[i].name == name) return i;
  }
  return -1;
}

std::uint32_t Plan::named(std::string_view name, std::string_view what) const {
  auto it = graph->by_name.find(std::string(name));
  if (it == graph->by_name.end()) {
    throw GraphError(std::string(what) + ": no node named '" + std::string(name) + "'");
  }
  return index(graph->handle(it->second), what);
}

std::string dump(const Plan& p) {
  std::ostringstream os;
  os << "plan: " << p.nodes.size() << " nodes, arena " << p.arena_bytes << " B (naive "
     << p.naive_bytes << " B), " << p.buffers << " buffers\n";
  static const char* kStorage[] = {"none", "input", "var", "const", "buf", "view"};
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    os << "  " << i << ": " << n.label << " " << n.type.shape.str() << " "
       << kStorage[static_cast<int>(n.storage)];
    if (n.buffer >= 0) os << " b" << n.buffer << "@" << n.offset;
    if (n.in_place) os << " in-place";
    if (n.elided) os << " elided";
    if (n.fetched) os << " fetched";
    os << " deps[";
    for (std::size_t k = 0; k < n.deps.size(); ++k) os << (k ? "," : "") << n.deps[k];
    os << "]\n";
  }
  return os.str();
}

}  // namespace hetgraph::detail
