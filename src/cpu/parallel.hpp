// SPDX-License-Identifier: Apache-2.0
// Intra-op parallelism inside an executor's thread team.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "cpu/kernel.hpp"

namespace hetgraph::detail::cpu {

/// What libhetgraph_omp_env did before libgomp started (src/common/omp_env.cpp): 1 it bounded
/// OpenMP's spinning (GOMP_SPINCOUNT), 2 the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT decides,
/// 0 setting it failed.
int openmp_env_state();

/// Below this many elements of simple work a parallel region costs more than it saves.
inline constexpr std::int64_t kParallelGrain = 16384;

/// Sets the calling thread's OpenMP team size (oneDNN reads it too) for a scope.
class TeamSize {
 public:
  explicit TeamSize(int n) : prev_(omp_get_max_threads()) {
    if (prev_ != n) omp_set_num_threads(n);
  }
  ~TeamSize() {
    if (omp_get_max_threads() != prev_) omp_set_num_threads(prev_);
  }
  TeamSize(const TeamSize&) = delete;
  TeamSize& operator=(const TeamSize&) = delete;

 private:
  int prev_;
};

/// Calls f(thread, begin, end) over [0, n) split into contiguous chunks, one per thread of the
/// team (`thread` its index, below ctx.nthreads: a kernel's per-thread scratch), using at most
/// ctx.nthreads threads and only as many as n / grain allows. Chunk bounds depend on the
/// thread count only, so results are reproducible for a given team size.
template <class F>
void parallel_for_indexed(const ExecCtx& ctx, std::int64_t n, std::int64_t grain, F&& f) {
  const std::int64_t want = grain > 0 ? n / grain : n;
  const int nt = static_cast<int>(std::clamp<std::int64_t>(want, 1, ctx.nthreads));
  if (nt <= 1) {
    f(std::int64_t{0}, std::int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const std::int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    const std::int64_t b = n * t / T, e = n * (t + 1) / T;
    if (b < e) f(t, b, e);
  }
}

/// parallel_for_indexed without the thread index: f(begin, end).
template <class F>
void parallel_for(const ExecCtx& ctx, std::int64_t n, std::int64_t grain, F&& f) {
  parallel_for_indexed(ctx, n, grain,
                       [&](std::int64_t, std::int64_t b, std::int64_t e) { f(b, e); });
}

}  // namespace hetgraph::detail::cpu
