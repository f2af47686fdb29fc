// SPDX-License-Identifier: Apache-2.0
// Elementwise ops on OpenCL (kernels/elementwise.cl): unary math, broadcasting binary ops and
// the activation gradients, one generic launch per kind for every op the op table marks
// elementwise. Binary ops use the shared collapsed broadcast plan; operands that both have the
// output's shape take the contiguous _ff kernel.
#include "compiler/geometry.hpp"
#include "opencl/ops.hpp"
#include "opencl/program_cache.hpp"

namespace hetgraph::detail::cl {

namespace {

// Whether kernels/elementwise.cl defines the kernel an elementwise op runs (looked up once).
bool has_kernel(OpKind k) {
  static const std::vector<char> present = [] {
    const std::string src = kernel_source("elementwise");
    std::vector<char> p(kNumOps, 0);
    for (int i = 0; i < kNumOps; ++i) {
      const OpDef& d = op_def(static_cast<OpKind>(i));
      const std::string name(d.name);
      if (d.elementwise == Elementwise::unary)
        p[static_cast<std::size_t>(i)] = src.find("UNARY(" + name + "_f32,") != std::string::npos;
      if (d.elementwise == Elementwise::binary)
        p[static_cast<std::size_t>(i)] = src.find("BINARY(" + name + ",") != std::string::npos;
      if (d.elementwise == Elementwise::ternary)
        p[static_cast<std::size_t>(i)] = src.find("TERNARY(" + name + ",") != std::string::npos;
    }
    return p;
  }();
  return present[static_cast<std::size_t>(k)] != 0;
}

const char* reject_missing(const OpArgs& a) {
  return has_kernel(a.node.op) ? nullptr : "kernels/elementwise.cl has no kernel for this op";
}

std::unique_ptr<ClOp> make_unary(const OpArgs& a) {
  const cl_int n = to_int(a.out_shape().numel());
  const std::string name = std::string(op_name(a.node.op)) + "_f32";
  const std::array<float, 2> ab = elementwise_params(a.node.attrs);
  Kernel k = make_kernel(a.program("elementwise"), name.c_str(), a.in[0], a.out, n, cl_float{ab[0]},
                         cl_float{ab[1]});
  return make_seq(launch_1d(a.device, std::move(k)));
}

cl_int8 right_aligned(const GeomDims& v, int rank, std::int64_t fill) {
  cl_int8 out;
  for (int i = 0; i < kGeomRank; ++i) {
    const int j = i - (kGeomRank - rank);
    out.s[i] = to_int(j >= 0 ? v[static_cast<std::size_t>(j)] : fill);
  }
  return out;
}

// The binary kernel `base`_ff (operands of the output's shape) or `base`_bc (broadcast).
std::unique_ptr<ClOp> launch_binary(const OpArgs& a, const std::string& base) {
  const cl_int n = to_int(a.out_shape().numel());
  const std::array<float, 2> ab = elementwise_params(a.node.attrs);
  const cl_float alpha = ab[0], beta = ab[1];
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

// add, sub, mul, maximum and minimum of int32 take their TYPED_BINARY line (shape inference
// gives the other binary ops floats only).
std::unique_ptr<ClOp> make_binary(const OpArgs& a) {
  const bool ints = a.in_types[0].dtype == DType::i32;
  return launch_binary(a, std::string(op_name(a.node.op)) + (ints ? "_int" : ""));
}

// Comparisons and logic: kernels/elementwise.cl's TYPED_BINARY lines, one per operand type.
std::unique_ptr<ClOp> make_predicate(const OpArgs& a) {
  const char* type = a.in_types[0].dtype == DType::f32 ? "_float" : "_int";
  return launch_binary(a, std::string(op_name(a.node.op)) + type);
}

// (c, a, b) -> out; `sel` is the maximum/minimum gradients' InputChoice (0 for where).
std::unique_ptr<ClOp> make_ternary(const OpArgs& a) {
  const std::string base(op_name(a.node.op));
  const cl_int n = to_int(a.out_shape().numel());
  const std::array<float, 2> ab = elementwise_params(a.node.attrs);
  const cl_float alpha = ab[0], beta = ab[1];
  const cl_int sel = to_int(a.node.attrs.get_or_default<InputChoice>().input);
  const cl_program prog = a.program("elementwise");
  Kernel k;
  if (a.in_shape(0) == a.out_shape() && a.in_shape(1) == a.out_shape() &&
      a.in_shape(2) == a.out_shape()) {
    k = make_kernel(prog, (base + "_ff").c_str(), a.in[0], a.in[1], a.in[2], a.out, n, alpha, beta,
                    sel);
  } else {
    const BcastN<3> p =
        make_bcast_n<3>({&a.in_shape(0), &a.in_shape(1), &a.in_shape(2)}, a.out_shape());
    k = make_kernel(prog, (base + "_bc").c_str(), a.in[0], a.in[1], a.in[2], a.out, n,
                    right_aligned(p.d, p.rank, 1), right_aligned(p.s[0], p.rank, 0),
                    right_aligned(p.s[1], p.rank, 0), right_aligned(p.s[2], p.rank, 0), alpha, beta,
                    sel);
  }
  return make_seq(launch_1d(a.device, std::move(k)));
}

std::unique_ptr<ClOp> make_cast(const OpArgs& a) {
  const DType from = a.in_types[0].dtype, to = a.out_type.dtype;
  const char* name =
      from == to ? "copy_u32" : (from == DType::f32 ? "cast_f32_i32" : "cast_i32_f32");
  Kernel k =
      make_kernel(a.program("elementwise"), name, a.in[0], a.out, to_int(a.out_shape().numel()));
  return make_seq(launch_1d(a.device, std::move(k)));
}

}  // namespace

// Every elementwise op of the op table runs through these two: its OpenCL kernel is its line
// in kernels/elementwise.cl.
void register_elementwise_ops(OpRegistry& r) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpDef& d = op_def(static_cast<OpKind>(i));
    if (d.elementwise == Elementwise::unary)
      r.add(d.kind, {"cl_unary", reject_missing, make_unary});
    if (d.elementwise == Elementwise::binary)
      r.add(d.kind, {"cl_broadcast", reject_missing, make_binary});
    if (d.elementwise == Elementwise::ternary)
      r.add(d.kind, {"cl_broadcast3", reject_missing, make_ternary});
  }
  r.add(OpKind::Cast, {"cl_cast", nullptr, make_cast});
  for (OpKind k :
       {OpKind::Equal, OpKind::Less, OpKind::LessEqual, OpKind::Greater, OpKind::GreaterEqual,
        OpKind::LogicalAnd, OpKind::LogicalOr, OpKind::LogicalXor}) {
    r.add(k, {"cl_predicate", nullptr, make_predicate});
  }
}

}  // namespace hetgraph::detail::cl
