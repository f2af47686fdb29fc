// Embedding lookup (gather rows of a table) and its gradient (scatter-add of the incoming rows
// into a zero table), with reference implementations.
//
// Indices are checked before any parallel work (an exception cannot leave an OpenMP region):
// one outside [0, rows) is a FeedError naming the node, never a read or write out of bounds.
//
// The scatter-add is deterministic without atomics: the table's rows are split among the
// team, and each thread scans every lookup in order, adding the ones that land in its rows.
// Each row's sum is thus accumulated in lookup order, whatever the team size; the scan costs
// one pass over the indices per thread, small next to the zeroing of the table.
#include <algorithm>
#include <cstring>
#include <string>

#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

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
  return {a.in_shape(indices).numel(), t[0], t[1], a.in_shape(indices), a.node.label};
}

void check_indices(const Lookup& l, const std::int32_t* idx) {
  for (std::int64_t i = 0; i < l.count; ++i) {
    if (idx[i] < 0 || idx[i] >= l.rows) {
      throw FeedError("node " + l.label + ": index " + std::to_string(idx[i]) + " at position " +
                      std::to_string(i) + " of the indices " + l.index_shape.str() +
                      " is outside the table's rows [0, " + std::to_string(l.rows) + ")");
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

}  // namespace

void register_embedding_kernels(KernelTable& t) {
  auto& fwd = t[static_cast<std::size_t>(OpKind::Embedding)];
  fwd.push_back({"row_copies", nullptr, make_gather});
  fwd.push_back({"reference", nullptr, make_gather_ref});
  auto& bwd = t[static_cast<std::size_t>(OpKind::EmbeddingGrad)];
  bwd.push_back({"row_scatter_add", nullptr, make_scatter_add});
  bwd.push_back({"reference", nullptr, make_scatter_add_ref});
}

}  // namespace hetgraph::detail::cpu
