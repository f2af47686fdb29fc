// SPDX-License-Identifier: Apache-2.0
// Convolution and pooling on OpenCL (kernels/conv.cl): direct loops with a work-item per output
// element, forward and backward; max pooling's gradient recomputes the argmax from x (there is
// no workspace to keep on this platform). Every kernel takes the same 16 geometry arguments.
#include "compiler/geometry.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

// buffers..., ints..., then the geometry (GEOM_ARGS in conv.cl)
// The geometry arguments (GEOM_ARGS in conv.cl) from argument i on.
void set_geometry(cl_kernel k, cl_uint i, const ImageGeom& g) {
  const Window2d& w = g.win;
  const std::int64_t geom[] = {g.n,
                               g.c,
                               g.h,
                               g.w,
                               g.oc,
                               g.oh,
                               g.ow,
                               w.kernel[0],
                               w.kernel[1],
                               w.stride[0],
                               w.stride[1],
                               w.pad_begin[0],
                               w.pad_begin[1],
                               w.dilation[0],
                               w.dilation[1],
                               w.count_include_pad,
                               w.pad_end[0],
                               w.pad_end[1],
                               w.groups};
  for (std::int64_t v : geom) {
    const cl_int c = to_int(v);
    set_arg(k, i++, sizeof(c), &c);
  }
}

// buffers..., ints..., then the geometry
Kernel window_kernel(const OpArgs& a, const char* name, std::initializer_list<cl_mem> buffers,
                     std::initializer_list<cl_int> ints, const ImageGeom& g) {
  Kernel k(HG_CL_CREATE(clCreateKernel, a.program("conv"), name));
  cl_uint i = 0;
  for (cl_mem m : buffers) set_arg(k.get(), i++, sizeof(m), &m);
  for (cl_int v : ints) set_arg(k.get(), i++, sizeof(v), &v);
  set_geometry(k.get(), i, g);
  return k;
}

std::unique_ptr<ClOp> make_conv(const OpArgs& a) {
  const bool bias = a.in.size() == 3;
  const ImageGeom g = conv_geom(a.in_shape(0), a.in_shape(1), a.node.attrs);
  // Without a bias the weights stand in for the unused buffer argument.
  return make_seq(launch_1d(
      a.device, window_kernel(a, "conv2d_fwd", {a.in[0], a.in[1], bias ? a.in[2] : a.in[1], a.out},
                              {bias ? 1 : 0}, g)));
}

// fused_conv2d(x, w[, b][, r]): the activation's code as fused_conv2d_fwd reads it.
cl_int activation_code(const ConvEpilogue& e) {
  if (!e.has_op) return 0;
  switch (e.op) {
    case OpKind::Relu:
      return 1;
    case OpKind::LeakyRelu:
      return 2;
    case OpKind::Clip:
      return 3;
    case OpKind::Silu:
      return 5;
    case OpKind::HardSwish:
      return 6;
    default:  // sigmoid (shape inference admits no other op)
      return 4;
  }
}

std::unique_ptr<ClOp> make_fused_conv(const OpArgs& a) {
  const ConvEpilogue& e = a.node.attrs.get<ConvEpilogue>();
  const ImageGeom g = conv_geom(a.in_shape(0), a.in_shape(1), a.node.attrs);
  // Unused buffer arguments get the weights.
  const cl_mem bias = e.bias ? a.in[2] : a.in[1];
  const cl_mem residual = e.accumulate ? a.in.back() : a.in[1];
  Kernel k(HG_CL_CREATE(clCreateKernel, a.program("conv"), "fused_conv2d_fwd"));
  const cl_mem buffers[] = {a.in[0], a.in[1], bias, residual, a.out};
  cl_uint i = 0;
  for (cl_mem m : buffers) set_arg(k.get(), i++, sizeof(m), &m);
  const cl_int ints[] = {e.bias ? 1 : 0, e.accumulate ? 1 : 0, activation_code(e)};
  for (cl_int v : ints) set_arg(k.get(), i++, sizeof(v), &v);
  for (float v : conv_op_params(e)) set_arg(k.get(), i++, sizeof(v), &v);
  set_geometry(k.get(), i, g);
  return make_seq(launch_1d(a.device, std::move(k)));
}

