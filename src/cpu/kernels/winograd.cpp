// SPDX-License-Identifier: Apache-2.0
// Winograd convolutions F(2x2, 3x3) and F(4x4, 3x3) (issue 18) for CPUs where oneDNN 2.6 has
// none: its Winograd kernels need AVX-512, and on AVX2 its direct kernels left resnet18 and
// googlenet at 1.02-1.21x ONNX Runtime's latency (bench/history.md). A 3x3 stride-1 convolution
// computes each MxM output tile from an (M+2)x(M+2) input tile: per channel pair, 16
// multiplications for 4 outputs (F(2x2)) or 36 for 16 (F(4x4)), against 9 per output directly:
//   V = B^T d B      each input tile, 8 channels per vector, into (M+2)^2 matrices V[pos][tile][C]
//   M = V x U        per pos, one product by the transformed weights U = G g G^T [C][K]
//   y = A^T M A      per output tile, + bias, + residual, activation, into the result
// Tiles go in blocks of kTileBlock per thread, so a block's V and M stay in cache between the
// three steps; where a thread would have at most one block (batch 1), the threads split the
// tiles, then the output channels (run_shared). The probe bench/probes/winograd_avx2.cpp
// measured 0.49-0.78x (F(2x2)) and 0.36-0.53x (F(4x4), 28x28 and larger) of the direct kernels'
// time at batch 32 on resnet18's and googlenet's 3x3 layers. Every tile's sums run in the same
// order whatever the block and thread count: results are bitwise reproducible, and differ from
// the direct kernels' by rounding (a few 1e-6 of the largest output with F(2x2), up to a few
// 1e-5 with F(4x4)).
//
// Image, result and residual are channels-last or in blocks of 8 or 16 channels (every such
// layout keeps 8 consecutive channels of a pixel together: one vector). Transformed weights
// take 16/9 (F(2x2)) or 36/9 (F(4x4)) of the plain weights' memory; they replace the reordered
// copy the direct kernel keeps, and are made at the first run and after each host write (fixed
// weights), or at every run (weights computed in the graph).
//
// Compiled for the code paths with AVX2 and FMA (code_path.hpp), into their namespace; the
// AVX-512 path has them too (8 lanes), for layers with enough tiles (kMinTiles): oneDNN's own
// AVX-512 Winograd stays behind CompileOptions::winograd_convs, for its memory (nChw16c
// throughout, a large scratchpad), while these keep the layer's layout and replace the direct
// kernel's weights.
#include "cpu/simd/code_path.hpp"

#if HETGRAPH_OWN_WINOGRAD
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "compiler/geometry.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "hetgraph/error.hpp"
#include "util/env.hpp"

namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS {

namespace {

// Tiles per thread block: with 512 channels a block's V and M are 1.5 MB each (L2 holds one
// position's 96 KB slice of V while all of U[pos] streams by), and at batch 32 every layer has
// tens of blocks per thread.
constexpr std::int64_t kTileBlock = 48;
#if defined(__AVX512F__)
// With AVX-512, oneDNN's direct kernels are stronger and these (8 lanes) pay with enough tiles
// of their own size only: on a Zen 4, at 196 tiles and more (batch 1 at 56x56 with F(4x4), at
// 28x28 with F(2x2)), F(4x4) took 0.40-0.86x the direct kernels' time and F(2x2) 0.62-1.09x
// (median 0.78); F(2x2) took 0.96-1.28x (median 1.19) at 128 tiles and 0.65-1.71x (median 1.16)
// at 49 and fewer (bench/results/2026-12-05-own-winograd-avx512-layers.jsonl).
constexpr std::int64_t kMinTiles = 192;
#else
// Fewer tiles than this gain little: batch 1 at 7x7 (16 tiles) has just enough, at 0.85x the
// direct kernel's time (bench/history.md, "Batch 1: the weights moved ...").
constexpr std::int64_t kMinTiles = 16;
#endif
// F(4x4, 3x3) where tiles of 4 waste little of the result (at most 3 rows or columns in 28) and
// its 36/9 weights are no larger than the layer's image and result (never at batch 1 past 56x56).
constexpr std::int64_t kF4MinSide = 28;
constexpr int kRows = 6;  // tiles per step of the product's register kernel (6 x 16 sums)

// An activation whose 8 consecutive channels from a multiple of 8 are contiguous: channels-last
// (block = C) or blocked (nChw8c, nChw16c).
struct Act {
  const float* p = nullptr;
  std::int64_t c = 0, hw = 0, block = 0;
  // the 8 channels from 8 * g at pixel `pix` of image n
  std::int64_t at(std::int64_t n, std::int64_t g, std::int64_t pix) const {
    const std::int64_t ch = 8 * g;
    return n * c * hw + ch / block * hw * block + pix * block + ch % block;
  }
};
Act act(const void* p, const Shape& s, ActivationLayout l) {
  const int b = channel_block(l);
  return {static_cast<const float*>(p), s[1], s[2] * s[3], b == 1 ? s[1] : b};
}

// c[kRows][16] = a[kRows][kc] (rows lda apart) x b[kc][16]. Twelve named sums: held in an
// array (acc[6][2]), GCC 12 stored every sum to the stack at each step wherever this was inlined
// into a loop nest it did not fully unroll, and the products ran at half the speed.
// With kPrefetch, the b panel that follows (`next`, as long) is fetched into L1 meanwhile.
template <bool kPrefetch>
inline void product_6x16(const float* a, std::int64_t lda, const float* b, std::int64_t kc,
                         float* c, std::int64_t ldc, const float* next = nullptr) {
  __m256 s00 = _mm256_setzero_ps(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00;
  __m256 s30 = s00, s31 = s00, s40 = s00, s41 = s00, s50 = s00, s51 = s00;
  const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda,
              *a5 = a + 5 * lda;
  for (std::int64_t p = 0; p < kc; ++p) {
    if constexpr (kPrefetch)
      _mm_prefetch(reinterpret_cast<const char*>(next + p * 16), _MM_HINT_T0);
    const __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8);
    __m256 x = _mm256_broadcast_ss(a0 + p);
    s00 = _mm256_fmadd_ps(x, b0, s00);
    s01 = _mm256_fmadd_ps(x, b1, s01);
    x = _mm256_broadcast_ss(a1 + p);
    s10 = _mm256_fmadd_ps(x, b0, s10);
    s11 = _mm256_fmadd_ps(x, b1, s11);
    x = _mm256_broadcast_ss(a2 + p);
    s20 = _mm256_fmadd_ps(x, b0, s20);
    s21 = _mm256_fmadd_ps(x, b1, s21);
    x = _mm256_broadcast_ss(a3 + p);
    s30 = _mm256_fmadd_ps(x, b0, s30);
    s31 = _mm256_fmadd_ps(x, b1, s31);
    x = _mm256_broadcast_ss(a4 + p);
    s40 = _mm256_fmadd_ps(x, b0, s40);
    s41 = _mm256_fmadd_ps(x, b1, s41);
    x = _mm256_broadcast_ss(a5 + p);
    s50 = _mm256_fmadd_ps(x, b0, s50);
    s51 = _mm256_fmadd_ps(x, b1, s51);
  }
  const __m256 out[kRows][2] = {{s00, s01}, {s10, s11}, {s20, s21},
                                {s30, s31}, {s40, s41}, {s50, s51}};
  for (int r = 0; r < kRows; ++r) {
    _mm256_storeu_ps(c + r * ldc, out[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, out[r][1]);
  }
}

// One column (or row) of a tile's transforms, on vectors of 8 channels (Lavin and Gray's B, G,
// A). F(2x2, 3x3): 4x4 input tiles; F(4x4, 3x3): 6x6.
template <int M>
struct Transforms;
template <>
struct Transforms<2> {
  static constexpr int kAlpha = 4;
  static constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
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
};
template <>
struct Transforms<4> {
  static constexpr int kAlpha = 6;
  static constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                                      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                      {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                      {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                      {0, 0, 1}};
  static void in(const __m256* d, __m256* r) {
    const __m256 four = _mm256_set1_ps(4.0f), minus4 = _mm256_set1_ps(-4.0f),
                 minus5 = _mm256_set1_ps(-5.0f);
    r[0] = _mm256_fmadd_ps(four, d[0], _mm256_fmadd_ps(minus5, d[2], d[4]));
    const __m256 t1 = _mm256_fmadd_ps(minus4, d[2], d[4]), t2 = _mm256_fmadd_ps(minus4, d[1], d[3]);
    r[1] = _mm256_add_ps(t1, t2);
    r[2] = _mm256_sub_ps(t1, t2);
    const __m256 t3 = _mm256_sub_ps(d[4], d[2]),
                 t4 = _mm256_mul_ps(_mm256_set1_ps(2.0f), _mm256_sub_ps(d[1], d[3]));
    r[3] = _mm256_sub_ps(t3, t4);
    r[4] = _mm256_add_ps(t3, t4);
    r[5] = _mm256_fmadd_ps(four, d[1], _mm256_fmadd_ps(minus5, d[3], d[5]));
  }
  static void out(const __m256* m, __m256* o) {
    const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]),
                 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
    o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d, b);
    o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), c, a);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d, b), m[5]);
  }
};

