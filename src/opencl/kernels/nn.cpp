// SPDX-License-Identifier: Apache-2.0
// Softmax, log-softmax, cross-entropy and their gradients, and dropout, on OpenCL
// (kernels/nn.cl). Long
// contiguous lines get a work-group each (*_rows); short or strided lines a work-item each.
#include "compiler/dropout_mask.hpp"
#include "compiler/geometry.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

// Lines at least this long get a work-group each when they are contiguous.
constexpr std::int64_t kRowsFrom = 64;

// Work-groups of a power-of-two size (at most the line length) take one line at a time.
Launch line_groups(const OpArgs& a, Kernel k, std::int64_t n) {
  const std::size_t L = pow2_group(a.device, k.get(), static_cast<std::size_t>(n));
  return launch_groups(a.device, std::move(k), L);
}

std::unique_ptr<ClOp> make_softmax(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.in_shape(0), a.node.attrs.axis);
  const bool grad = a.node.op == OpKind::SoftmaxGrad || a.node.op == OpKind::LogSoftmaxGrad;
  const cl_int log_out =
      a.node.op == OpKind::LogSoftmax || a.node.op == OpKind::LogSoftmaxGrad ? 1 : 0;
  const cl_program prog = a.program("nn");
  const std::int64_t lines = g.outer * g.inner;
  if (g.inner == 1 && g.n >= kRowsFrom) {
    Kernel k = grad ? make_kernel(prog, "softmax_grad_rows", a.in[0], a.in[1], a.out, to_int(lines),
                                  to_int(g.n), log_out)
                    : make_kernel(prog, "softmax_rows", a.in[0], a.out, to_int(lines), to_int(g.n),
                                  log_out);
    return make_seq(line_groups(a, std::move(k), g.n));
  }
  Kernel k = grad ? make_kernel(prog, "softmax_grad_lines", a.in[0], a.in[1], a.out, to_int(lines),
                                to_int(g.n), to_int(g.inner), log_out)
                  : make_kernel(prog, "softmax_lines", a.in[0], a.out, to_int(lines), to_int(g.n),
                                to_int(g.inner), log_out);
  return make_seq(launch_1d(a.device, std::move(k)));
}

std::unique_ptr<ClOp> make_xent(const OpArgs& a) {
  const std::int64_t classes = a.in_shape(0).dim(-1);
  const std::int64_t rows = a.in_shape(0).numel() / classes;
  const cl_program prog = a.program("nn");
  if (a.in_types[1].dtype == DType::i32) {
    Kernel k = make_kernel(prog, "xent_ids", a.in[0], a.in[1], a.out, to_int(rows), to_int(classes),
                           a.status, cl_int{a.status_slot});
    return make_seq(launch_1d(a.device, std::move(k)));
  }
  if (classes >= kRowsFrom) {
    Kernel k =
        make_kernel(prog, "xent_rows", a.in[0], a.in[1], a.out, to_int(rows), to_int(classes));
    return make_seq(line_groups(a, std::move(k), classes));
  }
  Kernel k =
      make_kernel(prog, "xent_lines", a.in[0], a.in[1], a.out, to_int(rows), to_int(classes));
  return make_seq(launch_1d(a.device, std::move(k)));
}

std::unique_ptr<ClOp> make_xent_grad(const OpArgs& a) {
  const std::int64_t classes = a.in_shape(1).dim(-1);
  const std::int64_t rows = a.in_shape(1).numel() / classes;
  const cl_int fused = a.node.op == OpKind::SoftmaxXentGrad ? 1 : 0;
  const cl_program prog = a.program("nn");
  Kernel k =
      a.in_types[2].dtype == DType::i32
          ? make_kernel(prog, "xent_grad_ids", a.in[0], a.in[1], a.in[2], a.out, to_int(rows),
                        to_int(classes), fused, a.status, cl_int{a.status_slot})
          : make_kernel(prog, "xent_grad", a.in[0], a.in[1], a.in[2], a.out, to_int(rows),
                        to_int(classes), fused);
  return make_seq(launch_1d(a.device, std::move(k)));
}

std::unique_ptr<ClOp> make_dropout(const OpArgs& a) {
  const auto& m = a.node.attrs.get<DropoutMask>();
  Kernel k = make_kernel(a.program("nn"), "dropout", a.in[0], a.in[1], a.out,
                         to_int(a.out_shape().numel()), cl_ulong{m.seed},
                         cl_uint{dropout::threshold(m.p)}, dropout::scale(m.p));
  return make_seq(launch_1d(a.device, std::move(k)));
}

// layer_norm over the last axis: a work-item per row (the statistics in one item, in its
// order, whatever the device's groups).
std::unique_ptr<ClOp> make_layer_norm(const OpArgs& a) {
  const std::int64_t n = a.in_shape(0).dim(-1);
  const std::int64_t rows = a.in_shape(0).numel() / n;
  Kernel k = make_kernel(a.program("nn"), "layer_norm_lines", a.in[0], a.in[1], a.in[2], a.out,
                         to_int(rows), to_int(n), a.node.attrs.get<LayerNormEps>().eps);
  return make_seq(launch_1d(a.device, std::move(k)));
}

// lstm_cell / lstm_hidden: a work-item per state element.
std::unique_ptr<ClOp> make_lstm(const OpArgs& a) {
  const Shape out = a.out_shape();
  const LstmGates k = a.node.attrs.get<LstmGates>();
  const cl_int rows = to_int(out.dim(0)), h = to_int(out.dim(1));
  if (a.node.op == OpKind::LstmHidden)
    return make_seq(launch_1d(a.device, make_kernel(a.program("nn"), "lstm_hidden", a.in[0],
                                                    a.in[1], a.out, rows, h, cl_int{k.o})));
  const bool prev = a.in.size() > 1;
  Kernel kern = make_kernel(a.program("nn"), "lstm_cell", a.in[0], prev ? a.in[1] : a.in[0], a.out,
                            rows, h, cl_int{k.i}, cl_int{k.f}, cl_int{k.g}, cl_int{prev ? 1 : 0});
  return make_seq(launch_1d(a.device, std::move(kern)));
}

// gru_hidden: a work-item per state element.
std::unique_ptr<ClOp> make_gru(const OpArgs& a) {
  const Shape out = a.out_shape();
  const GruGates k = a.node.attrs.get<GruGates>();
  return make_seq(launch_1d(
      a.device,
      make_kernel(a.program("nn"), "gru_hidden", a.in[0], a.in[1], a.in[2], a.out,
                  to_int(out.dim(0)), to_int(out.dim(1)), cl_int{k.z}, cl_int{k.r}, cl_int{k.h})));
}

// channel_affine: a work-item per element.
std::unique_ptr<ClOp> make_channel_affine(const OpArgs& a) {
  const Shape& x = a.in_shape(0);
  const std::int64_t c = x.dim(1);
  return make_seq(
      launch_1d(a.device, make_kernel(a.program("nn"), "channel_affine", a.in[0], a.in[1], a.in[2],
                                      a.out, to_int(x.numel()), to_int(c),
                                      to_int(x.numel() / std::max<std::int64_t>(1, x.dim(0) * c)),
                                      cl_int{a.node.attrs.get<ChannelAffineAct>().relu ? 1 : 0})));
}

// attention (fuse_attention): a work-item per query row (kernels/nn.cl, attention_rows).
std::unique_ptr<ClOp> make_attention(const OpArgs& a) {
  const AttentionSpec& s = a.node.attrs.get<AttentionSpec>();
  const bool masked = a.in.size() == 4;
  const AttentionGeom g = attention_geom(a.in_shape(0), a.in_shape(1), a.in_shape(2),
                                         masked ? &a.in_shape(3) : nullptr, s);
  const cl_int flags =
      (s.divide ? 1 : 0) | (s.scale_q ? 2 : 0) | (g.k_trans ? 4 : 0) | (masked ? 8 : 0);
  Kernel k = make_kernel(
      a.program("nn"), "attention_rows", a.in[0], a.in[1], a.in[2], masked ? a.in[3] : a.in[0],
      a.out, to_int(g.batch * g.tq), to_int(g.tq), to_int(g.tk), to_int(g.d), to_int(g.dv), s.scale,
      flags, to_int(g.heads), to_int(g.q_ld), to_int(g.k_ld), to_int(g.v_ld), to_int(g.y_ld),
      to_int(g.lead1), to_int(g.ms0), to_int(g.ms1), to_int(g.msq), to_int(g.msk));
  return make_seq(launch_1d(a.device, std::move(k)));
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  for (OpKind k :
       {OpKind::Softmax, OpKind::LogSoftmax, OpKind::SoftmaxGrad, OpKind::LogSoftmaxGrad}) {
    r.add(k, {"cl_softmax", nullptr, make_softmax});
  }
  r.add(OpKind::CrossEntropy, {"cl_xent", nullptr, make_xent});
  r.add(OpKind::CrossEntropyGrad, {"cl_xent_grad", nullptr, make_xent_grad});
  r.add(OpKind::SoftmaxXentGrad, {"cl_xent_grad", nullptr, make_xent_grad});
  r.add(OpKind::Dropout, {"cl_dropout", nullptr, make_dropout});
  r.add(OpKind::LayerNorm, {"cl_layer_norm", nullptr, make_layer_norm});
  r.add(OpKind::Attention, {"cl_attention", nullptr, make_attention});
  r.add(OpKind::LstmCell, {"cl_lstm_cell", nullptr, make_lstm});
  r.add(OpKind::LstmHidden, {"cl_lstm_hidden", nullptr, make_lstm});
  r.add(OpKind::GruHidden, {"cl_gru_hidden", nullptr, make_gru});
  r.add(OpKind::ChannelAffine, {"cl_channel_affine", nullptr, make_channel_affine});
}

}  // namespace hetgraph::detail::cl
