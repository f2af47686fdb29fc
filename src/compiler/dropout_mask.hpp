// SPDX-License-Identifier: Apache-2.0
// The dropout mask, one definition for every platform (kernels/nn.cl spells the same steps in
// OpenCL C). Element i of a dropout node is kept when draw(key, i) >= threshold(p), where
//   key      = mix(mix(seed) + bits(step))    (bits: the step's float bit pattern)
//   draw(k, i) = mix(k + (i + 1) * 0x9E3779B97F4A7C15) >> 40   (24 bits)
// and mix is SplitMix64's finaliser: the draws of one step are the SplitMix64 stream seeded
// with its key, a counter-based generator, so any element's draw takes O(1) work, on any
// thread, in any order (the mask never needs storing: the gradient recomputes it). Taking the
// step's bits, not its value, needs no float-to-integer conversion (undefined for NaN in C++)
// and gives distinct keys for distinct steps. The threshold is an integer, so the comparison
// is exact and the same on every platform.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "hetgraph/error.hpp"

namespace hetgraph::detail::dropout {

/// The drop probability's range, checked where a dropout is built (the op, and nn::dropout's
/// inference mode, which builds none).
inline void check_rate(float p) {
  if (!(p >= 0.0f && p <= 1.0f))
    throw UsageError("dropout: p must be in [0, 1], got " + std::to_string(p));
}

inline constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;
inline constexpr std::uint32_t kOne = 1u << 24;  // draws lie in [0, kOne)

constexpr std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline std::uint64_t key(std::uint64_t seed, float step) {
  return mix(mix(seed) + std::bit_cast<std::uint32_t>(step));
}

constexpr std::uint32_t draw(std::uint64_t key, std::uint64_t i) {
  return static_cast<std::uint32_t>(mix(key + (i + 1) * kGamma) >> 40);
}

/// Draws below this are dropped: p of them, to within 2^-24.
inline std::uint32_t threshold(float p) {
  return static_cast<std::uint32_t>(
      std::clamp(std::llround(static_cast<double>(p) * kOne), 0ll, static_cast<long long>(kOne)));
}

/// What a kept element is multiplied by (1 / (1 - p)); 0 when p = 1 drops everything.
inline float scale(float p) {
  return threshold(p) >= kOne ? 0.0f : 1.0f / (1.0f - p);
}

}  // namespace hetgraph::detail::dropout
