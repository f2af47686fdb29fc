// SPDX-License-Identifier: Apache-2.0
// One code path's vector kernels and its table (code_path.hpp): compiled once per x86-64 level,
// each time into that level's namespace (CMakeLists.txt, isa_ns.hpp).
#include "cpu/simd/code_path.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cstring>
#include <limits>

#include "cpu/simd/vmath.hpp"

namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS {

namespace {

constexpr std::int64_t L = vm::kLanes;

// o = fv(x) (+ add), kLanes at a time; the tail through padded vectors (as vm::map does).
template <class F>
void map_with(F&& fv, const float* x, const float* add, float* o, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    vm::vf v = fv(vm::load(x + i));
    if (add) v += vm::load(add + i);
    vm::store(o + i, v);
  }
  if (i < n) {
    float xb[L] = {}, ab[L] = {};
    const auto rest = static_cast<std::size_t>(n - i) * sizeof(float);
    std::memcpy(xb, x + i, rest);
    if (add) std::memcpy(ab, add + i, rest);
    vm::vf v = fv(vm::load(xb));
    if (add) v += vm::load(ab);
    vm::store(xb, v);
    std::memcpy(o + i, xb, rest);
  }
}

void map(VecFn f, float alpha, const float* x, const float* add, float* o, std::int64_t n) {
  switch (f) {
    case VecFn::exp:
      return map_with([](vm::vf v) { return vm::exp(v); }, x, add, o, n);
    case VecFn::log:
      return map_with([](vm::vf v) { return vm::log(v); }, x, add, o, n);
    case VecFn::neg_log:
      return map_with([](vm::vf v) { return -vm::log(v); }, x, add, o, n);
    case VecFn::sigmoid:
      return map_with([](vm::vf v) { return vm::sigmoid(v); }, x, add, o, n);
    case VecFn::tanh:
      return map_with([](vm::vf v) { return vm::tanh(v); }, x, add, o, n);
    case VecFn::erf:
      return map_with([](vm::vf v) { return vm::erf(v); }, x, add, o, n);
    case VecFn::relu:  // NaN stays NaN
      return map_with([](vm::vf v) { return v <= 0.0f ? vm::splat(0.0f) : v; }, x, add, o, n);
    case VecFn::scale:
      return map_with([alpha](vm::vf v) { return v * alpha; }, x, add, o, n);
    case VecFn::neg:
      return map_with([](vm::vf v) { return -v; }, x, add, o, n);
    case VecFn::identity:
      return map_with([](vm::vf v) { return v; }, x, add, o, n);
  }
}

// The lanes' largest, a < b ? b : a over them in a fixed order (as std::max: a NaN is never
// taken over a number).
float lanes_max(vm::vf m) {
  float r = m[0];
  for (int l = 1; l < vm::kLanes; ++l) r = r < m[l] ? m[l] : r;
  return r;
}
// The lanes' sum, pairwise in a fixed order.
float lanes_sum(vm::vf v) {
  for (int w = vm::kLanes / 2; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) v[l] += v[l + w];
  }
  return v[0];
}

// In explicit vectors: `omp simd reduction(max)` with std::max stayed scalar (2 cycles an
// element, more than the exponentials after it).
float line_max(const float* x, std::int64_t n, std::int64_t s) {
  float m = -std::numeric_limits<float>::infinity();
  std::int64_t j = 0;
  if (s == 1) {
    vm::vf mv = vm::splat(m);
    for (; j + vm::kLanes <= n; j += vm::kLanes) {
      const vm::vf v = vm::load(x + j);
      mv = mv < v ? v : mv;
    }
    m = lanes_max(mv);
  }
  for (; j < n; ++j) m = m < x[j * s] ? x[j * s] : m;
  return m;
}

// One score as ScoreRows says (the vector code's operations on one element).
float score(float v, const ScoreRows& h, const float* m, std::int64_t j) {
  if (h.scaled) v = h.divide ? v / h.scale : v * h.scale;
  return m != nullptr ? v + m[j * h.mask_col] : v;
}

