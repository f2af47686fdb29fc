// SPDX-License-Identifier: Apache-2.0
// Elementwise kernels. Binary ops broadcast through a collapsed stride plan: dims of size 1 in
// the output vanish and neighbouring dims merge when both inputs step through them alike, so
// most broadcasts become one of four contiguous inner loops (full/full, full/scalar,
// scalar/full, scalar/scalar) that the compiler vectorises.
//
// Compiled once per code path (src/cpu/simd/code_path.hpp): the loops vectorise at its width.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/float16.hpp"
#include "compiler/geometry.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/simd/code_path.hpp"

namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS {

namespace {

// T: the inputs' element type, O: the output's (float ops: both float; comparisons: float or
// int32 in, int32 out).
template <class Op, class T, class O>
inline void inner_loop(const Op& op, const T* a, std::int64_t sa, const T* b, std::int64_t sb, O* o,
                       std::int64_t n) {
  if (sa != 0 && sb != 0) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]);
  } else if (sa != 0) {
    const T bv = *b;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) o[i] = op(a[i], bv);
  } else if (sb != 0) {
    const T av = *a;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) o[i] = op(av, b[i]);
  } else {
    const O v = op(*a, *b);
    for (std::int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

template <class Op, class T, class O>
void run_binary(const ExecCtx& ctx, const Op& op, const Bcast& p, const T* a, const T* b, O* o) {
  const std::int64_t total = p.rows * p.inner;
  const std::int64_t sai = p.sa[static_cast<std::size_t>(p.rank - 1)];
  const std::int64_t sbi = p.sb[static_cast<std::size_t>(p.rank - 1)];
  parallel_for(ctx, total, kParallelGrain, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t row = begin / p.inner, col = begin % p.inner;
    for (std::int64_t pos = begin; pos < end; ++row, col = 0) {
      std::int64_t oa = 0, ob = 0;
      row_offsets(p, row, oa, ob);
      const std::int64_t n = std::min(p.inner - col, end - pos);
      inner_loop(op, a + oa + col * sai, sai, b + ob + col * sbi, sbi, o + pos, n);
      pos += n;
    }
  });
}

template <class Op, class T = float, class O = float>
std::unique_ptr<CpuKernel> make_binary(const KernelArgs& k, Op op) {
  const Bcast p = make_bcast(k.in_shape(0), k.in_shape(1), k.out_shape());
  const auto* a = static_cast<const T*>(k.in[0]);
  const auto* b = static_cast<const T*>(k.in[1]);
  auto* o = static_cast<O*>(k.out);
  return make_kernel([=](const ExecCtx& ctx) { run_binary(ctx, op, p, a, b, o); });
}

// A functor computed by the code path's vector kernels (code_path.hpp), named by its kVec.
template <class Op>
concept VectorOp = requires {
  Op::kVec;
};

template <class Op>
std::unique_ptr<CpuKernel> make_unary(const KernelArgs& k, Op op) {
  const float* x = k.in_f(0);
  float* o = k.out_f();
  const std::int64_t n = k.out_shape().numel();
  const CodePath& path = code_path();
  return make_kernel([=, &path](const ExecCtx& ctx) {
    parallel_for(ctx, n, kParallelGrain / 4, [&](std::int64_t b, std::int64_t e) {
      if constexpr (VectorOp<Op>) {
        path.map(Op::kVec, 1.0f, x + b, nullptr, o + b, e - b);
      } else {
#pragma omp simd
        for (std::int64_t i = b; i < e; ++i) o[i] = op(x[i]);
      }
    });
  });
}

// Functors; `from` reads the op's attributes.
// add, sub and mul also take int32, which wraps around (two's complement, as ONNX Runtime's
// int32): computed in uint32, where C++ defines the wrap.
inline std::int32_t wrap(std::uint32_t v) {
  return static_cast<std::int32_t>(v);
}
inline std::uint32_t word(std::int32_t v) {
  return static_cast<std::uint32_t>(v);
}
struct AddF {
  float operator()(float a, float b) const { return a + b; }
  std::int32_t operator()(std::int32_t a, std::int32_t b) const { return wrap(word(a) + word(b)); }
};
struct SubF {
  float operator()(float a, float b) const { return a - b; }
  std::int32_t operator()(std::int32_t a, std::int32_t b) const { return wrap(word(a) - word(b)); }
};
struct MulF {
  float operator()(float a, float b) const { return a * b; }
  std::int32_t operator()(std::int32_t a, std::int32_t b) const { return wrap(word(a) * word(b)); }
};
struct DivF {
  static DivF from(const Attrs&) { return {}; }
  float operator()(float a, float b) const { return a / b; }
};
struct AxpbyF {
  float x, y;
  static AxpbyF from(const Attrs& at) {
    const AxpbyCoeffs& k = at.get_or_default<AxpbyCoeffs>();
    return {k.a, k.b};
  }
  float operator()(float a, float b) const { return x * a + y * b; }
};
// A NaN x passed through relu: its gradient flows (x <= 0 is false for NaN).
struct ReluGradF {
  static ReluGradF from(const Attrs&) { return {}; }
  float operator()(float g, float x) const { return x <= 0.0f ? 0.0f : g; }
};
struct SigmoidGradF {
  static SigmoidGradF from(const Attrs&) { return {}; }
  float operator()(float g, float y) const { return g * y * (1.0f - y); }
};
struct TanhGradF {
  static TanhGradF from(const Attrs&) { return {}; }
  float operator()(float g, float y) const { return g * (1.0f - y * y); }
};
// a^b: C's powf. The kernel takes a scalar exponent of 2, 1, -1 or 3 apart (x * x, x, 1 / x:
// exact; x^3 in double, one rounding: where powf is within an ulp); see make_pow.
struct PowF {
  static PowF from(const Attrs&) { return {}; }
  float operator()(float a, float b) const { return std::pow(a, b); }
};
struct RefPowF {
  static RefPowF from(const Attrs&) { return {}; }
  float operator()(float a, float b) const {
    return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  }
};
struct XLogYF {
  static XLogYF from(const Attrs&) { return {}; }
  float operator()(float x, float y) const { return x == 0.0f ? 0.0f : x * std::log(y); }
};
struct RefXLogYF {
  static RefXLogYF from(const Attrs&) { return {}; }
  float operator()(float x, float y) const {
    return x == 0.0f ? 0.0f : static_cast<float>(x * std::log(static_cast<double>(y)));
  }
};
// x < 0 ? slope x : x (a NaN x passes through). In double the product of two floats is exact, so
// this float functor is also the reference.
struct PReluF {
  static PReluF from(const Attrs&) { return {}; }
  float operator()(float x, float slope) const { return x < 0.0f ? slope * x : x; }
};
// a wins ties and NaNs: the result is a NaN where either input is one (elementwise.cpp of the
// compiler documents the semantics), and the gradient goes to the input the result came from.
// (Also int32: a != a is false there.)
template <class T>
inline bool max_takes_a(T a, T b) {
  return a >= b || a != a;
}
template <class T>
inline bool min_takes_a(T a, T b) {
  return a <= b || a != a;
}
// Remainders (graph.hpp: mod, fmod). An int divisor of 0 gives 0 (numpy's), and of -1 gives
// 0 too: INT32_MIN % -1 would trap, and every other a % -1 is 0 anyway.
template <bool Floored>
struct ModF {
  float operator()(float a, float b) const {
    const float r = std::fmod(a, b);
    return Floored && r != 0.0f && (r < 0.0f) != (b < 0.0f) ? r + b : r;
  }
  std::int32_t operator()(std::int32_t a, std::int32_t b) const {
    if (b == 0 || b == -1) return 0;
    const std::int32_t r = a % b;
    return Floored && r != 0 && (r < 0) != (b < 0) ? r + b : r;
  }
};
struct MaximumF {
  template <class T>
  T operator()(T a, T b) const {
    return max_takes_a(a, b) ? a : b;
  }
};
struct MinimumF {
  template <class T>
  T operator()(T a, T b) const {
    return min_takes_a(a, b) ? a : b;
  }
};
// (g, x) gradients. abs: sign(x) g, 0 at 0, NaN at NaN (no branch to follow).
struct AbsGradF {
  static AbsGradF from(const Attrs&) { return {}; }
  float operator()(float g, float x) const { return x > 0.0f ? g : (x < 0.0f ? -g : x * 0.0f); }
};
// erf'(x) = 2 / sqrt(pi) exp(-x^2)
struct ErfGradF {
  static ErfGradF from(const Attrs&) { return {}; }
  float operator()(float g, float x) const { return g * 1.12837916709551257f * std::exp(-x * x); }
};
// A NaN x took leaky_relu's and clip's identity branch (it passed through): g flows.
struct LeakyReluGradF {
  float alpha;
  static LeakyReluGradF from(const Attrs& at) { return {at.get_or_default<LeakySlope>().slope}; }
  float operator()(float g, float x) const { return x <= 0.0f ? alpha * g : g; }
};
struct ClipGradF {
  float lo, hi;
  static ClipGradF from(const Attrs& at) {
    const ClipRange& r = at.get_or_default<ClipRange>();
    return {r.lo, r.hi};
  }
  float operator()(float g, float x) const { return x < lo || x > hi ? 0.0f : g; }
};
// gelu'(x) = Phi(x) + x phi(x)
struct GeluGradF {
  static GeluGradF from(const Attrs&) { return {}; }
  float operator()(float g, float x) const {
    const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752f));
    return g * (cdf + x * 0.39894228040143268f * std::exp(-0.5f * x * x));
  }
};

