// SPDX-License-Identifier: Apache-2.0
// Values known at import: ONNX ops evaluated on host tensors. This is how shape computations
// (Shape -> Gather -> Concat -> Reshape, Range, ConstantOfShape, ...) disappear from imported
// graphs. Float arithmetic is done in float32, as the kernels would; integers in int64.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

Dims strides_of(const Dims& d) {
  Dims s(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

constexpr std::int64_t kMaxHostElements = kMaxImportElements;

ir::Tensor empty_like(int elem, Dims dims) {
  const std::int64_t count = numel(dims);
  if (count < 0 || count > kMaxHostElements) {
    throw UnsupportedError("a tensor of shape " + dims_str(dims) +
                           " computed while importing: negative or too large (at most 2^28 "
                           "elements are computed at import)");
  }
  ir::Tensor t;
  t.elem = elem;
  t.dims = std::move(dims);
  const auto n = static_cast<std::size_t>(count);
  if (ir::is_integral(elem))
    t.i.resize(n);
  else
    t.f.resize(n);
  return t;
}

/// Calls f(out_index, in_offsets...) over every element of `out` with numpy broadcasting of
/// each input's dims.
void for_broadcast(const Dims& out, const std::vector<Dims>& ins,
                   const std::function<void(std::size_t, const std::vector<std::size_t>&)>& f) {
  const std::size_t r = out.size();
  std::vector<Dims> st;
  for (const Dims& d : ins) {
    Dims s(r, 0);
    const Dims own = strides_of(d);
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (d[i] != 1) s[r - d.size() + i] = own[i];
    }
    st.push_back(s);
  }
  const std::int64_t n = numel(out);
  Dims idx(r, 0);
  std::vector<std::size_t> off(ins.size(), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    for (std::size_t j = 0; j < ins.size(); ++j) {
      std::int64_t o = 0;
      for (std::size_t i = 0; i < r; ++i) o += idx[i] * st[j][i];
      off[j] = static_cast<std::size_t>(o);
    }
    f(static_cast<std::size_t>(k), off);
    for (std::size_t i = r; i-- > 0;) {
      if (++idx[i] < out[i]) break;
      idx[i] = 0;
    }
  }
}

double get(const ir::Tensor& t, std::size_t k) {
  return ir::is_integral(t.elem) ? static_cast<double>(t.i[k]) : static_cast<double>(t.f[k]);
}

/// Converts a value to `elem` as ONNX Cast does (float to int truncates; bool is != 0).
void put(ir::Tensor& t, std::size_t k, double v) {
  if (t.elem == ir::kBool) {
    t.i[k] = v != 0.0;
  } else if (ir::is_integral(t.elem)) {
    // Out of range saturates (a C++ conversion would be undefined).
    t.i[k] = !std::isfinite(v) ? 0
             : v >= 9.2e18     ? INT64_MAX
             : v <= -9.2e18    ? INT64_MIN
                               : static_cast<std::int64_t>(v);
  } else {
    t.f[k] = ir::round_to_elem(static_cast<float>(v), t.elem);
  }
}

bool is_float(int elem) {
  return elem == ir::kFloat || elem == ir::kDouble || elem == ir::kFloat16 || elem == ir::kBfloat16;
}

// Integer arithmetic wraps as the hardware does (signed overflow would be undefined).
// v in `elem`'s own width, as ONNX's integer arithmetic wraps (uint8 200 + 100 is 44).
std::int64_t wrap(std::uint64_t v, int elem) {
  switch (elem) {
    case ir::kUint8:
      return static_cast<std::uint8_t>(v);
    case ir::kInt8:
      return static_cast<std::int8_t>(v);
    case ir::kUint16:
      return static_cast<std::uint16_t>(v);
    case ir::kInt16:
      return static_cast<std::int16_t>(v);
    case ir::kUint32:
      return static_cast<std::uint32_t>(v);
    case ir::kInt32:
      return static_cast<std::int32_t>(v);
    default:
      return static_cast<std::int64_t>(v);
  }
}
std::int64_t int_div(std::int64_t a, std::int64_t b) {
  return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a / b;
}
std::int64_t int_mod(std::int64_t a, std::int64_t b) {  // sign of the divisor (Python's %)
  if (b == 0 || b == -1) return 0;
  const std::int64_t m = a % b;
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

bool values_ok(const Ctx& c) {
  for (std::size_t i = 0; i < c.inputs(); ++i) {
    if (!c.has(i)) continue;
    const int e = c.in(i).elem;
    if (!is_float(e) && !ir::is_integral(e)) return false;
  }
  return true;
}

/// ONNX ops take inputs of one element type (checked: the checker does not infer types).
void same_elem(const Ctx& c, const ir::Tensor& a, const ir::Tensor& b) {
  if (a.elem != b.elem) {
    c.fail(std::string("inputs of different element types, ") + ir::elem_name(a.elem) + " and " +
           ir::elem_name(b.elem));
  }
}

ir::Tensor binary(Ctx& c, const std::string& op) {
  const ir::Tensor& a = *c.in(0).konst;
  const ir::Tensor& b = *c.in(1).konst;
  if (op != "Pow") same_elem(c, a, b);
  const Dims out = broadcast(a.dims, b.dims, c);
  const bool cmp = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
                   op == "GreaterOrEqual" || op == "And" || op == "Or" || op == "Xor";
  ir::Tensor r = empty_like(cmp ? ir::kBool : a.elem, out);
  const bool ints = ir::is_integral(a.elem) && ir::is_integral(b.elem);
  const bool fmod = c.attr_i("fmod", 0) != 0;
  for_broadcast(out, {a.dims, b.dims}, [&](std::size_t k, const std::vector<std::size_t>& o) {
    if (ints && !cmp && op != "Pow") {
      const std::int64_t x = a.i[o[0]], y = b.i[o[1]];
      const auto ux = static_cast<std::uint64_t>(x), uy = static_cast<std::uint64_t>(y);
      std::int64_t v = 0;
      if (op == "Add")
        v = wrap(ux + uy, a.elem);
      else if (op == "Sub")
        v = wrap(ux - uy, a.elem);
      else if (op == "Mul")
        v = wrap(ux * uy, a.elem);
      else if (op == "Div")
        v = wrap(static_cast<std::uint64_t>(int_div(x, y)), a.elem);
      else if (op == "Mod")
        v = fmod ? (y == 0 || y == -1 ? 0 : x % y) : int_mod(x, y);
      r.i[k] = v;
      return;
    }
    if (!cmp && !ints && op != "Pow") {  // float32 arithmetic, as a kernel does it
      const float x = static_cast<float>(get(a, o[0])), y = static_cast<float>(get(b, o[1]));
      float v = 0;
      if (op == "Add")
        v = x + y;
      else if (op == "Sub")
        v = x - y;
      else if (op == "Mul")
        v = x * y;
      else if (op == "Div")
        v = x / y;
      else if (op == "Mod")
        v = std::fmod(x, y);
      put(r, k, v);
      return;
    }
    const double x = get(a, o[0]), y = get(b, o[1]);
    double v = 0;
    if (op == "Pow")
      v = ints ? std::pow(x, y) : std::pow(static_cast<float>(x), static_cast<float>(y));
    else if (op == "Equal")
      v = x == y;
    else if (op == "Less")
      v = x < y;
    else if (op == "Greater")
      v = x > y;
    else if (op == "LessOrEqual")
      v = x <= y;
    else if (op == "GreaterOrEqual")
      v = x >= y;
    else if (op == "And")
      v = (x != 0) && (y != 0);
    else if (op == "Or")
      v = (x != 0) || (y != 0);
    else if (op == "Xor")
      v = (x != 0) != (y != 0);
    put(r, k, v);
  });
  return r;
}

ir::Tensor unary(const ir::Tensor& a, const std::string& op) {
  ir::Tensor r = empty_like(a.elem, a.dims);
  const auto n = static_cast<std::size_t>(a.numel());
  for (std::size_t k = 0; k < n; ++k) {
    if (ir::is_integral(a.elem)) {
      const std::int64_t x = a.i[k];
      std::int64_t v = x;
      if (op == "Neg")
        v = wrap(0 - static_cast<std::uint64_t>(x), a.elem);
      else if (op == "Abs")
        v = x < 0 ? wrap(0 - static_cast<std::uint64_t>(x), a.elem) : x;
      else if (op == "Sign")
        v = (x > 0) - (x < 0);
      else if (op == "Not")
        v = x == 0;
      r.i[k] = v;
    } else {
      const float x = a.f[k];
      float v = x;
      if (op == "Neg")
        v = -x;
      else if (op == "Abs")
        v = std::fabs(x);
      else if (op == "Sign")
        v = static_cast<float>((x > 0) - (x < 0));
      else if (op == "Floor")
        v = std::floor(x);
      else if (op == "Ceil")
        v = std::ceil(x);
      else if (op == "Sqrt")
        v = std::sqrt(x);
      else if (op == "Reciprocal")
        v = 1.0f / x;
      else if (op == "Relu")
        v = x > 0 ? x : 0.0f;
      r.f[k] = v;
    }
  }
  return r;
}

ir::Tensor cast(const ir::Tensor& a, int to) {
  ir::Tensor r = empty_like(
      to == ir::kDouble || to == ir::kFloat16 || to == ir::kBfloat16 ? ir::kFloat : to, a.dims);
  r.elem = to;
  const auto n = static_cast<std::size_t>(a.numel());
  // Integers narrower than int64 wrap to their width (as the graph's cast does); floats are
  // truncated toward zero first, within int32 for those types (the graph's cast saturates
  // there; ONNX leaves floats outside the type undefined).
  const bool narrow =
      ir::is_integral(to) && to != ir::kBool && to != ir::kInt64 && to != ir::kUint64;
  for (std::size_t k = 0; k < n; ++k) {
    if (ir::is_integral(to) && ir::is_integral(a.elem)) {
      r.i[k] = to == ir::kBool ? (a.i[k] != 0) : wrap(static_cast<std::uint64_t>(a.i[k]), to);
    } else if (narrow && !ir::is_integral(a.elem)) {
      const double v = get(a, k);
      const double t =
          !std::isfinite(v) ? 0.0 : std::clamp(std::trunc(v), -2147483648.0, 2147483647.0);
      r.i[k] = wrap(static_cast<std::uint64_t>(static_cast<std::int64_t>(t)), to);
    } else {
      put(r, k, get(a, k));
    }
  }
  return r;
}

ir::Tensor reduce(Ctx& c, const ir::Tensor& a, const std::string& op) {
  Dims axes = c.attr_ints("axes");
  if (c.has(1)) axes = c.ints(1, "axes");
  const bool keep = c.attr_i("keepdims", 1) != 0;
  const int r = static_cast<int>(a.dims.size());
  std::vector<bool> red(a.dims.size(), axes.empty());
  if (axes.empty() && c.attr_i("noop_with_empty_axes", 0) != 0) return a;
  for (std::int64_t x : axes) red[static_cast<std::size_t>(c.axis(x, r))] = true;
  Dims kept;  // output dims with keepdims
  for (int i = 0; i < r; ++i)
    kept.push_back(red[static_cast<std::size_t>(i)] ? 1 : a.dims[static_cast<std::size_t>(i)]);
  const bool ints = ir::is_integral(a.elem);
  std::vector<double> acc(static_cast<std::size_t>(numel(kept)), op == "ReduceProd" ? 1.0 : 0.0);
  std::vector<bool> first(acc.size(), true);
  const Dims ks = strides_of(kept);
  Dims idx(a.dims.size(), 0);
  const std::int64_t n = a.numel();
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t o = 0;
    for (std::size_t i = 0; i < idx.size(); ++i) o += (red[i] ? 0 : idx[i]) * ks[i];
    const auto oi = static_cast<std::size_t>(o);
    const double x = get(a, static_cast<std::size_t>(k));
    if (op == "ReduceSum" || op == "ReduceMean")
      acc[oi] += x;
    else if (op == "ReduceProd")
      acc[oi] *= x;
    else if (op == "ReduceMax")
      acc[oi] = first[oi] ? x : std::max(acc[oi], x);
    else if (op == "ReduceMin")
      acc[oi] = first[oi] ? x : std::min(acc[oi], x);
    first[oi] = false;
    for (std::size_t i = idx.size(); i-- > 0;) {
      if (++idx[i] < a.dims[i]) break;
      idx[i] = 0;
    }
  }
  Dims out;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (!red[i] || keep) out.push_back(kept[i]);
  }
  ir::Tensor t = empty_like(a.elem, out);
  const double count = static_cast<double>(n) / static_cast<double>(acc.size());
  for (std::size_t k = 0; k < acc.size(); ++k) {
    put(t, k, op == "ReduceMean" ? acc[k] / count : acc[k]);
  }
  (void)ints;
  return t;
}

