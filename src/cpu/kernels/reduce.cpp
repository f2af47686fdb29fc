// SPDX-License-Identifier: Apache-2.0
// Reduction kernels over an [outer, n, inner] view, and the broadcast-back kernels of their
// gradients. Sums accumulate in float over blocks and in double across blocks; block bounds
// never depend on the thread count, so results are the same for any team size.
//
// Maxima propagate NaN (as PyTorch and ONNX): a line holding a NaN reduces to NaN, and
// reduce_max_grad gives the gradient to the line's first NaN (the element the result came
// from); argmax and argmin give its position. Contiguous lines take the vector max and a NaN flag
// side by side (the max instruction itself may drop a NaN); strided lines blend. top_k gives the
// positions of a line's k best, best first.
//
// Compiled once per code path (src/cpu/simd/code_path.hpp): the loops vectorise at its width.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "compiler/geometry.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/simd/code_path.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS {

namespace {

constexpr std::int64_t kBlock = 4096;    // float accumulation block (elements)
constexpr std::int64_t kColChunk = 512;  // columns per task when reducing over rows

double sum_contig(const float* x, std::int64_t n) {
  double total = 0.0;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const std::int64_t e = std::min(n, b + kBlock);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = b; i < e; ++i) s += x[i];
    total += s;
  }
  return total;
}

/// max(m, v) that keeps a NaN from either side.
inline float nan_max(float m, float v) {
  return v > m || v != v ? v : m;
}

float max_contig(const float* x, std::int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
  for (std::int64_t i = 0; i < n; ++i) {
    m = std::max(m, x[i]);
    nan |= x[i] != x[i];
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// out[o, k] = sum_j x[o, j, k] (or max), columns split in chunks across the team.
void reduce_strided(const ExecCtx& ctx, const float* x, float* out, const AxisGeom& g, bool is_max,
                    float scale) {
  const std::int64_t chunks = (g.inner + kColChunk - 1) / kColChunk;
  parallel_for(ctx, g.outer * chunks, std::max<std::int64_t>(1, kParallelGrain / (g.n * kColChunk)),
               [&](std::int64_t t0, std::int64_t t1) {
                 float facc[kColChunk];
                 double dacc[kColChunk];
                 for (std::int64_t t = t0; t < t1; ++t) {
                   const std::int64_t o = t / chunks, k0 = (t % chunks) * kColChunk;
                   const std::int64_t w = std::min(kColChunk, g.inner - k0);
                   const float* base = x + o * g.n * g.inner + k0;
                   float* dst = out + o * g.inner + k0;
                   if (is_max) {
                     std::copy(base, base + w, facc);
                     for (std::int64_t j = 1; j < g.n; ++j) {
                       const float* row = base + j * g.inner;
#pragma omp simd
                       for (std::int64_t k = 0; k < w; ++k) facc[k] = nan_max(facc[k], row[k]);
                     }
                     std::copy(facc, facc + w, dst);
                     continue;
                   }
                   std::fill(dacc, dacc + w, 0.0);
                   const std::int64_t rows_per_block =
                       std::max<std::int64_t>(1, kBlock / kColChunk);
                   for (std::int64_t jb = 0; jb < g.n; jb += rows_per_block) {
                     const std::int64_t je = std::min(g.n, jb + rows_per_block);
                     std::fill(facc, facc + w, 0.0f);
                     for (std::int64_t j = jb; j < je; ++j) {
                       const float* row = base + j * g.inner;
#pragma omp simd
                       for (std::int64_t k = 0; k < w; ++k) facc[k] += row[k];
                     }
                     for (std::int64_t k = 0; k < w; ++k) dacc[k] += facc[k];
                   }
                   for (std::int64_t k = 0; k < w; ++k)
                     dst[k] = static_cast<float>(dacc[k] * scale);
                 }
               });
}

// The reduction's geometry over its input's memory: a channels-last 4-d input (assign_layouts:
// a spatial reduction of a convolution's value) is [N, H, W, C] there, and one in blocks of B
// channels [N * C/B, H, W, B] (over H or W only: assign_layouts passes blocks through spatial
// reductions alone). The result is then in the input's layout too, which is plain memory where
// it has one pixel per channel.
AxisGeom reduce_geom(const KernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const int axis = k.node.attrs.axis;
  const int block = channel_block(k.plan.nodes[k.node.inputs[0]].layout);
  if (s.rank() != 4 || axis == kAllAxes || block <= 0) return axis_geom(s, axis);
  constexpr int kMemoryAxis[4] = {0, 3, 1, 2};
  const int a = axis < 0 ? axis + 4 : axis;
  if (block == 1) return axis_geom(Shape{s[0], s[2], s[3], s[1]}, kMemoryAxis[a]);
  if (a < 2 || s[1] % block != 0)
    throw GraphError(k.node.label + ": a reduction over axis " + std::to_string(a) +
                     " of a value in blocks of " + std::to_string(block) + " channels");
  return axis_geom(Shape{s[0] * (s[1] / block), s[2], s[3], block}, kMemoryAxis[a]);
}

class ReduceKernel final : public CpuKernel {
 public:
  ReduceKernel(const KernelArgs& k)
      : x_(k.in_f(0)),
        out_(k.out_f()),
        g_(reduce_geom(k)),
        max_(k.node.op == OpKind::ReduceMax),
        scale_(k.node.op == OpKind::ReduceMean ? 1.0 / static_cast<double>(g_.n) : 1.0) {
    if (g_.inner == 1 && g_.outer == 1)
      partial_.resize(static_cast<std::size_t>((g_.n + kSplit - 1) / kSplit));
  }

  void run(const ExecCtx& ctx) override {
    if (g_.inner > 1) {
      reduce_strided(ctx, x_, out_, g_, max_, static_cast<float>(scale_));
      return;
    }
    if (g_.outer == 1) {
      // One long row: fixed-size pieces reduced in parallel, combined in order.
      const auto pieces = static_cast<std::int64_t>(partial_.size());
      parallel_for(ctx, pieces, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t p = b; p < e; ++p) {
          const std::int64_t lo = p * kSplit, len = std::min(kSplit, g_.n - lo);
          partial_[static_cast<std::size_t>(p)] =
              max_ ? static_cast<double>(max_contig(x_ + lo, len)) : sum_contig(x_ + lo, len);
        }
      });
      double r = max_ ? -std::numeric_limits<double>::infinity() : 0.0;
      for (double v : partial_) r = max_ ? (v > r || v != v ? v : r) : r + v;
      *out_ = static_cast<float>(max_ ? r : r * scale_);
      return;
    }
    parallel_for(ctx, g_.outer, std::max<std::int64_t>(1, kParallelGrain / g_.n),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t o = b; o < e; ++o) {
                     const float* row = x_ + o * g_.n;
                     out_[o] = max_ ? max_contig(row, g_.n)
                                    : static_cast<float>(sum_contig(row, g_.n) * scale_);
                   }
                 });
  }

 private:
  static constexpr std::int64_t kSplit = 1 << 16;
  const float* x_;
  float* out_;
  AxisGeom g_;
  bool max_;
  double scale_;
  std::vector<double> partial_;
};

