// SPDX-License-Identifier: Apache-2.0
// ONNX import of the elementwise math ops (src/onnx/ops_math.cpp) and of the reductions and
// losses (src/onnx/ops_reduce.cpp): run on every platform, and exported and imported back.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// Comparisons of floats and of int64 (held as int32, so 2^24 and 2^24 + 1 stay apart), the
// logic on their bools, a mask for Where and a float cast to bool; then the same model
// exported and imported again gives the same bits.
TEST(OnnxImport, ComparisonsAndLogicGiveBools) {
  Builder b;
  b.input("x", {2, 3}).input("y", {3}).input("i", {2, 3}, 7).input("j", {3}, 7);
  b.node("Greater", {"x", "y"}, {"gt"});
  b.node("LessOrEqual", {"x", "y"}, {"le"});
  b.node("Equal", {"i", "j"}, {"eq"});
  b.node("Less", {"i", "j"}, {"lt"});
  b.node("GreaterOrEqual", {"i", "j"}, {"ge"});
  b.node("And", {"gt", "eq"}, {"and"});
  b.node("Or", {"le", "lt"}, {"or"});
  b.node("Xor", {"gt", "lt"}, {"xor"});
  b.node("Not", {"and"}, {"not"});
  b.node("Where", {"gt", "x", "y"}, {"max"});
  auto* cast = b.node("Cast", {"x"}, {"nonzero"});
  Builder::attr(cast, "to", std::int64_t{9});
  for (const char* o : {"and", "or", "xor", "not", "ge", "nonzero"}) b.output(o, {2, 3}, 9);
  b.output("max", {2, 3});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{1, -0.0f, nan, 5, 0, -2}, y{1, 0, 0};
  const std::vector<std::int32_t> i{16777217, 3, -7, 16777216, 0, 9}, j{16777216, 3, 0};
  std::map<std::string, std::vector<std::int32_t>> want;
  std::vector<float> want_max;
  for (std::size_t k = 0; k < 6; ++k) {
    const float xv = x[k], yv = y[k % 3];
    const std::int32_t iv = i[k], jv = j[k % 3];
    const bool gt = xv > yv, le = xv <= yv, eq = iv == jv, lt = iv < jv;
    want["and"].push_back(gt && eq);
    want["or"].push_back(le || lt);
    want["xor"].push_back(gt != lt);
    want["not"].push_back(!(gt && eq));
    want["ge"].push_back(iv >= jv);
    want["nonzero"].push_back(xv != 0);  // NaN: true
    want_max.push_back(gt ? xv : yv);
  }
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"y", y}, {"i", i}, {"j", j}});
      for (std::size_t k = 0; k < model->outputs.size(); ++k) {
        const std::string& name = model->output_info[k].name;
        SCOPED_TRACE(name);
        if (name == "max") {
          const std::vector<float> got = cg.read(model->outputs[k]);
          for (std::size_t e = 0; e < got.size(); ++e) {
            EXPECT_EQ(std::memcmp(&got[e], &want_max[e], 4), 0) << e;  // -0 and NaN too
          }
        } else {
          EXPECT_EQ(cg.read_i32(model->outputs[k]), want.at(name));
        }
      }
    }
  }
}

// OneHot: negative indices count from depth; indices outside [-depth, depth) (2^24 + 1
// among them, which a float would round) name no position; bad depth or values are errors
// naming the node.
TEST(OnnxImport, OneHotTakesNegativeIndicesAndLeavesOthersOff) {
  auto model = [](std::int64_t depth, std::vector<float> values) {
    Builder b;
    b.input("i", {2, 3}, 7).output("y", {2, 5, 3});
    b.ints("depth", {depth}).floats("values", {static_cast<std::int64_t>(values.size())}, values);
    Builder::attr(b.node("OneHot", {"i", "depth", "values"}, {"y"}), "axis", std::int64_t{1});
    return b;
  };
  ho::Model m = model(5, {-1, 2}).import();
  const std::vector<std::int32_t> i{0, -1, 4, 5, -6, 16777217};
  std::vector<float> want(30, -1);
  const int hot[6] = {0, 4, 4, -1, -1, -1};  // position along axis 1 of each index, or none
  for (int k = 0; k < 6; ++k)
    if (hot[k] >= 0) want[static_cast<std::size_t>((k / 3) * 15 + hot[k] * 3 + k % 3)] = 2;
  run_everywhere(m, {{"i", i}}, false, [&](CompiledGraph& cg, const ho::Model&) {
    EXPECT_EQ(cg.read(m.outputs[0]), want);
  });
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    model(0, {0, 1}).import();
                  }),
                  "depth must be one number of at least 1");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    model(5, {0, 1, 2}).import();
                  }),
                  "values must hold two elements");
}

