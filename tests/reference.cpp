// SPDX-License-Identifier: Apache-2.0
#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include "compiler/dropout_mask.hpp"
#include "compiler/geometry.hpp"
#include "compiler/graph_impl.hpp"

namespace ref {

using hetgraph::Shape;
using hetgraph::detail::GraphImpl;
using hetgraph::detail::NodeRec;
using hetgraph::detail::OpKind;

namespace {

std::vector<std::int64_t> unravel(std::int64_t flat, const Shape& s) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[static_cast<std::size_t>(d)] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

std::int64_t ravel(const std::vector<std::int64_t>& idx, const Shape& s) {
  std::int64_t flat = 0;
  for (int d = 0; d < s.rank(); ++d) flat = flat * s[d] + idx[static_cast<std::size_t>(d)];
  return flat;
}

Shape make_shape(const std::vector<std::int64_t>& d) {
  return Shape(std::span<const std::int64_t>(d));
}

Shape broadcast(const Shape& a, const Shape& b) {
  const int r = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> d(static_cast<std::size_t>(r));
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i, ib = b.rank() - r + i;
    const std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    d[static_cast<std::size_t>(i)] = std::max(da, db);
  }
  return make_shape(d);
}

// Element of `x` that output index `idx` (of a broadcast result) reads.
double at_broadcast(const Array& x, const std::vector<std::int64_t>& idx) {
  const int r = static_cast<int>(idx.size());
  std::int64_t flat = 0;
  for (int d = 0; d < x.shape.rank(); ++d) {
    const std::int64_t i = idx[static_cast<std::size_t>(r - x.shape.rank() + d)];
    flat = flat * x.shape[d] + (x.shape[d] == 1 ? 0 : i);
  }
  return x.v[static_cast<std::size_t>(flat)];
}

Array binary(const Array& a, const Array& b, const std::function<double(double, double)>& f) {
  Array out(broadcast(a.shape, b.shape));
  for (std::int64_t i = 0; i < out.shape.numel(); ++i) {
    const auto idx = unravel(i, out.shape);
    out.v[static_cast<std::size_t>(i)] = f(at_broadcast(a, idx), at_broadcast(b, idx));
  }
  return out;
}

Array ternary(const Array& c, const Array& a, const Array& b,
              const std::function<double(double, double, double)>& f) {
  Array out(broadcast(c.shape, broadcast(a.shape, b.shape)));
  for (std::int64_t i = 0; i < out.shape.numel(); ++i) {
    const auto idx = unravel(i, out.shape);
    out.v[static_cast<std::size_t>(i)] =
        f(at_broadcast(c, idx), at_broadcast(a, idx), at_broadcast(b, idx));
  }
  return out;
}

// NaN-propagating maximum and minimum: a NaN operand is the result (as PyTorch and ONNX).
double nan_max(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
}
double nan_min(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);
}

// a rounded to a float format with `bits` mantissa bits and exponents down to `emin` (below
// it a fixed step: subnormals), halves to even, beyond `max` infinite. Written from the formats'
// definitions (a power-of-two step per binade), not from the kernels' bit manipulation.
double round_to_format(double a, int bits, int emin, double max) {
  if (!std::isfinite(a) || a == 0) return a;
  int e = 0;
  std::frexp(a, &e);  // |a| in [2^(e-1), 2^e)
  const int exponent = std::max(e - 1, emin);
  const double step = std::ldexp(1.0, exponent - bits);
  const double r = std::nearbyint(a / step) * step;
  if (std::fabs(r) > max) return std::copysign(std::numeric_limits<double>::infinity(), a);
  return r == 0 ? std::copysign(0.0, a) : r;
}

Array unary(const Array& a, const std::function<double(double)>& f) {
  Array out(a.shape);
  for (std::size_t i = 0; i < a.size(); ++i) out.v[i] = f(a.v[i]);
  return out;
}

int norm_axis(int axis, int rank) {
  return axis < 0 ? axis + rank : axis;
}

// x as [outer, n, inner] around `axis` (all axes: [1, numel, 1]): the lines a reduction reads.
struct Lines {
  std::int64_t outer = 1, n = 1, inner = 1;
};
Lines lines_of(const Array& x, int axis) {
  const bool all = axis == hetgraph::kAllAxes;
  const int a = all ? -1 : norm_axis(axis, x.shape.rank());
  Lines l;
  l.n = all ? x.shape.numel() : x.shape[a];
  for (int d = 0; !all && d < x.shape.rank(); ++d) {
    if (d < a) l.outer *= x.shape[d];
    if (d > a) l.inner *= x.shape[d];
  }
  return l;
}

Array reduce(const Array& x, int axis, bool keepdims, OpKind op) {
  const bool all = axis == hetgraph::kAllAxes;
  const int a = all ? -1 : norm_axis(axis, x.shape.rank());
  std::vector<std::int64_t> od;
  for (int d = 0; d < x.shape.rank(); ++d) {
    const bool reduced = all || d == a;
    if (!reduced)
      od.push_back(x.shape[d]);
    else if (keepdims)
      od.push_back(1);
  }
  Array out(make_shape(od));
  // x as [outer, n, inner] with n the reduced extent (everything for all axes): output element
  // o = (p, q) takes x[p, 0..n-1, q] in that order, the order of x's flat index. keepdims only
  // changes the output's shape, not its layout. (No index vectors per element: under ASan the
  // allocations made this loop most of test_ops' time.)
  const auto [outer, n, inner] = lines_of(x, axis);
  for (std::int64_t p = 0; p < outer; ++p) {
    for (std::int64_t q = 0; q < inner; ++q) {
      double acc = op == OpKind::ReduceMax ? -INFINITY : op == OpKind::ReduceProd ? 1.0 : 0.0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double v = x.v[static_cast<std::size_t>((p * n + j) * inner + q)];
        acc = op == OpKind::ReduceMax    ? nan_max(acc, v)
              : op == OpKind::ReduceProd ? acc * v
                                         : acc + v;
      }
      out.v[static_cast<std::size_t>(p * inner + q)] =
          op == OpKind::ReduceMean ? acc / static_cast<double>(n) : acc;
    }
  }
  return out;
}