std::unique_ptr<CpuKernel> make_reduce(const KernelArgs& k) {
  return std::make_unique<ReduceKernel>(k);
}

// Reference: plain double loops.
std::unique_ptr<CpuKernel> make_reduce_ref(const KernelArgs& k) {
  const float* x = k.in_f(0);
  float* out = k.out_f();
  const AxisGeom g = reduce_geom(k);
  const OpKind op = k.node.op;
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t o = 0; o < g.outer; ++o) {
      for (std::int64_t i = 0; i < g.inner; ++i) {
        double acc = op == OpKind::ReduceMax ? -INFINITY : 0.0;
        for (std::int64_t j = 0; j < g.n; ++j) {
          const double v = x[(o * g.n + j) * g.inner + i];
          acc = op == OpKind::ReduceMax ? (std::isnan(acc) || v <= acc ? acc : v) : acc + v;
        }
        if (op == OpKind::ReduceMean) acc /= static_cast<double>(g.n);
        out[o * g.inner + i] = static_cast<float>(acc);
      }
    }
  });
}

/// Whether x is the value y a max reduction chose: equal, or both NaN.
inline bool chosen(float x, float y) {
  return x == y || (x != x && y != y);
}

// reduce_max_grad(g, x, y): g goes to the first position of the maximum along the axis.
std::unique_ptr<CpuKernel> make_reduce_max_grad(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  const float* x = k.in_f(1);
  const float* y = k.in_f(2);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.in_shape(1), k.node.attrs.axis);
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, g.outer, std::max<std::int64_t>(1, kParallelGrain / (g.n * g.inner)),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t o = b; o < e; ++o) {
                     float* dst = out + o * g.n * g.inner;
                     std::fill(dst, dst + g.n * g.inner, 0.0f);
                     for (std::int64_t i = 0; i < g.inner; ++i) {
                       const float m = y[o * g.inner + i];
                       for (std::int64_t j = 0; j < g.n; ++j) {
                         if (chosen(x[(o * g.n + j) * g.inner + i], m)) {
                           dst[j * g.inner + i] = gr[o * g.inner + i];
                           break;
                         }
                       }
                     }
                   }
                 });
  });
}

