// SPDX-License-Identifier: Apache-2.0
// Convolution kernels (NCHW), forward and backward, through oneDNN 2.6, with reference
// implementations ending each list. Pooling is in pool.cpp.
//
// Layouts. Tensors between nodes are plain NCHW (weights OIHW). oneDNN's direct convolutions
// are fastest on blocked layouts (nChw16c, OIhw16i16o): measured on this machine (1 thread,
// 64x16x32x32 * 16x16x3x3) the primitive on plain memory falls back to im2col + GEMM at
// 9.3 ms forward, 16.4 ms backward-data and 21.7 ms backward-weights, against 4.0, 3.0 and
// 3.3 ms blocked; 2-4x across the pathnet/inception shapes, while reordering the operands
// costs 10-25% of the blocked time. So a convolution node lets the primitive choose its
// layouts (format_tag::any) and reorders its plain operands in and its result out through the
// executor's scratch, in the same kernel: oneDNN's own recipe for a user with NCHW data.
//
// Primitives are made at compile time, one per team size the engine may use (TeamVariants),
// with user-mode scratchpads taken from the executor's scratch at run time.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "compiler/geometry.hpp"
#include "cpu/dnnl_call.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/kernel.hpp"
#include "cpu/kernels/winograd.hpp"
#include "cpu/parallel.hpp"
#include "hetgraph/error.hpp"
#include "util/env.hpp"

namespace hetgraph::detail::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// ---- convolution ----------------------------------------------------------------------------

// Grouped weights are oneDNN's 5-d [G, O/G, C/G, KH, KW] (goihw), the same memory as the
// plain [O, C/G, KH, KW] tensor (oihw) of one group.
struct ConvDims {
  memory::dims src, wei, bias, dst, strides, dilates, pad_l, pad_r;
  tag wei_tag;
};
ConvDims conv_dims(const ImageGeom& g) {
  const Window2d& w = g.win;
  const std::int64_t G = g.groups();
  return {{g.n, g.c, g.h, g.w},
          G == 1 ? memory::dims{g.oc, g.c, w.kernel[0], w.kernel[1]}
                 : memory::dims{G, g.oc_per_group(), g.c_per_group(), w.kernel[0], w.kernel[1]},
          {g.oc},
          {g.n, g.oc, g.oh, g.ow},
          {w.stride[0], w.stride[1]},
          {w.dilation[0] - 1, w.dilation[1] - 1},  // oneDNN counts the gaps
          {w.pad_begin[0], w.pad_begin[1]},
          {w.pad_end[0], w.pad_end[1]},
          G == 1 ? tag::oihw : tag::goihw};
}

// The geometry of a conv node or of one of its gradients, from its inputs' shapes;
// conv_transpose2d's is that of the convolution whose input gradient it computes.
ImageGeom conv_geom_of(const KernelArgs& a) {
  switch (a.node.op) {
    case OpKind::ConvTranspose2d:  // (x, w[, b])
      return conv_transpose_geom(a.in_shape(0), a.in_shape(1), a.node.attrs);
    case OpKind::Conv2dGradInput:  // (g, w, x)
      return conv_geom(a.in_shape(2), a.in_shape(1), a.node.attrs);
    case OpKind::Conv2dGradWeight:  // (g, x, w)
      return conv_geom(a.in_shape(1), a.in_shape(2), a.node.attrs);
    default:  // (x, w[, b])
      return conv_geom(a.in_shape(0), a.in_shape(1), a.node.attrs);
  }
}

dnnl::convolution_forward::primitive_desc conv_fwd_pd(
    const ConvDims& d, bool bias, dnnl::prop_kind prop,
    const dnnl::primitive_attr& attr = user_scratchpad(), const memory::desc* src = nullptr,
    const memory::desc* dst = nullptr, dnnl::algorithm alg = dnnl::algorithm::convolution_direct) {
  const memory::desc s = src ? *src : any_md(d.src), y = dst ? *dst : any_md(d.dst);
  if (bias) {
    return {{prop, alg, s, any_md(d.wei), plain_md(d.bias, tag::x), y, d.strides, d.dilates,
             d.pad_l, d.pad_r},
            attr,
            dnnl_engine()};
  }
  return {{prop, alg, s, any_md(d.wei), y, d.strides, d.dilates, d.pad_l, d.pad_r},
          attr,
          dnnl_engine()};
}

// A value in the layout assign_layouts gave it (PlanNode::layout).
// Whether a conv node reads or writes a blocked value (the reference kernels take none).
bool touches_blocked(const KernelArgs& a) {
  if (a.node.layout != ActivationLayout::nchw) return true;
  for (std::uint32_t i : a.node.inputs) {
    if (a.plan.nodes[i].layout != ActivationLayout::nchw) return true;
  }
  return false;
}

class FixedWeightsKernel final : public DnnlKernel {
 public:
  FixedWeightsKernel(TeamVariants<DnnlCall> calls, std::shared_ptr<FixedWeights> w)
      : DnnlKernel(std::move(calls)), weights_(std::move(w)) {}
  void run(const ExecCtx& ctx) override {
    weights_->refresh();
    DnnlKernel::run(ctx);
  }

 private:
  std::shared_ptr<FixedWeights> weights_;
};

// A forward convolution (plain or fused): x, w[, b] -> y, with `attr`'s post-ops; the
// residual of a sum post-op, when there is one, is loaded into the destination first.
std::unique_ptr<CpuKernel> make_conv_forward(
    const KernelArgs& a, bool bias, const void* residual, const dnnl::primitive_attr& attr,
    dnnl::algorithm alg = dnnl::algorithm::convolution_direct) {
  const ConvDims d = conv_dims(conv_geom_of(a));
  const memory::desc user_wei = plain_md(d.wei, d.wei_tag);
  std::shared_ptr<FixedWeights> fixed;
  const bool cache = a.host_writes != nullptr && fixed_between_runs(a.plan, a.node.inputs[1]);
  // Image and result blocked where assign_layouts says: the primitive takes them as they are.
  const ActivationLayout in_layout = a.plan.nodes[a.node.inputs[0]].layout;
  const ActivationLayout out_layout = a.node.layout;
  const memory::desc src_user = activation_md(d.src, in_layout);
  const memory::desc dst_user = activation_md(d.dst, out_layout);
  // A residual's own layout may differ from the result's (loaded through a reorder).
  const memory::desc residual_md =
      residual ? activation_md(d.dst, a.plan.nodes[a.node.inputs.back()].layout) : memory::desc();
  const bool src_fixed = in_layout != ActivationLayout::nchw;
  const bool dst_fixed = out_layout != ActivationLayout::nchw;
  // A grouped layer with one side in a layout (assign_layouts) computes the other side in it
  // too, reordered from or to plain memory here: oneDNN's fast grouped kernels want both in
  // one layout, and given a plain side as `any` it falls to its reference kernel
  // (regnet_y_400mf's 8-channel groups with their result going plain, 25x slower).
  const bool grouped = d.wei_tag == tag::goihw;
  const memory::desc src_prim =
      grouped && !src_fixed && dst_fixed ? activation_md(d.src, out_layout) : src_user;
  const memory::desc dst_prim =
      grouped && src_fixed && !dst_fixed ? activation_md(d.dst, in_layout) : dst_user;
  const bool src_given = src_fixed || (grouped && dst_fixed);
  const bool dst_given = dst_fixed || (grouped && src_fixed);
  try {
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto pd =
          conv_fwd_pd(d, bias, dnnl::prop_kind::forward_inference, attr,
                      src_given ? &src_prim : nullptr, dst_given ? &dst_prim : nullptr, alg);
      if (cache && !fixed && pd.weights_desc() != user_wei) {
        try {
          fixed = shared_fixed_weights(user_wei, pd.weights_desc(), a.in[1], a.host_writes);
        } catch (const dnnl::error&) {  // a reorder with a scratchpad: staged at each run
        }
      }
      const bool use_fixed = fixed && fixed->desc() == pd.weights_desc();
      std::vector<DnnlCall::Arg> args{
          {DNNL_ARG_SRC, src_user, pd.src_desc(), a.in[0]},
          use_fixed ? DnnlCall::Arg{DNNL_ARG_WEIGHTS, fixed->desc(), fixed->desc(), fixed->data()}
                    : DnnlCall::Arg{DNNL_ARG_WEIGHTS, user_wei, pd.weights_desc(), a.in[1]},
          {DNNL_ARG_DST, dst_user, pd.dst_desc(), a.out, true, residual, residual_md}};
      if (bias) args.push_back({DNNL_ARG_BIAS, plain_md(d.bias, tag::x), pd.bias_desc(), a.in[2]});
      return DnnlCall(dnnl::convolution_forward(pd), pd.scratchpad_desc(), args);
    });
    if (fixed) return std::make_unique<FixedWeightsKernel>(std::move(calls), std::move(fixed));
    return std::make_unique<DnnlKernel>(std::move(calls));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

std::unique_ptr<CpuKernel> make_conv_fwd(const KernelArgs& a) {
  return make_conv_forward(a, a.in.size() == 3, nullptr, user_scratchpad());
}

// Winograd (assign_layouts, Plan::winograd): a 3x3 stride-1 convolution whose image and result
// are nChw16c. oneDNN declines some (its own limits): the direct kernel follows in the list.
const char* reject_winograd(const KernelArgs& a) {
  if (!a.plan.winograd) return "the plan has no Winograd layout (CompileOptions::winograd_convs)";
  if (!winograd_convolution(a.plan, a.node, a.plan.winograd_layout))
    return "not a 3x3 stride-1 convolution of 16s";
  if (a.node.layout != ActivationLayout::nChw16c ||
      a.plan.nodes[a.node.inputs[0]].layout != ActivationLayout::nChw16c)
    return "image or result not nChw16c";
  return nullptr;
}
std::unique_ptr<CpuKernel> make_conv_fwd_winograd(const KernelArgs& a) {
  return make_conv_forward(a, a.in.size() == 3, nullptr, user_scratchpad(),
                           dnnl::algorithm::convolution_winograd);
}

// fused_conv2d's epilogue as oneDNN post-ops: the residual (sum), then the elementwise op with
// the parameters its node held (ConvEpilogue::leaky, clip).
dnnl::primitive_attr conv_post_ops(const Attrs& at) {
  const ConvEpilogue& e = at.get<ConvEpilogue>();
  dnnl::post_ops ops;
  if (e.accumulate) ops.append_sum(1.0f);
  if (e.has_op) {
    using alg = dnnl::algorithm;
    switch (e.op) {
      case OpKind::Relu:
        ops.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f);
        break;
      case OpKind::LeakyRelu:
        ops.append_eltwise(1.0f, alg::eltwise_relu, e.leaky.slope, 0.0f);
        break;
      case OpKind::Clip:
        ops.append_eltwise(1.0f, alg::eltwise_clip, e.clip.lo, e.clip.hi);
        break;
      case OpKind::Sigmoid:
        ops.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f);
        break;
      case OpKind::Silu:  // x * sigmoid(alpha x), alpha 1
        ops.append_eltwise(1.0f, alg::eltwise_swish, 1.0f, 0.0f);
        break;
      case OpKind::HardSwish:  // oneDNN 2.6: x * relu6(x + 3) / 6, ONNX's HardSwish
        ops.append_eltwise(1.0f, alg::eltwise_hardswish, 0.0f, 0.0f);
        break;
      default:
        throw dnnl::error(dnnl_unimplemented, "no post-op for this op");
    }
  }
  dnnl::primitive_attr a = user_scratchpad();
  a.set_post_ops(ops);
  return a;
}

// fused_conv2d(x, w[, b][, r]): one primitive with the epilogue as post-ops.
std::unique_ptr<CpuKernel> make_fused_conv_alg(const KernelArgs& a, dnnl::algorithm alg) {
  const ConvEpilogue& e = a.node.attrs.get<ConvEpilogue>();
  try {
    return make_conv_forward(a, e.bias, e.accumulate ? a.in.back() : nullptr,
                             conv_post_ops(a.node.attrs), alg);
  } catch (const dnnl::error&) {
    return nullptr;
  }
}
std::unique_ptr<CpuKernel> make_fused_conv(const KernelArgs& a) {
  return make_fused_conv_alg(a, dnnl::algorithm::convolution_direct);
}
std::unique_ptr<CpuKernel> make_fused_conv_winograd(const KernelArgs& a) {
  return make_fused_conv_alg(a, dnnl::algorithm::convolution_winograd);
}

/// conv_transpose2d: oneDNN's backward data, then the bias per output channel (one pass over
/// the output, split by channel planes).
class ConvTransposeKernel final : public DnnlKernel {
 public:
  ConvTransposeKernel(TeamVariants<DnnlCall> calls, const float* bias, float* y, std::int64_t n,
                      std::int64_t c, std::int64_t hw)
      : DnnlKernel(std::move(calls)), bias_(bias), y_(y), n_(n), c_(c), hw_(hw) {}
  void run(const ExecCtx& ctx) override {
    DnnlKernel::run(ctx);
    if (bias_ == nullptr) return;
    parallel_for(ctx, n_ * c_, std::max<std::int64_t>(1, kParallelGrain / hw_),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t p = b; p < e; ++p) {
                     float* row = y_ + p * hw_;
                     const float v = bias_[p % c_];
#pragma omp simd
                     for (std::int64_t i = 0; i < hw_; ++i) row[i] += v;
                   }
                 });
  }

 private:
  const float* bias_;
  float* y_;
  std::int64_t n_, c_, hw_;
};