// Pow with an integer base gives the base's type: an integer exponent by exact squaring (3^19
// is above float32's 2^24 and stays exact; negative exponents truncate 1 / x^-y), a float one
// through float32 pow, truncated; uint8 results wrap at 8 bits.
TEST(OnnxImport, IntegerPowersAreExact) {
  auto model = [](int ex, int ey) {
    Builder b(15);
    b.input("x", {6}, ex).input("y", {6}, ey).output("z", {6}, ex);
    b.node("Pow", {"x", "y"}, {"z"});
    return b;
  };
  constexpr int kFloat = 1, kUint8 = 2, kInt32 = 6, kInt64 = 7;
  run_everywhere(
      model(kInt32, kInt64).import(),
      {{"x", std::vector<std::int32_t>{3, -2, 5, 1, -1, 7}},
       {"y", std::vector<std::int32_t>{19, 7, 0, -3, -3, -1}}},
      false, [&](CompiledGraph& cg, const ho::Model&) {
        EXPECT_EQ(cg.read_i32("z"), (std::vector<std::int32_t>{1162261467, -128, 1, 1, -1, 0}));
      });
  run_everywhere(model(kInt64, kFloat).import(),
                 {{"x", std::vector<std::int32_t>{2, 3, 10, 4, 9, 2}},
                  {"y", std::vector<float>{5, 0.5f, 3, 0.5f, 0.5f, -1}}},
                 false, [&](CompiledGraph& cg, const ho::Model&) {
                   EXPECT_EQ(cg.read_i32("z"), (std::vector<std::int32_t>{32, 1, 1000, 2, 3, 0}));
                 });
  run_everywhere(model(kUint8, kUint8).import(),
                 {{"x", std::vector<std::int32_t>{3, 2, 2, 0, 255, 16}},
                  {"y", std::vector<std::int32_t>{5, 7, 9, 0, 2, 2}}},
                 false, [&](CompiledGraph& cg, const ho::Model&) {
                   EXPECT_EQ(cg.read_i32("z"), (std::vector<std::int32_t>{243, 128, 0, 1, 1, 0}));
                 });
}

// BitShift of uint8 and uint16: left shifts wrap at the type's width (shifting by the width or
// more gives 0), right shifts floor; uint32 is refused naming the node.
TEST(OnnxImport, BitShiftWrapsAtItsWidth) {
  auto model = [](int elem, const std::string& dir) {
    Builder b(11);
    b.input("x", {4}, elem).input("y", {4}, elem).output("z", {4}, elem);
    Builder::attr(b.node("BitShift", {"x", "y"}, {"z"}), "direction", dir);
    return b;
  };
  constexpr int kUint8 = 2, kUint16 = 4, kUint32 = 12;
  const std::vector<std::int32_t> x{200, 255, 1, 7}, y{1, 3, 8, 0};
  const std::vector<std::pair<ho::Model, std::vector<std::int32_t>>> cases{
      {model(kUint8, "LEFT").import(), {144, 248, 0, 7}},
      {model(kUint8, "RIGHT").import(), {100, 31, 0, 7}},
      {model(kUint16, "LEFT").import(), {400, 2040, 256, 7}}};
  for (const auto& [m, want] : cases) {
    run_everywhere(m, {{"x", x}, {"y", y}}, false,
                   [&](CompiledGraph& cg, const ho::Model&) { EXPECT_EQ(cg.read_i32("z"), want); });
  }
  ho::Model wide = model(kUint16, "LEFT").import();
  run_everywhere(wide,
                 {{"x", std::vector<std::int32_t>{65535, 1, 2, 3}},
                  {"y", std::vector<std::int32_t>{4, 15, 16, 40}}},
                 false, [&](CompiledGraph& cg, const ho::Model&) {
                   EXPECT_EQ(cg.read_i32("z"), (std::vector<std::int32_t>{65520, 32768, 0, 0}));
                 });
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { model(kUint32, "LEFT").import(); }),
                  "shifts of uint32");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { model(kUint8, "UP").import(); }),
                  "direction 'UP' is neither LEFT nor RIGHT");
}

