// SPDX-License-Identifier: Apache-2.0
// Embedding lookup and its scatter-add gradient, Gather, GatherElements and ScatterElements on
// OpenCL (kernels/embedding.cl). Indices are
// checked like int32 class ids: on the host before the run when they are fed, on the device
// (the node's status slot) when they are computed.
#include "compiler/geometry.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

// (table, ids) -> rows;  (g, ids, table-shape) -> dtable: zeros, then the scatter-add.
std::unique_ptr<ClOp> make_embedding(const OpArgs& a) {
  const bool grad = a.node.op == OpKind::EmbeddingGrad;
  const Shape& table = a.in_shape(grad ? 2 : 0);
  const std::int64_t count = a.in_shape(1).numel();
  Kernel k = make_kernel(a.program("embedding"), grad ? "embedding_grad" : "embedding_fwd", a.in[0],
                         a.in[1], a.out, to_int(count), to_int(table[0]), to_int(table[1]),
                         a.status, cl_int{a.status_slot});
  if (!grad) return make_seq(launch_1d(a.device, std::move(k)));
  std::vector<Launch> launches;
  launches.push_back(launch_1d(a.device, make_kernel(a.program("movement"), "fill_f32", a.out,
                                                     to_int(table.numel()), cl_float{0.0f})));
  launches.push_back(launch_1d(a.device, std::move(k)));
  return std::make_unique<KernelSeq>(std::move(launches));
}

std::unique_ptr<ClOp> make_check(const OpArgs& a) {
  Kernel k = make_kernel(a.program("embedding"), "check_indices", a.in[0], a.out,
                         to_int(a.in_shape(0).numel()), to_int(a.in_shape(1)[0]), a.status,
                         cl_int{a.status_slot});
  return make_seq(launch_1d(a.device, std::move(k)));
}

// gather (x, ids) and gather_grad (g, ids, x-shape): x as [outer, n, inner] along the axis.
std::unique_ptr<ClOp> make_gather(const OpArgs& a) {
  const bool grad = a.node.op == OpKind::GatherGrad;
  const AxisGeom g = axis_geom(a.in_shape(grad ? 2 : 0), a.node.attrs.axis);
  const std::int64_t count = a.in_shape(1).numel();
  const std::int64_t total = g.outer * count * g.inner;
  Kernel k = make_kernel(a.program("embedding"), grad ? "gather_grad" : "gather_fwd", a.in[0],
                         a.in[1], a.out, to_int(total), to_int(count), to_int(g.n), to_int(g.inner),
                         a.status, cl_int{a.status_slot});
  if (!grad) return make_seq(launch_1d(a.device, std::move(k)));
  std::vector<Launch> launches;
  launches.push_back(
      launch_1d(a.device, make_kernel(a.program("movement"), "fill_f32", a.out,
                                      to_int(a.out_shape().numel()), cl_float{0.0f})));
  launches.push_back(launch_1d(a.device, std::move(k)));
  return std::make_unique<KernelSeq>(std::move(launches));
}

// gather_elements (x, ids), gather_elements_grad (g, ids, x-shape) and scatter_elements
// (data, ids, updates): one launch over the result's elements (ElementsGeom's dims).
std::unique_ptr<ClOp> make_elements(const OpArgs& a) {
  const OpKind op = a.node.op;
  const bool grad = op == OpKind::GatherElementsGrad;
  const ElementsGeom g = elements_geom(a.in_shape(grad ? 2 : 0), a.in_shape(1), a.node.attrs.axis);
  const cl_int8 xd = to_int8(g.xd), id = to_int8(g.id);
  const cl_int total = to_int(a.out_shape().numel());
  cl_program prog = a.program("embedding");
  if (op == OpKind::GatherElements) {
    return make_seq(
        launch_1d(a.device, make_kernel(prog, "gather_elements_fwd", a.in[0], a.in[1], a.out, total,
                                        xd, id, cl_int{g.axis}, a.status, cl_int{a.status_slot})));
  }
  if (grad) {
    return make_seq(launch_1d(
        a.device, make_kernel(prog, "gather_elements_grad", a.in[0], a.in[1], a.out, total, xd, id,
                              cl_int{g.axis}, a.status, cl_int{a.status_slot})));
  }
  const bool ints = a.in_types[0].dtype == DType::i32;
  const auto red = static_cast<cl_int>(a.node.attrs.get<ScatterMode>().reduction);
  return make_seq(
      launch_1d(a.device, make_kernel(prog, ints ? "scatter_elements_i32" : "scatter_elements_f32",
                                      a.in[0], a.in[1], a.in[2], a.out, total, xd, id,
                                      cl_int{g.axis}, red, a.status, cl_int{a.status_slot})));
}

