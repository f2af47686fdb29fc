// SPDX-License-Identifier: Apache-2.0
// ONNX import of the signal ops (src/onnx/ops_signal.cpp): DFT, STFT, the windows and
// MelWeightMatrix against the definitions in double.
#include <algorithm>
#include <utility>

#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// DFT and STFT (opset 17) against a direct transform in double: a real signal (all bins and
// onesided, padded and truncated by dft_length), a complex one along axis 2, its inverse (which
// gives the signal back), and windowed frames; on every platform, exported and imported back.
TEST(OnnxImport, DftAndStftTransformLikeTheDefinition) {
  using Complex = std::pair<double, double>;
  // x: [rows][n] complex; the N-point transform's first K bins.
  const auto reference = [](const std::vector<std::vector<Complex>>& x, std::int64_t N,
                            std::int64_t K, bool inverse) {
    std::vector<float> out;
    for (const auto& row : x) {
      for (std::int64_t k = 0; k < K; ++k) {
        double re = 0, im = 0;
        for (std::int64_t n = 0;
             n < std::min<std::int64_t>(N, static_cast<std::int64_t>(row.size())); ++n) {
          const double t =
              (inverse ? 2 : -2) * M_PI * static_cast<double>(k * n) / static_cast<double>(N);
          re += row[static_cast<std::size_t>(n)].first * std::cos(t) -
                row[static_cast<std::size_t>(n)].second * std::sin(t);
          im += row[static_cast<std::size_t>(n)].first * std::sin(t) +
                row[static_cast<std::size_t>(n)].second * std::cos(t);
        }
        out.push_back(static_cast<float>(inverse ? re / static_cast<double>(N) : re));
        out.push_back(static_cast<float>(inverse ? im / static_cast<double>(N) : im));
      }
    }
    return out;
  };
  Builder b(17);
  b.input("x", {2, 6, 1}).input("z", {1, 2, 5, 2}).input("sig", {1, 11, 1}).input("win", {4});
  b.output("full", {2, 6, 2}).output("half", {2, 4, 2}).output("pad", {2, 8, 2});
  b.output("cut", {2, 4, 2}).output("zf", {1, 2, 5, 2}).output("zi", {1, 2, 5, 2});
  b.output("st", {1, 4, 3, 2});
  b.int_tensor("eight", {}, {8}).int_tensor("four", {}, {4}).int_tensor("step", {}, {2});
  b.node("DFT", {"x"}, {"full"});
  Builder::attr(b.node("DFT", {"x"}, {"half"}), "onesided", std::int64_t{1});
  b.node("DFT", {"x", "eight"}, {"pad"});
  b.node("DFT", {"x", "four"}, {"cut"});
  Builder::attr(b.node("DFT", {"z"}, {"zf"}), "axis", std::int64_t{2});
  auto* inv = b.node("DFT", {"zf"}, {"zi"});
  Builder::attr(inv, "axis", std::int64_t{2});
  Builder::attr(inv, "inverse", std::int64_t{1});
  // (onesided by default; ONNX 1.12's shape inference takes it as 0, and counts 5 frames here)
  b.node("STFT", {"sig", "step", "win"}, {"st"});
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  std::vector<float> x(12), z(20), sig(11), win{0.0f, 0.5f, 1.0f, 0.5f};
  for (std::size_t k = 0; k < 12; ++k) x[k] = static_cast<float>((k * 5) % 7) - 3.0f;
  for (std::size_t k = 0; k < 20; ++k) z[k] = static_cast<float>((k * 3) % 11) * 0.25f - 1.0f;
  for (std::size_t k = 0; k < 11; ++k) sig[k] = static_cast<float>((k * k) % 5) - 2.0f;
  std::vector<std::vector<Complex>> xr(2), zr(2), frames;
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t n = 0; n < 6; ++n) xr[r].push_back({x[r * 6 + n], 0.0});
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t n = 0; n < 5; ++n)
      zr[r].push_back({z[(r * 5 + n) * 2], z[(r * 5 + n) * 2 + 1]});
  for (std::size_t f = 0; f < 4; ++f) {
    frames.emplace_back();
    for (std::size_t n = 0; n < 4; ++n) frames.back().push_back({sig[f * 2 + n] * win[n], 0.0});
  }
  const std::vector<std::vector<float>> want{
      reference(xr, 6, 6, false),    reference(xr, 6, 4, false), reference(xr, 8, 8, false),
      reference(xr, 4, 4, false),    reference(zr, 5, 5, false), z,
      reference(frames, 4, 3, false)};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"z", z}, {"sig", sig}, {"win", win}});
      for (std::size_t o = 0; o < want.size(); ++o) {
        const std::vector<float> got = cg.read(model->outputs[o]);
        ASSERT_EQ(got.size(), want[o].size()) << o;
        for (std::size_t e = 0; e < got.size(); ++e)
          EXPECT_NEAR(got[e], want[o][e], 1e-4) << o << " " << e;
      }
    }
  }
  Builder bad(17);
  bad.input("z", {1, 5, 2}).output("y", {1, 3, 2});
  Builder::attr(bad.node("DFT", {"z"}, {"y"}), "onesided", std::int64_t{1});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad.import(); }), "onesided");
  for (std::int64_t axis : {0, -3, 2, -1}) {  // the batch, and the real / imaginary parts
    Builder wrong(17);
    wrong.input("z", {1, 5, 2}).output("y", {1, 5, 2});
    Builder::attr(wrong.node("DFT", {"z"}, {"y"}), "axis", axis);
    EXPECT_CONTAINS(error_of<ShapeError>([&] { wrong.import(); }), "not a signal axis");
  }
}