void exp_rows(float* s, std::int64_t rows, std::int64_t n, const ScoreRows& h, float* inv) {
  using vm::vf;
  const vf c = vm::splat(h.scale);
  constexpr std::int64_t L = vm::kLanes;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = s + r * n;
    const float* m = h.mask != nullptr ? h.mask + r * h.mask_row : nullptr;
    vf mv = vm::splat(-std::numeric_limits<float>::infinity());
    std::int64_t j = 0;
    for (; j + L <= n; j += L) {
      vf v = vm::load(row + j);
      if (h.scaled) v = h.divide ? v / c : v * c;
      if (m != nullptr && h.mask_col == 1) {
        v += vm::load(m + j);
      } else if (m != nullptr) {
        for (std::int64_t l = 0; l < L; ++l) v[l] += m[(j + l) * h.mask_col];
      }
      vm::store(row + j, v);
      mv = mv < v ? v : mv;
    }
    float mx = lanes_max(mv);
    for (; j < n; ++j) {
      row[j] = score(row[j], h, m, j);
      mx = mx < row[j] ? row[j] : mx;
    }
    const vf mxv = vm::splat(mx);
    vf sum = vm::splat(0.0f);
    for (j = 0; j + L <= n; j += L) {
      const vf e = vm::exp(vm::load(row + j) - mxv);
      vm::store(row + j, e);
      sum += e;
    }
    if (j < n) {  // the tail through a vector padded with -inf (exp: 0)
      vf t = vm::splat(-std::numeric_limits<float>::infinity());
      for (std::int64_t l = 0; j + l < n; ++l) t[l] = row[j + l];
      const vf e = vm::exp(t - mxv);
      for (std::int64_t l = 0; j + l < n; ++l) row[j + l] = e[l];
      sum += e;
    }
    inv[r] = 1.0f / lanes_sum(sum);
  }
}

const auto vexp = [](vm::vf v) { return vm::exp(v); };

// Softmax (or log-softmax) of contiguous rows. Rows as short as MNIST's 10 classes would
// leave a per-row vector loop in its scalar tail, so rows are taken in blocks: per-row
// maxima first, then one flat vectorised exp over the whole block, then per-row sums.
void softmax_rows(const float* x, float* o, std::int64_t rows, std::int64_t n, bool log_sm) {
  constexpr std::int64_t kBlock = 2048;
  float mx[kBlock], sh[kBlock];
  if (n > kBlock) {
    // Long rows: each row in kBlock pieces (max, then exp and sum, then scale).
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * n;
      float* orow = o + r * n;
      const float m = line_max(xr, n, 1);
      double sum = 0.0;
      for (std::int64_t j0 = 0; j0 < n; j0 += kBlock) {
        const std::int64_t len = std::min(kBlock, n - j0);
        for (std::int64_t j = 0; j < len; ++j) sh[j] = xr[j0 + j] - m;
        vm::map(sh, sh, len, vexp);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (std::int64_t j = 0; j < len; ++j) s += sh[j];
        sum += s;
        if (!log_sm) std::memcpy(orow + j0, sh, static_cast<std::size_t>(len) * sizeof(float));
      }
      const float lse = m + vm::log(static_cast<float>(sum)), inv = 1.0f / static_cast<float>(sum);
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) orow[j] = log_sm ? xr[j] - lse : orow[j] * inv;
    }
    return;
  }
  const std::int64_t per = kBlock / n;
  for (std::int64_t r0 = 0; r0 < rows; r0 += per) {
    const std::int64_t rr = std::min(per, rows - r0);
    const float* xb = x + r0 * n;
    float* ob = o + r0 * n;
    for (std::int64_t r = 0; r < rr; ++r) mx[r] = line_max(xb + r * n, n, 1);
    for (std::int64_t r = 0; r < rr; ++r) {
      for (std::int64_t j = 0; j < n; ++j) sh[r * n + j] = xb[r * n + j] - mx[r];
    }
    vm::map(sh, ob, rr * n, vexp);  // x is no longer read: in place is safe
    for (std::int64_t r = 0; r < rr; ++r) {
      float* row = ob + r * n;
      // In vector lanes, as the long rows' sums: one chain of dependent adds took 4 cycles
      // an element (ViT's [12, 197, 197] softmax at 1.1 ns an element on 2 threads).
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t j = 0; j < n; ++j) sum += row[j];
      if (log_sm) {
        const float lse = vm::log(sum);
        for (std::int64_t j = 0; j < n; ++j) row[j] = sh[r * n + j] - lse;
      } else {
        const float inv = 1.0f / sum;
        for (std::int64_t j = 0; j < n; ++j) row[j] *= inv;
      }
    }
  }
}

