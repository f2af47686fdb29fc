// SPDX-License-Identifier: Apache-2.0
// Elementwise ops: numpy-broadcasting binary and ternary ops, unary math, and the activation
// gradients.
//
// NaN semantics (issue 11, class 9; as PyTorch and ONNX): a NaN input gives a NaN output, and a
// comparison never drops one. maximum/minimum, clip and relu return the NaN; where either input
// of maximum/minimum is NaN the result is that NaN (a, if both are). Gradients follow the
// forward's choice: the input a NaN was passed on from gets the gradient, as if the NaN had
// won the comparison (relu, clip, maximum/minimum). abs has no branch to follow at a NaN: its
// gradient there is NaN.
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "compiler/ops/builders.hpp"
#include "hetgraph/error.hpp"

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

// add, sub, mul, maximum, minimum: float, or int32 (ONNX's integer arithmetic; int32 wraps
// around; no gradient reaches ints).
TensorType infer_numeric(const InferCtx& c) {
  if (c.in[0].dtype == DType::i32 && c.in[1].dtype == DType::i32) {
    Shape out;
    if (!broadcast_shapes(c.in[0].shape, c.in[1].shape, out)) {
      c.fail("shapes " + c.in[0].shape.str() + " and " + c.in[1].shape.str() + " do not broadcast");
    }
    return {out, DType::i32};
  }
  if (c.in[0].dtype != c.in[1].dtype) {
    c.fail(std::string(op_name(c.op)) + " takes two floats or two int32s, got " +
           std::string(dtype_name(c.in[0].dtype)) + " and " +
           std::string(dtype_name(c.in[1].dtype)));
  }
  return infer_broadcast(c);
}

TensorType infer_unary(const InferCtx& c) {
  need_f32(c);
  return c.in[0];
}

// where(cond, a, b): int32 cond; a and b of one type (float or int32: it moves 32-bit words).
TensorType infer_where(const InferCtx& c) {
  if (c.in[0].dtype != DType::i32) {
    c.fail("where: the condition must be int32 (nonzero: true; ONNX's bool), got " +
           std::string(dtype_name(c.in[0].dtype)));
  }
  if (c.in[1].dtype != c.in[2].dtype) {
    c.fail("where: the two choices must have one type, got " +
           std::string(dtype_name(c.in[1].dtype)) + " and " +
           std::string(dtype_name(c.in[2].dtype)));
  }
  Shape ab, out;
  if (!broadcast_shapes(c.in[1].shape, c.in[2].shape, ab) ||
      !broadcast_shapes(c.in[0].shape, ab, out)) {
    c.fail("shapes " + c.in[0].shape.str() + ", " + c.in[1].shape.str() + " and " +
           c.in[2].shape.str() + " do not broadcast");
  }
  return {out, c.in[1].dtype};
}

// Comparisons: a and b of one type (float or int32); logic: int32 (nonzero is true). Either
// gives int32 0 / 1 of the broadcast shape.
TensorType infer_predicate(const InferCtx& c) {
  const bool logic =
      c.op == OpKind::LogicalAnd || c.op == OpKind::LogicalOr || c.op == OpKind::LogicalXor;
  const std::string name(op_name(c.op));
  if (logic && (c.in[0].dtype != DType::i32 || c.in[1].dtype != DType::i32)) {
    c.fail(name + " needs int32 inputs (nonzero: true; ONNX's bool), got " +
           std::string(dtype_name(c.in[0].dtype)) + " and " +
           std::string(dtype_name(c.in[1].dtype)));
  }
  if (c.in[0].dtype != c.in[1].dtype) {
    c.fail(name + " compares inputs of one type, got " + std::string(dtype_name(c.in[0].dtype)) +
           " and " + std::string(dtype_name(c.in[1].dtype)) + " (cast one of them)");
  }
  Shape out;
  if (!broadcast_shapes(c.in[0].shape, c.in[1].shape, out)) {
    c.fail("shapes " + c.in[0].shape.str() + " and " + c.in[1].shape.str() + " do not broadcast");
  }
  return {out, DType::i32};
}

TensorType infer_cast(const InferCtx& c) {
  return {c.in[0].shape, c.attrs.get<TargetType>().dtype};
}

// maximum_grad / minimum_grad (g, a, b): g has the broadcast shape of a and b.
TensorType infer_select_grad(const InferCtx& c) {
  need_f32(c);
  Shape out;
  if (!broadcast_shapes(c.in[1].shape, c.in[2].shape, out) || out != c.in[0].shape) {
    c.fail("the gradient must have the broadcast shape of " + c.in[1].shape.str() + " and " +
           c.in[2].shape.str());
  }
  const std::int64_t k = c.attrs.get_or_default<InputChoice>().input;
  if (k != 0 && k != 1) c.fail("the input must be 0 or 1");
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
  c.add(c.in[0], scale(c.grad, c.attrs.get_or_default<ScaleFactor>().factor));
}
void grad_axpby(const GradCtx& c) {
  const AxpbyCoeffs& k = c.attrs.get_or_default<AxpbyCoeffs>();
  c.add(c.in[0], scale(c.grad, k.a));
  c.add(c.in[1], scale(c.grad, k.b));
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
// Rounding to a narrower float passes the gradient on unchanged (as a cast between float types
// does in PyTorch): its derivative is 1 almost everywhere at the precision it keeps.
void grad_pass(const GradCtx& c) {
  c.add(c.in[0], c.grad);
}
// d gelu(x) / dx = Phi(x) + x phi(x): one kernel from the incoming gradient and x.
// sin' = cos, cos' = -sin: each gradient is the other op.
void grad_sin(const GradCtx& c) {
  c.add(c.in[0], mul(c.grad, cos(c.in[0])));
}
void grad_cos(const GradCtx& c) {
  c.add(c.in[0], neg(mul(c.grad, sin(c.in[0]))));
}
// tan' = 1 + tan^2, from the node; the inverse functions' from x (1 - x^2 under asin's and
// acos's root is 0 at +-1, where their derivatives are infinite: so is the gradient).
void grad_tan(const GradCtx& c) {
  c.add(c.in[0], mul(c.grad, 1.0f + c.node * c.node));
}
void grad_asin(const GradCtx& c) {
  c.add(c.in[0], div(c.grad, sqrt(1.0f - c.in[0] * c.in[0])));
}
void grad_acos(const GradCtx& c) {
  c.add(c.in[0], neg(div(c.grad, sqrt(1.0f - c.in[0] * c.in[0]))));
}
void grad_atan(const GradCtx& c) {
  c.add(c.in[0], div(c.grad, 1.0f + c.in[0] * c.in[0]));
}
void grad_sinh(const GradCtx& c) {
  c.add(c.in[0], mul(c.grad, cosh(c.in[0])));
}
void grad_cosh(const GradCtx& c) {
  c.add(c.in[0], mul(c.grad, sinh(c.in[0])));
}
void grad_asinh(const GradCtx& c) {
  c.add(c.in[0], div(c.grad, sqrt(c.in[0] * c.in[0] + 1.0f)));
}
void grad_acosh(const GradCtx& c) {
  c.add(c.in[0], div(c.grad, sqrt(c.in[0] * c.in[0] - 1.0f)));
}
void grad_atanh(const GradCtx& c) {
  c.add(c.in[0], div(c.grad, 1.0f - c.in[0] * c.in[0]));
}
void grad_gelu(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::GeluGrad, {c.grad, c.in[0]}));
}
// softsign' = 1 / (1 + |x|)^2: composed from existing ops (it needs no kernel of its own).
void grad_softsign(const GradCtx& c) {
  const Node d = 1.0f + abs(c.in[0]);
  c.add(c.in[0], div(c.grad, d * d));
}
// mish' = t + x sigmoid(x) (1 - t^2) with t = tanh(sp), sp = softplus(x) = max(x, 0) +
// log(1 + exp(-|x|)) (no overflow for any x): composed from existing ops.
void grad_mish(const GradCtx& c) {
  const Node x = c.in[0];
  const Node t = tanh(relu(x) + log(1.0f + exp(-abs(x))));
  c.add(x, c.grad * (t + x * sigmoid(x) * (1.0f - t * t)));
}
// gelu_tanh' = (1 + t) / 2 + x (1 - t^2) c (1 + 3 k x^2) / 2 with t = tanh(c (x + k x^3)),
// c = sqrt(2 / pi), k = 0.044715: composed from existing ops.
void grad_gelu_tanh(const GradCtx& c) {
  const Node x = c.in[0], x2 = x * x;
  const Node t = tanh(scale(x + scale(x2 * x, 0.044715f), 0.7978845608028654f));
  const Node inner = scale(1.0f + scale(x2, 3.0f * 0.044715f), 0.7978845608028654f);
  c.add(x, c.grad * scale((1.0f + t) + x * (1.0f - t * t) * inner, 0.5f));
}
// silu' = s (1 + x (1 - s)) with s = sigmoid(x): composed from existing ops.
void grad_silu(const GradCtx& c) {
  const Node x = c.in[0], s = sigmoid(x);
  c.add(x, c.grad * (s * (1.0f + x * (1.0f - s))));
}
// hard_swish' = 0 below -3, x / 3 + 1 / 2 from -3 to 3, 1 above 3 (ONNX's definition is
// piecewise; at -3 and 3 the middle piece's): composed from existing ops.
void grad_hard_swish(const GradCtx& c) {
  const Node x = c.in[0];
  const Node between = scale(x, 1.0f / 3.0f) + 0.5f;
  auto k = [&](float v) { return scalar_constant(*detail::graph_of(x), v); };
  const Node slope =
      where(less(x, k(-3.0f)), k(0.0f), where(greater(x, k(3.0f)), k(1.0f), between));
  c.add(x, c.grad * slope);
}
// Activations whose derivative is a function of x: one kernel from (g, x) with the node's
// attributes (leaky_relu's slope, clip's bounds).
template <OpKind K>
void grad_of_x(const GradCtx& c) {
  c.add(c.in[0], make_op(K, {c.grad, c.in[0]}, c.attrs));
}
// d a^b / da = b a^(b-1); d a^b / db = a^b log(a), written xlogy(a^b, a) so that a = 0 (with
// a^b = 0) gives 0 rather than 0 * -inf.
void grad_pow(const GradCtx& c) {
  const Node a = c.in[0], b = c.in[1];
  c.add(a, sum_to(mul(c.grad, mul(b, pow(a, b - 1.0f))), a));
  c.add(b, sum_to(mul(c.grad, make_op(OpKind::XLogY, {c.node, a})), b));
}
// a mod b = a - q b with q = floor(a / b) (fmod: trunc(a / b), which is t - fmod(t, 1)): g
// goes to a unchanged, -q g to b. Ints pass none.
template <bool Floored>
void grad_mod(const GradCtx& c) {
  const Node a = c.in[0], b = c.in[1];
  const Node t = div(a, b);
  const Node q = Floored ? floor(t) : t - fmod(t, 1.0f);
  c.add(a, sum_to(c.grad, a));
  c.add(b, sum_to(neg(mul(c.grad, q)), b));
}
// Each input gets g where it won (ties and NaNs: see the file comment).
template <OpKind K>
void grad_select(const GradCtx& c) {
  for (std::int64_t k = 0; k < 2; ++k) {
    Attrs at;
    at.set(InputChoice{k});
    const Node in = c.in[static_cast<std::size_t>(k)];
    c.add(in, sum_to(make_op(K, {c.grad, c.in[0], c.in[1]}, at), in));
  }
}
// prelu(x, s) = x < 0 ? s x : x: g s (where x < 0) or g to x; g x (where x < 0) to s.
void grad_prelu(const GradCtx& c) {
  const Node x = c.in[0], s = c.in[1];
  const Node zero = scalar_constant(*detail::graph_of(c.node), 0.0f);
  const Node negative = less(x, zero);
  c.add(x, sum_to(where(negative, mul(c.grad, s), c.grad), x));
  c.add(s, sum_to(where(negative, mul(c.grad, x), zero), s));
}
// Ints carry no gradient: a cast to int32 passes none on (like floor, it is piecewise
// constant); a cast to float passes g through (to a float input: an identity).
void grad_cast(const GradCtx& c) {
  if (c.attrs.get<TargetType>().dtype == DType::f32) c.add(c.in[0], c.grad);
}
// Comparisons are piecewise constant and logic takes ints: like floor, they pass no gradient
// on, so a float input may reach the loss through them (cast(x > 0) * x differentiates as
// the step times x).
void grad_none(const GradCtx&) {}
// g goes to a where cond holds, to b elsewhere; the int32 condition carries no gradient.
void grad_where(const GradCtx& c) {
  const Node zero = scalar_constant(*detail::graph_of(c.node), 0.0f);
  const Node cond = c.in[0], a = c.in[1], b = c.in[2];
  c.add(a, sum_to(where(cond, c.grad, zero), a));
  c.add(b, sum_to(where(cond, zero, c.grad), b));
}

}  // namespace

// NOLINTNEXTLINE(readability-function-size): a table: one row per op
void register_elementwise_ops(std::vector<OpDef>& t) {
  // `onnx`: the one ONNX op it is (OpDef::onnx); binary ops have importers of their own (ints,
  // legacy broadcasting), so their rows name the op for the exporter only.
  auto binary = [&](OpKind k, std::string_view name, GradFn g, InferFn infer = infer_broadcast,
                    OnnxForm onnx = {}) {
    t.push_back({.kind = k,
                 .name = name,
                 .arity = 2,
                 .inplace = 0b11u,
                 .infer = infer,
                 .grad = g,
                 .elementwise = Elementwise::binary,
                 .onnx = onnx});
  };
  binary(OpKind::Add, "add", grad_add, infer_numeric, {"Add"});
  binary(OpKind::Sub, "sub", grad_sub, infer_numeric, {"Sub"});
  binary(OpKind::Mul, "mul", grad_mul, infer_numeric, {"Mul"});
  binary(OpKind::Div, "div", grad_div, infer_broadcast, {"Div"});
  // `epilogue`: the fusion pass may fold it into a matmul that feeds it. `onnx`: the ONNX op
  // it exports as and, with schema versions, imports from (OpDef::onnx).
  auto unary = [&](OpKind k, std::string_view name, GradFn g, float flops, bool epilogue,
                   OnnxForm onnx = {}) {
    t.push_back({.kind = k,
                 .name = name,
                 .arity = 1,
                 .inplace = 0b1u,
                 .infer = infer_unary,
                 .grad = g,
                 .flops_per_elem = flops,
                 .elementwise = Elementwise::unary,
                 .epilogue = epilogue,
                 .onnx = onnx});
  };
  using A = OnnxForm::Attr;
  unary(OpKind::Neg, "neg", grad_neg, 1, true, {"Neg", A::none, 1, 13});
  unary(OpKind::Scale, "scale", grad_scale, 1, true);
  unary(OpKind::Exp, "exp", grad_exp, 10, true, {"Exp", A::none, 1, 13});
  unary(OpKind::Log, "log", grad_log, 10, true, {"Log", A::none, 1, 13});
  unary(OpKind::Sqrt, "sqrt", grad_sqrt, 4, true, {"Sqrt", A::none, 1, 13});
  unary(OpKind::Relu, "relu", grad_relu, 1, true, {"Relu", A::none, 1, 14});
  unary(OpKind::Sigmoid, "sigmoid", grad_sigmoid, 12, true, {"Sigmoid", A::none, 1, 13});
  unary(OpKind::Tanh, "tanh", grad_tanh, 12, true, {"Tanh", A::none, 1, 13});
  unary(OpKind::Floor, "floor", grad_floor, 1, false, {"Floor", A::none, 1, 13});
  unary(OpKind::Gelu, "gelu", grad_gelu, 20, false);  // opset 17 has no Gelu: exporter.cpp
  unary(OpKind::Sin, "sin", grad_sin, 15, false, {"Sin", A::none, 7, 7});
  unary(OpKind::Cos, "cos", grad_cos, 15, false, {"Cos", A::none, 7, 7});
  unary(OpKind::Tan, "tan", grad_tan, 20, false, {"Tan", A::none, 7, 7});
  unary(OpKind::Asin, "asin", grad_asin, 20, false, {"Asin", A::none, 7, 7});
  unary(OpKind::Acos, "acos", grad_acos, 20, false, {"Acos", A::none, 7, 7});
  unary(OpKind::Atan, "atan", grad_atan, 20, false, {"Atan", A::none, 7, 7});
  unary(OpKind::Sinh, "sinh", grad_sinh, 20, false, {"Sinh", A::none, 9, 9});
  unary(OpKind::Cosh, "cosh", grad_cosh, 20, false, {"Cosh", A::none, 9, 9});
  unary(OpKind::Asinh, "asinh", grad_asinh, 20, false, {"Asinh", A::none, 9, 9});
  unary(OpKind::Acosh, "acosh", grad_acosh, 20, false, {"Acosh", A::none, 9, 9});
  unary(OpKind::Atanh, "atanh", grad_atanh, 20, false, {"Atanh", A::none, 9, 9});
  unary(OpKind::Round, "round", grad_floor, 1, false, {"Round", A::none, 11, 11});
  unary(OpKind::ToFloat16, "to_float16", grad_pass, 3, false);
  unary(OpKind::ToBfloat16, "to_bfloat16", grad_pass, 2, false);
  unary(OpKind::Abs, "abs", grad_of_x<OpKind::AbsGrad>, 1, false, {"Abs", A::none, 1, 13});
  unary(OpKind::Erf, "erf", grad_of_x<OpKind::ErfGrad>, 20, false, {"Erf", A::none, 9, 13});
  // Imported by ops_math.cpp (ONNX's default slope when alpha is absent).
  unary(OpKind::LeakyRelu, "leaky_relu", grad_of_x<OpKind::LeakyReluGrad>, 2, false,
        {"LeakyRelu", A::alpha});
  unary(OpKind::Clip, "clip", grad_of_x<OpKind::ClipGrad>, 2, false);
  // Rows declared alone: the `///` lines right above such a row are its public builder's
  // documentation; cmake/GenerateOps.cmake makes its OpKind, its builder (Node name(Node x), or
  // Node name(Node a, Node b) for a binary row) and the declaration in
  // hetgraph/elementwise_ops.hpp from them. A new one goes after the last.
  /// x / (1 + |x|), a tanh-like squashing into (-1, 1) (ONNX Softsign).
  unary(OpKind::Softsign, "softsign", grad_softsign, 3, false, {"Softsign", A::none, 1, 1});
  /// x * tanh(softplus(x)), a smooth relu-like activation (ONNX Mish; softplus(x) = log(1 + e^x)).
  unary(OpKind::Mish, "mish", grad_mish, 25, false,
        {"Mish", A::none, 18, 18, "Mul(x, Tanh(Softplus(x)))"});
  /// x * sigmoid(x), the sigmoid-weighted linear unit (SiLU; Swish with beta 1: EfficientNet's
  /// activation). ONNX has no op for it: Mul(x, Sigmoid(x)) arrives and becomes one silu node
  /// (the fuse_silu pass), and it exports as those two nodes.
  unary(OpKind::Silu, "silu", grad_silu, 13, false, {"", A::none, 0, 0, "Mul(x, Sigmoid(x))"});
  /// x * max(0, min(1, x / 6 + 1 / 2)), MobileNetV3's hard swish (ONNX HardSwish).
  unary(OpKind::HardSwish, "hard_swish", grad_hard_swish, 5, false, {"HardSwish", A::none, 14, 14});
  /// prelu(x, slope): x where x >= 0, else slope * x, with slope broadcast against x (one per
  /// channel, usually: shape [C, 1, 1] for NCHW); a leaky relu whose slope is learned (ONNX PRelu).
  binary(OpKind::PRelu, "prelu", grad_prelu, infer_broadcast, {"PRelu", A::none, 9, 16});
  /// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), GELU's tanh approximation (GPT-2's
  /// "gelu_new", PyTorch's gelu(approximate="tanh")). Exports before ONNX opset 20 write it
  /// decomposed: those eight nodes arrive and become one gelu_tanh node (the fuse_gelu pass),
  /// and it exports as them.
  unary(OpKind::GeluTanh, "gelu_tanh", grad_gelu_tanh, 30, false,
        {"", A::none, 0, 0,
         "Mul(Mul(x, 0.5), Add(Tanh(Mul(Add(x, Mul(Mul(Mul(x, x), x), 0.044715)), "
         "0.7978845608028654)), 1))"});
  binary(OpKind::Pow, "pow", grad_pow, infer_broadcast, {"Pow"});
  binary(OpKind::XLogY, "xlogy", nullptr);
  binary(OpKind::Maximum, "maximum", grad_select<OpKind::MaximumGrad>, infer_numeric, {"Max"});
  binary(OpKind::Minimum, "minimum", grad_select<OpKind::MinimumGrad>, infer_numeric, {"Min"});
  binary(OpKind::Mod, "mod", grad_mod<true>, infer_numeric);
  binary(OpKind::FMod, "fmod", grad_mod<false>, infer_numeric);
  auto ternary = [&](OpKind k, std::string_view name, InferFn infer, GradFn g) {
    t.push_back({.kind = k,
                 .name = name,
                 .arity = 3,
                 .infer = infer,
                 .grad = g,
                 .elementwise = Elementwise::ternary});
  };
  ternary(OpKind::Where, "where", infer_where, grad_where);
  // Not elementwise for the generic kernels: its input and output types differ.
  t.push_back({.kind = OpKind::Cast,
               .name = "cast",
               .arity = 1,
               .inplace = 0b1u,
               .infer = infer_cast,
               .grad = grad_cast});
  // Not elementwise for the generic kernels either: int32 results of float inputs. In place:
  // each element is read before it is written, and 32-bit words either way.
  auto predicate = [&](OpKind k, std::string_view name) {
    t.push_back({.kind = k,
                 .name = name,
                 .arity = 2,
                 .inplace = 0b11u,
                 .infer = infer_predicate,
                 .grad = grad_none,
                 .flops_per_elem = 1});
  };
  predicate(OpKind::Equal, "equal");
  predicate(OpKind::Less, "less");
  predicate(OpKind::LessEqual, "less_equal");
  predicate(OpKind::Greater, "greater");
  predicate(OpKind::GreaterEqual, "greater_equal");
  predicate(OpKind::LogicalAnd, "logical_and");
  predicate(OpKind::LogicalOr, "logical_or");
  predicate(OpKind::LogicalXor, "logical_xor");
  ternary(OpKind::MaximumGrad, "maximum_grad", infer_select_grad, nullptr);
  ternary(OpKind::MinimumGrad, "minimum_grad", infer_select_grad, nullptr);
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
  same(OpKind::AbsGrad, "abs_grad", nullptr, 1);
  same(OpKind::ErfGrad, "erf_grad", nullptr, 12);
  same(OpKind::LeakyReluGrad, "leaky_relu_grad", nullptr, 1);
  same(OpKind::ClipGrad, "clip_grad", nullptr, 2);
}

}  // namespace hetgraph::detail

namespace hetgraph {

using detail::Attrs;
using detail::make_op;
using detail::NodeRec;
using detail::OpKind;

Node add(Node a, Node b) {
  return make_op(OpKind::Add, {a, b});
}
Node sub(Node a, Node b) {
  return make_op(OpKind::Sub, {a, b});
}
Node mul(Node a, Node b) {
  return make_op(OpKind::Mul, {a, b});
}
Node div(Node a, Node b) {
  return make_op(OpKind::Div, {a, b});
}
Node neg(Node x) {
  return make_op(OpKind::Neg, {x});
}
Node scale(Node x, float s) {
  Attrs at;
  at.set(detail::ScaleFactor{s});
  return make_op(OpKind::Scale, {x}, at);
}
Node axpby(Node x, Node y, float a, float b) {
  Attrs at;
  at.set(detail::AxpbyCoeffs{a, b});
  return make_op(OpKind::Axpby, {x, y}, at);
}
Node exp(Node x) {
  return make_op(OpKind::Exp, {x});
}
Node log(Node x) {
  return make_op(OpKind::Log, {x});
}
Node sqrt(Node x) {
  return make_op(OpKind::Sqrt, {x});
}
Node floor(Node x) {
  return make_op(OpKind::Floor, {x});
}
Node relu(Node x) {
  return make_op(OpKind::Relu, {x});
}
Node sigmoid(Node x) {
  return make_op(OpKind::Sigmoid, {x});
}
Node tanh(Node x) {
  return make_op(OpKind::Tanh, {x});
}

namespace {
Node scalar_like(Node n, float v) {
  if (!n.valid()) throw GraphError("operator: invalid node");
  return detail::graph_of(n)->add([&] {
    NodeRec r;
    r.op = OpKind::Constant;
    r.f32_values = std::make_shared<const std::vector<float>>(std::vector<float>{v});
    return r;
  }());
}
}  // namespace

Node operator+(Node a, Node b) {
  return add(a, b);
}
Node operator-(Node a, Node b) {
  return sub(a, b);
}
Node operator*(Node a, Node b) {
  return mul(a, b);
}
Node operator/(Node a, Node b) {
  return div(a, b);
}
Node operator-(Node x) {
  return neg(x);
}
Node operator+(Node a, float b) {
  return add(a, scalar_like(a, b));
}
Node operator+(float a, Node b) {
  return add(scalar_like(b, a), b);
}
Node operator-(Node a, float b) {
  return sub(a, scalar_like(a, b));
}
Node operator-(float a, Node b) {
  return sub(scalar_like(b, a), b);
}
Node operator*(Node a, float b) {
  return scale(a, b);
}
Node operator*(float a, Node b) {
  return scale(b, a);
}
Node operator/(Node a, float b) {
  return div(a, scalar_like(a, b));
}
Node operator/(float a, Node b) {
  return div(scalar_like(b, a), b);
}

Node gelu(Node x) {
  return detail::make_op(detail::OpKind::Gelu, {x});
}
Node abs(Node x) {
  return detail::make_op(detail::OpKind::Abs, {x});
}
Node erf(Node x) {
  return detail::make_op(detail::OpKind::Erf, {x});
}
Node sin(Node x) {
  return detail::make_op(detail::OpKind::Sin, {x});
}
Node cos(Node x) {
  return detail::make_op(detail::OpKind::Cos, {x});
}
Node tan(Node x) {
  return detail::make_op(detail::OpKind::Tan, {x});
}
Node asin(Node x) {
  return detail::make_op(detail::OpKind::Asin, {x});
}
Node acos(Node x) {
  return detail::make_op(detail::OpKind::Acos, {x});
}
Node atan(Node x) {
  return detail::make_op(detail::OpKind::Atan, {x});
}
Node sinh(Node x) {
  return detail::make_op(detail::OpKind::Sinh, {x});
}
Node cosh(Node x) {
  return detail::make_op(detail::OpKind::Cosh, {x});
}
Node asinh(Node x) {
  return detail::make_op(detail::OpKind::Asinh, {x});
}
Node acosh(Node x) {
  return detail::make_op(detail::OpKind::Acosh, {x});
}
Node atanh(Node x) {
  return detail::make_op(detail::OpKind::Atanh, {x});
}
Node round(Node x) {
  return detail::make_op(detail::OpKind::Round, {x});
}
Node to_float16(Node x) {
  return detail::make_op(detail::OpKind::ToFloat16, {x});
}
Node to_bfloat16(Node x) {
  return detail::make_op(detail::OpKind::ToBfloat16, {x});
}
Node mod(Node a, Node b) {
  return detail::make_op(detail::OpKind::Mod, {a, b});
}
Node fmod(Node a, Node b) {
  return detail::make_op(detail::OpKind::FMod, {a, b});
}
Node fmod(Node a, float b) {
  return fmod(a, detail::scalar_constant(*detail::graph_of(a), b));
}
Node leaky_relu(Node x, float alpha) {
  detail::Attrs at;
  at.set(detail::LeakySlope{alpha});
  return detail::make_op(detail::OpKind::LeakyRelu, {x}, at);
}
Node clip(Node x, float lo, float hi) {
  detail::Attrs at;
  at.set(detail::ClipRange{lo, hi});
  return detail::make_op(detail::OpKind::Clip, {x}, at);
}
Node pow(Node a, Node b) {
  return detail::make_op(detail::OpKind::Pow, {a, b});
}
Node maximum(Node a, Node b) {
  return detail::make_op(detail::OpKind::Maximum, {a, b});
}
Node minimum(Node a, Node b) {
  return detail::make_op(detail::OpKind::Minimum, {a, b});
}
Node where(Node cond, Node a, Node b) {
  return detail::make_op(detail::OpKind::Where, {cond, a, b});
}
Node equal(Node a, Node b) {
  return detail::make_op(detail::OpKind::Equal, {a, b});
}
Node less(Node a, Node b) {
  return detail::make_op(detail::OpKind::Less, {a, b});
}
Node less_equal(Node a, Node b) {
  return detail::make_op(detail::OpKind::LessEqual, {a, b});
}
Node greater(Node a, Node b) {
  return detail::make_op(detail::OpKind::Greater, {a, b});
}
Node greater_equal(Node a, Node b) {
  return detail::make_op(detail::OpKind::GreaterEqual, {a, b});
}
Node logical_and(Node a, Node b) {
  return detail::make_op(detail::OpKind::LogicalAnd, {a, b});
}
Node logical_or(Node a, Node b) {
  return detail::make_op(detail::OpKind::LogicalOr, {a, b});
}
Node logical_xor(Node a, Node b) {
  return detail::make_op(detail::OpKind::LogicalXor, {a, b});
}
Node logical_not(Node x) {
  // x == 0: one kernel, exact for every int32 (no new op for what a comparison does)
  detail::check_same_graph(detail::graph_of(x), x, "logical_not");
  detail::NodeRec zero;
  zero.op = detail::OpKind::Constant;
  zero.dtype = DType::i32;
  zero.i32_values = std::make_shared<const std::vector<std::int32_t>>(1, 0);
  return equal(x, detail::graph_of(x)->add(std::move(zero)));
}
Node cast(Node x, DType to) {
  detail::Attrs at;
  at.set(detail::TargetType{to});
  return detail::make_op(detail::OpKind::Cast, {x}, at);
}

// The builders of the rows declared alone (Node name(Node x), Node name(Node a, Node b)),
// generated from them.
#include "compiler/row_op_builders.inc"

}  // namespace hetgraph