// TfIdfVectorizer: unigrams and bigrams (with up to one id skipped) counted per row, then TF,
// IDF (the weight where counted) or TFIDF (count times weight) into the columns ngram_indexes
// names; a pool that ngram_counts does not split into n-grams is an error naming the node.
TEST(OnnxImport, TfIdfVectorizerCountsNgramsWithSkips) {
  auto model = [](const std::string& mode, std::vector<std::int64_t> starts,
                  std::vector<std::int64_t> columns = {4, 0, 1, 3}) {
    Builder b(9);
    b.input("x", {2, 6}, 7).output("y", {2, "columns"});
    auto* n = b.node("TfIdfVectorizer", {"x"}, {"y"});
    Builder::attr(n, "mode", mode);
    Builder::attr(n, "min_gram_length", std::int64_t{1});
    Builder::attr(n, "max_gram_length", std::int64_t{2});
    Builder::attr(n, "max_skip_count", std::int64_t{1});
    Builder::attr(n, "ngram_counts", std::move(starts));
    Builder::attr(n, "ngram_indexes", std::move(columns));
    // unigrams 3 and 5, bigrams (5, 6) and (6, 7)
    Builder::attr(n, "pool_int64s", std::vector<std::int64_t>{3, 5, 5, 6, 6, 7});
    auto* w = n->add_attribute();
    w->set_name("weights");
    w->set_type(::onnx::AttributeProto::FLOATS);
    for (float v : {0.5f, 2.0f, 4.0f, 8.0f}) w->add_floats(v);
    return b;
  };
  // Row 0: 3 three times, 5 once, (5, 6) and (6, 7) once each. Row 1: 5 twice, (5, 6) twice
  // (adjacent at positions 3 and 4, one id skipped at 0 and 2), (6, 7) once.
  const std::vector<std::int32_t> x{3, 5, 6, 7, 3, 3, 5, 9, 6, 5, 6, 7};
  const std::vector<std::pair<std::string, std::vector<float>>> want{
      {"TF", {1, 1, 0, 1, 3, 2, 2, 0, 1, 0}},
      {"IDF", {2, 4, 0, 8, 0.5f, 2, 4, 0, 8, 0}},
      {"TFIDF", {2, 4, 0, 8, 1.5f, 4, 8, 0, 8, 0}}};
  for (const auto& [mode, y] : want) {
    SCOPED_TRACE(mode);
    ho::Model m = model(mode, {0, 2}).import();
    run_everywhere(m, {{"x", x}}, false,
                   [&](CompiledGraph& cg, const ho::Model&) { EXPECT_EQ(cg.read("y"), y); });
  }
  // Two n-grams in one column add up (3 and 5 both in column 0).
  run_everywhere(model("TF", {0, 2}, {0, 0, 1, 2}).import(), {{"x", x}}, false,
                 [&](CompiledGraph& cg, const ho::Model&) {
                   EXPECT_EQ(cg.read("y"), (std::vector<float>{4, 1, 1, 2, 2, 1}));
                 });
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    model("TF", {0, 3}).import();
                  }),
                  "ngram_counts [0, 3] do not split a pool of 6 ids into n-grams");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    model("BM25", {0, 2}).import();
                  }),
                  "mode 'BM25' is none of TF, IDF, TFIDF");
}

// Integer arithmetic at run time: int64 (held as int32) adds, subtracts and multiplies as
// integers (2^24 + 1 stays odd) and round-trips. (8- and 16-bit ints: see
// NarrowIntegerArithmeticWrapsAtItsWidth.)
TEST(OnnxImport, Int64ArithmeticRunsAndRoundTrips) {
  Builder b;
  b.input("i", {3}, 7).input("j", {3}, 7).output("y", {3}, 7);
  b.node("Add", {"i", "j"}, {"s"});
  b.node("Mul", {"s", "j"}, {"p"});
  b.node("Sub", {"p", "i"}, {"y"});
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const std::vector<std::int32_t> i{16777216, -7, 3}, j{1, 5, -2};
  std::vector<std::int32_t> want;
  for (std::size_t k = 0; k < 3; ++k) want.push_back((i[k] + j[k]) * j[k] - i[k]);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"i", i}, {"j", j}});
      EXPECT_EQ(cg.read_i32(model->outputs[0]), want);
    }
  }
}