// Unary functors: Fast uses the code path's vector math (kVec), Ref uses libm (the reference
// the fast ones are tested by).
struct NegF {
  static NegF from(const Attrs&) { return {}; }
  float operator()(float x) const { return -x; }
};
struct ScaleF {
  float s;
  static ScaleF from(const Attrs& at) { return {at.get_or_default<ScaleFactor>().factor}; }
  float operator()(float x) const { return s * x; }
};
struct SqrtF {
  static SqrtF from(const Attrs&) { return {}; }
  float operator()(float x) const { return __builtin_sqrtf(x); }
};
struct FloorF {
  static FloorF from(const Attrs&) { return {}; }
  float operator()(float x) const { return __builtin_floorf(x); }
};
// NaN stays NaN (x <= 0 is false for it); -0 becomes +0.
struct ReluF {
  static ReluF from(const Attrs&) { return {}; }
  float operator()(float x) const { return x <= 0.0f ? 0.0f : x; }
};
struct AbsF {
  static AbsF from(const Attrs&) { return {}; }
  float operator()(float x) const { return __builtin_fabsf(x); }
};
// x / (1 + |x|): no libm call, so the loop vectorises as written; the reference in double.
struct SoftsignF {
  static SoftsignF from(const Attrs&) { return {}; }
  float operator()(float x) const { return x / (1.0f + __builtin_fabsf(x)); }
};
struct RefSoftsignF {
  static RefSoftsignF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    const double v = x;
    return static_cast<float>(v / (1.0 + std::fabs(v)));
  }
};
// x tanh(softplus(x)) = x n / (n + 2) with n = e^x (e^x + 2): one exp, no cancellation; from
// x = 20 on the factor is 1 in float (and n would overflow from 44). The reference in double.
struct MishF {
  static MishF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    const float e = std::exp(x), n = e * (e + 2.0f);
    return x > 20.0f ? x : x * n / (n + 2.0f);
  }
};
struct RefMishF {
  static RefMishF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    const double v = x;
    return static_cast<float>(v * std::tanh((v > 0 ? v : 0) + std::log1p(std::exp(-std::fabs(v)))));
  }
};
struct LeakyReluF {
  float alpha;
  static LeakyReluF from(const Attrs& at) { return {at.get_or_default<LeakySlope>().slope}; }
  float operator()(float x) const { return x > 0.0f ? x : alpha * x; }
};
// min(max(x, lo), hi): lo > hi gives hi, as ONNX defines it; NaN stays NaN.
struct ClipF {
  float lo, hi;
  static ClipF from(const Attrs& at) {
    const ClipRange& r = at.get_or_default<ClipRange>();
    return {r.lo, r.hi};
  }
  float operator()(float x) const {
    const float t = x < lo ? lo : x;
    return t > hi ? hi : t;
  }
};
struct ErfF {
  static ErfF from(const Attrs&) { return {}; }
  static constexpr VecFn kVec = VecFn::erf;
};
struct RefErfF {
  static RefErfF from(const Attrs&) { return {}; }
  float operator()(float x) const { return static_cast<float>(std::erf(static_cast<double>(x))); }
};
// A float function (libm's sinf, cosf, ...; float16.hpp's rounding); the references in double.
template <float (*F)(float)>
struct LibmF {
  static LibmF from(const Attrs&) { return {}; }
  float operator()(float x) const { return F(x); }
};
template <double (*D)(double)>
struct RefLibmF {
  static RefLibmF from(const Attrs&) { return {}; }
  float operator()(float x) const { return static_cast<float>(D(static_cast<double>(x))); }
};
// x Phi(x) with libm's erf, in float (the reference works in double)
struct RefGeluF {
  static RefGeluF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    const double v = x;
    return static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
  }
};
// Transcendental functors: the code path's vector kernels (kVec).
struct ExpF {
  static ExpF from(const Attrs&) { return {}; }
  static constexpr VecFn kVec = VecFn::exp;
};
struct LogF {
  static LogF from(const Attrs&) { return {}; }
  static constexpr VecFn kVec = VecFn::log;
};
struct SigmoidF {
  static SigmoidF from(const Attrs&) { return {}; }
  static constexpr VecFn kVec = VecFn::sigmoid;
};
struct TanhF {
  static TanhF from(const Attrs&) { return {}; }
  static constexpr VecFn kVec = VecFn::tanh;
};
struct RefExpF {
  static RefExpF from(const Attrs&) { return {}; }
  float operator()(float x) const { return std::exp(x); }
};
struct RefLogF {
  static RefLogF from(const Attrs&) { return {}; }
  float operator()(float x) const { return std::log(x); }
};
struct RefSigmoidF {
  static RefSigmoidF from(const Attrs&) { return {}; }
  float operator()(float x) const { return 1.0f / (1.0f + std::exp(-x)); }
};
struct RefTanhF {
  static RefTanhF from(const Attrs&) { return {}; }
  float operator()(float x) const { return std::tanh(x); }
};
// GELU's tanh form in double.
struct RefGeluTanhF {
  static RefGeluTanhF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    const double v = x;
    return static_cast<float>(0.5 * v *
                              (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
  }
};
struct RefSiluF {
  static RefSiluF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    const double v = x;
    return static_cast<float>(v / (1.0 + std::exp(-v)));
  }
};
// x * clip(x / 6 + 1 / 2, 0, 1) in the order of the nodes it replaces (scale, add, clip, mul):
// the same floats as the four kernels gave.
struct HardSwishF {
  static HardSwishF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    return x * std::min(std::max((1.0f / 6.0f) * x + 0.5f, 0.0f), 1.0f);
  }
};
struct RefHardSwishF {
  static RefHardSwishF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    const double v = x;
    return static_cast<float>(v * std::min(std::max(v / 6.0 + 0.5, 0.0), 1.0));
  }
};