// F(MxM, 3x3): P = (M + 2)^2 positions per tile.
template <int M>
class Winograd final : public CpuKernel {
  static constexpr int kA = Transforms<M>::kAlpha, kP = kA * kA;

 public:
  explicit Winograd(const KernelArgs& a)
      : g_(conv_geom(a.in_shape(0), a.in_shape(1), a.node.attrs)),
        w_(a.in_f(1)),
        host_writes_(a.host_writes),
        fixed_(a.host_writes != nullptr && fixed_between_runs(a.plan, a.node.inputs[1])),
        max_threads_(std::max(1, a.max_threads)) {
    for (int t : a.team_sizes) max_threads_ = std::max(max_threads_, t);
    const PlanNode& n = a.node;
    x_ = act(a.in[0], a.in_shape(0), a.plan.nodes[n.inputs[0]].layout);
    y_ = act(a.out, a.out_shape(), n.layout);
    if (n.op == OpKind::FusedConv2d) {
      const ConvEpilogue& e = n.attrs.get<ConvEpilogue>();
      if (e.bias) bias_ = a.in_f(2);
      if (e.accumulate) {
        r_ = act(a.in.back(), a.out_shape(), a.plan.nodes[n.inputs.back()].layout);
      }
      has_op_ = e.has_op;
      op_ = e.op;
      slope_ = e.leaky.slope;
      lo_ = e.clip.lo;
      hi_ = e.clip.hi;
    } else if (a.in.size() == 3) {
      bias_ = a.in_f(2);
    }
    th_ = (g_.oh + M - 1) / M;
    tw_ = (g_.ow + M - 1) / M;
    tiles_ = g_.n * th_ * tw_;
    kp_ = (g_.oc + 15) / 16;
    u_.assign(static_cast<std::size_t>(kP * kp_ * 16 * g_.c), 0.0f);
  }

  std::size_t scratch_bytes() const override {
    return static_cast<std::size_t>(max_threads_) * block_floats(kTileBlock) * sizeof(float);
  }