// Min, Max and Sum over c's inputs, folded left to right with broadcasting. Float pairs are
// combined in float32, as the kernels would.
ir::Tensor variadic(Ctx& c, const std::string& op) {
  ir::Tensor acc = *c.in(0).konst;
  for (std::size_t i = 1; i < c.inputs(); ++i) {
    const ir::Tensor& b = *c.in(i).konst;
    same_elem(c, acc, b);
    const Dims out = broadcast(acc.dims, b.dims, c);
    ir::Tensor r = empty_like(acc.elem, out);
    for_broadcast(out, {acc.dims, b.dims}, [&](std::size_t k, const std::vector<std::size_t>& o) {
      const double x = get(acc, o[0]), y = get(b, o[1]);
      if (ir::is_integral(acc.elem)) {
        put(r, k, op == "Min" ? std::min(x, y) : op == "Max" ? std::max(x, y) : x + y);
      } else {
        const float fx = static_cast<float>(x), fy = static_cast<float>(y);
        // NaN wins in Min and Max, as ONNX specifies.
        float v = op == "Sum"                          ? fx + fy
                  : (std::isnan(fx) || std::isnan(fy)) ? NAN
                  : op == "Min"                        ? std::min(fx, fy)
                                                       : std::max(fx, fy);
        put(r, k, v);
      }
    });
    acc = std::move(r);
  }
  return acc;
}

