// Vectorisable float math: exp, log, tanh, sigmoid written without calls or branches so that
// loops over them compile to SIMD code (Cephes-style range reduction and polynomials, about
// 1-2 ulp). libm's expf/logf would stop the vectoriser.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace hetgraph::detail::cpu::vm {

inline float select(bool c, float a, float b) {
  return c ? a : b;
}

inline float exp(float x) {
  constexpr float kHi = 88.3762626647949f, kLo = -87.3365478515625f;
  const float xc = select(x == x, x < kLo ? kLo : (x > kHi ? kHi : x), 0.0f);
  const float q = xc * 1.44269504088896341f + 0.5f;
  const float t = static_cast<float>(static_cast<std::int32_t>(q));
  const float n = t - select(t > q, 1.0f, 0.0f);  // floor(q)
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  const float y = p * r * r + r + 1.0f;
  const std::int32_t e = (static_cast<std::int32_t>(n) + 127) << 23;
  float res = y * std::bit_cast<float>(e);
  res = select(x > kHi, std::numeric_limits<float>::infinity(), res);
  res = select(x < kLo, 0.0f, res);
  return select(x == x, res, x);
}

inline float log(float x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); subnormals are scaled up first.
  const bool sub = x < 1.17549435e-38f;
  const float xs = select(sub, x * 8388608.0f, x);  // 2^23
  const std::int32_t bits = std::bit_cast<std::int32_t>(xs);
  float e = static_cast<float>(((bits >> 23) & 0xff) - 126) - select(sub, 23.0f, 0.0f);
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  const bool lo = m < 0.707106781186547524f;
  e = select(lo, e - 1.0f, e);
  m = select(lo, m + m - 1.0f, m - 1.0f);
  const float z = m * m;
  float y = 7.0376836292E-2f;
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
  float res = m + y + 0.693359375f * e;
  res = select(x == 0.0f, -std::numeric_limits<float>::infinity(), res);
  res = select(x == std::numeric_limits<float>::infinity(), x, res);
  return select(x < 0.0f || x != x, std::numeric_limits<float>::quiet_NaN(), res);
}

inline float tanh(float x) {
  const float ax = select(x < 0.0f, -x, x);
  // small |x|: odd polynomial; otherwise 1 - 2 / (exp(2|x|) + 1) with the sign put back
  const float z = x * x;
  float p = -5.70498872745E-3f;
  p = p * z + 2.06390887954E-2f;
  p = p * z - 5.37397155531E-2f;
  p = p * z + 1.33314422036E-1f;
  p = p * z - 3.33332819422E-1f;
  const float small = x + x * z * p;
  const float e = exp(2.0f * select(ax > 10.0f, 10.0f, ax));
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = select(x < 0.0f, -big, big);
  return select(ax < 0.625f, small, big);
}

inline float sigmoid(float x) {
  return 1.0f / (1.0f + exp(-x));
}

}  // namespace hetgraph::detail::cpu::vm
