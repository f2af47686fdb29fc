// Winograd F(2x2, 3x3) convolutions (issue 18) for CPUs where oneDNN 2.6 has none: its Winograd
// kernels need AVX-512, and on AVX2 its direct kernels left resnet18 and googlenet at 1.02-1.21x
// ONNX Runtime's latency (bench/README). A 3x3 stride-1 convolution computes each 2x2 output
// tile from a 4x4 input tile with 16 multiplications per channel pair instead of 36:
//   V = B^T d B      each input tile, 8 channels per vector, into 16 matrices V[pos][tile][C]
//   M = V x U        per pos, one product by the transformed weights U = G g G^T [C][K]
//   y = A^T M A      per output tile, + bias, + residual, activation, into the result
// Tiles go in blocks of kTileBlock per thread, so a block's V and M stay in cache between the
// three steps; the probe bench/probes/winograd_avx2.cpp measured 0.41-0.63x of the direct
// kernels' time at batch 32 on resnet18's and googlenet's 3x3 layers. Every tile's sums run in
// the same order whatever the block and thread count: results are bitwise reproducible, and
// differ from the direct kernels' by rounding (a few 1e-6 of the largest output).
//
// Image, result and residual are channels-last or in blocks of 8 or 16 channels (every such
// layout keeps 8 consecutive channels of a pixel together: one vector). Transformed weights
// take 16/9 of the plain weights' memory; they replace the reordered copy the direct kernel
// keeps, and are made at the first run and after each host write (fixed weights), or at every
// run (weights computed in the graph).
#include "cpu/kernels/winograd.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "compiler/geometry.hpp"
#include "cpu/parallel.hpp"

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define HETGRAPH_WINOGRAD_F2X3 1
#include <immintrin.h>
#else
#define HETGRAPH_WINOGRAD_F2X3 0
#endif

