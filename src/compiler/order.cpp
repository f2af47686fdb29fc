// The user graph's nodes a fetch needs (prune) and their topological order (autodiff and the
// compiler's first passes).
#include "compiler/order.hpp"

#include <algorithm>

#include "compiler/plan.hpp"

namespace hetgraph::detail {

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

// ---- topological order (of the user's graph, and of a plan a pass rewired) ----------------

std::vector<std::uint32_t> topo_order(const GraphImpl& g, std::span<const std::uint32_t> needed,
                                      std::span<const std::uint32_t> fetches) {
  auto inputs_of = [&](std::uint32_t v) -> const std::vector<std::uint32_t>& {
    return g.nodes[v].inputs;
  };
  std::vector<char> remaining;
  auto order = kahn_order(g.nodes.size(), needed, fetches, inputs_of, remaining);
  if (order.size() != needed.size()) {
    report_cycle(remaining, inputs_of, [&](std::uint32_t v) { return g.label(v); });
  }
  return order;
}

}  // namespace hetgraph::detail
