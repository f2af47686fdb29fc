// assign_layouts (issue 18): which values stay in the layout the CPU's convolutions compute
// in (PlanOptions::conv_layout: what oneDNN picks here, channels-last for its brgconv kernels
// on AVX-512 in oneDNN 2.6, else nChw16c or nChw8c), instead of plain NCHW. A convolution given
// plain memory reorders its image in and its result out at every call; between two convolutions
// both reorders are wasted. So a convolution's value is kept blocked when every reader is a
// convolution that reads it as its image or as its residual (fused_conv2d's sum post-op), on the
// same device, nothing fetches it, and its channels fill whole blocks (the blocked value then has
// the plain one's size: the memory planner sizes it as it is). Any other reader (pooling, concat, a
// graph output) keeps the value plain: the reorder happens only where a consumer needs plain
// memory.
#include "compiler/plan.hpp"

namespace hetgraph::detail {

namespace {

bool convolution(const PlanNode& n) {
  if (n.op != OpKind::Conv2d && n.op != OpKind::FusedConv2d) return false;
  return window2d(n.attrs).groups == 1;
}

// Input k of convolution c: its image (0) or its residual (the last input of an accumulating
// fused_conv2d).
bool image_or_residual(const PlanNode& c, std::size_t k) {
  if (k == 0) return true;
  return c.op == OpKind::FusedConv2d && c.attrs.get<ConvEpilogue>().accumulate &&
         k + 1 == c.inputs.size();
}

}  // namespace

void assign_layouts(Plan& p, ActivationLayout layout) {
  const int block = channel_block(layout);
  if (block <= 0) return;
  const std::size_t n = p.nodes.size();
  std::vector<std::vector<std::pair<std::uint32_t, std::size_t>>> readers(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.reads_input(k)) readers[node.inputs[k]].push_back({i, k});
    }
  }
  std::vector<bool> blocked(n, false);
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& v = p.nodes[i];
    if (!convolution(v) || v.storage != Storage::Computed || v.fetched || readers[i].empty())
      continue;
    if (v.type.shape.rank() != 4 || v.type.shape[1] % block != 0) continue;
    bool ok = true;
    for (const auto& [r, k] : readers[i]) {
      const PlanNode& c = p.nodes[r];
      ok = ok && convolution(c) && image_or_residual(c, k) && c.device == v.device &&
           c.storage == Storage::Computed && c.inputs[0] != c.inputs.back();
    }
    blocked[i] = ok;
  }
  for (std::uint32_t i = 0; i < n; ++i)
    p.nodes[i].layout = blocked[i] ? layout : ActivationLayout::nchw;
}

}  // namespace hetgraph::detail