// ---- ternary ops: where and the maximum/minimum gradients ------------------------------------
// Three broadcast inputs through the collapsed plan; the innermost strides (0 or 1 each) pick
// one of eight loops with the strides as constants, which the compiler vectorises.

// where(cond, a, b) on 32-bit words: a and b may be float or int32.
struct WhereF {
  using C = std::int32_t;
  using A = std::uint32_t;
  using B = std::uint32_t;
  using O = std::uint32_t;
  static WhereF from(const Attrs&) { return {}; }
  O operator()(C c, A a, B b) const { return c != 0 ? a : b; }
};
// (g, a, b) -> g where input `which` won (maximum: max_takes_a), else 0.
template <bool Max>
struct SelectGradF {
  using C = float;
  using A = float;
  using B = float;
  using O = float;
  bool to_a;
  static SelectGradF from(const Attrs& at) { return {at.get_or_default<InputChoice>().input == 0}; }
  O operator()(C g, A a, B b) const {
    const bool takes_a = Max ? max_takes_a(a, b) : min_takes_a(a, b);
    return takes_a == to_a ? g : 0.0f;
  }
};

template <int S0, int S1, int S2, class Op>
void ternary_loop(const Op& op, const typename Op::C* c, const typename Op::A* a,
                  const typename Op::B* b, typename Op::O* o, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) o[i] = op(c[i * S0], a[i * S1], b[i * S2]);
}