// diff_src = conv2d_grad_input(diff_dst, weights, x-shape); conv_transpose2d(x, w[, b]) is the
// same computation with x as diff_dst.
std::unique_ptr<CpuKernel> make_conv_bwd_data(const KernelArgs& a) {
  const ImageGeom geom = conv_geom_of(a);
  const ConvDims d = conv_dims(geom);
  try {
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto hint = conv_fwd_pd(d, false, dnnl::prop_kind::forward_training);
      const dnnl::convolution_backward_data::primitive_desc pd(
          {dnnl::algorithm::convolution_direct, any_md(d.src), any_md(d.wei), any_md(d.dst),
           d.strides, d.dilates, d.pad_l, d.pad_r},
          user_scratchpad(), dnnl_engine(), hint);
      return DnnlCall(
          dnnl::convolution_backward_data(pd), pd.scratchpad_desc(),
          {{DNNL_ARG_DIFF_DST, plain_md(d.dst, tag::nchw), pd.diff_dst_desc(), a.in[0]},
           {DNNL_ARG_WEIGHTS, plain_md(d.wei, d.wei_tag), pd.weights_desc(), a.in[1]},
           {DNNL_ARG_DIFF_SRC, plain_md(d.src, tag::nchw), pd.diff_src_desc(), a.out, true}});
    });
    if (a.node.op == OpKind::ConvTranspose2d) {
      return std::make_unique<ConvTransposeKernel>(std::move(calls),
                                                   a.in.size() == 3 ? a.in_f(2) : nullptr,
                                                   a.out_f(), geom.n, geom.c, geom.h * geom.w);
    }
    return std::make_unique<DnnlKernel>(std::move(calls));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// diff_weights = conv2d_grad_weight(diff_dst, x, weights-shape)
std::unique_ptr<CpuKernel> make_conv_bwd_weights(const KernelArgs& a) {
  const ConvDims d = conv_dims(conv_geom_of(a));
  try {
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto hint = conv_fwd_pd(d, false, dnnl::prop_kind::forward_training);
      const dnnl::convolution_backward_weights::primitive_desc pd(
          {dnnl::algorithm::convolution_direct, any_md(d.src), any_md(d.wei), any_md(d.dst),
           d.strides, d.dilates, d.pad_l, d.pad_r},
          user_scratchpad(), dnnl_engine(), hint);
      return DnnlCall(dnnl::convolution_backward_weights(pd), pd.scratchpad_desc(),
                      {{DNNL_ARG_DIFF_DST, plain_md(d.dst, tag::nchw), pd.diff_dst_desc(), a.in[0]},
                       {DNNL_ARG_SRC, plain_md(d.src, tag::nchw), pd.src_desc(), a.in[1]},
                       {DNNL_ARG_DIFF_WEIGHTS, plain_md(d.wei, d.wei_tag), pd.diff_weights_desc(),
                        a.out, true}});
    });
    return std::make_unique<DnnlKernel>(std::move(calls));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// The bias gradient: per output channel, the sum of g over batch and pixels. Each channel is
// summed by one thread in a fixed order (float within an image plane in blocks, double
// across), so the result does not depend on the team size.
std::unique_ptr<CpuKernel> make_conv_bias_grad(const KernelArgs& a) {
  const Shape& s = a.in_shape(0);
  const std::int64_t n = s[0], o = s[1], hw = s[2] * s[3];
  const float* g = a.in_f(0);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, o, std::max<std::int64_t>(1, kParallelGrain / (n * hw)),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t c = b; c < e; ++c) {
                     double total = 0.0;
                     for (std::int64_t i = 0; i < n; ++i) {
                       const float* p = g + (i * o + c) * hw;
                       for (std::int64_t j0 = 0; j0 < hw; j0 += 4096) {
                         const std::int64_t j1 = std::min(hw, j0 + 4096);
                         float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                         for (std::int64_t j = j0; j < j1; ++j) sum += p[j];
                         total += sum;
                       }
                     }
                     out[c] = static_cast<float>(total);
                   }
                 });
  });
}

// ---- convolution references: direct loops, double accumulation --------------------------------