// embedding_update (v, g, ids) with beta: only the looked-up rows are written; out of place,
// v is copied over first.
std::unique_ptr<ClOp> make_update(const OpArgs& a) {
  const Shape& table = a.in_shape(0);
  const GradientBand gb = GradientBand::of(a.in_shape(1), a.node.attrs);
  std::vector<Launch> launches;
  if (a.in[0] != a.out) {
    const cl_int n = to_int(table.numel());
    launches.push_back(
        launch_1d(a.device, make_kernel(a.program("movement"), "copy_band", a.in[0], a.out, n, n,
                                        cl_int{1}, n, cl_int{0}, n, cl_int{0})));
  }
  launches.push_back(launch_1d(
      a.device, make_kernel(a.program("embedding"), "embedding_update", a.in[0], a.in[1], a.in[2],
                            a.out, to_int(a.in_shape(2).numel()), to_int(table[0]),
                            to_int(table[1]), to_int(gb.stride), to_int(gb.begin),
                            cl_float{a.node.attrs.get<EmbeddingStep>().scale}, a.status,
                            cl_int{a.status_slot})));
  return std::make_unique<KernelSeq>(std::move(launches));
}

// embedding_concat: one launch per piece, each writing its band of the one output (the concat
// buffer); lookup piece j records a bad index in status slot status_slot + j (the platform
// gives the node one slot per lookup, in order).
std::unique_ptr<ClOp> make_embedding_concat(const OpArgs& a) {
  const std::int64_t width = a.out_shape().dim(-1);
  const std::int64_t count = a.out_shape().numel() / std::max<std::int64_t>(width, 1);
  std::vector<Launch> launches;
  std::size_t k = 0;
  std::int64_t off = 0;
  int slot = a.status_slot;
  for (std::uint8_t lk : a.node.attrs.get<LookupPieces>().lookup) {
    if (lk != 0) {
      const Shape& table = a.in_shape(k);
      launches.push_back(launch_1d(
          a.device, make_kernel(a.program("embedding"), "embedding_band", a.in[k], a.in[k + 1],
                                a.out, to_int(count), to_int(table[0]), to_int(table[1]),
                                to_int(width), to_int(off), a.status, cl_int{slot++})));
      off += table[1];
      k += 2;
    } else {
      const std::int64_t dim = a.in_shape(k).dim(-1);
      launches.push_back(
          launch_1d(a.device, make_kernel(a.program("embedding"), "value_band", a.in[k], a.out,
                                          to_int(count), to_int(dim), to_int(width), to_int(off))));
      off += dim;
      k += 1;
    }
  }
  return std::make_unique<KernelSeq>(std::move(launches));
}

}  // namespace

void register_embedding_ops(OpRegistry& r) {
  r.add(OpKind::EmbeddingConcat, {"cl_gather_bands", nullptr, make_embedding_concat});
  r.add(OpKind::EmbeddingUpdate, {"cl_sparse_rows", nullptr, make_update});
  r.add(OpKind::CheckIndices, {"cl_check_indices", nullptr, make_check});
  r.add(OpKind::Gather, {"cl_gather", nullptr, make_gather});
  r.add(OpKind::GatherGrad, {"cl_gather_scatter_add", nullptr, make_gather});
  r.add(OpKind::GatherElements, {"cl_gather_elements", nullptr, make_elements});
  r.add(OpKind::GatherElementsGrad, {"cl_elements_scatter_add", nullptr, make_elements});
  r.add(OpKind::ScatterElements, {"cl_scatter_elements", nullptr, make_elements});
  r.add(OpKind::Embedding, {"cl_gather_rows", nullptr, make_embedding});
  r.add(OpKind::EmbeddingGrad, {"cl_row_scatter_add", nullptr, make_embedding});
}

}  // namespace hetgraph::detail::cl
