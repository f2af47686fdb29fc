#include "compiler/graph_stats.hpp"

#include <algorithm>
#include <map>

#include "compiler/ops/window.hpp"

namespace hetgraph::detail {

// Heavy ops (the guideline paper's "compute-intensive or embedding operators"): products,
// convolutions forward and backward, and embedding lookups with their scatter-adds.
bool is_heavy(const PlanNode& n) {
  switch (n.op) {
    case OpKind::MatMul:
    case OpKind::Conv2d:
    case OpKind::Conv2dGradInput:
    case OpKind::Conv2dGradWeight:
    case OpKind::Embedding:
    case OpKind::EmbeddingGrad:
      return true;
    default:
      return false;
  }
}

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
  return s;
}

std::vector<double> static_costs(const Plan& p) {
  // One core: ~50 GFLOP/s on vectorised float work, ~10 GB/s of memory traffic, and a fixed
  // cost per kernel call. Only the ratios matter (they order the ready nodes).
  constexpr double kFlopsPerUs = 50e3, kBytesPerUs = 10e3, kCallUs = 0.3;
  std::vector<double> c(p.nodes.size(), 0.0);
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    const bool work = n.storage == Storage::Computed || (n.op == OpKind::Assign && !n.elided);
    if (!work) continue;
    const double out = static_cast<double>(n.type.shape.numel());
    double bytes = 4.0 * out, flops = 0.0;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      // A lookup reads only the rows it gathers, not its whole table.
      if (n.op == OpKind::Embedding && k == 0) continue;
      if (n.reads_input(k)) bytes += static_cast<double>(p.nodes[n.inputs[k]].type.bytes());
    }
    if (n.op == OpKind::Conv2d || n.op == OpKind::Conv2dGradInput ||
        n.op == OpKind::Conv2dGradWeight) {
      // Every variant does the forward's multiply-adds: 2 * N*O*OH*OW * C*KH*KW.
      const bool fwd = n.op == OpKind::Conv2d;
      const Shape& x =
          p.nodes[n.inputs[fwd ? 0 : (n.op == OpKind::Conv2dGradInput ? 2 : 1)]].type.shape;
      const Shape& w =
          p.nodes[n.inputs[fwd ? 1 : (n.op == OpKind::Conv2dGradInput ? 1 : 2)]].type.shape;
      const ImageGeom g = conv_geom(x, w, n.attrs);
      flops = 2.0 * static_cast<double>(g.n * g.oc * g.oh * g.ow) *
              static_cast<double>(g.c * g.win.kernel[0] * g.win.kernel[1]);
    } else if (n.op == OpKind::MatMul) {
      const Shape& a = p.nodes[n.inputs[0]].type.shape;
      const double k = static_cast<double>(n.attrs.trans_a ? a.dim(-2) : a.dim(-1));
      flops = 2.0 * out * k;
    } else {
      flops = out * op_def(n.op).flops_per_elem;
    }
    c[i] = kCallUs + std::max(flops / kFlopsPerUs, bytes / kBytesPerUs);
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
