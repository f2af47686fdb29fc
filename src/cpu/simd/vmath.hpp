// SPDX-License-Identifier: Apache-2.0
// Vector float math: exp, log, tanh, sigmoid on GCC vector types as wide as the target's
// registers (Cephes-style range reduction and polynomials, about 1-2 ulp). Written on explicit
// vectors because the auto-vectoriser turns the clamps of scalar versions into branches (jump
// threading) and then gives up; vector ternaries are blends. Scalar calls use lane 0 of the same
// code, so a value comes out bit-identical whichever path computes it. Compiled once per code
// path (code_path.hpp): only the sources of a path include it, in the path's namespace.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "cpu/simd/isa_ns.hpp"

namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS::vm {

// As wide as the registers: 16 lanes with AVX-512, 8 with AVX, 4 below. GCC splits a vector
// wider than the registers for arithmetic, but lowers its comparisons and ternaries lane by lane
// in scalar code: with 16-lane vectors on an AVX2 machine (Zen 3) the NaN-propagating max pooling
// ran at scalar speed, 3.5-4.6x slower than with 8 (bench/history.md, "Vector width on AVX2 CPUs").
#if defined(__AVX512F__)
inline constexpr int kLanes = 16;
#elif defined(__AVX__)
inline constexpr int kLanes = 8;
#else
inline constexpr int kLanes = 4;
#endif
using vf = float __attribute__((vector_size(kLanes * 4)));
using vi = std::int32_t __attribute__((vector_size(kLanes * 4)));

inline vf splat(float v) {
  return vf{} + v;
}
inline vf load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vf v) {
  std::memcpy(p, &v, sizeof v);
}

inline vf exp(vf x) {
  constexpr float kHi = 88.3762626647949f, kLo = -87.3365478515625f;
  const vf hi = splat(kHi), lo = splat(kLo);
  vf xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  xc = x == x ? xc : splat(0.0f);  // NaN: computed on 0, put back at the end
  const vf q = xc * 1.44269504088896341f + 0.5f;
  const vf t = __builtin_convertvector(__builtin_convertvector(q, vi), vf);
  const vf n = t > q ? t - 1.0f : t;  // floor(q)
  const vf r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  vf p = splat(1.9875691500E-4f);
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  const vf y = p * r * r + r + 1.0f;
  const vi e = (__builtin_convertvector(n, vi) + 127) << 23;
  vf scale;
  std::memcpy(&scale, &e, sizeof scale);
  vf res = y * scale;
  res = x > hi ? splat(std::numeric_limits<float>::infinity()) : res;
  res = x < lo ? splat(0.0f) : res;
  return x == x ? res : x;
}

inline vf log(vf x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); subnormals are scaled up first.
  const vf tiny = splat(1.17549435e-38f);
  const vf xs = x < tiny ? x * 8388608.0f : x;  // 2^23
  vi bits;
  std::memcpy(&bits, &xs, sizeof bits);
  vf e = __builtin_convertvector(((bits >> 23) & 0xff) - 126, vf);
  e = x < tiny ? e - 23.0f : e;
  const vi mb = (bits & 0x007fffff) | 0x3f000000;
  vf m;
  std::memcpy(&m, &mb, sizeof m);  // [0.5, 1)
  const vf half_sqrt2 = splat(0.707106781186547524f);
  e = m < half_sqrt2 ? e - 1.0f : e;
  m = m < half_sqrt2 ? m + m - 1.0f : m - 1.0f;
  const vf z = m * m;
  vf y = splat(7.0376836292E-2f);
  y = y * m - 1.1514610310E-1f;
  y = y * m + 1.1676998740E-1f;
  y = y * m - 1.2420140846E-1f;
  y = y * m + 1.4249322787E-1f;
  y = y * m - 1.6668057665E-1f;
  y = y * m + 2.0000714765E-1f;
  y = y * m - 2.4999993993E-1f;
  y = y * m + 3.3333331174E-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  vf res = m + y + 0.693359375f * e;
  const vf inf = splat(std::numeric_limits<float>::infinity());
  res = x == 0.0f ? -inf : res;
  res = x == inf ? inf : res;
  return (x < 0.0f) | (x != x) ? splat(std::numeric_limits<float>::quiet_NaN()) : res;
}

inline vf tanh(vf x) {
  const vf ax = x < 0.0f ? -x : x;
  // small |x|: odd polynomial; otherwise 1 - 2 / (exp(2|x|) + 1) with the sign put back
  const vf z = x * x;
  vf p = splat(-5.70498872745E-3f);
  p = p * z + 2.06390887954E-2f;
  p = p * z - 5.37397155531E-2f;
  p = p * z + 1.33314422036E-1f;
  p = p * z - 3.33332819422E-1f;
  const vf small = x + x * z * p;
  const vf e = exp(2.0f * (ax > 10.0f ? splat(10.0f) : ax));
  vf big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0.0f ? -big : big;
  return ax < 0.625f ? small : big;
}

inline vf sigmoid(vf x) {
  return 1.0f / (1.0f + exp(-x));
}

// erf(x) = x P(x^2) / Q(x^2) on [-4, 4], +-1 beyond (erf is 1 in float from 3.92 on): the
// rational approximation of Eigen and XLA, a few ulp.
inline vf erf(vf x) {
  const vf xc = x > 4.0f ? splat(4.0f) : (x < -4.0f ? splat(-4.0f) : x);
  const vf z = xc * xc;
  vf p = splat(-2.72614225801306e-10f);
  p = p * z + 2.77068142495902e-08f;
  p = p * z - 2.10102402082508e-06f;
  p = p * z - 5.69250639462346e-05f;
  p = p * z - 7.34990630326855e-04f;
  p = p * z - 2.95459980854025e-03f;
  p = p * z - 1.60960333262415e-02f;
  vf q = splat(-1.45660718464996e-05f);
  q = q * z - 2.13374055278905e-04f;
  q = q * z - 1.68282697438203e-03f;
  q = q * z - 7.37332916720468e-03f;
  q = q * z - 1.42647390514189e-02f;
  return x == x ? xc * p / q : x;  // NaN stays NaN
}

// Scalar entry points: lane 0 of the vector code.
inline float exp(float x) {
  return exp(splat(x))[0];
}
inline float log(float x) {
  return log(splat(x))[0];
}
inline float tanh(float x) {
  return tanh(splat(x))[0];
}
inline float sigmoid(float x) {
  return sigmoid(splat(x))[0];
}
inline float erf(float x) {
  return erf(splat(x))[0];
}

/// o[i] = f(x[i]) for i < n, kLanes at a time; the tail goes through a padded vector.
/// o may equal x.
template <class F>
inline void map(const float* x, float* o, std::int64_t n, F&& f) {
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(o + i, f(load(x + i)));
  if (i < n) {
    float buf[kLanes] = {};
    const auto rest = static_cast<std::size_t>(n - i);
    std::memcpy(buf, x + i, rest * sizeof(float));
    store(buf, f(load(buf)));
    std::memcpy(o + i, buf, rest * sizeof(float));
  }
}

}  // namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS::vm