// expand(g, like): out[o, j, k] = g[o, k] (/ n for a mean).
std::unique_ptr<CpuKernel> make_expand(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.out_shape(), k.node.attrs.axis);
  const float s = k.node.attrs.mean ? 1.0f / static_cast<float>(g.n) : 1.0f;
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, g.outer * g.n, std::max<std::int64_t>(1, kParallelGrain / g.inner),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t r = b; r < e; ++r) {
                     const float* src = gr + (r / g.n) * g.inner;
                     float* dst = out + r * g.inner;
#pragma omp simd
                     for (std::int64_t i = 0; i < g.inner; ++i) dst[i] = src[i] * s;
                   }
                 });
  });
}

// sum_to(g, like): sums g over the dims `like` broadcasts along. The plan treats `like` as the
// broadcast input of g's shape; rows are walked in order, so accumulation is deterministic.
std::unique_ptr<CpuKernel> make_sum_to(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  float* out = k.out_f();
  const Bcast p = make_bcast(k.out_shape(), k.in_shape(0), k.in_shape(0));
  const std::int64_t out_n = k.out_shape().numel();
  return make_kernel([=](const ExecCtx&) {
    std::fill(out, out + out_n, 0.0f);
    const std::int64_t so = p.sa[static_cast<std::size_t>(p.rank - 1)];
    for (std::int64_t row = 0; row < p.rows; ++row) {
      std::int64_t oo = 0, og = 0;
      row_offsets(p, row, oo, og);
      const float* src = gr + og;
      float* dst = out + oo;
      if (so != 0) {
#pragma omp simd
        for (std::int64_t i = 0; i < p.inner; ++i) dst[i] += src[i];
      } else {
        *dst += static_cast<float>(sum_contig(src, p.inner));
      }
    }
  });
}

// ---- reduce_prod ----------------------------------------------------------------------------
// Products multiplied in line order in float, as numpy's float32 prod (and the OpenCL kernel):
// each output element is one sequential chain whichever thread takes it, so results are the same
// for any team size. Lines along an outer axis run as columns side by side, in chunks.
//
// reduce_prod_grad(g, x): element j of a line gets g times the product of the others, its
// prefix (before j) times its suffix (after j): no division, so zeros are exact.

template <class F>
void for_column_chunks(const ExecCtx& ctx, const AxisGeom& g, F f) {
  const std::int64_t chunks = (g.inner + kColChunk - 1) / kColChunk;
  parallel_for(ctx, g.outer * chunks, std::max<std::int64_t>(1, kParallelGrain / (g.n * kColChunk)),
               [&](std::int64_t t0, std::int64_t t1) {
                 for (std::int64_t t = t0; t < t1; ++t) {
                   const std::int64_t o = t / chunks, k0 = (t % chunks) * kColChunk;
                   f(o, k0, std::min(kColChunk, g.inner - k0));
                 }
               });
}

template <class Acc>
std::unique_ptr<CpuKernel> make_reduce_prod(const KernelArgs& k) {
  const float* x = k.in_f(0);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.in_shape(0), k.node.attrs.axis);
  return make_kernel([=](const ExecCtx& ctx) {
    for_column_chunks(ctx, g, [&](std::int64_t o, std::int64_t k0, std::int64_t w) {
      Acc acc[kColChunk];
      std::fill(acc, acc + w, Acc{1});
      const float* base = x + o * g.n * g.inner + k0;
      for (std::int64_t j = 0; j < g.n; ++j) {
        const float* row = base + j * g.inner;
        for (std::int64_t c = 0; c < w; ++c) acc[c] *= row[c];
      }
      for (std::int64_t c = 0; c < w; ++c) out[o * g.inner + k0 + c] = static_cast<float>(acc[c]);
    });
  });
}

