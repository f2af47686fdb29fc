// SPDX-License-Identifier: Apache-2.0
// Data movement on OpenCL (kernels/movement.cl): slice, concat and their gradients, transpose;
// and the structural ops, which are plain queue commands: the gradient seed fills ones, a
// copying assign copies the new value into its variable.
#include "compiler/geometry.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

std::int64_t norm(std::int64_t v, std::int64_t d) {
  return v < 0 ? v + d : v;
}

// copy_band launch: `len` positions along the axis per outer index, between [outer, src_d,
// inner] and [outer, dst_d, inner] layouts.
Launch band(const OpArgs& a, cl_mem src, std::int64_t src_d, std::int64_t src_off, cl_mem dst,
            std::int64_t dst_d, std::int64_t dst_off, std::int64_t len, std::int64_t outer,
            std::int64_t inner) {
  const std::int64_t total = outer * len * inner;
  Kernel k =
      make_kernel(a.program("movement"), "copy_band", src, dst, to_int(total), to_int(len),
                  to_int(inner), to_int(src_d), to_int(src_off), to_int(dst_d), to_int(dst_off));
  return launch_1d(a.device, std::move(k));
}

std::unique_ptr<ClOp> make_slice(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.in_shape(0), a.node.attrs.axis);
  const SliceRange& r = a.node.attrs.get_or_default<SliceRange>();
  const std::int64_t b = norm(r.begin, g.n), e = norm(r.end, g.n);
  return make_seq(band(a, a.in[0], g.n, b, a.out, e - b, 0, e - b, g.outer, g.inner));
}

std::unique_ptr<ClOp> make_slice_grad(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.out_shape(), a.node.attrs.axis);
  const SliceRange& r = a.node.attrs.get_or_default<SliceRange>();
  const std::int64_t b = norm(r.begin, g.n), e = norm(r.end, g.n);
  const std::int64_t total = a.out_shape().numel();
  Kernel k = make_kernel(a.program("movement"), "slice_grad", a.in[0], a.out, to_int(total),
                         to_int(g.n), to_int(g.inner), to_int(b), to_int(e));
  return make_seq(launch_1d(a.device, std::move(k)));
}

// slice_grad_n(like, g_1..g_n) with one SliceRanges range per gradient: zeros, then each
// gradient copied into its (disjoint) range along the axis.
std::unique_ptr<ClOp> make_slice_grad_n(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.out_shape(), a.node.attrs.axis);
  std::vector<Launch> launches;
  Kernel zero = make_kernel(a.program("movement"), "fill_f32", a.out, to_int(a.out_shape().numel()),
                            cl_float{0.0f});
  launches.push_back(launch_1d(a.device, std::move(zero)));
  const auto& ranges = a.node.attrs.get<SliceRanges>().ranges;
  for (std::size_t i = 1; i < a.in.size(); ++i) {
    const std::int64_t b = ranges[i - 1][0], e = ranges[i - 1][1];
    launches.push_back(band(a, a.in[i], e - b, 0, a.out, g.n, b, e - b, g.outer, g.inner));
  }
  return std::make_unique<KernelSeq>(std::move(launches));
}

// Each input's band is its own launch; they write disjoint parts of the output.
std::unique_ptr<ClOp> make_concat(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.out_shape(), a.node.attrs.axis);
  std::vector<Launch> launches;
  std::int64_t off = 0;
  for (std::size_t i = 0; i < a.in.size(); ++i) {
    const std::int64_t d = a.in_shape(i).dim(a.node.attrs.axis);
    launches.push_back(band(a, a.in[i], d, 0, a.out, g.n, off, d, g.outer, g.inner));
    off += d;
  }
  return std::make_unique<KernelSeq>(std::move(launches));
}

// concat_grad(g, x0..xn-1) with PieceIndex i: the band of g that x_i filled.
std::unique_ptr<ClOp> make_concat_grad(const OpArgs& a) {
  const int axis = a.node.attrs.axis;
  const auto index = static_cast<std::size_t>(a.node.attrs.get_or_default<PieceIndex>().piece);
  const AxisGeom g = axis_geom(a.in_shape(0), axis);
  std::int64_t off = 0;
  for (std::size_t i = 1; i <= index; ++i) off += a.in_shape(i).dim(axis);
  const std::int64_t len = a.out_shape().dim(axis);
  return make_seq(band(a, a.in[0], g.n, off, a.out, len, 0, len, g.outer, g.inner));
}