struct ConvRef {
  ImageGeom g;
  // Calls f(n, o, oy, ox, c, ky, kx, iy, ix) for every in-image tap of every output element;
  // output channel o sees the input channels c of its group.
  template <class F>
  void for_taps(F&& f) const {
    const Window2d& w = g.win;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t o = 0; o < g.oc; ++o)
        for (std::int64_t oy = 0; oy < g.oh; ++oy)
          for (std::int64_t ox = 0; ox < g.ow; ++ox)
            for (std::int64_t c = o / g.oc_per_group() * g.c_per_group();
                 c < (o / g.oc_per_group() + 1) * g.c_per_group(); ++c)
              for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
                const std::int64_t iy = oy * w.stride[0] - w.pad_begin[0] + ky * w.dilation[0];
                if (iy < 0 || iy >= g.h) continue;
                for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) {
                  const std::int64_t ix = ox * w.stride[1] - w.pad_begin[1] + kx * w.dilation[1];
                  if (ix >= 0 && ix < g.w) f(n, o, oy, ox, c, ky, kx, iy, ix);
                }
              }
  }
  std::int64_t xi(std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t x) const {
    return ((n * g.c + c) * g.h + y) * g.w + x;
  }
  // weights [O, C / G, KH, KW]: input channel c is c % (C / G) within its group
  std::int64_t wi(std::int64_t o, std::int64_t c, std::int64_t y, std::int64_t x) const {
    const std::int64_t cg = g.c_per_group();
    return ((o * cg + c % cg) * g.win.kernel[0] + y) * g.win.kernel[1] + x;
  }
  std::int64_t yi(std::int64_t n, std::int64_t o, std::int64_t y, std::int64_t x) const {
    return ((n * g.oc + o) * g.oh + y) * g.ow + x;
  }
};

std::unique_ptr<CpuKernel> make_conv_ref(const KernelArgs& a) {
  if (touches_blocked(a)) return nullptr;  // plain NCHW only
  const ConvRef r{conv_geom_of(a)};
  const float* x = a.in_f(0);
  const float* w = a.in_f(1);
  const float* b = a.in.size() == 3 ? a.in_f(2) : nullptr;
  float* y = a.out_f();
  const std::size_t n = static_cast<std::size_t>(a.out_shape().numel());
  return make_kernel([=](const ExecCtx&) {
    std::vector<double> acc(n, 0.0);
    r.for_taps([&](auto n_, auto o, auto oy, auto ox, auto c, auto ky, auto kx, auto iy, auto ix) {
      acc[static_cast<std::size_t>(r.yi(n_, o, oy, ox))] +=
          static_cast<double>(x[r.xi(n_, c, iy, ix)]) * w[r.wi(o, c, ky, kx)];
    });
    for (std::size_t i = 0; i < n; ++i) {
      const auto o = static_cast<std::int64_t>(i) / (r.g.oh * r.g.ow) % r.g.oc;
      y[i] = static_cast<float>(acc[i] + (b ? b[o] : 0.0f));
    }
  });
}

// The epilogue's elementwise op in double, as the unfused nodes' reference kernels compute it.
double epilogue_ref(const ConvEpilogue& e, double v) {
  if (!e.has_op) return v;
  switch (e.op) {
    case OpKind::Relu:
      return v > 0 ? v : 0.0;
    case OpKind::LeakyRelu:
      return v > 0 ? v : e.leaky.slope * v;
    case OpKind::Clip:
      return std::min<double>(std::max<double>(v, e.clip.lo), e.clip.hi);
    case OpKind::Silu:
      return v / (1.0 + std::exp(-v));
    case OpKind::HardSwish:
      return v * std::min(std::max(v / 6.0 + 0.5, 0.0), 1.0);
    default:  // sigmoid
      return 1.0 / (1.0 + std::exp(-v));
  }
}

std::unique_ptr<CpuKernel> make_fused_conv_ref(const KernelArgs& a) {
  if (touches_blocked(a)) return nullptr;  // plain NCHW only
  const ConvRef r{conv_geom_of(a)};
  const Attrs at = a.node.attrs;
  const ConvEpilogue e = at.get<ConvEpilogue>();
  const float* x = a.in_f(0);
  const float* w = a.in_f(1);
  const float* b = e.bias ? a.in_f(2) : nullptr;
  const float* res = e.accumulate ? static_cast<const float*>(a.in.back()) : nullptr;
  float* y = a.out_f();
  const std::size_t n = static_cast<std::size_t>(a.out_shape().numel());
  return make_kernel([=](const ExecCtx&) {
    std::vector<double> acc(n, 0.0);
    r.for_taps([&](auto n_, auto o, auto oy, auto ox, auto c, auto ky, auto kx, auto iy, auto ix) {
      acc[static_cast<std::size_t>(r.yi(n_, o, oy, ox))] +=
          static_cast<double>(x[r.xi(n_, c, iy, ix)]) * w[r.wi(o, c, ky, kx)];
    });
    for (std::size_t i = 0; i < n; ++i) {  // y may be res itself (in place): read it first
      const auto o = static_cast<std::int64_t>(i) / (r.g.oh * r.g.ow) % r.g.oc;
      const double v = acc[i] + (b ? b[o] : 0.0f) + (res ? res[i] : 0.0f);
      y[i] = static_cast<float>(epilogue_ref(e, v));
    }
  });
}

