// Elementwise ops: numpy-broadcasting binary ops, unary math, and the activation gradients.
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "compiler/ops/builders.hpp"

namespace hetgraph::detail {

namespace {

void need_f32(const InferCtx& c) {
  for (const TensorType& t : c.in) {
    if (t.dtype != DType::f32) c.fail(std::string(op_name(c.op)) + " needs float inputs");
  }
}

TensorType infer_broadcast(const InferCtx& c) {
  need_f32(c);
  Shape out;
  if (!broadcast_shapes(c.in[0].shape, c.in[1].shape, out)) {
    c.fail("shapes " + c.in[0].shape.str() + " and " + c.in[1].shape.str() + " do not broadcast");
  }
  return {out, DType::f32};
}

TensorType infer_unary(const InferCtx& c) {
  need_f32(c);
  return c.in[0];
}

TensorType infer_same(const InferCtx& c) {
  need_f32(c);
  for (const TensorType& t : c.in) {
    if (t.shape != c.in[0].shape) c.fail("inputs must have the same shape");
  }
  return c.in[0];
}

// ---- gradient rules ----
void grad_add(const GradCtx& c) {
  c.add(c.in[0], sum_to(c.grad, c.in[0]));
  c.add(c.in[1], sum_to(c.grad, c.in[1]));
}
void grad_sub(const GradCtx& c) {
  c.add(c.in[0], sum_to(c.grad, c.in[0]));
  c.add(c.in[1], sum_to(neg(c.grad), c.in[1]));
}
void grad_mul(const GradCtx& c) {
  c.add(c.in[0], sum_to(mul(c.grad, c.in[1]), c.in[0]));
  c.add(c.in[1], sum_to(mul(c.grad, c.in[0]), c.in[1]));
}
void grad_div(const GradCtx& c) {
  // d(a/b)/db = -(a/b)/b: reuse the forward output instead of squaring b.
  c.add(c.in[0], sum_to(div(c.grad, c.in[1]), c.in[0]));
  c.add(c.in[1], sum_to(neg(div(mul(c.grad, c.node), c.in[1])), c.in[1]));
}
void grad_neg(const GradCtx& c) {
  c.add(c.in[0], neg(c.grad));
}
void grad_scale(const GradCtx& c) {
  c.add(c.in[0], scale(c.grad, c.attrs.alpha));
}
void grad_axpby(const GradCtx& c) {
  c.add(c.in[0], scale(c.grad, c.attrs.alpha));
  c.add(c.in[1], scale(c.grad, c.attrs.beta));
}
void grad_exp(const GradCtx& c) {
  c.add(c.in[0], mul(c.grad, c.node));
}
void grad_log(const GradCtx& c) {
  c.add(c.in[0], div(c.grad, c.in[0]));
}
void grad_sqrt(const GradCtx& c) {
  c.add(c.in[0], scale(div(c.grad, c.node), 0.5f));
}
void grad_relu(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::ReluGrad, {c.grad, c.in[0]}));
}
void grad_sigmoid(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::SigmoidGrad, {c.grad, c.node}));
}
void grad_tanh(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::TanhGrad, {c.grad, c.node}));
}
// floor is piecewise constant: its derivative is zero wherever it exists, so it passes no
// gradient on (x - floor(x) differentiates like x, as TensorFlow's floor-mod does).
void grad_floor(const GradCtx&) {}
// d gelu(x) / dx = Phi(x) + x phi(x): one kernel from the incoming gradient and x.
void grad_gelu(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::GeluGrad, {c.grad, c.in[0]}));
}

}  // namespace

void register_elementwise_ops(std::vector<OpDef>& t) {
  auto binary = [&](OpKind k, std::string_view name, GradFn g) {
    t.push_back({.kind = k,
                 .name = name,
                 .arity = 2,
                 .inplace = 0b11u,
                 .infer = infer_broadcast,
                 .grad = g,
                 .elementwise = Elementwise::binary});
  };
  binary(OpKind::Add, "add", grad_add);
  binary(OpKind::Sub, "sub", grad_sub);
  binary(OpKind::Mul, "mul", grad_mul);
  binary(OpKind::Div, "div", grad_div);
  // `epilogue`: the fusion pass may fold it into a matmul that feeds it.
  auto unary = [&](OpKind k, std::string_view name, GradFn g, float flops, bool epilogue) {
    t.push_back({.kind = k,
                 .name = name,
                 .arity = 1,
                 .inplace = 0b1u,
                 .infer = infer_unary,
                 .grad = g,
                 .flops_per_elem = flops,
                 .elementwise = Elementwise::unary,
                 .epilogue = epilogue});
  };
  unary(OpKind::Neg, "neg", grad_neg, 1, true);
  unary(OpKind::Scale, "scale", grad_scale, 1, true);
  unary(OpKind::Exp, "exp", grad_exp, 10, true);
  unary(OpKind::Log, "log", grad_log, 10, true);
  unary(OpKind::Sqrt, "sqrt", grad_sqrt, 4, true);
  unary(OpKind::Relu, "relu", grad_relu, 1, true);
  unary(OpKind::Sigmoid, "sigmoid", grad_sigmoid, 12, true);
  unary(OpKind::Tanh, "tanh", grad_tanh, 12, true);
  unary(OpKind::Floor, "floor", grad_floor, 1, false);
  unary(OpKind::Gelu, "gelu", grad_gelu, 20, false);
  // Same-shape binary ops: axpby (optimizer updates) and the activation gradients (g, x or y),
  // first-order only.
  auto same = [&](OpKind k, std::string_view name, GradFn g, float flops) {
    t.push_back({.kind = k,
                 .name = name,
                 .arity = 2,
                 .inplace = 0b11u,
                 .infer = infer_same,
                 .grad = g,
                 .flops_per_elem = flops,
                 .elementwise = Elementwise::binary});
  };
  same(OpKind::Axpby, "axpby", grad_axpby, 2);
  same(OpKind::ReluGrad, "relu_grad", nullptr, 1);
  same(OpKind::SigmoidGrad, "sigmoid_grad", nullptr, 3);
  same(OpKind::TanhGrad, "tanh_grad", nullptr, 3);
  same(OpKind::GeluGrad, "gelu_grad", nullptr, 20);
}

}  // namespace hetgraph::detail

namespace hetgraph {

Node gelu(Node x) {
  return detail::make_op(detail::OpKind::Gelu, {x});
}

}  // namespace hetgraph