// Where(cond, x, y) with the three inputs broadcast together; elements are copied, not
// converted, so x and y must share their element type.
ir::Tensor where(Ctx& c) {
  const ir::Tensor& cond = *c.in(0).konst;
  const ir::Tensor& x = *c.in(1).konst;
  const ir::Tensor& y = *c.in(2).konst;
  same_elem(c, x, y);
  const Dims out = broadcast(broadcast(cond.dims, x.dims, c), y.dims, c);
  ir::Tensor r = empty_like(x.elem, out);
  for_broadcast(out, {cond.dims, x.dims, y.dims},
                [&](std::size_t k, const std::vector<std::size_t>& o) {
                  const bool pick = get(cond, o[0]) != 0;
                  if (ir::is_integral(x.elem))
                    r.i[k] = pick ? x.i[o[1]] : y.i[o[2]];
                  else
                    r.f[k] = pick ? x.f[o[1]] : y.f[o[2]];
                });
  return r;
}

// NonZero: the [rank, hits] int64 coordinates of x's nonzero elements, in row-major order.
ir::Tensor nonzero(const ir::Tensor& x) {
  const Dims strides = strides_of(x.dims);
  Dims hits;
  for (std::int64_t k = 0; k < x.numel(); ++k) {
    const auto u = static_cast<std::size_t>(k);
    if (ir::is_integral(x.elem) ? x.i[u] != 0 : x.f[u] != 0.0f) hits.push_back(k);
  }
  const auto rank = static_cast<std::int64_t>(x.dims.size());
  ir::Tensor r = empty_like(ir::kInt64, {rank, static_cast<std::int64_t>(hits.size())});
  for (std::size_t h = 0; h < hits.size(); ++h) {
    for (std::size_t d = 0; d < x.dims.size(); ++d)
      r.i[d * hits.size() + h] = hits[h] / strides[d] % x.dims[d];
  }
  return r;
}

