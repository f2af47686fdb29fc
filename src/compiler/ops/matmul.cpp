// SPDX-License-Identifier: Apache-2.0
// Matrix multiplication with transpose flags; rank 2, or batched over a leading dim where a
// rank-2 operand is shared by the whole batch.
#include "compiler/geometry.hpp"
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "compiler/ops/builders.hpp"

namespace hetgraph::detail {

namespace {

TensorType infer_matmul(const InferCtx& c) {
  const Shape& a = c.in[0].shape;
  const Shape& b = c.in[1].shape;
  if (c.in[0].dtype != DType::f32 || c.in[1].dtype != DType::f32) {
    c.fail("matmul needs float inputs");
  }
  if (a.rank() < 2 || a.rank() > 3 || b.rank() < 2 || b.rank() > 3) {
    c.fail("matmul needs rank-2 or rank-3 operands, got " + a.str() + " and " + b.str());
  }
  const bool ta = c.attrs.trans_a, tb = c.attrs.trans_b;
  const MatmulGeom g = matmul_geom(a, b, ta, tb);
  const std::int64_t m = g.m, k = g.k, k2 = g.k_b, n = g.n;
  if (k != k2) {
    c.fail(std::string("inner dimensions differ: op(a) is [") + std::to_string(m) + ", " +
           std::to_string(k) + "] and op(b) is [" + std::to_string(k2) + ", " + std::to_string(n) +
           "]" + (ta || tb ? " (after the transposes asked for)" : ""));
  }
  if (a.rank() == 3 && b.rank() == 3 && a[0] != b[0]) {
    c.fail("batch sizes differ: " + std::to_string(a[0]) + " and " + std::to_string(b[0]));
  }
  if (a.rank() == 3 || b.rank() == 3) {
    const std::int64_t batch = a.rank() == 3 ? a[0] : b[0];
    return {Shape{batch, m, n}, DType::f32};
  }
  return {Shape{m, n}, DType::f32};
}

// C = op(A) op(B). For each transpose combination the adjoints are again matmuls; sum_to
// folds the batch away for an operand the batch shared.
void grad_matmul(const GradCtx& c) {
  const Attrs& at = c.attrs;
  const Node a = c.in[0], b = c.in[1], g = c.grad;
  Node da, db;
  if (!at.trans_a && !at.trans_b) {
    da = matmul(g, b, false, true);
    db = matmul(a, g, true, false);
  } else if (!at.trans_a && at.trans_b) {
    da = matmul(g, b, false, false);
    db = matmul(g, a, true, false);
  } else if (at.trans_a && !at.trans_b) {
    da = matmul(b, g, false, true);
    db = matmul(a, g, false, false);
  } else {
    da = matmul(b, g, true, true);
    db = matmul(g, a, true, true);
  }
  c.add(a, sum_to(da, a));
  c.add(b, sum_to(db, b));
}

// fused_matmul(a, b[, x]): made by the fusion passes after shape inference; a MatmulEpilogue
// payload says what follows the product. Its type is the matmul's.
TensorType infer_fused_matmul(const InferCtx& c) {
  TensorType t = infer_matmul(c);
  const MatmulEpilogue& e = c.attrs.get<MatmulEpilogue>();
  if (e.accumulate != (c.in.size() == 3))
    c.fail("fused_matmul: accumulates exactly when it has a third input");
  const std::int64_t cols = t.shape.dim(-1);
  if (!e.view.empty()) {
    const Shape v{std::span<const std::int64_t>(e.view)};
    if (v.numel() != t.shape.numel() || v.dim(-1) != cols)
      c.fail("fused_matmul: its view must keep the product's elements and columns");
    t.shape = v;
  }
  if (c.in.size() == 3 && e.bias && c.in[2].shape != Shape{cols})
    c.fail("fused_matmul: the bias must have one value per column");
  if (c.in.size() == 3 && !e.bias && c.in[2] != t)
    c.fail("fused_matmul: the accumulated input must have the product's shape");
  return t;
}

// Multiply-adds of the product: 2 * batch*m*n * k.
Cost matmul_cost(std::span<const TensorType> in, const TensorType& out, const Attrs& at,
                 Cost base) {
  const Shape& a = in[0].shape;
  const double k = static_cast<double>(at.trans_a ? a.dim(-2) : a.dim(-1));
  base.flops = 2.0 * static_cast<double>(out.shape.numel()) * k;
  return base;
}

}  // namespace

void register_matmul_ops(std::vector<OpDef>& t) {
  t.push_back({.kind = OpKind::MatMul,
               .name = "matmul",
               .arity = 2,
               .infer = infer_matmul,
               .grad = grad_matmul,
               .heavy = true,
               .cost = matmul_cost});
  // A fused product is a product (its epilogue is one more pass over the output): heavy, and
  // weighed by its multiply-adds like the matmul it replaced.
  t.push_back({.kind = OpKind::FusedMatMul,
               .name = "fused_matmul",
               .arity = -1,
               .inplace = 0b100u,
               .infer = infer_fused_matmul,
               .heavy = true,
               .cost = matmul_cost});
}

}  // namespace hetgraph::detail

namespace hetgraph {

using detail::Attrs;
using detail::make_op;
using detail::OpKind;

Node matmul(Node a, Node b, bool transpose_a, bool transpose_b) {
  Attrs at;
  at.trans_a = transpose_a;
  at.trans_b = transpose_b;
  return make_op(OpKind::MatMul, {a, b}, at);
}

}  // namespace hetgraph