  void run(const ExecCtx& ctx) override {
    if (!fixed_ || !fresh_ || host_writes_->load(std::memory_order_acquire) != seen_) {
      if (fixed_) seen_ = host_writes_->load(std::memory_order_acquire);
      transform_weights(ctx);
      fresh_ = true;
    }
    const std::int64_t threads = std::min<std::int64_t>(ctx.nthreads, max_threads_);
    if (threads > 1 && tiles_ <= kTileBlock * threads) {
      run_shared(ctx);
      return;
    }
    // Blocks of at most kTileBlock tiles, as many as a multiple of the threads.
    std::int64_t blocks = (tiles_ + kTileBlock - 1) / kTileBlock;
    blocks = (blocks + threads - 1) / threads * threads;
    const std::int64_t per = (tiles_ + blocks - 1) / blocks;
    const std::int64_t tb = std::min(kTileBlock, (per + kRows - 1) / kRows * kRows);
    blocks = (tiles_ + tb - 1) / tb;
    const std::int64_t slots = std::min(threads, blocks);
    float* scratch = static_cast<float*>(ctx.scratch);
    parallel_for(ctx, slots, 1, [&](std::int64_t s0, std::int64_t s1) {
      for (std::int64_t s = s0; s < s1; ++s) {
        float* v = scratch + s * block_floats(kTileBlock);
        float* m = v + kP * kTileBlock * g_.c;
        for (std::int64_t b = blocks * s / slots; b < blocks * (s + 1) / slots; ++b) {
          const std::int64_t t0 = b * tb;
          run_block(t0, std::min(tb, tiles_ - t0), tb, v, m);
        }
      }
    });
  }

 private:
  // V then M of one thread's block of tb tiles.
  std::size_t block_floats(std::int64_t tb) const {
    return static_cast<std::size_t>(kP * tb * (g_.c + 16 * kp_));
  }

  // U[pos][kp][c][16] = (G g G^T)[pos] for output channel 16 kp + lane (zero past oc), in double
  // and rounded once.
  void transform_weights(const ExecCtx& ctx) {
    const std::int64_t C = g_.c, K = g_.oc;
    const auto& G = Transforms<M>::kG;
    parallel_for(
        ctx, K, std::max<std::int64_t>(1, 4096 / C), [&](std::int64_t k0, std::int64_t k1) {
          for (std::int64_t o = k0; o < k1; ++o)
            for (std::int64_t ci = 0; ci < C; ++ci) {
              const float* w = w_ + (o * C + ci) * 9;
              double gg[kA][3];
              for (int i = 0; i < kA; ++i)
                for (int j = 0; j < 3; ++j)
                  gg[i][j] = G[i][0] * w[j] + G[i][1] * w[3 + j] + G[i][2] * w[6 + j];
              for (int i = 0; i < kA; ++i)
                for (int j = 0; j < kA; ++j)
                  u_[static_cast<std::size_t>((((i * kA + j) * kp_ + o / 16) * C + ci) * 16 +
                                              o % 16)] =
                      static_cast<float>(gg[i][0] * G[j][0] + gg[i][1] * G[j][1] +
                                         gg[i][2] * G[j][2]);
            }
        });
  }

  // At most one block's tiles per thread (batch 1 at 14x14 and 7x7): one V and M for the whole
  // batch, the input transform split by tiles, then the products and output transform split by
  // panels of 16 output channels. Each thread then reads only its panels' share of the
  // transformed weights (at 7x7 and 512 channels 16.8 MB, against V's 1.6 MB), and no rows go to
  // blocks of uneven size. The scratch holds it: rows <= kTileBlock * threads.
  void run_shared(const ExecCtx& ctx) {
    const std::int64_t rows = (tiles_ + kRows - 1) / kRows * kRows;
    const std::int64_t vs = rows * g_.c, ms = rows * 16 * kp_;
    float* v = static_cast<float*>(ctx.scratch);
    float* m = v + kP * vs;
    parallel_for(ctx, tiles_, 1, [&](std::int64_t t0, std::int64_t t1) {
      transform_in(t0, t1 - t0, v + t0 * g_.c, vs);
    });
    zero_rows(tiles_, rows, v, vs);
    parallel_for(ctx, kp_, 1, [&](std::int64_t p0, std::int64_t p1) {
      products(p0, p1, rows, v, vs, m, ms, true);
      transform_out(0, tiles_, 2 * p0, std::min(2 * p1, g_.oc / 8), m, ms);
    });
  }