// Also conv_transpose2d (x, w[, b]): x in the role of the output gradient, plus the bias.
std::unique_ptr<CpuKernel> make_conv_bwd_data_ref(const KernelArgs& a) {
  const ConvRef r{conv_geom_of(a)};
  const float* gy = a.in_f(0);
  const float* w = a.in_f(1);
  const float* b = a.node.op == OpKind::ConvTranspose2d && a.in.size() == 3 ? a.in_f(2) : nullptr;
  float* dx = a.out_f();
  const std::size_t n = static_cast<std::size_t>(a.out_shape().numel());
  return make_kernel([=](const ExecCtx&) {
    std::vector<double> acc(n, 0.0);
    r.for_taps([&](auto n_, auto o, auto oy, auto ox, auto c, auto ky, auto kx, auto iy, auto ix) {
      acc[static_cast<std::size_t>(r.xi(n_, c, iy, ix))] +=
          static_cast<double>(gy[r.yi(n_, o, oy, ox)]) * w[r.wi(o, c, ky, kx)];
    });
    for (std::size_t i = 0; i < n; ++i) {
      const auto c = static_cast<std::int64_t>(i) / (r.g.h * r.g.w) % r.g.c;
      dx[i] = static_cast<float>(acc[i] + (b ? b[c] : 0.0f));
    }
  });
}

std::unique_ptr<CpuKernel> make_conv_bwd_weights_ref(const KernelArgs& a) {
  const ConvRef r{conv_geom_of(a)};
  const float* gy = a.in_f(0);
  const float* x = a.in_f(1);
  float* dw = a.out_f();
  const std::size_t n = static_cast<std::size_t>(a.out_shape().numel());
  return make_kernel([=](const ExecCtx&) {
    std::vector<double> acc(n, 0.0);
    r.for_taps([&](auto n_, auto o, auto oy, auto ox, auto c, auto ky, auto kx, auto iy, auto ix) {
      acc[static_cast<std::size_t>(r.wi(o, c, ky, kx))] +=
          static_cast<double>(gy[r.yi(n_, o, oy, ox)]) * x[r.xi(n_, c, iy, ix)];
    });
    for (std::size_t i = 0; i < n; ++i) dw[i] = static_cast<float>(acc[i]);
  });
}

std::unique_ptr<CpuKernel> make_conv_bias_grad_ref(const KernelArgs& a) {
  const Shape& s = a.in_shape(0);
  const std::int64_t n = s[0], o = s[1], hw = s[2] * s[3];
  const float* g = a.in_f(0);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t c = 0; c < o; ++c) {
      double t = 0.0;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < hw; ++j) t += g[(i * o + c) * hw + j];
      out[c] = static_cast<float>(t);
    }
  });
}

// The layer the probes below ask oneDNN about: a typical CNN layer, 64 -> 64 channels, 3x3,
// stride 1, 28x28 (also a layer assign_layouts would give Winograd).
ConvDims probe_layer() {
  return {{1, 64, 28, 28}, {64, 64, 3, 3}, {64},   {1, 64, 28, 28}, {1, 1},
          {0, 0},          {1, 1},         {1, 1}, tag::oihw};
}

}  // namespace

ActivationLayout conv_activation_layout() {
  static const ActivationLayout layout = [] {
    if (env_flag("HETGRAPH_CPU_REFERENCE")) return ActivationLayout::nchw;
    try {
      const ConvDims d = probe_layer();
      const auto pd = conv_fwd_pd(d, true, dnnl::prop_kind::forward_inference);
      for (const ActivationLayout l :
           {ActivationLayout::nhwc, ActivationLayout::nChw16c, ActivationLayout::nChw8c}) {
        if (pd.dst_desc() == activation_md(d.dst, l)) return l;
      }
    } catch (const dnnl::error&) {
    }
    return ActivationLayout::nchw;
  }();
  return layout;
}

