// SPDX-License-Identifier: Apache-2.0
// Reverse-mode differentiation over the user graph: gradient contributions flow from the loss
// back through the nodes on a path between `wrt` and the loss, in reverse topological order,
// using each op's rule from the op table. Contributions to one node are summed in the order
// they were made, so the built graph (and its results) are deterministic; the compiler's
// regroup_gradients pass rearranges such sums where it pays (see passes.cpp).
#include "hetgraph/autodiff.hpp"

#include <algorithm>
#include <map>

#include "compiler/graph_impl.hpp"
#include "compiler/ops/builders.hpp"
#include "compiler/plan.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

using detail::Attrs;
using detail::fresh_name;
using detail::GraphImpl;
using detail::make_op;
using detail::NodeRec;
using detail::OpKind;

namespace {

bool data_input(const GraphImpl& g, std::uint32_t node, std::size_t i) {
  return !detail::op_def(g.rec(node).op).shape_only_input(i);
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

// The sum of the contributions to one node, left to right. The adds are marked: the
// regroup_gradients pass of the compiler finds these sums and regroups their parts (slice
// gradients of one tensor, per-step weight gradients) where that pays.
Node sum_contributions(GraphImpl& g, const std::vector<Node>& parts) {
  Node s = parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) {
    s = add(s, parts[i]);
    g.nodes[s.id()].grad_sum = true;
  }
  return s;
}

}  // namespace

std::vector<Node> gradients(Node loss, std::span<const Node> wrt) {
  if (!loss.valid()) throw GraphError("gradients: invalid loss node");
  GraphImpl& g = *detail::graph_of(loss);
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
    ctx.attrs = g.rec(v).attrs;
    const detail::InheritPin pin(g, g.rec(v).pin);
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

}  // namespace hetgraph
