// SPDX-License-Identifier: Apache-2.0
// ONNX reductions on hetgraph ops: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum and ReduceLogSumExp, and what reduces over
// an axis: Softmax, LogSoftmax, Hardmax, NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

// min over axes = -max of -x: exact (negation is), NaN included.
Node reduce_min_of(Node x, int axis, bool keepdims) {
  return neg(reduce_max(neg(x), axis, keepdims));
}

namespace {

// ---- reductions ----------------------------------------------------------------------------

/// Reduces x over `axes` (empty: all) with `op`, one axis at a time (keeping dims, then
/// dropping them at once unless keepdims).
Node reduce_axes(Ctx& c, Node x, Dims axes, bool keep, Node (*op)(Node, int, bool)) {
  const Dims d = c.shape(x);
  const int r = static_cast<int>(d.size());
  std::vector<bool> red(d.size(), axes.empty());
  for (std::int64_t a : axes) red[static_cast<std::size_t>(c.axis(a, r))] = true;
  Node y = x;
  if (r == 0) return y;
  if (std::all_of(red.begin(), red.end(), [](bool v) { return v; })) {
    y = op(x, kAllAxes, true);
  } else {
    for (int a = r - 1; a >= 0; --a) {
      if (red[static_cast<std::size_t>(a)]) y = op(y, a, true);
    }
  }
  Dims out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (!red[i])
      out.push_back(d[i]);
    else if (keep)
      out.push_back(1);
  }
  return c.reshape(y, out);
}

Dims reduce_axes_of(Ctx& c, bool& noop) {
  noop = false;
  Dims axes = c.attr_ints("axes");
  if (c.has(1)) axes = c.ints(1, "axes");
  if (axes.empty() && c.attr_i("noop_with_empty_axes", 0) != 0) noop = true;
  return axes;
}

template <Node (*Op)(Node, int, bool)>
void reduce(Ctx& c) {
  bool noop = false;
  const Dims axes = reduce_axes_of(c, noop);
  if (noop) return c.alias(0, 0);
  const bool keep = c.attr_i("keepdims", 1) != 0;
  Node x = c.f32(0);
  const std::string& op = c.n.op;
  if (op == "ReduceSumSquare" || op == "ReduceL2") x = mul(x, x);
  if (op == "ReduceL1") x = abs(x);
  if (op == "ReduceLogSumExp") {
    // log(sum(exp(x - m))) + m with m the maximum, so large x do not overflow exp (ONNX's
    // reference does not shift; ONNX Runtime and torch.logsumexp do). An infinite m (a line of
    // -inf, or one holding +inf) shifts by 0 instead, which gives -inf or inf as it should.
    Node m = reduce_axes(c, x, axes, true, reduce_max);
    m = where(equal(abs(m), c.constant(INFINITY)), c.constant(0.0f), m);
    const Node s = reduce_axes(c, exp(sub(x, m)), axes, keep, reduce_sum);
    c.set(0, add(log(s), keep ? m : c.reshape(m, c.shape(s))));
    return;
  }
  Node y = reduce_axes(c, x, axes, keep, Op);
  if (op == "ReduceL2") y = sqrt(y);
  if (op == "ReduceLogSum") y = log(y);
  c.set(0, y);
}

// ---- softmax -------------------------------------------------------------------------------

template <Node (*Op)(Node, int)>
void softmax_op(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  const int r = static_cast<int>(d.size());
  if (c.version >= 13) {
    c.set(0, Op(x, c.axis(c.attr_i("axis", -1), r)));
    return;
  }
  // Before opset 13 the input is seen as 2-d: [dims before axis, dims from axis on].
  const int axis = c.axis(c.attr_i("axis", 1), std::max(r, 1));
  const std::int64_t rows = numel(Dims(d.begin(), d.begin() + axis));
  Node y = Op(c.reshape(x, {rows, numel(d) / rows}), -1);
  c.set(0, c.reshape(y, d));
}

// 1 at the first largest element along the axis (a NaN, if the line holds one, as argmax), 0
// elsewhere. Before opset 13 the input is seen as 2-d, as Softmax's.
void hardmax(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  const int r = static_cast<int>(d.size());
  auto one_hot_max = [&](Node v, int rank, int axis, std::int64_t n) {
    return cast(equal(argmax(v, axis, true), iota_along(c, rank, axis, n)), DType::f32);
  };
  if (c.version >= 13) {
    const int axis = c.axis(c.attr_i("axis", -1), r);
    c.set(0, one_hot_max(x, r, axis, d[static_cast<std::size_t>(axis)]));
    return;
  }
  const int axis = c.axis(c.attr_i("axis", 1), std::max(r, 1));
  const std::int64_t rows = numel(Dims(d.begin(), d.begin() + axis));
  const std::int64_t cols = numel(d) / rows;
  c.set(0, c.reshape(one_hot_max(c.reshape(x, {rows, cols}), 2, 1, cols), d));
}

// NegativeLogLikelihoodLoss of log-probabilities x [N, C, d...] and class ids t [N, d...]:
// -x[n, t, d...] * weight[t], 0 where t is ignore_index; reduced by none, sum or mean (the sum
// over the summed weights). The pick is a one-hot compare of t with the classes, through where,
// so that a -inf among the classes not picked stays out, and the gradient reaches x where it was
// picked. A target outside [0, C) that is not ignore_index is a FeedError at run time (ONNX
// leaves it undefined; PyTorch raises), not a loss of 0.
Node nll_loss_of(Ctx& c, Node x, std::size_t target, std::size_t weight) {
  const Dims dx = c.shape(x);
  const int r = static_cast<int>(dx.size());
  if (r < 2) c.fail("the input must have a class axis: [N, C, ...], got " + dims_str(dx));
  Dims dt = c.dims(target), want = dx;
  want.erase(want.begin() + 1);
  if (dt != want) c.fail("the target must be " + dims_str(want) + ", got " + dims_str(dt));
  if (!ir::is_integral(c.elem(target)) || c.elem(target) == ir::kBool)
    c.fail("the target must hold integer class ids");
  const std::int64_t classes = dx[1];
  Dims grown = dt;
  grown.insert(grown.begin() + 1, 1);
  const Node t = c.reshape(c.node(target), grown);
  const Node picks = equal(t, iota_along(c, r, 1, classes));  // [N, C, d...]
  const Node zero = c.constant(0.0f);
  const Node picked = reduce_sum(where(picks, x, zero), 1);  // x[n, t, d...]
  // The weight of each position: weight[t] (or 1 for a class id in range), 0 where ignored.
  Node w;
  if (c.has(weight)) {
    if (c.dims(weight) != Dims{classes})
      c.fail("the weight must be [" + std::to_string(classes) + "]");
    Dims wd(static_cast<std::size_t>(r), 1);
    wd[1] = classes;
    w = reduce_sum(where(picks, c.reshape(c.f32(weight), wd), zero), 1);
  } else {
    w = reduce_sum(cast(picks, DType::f32), 1);
  }
  Node ids = c.node(target);  // the class ids to check: ignored ones as 0
  if (c.has_attr("ignore_index")) {
    const std::int64_t ii = c.attr_i("ignore_index", 0);
    if (ii >= INT32_MIN && ii <= INT32_MAX) {
      const Node ignored = c.graph().constant_i32(Shape{}, {static_cast<std::int32_t>(ii)});
      const Node is_ignored = equal(ids, ignored);
      // A class id out of range picked nothing already; the check below refuses it.
      if (ii >= 0 && ii < classes) w = where(is_ignored, zero, w);
      ids = where(is_ignored, c.graph().constant_i32(Shape{}, {0}), ids);
    }  // else no int32 target equals it
  }
  // The check's zero added to the weights keeps it in the graph and ahead of the loss.
  w = add(w, index_check(c, ids, classes, "class ids"));
  const Node loss = neg(mul(picked, w));
  const std::string reduction = c.attr_s("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return reduce_sum(loss);
  if (reduction == "mean") return div(reduce_sum(loss), reduce_sum(w));
  c.fail("reduction must be none, sum or mean, got '" + reduction + "'");
}

void nll_loss(Ctx& c) {
  c.set(0, nll_loss_of(c, c.f32(0), 1, 2));
}

// SoftmaxCrossEntropyLoss: NegativeLogLikelihoodLoss of log_softmax over the class axis; the
// optional second output is that log_softmax.
void softmax_cross_entropy_loss(Ctx& c) {
  Node scores = c.f32(0);
  if (c.rank(0) < 2) c.fail("the scores must have a class axis: [N, C, ...]");
  const Node logp = log_softmax(scores, 1);
  c.set(0, nll_loss_of(c, logp, 1, 2));
  if (c.wants(1)) c.set(1, logp);
}

}  // namespace

void register_reduce_ops(std::vector<Handler>& h) {
  h.push_back({"ReduceMin", 1, 13, reduce<reduce_min_of>});
  h.push_back({"ReduceSum", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceMean", 1, 13, reduce<reduce_mean>});
  h.push_back({"ReduceMax", 1, 13, reduce<reduce_max>});
  h.push_back({"ReduceSumSquare", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceL1", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceL2", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceLogSum", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceLogSumExp", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceProd", 1, 13, reduce<reduce_prod>});
  h.push_back({"Softmax", 1, 13, softmax_op<softmax>});
  h.push_back({"LogSoftmax", 1, 13, softmax_op<log_softmax>});
  h.push_back({"Hardmax", 1, 13, hardmax});
  h.push_back({"NegativeLogLikelihoodLoss", 12, 13, nll_loss});
  h.push_back({"SoftmaxCrossEntropyLoss", 12, 13, softmax_cross_entropy_loss});
}

}  // namespace hetgraph::onnx::imp