// Unique (opset 11): the distinct elements of x (or its distinct slices along `axis`), sorted
// (lexicographically, slices as their elements in order) or in order of first occurrence; then
// each one's first index, the output position of every input element (slice), and the counts.
void unique(Ctx& c) {
  const ir::Tensor& x = *c.in(0).konst;
  const bool by_axis = c.has_attr("axis");
  const int axis = by_axis ? c.axis(c.attr_i("axis", 0), static_cast<int>(x.dims.size())) : 0;
  const Dims flat{x.numel()};
  const Dims& d = by_axis ? x.dims : flat;
  const auto a = static_cast<std::size_t>(axis);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= d[i];
  for (std::size_t i = a + 1; i < d.size(); ++i) inner *= d[i];
  const std::int64_t n = d[a];
  // Slice j's element e (outer-major, then inner) is element at(j, e) of x.
  auto at = [&](std::int64_t j, std::int64_t e) {
    return static_cast<std::size_t>(((e / inner) * n + j) * inner + e % inner);
  };
  auto less = [&](std::int64_t p, std::int64_t q) {  // slice p before slice q
    for (std::int64_t e = 0; e < outer * inner; ++e) {
      const double u = get(x, at(p, e)), v = get(x, at(q, e));
      if (u != v) return u < v;
    }
    return false;
  };
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);
  // Groups of equal slices, each named by its first occurrence (the smallest index: stable).
  std::vector<std::int64_t> first, count, group_of(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || less(order[k - 1], order[k])) {
      first.push_back(order[k]);
      count.push_back(0);
    }
    group_of[static_cast<std::size_t>(order[k])] = static_cast<std::int64_t>(first.size()) - 1;
    ++count.back();
  }
  std::vector<std::size_t> pos(first.size());  // output position of each group
  std::iota(pos.begin(), pos.end(), 0);
  if (c.attr_i("sorted", 1) == 0) {
    std::sort(pos.begin(), pos.end(),
              [&](std::size_t p, std::size_t q) { return first[p] < first[q]; });
  }
  std::vector<std::size_t> rank(pos.size());  // group -> output position
  for (std::size_t o = 0; o < pos.size(); ++o) rank[pos[o]] = o;
  const auto u = static_cast<std::int64_t>(first.size());
  Dims ydims = d;
  ydims[a] = u;
  ir::Tensor y = empty_like(x.elem, ydims);
  for (std::int64_t o = 0; o < u; ++o) {
    for (std::int64_t e = 0; e < outer * inner; ++e) {
      const auto to = static_cast<std::size_t>(((e / inner) * u + o) * inner + e % inner);
      if (ir::is_integral(x.elem))
        y.i[to] = x.i[at(first[pos[static_cast<std::size_t>(o)]], e)];
      else
        y.f[to] = x.f[at(first[pos[static_cast<std::size_t>(o)]], e)];
    }
  }
  ir::Tensor indices = empty_like(ir::kInt64, {u}), inverse = empty_like(ir::kInt64, {n}),
             counts = empty_like(ir::kInt64, {u});
  for (std::size_t o = 0; o < pos.size(); ++o) {
    indices.i[o] = first[pos[o]];
    counts.i[o] = count[pos[o]];
  }
  for (std::int64_t j = 0; j < n; ++j)
    inverse.i[static_cast<std::size_t>(j)] = static_cast<std::int64_t>(
        rank[static_cast<std::size_t>(group_of[static_cast<std::size_t>(j)])]);
  const ir::Tensor* outs[] = {&y, &indices, &inverse, &counts};
  for (std::size_t k = 0; k < 4; ++k)
    if (c.wants(k)) c.set(k, *outs[k]);
}