// Sign, IsInf, IsNaN, Shrink, ThresholdedRelu, Round and EyeLike at run time, on values with
// the edge cases (infinities, NaN, zero, halves); exported and imported back.
TEST(OnnxImport, SignInfNanShrinkRoundAndEyeLikeRun) {
  Builder b;
  b.input("x", {8}).input("j", {3}, 7).output("sign", {8}).output("inf", {8}, 9);
  b.output("neginf", {8}, 9).output("nan", {8}, 9).output("shrink", {8}).output("thr", {8});
  b.output("isign", {3}, 7).output("round", {8}).output("eye", {3, 4});
  b.node("Sign", {"x"}, {"sign"});
  b.node("IsInf", {"x"}, {"inf"});
  Builder::attr(b.node("IsInf", {"x"}, {"neginf"}), "detect_positive", std::int64_t{0});
  b.node("IsNaN", {"x"}, {"nan"});
  auto* sh = b.node("Shrink", {"x"}, {"shrink"});
  Builder::attr_f(sh, "lambd", 0.5f);
  Builder::attr_f(sh, "bias", 0.25f);
  Builder::attr_f(b.node("ThresholdedRelu", {"x"}, {"thr"}), "alpha", 0.25f);
  b.node("Sign", {"j"}, {"isign"});
  b.node("Round", {"x"}, {"round"});
  auto* eye = b.node("EyeLike", {"i34"}, {"eye"});
  Builder::attr(eye, "k", std::int64_t{1});
  Builder::attr(eye, "dtype", std::int64_t{1});
  b.input("i34", {3, 4}, 7);
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const float inf = INFINITY, nan = NAN;
  const std::vector<float> x{-2.5f, -0.3f, 0.0f, 0.5f, 1.5f, inf, -inf, nan};
  const std::vector<std::int32_t> j{-5, 0, 7};
  // Floats compared with ==, except the NaNs, which must be NaN.
  auto expect_same = [](const std::vector<float>& got, const std::vector<float>& want,
                        const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t e = 0; e < got.size(); ++e) {
      if (std::isnan(want[e]))
        EXPECT_TRUE(std::isnan(got[e])) << what << " " << e;
      else
        EXPECT_EQ(got[e], want[e]) << what << " " << e;
    }
  };
  std::vector<float> eye_want(12, 0.0f);
  for (int r = 0; r < 3; ++r) eye_want[static_cast<std::size_t>(r * 4 + r + 1)] = 1.0f;
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"j", j}});  // EyeLike reads only i34's shape: not an input
      const auto& o = model->outputs;
      expect_same(cg.read(o[0]), {-1, -1, 0, 1, 1, 1, -1, nan}, "sign");
      EXPECT_EQ(cg.read_i32(o[1]), (std::vector<std::int32_t>{0, 0, 0, 0, 0, 1, 1, 0}));
      EXPECT_EQ(cg.read_i32(o[2]), (std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 1, 0}));
      EXPECT_EQ(cg.read_i32(o[3]), (std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 0, 1}));
      expect_same(cg.read(o[4]), {-2.25f, 0, 0, 0, 1.25f, inf, -inf, 0}, "shrink");
      expect_same(cg.read(o[5]), {0, 0, 0, 0.5f, 1.5f, inf, 0, 0}, "thresholded relu");
      EXPECT_EQ(cg.read_i32(o[6]), (std::vector<std::int32_t>{-1, 0, 1}));
      expect_same(cg.read(o[7]), {-2, -0.0f, 0, 0, 2, inf, -inf, nan}, "round");
      expect_same(cg.read(o[8]), eye_want, "eye");
    }
  }
}