std::unique_ptr<ClOp> make_transpose(const OpArgs& a) {
  const Shape& in = a.in_shape(0);
  const TransposeGeom g = transpose_geom(in, a.node.attrs.get<Permutation>());
  const cl_int8 od = to_int8(g.od), is = to_int8(g.is);
  const std::int64_t total = in.numel();
  Kernel k =
      make_kernel(a.program("movement"), "transpose_n", a.in[0], a.out, to_int(total), od, is);
  return make_seq(launch_1d(a.device, std::move(k)));
}

// strided_slice (x) and its gradient (g, x-shape): zeros, then each element placed back.
std::unique_ptr<ClOp> make_strided(const OpArgs& a) {
  const bool grad = a.node.op == OpKind::StridedSliceGrad;
  StridedGeom g;
  strided_slice_geom(a.in_shape(grad ? 1 : 0), a.node.attrs.get<SliceSpec>(), g);
  const cl_int8 od = to_int8(g.od), is = to_int8(g.is);
  Kernel k = make_kernel(a.program("movement"), "strided_copy", a.in[0], a.out,
                         to_int(g.out.numel()), to_int(g.base), od, is, cl_int{grad ? 1 : 0});
  if (!grad) return make_seq(launch_1d(a.device, std::move(k)));
  std::vector<Launch> launches;
  launches.push_back(
      launch_1d(a.device, make_kernel(a.program("movement"), "fill_f32", a.out,
                                      to_int(a.out_shape().numel()), cl_float{0.0f})));
  launches.push_back(launch_1d(a.device, std::move(k)));
  return std::make_unique<KernelSeq>(std::move(launches));
}

// The gradient seed: ones, written by the queue's fill command.
class FillOp final : public ClOp {
 public:
  FillOp(cl_mem buf, std::size_t bytes, float value) : buf_(buf), bytes_(bytes), value_(value) {}
  Event enqueue(cl_command_queue q, std::span<const cl_event> wait, Event*) override {
    Event ev;
    HG_CL(clEnqueueFillBuffer(q, buf_, &value_, sizeof(value_), 0, bytes_,
                              static_cast<cl_uint>(wait.size()),
                              wait.empty() ? nullptr : wait.data(), ev.out()));
    return ev;
  }

 private:
  cl_mem buf_;
  std::size_t bytes_;
  float value_;
};

std::unique_ptr<ClOp> make_grad_seed(const OpArgs& a) {
  return std::make_unique<FillOp>(a.out, a.out_type.bytes(), 1.0f);
}

// A copying assign: the new value (input 1) into the variable's buffer.
class CopyOp final : public ClOp {
 public:
  CopyOp(cl_mem src, cl_mem dst, std::size_t bytes) : src_(src), dst_(dst), bytes_(bytes) {}
  Event enqueue(cl_command_queue q, std::span<const cl_event> wait, Event*) override {
    Event ev;
    if (src_ == dst_) {  // assign(v, v): nothing to copy
      HG_CL(clEnqueueMarkerWithWaitList(q, static_cast<cl_uint>(wait.size()),
                                        wait.empty() ? nullptr : wait.data(), ev.out()));
    } else {
      HG_CL(clEnqueueCopyBuffer(q, src_, dst_, 0, 0, bytes_, static_cast<cl_uint>(wait.size()),
                                wait.empty() ? nullptr : wait.data(), ev.out()));
    }
    return ev;
  }

 private:
  cl_mem src_, dst_;
  std::size_t bytes_;
};

std::unique_ptr<ClOp> make_assign_copy(const OpArgs& a) {
  return std::make_unique<CopyOp>(a.in[1], a.out, a.in_types[1].bytes());
}

}  // namespace

void register_movement_ops(OpRegistry& r) {
  r.add(OpKind::Slice, {"cl_copy_band", nullptr, make_slice});
  r.add(OpKind::SliceGrad, {"cl_slice_grad", nullptr, make_slice_grad});
  r.add(OpKind::SliceGradN, {"cl_place_pieces", nullptr, make_slice_grad_n});
  r.add(OpKind::Concat, {"cl_copy_band", nullptr, make_concat});
  r.add(OpKind::ConcatGrad, {"cl_copy_band", nullptr, make_concat_grad});
  r.add(OpKind::Transpose, {"cl_transpose", nullptr, make_transpose});
  r.add(OpKind::StridedSlice, {"cl_strided_copy", nullptr, make_strided});
  r.add(OpKind::StridedSliceGrad, {"cl_strided_place", nullptr, make_strided});
  r.add(OpKind::GradSeed, {"cl_fill", nullptr, make_grad_seed});
  r.add(OpKind::Assign, {"cl_copy", nullptr, make_assign_copy});
}

}  // namespace hetgraph::detail::cl
