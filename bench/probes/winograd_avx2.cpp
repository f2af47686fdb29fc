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

struct Wino {
  int N, C, H, W, K, TH, TW, T, KP, K16, TB, CB, KB;
  Buf U;  // [16][KP][C][16]
  std::vector<Buf> V, M;

  Wino(int n, int c, int h, int w, int k, const float* oihw, int tb, int threads)
      : N(n), C(c), H(h), W(w), K(k) {
    TH = (H + 1) / 2, TW = (W + 1) / 2, T = N * TH * TW, KP = (K + 15) / 16, K16 = KP * 16;
    CB = C / 8, KB = K / 8;
    const int per = (T + threads - 1) / threads;
    TB = std::max(6, std::min(tb, (per + 5) / 6 * 6));
    U = alloc(16ull * K16 * C);
    std::memset(U.get(), 0, 16ull * K16 * C * 4);
    for (int o = 0; o < K; ++o)
      for (int ci = 0; ci < C; ++ci) {
        const float* g = oihw + (static_cast<std::size_t>(o) * C + ci) * 9;
        float gg[4][3], u[4][4];
        for (int j = 0; j < 3; ++j) {
          gg[0][j] = g[j];
          gg[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
          gg[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
          gg[3][j] = g[6 + j];
        }
        for (int i = 0; i < 4; ++i) {
          u[i][0] = gg[i][0];
          u[i][1] = 0.5f * (gg[i][0] + gg[i][1] + gg[i][2]);
          u[i][2] = 0.5f * (gg[i][0] - gg[i][1] + gg[i][2]);
          u[i][3] = gg[i][2];
        }
        for (int pos = 0; pos < 16; ++pos)
          U[((static_cast<std::size_t>(pos) * KP + o / 16) * C + ci) * 16 + o % 16] =
              u[pos / 4][pos % 4];
      }
    for (int t = 0; t < threads; ++t) {
      V.push_back(alloc(16ull * TB * C));
      M.push_back(alloc(16ull * TB * K16));
      std::memset(V.back().get(), 0, 16ull * TB * C * 4);
    }
  }

  void run(const float* x, float* y) {
    const int blocks = (T + TB - 1) / TB;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; ++blk) {
      float* v = V[omp_get_thread_num()].get();
      float* m = M[omp_get_thread_num()].get();
      const int t0 = blk * TB, nt = std::min(TB, T - t0);
      // Input transform.
      for (int tl = 0; tl < nt; ++tl) {
        const int t = t0 + tl, n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
        for (int cb = 0; cb < CB; ++cb) {
          const float* img = x + (static_cast<std::size_t>(n) * CB + cb) * H * W * 8;
          __m256 d[4][4];
          for (int i = 0; i < 4; ++i) {
            const int iy = 2 * ty - 1 + i;
            for (int j = 0; j < 4; ++j) {
              const int ix = 2 * tx - 1 + j;
              d[i][j] = (iy >= 0 && iy < H && ix >= 0 && ix < W)
                            ? _mm256_load_ps(img + (static_cast<std::size_t>(iy) * W + ix) * 8)
                            : _mm256_setzero_ps();
            }
          }
          __m256 s[4][4];
          for (int j = 0; j < 4; ++j) {
            s[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
            s[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
            s[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
            s[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
          }
          float* dst = v + static_cast<std::size_t>(tl) * C + cb * 8;
          const std::size_t ps = static_cast<std::size_t>(TB) * C;
          for (int i = 0; i < 4; ++i) {
            _mm256_store_ps(dst + (i * 4 + 0) * ps, _mm256_sub_ps(s[i][0], s[i][2]));
            _mm256_store_ps(dst + (i * 4 + 1) * ps, _mm256_add_ps(s[i][1], s[i][2]));
            _mm256_store_ps(dst + (i * 4 + 2) * ps, _mm256_sub_ps(s[i][2], s[i][1]));
            _mm256_store_ps(dst + (i * 4 + 3) * ps, _mm256_sub_ps(s[i][1], s[i][3]));
          }
        }
      }
      // 16 products.
      const int rows = (nt + 5) / 6 * 6;
      for (int pos = 0; pos < 16; ++pos)
        for (int kp = 0; kp < KP; ++kp)
          for (int r0 = 0; r0 < rows; r0 += 6)
            kernel6x16(v + (static_cast<std::size_t>(pos) * TB + r0) * C, C,
                       U.get() + (static_cast<std::size_t>(pos) * KP + kp) * C * 16, C,
                       m + (static_cast<std::size_t>(pos) * TB + r0) * K16 + kp * 16, K16);
      // Output transform.
      const std::size_t ps = static_cast<std::size_t>(TB) * K16;
      for (int tl = 0; tl < nt; ++tl) {
        const int t = t0 + tl, n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
        for (int kb = 0; kb < KB; ++kb) {
          const float* src = m + static_cast<std::size_t>(tl) * K16 + kb * 8;
          __m256 s0[4], s1[4];
          for (int j = 0; j < 4; ++j) {
            const __m256 a = _mm256_load_ps(src + (0 + j) * ps),
                         b = _mm256_load_ps(src + (4 + j) * ps),
                         c = _mm256_load_ps(src + (8 + j) * ps),
                         e = _mm256_load_ps(src + (12 + j) * ps);
            s0[j] = _mm256_add_ps(_mm256_add_ps(a, b), c);
            s1[j] = _mm256_sub_ps(_mm256_sub_ps(b, c), e);
          }
          const __m256 o[2][2] = {
              {_mm256_add_ps(_mm256_add_ps(s0[0], s0[1]), s0[2]),
               _mm256_sub_ps(_mm256_sub_ps(s0[1], s0[2]), s0[3])},
              {_mm256_add_ps(_mm256_add_ps(s1[0], s1[1]), s1[2]),
               _mm256_sub_ps(_mm256_sub_ps(s1[1], s1[2]), s1[3])}};
          float* img = y + (static_cast<std::size_t>(n) * KB + kb) * H * W * 8;
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) {
              const int oy = 2 * ty + i, ox = 2 * tx + j;
              if (oy < H && ox < W)
                _mm256_store_ps(img + (static_cast<std::size_t>(oy) * W + ox) * 8, o[i][j]);
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
    Wino wg(N, C, H, W, O, w.data(), tb, omp_get_max_threads());
    auto wino = [&] {
      wg.run(static_cast<const float*>(src.get_data_handle()),
             static_cast<float*>(mine.get_data_handle()));
    };
    direct();
    wino();
    const float* a = static_cast<const float*>(dst.get_data_handle());
    const float* b = static_cast<const float*>(mine.get_data_handle());
    double scale = 0, err = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(N) * O * H * W; ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
      err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    const double gflop = 2.0 * N * H * W * O * C * 9 * 1e-9;
    for (int round = 1; round <= rounds; ++round) {
      const double td = median_ms(direct), tw = median_ms(wino);
      std::printf(
          "{\"net\":\"%s\",\"shape\":\"%dx%dx%dx%d-%dx3x3-p1\",\"round\":%d,\"threads\":%d,"
          "\"gflop\":%.4f,\"direct_ms\":%.3f,\"direct_impl\":\"%s\",\"winograd_ms\":%.3f,"
          "\"ratio\":%.3f,\"tile_block\":%d,\"rel_err\":%.2e}\n",
          sh.net, N, C, H, W, O, round, omp_get_max_threads(), gflop, td, pd.impl_info_str(), tw,
          tw / td, wg.TB, err / scale);
      std::fflush(stdout);
    }
  }
}
