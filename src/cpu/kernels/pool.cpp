// Pooling kernels (NCHW; forward max pooling also channels-last, where assign_layouts keeps
// a convolution's layout through it), forward and backward, with reference implementations
// ending each list.
//
// Average pooling runs through oneDNN 2.6 on the plain tensors: its jit pools plain NCHW
// directly (transposing internally), and reordering to nChw16c and back costs more than it
// saves (64x48x64x64, 2x2: 7.5 ms plain against 2.5 ms blocked + 9 ms of reorders).
//
// Max pooling does not: oneDNN's max drops NaN (max over {NaN, 1, 2} gives 2, issue 11 class
// 9), and hetgraph propagates it as PyTorch and ONNX do. The kernel here walks each output row
// and, for each window tap, the output columns that tap lands in the image for, as one
// vectorised loop over the row: a blend that keeps the running maximum, its position, and the
// first NaN (a NaN wins over numbers and stays). Ties go to the first maximum in row-major
// window order, as before. When the plan differentiates the pooling, the forward kernel keeps
// each output's argmax (a flat position in its plane) and the backward kernel scatters the
// gradient through it, one plane per task (without such a forward kernel, the reference
// backward recomputes the argmaxes from x).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>

#include "compiler/geometry.hpp"
#include "cpu/dnnl_call.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/vmath.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// ---- average pooling through oneDNN ---------------------------------------------------------

struct PoolDims {
  memory::dims src, dst, strides, kernel, pad_l, pad_r;
};
// ceil_mode's last window reaches past the end padding: oneDNN sees that as more padding.
PoolDims pool_dims(const ImageGeom& g) {
  const Window2d& w = g.win;
  return {{g.n, g.c, g.h, g.w},
          {g.n, g.c, g.oh, g.ow},
          {w.stride[0], w.stride[1]},
          {w.kernel[0], w.kernel[1]},
          {w.pad_begin[0], w.pad_begin[1]},
          {w.pad_end[0] + w.ceil_extra(0, g.h), w.pad_end[1] + w.ceil_extra(1, g.w)}};
}

// oneDNN's include-padding divisor is the whole window: ONNX's (and PyTorch's) leaves out
// the part of ceil_mode's last window past the end padding.
const char* reject_avg(const KernelArgs& a) {
  const ImageGeom g = pool_geom(a.in_shape(a.node.op == OpKind::AvgPool2d ? 0 : 1), a.node.attrs);
  if (g.win.count_include_pad && (g.win.ceil_extra(0, g.h) > 0 || g.win.ceil_extra(1, g.w) > 0))
    return "count_include_pad with a ceil_mode window past the padding: oneDNN's divisor differs";
  return nullptr;
}

dnnl::algorithm avg_alg(const KernelArgs& a) {
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

std::unique_ptr<CpuKernel> make_avg_pool_fwd(const KernelArgs& a) {
  const PoolDims d = pool_dims(pool_geom(a.in_shape(0), a.node.attrs));
  const dnnl::algorithm alg = avg_alg(a);
  try {
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const auto pd = pool_fwd_pd(d, alg, dnnl::prop_kind::forward_inference);
      return DnnlCall(dnnl::pooling_forward(pd), pd.scratchpad_desc(),
                      {{DNNL_ARG_SRC, plain_md(d.src, tag::nchw), pd.src_desc(), a.in[0]},
                       {DNNL_ARG_DST, plain_md(d.dst, tag::nchw), pd.dst_desc(), a.out, true}});
    });
    return std::make_unique<DnnlKernel>(std::move(calls));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

std::unique_ptr<CpuKernel> make_avg_pool_bwd(const KernelArgs& a) {
  const PoolDims d = pool_dims(pool_geom(a.in_shape(1), a.node.attrs));
  const dnnl::algorithm alg = avg_alg(a);
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

// ---- max pooling --------------------------------------------------------------------------

/// The NaN-propagating window maximum, a plane at a time. Each plane is first copied into a
/// row-padded scratch copy (-inf beside every row, so that every window tap is a plain load,
/// vm::kLanes output columns at a time); rows outside the image are skipped. The running
/// maximum stays in a register across the window's taps.
struct MaxPool {
  // the even elements of two vectors, for stride 2
#if defined(__AVX512F__)
  static constexpr vm::vi kEven = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
#else
  static constexpr vm::vi kEven = {0, 2, 4, 6, 8, 10, 12, 14};
#endif
  static_assert(sizeof(kEven) == vm::kLanes * sizeof(std::int32_t));
  ImageGeom g;
  std::int64_t pw = 0;  // padded row length: left padding, the row, then -inf to the last tap

  explicit MaxPool(const ImageGeom& geom) : g(geom) {
    const Window2d& w = g.win;
    const std::int64_t chunks = (g.ow + vm::kLanes - 1) / vm::kLanes;
    // the last lane's last tap, and the second half of a stride-2 pair load after it
    const std::int64_t reach =
        chunks * vm::kLanes * w.stride[1] + (w.kernel[1] - 1) * w.dilation[1] + 1;
    pw = std::max(reach, w.pad_begin[1] + g.w);
  }
  std::size_t plane_floats() const { return static_cast<std::size_t>(g.h * pw); }

  // The padded copy of plane xp: column ix of row iy at iy * pw + pad_begin + ix.
  void pad(const float* xp, float* buf) const {
    const std::int64_t pl = g.win.pad_begin[1];
    constexpr float ninf = -std::numeric_limits<float>::infinity();
    for (std::int64_t iy = 0; iy < g.h; ++iy) {
      float* r = buf + iy * pw;
      std::fill(r, r + pl, ninf);
      std::memcpy(r + pl, xp + iy * g.w, static_cast<std::size_t>(g.w) * sizeof(float));
      std::fill(r + pl + g.w, r + pw, ninf);
    }
  }

  // y[ox] (and arg[ox], the flat position in the plane, when Arg) for output row oy from the
  // padded plane. A tap takes over when it beats the maximum or is the first NaN (a NaN is
  // never replaced); with Arg also when no in-image tap has been seen, and never from the
  // padding.
  template <bool Arg>
  void row(const float* buf, std::int64_t oy, float* y, std::int32_t* arg) const {
    using vm::vf;
    using vm::vi;
    constexpr std::int64_t L = vm::kLanes;
    const Window2d& w = g.win;
    const std::int64_t s = w.stride[1];
    vi lane;
    for (int i = 0; i < L; ++i) lane[i] = i;
    for (std::int64_t ox0 = 0; ox0 < g.ow; ox0 += L) {
      vf m = vm::splat(-std::numeric_limits<float>::infinity());
      vi at = vi{} - 1;
      vi nan = vi{};  // without Arg: NaNs seen, applied at the end
      for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
        const std::int64_t iy = oy * w.stride[0] - w.pad_begin[0] + ky * w.dilation[0];
        if (iy < 0 || iy >= g.h) continue;
        const float* r = buf + iy * pw;
        for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) {
          const float* base = r + ox0 * s + kx * w.dilation[1];
          vf v;
          if (s == 1) {
            v = vm::load(base);
          } else if (s == 2) {  // the even elements of two vectors
            v = __builtin_shuffle(vm::load(base), vm::load(base + L), kEven);
          } else {
            for (int i = 0; i < L; ++i) v[i] = base[i * s];
          }
          if constexpr (Arg) {
            vi take = (v > m) | ((v != v) & (m == m));
            // the image column of each lane; padding never takes over
            const vi ix = (lane + static_cast<std::int32_t>(ox0)) * static_cast<std::int32_t>(s) +
                           static_cast<std::int32_t>(kx * w.dilation[1] - w.pad_begin[1]);
            take = (take | (at < 0)) & (ix >= 0) & (ix < static_cast<std::int32_t>(g.w));
            at = take ? ix + static_cast<std::int32_t>(iy * g.w) : at;
            m = take ? v : m;
          } else {
            m = v > m ? v : m;
            nan |= v != v;
          }
        }
      }
      if constexpr (!Arg) m = nan ? vm::splat(std::numeric_limits<float>::quiet_NaN()) : m;
      const std::int64_t n = std::min(L, g.ow - ox0);
      for (std::int64_t i = 0; i < n; ++i) {
        y[ox0 + i] = m[i];
        if constexpr (Arg) arg[ox0 + i] = at[i];
      }
    }
  }

  // Planes [p0, p1): y and, when arg is not null, the argmaxes; buf holds one padded plane.
  void planes(std::int64_t p0, std::int64_t p1, const float* x, float* y, std::int32_t* arg,
              float* buf) const {
    for (std::int64_t p = p0; p < p1; ++p) {
      pad(x + p * g.h * g.w, buf);
      for (std::int64_t oy = 0; oy < g.oh; ++oy) {
        const std::int64_t o = (p * g.oh + oy) * g.ow;
        if (arg != nullptr)
          row<true>(buf, oy, y + o, arg + o);
        else
          row<false>(buf, oy, y + o, nullptr);
      }
    }
  }

  std::int64_t n_planes() const { return g.n * g.c; }
  std::int64_t plane_grain() const {
    return std::max<std::int64_t>(
        1, kParallelGrain / (g.oh * g.ow * g.win.kernel[0] * g.win.kernel[1]));
  }
};

// Whether a max_pool2d_grad in the plan reads this max_pool2d node as its forward output.
bool has_grad_reader(const KernelArgs& a) {
  for (const PlanNode& n : a.plan.nodes) {
    if (n.op == OpKind::MaxPool2dGrad && n.inputs.size() == 3 && n.inputs[2] == a.index)
      return true;
  }
  return false;
}

/// Forward max pooling; keeps the argmaxes when a backward node reads this one.
/// The padded planes live in the executor's scratch, one per thread of its team.
class MaxPoolFwdKernel final : public CpuKernel {
 public:
  MaxPoolFwdKernel(const KernelArgs& a, bool keep)
      : pool_(pool_geom(a.in_shape(0), a.node.attrs)),
        x_(a.in_f(0)),
        y_(a.out_f()),
        threads_(std::max({1, a.max_threads,
                           a.team_sizes.empty()
                               ? 1
                               : *std::max_element(a.team_sizes.begin(), a.team_sizes.end())})) {
    if (keep) arg_.resize(static_cast<std::size_t>(a.out_shape().numel()));
  }
  void run(const ExecCtx& ctx) override {
    std::int32_t* arg = arg_.empty() ? nullptr : arg_.data();
    auto* scratch = static_cast<float*>(ctx.scratch);
    parallel_for(ctx, pool_.n_planes(), pool_.plane_grain(), [&](std::int64_t b, std::int64_t e) {
      float* buf = scratch + static_cast<std::size_t>(omp_get_thread_num()) * pool_.plane_floats();
      pool_.planes(b, e, x_, y_, arg, buf);
    });
  }
  std::size_t scratch_bytes() const override {
    return static_cast<std::size_t>(threads_) * pool_.plane_floats() * sizeof(float);
  }
  /// Each output's argmax (flat in its plane) from the last run; null when not kept.
  const std::int32_t* argmax() const { return arg_.empty() ? nullptr : arg_.data(); }

 private:
  MaxPool pool_;
  const float* x_;
  float* y_;
  int threads_;
  std::vector<std::int32_t> arg_;
};

std::unique_ptr<CpuKernel> make_max_pool_fwd(const KernelArgs& a) {
  return std::make_unique<MaxPoolFwdKernel>(a, has_grad_reader(a));
}

bool channels_last(const KernelArgs& a) {
  return a.node.layout == ActivationLayout::nhwc;
}
const char* reject_channels_last(const KernelArgs& a) {
  return channels_last(a) ? "the value is channels-last (assign_layouts)" : nullptr;
}
const char* reject_plain(const KernelArgs& a) {
  return channels_last(a) ? nullptr : "the value is NCHW";
}

/// Forward max pooling of channels-last values (assign_layouts gives that layout only to
/// poolings no gradient reads): each output pixel is the maximum of its window's pixels, over
/// their contiguous channels four vectors at a time in registers (one vector, then one channel
/// at a time at the end). Same values as nan_max_rows: a NaN in a window wins (a number never
/// replaces it), -inf where a window holds only padding.
struct MaxPoolChannels {
  ImageGeom g;

  static vm::vf take(vm::vf m, vm::vf v) { return (v > m) | (v != v) ? v : m; }

  // Output pixel `out` from the window's in-image pixels `taps`.
  void pixel(const std::vector<const float*>& taps, float* out) const {
    constexpr std::int64_t L = vm::kLanes;
    const vm::vf ninf = vm::splat(-std::numeric_limits<float>::infinity());
    std::int64_t k = 0;
    for (; k + 4 * L <= g.c; k += 4 * L) {
      vm::vf m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
      for (const float* t : taps) {
        m0 = take(m0, vm::load(t + k));
        m1 = take(m1, vm::load(t + k + L));
        m2 = take(m2, vm::load(t + k + 2 * L));
        m3 = take(m3, vm::load(t + k + 3 * L));
      }
      vm::store(out + k, m0);
      vm::store(out + k + L, m1);
      vm::store(out + k + 2 * L, m2);
      vm::store(out + k + 3 * L, m3);
    }
    for (; k + L <= g.c; k += L) {
      vm::vf m = ninf;
      for (const float* t : taps) m = take(m, vm::load(t + k));
      vm::store(out + k, m);
    }
    for (; k < g.c; ++k) {
      float m = -std::numeric_limits<float>::infinity();
      for (const float* t : taps) m = (t[k] > m) | (t[k] != t[k]) ? t[k] : m;
      out[k] = m;
    }
  }

  // Output rows [b, e) of all images (row = n * oh + oy).
  void rows(std::int64_t b, std::int64_t e, const float* x, float* y) const {
    const Window2d& w = g.win;
    std::vector<const float*> taps;
    taps.reserve(static_cast<std::size_t>(w.kernel[0] * w.kernel[1]));
    for (std::int64_t row = b; row < e; ++row) {
      const std::int64_t n = row / g.oh, oy = row % g.oh;
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        taps.clear();
        for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
          const std::int64_t iy = oy * w.stride[0] - w.pad_begin[0] + ky * w.dilation[0];
          if (iy < 0 || iy >= g.h) continue;
          for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) {
            const std::int64_t ix = ox * w.stride[1] - w.pad_begin[1] + kx * w.dilation[1];
            if (ix >= 0 && ix < g.w) taps.push_back(x + ((n * g.h + iy) * g.w + ix) * g.c);
          }
        }
        pixel(taps, y + (row * g.ow + ox) * g.c);
      }
    }
  }
};

std::unique_ptr<CpuKernel> make_max_pool_nhwc(const KernelArgs& a) {
  const MaxPoolChannels pool{pool_geom(a.in_shape(0), a.node.attrs)};
  const ImageGeom& g = pool.g;
  const float* x = a.in_f(0);
  float* y = a.out_f();
  const std::int64_t grain =
      std::max<std::int64_t>(1, kParallelGrain / (g.ow * g.c * g.win.kernel[0] * g.win.kernel[1]));
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, g.n * g.oh, grain,
                 [&](std::int64_t b, std::int64_t e) { pool.rows(b, e, x, y); });
  });
}

// The argmaxes the forward node (input 2 of max_pool2d_grad) kept, if its kernel is ours.
const std::int32_t* kept_argmax(const KernelArgs& a) {
  if (a.kernels == nullptr) return nullptr;
  const std::uint32_t y = a.node.inputs[2];
  if (y >= a.kernels->size() || !(*a.kernels)[y]) return nullptr;
  const auto* k = dynamic_cast<const MaxPoolFwdKernel*>((*a.kernels)[y].get());
  return k != nullptr ? k->argmax() : nullptr;
}

const char* reject_max_pool_bwd(const KernelArgs& a) {
  if (kept_argmax(a) == nullptr) return "the forward node's kernel kept no argmaxes";
  return nullptr;
}

// (g, x, y) -> dx: each plane zeroed, then each output's gradient added at the argmax the
// forward kernel kept, in output order (planes are independent tasks: any team gives the
// same sums).
std::unique_ptr<CpuKernel> make_max_pool_bwd(const KernelArgs& a) {
  const ImageGeom g = pool_geom(a.in_shape(1), a.node.attrs);
  const MaxPool pool(g);
  const float* gy = a.in_f(0);
  float* dx = a.out_f();
  const std::int32_t* arg = kept_argmax(a);
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, pool.n_planes(), pool.plane_grain(), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t p = b; p < e; ++p) {
        float* dp = dx + p * g.h * g.w;
        std::fill(dp, dp + g.h * g.w, 0.0f);
        const std::int64_t o0 = p * g.oh * g.ow;
        for (std::int64_t o = o0; o < o0 + g.oh * g.ow; ++o) dp[arg[o]] += gy[o];
      }
    });
  });
}

// ---- references ---------------------------------------------------------------------------

struct PoolRef {
  ImageGeom g;
  // Calls f(iy, ix) for the in-image positions of output window (oy, ox), in row-major order.
  template <class F>
  void window(std::int64_t oy, std::int64_t ox, F&& f) const {
    const Window2d& w = g.win;
    for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
      const std::int64_t iy = oy * w.stride[0] - w.pad_begin[0] + ky * w.dilation[0];
      if (iy < 0 || iy >= g.h) continue;
      for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) {
        const std::int64_t ix = ox * w.stride[1] - w.pad_begin[1] + kx * w.dilation[1];
        if (ix >= 0 && ix < g.w) f(iy, ix);
      }
    }
  }
  // Divisor of an average window: its elements in the padded image (count_include_pad; not
  // past the end padding, where ceil_mode's last window may reach), or in the image.
  double divisor(std::int64_t oy, std::int64_t ox) const {
    const Window2d& w = g.win;
    if (w.count_include_pad) {
      auto span = [&](std::size_t d, std::int64_t o, std::int64_t in) {
        const std::int64_t lo = o * w.stride[d] - w.pad_begin[d];
        return std::min(lo + w.extent(static_cast<int>(d)), in + w.pad_end[d]) - lo;
      };
      return static_cast<double>(span(0, oy, g.h) * span(1, ox, g.w));
    }
    double n = 0;
    window(oy, ox, [&](std::int64_t, std::int64_t) { n += 1; });
    return n;
  }
  // Position (iy * w + ix) of a window's first NaN, else of its first maximum, over plane x
  // (its elements `step` floats apart: channels-last planes are strided).
  std::int64_t argmax(const float* x, std::int64_t oy, std::int64_t ox,
                      std::int64_t step = 1) const {
    std::int64_t best = -1;
    window(oy, ox, [&](std::int64_t iy, std::int64_t ix) {
      const float v = x[(iy * g.w + ix) * step];
      if (best >= 0 && std::isnan(x[best * step])) return;
      if (best < 0 || std::isnan(v) || v > x[best * step]) best = iy * g.w + ix;
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
  const bool last = channels_last(a);
  return make_kernel([=](const ExecCtx&) {
    const ImageGeom& g = r.g;
    // Plane p = (n, c): its first element and the distance between its elements, in x and y.
    const std::int64_t step = last ? g.c : 1;
    for (std::int64_t p = 0; p < r.planes(); ++p) {
      const std::int64_t n = p / g.c, c = p % g.c;
      const float* xp = last ? x + n * g.h * g.w * g.c + c : x + p * g.h * g.w;
      float* yp = last ? y + n * g.oh * g.ow * g.c + c : y + p * g.oh * g.ow;
      for (std::int64_t oy = 0; oy < g.oh; ++oy)
        for (std::int64_t ox = 0; ox < g.ow; ++ox) {
          float& out = yp[(oy * g.ow + ox) * step];
          if (max) {
            out = xp[r.argmax(xp, oy, ox, step) * step];
          } else {
            double s = 0;
            r.window(oy, ox,
                     [&](std::int64_t iy, std::int64_t ix) { s += xp[(iy * g.w + ix) * step]; });
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

void register_pool_kernels(KernelRegistry& r) {
  constexpr bool ref = true;
  r.add(OpKind::MaxPool2d, {"nan_max_channels", reject_plain, make_max_pool_nhwc});
  r.add(OpKind::MaxPool2d, {"nan_max_rows", reject_channels_last, make_max_pool_fwd});
  r.add(OpKind::MaxPool2d, {"reference", nullptr, make_pool_fwd_ref, ref});
  r.add(OpKind::AvgPool2d, {"dnnl_pool", reject_avg, make_avg_pool_fwd});
  r.add(OpKind::AvgPool2d, {"reference", nullptr, make_pool_fwd_ref, ref});
  r.add(OpKind::MaxPool2dGrad, {"argmax_scatter", reject_max_pool_bwd, make_max_pool_bwd});
  r.add(OpKind::MaxPool2dGrad, {"reference", nullptr, make_pool_bwd_ref, ref});
  r.add(OpKind::AvgPool2dGrad, {"dnnl_pool_bwd", reject_avg, make_avg_pool_bwd});
  r.add(OpKind::AvgPool2dGrad, {"reference", nullptr, make_pool_bwd_ref, ref});
}

}  // namespace hetgraph::detail::cpu
