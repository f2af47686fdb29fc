// SPDX-License-Identifier: Apache-2.0
// Reductions on OpenCL (kernels/reduce.cl): sum, mean, max and product over one axis or all,
// sum_to (the reduction that undoes a broadcast), the gradients reduce_max_grad and expand,
// argmax / argmin, top_k and cumsum.
//
// Every reduction becomes kept dims x reduced dims (collapsed, at most 8 each). When the
// innermost input dim is reduced and long, a work-group takes each output (reduce_rows_*);
// otherwise a work-item does (reduce_cols_*), so consecutive work-items read consecutive
// addresses on both axes. Few outputs over a long range split the range into parts that a
// second kernel (reduce_parts_*) combines in order: enough parallel work, fixed results.
#include "compiler/geometry.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

struct ReduceGeom {
  cl_int8 kd{}, ks{}, rd{}, rs{};
  std::int64_t n_out = 1, R = 1;
  bool inner_reduced = false;  // the innermost non-unit input dim is reduced
};

// Splits the dims of `in` into kept and reduced (by `reduced[i]`), dropping size-1 dims and
// merging neighbours that stay contiguous.
ReduceGeom reduce_geom(const Shape& in, const std::array<bool, kGeomRank>& reduced) {
  struct D {
    std::int64_t d, s;
  };
  std::vector<D> kept, red;
  std::int64_t stride = 1;
  std::vector<std::int64_t> strides(static_cast<std::size_t>(in.rank()));
  for (int i = in.rank() - 1; i >= 0; --i) {
    strides[static_cast<std::size_t>(i)] = stride;
    stride *= in[i];
  }
  bool inner_known = false;
  ReduceGeom g;
  for (int i = in.rank() - 1; i >= 0; --i) {  // innermost first, to find inner_reduced
    if (in[i] == 1) continue;
    if (!inner_known) {
      g.inner_reduced = reduced[static_cast<std::size_t>(i)];
      inner_known = true;
    }
  }
  for (int i = 0; i < in.rank(); ++i) {
    if (in[i] == 1) continue;
    auto& list = reduced[static_cast<std::size_t>(i)] ? red : kept;
    const D cur{in[i], strides[static_cast<std::size_t>(i)]};
    if (!list.empty() && list.back().s == cur.d * cur.s) {
      list.back().d *= cur.d;
      list.back().s = cur.s;
    } else {
      list.push_back(cur);
    }
  }
  auto pack = [](const std::vector<D>& l, cl_int8& d, cl_int8& s, std::int64_t& total) {
    total = 1;
    for (int i = 0; i < kGeomRank; ++i) {
      const int j = i - (kGeomRank - static_cast<int>(l.size()));
      d.s[i] = j >= 0 ? to_int(l[static_cast<std::size_t>(j)].d) : 1;
      s.s[i] = j >= 0 ? to_int(l[static_cast<std::size_t>(j)].s) : 0;
      if (j >= 0) total *= l[static_cast<std::size_t>(j)].d;
    }
  };
  pack(kept, g.kd, g.ks, g.n_out);
  pack(red, g.rd, g.rs, g.R);
  return g;
}

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The launches of one reduction of `x` into `out` (sum or max, times `scale`).
std::unique_ptr<ClOp> reduction(const OpArgs& a, cl_mem x, const ReduceGeom& g, bool is_max,
                                float scale) {
  const cl_program prog = a.program("reduce");
  const std::string op = is_max ? "max" : "sum";
  const bool rows = g.inner_reduced && g.R >= 64;
  const std::string first = (rows ? "reduce_rows_" : "reduce_cols_") + op;
  Kernel probe(HG_CL_CREATE(clCreateKernel, prog, first.c_str()));
  const std::size_t L = rows ? pow2_group(a.device, probe.get(), static_cast<std::size_t>(g.R)) : 0;
  const std::int64_t n_out = std::max<std::int64_t>(g.n_out, 1);
  std::int64_t parts =
      rows
          ? std::clamp<std::int64_t>(
                ceil_div(64, n_out), 1,
                std::max<std::int64_t>(1, g.R / (4 * static_cast<std::int64_t>(L))))
          : std::clamp<std::int64_t>(ceil_div(4096, n_out), 1, std::max<std::int64_t>(1, g.R / 64));
  const std::int64_t chunk = std::max<std::int64_t>(1, ceil_div(g.R, parts));
  parts = std::max<std::int64_t>(1, ceil_div(g.R, chunk));

  std::vector<Mem> scratch;
  cl_mem dst = a.out;
  if (parts > 1) {
    scratch.emplace_back(HG_CL_CREATE(clCreateBuffer, a.device.context(), CL_MEM_READ_WRITE,
                                      static_cast<std::size_t>(n_out * parts) * 4, nullptr));
    dst = scratch.back().get();
  }
  const cl_float s1 = parts > 1 ? 1.0f : scale;
  set_args(probe.get(), x, dst, to_int(g.n_out), g.kd, g.ks, g.rd, g.rs, to_int(g.R), to_int(chunk),
           to_int(parts), s1);
  std::vector<Launch> launches;
  launches.push_back(rows ? launch_groups(a.device, std::move(probe), L)
                          : launch_1d(a.device, std::move(probe)));
  if (parts > 1) {
    Kernel fin = make_kernel(prog, ("reduce_parts_" + op).c_str(), dst, a.out, to_int(g.n_out),
                             to_int(parts), cl_float{scale});
    launches.push_back(launch_1d(a.device, std::move(fin)));
  }
  return std::make_unique<KernelSeq>(std::move(launches), std::move(scratch));
}

std::array<bool, kGeomRank> axis_mask(const Shape& s, int axis) {
  std::array<bool, kGeomRank> m{};
  for (int i = 0; i < s.rank(); ++i) {
    m[static_cast<std::size_t>(i)] = axis == kAllAxes || i == (axis < 0 ? axis + s.rank() : axis);
  }
  return m;
}

std::unique_ptr<ClOp> make_reduce(const OpArgs& a) {
  const Shape& s = a.in_shape(0);
  const ReduceGeom g = reduce_geom(s, axis_mask(s, a.node.attrs.axis));
  const bool mean = a.node.op == OpKind::ReduceMean;
  const float scale = mean ? 1.0f / static_cast<float>(g.R) : 1.0f;
  return reduction(a, a.in[0], g, a.node.op == OpKind::ReduceMax, scale);
}

// sum_to(g, like): reduce g over the dims `like` broadcasts along (right-aligned).
std::unique_ptr<ClOp> make_sum_to(const OpArgs& a) {
  const Shape& gs = a.in_shape(0);
  const Shape& like = a.out_shape();
  std::array<bool, kGeomRank> mask{};
  for (int i = 0; i < gs.rank(); ++i) {
    const int j = like.rank() - gs.rank() + i;
    const std::int64_t ld = j >= 0 ? like[j] : 1;
    mask[static_cast<std::size_t>(i)] = ld == 1 && gs[i] != 1;
  }
  return reduction(a, a.in[0], reduce_geom(gs, mask), false, 1.0f);
}

std::unique_ptr<ClOp> make_reduce_max_grad(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.in_shape(1), a.node.attrs.axis);
  const std::int64_t lines = g.outer * g.inner;
  Kernel k = make_kernel(a.program("reduce"), "reduce_max_grad", a.in[0], a.in[1], a.in[2], a.out,
                         to_int(lines), to_int(g.n), to_int(g.inner));
  return make_seq(launch_1d(a.device, std::move(k)));
}

// reduce_prod and its gradient: a work-item per line (kernels/reduce.cl).
std::unique_ptr<ClOp> make_reduce_prod(const OpArgs& a) {
  const bool grad = a.node.op == OpKind::ReduceProdGrad;
  const AxisGeom g = axis_geom(a.in_shape(grad ? 1 : 0), a.node.attrs.axis);
  const cl_int lines = to_int(g.outer * g.inner), n = to_int(g.n), inner = to_int(g.inner);
  const cl_program prog = a.program("reduce");
  Kernel k = grad ? make_kernel(prog, "reduce_prod_grad", a.in[0], a.in[1], a.out, lines, n, inner)
                  : make_kernel(prog, "reduce_prod_f32", a.in[0], a.out, lines, n, inner);
  return make_seq(launch_1d(a.device, std::move(k)));
}

std::unique_ptr<ClOp> make_cumsum(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.in_shape(0), a.node.attrs.axis);
  const ScanMode m = a.node.attrs.get<ScanMode>();
  const char* name = a.in_types[0].dtype == DType::i32 ? "cumsum_i32" : "cumsum_f32";
  Kernel k =
      make_kernel(a.program("reduce"), name, a.in[0], a.out, to_int(g.outer * g.inner), to_int(g.n),
                  to_int(g.inner), cl_int{m.exclusive ? 1 : 0}, cl_int{m.reverse ? 1 : 0});
  return make_seq(launch_1d(a.device, std::move(k)));
}

std::unique_ptr<ClOp> make_expand(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.out_shape(), a.node.attrs.axis);
  const cl_float s = a.node.attrs.mean ? 1.0f / static_cast<float>(g.n) : 1.0f;
  const std::int64_t total = a.out_shape().numel();
  Kernel k = make_kernel(a.program("reduce"), "expand_f32", a.in[0], a.out, to_int(total),
                         to_int(g.n), to_int(g.inner), s);
  return make_seq(launch_1d(a.device, std::move(k)));
}

// argmax / argmin: a work-group per line when the axis is contiguous and long (as reduce_rows_*),
// else a work-item per line.
std::unique_ptr<ClOp> make_arg_extreme(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.in_shape(0), a.node.attrs.axis);
  const std::string name = std::string(a.node.op == OpKind::ArgMax ? "argmax" : "argmin") +
                           (a.in_types[0].dtype == DType::i32 ? "_i32" : "_f32");
  const cl_program prog = a.program("reduce");
  const cl_int last = a.node.attrs.last_index ? 1 : 0;
  const std::int64_t lines = g.outer * g.inner;
  if (g.inner == 1 && g.n >= 64) {
    Kernel k = make_kernel(prog, ("arg_rows_" + name).c_str(), a.in[0], a.out, to_int(lines),
                           to_int(g.n), last);
    const std::size_t L = pow2_group(a.device, k.get(), static_cast<std::size_t>(g.n));
    return make_seq(launch_groups(a.device, std::move(k), L));
  }
  Kernel k = make_kernel(prog, ("arg_cols_" + name).c_str(), a.in[0], a.out, to_int(lines),
                         to_int(g.n), to_int(g.inner), last);
  return make_seq(launch_1d(a.device, std::move(k)));
}

// top_k: a work-item per input element, which writes its position if it ranks among the k.
std::unique_ptr<ClOp> make_top_k(const OpArgs& a) {
  const AxisGeom g = axis_geom(a.in_shape(0), a.node.attrs.axis);
  const TopKSpec& spec = a.node.attrs.get<TopKSpec>();
  const bool ints = a.in_types[0].dtype == DType::i32;
  Kernel k = make_kernel(a.program("reduce"), ints ? "top_k_i32" : "top_k_f32", a.in[0], a.out,
                         to_int(a.in_shape(0).numel()), to_int(g.n), to_int(g.inner),
                         to_int(spec.k), cl_int{spec.largest ? 1 : 0});
  return make_seq(launch_1d(a.device, std::move(k)));
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  for (OpKind k : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax})
    r.add(k, {"cl_reduce", nullptr, make_reduce});
  r.add(OpKind::SumTo, {"cl_reduce", nullptr, make_sum_to});
  r.add(OpKind::ArgMax, {"cl_argmax", nullptr, make_arg_extreme});
  r.add(OpKind::ArgMin, {"cl_argmin", nullptr, make_arg_extreme});
  r.add(OpKind::TopK, {"cl_top_k_rank", nullptr, make_top_k});
  r.add(OpKind::ReduceMaxGrad, {"cl_first_argmax", nullptr, make_reduce_max_grad});
  r.add(OpKind::Expand, {"cl_expand", nullptr, make_expand});
  r.add(OpKind::ReduceProd, {"cl_line_product", nullptr, make_reduce_prod});
  r.add(OpKind::CumSum, {"cl_line_scan", nullptr, make_cumsum});
  r.add(OpKind::ReduceProdGrad, {"cl_prefix_suffix", nullptr, make_reduce_prod});
}

}  // namespace hetgraph::detail::cl
