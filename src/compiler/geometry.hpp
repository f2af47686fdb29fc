// SPDX-License-Identifier: Apache-2.0
// Index geometry every platform computes the same way: numpy broadcast stride plans, axis
// splits of reductions, transposes as strided copies, matmul dimensions and the image
// dimensions of the sliding-window ops. Shape inference, the kernels of both platforms and
// the cost model read shapes through here, so the arithmetic exists once.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compiler/attrs.hpp"
#include "hetgraph/graph.hpp"

namespace hetgraph::detail {

/// Index arrays of the geometries hold one entry per dim of the largest rank.
constexpr int kGeomRank = Shape::kMaxRank;
using GeomDims = std::array<std::int64_t, kGeomRank>;

/// Dims of 1: the unused leading dims of a right-aligned geometry.
constexpr GeomDims geom_ones() {
  GeomDims o{};
  for (auto& v : o) v = 1;
  return o;
}

/// The element offset of flat (row-major) index `i` over dims d[0, n) with element strides s.
/// Stops once the index is used up: leading dims of 1 cost nothing.
inline std::int64_t strided_offset(std::int64_t i, const GeomDims& d, const GeomDims& s, int n) {
  std::int64_t o = 0;
  for (int k = n - 1; k >= 0 && i > 0; --k) {
    const auto u = static_cast<std::size_t>(k);
    o += (i % d[u]) * s[u];
    i /= d[u];
  }
  return o;
}

/// Iteration plan for out = f(x_0, .., x_{N-1}) with numpy broadcasting: output dims of size 1
/// are dropped and neighbouring dims merge when every input steps through them alike. The
/// result is `rows` x `inner` with per-dim element strides of each input (0 where it is
/// broadcast).
template <std::size_t N>
struct BcastN {
  int rank = 0;  // collapsed rank, >= 1
  GeomDims d{};
  std::array<GeomDims, N> s{};  // s[k][dim]: input k's stride
  std::int64_t rows = 1, inner = 1;
  /// Input k's stride along the innermost (collapsed) dim: 0 or 1.
  std::int64_t inner_stride(std::size_t k) const {
    return s[k][static_cast<std::size_t>(rank - 1)];
  }
};

template <std::size_t N>
BcastN<N> make_bcast_n(const std::array<const Shape*, N>& in, const Shape& out) {
  // Pad to the output's rank, compute strides with 0 for broadcast dims.
  const int r = out.rank();
  std::array<GeomDims, N> st{};
  for (std::size_t k = 0; k < N; ++k) {
    std::int64_t m = 1;
    for (int i = r - 1; i >= 0; --i) {
      const int j = in[k]->rank() - r + i;
      const std::int64_t dk = j >= 0 ? (*in[k])[j] : 1;
      st[k][static_cast<std::size_t>(i)] = dk == 1 ? 0 : m;
      m *= dk;
    }
  }
  BcastN<N> p;
  for (int i = 0; i < r; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (out[i] == 1) continue;
    if (p.rank > 0) {
      const auto j = static_cast<std::size_t>(p.rank - 1);
      // Merge into the previous kept dim when every input continues through it contiguously.
      bool merge = true;
      for (std::size_t k = 0; k < N; ++k) merge = merge && p.s[k][j] == st[k][u] * out[i];
      if (merge) {
        p.d[j] *= out[i];
        for (std::size_t k = 0; k < N; ++k) p.s[k][j] = st[k][u];
        continue;
      }
    }
    const auto j = static_cast<std::size_t>(p.rank++);
    p.d[j] = out[i];
    for (std::size_t k = 0; k < N; ++k) p.s[k][j] = st[k][u];
  }
  if (p.rank == 0) {
    p.rank = 1;
    p.d[0] = 1;
    for (std::size_t k = 0; k < N; ++k) p.s[k][0] = 0;
  }
  p.inner = p.d[static_cast<std::size_t>(p.rank - 1)];
  p.rows = 1;
  for (int i = 0; i < p.rank - 1; ++i) p.rows *= p.d[static_cast<std::size_t>(i)];
  return p;
}

/// Input offsets of row `row` of a plan (the innermost dim excluded).
template <std::size_t N>
std::array<std::int64_t, N> row_offsets(const BcastN<N>& p, std::int64_t row) {
  std::array<std::int64_t, N> o{};
  for (int k = p.rank - 2; k >= 0; --k) {
    const auto u = static_cast<std::size_t>(k);
    const std::int64_t i = row % p.d[u];
    row /= p.d[u];
    for (std::size_t q = 0; q < N; ++q) o[q] += i * p.s[q][u];
  }
  return o;
}

/// The two-input plan of binary elementwise ops and sum_to.
struct Bcast {
  int rank = 0;  // collapsed rank, >= 1
  GeomDims d{}, sa{}, sb{};
  std::int64_t rows = 1, inner = 1;
};

inline Bcast make_bcast(const Shape& a, const Shape& b, const Shape& out) {
  const BcastN<2> n = make_bcast_n<2>({&a, &b}, out);
  return {n.rank, n.d, n.s[0], n.s[1], n.rows, n.inner};
}

/// Input offsets of row `row` of a plan (the innermost dim excluded).
inline void row_offsets(const Bcast& p, std::int64_t row, std::int64_t& oa, std::int64_t& ob) {
  const BcastN<2> n{p.rank, p.d, {p.sa, p.sb}, p.rows, p.inner};
  const auto o = row_offsets(n, row);
  oa = o[0];
  ob = o[1];
}

/// [outer, n, inner] view of a reduction over `axis` (kAllAxes: everything is n).
/// The gradient rows of a sparse table update (embedding_update, sparse_optimizer_update):
/// `rows` has the lookup's shape `want`, or is the gradient of a concat along the last axis
/// (fuse_embedding_concat) holding them in the band [begin, begin + want's last dim) of each
/// row. Row i of the lookup's gradient starts at element i * stride + begin.
struct GradientBand {
  std::int64_t stride = 0, begin = 0;
  /// Whether `rows` can hold a lookup of shape `want` at `begin`.
  static bool fits(const Shape& rows, const Shape& want, std::int64_t begin) {
    if (rows.rank() != want.rank() || want.rank() == 0 || begin < 0) return false;
    for (int i = 0; i + 1 < want.rank(); ++i)
      if (rows[i] != want[i]) return false;
    return begin + want.dim(-1) <= rows.dim(-1);
  }
  static GradientBand of(const Shape& rows, const Attrs& at) {
    return {rows.dim(-1), gradient_band_begin(at)};
  }
};

struct AxisGeom {
  std::int64_t outer = 1, n = 1, inner = 1;
};
inline AxisGeom axis_geom(const Shape& s, int axis) {
  AxisGeom g;
  if (axis == kAllAxes) {
    g.n = s.numel();
    return g;
  }
  const int a = axis < 0 ? axis + s.rank() : axis;
  for (int i = 0; i < s.rank(); ++i) {
    if (i < a)
      g.outer *= s[i];
    else if (i == a)
      g.n = s[i];
    else
      g.inner *= s[i];
  }
  return g;
}

/// gather_elements, its gradient and scatter_elements: the data's and the indices' dims
/// right-aligned into kGeomRank (the indices no larger on any axis but `axis`, counted in
/// those).
/// A line is an index position with the axis dropped: the data elements its indices reach lie
/// on the data line of the same coordinates, so lines never share an element (kernels split
/// lines among threads and keep index order within each).
struct ElementsGeom {
  GeomDims xd = geom_ones(), id = geom_ones();
  int axis = kGeomRank - 1;
  std::int64_t n() const { return xd[static_cast<std::size_t>(axis)]; }  // data along the axis
  std::int64_t m() const { return id[static_cast<std::size_t>(axis)]; }  // indices along it
  std::int64_t count() const {
    std::int64_t c = 1;
    for (const std::int64_t v : id) c *= v;
    return c;
  }
  std::int64_t lines() const { return m() == 0 ? 0 : count() / m(); }
  /// Strides along the axis in the data and in the indices.
  std::int64_t x_step() const { return stride(xd, axis); }
  std::int64_t i_step() const { return stride(id, axis); }
  /// Offsets of line l's first element in the data and in the indices.
  std::pair<std::int64_t, std::int64_t> line(std::int64_t l) const {
    std::int64_t xo = 0, io = 0;
    for (int d = kGeomRank - 1; d >= 0; --d) {
      if (d == axis) continue;
      const auto u = static_cast<std::size_t>(d);
      const std::int64_t c = l % id[u];
      l /= id[u];
      xo += c * stride(xd, d);
      io += c * stride(id, d);
    }
    return {xo, io};
  }
  static std::int64_t stride(const GeomDims& dims, int d) {
    std::int64_t s = 1;
    for (int k = d + 1; k < kGeomRank; ++k) s *= dims[static_cast<std::size_t>(k)];
    return s;
  }
};
inline ElementsGeom elements_geom(const Shape& x, const Shape& idx, int axis) {
  ElementsGeom g;
  const int r = x.rank(), pad = kGeomRank - r;
  for (int d = 0; d < r; ++d) {
    g.xd[static_cast<std::size_t>(pad + d)] = x[d];
    g.id[static_cast<std::size_t>(pad + d)] = idx[d];
  }
  g.axis = pad + (axis < 0 ? axis + r : axis);
  return g;
}

/// Transpose as a strided copy: output dims and the input stride of each, right-aligned into
/// kGeomRank dims (leading 1s, stride 0). Dims of 1 are dropped and output neighbours that are
/// neighbours in the input too merge, so `rank`, the dims left, is often below the tensor's (a
/// rank-6 window partition is a rank-4 copy). An empty permutation swaps the last two axes.
struct TransposeGeom {
  GeomDims od = geom_ones(), is{};  // out dims, input strides
  int rank = 0;
};

inline TransposeGeom transpose_geom(const Shape& in, const Permutation& perm_attr) {
  const int r = in.rank();
  std::vector<std::int64_t> perm = perm_attr.perm;
  if (perm.empty()) {
    for (int i = 0; i < r; ++i) perm.push_back(i);
    if (r >= 2)
      std::swap(perm[static_cast<std::size_t>(r - 1)], perm[static_cast<std::size_t>(r - 2)]);
  }
  GeomDims stride{};
  std::int64_t m = 1;
  for (int i = r - 1; i >= 0; --i) {
    stride[static_cast<std::size_t>(i)] = m;
    m *= in[i];
  }
  GeomDims d{}, s{};  // the output's dims left after merging, outermost first
  int n = 0;
  for (int i = 0; i < r; ++i) {
    const auto a = static_cast<std::size_t>(perm[static_cast<std::size_t>(i)]);
    const std::int64_t di = in[static_cast<int>(a)], si = stride[a];
    if (di == 1) continue;
    const auto last = static_cast<std::size_t>(n - 1);
    if (n > 0 && s[last] == di * si) {  // the previous output dim steps over this one whole
      d[last] *= di;
      s[last] = si;
      continue;
    }
    d[static_cast<std::size_t>(n)] = di;
    s[static_cast<std::size_t>(n++)] = si;
  }
  TransposeGeom g;
  g.rank = n;
  for (int i = 0; i < n; ++i) {
    const auto j = static_cast<std::size_t>(kGeomRank - n + i);
    g.od[j] = d[static_cast<std::size_t>(i)];
    g.is[j] = s[static_cast<std::size_t>(i)];
  }
  return g;
}

/// A strided slice as a strided copy: the first element's offset, then per output dim (right-
/// aligned into kGeomRank, leading 1s) its size and input stride (step * the dim's row-major
/// stride).
struct StridedGeom {
  std::int64_t base = 0;
  GeomDims od = geom_ones(), is{};
  Shape out;
};

/// Normalises ONNX Slice's starts/ends/axes/steps against `s` (Slice-13's rules: negative
/// values count from the back, then starts and ends clamp to the dim, [0, d] for positive
/// steps and [-1, d-1] for negative ones). Returns why the spec is invalid or the slice
/// empty, or "" with `g` filled.
inline std::string strided_slice_geom(const Shape& s, const SliceSpec& sp, StridedGeom& g) {
  const std::size_t n = sp.starts.size();
  if (sp.ends.size() != n || (!sp.axes.empty() && sp.axes.size() != n) ||
      (!sp.steps.empty() && sp.steps.size() != n)) {
    return "starts, ends, axes and steps must have one entry per sliced axis (" +
           std::to_string(n) + " starts, " + std::to_string(sp.ends.size()) + " ends, " +
           std::to_string(sp.axes.size()) + " axes, " + std::to_string(sp.steps.size()) + " steps)";
  }
  const int r = s.rank();
  GeomDims start{}, step = geom_ones(), count{};
  for (int d = 0; d < r; ++d) count[static_cast<std::size_t>(d)] = s[d];
  std::array<bool, kGeomRank> seen{};
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t a = sp.axes.empty() ? static_cast<std::int64_t>(i) : sp.axes[i];
    if (a < -r || a >= r) {
      return "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r);
    }
    if (a < 0) a += r;
    const auto u = static_cast<std::size_t>(a);
    if (seen[u]) return "axis " + std::to_string(a) + " is sliced twice";
    seen[u] = true;
    const std::int64_t d = s[static_cast<int>(a)];
    const std::int64_t st = sp.steps.empty() ? 1 : sp.steps[i];
    if (st == 0) return "the step along axis " + std::to_string(a) + " is 0";
    std::int64_t b = sp.starts[i], e = sp.ends[i];
    if (b < 0) b = b < -d ? -1 : b + d;  // below -d: before the start, clamped next
    if (e < 0) e = e < -d ? -1 : e + d;
    if (st > 0) {
      b = std::clamp<std::int64_t>(b, 0, d);
      e = std::clamp<std::int64_t>(e, 0, d);
    } else {
      b = std::clamp<std::int64_t>(b, 0, d - 1);
      e = std::clamp<std::int64_t>(e, -1, d - 1);
    }
    const std::int64_t len = st > 0 ? (e - b + st - 1) / st : (b - e + (-st) - 1) / (-st);
    if (len <= 0) {
      return "the slice of axis " + std::to_string(a) + " (size " + std::to_string(d) + ") from " +
             std::to_string(sp.starts[i]) + " to " + std::to_string(sp.ends[i]) + " by " +
             std::to_string(st) + " is empty";
    }
    start[u] = b;
    step[u] = st;
    count[u] = len;
  }
  std::int64_t m = 1;
  GeomDims stride{};
  for (int d = r - 1; d >= 0; --d) {
    stride[static_cast<std::size_t>(d)] = m;
    m *= s[d];
  }
  g = StridedGeom{};
  std::vector<std::int64_t> od;
  for (int d = 0; d < r; ++d) {
    const auto u = static_cast<std::size_t>(d);
    g.base += start[u] * stride[u];
    const auto j = static_cast<std::size_t>(kGeomRank - r + d);
    g.od[j] = count[u];
    g.is[j] = step[u] * stride[u];
    od.push_back(count[u]);
  }
  g.out = Shape(std::span<const std::int64_t>(od));
  return {};
}

/// op(a) @ op(b) of a matmul node: rank 2 x rank 2, or batched over a leading dim where a
/// rank-2 operand is shared by the whole batch.
struct MatmulGeom {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  std::int64_t k_b = 0;  // op(b)'s row count: equal to k when the shapes fit
  bool a_batched = false, b_batched = false;
  bool ta = false, tb = false;
  std::int64_t c_elems() const { return batch * m * n; }
};
inline MatmulGeom matmul_geom(const Shape& a, const Shape& b, bool trans_a, bool trans_b) {
  MatmulGeom g;
  g.ta = trans_a;
  g.tb = trans_b;
  g.a_batched = a.rank() == 3;
  g.b_batched = b.rank() == 3;
  g.batch = g.a_batched ? a[0] : (g.b_batched ? b[0] : 1);
  g.m = g.ta ? a.dim(-1) : a.dim(-2);
  g.k = g.ta ? a.dim(-2) : a.dim(-1);
  g.k_b = g.tb ? b.dim(-1) : b.dim(-2);
  g.n = g.tb ? b.dim(-2) : b.dim(-1);
  return g;
}

/// attention(q, kt, v[, mask]) (AttentionSpec): `batch` products [tq, d] x [d, tk], a softmax
/// over each row of the scores, then [tq, tk] x [tk, dv]. Product b reads q's rows from
/// q_at(b), ld apart (the same for k, v and the result y); k is read transposed where k_trans
/// (stored [tk, d]). With heads interleaved (AttentionSpec::heads) b = outer * heads + h and the
/// rows of one head lie heads * d apart. The mask's element strides over the scores' dims (0
/// where it is broadcast), their leading dims folded into two (ranks up to 4): product b's
/// mask starts at mask_offset(b).
struct AttentionGeom {
  std::int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  std::int64_t heads = 0;  // 0: each product's operands contiguous
  bool k_trans = false;
  std::int64_t q_ld = 0, k_ld = 0, v_ld = 0, y_ld = 0;
  std::int64_t lead1 = 1;  // the inner leading dim's size: b = b0 * lead1 + b1
  std::int64_t ms0 = 0, ms1 = 0, msq = 0, msk = 0;  // outer, inner leading, query, key strides
  std::int64_t mask_offset(std::int64_t b) const { return (b / lead1) * ms0 + (b % lead1) * ms1; }
  // Where product b's operand of `rows` rows of `cols` starts.
  std::int64_t at(std::int64_t b, std::int64_t rows, std::int64_t cols) const {
    if (heads == 0) return b * rows * cols;
    return ((b / heads) * rows * heads + b % heads) * cols;
  }
  std::int64_t q_at(std::int64_t b) const { return at(b, tq, d); }
  std::int64_t k_at(std::int64_t b) const { return at(b, k_trans ? tk : d, k_trans ? d : tk); }
  std::int64_t v_at(std::int64_t b) const { return at(b, tk, dv); }
  std::int64_t y_at(std::int64_t b) const { return at(b, tq, dv); }
};
inline AttentionGeom attention_geom(const Shape& q, const Shape& k, const Shape& v,
                                    const Shape* mask, const AttentionSpec& s) {
  AttentionGeom g;
  const std::int64_t h = s.heads;
  g.heads = h;
  g.k_trans = s.trans_k || h > 0;
  const int rows = h > 0 ? -3 : -2;  // the T axis
  g.tq = q.dim(rows);
  g.d = q.dim(-1);
  g.tk = g.k_trans ? k.dim(rows) : k.dim(-1);
  g.dv = v.dim(-1);
  for (int a = 0; a < q.rank() + rows; ++a) g.batch *= q[a];
  if (h > 0) g.batch *= h;
  const std::int64_t stride = h > 0 ? h : 1;
  g.q_ld = g.d * stride;
  g.k_ld = (g.k_trans ? g.d : g.tk) * stride;
  g.v_ld = g.dv * stride;
  g.y_ld = g.dv * stride;
  if (mask == nullptr || s.mask_dims.size() < 2 || s.mask_dims.size() > 4) return g;
  const Shape scores{std::span<const std::int64_t>(s.mask_dims)};
  const int r = scores.rank(), lead = r - mask->rank();
  GeomDims st{};
  std::int64_t step = 1;
  for (int a = r - 1; a >= 0; --a) {
    const std::int64_t md = a >= lead ? (*mask)[a - lead] : 1;
    st[static_cast<std::size_t>(a)] = md == 1 ? 0 : step;
    step *= md;
  }
  g.msq = st[static_cast<std::size_t>(r - 2)];
  g.msk = st[static_cast<std::size_t>(r - 1)];
  if (r >= 3) g.ms0 = st[0];
  if (r == 4) {
    g.lead1 = scores[1];
    g.ms1 = st[1];
  }
  return g;
}