// Running sums along `axis` in line order; ints wrap around at 32 bits after each step.
Array cumsum(const Array& x, int axis, bool exclusive, bool reverse, bool ints) {
  Array out(x.shape);
  const auto [outer, n, inner] = lines_of(x, axis);
  for (std::int64_t p = 0; p < outer; ++p) {
    for (std::int64_t q = 0; q < inner; ++q) {
      double run = 0;
      for (std::int64_t s = 0; s < n; ++s) {
        const auto at = static_cast<std::size_t>((p * n + (reverse ? n - 1 - s : s)) * inner + q);
        if (exclusive) out.v[at] = run;
        run += x.v[at];
        if (ints)
          run =
              static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::int64_t>(run)));
        if (!exclusive) out.v[at] = run;
      }
    }
  }
  return out;
}

// Position along `axis` (all axes: the flat position) of each line's largest (or smallest)
// element: NaN beats every number, ties (NaNs among themselves too) go to the first position, or
// the last with `last`.
Array arg_extreme(const Array& x, int axis, bool keepdims, bool last, bool max) {
  const Array shape_of = reduce(x, axis, keepdims, OpKind::ReduceSum);
  Array out(shape_of.shape);
  const auto [outer, n, inner] = lines_of(x, axis);
  for (std::int64_t p = 0; p < outer; ++p) {
    for (std::int64_t q = 0; q < inner; ++q) {
      std::vector<double> line;
      for (std::int64_t j = 0; j < n; ++j)
        line.push_back(x.v[static_cast<std::size_t>((p * n + j) * inner + q)]);
      // The winning value first (NaN if any), then where it occurs.
      double best = line[0];
      for (double v : line) {
        if (std::isnan(best)) break;
        if (std::isnan(v) || (max ? v > best : v < best)) best = v;
      }
      std::int64_t at = -1;
      for (std::int64_t j = 0; j < n; ++j) {
        const double v = line[static_cast<std::size_t>(j)];
        if (v == best || (std::isnan(v) && std::isnan(best))) {
          at = j;
          if (!last) break;
        }
      }
      out.v[static_cast<std::size_t>(p * inner + q)] = static_cast<double>(at);
    }
  }
  return out;
}

// ONNX TopK's indices, as numpy's reference defines them: each line stably sorted with NaN
// above every number (descending for largest, so equal values keep index order), the first k.
Array top_k(const Array& x, int axis, std::int64_t k, bool largest) {
  const auto [outer, n, inner] = lines_of(x, axis);
  std::vector<std::int64_t> od(x.shape.dims().begin(), x.shape.dims().end());
  od[static_cast<std::size_t>(norm_axis(axis, x.shape.rank()))] = k;
  Array out(make_shape(od));
  for (std::int64_t p = 0; p < outer; ++p) {
    for (std::int64_t q = 0; q < inner; ++q) {
      auto at = [&](std::int64_t j) {
        return x.v[static_cast<std::size_t>((p * n + j) * inner + q)];
      };
      // a before b: the larger (smaller) one, NaN being the largest.
      auto before = [&](std::int64_t a, std::int64_t b) {
        const double u = at(a), v = at(b);
        if (std::isnan(u) || std::isnan(v))
          return std::isnan(largest ? u : v) && !std::isnan(largest ? v : u);
        return largest ? u > v : u < v;
      };
      std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
      for (std::int64_t j = 0; j < n; ++j) idx[static_cast<std::size_t>(j)] = j;
      std::stable_sort(idx.begin(), idx.end(), before);
      for (std::int64_t r = 0; r < k; ++r)
        out.v[static_cast<std::size_t>((p * k + r) * inner + q)] =
            static_cast<double>(idx[static_cast<std::size_t>(r)]);
    }
  }
  return out;
}

// Applies f to every line along `axis` (a line: the elements differing only in that index).
Array along_axis(const Array& x, int axis, const std::function<void(std::vector<double>&)>& f) {
  const int a = norm_axis(axis, x.shape.rank());
  Array out = x;
  const std::int64_t n = x.shape[a];
  for (std::int64_t i = 0; i < x.shape.numel(); ++i) {
    const auto idx = unravel(i, x.shape);
    if (idx[static_cast<std::size_t>(a)] != 0) continue;  // visit each line once, from its start
    std::vector<std::int64_t> pos(idx);
    std::vector<double> line(static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) {
      pos[static_cast<std::size_t>(a)] = j;
      line[static_cast<std::size_t>(j)] = x.v[static_cast<std::size_t>(ravel(pos, x.shape))];
    }
    f(line);
    for (std::int64_t j = 0; j < n; ++j) {
      pos[static_cast<std::size_t>(a)] = j;
      out.v[static_cast<std::size_t>(ravel(pos, x.shape))] = line[static_cast<std::size_t>(j)];
    }
  }
  return out;
}

