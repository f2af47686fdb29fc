// SPDX-License-Identifier: Apache-2.0
// Embedding lookup (gather rows of a table) and its gradient (scatter-add of the incoming rows
// into a zero table), ONNX Gather, GatherElements and ScatterElements, with reference
// implementations.
//
// Indices are checked before any parallel work (an exception cannot leave an OpenMP region):
// one outside [0, rows) is a FeedError naming the node, never a read or write out of bounds.
//
// The scatter-add is deterministic without atomics: the table's rows are split among the
// team, and each thread scans every lookup in order, adding the ones that land in its rows.
// Each row's sum is thus accumulated in lookup order, whatever the team size; the scan costs
// one pass over the indices per thread, small next to the zeroing of the table.
//
// embedding_update (the fusion pass's sparse SGD step) touches only the looked-up rows: the
// lookups are grouped by row (a stable sort, so each group keeps lookup order), each row's
// gradient is summed in that order from zero, as the scatter-add does, and the row becomes
// v + beta * sum. Groups are disjoint rows, so any team gives the same result.
//
// Compiled once per code path (src/cpu/simd/code_path.hpp): the loops vectorise at its width.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "compiler/geometry.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/simd/code_path.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS {

namespace {

struct Lookup {
  std::int64_t count = 0;  // number of indices
  std::int64_t rows = 0;   // table rows
  std::int64_t dim = 0;    // row width
  Shape index_shape;
  std::string label;
};

Lookup lookup(const KernelArgs& a, std::size_t table, std::size_t indices) {
  const Shape& t = a.in_shape(table);
  return {a.in_shape(indices).numel(), t[0], t[1], a.in_shape(indices), a.node.index_label()};
}

// `table`: the indices pick a table's rows (said so); else (check_indices, whose node's name
// says what is checked) only the range.
void check_indices(const Lookup& l, const std::int32_t* idx, bool table = true) {
  for (std::int64_t i = 0; i < l.count; ++i) {
    if (idx[i] < 0 || idx[i] >= l.rows) {
      throw FeedError("node " + l.label + ": index " + std::to_string(idx[i]) + " at position " +
                      std::to_string(i) + " of the indices " + l.index_shape.str() +
                      " is outside " + (table ? "the table's rows " : "") + "[0, " +
                      std::to_string(l.rows) + ")");
    }
  }
}

// (table, indices) -> rows
std::unique_ptr<CpuKernel> make_gather(const KernelArgs& a) {
  const Lookup l = lookup(a, 0, 1);
  const float* table = a.in_f(0);
  const std::int32_t* idx = a.in_i(1);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    check_indices(l, idx);
    const auto row_bytes = static_cast<std::size_t>(l.dim) * sizeof(float);
    parallel_for(ctx, l.count, std::max<std::int64_t>(1, kParallelGrain / l.dim),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t i = b; i < e; ++i)
                     std::memcpy(out + i * l.dim, table + idx[i] * l.dim, row_bytes);
                 });
  });
}

std::unique_ptr<CpuKernel> make_gather_ref(const KernelArgs& a) {
  const Lookup l = lookup(a, 0, 1);
  const float* table = a.in_f(0);
  const std::int32_t* idx = a.in_i(1);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx&) {
    check_indices(l, idx);
    for (std::int64_t i = 0; i < l.count; ++i)
      for (std::int64_t d = 0; d < l.dim; ++d) out[i * l.dim + d] = table[idx[i] * l.dim + d];
  });
}

// (g, indices, table-shape) -> dtable
std::unique_ptr<CpuKernel> make_scatter_add(const KernelArgs& a) {
  const Lookup l = lookup(a, 2, 1);
  const float* g = a.in_f(0);
  const std::int32_t* idx = a.in_i(1);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    check_indices(l, idx);
    parallel_for(ctx, l.rows, std::max<std::int64_t>(1, 4 * kParallelGrain / l.dim),
                 [&](std::int64_t b, std::int64_t e) {
                   std::fill(out + b * l.dim, out + e * l.dim, 0.0f);
                   for (std::int64_t i = 0; i < l.count; ++i) {
                     const std::int64_t r = idx[i];
                     if (r < b || r >= e) continue;
                     float* o = out + r * l.dim;
                     const float* gi = g + i * l.dim;
#pragma omp simd
                     for (std::int64_t d = 0; d < l.dim; ++d) o[d] += gi[d];
                   }
                 });
  });
}

std::unique_ptr<CpuKernel> make_scatter_add_ref(const KernelArgs& a) {
  const Lookup l = lookup(a, 2, 1);
  const float* g = a.in_f(0);
  const std::int32_t* idx = a.in_i(1);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx&) {
    check_indices(l, idx);
    std::fill(out, out + l.rows * l.dim, 0.0f);
    for (std::int64_t i = 0; i < l.count; ++i)
      for (std::int64_t d = 0; d < l.dim; ++d) out[idx[i] * l.dim + d] += g[i * l.dim + d];
  });
}

// (v, g, indices) -> v + beta * scatter_add(g, indices): the output is v's buffer when the
// planner put the step in place (the usual case); otherwise v is copied over first.
template <bool Reference>
std::unique_ptr<CpuKernel> make_update(const KernelArgs& a) {
  const Lookup l = lookup(a, 0, 2);
  const float* v = a.in_f(0);
  const float* g = a.in_f(1);  // or the concat gradient holding its band (gb)
  const GradientBand gb = GradientBand::of(a.in_shape(1), a.node.attrs);
  const std::int32_t* idx = a.in_i(2);
  float* out = a.out_f();
  const float beta = a.node.attrs.get<EmbeddingStep>().scale;
  struct Scratch {
    std::vector<std::int32_t> order;   // lookup positions grouped by row, lookup order within
    std::vector<std::int64_t> starts;  // group boundaries in `order`
    std::vector<float> sums;           // one row-sized accumulator per thread
  };
  auto sc = std::make_shared<Scratch>();
  return make_kernel([=](const ExecCtx& ctx) {
    check_indices(l, idx);
    if (out != v) {
      parallel_for(ctx, l.rows * l.dim, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        std::memcpy(out + b, v + b, static_cast<std::size_t>(e - b) * sizeof(float));
      });
    }
    if constexpr (Reference) {  // each row at its first lookup: its lookups summed in order
      std::vector<float> sum(static_cast<std::size_t>(l.dim));
      std::vector<bool> done(static_cast<std::size_t>(l.rows), false);
      for (std::int64_t i = 0; i < l.count; ++i) {
        const std::int64_t r = idx[i];
        if (done[static_cast<std::size_t>(r)]) continue;
        done[static_cast<std::size_t>(r)] = true;
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (std::int64_t j = i; j < l.count; ++j) {
          if (idx[j] != r) continue;
          for (std::int64_t d = 0; d < l.dim; ++d)
            sum[static_cast<std::size_t>(d)] += g[j * gb.stride + gb.begin + d];
        }
        for (std::int64_t d = 0; d < l.dim; ++d)
          out[r * l.dim + d] = v[r * l.dim + d] + beta * sum[static_cast<std::size_t>(d)];
      }
      return;
    }
    std::vector<std::int32_t>& order = sc->order;
    order.resize(static_cast<std::size_t>(l.count));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t x, std::int32_t y) { return idx[x] < idx[y]; });
    std::vector<std::int64_t>& starts = sc->starts;
    starts.clear();
    for (std::int64_t k = 0; k < l.count; ++k) {
      if (k == 0 || idx[order[k]] != idx[order[k - 1]]) starts.push_back(k);
    }
    const auto groups = static_cast<std::int64_t>(starts.size());
    starts.push_back(l.count);
    sc->sums.resize(static_cast<std::size_t>(ctx.nthreads * l.dim));
    parallel_for(ctx, groups, std::max<std::int64_t>(1, kParallelGrain / (4 * l.dim)),
                 [&](std::int64_t b, std::int64_t e) {
                   float* sum = sc->sums.data() + omp_get_thread_num() * l.dim;
                   for (std::int64_t q = b; q < e; ++q) {
                     std::fill(sum, sum + l.dim, 0.0f);
                     for (std::int64_t k = starts[q]; k < starts[q + 1]; ++k) {
                       const float* gi = g + order[k] * gb.stride + gb.begin;
#pragma omp simd
                       for (std::int64_t d = 0; d < l.dim; ++d) sum[d] += gi[d];
                     }
                     const std::int64_t r = idx[order[starts[q]]];
                     const float* vr = v + r * l.dim;
                     float* o = out + r * l.dim;
#pragma omp simd
                     for (std::int64_t d = 0; d < l.dim; ++d) o[d] = vr[d] + beta * sum[d];
                   }
                 });
  });
}

// sparse_optimizer_update (v, g, indices, lr[, sum]) for sgd and adagrad: each looked-up row's
// gradient summed in lookup order from zero (as the scatter-add sums it), then the rule on that
// row as the dense optimizer_update computes it (float; double in the references): the result
// is the dense step's, bitwise. The fast kernel groups lookups by row with a stable sort; the
// reference sums each row at its first lookup.
template <bool Reference>
std::unique_ptr<CpuKernel> make_sparse_optimizer(const KernelArgs& a) {
  const Lookup l = lookup(a, 0, 2);
  const OptimizerRule r = a.node.attrs.get<OptimizerRule>();
  float* v = a.out_f();
  const float* g = a.in_f(1);  // or the concat gradient holding its band (gb)
  const GradientBand gb = GradientBand::of(a.in_shape(1), a.node.attrs);
  const std::int32_t* idx = a.in_i(2);
  const float* lr_in = a.in_f(3);
  float* sum_state = r.states() > 0 ? const_cast<float*>(a.in_f(4)) : nullptr;
  const bool adagrad = r.kind == OptimizerRule::Kind::adagrad;
  const float eps = r.eps;
  auto order = std::make_shared<std::vector<std::int32_t>>();
  return make_kernel([=](const ExecCtx&) {
    check_indices(l, idx);
    using T = std::conditional_t<Reference, double, float>;
    const T lr = static_cast<T>(*lr_in), zero = 0;
    std::vector<float> sum(static_cast<std::size_t>(l.dim));
    // Row q's step from its summed gradient (the dense kernel's expressions, wd = 0).
    auto step = [&](std::int64_t q) {
      float* vr = v + q * l.dim;
      if (!adagrad) {
        for (std::int64_t d = 0; d < l.dim; ++d) {
          const T x = vr[d];
          vr[d] = static_cast<float>(
              x - lr * (static_cast<T>(sum[static_cast<std::size_t>(d)]) + zero * x));
        }
        return;
      }
      float* sr = sum_state + q * l.dim;
      for (std::int64_t d = 0; d < l.dim; ++d) {
        const T x = vr[d];
        const T gd = static_cast<T>(sum[static_cast<std::size_t>(d)]) + zero * x;
        const T s = static_cast<T>(sr[d]) + gd * gd;
        sr[d] = static_cast<float>(s);
        vr[d] = static_cast<float>(x - lr * gd / (std::sqrt(s) + static_cast<T>(eps)));
      }
    };
    auto add = [&](std::int64_t i) {
      for (std::int64_t d = 0; d < l.dim; ++d)
        sum[static_cast<std::size_t>(d)] += g[i * gb.stride + gb.begin + d];
    };
    if constexpr (Reference) {
      std::vector<bool> done(static_cast<std::size_t>(l.rows), false);
      for (std::int64_t i = 0; i < l.count; ++i) {
        const std::int64_t q = idx[i];
        if (done[static_cast<std::size_t>(q)]) continue;
        done[static_cast<std::size_t>(q)] = true;
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (std::int64_t j = i; j < l.count; ++j)
          if (idx[j] == q) add(j);
        step(q);
      }
      return;
    }
    std::vector<std::int32_t>& o = *order;
    o.resize(static_cast<std::size_t>(l.count));
    std::iota(o.begin(), o.end(), 0);
    std::stable_sort(o.begin(), o.end(),
                     [&](std::int32_t x, std::int32_t y) { return idx[x] < idx[y]; });
    for (std::size_t k = 0; k < o.size();) {
      const std::int32_t q = idx[o[k]];
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (; k < o.size() && idx[o[k]] == q; ++k) add(o[k]);
      step(q);
    }
  });
}

// check_indices(indices, like): the indices against like's rows; nothing else (its output
// is never read: zero).
std::unique_ptr<CpuKernel> make_check(const KernelArgs& a) {
  const Lookup l = lookup(a, 1, 0);
  const std::int32_t* idx = a.in_i(0);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx&) {
    check_indices(l, idx, false);
    *out = 0.0f;
  });
}

// ---- gather (ONNX Gather): x viewed as [outer, n, inner], indices as `count` positions -------

struct GatherGeom {
  std::int64_t outer = 1, n = 1, inner = 1, count = 0;
  Shape index_shape;
  std::string label;
};

// x: the data (or, for the gradient, the shape it lends), i: the indices input.
GatherGeom gather_geom(const KernelArgs& a, std::size_t x, std::size_t i) {
  const AxisGeom g = axis_geom(a.in_shape(x), a.node.attrs.axis);
  return {g.outer, g.n, g.inner, a.in_shape(i).numel(), a.in_shape(i), a.node.index_label()};
}

// Every index in [-n, n), checked before any parallel work; negative ones count from the back.
// `axis_name`: "gathered" or "scattered".
void check_axis_indices(const std::int32_t* idx, std::int64_t count, std::int64_t n,
                        const Shape& index_shape, const std::string& label,
                        std::string_view axis_name) {
  for (std::int64_t i = 0; i < count; ++i) {
    if (idx[i] < -n || idx[i] >= n) {
      throw FeedError("node " + label + ": index " + std::to_string(idx[i]) + " at position " +
                      std::to_string(i) + " of the indices " + index_shape.str() + " is outside [" +
                      std::to_string(-n) + ", " + std::to_string(n) + "), the size of the " +
                      std::string(axis_name) + " axis");
    }
  }
}
void check_gather_indices(const GatherGeom& l, const std::int32_t* idx) {
  check_axis_indices(idx, l.count, l.n, l.index_shape, l.label, "gathered");
}

inline std::int64_t wrap(std::int32_t j, std::int64_t n) {
  return j < 0 ? j + n : j;
}

// out[o, k, :] = x[o, idx[k], :]: 32-bit words (float or int32 data).
std::unique_ptr<CpuKernel> make_gather_axis(const KernelArgs& a) {
  const GatherGeom l = gather_geom(a, 0, 1);
  const auto* x = static_cast<const std::uint32_t*>(a.in[0]);
  const std::int32_t* idx = a.in_i(1);
  auto* out = static_cast<std::uint32_t*>(a.out);
  return make_kernel([=](const ExecCtx& ctx) {
    check_gather_indices(l, idx);
    parallel_for(ctx, l.outer * l.count, std::max<std::int64_t>(1, kParallelGrain / l.inner),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t r = b; r < e; ++r) {
                     const std::int64_t o = r / l.count, j = wrap(idx[r % l.count], l.n);
                     const std::uint32_t* src = x + (o * l.n + j) * l.inner;
                     if (l.inner == 1)
                       out[r] = *src;
                     else
                       std::memcpy(out + r * l.inner, src, static_cast<std::size_t>(l.inner) * 4);
                   }
                 });
  });
}

std::unique_ptr<CpuKernel> make_gather_axis_ref(const KernelArgs& a) {
  const GatherGeom l = gather_geom(a, 0, 1);
  const auto* x = static_cast<const std::uint32_t*>(a.in[0]);
  const std::int32_t* idx = a.in_i(1);
  auto* out = static_cast<std::uint32_t*>(a.out);
  return make_kernel([=](const ExecCtx&) {
    check_gather_indices(l, idx);
    for (std::int64_t o = 0; o < l.outer; ++o)
      for (std::int64_t k = 0; k < l.count; ++k)
        for (std::int64_t i = 0; i < l.inner; ++i)
          out[(o * l.count + k) * l.inner + i] = x[(o * l.n + wrap(idx[k], l.n)) * l.inner + i];
  });
}

// (g, idx, x-shape) -> dx: dx[o, wrap(idx[k]), :] += g[o, k, :] into zeros. Rows of dx are split
// among the team; each thread scans the lookups in order and adds the ones landing in its
// rows, so every row's sum has lookup order whatever the team size (as embedding_grad).
std::unique_ptr<CpuKernel> make_gather_grad(const KernelArgs& a) {
  const GatherGeom l = gather_geom(a, 2, 1);
  const float* g = a.in_f(0);
  const std::int32_t* idx = a.in_i(1);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    check_gather_indices(l, idx);
    parallel_for(ctx, l.outer * l.n, std::max<std::int64_t>(1, 4 * kParallelGrain / l.inner),
                 [&](std::int64_t b, std::int64_t e) {
                   std::fill(out + b * l.inner, out + e * l.inner, 0.0f);
                   for (std::int64_t o = b / l.n; o <= (e - 1) / l.n; ++o) {
                     for (std::int64_t k = 0; k < l.count; ++k) {
                       const std::int64_t row = o * l.n + wrap(idx[k], l.n);
                       if (row < b || row >= e) continue;
                       float* dst = out + row * l.inner;
                       const float* src = g + (o * l.count + k) * l.inner;
#pragma omp simd
                       for (std::int64_t i = 0; i < l.inner; ++i) dst[i] += src[i];
                     }
                   }
                 });
  });
}

std::unique_ptr<CpuKernel> make_gather_grad_ref(const KernelArgs& a) {
  const GatherGeom l = gather_geom(a, 2, 1);
  const float* g = a.in_f(0);
  const std::int32_t* idx = a.in_i(1);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx&) {
    check_gather_indices(l, idx);
    std::fill(out, out + l.outer * l.n * l.inner, 0.0f);
    for (std::int64_t o = 0; o < l.outer; ++o)
      for (std::int64_t k = 0; k < l.count; ++k)
        for (std::int64_t i = 0; i < l.inner; ++i)
          out[(o * l.n + wrap(idx[k], l.n)) * l.inner + i] += g[(o * l.count + k) * l.inner + i];
  });
}

// ---- gather_elements / scatter_elements: one index per element (ElementsGeom) --------------
// Every index of a line reaches only the data line of the same coordinates, so lines split
// among the team write disjoint elements; within a line, indices apply in order. That is
// row-major order for any element's writers (they share a line), so every team size, and the
// references' plain row-major loops, give the same bits (a scatter-add sums in index order,
// and with reduction none the last index in row-major order wins).

struct ElementsKernelGeom {
  ElementsGeom g;
  Shape index_shape;
  std::string label;
  std::string_view axis_name;  // "gathered" or "scattered"
};

// x: the data (or the shape it lends), i: the indices.
ElementsKernelGeom elements_kernel_geom(const KernelArgs& a, std::size_t x, std::size_t i) {
  const bool scatter = a.node.op == OpKind::ScatterElements;
  return {elements_geom(a.in_shape(x), a.in_shape(i), a.node.attrs.axis), a.in_shape(i),
          a.node.index_label(), scatter ? "scattered" : "gathered"};
}

void check_elements_indices(const ElementsKernelGeom& l, const std::int32_t* idx) {
  check_axis_indices(idx, l.g.count(), l.g.n(), l.index_shape, l.label, l.axis_name);
}

// The data offset of index position p (row-major in the indices): the references' geometry.
std::int64_t element_offset(const ElementsGeom& g, std::int64_t p, std::int32_t j) {
  std::int64_t off = 0;
  for (int d = kGeomRank - 1; d >= 0; --d) {
    const auto u = static_cast<std::size_t>(d);
    const std::int64_t c = d == g.axis ? wrap(j, g.n()) : p % g.id[u];
    p /= g.id[u];
    off += c * ElementsGeom::stride(g.xd, d);
  }
  return off;
}

// Lines per parallel chunk: about kParallelGrain elements.
std::int64_t line_grain(const ElementsGeom& g) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(g.m(), 1));
}

// out[p] = x[p with p[axis] = idx[p]]: 32-bit words (float or int32 data).
std::unique_ptr<CpuKernel> make_gather_elements(const KernelArgs& a) {
  const ElementsKernelGeom l = elements_kernel_geom(a, 0, 1);
  const auto* x = static_cast<const std::uint32_t*>(a.in[0]);
  const std::int32_t* idx = a.in_i(1);
  auto* out = static_cast<std::uint32_t*>(a.out);
  return make_kernel([=](const ExecCtx& ctx) {
    check_elements_indices(l, idx);
    const ElementsGeom& g = l.g;
    const std::int64_t m = g.m(), n = g.n(), xs = g.x_step(), is = g.i_step();
    parallel_for(ctx, g.lines(), line_grain(g), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const auto [xo, io] = g.line(r);
        for (std::int64_t k = 0; k < m; ++k) {
          const std::int64_t p = io + k * is;
          out[p] = x[xo + wrap(idx[p], n) * xs];
        }
      }
    });
  });
}

std::unique_ptr<CpuKernel> make_gather_elements_ref(const KernelArgs& a) {
  const ElementsKernelGeom l = elements_kernel_geom(a, 0, 1);
  const auto* x = static_cast<const std::uint32_t*>(a.in[0]);
  const std::int32_t* idx = a.in_i(1);
  auto* out = static_cast<std::uint32_t*>(a.out);
  return make_kernel([=](const ExecCtx&) {
    check_elements_indices(l, idx);
    for (std::int64_t p = 0; p < l.g.count(); ++p) out[p] = x[element_offset(l.g, p, idx[p])];
  });
}

// (g, idx, x-shape) -> dx: dx[p with p[axis] = idx[p]] += g[p] into zeros.
std::unique_ptr<CpuKernel> make_gather_elements_grad(const KernelArgs& a) {
  const ElementsKernelGeom l = elements_kernel_geom(a, 2, 1);
  const float* gr = a.in_f(0);
  const std::int32_t* idx = a.in_i(1);
  float* out = a.out_f();
  const std::int64_t total = a.out_shape().numel();
  return make_kernel([=](const ExecCtx& ctx) {
    check_elements_indices(l, idx);
    const ElementsGeom& g = l.g;
    const std::int64_t m = g.m(), n = g.n(), xs = g.x_step(), is = g.i_step();
    parallel_for(ctx, total, kParallelGrain,
                 [&](std::int64_t b, std::int64_t e) { std::fill(out + b, out + e, 0.0f); });
    parallel_for(ctx, g.lines(), line_grain(g), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const auto [xo, io] = g.line(r);
        for (std::int64_t k = 0; k < m; ++k) {
          const std::int64_t p = io + k * is;
          out[xo + wrap(idx[p], n) * xs] += gr[p];
        }
      }
    });
  });
}

std::unique_ptr<CpuKernel> make_gather_elements_grad_ref(const KernelArgs& a) {
  const ElementsKernelGeom l = elements_kernel_geom(a, 2, 1);
  const float* gr = a.in_f(0);
  const std::int32_t* idx = a.in_i(1);
  float* out = a.out_f();
  const std::int64_t total = a.out_shape().numel();
  return make_kernel([=](const ExecCtx&) {
    check_elements_indices(l, idx);
    std::fill(out, out + total, 0.0f);
    for (std::int64_t p = 0; p < l.g.count(); ++p) out[element_offset(l.g, p, idx[p])] += gr[p];
  });
}

// How an update meets its element: float, or int32 as uint32 (add and mul wrap around).
template <class T>
T combine(ScatterReduction r, T v, T u) {
  switch (r) {
    case ScatterReduction::add:
      return v + u;
    case ScatterReduction::mul:
      return v * u;
    default:
      return u;
  }
}

// (data, idx, updates) -> data with the updates applied; out may be data's buffer.
template <class T, bool Reference>
std::unique_ptr<CpuKernel> make_scatter_elements(const KernelArgs& a) {
  const ElementsKernelGeom l = elements_kernel_geom(a, 0, 1);
  const auto* data = static_cast<const T*>(a.in[0]);
  const std::int32_t* idx = a.in_i(1);
  const auto* upd = static_cast<const T*>(a.in[2]);
  auto* out = static_cast<T*>(a.out);
  const std::int64_t total = a.out_shape().numel();
  const ScatterReduction red = a.node.attrs.get<ScatterMode>().reduction;
  return make_kernel([=](const ExecCtx& ctx) {
    check_elements_indices(l, idx);
    const ElementsGeom& g = l.g;
    if constexpr (Reference) {
      if (out != data) std::copy(data, data + total, out);
      for (std::int64_t p = 0; p < g.count(); ++p) {
        T& o = out[element_offset(g, p, idx[p])];
        o = combine(red, o, upd[p]);
      }
      return;
    }
    if (out != data) {
      parallel_for(ctx, total, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        std::memcpy(out + b, data + b, static_cast<std::size_t>(e - b) * sizeof(T));
      });
    }
    const std::int64_t m = g.m(), n = g.n(), xs = g.x_step(), is = g.i_step();
    parallel_for(ctx, g.lines(), line_grain(g), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const auto [xo, io] = g.line(r);
        for (std::int64_t k = 0; k < m; ++k) {
          const std::int64_t p = io + k * is;
          T& o = out[xo + wrap(idx[p], n) * xs];
          o = combine(red, o, upd[p]);
        }
      }
    });
  });
}

template <bool Reference>
std::unique_ptr<CpuKernel> make_scatter_elements_typed(const KernelArgs& a) {
  if (a.in_types[0].dtype == DType::i32) return make_scatter_elements<std::uint32_t, Reference>(a);
  return make_scatter_elements<float, Reference>(a);
}

// embedding_concat (fuse_embedding_concat): the pieces of a concat along the last axis, lookups
// gathered straight into their bands of the output. Every lookup's indices are checked before
// any row is written; then each output row is filled piece by piece (rows split among the
// team: disjoint writes, plain copies, so any team gives the unfused plan's bits).
struct Piece {
  const float* src = nullptr;          // table (lookup) or value
  const std::int32_t* idx = nullptr;   // lookup: its indices; null for a value
  std::int64_t width = 0, offset = 0;  // band of the output row
  Lookup l;                            // lookup: its geometry, for the check
};

std::vector<Piece> pieces(const KernelArgs& a) {
  std::vector<Piece> ps;
  std::size_t k = 0;
  std::int64_t off = 0;
  for (std::uint8_t lk : a.node.attrs.get<LookupPieces>().lookup) {
    Piece p;
    p.src = a.in_f(k);
    if (lk != 0) {
      p.idx = a.in_i(k + 1);
      p.l = lookup(a, k, k + 1);
      p.width = p.l.dim;
      k += 2;
    } else {
      p.width = a.in_shape(k).dim(-1);
      k += 1;
    }
    p.offset = off;
    off += p.width;
    ps.push_back(std::move(p));
  }
  return ps;
}

template <bool Reference>
std::unique_ptr<CpuKernel> make_embedding_concat(const KernelArgs& a) {
  const std::vector<Piece> ps = pieces(a);
  const std::int64_t width = a.out_shape().dim(-1);
  const std::int64_t rows = a.out_shape().numel() / std::max<std::int64_t>(width, 1);
  float* out = a.out_f();
  return make_kernel([=](const ExecCtx& ctx) {
    for (const Piece& p : ps) {
      if (p.idx != nullptr) check_indices(p.l, p.idx);
    }
    auto fill = [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        float* o = out + r * width;
        for (const Piece& p : ps) {
          const float* s =
              p.idx != nullptr ? p.src + std::int64_t{p.idx[r]} * p.width : p.src + r * p.width;
          if constexpr (Reference) {
            for (std::int64_t d = 0; d < p.width; ++d) o[p.offset + d] = s[d];
          } else {
            std::memcpy(o + p.offset, s, static_cast<std::size_t>(p.width) * sizeof(float));
          }
        }
      }
    };
    if constexpr (Reference) {
      fill(0, rows);
    } else {
      parallel_for(ctx, rows,
                   std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(width, 1)),
                   fill);
    }
  });
}

}  // namespace

void register_embedding_kernels(KernelRegistry& r) {
  r.add(OpKind::EmbeddingConcat, {"row_copies", nullptr, make_embedding_concat<false>});
  r.add(OpKind::EmbeddingConcat, {"reference", nullptr, make_embedding_concat<true>, true});
  r.add(OpKind::CheckIndices, {"scan", nullptr, make_check, true});
  r.add(OpKind::Gather, {"row_copies", nullptr, make_gather_axis});
  r.add(OpKind::Gather, {"reference", nullptr, make_gather_axis_ref, true});
  r.add(OpKind::GatherGrad, {"row_scatter_add", nullptr, make_gather_grad});
  r.add(OpKind::GatherGrad, {"reference", nullptr, make_gather_grad_ref, true});
  r.add(OpKind::GatherElements, {"lines", nullptr, make_gather_elements});
  r.add(OpKind::GatherElements, {"reference", nullptr, make_gather_elements_ref, true});
  r.add(OpKind::GatherElementsGrad, {"line_scatter_add", nullptr, make_gather_elements_grad});
  r.add(OpKind::GatherElementsGrad, {"reference", nullptr, make_gather_elements_grad_ref, true});
  r.add(OpKind::ScatterElements, {"lines", nullptr, make_scatter_elements_typed<false>});
  r.add(OpKind::ScatterElements, {"reference", nullptr, make_scatter_elements_typed<true>, true});
  r.add(OpKind::Embedding, {"row_copies", nullptr, make_gather});
  r.add(OpKind::Embedding, {"reference", nullptr, make_gather_ref, true});
  r.add(OpKind::EmbeddingGrad, {"row_scatter_add", nullptr, make_scatter_add});
  r.add(OpKind::EmbeddingGrad, {"reference", nullptr, make_scatter_add_ref, true});
  r.add(OpKind::EmbeddingUpdate, {"sparse_rows", nullptr, make_update<false>});
  r.add(OpKind::EmbeddingUpdate, {"reference", nullptr, make_update<true>, true});
  r.add(OpKind::SparseOptimizerUpdate, {"sparse_rows", nullptr, make_sparse_optimizer<false>});
  r.add(OpKind::SparseOptimizerUpdate, {"reference", nullptr, make_sparse_optimizer<true>, true});
}

}  // namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS
