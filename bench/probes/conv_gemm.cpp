// SPDX-License-Identifier: Apache-2.0
// Issue 18's next question, asked of oneDNN 2.6 directly (not part of the build): is a 3x3 (or
// 1x1) convolution, stride 1, of resnet18's and googlenet's shapes faster as one GEMM over the
// whole batch than as oneDNN's direct convolution? Three ways, interleaved round by round:
//   direct  the primitive with format_tag::any (what hetgraph's convolutions run: nChw8c on AVX2)
//   nchw    the primitive on plain NCHW (oneDNN picks its im2col + GEMM per image, gemm:jit)
//   gemm    im2col of an NHWC image batch into [N*H*W, 9*C] (OpenMP over rows; none for 1x1,
//           where the NHWC batch is the matrix), then one dnnl_sgemm by the weights [9*C, O]:
//           the output is NHWC
// Each result is checked against the direct one (max |difference| / max |value|). Prints JSON
// lines: per shape and round, each way's median of 9 calls, in ms.
//   g++ -O2 -march=native -std=c++20 -fopenmp bench/probes/conv_gemm.cpp -o /tmp/conv_gemm -ldnnl
//   OMP_NUM_THREADS=2 /tmp/conv_gemm [ROUNDS]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace {

using namespace dnnl;
using dt = memory::data_type;
using tag = memory::format_tag;

template <class F>
double median_ms(F f) {
  std::vector<double> v;
  for (int r = 0; r < 9; ++r) {
    const auto a = std::chrono::steady_clock::now();
    f();
    v.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Shape {
  const char* net;
  int n, c, h, o, k;  // batch, channels, height = width, output channels, kernel size (1 or 3)
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const Shape shapes[] = {
      {"resnet18", 32, 64, 56, 64, 3},    {"resnet18", 32, 128, 28, 128, 3},
      {"resnet18", 32, 256, 14, 256, 3},  {"resnet18", 32, 512, 7, 512, 3},
      {"resnet18", 1, 256, 14, 256, 3},   {"resnet18", 1, 512, 7, 512, 3},
      {"googlenet", 32, 96, 28, 128, 3},  {"googlenet", 32, 112, 14, 224, 3},
      {"googlenet", 32, 160, 7, 320, 3},  {"googlenet", 32, 192, 7, 384, 3},
      {"googlenet", 1, 112, 14, 224, 3},  {"googlenet", 1, 192, 7, 384, 3},
      {"googlenet", 32, 480, 14, 192, 1}, {"googlenet", 32, 832, 7, 256, 1},
      {"googlenet", 32, 832, 7, 384, 1},  {"googlenet", 1, 832, 7, 384, 1}};
  for (const Shape& sh : shapes) {
    const int N = sh.n, C = sh.c, H = sh.h, W = sh.h, O = sh.o, R = sh.k, P = R / 2, K = R * R * C;
    const std::size_t M = static_cast<std::size_t>(N) * H * W;
    // Inputs in NCHW / OIHW with values that are not all alike.
    std::vector<float> x(static_cast<std::size_t>(N) * C * H * W), w(static_cast<std::size_t>(O) * K);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 201) * 0.01f - 1;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 104729) % 97) * 0.002f - 0.1f;
    const memory::dims xd{N, C, H, W}, wd{O, C, R, R}, yd{N, O, H, W}, one{1, 1}, pad{P, P};
    memory xu({xd, dt::f32, tag::nchw}, eng, x.data()), wu({wd, dt::f32, tag::oihw}, eng, w.data());

    // The primitive, in a layout of oneDNN's choice (any) or plain NCHW.
    struct Prim {
      convolution_forward conv;
      memory src, wei, dst, plain;
      reorder back;
      const char* impl;
    };
    auto make = [&](tag t) {
      convolution_forward::primitive_desc pd(
          convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                    {xd, dt::f32, t}, {wd, dt::f32, tag::any}, {yd, dt::f32, t},
                                    one, pad, pad),
          eng);
      Prim p{convolution_forward(pd), memory(pd.src_desc(), eng), memory(pd.weights_desc(), eng),
             memory(pd.dst_desc(), eng), memory({yd, dt::f32, tag::nchw}, eng), {}, pd.impl_info_str()};
      reorder(xu, p.src).execute(s, xu, p.src);
      reorder(wu, p.wei).execute(s, wu, p.wei);
      p.back = reorder(p.dst, p.plain);
      return p;
    };
    Prim direct = make(tag::any), nchw = make(tag::nchw);
    auto run = [&](Prim& p) {
      p.conv.execute(s, {{DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.wei}, {DNNL_ARG_DST, p.dst}});
      s.wait();
    };

    // im2col + one GEMM: NHWC input, weights as [ky, kx, c] x O, NHWC output.
    std::vector<float> xn(x.size()), cols(R > 1 ? M * K : 0), wk(static_cast<std::size_t>(K) * O),
        yn(M * O);
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        for (int i = 0; i < H * W; ++i)
          xn[(static_cast<std::size_t>(n) * H * W + i) * C + c] = x[(static_cast<std::size_t>(n) * C + c) * H * W + i];
    for (int o = 0; o < O; ++o)
      for (int c = 0; c < C; ++c)
        for (int k = 0; k < R * R; ++k)
          wk[(static_cast<std::size_t>(k) * C + c) * O + o] = w[(static_cast<std::size_t>(o) * C + c) * R * R + k];
    auto gemm = [&] {
      if (R == 1) {
        dnnl_sgemm('N', 'N', static_cast<dnnl_dim_t>(M), O, K, 1.0f, xn.data(), K, wk.data(), O,
                   0.0f, yn.data(), O);
        return;
      }
#pragma omp parallel for schedule(static)
      for (std::size_t r = 0; r < M; ++r) {
        const int n = static_cast<int>(r / (H * W)), y = static_cast<int>(r / W % H),
                  xx = static_cast<int>(r % W);
        float* row = &cols[r * K];
        for (int ky = 0; ky < R; ++ky)
          for (int kx = 0; kx < R; ++kx, row += C) {
            const int iy = y + ky - P, ix = xx + kx - P;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
              std::fill(row, row + C, 0.0f);
            } else {
              const float* src = &xn[((static_cast<std::size_t>(n) * H + iy) * W + ix) * C];
              std::copy(src, src + C, row);
            }
          }
      }
      dnnl_sgemm('N', 'N', static_cast<dnnl_dim_t>(M), O, K, 1.0f, cols.data(), K, wk.data(), O,
                 0.0f, yn.data(), O);
    };

    // Check every way against the direct primitive's output.
    run(direct);
    direct.back.execute(s, direct.dst, direct.plain);
    run(nchw);
    gemm();
    s.wait();
    const float* ref = static_cast<const float*>(direct.plain.get_data_handle());
    const float* pn = static_cast<const float*>(nchw.dst.get_data_handle());
    double scale = 0, err_nchw = 0, err_gemm = 0;
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o)
        for (int i = 0; i < H * W; ++i) {
          const std::size_t a = (static_cast<std::size_t>(n) * O + o) * H * W + i;
          const double r = ref[a];
          scale = std::max(scale, std::fabs(r));
          err_nchw = std::max(err_nchw, std::fabs(pn[a] - r));
          err_gemm = std::max(err_gemm, std::fabs(yn[(static_cast<std::size_t>(n) * H * W + i) * O + o] - r));
        }
    const double gflop = 2.0 * static_cast<double>(M) * K * O * 1e-9;
    for (int round = 1; round <= rounds; ++round) {
      const double t_direct = median_ms([&] { run(direct); });
      const double t_nchw = median_ms([&] { run(nchw); });
      const double t_gemm = median_ms(gemm);
      std::printf(
          "{\"net\":\"%s\",\"shape\":\"%dx%dx%dx%d-%dx%dx%d-p%d\",\"round\":%d,\"threads\":%d,"
          "\"gflop\":%.4f,\"direct_ms\":%.3f,\"direct_impl\":\"%s\",\"nchw_ms\":%.3f,"
          "\"nchw_impl\":\"%s\",\"gemm_ms\":%.3f,\"im2col_mib\":%.1f,\"nchw_rel_err\":%.2e,"
          "\"gemm_rel_err\":%.2e}\n",
          sh.net, N, C, H, W, O, R, R, P, round, omp_get_max_threads(), gflop, t_direct, direct.impl,
          t_nchw, nchw.impl, t_gemm, static_cast<double>(cols.size()) * 4 / (1 << 20),
          err_nchw / scale, err_gemm / scale);
      std::fflush(stdout);
    }
  }
}