template <class Op>
using TernaryLoop = void (*)(const Op&, const typename Op::C*, const typename Op::A*,
                             const typename Op::B*, typename Op::O*, std::int64_t);

template <class Op>
TernaryLoop<Op> pick_ternary_loop(std::int64_t s0, std::int64_t s1, std::int64_t s2) {
  static constexpr TernaryLoop<Op> loops[8] = {
      ternary_loop<0, 0, 0, Op>, ternary_loop<0, 0, 1, Op>, ternary_loop<0, 1, 0, Op>,
      ternary_loop<0, 1, 1, Op>, ternary_loop<1, 0, 0, Op>, ternary_loop<1, 0, 1, Op>,
      ternary_loop<1, 1, 0, Op>, ternary_loop<1, 1, 1, Op>};
  return loops[(s0 != 0 ? 4 : 0) + (s1 != 0 ? 2 : 0) + (s2 != 0 ? 1 : 0)];
}

template <class Op>
std::unique_ptr<CpuKernel> ternary_fast(const KernelArgs& k) {
  const BcastN<3> p =
      make_bcast_n<3>({&k.in_shape(0), &k.in_shape(1), &k.in_shape(2)}, k.out_shape());
  const auto* c = static_cast<const typename Op::C*>(k.in[0]);
  const auto* a = static_cast<const typename Op::A*>(k.in[1]);
  const auto* b = static_cast<const typename Op::B*>(k.in[2]);
  auto* o = static_cast<typename Op::O*>(k.out);
  const Op op = Op::from(k.node.attrs);
  const std::int64_t s0 = p.inner_stride(0), s1 = p.inner_stride(1), s2 = p.inner_stride(2);
  const TernaryLoop<Op> loop = pick_ternary_loop<Op>(s0, s1, s2);
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, p.rows * p.inner, kParallelGrain, [&](std::int64_t begin, std::int64_t end) {
      std::int64_t row = begin / p.inner, col = begin % p.inner;
      for (std::int64_t pos = begin; pos < end; ++row, col = 0) {
        const auto off = row_offsets(p, row);
        const std::int64_t n = std::min(p.inner - col, end - pos);
        loop(op, c + off[0] + col * s0, a + off[1] + col * s1, b + off[2] + col * s2, o + pos, n);
        pos += n;
      }
    });
  });
}