// NonMaxSuppression (opsets 10, 11): per batch and class, the boxes by descending score (ties:
// lower index first) above score_threshold, each kept unless its IoU with a kept one exceeds
// iou_threshold, at most max_output_boxes_per_class; [kept, 3] int64 (batch, class, box), as
// ONNX Runtime computes it (float arithmetic; corners in either order, or center_point_box).
ir::Tensor non_max_suppression(Ctx& c) {
  const ir::Tensor& boxes = *c.in(0).konst;
  const ir::Tensor& scores = *c.in(1).konst;
  if (boxes.dims.size() != 3 || boxes.dims[2] != 4 || scores.dims.size() != 3 ||
      scores.dims[0] != boxes.dims[0] || scores.dims[2] != boxes.dims[1]) {
    c.fail("boxes " + dims_str(boxes.dims) + " and scores " + dims_str(scores.dims) +
           " are not [B, N, 4] and [B, C, N]");
  }
  auto scalar = [&](std::size_t i, double def) {
    if (!c.has(i)) return def;
    const ir::Tensor& t = *c.in(i).konst;
    if (t.numel() != 1) c.fail("input " + std::to_string(i) + " must hold one value");
    return get(t, 0);
  };
  const auto max_out = static_cast<std::int64_t>(scalar(2, 0));
  const auto iou_max = static_cast<float>(scalar(3, 0));
  const bool has_threshold = c.has(4);
  const auto score_min = static_cast<float>(scalar(4, 0));
  const bool centers = c.attr_i("center_point_box", 0) != 0;
  const std::int64_t B = boxes.dims[0], N = boxes.dims[1], C = scores.dims[1];
  struct Box {
    float y1, x1, y2, x2, area;
  };
  auto box = [&](std::int64_t b, std::int64_t i) {
    const float* v = boxes.f.data() + (b * N + i) * 4;
    Box r{};
    if (centers) {  // [x_center, y_center, width, height]
      r = {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2, 0};
    } else {
      r = {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3]),
           0};
    }
    r.area = (r.y2 - r.y1) * (r.x2 - r.x1);
    return r;
  };
  auto iou = [](const Box& p, const Box& q) {
    const float h = std::max(0.0f, std::min(p.y2, q.y2) - std::max(p.y1, q.y1));
    const float w = std::max(0.0f, std::min(p.x2, q.x2) - std::max(p.x1, q.x1));
    const float inter = h * w;
    if (p.area <= 0 || q.area <= 0 || inter <= 0) return 0.0f;
    return inter / (p.area + q.area - inter);
  };
  Dims picked;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t k = 0; k < C && max_out > 0; ++k) {
      const float* sc = scores.f.data() + (b * C + k) * N;
      std::vector<std::int64_t> order;
      for (std::int64_t i = 0; i < N; ++i)
        if (!has_threshold || sc[i] > score_min) order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::int64_t p, std::int64_t q) { return sc[p] > sc[q]; });
      std::vector<Box> kept;
      for (std::int64_t i : order) {
        if (static_cast<std::int64_t>(kept.size()) >= max_out) break;
        const Box bi = box(b, i);
        if (std::any_of(kept.begin(), kept.end(),
                        [&](const Box& q) { return iou(bi, q) > iou_max; }))
          continue;
        kept.push_back(bi);
        picked.insert(picked.end(), {b, k, i});
      }
    }
  }
  ir::Tensor r = empty_like(ir::kInt64, {static_cast<std::int64_t>(picked.size() / 3), 3});
  r.i = picked;
  return r;
}

