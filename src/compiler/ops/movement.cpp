// SPDX-License-Identifier: Apache-2.0
// Data movement: slice, concat, transpose, reshape (a view), and their gradients.
#include <algorithm>
#include <numeric>

#include "compiler/geometry.hpp"
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "compiler/ops/builders.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail {

/// Normalised [begin, end) of a slice along `axis` of `s` (negative values count from the
/// back); fails when the range is empty or out of bounds.
void slice_range(const InferCtx& c, const Shape& s, int axis, std::int64_t& b, std::int64_t& e) {
  const int a = c.norm_axis(axis, s.rank());
  const std::int64_t d = s[a];
  const SliceRange& r = c.attrs.get_or_default<SliceRange>();
  b = r.begin < 0 ? r.begin + d : r.begin;
  e = r.end < 0 ? r.end + d : r.end;
  if (b < 0 || e > d || b >= e) {
    c.fail("slice [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ") of axis " +
           std::to_string(axis) + " (size " + std::to_string(d) + ") is empty or out of range");
  }
}

namespace {

Shape with_dim(const Shape& s, int axis, std::int64_t v) {
  std::vector<std::int64_t> d(s.dims().begin(), s.dims().end());
  d[static_cast<std::size_t>(axis)] = v;
  return Shape(std::span<const std::int64_t>(d));
}

TensorType infer_slice(const InferCtx& c) {
  const Shape& s = c.in[0].shape;
  if (s.rank() == 0) c.fail("cannot slice a scalar");
  std::int64_t b = 0, e = 0;
  slice_range(c, s, c.attrs.axis, b, e);
  return {with_dim(s, c.norm_axis(c.attrs.axis, s.rank()), e - b), c.in[0].dtype};
}

TensorType infer_slice_grad(const InferCtx& c) {
  const Shape& like = c.in[1].shape;
  std::int64_t b = 0, e = 0;
  slice_range(c, like, c.attrs.axis, b, e);
  const Shape want = with_dim(like, c.norm_axis(c.attrs.axis, like.rank()), e - b);
  if (c.in[0].shape != want) c.fail("slice gradient must have shape " + want.str());
  return {like, DType::f32};
}

// slice_grad_n(like, g_1..g_n): the gradients of n slices of `like` along one axis, placed
// into one zero tensor of like's shape. SliceRanges: disjoint and non-negative
// (regroup_gradients checks before making it), so no element is written twice.
TensorType infer_slice_grad_n(const InferCtx& c) {
  const Shape& like = c.in[0].shape;
  const auto& r = c.attrs.get<SliceRanges>().ranges;
  if (r.size() != c.in.size() - 1) c.fail("slice_grad_n: one [begin, end) pair per gradient");
  const int a = c.norm_axis(c.attrs.axis, like.rank());
  for (std::size_t i = 1; i < c.in.size(); ++i) {
    const std::int64_t b = r[i - 1][0], e = r[i - 1][1];
    if (b < 0 || e > like[a] || b >= e) c.fail("slice_grad_n: range out of bounds");
    if (c.in[i].shape != with_dim(like, a, e - b))
      c.fail("slice_grad_n: gradient " + std::to_string(i) + " has the wrong shape");
  }
  return {like, DType::f32};
}

// Checks that inputs [first, end) concatenate along axis; returns the concatenated shape.
Shape concat_shape(const InferCtx& c, std::size_t first) {
  const Shape& s0 = c.in[first].shape;
  if (s0.rank() == 0) c.fail("cannot concatenate scalars");
  const int a = c.norm_axis(c.attrs.axis, s0.rank());
  std::int64_t total = 0;
  for (std::size_t i = first; i < c.in.size(); ++i) {
    const Shape& s = c.in[i].shape;
    bool ok = s.rank() == s0.rank() && c.in[i].dtype == c.in[first].dtype;
    for (int d = 0; ok && d < s.rank(); ++d) ok = d == a || s[d] == s0[d];
    if (!ok) {
      c.fail("concat along axis " + std::to_string(c.attrs.axis) + ": input " +
             std::to_string(i - first) + " has shape " + s.str() + ", which differs from input 0 " +
             s0.str() + " outside that axis");
    }
    if (__builtin_add_overflow(total, s[a], &total)) c.fail("the concatenated axis overflows");
  }
  return with_dim(s0, a, total);
}

TensorType infer_concat(const InferCtx& c) {
  return {concat_shape(c, 0), c.in[0].dtype};
}

// concat_grad(g, x0..xn-1) with PieceIndex i: the piece of g that came from x_i.
TensorType infer_concat_grad(const InferCtx& c) {
  const Shape whole = concat_shape(c, 1);
  if (c.in[0].shape != whole) c.fail("concat gradient must have shape " + whole.str());
  const auto i = static_cast<std::size_t>(c.attrs.get_or_default<PieceIndex>().piece) + 1;
  if (i >= c.in.size()) c.fail("concat gradient index out of range");
  return {c.in[i].shape, DType::f32};
}

TensorType infer_transpose(const InferCtx& c) {
  const Shape& s = c.in[0].shape;
  const std::vector<std::int64_t>& perm = c.attrs.get<Permutation>().perm;
  std::vector<std::int64_t> d(s.dims().begin(), s.dims().end());
  if (perm.empty()) {
    if (s.rank() >= 2) std::swap(d[d.size() - 1], d[d.size() - 2]);
    return {Shape(std::span<const std::int64_t>(d)), c.in[0].dtype};
  }
  if (static_cast<int>(perm.size()) != s.rank()) {
    c.fail("transpose permutation has " + std::to_string(perm.size()) + " entries for rank " +
           std::to_string(s.rank()));
  }
  std::vector<bool> seen(perm.size(), false);
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const std::int64_t p = perm[i];
    if (p < 0 || p >= s.rank() || seen[static_cast<std::size_t>(p)]) {
      c.fail("transpose permutation is not a permutation of 0.." + std::to_string(s.rank() - 1));
    }
    seen[static_cast<std::size_t>(p)] = true;
    d[i] = s[static_cast<int>(p)];
  }
  return {Shape(std::span<const std::int64_t>(d)), c.in[0].dtype};
}

TensorType infer_reshape(const InferCtx& c) {
  const Shape& s = c.in[0].shape;
  std::vector<std::int64_t> d = c.attrs.get<ReshapeTarget>().dims;
  std::int64_t known = 1;
  int infer_at = -1;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] == -1) {
      infer_at = static_cast<int>(i);
    } else if (d[i] <= 0) {
      c.fail("reshape target has a non-positive dimension " + std::to_string(d[i]));
    } else if (__builtin_mul_overflow(known, d[i], &known) || known > Shape::kMaxElements) {
      std::string dims;
      for (std::int64_t v : d) dims += (dims.empty() ? "" : ", ") + std::to_string(v);
      c.fail("reshape target [" + dims + "] has more elements than a tensor may hold");
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || s.numel() % known != 0) {
      c.fail("cannot infer the -1 dimension: " + std::to_string(s.numel()) +
             " elements are not a multiple of " + std::to_string(known));
    }
    d[static_cast<std::size_t>(infer_at)] = s.numel() / known;
    known = s.numel();
  }
  if (known != s.numel()) {
    c.fail("reshape to " + Shape(std::span<const std::int64_t>(d)).str() + " needs " +
           std::to_string(known) + " elements, the input has " + std::to_string(s.numel()));
  }
  return {Shape(std::span<const std::int64_t>(d)), c.in[0].dtype};
}

TensorType infer_reshape_like(const InferCtx& c) {
  if (c.in[0].shape.numel() != c.in[1].shape.numel()) {
    c.fail("reshape_like: element counts differ");
  }
  return {c.in[1].shape, c.in[0].dtype};
}

// strided_slice (x) and its gradient (g, x-shape): SliceSpec normalised in geometry.hpp.
Shape strided_out(const InferCtx& c, const Shape& x) {
  StridedGeom g;
  const std::string why = strided_slice_geom(x, c.attrs.get<SliceSpec>(), g);
  if (!why.empty()) c.fail("strided_slice of " + x.str() + ": " + why);
  return g.out;
}
TensorType infer_strided_slice(const InferCtx& c) {
  return {strided_out(c, c.in[0].shape), c.in[0].dtype};
}
TensorType infer_strided_slice_grad(const InferCtx& c) {
  const Shape want = strided_out(c, c.in[1].shape);
  if (c.in[0].dtype != DType::f32 || c.in[0].shape != want) {
    c.fail("the incoming gradient must have the slice's shape " + want.str() + ", got " +
           c.in[0].shape.str());
  }
  return {c.in[1].shape, DType::f32};
}

void grad_strided_slice(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::StridedSliceGrad, {c.grad, c.in[0]}, c.attrs));
}

void grad_slice(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::SliceGrad, {c.grad, c.in[0]}, c.attrs));
}
void grad_concat(const GradCtx& c) {
  std::vector<Node> ins{c.grad};
  ins.insert(ins.end(), c.in.begin(), c.in.end());
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    Attrs a = c.attrs;
    a.set(PieceIndex{static_cast<std::int64_t>(i)});
    c.add(c.in[i], make_op(OpKind::ConcatGrad, std::span<const Node>(ins), a));
  }
}
void grad_transpose(const GradCtx& c) {
  const std::vector<std::int64_t>& perm = c.attrs.get<Permutation>().perm;
  std::vector<int> inv(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
  c.add(c.in[0], transpose(c.grad, inv));
}
void grad_reshape(const GradCtx& c) {
  c.add(c.in[0], reshape_like(c.grad, c.in[0]));
}

}  // namespace

void register_movement_ops(std::vector<OpDef>& t) {
  t.push_back({.kind = OpKind::Slice,
               .name = "slice",
               .arity = 1,
               .infer = infer_slice,
               .grad = grad_slice,
               .flops_per_elem = 0.5f});
  t.push_back({.kind = OpKind::SliceGrad,
               .name = "slice_grad",
               .arity = 2,
               .shape_only = 0b10u,
               .infer = infer_slice_grad,
               .flops_per_elem = 0.5f});
  t.push_back({.kind = OpKind::SliceGradN,
               .name = "slice_grad_n",
               .arity = -1,
               .shape_only = 0b1u,
               .infer = infer_slice_grad_n,
               .flops_per_elem = 0.5f});
  t.push_back({.kind = OpKind::StridedSlice,
               .name = "strided_slice",
               .arity = 1,
               .infer = infer_strided_slice,
               .grad = grad_strided_slice,
               .flops_per_elem = 0.5f});
  t.push_back({.kind = OpKind::StridedSliceGrad,
               .name = "strided_slice_grad",
               .arity = 2,
               .shape_only = 0b10u,
               .infer = infer_strided_slice_grad,
               .flops_per_elem = 0.5f});
  t.push_back({.kind = OpKind::Concat,
               .name = "concat",
               .arity = -1,
               .infer = infer_concat,
               .grad = grad_concat,
               .flops_per_elem = 0.5f,
               .onnx = {"Concat", OnnxForm::Attr::axis}});
  t.push_back({.kind = OpKind::ConcatGrad,
               .name = "concat_grad",
               .arity = -1,
               .shape_only = ~1u,
               .infer = infer_concat_grad,
               .flops_per_elem = 0.5f});
  t.push_back({.kind = OpKind::Transpose,
               .name = "transpose",
               .arity = 1,
               .infer = infer_transpose,
               .grad = grad_transpose,
               .flops_per_elem = 0.5f});
  t.push_back({.kind = OpKind::Reshape,
               .name = "reshape",
               .arity = 1,
               .storage = Storage::View,
               .infer = infer_reshape,
               .grad = grad_reshape,
               .flops_per_elem = 0.0f});
  t.push_back({.kind = OpKind::ReshapeLike,
               .name = "reshape_like",
               .arity = 2,
               .shape_only = 0b10u,
               .storage = Storage::View,
               .infer = infer_reshape_like,
               .grad = grad_reshape,
               .flops_per_elem = 0.0f});
}

}  // namespace hetgraph::detail

namespace hetgraph {

using detail::Attrs;
using detail::make_op;
using detail::OpKind;

Node slice(Node x, int axis, std::int64_t begin, std::int64_t end) {
  Attrs at;
  at.axis = axis;
  at.set(detail::SliceRange{begin, end});
  return make_op(OpKind::Slice, {x}, at);
}

Node strided_slice(Node x, std::vector<std::int64_t> starts, std::vector<std::int64_t> ends,
                   std::vector<std::int64_t> axes, std::vector<std::int64_t> steps) {
  Attrs at;
  at.set(detail::SliceSpec{std::move(starts), std::move(ends), std::move(axes), std::move(steps)});
  return make_op(OpKind::StridedSlice, {x}, at);
}

Node concat(std::span<const Node> xs, int axis) {
  Attrs at;
  at.axis = axis;
  return make_op(OpKind::Concat, xs, at);
}
Node concat(std::initializer_list<Node> xs, int axis) {
  return concat(std::span<const Node>(xs.begin(), xs.size()), axis);
}

Node transpose(Node x, std::vector<int> perm) {
  Attrs at;
  at.set(detail::Permutation{{perm.begin(), perm.end()}});
  return make_op(OpKind::Transpose, {x}, at);
}

Node reshape(Node x, std::vector<std::int64_t> shape) {
  if (shape.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    throw ShapeError("reshape of " + x.label() + ": target rank " + std::to_string(shape.size()) +
                     " is above 4");
  }
  if (std::count(shape.begin(), shape.end(), -1) > 1) {
    throw ShapeError("reshape of " + x.label() + ": at most one dimension may be -1");
  }
  Attrs at;
  at.set(detail::ReshapeTarget{std::move(shape)});
  return make_op(OpKind::Reshape, {x}, at);
}

}  // namespace hetgraph