  // Tiles [t0, t0 + nt) of the batch, in a block of tb rows (v, m: this thread's scratch).
  void run_block(std::int64_t t0, std::int64_t nt, std::int64_t tb, float* v, float* m) const {
    const std::int64_t vs = tb * g_.c, ms = tb * 16 * kp_;  // floats between two positions'
    const std::int64_t rows = (nt + kRows - 1) / kRows * kRows;
    transform_in(t0, nt, v, vs);
    zero_rows(nt, rows, v, vs);
    products(0, kp_, rows, v, vs, m, ms, false);
    transform_out(t0, nt, 0, g_.oc / 8, m, ms);
  }

  // V rows of tiles [t0, t0 + nt): tile t0 + i at v + i * C + pos * vs.
  void transform_in(std::int64_t t0, std::int64_t nt, float* v, std::int64_t vs) const {
    const std::int64_t C = g_.c, H = g_.h, W = g_.w;
    const std::int64_t pt = g_.win.pad_begin[0], pl = g_.win.pad_begin[1];
    for (std::int64_t tl = 0; tl < nt; ++tl) {
      const std::int64_t t = t0 + tl, n = t / (th_ * tw_), iy0 = M * (t / tw_ % th_) - pt,
                         ix0 = M * (t % tw_) - pl;
      const bool inside = iy0 >= 0 && ix0 >= 0 && iy0 + kA <= H && ix0 + kA <= W;
      for (std::int64_t cg = 0; cg < C / 8; ++cg) {
        __m256 d[kA][kA], s[kA][kA], col[kA], r[kA];
        for (int i = 0; i < kA; ++i)
          for (int j = 0; j < kA; ++j) {
            const std::int64_t iy = iy0 + i, ix = ix0 + j;
            d[i][j] = inside || (iy >= 0 && iy < H && ix >= 0 && ix < W)
                          ? _mm256_loadu_ps(x_.p + x_.at(n, cg, iy * W + ix))
                          : _mm256_setzero_ps();
          }
        for (int j = 0; j < kA; ++j) {  // B^T d, column by column
          for (int i = 0; i < kA; ++i) col[i] = d[i][j];
          Transforms<M>::in(col, r);
          for (int i = 0; i < kA; ++i) s[i][j] = r[i];
        }
        float* dst = v + tl * C + 8 * cg;
        for (int i = 0; i < kA; ++i) {  // then (B^T d) B, row by row
          Transforms<M>::in(s[i], r);
          for (int j = 0; j < kA; ++j) _mm256_storeu_ps(dst + (i * kA + j) * vs, r[j]);
        }
      }
    }
  }

  // The product runs whole steps of kRows rows: the rows past the last tile are zeros.
  void zero_rows(std::int64_t from, std::int64_t to, float* v, std::int64_t vs) const {
    for (int pos = 0; pos < kP; ++pos)
      std::fill(v + pos * vs + from * g_.c, v + pos * vs + to * g_.c, 0.0f);
  }

