// Reverse-mode differentiation over the user graph: gradient contributions flow from the loss
// back through the nodes on a path between `wrt` and the loss, in reverse topological order,
// using each op's rule from the op table. Contributions to one node are summed in the order
// they were made, so the built graph (and its results) are deterministic.
#include "hetgraph/autodiff.hpp"

#include <algorithm>
#include <map>

#include "compiler/graph_impl.hpp"
#include "compiler/ops/builders.hpp"
#include "compiler/plan.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

using detail::Attrs;
using detail::GraphImpl;
using detail::make_op;
using detail::NodeRec;
using detail::OpKind;

namespace {

bool data_input(const GraphImpl& g, std::uint32_t node, std::size_t i) {
  const std::uint32_t m = detail::op_def(g.rec(node).op).shape_only;
  const bool shape_only = i < 31 ? ((m >> i) & 1u) != 0 : ((m >> 31) & 1u) != 0;
  return !shape_only;
}

class Contributions final : public detail::GradCtx {
 public:
  Contributions(const GraphImpl& g, const std::vector<char>& relevant,
                const std::vector<char>& wanted, std::map<std::uint32_t, std::vector<Node>>& acc)
      : g_(g), relevant_(relevant), wanted_(wanted), acc_(acc) {}

  void add(Node target, Node contribution) const override {
    if (relevant_[target.id()]) acc_[target.id()].push_back(contribution);
  }
  void not_differentiable(int input, std::string_view why) const override {
    const std::uint32_t u = g_.rec(node.id()).inputs[static_cast<std::size_t>(input)];
    if (relevant_[u]) {
      throw GraphError("gradients: cannot differentiate " + g_.label(node.id()) +
                       " with respect to its input " + std::to_string(input) + " " + g_.label(u) +
                       ": " + std::string(why));
    }
  }
  bool wanted(Node n) const override { return wanted_[n.id()] != 0; }

 private:
  const GraphImpl& g_;
  const std::vector<char>& relevant_;
  const std::vector<char>& wanted_;
  std::map<std::uint32_t, std::vector<Node>>& acc_;
};

Node sum_all(const std::vector<Node>& parts) {
  Node s = parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) s = add(s, parts[i]);
  return s;
}

// Products per chunk when per-step weight gradients are regrouped (see sum_contributions).
constexpr std::size_t kStepsPerProduct = 8;

// Sums the gradient contributions to one node, folding two common patterns first:
//  - gradients of slices of one tensor along one axis with disjoint ranges (an LSTM's four
//    gates) are placed by one slice_grad_n instead of zero-filling a full tensor per slice
//    and adding them up;
//  - weight gradients sum_to(A_t^T G_t, W) of a weight used at many steps are regrouped into
//    products over concatenated steps, sum_t A_t^T G_t = [A_1..A_k]^T [G_1..G_k], in chunks
//    of kStepsPerProduct: each small-K product would otherwise read and write the whole
//    accumulator (lstm-medium: 30 steps of K = 64 into 8 MB). Chunks, not one product, so
//    parallel engines still have several nodes to spread.
Node sum_contributions(GraphImpl& g, const std::vector<Node>& parts) {
  if (parts.size() < 2) return parts.front();
  std::vector<Node> rest, slices;
  std::vector<std::pair<Node, Node>>
      products;  // (A_t, G_t) of sum_to(matmul(A_t, G_t, T, N), like)
  Node like;
  for (const Node& n : parts) {
    const NodeRec& r = g.rec(n.id());
    if (r.op == OpKind::SliceGrad && r.attrs.begin >= 0 && r.attrs.end > r.attrs.begin) {
      slices.push_back(n);
      continue;
    }
    if (r.op == OpKind::SumTo) {
      const NodeRec& m = g.rec(r.inputs[0]);
      const Node l = g.handle(r.inputs[1]);
      if (m.op == OpKind::MatMul && m.attrs.trans_a && !m.attrs.trans_b &&
          (!like.valid() || like == l)) {
        like = l;
        products.push_back({g.handle(m.inputs[0]), g.handle(m.inputs[1])});
        continue;
      }
    }
    rest.push_back(n);
  }
  // slices: same tensor, same axis, disjoint ranges
  if (slices.size() >= 2) {
    const NodeRec& s0 = g.rec(slices[0].id());
    bool ok = true;
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
    for (const Node& n : slices) {
      const NodeRec& r = g.rec(n.id());
      ok = ok && r.inputs[1] == s0.inputs[1] && r.attrs.axis == s0.attrs.axis;
      ranges.push_back({r.attrs.begin, r.attrs.end});
    }
    auto sorted = ranges;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i)
      ok = ok && sorted[i].first >= sorted[i - 1].second;
    if (ok) {
      Attrs at;
      at.axis = s0.attrs.axis;
      std::vector<Node> in{g.handle(s0.inputs[1])};
      for (std::size_t i = 0; i < slices.size(); ++i) {
        in.push_back(g.handle(g.rec(slices[i].id()).inputs[0]));
        at.ints.push_back(ranges[i].first);
        at.ints.push_back(ranges[i].second);
      }
      rest.push_back(make_op(OpKind::SliceGradN, std::span<const Node>(in), at));
    } else {
      rest.insert(rest.end(), slices.begin(), slices.end());
    }
  } else {
    rest.insert(rest.end(), slices.begin(), slices.end());
  }
  if (products.size() >= 2) {
    for (std::size_t c = 0; c < products.size(); c += kStepsPerProduct) {
      std::vector<Node> as, gs;
      for (std::size_t i = c; i < std::min(products.size(), c + kStepsPerProduct); ++i) {
        as.push_back(products[i].first);
        gs.push_back(products[i].second);
      }
      const Node a = as.size() == 1 ? as[0] : concat(as, 0);
      const Node gr = gs.size() == 1 ? gs[0] : concat(gs, 0);
      rest.push_back(detail::sum_to(matmul(a, gr, true, false), like));
    }
  } else if (products.size() == 1) {
    // a single product stays as it was made
    for (const Node& n : parts) {
      if (g.rec(n.id()).op == OpKind::SumTo && std::find(rest.begin(), rest.end(), n) == rest.end())
        rest.push_back(n);
    }
  }
  return sum_all(rest);
}

}  // namespace