Array matmul(const Array& A, const Array& B, bool ta, bool tb) {
  const bool batched = A.shape.rank() == 3 || B.shape.rank() == 3;
  const std::int64_t batch =
      A.shape.rank() == 3 ? A.shape[0] : (B.shape.rank() == 3 ? B.shape[0] : 1);
  const std::int64_t m = ta ? A.shape.dim(-1) : A.shape.dim(-2);
  const std::int64_t k = ta ? A.shape.dim(-2) : A.shape.dim(-1);
  const std::int64_t n = tb ? B.shape.dim(-2) : B.shape.dim(-1);
  Array out(batched ? Shape{batch, m, n} : Shape{m, n});
  const std::int64_t ar = A.shape.dim(-2), ac = A.shape.dim(-1);
  const std::int64_t br = B.shape.dim(-2), bc = B.shape.dim(-1);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t ao = A.shape.rank() == 3 ? b * ar * ac : 0;
    const std::int64_t bo = B.shape.rank() == 3 ? b * br * bc : 0;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double av = A.v[static_cast<std::size_t>(ao + (ta ? p * ac + i : i * ac + p))];
          const double bv = B.v[static_cast<std::size_t>(bo + (tb ? j * bc + p : p * bc + j))];
          s += av * bv;
        }
        out.v[static_cast<std::size_t>(b * m * n + i * n + j)] = s;
      }
    }
  }
  return out;
}

Array xent(const Array& p, const Array& y, bool int_labels) {
  const std::int64_t c = p.shape.dim(-1), rows = p.shape.numel() / c;
  std::vector<std::int64_t> od(p.shape.dims().begin(), p.shape.dims().end() - 1);
  Array out(make_shape(od));
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::int64_t j = 0; j < c; ++j) {
      const double yv =
          int_labels
              ? (static_cast<std::int64_t>(y.v[static_cast<std::size_t>(r)]) == j ? 1.0 : 0.0)
              : y.v[static_cast<std::size_t>(r * c + j)];
      if (yv != 0.0) s -= yv * std::log(p.v[static_cast<std::size_t>(r * c + j)]);
    }
    out.v[static_cast<std::size_t>(r)] = s;
  }
  return out;
}

Array slice(const Array& x, int axis, std::int64_t b, std::int64_t e) {
  const int a = norm_axis(axis, x.shape.rank());
  const std::int64_t d = x.shape[a];
  if (b < 0) b += d;
  if (e < 0) e += d;
  std::vector<std::int64_t> od(x.shape.dims().begin(), x.shape.dims().end());
  od[static_cast<std::size_t>(a)] = e - b;
  Array out(make_shape(od));
  for (std::int64_t i = 0; i < out.shape.numel(); ++i) {
    auto idx = unravel(i, out.shape);
    idx[static_cast<std::size_t>(a)] += b;
    out.v[static_cast<std::size_t>(i)] = x.v[static_cast<std::size_t>(ravel(idx, x.shape))];
  }
  return out;
}

// ONNX Slice from its definition (Slice-13): per axis, clamp then walk by the step.
Array strided_slice(const Array& x, const hetgraph::detail::SliceSpec& sp) {
  const int r = x.shape.rank();
  std::vector<std::int64_t> start(static_cast<std::size_t>(r), 0), step(start.size(), 1),
      count(x.shape.dims().begin(), x.shape.dims().end());
  for (std::size_t i = 0; i < sp.starts.size(); ++i) {
    const int a =
        norm_axis(sp.axes.empty() ? static_cast<int>(i) : static_cast<int>(sp.axes[i]), r);
    const auto u = static_cast<std::size_t>(a);
    const double d = static_cast<double>(x.shape[a]);
    const double st = sp.steps.empty() ? 1.0 : static_cast<double>(sp.steps[i]);
    double b = static_cast<double>(sp.starts[i]), e = static_cast<double>(sp.ends[i]);
    if (b < 0) b += d;
    if (e < 0) e += d;
    b = st > 0 ? std::clamp(b, 0.0, d) : std::clamp(b, 0.0, d - 1);
    e = st > 0 ? std::clamp(e, 0.0, d) : std::clamp(e, -1.0, d - 1);
    start[u] = static_cast<std::int64_t>(b);
    step[u] = static_cast<std::int64_t>(st);
    count[u] = static_cast<std::int64_t>(std::max(0.0, std::ceil((e - b) / st)));
  }
  Array out(make_shape(count));
  for (std::int64_t i = 0; i < out.shape.numel(); ++i) {
    auto idx = unravel(i, out.shape);
    for (int d = 0; d < r; ++d) {
      const auto u = static_cast<std::size_t>(d);
      idx[u] = start[u] + idx[u] * step[u];
    }
    out.v[static_cast<std::size_t>(i)] = x.v[static_cast<std::size_t>(ravel(idx, x.shape))];
  }
  return out;
}

Array concat(const std::vector<Array>& xs, int axis) {
  const int a = norm_axis(axis, xs[0].shape.rank());
  std::vector<std::int64_t> od(xs[0].shape.dims().begin(), xs[0].shape.dims().end());
  od[static_cast<std::size_t>(a)] = 0;
  for (const Array& x : xs) od[static_cast<std::size_t>(a)] += x.shape[a];
  Array out(make_shape(od));
  std::int64_t off = 0;
  for (const Array& x : xs) {
    for (std::int64_t i = 0; i < x.shape.numel(); ++i) {
      auto idx = unravel(i, x.shape);
      idx[static_cast<std::size_t>(a)] += off;
      out.v[static_cast<std::size_t>(ravel(idx, out.shape))] = x.v[static_cast<std::size_t>(i)];
    }
    off += x.shape[a];
  }
  return out;
}

Array transpose(const Array& x, std::vector<std::int64_t> perm) {
  const int r = x.shape.rank();
  if (perm.empty()) {
    for (int i = 0; i < r; ++i) perm.push_back(i);
    if (r >= 2)
      std::swap(perm[static_cast<std::size_t>(r - 1)], perm[static_cast<std::size_t>(r - 2)]);
  }
  std::vector<std::int64_t> od;
  for (std::int64_t p : perm) od.push_back(x.shape[static_cast<int>(p)]);
  Array out(make_shape(od));
  for (std::int64_t i = 0; i < out.shape.numel(); ++i) {
    const auto oi = unravel(i, out.shape);
    std::vector<std::int64_t> ii(static_cast<std::size_t>(r));
    for (int d = 0; d < r; ++d)
      ii[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])] =
          oi[static_cast<std::size_t>(d)];
    out.v[static_cast<std::size_t>(i)] = x.v[static_cast<std::size_t>(ravel(ii, x.shape))];
  }
  return out;
}

Array reshape(const Array& x, std::vector<std::int64_t> d) {
  std::int64_t known = 1;
  int at = -1;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] == -1)
      at = static_cast<int>(i);
    else
      known *= d[i];
  }
  if (at >= 0) d[static_cast<std::size_t>(at)] = x.shape.numel() / known;
  return Array(make_shape(d), x.v);
}

// 2-D windows over NCHW images, written from the definitions (ONNX's): output size
// floor((in + pads - span) / stride) + 1, or ceil with ceil_mode; taps outside the image are
// padding; auto_pad SAME pads so the output has ceil(in / stride) rows, the odd pad at the end
// (SAME_UPPER) or the start (SAME_LOWER).
struct Win {
  std::int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  bool include_pad, ceil;
  std::int64_t groups;
};
Win window_of(const hetgraph::detail::Attrs& at, std::int64_t kh, std::int64_t kw, std::int64_t h,
              std::int64_t wd) {
  using hetgraph::detail::AutoPadMode;
  const auto w = at.get<hetgraph::detail::Window2d>();
  Win p{
      kh,           kw,           w.stride[0],   w.stride[1],   w.pad_begin[0],      w.pad_begin[1],
      w.pad_end[0], w.pad_end[1], w.dilation[0], w.dilation[1], w.count_include_pad, w.ceil_mode,
      w.groups};
  if (w.auto_pad != AutoPadMode::none) {
    auto pads = [&](std::int64_t in, std::int64_t k, std::int64_t d, std::int64_t s,
                    std::int64_t& begin, std::int64_t& end) {
      std::int64_t total = 0;
      if (w.auto_pad != AutoPadMode::valid) {
        const auto out = static_cast<std::int64_t>(std::ceil(static_cast<double>(in) / s));
        total = std::max<std::int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in);
      }
      begin = w.auto_pad == AutoPadMode::same_lower ? total - total / 2 : total / 2;
      end = total - begin;
    };
    pads(h, kh, p.dh, p.sh, p.pt, p.pb);
    pads(wd, kw, p.dw, p.sw, p.pl, p.pr);
  }
  return p;
}
std::int64_t out_len(std::int64_t in, std::int64_t pad, std::int64_t k, std::int64_t dil,
                     std::int64_t stride, bool ceil = false) {
  const double span = static_cast<double>(in + pad - (dil * (k - 1) + 1)) / stride;
  return static_cast<std::int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
}

// Grouped: output channel o reads the C / G input channels of its group (o / (O / G)).
Array conv2d(const Array& x, const Array& w, const Array* b, const hetgraph::detail::Attrs& at) {
  const Shape& xs = x.shape;
  const Shape& ws = w.shape;
  const std::int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0];
  const Win p = window_of(at, ws[2], ws[3], H, W);
  const std::int64_t CG = C / p.groups, OG = O / p.groups;
  const std::int64_t OH = out_len(H, p.pt + p.pb, p.kh, p.dh, p.sh);
  const std::int64_t OW = out_len(W, p.pl + p.pr, p.kw, p.dw, p.sw);
  Array out(Shape{N, O, OH, OW});
  std::size_t i = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t oy = 0; oy < OH; ++oy)
        for (std::int64_t ox = 0; ox < OW; ++ox) {
          double s = b ? b->v[static_cast<std::size_t>(o)] : 0.0;
          for (std::int64_t cl = 0; cl < CG; ++cl)
            for (std::int64_t ky = 0; ky < p.kh; ++ky)
              for (std::int64_t kx = 0; kx < p.kw; ++kx) {
                const std::int64_t c = o / OG * CG + cl;
                const std::int64_t y = oy * p.sh - p.pt + ky * p.dh;
                const std::int64_t xx = ox * p.sw - p.pl + kx * p.dw;
                if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                s += x.v[static_cast<std::size_t>(((n * C + c) * H + y) * W + xx)] *
                     w.v[static_cast<std::size_t>(((o * CG + cl) * p.kh + ky) * p.kw + kx)];
              }
          out.v[i++] = s;
        }
  return out;
}