void softmax_line(const float* x, float* o, std::int64_t n, std::int64_t s, bool log_sm) {
  const float m = line_max(x, n, s);
  float sum = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) sum += vm::exp(x[j * s] - m);
  if (log_sm) {
    const float lse = m + vm::log(sum);
    for (std::int64_t j = 0; j < n; ++j) o[j * s] = x[j * s] - lse;
  } else {
    const float inv = 1.0f / sum;
    for (std::int64_t j = 0; j < n; ++j) o[j * s] = vm::exp(x[j * s] - m) * inv;
  }
}

void log_softmax_grad_line(const float* g, const float* y, float* o, std::int64_t n,
                           std::int64_t s, float dot) {
  if (s == 1) {
    // exp in vector pieces; o may be g or y itself, so the exps go to a scratch block first
    constexpr std::int64_t kBlock = 1024;
    float ex[kBlock];
    for (std::int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const std::int64_t len = std::min(kBlock, n - j0);
      vm::map(y + j0, ex, len, vexp);
      for (std::int64_t j = 0; j < len; ++j) o[j0 + j] = g[j0 + j] - ex[j] * dot;
    }
    return;
  }
  for (std::int64_t j = 0; j < n; ++j) o[j * s] = g[j * s] - vm::exp(y[j * s]) * dot;
}

float xlogy_sum(const float* y, const float* p, std::int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t c = 0; c < n; ++c) s += y[c] * vm::log(std::max(p[c], FLT_MIN));
  return s;
}

// ---- panel_product -----------------------------------------------------------------------

constexpr std::int64_t kPW = kPanelWidth;
constexpr int kV = static_cast<int>(kPW / L);  // vectors across a panel

// RB rows of a times NP panels: RB * NP * kV sums in registers, one weight vector loaded per NP
// panel vectors and used RB times.
template <int RB, int NP>
void panel_tile(const float* a, std::int64_t lda, std::int64_t k, const float* w, const float* add,
                std::int64_t ldadd, float* out, std::int64_t ldo) {
  vm::vf acc[RB][NP * kV];
  for (auto& row : acc) {
    for (auto& v : row) v = vm::splat(0.0f);
  }
  const std::int64_t ps = k * kPW;
  for (std::int64_t i = 0; i < k; ++i) {
    vm::vf x[RB];
    for (int r = 0; r < RB; ++r) x[r] = vm::splat(a[r * lda + i]);
    for (int q = 0; q < NP * kV; ++q) {
      const vm::vf wv = vm::load(w + (q / kV) * ps + i * kPW + (q % kV) * L);
      for (int r = 0; r < RB; ++r) acc[r][q] += x[r] * wv;
    }
  }
  for (int r = 0; r < RB; ++r) {
    for (int q = 0; q < NP * kV; ++q) {
      const std::int64_t j = (q / kV) * kPW + (q % kV) * L;
      vm::vf s = acc[r][q];
      if (add != nullptr) s = vm::load(add + r * ldadd + j) + s;
      vm::store(out + r * ldo + j, s);
    }
  }
}

// Panels [0, np) of RB rows, NP at a time, then the rest fewer at a time.
template <int RB, int NP>
void panel_cols(const float* a, std::int64_t lda, std::int64_t k, const float* w, std::int64_t np,
                const float* add, std::int64_t ldadd, float* out, std::int64_t ldo) {
  std::int64_t p = 0;
  for (; p + NP <= np; p += NP) {
    panel_tile<RB, NP>(a, lda, k, w + p * k * kPW, add ? add + p * kPW : nullptr, ldadd,
                       out + p * kPW, ldo);
  }
  if constexpr (NP > 1) {
    if (p < np) {
      panel_cols<RB, NP / 2>(a, lda, k, w + p * k * kPW, np - p, add ? add + p * kPW : nullptr,
                             ldadd, out + p * kPW, ldo);
    }
  }
}

// Tiles of about 8 to 16 sums, as many as the registers hold beside the row broadcasts and
// one weight vector (32 zmm, 16 ymm: AVX2's 2 rows x 4 panels x 2 vectors spilled): one row at
// a time needs 8 independent sums to hide the FMA latency. Each sum runs over k in order
// whatever the tile, so the tiles change no bits.
constexpr int kRowBlock = L >= 16 ? 4 : L >= 8 ? 2 : 1;
constexpr int kRowPanels = 8 / kV;  // one row: 8 vectors
constexpr int kVectorRegs = L >= 16 ? 32 : 16;
constexpr int kBlockPanels = kRowBlock > 1 ? static_cast<int>(std::bit_floor(static_cast<unsigned>(
                                                 (kVectorRegs - kRowBlock - 1) / (kRowBlock * kV))))
                                           : kRowPanels;
static_assert(kRowBlock == 1 || kBlockPanels * kRowBlock * kV + kRowBlock < kVectorRegs);

void panel_product(const float* a, std::int64_t lda, std::int64_t rows, std::int64_t k,
                   const float* panels, std::int64_t cols, const float* add, std::int64_t ldadd,
                   float* out, std::int64_t ldo) {
  const std::int64_t np = cols / kPW;
  std::int64_t r = 0;
  if constexpr (kRowBlock > 1) {
    for (; r + kRowBlock <= rows; r += kRowBlock) {
      panel_cols<kRowBlock, kBlockPanels>(a + r * lda, lda, k, panels, np,
                                          add ? add + r * ldadd : nullptr, ldadd, out + r * ldo,
                                          ldo);
    }
  }
  for (; r < rows; ++r) {
    panel_cols<1, kRowPanels>(a + r * lda, lda, k, panels, np, add ? add + r * ldadd : nullptr,
                              ldadd, out + r * ldo, ldo);
  }
}

}  // namespace

const CodePath& code_path_table() {
#if HETGRAPH_ISA == 2
  static constexpr const char* kLevel = "x86-64-v2";
  static constexpr const char* kName = "x86-64-v2 (SSE4.2)";
#elif HETGRAPH_ISA == 3
  static constexpr const char* kLevel = "x86-64-v3";
  static constexpr const char* kName = "x86-64-v3 (AVX2, FMA)";
#elif HETGRAPH_ISA == 4
  static constexpr const char* kLevel = "x86-64-v4";
  static constexpr const char* kName = "x86-64-v4 (AVX-512)";
#elif defined(__AVX512F__)
  static constexpr const char* kLevel = "native";
  static constexpr const char* kName = "native (-march=native, AVX-512)";
#elif defined(__AVX2__)
  static constexpr const char* kLevel = "native";
  static constexpr const char* kName = "native (-march=native, AVX2)";
#else
  static constexpr const char* kLevel = "native";
  static constexpr const char* kName = "native (-march=native)";
#endif
  // One entry a line: around the #if, clang-format 14 settles on no form of its own.
  // clang-format off
  static const CodePath path{kLevel,
                             kName,
                             vm::kLanes,
                             map,
                             softmax_rows,
                             exp_rows,
                             softmax_line,
                             log_softmax_grad_line,
                             xlogy_sum,
                             panel_product,
                             register_pool_kernels,
                             register_reduce_kernels,
                             register_elementwise_kernels,
                             register_embedding_kernels,
                             register_optimizer_kernels,
#if HETGRAPH_OWN_WINOGRAD
                             reject_winograd_f4x3,
                             reject_winograd_f2x3,
                             make_winograd_f4x3,
                             make_winograd_f2x3,
                             winograd_min_tiles
#else
                             nullptr,
                             nullptr,
                             nullptr,
                             nullptr,
                             nullptr
#endif
  };
  // clang-format on
  return path;
}

}  // namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS
