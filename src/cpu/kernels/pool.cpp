// SPDX-License-Identifier: Apache-2.0
// Pooling kernels (NCHW; forward max pooling also channels-last, where assign_layouts keeps
// a convolution's layout through it), forward and backward, with reference implementations
// ending each list.
//
// Average pooling runs through oneDNN 2.6 on the plain tensors where it has a jit kernel for
// them (AVX-512: it pools plain NCHW directly, transposing internally, and reordering to
// nChw16c and back costs more than it saves: 64x48x64x64, 2x2: 7.5 ms plain against 2.5 ms
// blocked + 9 ms of reorders). Elsewhere (AVX2) oneDNN falls back to generic loops, and the
// kernel here, on the same row-padded planes as max pooling, takes the node.
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
//
// Compiled once per code path (src/cpu/simd/code_path.hpp): vm:: vectors at its width.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <utility>

#include "compiler/geometry.hpp"
#include "cpu/dnnl_call.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/simd/code_path.hpp"
#include "cpu/simd/vmath.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// ---- average pooling through oneDNN ---------------------------------------------------------

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

dnnl::pooling_backward::primitive_desc pool_bwd_pd(const PoolDims& d, dnnl::algorithm alg) {
  const auto hint = pool_fwd_pd(d, alg, dnnl::prop_kind::forward_training);
  return {{alg, plain_md(d.src, tag::nchw), plain_md(d.dst, tag::nchw), d.strides, d.kernel,
           d.pad_l, d.pad_r},
          user_scratchpad(),
          dnnl_engine(),
          hint};
}

// oneDNN's include-padding divisor is the whole window: ONNX's (and PyTorch's) leaves out
// the part of ceil_mode's last window past the end padding. And oneDNN 2.6 pools plain NCHW
// with a jit kernel on AVX-512 only; on AVX2 it runs its generic `simple_nchw` loops, about
// 10x slower there than avg_rows (bench/results/2026-11-27-avg-pool-avx2-ab.txt).
template <bool Grad>
const char* reject_avg(const KernelArgs& a) {
  if (a.node.layout != ActivationLayout::nchw) return "the value is blocked (assign_layouts)";
  const ImageGeom g = pool_geom(a.in_shape(Grad ? 1 : 0), a.node.attrs);
  if (g.win.count_include_pad && (g.win.ceil_extra(0, g.h) > 0 || g.win.ceil_extra(1, g.w) > 0))
    return "count_include_pad with a ceil_mode window past the padding: oneDNN's divisor differs";
  try {
    const PoolDims d = pool_dims(g);
    const std::string_view impl =
        Grad ? pool_bwd_pd(d, avg_alg(a)).impl_info_str()
             : pool_fwd_pd(d, avg_alg(a), dnnl::prop_kind::forward_inference).impl_info_str();
    if (!impl.starts_with("jit")) return "oneDNN has no jit pooling of plain NCHW on this CPU";
  } catch (const dnnl::error&) {
    return "oneDNN has no such pooling";
  }
  return nullptr;
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
      const auto pd = pool_bwd_pd(d, alg);
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

// ---- NCHW planes in row-padded scratch ----------------------------------------------------

/// A plane of an NCHW pooling copied into scratch with each row padded on both sides, so that
/// every window tap of vm::kLanes output columns is a plain load; rows outside the image are
/// skipped by the callers. Max pooling pads with -inf, average pooling with 0.
struct PaddedPlane {
  // the even elements of two vectors, for stride 2
#if defined(__AVX512F__)
  static constexpr vm::vi kEven = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
#elif defined(__AVX__)
  static constexpr vm::vi kEven = {0, 2, 4, 6, 8, 10, 12, 14};
#else
  static constexpr vm::vi kEven = {0, 2, 4, 6};
#endif
  static_assert(sizeof(kEven) == vm::kLanes * sizeof(std::int32_t));
  ImageGeom g;
  std::int64_t pw = 0;  // padded row length: left padding, the row, then fill to the last tap

  explicit PaddedPlane(const ImageGeom& geom) : g(geom) {
    const Window2d& w = g.win;
    const std::int64_t chunks = (g.ow + vm::kLanes - 1) / vm::kLanes;
    // the last lane's last tap, and the second half of a stride-2 pair load after it
    const std::int64_t reach =
        chunks * vm::kLanes * w.stride[1] + (w.kernel[1] - 1) * w.dilation[1] + 1;
    pw = std::max(reach, w.pad_begin[1] + g.w);
  }
  std::size_t plane_floats() const { return static_cast<std::size_t>(g.h * pw); }

  // The padded copy of plane xp: column ix of row iy at iy * pw + pad_begin + ix.
  void pad(const float* xp, float* buf, float fill) const {
    const std::int64_t pl = g.win.pad_begin[1];
    for (std::int64_t iy = 0; iy < g.h; ++iy) {
      float* r = buf + iy * pw;
      std::fill(r, r + pl, fill);
      std::memcpy(r + pl, xp + iy * g.w, static_cast<std::size_t>(g.w) * sizeof(float));
      std::fill(r + pl + g.w, r + pw, fill);
    }
  }

  // The image row of output row oy's window row ky; -1 outside the image.
  std::int64_t window_row(std::int64_t oy, std::int64_t ky) const {
    const Window2d& w = g.win;
    const std::int64_t iy = oy * w.stride[0] - w.pad_begin[0] + ky * w.dilation[0];
    return iy < 0 || iy >= g.h ? -1 : iy;
  }
  // One tap for kLanes consecutive output columns, `base` at the first one's (stride s).
  // Stride 4 (M5's poolings, window 4): the even lanes of the even lanes of four vectors,
  // three shuffles where a lane at a time took 16 loads and inserts a vector (the padded row
  // reaches that far: chunks * kLanes * s floats past the first column).
  static vm::vf tap(const float* base, std::int64_t s) {
    constexpr std::int64_t L = vm::kLanes;
    if (s == 1) return vm::load(base);
    if (s == 2) return __builtin_shuffle(vm::load(base), vm::load(base + L), kEven);
    if (s == 4) {
      const vm::vf lo = __builtin_shuffle(vm::load(base), vm::load(base + L), kEven);
      const vm::vf hi = __builtin_shuffle(vm::load(base + 2 * L), vm::load(base + 3 * L), kEven);
      return __builtin_shuffle(lo, hi, kEven);
    }
    vm::vf v;
    for (int i = 0; i < L; ++i) v[i] = base[i * s];
    return v;
  }

  std::int64_t n_planes() const {
    return g.n * g.c;
  }
  std::int64_t plane_grain() const {
    return std::max<std::int64_t>(
        1, kParallelGrain / (g.oh * g.ow * g.win.kernel[0] * g.win.kernel[1]));
  }
};

/// Items split over the team, each thread with a buffer of plane_floats in the executor's
/// scratch: the planes of a padded-plane pooling (the buffer: one padded plane), or the output
/// rows of the channels-last max pooling (the buffer: a row of column maxima).
class PaddedPlaneKernel : public CpuKernel {
 public:
  PaddedPlaneKernel(const KernelArgs& a, std::size_t plane_floats, std::int64_t planes,
                    std::int64_t grain)
      : plane_floats_(plane_floats),
        planes_(planes),
        grain_(grain),
        threads_(std::max({1, a.max_threads,
                           a.team_sizes.empty()
                               ? 1
                               : *std::max_element(a.team_sizes.begin(), a.team_sizes.end())})) {}
  void run(const ExecCtx& ctx) override {
    auto* scratch = static_cast<float*>(ctx.scratch);
    parallel_for(ctx, planes_, grain_, [&](std::int64_t b, std::int64_t e) {
      planes(b, e, scratch + static_cast<std::size_t>(omp_get_thread_num()) * plane_floats_);
    });
  }
  std::size_t scratch_bytes() const override {
    return static_cast<std::size_t>(threads_) * plane_floats_ * sizeof(float);
  }

 protected:
  // Planes [b, e), with one padded plane at buf.
  virtual void planes(std::int64_t b, std::int64_t e, float* buf) = 0;

 private:
  std::size_t plane_floats_;
  std::int64_t planes_, grain_;
  int threads_;
};

// ---- max pooling --------------------------------------------------------------------------

/// The NaN-propagating window maximum, a plane at a time from its -inf-padded copy. The
/// running maximum stays in a register across the window's taps.
struct MaxPool : PaddedPlane {
  using PaddedPlane::PaddedPlane;

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
    // With Arg, each window column's image columns and in-image lanes, the same for every
    // window row: worked out once per vector of outputs when the window is at most kHoist wide.
    constexpr std::int64_t kHoist = 8;
    const bool hoist = Arg && w.kernel[1] <= kHoist;
    vi cols[kHoist], inside[kHoist];
    const auto column = [&](std::int64_t ox0, std::int64_t kx) {
      return (lane + static_cast<std::int32_t>(ox0)) * static_cast<std::int32_t>(s) +
             static_cast<std::int32_t>(kx * w.dilation[1] - w.pad_begin[1]);
    };
    for (std::int64_t ox0 = 0; ox0 < g.ow; ox0 += L) {
      vf m = vm::splat(-std::numeric_limits<float>::infinity());
      vi at = vi{} - 1;
      vi nan = vi{};  // without Arg: NaNs seen, applied at the end
      if (hoist) {
        for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) {
          cols[kx] = column(ox0, kx);
          inside[kx] = (cols[kx] >= 0) & (cols[kx] < static_cast<std::int32_t>(g.w));
        }
      }
      for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
        const std::int64_t iy = window_row(oy, ky);
        if (iy < 0) continue;
        const float* r = buf + iy * pw;
        const std::int32_t row_at = static_cast<std::int32_t>(iy * g.w);
        for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) {
          const vf v = tap(r + ox0 * s + kx * w.dilation[1], s);
          if constexpr (Arg) {
            vi take = (v > m) | ((v != v) & (m == m));
            // the image column of each lane; padding never takes over
            const vi ix = hoist ? cols[kx] : column(ox0, kx);
            const vi in = hoist ? inside[kx] : (ix >= 0) & (ix < static_cast<std::int32_t>(g.w));
            take = (take | (at < 0)) & in;
            at = take ? ix + row_at : at;
            m = take ? v : m;
          } else {
            m = v > m ? v : m;
            nan |= v != v;
          }
        }
      }
      if constexpr (!Arg) m = nan ? vm::splat(std::numeric_limits<float>::quiet_NaN()) : m;
      const std::int64_t n = std::min(L, g.ow - ox0);
      if (n == L) {  // whole vectors: one store each (lane by lane took as long as the taps)
        std::memcpy(y + ox0, &m, sizeof m);
        if constexpr (Arg) std::memcpy(arg + ox0, &at, sizeof at);
        continue;
      }
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
      pad(x + p * g.h * g.w, buf, -std::numeric_limits<float>::infinity());
      for (std::int64_t oy = 0; oy < g.oh; ++oy) {
        const std::int64_t o = (p * g.oh + oy) * g.ow;
        if (arg != nullptr)
          row<true>(buf, oy, y + o, arg + o);
        else
          row<false>(buf, oy, y + o, nullptr);
      }
    }
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
class MaxPoolFwdKernel final : public PaddedPlaneKernel {
 public:
  MaxPoolFwdKernel(const KernelArgs& a, const MaxPool& pool, bool keep)
      : PaddedPlaneKernel(a, pool.plane_floats(), pool.n_planes(), pool.plane_grain()),
        pool_(pool),
        x_(a.in_f(0)),
        y_(a.out_f()) {
    if (keep) arg_.resize(static_cast<std::size_t>(a.out_shape().numel()));
  }
  /// Each output's argmax (flat in its plane) from the last run; null when not kept.
  const std::int32_t* argmax() const { return arg_.empty() ? nullptr : arg_.data(); }

 private:
  void planes(std::int64_t b, std::int64_t e, float* buf) override {
    pool_.planes(b, e, x_, y_, arg_.empty() ? nullptr : arg_.data(), buf);
  }
  MaxPool pool_;
  const float* x_;
  float* y_;
  std::vector<std::int32_t> arg_;
};

std::unique_ptr<CpuKernel> make_max_pool_fwd(const KernelArgs& a) {
  return std::make_unique<MaxPoolFwdKernel>(a, MaxPool(pool_geom(a.in_shape(0), a.node.attrs)),
                                            has_grad_reader(a));
}

// Channels-last (NHWC) or in blocks of B channels (nChw8c, nChw16c): either way each pixel's
// channels, or a block of them, are contiguous (assign_layouts).
bool channels_last(const KernelArgs& a) {
  return a.node.layout != ActivationLayout::nchw;
}
const char* reject_channels_last(const KernelArgs& a) {
  return channels_last(a) ? "the value is channels-last or blocked (assign_layouts)" : nullptr;
}
const char* reject_plain(const KernelArgs& a) {
  return channels_last(a) ? nullptr : "the value is NCHW";
}
// A pooling's geometry over its value's memory as channels-last images: NHWC as it is; a value
// in blocks of B channels, [N, C/B, H, W, B], is N * C/B channels-last images of B channels.
ImageGeom channels_last_geom(const KernelArgs& a) {
  ImageGeom g = pool_geom(a.in_shape(0), a.node.attrs);
  const int block = channel_block(a.node.layout);
  if (block > 1) {
    g.n *= g.c / block;
    g.c = g.oc = block;
  }
  return g;
}

/// Forward max pooling of channels-last values (assign_layouts gives that layout, or blocks of
/// channels, only to poolings no gradient reads), an output row at a time and separably: the
/// maximum over the window's in-image rows of each input column first (the rows are contiguous
/// runs of w * c floats: one vector pass over all of them), then over each output pixel's
/// columns of that, one vector of channels at a time (then one channel at a time at the end;
/// the pixels whose window lies inside the image without bounds checks). Same values as
/// nan_max_rows: a window with a NaN gives the quiet NaN, -inf where a window holds only
/// padding. Separable, a 3x3 window takes 4 vector maxima per output (stride 1) instead of 8:
/// googlenet's blocked poolings (nChw8c: 8 channels per image) ran 2.2-5.3 GB/s before.
/// A row runs first without NaN handling (vmaxps alone: a tap is one instruction, against four
/// with take's blend), checking its inputs for NaNs on the way (one compare per two taps with
/// AVX); a row whose inputs hold one is done again the exact way. Both take the same maxima in
/// the same order, so a NaN-free row gets the same bits either way.
struct MaxPoolChannels {
  ImageGeom g;

  // v when it beats m or is a NaN (v > m ? v : m is one vmaxps, which keeps a NaN m)
  static vm::vf take(vm::vf m, vm::vf v) { return v != v ? v : (v > m ? v : m); }
  static float take(float m, float v) { return v != v ? v : (v > m ? v : m); }

  // dst[i] = the maximum of src[r][i] over the rows r < rows (rows > 0), in one pass.
  static void column_max(float* dst, const float* const* src, int rows, std::int64_t n) {
    constexpr std::int64_t L = vm::kLanes;
    std::int64_t i = 0;
    for (; i + L <= n; i += L) {
      vm::vf m = vm::load(src[0] + i);
      for (int r = 1; r < rows; ++r) m = take(m, vm::load(src[r] + i));
      vm::store(dst + i, m);
    }
    for (; i < n; ++i) {
      float m = src[0][i];
      for (int r = 1; r < rows; ++r) m = take(m, src[r][i]);
      dst[i] = m;
    }
  }

  // Lanes where a or b is a NaN (all bits set).
  static vm::vi unordered(vm::vf a, vm::vf b) {
#if defined(__AVX__) && !defined(__AVX512F__)
    static_assert(vm::kLanes == 8);
    return reinterpret_cast<vm::vi>(__builtin_ia32_cmpps256(a, b, 3));  // _CMP_UNORD_Q
#else
    return (a != a) | (b != b);
#endif
  }

  // column_max without NaN handling (R > 0: rows known at compile time); false when an input
  // is a NaN, and then dst is not the exact maximum.
  template <int R>
  static bool column_max_fast(float* dst, const float* const* src, int rows, std::int64_t n) {
    constexpr std::int64_t L = vm::kLanes;
    const int taps = R > 0 ? R : rows;
    vm::vi nan{};
    std::int64_t i = 0;
    for (; i + L <= n; i += L) {
      vm::vf m = vm::load(src[0] + i);
      int r = 1;
      for (; r + 1 < taps; r += 2) {
        const vm::vf v = vm::load(src[r] + i), u = vm::load(src[r + 1] + i);
        nan |= unordered(v, u);
        m = v > m ? v : m;
        m = u > m ? u : m;
      }
      if (r < taps) {
        const vm::vf v = vm::load(src[r] + i);
        nan |= unordered(m, v);  // m is a NaN only where the first tap is
        m = v > m ? v : m;
      } else {
        nan |= m != m;  // the first tap, unchecked so far where the taps paired up
      }
      vm::store(dst + i, m);
    }
    bool any = false;
    for (int l = 0; l < L; ++l) any |= nan[l] != 0;
    for (; i < n; ++i) {
      float m = src[0][i];
      any |= m != m;
      for (int r = 1; r < taps; ++r) {
        const float v = src[r][i];
        any |= v != v;
        m = v > m ? v : m;
      }
      dst[i] = m;
    }
    return !any;
  }
  static bool column_max_fast(float* dst, const float* const* src, int rows, std::int64_t n) {
    switch (rows) {
      case 2:
        return column_max_fast<2>(dst, src, rows, n);
      case 3:
        return column_max_fast<3>(dst, src, rows, n);
      default:
        return column_max_fast<0>(dst, src, rows, n);
    }
  }

