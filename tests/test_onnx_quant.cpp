// SPDX-License-Identifier: Apache-2.0
// ONNX import of the quantization ops (src/onnx/ops_quant.cpp) and of the quantized
// convolutions (ConvInteger, src/onnx/ops_nn.cpp): exact integer results.
#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "common/executable.hpp"
#include "compiler/graph_impl.hpp"
#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// QuantizeLinear (halves to even, saturating; uint8, and int8 per axis), DequantizeLinear back,
// and DynamicQuantizeLinear, against ONNX's formulas computed here, on every platform.
TEST(OnnxImport, QuantizationRoundsHalvesToEvenAndSaturates) {
  Builder b(13);
  b.input("x", {2, 3}).output("q", {2, 3}, 2).output("qa", {2, 3}, 3).output("d", {2, 3});
  b.output("dq", {2, 3}, 2).output("ds", {}).output("dz", {}, 2);
  b.floats("s", {}, {0.5f}).floats("sa", {2}, {0.25f, 2.0f});
  auto* zp = b.g->add_initializer();  // uint8 zero point 10
  zp->set_name("z");
  zp->set_data_type(2);
  zp->add_int32_data(10);
  auto* zpa = b.g->add_initializer();  // int8 zero points per row: -3, 5
  zpa->set_name("za");
  zpa->set_data_type(3);
  zpa->add_dims(2);
  zpa->add_int32_data(-3);
  zpa->add_int32_data(5);
  b.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
  Builder::attr(b.node("QuantizeLinear", {"x", "sa", "za"}, {"qa"}), "axis", std::int64_t{0});
  Builder::attr(b.node("DequantizeLinear", {"qa", "sa", "za"}, {"d"}), "axis", std::int64_t{0});
  b.node("DynamicQuantizeLinear", {"x"}, {"dq", "ds", "dz"});
  const std::vector<float> x{1.25f, -1.75f, 200.0f, 0.375f, -40.0f, 3.0f};
  const auto rne = [](float v) { return std::nearbyint(v); };  // the default mode: to even
  const auto sat = [](float v, float lo, float hi) { return std::min(std::max(v, lo), hi); };
  std::vector<std::int32_t> q, qa;
  std::vector<float> d;
  const float sa[2] = {0.25f, 2.0f}, za[2] = {-3.0f, 5.0f};
  for (std::size_t i = 0; i < 6; ++i) {
    q.push_back(static_cast<std::int32_t>(sat(rne(x[i] / 0.5f) + 10.0f, 0.0f, 255.0f)));
    const float v = sat(rne(x[i] / sa[i / 3]) + za[i / 3], -128.0f, 127.0f);
    qa.push_back(static_cast<std::int32_t>(v));
    d.push_back((v - za[i / 3]) * sa[i / 3]);
  }
  // 1.25 / 0.5 = 2.5 rounds to 2, -1.75 / 0.5 = -3.5 to -4; 200 saturates.
  EXPECT_EQ(q, (std::vector<std::int32_t>{12, 6, 255, 11, 0, 16}));
  const float lo = -40.0f, hi = 200.0f, scale = (hi - lo) / 255.0f;
  const float z = rne(sat(0.0f - lo / scale, 0.0f, 255.0f));
  std::vector<std::int32_t> dq;
  for (float v : x) dq.push_back(static_cast<std::int32_t>(sat(rne(v / scale) + z, 0.0f, 255.0f)));
  const ho::Model m = b.import();
  run_everywhere(m, {{"x", x}}, false, [&](CompiledGraph& cg, const ho::Model&) {
    EXPECT_EQ(cg.read_i32(m.outputs[0]), q);
    EXPECT_EQ(cg.read_i32(m.outputs[1]), qa);
    EXPECT_EQ(cg.read(m.outputs[2]), d);
    EXPECT_EQ(cg.read_i32(m.outputs[3]), dq);
    EXPECT_EQ(cg.read(m.outputs[4]), (std::vector<float>{scale}));
    EXPECT_EQ(cg.read_i32(m.outputs[5]), (std::vector<std::int32_t>{static_cast<std::int32_t>(z)}));
  });
  EXPECT_EQ(m.output_info[0].onnx_type, "uint8");
  EXPECT_EQ(m.output_info[1].onnx_type, "int8");
}

// An 8-bit initializer of the given ONNX type (2 uint8, 3 int8).
void int8_init(Builder& b, const std::string& name, int elem, std::vector<std::int64_t> dims,
               const std::vector<std::int32_t>& v) {
  auto* t = b.g->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (auto d : dims) t->add_dims(d);
  for (auto x : v) t->add_int32_data(x);
}

// MatMulInteger over 800 terms (sums beyond 2^24, where a float product would round) with a
// zero point per column, and a grouped, strided, padded ConvInteger with a zero point per output
// channel: exact, against int64 sums here, on every platform.
TEST(OnnxImport, IntegerProductsAndConvolutionsAreExact) {
  std::mt19937 rng(7);
  const auto bytes = [&](std::size_t n, int lo, int hi) {
    std::uniform_int_distribution<int> u(lo, hi);
    std::vector<std::int32_t> v(n);
    for (auto& x : v) x = u(rng);
    return v;
  };
  // B an initializer (its chunks made at import) and fed (sliced at run time).
  for (const bool fed : {false, true}) {
    SCOPED_TRACE(fed ? "B fed" : "B an initializer");
    const int m = 3, k = 800, n = 2;
    const auto a = bytes(m * k, 200, 255), bv = bytes(k * n, -128, -100);
    Builder b(13);
    b.input("A", {m, k}, 2).output("Y", {m, n}, 6);
    if (fed)
      b.input("B", {k, n}, 3);
    else
      int8_init(b, "B", 3, {k, n}, bv);
    int8_init(b, "az", 2, {}, {7});
    int8_init(b, "bz", 3, {n}, {-3, 5});
    b.node("MatMulInteger", {"A", "B", "az", "bz"}, {"Y"});
    std::vector<std::int32_t> want;
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        std::int64_t acc = 0;
        for (int t = 0; t < k; ++t)
          acc += std::int64_t{a[i * k + t] - 7} * (bv[t * n + j] - (j ? 5 : -3));
        want.push_back(static_cast<std::int32_t>(acc));
      }
    }
    ASSERT_GT(std::abs(want[0]), 1 << 24);  // beyond what one float sum holds exactly
    const ho::Model mo = b.import();
    std::vector<FeedItem> feeds{{"A", a}};
    if (fed) feeds.push_back({"B", bv});
    run_everywhere(mo, feeds, false, [&](CompiledGraph& cg, const ho::Model&) {
      EXPECT_EQ(cg.read_i32(mo.outputs[0]), want);
    });
  }
  // ConvInteger against int64 sums: x [1, ch, h, w] uint8 with zero point 3 (the padding),
  // w [oc, ch / groups, k, k] int8 with a zero point per output channel.
  struct ConvCase {
    int ch, oc, groups, h, w, k, stride, pad;
    int xlo, xhi, wlo, whi;
    bool w_fed = false;  // W a model input (computed with each run) rather than an initializer
  };
  const auto conv_case = [&](const ConvCase& cc) {
    SCOPED_TRACE(std::to_string(cc.ch) + " channels, " + std::to_string(cc.k) + "x" +
                 std::to_string(cc.k) + ", groups " + std::to_string(cc.groups) +
                 (cc.w_fed ? ", W fed" : ""));
    const int cg = cc.ch / cc.groups, taps = cc.k * cc.k;
    const int oh = (cc.h + 2 * cc.pad - cc.k) / cc.stride + 1;
    const int ow = (cc.w + 2 * cc.pad - cc.k) / cc.stride + 1;
    const auto x = bytes(static_cast<std::size_t>(cc.ch * cc.h * cc.w), cc.xlo, cc.xhi);
    const auto wv = bytes(static_cast<std::size_t>(cc.oc * cg * taps), cc.wlo, cc.whi);
    std::vector<std::int32_t> wz(static_cast<std::size_t>(cc.oc));
    for (int o = 0; o < cc.oc; ++o) wz[static_cast<std::size_t>(o)] = (o % 5) - 2;
    Builder b(13);
    b.input("x", {1, cc.ch, cc.h, cc.w}, 2).output("y", {1, cc.oc, oh, ow}, 6);
    if (cc.w_fed)
      b.input("w", {cc.oc, cg, cc.k, cc.k}, 3);
    else
      int8_init(b, "w", 3, {cc.oc, cg, cc.k, cc.k}, wv);
    int8_init(b, "xz", 2, {}, {3});
    int8_init(b, "wz", 3, {cc.oc}, wz);
    auto* nd = b.node("ConvInteger", {"x", "w", "xz", "wz"}, {"y"});
    Builder::attr(nd, "group", std::int64_t{cc.groups});
    Builder::attr(nd, "strides", std::vector<std::int64_t>{cc.stride, cc.stride});
    Builder::attr(nd, "pads", std::vector<std::int64_t>{cc.pad, cc.pad, cc.pad, cc.pad});
    std::vector<std::int32_t> want;
    std::int64_t biggest = 0;
    for (int o = 0; o < cc.oc; ++o) {
      const int g = o / (cc.oc / cc.groups);
      for (int y = 0; y < oh; ++y) {
        for (int xo = 0; xo < ow; ++xo) {
          std::int64_t acc = 0;
          for (int ci = 0; ci < cg; ++ci) {
            for (int t = 0; t < taps; ++t) {
              const int hy = y * cc.stride - cc.pad + t / cc.k;
              const int wx = xo * cc.stride - cc.pad + t % cc.k;
              if (hy < 0 || hy >= cc.h || wx < 0 || wx >= cc.w) continue;  // x_zero_point
              const int c = g * cg + ci;
              acc += std::int64_t{x[static_cast<std::size_t>((c * cc.h + hy) * cc.w + wx)] - 3} *
                     (wv[static_cast<std::size_t>((o * cg + ci) * taps + t)] -
                      wz[static_cast<std::size_t>(o)]);
            }
          }
          biggest = std::max(biggest, std::abs(acc));
          want.push_back(static_cast<std::int32_t>(acc));
        }
      }
    }
    const ho::Model mo = b.import();
    std::vector<FeedItem> feeds{{"x", x}};
    if (cc.w_fed) feeds.push_back({"w", wv});
    run_everywhere(mo, feeds, false, [&](CompiledGraph& cg, const ho::Model&) {
      EXPECT_EQ(cg.read_i32(mo.outputs[0]), want);
    });
    return biggest;
  };
  // Grouped, strided, padded: one float convolution.
  conv_case({4, 6, 2, 5, 5, 3, 2, 1, 0, 255, -128, 127});
  // 64 channels of 3x3 (576 taps, sums past 2^24): three convolutions of at most 28 channels,
  // the Winograd shape of resnet's layers (16s of channels, stride 1).
  EXPECT_GT(conv_case({64, 16, 1, 8, 8, 3, 1, 1, 250, 255, -128, -125}), 1 << 24);
  // The same with W computed at run time (its chunks sliced there, not made at import).
  EXPECT_GT(conv_case({64, 16, 1, 8, 8, 3, 1, 1, 250, 255, -128, -125, true}), 1 << 24);
  // 32 channels per group (more than 28): the gather of patches, chunked along its products.
  EXPECT_GT(conv_case({64, 4, 2, 6, 6, 3, 1, 1, 250, 255, -128, -125}), 1 << 23);
  // A 17x17 kernel (289 taps, more than one convolution may sum): the gather of patches.
  conv_case({1, 2, 1, 19, 19, 17, 1, 0, 0, 255, -128, 127});
}

