// SPDX-License-Identifier: Apache-2.0
// Issue 12's batched-GEMM question, asked of oneDNN 2.6 directly (not part of the build): B
// products of one shape [M, K] x [K, N] sharing W, timed three ways on the machine's threads:
// side by side (one dnnl_sgemm per product, one thread each, as parallel groups run them), one
// batched matmul primitive (W broadcast over the batch), and one dnnl_sgemm over the products'
// left operands stacked by rows. Prints JSON lines; medians of 41 calls.
//   g++ -O2 -std=c++20 -fopenmp bench/probes/batched_gemm.cpp -o /tmp/batched_gemm -ldnnl
//   OMP_NUM_THREADS=2 /tmp/batched_gemm
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

int main() {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  auto median_us = [](auto f) {
    std::vector<double> v;
    for (int r = 0; r < 41; ++r) {
      const auto a = std::chrono::steady_clock::now();
      f();
      v.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const int shapes[][4] = {{64, 200, 100, 200}, {64, 64, 128, 128}, {64, 32, 256, 256},
                           {64, 20, 128, 512},  {64, 1, 128, 512},  {26, 1, 16, 64}};
  const int nt = omp_get_max_threads();
  for (const auto& sh : shapes) {
    const int B = sh[0], M = sh[1], K = sh[2], N = sh[3];
    std::vector<float> A(static_cast<std::size_t>(B) * M * K, 0.5f), W(K * N, 0.25f),
        C(static_cast<std::size_t>(B) * M * N);
    const double side = median_us([&] {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
      for (int b = 0; b < B; ++b)
        dnnl_sgemm('N', 'N', M, N, K, 1.f, A.data() + static_cast<std::size_t>(b) * M * K, K,
                   W.data(), N, 0.f, C.data() + static_cast<std::size_t>(b) * M * N, N);
    });
    const memory::desc a_md({B, M, K}, dt::f32, tag::abc), w_md({1, K, N}, dt::f32, tag::abc),
        c_md({B, M, N}, dt::f32, tag::abc);
    const matmul::primitive_desc pd(matmul::desc(a_md, w_md, c_md), eng);
    const matmul mm(pd);
    memory am(a_md, eng, A.data()), wm(w_md, eng, W.data()), cm(c_md, eng, C.data());
    const double batched = median_us([&] {
      mm.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, cm}});
      s.wait();
    });
    const double stacked = median_us([&] {
      dnnl_sgemm('N', 'N', B * M, N, K, 1.f, A.data(), K, W.data(), N, 0.f, C.data(), N);
    });
    std::printf(
        "{\"products\":%d,\"m\":%d,\"k\":%d,\"n\":%d,\"threads\":%d,\"side_by_side_us\":%.1f,"
        "\"batched_matmul_us\":%.1f,\"batched_impl\":\"%s\",\"stacked_sgemm_us\":%.1f}\n",
        B, M, K, N, nt, side, batched, pd.impl_info_str(), stacked);
  }
  // Both operands shared (par-matmul): a stride-0 batch is accepted only by the reference kernel.
  const int B = 64, M = 200, K = 100, N = 200;
  std::vector<float> A(M * K, 0.5f), W(K * N, 0.25f), C(static_cast<std::size_t>(B) * M * N);
  const memory::desc a_md({B, M, K}, dt::f32, memory::dims{0, K, 1}),
      w_md({B, K, N}, dt::f32, memory::dims{0, N, 1}), c_md({B, M, N}, dt::f32, tag::abc);
  const matmul::primitive_desc pd(matmul::desc(a_md, w_md, c_md), eng);
  std::printf("{\"products\":%d,\"m\":%d,\"k\":%d,\"n\":%d,\"stride0_batch_impl\":\"%s\"}\n", B, M,
              K, N, pd.impl_info_str());
}