/// One node's image dimensions: input [n, c, h, w], output [n, oc, oh, ow]; for conv2d the
/// kernel is [oc, c / groups, win.kernel[0], win.kernel[1]]. Pads are resolved (auto_pad).
struct ImageGeom {
  std::int64_t n = 1, c = 1, h = 1, w = 1, oc = 1, oh = 1, ow = 1;
  Window2d win;
  std::int64_t groups() const { return win.groups; }
  std::int64_t c_per_group() const { return c / win.groups; }
  std::int64_t oc_per_group() const { return oc / win.groups; }
};

/// `w` with auto_pad turned into explicit pads for an input of (h, w) rows and columns: SAME
/// gives total padding (ceil(in / stride) - 1) * stride + extent - in (at least 0), split with
/// the odd one at the end (same_upper) or the start (same_lower), as ONNX's shape inference.
inline Window2d resolve_pads(Window2d w, std::int64_t h, std::int64_t wd) {
  if (w.auto_pad == AutoPadMode::none) return w;
  const std::int64_t in[2] = {h, wd};
  for (std::size_t d = 0; d < 2; ++d) {
    std::int64_t total = 0;
    if (w.auto_pad != AutoPadMode::valid) {
      const std::int64_t out = (in[d] + w.stride[d] - 1) / w.stride[d];
      total = std::max<std::int64_t>(
          0, (out - 1) * w.stride[d] + w.extent(static_cast<int>(d)) - in[d]);
    }
    const std::int64_t small = total / 2, big = total - small;
    w.pad_begin[d] = w.auto_pad == AutoPadMode::same_lower ? big : small;
    w.pad_end[d] = w.auto_pad == AutoPadMode::same_lower ? small : big;
  }
  return w;
}

/// Geometry of a convolution of x [N, C, H, W] with weights [O, C / groups, KH, KW].
inline ImageGeom conv_geom(const Shape& x, const Shape& wt, const Attrs& a) {
  ImageGeom g;
  g.win = window2d(a);
  g.win.kernel = {wt[2], wt[3]};
  g.win = resolve_pads(g.win, x[2], x[3]);
  g.n = x[0];
  g.c = x[1];
  g.h = x[2];
  g.w = x[3];
  g.oc = wt[0];
  g.oh = g.win.out_size(0, g.h);
  g.ow = g.win.out_size(1, g.w);
  return g;
}

/// Rows and columns of conv_transpose2d's output for x [N, C, H, W] and weights
/// [C, O / groups, KH, KW] (ONNX ConvTranspose): stride * (in - 1) + output_padding + extent -
/// pads.
inline std::array<std::int64_t, 2> conv_transpose_out(const Shape& x, const Shape& wt,
                                                      const Window2d& win) {
  Window2d w = win;
  w.kernel = {wt[2], wt[3]};
  std::array<std::int64_t, 2> out{};
  for (std::size_t d = 0; d < 2; ++d) {
    out[d] = w.stride[d] * (x[static_cast<int>(d) + 2] - 1) + w.output_padding[d] +
             w.extent(static_cast<int>(d)) - w.pad_begin[d] - w.pad_end[d];
  }
  return out;
}

/// conv_transpose2d of x [N, C, H, W] is the input gradient of the convolution that maps its
/// output [N, O, OH, OW] back to x's shape with the same weights: this is that convolution's
/// geometry (its input is the transposed one's output), which the conv2d_grad_input kernels
/// run as they are.
inline ImageGeom conv_transpose_geom(const Shape& x, const Shape& wt, const Attrs& a) {
  const Window2d& w = a.get<Window2d>();
  const auto out = conv_transpose_out(x, wt, w);
  return conv_geom(Shape{x[0], wt[1] * w.groups, out[0], out[1]}, wt, a);
}

/// Geometry of a pooling of x [N, C, H, W].
inline ImageGeom pool_geom(const Shape& x, const Attrs& a) {
  ImageGeom g;
  g.win = resolve_pads(a.get<Window2d>(), x[2], x[3]);
  g.n = x[0];
  g.c = g.oc = x[1];
  g.h = x[2];
  g.w = x[3];
  g.oh = g.win.out_size(0, g.h);
  g.ow = g.win.out_size(1, g.w);
  return g;
}

}  // namespace hetgraph::detail
