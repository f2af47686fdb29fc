// SPDX-License-Identifier: Apache-2.0
// optimizer_update on OpenCL: one launch per variable (kernels/optimizer.cl), which writes the
// variable (the node's out, as for an assign) and its state buffers in place.
#include <cmath>

#include "compiler/geometry.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

// log2 of a beta, in double, as the kernel's float (beta 0 gives -inf: exp2 then gives 0).
cl_float log2_of(float beta) {
  return static_cast<cl_float>(std::log2(static_cast<double>(beta)));
}

std::unique_ptr<ClOp> make_update(const OpArgs& a) {
  const OptimizerRule& r = a.node.attrs.get<OptimizerRule>();
  // Buffers a rule does not use are bound to the variable: the kernel never touches them.
  auto input = [&](int k, bool used) { return used ? a.in[static_cast<std::size_t>(k)] : a.out; };
  const cl_mem step = input(3, r.uses_step());
  const cl_mem s0 = input(r.first_state(), r.states() > 0);
  const cl_mem s1 = input(r.first_state() + 1, r.states() > 1);
  Kernel k = make_kernel(a.program("optimizer"), "optimizer_update", a.out, a.in[1], a.in[2], step,
                         s0, s1, to_int(a.out_shape().numel()), cl_int{static_cast<int>(r.kind)},
                         cl_float{r.momentum}, cl_float{r.dampening}, cl_float{r.beta1},
                         cl_float{r.beta2}, log2_of(r.beta1), log2_of(r.beta2), cl_float{r.alpha},
                         cl_float{r.eps}, cl_float{r.weight_decay});
  return make_seq(launch_1d(a.device, std::move(k)));
}

// sparse_optimizer_update (v, rows, ids, lr[, sum]) of sgd or adagrad: writes v (the node's
// out) and the sum in place, only the looked-up rows.
std::unique_ptr<ClOp> make_sparse_update(const OpArgs& a) {
  const OptimizerRule& r = a.node.attrs.get<OptimizerRule>();
  const bool adagrad = r.kind == OptimizerRule::Kind::adagrad;
  const Shape& table = a.in_shape(0);
  const GradientBand gb = GradientBand::of(a.in_shape(1), a.node.attrs);
  Kernel k = make_kernel(a.program("optimizer"), "sparse_optimizer_update", a.out, a.in[1], a.in[2],
                         a.in[3], adagrad ? a.in[4] : a.out, to_int(a.in_shape(2).numel()),
                         to_int(table[0]), to_int(table[1]), to_int(gb.stride), to_int(gb.begin),
                         cl_int{adagrad ? 1 : 0}, cl_float{r.eps}, a.status, cl_int{a.status_slot});
  return make_seq(launch_1d(a.device, std::move(k)));
}

}  // namespace

void register_optimizer_ops(OpRegistry& r) {
  r.add(OpKind::OptimizerUpdate, {"cl_fused_update", nullptr, make_update});
  r.add(OpKind::SparseOptimizerUpdate, {"cl_sparse_rows", nullptr, make_sparse_update});
}

}  // namespace hetgraph::detail::cl