// Mod of floats (fmod = 1: C's; fmod = 0: numpy's, which the export writes as fmod's remainder
// plus the divisor where signs differ) and of int64 (numpy's), exported and imported back.
TEST(OnnxImport, ModTakesTheSignOfItsMode) {
  Builder b;
  b.input("x", {6}).input("y", {6}).input("i", {6}, 7).input("j", {6}, 7);
  b.output("f", {6}).output("m", {6}).output("im", {6}, 7);
  Builder::attr(b.node("Mod", {"x", "y"}, {"f"}), "fmod", std::int64_t{1});
  b.node("Mod", {"x", "y"}, {"m"});
  b.node("Mod", {"i", "j"}, {"im"});
  ho::Model m = b.import({.check = false});  // ONNX's checker allows fmod = 0 for ints only
  ho::Model back = round_trip(m);
  const std::vector<float> x{7.5f, -7.5f, 7.5f, -7.5f, 4.0f, -1e-30f};
  const std::vector<float> y{2.0f, 2.0f, -2.0f, -2.0f, 2.0f, 1e20f};
  const std::vector<std::int32_t> i{7, -7, 7, -7, 16777217, 6}, j{3, 3, -3, -3, 2, 0};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"y", y}, {"i", i}, {"j", j}});
      EXPECT_EQ(cg.read(model->outputs[0]),
                (std::vector<float>{1.5f, -1.5f, 1.5f, -1.5f, 0.0f, -1e-30f}));
      // -1e-30 mod 1e20 is 1e20 - 1e-30, which is 1e20 in float
      EXPECT_EQ(cg.read(model->outputs[1]),
                (std::vector<float>{1.5f, 0.5f, -0.5f, -1.5f, 0.0f, 1e20f}));
      EXPECT_EQ(cg.read_i32(model->outputs[2]), (std::vector<std::int32_t>{1, 2, -2, -1, 1, 0}));
    }
  }
}

// ReduceProd over two axes (a zero, negatives), and ReduceLogSumExp of values whose exp
// overflows float, a line of -inf and a line holding +inf: on every platform, and exported and
// imported back.
TEST(OnnxImport, ReduceProdAndAStableLogSumExp) {
  Builder b(13);
  b.input("x", {2, 3, 2}).input("l", {3, 2});
  b.output("p", {2, 1, 1}).output("all", {}).output("lse", {3});
  Builder::attr(b.node("ReduceProd", {"x"}, {"p"}), "axes", std::vector<std::int64_t>{1, -1});
  Builder::attr(b.node("ReduceProd", {"x"}, {"all"}), "keepdims", std::int64_t{0});
  auto* lse = b.node("ReduceLogSumExp", {"l"}, {"lse"});
  Builder::attr(lse, "axes", std::vector<std::int64_t>{1});
  Builder::attr(lse, "keepdims", std::int64_t{0});
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const std::vector<float> x{1.5f, -2, 0.5f, 4, -1, 3, 2, 0, -0.5f, 8, 1.25f, 1};
  const std::vector<float> l{1000, 1000, -INFINITY, -INFINITY, INFINITY, 1};
  const float p0 = 1.5f * -2 * 0.5f * 4 * -1 * 3;
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"l", l}});
      EXPECT_EQ(cg.read(model->outputs[0]), (std::vector<float>{p0, 0.0f}));
      EXPECT_EQ(cg.read(model->outputs[1]), (std::vector<float>{0.0f}));
      const std::vector<float> got = cg.read(model->outputs[2]);
      ASSERT_EQ(got.size(), 3u);
      EXPECT_NEAR(got[0], 1000.0f + std::log(2.0f), 1e-3f);  // exp(1000) is inf in float
      EXPECT_EQ(got[1], -INFINITY);
      EXPECT_EQ(got[2], INFINITY);
    }
  }
}

// CumSum: position ids from an int64 attention mask (cumsum - 1, as exported transformers
// compute them), a float scan exclusive and reversed along axis 0; on every platform, and
// exported and imported back. A bad or computed axis is an error naming the node.
TEST(OnnxImport, CumSumScansEitherWay) {
  Builder b(14);
  b.input("mask", {2, 4}, 7).input("x", {3, 2}).output("pos", {2, 4}, 7).output("y", {3, 2});
  b.int_tensor("one_axis", {}, {1}).int_tensor("zero_axis", {1}, {0}).ints("one", {1});
  b.node("CumSum", {"mask", "one_axis"}, {"c"});
  b.node("Sub", {"c", "one"}, {"pos"});
  auto* n = b.node("CumSum", {"x", "zero_axis"}, {"y"});
  Builder::attr(n, "exclusive", std::int64_t{1});
  Builder::attr(n, "reverse", std::int64_t{1});
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const std::vector<std::int32_t> mask{1, 1, 1, 0, 0, 1, 1, 1};
  const std::vector<float> x{1, 2, 3, 4, 5, 6};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"mask", mask}, {"x", x}});
      EXPECT_EQ(cg.read_i32(model->outputs[0]),
                (std::vector<std::int32_t>{0, 1, 2, 2, -1, 0, 1, 2}));
      EXPECT_EQ(cg.read(model->outputs[1]), (std::vector<float>{8, 10, 5, 6, 0, 0}));
    }
  }
  Builder bad(14);
  bad.input("x", {3, 2}).output("y", {3, 2}).int_tensor("axis", {}, {2});
  bad.node("CumSum", {"x", "axis"}, {"y"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad.import(); }), "CumSum");
  Builder computed(14);
  computed.input("x", {3, 2}).input("axis", {}, 7).output("y", {3, 2});
  computed.node("CumSum", {"x", "axis"}, {"y"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { computed.import(); }), "axis");
}

// Clip of int64 (held as int32; a bound beyond int32 clips nothing) and Compress along an axis
// and flattened, its condition known at import or asked for by name.
TEST(OnnxImport, IntegerClipAndCompress) {
  Builder b(13);
  b.input("i", {5}, 7).input("x", {2, 3}).output("c", {5}, 7).output("y", {2, 2});
  b.output("f", {3});
  scalar_init(b, "lo", 7, -2);
  scalar_init(b, "hi", 7, std::int64_t{1} << 40);
  b.int_tensor("keep", {3}, {1, 0, 1});
  b.int_tensor("flat", {5}, {0, 1, 0, 0, 1});
  b.m.mutable_graph()->mutable_initializer(2)->set_data_type(9);  // bool conditions
  b.m.mutable_graph()->mutable_initializer(3)->set_data_type(9);
  for (int k : {2, 3}) {
    auto* t = b.m.mutable_graph()->mutable_initializer(k);
    std::vector<std::int64_t> v(t->int64_data().begin(), t->int64_data().end());
    t->clear_int64_data();
    for (auto x : v) t->add_int32_data(static_cast<std::int32_t>(x));
  }
  b.node("Clip", {"i", "lo", "hi"}, {"c"});
  Builder::attr(b.node("Compress", {"x", "keep"}, {"y"}), "axis", std::int64_t{1});
  b.node("Compress", {"x", "flat"}, {"f"});
  const ho::Model m = b.import();
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
    cg.run({{"i", std::vector<std::int32_t>{-5, -2, 0, 7, 100000}},
            {"x", std::vector<float>{1, 2, 3, 4, 5, 6}}});
    EXPECT_EQ(cg.read_i32(m.outputs[0]), (std::vector<std::int32_t>{-2, -2, 0, 7, 100000}));
    EXPECT_EQ(cg.read(m.outputs[1]), (std::vector<float>{1, 3, 4, 6}));
    EXPECT_EQ(cg.read(m.outputs[2]), (std::vector<float>{2, 5}));
  }
  Builder c(11);
  c.input("x", {2, 3}).input("cond", {3}, 9).output("y", {2, 2});
  Builder::attr(c.node("Compress", {"x", "cond"}, {"y"}), "axis", std::int64_t{1});
  const ho::UnsupportedError e = unsupported_of(c);
  EXPECT_EQ(e.input_needed(), "cond");
  EXPECT_CONTAINS(e.what(), "#0 (Compress-11)");
}