// QLinearMatMul with a's and y's scales and zero points per row and b's per column (as ONNX
// allows), against the formula in double: saturate(round_half_even(acc * sa[i] * sb[j] / sy[i])
// + zy[i]) with acc the int64 sum of (a - za[i]) (b - zb[j]). A length that is neither 1 nor
// the rows' (columns') count names the input.
TEST(OnnxImport, QLinearMatMulScalesPerRowAndColumn) {
  const int m = 3, k = 5, n = 4;
  const std::vector<std::int32_t> a{10, 200, 37, 99, 255, 0, 1, 2, 3, 4, 128, 128, 130, 126, 64};
  const std::vector<std::int32_t> bv{-3, 5, 7,   -128, 127, 0,  1, -1, 2, 2,
                                     -2, 9, -50, 60,   -70, 80, 3, 3,  3, 3};
  const std::vector<float> sa{0.02f, 0.5f, 0.1f}, sb{0.05f, 0.01f, 0.2f, 1.0f},
      sy{0.3f, 2.0f, 0.7f};
  const std::vector<std::int32_t> za{3, 0, 128}, zb{0, -1, 2, 5}, zy{100, 0, 7};
  const auto build = [&](std::int64_t bad_rows) {
    Builder b(13);
    b.input("a", {m, k}, 2).output("y", {m, n}, 2);
    b.floats("sa", {bad_rows}, std::vector<float>(sa.begin(), sa.begin() + bad_rows));
    int8_init(b, "za", 2, {m}, za);
    int8_init(b, "b", 3, {k, n}, bv);
    b.floats("sb", {n}, sb);
    int8_init(b, "zb", 3, {n}, zb);
    b.floats("sy", {m}, sy);
    int8_init(b, "zy", 2, {m}, zy);
    b.node("QLinearMatMul", {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, {"y"});
    return b;
  };
  std::vector<std::int32_t> want;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      std::int64_t acc = 0;
      for (int t = 0; t < k; ++t)
        acc += std::int64_t{a[i * k + t] - za[i]} * (bv[t * n + j] - zb[j]);
      const float scale = sa[i] * sb[j] / sy[i];  // in float32, as the graph computes it
      const double q = std::nearbyint(static_cast<float>(acc) * scale) + zy[i];
      want.push_back(static_cast<std::int32_t>(std::clamp(q, 0.0, 255.0)));
    }
  }
  ASSERT_NE(std::set<std::int32_t>(want.begin(), want.end()).size(), 1u);
  const ho::Model mo = build(m).import();
  run_everywhere(mo, {{"a", a}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
    EXPECT_EQ(cg.read_i32(mm.outputs[0]), want);
  });
  EXPECT_CONTAINS(error_of<ShapeError>([&] { build(2).import(); }),
                  "input 1 [2] is neither a scalar nor one value per row (3)");
  Builder v(13);  // a vector operand: numpy's matmul allows it, hetgraph does not
  v.input("a", {k}, 2).output("y", {n}, 2);
  int8_init(v, "za", 2, {}, {0});
  int8_init(v, "b", 3, {k, n}, bv);
  int8_init(v, "zb", 3, {}, {0});
  v.floats("s", {}, {0.5f});
  v.node("QLinearMatMul", {"a", "s", "za", "b", "s", "zb", "s", "za"}, {"y"});
  EXPECT_CONTAINS(unsupported_of(v).what(), "a vector operand [5]");
}

