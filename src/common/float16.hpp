// SPDX-License-Identifier: Apache-2.0
// float16 and bfloat16 values held in float32: rounding to them (IEEE round to nearest, halves
// to even, as a conversion does) and float16's 16-bit form. ONNX models' float16 and bfloat16
// tensors are computed in float32 here; these give their values where the model has them
// (inputs, initializers, casts, outputs). kernels/elementwise.cl has the same rounding.
//
//   detail::round_to_float16(0.1f);   // 0.0999755859375f
//   detail::round_to_bfloat16(0.1f);  // 0.10009765625f
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace hetgraph::detail {

/// x rounded to the nearest float16 value; above 65504 it becomes inf from 65520 on (where a
/// float16 conversion overflows). NaN and inf stay.
inline float round_to_float16(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a >= 0x7f800000u) return x;
  // Below 2^-14 float16 is subnormal: multiples of 2^-24 (both scalings are exact).
  if (a < 0x38800000u) return std::nearbyint(x * 16777216.0f) * (1.0f / 16777216.0f);
  // Keep 10 of the 23 mantissa bits, halves to even; a carry moves into the exponent.
  std::uint32_t r = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
  if (r > 0x477fe000u) r = 0x7f800000u;  // past 65504
  return std::bit_cast<float>(r | sign);
}

/// x rounded to the nearest bfloat16 value (float32's upper 16 bits). NaN stays.
inline float round_to_bfloat16(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;
  return std::bit_cast<float>((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

/// The float16 bits of x rounded to float16.
inline std::uint16_t float16_bits(float x) {
  x = round_to_float16(x);
  const auto u = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // a quiet NaN
  if (a >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // inf
  if (a < 0x38800000u) {  // subnormal or zero: the count of 2^-24 steps
    const auto steps = static_cast<std::uint32_t>(std::fabs(x) * 16777216.0f);
    return static_cast<std::uint16_t>(sign | steps);
  }
  return static_cast<std::uint16_t>(sign | ((a - 0x38000000u) >> 13));  // exponent rebiased
}

/// The float a float16's bits hold (exact).
inline float float16_value(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // subnormal or zero: man * 2^-24
    const float v = static_cast<float>(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

/// The float a bfloat16's bits hold (exact).
inline float bfloat16_value(std::uint16_t h) {
  return std::bit_cast<float>(std::uint32_t{h} << 16);
}

}  // namespace hetgraph::detail