// (g, w, x-shape); conv_transpose2d (x, w[, b]) is the same with x in g's role, and a bias.
std::unique_ptr<ClOp> make_conv_bwd_data(const OpArgs& a) {
  const bool transpose = a.node.op == OpKind::ConvTranspose2d;
  const bool bias = transpose && a.in.size() == 3;
  const ImageGeom g = transpose ? conv_transpose_geom(a.in_shape(0), a.in_shape(1), a.node.attrs)
                                : conv_geom(a.in_shape(2), a.in_shape(1), a.node.attrs);
  // Without a bias the weights stand in for the unused buffer argument.
  return make_seq(launch_1d(
      a.device,
      window_kernel(a, "conv2d_bwd_data", {a.in[0], a.in[1], bias ? a.in[2] : a.in[1], a.out},
                    {bias ? 1 : 0}, g)));
}

std::unique_ptr<ClOp> make_conv_bwd_weights(const OpArgs& a) {  // (g, x, w-shape)
  const ImageGeom g = conv_geom(a.in_shape(1), a.in_shape(2), a.node.attrs);
  return make_seq(launch_1d(
      a.device, window_kernel(a, "conv2d_bwd_weights", {a.in[0], a.in[1], a.out}, {}, g)));
}

std::unique_ptr<ClOp> make_conv_bias_grad(const OpArgs& a) {
  const Shape& s = a.in_shape(0);
  Kernel k = make_kernel(a.program("conv"), "conv2d_bias_grad", a.in[0], a.out, to_int(s[0]),
                         to_int(s[1]), to_int(s[2] * s[3]));
  return make_seq(launch_1d(a.device, std::move(k)));
}

std::unique_ptr<ClOp> make_pool(const OpArgs& a) {
  const ImageGeom g = pool_geom(a.in_shape(0), a.node.attrs);
  const cl_int is_max = a.node.op == OpKind::MaxPool2d ? 1 : 0;
  return make_seq(launch_1d(a.device, window_kernel(a, "pool_fwd", {a.in[0], a.out}, {is_max}, g)));
}

// max: (g, x, y);  avg: (g, x-shape), with g standing in for the unread x.
std::unique_ptr<ClOp> make_pool_bwd(const OpArgs& a) {
  const ImageGeom g = pool_geom(a.in_shape(1), a.node.attrs);
  const bool max = a.node.op == OpKind::MaxPool2dGrad;
  return make_seq(launch_1d(
      a.device,
      window_kernel(a, "pool_bwd", {a.in[0], max ? a.in[1] : a.in[0], a.out}, {max ? 1 : 0}, g)));
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  r.add(OpKind::Conv2d, {"cl_conv_direct", nullptr, make_conv});
  r.add(OpKind::FusedConv2d, {"cl_conv_direct_fused", nullptr, make_fused_conv});
  r.add(OpKind::Conv2dGradInput, {"cl_conv_bwd_data", nullptr, make_conv_bwd_data});
  r.add(OpKind::ConvTranspose2d, {"cl_conv_bwd_data", nullptr, make_conv_bwd_data});
  r.add(OpKind::Conv2dGradWeight, {"cl_conv_bwd_weights", nullptr, make_conv_bwd_weights});
  r.add(OpKind::Conv2dGradBias, {"cl_channel_sums", nullptr, make_conv_bias_grad});
  r.add(OpKind::MaxPool2d, {"cl_pool", nullptr, make_pool});
  r.add(OpKind::AvgPool2d, {"cl_pool", nullptr, make_pool});
  r.add(OpKind::MaxPool2dGrad, {"cl_pool_bwd_recompute", nullptr, make_pool_bwd});
  r.add(OpKind::AvgPool2dGrad, {"cl_pool_bwd", nullptr, make_pool_bwd});
}

}  // namespace hetgraph::detail::cl
