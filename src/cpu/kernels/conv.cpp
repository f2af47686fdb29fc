// Convolution and pooling kernels (NCHW), forward and backward, through oneDNN 2.6, with
// reference implementations ending each list.
//
// Layouts. Tensors between nodes are plain NCHW (weights OIHW). oneDNN's direct convolutions
// are fastest on blocked layouts (nChw16c, OIhw16i16o): measured on this machine (1 thread,
// 64x16x32x32 * 16x16x3x3) the primitive on plain memory falls back to im2col + GEMM at
// 9.3 ms forward, 16.4 ms backward-data and 21.7 ms backward-weights, against 4.0, 3.0 and
// 3.3 ms blocked; 2-4x across the pathnet/inception shapes, while reordering the operands
// costs 10-25% of the blocked time. So a convolution node lets the primitive choose its
// layouts (format_tag::any) and reorders its plain operands in and its result out through the
// executor's scratch, in the same kernel: oneDNN's own recipe for a user with NCHW data.
// Pooling is the other way round: oneDNN's jit pools plain NCHW directly (transposing
// internally), and reordering to nChw16c and back costs more than it saves (64x48x64x64,
// 2x2: 7.5 ms plain against 2.5 ms blocked + 9 ms of reorders), so pooling runs on the plain
// tensors as they are.
//
// Max pooling keeps oneDNN's workspace (the argmax of each window, one byte per output) in
// its forward kernel when the plan holds a max_pool2d_grad of it; that backward kernel then
// reads it instead of searching the windows again. Without such a forward kernel (the
// reference, or forward-only graphs) the backward recomputes the argmax from x and y.
// Ties go to the first maximum in row-major window order, as in oneDNN.
//
// Primitives are made at compile time, one per team size the engine may use (TeamVariants),
// with user-mode scratchpads taken from the executor's scratch at run time.
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "compiler/geometry.hpp"
#include "cpu/dnnl_call.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// ---- convolution ----------------------------------------------------------------------------

struct ConvDims {
  memory::dims src, wei, bias, dst, strides, dilates, pad_l, pad_r;
};
ConvDims conv_dims(const ImageGeom& g) {
  const Window2d& w = g.win;
  return {{g.n, g.c, g.h, g.w},
          {g.oc, g.c, w.kernel[0], w.kernel[1]},
          {g.oc},
          {g.n, g.oc, g.oh, g.ow},
          {w.stride[0], w.stride[1]},
          {w.dilation[0] - 1, w.dilation[1] - 1},  // oneDNN counts the gaps
          {w.pad_begin[0], w.pad_begin[1]},
          {w.pad_end[0], w.pad_end[1]}};
}

// The geometry of a conv node or of one of its gradients, from its inputs' shapes.
ImageGeom conv_geom_of(const KernelArgs& a) {
  switch (a.node.op) {
    case OpKind::Conv2dGradInput:  // (g, w, x)
      return conv_geom(a.in_shape(2), a.in_shape(1), a.node.attrs);
    case OpKind::Conv2dGradWeight:  // (g, x, w)
      return conv_geom(a.in_shape(1), a.in_shape(2), a.node.attrs);
    default:  // (x, w[, b])
      return conv_geom(a.in_shape(0), a.in_shape(1), a.node.attrs);
  }
}

dnnl::convolution_forward::primitive_desc conv_fwd_pd(const ConvDims& d, bool bias,
                                                      dnnl::prop_kind prop) {
  const auto alg = dnnl::algorithm::convolution_direct;
  if (bias) {
    return {{prop, alg, any_md(d.src), any_md(d.wei), plain_md(d.bias, tag::x), any_md(d.dst),
             d.strides, d.dilates, d.pad_l, d.pad_r},
            user_scratchpad(),
            dnnl_engine()};
  }
  return {{prop, alg, any_md(d.src), any_md(d.wei), any_md(d.dst), d.strides, d.dilates, d.pad_l,
           d.pad_r},
          user_scratchpad(),
          dnnl_engine()};
}

std::unique_ptr<CpuKernel> make_conv_fwd(const KernelArgs& a) {
  const ConvDims d = conv_dims(conv_geom_of(a));
  const bool bias = a.in.size() == 3;
  try {
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto pd = conv_fwd_pd(d, bias, dnnl::prop_kind::forward_inference);
      std::vector<DnnlCall::Arg> args{
          {DNNL_ARG_SRC, plain_md(d.src, tag::nchw), pd.src_desc(), a.in[0]},
          {DNNL_ARG_WEIGHTS, plain_md(d.wei, tag::oihw), pd.weights_desc(), a.in[1]},
          {DNNL_ARG_DST, plain_md(d.dst, tag::nchw), pd.dst_desc(), a.out, true}};
      if (bias) args.push_back({DNNL_ARG_BIAS, plain_md(d.bias, tag::x), pd.bias_desc(), a.in[2]});
      return DnnlCall(dnnl::convolution_forward(pd), pd.scratchpad_desc(), args);
    });
    return std::make_unique<DnnlKernel>(std::move(calls));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// diff_src = conv2d_grad_input(diff_dst, weights, x-shape)
std::unique_ptr<CpuKernel> make_conv_bwd_data(const KernelArgs& a) {
  const ConvDims d = conv_dims(conv_geom_of(a));
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
           {DNNL_ARG_WEIGHTS, plain_md(d.wei, tag::oihw), pd.weights_desc(), a.in[1]},
           {DNNL_ARG_DIFF_SRC, plain_md(d.src, tag::nchw), pd.diff_src_desc(), a.out, true}});
    });
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
                       {DNNL_ARG_DIFF_WEIGHTS, plain_md(d.wei, tag::oihw), pd.diff_weights_desc(),
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
  // Calls f(n, o, oy, ox, c, ky, kx, iy, ix) for every in-image tap of every output element.
  template <class F>
  void for_taps(F&& f) const {
    const Window2d& w = g.win;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t o = 0; o < g.oc; ++o)
        for (std::int64_t oy = 0; oy < g.oh; ++oy)
          for (std::int64_t ox = 0; ox < g.ow; ++ox)
            for (std::int64_t c = 0; c < g.c; ++c)
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
  std::int64_t wi(std::int64_t o, std::int64_t c, std::int64_t y, std::int64_t x) const {
    return ((o * g.c + c) * g.win.kernel[0] + y) * g.win.kernel[1] + x;
  }
  std::int64_t yi(std::int64_t n, std::int64_t o, std::int64_t y, std::int64_t x) const {
    return ((n * g.oc + o) * g.oh + y) * g.ow + x;
  }
};

std::unique_ptr<CpuKernel> make_conv_ref(const KernelArgs& a) {
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

std::unique_ptr<CpuKernel> make_conv_bwd_data_ref(const KernelArgs& a) {
  const ConvRef r{conv_geom_of(a)};
  const float* gy = a.in_f(0);
  const float* w = a.in_f(1);
  float* dx = a.out_f();
  const std::size_t n = static_cast<std::size_t>(a.out_shape().numel());
  return make_kernel([=](const ExecCtx&) {
    std::vector<double> acc(n, 0.0);
    r.for_taps([&](auto n_, auto o, auto oy, auto ox, auto c, auto ky, auto kx, auto iy, auto ix) {
      acc[static_cast<std::size_t>(r.xi(n_, c, iy, ix))] +=
          static_cast<double>(gy[r.yi(n_, o, oy, ox)]) * w[r.wi(o, c, ky, kx)];
    });
    for (std::size_t i = 0; i < n; ++i) dx[i] = static_cast<float>(acc[i]);
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

// ---- pooling --------------------------------------------------------------------------------

struct PoolDims {
  memory::dims src, dst, strides, kernel, pad_l, pad_r;
};
PoolDims pool_dims(const ImageGeom& g) {
  const Window2d& w = g.win;
  return {
      {g.n, g.c, g.h, g.w},       {g.n, g.c, g.oh, g.ow},           {w.stride[0], w.stride[1]},
      {w.kernel[0], w.kernel[1]}, {w.pad_begin[0], w.pad_begin[1]}, {w.pad_end[0], w.pad_end[1]}};
}

dnnl::algorithm pool_alg(const KernelArgs& a) {
  const OpKind k = a.node.op;
  if (k == OpKind::MaxPool2d || k == OpKind::MaxPool2dGrad) return dnnl::algorithm::pooling_max;
  return a.node.attrs.get<Window2d>().count_include_pad
             ? dnnl::algorithm::pooling_avg_include_padding
             : dnnl::algorithm::pooling_avg_exclude_padding;
}

dnnl::pooling_forward::primitive_desc pool_fwd_pd(const PoolDims& d, dnnl::algorithm alg,
                                                  dnnl::prop_kind prop) {
  return {{prop, alg, plain_md(d.src, tag::nchw), plain_md(d.dst, tag::nchw), d.strides, d.kernel,
           d.pad_l, d.pad_r},
          user_scratchpad(),
          dnnl_engine()};
}

// Whether a max_pool2d_grad in the plan reads this max_pool2d node as its forward output.
bool has_workspace_reader(const KernelArgs& a) {
  for (const PlanNode& n : a.plan.nodes) {
    if (n.op == OpKind::MaxPool2dGrad && n.inputs.size() == 3 && n.inputs[2] == a.index)
      return true;
  }
  return false;
}

/// Forward pooling. For a max pooling that a backward node reads, it runs oneDNN's training
/// forward and keeps the workspace, with the layout of the variant that ran last.
class PoolFwdKernel final : public DnnlKernel {
 public:
  PoolFwdKernel(TeamVariants<DnnlCall> calls, std::vector<memory::desc> ws_mds,
                std::vector<std::byte> ws)
      : DnnlKernel(std::move(calls)), ws_mds_(std::move(ws_mds)), ws_(std::move(ws)) {}
  void run(const ExecCtx& ctx) override {
    const std::size_t k = calls_.index(ctx.nthreads);
    calls_.all()[k].second.run(ctx);
    last_ = static_cast<int>(k);
  }
  bool keeps_workspace() const { return !ws_.empty(); }
  const void* workspace() const { return ws_.data(); }
  /// Layout of the workspace the last run wrote (-1 before the first run).
  const memory::desc* last_workspace_desc() const {
    return last_ < 0 ? nullptr : &ws_mds_[static_cast<std::size_t>(last_)];
  }
  const std::vector<memory::desc>& workspace_descs() const { return ws_mds_; }

 private:
  std::vector<memory::desc> ws_mds_;  // per variant, in TeamVariants order
  std::vector<std::byte> ws_;
  int last_ = -1;
};

std::unique_ptr<CpuKernel> make_pool_fwd(const KernelArgs& a) {
  const PoolDims d = pool_dims(pool_geom(a.in_shape(0), a.node.attrs));
  const dnnl::algorithm alg = pool_alg(a);
  const bool keep = alg == dnnl::algorithm::pooling_max && has_workspace_reader(a);
  try {
    // Workspace descriptors first, to size the one buffer all variants share.
    std::vector<memory::desc> ws_mds;
    std::size_t ws_bytes = 0;
    TeamVariants<memory::desc> probe(a.team_sizes, [&](int) {
      return pool_fwd_pd(d, alg, dnnl::prop_kind::forward_training).workspace_desc();
    });
    for (const auto& [t, md] : probe.all()) {
      ws_mds.push_back(md);
      ws_bytes = std::max(ws_bytes, md.get_size());
    }
    std::vector<std::byte> ws(keep ? ws_bytes : 0);
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto pd = pool_fwd_pd(
          d, alg, keep ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference);
      std::vector<DnnlCall::Arg> args{
          {DNNL_ARG_SRC, plain_md(d.src, tag::nchw), pd.src_desc(), a.in[0]},
          {DNNL_ARG_DST, plain_md(d.dst, tag::nchw), pd.dst_desc(), a.out, true}};
      if (keep) {
        args.push_back({DNNL_ARG_WORKSPACE, pd.workspace_desc(), pd.workspace_desc(), ws.data()});
      }
      return DnnlCall(dnnl::pooling_forward(pd), pd.scratchpad_desc(), args);
    });
    return std::make_unique<PoolFwdKernel>(std::move(calls), std::move(ws_mds), std::move(ws));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// The forward kernel of a max_pool2d_grad's y input, when it kept a workspace.
const PoolFwdKernel* workspace_owner(const KernelArgs& a) {
  if (a.kernels == nullptr) return nullptr;
  const std::uint32_t y = a.node.inputs[2];
  if (y >= a.kernels->size() || !(*a.kernels)[y]) return nullptr;
  const auto* k = dynamic_cast<const PoolFwdKernel*>((*a.kernels)[y].get());
  return k != nullptr && k->keeps_workspace() ? k : nullptr;
}

const char* reject_max_pool_bwd(const KernelArgs& a) {
  if (workspace_owner(a) == nullptr) return "the forward node's kernel kept no oneDNN workspace";
  return nullptr;
}

/// Max pooling backward from the forward kernel's workspace.
class MaxPoolBwdKernel final : public DnnlKernel {
 public:
  MaxPoolBwdKernel(TeamVariants<DnnlCall> calls, std::vector<memory::desc> ws_mds,
                   const PoolFwdKernel* fwd, std::string label)
      : DnnlKernel(std::move(calls)),
        ws_mds_(std::move(ws_mds)),
        fwd_(fwd),
        label_(std::move(label)) {}
  void run(const ExecCtx& ctx) override {
    const std::size_t k = calls_.index(ctx.nthreads);
    const memory::desc* written = fwd_->last_workspace_desc();
    if (written == nullptr || !(*written == ws_mds_[k])) {
      throw PlatformError("node " + label_ +
                          ": the max_pool2d forward kernel wrote its workspace in another layout "
                          "than this backward kernel reads (different team sizes)");
    }
    calls_.all()[k].second.run(ctx);
  }

 private:
  std::vector<memory::desc> ws_mds_;
  const PoolFwdKernel* fwd_;
  std::string label_;
};

std::unique_ptr<CpuKernel> make_max_pool_bwd(const KernelArgs& a) {
  const PoolFwdKernel* fwd = workspace_owner(a);
  const PoolDims d = pool_dims(pool_geom(a.in_shape(1), a.node.attrs));
  try {
    std::vector<memory::desc> ws_mds;
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto hint =
          pool_fwd_pd(d, dnnl::algorithm::pooling_max, dnnl::prop_kind::forward_training);
      const dnnl::pooling_backward::primitive_desc pd(
          {dnnl::algorithm::pooling_max, plain_md(d.src, tag::nchw), plain_md(d.dst, tag::nchw),
           d.strides, d.kernel, d.pad_l, d.pad_r},
          user_scratchpad(), dnnl_engine(), hint);
      ws_mds.push_back(pd.workspace_desc());
      return DnnlCall(
          dnnl::pooling_backward(pd), pd.scratchpad_desc(),
          {{DNNL_ARG_DIFF_DST, plain_md(d.dst, tag::nchw), pd.diff_dst_desc(), a.in[0]},
           {DNNL_ARG_WORKSPACE, pd.workspace_desc(), pd.workspace_desc(), fwd->workspace()},
           {DNNL_ARG_DIFF_SRC, plain_md(d.src, tag::nchw), pd.diff_src_desc(), a.out, true}});
    });
    return std::make_unique<MaxPoolBwdKernel>(std::move(calls), std::move(ws_mds), fwd,
                                              a.node.label);
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

std::unique_ptr<CpuKernel> make_avg_pool_bwd(const KernelArgs& a) {
  const PoolDims d = pool_dims(pool_geom(a.in_shape(1), a.node.attrs));
  const dnnl::algorithm alg = pool_alg(a);
  try {
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto hint = pool_fwd_pd(d, alg, dnnl::prop_kind::forward_training);
      const dnnl::pooling_backward::primitive_desc pd(
          {alg, plain_md(d.src, tag::nchw), plain_md(d.dst, tag::nchw), d.strides, d.kernel,
           d.pad_l, d.pad_r},
          user_scratchpad(), dnnl_engine(), hint);
      return DnnlCall(
          dnnl::pooling_backward(pd), pd.scratchpad_desc(),
          {{DNNL_ARG_DIFF_DST, plain_md(d.dst, tag::nchw), pd.diff_dst_desc(), a.in[0]},
           {DNNL_ARG_DIFF_SRC, plain_md(d.src, tag::nchw), pd.diff_src_desc(), a.out, true}});
    });
    return std::make_unique<DnnlKernel>(std::move(calls));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// ---- pooling references ---------------------------------------------------------------------

struct PoolRef {
  ImageGeom g;
  // Calls f(iy, ix) for the in-image positions of output window (oy, ox), in row-major order.
  template <class F>
  void window(std::int64_t oy, std::int64_t ox, F&& f) const {
    const Window2d& w = g.win;
    for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
      const std::int64_t iy = oy * w.stride[0] - w.pad_begin[0] + ky;
      if (iy < 0 || iy >= g.h) continue;
      for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) {
        const std::int64_t ix = ox * w.stride[1] - w.pad_begin[1] + kx;
        if (ix >= 0 && ix < g.w) f(iy, ix);
      }
    }
  }
  // Divisor of an average window: the whole window, or its in-image elements.
  double divisor(std::int64_t oy, std::int64_t ox) const {
    if (g.win.count_include_pad) return static_cast<double>(g.win.kernel[0] * g.win.kernel[1]);
    double n = 0;
    window(oy, ox, [&](std::int64_t, std::int64_t) { n += 1; });
    return n;
  }
  // Position (iy * w + ix) of the first maximum of a window over the plane `x`.
  std::int64_t argmax(const float* x, std::int64_t oy, std::int64_t ox) const {
    std::int64_t best = -1;
    float m = -std::numeric_limits<float>::infinity();
    window(oy, ox, [&](std::int64_t iy, std::int64_t ix) {
      const float v = x[iy * g.w + ix];
      if (best < 0 || v > m) {
        m = v;
        best = iy * g.w + ix;
      }
    });
    return best;
  }
  std::int64_t planes() const { return g.n * g.c; }
};

std::unique_ptr<CpuKernel> make_pool_fwd_ref(const KernelArgs& a) {
  const PoolRef r{pool_geom(a.in_shape(0), a.node.attrs)};
  const bool max = a.node.op == OpKind::MaxPool2d;
  const float* x = a.in_f(0);
  float* y = a.out_f();
  return make_kernel([=](const ExecCtx&) {
    const ImageGeom& g = r.g;
    for (std::int64_t p = 0; p < r.planes(); ++p) {
      const float* xp = x + p * g.h * g.w;
      for (std::int64_t oy = 0; oy < g.oh; ++oy)
        for (std::int64_t ox = 0; ox < g.ow; ++ox) {
          float& out = y[(p * g.oh + oy) * g.ow + ox];
          if (max) {
            out = xp[r.argmax(xp, oy, ox)];
          } else {
            double s = 0;
            r.window(oy, ox, [&](std::int64_t iy, std::int64_t ix) { s += xp[iy * g.w + ix]; });
            out = static_cast<float>(s / r.divisor(oy, ox));
          }
        }
    }
  });
}

// max: (g, x, y), the argmax recomputed from x;  avg: (g, x).
std::unique_ptr<CpuKernel> make_pool_bwd_ref(const KernelArgs& a) {
  const PoolRef r{pool_geom(a.in_shape(1), a.node.attrs)};
  const bool max = a.node.op == OpKind::MaxPool2dGrad;
  const float* gy = a.in_f(0);
  const float* x = a.in_f(1);  // null for avg (shape only)
  float* dx = a.out_f();
  const std::size_t n = static_cast<std::size_t>(a.out_shape().numel());
  return make_kernel([=](const ExecCtx&) {
    const ImageGeom& g = r.g;
    std::vector<double> acc(n, 0.0);
    for (std::int64_t p = 0; p < r.planes(); ++p) {
      double* dp = acc.data() + p * g.h * g.w;
      for (std::int64_t oy = 0; oy < g.oh; ++oy)
        for (std::int64_t ox = 0; ox < g.ow; ++ox) {
          const double gv = gy[(p * g.oh + oy) * g.ow + ox];
          if (max) {
            dp[r.argmax(x + p * g.h * g.w, oy, ox)] += gv;
          } else {
            const double share = gv / r.divisor(oy, ox);
            r.window(oy, ox, [&](std::int64_t iy, std::int64_t ix) { dp[iy * g.w + ix] += share; });
          }
        }
    }
    for (std::size_t i = 0; i < n; ++i) dx[i] = static_cast<float>(acc[i]);
  });
}

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  constexpr bool ref = true;
  r.add(OpKind::Conv2d, {"dnnl_conv", nullptr, make_conv_fwd});
  r.add(OpKind::Conv2d, {"reference", nullptr, make_conv_ref, ref});
  r.add(OpKind::Conv2dGradInput, {"dnnl_conv_bwd_data", nullptr, make_conv_bwd_data});
  r.add(OpKind::Conv2dGradInput, {"reference", nullptr, make_conv_bwd_data_ref, ref});
  r.add(OpKind::Conv2dGradWeight, {"dnnl_conv_bwd_weights", nullptr, make_conv_bwd_weights});
  r.add(OpKind::Conv2dGradWeight, {"reference", nullptr, make_conv_bwd_weights_ref, ref});
  r.add(OpKind::Conv2dGradBias, {"channel_sums", nullptr, make_conv_bias_grad});
  r.add(OpKind::Conv2dGradBias, {"reference", nullptr, make_conv_bias_grad_ref, ref});
  r.add(OpKind::MaxPool2d, {"dnnl_pool", nullptr, make_pool_fwd});
  r.add(OpKind::MaxPool2d, {"reference", nullptr, make_pool_fwd_ref, ref});
  r.add(OpKind::AvgPool2d, {"dnnl_pool", nullptr, make_pool_fwd});
  r.add(OpKind::AvgPool2d, {"reference", nullptr, make_pool_fwd_ref, ref});
  r.add(OpKind::MaxPool2dGrad, {"dnnl_pool_bwd_workspace", reject_max_pool_bwd, make_max_pool_bwd});
  r.add(OpKind::MaxPool2dGrad, {"reference", nullptr, make_pool_bwd_ref, ref});
  r.add(OpKind::AvgPool2dGrad, {"dnnl_pool_bwd", nullptr, make_avg_pool_bwd});
  r.add(OpKind::AvgPool2dGrad, {"reference", nullptr, make_pool_bwd_ref, ref});
}

}  // namespace hetgraph::detail::cpu