// 8- and 16-bit integer arithmetic wraps at its own width (hetgraph holds it in int32), both
// computed at run time and folded at import; Div of 8-bit ints truncates toward zero.
TEST(OnnxImport, NarrowIntegerArithmeticWrapsAtItsWidth) {
  struct Case {
    const char* op;
    int elem;
    std::int32_t a, b, want;
  };
  const Case cases[] = {{"Add", 2, 200, 100, 44},    {"Sub", 2, 3, 5, 254},
                        {"Add", 3, 100, 100, -56},   {"Mul", 5, 300, 300, 24464},
                        {"Mul", 4, 65535, 65535, 1}, {"Div", 2, 7, 2, 3},
                        {"Div", 3, -7, 2, -3},       {"Div", 3, -128, -1, -128}};
  for (const Case& k : cases) {
    for (bool folded : {false, true}) {
      SCOPED_TRACE(std::string(k.op) + " " + std::to_string(k.elem) + (folded ? " folded" : ""));
      Builder b(14);
      b.output("y", {1}, k.elem);
      for (const auto& [name, v] : {std::pair{"a", k.a}, std::pair{"b", k.b}}) {
        if (!folded) {
          b.input(name, {1}, k.elem);
          continue;
        }
        auto* t = b.g->add_initializer();
        t->set_name(name);
        t->set_data_type(k.elem);
        t->add_dims(1);
        t->add_int32_data(v);
      }
      b.node(k.op, {"a", "b"}, {"y"});
      const ho::Model m = b.import();
      const std::vector<std::int32_t> a{k.a}, bv{k.b};
      run_everywhere(m,
                     folded ? std::vector<FeedItem>{} : std::vector<FeedItem>{{"a", a}, {"b", bv}},
                     false, [&](CompiledGraph& cg, const ho::Model&) {
                       EXPECT_EQ(cg.read_i32(m.outputs[0]), (std::vector<std::int32_t>{k.want}));
                     });
    }
  }
  Builder c(14);  // CumSum of uint8 wraps too
  c.input("x", {3}, 2).output("s", {3}, 2);
  scalar_init(c, "zero", 7, 0);
  c.node("CumSum", {"x", "zero"}, {"s"});
  const ho::Model m = c.import();
  run_everywhere(m, {{"x", std::vector<std::int32_t>{200, 100, 50}}}, false,
                 [&](CompiledGraph& cg, const ho::Model&) {
                   EXPECT_EQ(cg.read_i32(m.outputs[0]), (std::vector<std::int32_t>{200, 44, 94}));
                 });
}

// SoftmaxCrossEntropyLoss imported is a loss to train through: its gradient with respect to
// the weights is x^T (softmax - one_hot) over the rows not ignored, and an ignored row adds
// nothing. NegativeLogLikelihoodLoss keeps a -inf of a class not picked out of the loss.
TEST(OnnxImport, LossesPickTheirClassAndTrain) {
  Builder b;
  b.input("x", {3, 2}).input("t", {3}, 7).output("loss", {});
  b.floats("W", {2, 4}, {0.5f, -0.25f, 1.0f, 0.0f, -0.5f, 0.75f, 0.25f, -1.0f});
  b.node("MatMul", {"x", "W"}, {"scores"});
  Builder::attr(b.node("SoftmaxCrossEntropyLoss", {"scores", "t"}, {"loss"}), "ignore_index",
                std::int64_t{1});
  ho::Model m = b.import();
  ASSERT_EQ(m.variables.size(), 1u);
  const Node dW = gradients(m.outputs[0], {m.variables[0]})[0];
  const std::vector<float> x{1, 2, -1, 0.5f, 3, -2};
  const std::vector<std::int32_t> t{3, 1, 0};  // the second row is ignored
  const std::vector<float> w{0.5f, -0.25f, 1.0f, 0.0f, -0.5f, 0.75f, 0.25f, -1.0f};
  double want_loss = 0;
  std::vector<double> want_dw(8, 0.0);
  for (int n : {0, 2}) {  // the rows kept; the mean divides by their count, 2
    double s[4], mx = -1e30, z = 0;
    for (int k = 0; k < 4; ++k) {
      s[k] = x[static_cast<std::size_t>(2 * n)] * w[static_cast<std::size_t>(k)] +
             x[static_cast<std::size_t>(2 * n + 1)] * w[static_cast<std::size_t>(4 + k)];
      mx = std::max(mx, s[k]);
    }
    for (double v : s) z += std::exp(v - mx);
    const int tn = t[static_cast<std::size_t>(n)];
    want_loss -= (s[tn] - mx - std::log(z)) / 2;
    for (int k = 0; k < 4; ++k) {
      const double d = (std::exp(s[k] - mx) / z - (k == tn ? 1 : 0)) / 2;
      for (int i = 0; i < 2; ++i)
        want_dw[static_cast<std::size_t>(4 * i + k)] += x[static_cast<std::size_t>(2 * n + i)] * d;
    }
  }
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg =
        GraphCompiler(pc.make()).compile(m.graph, m.input_shapes, {m.outputs[0], dW});
    cg.run({{"x", x}, {"t", t}});
    EXPECT_NEAR(cg.read(m.outputs[0])[0], want_loss, 1e-5);
    const auto got = cg.read(dW);
    for (std::size_t k = 0; k < 8; ++k) EXPECT_NEAR(got[k], want_dw[k], 1e-5) << k;
  }
  Builder nll;
  nll.input("p", {2, 3}).input("t", {2}, 7).output("loss", {});
  nll.node("NegativeLogLikelihoodLoss", {"p", "t"}, {"loss"});
  ho::Model mn = nll.import();
  CompiledGraph cg = mn.compile();
  const float inf = std::numeric_limits<float>::infinity();
  cg.run({{"p", std::vector<float>{-inf, -1, -2, 0.5f, -inf, -3}},
          {"t", std::vector<std::int32_t>{1, 0}}});
  EXPECT_FLOAT_EQ(cg.read(mn.outputs[0])[0], 0.25f);  // -(-1 + 0.5) / 2
}

