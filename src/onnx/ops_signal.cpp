// SPDX-License-Identifier: Apache-2.0
// ONNX signal processing (opset 17) on hetgraph ops: DFT and STFT as products with constant
// matrices, and the constants of an audio front-end made at import (HannWindow, HammingWindow,
// BlackmanWindow, MelWeightMatrix).
#include <algorithm>
#include <cmath>
#include <string>

#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

// ---- DFT and STFT ------------------------------------------------------------------------------
// A discrete Fourier transform is a product with a constant matrix: rows the n_in input samples
// (real, or real and imaginary), columns the K output bins (real and imaginary), each entry a
// cos or sin of 2 pi (k n mod N) / N worked out in double. O(n^2), which a matmul does well at
// the frame lengths audio front-ends use.

/// The [n_in * parts, K * 2] matrix of an N-point DFT (1/N-scaled inverse), `parts` 1 for real
/// input and 2 for complex. Input samples past N (a shorter dft_length) count for nothing;
/// missing ones (a longer) are zeros.
Node dft_matrix(Ctx& c, std::int64_t n_in, std::int64_t parts, std::int64_t N, std::int64_t K,
                bool inverse) {
  std::vector<float> m = c.host<float>(n_in * parts * K * 2);
  const double scale = inverse ? 1.0 / static_cast<double>(N) : 1.0, sign = inverse ? 1.0 : -1.0;
  const double pi2 = 2.0 * 3.14159265358979323846;
  for (std::int64_t n = 0; n < std::min(n_in, N); ++n) {
    for (std::int64_t k = 0; k < K; ++k) {
      const double t = pi2 * static_cast<double>((k * n) % N) / static_cast<double>(N);
      const double cs = std::cos(t) * scale, sn = std::sin(t) * scale * sign;
      // (xr + i xi)(cos t + i sign sin t): re = xr cos - xi sign sin, im = xr sign sin + xi cos
      const auto at = [&](std::int64_t part, std::int64_t out) {
        return static_cast<std::size_t>(((n * parts + part) * K + k) * 2 + out);
      };
      m[at(0, 0)] = static_cast<float>(cs);
      m[at(0, 1)] = static_cast<float>(sn);
      if (parts == 2) {
        m[at(1, 0)] = static_cast<float>(-sn);
        m[at(1, 1)] = static_cast<float>(cs);
      }
    }
  }
  return c.constant({n_in * parts, K * 2}, std::move(m));
}

/// One value of an input that must be known at import, at least `least`.
std::int64_t known_scalar(Ctx& c, std::size_t i, const char* what, std::int64_t least) {
  const Dims v = c.ints(i, what);
  if (v.size() != 1 || v[0] < least) {
    c.fail(std::string(what) + " must be one integer of at least " + std::to_string(least) +
           ", got " + dims_str(v));
  }
  return v[0];
}

// DFT (opset 17): along `axis` of [batch, ..., 1 or 2]; dft_length (known at import) pads with
// zeros or truncates; onesided keeps the first N / 2 + 1 bins of a real input's transform.
void dft(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  const int r = static_cast<int>(d.size());
  if (r < 3 || (d.back() != 1 && d.back() != 2))
    c.fail("the input " + dims_str(d) + " must be [batch, signal..., 1 or 2]");
  const std::int64_t a = c.attr_i("axis", 1), at = a < 0 ? a + r : a;
  if (at < 1 || at > r - 2)  // not the batch, not the real / imaginary parts
    c.fail("axis " + std::to_string(a) + " is not a signal axis of " + dims_str(d));
  const int axis = static_cast<int>(at);
  const bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
  const std::int64_t parts = d.back(), n_in = d[static_cast<std::size_t>(axis)];
  if (onesided && (parts == 2 || inverse))
    c.fail("onesided applies to the forward transform of a real input");
  const std::int64_t N = c.has(1) ? known_scalar(c, 1, "dft_length", 1) : n_in;
  const std::int64_t K = onesided ? N / 2 + 1 : N;
  // The signal axis moved next to the last: [rest..., n, parts] -> [rest..., K, 2].
  std::vector<int> perm;
  Dims rest;
  for (int k = 0; k < r - 1; ++k) {
    if (k != axis) perm.push_back(k), rest.push_back(d[static_cast<std::size_t>(k)]);
  }
  perm.push_back(axis);
  perm.push_back(r - 1);
  Node flat = c.reshape(transpose(x, perm), {numel(rest), n_in * parts});
  Node y = matmul(flat, dft_matrix(c, n_in, parts, N, K, inverse));
  Dims yd = rest;
  yd.push_back(K);
  yd.push_back(2);
  std::vector<int> back(static_cast<std::size_t>(r));  // the inverse permutation
  for (int k = 0; k < r; ++k) back[static_cast<std::size_t>(perm[static_cast<std::size_t>(k)])] = k;
  c.set(0, transpose(c.reshape(y, yd), back));
}

// STFT (opset 17): frames of frame_length samples every frame_step (both known at import; the
// length may come from the window), each multiplied by the window (if given) and transformed:
// [batch, frames, bins, 2]. Frames are one gather of constant positions.
void stft(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  if (d.size() != 3 || (d[2] != 1 && d[2] != 2))
    c.fail("the signal " + dims_str(d) + " must be [batch, length, 1 or 2]");
  const std::int64_t step = known_scalar(c, 1, "frame_step", 1), parts = d[2];
  const bool window = c.has(2);
  std::int64_t L = window ? numel(c.dims(2)) : 0;
  if (window && c.dims(2).size() != 1) c.fail("the window must be 1-d, got " + dims_str(c.dims(2)));
  if (c.has(3)) {
    const std::int64_t f = known_scalar(c, 3, "frame_length", 1);
    if (window && f != L)
      c.fail("frame_length " + std::to_string(f) + " differs from the window's " +
             std::to_string(L));
    L = f;
  }
  if (L < 1) c.fail("neither a window nor a frame_length says how long a frame is");
  if (L > d[1]) c.fail("frames of " + std::to_string(L) + " do not fit the signal " + dims_str(d));
  const bool onesided = c.attr_i("onesided", 1) != 0;
  if (onesided && parts == 2) c.fail("onesided applies to a real signal");
  const std::int64_t frames = (d[1] - L) / step + 1, K = onesided ? L / 2 + 1 : L;
  std::vector<std::int32_t> at = c.host<std::int32_t>(frames * L);
  for (std::int64_t f = 0; f < frames; ++f)
    for (std::int64_t n = 0; n < L; ++n)
      at[static_cast<std::size_t>(f * L + n)] = static_cast<std::int32_t>(f * step + n);
  Node fr = gather(x, c.graph().constant_i32(Shape{frames * L}, std::move(at)), 1);
  if (window) fr = mul(c.reshape(fr, {d[0], frames, L, parts}), c.reshape(c.f32(2), {L, 1}));
  Node y = matmul(c.reshape(fr, {d[0] * frames, L * parts}), dft_matrix(c, L, parts, L, K, false));
  c.set(0, c.reshape(y, {d[0], frames, K, 2}));
}

// ---- Window functions and MelWeightMatrix (opset 17) ------------------------------------------
// Constants of sizes known at import, computed in double as ONNX's reference does: the spectral
// front-end of an audio model is STFT(signal, window) times a mel matrix.

/// A float (or, with output_datatype int32 / int64, truncated integer) tensor known at import.
void set_known(Ctx& c, Dims dims, const std::vector<double>& v) {
  const auto elem = static_cast<int>(c.attr_i("output_datatype", ir::kFloat));
  ir::Tensor t;
  t.elem = elem;
  t.dims = std::move(dims);
  if (ir::held_as_float(elem)) {
    for (double x : v) t.f.push_back(ir::round_to_elem(static_cast<float>(x), elem));
  } else if (elem == ir::kInt32 || elem == ir::kInt64) {
    for (double x : v) t.i.push_back(static_cast<std::int64_t>(x));
  } else {
    c.unsupported(std::string("output_datatype ") + ir::elem_name(elem));
  }
  c.set(0, std::move(t));
}