template <class Acc>
std::unique_ptr<CpuKernel> make_reduce_prod_grad(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  const float* x = k.in_f(1);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.in_shape(1), k.node.attrs.axis);
  return make_kernel([=](const ExecCtx& ctx) {
    for_column_chunks(ctx, g, [&](std::int64_t o, std::int64_t k0, std::int64_t w) {
      Acc run[kColChunk];
      const std::int64_t base = o * g.n * g.inner + k0;
      std::fill(run, run + w, Acc{1});
      for (std::int64_t j = 0; j < g.n; ++j) {  // out = prefix products
        const std::int64_t r = base + j * g.inner;
        for (std::int64_t c = 0; c < w; ++c) {
          out[r + c] = static_cast<float>(run[c]);
          run[c] *= x[r + c];
        }
      }
      std::fill(run, run + w, Acc{1});
      const float* gl = gr + o * g.inner + k0;
      for (std::int64_t j = g.n - 1; j >= 0; --j) {  // times suffix products, times g
        const std::int64_t r = base + j * g.inner;
        for (std::int64_t c = 0; c < w; ++c) {
          out[r + c] = static_cast<float>(Acc{out[r + c]} * run[c] * gl[c]);
          run[c] *= x[r + c];
        }
      }
    });
  });
}

// ---- cumsum -------------------------------------------------------------------------------
// Running sums in line order (forward or from the back), one chain per element column whichever
// thread takes it; ints add as unsigned, so they wrap around without undefined behaviour.
template <class T>
std::unique_ptr<CpuKernel> make_cumsum(const KernelArgs& k) {
  using Acc = std::conditional_t<std::is_same_v<T, float>, float, std::uint32_t>;
  const T* x = static_cast<const T*>(k.in[0]);
  T* out = static_cast<T*>(k.out);
  const AxisGeom g = axis_geom(k.in_shape(0), k.node.attrs.axis);
  const ScanMode m = k.node.attrs.get<ScanMode>();
  return make_kernel([=](const ExecCtx& ctx) {
    for_column_chunks(ctx, g, [&](std::int64_t o, std::int64_t k0, std::int64_t w) {
      Acc run[kColChunk] = {};
      const std::int64_t base = o * g.n * g.inner + k0;
      for (std::int64_t s = 0; s < g.n; ++s) {
        const std::int64_t r = base + (m.reverse ? g.n - 1 - s : s) * g.inner;
        for (std::int64_t c = 0; c < w; ++c) {
          const Acc v = static_cast<Acc>(x[r + c]);
          if (m.exclusive) out[r + c] = static_cast<T>(run[c]);
          run[c] += v;
          if (!m.exclusive) out[r + c] = static_cast<T>(run[c]);
        }
      }
    });
  });
}

// ---- argmax / argmin ----------------------------------------------------------------------
// Positions of the extreme along the axis. NaN beats every number (PyTorch's and ONNX
// Runtime's argmax and argmin both give a NaN's position); equal values (and NaNs among
// themselves) go to the first position, or the last with last_index. That is a total order
// on (value, position), so splitting a line into pieces changes nothing: results are the same
// for any team size.

/// Whether v at a later position takes the place of b: strictly better, or (last_index) not
/// worse.
template <class T, bool Max, bool Last>
inline bool replaces(T v, T b) {
  const bool v_nan = v != v, b_nan = b != b;  // ints are never NaN
  if constexpr (Last)
    return !((Max ? b > v : b < v) || (b_nan && !v_nan));
  else
    return (Max ? v > b : v < b) || (v_nan && !b_nan);
}