// ConstantOfShape: the "value" attribute (one element; float 0 when absent) repeated over the
// shape given by input 0.
ir::Tensor constant_of_shape(Ctx& c) {
  const Dims dims = c.ints(0, "shape");
  const ir::Tensor* v = c.attr_t("value");
  if (v && v->numel() != 1) c.fail("the value must hold one element");
  ir::Tensor r = empty_like(v ? v->elem : ir::kFloat, dims);
  for (std::size_t k = 0; k < static_cast<std::size_t>(r.numel()); ++k) {
    if (v == nullptr)
      r.f[k] = 0.0f;
    else if (ir::is_integral(v->elem))
      r.i[k] = v->i.at(0);
    else
      r.f[k] = v->f.at(0);
  }
  return r;
}

// Range(start, limit, delta) of scalars. The length is checked before anything is allocated;
// integer steps wrap in the element type's width, as ONNX integer arithmetic does.
ir::Tensor range(Ctx& c) {
  const ir::Tensor& s = *c.in(0).konst;
  const ir::Tensor& l = *c.in(1).konst;
  const ir::Tensor& d = *c.in(2).konst;
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1)
    c.fail("start, limit and delta must be scalars");
  same_elem(c, s, l);
  same_elem(c, s, d);
  const double start = get(s, 0), limit = get(l, 0), delta = get(d, 0);
  if (delta == 0 || !std::isfinite((limit - start) / delta))
    c.fail("Range with delta 0 or an endless range");
  const double steps = std::max(0.0, std::ceil((limit - start) / delta));
  if (steps > static_cast<double>(kMaxHostElements))
    c.unsupported("a range of " + std::to_string(steps) + " elements");
  const auto n = static_cast<std::int64_t>(steps);
  ir::Tensor r = empty_like(s.elem, {n});
  for (std::int64_t k = 0; k < n; ++k) {
    if (ir::is_integral(s.elem))
      r.i[static_cast<std::size_t>(k)] =
          wrap(static_cast<std::uint64_t>(s.i[0]) +
                   static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(d.i[0]),
               s.elem);
    else
      r.f[static_cast<std::size_t>(k)] = s.f[0] + static_cast<float>(k) * d.f[0];
  }
  return r;
}

}  // namespace

bool foldable(std::string_view op) {
  static const char* const kOps[] = {"Add",
                                     "Sub",
                                     "Mul",
                                     "Div",
                                     "Pow",
                                     "Mod",
                                     "Equal",
                                     "Less",
                                     "Greater",
                                     "LessOrEqual",
                                     "GreaterOrEqual",
                                     "And",
                                     "Or",
                                     "Xor",
                                     "Not",
                                     "Neg",
                                     "Abs",
                                     "Sign",
                                     "Floor",
                                     "Ceil",
                                     "Sqrt",
                                     "Reciprocal",
                                     "Min",
                                     "Max",
                                     "Sum",
                                     "Where",
                                     "Cast",
                                     "CastLike",
                                     "ConstantOfShape",
                                     "Range",
                                     "ReduceProd",
                                     "ReduceSum",
                                     "ReduceMin",
                                     "ReduceMax",
                                     "ReduceMean",
                                     "Relu",
                                     "NonZero",
                                     "Unique",
                                     "NonMaxSuppression"};
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

// Folds node c.n when every input is a known value: dispatches on the op to the evaluator of
// its family (above). Returns false, leaving the node to its handler, when it cannot.
bool fold(Ctx& c) {
  const std::string& op = c.n.op;
  if (!foldable(op) || !values_ok(c)) return false;
  for (std::size_t i = 0; i < c.inputs(); ++i) {
    if (c.has(i) && !c.in(i).known()) return false;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Mod" ||
      op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
      op == "GreaterOrEqual" || op == "And" || op == "Or" || op == "Xor") {
    if (c.version < 7 && c.has_attr("broadcast")) return false;  // legacy broadcast: the handler
    c.set(0, binary(c, op));
    return true;
  }
  if (op == "Neg" || op == "Abs" || op == "Sign" || op == "Floor" || op == "Ceil" || op == "Sqrt" ||
      op == "Reciprocal" || op == "Not" || op == "Relu") {
    c.set(0, unary(*c.in(0).konst, op));
    return true;
  }
  if (op == "Min" || op == "Max" || op == "Sum") {
    c.set(0, variadic(c, op));
    return true;
  }
  if (op == "Where") {
    c.set(0, where(c));
    return true;
  }
  if (op == "Cast" || op == "CastLike") {
    const int to = op == "Cast" ? static_cast<int>(c.attr_i("to", ir::kFloat)) : c.in(1).elem;
    if (!is_float(to) && !ir::is_integral(to)) return false;
    c.set(0, cast(*c.in(0).konst, to));
    return true;
  }
  if (op == "NonZero") {  // its output's shape depends on the values: known ones only
    c.set(0, nonzero(*c.in(0).konst));
    return true;
  }
  if (op == "Unique") {  // output shapes that depend on the values too
    unique(c);
    return true;
  }
  if (op == "NonMaxSuppression") {
    if (!is_float(c.in(0).elem) || !is_float(c.in(1).elem))
      c.fail("boxes and scores must be float");
    c.set(0, non_max_suppression(c));
    return true;
  }
  if (op == "ConstantOfShape") {
    c.set(0, constant_of_shape(c));
    return true;
  }
  if (op == "Range") {
    c.set(0, range(c));
    return true;
  }
  if (op.rfind("Reduce", 0) == 0) {
    c.set(0, reduce(c, *c.in(0).konst, op));
    return true;
  }
  return false;
}

// ---- host tensors --------------------------------------------------------------------------

namespace host {

ir::Tensor empty(int elem, Dims dims) {
  if (numel(dims) != 0) throw std::logic_error("host::empty of " + dims_str(dims));
  return empty_like(elem, std::move(dims));
}

ir::Tensor with_dims(const ir::Tensor& t, Dims dims) {
  ir::Tensor r = t;
  r.dims = std::move(dims);
  return r;
}

ir::Tensor scalar_ints(const Dims& values, int elem) {
  ir::Tensor t;
  t.elem = elem;
  t.dims = {static_cast<std::int64_t>(values.size())};
  t.i = values;
  return t;
}

namespace {
// Copies element `from` of `a` to element `to` of `r` (same element type).
void copy_elem(const ir::Tensor& a, std::size_t from, ir::Tensor& r, std::size_t to) {
  if (ir::is_integral(a.elem))
    r.i[to] = a.i[from];
  else
    r.f[to] = a.f[from];
}
}  // namespace

ir::Tensor transpose(const ir::Tensor& t, const Dims& perm) {
  Dims out;
  for (std::int64_t p : perm) out.push_back(t.dims[static_cast<std::size_t>(p)]);
  ir::Tensor r = empty_like(t.elem, out);
  const Dims st = strides_of(t.dims);
  Dims pst;
  for (std::int64_t p : perm) pst.push_back(st[static_cast<std::size_t>(p)]);
  for_broadcast(out, {}, [&](std::size_t k, const std::vector<std::size_t>&) {
    std::int64_t rem = static_cast<std::int64_t>(k), o = 0;
    for (std::size_t i = out.size(); i-- > 0;) {
      o += (rem % out[i]) * pst[i];
      rem /= out[i];
    }
    copy_elem(t, static_cast<std::size_t>(o), r, k);
  });
  return r;
}

ir::Tensor gather(const ir::Tensor& t, int axis, const Dims& index, const Dims& index_dims) {
  const auto a = static_cast<std::size_t>(axis);
  Dims out(t.dims.begin(), t.dims.begin() + axis);
  out.insert(out.end(), index_dims.begin(), index_dims.end());
  out.insert(out.end(), t.dims.begin() + axis + 1, t.dims.end());
  ir::Tensor r = empty_like(t.elem, out);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= t.dims[i];
  for (std::size_t i = a + 1; i < t.dims.size(); ++i) inner *= t.dims[i];
  std::size_t k = 0;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t idx : index) {
      for (std::int64_t in = 0; in < inner; ++in) {
        copy_elem(t, static_cast<std::size_t>((o * t.dims[a] + idx) * inner + in), r, k++);
      }
    }
  }
  return r;
}

