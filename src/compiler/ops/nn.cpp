// SPDX-License-Identifier: Apache-2.0
// Softmax, log-softmax and cross-entropy, with their gradients. cross_entropy of a softmax
// over the last axis differentiates to the fused, stable (p * sum(y) - y) * g.
#include <algorithm>

#include "compiler/dropout_mask.hpp"
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "compiler/ops/builders.hpp"

namespace hetgraph::detail {

Shape reduced_shape(const InferCtx& c, const Shape& in, int axis, bool keepdims);

namespace {

TensorType infer_softmax(const InferCtx& c) {
  if (c.in[0].dtype != DType::f32) c.fail("softmax needs float input");
  if (c.in[0].shape.rank() == 0) c.fail("softmax needs rank >= 1");
  c.norm_axis(c.attrs.axis, c.in[0].shape.rank());
  return c.in[0];
}

TensorType infer_softmax_grad(const InferCtx& c) {
  if (c.in[0].shape != c.in[1].shape) c.fail("gradient and output shapes differ");
  c.norm_axis(c.attrs.axis, c.in[0].shape.rank());
  return c.in[1];
}

// Checks (probs, labels) and returns the per-row shape (probs without its last axis).
Shape check_xent(const InferCtx& c, const TensorType& p, const TensorType& y) {
  if (p.dtype != DType::f32) c.fail("cross_entropy needs float probabilities");
  if (p.shape.rank() == 0) c.fail("cross_entropy needs probabilities of rank >= 1");
  const Shape rows = reduced_shape(c, p.shape, -1, false);
  if (y.dtype == DType::f32) {
    if (y.shape != p.shape) {
      c.fail("float labels must have the shape of the probabilities " + p.shape.str() + ", got " +
             y.shape.str());
    }
  } else if (y.shape != rows) {
    c.fail("int32 labels must have shape " + rows.str() + " (one class id per row), got " +
           y.shape.str());
  }
  return rows;
}

TensorType infer_xent(const InferCtx& c) {
  return {check_xent(c, c.in[0], c.in[1]), DType::f32};
}

// (g, p, labels) -> gradient with respect to p (or to the softmax logits for the fused op).
TensorType infer_xent_grad(const InferCtx& c) {
  const Shape rows = check_xent(c, c.in[1], c.in[2]);
  if (c.in[0].shape != rows) {
    c.fail("cross_entropy gradient must have shape " + rows.str() + ", got " + c.in[0].shape.str());
  }
  return c.in[1];
}

// dropout (x, step): x's type; the step a float of one element (its bits key the mask).
TensorType infer_dropout(const InferCtx& c) {
  if (c.in[0].dtype != DType::f32) c.fail("dropout needs float input");
  if (c.in[1].dtype != DType::f32 || c.in[1].shape.numel() != 1) {
    c.fail("dropout's step must be a float scalar (one element), got " +
           std::string(dtype_name(c.in[1].dtype)) + " " + c.in[1].shape.str());
  }
  return c.in[0];
}

// y = x * m with the mask m fixed by (seed, step): dy/dx = m, the same dropout of g.
void grad_dropout(const GradCtx& c) {
  c.not_differentiable(1, "the step only selects the dropout mask");
  c.add(c.in[0], make_op(OpKind::Dropout, {c.grad, c.in[1]}, c.attrs));
}

void grad_softmax(const GradCtx& c) {
  const int axis = c.attrs.axis;
  c.add(c.in[0], with_axis(OpKind::SoftmaxGrad, {c.grad, c.node}, axis));
}
void grad_log_softmax(const GradCtx& c) {
  const int axis = c.attrs.axis;
  c.add(c.in[0], with_axis(OpKind::LogSoftmaxGrad, {c.grad, c.node}, axis));
}
void grad_xent(const GradCtx& c) {
  const GraphImpl& g = *detail::graph_of(c.node);
  const NodeRec& p = g.rec(c.in[0].id());
  if (p.op == OpKind::Softmax && p.attrs.axis == -1 && !c.wanted(c.in[0])) {
    // Skip the softmax: d/dz of -sum(y log softmax(z)) = softmax(z) * sum(y) - y.
    const Node z = c.in[0].input(0);
    c.add(z, make_op(OpKind::SoftmaxXentGrad, {c.grad, c.in[0], c.in[1]}));
  } else {
    c.add(c.in[0], make_op(OpKind::CrossEntropyGrad, {c.grad, c.in[0], c.in[1]}));
  }
  c.not_differentiable(1, "labels of cross_entropy are data, not differentiable");
}

// layer_norm(x, gamma, beta): x's type; gamma and beta hold one value per element of x's
// last axis.
TensorType infer_layer_norm(const InferCtx& c) {
  const TensorType& x = c.in[0];
  if (x.shape.rank() < 1) c.fail("layer_norm: x must have an axis to normalise");
  const Shape row{x.shape.dim(-1)};
  for (std::size_t k = 1; k <= 2; ++k) {
    if (c.in[k].shape != row)
      c.fail("layer_norm: " + c.input_label(k) + " must have shape [" +
             std::to_string(x.shape.dim(-1)) + "]");
  }
  return x;
}

// lstm_cell(G[, c_prev]) and lstm_hidden(G, c): G [B, 4H] float; the state [B, H].
TensorType infer_lstm(const InferCtx& c) {
  const TensorType& g = c.in[0];
  const std::string name(op_name(c.op));
  if (c.in.size() > 2) c.fail(name + ": takes the gates and at most one state");
  if (g.shape.rank() != 2 || g.shape.dim(1) % 4 != 0 || g.dtype != DType::f32)
    c.fail(name + ": the gates must be float [B, 4H], got " + g.shape.str());
  const TensorType state{Shape{g.shape.dim(0), g.shape.dim(1) / 4}, DType::f32};
  if (c.in.size() == 2 && c.in[1] != state)
    c.fail(name + ": " + c.input_label(1) + " must be float " + state.shape.str());
  if (c.op == OpKind::LstmHidden && c.in.size() != 2)
    c.fail(name + ": takes the gates and the cell state");
  const LstmGates k = c.attrs.get<LstmGates>();
  for (int q : {k.i, k.f, k.g, k.o}) {
    if (q < 0 || q > 3) c.fail(name + ": gate index " + std::to_string(q) + " outside 0..3");
  }
  return state;
}

// lstm_sequence(P, R, h0, c0) and gru_sequence(P, R, h0[, Rb]): P float [rows, gH] holding
// every step's B rows, R [gH, H], h0 (and c0) [B, H], Rb [gH]; g gates.
TensorType infer_sequence(const InferCtx& c) {
  const SequenceSpec& s = c.attrs.get<SequenceSpec>();
  const bool lstm = c.op == OpKind::LstmSequence;
  const std::string name(op_name(c.op));
  const std::int64_t gates = lstm ? 4 : 3;
  if (c.in.size() != (lstm ? 4u : s.bias ? 4u : 3u))
    c.fail(name + ": takes " +
           (lstm     ? "P, R, h0 and c0"
            : s.bias ? "P, R, h0 and Rb"
                     : "P, R and h0"));
  const TensorType &p = c.in[0], &r = c.in[1], &h0 = c.in[2];
  if (r.shape.rank() != 2 || r.shape.dim(0) != gates * r.shape.dim(1) || r.dtype != DType::f32)
    c.fail(name + ": R must be float [" + std::to_string(gates) + "H, H], got " + r.shape.str());
  const std::int64_t H = r.shape.dim(1), G = gates * H;
  if (h0.shape.rank() != 2 || h0.shape.dim(1) != H || h0.dtype != DType::f32 ||
      (lstm && c.in[3] != h0))
    c.fail(name + ": the initial state" + (lstm ? "s" : "") + " must be float [B, " +
           std::to_string(H) + "]");
  if (!lstm && s.bias && c.in[3] != TensorType{Shape{G}, DType::f32})
    c.fail(name + ": Rb must be float [" + std::to_string(G) + "]");
  if (p.shape.rank() != 2 || p.shape.dim(1) != G || p.dtype != DType::f32)
    c.fail(name + ": P must be float [rows, " + std::to_string(G) + "]");
  const std::int64_t B = h0.shape.dim(0);
  const std::int64_t last = s.first_row + (s.reverse ? -1 : 1) * (s.steps - 1) * B;
  if (s.steps < 1 || std::min(s.first_row, last) < 0 ||
      std::max(s.first_row, last) + B > p.shape.dim(0))
    c.fail(name + ": " + std::to_string(s.steps) + " steps from row " +
           std::to_string(s.first_row) + " do not fit P " + p.shape.str());
  for (int q : {s.lstm.i, s.lstm.f, s.lstm.g, s.lstm.o}) {
    if (lstm && (q < 0 || q > 3))
      c.fail(name + ": gate index " + std::to_string(q) + " outside 0..3");
  }
  for (int q : {s.gru.z, s.gru.r, s.gru.h}) {
    if (!lstm && (q < 0 || q > 2))
      c.fail(name + ": gate index " + std::to_string(q) + " outside 0..2");
  }
  return {Shape{(s.steps + (lstm ? 1 : 0)) * B, H}, DType::f32};
}

// Each step's product (2 B gH H flops) and its cells; R is read once per step.
Cost sequence_cost(std::span<const TensorType> in, const TensorType&, const Attrs& at, Cost base) {
  const auto steps = static_cast<double>(at.get<SequenceSpec>().steps);
  const auto H = static_cast<double>(in[1].shape.dim(1)),
             B = static_cast<double>(in[2].shape.dim(0));
  const double G = static_cast<double>(in[1].shape.dim(0));
  base.flops = steps * (2.0 * B * G * H + 20.0 * B * G);
  base.bytes += (steps - 1) * static_cast<double>(in[1].bytes());
  return base;
}

// gru_hidden(X, Rc, h_prev): X and Rc float [B, 3H]; the state [B, H].
TensorType infer_gru(const InferCtx& c) {
  const TensorType& x = c.in[0];
  if (x.shape.rank() != 2 || x.shape.dim(1) % 3 != 0 || x.dtype != DType::f32)
    c.fail("gru_hidden: the input projection must be float [B, 3H], got " + x.shape.str());
  if (c.in[1] != x) c.fail("gru_hidden: the recurrent projection must be float " + x.shape.str());
  const TensorType state{Shape{x.shape.dim(0), x.shape.dim(1) / 3}, DType::f32};
  if (c.in[2] != state) c.fail("gru_hidden: the previous state must be float " + state.shape.str());
  const GruGates k = c.attrs.get<GruGates>();
  for (int q : {k.z, k.r, k.h}) {
    if (q < 0 || q > 2) c.fail("gru_hidden: gate index " + std::to_string(q) + " outside 0..2");
  }
  return state;
}

// channel_affine(x, s, t): x's type; s and t hold one value per channel (axis 1 of x).
TensorType infer_channel_affine(const InferCtx& c) {
  const TensorType& x = c.in[0];
  if (x.shape.rank() < 2 || x.dtype != DType::f32)
    c.fail("channel_affine: x must be float with a channel axis, got " + x.shape.str());
  for (std::size_t k = 1; k <= 2; ++k) {
    if (c.in[k].dtype != DType::f32 || c.in[k].shape.numel() != x.shape.dim(1))
      c.fail("channel_affine: " + c.input_label(k) + " must hold one float per channel (" +
             std::to_string(x.shape.dim(1)) + ")");
  }
  return x;
}

// attention(q, kt, v[, mask]): q [.., Tq, d], kt [.., d, Tk] (k [.., Tk, d] with trans_k) and
// v [.., Tk, dv] float with the same leading dims, or with `heads` q [.., Tq, H, d], k [.., Tk,
// H, d] and v [.., Tk, H, dv]; a mask broadcasts to the scores (AttentionSpec::mask_dims:
// [.., Tq, Tk], as many elements as the scores). -> [.., Tq, dv] ([.., Tq, H, dv] with heads).
TensorType infer_attention(const InferCtx& c) {
  if (c.in.size() != 3 && c.in.size() != 4) c.fail("attention: takes q, kt, v and a mask");
  const AttentionSpec& s = c.attrs.get<AttentionSpec>();
  const Shape &q = c.in[0].shape, &k = c.in[1].shape, &v = c.in[2].shape;
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    if (c.in[i].dtype != DType::f32) c.fail("attention: " + c.input_label(i) + " must be float");
  }
  const int r = q.rank(), fixed = s.heads > 0 ? 3 : 2;  // the per-product axes
  const auto shapes = q.str() + ", " + k.str() + ", " + v.str();
  if (r < fixed || k.rank() != r || v.rank() != r)
    c.fail("attention: q, k and v must have one rank >= " + std::to_string(fixed) + ", got " +
           shapes);
  for (int a = 0; a + fixed < r; ++a) {
    if (k[a] != q[a] || v[a] != q[a])
      c.fail("attention: q, k and v must have the same leading dims, got " + shapes);
  }
  const bool k_rows = s.trans_k || s.heads > 0;  // k stored [Tk, (H,) d]
  const std::int64_t d = k_rows ? k.dim(-1) : k.dim(-2);
  const std::int64_t tk = k_rows ? k.dim(-fixed) : k.dim(-1);
  if (d != q.dim(-1) || v.dim(-fixed) != tk)
    c.fail("attention: q, k and v do not chain: " + shapes);
  if (s.heads > 0 && (q.dim(-2) != s.heads || k.dim(-2) != s.heads || v.dim(-2) != s.heads))
    c.fail("attention: q, k and v must have " + std::to_string(s.heads) + " heads, got " + shapes);
  const std::int64_t tq = q.dim(-fixed);
  if (c.in.size() == 4) {
    const Shape& m = c.in[3].shape;
    const std::size_t sr = s.mask_dims.size();
    const Shape scores = sr >= 2 ? Shape{std::span<const std::int64_t>(s.mask_dims)} : Shape{};
    const std::int64_t scores_numel = q.numel() / std::max<std::int64_t>(1, q.dim(-1)) * tk;
    if (sr < 2 || sr > 4 || scores.dim(-2) != tq || scores.dim(-1) != tk ||
        scores.numel() != scores_numel || m.rank() > scores.rank())
      c.fail("attention: the mask " + m.str() + " does not fit the scores " + scores.str());
    for (int a = 0; a < m.rank(); ++a) {
      const std::int64_t want = scores[a + scores.rank() - m.rank()];
      if (m[a] != 1 && m[a] != want)
        c.fail("attention: the mask " + m.str() + " does not broadcast to the scores " +
               scores.str());
    }
  } else if (!s.mask_dims.empty()) {
    c.fail("attention: mask dims given without a mask");
  }
  std::vector<std::int64_t> out(q.dims().begin(), q.dims().end());
  out.back() = v.dim(-1);
  return {Shape{std::span<const std::int64_t>(out)}, DType::f32};
}

// Multiply-adds of the two products, and the softmax's work per score.
Cost attention_cost(std::span<const TensorType> in, const TensorType& out, const Attrs& at,
                    Cost base) {
  const AttentionSpec& s = at.get<AttentionSpec>();
  const Shape& k = in[1].shape;
  const double tk = static_cast<double>(s.heads > 0 ? k.dim(-3)
                                        : s.trans_k ? k.dim(-2)
                                                    : k.dim(-1));
  const double d = static_cast<double>(in[0].shape.dim(-1));
  const double rows =
      static_cast<double>(out.shape.numel() / std::max<std::int64_t>(1, out.shape.dim(-1)));
  base.flops = rows * tk * (2.0 * d + 2.0 * static_cast<double>(out.shape.dim(-1)) + 16.0);
  return base;
}

}  // namespace

// NOLINTNEXTLINE(readability-function-size): a table: one row per op
void register_nn_ops(std::vector<OpDef>& t) {
  // Made by fuse_layer_norm after autodiff (no gradient rule: training graphs differentiate
  // the decomposed ops it replaces).
  t.push_back({.kind = OpKind::LayerNorm,
               .name = "layer_norm",
               .arity = 3,
               .inplace = 0b1u,
               .infer = infer_layer_norm,
               .flops_per_elem = 8});
  // Made by fuse_lstm_cells and fuse_gru_cells after autodiff, as layer_norm. The state may
  // be overwritten in place: each element is read before it is written.
  t.push_back({.kind = OpKind::LstmCell,
               .name = "lstm_cell",
               .arity = -1,
               .inplace = 0b10u,
               .infer = infer_lstm,
               .flops_per_elem = 40});
  t.push_back({.kind = OpKind::LstmHidden,
               .name = "lstm_hidden",
               .arity = 2,
               .inplace = 0b10u,
               .infer = infer_lstm,
               .flops_per_elem = 30});
  t.push_back({.kind = OpKind::GruHidden,
               .name = "gru_hidden",
               .arity = 3,
               .inplace = 0b100u,
               .infer = infer_gru,
               .flops_per_elem = 40});
  // Made by fuse_recurrent_sequences from the cells above, as layer_norm.
  t.push_back({.kind = OpKind::LstmSequence,
               .name = "lstm_sequence",
               .arity = 4,
               .infer = infer_sequence,
               .heavy = true,
               .cost = sequence_cost});
  t.push_back({.kind = OpKind::GruSequence,
               .name = "gru_sequence",
               .arity = -1,
               .infer = infer_sequence,
               .heavy = true,
               .cost = sequence_cost});
  t.push_back({.kind = OpKind::ChannelAffine,
               .name = "channel_affine",
               .arity = 3,
               .inplace = 0b1u,
               .infer = infer_channel_affine,
               .flops_per_elem = 3});
  // Made by fuse_attention after autodiff, as layer_norm.
  t.push_back({.kind = OpKind::Attention,
               .name = "attention",
               .arity = -1,
               .infer = infer_attention,
               .heavy = true,
               .cost = attention_cost});
  t.push_back({.kind = OpKind::Softmax,
               .name = "softmax",
               .arity = 1,
               .inplace = 0b1u,
               .infer = infer_softmax,
               .grad = grad_softmax,
               .flops_per_elem = 14,
               .onnx = {"Softmax", OnnxForm::Attr::axis}});
  t.push_back({.kind = OpKind::LogSoftmax,
               .name = "log_softmax",
               .arity = 1,
               .inplace = 0b1u,
               .infer = infer_softmax,
               .grad = grad_log_softmax,
               .flops_per_elem = 14,
               .onnx = {"LogSoftmax", OnnxForm::Attr::axis}});
  // int32 labels are class ids: each must lie in [0, classes).
  constexpr IndexInput kLabels{.input = 1, .bound_input = 0, .bound_dim = -1, .what = "class id"};
  constexpr IndexInput kGradLabels{
      .input = 2, .bound_input = 1, .bound_dim = -1, .what = "class id"};
  t.push_back({.kind = OpKind::CrossEntropy,
               .name = "cross_entropy",
               .arity = 2,
               .infer = infer_xent,
               .grad = grad_xent,
               .flops_per_elem = 12,
               .index = kLabels});
  t.push_back({.kind = OpKind::SoftmaxGrad,
               .name = "softmax_grad",
               .arity = 2,
               .inplace = 0b11u,
               .infer = infer_softmax_grad,
               .flops_per_elem = 4});
  t.push_back({.kind = OpKind::LogSoftmaxGrad,
               .name = "log_softmax_grad",
               .arity = 2,
               .inplace = 0b11u,
               .infer = infer_softmax_grad,
               .flops_per_elem = 12});
  t.push_back({.kind = OpKind::CrossEntropyGrad,
               .name = "cross_entropy_grad",
               .arity = 3,
               .inplace = 0b110u,
               .infer = infer_xent_grad,
               .flops_per_elem = 3,
               .index = kGradLabels});
  // The hash (SplitMix64's finaliser) is about 10 integer operations per element.
  t.push_back({.kind = OpKind::Dropout,
               .name = "dropout",
               .arity = 2,
               .inplace = 0b1u,
               .infer = infer_dropout,
               .grad = grad_dropout,
               .flops_per_elem = 10});
  t.push_back({.kind = OpKind::SoftmaxXentGrad,
               .name = "softmax_xent_grad",
               .arity = 3,
               .inplace = 0b110u,
               .infer = infer_xent_grad,
               .flops_per_elem = 3,
               .index = kGradLabels});
}

}  // namespace hetgraph::detail

namespace hetgraph {

using detail::Attrs;
using detail::make_op;
using detail::OpKind;

namespace {
Node axis_op(OpKind k, Node x, int axis) {
  Attrs at;
  at.axis = axis;
  return make_op(k, {x}, at);
}
}  // namespace

Node softmax(Node x, int axis) {
  return axis_op(OpKind::Softmax, x, axis);
}
Node log_softmax(Node x, int axis) {
  return axis_op(OpKind::LogSoftmax, x, axis);
}
Node cross_entropy(Node probs, Node labels) {
  return make_op(OpKind::CrossEntropy, {probs, labels});
}
Node dropout(Node x, Node step, float p, std::uint64_t seed) {
  detail::dropout::check_rate(p);
  Attrs at;
  at.set(detail::DropoutMask{p, seed});
  return make_op(OpKind::Dropout, {x, step}, at);
}

}  // namespace hetgraph