/// The extreme of a contiguous run (NaN if it holds one): min or max with a NaN flag side by
/// side, as max_contig, so the loop vectorises.
template <class T, bool Max>
T extreme_contig(const T* x, std::int64_t n) {
  T m = x[0];
  int nan = 0;
  if constexpr (Max) {
#pragma omp simd reduction(max : m) reduction(| : nan)
    for (std::int64_t i = 0; i < n; ++i) {
      m = std::max(m, x[i]);
      nan |= x[i] != x[i];
    }
  } else {
#pragma omp simd reduction(min : m) reduction(| : nan)
    for (std::int64_t i = 0; i < n; ++i) {
      m = std::min(m, x[i]);
      nan |= x[i] != x[i];
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (nan) return std::numeric_limits<T>::quiet_NaN();
  } else {
    (void)nan;  // never set: ints are never NaN
  }
  return m;
}

/// Position of the extreme of x[0, n): its value first (vectorised), then where it is.
template <class T, bool Max, bool Last>
std::int64_t arg_contig(const T* x, std::int64_t n) {
  const T m = extreme_contig<T, Max>(x, n);
  const bool nan = m != m;
  auto hit = [&](std::int64_t i) { return nan ? x[i] != x[i] : x[i] == m; };
  if constexpr (Last) {
    for (std::int64_t i = n - 1; i > 0; --i)
      if (hit(i)) return i;
    return 0;
  } else {
    for (std::int64_t i = 0; i + 1 < n; ++i)
      if (hit(i)) return i;
    return n - 1;
  }
}

template <class T, bool Max, bool Last>
class ArgExtremeKernel final : public CpuKernel {
 public:
  explicit ArgExtremeKernel(const KernelArgs& k)
      : x_(static_cast<const T*>(k.in[0])),
        out_(static_cast<std::int32_t*>(k.out)),
        g_(axis_geom(k.in_shape(0), k.node.attrs.axis)) {
    if (g_.inner == 1 && g_.outer == 1)
      pieces_.resize(static_cast<std::size_t>((g_.n + kSplit - 1) / kSplit));
  }

  void run(const ExecCtx& ctx) override {
    if (g_.inner > 1) {
      strided(ctx);
      return;
    }
    if (g_.outer == 1) {
      // One long row: fixed-size pieces in parallel, their winners compared in order.
      const auto n_pieces = static_cast<std::int64_t>(pieces_.size());
      parallel_for(ctx, n_pieces, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t p = b; p < e; ++p) {
          const std::int64_t lo = p * kSplit, len = std::min(kSplit, g_.n - lo);
          pieces_[static_cast<std::size_t>(p)] = lo + arg_contig<T, Max, Last>(x_ + lo, len);
        }
      });
      std::int64_t best = pieces_[0];
      for (std::int64_t at : pieces_)
        if (replaces<T, Max, Last>(x_[at], x_[best])) best = at;
      *out_ = static_cast<std::int32_t>(best);
      return;
    }
    parallel_for(ctx, g_.outer, std::max<std::int64_t>(1, kParallelGrain / g_.n),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t o = b; o < e; ++o)
                     out_[o] =
                         static_cast<std::int32_t>(arg_contig<T, Max, Last>(x_ + o * g_.n, g_.n));
                 });
  }

 private:
  // out[o, k] = position along j of the extreme of x[o, j, k]: columns in chunks across the
  // team, each row of a chunk compared with the chunk's best so far (a vector select).
  void strided(const ExecCtx& ctx) {
    const std::int64_t chunks = (g_.inner + kColChunk - 1) / kColChunk;
    parallel_for(ctx, g_.outer * chunks,
                 std::max<std::int64_t>(1, kParallelGrain / (g_.n * kColChunk)),
                 [&](std::int64_t t0, std::int64_t t1) {
                   T best[kColChunk];
                   std::int32_t at[kColChunk];
                   for (std::int64_t t = t0; t < t1; ++t) {
                     const std::int64_t o = t / chunks, k0 = (t % chunks) * kColChunk;
                     const std::int64_t w = std::min(kColChunk, g_.inner - k0);
                     const T* base = x_ + o * g_.n * g_.inner + k0;
                     std::copy(base, base + w, best);
                     std::fill(at, at + w, 0);
                     for (std::int64_t j = 1; j < g_.n; ++j) {
                       const T* row = base + j * g_.inner;
                       const auto jj = static_cast<std::int32_t>(j);
#pragma omp simd
                       for (std::int64_t k = 0; k < w; ++k) {
                         const bool r = replaces<T, Max, Last>(row[k], best[k]);
                         best[k] = r ? row[k] : best[k];
                         at[k] = r ? jj : at[k];
                       }
                     }
                     std::copy(at, at + w, out_ + o * g_.inner + k0);
                   }
                 });
  }

  static constexpr std::int64_t kSplit = 1 << 16;
  const T* x_;
  std::int32_t* out_;
  AxisGeom g_;
  std::vector<std::int64_t> pieces_;
};

template <class T, bool Max>
std::unique_ptr<CpuKernel> make_arg_extreme_t(const KernelArgs& k) {
  if (k.node.attrs.last_index) return std::make_unique<ArgExtremeKernel<T, Max, true>>(k);
  return std::make_unique<ArgExtremeKernel<T, Max, false>>(k);
}
std::unique_ptr<CpuKernel> make_arg_extreme(const KernelArgs& k) {
  const bool max = k.node.op == OpKind::ArgMax;
  if (k.in_types[0].dtype == DType::i32)
    return max ? make_arg_extreme_t<std::int32_t, true>(k)
               : make_arg_extreme_t<std::int32_t, false>(k);
  return max ? make_arg_extreme_t<float, true>(k) : make_arg_extreme_t<float, false>(k);
}

// Reference: each line scanned in order in double (exact for float and int32), the rule
// spelled out.
std::unique_ptr<CpuKernel> make_arg_extreme_ref(const KernelArgs& k) {
  const bool i32 = k.in_types[0].dtype == DType::i32;
  const void* x = k.in[0];
  auto* out = static_cast<std::int32_t*>(k.out);
  const AxisGeom g = axis_geom(k.in_shape(0), k.node.attrs.axis);
  const bool max = k.node.op == OpKind::ArgMax, last = k.node.attrs.last_index;
  return make_kernel([=](const ExecCtx&) {
    auto value = [&](std::int64_t i) {
      return i32 ? static_cast<double>(static_cast<const std::int32_t*>(x)[i])
                 : static_cast<double>(static_cast<const float*>(x)[i]);
    };
    for (std::int64_t o = 0; o < g.outer; ++o) {
      for (std::int64_t i = 0; i < g.inner; ++i) {
        std::int64_t best = 0;
        double b = value(o * g.n * g.inner + i);
        for (std::int64_t j = 1; j < g.n; ++j) {
          const double v = value((o * g.n + j) * g.inner + i);
          bool take;
          if (std::isnan(b))
            take = last && std::isnan(v);  // NaN beats numbers; NaNs tie
          else if (std::isnan(v))
            take = true;
          else
            take = (max ? v > b : v < b) || (last && v == b);
          if (take) {
            best = j;
            b = v;
          }
        }
        out[o * g.inner + i] = static_cast<std::int32_t>(best);
      }
    }
  });
}

// ---- top_k ----------------------------------------------------------------------------------
// The positions of the k best of each line, best first. NaN ranks above every number, -0 ties
// with +0, ties go to the lower position. Each element becomes a 64-bit key whose unsigned order
// is that rank order: its value as a uint32 that orders like it (flipped for largest) above its
// position. Keys are distinct, so the k smallest, sorted, are one answer whatever selects them:
// the same for any team size.

/// A uint32 whose unsigned order is the order of the values, any NaN above +inf.
inline std::uint32_t order_key(float v) {
  if (v != v) return 0xFFC00000u;  // the key of the positive quiet NaN, above +inf's 0xFF800000
  if (v == 0.0f) v = 0.0f;         // -0 ties with +0
  const auto b = std::bit_cast<std::uint32_t>(v);
  return (b & 0x80000000u) != 0 ? ~b : b | 0x80000000u;
}
inline std::uint32_t order_key(std::int32_t v) {
  return static_cast<std::uint32_t>(v) ^ 0x80000000u;
}

template <class T>
class TopKKernel final : public CpuKernel {
 public:
  explicit TopKKernel(const KernelArgs& a)
      : x_(static_cast<const T*>(a.in[0])),
        out_(static_cast<std::int32_t*>(a.out)),
        g_(axis_geom(a.in_shape(0), a.node.attrs.axis)),
        k_(a.node.attrs.get<TopKSpec>().k),
        flip_(a.node.attrs.get<TopKSpec>().largest ? 0xFFFFFFFFu : 0u) {}

  // Lines split across the team; in each the k smallest keys are kept (a heap for small k,
  // else nth_element) and sorted.
  void run(const ExecCtx& ctx) override {
    parallel_for(ctx, g_.outer * g_.inner, std::max<std::int64_t>(1, kParallelGrain / g_.n),
                 [&](std::int64_t b, std::int64_t e) {
                   // (the heap holds k keys; selecting among all needs every key)
                   std::vector<std::uint64_t> keys(static_cast<std::size_t>(heap() ? k_ : g_.n));
                   for (std::int64_t l = b; l < e; ++l) line(l, keys);
                 });
  }

 private:
  void line(std::int64_t l, std::vector<std::uint64_t>& keys) const {
    const std::int64_t o = l / g_.inner, q = l % g_.inner;
    const T* x = x_ + o * g_.n * g_.inner + q;
    auto key = [&](std::int64_t j) {
      return static_cast<std::uint64_t>(order_key(x[j * g_.inner]) ^ flip_) << 32 |
             static_cast<std::uint64_t>(j);
    };
    const auto kth = keys.begin() + k_;
    if (heap()) {
      // Few kept: a max-heap of the k best so far, whose top most elements fail to beat. One
      // that does replaces the top, sifted down once (a pop and a push sift twice: on a line
      // sorted the other way every element enters).
      for (std::int64_t j = 0; j < k_; ++j) keys[static_cast<std::size_t>(j)] = key(j);
      std::make_heap(keys.begin(), kth);
      const auto size = static_cast<std::size_t>(k_);
      for (std::int64_t j = k_; j < g_.n; ++j) {
        const std::uint64_t kj = key(j);
        if (kj >= keys.front()) continue;
        std::size_t at = 0;
        for (std::size_t child = 1; child < size; child = 2 * at + 1) {
          if (child + 1 < size && keys[child + 1] > keys[child]) ++child;
          if (keys[child] <= kj) break;
          keys[at] = keys[child];
          at = child;
        }
        keys[at] = kj;
      }
      std::sort_heap(keys.begin(), kth);
    } else {
      for (std::int64_t j = 0; j < g_.n; ++j) keys[static_cast<std::size_t>(j)] = key(j);
      if (k_ < g_.n) std::nth_element(keys.begin(), kth - 1, keys.end());
      std::sort(keys.begin(), kth);
    }
    std::int32_t* out = out_ + o * k_ * g_.inner + q;
    for (std::int64_t r = 0; r < k_; ++r)
      out[r * g_.inner] =
          static_cast<std::int32_t>(keys[static_cast<std::size_t>(r)] & 0xFFFFFFFFu);
  }

  // k at most n / kHeapRatio: the heap (n compares, log k more per rare insertion) beats
  // writing every key and selecting among them.
  static constexpr std::int64_t kHeapRatio = 8;
  bool heap() const { return k_ * kHeapRatio <= g_.n; }
  const T* x_;
  std::int32_t* out_;
  AxisGeom g_;
  std::int64_t k_;
  std::uint32_t flip_;
};

std::unique_ptr<CpuKernel> make_top_k(const KernelArgs& a) {
  if (a.in_types[0].dtype == DType::i32) return std::make_unique<TopKKernel<std::int32_t>>(a);
  return std::make_unique<TopKKernel<float>>(a);
}

// ---- references -------------------------------------------------------------------------

// top_k, the rule spelled out: an element's rank is how many elements of its line beat it (a
// larger value, or smaller with !largest, NaN above every number; an equal one earlier), in
// double (exact for float and int32); ranks below k write their position there.
std::unique_ptr<CpuKernel> make_top_k_ref(const KernelArgs& a) {
  const bool i32 = a.in_types[0].dtype == DType::i32;
  const void* x = a.in[0];
  auto* out = static_cast<std::int32_t*>(a.out);
  const AxisGeom g = axis_geom(a.in_shape(0), a.node.attrs.axis);
  const TopKSpec spec = a.node.attrs.get<TopKSpec>();
  return make_kernel([=](const ExecCtx&) {
    auto value = [&](std::int64_t i) {
      return i32 ? static_cast<double>(static_cast<const std::int32_t*>(x)[i])
                 : static_cast<double>(static_cast<const float*>(x)[i]);
    };
    auto above = [](double u, double v) { return (std::isnan(u) && !std::isnan(v)) || u > v; };
    for (std::int64_t o = 0; o < g.outer; ++o) {
      for (std::int64_t q = 0; q < g.inner; ++q) {
        auto at = [&](std::int64_t j) { return value((o * g.n + j) * g.inner + q); };
        for (std::int64_t j = 0; j < g.n; ++j) {
          const double v = at(j);
          std::int64_t rank = 0;
          for (std::int64_t i = 0; i < g.n; ++i) {
            const double w = at(i);
            const bool tie = w == v || (std::isnan(w) && std::isnan(v));
            rank += (spec.largest ? above(w, v) : above(v, w)) || (tie && i < j);
          }
          if (rank < spec.k) out[(o * spec.k + rank) * g.inner + q] = static_cast<std::int32_t>(j);
        }
      }
    }
  });
}