// ONNX ConvTranspose, scattering: input (iy, ix) of channel c adds x w[c, o % OG, ky, kx] at
// output (iy * s - pad + ky * d, ...) of each channel o of c's group.
Array conv_transpose2d(const Array& x, const Array& w, const Array* b,
                       const hetgraph::detail::Attrs& at) {
  const auto win = at.get<hetgraph::detail::Window2d>();
  const Shape& xs = x.shape;
  const Shape& ws = w.shape;
  const std::int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], G = win.groups;
  const std::int64_t OG = ws[1], O = OG * G, CG = C / G, KH = ws[2], KW = ws[3];
  const std::int64_t OH = win.stride[0] * (H - 1) + win.output_padding[0] +
                          (KH - 1) * win.dilation[0] + 1 - win.pad_begin[0] - win.pad_end[0];
  const std::int64_t OW = win.stride[1] * (W - 1) + win.output_padding[1] +
                          (KW - 1) * win.dilation[1] + 1 - win.pad_begin[1] - win.pad_end[1];
  Array out(Shape{N, O, OH, OW});
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t i = 0; i < OH * OW; ++i)
        out.v[static_cast<std::size_t>((n * O + o) * OH * OW + i)] =
            b ? b->v[static_cast<std::size_t>(o)] : 0.0;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t iy = 0; iy < H; ++iy)
        for (std::int64_t ix = 0; ix < W; ++ix)
          for (std::int64_t ol = 0; ol < OG; ++ol)
            for (std::int64_t ky = 0; ky < KH; ++ky)
              for (std::int64_t kx = 0; kx < KW; ++kx) {
                const std::int64_t o = c / CG * OG + ol;
                const std::int64_t y = iy * win.stride[0] - win.pad_begin[0] + ky * win.dilation[0];
                const std::int64_t xx =
                    ix * win.stride[1] - win.pad_begin[1] + kx * win.dilation[1];
                if (y < 0 || y >= OH || xx < 0 || xx >= OW) continue;
                out.v[static_cast<std::size_t>(((n * O + o) * OH + y) * OW + xx)] +=
                    x.v[static_cast<std::size_t>(((n * C + c) * H + iy) * W + ix)] *
                    w.v[static_cast<std::size_t>(((c * OG + ol) * KH + ky) * KW + kx)];
              }
  return out;
}

// Max: NaN-propagating, over the in-image taps. Average: over the in-image taps, divided by
// their count, or with count_include_pad by the window's size inside the padded image (ceil
// mode's last window may reach past the end padding: that part does not count).
Array pool2d(const Array& x, const hetgraph::detail::Attrs& at, bool max) {
  const auto w = at.get<hetgraph::detail::Window2d>();
  const Shape& xs = x.shape;
  const std::int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const Win p = window_of(at, w.kernel[0], w.kernel[1], H, W);
  const std::int64_t OH = out_len(H, p.pt + p.pb, p.kh, p.dh, p.sh, p.ceil);
  const std::int64_t OW = out_len(W, p.pl + p.pr, p.kw, p.dw, p.sw, p.ceil);
  Array out(Shape{N, C, OH, OW});
  std::size_t i = 0;
  for (std::int64_t nc = 0; nc < N * C; ++nc)
    for (std::int64_t oy = 0; oy < OH; ++oy)
      for (std::int64_t ox = 0; ox < OW; ++ox) {
        double m = -INFINITY, s = 0;
        std::int64_t inside = 0, padded = 0;
        for (std::int64_t ky = 0; ky < p.kh; ++ky)
          for (std::int64_t kx = 0; kx < p.kw; ++kx) {
            const std::int64_t y = oy * p.sh - p.pt + ky * p.dh;
            const std::int64_t xx = ox * p.sw - p.pl + kx * p.dw;
            if (y < H + p.pb && xx < W + p.pr) ++padded;
            if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
            const double v = x.v[static_cast<std::size_t>((nc * H + y) * W + xx)];
            m = nan_max(m, v);
            s += v;
            ++inside;
          }
        out.v[i++] = max ? m : s / static_cast<double>(p.include_pad ? padded : inside);
      }
  return out;
}

// ONNX Gather along axis a: x.shape[:a] + idx.shape + x.shape[a+1:], negative indices wrap.
Array gather(const Array& x, const Array& idx, int axis) {
  const int a = norm_axis(axis, x.shape.rank());
  std::vector<std::int64_t> od(x.shape.dims().begin(), x.shape.dims().begin() + a);
  od.insert(od.end(), idx.shape.dims().begin(), idx.shape.dims().end());
  od.insert(od.end(), x.shape.dims().begin() + a + 1, x.shape.dims().end());
  Array out(make_shape(od));
  const std::int64_t n = x.shape[a];
  for (std::int64_t i = 0; i < out.shape.numel(); ++i) {
    const auto oi = unravel(i, out.shape);
    std::vector<std::int64_t> xi(oi.begin(), oi.begin() + a);
    const std::vector<std::int64_t> ii(oi.begin() + a, oi.begin() + a + idx.shape.rank());
    auto j = static_cast<std::int64_t>(idx.v[static_cast<std::size_t>(ravel(ii, idx.shape))]);
    if (j < -n || j >= n) throw std::runtime_error("ref: gather index out of range");
    xi.push_back(j < 0 ? j + n : j);
    xi.insert(xi.end(), oi.begin() + a + idx.shape.rank(), oi.end());
    out.v[static_cast<std::size_t>(i)] = x.v[static_cast<std::size_t>(ravel(xi, x.shape))];
  }
  return out;
}

// The element of x that position i of `idx` (x's rank, no larger on other axes) reaches along
// axis a: i with i[a] replaced by the (wrapped) index there.
std::size_t element_at(const Array& x, const Array& idx, int a, std::int64_t i) {
  auto xi = unravel(i, idx.shape);
  const std::int64_t n = x.shape[a];
  const auto j = static_cast<std::int64_t>(idx.v[static_cast<std::size_t>(i)]);
  if (j < -n || j >= n) throw std::runtime_error("ref: element index out of range");
  xi[static_cast<std::size_t>(a)] = j < 0 ? j + n : j;
  return static_cast<std::size_t>(ravel(xi, x.shape));
}

// ONNX GatherElements: the indices' shape, out[i] = x[i with i[a] = idx[i]].
Array gather_elements(const Array& x, const Array& idx, int axis) {
  const int a = norm_axis(axis, x.shape.rank());
  Array out(idx.shape);
  for (std::int64_t i = 0; i < idx.shape.numel(); ++i)
    out.v[static_cast<std::size_t>(i)] = x.v[element_at(x, idx, a, i)];
  return out;
}

// ONNX ScatterElements: updates applied in row-major order of the indices (none: the last wins;
// add, mul: combined in that order).
Array scatter_elements(const Array& data, const Array& idx, const Array& upd, int axis,
                       hetgraph::ScatterReduction red, bool ints) {
  const int a = norm_axis(axis, data.shape.rank());
  Array out = data;
  for (std::int64_t i = 0; i < idx.shape.numel(); ++i) {
    double& o = out.v[element_at(data, idx, a, i)];
    const double u = upd.v[static_cast<std::size_t>(i)];
    if (red == hetgraph::ScatterReduction::add) {
      o += u;
    } else if (red == hetgraph::ScatterReduction::mul) {
      o *= u;
    } else {
      o = u;
    }
    if (ints) {  // int32 wraps around, as on every platform
      o = static_cast<double>(static_cast<std::int32_t>(
          static_cast<std::uint32_t>(static_cast<std::uint64_t>(static_cast<std::int64_t>(o)))));
    }
  }
  return out;
}

// Float to int32 as hetgraph defines it: toward zero, saturating, NaN to 0.
double to_i32(double v) {
  if (std::isnan(v)) return 0;
  return std::trunc(std::clamp(v, -2147483648.0, 2147483647.0));
}

Array gather_rows(const Array& table, const Array& idx) {
  const std::int64_t R = table.shape[0], D = table.shape[1];
  std::vector<std::int64_t> od(idx.shape.dims().begin(), idx.shape.dims().end());
  od.push_back(D);
  Array out(make_shape(od));
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const auto r = static_cast<std::int64_t>(idx.v[i]);
    if (r < 0 || r >= R) throw std::runtime_error("ref: embedding index out of range");
    for (std::int64_t d = 0; d < D; ++d)
      out.v[i * static_cast<std::size_t>(D) + static_cast<std::size_t>(d)] =
          table.v[static_cast<std::size_t>(r * D + d)];
  }
  return out;
}

// Whether a node holds int32 values: leaves say so, data movement passes it on.
bool int_typed(const GraphImpl& g, std::uint32_t id) {
  const NodeRec& r = g.rec(id);
  switch (r.op) {
    case OpKind::Input:
    case OpKind::Variable:
    case OpKind::Constant:
      return r.dtype == hetgraph::DType::i32;
    case OpKind::Slice:
    case OpKind::StridedSlice:
    case OpKind::Concat:
    case OpKind::Transpose:
    case OpKind::Reshape:
      return int_typed(g, r.inputs[0]);
    case OpKind::Where:
      return int_typed(g, r.inputs[1]);
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Mod:
    case OpKind::FMod:
    case OpKind::CumSum:
      return int_typed(g, r.inputs[0]);
    case OpKind::Gather:
    case OpKind::GatherElements:
    case OpKind::ScatterElements:
      return int_typed(g, r.inputs[0]);
    case OpKind::Cast:
      return r.attrs.get<hetgraph::detail::TargetType>().dtype == hetgraph::DType::i32;
    case OpKind::Equal:
    case OpKind::Less:
    case OpKind::LessEqual:
    case OpKind::Greater:
    case OpKind::GreaterEqual:
    case OpKind::LogicalAnd:
    case OpKind::LogicalOr:
    case OpKind::LogicalXor:
    case OpKind::ArgMax:
    case OpKind::ArgMin:
    case OpKind::TopK:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<Array> evaluate(const hetgraph::Graph& graph, std::span<const hetgraph::Node> outputs,
                            const Values& inputs, const Values& variables) {
  const GraphImpl& g = hetgraph::detail::impl_of(graph);
  std::map<std::uint32_t, Array> memo;
  std::function<const Array&(std::uint32_t)> eval = [&](std::uint32_t id) -> const Array& {
    if (auto it = memo.find(id); it != memo.end()) return it->second;
    const NodeRec& r = g.rec(id);
    std::vector<Array> in;
    for (std::uint32_t u : r.inputs) in.push_back(eval(u));
    const auto& at = r.attrs;
    Array out;
    switch (r.op) {
      case OpKind::Input: {
        auto it = inputs.find(r.name);
        if (it == inputs.end()) throw std::runtime_error("ref: no value for input " + r.name);
        out = it->second;
        break;
      }
      case OpKind::Variable: {
        auto it = variables.find(r.name);
        if (it != variables.end()) {
          out = it->second;
        } else {
          out = Array(r.shape);
          if (r.init.kind == hetgraph::Initializer::Kind::fill)
            std::fill(out.v.begin(), out.v.end(), r.init.a);
        }
        break;
      }
      case OpKind::Constant:
        out = Array(r.shape);
        for (std::size_t i = 0; i < out.size(); ++i) {
          out.v[i] = r.dtype == hetgraph::DType::f32 ? (*r.f32_values)[i] : (*r.i32_values)[i];
        }
        break;
      case OpKind::Add:
        out = binary(in[0], in[1], [](double a, double b) { return a + b; });
        break;
      case OpKind::Sub:
        out = binary(in[0], in[1], [](double a, double b) { return a - b; });
        break;
      case OpKind::Mul:
        out = binary(in[0], in[1], [](double a, double b) { return a * b; });
        break;
      case OpKind::Div:
        out = binary(in[0], in[1], [](double a, double b) { return a / b; });
        break;
      case OpKind::Axpby: {
        const auto& k = at.get_or_default<hetgraph::detail::AxpbyCoeffs>();
        const double x = k.a, y = k.b;
        out = binary(in[0], in[1], [x, y](double a, double b) { return x * a + y * b; });
        break;
      }
      case OpKind::Neg:
        out = unary(in[0], [](double a) { return -a; });
        break;
      case OpKind::Scale: {
        const double s = at.get_or_default<hetgraph::detail::ScaleFactor>().factor;
        out = unary(in[0], [s](double a) { return s * a; });
        break;
      }
      case OpKind::Exp:
        out = unary(in[0], [](double a) { return std::exp(a); });
        break;
      case OpKind::Log:
        out = unary(in[0], [](double a) { return std::log(a); });
        break;
      case OpKind::Floor:
        out = unary(in[0], [](double a) { return std::floor(a); });
        break;
      case OpKind::Sqrt:
        out = unary(in[0], [](double a) { return std::sqrt(a); });
        break;
      case OpKind::Relu:
        out = unary(in[0], [](double a) { return nan_max(a, 0.0); });
        break;
      case OpKind::Abs:
        out = unary(in[0], [](double a) { return std::fabs(a); });
        break;
      case OpKind::Erf:
        out = unary(in[0], [](double a) { return std::erf(a); });
        break;
      case OpKind::Sin:
        out = unary(in[0], [](double a) { return std::sin(a); });
        break;
      case OpKind::Cos:
        out = unary(in[0], [](double a) { return std::cos(a); });
        break;
      case OpKind::Tan:
        out = unary(in[0], [](double a) { return std::tan(a); });
        break;
      case OpKind::Asin:
        out = unary(in[0], [](double a) { return std::asin(a); });
        break;
      case OpKind::Acos:
        out = unary(in[0], [](double a) { return std::acos(a); });
        break;
      case OpKind::Atan:
        out = unary(in[0], [](double a) { return std::atan(a); });
        break;
      case OpKind::Sinh:
        out = unary(in[0], [](double a) { return std::sinh(a); });
        break;
      case OpKind::Cosh:
        out = unary(in[0], [](double a) { return std::cosh(a); });
        break;
      case OpKind::Asinh:
        out = unary(in[0], [](double a) { return std::asinh(a); });
        break;
      case OpKind::Acosh:
        out = unary(in[0], [](double a) { return std::acosh(a); });
        break;
      case OpKind::Atanh:
        out = unary(in[0], [](double a) { return std::atanh(a); });
        break;
      case OpKind::Round:
        out = unary(in[0], [](double a) { return std::nearbyint(a); });
        break;
      case OpKind::ToFloat16:
        out = unary(in[0], [](double a) { return round_to_format(a, 10, -14, 65504.0); });
        break;
      case OpKind::ToBfloat16:
        out = unary(in[0], [](double a) {
          return round_to_format(a, 7, -126,
                                 static_cast<double>(std::numeric_limits<float>::max()));
        });
        break;
      case OpKind::LeakyRelu: {
        const double s = at.get_or_default<hetgraph::detail::LeakySlope>().slope;
        out = unary(in[0], [s](double a) { return a > 0 ? a : s * a; });
        break;
      }
      case OpKind::Clip: {
        const auto& r = at.get_or_default<hetgraph::detail::ClipRange>();
        const double lo = r.lo, hi = r.hi;
        out = unary(in[0], [lo, hi](double a) { return nan_min(nan_max(a, lo), hi); });
        break;
      }
      case OpKind::Pow:
        out = binary(in[0], in[1], [](double a, double b) { return std::pow(a, b); });
        break;
      case OpKind::Maximum:
        out = binary(in[0], in[1], nan_max);
        break;
      case OpKind::Mod:
      case OpKind::FMod: {
        const bool ints = int_typed(g, id), floored = r.op == OpKind::Mod;
        out = binary(in[0], in[1], [ints, floored](double a, double b) {
          if (ints && (b == 0 || b == -1)) return 0.0;
          const double m = std::fmod(a, b);
          return floored && m != 0 && (m < 0) != (b < 0) ? m + b : m;
        });
        break;
      }
      case OpKind::Minimum:
        out = binary(in[0], in[1], nan_min);
        break;
      // Comparisons in double: the same answers as in float for float or int32 values.
      case OpKind::Equal:
        out = binary(in[0], in[1], [](double a, double b) { return a == b ? 1.0 : 0.0; });
        break;
      case OpKind::Less:
        out = binary(in[0], in[1], [](double a, double b) { return a < b ? 1.0 : 0.0; });
        break;
      case OpKind::LessEqual:
        out = binary(in[0], in[1], [](double a, double b) { return a <= b ? 1.0 : 0.0; });
        break;
      case OpKind::Greater:
        out = binary(in[0], in[1], [](double a, double b) { return a > b ? 1.0 : 0.0; });
        break;
      case OpKind::GreaterEqual:
        out = binary(in[0], in[1], [](double a, double b) { return a >= b ? 1.0 : 0.0; });
        break;
      case OpKind::LogicalAnd:
        out = binary(in[0], in[1], [](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; });
        break;
      case OpKind::LogicalOr:
        out = binary(in[0], in[1], [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; });
        break;
      case OpKind::LogicalXor:
        out = binary(in[0], in[1],
                     [](double a, double b) { return (a != 0) != (b != 0) ? 1.0 : 0.0; });
        break;
      case OpKind::Where:
        out = ternary(in[0], in[1], in[2],
                      [](double c, double a, double b) { return c != 0 ? a : b; });
        break;
      case OpKind::Sigmoid:
        out = unary(in[0], [](double a) { return 1.0 / (1.0 + std::exp(-a)); });
        break;
      case OpKind::Tanh:
        out = unary(in[0], [](double a) { return std::tanh(a); });
        break;
      case OpKind::Silu:
        out = unary(in[0], [](double a) { return a / (1.0 + std::exp(-a)); });
        break;
      case OpKind::HardSwish:
        out = unary(in[0], [](double a) { return a * std::min(std::max(a / 6 + 0.5, 0.0), 1.0); });
        break;
      case OpKind::MatMul:
        out = matmul(in[0], in[1], at.trans_a, at.trans_b);
        break;
      case OpKind::ReduceSum:
      case OpKind::ReduceMean:
      case OpKind::ReduceMax:
      case OpKind::ReduceProd:
        out = reduce(in[0], at.axis, at.keepdims, r.op);
        break;
      case OpKind::CumSum: {
        const auto& m = at.get<hetgraph::detail::ScanMode>();
        out = cumsum(in[0], at.axis, m.exclusive, m.reverse, int_typed(g, id));
        break;
      }
      case OpKind::ArgMax:
      case OpKind::ArgMin:
        out = arg_extreme(in[0], at.axis, at.keepdims, at.last_index, r.op == OpKind::ArgMax);
        break;
      case OpKind::TopK: {
        const auto& spec = at.get<hetgraph::detail::TopKSpec>();
        out = top_k(in[0], at.axis, spec.k, spec.largest);
        break;
      }
      case OpKind::Dropout: {
        // The mask as dropout_mask.hpp defines it, applied in double: x / (1 - p) or x * 0.
        const auto& m = at.get<hetgraph::detail::DropoutMask>();
        namespace d = hetgraph::detail::dropout;
        const std::uint64_t key = d::key(m.seed, static_cast<float>(in[1].v[0]));
        out = in[0];
        for (std::size_t i = 0; i < out.size(); ++i) {
          const bool keep = d::draw(key, i) >= d::threshold(m.p);
          out.v[i] = keep && m.p < 1.0f ? in[0].v[i] / (1.0 - m.p) : in[0].v[i] * 0.0;
        }
        break;
      }
      case OpKind::Softmax:
        out = along_axis(in[0], at.axis, [](std::vector<double>& l) {
          const double m = *std::max_element(l.begin(), l.end());
          double s = 0;
          for (double& v : l) s += (v = std::exp(v - m));
          for (double& v : l) v /= s;
        });
        break;
      case OpKind::LogSoftmax:
        out = along_axis(in[0], at.axis, [](std::vector<double>& l) {
          const double m = *std::max_element(l.begin(), l.end());
          double s = 0;
          for (double v : l) s += std::exp(v - m);
          const double lse = m + std::log(s);
          for (double& v : l) v -= lse;
        });
        break;
      case OpKind::CrossEntropy:
        out = xent(in[0], in[1], int_typed(g, r.inputs[1]));
        break;
      case OpKind::Slice:
        out = slice(in[0], at.axis, at.get_or_default<hetgraph::detail::SliceRange>().begin,
                    at.get_or_default<hetgraph::detail::SliceRange>().end);
        break;
      case OpKind::Concat:
        out = concat(in, at.axis);
        break;
      case OpKind::StridedSlice:
        out = strided_slice(in[0], at.get<hetgraph::detail::SliceSpec>());
        break;
      case OpKind::Transpose:
        out = transpose(in[0], at.get<hetgraph::detail::Permutation>().perm);
        break;
      case OpKind::Reshape:
        out = reshape(in[0], at.get<hetgraph::detail::ReshapeTarget>().dims);
        break;
      case OpKind::Conv2d:
        out = conv2d(in[0], in[1], in.size() == 3 ? &in[2] : nullptr, at);
        break;
      case OpKind::ConvTranspose2d:
        out = conv_transpose2d(in[0], in[1], in.size() == 3 ? &in[2] : nullptr, at);
        break;
      case OpKind::MaxPool2d:
      case OpKind::AvgPool2d:
        out = pool2d(in[0], at, r.op == OpKind::MaxPool2d);
        break;
      case OpKind::Embedding:
        out = gather_rows(in[0], in[1]);
        break;
      case OpKind::Gather:
        out = gather(in[0], in[1], at.axis);
        break;
      case OpKind::GatherElements:
        out = gather_elements(in[0], in[1], at.axis);
        break;
      case OpKind::ScatterElements:
        out = scatter_elements(in[0], in[1], in[2], at.axis,
                               at.get<hetgraph::detail::ScatterMode>().reduction, int_typed(g, id));
        break;
      case OpKind::Cast:
        if (int_typed(g, id) && !int_typed(g, r.inputs[0]))
          out = unary(in[0], to_i32);
        else if (!int_typed(g, id) && int_typed(g, r.inputs[0]))  // rounded to the nearest float
          out = unary(in[0], [](double v) { return static_cast<double>(static_cast<float>(v)); });
        else
          out = in[0];
        break;
      default:
        throw std::runtime_error("ref: op not supported by the reference: " +
                                 std::string(hetgraph::detail::op_name(r.op)));
    }
    return memo.emplace(id, std::move(out)).first->second;
  };
  std::vector<Array> res;
  for (const hetgraph::Node& o : outputs) res.push_back(eval(o.id()));
  return res;
}

Array broadcast_binary(const Array& a, const Array& b,
                       const std::function<double(double, double)>& f) {
  return binary(a, b, f);
}

}  // namespace ref
