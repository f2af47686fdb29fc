// SPDX-License-Identifier: Apache-2.0
// Issue 18 on AVX2: would our own Winograd F(2x2, 3x3) convolution beat oneDNN 2.6's direct
// kernels (oneDNN's own Winograd is AVX-512 only)? Standalone probe, not part of the build.
// Input and output in nChw8c (what hetgraph's convolutions keep on AVX2), pad 1, stride 1:
//   transform  each 4x4 input tile, 8 channels per vector, into 16 matrices V[pos][tile][C]
//   multiply   per pos, M = V x U with U = G g G^T packed [K/16][C][16] (a 6x16 FMA kernel)
//   inverse    A^T M A per 2x2 output tile, stored straight into the nChw8c result
// in blocks of TB tiles per thread (V and M per block stay in cache). Checked against the direct
// primitive (max |difference| / max |value|). JSON lines per shape and round, medians of 9 calls.
//   g++ -O3 -march=native -std=c++20 -fopenmp bench/probes/winograd_avx2.cpp -o /tmp/wino -ldnnl
//   OMP_NUM_THREADS=2 /tmp/wino [ROUNDS] [TB]
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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

struct Free {
  void operator()(float* p) const { std::free(p); }
};
using Buf = std::unique_ptr<float[], Free>;
Buf alloc(std::size_t n) {
  return Buf(static_cast<float*>(std::aligned_alloc(64, (n * 4 + 63) / 64 * 64)));
}

// c[6][16] = a[6][kc] (rows lda apart) x b[kc][16].
inline void kernel6x16(const float* a, std::size_t lda, const float* b, int kc, float* c,
                       std::size_t ldc) {
  __m256 acc[6][2];
  for (int r = 0; r < 6; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(b + p * 16), b1 = _mm256_load_ps(b + p * 16 + 8);
    for (int r = 0; r < 6; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + p);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < 6; ++r) {
    _mm256_store_ps(c + r * ldc, acc[r][0]);
    _mm256_store_ps(c + r * ldc + 8, acc[r][1]);
  }
}

// One row (or column) of the transforms, on vectors of 8 channels. F(2x2, 3x3): alpha = 4;
// F(4x4, 3x3): alpha = 6 (Lavin and Gray's B, G, A).
template <int M>
struct Tr;
template <>
struct Tr<2> {
  static constexpr int kAlpha = 4;
  static void in(const __m256* d, __m256* r) {  // B^T d
    r[0] = _mm256_sub_ps(d[0], d[2]);
    r[1] = _mm256_add_ps(d[1], d[2]);
    r[2] = _mm256_sub_ps(d[2], d[1]);
    r[3] = _mm256_sub_ps(d[1], d[3]);
  }
  static void out(const __m256* m, __m256* o) {  // A^T m
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], m[1]), m[2]);
    o[1] = _mm256_sub_ps(_mm256_sub_ps(m[1], m[2]), m[3]);
  }
  static constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
};
template <>
struct Tr<4> {
  static constexpr int kAlpha = 6;
  static void in(const __m256* d, __m256* r) {
    const __m256 four = _mm256_set1_ps(4.0f), m4 = _mm256_set1_ps(-4.0f),
                 m5 = _mm256_set1_ps(-5.0f), two = _mm256_set1_ps(2.0f);
    r[0] = _mm256_fmadd_ps(four, d[0], _mm256_fmadd_ps(m5, d[2], d[4]));
    const __m256 t1 = _mm256_fmadd_ps(m4, d[2], d[4]), t2 = _mm256_fmadd_ps(m4, d[1], d[3]);
    r[1] = _mm256_add_ps(t1, t2);
    r[2] = _mm256_sub_ps(t1, t2);
    const __m256 t3 = _mm256_sub_ps(d[4], d[2]), t4 = _mm256_mul_ps(two, _mm256_sub_ps(d[1], d[3]));
    r[3] = _mm256_sub_ps(t3, t4);
    r[4] = _mm256_add_ps(t3, t4);
    r[5] = _mm256_fmadd_ps(four, d[1], _mm256_fmadd_ps(m5, d[3], d[5]));
  }
  static void out(const __m256* m, __m256* o) {
    const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]),
                 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
    o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d, b);
    o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), c, a);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d, b), m[5]);
  }
  static constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                                      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                      {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                      {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                      {0, 0, 1}};
};

template <int MT>
struct Wino {
  static constexpr int A = Tr<MT>::kAlpha, P = A * A;
  int N, C, H, W, K, TH, TW, T, KP, K16, TB, CB, KB;
  Buf U;  // [P][KP][C][16]
  std::vector<Buf> V, M;

  Wino(int n, int c, int h, int w, int k, const float* oihw, int tb, int threads)
      : N(n), C(c), H(h), W(w), K(k) {
    TH = (H + MT - 1) / MT, TW = (W + MT - 1) / MT, T = N * TH * TW, KP = (K + 15) / 16;
    K16 = KP * 16, CB = C / 8, KB = K / 8;
    const int per = (T + threads - 1) / threads;
    TB = std::max(6, std::min(tb, (per + 5) / 6 * 6));
    U = alloc(static_cast<std::size_t>(P) * K16 * C);
    std::memset(U.get(), 0, static_cast<std::size_t>(P) * K16 * C * 4);
    for (int o = 0; o < K; ++o)
      for (int ci = 0; ci < C; ++ci) {
        const float* g = oihw + (static_cast<std::size_t>(o) * C + ci) * 9;
        double gg[A][3];
        for (int i = 0; i < A; ++i)
          for (int j = 0; j < 3; ++j)
            gg[i][j] = Tr<MT>::kG[i][0] * g[j] + Tr<MT>::kG[i][1] * g[3 + j] +
                       Tr<MT>::kG[i][2] * g[6 + j];
        for (int i = 0; i < A; ++i)
          for (int j = 0; j < A; ++j)
            U[((static_cast<std::size_t>(i * A + j) * KP + o / 16) * C + ci) * 16 + o % 16] =
                static_cast<float>(gg[i][0] * Tr<MT>::kG[j][0] + gg[i][1] * Tr<MT>::kG[j][1] +
                                   gg[i][2] * Tr<MT>::kG[j][2]);
      }
    for (int t = 0; t < threads; ++t) {
      V.push_back(alloc(static_cast<std::size_t>(P) * TB * C));
      M.push_back(alloc(static_cast<std::size_t>(P) * TB * K16));
      std::memset(V.back().get(), 0, static_cast<std::size_t>(P) * TB * C * 4);
    }
  }

  void run(const float* x, float* y) {
    const int blocks = (T + TB - 1) / TB;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; ++blk) {
      float* v = V[omp_get_thread_num()].get();
      float* m = M[omp_get_thread_num()].get();
      const int t0 = blk * TB, nt = std::min(TB, T - t0);
      const std::size_t vs = static_cast<std::size_t>(TB) * C;
      for (int tl = 0; tl < nt; ++tl) {
        const int t = t0 + tl, n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
        for (int cb = 0; cb < CB; ++cb) {
          const float* img = x + (static_cast<std::size_t>(n) * CB + cb) * H * W * 8;
          __m256 d[A][A], s[A][A], col[A], r[A];
          for (int i = 0; i < A; ++i) {
            const int iy = MT * ty - 1 + i;
            for (int j = 0; j < A; ++j) {
              const int ix = MT * tx - 1 + j;
              d[i][j] = (iy >= 0 && iy < H && ix >= 0 && ix < W)
                            ? _mm256_load_ps(img + (static_cast<std::size_t>(iy) * W + ix) * 8)
                            : _mm256_setzero_ps();
            }
          }
          for (int j = 0; j < A; ++j) {
            for (int i = 0; i < A; ++i) col[i] = d[i][j];
            Tr<MT>::in(col, r);
            for (int i = 0; i < A; ++i) s[i][j] = r[i];
          }
          float* dst = v + static_cast<std::size_t>(tl) * C + cb * 8;
          for (int i = 0; i < A; ++i) {
            Tr<MT>::in(s[i], r);
            for (int j = 0; j < A; ++j) _mm256_store_ps(dst + (i * A + j) * vs, r[j]);
          }
        }
      }
      const int rows = (nt + 5) / 6 * 6;
      for (int pos = 0; pos < P; ++pos)
        for (int kp = 0; kp < KP; ++kp)
          for (int r0 = 0; r0 < rows; r0 += 6)
            kernel6x16(v + (static_cast<std::size_t>(pos) * TB + r0) * C, C,
                       U.get() + (static_cast<std::size_t>(pos) * KP + kp) * C * 16, C,
                       m + (static_cast<std::size_t>(pos) * TB + r0) * K16 + kp * 16, K16);
      const std::size_t ps = static_cast<std::size_t>(TB) * K16;
      for (int tl = 0; tl < nt; ++tl) {
        const int t = t0 + tl, n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
        for (int kb = 0; kb < KB; ++kb) {
          const float* src = m + static_cast<std::size_t>(tl) * K16 + kb * 8;
          __m256 s[MT][A], col[A], o[MT];
          for (int j = 0; j < A; ++j) {
            for (int i = 0; i < A; ++i) col[i] = _mm256_load_ps(src + (i * A + j) * ps);
            Tr<MT>::out(col, o);
            for (int i = 0; i < MT; ++i) s[i][j] = o[i];
          }
          float* img = y + (static_cast<std::size_t>(n) * KB + kb) * H * W * 8;
          for (int i = 0; i < MT; ++i) {
            Tr<MT>::out(s[i], o);
            for (int j = 0; j < MT; ++j) {
              const int oy = MT * ty + i, ox = MT * tx + j;
              if (oy < H && ox < W)
                _mm256_store_ps(img + (static_cast<std::size_t>(oy) * W + ox) * 8, o[j]);
            }
          }
        }
      }
    }
  }
};

struct Shape {
  const char* net;
  int n, c, h, o;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const int tb = argc > 2 ? std::atoi(argv[2]) : 48;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const Shape shapes[] = {
      {"resnet18", 32, 64, 56, 64},   {"resnet18", 32, 128, 28, 128}, {"resnet18", 32, 256, 14, 256},
      {"resnet18", 32, 512, 7, 512},  {"resnet18", 1, 64, 56, 64},    {"resnet18", 1, 256, 14, 256},
      {"resnet18", 1, 512, 7, 512},   {"googlenet", 32, 96, 28, 128}, {"googlenet", 32, 112, 14, 224},
      {"googlenet", 32, 192, 7, 384}, {"googlenet", 1, 112, 14, 224}, {"googlenet", 1, 192, 7, 384}};
  for (const Shape& sh : shapes) {
    const int N = sh.n, C = sh.c, H = sh.h, W = sh.h, O = sh.o;
    std::vector<float> x(static_cast<std::size_t>(N) * C * H * W), w(static_cast<std::size_t>(O) * C * 9);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 201) * 0.01f - 1;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 104729) % 97) * 0.002f - 0.1f;
    const memory::dims xd{N, C, H, W}, wd{O, C, 3, 3}, yd{N, O, H, W}, one{1, 1}, pad{1, 1};
    memory xu({xd, dt::f32, tag::nchw}, eng, x.data()), wu({wd, dt::f32, tag::oihw}, eng, w.data());
    convolution_forward::primitive_desc pd(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  {xd, dt::f32, tag::nChw8c}, {wd, dt::f32, tag::any},
                                  {yd, dt::f32, tag::nChw8c}, one, pad, pad),
        eng);
    convolution_forward conv(pd);
    memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng),
        mine(pd.dst_desc(), eng);
    reorder(xu, src).execute(s, xu, src);
    reorder(wu, wei).execute(s, wu, wei);
    s.wait();
    auto direct = [&] {
      conv.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
      s.wait();
    };
    Wino<2> w2(N, C, H, W, O, w.data(), tb, omp_get_max_threads());
    Wino<4> w4(N, C, H, W, O, w.data(), tb, omp_get_max_threads());
    const float* xs = static_cast<const float*>(src.get_data_handle());
    float* ys = static_cast<float*>(mine.get_data_handle());
    auto wino = [&] { w2.run(xs, ys); };
    auto wino4 = [&] { w4.run(xs, ys); };
    direct();
    const float* a = static_cast<const float*>(dst.get_data_handle());
    double scale = 0, err = 0, err4 = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(N) * O * H * W; ++i)
      scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
    wino();
    for (std::size_t i = 0; i < static_cast<std::size_t>(N) * O * H * W; ++i)
      err = std::max(err, static_cast<double>(std::fabs(a[i] - ys[i])));
    wino4();
    for (std::size_t i = 0; i < static_cast<std::size_t>(N) * O * H * W; ++i)
      err4 = std::max(err4, static_cast<double>(std::fabs(a[i] - ys[i])));
    const double gflop = 2.0 * N * H * W * O * C * 9 * 1e-9;
    for (int round = 1; round <= rounds; ++round) {
      const double td = median_ms(direct), tw = median_ms(wino), tw4 = median_ms(wino4);
      std::printf(
          "{\"net\":\"%s\",\"shape\":\"%dx%dx%dx%d-%dx3x3-p1\",\"round\":%d,\"threads\":%d,"
          "\"gflop\":%.4f,\"direct_ms\":%.3f,\"direct_impl\":\"%s\",\"winograd_ms\":%.3f,"
          "\"ratio\":%.3f,\"f4x3_ms\":%.3f,\"f4x3_ratio\":%.3f,\"tile_block\":%d,"
          "\"rel_err\":%.2e,\"f4x3_rel_err\":%.2e}\n",
          sh.net, N, C, H, W, O, round, omp_get_max_threads(), gflop, td, pd.impl_info_str(), tw,
          tw / td, tw4, tw4 / td, w2.TB, err / scale, err4 / scale);
      std::fflush(stdout);
    }
  }
}