std::unique_ptr<CpuKernel> make_reduce_max_grad_ref(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  const float* x = k.in_f(1);
  const float* y = k.in_f(2);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.in_shape(1), k.node.attrs.axis);
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t o = 0; o < g.outer; ++o) {
      for (std::int64_t i = 0; i < g.inner; ++i) {
        bool given = false;  // to the first maximum only
        for (std::int64_t j = 0; j < g.n; ++j) {
          const std::int64_t at = (o * g.n + j) * g.inner + i;
          const float m = y[o * g.inner + i];
          const bool first = !given && (x[at] == m || (std::isnan(x[at]) && std::isnan(m)));
          out[at] = first ? gr[o * g.inner + i] : 0.0f;
          given = given || first;
        }
      }
    }
  });
}

std::unique_ptr<CpuKernel> make_expand_ref(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.out_shape(), k.node.attrs.axis);
  const bool mean = k.node.attrs.mean;
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t o = 0; o < g.outer; ++o)
      for (std::int64_t j = 0; j < g.n; ++j)
        for (std::int64_t i = 0; i < g.inner; ++i) {
          const double v = gr[o * g.inner + i];
          out[(o * g.n + j) * g.inner + i] =
              static_cast<float>(mean ? v / static_cast<double>(g.n) : v);
        }
  });
}

// Each element of g added (in double) into the element of `like`'s shape it broadcast from.
std::unique_ptr<CpuKernel> make_sum_to_ref(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  float* out = k.out_f();
  const Shape big = k.in_shape(0), small = k.out_shape();
  return make_kernel([=](const ExecCtx&) {
    std::vector<double> acc(static_cast<std::size_t>(small.numel()), 0.0);
    for (std::int64_t flat = 0; flat < big.numel(); ++flat) {
      std::int64_t rem = flat, at = 0, stride = 1;
      for (int d = big.rank() - 1; d >= 0; --d) {
        const std::int64_t i = rem % big[d];
        rem /= big[d];
        const int ds = small.rank() - big.rank() + d;
        if (ds >= 0) {
          at += (small[ds] == 1 ? 0 : i) * stride;
          stride *= small[ds];
        }
      }
      acc[static_cast<std::size_t>(at)] += gr[flat];
    }
    for (std::size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i]);
  });
}

std::unique_ptr<CpuKernel> make_cumsum_typed(const KernelArgs& a) {
  return a.in_types[0].dtype == DType::i32 ? make_cumsum<std::int32_t>(a) : make_cumsum<float>(a);
}

const char* f32_only(const KernelArgs& k) {
  return k.in_types[0].dtype == DType::f32 ? nullptr : "needs float input";
}

}  // namespace

void register_reduce_kernels(KernelRegistry& r) {
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax}) {
    r.add(op, {"blocked_simd", f32_only, make_reduce});
    r.add(op, {"reference", f32_only, make_reduce_ref, true});
  }
  for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin}) {
    r.add(op, {"vector_scan", nullptr, make_arg_extreme});
    r.add(op, {"reference", nullptr, make_arg_extreme_ref, true});
  }
  r.add(OpKind::TopK, {"select_sort", nullptr, make_top_k});
  r.add(OpKind::TopK, {"reference", nullptr, make_top_k_ref, true});
  r.add(OpKind::ReduceMaxGrad, {"first_argmax", nullptr, make_reduce_max_grad});
  r.add(OpKind::ReduceMaxGrad, {"reference", nullptr, make_reduce_max_grad_ref, true});
  r.add(OpKind::ReduceProd, {"ordered_columns", f32_only, make_reduce_prod<float>});
  r.add(OpKind::ReduceProd, {"reference", f32_only, make_reduce_prod<double>, true});
  r.add(OpKind::ReduceProdGrad, {"prefix_suffix", nullptr, make_reduce_prod_grad<float>});
  r.add(OpKind::ReduceProdGrad, {"reference", nullptr, make_reduce_prod_grad<double>, true});
  // One chain per element already: the plain loop is its own reference.
  r.add(OpKind::CumSum, {"ordered_columns", nullptr, make_cumsum_typed, true});
  r.add(OpKind::Expand, {"broadcast_rows", nullptr, make_expand});
  r.add(OpKind::Expand, {"reference", nullptr, make_expand_ref, true});
  r.add(OpKind::SumTo, {"row_accumulate", nullptr, make_sum_to});
  r.add(OpKind::SumTo, {"reference", nullptr, make_sum_to_ref, true});
}

}  // namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS
