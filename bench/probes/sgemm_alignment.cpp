// SPDX-License-Identifier: Apache-2.0
// dnnl_sgemm's time against the address of its B operand (not part of the build). On an AVX2
// CPU (Zen 3, 2026-11-27) row-major 'N','N' products whose shape sends oneDNN 2.6 to its no-copy
// kernels ran up to 1.9x slower with B on a 32-byte boundary than 16 bytes past one; the
// arena puts every buffer on a 64-byte boundary. Each shape with B at several offsets from a
// page boundary (A and C page-aligned), median of a run of calls, best of 3 runs; JSON lines.
//   g++ -O2 -std=c++20 -fopenmp bench/probes/sgemm_alignment.cpp -o /tmp/sgemm_alignment -ldnnl
//   /tmp/sgemm_alignment            (OMP_NUM_THREADS=1 for one thread)
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <oneapi/dnnl/dnnl.h>
#include <vector>

int main() {
  constexpr std::size_t kRegion = 64u << 20;  // A, B and C each at the start of one
  auto* mem = static_cast<char*>(
      mmap(nullptr, 3 * kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) return 1;
  struct Shape {
    long m, k, n;
  };
  const Shape shapes[] = {{64, 957, 512}, {20, 512, 2048}, {1, 512, 2048}, {64, 512, 256},
                          {64, 256, 512}, {200, 100, 200}, {64, 957, 500}, {256, 1024, 1024}};
  for (const Shape& s : shapes) {
    const int calls = std::max(20, static_cast<int>(2e8 / (2.0 * s.m * s.k * s.n)));
    for (long offset : {0L, 16L, 32L, 48L, 64L}) {
      auto* a = reinterpret_cast<float*>(mem);
      auto* b = reinterpret_cast<float*>(mem + kRegion + offset);
      auto* c = reinterpret_cast<float*>(mem + 2 * kRegion);
      for (long i = 0; i < s.m * s.k; ++i) a[i] = static_cast<float>(i % 17) * 0.1f;
      for (long i = 0; i < s.k * s.n; ++i) b[i] = static_cast<float>(i % 13) * 0.1f;
      double best = 1e30;
      for (int run = 0; run < 3; ++run) {
        std::vector<double> t;
        for (int r = 0; r < calls; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, a, s.k, b, s.n, 0.0f, c, s.n);
          t.push_back(std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - t0)
                          .count());
        }
        std::sort(t.begin(), t.end());
        best = std::min(best, t[t.size() / 2]);
      }
      std::printf(
          "{\"probe\":\"sgemm_alignment\",\"m\":%ld,\"k\":%ld,\"n\":%ld,\"b_offset\":%ld,"
          "\"threads\":%d,\"median_us\":%.1f}\n",
          s.m, s.k, s.n, offset, omp_get_max_threads(), best);
    }
  }
  return 0;
}
