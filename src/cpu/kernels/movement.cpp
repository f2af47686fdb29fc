// SPDX-License-Identifier: Apache-2.0
// Data movement (slice, concat and their gradients, transpose) and the structural kernels
// (gradient seed, copying assign). Elements are 4 bytes of any type: these only move bits.
#include <algorithm>
#include <cstring>

#include "compiler/geometry.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"

namespace hetgraph::detail::cpu {

namespace {

std::int64_t norm(std::int64_t v, std::int64_t d) {
  return v < 0 ? v + d : v;
}

// Copies `len` along-axis elements per outer index between two [outer, *, inner] layouts.
void copy_band(const ExecCtx& ctx, const float* src, std::int64_t src_d, std::int64_t src_off,
               float* dst, std::int64_t dst_d, std::int64_t dst_off, std::int64_t len,
               std::int64_t outer, std::int64_t inner) {
  const std::int64_t run = len * inner;
  parallel_for(ctx, outer, std::max<std::int64_t>(1, 4 * kParallelGrain / run),
               [&](std::int64_t b, std::int64_t e) {
                 for (std::int64_t o = b; o < e; ++o) {
                   std::memcpy(dst + (o * dst_d + dst_off) * inner,
                               src + (o * src_d + src_off) * inner,
                               static_cast<std::size_t>(run) * 4);
                 }
               });
}

std::unique_ptr<CpuKernel> make_slice(const KernelArgs& k) {
  const Shape& s = k.in_shape(0);
  const AxisGeom g = axis_geom(s, k.node.attrs.axis);
  const SliceRange& r = k.node.attrs.get_or_default<SliceRange>();
  const std::int64_t b = norm(r.begin, g.n), e = norm(r.end, g.n);
  const float* x = k.in_f(0);
  float* out = k.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    copy_band(ctx, x, g.n, b, out, e - b, 0, e - b, g.outer, g.inner);
  });
}

std::unique_ptr<CpuKernel> make_slice_grad(const KernelArgs& k) {
  const AxisGeom g = axis_geom(k.out_shape(), k.node.attrs.axis);
  const SliceRange& r = k.node.attrs.get_or_default<SliceRange>();
  const std::int64_t b = norm(r.begin, g.n), e = norm(r.end, g.n);
  const float* gr = k.in_f(0);
  float* out = k.out_f();
  const std::int64_t total = k.out_shape().numel();
  return make_kernel([=](const ExecCtx& ctx) {
    std::fill(out, out + total, 0.0f);
    copy_band(ctx, gr, e - b, 0, out, g.n, b, e - b, g.outer, g.inner);
  });
}

// slice_grad_n(like, g_1..g_n): each piece copied into its range, only the gaps zeroed.
std::unique_ptr<CpuKernel> make_slice_grad_n(const KernelArgs& k) {
  const AxisGeom g = axis_geom(k.out_shape(), k.node.attrs.axis);
  struct Piece {
    const float* src;
    std::int64_t b, e;
  };
  std::vector<Piece> pieces;
  const auto& ranges = k.node.attrs.get<SliceRanges>().ranges;
  for (std::size_t i = 1; i < k.in.size(); ++i) {
    pieces.push_back({k.in_f(i), ranges[i - 1][0], ranges[i - 1][1]});
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.b < b.b; });
  float* out = k.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, g.outer, std::max<std::int64_t>(1, kParallelGrain / (g.n * g.inner)),
                 [&](std::int64_t ob, std::int64_t oe) {
                   for (std::int64_t o = ob; o < oe; ++o) {
                     float* row = out + o * g.n * g.inner;
                     std::int64_t pos = 0;
                     for (const Piece& p : pieces) {
                       std::fill(row + pos * g.inner, row + p.b * g.inner, 0.0f);
                       const std::int64_t len = (p.e - p.b) * g.inner;
                       std::memcpy(row + p.b * g.inner, p.src + o * len,
                                   static_cast<std::size_t>(len) * 4);
                       pos = p.e;
                     }
                     std::fill(row + pos * g.inner, row + g.n * g.inner, 0.0f);
                   }
                 });
  });
}

// A concat's bands. Channels-last (assign_layouts, concat along channels): each pixel's channels
// are a row of an [N*H*W, C] matrix, so the bands are the columns of that. In blocks of B
// channels ([N, C/B, H, W, B], every input's channels whole blocks) an image's blocks follow each
// other: the bands are runs of H*W*B floats, C/B of them per image.
AxisGeom concat_geom(const KernelArgs& k) {
  AxisGeom g = axis_geom(k.out_shape(), k.node.attrs.axis);
  const Shape& s = k.out_shape();
  const int block = channel_block(k.node.layout);
  if (block == 1) {
    g.outer = s[0] * s[2] * s[3];
    g.inner = 1;
  } else if (block > 1) {
    g.outer = s[0];
    g.n = s[1] / block;
    g.inner = s[2] * s[3] * block;
  }
  return g;
}

// Each input's pointer and band count along the concat axis (its channel blocks when blocked).
std::vector<std::pair<const float*, std::int64_t>> concat_parts(const KernelArgs& k) {
  const std::int64_t block = std::max(1, channel_block(k.node.layout));
  std::vector<std::pair<const float*, std::int64_t>> parts;
  for (std::size_t i = 0; i < k.in.size(); ++i)
    parts.push_back({k.in_f(i), k.in_shape(i).dim(k.node.attrs.axis) / block});
  return parts;
}

std::unique_ptr<CpuKernel> make_concat(const KernelArgs& k) {
  const AxisGeom g = concat_geom(k);
  const auto parts = concat_parts(k);
  float* out = k.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    std::int64_t off = 0;
    for (const auto& [src, d] : parts) {
      copy_band(ctx, src, d, 0, out, g.n, off, d, g.outer, g.inner);
      off += d;
    }
  });
}

// concat_grad(g, x0..xn-1) with PieceIndex i: the band of g that x_i filled.
std::unique_ptr<CpuKernel> make_concat_grad(const KernelArgs& k) {
  const int axis = k.node.attrs.axis;
  const auto index = static_cast<std::size_t>(k.node.attrs.get_or_default<PieceIndex>().piece);
  const AxisGeom g = axis_geom(k.in_shape(0), axis);
  std::int64_t off = 0;
  for (std::size_t i = 1; i <= index; ++i) off += k.in_shape(i).dim(axis);
  const std::int64_t len = k.out_shape().dim(axis);
  const float* gr = k.in_f(0);
  float* out = k.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    copy_band(ctx, gr, g.n, off, out, len, 0, len, g.outer, g.inner);
  });
}

// Transpose: the output walked in order, the input through permuted strides. When only the
// last two dims swap (the common case), 32x32 tiles keep both sides in cache.
std::unique_ptr<CpuKernel> make_transpose(const KernelArgs& k) {
  const TransposeGeom g = transpose_geom(k.in_shape(0), k.node.attrs.get<Permutation>());
  const float* x = k.in_f(0);
  float* out = k.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    const auto& d = g.od;
    const auto& s = g.is;
    constexpr int R = kGeomRank;  // the last two dims are rows and columns of a plane
    const std::int64_t nrows = d[R - 2], ncols = d[R - 1];
    std::int64_t planes = 1;
    for (int i = 0; i < R - 2; ++i) planes *= d[static_cast<std::size_t>(i)];
    const bool tiles = s[R - 1] != 1 && s[R - 2] == 1;  // input rows become output columns
    parallel_for(ctx, planes * nrows, std::max<std::int64_t>(1, kParallelGrain / ncols),
                 [&](std::int64_t b, std::int64_t e) {
                   if (tiles) {
                     // Rows [b, e) of the output, in 32x32 tiles within each plane.
                     constexpr std::int64_t T = 32;
                     for (std::int64_t r0 = b; r0 < e;) {
                       const std::int64_t plane = r0 / nrows, row0 = r0 % nrows;
                       const std::int64_t rows = std::min({T, nrows - row0, e - r0});
                       const float* src = x + strided_offset(plane, d, s, R - 2);
                       float* dst = out + plane * nrows * ncols;
                       for (std::int64_t c0 = 0; c0 < ncols; c0 += T) {
                         const std::int64_t cols = std::min(T, ncols - c0);
                         for (std::int64_t i = row0; i < row0 + rows; ++i) {
                           for (std::int64_t j = c0; j < c0 + cols; ++j)
                             dst[i * ncols + j] = src[i + j * s[R - 1]];
                         }
                       }
                       r0 += rows;
                     }
                     return;
                   }
                   for (std::int64_t r = b; r < e; ++r) {
                     const float* src = x + strided_offset(r, d, s, R - 1);
                     float* dst = out + r * ncols;
                     for (std::int64_t j = 0; j < ncols; ++j) dst[j] = src[j * s[R - 1]];
                   }
                 });
  });
}

// Reference transpose: each output element from its input coordinates.
std::unique_ptr<CpuKernel> make_transpose_ref(const KernelArgs& k) {
  const TransposeGeom g = transpose_geom(k.in_shape(0), k.node.attrs.get<Permutation>());
  const float* x = k.in_f(0);
  float* out = k.out_f();
  const std::int64_t total = k.out_shape().numel();
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t o = 0; o < total; ++o) out[o] = x[strided_offset(o, g.od, g.is, kGeomRank)];
  });
}

// strided_slice and its gradient: rows of the (right-aligned) output, each a run of the
// innermost dim, copied from or placed at their strided input positions (memcpy when the
// innermost step is 1). `Place` writes into the input-shaped tensor (the gradient).
template <bool Place>
void strided_rows(const ExecCtx& ctx, const StridedGeom& g, const std::uint32_t* src,
                  std::uint32_t* dst) {
  const auto& d = g.od;
  constexpr int R = kGeomRank;
  const std::int64_t inner = d[R - 1], step = g.is[R - 1], rows = g.out.numel() / inner;
  parallel_for(ctx, rows, std::max<std::int64_t>(1, kParallelGrain / inner),
               [&](std::int64_t b, std::int64_t e) {
                 for (std::int64_t r = b; r < e; ++r) {
                   const std::int64_t at = g.base + strided_offset(r, d, g.is, R - 1);
                   if constexpr (Place) {
                     const std::uint32_t* from = src + r * inner;
                     if (step == 1) {
                       std::memcpy(dst + at, from, static_cast<std::size_t>(inner) * 4);
                     } else {
                       for (std::int64_t j = 0; j < inner; ++j) dst[at + j * step] = from[j];
                     }
                   } else {
                     std::uint32_t* to = dst + r * inner;
                     if (step == 1) {
                       std::memcpy(to, src + at, static_cast<std::size_t>(inner) * 4);
                     } else {
                       for (std::int64_t j = 0; j < inner; ++j) to[j] = src[at + j * step];
                     }
                   }
                 }
               });
}

StridedGeom strided_of(const Shape& x, const Attrs& at) {
  StridedGeom g;
  strided_slice_geom(x, at.get<SliceSpec>(), g);  // checked by shape inference
  return g;
}

std::unique_ptr<CpuKernel> make_strided_slice(const KernelArgs& k) {
  const StridedGeom g = strided_of(k.in_shape(0), k.node.attrs);
  const auto* x = static_cast<const std::uint32_t*>(k.in[0]);
  auto* out = static_cast<std::uint32_t*>(k.out);
  return make_kernel([=](const ExecCtx& ctx) { strided_rows<false>(ctx, g, x, out); });
}

// (g, x-shape): zeros, then each gradient element at the input position it was sliced from
// (positions are distinct: no sums).
std::unique_ptr<CpuKernel> make_strided_slice_grad(const KernelArgs& k) {
  const StridedGeom g = strided_of(k.in_shape(1), k.node.attrs);
  const auto* gr = static_cast<const std::uint32_t*>(k.in[0]);
  auto* out = static_cast<std::uint32_t*>(k.out);
  const std::int64_t total = k.out_shape().numel();
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, total, 4 * kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      std::memset(out + b, 0, static_cast<std::size_t>(e - b) * 4);
    });
    strided_rows<true>(ctx, g, gr, out);
  });
}

// References: element by element through the output's index.
template <bool Place>
std::unique_ptr<CpuKernel> make_strided_ref(const KernelArgs& k) {
  const StridedGeom g = strided_of(k.in_shape(Place ? 1 : 0), k.node.attrs);
  const auto* src = static_cast<const std::uint32_t*>(k.in[0]);
  auto* dst = static_cast<std::uint32_t*>(k.out);
  const std::int64_t total = k.out_shape().numel();
  return make_kernel([=](const ExecCtx&) {
    if (Place)
      for (std::int64_t i = 0; i < total; ++i) dst[i] = 0;
    const std::int64_t n = g.out.numel();
    for (std::int64_t o = 0; o < n; ++o) {
      const std::int64_t at = g.base + strided_offset(o, g.od, g.is, kGeomRank);
      if (Place)
        dst[at] = src[o];
      else
        dst[o] = src[at];
    }
  });
}

// ---- references: element by element over [outer, along, inner] coordinates -------------

// out[o, ob + j, i] = in[o, ib + j, i] for j < len, with `od` / `id` the along-axis sizes.
void copy_elements(const float* in, std::int64_t id, std::int64_t ib, float* out, std::int64_t od,
                   std::int64_t ob, std::int64_t len, const AxisGeom& g) {
  for (std::int64_t o = 0; o < g.outer; ++o)
    for (std::int64_t j = 0; j < len; ++j)
      for (std::int64_t i = 0; i < g.inner; ++i)
        out[(o * od + ob + j) * g.inner + i] = in[(o * id + ib + j) * g.inner + i];
}

std::unique_ptr<CpuKernel> make_slice_ref(const KernelArgs& k) {
  const AxisGeom g = axis_geom(k.in_shape(0), k.node.attrs.axis);
  const SliceRange& r = k.node.attrs.get_or_default<SliceRange>();
  const std::int64_t b = norm(r.begin, g.n), e = norm(r.end, g.n);
  const float* x = k.in_f(0);
  float* out = k.out_f();
  return make_kernel([=](const ExecCtx&) { copy_elements(x, g.n, b, out, e - b, 0, e - b, g); });
}

std::unique_ptr<CpuKernel> make_slice_grad_ref(const KernelArgs& k) {
  const AxisGeom g = axis_geom(k.out_shape(), k.node.attrs.axis);
  const SliceRange& r = k.node.attrs.get_or_default<SliceRange>();
  const std::int64_t b = norm(r.begin, g.n), e = norm(r.end, g.n);
  const float* gr = k.in_f(0);
  float* out = k.out_f();
  const std::int64_t total = k.out_shape().numel();
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t i = 0; i < total; ++i) out[i] = 0.0f;
    copy_elements(gr, e - b, 0, out, g.n, b, e - b, g);
  });
}

std::unique_ptr<CpuKernel> make_slice_grad_n_ref(const KernelArgs& k) {
  const AxisGeom g = axis_geom(k.out_shape(), k.node.attrs.axis);
  std::vector<const float*> src;
  for (std::size_t i = 1; i < k.in.size(); ++i) src.push_back(k.in_f(i));
  const auto ranges = k.node.attrs.get<SliceRanges>().ranges;
  float* out = k.out_f();
  const std::int64_t total = k.out_shape().numel();
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t i = 0; i < total; ++i) out[i] = 0.0f;
    for (std::size_t p = 0; p < src.size(); ++p) {
      const std::int64_t len = ranges[p][1] - ranges[p][0];
      copy_elements(src[p], len, 0, out, g.n, ranges[p][0], len, g);
    }
  });
}

std::unique_ptr<CpuKernel> make_concat_ref(const KernelArgs& k) {
  const AxisGeom g = concat_geom(k);
  const auto parts = concat_parts(k);
  float* out = k.out_f();
  return make_kernel([=](const ExecCtx&) {
    std::int64_t off = 0;
    for (const auto& [src, d] : parts) {
      copy_elements(src, d, 0, out, g.n, off, d, g);
      off += d;
    }
  });
}

std::unique_ptr<CpuKernel> make_concat_grad_ref(const KernelArgs& k) {
  const int axis = k.node.attrs.axis;
  const auto index = static_cast<std::size_t>(k.node.attrs.get_or_default<PieceIndex>().piece);
  const AxisGeom g = axis_geom(k.in_shape(0), axis);
  std::int64_t off = 0;
  for (std::size_t i = 1; i <= index; ++i) off += k.in_shape(i).dim(axis);
  const std::int64_t len = k.out_shape().dim(axis);
  const float* gr = k.in_f(0);
  float* out = k.out_f();
  return make_kernel([=](const ExecCtx&) { copy_elements(gr, g.n, off, out, len, 0, len, g); });
}

std::unique_ptr<CpuKernel> make_grad_seed(const KernelArgs& k) {
  float* out = k.out_f();
  const std::int64_t n = k.out_shape().numel();
  return make_kernel([=](const ExecCtx&) { std::fill(out, out + n, 1.0f); });
}

// A copying assign: `out` is the variable's memory, input 1 the new value.
std::unique_ptr<CpuKernel> make_assign_copy(const KernelArgs& k) {
  const void* src = k.in[1];
  void* dst = k.out;
  const std::size_t bytes = k.in_types[1].bytes();
  return make_kernel([=](const ExecCtx&) {
    if (src != dst) std::memcpy(dst, src, bytes);
  });
}

}  // namespace

void register_movement_kernels(KernelRegistry& r) {
  auto add = [&](OpKind op, std::string_view name, auto make, auto make_ref) {
    r.add(op, {name, nullptr, make});
    r.add(op, {"reference", nullptr, make_ref, true});
  };
  add(OpKind::Slice, "memcpy_bands", make_slice, make_slice_ref);
  add(OpKind::SliceGrad, "memcpy_bands", make_slice_grad, make_slice_grad_ref);
  add(OpKind::SliceGradN, "place_pieces", make_slice_grad_n, make_slice_grad_n_ref);
  add(OpKind::Concat, "memcpy_bands", make_concat, make_concat_ref);
  add(OpKind::ConcatGrad, "memcpy_bands", make_concat_grad, make_concat_grad_ref);
  add(OpKind::Transpose, "tiled", make_transpose, make_transpose_ref);
  add(OpKind::StridedSlice, "strided_rows", make_strided_slice, make_strided_ref<false>);
  add(OpKind::StridedSliceGrad, "strided_rows", make_strided_slice_grad, make_strided_ref<true>);
}

// Filling ones and copying are their own reference: nothing plainer exists.
void register_graph_kernels(KernelRegistry& r) {
  r.add(OpKind::GradSeed, {"fill_ones", nullptr, make_grad_seed, true});
  r.add(OpKind::Assign, {"memcpy", nullptr, make_assign_copy, true});
}

}  // namespace hetgraph::detail::cpu