  // Output rows [b, e) of all images (row = n * oh + oy); col holds w * c floats.
  void rows(std::int64_t b, std::int64_t e, const float* x, float* y, float* col) const {
    const Window2d& w = g.win;
    const std::int64_t run = g.w * g.c;
    for (std::int64_t row = b; row < e; ++row) {
      const std::int64_t n = row / g.oh, oy = row % g.oh;
      // the window's in-image rows, taken kMaxRows at a time
      constexpr int kMaxRows = 16;
      const float* src[kMaxRows];
      int rows = 0;
      bool folded = false;
      for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
        const std::int64_t iy = oy * w.stride[0] - w.pad_begin[0] + ky * w.dilation[0];
        if (iy < 0 || iy >= g.h) continue;
        if (rows == kMaxRows) {
          // A taller window: the rows so far folded into col, which leads the next fold (each
          // element of col is read before it is written).
          column_max(col, src, rows, run);
          src[0] = col;
          rows = 1;
          folded = true;
        }
        src[rows++] = x + (n * g.h + iy) * run;
      }
      float* out = y + row * g.ow * g.c;
      if (!folded && rows > 0 && column_max_fast(col, src, rows, run)) {
        row_windows<false>(col, out);
        continue;
      }
      if (rows > 0) {
        column_max(col, src, rows, run);
      } else {
        std::fill(col, col + run, -std::numeric_limits<float>::infinity());
      }
      row_windows<true>(col, out);
    }
  }

  // One output row from the column maxima in col; Exact: with NaN handling.
  template <bool Exact>
  void row_windows(const float* col, float* out) const {
    const Window2d& w = g.win;
    const std::int64_t s = w.stride[1], d = w.dilation[1], K = w.kernel[1];
    // Outputs [lo, hi) have every window column in the image: no bounds, and (3 wide,
    // contiguous: googlenet's inception branches) the taps unrolled.
    const std::int64_t lo = std::min(g.ow, (w.pad_begin[1] + s - 1) / s);
    const std::int64_t last = g.w - 1 - (K - 1) * d + w.pad_begin[1];  // the largest start + pad
    const std::int64_t hi = last < 0 ? lo : std::clamp(last / s + 1, lo, g.ow);
    if (K == 3 && d == 1) {
      for (std::int64_t ox = lo; ox < hi; ++ox) {
        window<3, Exact>(col + (ox * s - w.pad_begin[1]) * g.c, 3, 1, out + ox * g.c);
      }
    } else {
      for (std::int64_t ox = lo; ox < hi; ++ox) {
        window<0, Exact>(col + (ox * s - w.pad_begin[1]) * g.c, K, d, out + ox * g.c);
      }
    }
    // the outputs whose window reaches into the padding
    const auto edge = [&](std::int64_t ox) {
      const std::int64_t start = ox * s - w.pad_begin[1];
      // the window's in-image columns: ix = start + kx * d for kx in [k0, k1)
      std::int64_t k0 = 0, k1 = K;
      while (k0 < k1 && start + k0 * d < 0) ++k0;
      while (k1 > k0 && start + (k1 - 1) * d >= g.w) --k1;
      if (k0 == k1) {  // only padding
        std::fill(out + ox * g.c, out + (ox + 1) * g.c, -std::numeric_limits<float>::infinity());
        return;
      }
      // (the pointer at the first in-image column: column `start` may lie before col)
      window<0, Exact>(col + (start + k0 * d) * g.c, k1 - k0, d, out + ox * g.c);
    };
    for (std::int64_t ox = 0; ox < lo; ++ox) edge(ox);
    for (std::int64_t ox = hi; ox < g.ow; ++ox) edge(ox);
  }

  // One output pixel: the maximum over window columns [0, n) of c floats each, d columns
  // apart, from base (n > 0; N > 0 is n known at compile time, for an unrolled loop). The
  // maximum runs without NaN handling (v > m ? v : m: one vmaxps) and the NaNs seen are kept
  // aside, so only the vmaxps is on the chain from tap to tap (take's blend would be too). A
  // window with a NaN gives the quiet NaN, as nan_max_rows does. Without Exact, the NaNs are
  // not looked for (row_windows<false>: the row's inputs hold none).
  template <int N, bool Exact>
  void window(const float* base, std::int64_t n, std::int64_t d, float* out) const {
    constexpr std::int64_t L = vm::kLanes;
    const std::int64_t c = g.c, step = d * c;
    const std::int64_t taps = N > 0 ? N : n;
    std::int64_t k = 0;
    for (; k + L <= c; k += L) {
      vm::vf m = vm::load(base + k);
      vm::vi nan = m != m;
      for (std::int64_t kx = 1; kx < taps; ++kx) {
        const vm::vf v = vm::load(base + kx * step + k);
        m = v > m ? v : m;
        nan |= v != v;
      }
      if constexpr (Exact) m = nan ? vm::splat(std::numeric_limits<float>::quiet_NaN()) : m;
      vm::store(out + k, m);
    }
    for (; k < c; ++k) {
      float m = base[k];
      bool nan = m != m;
      for (std::int64_t kx = 1; kx < taps; ++kx) {
        const float v = base[kx * step + k];
        m = v > m ? v : m;
        nan |= v != v;
      }
      out[k] = Exact && nan ? std::numeric_limits<float>::quiet_NaN() : m;
    }
  }
};

class MaxPoolChannelsKernel final : public PaddedPlaneKernel {
 public:
  MaxPoolChannelsKernel(const KernelArgs& a, const MaxPoolChannels& pool)
      : PaddedPlaneKernel(a, static_cast<std::size_t>(pool.g.w * pool.g.c), pool.g.n * pool.g.oh,
                          std::max<std::int64_t>(
                              1, kParallelGrain / (pool.g.ow * pool.g.c * pool.g.win.kernel[0] *
                                                   pool.g.win.kernel[1]))),
        pool_(pool),
        x_(a.in_f(0)),
        y_(a.out_f()) {}

 private:
  void planes(std::int64_t b, std::int64_t e, float* buf) override {
    pool_.rows(b, e, x_, y_, buf);
  }
  MaxPoolChannels pool_;
  const float* x_;
  float* y_;
};

std::unique_ptr<CpuKernel> make_max_pool_nhwc(const KernelArgs& a) {
  return std::make_unique<MaxPoolChannelsKernel>(a, MaxPoolChannels{channels_last_geom(a)});
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

// ---- average pooling of our own ------------------------------------------------------------

/// The window mean, a plane at a time, divided by the window's element count. That count is a
/// product, the window's rows times its columns (in the image, or in the padded image up to the
/// end padding with count_include_pad), so one count per output row and one per column serve
/// every window. Two ways through a plane, both in a fixed order (any team gives the same sums):
/// - rows: from the plane's zero-padded copy, the taps summed kLanes output columns at a time
///   in a register; the gradient scatters each output's share back over the same taps into a
///   zeroed padded plane. For output rows that fill vectors at stride 1 or 2.
/// - windows: each window's in-image columns of each of its rows straight from the plane, a
///   vector at a time where a row holds one. For few wide windows (global pools, whose one
///   output would use one lane of eight) and strides past 2 (the rows way gathers each tap).
struct AvgPool : PaddedPlane {
  std::vector<float> rows_n, cols_n;  // the counts; cols_n runs to a whole last vector
  bool windows = false;

  explicit AvgPool(const ImageGeom& geom) : PaddedPlane(geom) {
    windows = (g.win.stride[1] > 2 || 2 * g.ow <= vm::kLanes) && g.win.dilation[0] == 1 &&
              g.win.dilation[1] == 1;
    const Window2d& w = g.win;
    auto counts = [&](std::size_t d, std::int64_t outs, std::int64_t in, std::int64_t size) {
      std::vector<float> n(static_cast<std::size_t>(size), 1.0f);
      for (std::int64_t o = 0; o < outs; ++o) {
        const std::int64_t lo = o * w.stride[d] - w.pad_begin[d];
        std::int64_t k = 0;
        if (w.count_include_pad) {
          k = std::min(lo + w.extent(static_cast<int>(d)), in + w.pad_end[d]) - lo;
        } else {
          for (std::int64_t t = 0; t < w.kernel[d]; ++t)
            k += lo + t * w.dilation[d] >= 0 && lo + t * w.dilation[d] < in;
        }
        n[static_cast<std::size_t>(o)] = static_cast<float>(k);
      }
      return n;
    };
    rows_n = counts(0, g.oh, g.h, g.oh);
    cols_n = counts(1, g.ow, g.w, (g.ow + vm::kLanes - 1) / vm::kLanes * vm::kLanes);
  }

  vm::vf count(std::int64_t oy, std::int64_t ox0) const {
    return vm::load(cols_n.data() + ox0) * rows_n[static_cast<std::size_t>(oy)];
  }

  // Output row oy of the plane padded in buf.
  void row(const float* buf, std::int64_t oy, float* y) const {
    constexpr std::int64_t L = vm::kLanes;
    const Window2d& w = g.win;
    const std::int64_t s = w.stride[1];
    for (std::int64_t ox0 = 0; ox0 < g.ow; ox0 += L) {
      vm::vf sum{};
      for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
        const std::int64_t iy = window_row(oy, ky);
        if (iy < 0) continue;
        const float* r = buf + iy * pw + ox0 * s;
        for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) sum += tap(r + kx * w.dilation[1], s);
      }
      const vm::vf mean = sum / count(oy, ox0);
      if (ox0 + L <= g.ow) {
        vm::store(y + ox0, mean);
      } else {
        for (std::int64_t i = 0; i < g.ow - ox0; ++i) y[ox0 + i] = mean[i];
      }
    }
  }

  // The in-image columns [lo, hi) of output column ox's window (windows: no dilation).
  std::pair<std::int64_t, std::int64_t> span(std::int64_t ox) const {
    const std::int64_t lo = ox * g.win.stride[1] - g.win.pad_begin[1];
    return {std::max<std::int64_t>(lo, 0), std::min(lo + g.win.kernel[1], g.w)};
  }
  std::size_t scratch_floats() const { return windows ? 0 : plane_floats(); }

  // The plane's outputs straight from plane xp.
  void window_plane(const float* xp, float* y) const {
    constexpr std::int64_t L = vm::kLanes;
    for (std::int64_t oy = 0; oy < g.oh; ++oy) {
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        const auto [lo, hi] = span(ox);
        vm::vf acc{};
        float tail = 0.0f;
        for (std::int64_t ky = 0; ky < g.win.kernel[0]; ++ky) {
          const std::int64_t iy = window_row(oy, ky);
          if (iy < 0) continue;
          const float* r = xp + iy * g.w;
          std::int64_t ix = lo;
          for (; ix + L <= hi; ix += L) acc += vm::load(r + ix);
          for (; ix < hi; ++ix) tail += r[ix];
        }
        for (int i = 0; i < L; ++i) tail += acc[i];
        y[oy * g.ow + ox] =
            tail / (rows_n[static_cast<std::size_t>(oy)] * cols_n[static_cast<std::size_t>(ox)]);
      }
    }
  }

  // dx of one plane from its gy, each output's share added over its window.
  void window_grad_plane(const float* gy, float* dx) const {
    std::fill(dx, dx + g.h * g.w, 0.0f);
    for (std::int64_t oy = 0; oy < g.oh; ++oy) {
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        const auto [lo, hi] = span(ox);
        const float share = gy[oy * g.ow + ox] / (rows_n[static_cast<std::size_t>(oy)] *
                                                  cols_n[static_cast<std::size_t>(ox)]);
        for (std::int64_t ky = 0; ky < g.win.kernel[0]; ++ky) {
          const std::int64_t iy = window_row(oy, ky);
          if (iy < 0) continue;
          float* r = dx + iy * g.w;
          for (std::int64_t ix = lo; ix < hi; ++ix) r[ix] += share;
        }
      }
    }
  }

  // dx of one plane from its gy, through the padded plane buf.
  void grad_plane(const float* gy, float* buf, float* dx) const {
    constexpr std::int64_t L = vm::kLanes;
    const Window2d& w = g.win;
    const std::int64_t s = w.stride[1];
    std::fill(buf, buf + plane_floats(), 0.0f);
    for (std::int64_t oy = 0; oy < g.oh; ++oy) {
      for (std::int64_t ox0 = 0; ox0 < g.ow; ox0 += L) {
        const std::int64_t n = std::min(L, g.ow - ox0);
        vm::vf share{};  // lanes past the row's end add nothing
        for (std::int64_t i = 0; i < n; ++i) share[i] = gy[oy * g.ow + ox0 + i];
        share /= count(oy, ox0);
        for (std::int64_t ky = 0; ky < w.kernel[0]; ++ky) {
          const std::int64_t iy = window_row(oy, ky);
          if (iy < 0) continue;
          float* r = buf + iy * pw + ox0 * s;
          for (std::int64_t kx = 0; kx < w.kernel[1]; ++kx) {
            float* base = r + kx * w.dilation[1];
            if (s == 1) {
              vm::store(base, vm::load(base) + share);
            } else {
              for (std::int64_t i = 0; i < n; ++i) base[i * s] += share[i];
            }
          }
        }
      }
    }
    for (std::int64_t iy = 0; iy < g.h; ++iy)
      std::memcpy(dx + iy * g.w, buf + iy * pw + w.pad_begin[1],
                  static_cast<std::size_t>(g.w) * sizeof(float));
  }
};

/// Average pooling (Grad: its gradient, from gy) of NCHW planes.
template <bool Grad>
class AvgPoolKernel final : public PaddedPlaneKernel {
 public:
  AvgPoolKernel(const KernelArgs& a, const AvgPool& pool)
      : PaddedPlaneKernel(a, pool.scratch_floats(), pool.n_planes(), pool.plane_grain()),
        pool_(pool),
        in_(a.in_f(0)),
        out_(a.out_f()) {}

 private:
  void planes(std::int64_t b, std::int64_t e, float* buf) override {
    const ImageGeom& g = pool_.g;
    const std::int64_t image = g.h * g.w, pooled = g.oh * g.ow;
    for (std::int64_t p = b; p < e; ++p) {
      if (pool_.windows) {
        if constexpr (Grad)
          pool_.window_grad_plane(in_ + p * pooled, out_ + p * image);
        else
          pool_.window_plane(in_ + p * image, out_ + p * pooled);
      } else if constexpr (Grad) {
        pool_.grad_plane(in_ + p * pooled, buf, out_ + p * image);
      } else {
        pool_.pad(in_ + p * image, buf, 0.0f);
        for (std::int64_t oy = 0; oy < g.oh; ++oy)
          pool_.row(buf, oy, out_ + p * pooled + oy * g.ow);
      }
    }
  }
  AvgPool pool_;
  const float* in_;
  float* out_;
};