// Flat offset into an input of shape `in` that output element `flat` (of shape `out`) reads.
std::int64_t broadcast_offset(std::int64_t flat, const Shape& out, const Shape& in) {
  std::int64_t at = 0, m = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const std::int64_t i = flat % out[d];
    flat /= out[d];
    const int di = in.rank() - out.rank() + d;
    if (di >= 0) {
      at += (in[di] == 1 ? 0 : i) * m;
      m *= in[di];
    }
  }
  return at;
}

template <class Op>
std::unique_ptr<CpuKernel> ternary_ref(const KernelArgs& k) {
  const Shape sc = k.in_shape(0), sa = k.in_shape(1), sb = k.in_shape(2), out = k.out_shape();
  const auto* c = static_cast<const typename Op::C*>(k.in[0]);
  const auto* a = static_cast<const typename Op::A*>(k.in[1]);
  const auto* b = static_cast<const typename Op::B*>(k.in[2]);
  auto* o = static_cast<typename Op::O*>(k.out);
  const Op op = Op::from(k.node.attrs);
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      o[i] = op(c[broadcast_offset(i, out, sc)], a[broadcast_offset(i, out, sa)],
                b[broadcast_offset(i, out, sb)]);
    }
  });
}

// pow with a one-element exponent: x * x, x and 1 / x for 2, 1 and -1 (exact, and several
// times faster than powf), powf otherwise; a broadcast exponent goes through the binary loops.
std::unique_ptr<CpuKernel> make_pow(const KernelArgs& k) {
  if (k.in_shape(1).numel() != 1) return make_binary(k, PowF{});
  const float* x = k.in_f(0);
  const float* e = k.in_f(1);
  float* o = k.out_f();
  const std::int64_t n = k.out_shape().numel();
  return make_kernel([=](const ExecCtx& ctx) {
    const float b = *e;
    parallel_for(ctx, n, kParallelGrain / 4, [&](std::int64_t lo, std::int64_t hi) {
      if (b == 2.0f) {
#pragma omp simd
        for (std::int64_t i = lo; i < hi; ++i) o[i] = x[i] * x[i];
      } else if (b == 1.0f) {
        if (o != x) std::memcpy(o + lo, x + lo, static_cast<std::size_t>(hi - lo) * 4);
      } else if (b == -1.0f) {
#pragma omp simd
        for (std::int64_t i = lo; i < hi; ++i) o[i] = 1.0f / x[i];
      } else if (b == 3.0f) {
        // GELU's tanh form (GPT-2, BERT exports) cubes its input: powf was 30% of a GPT-2
        // prompt's node time (bench/models, issue 48). x^2 is exact in double, x^3 rounds once
        // there and once to float: the correctly rounded cube but for ties of the double rounding.
#pragma omp simd
        for (std::int64_t i = lo; i < hi; ++i) {
          const double v = x[i];
          o[i] = static_cast<float>(v * v * v);
        }
      } else {
        for (std::int64_t i = lo; i < hi; ++i) o[i] = std::pow(x[i], b);
      }
    });
  });
}

// o = combine(x, s) with s = f(x), or f(pre(x)) with a Pre functor, from the path's vector
// kernels, in blocks on the stack, so that a block is still in L1 for the combination. x may
// be o.
struct NoPre {};
template <class Combine, class Pre = NoPre>
std::unique_ptr<CpuKernel> make_blocked_unary(const KernelArgs& k, VecFn f, std::int64_t grain,
                                              Combine combine, Pre pre = {}) {
  const float* x = k.in_f(0);
  float* o = k.out_f();
  const std::int64_t n = k.out_shape().numel();
  const CodePath& path = code_path();
  return make_kernel([=, &path](const ExecCtx& ctx) {
    parallel_for(ctx, n, grain, [&](std::int64_t lo, std::int64_t hi) {
      constexpr std::int64_t kBlock = 512;
      alignas(64) float s[kBlock];
      for (std::int64_t b = lo; b < hi; b += kBlock) {
        const std::int64_t m = std::min(kBlock, hi - b);
        if constexpr (!std::is_same_v<Pre, NoPre>) {
#pragma omp simd
          for (std::int64_t i = 0; i < m; ++i) s[i] = pre(x[b + i]);
          path.map(f, 1.0f, s, nullptr, s, m);
        } else {
          path.map(f, 1.0f, x + b, nullptr, s, m);
        }
#pragma omp simd
        for (std::int64_t i = 0; i < m; ++i) o[b + i] = combine(x[b + i], s[i]);
      }
    });
  });
}

// silu(x) = x * sigmoid(x): the path's sigmoid, then the product, so the values are those of
// the sigmoid and mul kernels it replaces (fuse_silu). Runs in place.
std::unique_ptr<CpuKernel> make_silu(const KernelArgs& k) {
  return make_blocked_unary(k, VecFn::sigmoid, kParallelGrain / 4,
                            [](float x, float s) { return x * s; });
}
// gelu(x) = 0.5 x (1 + erf(x / sqrt 2)): the path's erf of x / sqrt 2, then the products.
// (libm's erf, which the loop called before, does not vectorise: a ViT MLP's gelu took longer
// than the five nodes of its decomposed form.)
std::unique_ptr<CpuKernel> make_gelu(const KernelArgs& k) {
  return make_blocked_unary(
      k, VecFn::erf, kParallelGrain / 8, [](float x, float s) { return 0.5f * x * (1.0f + s); },
      [](float x) { return x * 0.70710678118654752f; });
}

// gelu_tanh(x) = 0.5 x (1 + tanh(c (x + k x^3))): the cubic in a vector loop (x^3 in double, as
// the pow kernel's), the path's tanh, then the products: as GPT-2's eight nodes compute them
// (fuse_gelu), within rounding for other associations of the products.
std::unique_ptr<CpuKernel> make_gelu_tanh(const KernelArgs& k) {
  return make_blocked_unary(
      k, VecFn::tanh, kParallelGrain / 8, [](float x, float s) { return x * 0.5f * (s + 1.0f); },
      [](float x) {
        const double v = x;
        return (x + static_cast<float>(v * v * v) * 0.044715f) * 0.7978845608028654f;
      });
}

// ---- cast -------------------------------------------------------------------------------------

// Float to int32: toward zero, saturating, NaN to 0 (OpenCL's convert_int_sat_rtz).
inline std::int32_t to_i32(float v) {
  if (v != v) return 0;
  if (v >= 2147483648.0f) return std::numeric_limits<std::int32_t>::max();
  if (v <= -2147483648.0f) return std::numeric_limits<std::int32_t>::min();
  return static_cast<std::int32_t>(v);
}

template <bool Simd>
std::unique_ptr<CpuKernel> make_cast(const KernelArgs& k) {
  const DType from = k.in_types[0].dtype, to = k.out_type.dtype;
  const void* x = k.in[0];
  void* o = k.out;
  const std::int64_t n = k.out_shape().numel();
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, n, Simd ? kParallelGrain : n, [&](std::int64_t b, std::int64_t e) {
      if (from == to) {
        if (o != x)
          std::memcpy(static_cast<std::uint32_t*>(o) + b, static_cast<const std::uint32_t*>(x) + b,
                      static_cast<std::size_t>(e - b) * 4);
      } else if (from == DType::f32) {
        const auto* xf = static_cast<const float*>(x);
        auto* oi = static_cast<std::int32_t*>(o);
        if constexpr (Simd) {
#pragma omp simd
          for (std::int64_t i = b; i < e; ++i) oi[i] = to_i32(xf[i]);
        } else {
          for (std::int64_t i = b; i < e; ++i) oi[i] = to_i32(xf[i]);
        }
      } else {
        const auto* xi = static_cast<const std::int32_t*>(x);
        auto* of = static_cast<float*>(o);
#pragma omp simd
        for (std::int64_t i = b; i < e; ++i) of[i] = static_cast<float>(xi[i]);
      }
    });
  });
}

const char* need_f32(const KernelArgs& k) {
  for (const TensorType& t : k.in_types) {
    if (t.dtype != DType::f32) return "needs float inputs";
  }
  return nullptr;
}

// Reference binary op: per-element index arithmetic, no collapsing, no vector loops.
template <class Op, class T = float, class O = float>
std::unique_ptr<CpuKernel> make_reference_binary(const KernelArgs& k, Op op) {
  const Shape a = k.in_shape(0), b = k.in_shape(1), out = k.out_shape();
  const auto* pa = static_cast<const T*>(k.in[0]);
  const auto* pb = static_cast<const T*>(k.in[1]);
  auto* o = static_cast<O*>(k.out);
  return make_kernel([=](const ExecCtx&) {
    const int r = out.rank();
    for (std::int64_t flat = 0; flat < out.numel(); ++flat) {
      std::int64_t rem = flat, ia = 0, ib = 0, ma = 1, mb = 1;
      for (int d = r - 1; d >= 0; --d) {
        const std::int64_t i = rem % out[d];
        rem /= out[d];
        const int da = a.rank() - r + d, db = b.rank() - r + d;
        if (da >= 0) {
          ia += (a[da] == 1 ? 0 : i) * ma;
          ma *= a[da];
        }
        if (db >= 0) {
          ib += (b[db] == 1 ? 0 : i) * mb;
          mb *= b[db];
        }
      }
      o[flat] = op(pa[ia], pb[ib]);
    }
  });
}

template <class Op>
std::unique_ptr<CpuKernel> make_reference_unary(const KernelArgs& k, Op op) {
  const float* x = k.in_f(0);
  float* o = k.out_f();
  const std::int64_t n = k.out_shape().numel();
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t i = 0; i < n; ++i) o[i] = op(x[i]);
  });
}

template <class Op>
std::unique_ptr<CpuKernel> binary_fast(const KernelArgs& k) {
  return make_binary(k, Op::from(k.node.attrs));
}
template <class Op>
std::unique_ptr<CpuKernel> binary_ref(const KernelArgs& k) {
  return make_reference_binary(k, Op::from(k.node.attrs));
}
template <class Op>
std::unique_ptr<CpuKernel> unary_fast(const KernelArgs& k) {
  return make_unary(k, Op::from(k.node.attrs));
}
template <class Op>
std::unique_ptr<CpuKernel> unary_ref(const KernelArgs& k) {
  return make_reference_unary(k, Op::from(k.node.attrs));
}

// ---- comparisons and logic: float or int32 inputs, int32 0 / 1 out -----------------------
// Written without branches (a NaN compares false), so the loops vectorise.
struct EqualF {
  template <class T>
  std::int32_t operator()(T a, T b) const {
    return a == b;
  }
};
struct LessF {
  template <class T>
  std::int32_t operator()(T a, T b) const {
    return a < b;
  }
};
struct LessEqualF {
  template <class T>
  std::int32_t operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterF {
  template <class T>
  std::int32_t operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterEqualF {
  template <class T>
  std::int32_t operator()(T a, T b) const {
    return a >= b;
  }
};
struct AndF {
  std::int32_t operator()(std::int32_t a, std::int32_t b) const { return (a != 0) & (b != 0); }
};
struct OrF {
  std::int32_t operator()(std::int32_t a, std::int32_t b) const { return (a != 0) | (b != 0); }
};
struct XorF {
  std::int32_t operator()(std::int32_t a, std::int32_t b) const { return (a != 0) ^ (b != 0); }
};

// Binary ops of float or int32 operands (one type; shape inference checks): Floats, whether
// the op takes floats (logic takes int32 only); FloatOut, whether float operands give a float
// result (maximum, minimum) rather than int32 (comparisons).
template <class Op, bool Floats, bool FloatOut, bool Reference>
std::unique_ptr<CpuKernel> make_typed_binary(const KernelArgs& k) {
  if constexpr (Floats) {
    using O = std::conditional_t<FloatOut, float, std::int32_t>;
    if (k.in_types[0].dtype == DType::f32) {
      return Reference ? make_reference_binary<Op, float, O>(k, Op{})
                       : make_binary<Op, float, O>(k, Op{});
    }
  }
  return Reference ? make_reference_binary<Op, std::int32_t, std::int32_t>(k, Op{})
                   : make_binary<Op, std::int32_t, std::int32_t>(k, Op{});
}

template <class Op, bool Floats = true, bool FloatOut = false>
void typed_binary(KernelRegistry& r, OpKind kind) {
  r.add(kind, {"broadcast_simd", nullptr, make_typed_binary<Op, Floats, FloatOut, false>});
  r.add(kind, {"reference", nullptr, make_typed_binary<Op, Floats, FloatOut, true>, true});
}

template <class Op>
void binary(KernelRegistry& r, OpKind kind) {
  r.add(kind, {"broadcast_simd", need_f32, binary_fast<Op>});
  r.add(kind, {"reference", need_f32, binary_ref<Op>, true});
}
template <class Fast, class Ref>
void binary2(KernelRegistry& r, OpKind kind) {
  r.add(kind, {"broadcast_simd", need_f32, binary_fast<Fast>});
  r.add(kind, {"reference", need_f32, binary_ref<Ref>, true});
}
template <class Op>
void ternary(KernelRegistry& r, OpKind kind) {
  r.add(kind, {"broadcast_simd", nullptr, ternary_fast<Op>});
  r.add(kind, {"reference", nullptr, ternary_ref<Op>, true});
}
template <class Fast, class Ref>
void unary(KernelRegistry& r, OpKind kind) {
  r.add(kind, {"simd", need_f32, unary_fast<Fast>});
  r.add(kind, {"reference", need_f32, unary_ref<Ref>, true});
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& t) {
  typed_binary<AddF, true, true>(t, OpKind::Add);
  typed_binary<SubF, true, true>(t, OpKind::Sub);
  typed_binary<MulF, true, true>(t, OpKind::Mul);
  binary<DivF>(t, OpKind::Div);
  binary<AxpbyF>(t, OpKind::Axpby);
  binary<ReluGradF>(t, OpKind::ReluGrad);
  binary<SigmoidGradF>(t, OpKind::SigmoidGrad);
  binary<TanhGradF>(t, OpKind::TanhGrad);
  binary<GeluGradF>(t, OpKind::GeluGrad);
  unary<NegF, NegF>(t, OpKind::Neg);
  unary<ScaleF, ScaleF>(t, OpKind::Scale);
  unary<SqrtF, SqrtF>(t, OpKind::Sqrt);
  unary<FloorF, FloorF>(t, OpKind::Floor);
  unary<ReluF, ReluF>(t, OpKind::Relu);
  unary<ExpF, RefExpF>(t, OpKind::Exp);
  unary<LogF, RefLogF>(t, OpKind::Log);
  unary<SigmoidF, RefSigmoidF>(t, OpKind::Sigmoid);
  unary<TanhF, RefTanhF>(t, OpKind::Tanh);
  t.add(OpKind::Gelu, {"simd", need_f32, make_gelu});
  t.add(OpKind::Gelu, {"reference", need_f32, unary_ref<RefGeluF>, true});
  unary<AbsF, AbsF>(t, OpKind::Abs);
  unary<ErfF, RefErfF>(t, OpKind::Erf);
  unary<LibmF<::sinf>, RefLibmF<::sin>>(t, OpKind::Sin);
  unary<LibmF<::cosf>, RefLibmF<::cos>>(t, OpKind::Cos);
  unary<LibmF<::tanf>, RefLibmF<::tan>>(t, OpKind::Tan);
  unary<LibmF<::asinf>, RefLibmF<::asin>>(t, OpKind::Asin);
  unary<LibmF<::acosf>, RefLibmF<::acos>>(t, OpKind::Acos);
  unary<LibmF<::atanf>, RefLibmF<::atan>>(t, OpKind::Atan);
  unary<LibmF<::sinhf>, RefLibmF<::sinh>>(t, OpKind::Sinh);
  unary<LibmF<::coshf>, RefLibmF<::cosh>>(t, OpKind::Cosh);
  unary<LibmF<::asinhf>, RefLibmF<::asinh>>(t, OpKind::Asinh);
  unary<LibmF<::acoshf>, RefLibmF<::acosh>>(t, OpKind::Acosh);
  unary<LibmF<::atanhf>, RefLibmF<::atanh>>(t, OpKind::Atanh);
  // nearbyint in the default rounding mode: halves to even, exact in float and double
  unary<LibmF<::nearbyintf>, LibmF<::nearbyintf>>(t, OpKind::Round);
  unary<LibmF<round_to_float16>, LibmF<round_to_float16>>(t, OpKind::ToFloat16);
  unary<LibmF<round_to_bfloat16>, LibmF<round_to_bfloat16>>(t, OpKind::ToBfloat16);
  unary<LeakyReluF, LeakyReluF>(t, OpKind::LeakyRelu);
  unary<ClipF, ClipF>(t, OpKind::Clip);
  unary<SoftsignF, RefSoftsignF>(t, OpKind::Softsign);
  unary<MishF, RefMishF>(t, OpKind::Mish);
  t.add(OpKind::Silu, {"simd", need_f32, make_silu});
  t.add(OpKind::GeluTanh, {"simd", need_f32, make_gelu_tanh});
  t.add(OpKind::GeluTanh, {"reference", need_f32, unary_ref<RefGeluTanhF>, true});
  t.add(OpKind::Silu, {"reference", need_f32, unary_ref<RefSiluF>, true});
  unary<HardSwishF, RefHardSwishF>(t, OpKind::HardSwish);
  binary<AbsGradF>(t, OpKind::AbsGrad);
  binary<ErfGradF>(t, OpKind::ErfGrad);
  binary<LeakyReluGradF>(t, OpKind::LeakyReluGrad);
  binary<ClipGradF>(t, OpKind::ClipGrad);
  t.add(OpKind::Pow, {"scalar_exponent", need_f32, make_pow});
  t.add(OpKind::Pow, {"reference", need_f32, binary_ref<RefPowF>, true});
  binary2<XLogYF, RefXLogYF>(t, OpKind::XLogY);
  binary<PReluF>(t, OpKind::PRelu);
  typed_binary<MaximumF, true, true>(t, OpKind::Maximum);
  typed_binary<MinimumF, true, true>(t, OpKind::Minimum);
  typed_binary<ModF<true>, true, true>(t, OpKind::Mod);
  typed_binary<ModF<false>, true, true>(t, OpKind::FMod);
  ternary<WhereF>(t, OpKind::Where);
  t.add(OpKind::Cast, {"simd", nullptr, make_cast<true>});
  t.add(OpKind::Cast, {"reference", nullptr, make_cast<false>, true});
  typed_binary<EqualF>(t, OpKind::Equal);
  typed_binary<LessF>(t, OpKind::Less);
  typed_binary<LessEqualF>(t, OpKind::LessEqual);
  typed_binary<GreaterF>(t, OpKind::Greater);
  typed_binary<GreaterEqualF>(t, OpKind::GreaterEqual);
  typed_binary<AndF, false>(t, OpKind::LogicalAnd);
  typed_binary<OrF, false>(t, OpKind::LogicalOr);
  typed_binary<XorF, false>(t, OpKind::LogicalXor);
  ternary<SelectGradF<true>>(t, OpKind::MaximumGrad);
  ternary<SelectGradF<false>>(t, OpKind::MinimumGrad);
}

}  // namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS
