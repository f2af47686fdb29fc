// SPDX-License-Identifier: Apache-2.0
// assign_layouts (issue 18): which values stay in the layout the CPU's convolutions compute
// in (PlanOptions::conv_layout: what oneDNN picks here, channels-last for its brgconv kernels
// on AVX-512 in oneDNN 2.6, else nChw16c or nChw8c; the layout search in GraphCompiler::compile
// plans a model once per layout oneDNN has fast kernels for and keeps the fastest), instead of
// plain NCHW. A convolution given
// plain memory reorders its image in and its result out at every call; between two convolutions
// both reorders are wasted. So a convolution's value is kept blocked when every reader is a
// convolution that reads it as its image or as its residual (fused_conv2d's sum post-op), on the
// same device, nothing fetches it, and its channels fill whole blocks (the blocked value then has
// the plain one's size: the memory planner sizes it as it is). Max pooling (inference: no
// gradient reads its argmaxes) and channel concat pass the layout through too (their CPU kernels
// read and write channels-last, and a value in blocks of B channels as N * C/B channels-last
// images of B channels: a pooling window is a loop over contiguous channels, a concat copies
// each pixel's channels, or each image's blocks, into its slice): googlenet's inception blocks
// then run without reorders (on AVX2, nChw8c: googlenet 0.80x the time it took with the
// layout stopping there, bench/history.md). Any other reader (average pooling, a graph output, a
// reshape) keeps the value plain: the reorder happens only where a consumer needs plain memory.
// Reductions over one spatial axis (keepdims) pass it through as well, and take it in while giving
// a plain result where that result has one pixel per channel (every layout is then the same
// memory): ONNX's GlobalAveragePool (two reduce_means, over W then H) reads the last
// convolution's value (or googlenet's last concat) as it is, and its [N, C, 1, 1] result goes on
// to Flatten and Gemm with no reorder anywhere.
//
// Average pooling and channel_affine (an inference BatchNormalization, and its relu, that could
// not fold into a convolution) pass it through too where the platform's kernels take it
// (Capabilities::passes_layout): DenseNet normalises every layer's concatenated input and
// average-pools between its blocks, and each of those reordered the block's values to NCHW and
// back (13% of its time at batch 8).
//
// Grouped and depthwise convolutions (PlanOptions::grouped_conv_layouts) keep the layout where
// the platform says its kernel for that layer takes it fast (Capabilities::
// grouped_conv_takes_layout; the CPU asks oneDNN for the layer's primitive in the layout). A
// MobileNetV2 block (1x1, depthwise 3x3, 1x1) otherwise reorders the depthwise layer's image
// to NCHW and back, and its result likewise: four passes over the block's largest values.
//
// Winograd (CompileOptions::winograd_convs, off by default: it costs memory): a platform's
// Winograd convolutions take one layout (Backend::winograd_layout; the CPU's, oneDNN 2.6's, take
// only nChw16c, and run 3x3 stride-1 layers 1.6-2.5x faster than its direct kernels here). Where
// such layers carry at least half of the convolution work and no channel concat needs the layout
// passed through (it does not pass through concat or pooling), the Winograd layout replaces the
// platform's and Plan::winograd tells the kernels to use them: a resnet qualifies, an inception
// net does not.
#include "compiler/plan.hpp"

namespace hetgraph::detail {

namespace {

bool convolution(const PlanNode& n) {
  if (n.op != OpKind::Conv2d && n.op != OpKind::FusedConv2d) return false;
  return window2d(n.attrs).groups == 1;
}

// A convolution that keeps `layout`: one group, or grouped where the platform takes it.
bool keeps_layout(const Plan& p, const PlanNode& n, ActivationLayout layout,
                  const Capabilities* grouped) {
  if (convolution(n)) return true;
  if (grouped == nullptr || (n.op != OpKind::Conv2d && n.op != OpKind::FusedConv2d)) return false;
  return grouped->grouped_conv_takes_layout(p, n, layout);
}

// Input k of convolution c: its image (0) or its residual (the last input of an accumulating
// fused_conv2d).
bool image_or_residual(const PlanNode& c, std::size_t k) {
  if (k == 0) return true;
  return c.op == OpKind::FusedConv2d && c.attrs.get<ConvEpilogue>().accumulate &&
         k + 1 == c.inputs.size();
}

// A reduction over one spatial axis of a 4-d value, keeping dims.
bool spatial_reduce(const PlanNode& n) {
  if (n.op != OpKind::ReduceMean && n.op != OpKind::ReduceSum && n.op != OpKind::ReduceMax)
    return false;
  if (n.type.shape.rank() != 4 || !n.attrs.keepdims || n.attrs.axis == kAllAxes) return false;
  const int a = n.attrs.axis < 0 ? n.attrs.axis + 4 : n.attrs.axis;
  return a == 2 || a == 3;
}

// A spatial reduction whose result has one pixel per channel: it may read channels-last and
// write plain (the same memory).
bool reduces_to_one_pixel(const PlanNode& n) {
  return spatial_reduce(n) && n.type.shape[2] * n.type.shape[3] == 1;
}

// Ops that keep their inputs' layout: max pooling no gradient reads and concat along
// channels, (`reductions`) reductions over a spatial axis, and average pooling and
// channel_affine where the platform's kernels take the layout (`through`).
bool passes_layout(const Plan& p, const PlanNode& n, std::uint32_t id, bool reductions,
                   ActivationLayout layout, const Capabilities* through) {
  if (n.type.shape.rank() != 4) return false;
  if (n.op == OpKind::Concat) return n.attrs.axis == 1;
  if (spatial_reduce(n)) return reductions;
  if (n.op == OpKind::AvgPool2d || n.op == OpKind::ChannelAffine)
    return through != nullptr && through->passes_layout(p, n, layout);
  if (n.op != OpKind::MaxPool2d) return false;
  for (const PlanNode& r : p.nodes) {
    if (r.op == OpKind::MaxPool2dGrad) {
      for (std::uint32_t in : r.inputs) {
        if (in == id) return false;
      }
    }
  }
  return true;
}

// Winograd's layers (in `layout`) carry at least half of the convolution work (in
// multiply-adds), and no concat joins channels.
bool winograd_pays(const Plan& p, ActivationLayout layout) {
  double all = 0.0, wino = 0.0;
  for (const PlanNode& n : p.nodes) {
    if (n.fused_into >= 0) continue;  // its work is its fused node's
    if (n.op == OpKind::Concat && n.type.shape.rank() == 4 && n.attrs.axis == 1) return false;
    if (!convolution(n)) continue;
    const Shape& w = p.nodes[n.inputs[1]].type.shape;
    const double macs =
        static_cast<double>(n.type.shape.numel()) * static_cast<double>(w[1] * w[2] * w[3]);
    all += macs;
    if (winograd_convolution(p, n, layout)) wino += macs;
  }
  return wino > 0.0 && wino >= 0.5 * all;
}

}  // namespace

bool winograd_convolution(const Plan& p, const PlanNode& n, ActivationLayout layout) {
  const int block = channel_block(layout);
  if (block <= 0 || !convolution(n)) return false;
  const Window2d& win = window2d(n.attrs);
  if (win.exact) return false;
  const Shape& w = p.nodes[n.inputs[1]].type.shape;  // [out, in, kh, kw]
  const std::array<std::int64_t, 2> one{1, 1};
  return w.rank() == 4 && w[2] == 3 && w[3] == 3 && win.stride == one && win.dilation == one &&
         w[0] % block == 0 && w[1] % block == 0;
}

double convolution_macs(const Plan& p) {
  double macs = 0.0;
  for (const PlanNode& n : p.nodes) {
    if (n.fused_into >= 0 || (n.op != OpKind::Conv2d && n.op != OpKind::FusedConv2d)) continue;
    const Shape& w = p.nodes[n.inputs[1]].type.shape;  // [out, in / groups, kh, kw]
    if (w.rank() != 4) continue;
    macs += static_cast<double>(n.type.shape.numel()) * static_cast<double>(w[1] * w[2] * w[3]);
  }
  return macs;
}

void assign_layouts(Plan& p, ActivationLayout layout, bool through_pool_concat,
                    ActivationLayout winograd_layout, const Capabilities* grouped,
                    const Capabilities* through_ops) {
  if (channel_block(layout) <= 0) return;
  if (channel_block(winograd_layout) > 0 && winograd_pays(p, winograd_layout)) {
    layout = winograd_layout;
    p.winograd = true;
    p.winograd_layout = winograd_layout;
  }
  const int block = channel_block(layout);
  // Pooling, concat and spatial reductions read blocks of channels as they read channels-last
  // pixels (their kernels see N * C/B images of B channels).
  const bool through_reductions = through_pool_concat;
  const std::size_t n = p.nodes.size();
  std::vector<std::vector<std::pair<std::uint32_t, std::size_t>>> readers(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.reads_input(k)) readers[node.inputs[k]].push_back({i, k});
    }
  }
  // Candidates first, then drop those a reader or an input rules out until nothing changes
  // (a pooling or concat is blocked only when its inputs are, and a value only when every
  // reader takes it blocked).
  std::vector<bool> through(n, false), blocked(n, false), conv(n, false);
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& c = p.nodes[i];
    conv[i] = c.storage == Storage::Computed && keeps_layout(p, c, layout, grouped);
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& v = p.nodes[i];
    if (v.storage != Storage::Computed || v.fetched || readers[i].empty()) continue;
    if (v.type.shape.rank() != 4 || v.type.shape[1] % block != 0) continue;
    through[i] =
        through_pool_concat && passes_layout(p, v, i, through_reductions, layout, through_ops);
    blocked[i] = conv[i] || through[i];
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!blocked[i]) continue;
      const PlanNode& v = p.nodes[i];
      bool ok = true;
      if (through[i]) {
        // Its values: every piece of a concat, a pooling's or channel_affine's image (the
        // latter's per-channel scale and shift are plain vectors).
        const std::size_t values = v.op == OpKind::Concat ? v.inputs.size() : 1;
        for (std::size_t k = 0; k < values; ++k) {
          const std::uint32_t in = v.inputs[k];
          ok = ok && blocked[in] && p.nodes[in].device == v.device;
        }
      }
      for (const auto& [r, k] : readers[i]) {
        const PlanNode& c = p.nodes[r];
        const bool as_conv = conv[r] && image_or_residual(c, k) && c.inputs[0] != c.inputs.back();
        const bool as_reduce = through_reductions && reduces_to_one_pixel(c);
        ok = ok && c.device == v.device && (as_conv || as_reduce || (through[r] && blocked[r]));
      }
      if (!ok) {
        blocked[i] = false;
        changed = true;
      }
    }
  }
  for (std::uint32_t i = 0; i < n; ++i)
    p.nodes[i].layout = blocked[i] ? layout : ActivationLayout::nchw;
}

}  // namespace hetgraph::detail