namespace {

// Average pooling of a value in a blocked or channels-last layout (assign_layouts passes the
// layout through it where blocked_avg_pool_fast says): oneDNN's jit pooling reads and writes
// the layout as it is. Not where ONNX's divisor and oneDNN's differ (count_include_pad with a
// ceil_mode window past the padding).
dnnl::pooling_forward::primitive_desc blocked_avg_pool_pd(const ImageGeom& g, bool include_pad,
                                                          ActivationLayout in,
                                                          ActivationLayout out) {
  const PoolDims d = pool_dims(g);
  return {
      {dnnl::prop_kind::forward_inference,
       include_pad ? dnnl::algorithm::pooling_avg_include_padding
                   : dnnl::algorithm::pooling_avg_exclude_padding,
       activation_md(d.src, in), activation_md(d.dst, out), d.strides, d.kernel, d.pad_l, d.pad_r},
      user_scratchpad(),
      dnnl_engine()};
}

bool blocked_avg_pool_fast(const ImageGeom& g, bool include_pad, ActivationLayout l) {
  if (l == ActivationLayout::nchw) return false;
  if (include_pad && (g.win.ceil_extra(0, g.h) > 0 || g.win.ceil_extra(1, g.w) > 0)) return false;
  try {
    const std::string impl = blocked_avg_pool_pd(g, include_pad, l, l).impl_info_str();
    return impl.rfind("jit", 0) == 0;
  } catch (const dnnl::error&) {
    return false;
  }
}

const char* reject_blocked_avg_pool(const KernelArgs& a) {
  const ActivationLayout in = a.plan.nodes[a.node.inputs[0]].layout;
  if (a.node.layout == ActivationLayout::nchw || in != a.node.layout) return "a plain value";
  if (!blocked_avg_pool_fast(pool_geom(a.in_shape(0), a.node.attrs),
                             a.node.attrs.get<Window2d>().count_include_pad, in))
    return "oneDNN has no jit pooling for this layer in its layout";
  return nullptr;
}

std::unique_ptr<CpuKernel> make_blocked_avg_pool(const KernelArgs& a) {
  const ImageGeom g = pool_geom(a.in_shape(0), a.node.attrs);
  const PoolDims d = pool_dims(g);
  const bool include_pad = a.node.attrs.get<Window2d>().count_include_pad;
  const ActivationLayout l = a.node.layout;
  try {
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto pd = blocked_avg_pool_pd(g, include_pad, l, l);
      return DnnlCall(dnnl::pooling_forward(pd), pd.scratchpad_desc(),
                      {{DNNL_ARG_SRC, activation_md(d.src, l), pd.src_desc(), a.in[0]},
                       {DNNL_ARG_DST, activation_md(d.dst, l), pd.dst_desc(), a.out, true}});
    });
    return std::make_unique<DnnlKernel>(std::move(calls));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace

bool passes_layout(const Plan& p, const PlanNode& n, ActivationLayout layout) {
  if (layout == ActivationLayout::nchw) return false;
  if (n.op == OpKind::ChannelAffine) return true;  // its channels_last kernel (nn.cpp)
  if (n.op != OpKind::AvgPool2d) return false;
  return blocked_avg_pool_fast(pool_geom(p.nodes[n.inputs[0]].type.shape, n.attrs),
                               n.attrs.get<Window2d>().count_include_pad, layout);
}

std::uint64_t fixed_weight_reorders() {
  return FixedWeights::reorders();
}

std::vector<ActivationLayout> conv_layout_alternatives() {
  static const std::vector<ActivationLayout> alternatives = [] {
    std::vector<ActivationLayout> out;
    const ActivationLayout own = conv_activation_layout();
    if (own == ActivationLayout::nchw) return out;
    const ConvDims d = probe_layer();
    for (const ActivationLayout l :
         {ActivationLayout::nhwc, ActivationLayout::nChw16c, ActivationLayout::nChw8c}) {
      if (l == own) continue;
      try {
        const memory::desc src = activation_md(d.src, l), dst = activation_md(d.dst, l);
        const auto pd =
            conv_fwd_pd(d, true, dnnl::prop_kind::forward_inference, user_scratchpad(), &src, &dst);
        const std::string impl = pd.impl_info_str();
        if (impl.rfind("jit", 0) == 0 || impl.rfind("brg", 0) == 0) out.push_back(l);
      } catch (const dnnl::error&) {
      }
    }
    return out;
  }();
  return alternatives;
}

bool grouped_conv_takes_layout(const Plan& p, const PlanNode& n, ActivationLayout layout,
                               int max_team) {
  if (layout == ActivationLayout::nchw) return false;
  try {
    const ConvDims d = conv_dims(
        conv_geom(p.nodes[n.inputs[0]].type.shape, p.nodes[n.inputs[1]].type.shape, n.attrs));
    const memory::desc src = activation_md(d.src, layout), dst = activation_md(d.dst, layout);
    const bool fused = n.op == OpKind::FusedConv2d;
    const bool bias = fused ? n.attrs.get<ConvEpilogue>().bias : n.inputs.size() == 3;
    const dnnl::primitive_attr attr = fused ? conv_post_ops(n.attrs) : user_scratchpad();
    // oneDNN picks per team size (TeamVariants makes one primitive per size, 1 always): a
    // grouped layer it runs with brgconv on two threads can fall to its reference kernel on
    // one (regnet_y_400mf's 8-channel groups, 20x slower). Every size asked must be fast: 1,
    // the powers of two below the largest team, and that one.
    for (int t = 1;; t = std::min(2 * t, max_team)) {
      const TeamSize team(t);
      const auto pd = conv_fwd_pd(d, bias, dnnl::prop_kind::forward_inference, attr, &src, &dst);
      // oneDNN's fast kernels are jit (jit_dw, jit_uni, ...) or brgemm-based (brgconv,
      // brdgmm_dw); the rest (gemm, ref) are what a layout they do not suit falls back to.
      const std::string impl = pd.impl_info_str();
      if (impl.rfind("jit", 0) != 0 && impl.rfind("brg", 0) != 0 && impl.rfind("brdgmm", 0) != 0)
        return false;
      if (t >= max_team) return true;
    }
  } catch (const dnnl::error&) {
    return false;
  }
}

bool winograd_available() {
  static const bool available = [] {
    if (conv_activation_layout() == ActivationLayout::nchw) return false;
    try {  // as assign_layouts gives Winograd layers: nChw16c in and out
      const ConvDims d = probe_layer();
      const memory::desc src = activation_md(d.src, ActivationLayout::nChw16c),
                         dst = activation_md(d.dst, ActivationLayout::nChw16c);
      conv_fwd_pd(d, true, dnnl::prop_kind::forward_inference, user_scratchpad(), &src, &dst,
                  dnnl::algorithm::convolution_winograd);
      return true;
    } catch (const dnnl::error&) {
      return false;  // oneDNN 2.6 has Winograd kernels for AVX-512 only
    }
  }();
  return available;
}

void register_conv_kernels(KernelRegistry& r) {
  constexpr bool ref = true;
  r.add(OpKind::Conv2d, {"dnnl_conv_winograd", reject_winograd, make_conv_fwd_winograd});
  r.add(OpKind::Conv2d, {"winograd_f4x3", reject_winograd_f4x3, make_winograd_f4x3});
  r.add(OpKind::Conv2d, {"winograd_f2x3", reject_winograd_f2x3, make_winograd_f2x3});
  r.add(OpKind::Conv2d, {"dnnl_conv", nullptr, make_conv_fwd});
  r.add(OpKind::Conv2d, {"reference", nullptr, make_conv_ref, ref});
  r.add(OpKind::FusedConv2d,
        {"dnnl_conv_winograd_post_ops", reject_winograd, make_fused_conv_winograd});
  r.add(OpKind::FusedConv2d, {"winograd_f4x3", reject_winograd_f4x3, make_winograd_f4x3});
  r.add(OpKind::FusedConv2d, {"winograd_f2x3", reject_winograd_f2x3, make_winograd_f2x3});
  r.add(OpKind::FusedConv2d, {"dnnl_conv_post_ops", nullptr, make_fused_conv});
  r.add(OpKind::FusedConv2d, {"reference", nullptr, make_fused_conv_ref, ref});
  r.add(OpKind::Conv2dGradInput, {"dnnl_conv_bwd_data", nullptr, make_conv_bwd_data});
  r.add(OpKind::ConvTranspose2d, {"dnnl_conv_bwd_data", nullptr, make_conv_bwd_data});
  r.add(OpKind::ConvTranspose2d, {"reference", nullptr, make_conv_bwd_data_ref, ref});
  r.add(OpKind::Conv2dGradInput, {"reference", nullptr, make_conv_bwd_data_ref, ref});
  r.add(OpKind::Conv2dGradWeight, {"dnnl_conv_bwd_weights", nullptr, make_conv_bwd_weights});
  r.add(OpKind::Conv2dGradWeight, {"reference", nullptr, make_conv_bwd_weights_ref, ref});
  // Before the pooling kernels' own (register_pool_kernels runs later), which take plain values.
  r.add(OpKind::AvgPool2d, {"dnnl_pool_blocked", reject_blocked_avg_pool, make_blocked_avg_pool});
  r.add(OpKind::Conv2dGradBias, {"channel_sums", nullptr, make_conv_bias_grad});
  r.add(OpKind::Conv2dGradBias, {"reference", nullptr, make_conv_bias_grad_ref, ref});
}

}  // namespace hetgraph::detail::cpu