// A QDQ model's weights: DequantizeLinear of an int8 initializer (scale and zero point per
// output channel) is computed at import, so the Conv after it has constant weights (no cast of
// them per run), and the result is bitwise the one computed at run time (W fed instead).
TEST(OnnxImport, KnownDequantizedWeightsAreMadeAtImport) {
  const std::vector<std::int32_t> w{-128, 127, 5,  -7, 0,  33, 90, -90, 1,   2,    3,  4,
                                    -5,   -6,  -7, -8, 11, 12, 13, 14,  100, -100, 64, -64};
  const auto build = [&](bool fed) {
    Builder b(13);
    b.input("x", {1, 2, 4, 4}).output("y", {1, 3, 3, 3});
    if (fed)
      b.input("wq", {3, 2, 2, 2}, 3);
    else
      int8_init(b, "wq", 3, {3, 2, 2, 2}, w);
    b.floats("ws", {3}, {0.013f, 0.5f, 0.0071f});
    int8_init(b, "wz", 3, {3}, {0, -3, 7});
    Builder::attr(b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}), "axis", std::int64_t{0});
    b.node("Conv", {"x", "w"}, {"y"});
    return b.import();
  };
  std::vector<float> x(32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 3.0f;
  const ho::Model known = build(false), fed = build(true);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph a = known.compile(GraphCompiler(pc.make()));
    CompiledGraph b = fed.compile(GraphCompiler(pc.make()));
    a.run({{"x", x}});
    b.run({{"x", x}, {"wq", w}});
    const std::vector<float> ya = a.read(known.outputs[0]), yb = b.read(fed.outputs[0]);
    ASSERT_EQ(ya.size(), yb.size());
    EXPECT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0);
    int casts = 0;
    for (const auto& n : detail::executable_of(a).plan().nodes)
      casts += n.op == detail::OpKind::Cast;
    EXPECT_EQ(casts, 0);
  }
}

// A ConvInteger whose weights' rank differs from the image's (fuzzing found ONNX's own shape
// inference crashing on it) is a ShapeError naming the node, as for Conv.
TEST(OnnxImport, IntegerConvolutionShapesAreChecked) {
  Builder b(10);
  b.input("x", {1, 1, 7}, 2).input("w", {1, 1, 1, 1}, 2).output("y", {1, 1, 7}, 6);
  b.node("ConvInteger", {"x", "w"}, {"y"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { b.import(); }),
                  "#0 (ConvInteger-10): input [1, 1, 7] and weights [1, 1, 1, 1] differ in rank");
  Builder k(10);
  k.input("x", {1, 2, 5, 5}, 2).input("w", {1, 2, 3, 3}, 2).output("y", {1, 1, 3, 3}, 6);
  Builder::attr(k.node("ConvInteger", {"x", "w"}, {"y"}), "kernel_shape",
                std::vector<std::int64_t>{2, 2});
  ho::ImportOptions o;
  o.check = false;
  EXPECT_CONTAINS(error_of<ShapeError>([&] { k.import(o); }),
                  "kernel_shape [2, 2] differs from the weights [1, 2, 3, 3]");
  // Weights with a kernel dimension of 0 (the fuzzer's: 256 / taps divided by zero), for
  // ConvInteger and for Conv, whose shape rules the importer shares.
  for (const char* op : {"ConvInteger", "Conv"}) {
    SCOPED_TRACE(op);
    const int elem = std::string(op) == "Conv" ? 1 : 2;
    Builder z(10);
    z.input("x", {1, 1, 3, 3}, elem).input("w", {1, 1, 2, 0}, elem).output("y", {1, 1, 4, 4}, 6);
    Builder::attr(z.node(op, {"x", "w"}, {"y"}), "pads", std::vector<std::int64_t>{1, 1, 1, 1});
    const std::string e = error_of<ShapeError>([&] { z.import(o); });
    EXPECT_CONTAINS(e, std::string("#0 (") + op);
    EXPECT_CONTAINS(e, "weights [1, 1, 2, 0] have a kernel dimension below 1");
  }
  // A scalar B (the fuzzer's; reading its last dim was undefined behaviour).
  Builder s(10);
  s.input("a", {2, 3}, 2).input("b", {}, 2).output("y", {2}, 6);
  s.node("MatMulInteger", {"a", "b"}, {"y"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { s.import(o); }),
                  "an integer product of [2, 3] and []");
}

}  // namespace