std::vector<Node> gradients(Node loss, std::span<const Node> wrt) {
  if (!loss.valid()) throw GraphError("gradients: invalid loss node");
  GraphImpl& g = *loss.graph_impl();
  for (const Node& w : wrt) detail::check_same_graph(&g, w, "gradients");
  const std::size_t n = g.nodes.size();

  // Nodes the loss depends on (through data, not shape-only, inputs), in topological order.
  const std::uint32_t root = loss.id();
  const auto ancestors_sorted = detail::prune(g, std::span<const std::uint32_t>(&root, 1));
  const auto order =
      detail::topo_order(g, ancestors_sorted, std::span<const std::uint32_t>(&root, 1));
  std::vector<char> reaches_loss(n, 0);
  reaches_loss[root] = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!reaches_loss[*it]) continue;
    const auto& ins = g.rec(*it).inputs;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      if (data_input(g, *it, i)) reaches_loss[ins[i]] = 1;
    }
  }
  // ... and that depend on some w: the nodes gradients flow through.
  std::vector<char> wanted(n, 0), relevant(n, 0);
  for (const Node& w : wrt) {
    if (!reaches_loss[w.id()]) {
      throw GraphError("gradients: " + w.label() + " does not influence the loss " + loss.label() +
                       " (no path from it to the loss)");
    }
    wanted[w.id()] = relevant[w.id()] = 1;
  }
  for (std::uint32_t v : order) {
    if (!reaches_loss[v] || relevant[v]) continue;
    const auto& ins = g.rec(v).inputs;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      if (data_input(g, v, i) && relevant[ins[i]]) relevant[v] = 1;
    }
  }

  std::map<std::uint32_t, std::vector<Node>> acc;
  acc[root].push_back(detail::grad_seed(loss));
  std::map<std::uint32_t, Node> total;
  Contributions ctx(g, relevant, wanted, acc);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::uint32_t v = *it;
    auto found = acc.find(v);
    if (found == acc.end() || !relevant[v]) continue;
    const Node grad = sum_contributions(g, found->second);
    if (wanted[v]) total[v] = grad;
    const detail::OpDef& def = detail::op_def(g.rec(v).op);
    std::vector<Node> in;
    for (std::uint32_t u : g.rec(v).inputs) in.push_back(g.handle(u));
    if (def.grad == nullptr) {
      for (std::size_t i = 0; i < in.size(); ++i) {
        if (data_input(g, v, i) && relevant[in[i].id()]) {
          throw GraphError("gradients: " + g.label(v) + " is not differentiable (op '" +
                           std::string(def.name) + "'), but the loss depends on " + in[i].label() +
                           " through it");
        }
      }
      continue;
    }
    ctx.node = g.handle(v);
    ctx.in = std::move(in);
    ctx.grad = grad;
    def.grad(ctx);
  }

  std::vector<Node> out;
  for (const Node& w : wrt) {
    auto it = total.find(w.id());
    if (it == total.end()) {
      throw GraphError("gradients: no gradient reaches " + w.label() + " from " + loss.label());
    }
    out.push_back(it->second);
  }
  return out;
}

std::vector<Node> gradients(Node loss, std::initializer_list<Node> wrt) {
  return gradients(loss, std::span<const Node>(wrt.begin(), wrt.size()));
}

Node sgd(Node loss, std::span<const Node> variables, float learning_rate, float momentum) {
  if (variables.empty()) throw GraphError("sgd: no variables to update");
  for (const Node& v : variables) {
    if (!v.valid() || v.graph_impl()->rec(v.id()).op != OpKind::Variable) {
      throw GraphError("sgd: " + v.label() + " is not a variable");
    }
  }
  const auto grads = gradients(loss, variables);
  GraphImpl& g = *loss.graph_impl();
  std::vector<Node> steps;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Node v = variables[i];
    Node update = grads[i];
    if (momentum != 0.0f) {
      // u <- m*u + g, written over u; the variable then steps along u.
      std::string name = v.name() + "/velocity";
      for (int k = 2; g.by_name.count(name); ++k) name = v.name() + "/velocity" + std::to_string(k);
      detail::NodeRec r;
      r.op = OpKind::Variable;
      r.name = name;
      r.shape = g.rec(v.id()).shape;
      const Node u = g.add(std::move(r));
      update = axpby(u, grads[i], momentum, 1.0f);
      steps.push_back(assign(u, update));
    }
    steps.push_back(assign(v, axpby(v, update, 1.0f, -learning_rate)));
  }
  return group(steps);
}

Node sgd(Node loss, std::initializer_list<Node> variables, float learning_rate, float momentum) {
  return sgd(loss, std::span<const Node>(variables.begin(), variables.size()), learning_rate,
             momentum);
}

}  // namespace hetgraph