// A class id outside [0, C) that is not ignore_index (PyTorch's default -100 here) is a
// FeedError naming the ONNX node on every platform, fed or computed; ignored ones still pass.
TEST(OnnxImport, LossTargetsOutsideTheClassesAreFeedErrors) {
  Builder b;
  b.input("p", {3, 4}).input("t", {3}, 7).input("s", {3}, 7).output("loss", {}).output("l2", {});
  Builder::attr(b.node("NegativeLogLikelihoodLoss", {"p", "t"}, {"loss"}), "ignore_index",
                std::int64_t{-100});
  b.node("Add", {"s", "s"}, {"t2"});  // a computed target
  b.node("NegativeLogLikelihoodLoss", {"p", "t2"}, {"l2"});
  ho::Model m = b.import();
  const std::vector<float> p{-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
    cg.run({{"p", p},
            {"t", std::vector<std::int32_t>{3, -100, 0}},
            {"s", std::vector<std::int32_t>{0, 1, 1}}});
    EXPECT_FLOAT_EQ(cg.read(m.outputs[0])[0], 6.5f);       // (4 + 9) / 2, the second row ignored
    EXPECT_FLOAT_EQ(cg.read(m.outputs[1])[0], 19.0f / 3);  // -(p00 + p12 + p22) / 3
    const std::vector<std::int32_t> s_ok{0, 1, 1};
    for (const std::vector<std::int32_t>& bad :
         {std::vector<std::int32_t>{3, 4, 0}, std::vector<std::int32_t>{-1, 0, 0}}) {
      const std::string e = error_of<FeedError>([&] {
        cg.run({{"p", p}, {"t", bad}, {"s", s_ok}});
      });
      EXPECT_CONTAINS(e, "NegativeLogLikelihoodLoss");
      EXPECT_CONTAINS(e, "class ids");
    }
    const std::string e = error_of<FeedError>([&] {
      cg.run({{"p", p},
              {"t", std::vector<std::int32_t>{0, 0, 0}},
              {"s", std::vector<std::int32_t>{0, 2, 1}}});
    });
    EXPECT_CONTAINS(e, "position 1 of the indices [3]");
  }
  // Exported, the check is a Gather that the import back checks again.
  ho::Model back = round_trip(m);
  CompiledGraph cg = back.compile();
  const std::vector<std::int32_t> s_ok{0, 1, 1};
  cg.run({{"p", p}, {"t", std::vector<std::int32_t>{3, -100, 0}}, {"s", s_ok}});
  EXPECT_FLOAT_EQ(cg.read(back.outputs[0])[0], 6.5f);
  for (const std::vector<std::int32_t>& bad :
       {std::vector<std::int32_t>{3, 4, 0}, std::vector<std::int32_t>{-1, 0, 0}}) {
    EXPECT_CONTAINS(error_of<FeedError>([&] {
                      cg.run({{"p", p}, {"t", bad}, {"s", s_ok}});
                    }),
                    "class ids");
  }
}

}  // namespace