namespace hetgraph::detail::cpu {

#if HETGRAPH_WINOGRAD_F2X3
namespace {

// Tiles per thread block: with 512 channels a block's V and M are 1.5 MB each (L2 holds one
// position's 96 KB slice of V while all of U[pos] streams by), and at batch 32 every layer has
// tens of blocks per thread.
constexpr std::int64_t kTileBlock = 48;
// Fewer tiles than this (batch 1 at 7x7: 16) gain little (0.86x in the probe) and the 16/9
// weights cost the most memory there: the direct kernel keeps them.
constexpr std::int64_t kMinTiles = 32;
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

// c[kRows][16] = a[kRows][kc] (rows lda apart) x b[kc][16].
inline void product_6x16(const float* a, std::int64_t lda, const float* b, std::int64_t kc,
                         float* c, std::int64_t ldc) {
  __m256 acc[kRows][2];
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (std::int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8);
    for (int r = 0; r < kRows; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + p);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    _mm256_storeu_ps(c + r * ldc, acc[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
  }
}

class WinogradF2x3 final : public CpuKernel {
 public:
  explicit WinogradF2x3(const KernelArgs& a)
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
      alpha_ = n.attrs.alpha;
      beta_ = n.attrs.beta;
    } else if (a.in.size() == 3) {
      bias_ = a.in_f(2);
    }
    th_ = (g_.oh + 1) / 2;
    tw_ = (g_.ow + 1) / 2;
    tiles_ = g_.n * th_ * tw_;
    kp_ = (g_.oc + 15) / 16;
    u_.assign(static_cast<std::size_t>(16 * kp_ * 16 * g_.c), 0.0f);
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
    // Smaller blocks where the tiles would not give every thread one (batch 1).
    const std::int64_t per = (tiles_ + ctx.nthreads - 1) / ctx.nthreads;
    const std::int64_t tb =
        std::clamp<std::int64_t>((per + kRows - 1) / kRows * kRows, kRows, kTileBlock);
    const std::int64_t blocks = (tiles_ + tb - 1) / tb;
    const std::int64_t slots = std::min<std::int64_t>({ctx.nthreads, max_threads_, blocks});
    float* scratch = static_cast<float*>(ctx.scratch);
    parallel_for(ctx, slots, 1, [&](std::int64_t s0, std::int64_t s1) {
      for (std::int64_t s = s0; s < s1; ++s) {
        float* v = scratch + s * block_floats(kTileBlock);
        float* m = v + 16 * kTileBlock * g_.c;
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
    return static_cast<std::size_t>(16 * tb * (g_.c + 16 * kp_));
  }

  // U[pos][kp][c][16] = (G g G^T)[pos] for output channel 16 kp + lane, zero past oc.
  void transform_weights(const ExecCtx& ctx) {
    const std::int64_t C = g_.c, K = g_.oc;
    parallel_for(
        ctx, K, std::max<std::int64_t>(1, 4096 / C), [&](std::int64_t k0, std::int64_t k1) {
          for (std::int64_t o = k0; o < k1; ++o)
            for (std::int64_t ci = 0; ci < C; ++ci) {
              const float* w = w_ + (o * C + ci) * 9;
              float gg[4][3], u[4][4];
              for (int j = 0; j < 3; ++j) {
                gg[0][j] = w[j];
                gg[1][j] = 0.5f * (w[j] + w[3 + j] + w[6 + j]);
                gg[2][j] = 0.5f * (w[j] - w[3 + j] + w[6 + j]);
                gg[3][j] = w[6 + j];
              }
              for (int i = 0; i < 4; ++i) {
                u[i][0] = gg[i][0];
                u[i][1] = 0.5f * (gg[i][0] + gg[i][1] + gg[i][2]);
                u[i][2] = 0.5f * (gg[i][0] - gg[i][1] + gg[i][2]);
                u[i][3] = gg[i][2];
              }
              for (int pos = 0; pos < 16; ++pos)
                u_[static_cast<std::size_t>(((pos * kp_ + o / 16) * C + ci) * 16 + o % 16)] =
                    u[pos / 4][pos % 4];
            }
        });
  }

  // Tiles [t0, t0 + nt) of the batch, in a block of tb rows (v, m: this thread's scratch).
  void run_block(std::int64_t t0, std::int64_t nt, std::int64_t tb, float* v, float* m) const {
    const std::int64_t C = g_.c, K16 = 16 * kp_, H = g_.h, W = g_.w;
    const std::int64_t pt = g_.win.pad_begin[0], pl = g_.win.pad_begin[1];
    const std::int64_t vs = tb * C;  // floats between two positions' V
    for (std::int64_t tl = 0; tl < nt; ++tl) {
      const std::int64_t t = t0 + tl, n = t / (th_ * tw_), iy0 = 2 * (t / tw_ % th_) - pt,
                         ix0 = 2 * (t % tw_) - pl;
      const bool inside = iy0 >= 0 && ix0 >= 0 && iy0 + 4 <= H && ix0 + 4 <= W;
      for (std::int64_t cg = 0; cg < C / 8; ++cg) {
        __m256 d[4][4];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            const std::int64_t iy = iy0 + i, ix = ix0 + j;
            d[i][j] = inside || (iy >= 0 && iy < H && ix >= 0 && ix < W)
                          ? _mm256_loadu_ps(x_.p + x_.at(n, cg, iy * W + ix))
                          : _mm256_setzero_ps();
          }
        __m256 s[4][4];
        for (int j = 0; j < 4; ++j) {
          s[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
          s[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
          s[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
          s[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
        }
        float* dst = v + tl * C + 8 * cg;
        for (int i = 0; i < 4; ++i) {
          _mm256_storeu_ps(dst + (4 * i + 0) * vs, _mm256_sub_ps(s[i][0], s[i][2]));
          _mm256_storeu_ps(dst + (4 * i + 1) * vs, _mm256_add_ps(s[i][1], s[i][2]));
          _mm256_storeu_ps(dst + (4 * i + 2) * vs, _mm256_sub_ps(s[i][2], s[i][1]));
          _mm256_storeu_ps(dst + (4 * i + 3) * vs, _mm256_sub_ps(s[i][1], s[i][3]));
        }
      }
    }
    // The product runs whole steps of kRows tiles: the rows past the last tile are zeros.
    const std::int64_t rows = (nt + kRows - 1) / kRows * kRows;
    for (int pos = 0; pos < 16; ++pos)
      std::fill(v + pos * vs + nt * C, v + pos * vs + rows * C, 0.0f);
    for (int pos = 0; pos < 16; ++pos)
      for (std::int64_t kp = 0; kp < kp_; ++kp) {
        const float* u = u_.data() + (pos * kp_ + kp) * C * 16;
        for (std::int64_t r = 0; r < rows; r += kRows)
          product_6x16(v + pos * vs + r * C, C, u, C, m + (pos * tb + r) * K16 + kp * 16, K16);
      }
    const std::int64_t ms = tb * K16;  // floats between two positions' M
    float* y = const_cast<float*>(y_.p);
    for (std::int64_t tl = 0; tl < nt; ++tl) {
      const std::int64_t t = t0 + tl, n = t / (th_ * tw_), oy0 = 2 * (t / tw_ % th_),
                         ox0 = 2 * (t % tw_);
      for (std::int64_t kg = 0; kg < g_.oc / 8; ++kg) {
        const float* src = m + tl * K16 + 8 * kg;
        __m256 s0[4], s1[4];
        for (int j = 0; j < 4; ++j) {
          const __m256 a = _mm256_loadu_ps(src + j * ms), b = _mm256_loadu_ps(src + (4 + j) * ms),
                       c = _mm256_loadu_ps(src + (8 + j) * ms),
                       e = _mm256_loadu_ps(src + (12 + j) * ms);
          s0[j] = _mm256_add_ps(_mm256_add_ps(a, b), c);
          s1[j] = _mm256_sub_ps(_mm256_sub_ps(b, c), e);
        }
        const __m256 out[2][2] = {{_mm256_add_ps(_mm256_add_ps(s0[0], s0[1]), s0[2]),
                                   _mm256_sub_ps(_mm256_sub_ps(s0[1], s0[2]), s0[3])},
                                  {_mm256_add_ps(_mm256_add_ps(s1[0], s1[1]), s1[2]),
                                   _mm256_sub_ps(_mm256_sub_ps(s1[1], s1[2]), s1[3])}};
        const __m256 bias = bias_ ? _mm256_loadu_ps(bias_ + 8 * kg) : _mm256_setzero_ps();
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) {
            const std::int64_t oy = oy0 + i, ox = ox0 + j;
            if (oy >= g_.oh || ox >= g_.ow) continue;
            const std::int64_t pix = oy * g_.ow + ox;
            __m256 r = bias_ ? _mm256_add_ps(out[i][j], bias) : out[i][j];
            if (r_.p) r = _mm256_add_ps(r, _mm256_loadu_ps(r_.p + r_.at(n, kg, pix)));
            _mm256_storeu_ps(y + y_.at(n, kg, pix), activate(r));
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
        return _mm256_blendv_ps(_mm256_mul_ps(x, _mm256_set1_ps(alpha_)), x,
                                _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
      case OpKind::Clip:
        return _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(alpha_)), _mm256_set1_ps(beta_));
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
  float alpha_ = 0.0f, beta_ = 0.0f;
  const std::atomic<std::uint64_t>* host_writes_;
  bool fixed_;
  int max_threads_;
  std::int64_t th_ = 0, tw_ = 0, tiles_ = 0, kp_ = 0;
  std::vector<float> u_;
  std::uint64_t seen_ = 0;
  bool fresh_ = false;
};

}  // namespace
#endif

const char* reject_winograd_f2x3(const KernelArgs& a) {
#if HETGRAPH_WINOGRAD_F2X3
  if (!a.plan.winograd_f2x3) return "off (CompileOptions::winograd_f2x3)";
  const PlanNode& n = a.node;
  const ImageGeom g = conv_geom(a.in_shape(0), a.in_shape(1), n.attrs);
  const Window2d& w = g.win;
  const std::array<std::int64_t, 2> one{1, 1};
  if (g.groups() != 1 || w.stride != one || w.dilation != one || a.in_shape(1)[2] != 3 ||
      a.in_shape(1)[3] != 3)
    return "not a 3x3 stride-1 convolution of one group";
  if (w.pad_begin[0] > 2 || w.pad_begin[1] > 2) return "padding wider than the window";
  if (g.c % 8 != 0 || g.oc % 8 != 0) return "channels not in 8s";
  if (g.n * ((g.oh + 1) / 2) * ((g.ow + 1) / 2) < kMinTiles) return "too few output tiles";
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
#else
  (void)a;
  return "built without AVX2 and FMA, or with AVX-512 (oneDNN's kernels)";
#endif
}

bool winograd_f2x3_built() {
  return HETGRAPH_WINOGRAD_F2X3 != 0;
}

std::unique_ptr<CpuKernel> make_winograd_f2x3(const KernelArgs& a) {
#if HETGRAPH_WINOGRAD_F2X3
  return std::make_unique<WinogradF2x3>(a);
#else
  (void)a;
  return nullptr;
#endif
}

}  // namespace hetgraph::detail::cpu
