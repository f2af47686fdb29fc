// SPDX-License-Identifier: Apache-2.0
// Reductions over one axis or all axes, and their inverses for gradients: expand (broadcast
// a reduced tensor back) and sum_to (sum a broadcast result down to an input's shape); argmax
// and argmin, the int32 position of the extreme along an axis; top_k, the positions of the k
// best along an axis. The public builders (reduce_*, cumsum, argmax, argmin, top_k) live here,
// next to their ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "compiler/ops/builders.hpp"

namespace hetgraph {

using detail::Attrs;
using detail::make_op;
using detail::OpKind;

namespace {
Node reduce(OpKind k, Node x, int axis, bool keepdims) {
  Attrs at;
  at.axis = axis;
  at.keepdims = keepdims;
  return make_op(k, {x}, at);
}
}  // namespace

Node reduce_sum(Node x, int axis, bool keepdims) {
  return reduce(OpKind::ReduceSum, x, axis, keepdims);
}
Node reduce_mean(Node x, int axis, bool keepdims) {
  return reduce(OpKind::ReduceMean, x, axis, keepdims);
}
Node reduce_max(Node x, int axis, bool keepdims) {
  return reduce(OpKind::ReduceMax, x, axis, keepdims);
}
Node reduce_prod(Node x, int axis, bool keepdims) {
  return reduce(OpKind::ReduceProd, x, axis, keepdims);
}
Node cumsum(Node x, int axis, bool exclusive, bool reverse) {
  Attrs at;
  at.axis = axis;
  at.set(detail::ScanMode{exclusive, reverse});
  return make_op(OpKind::CumSum, {x}, at);
}
Node argmax(Node x, int axis, bool keepdims, bool last_index) {
  Attrs at;
  at.axis = axis;
  at.keepdims = keepdims;
  at.last_index = last_index;
  return make_op(OpKind::ArgMax, {x}, at);
}
Node argmin(Node x, int axis, bool keepdims, bool last_index) {
  Attrs at;
  at.axis = axis;
  at.keepdims = keepdims;
  at.last_index = last_index;
  return make_op(OpKind::ArgMin, {x}, at);
}

Node top_k_indices(Node x, std::int64_t k, int axis, bool largest) {
  detail::Attrs at;
  at.axis = axis;
  at.set(detail::TopKSpec{k, largest});
  return detail::make_op(detail::OpKind::TopK, {x}, at);
}
TopK top_k(Node x, std::int64_t k, int axis, bool largest) {
  Node indices = top_k_indices(x, k, axis, largest);
  return {gather_elements(x, indices, axis), indices};
}

}  // namespace hetgraph

namespace hetgraph::detail {

/// Shape of `in` reduced over `axis` (kAllAxes: all), as reductions and expand compute it.
Shape reduced_shape(const InferCtx& c, const Shape& in, int axis, bool keepdims) {
  std::vector<std::int64_t> d;
  if (axis == kAllAxes) {
    if (keepdims) d.assign(static_cast<std::size_t>(in.rank()), 1);
    return Shape(std::span<const std::int64_t>(d));
  }
  if (in.rank() == 0) c.fail("cannot reduce a scalar over axis " + std::to_string(axis));
  const int a = c.norm_axis(axis, in.rank());
  for (int i = 0; i < in.rank(); ++i) {
    if (i != a)
      d.push_back(in[i]);
    else if (keepdims)
      d.push_back(1);
  }
  return Shape(std::span<const std::int64_t>(d));
}

namespace {

TensorType infer_reduce(const InferCtx& c) {
  if (c.in[0].dtype != DType::f32) c.fail("reductions need float input");
  return {reduced_shape(c, c.in[0].shape, c.attrs.axis, c.attrs.keepdims), DType::f32};
}

// argmax / argmin: float or int32 input, int32 positions, so every position must fit an int32
// (lines are never empty: the compiler rejects empty dims before shapes are inferred).
TensorType infer_arg_extreme(const InferCtx& c) {
  const Shape& in = c.in[0].shape;
  if (in.rank() == 0) c.fail("a scalar has no axis to give a position along");
  const bool all = c.attrs.axis == kAllAxes;
  const std::int64_t n = all ? in.numel() : in[c.norm_axis(c.attrs.axis, in.rank())];
  const std::string along = all ? "over all axes" : "along axis " + std::to_string(c.attrs.axis);
  if (n > std::numeric_limits<std::int32_t>::max()) {
    c.fail(std::to_string(n) + " elements " + along + ": positions must fit in int32");
  }
  return {reduced_shape(c, in, c.attrs.axis, c.attrs.keepdims), DType::i32};
}

// top_k: float or int32 input, int32 positions (each must fit), k of them per line.
TensorType infer_top_k(const InferCtx& c) {
  const Shape& in = c.in[0].shape;
  if (in.rank() == 0) c.fail("a scalar has no axis to give positions along");
  const int a = c.norm_axis(c.attrs.axis, in.rank());
  const std::int64_t n = in[a], k = c.attrs.get<TopKSpec>().k;
  if (k < 1 || k > n) {
    c.fail("k = " + std::to_string(k) + " is outside [1, " + std::to_string(n) +
           "], the size of axis " + std::to_string(c.attrs.axis));
  }
  if (n > std::numeric_limits<std::int32_t>::max()) {
    c.fail(std::to_string(n) + " elements along axis " + std::to_string(c.attrs.axis) +
           ": positions must fit in int32");
  }
  std::vector<std::int64_t> d(in.dims().begin(), in.dims().end());
  d[static_cast<std::size_t>(a)] = k;
  return {Shape(std::span<const std::int64_t>(d)), DType::i32};
}

// About n log2(k) comparisons per line of n (a selection, then a sort of the k kept).
Cost top_k_cost(std::span<const TensorType> in, const TensorType&, const Attrs& at, Cost base) {
  const double k = static_cast<double>(at.get<TopKSpec>().k);
  base.flops = static_cast<double>(in[0].shape.numel()) * std::max(1.0, std::log2(k + 1.0));
  return base;
}

// expand(g, like): g has the reduced shape of `like`; the result has like's shape.
TensorType infer_expand(const InferCtx& c) {
  const Shape want = reduced_shape(c, c.in[1].shape, c.attrs.axis, c.attrs.keepdims);
  if (c.in[0].shape != want) {
    c.fail("expand: gradient shape " + c.in[0].shape.str() + " is not the reduced shape " +
           want.str());
  }
  return {c.in[1].shape, DType::f32};
}

// reduce_max_grad(g, x, y): g and y have the reduced shape of x.
TensorType infer_reduce_max_grad(const InferCtx& c) {
  const Shape want = reduced_shape(c, c.in[1].shape, c.attrs.axis, c.attrs.keepdims);
  if (c.in[0].shape != want || c.in[2].shape != want) {
    c.fail("reduce_max_grad: gradient and max must have shape " + want.str());
  }
  return {c.in[1].shape, DType::f32};
}

// reduce_prod_grad(g, x): g has the reduced shape of x.
TensorType infer_reduce_prod_grad(const InferCtx& c) {
  const Shape want = reduced_shape(c, c.in[1].shape, c.attrs.axis, c.attrs.keepdims);
  if (c.in[0].shape != want) {
    c.fail("reduce_prod_grad: gradient shape " + c.in[0].shape.str() +
           " is not the reduced shape " + want.str());
  }
  return {c.in[1].shape, DType::f32};
}

TensorType infer_cumsum(const InferCtx& c) {
  const TensorType& x = c.in[0];
  if (x.dtype != DType::f32 && x.dtype != DType::i32) c.fail("cumsum needs float or int32 input");
  if (x.shape.rank() == 0) c.fail("cumsum of a scalar: there is no axis to sum along");
  (void)c.norm_axis(c.attrs.axis, x.shape.rank());
  (void)c.attrs.get<ScanMode>();
  return x;
}

TensorType infer_sum_to(const InferCtx& c) {
  if (!broadcasts_to(c.in[1].shape, c.in[0].shape)) {
    c.fail("sum_to: " + c.in[1].shape.str() + " does not broadcast to " + c.in[0].shape.str());
  }
  return {c.in[1].shape, DType::f32};
}

void grad_reduce_sum(const GradCtx& c) {
  const Attrs& at = c.attrs;
  c.add(c.in[0], expand(c.grad, c.in[0], at.axis, at.keepdims, false));
}
void grad_reduce_mean(const GradCtx& c) {
  const Attrs& at = c.attrs;
  c.add(c.in[0], expand(c.grad, c.in[0], at.axis, at.keepdims, true));
}
void grad_reduce_max(const GradCtx& c) {
  const Attrs& at = c.attrs;
  c.add(c.in[0], with_axis(OpKind::ReduceMaxGrad, {c.grad, c.in[0], c.node}, at.axis, at.keepdims));
}
// d prod / d x_j is the product of the line's other elements: one kernel of prefix and suffix
// products, so a zero in the line needs no division.
void grad_reduce_prod(const GradCtx& c) {
  const Attrs& at = c.attrs;
  c.add(c.in[0], with_axis(OpKind::ReduceProdGrad, {c.grad, c.in[0]}, at.axis, at.keepdims));
}
// Each x[i] adds to the sums at and after i (before, reversed): the gradient is the same
// scan of g run the other way.
void grad_cumsum(const GradCtx& c) {
  const ScanMode m = c.attrs.get<ScanMode>();
  c.add(c.in[0], cumsum(c.grad, c.attrs.axis, m.exclusive, !m.reverse));
}
// Positions are piecewise constant in x: like floor, argmax passes no gradient on (a cast of
// them to float may still sit on the loss's path).
void grad_arg_extreme(const GradCtx&) {}
// The same for top_k's positions: its values (gather_elements of x) carry the gradient.
void grad_top_k(const GradCtx&) {}
// The gradient of a broadcast back along an axis is the reduction along it.
void grad_expand(const GradCtx& c) {
  const Attrs& at = c.attrs;
  Node r = make_op(at.mean ? OpKind::ReduceMean : OpKind::ReduceSum, {c.grad}, at);
  c.add(c.in[0], r);
}

}  // namespace

void register_reduce_ops(std::vector<OpDef>& t) {
  t.push_back({.kind = OpKind::ReduceSum,
               .name = "reduce_sum",
               .arity = 1,
               .infer = infer_reduce,
               .grad = grad_reduce_sum});
  t.push_back({.kind = OpKind::ReduceMean,
               .name = "reduce_mean",
               .arity = 1,
               .infer = infer_reduce,
               .grad = grad_reduce_mean});
  t.push_back({.kind = OpKind::ReduceMax,
               .name = "reduce_max",
               .arity = 1,
               .infer = infer_reduce,
               .grad = grad_reduce_max});
  t.push_back({.kind = OpKind::ReduceMaxGrad,
               .name = "reduce_max_grad",
               .arity = 3,
               .infer = infer_reduce_max_grad});
  t.push_back({.kind = OpKind::ReduceProd,
               .name = "reduce_prod",
               .arity = 1,
               .infer = infer_reduce,
               .grad = grad_reduce_prod});
  t.push_back({.kind = OpKind::ReduceProdGrad,
               .name = "reduce_prod_grad",
               .arity = 2,
               .infer = infer_reduce_prod_grad});
  t.push_back({.kind = OpKind::CumSum,
               .name = "cumsum",
               .arity = 1,
               .infer = infer_cumsum,
               .grad = grad_cumsum});
  t.push_back({.kind = OpKind::ArgMax,
               .name = "argmax",
               .arity = 1,
               .infer = infer_arg_extreme,
               .grad = grad_arg_extreme});
  t.push_back({.kind = OpKind::ArgMin,
               .name = "argmin",
               .arity = 1,
               .infer = infer_arg_extreme,
               .grad = grad_arg_extreme});
  t.push_back({.kind = OpKind::TopK,
               .name = "top_k",
               .arity = 1,
               .infer = infer_top_k,
               .grad = grad_top_k,
               .cost = top_k_cost});
  t.push_back({.kind = OpKind::Expand,
               .name = "expand",
               .arity = 2,
               .shape_only = 0b10u,
               .infer = infer_expand,
               .grad = grad_expand});
  t.push_back({.kind = OpKind::SumTo,
               .name = "sum_to",
               .arity = 2,
               .shape_only = 0b10u,
               .infer = infer_sum_to});
}

}  // namespace hetgraph::detail