  // M = V x U for panels [p0, p1) of 16 output channels, every position. With `prefetch`, each
  // panel's first row step fetches the next panel: for the few rows of batch 1, where the
  // transformed weights stream from memory once per run (resnet18's 7x7 layers 7% faster in
  // traces; with 8 row steps per panel at batch 32 it cost time).
  void products(std::int64_t p0, std::int64_t p1, std::int64_t rows, const float* v,
                std::int64_t vs, float* m, std::int64_t ms, bool prefetch) const {
    const std::int64_t C = g_.c, K16 = 16 * kp_;
    for (int pos = 0; pos < kP; ++pos)
      for (std::int64_t kp = p0; kp < p1; ++kp) {
        const float* u = u_.data() + (pos * kp_ + kp) * C * 16;
        std::int64_t r = 0;
        if (prefetch) {
          const bool last = pos == kP - 1 && kp == p1 - 1;
          const float* next =
              last ? u
                   : u_.data() + (kp + 1 < p1 ? pos * kp_ + kp + 1 : (pos + 1) * kp_ + p0) * C * 16;
          product_6x16<true>(v + pos * vs, C, u, C, m + pos * ms + kp * 16, K16, next);
          r = kRows;
        }
        for (; r < rows; r += kRows)
          product_6x16<false>(v + pos * vs + r * C, C, u, C, m + pos * ms + r * K16 + kp * 16, K16);
      }
  }

  // The results of tiles [t0, t0 + nt) (M rows from 0) for channel groups [g0, g1) of 8.
  void transform_out(std::int64_t t0, std::int64_t nt, std::int64_t g0, std::int64_t g1,
                     const float* m, std::int64_t ms) const {
    const std::int64_t K16 = 16 * kp_;
    float* y = const_cast<float*>(y_.p);
    for (std::int64_t tl = 0; tl < nt; ++tl) {
      const std::int64_t t = t0 + tl, n = t / (th_ * tw_), oy0 = M * (t / tw_ % th_),
                         ox0 = M * (t % tw_);
      for (std::int64_t kg = g0; kg < g1; ++kg) {
        const float* src = m + tl * K16 + 8 * kg;
        __m256 s[M][kA], col[kA], o[M];
        for (int j = 0; j < kA; ++j) {  // A^T m, column by column
          for (int i = 0; i < kA; ++i) col[i] = _mm256_loadu_ps(src + (i * kA + j) * ms);
          Transforms<M>::out(col, o);
          for (int i = 0; i < M; ++i) s[i][j] = o[i];
        }
        const __m256 bias = bias_ ? _mm256_loadu_ps(bias_ + 8 * kg) : _mm256_setzero_ps();
        for (int i = 0; i < M; ++i) {  // then (A^T m) A, row by row
          const std::int64_t oy = oy0 + i;
          if (oy >= g_.oh) break;
          Transforms<M>::out(s[i], o);
          for (int j = 0; j < M; ++j) {
            const std::int64_t ox = ox0 + j;
            if (ox >= g_.ow) break;
            const std::int64_t pix = oy * g_.ow + ox;
            __m256 r = bias_ ? _mm256_add_ps(o[j], bias) : o[j];
            if (r_.p) r = _mm256_add_ps(r, _mm256_loadu_ps(r_.p + r_.at(n, kg, pix)));
            _mm256_storeu_ps(y + y_.at(n, kg, pix), activate(r));
          }
        }
      }
    }
  }

  // The epilogue's activation as oneDNN's post-ops compute it (NaN stays NaN through relu and
  // leaky relu; clip gives its lower bound, as oneDNN's x > lo ? ... : lo).
  __m256 activate(__m256 x) const {
    if (!has_op_) return x;
    switch (op_) {
      case OpKind::Relu:
        return _mm256_max_ps(_mm256_setzero_ps(), x);
      case OpKind::LeakyRelu:
        return _mm256_blendv_ps(_mm256_mul_ps(x, _mm256_set1_ps(slope_)), x,
                                _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
      case OpKind::Clip:
        return _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(lo_)), _mm256_set1_ps(hi_));
      default:
        return x;
    }
  }

  ImageGeom g_;
  const float* w_;
  const float* bias_ = nullptr;
  Act x_, y_, r_;
  bool has_op_ = false;
  OpKind op_{};
  float slope_ = 0.0f, lo_ = 0.0f, hi_ = 0.0f;  // the fused op's (ConvEpilogue)
  const std::atomic<std::uint64_t>* host_writes_;
  bool fixed_;
  int max_threads_;
  std::int64_t th_ = 0, tw_ = 0, tiles_ = 0, kp_ = 0;
  std::vector<float> u_;
  std::uint64_t seen_ = 0;
  bool fresh_ = false;
};

}  // namespace

namespace {

// What both kernels need: a 3x3 stride-1 convolution of one group with channels in 8s, whose
// image, result and residual keep 8 channels of a pixel together, and an epilogue they compute.
const char* reject_convolution(const KernelArgs& a) {
  if (!a.plan.own_winograd) return "off (CompileOptions::Experimental::own_winograd)";
  const PlanNode& n = a.node;
  const ImageGeom g = conv_geom(a.in_shape(0), a.in_shape(1), n.attrs);
  const Window2d& w = g.win;
  if (w.exact) return "exact sums asked (Conv2dOptions::exact)";
  const std::array<std::int64_t, 2> one{1, 1};
  if (g.groups() != 1 || w.stride != one || w.dilation != one || a.in_shape(1)[2] != 3 ||
      a.in_shape(1)[3] != 3)
    return "not a 3x3 stride-1 convolution of one group";
  if (g.c % 8 != 0 || g.oc % 8 != 0) return "channels not in 8s";
  auto vectors = [&](std::uint32_t v) {
    const ActivationLayout l = a.plan.nodes[v].layout;
    return l == ActivationLayout::nhwc || channel_block(l) >= 8;
  };
  if (!vectors(n.inputs[0]) || !vectors(a.index)) return "image or result in plain NCHW";
  if (n.op == OpKind::FusedConv2d) {
    const ConvEpilogue& e = n.attrs.get<ConvEpilogue>();
    if (e.accumulate && !vectors(n.inputs.back())) return "residual in plain NCHW";
    if (e.has_op && e.op != OpKind::Relu && e.op != OpKind::LeakyRelu && e.op != OpKind::Clip)
      return "an epilogue op other than relu, leaky_relu, clip";
  }
  return nullptr;
}

}  // namespace

const char* reject_winograd_f4x3(const KernelArgs& a) {
  if (const char* why = reject_convolution(a)) return why;
  const ImageGeom g = conv_geom(a.in_shape(0), a.in_shape(1), a.node.attrs);
  if (g.oh < kF4MinSide || g.ow < kF4MinSide) return "result smaller than 28x28";
#if defined(__AVX512F__)
  if (g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4) < winograd_min_tiles())
    return "too few output tiles";
#endif
  const double u = 36.0 * static_cast<double>(g.c * (g.oc + 15) / 16 * 16);
  if (u > static_cast<double>(a.in_shape(0).numel() + a.out_shape().numel()))
    return "transformed weights larger than image and result";
  return nullptr;
}

const char* reject_winograd_f2x3(const KernelArgs& a) {
  if (const char* why = reject_convolution(a)) return why;
  const ImageGeom g = conv_geom(a.in_shape(0), a.in_shape(1), a.node.attrs);
  if (g.n * ((g.oh + 1) / 2) * ((g.ow + 1) / 2) < winograd_min_tiles())
    return "too few output tiles";
  return nullptr;
}

std::unique_ptr<CpuKernel> make_winograd_f4x3(const KernelArgs& a) {
  return std::make_unique<Winograd<4>>(a);
}

std::unique_ptr<CpuKernel> make_winograd_f2x3(const KernelArgs& a) {
  return std::make_unique<Winograd<2>>(a);
}

std::int64_t winograd_min_tiles() {
  // HETGRAPH_WINOGRAD_MIN_TILES: to measure the kernels where the default declines them
  // (bench/models/winograd_layers.sh).
  static const auto tiles = static_cast<std::int64_t>(
      env_real<UsageError>("HETGRAPH_WINOGRAD_MIN_TILES", 0, 1e9, static_cast<double>(kMinTiles)));
  return tiles;
}

}  // namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS
#endif  // HETGRAPH_OWN_WINOGRAD
