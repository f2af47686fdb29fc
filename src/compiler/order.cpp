// SPDX-License-Identifier: Apache-2.0
// The user graph's nodes a fetch needs (prune) and their topological order (autodiff and the
// compiler's first passes).
#include "compiler/order.hpp"

#include <algorithm>

#include "compiler/plan.hpp"

namespace hetgraph::detail {

// ---- prune --------------------------------------------------------------------------------

std::vector<std::uint32_t> prune(const GraphImpl& g, std::span<const std::uint32_t> fetches) {
  return reachable(
      g.nodes.size(), fetches,
      [&](std::uint32_t v) -> const std::vector<std::uint32_t>& { return g.nodes[v].inputs; });
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