std::unique_ptr<CpuKernel> make_avg_pool_rows(const KernelArgs& a) {
  return std::make_unique<AvgPoolKernel<false>>(a, AvgPool(pool_geom(a.in_shape(0), a.node.attrs)));
}
// (g, x): x gives the shape only.
std::unique_ptr<CpuKernel> make_avg_pool_rows_bwd(const KernelArgs& a) {
  return std::make_unique<AvgPoolKernel<true>>(a, AvgPool(pool_geom(a.in_shape(1), a.node.attrs)));
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
  const bool last = channels_last(a);
  const PoolRef r{last ? channels_last_geom(a) : pool_geom(a.in_shape(0), a.node.attrs)};
  const bool max = a.node.op == OpKind::MaxPool2d;
  const float* x = a.in_f(0);
  float* y = a.out_f();
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
  r.add(OpKind::AvgPool2d, {"dnnl_pool", reject_avg<false>, make_avg_pool_fwd});
  r.add(OpKind::AvgPool2d, {"avg_rows", reject_channels_last, make_avg_pool_rows});
  r.add(OpKind::AvgPool2d, {"reference", reject_channels_last, make_pool_fwd_ref, ref});
  r.add(OpKind::MaxPool2dGrad, {"argmax_scatter", reject_max_pool_bwd, make_max_pool_bwd});
  r.add(OpKind::MaxPool2dGrad, {"reference", nullptr, make_pool_bwd_ref, ref});
  r.add(OpKind::AvgPool2dGrad, {"dnnl_pool_bwd", reject_avg<true>, make_avg_pool_bwd});
  r.add(OpKind::AvgPool2dGrad, {"avg_rows_bwd", nullptr, make_avg_pool_rows_bwd});
  r.add(OpKind::AvgPool2dGrad, {"reference", nullptr, make_pool_bwd_ref, ref});
}

}  // namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS
