// Elementwise ops on OpenCL (kernels/elementwise.cl): unary math, broadcasting binary ops and
// the activation gradients. Binary ops use the CPU's collapsed broadcast plan; operands that
// both have the output's shape take the contiguous _ff kernel.
#include "compiler/geometry.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

const char* unary_kernel(OpKind k) {
  switch (k) {
    case OpKind::Neg:
      return "neg_f32";
    case OpKind::Scale:
      return "scale_f32";
    case OpKind::Exp:
      return "exp_f32";
    case OpKind::Log:
      return "log_f32";
    case OpKind::Sqrt:
      return "sqrt_f32";
    case OpKind::Floor:
      return "floor_f32";
    case OpKind::Relu:
      return "relu_f32";
    case OpKind::Sigmoid:
      return "sigmoid_f32";
    case OpKind::Tanh:
      return "tanh_f32";
    default:
      return nullptr;
  }
}

const char* binary_kernel(OpKind k) {
  switch (k) {
    case OpKind::Add:
      return "add";
    case OpKind::Sub:
      return "sub";
    case OpKind::Mul:
      return "mul";
    case OpKind::Div:
      return "div";
    case OpKind::Axpby:
      return "axpby";
    case OpKind::ReluGrad:
      return "relu_grad";
    case OpKind::SigmoidGrad:
      return "sigmoid_grad";
    case OpKind::TanhGrad:
      return "tanh_grad";
    default:
      return nullptr;
  }
}

std::unique_ptr<ClOp> make_unary(const OpArgs& a) {
  const cl_int n = to_int(a.out_shape().numel());
  Kernel k = make_kernel(a.program("elementwise"), unary_kernel(a.node.op), a.in[0], a.out, n,
                         cl_float{a.node.attrs.alpha});
  return make_seq(launch_1d(a.device, std::move(k)));
}

cl_int4 right_aligned(const std::array<std::int64_t, 4>& v, int rank, std::int64_t fill) {
  cl_int4 out;
  for (int i = 0; i < 4; ++i) {
    const int j = i - (4 - rank);
    out.s[i] = to_int(j >= 0 ? v[static_cast<std::size_t>(j)] : fill);
  }
  return out;
}

std::unique_ptr<ClOp> make_binary(const OpArgs& a) {
  const std::string base = binary_kernel(a.node.op);
  const cl_int n = to_int(a.out_shape().numel());
  const cl_float alpha = a.node.attrs.alpha, beta = a.node.attrs.beta;
  const cl_program prog = a.program("elementwise");
  Kernel k;
  if (a.in_shape(0) == a.out_shape() && a.in_shape(1) == a.out_shape()) {
    k = make_kernel(prog, (base + "_ff").c_str(), a.in[0], a.in[1], a.out, n, alpha, beta);
  } else {
    const Bcast p = make_bcast(a.in_shape(0), a.in_shape(1), a.out_shape());
    k = make_kernel(prog, (base + "_bc").c_str(), a.in[0], a.in[1], a.out, n,
                    right_aligned(p.d, p.rank, 1), right_aligned(p.sa, p.rank, 0),
                    right_aligned(p.sb, p.rank, 0), alpha, beta);
  }
  return make_seq(launch_1d(a.device, std::move(k)));
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  for (OpKind k : {OpKind::Neg, OpKind::Scale, OpKind::Exp, OpKind::Log, OpKind::Sqrt, OpKind::Relu,
                   OpKind::Sigmoid, OpKind::Tanh, OpKind::Floor}) {
    r.add(k, {"cl_unary", nullptr, make_unary});
  }
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Axpby,
                   OpKind::ReluGrad, OpKind::SigmoidGrad, OpKind::TanhGrad}) {
    r.add(k, {"cl_broadcast", nullptr, make_binary});
  }
}

}  // namespace hetgraph::detail::cl