// A mel spectrogram as audio models export it: STFT with a HannWindow, the power of each bin,
// times a MelWeightMatrix; against the same pipeline in double (the mel matrix by ONNX's
// reference algorithm), on every platform. A window size computed at run time needs its value
// at import; an upper edge above the Nyquist frequency is a ShapeError.
TEST(OnnxImport, MelSpectrogramFromWindowStftAndMelMatrix) {
  const std::int64_t L = 16, step = 8, mels = 4, rate = 8000, n = 48;
  Builder b(17);
  b.input("sig", {1, n, 1}).output("mel", {1, (n - L) / step + 1, mels});
  b.int_tensor("size", {}, {L}).int_tensor("step", {}, {step}).int_tensor("bins", {}, {mels});
  b.int_tensor("rate", {}, {rate}).floats("lo", {}, {100.0f}).floats("hi", {}, {3900.0f});
  b.int_tensor("last", {1}, {-1});
  b.node("HannWindow", {"size"}, {"win"});
  b.node("STFT", {"sig", "step", "win"}, {"spec"});
  b.node("Mul", {"spec", "spec"}, {"sq"});
  Builder::attr(b.node("ReduceSum", {"sq", "last"}, {"power"}), "keepdims", std::int64_t{0});
  b.node("MelWeightMatrix", {"bins", "size", "rate", "lo", "hi"}, {"m"});
  b.node("MatMul", {"power", "m"}, {"mel"});
  ho::Model m = b.import();
  std::vector<float> sig(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < sig.size(); ++k)
    sig[k] = static_cast<float>(std::sin(0.7 * k) + 0.25 * std::cos(2.9 * k));
  // The reference: periodic Hann, onesided DFT power, ONNX's mel triangles.
  const std::int64_t K = L / 2 + 1, frames = (n - L) / step + 1;
  const auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = to_mel(100.0), mstep = (to_mel(3900.0) - low) / static_cast<double>(mels + 2);
  std::vector<std::int64_t> point;
  for (std::int64_t k = 0; k < mels + 2; ++k) {
    const double hz =
        700.0 * (std::pow(10.0, (static_cast<double>(k) * mstep + low) / 2595.0) - 1.0);
    point.push_back(static_cast<std::int64_t>(std::floor(static_cast<double>(L + 1) * hz / rate)));
  }
  std::vector<double> tri(static_cast<std::size_t>(K * mels), 0.0);
  for (std::int64_t i = 0; i < mels; ++i) {
    const std::int64_t a = point[static_cast<std::size_t>(i)],
                       c = point[static_cast<std::size_t>(i + 1)],
                       e = point[static_cast<std::size_t>(i + 2)];
    if (c == a) tri[static_cast<std::size_t>(c * mels + i)] = 1;
    for (std::int64_t j = a; c > a && j <= c; ++j)
      tri[static_cast<std::size_t>(j * mels + i)] = double(j - a) / double(c - a);
    for (std::int64_t j = c; j < e; ++j)
      tri[static_cast<std::size_t>(j * mels + i)] = double(e - j) / double(e - c);
  }
  std::vector<float> want;
  for (std::int64_t f = 0; f < frames; ++f) {
    std::vector<double> power(static_cast<std::size_t>(K));
    for (std::int64_t k = 0; k < K; ++k) {
      double re = 0, im = 0;
      for (std::int64_t t = 0; t < L; ++t) {
        const double w = std::pow(std::sin(M_PI * static_cast<double>(t) / L), 2);
        const double x = sig[static_cast<std::size_t>(f * step + t)] * w,
                     th = -2 * M_PI * double(k * t) / L;
        re += x * std::cos(th);
        im += x * std::sin(th);
      }
      power[static_cast<std::size_t>(k)] = re * re + im * im;
    }
    for (std::int64_t i = 0; i < mels; ++i) {
      double v = 0;
      for (std::int64_t k = 0; k < K; ++k)
        v += power[static_cast<std::size_t>(k)] * tri[static_cast<std::size_t>(k * mels + i)];
      want.push_back(static_cast<float>(v));
    }
  }
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
    cg.run({{"sig", sig}});
    const std::vector<float> got = cg.read(m.outputs[0]);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k)
      EXPECT_NEAR(got[k], want[k], 1e-4 + 1e-4 * std::fabs(want[k])) << k;
  }
  Builder fed(17);
  fed.input("size", {}, 7).output("w", {8});
  fed.node("HannWindow", {"size"}, {"w"});
  try {
    fed.import();
    ADD_FAILURE() << "a run-time window size imported";
  } catch (const ho::UnsupportedError& u) {
    EXPECT_EQ(u.input_needed(), "size");
  }
  Builder nyquist(17);
  nyquist.output("m", {9, 4}).int_tensor("bins", {}, {4}).int_tensor("size", {}, {16});
  nyquist.int_tensor("rate", {}, {8000}).floats("lo", {}, {0.0f}).floats("hi", {}, {20000.0f});
  nyquist.node("MelWeightMatrix", {"bins", "size", "rate", "lo", "hi"}, {"m"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { nyquist.import(); }), "Nyquist");
}

}  // namespace