ir::Tensor concat(const std::vector<const ir::Tensor*>& ts, int axis) {
  const auto a = static_cast<std::size_t>(axis);
  Dims out = ts[0]->dims;
  out[a] = 0;
  for (const ir::Tensor* t : ts) out[a] += t->dims[a];
  ir::Tensor r = empty_like(ts[0]->elem, out);
  std::int64_t outer = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= out[i];
  std::size_t k = 0;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (const ir::Tensor* t : ts) {
      const std::int64_t block = t->numel() / outer;
      for (std::int64_t j = 0; j < block; ++j)
        copy_elem(*t, static_cast<std::size_t>(o * block + j), r, k++);
    }
  }
  return r;
}

ir::Tensor slice(const ir::Tensor& t, const Dims& start, const Dims& step, const Dims& count) {
  ir::Tensor r = empty_like(t.elem, count);
  const Dims st = strides_of(t.dims);
  for_broadcast(count, {}, [&](std::size_t k, const std::vector<std::size_t>&) {
    std::int64_t rem = static_cast<std::int64_t>(k), o = 0;
    for (std::size_t i = count.size(); i-- > 0;) {
      o += (start[i] + (rem % count[i]) * step[i]) * st[i];
      rem /= count[i];
    }
    copy_elem(t, static_cast<std::size_t>(o), r, k);
  });
  return r;
}

ir::Tensor broadcast_to(const ir::Tensor& t, const Dims& dims) {
  ir::Tensor r = empty_like(t.elem, dims);
  for_broadcast(dims, {t.dims}, [&](std::size_t k, const std::vector<std::size_t>& o) {
    copy_elem(t, o[0], r, k);
  });
  return r;
}

}  // namespace host

}  // namespace hetgraph::onnx::imp
