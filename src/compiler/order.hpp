// SPDX-License-Identifier: Apache-2.0
// What fetches reach and their topological order by Kahn's algorithm, shared by the user
// graph's order (order.cpp) and a plan's order after a pass rewired it (passes.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hetgraph/error.hpp"

namespace hetgraph::detail {

/// The ids (below n) that `roots` reach through inputs_of(v), v's producers; ascending.
template <class InputsOf>
std::vector<std::uint32_t> reachable(std::size_t n, std::span<const std::uint32_t> roots,
                                     InputsOf inputs_of) {
  std::vector<char> seen(n, 0);
  std::vector<std::uint32_t> stack(roots.begin(), roots.end()), out;
  while (!stack.empty()) {
    const std::uint32_t v = stack.back();
    stack.pop_back();
    if (seen[v]) continue;
    seen[v] = 1;
    out.push_back(v);
    for (std::uint32_t u : inputs_of(v)) {
      if (!seen[u]) stack.push_back(u);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Kahn's algorithm over `needed` (ids below n), where inputs_of(v) lists v's producers; ties
/// go to depth-first post-order ranks from `roots`, which keeps producers next to consumers.
/// On a cycle the order is shorter than `needed` and `remaining` marks the nodes left over.
template <class InputsOf>
std::vector<std::uint32_t> kahn_order(std::size_t n, std::span<const std::uint32_t> needed,
                                      std::span<const std::uint32_t> roots, InputsOf inputs_of,
                                      std::vector<char>& remaining) {
  std::vector<std::uint32_t> rank(n, 0);
  {
    std::vector<char> state(n, 0);  // 0 new, 1 open, 2 done
    std::vector<std::pair<std::uint32_t, std::size_t>> stack;
    std::uint32_t next = 0;
    for (std::uint32_t f : roots) {
      if (state[f]) continue;
      stack.push_back({f, 0});
      state[f] = 1;
      while (!stack.empty()) {
        auto& [v, i] = stack.back();
        const auto& ins = inputs_of(v);
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
    for (std::uint32_t u : inputs_of(v)) {
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
    remaining.assign(n, 0);
    for (std::uint32_t v : needed) remaining[v] = indeg[v] > 0;
  }
  return order;
}

/// Throws the GraphError for a cycle among the `remaining` nodes.
template <class InputsOf, class LabelOf>
[[noreturn]] void report_cycle(const std::vector<char>& remaining, InputsOf inputs_of,
                               LabelOf label_of) {
  // Every node left over by Kahn's algorithm has an input that is left over too, so walking
  // inputs from any of them must revisit a node: that closes a cycle.
  std::uint32_t v = 0;
  while (!remaining[v]) ++v;
  std::vector<std::uint32_t> path;
  std::vector<std::int64_t> pos(remaining.size(), -1);
  while (pos[v] < 0) {
    pos[v] = static_cast<std::int64_t>(path.size());
    path.push_back(v);
    for (std::uint32_t u : inputs_of(v)) {
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
  for (std::uint32_t n : cycle) msg += label_of(n) + " -> ";
  msg += label_of(cycle.front()) +
         " (only assign may feed a value back, into a variable for the next run)";
  throw GraphError(msg);
}

}  // namespace hetgraph::detail