// HannWindow, HammingWindow, BlackmanWindow: w[n] for n < size, periodic (over size, the
// default) or symmetric (over size - 1).
void window_op(Ctx& c) {
  const std::int64_t size = known_scalar(c, 0, "size", 1);
  c.host_check(size);
  const double N = static_cast<double>(c.attr_i("periodic", 1) != 0 ? size : size - 1);
  const double pi2 = 2.0 * 3.14159265358979323846;
  std::vector<double> w(static_cast<std::size_t>(size));
  for (std::int64_t n = 0; n < size; ++n) {
    const double t = N > 0 ? pi2 * static_cast<double>(n) / N : 0.0;
    double v = 0;
    if (c.n.op == "HannWindow") {
      v = std::pow(std::sin(t / 2), 2);
    } else if (c.n.op == "HammingWindow") {
      v = 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * std::cos(t);
    } else {
      v = 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2 * t);
    }
    w[static_cast<std::size_t>(n)] = v;
  }
  set_known(c, {size}, w);
}

// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangles between num_mel_bins + 2 points
// evenly spaced on the mel scale from lower_edge_hertz to upper_edge_hertz, each mapped to a
// spectrogram bin (floor((dft_length + 1) f / sample_rate)).
void mel_weight_matrix(Ctx& c) {
  const std::int64_t mels = known_scalar(c, 0, "num_mel_bins", 1),
                     dft_length = known_scalar(c, 1, "dft_length", 1),
                     rate = known_scalar(c, 2, "sample_rate", 1);
  const std::vector<float> lo = c.floats(3, "lower_edge_hertz"),
                           hi = c.floats(4, "upper_edge_hertz");
  if (lo.size() != 1 || hi.size() != 1 || !(lo[0] >= 0) || !(hi[0] > lo[0]))
    c.fail("the edges must be one number each, 0 <= lower < upper");
  const std::int64_t bins = dft_length / 2 + 1;
  c.host_check(bins * mels);
  const auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = mel(lo[0]), step = (mel(hi[0]) - low) / static_cast<double>(mels + 2);
  std::vector<std::int64_t> point(static_cast<std::size_t>(mels + 2));
  for (std::size_t k = 0; k < point.size(); ++k) {
    const double hz =
        700.0 * (std::pow(10.0, (static_cast<double>(k) * step + low) / 2595.0) - 1.0);
    point[k] = static_cast<std::int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
    // (the last point bounds a range; the others are bins written to)
    if (point[k] < 0 || point[k] >= bins + (k + 1 == point.size() ? 1 : 0))
      c.fail("upper_edge_hertz lies above the spectrogram's bins (the Nyquist frequency)");
  }
  std::vector<double> m(static_cast<std::size_t>(bins * mels), 0.0);
  const auto at = [&](std::int64_t j, std::int64_t i) {
    return static_cast<std::size_t>(j * mels + i);
  };
  for (std::int64_t i = 0; i < mels; ++i) {
    const std::int64_t left = point[static_cast<std::size_t>(i)],
                       centre = point[static_cast<std::size_t>(i + 1)],
                       right = point[static_cast<std::size_t>(i + 2)];
    if (centre == left) {
      m[at(centre, i)] = 1;
    } else {
      for (std::int64_t j = left; j <= centre; ++j)
        m[at(j, i)] = static_cast<double>(j - left) / static_cast<double>(centre - left);
    }
    for (std::int64_t j = centre; j < right; ++j)
      m[at(j, i)] = static_cast<double>(right - j) / static_cast<double>(right - centre);
  }
  set_known(c, {bins, mels}, m);
}

}  // namespace

void register_signal_ops(std::vector<Handler>& h) {
  h.push_back({"DFT", 17, 17, dft});
  h.push_back({"STFT", 17, 17, stft});
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    h.push_back({w, 17, 17, window_op});
  h.push_back({"MelWeightMatrix", 17, 17, mel_weight_matrix});
}

}  // namespace hetgraph::onnx::imp
