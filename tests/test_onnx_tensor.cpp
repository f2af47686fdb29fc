// SPDX-License-Identifier: Apache-2.0
// ONNX import of the layout and data-movement ops (src/onnx/ops_tensor.cpp): run on every
// platform, exported and imported back, and their errors naming the node.
#include <cmath>
#include <set>
#include <utility>

#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// Pad moves data, so integer tensors pad too (int64 held as int32), in every mode; the
// constant is taken exactly.
// Dropout in training mode with a ratio is hetgraph's dropout: each element 0 or x / (1 - ratio),
// the mask output true where kept, new masks every run (the model's dropout step advances),
// the same masks for the same graph and seed.
TEST(OnnxImport, TrainingModeDropoutDrawsNewMasksEachRun) {
  Builder b(13);
  b.input("x", {1000}).output("y", {1000}).output("z", {1000}, 9);
  b.floats("r", {}, {0.25f});
  auto* t = b.g->add_initializer();
  t->set_name("t");
  t->set_data_type(9);  // bool
  t->add_int32_data(1);
  Builder::attr(b.node("Dropout", {"x", "r", "t"}, {"y", "z"}), "seed", std::int64_t{7});
  const ho::Model m = b.import();
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.5f + static_cast<float>(i % 7);
  std::vector<std::vector<float>> first;
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()), {});
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 2; ++run) {
      cg.run({{"x", x}});
      const std::vector<float> y = cg.read("y");
      const std::vector<std::int32_t> z = cg.read_i32("z");
      std::size_t kept = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(y[i] == 0.0f || y[i] == x[i] * (1.0f / 0.75f)) << i << ": " << y[i];
        ASSERT_EQ(z[i] != 0, y[i] != 0.0f) << i;
        kept += y[i] != 0.0f;
      }
      EXPECT_NEAR(static_cast<double>(kept), 750.0, 5 * std::sqrt(1000 * 0.25 * 0.75));
      runs.push_back(y);
    }
    EXPECT_NE(runs[0], runs[1]);  // the step advanced: new masks
    if (first.empty()) first = runs;
    EXPECT_EQ(runs, first);  // the same graph and seed: the same masks, on every platform
  }
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    Builder bad(13);
                    bad.input("x", {4}).output("y", {4});
                    bad.floats("r", {}, {1.0f});
                    auto* tt = bad.g->add_initializer();
                    tt->set_name("t");
                    tt->set_data_type(9);
                    tt->add_int32_data(1);
                    bad.node("Dropout", {"x", "r", "t"}, {"y"});
                    bad.import();
                  }),
                  "ratio 1.000000 is outside [0, 1)");
}

TEST(OnnxImport, IntegerTensorsPadInEveryMode) {
  const std::vector<std::int32_t> x{1, 2, 3, 4, 5, 6};  // [2, 3]
  const std::pair<const char*, std::vector<std::int32_t>> modes[] = {
      {"constant",
       {16777217, 16777217, 16777217, 16777217, 16777217,  //
        16777217, 1, 2, 3, 16777217,                       //
        16777217, 4, 5, 6, 16777217}},
      {"edge", {1, 1, 2, 3, 3, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6}},
      {"reflect", {5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5}}};
  for (const auto& [mode, want] : modes) {
    SCOPED_TRACE(mode);
    Builder b;
    b.input("x", {2, 3}, 6).output("y", {3, 5}, 6);
    b.ints("pads", {1, 1, 0, 1});      // one row before, a column on each side
    auto* v = b.g->add_initializer();  // 2^24 + 1: no float holds it
    v->set_name("value");
    v->set_data_type(6);
    v->add_int32_data(16777217);
    auto* n = b.node("Pad", {"x", "pads", "value"}, {"y"});
    auto* a = n->add_attribute();
    a->set_name("mode");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(mode);
    ho::Model m = b.import();
    CompiledGraph cg = m.compile();
    cg.run({{"x", x}});
    EXPECT_EQ(cg.read_i32(m.outputs[0]), want);
  }
}

// ArgMax / ArgMin: axis (default 0), keepdims (default 1) and select_last_index (opset 12 on),
// on float and int64 inputs; NaN wins; int64 positions come back as int32.
TEST(OnnxImport, ArgMaxAndArgMinTakeTheirAttributes) {
  Builder b(13);
  b.input("x", {2, 2, 3}).input("k", {2, 3}, 7);
  b.output("first", {1, 2, 3}, 7).output("last", {2, 2}, 7).output("ints", {2}, 7);
  b.node("ArgMax", {"x"}, {"first"});  // axis 0, keepdims 1
  auto* n = b.node("ArgMin", {"x"}, {"last"});
  Builder::attr(n, "axis", -1);
  Builder::attr(n, "keepdims", 0);
  Builder::attr(n, "select_last_index", 1);
  n = b.node("ArgMax", {"k"}, {"ints"});
  Builder::attr(n, "axis", 1);
  Builder::attr(n, "keepdims", 0);
  ho::Model m = b.import();
  ASSERT_EQ(m.outputs.size(), 3u);
  EXPECT_EQ(m.output_info[0].shape, (Shape{1, 2, 3}));
  EXPECT_EQ(m.output_info[1].shape, (Shape{2, 2}));
  const std::vector<float> x{1, 5, NAN, 2,  2, 0,  //
                             1, 7, 3,   -1, 2, -1};
  const std::vector<std::int32_t> k{4, 9, 9, -3, -3, -8};
  run_everywhere(m, {{"x", x}, {"k", k}}, false, [&](CompiledGraph& cg, const ho::Model&) {
    EXPECT_EQ(cg.read_i32("first"), (std::vector<std::int32_t>{0, 1, 0, 0, 0, 0}));
    EXPECT_EQ(cg.read_i32("last"), (std::vector<std::int32_t>{2, 2, 0, 2}));
    EXPECT_EQ(cg.read_i32("ints"), (std::vector<std::int32_t>{1, 0}));
  });
  // Before opset 12 there is no select_last_index: ties go to the first position.
  Builder old(11);
  old.input("x", {4}).output("y", {}, 7);
  n = old.node("ArgMax", {"x"}, {"y"});
  Builder::attr(n, "keepdims", 0);
  ho::Model mo = old.import();
  CompiledGraph cg = mo.compile();
  cg.run({{"x", std::vector<float>{1, 3, 3, 2}}});
  EXPECT_EQ(cg.read_i32("y"), (std::vector<std::int32_t>{1}));
}

TEST(OnnxImport, ArgMaxErrorsNameTheNode) {
  {
    Builder b;
    b.input("x", {2, 3}).output("y", {2}, 7);
    Builder::attr(b.node("ArgMax", {"x"}, {"y"}), "axis", 2);
    const std::string e = error_of<ShapeError>([&] { b.import(); });
    EXPECT_CONTAINS(e, "ArgMax");
    EXPECT_CONTAINS(e, "axis 2");
  }
  {
    Builder b;
    b.input("x", {}).output("y", {}, 7);
    b.node("ArgMin", {"x"}, {"y"});
    const std::string e = error_of<ShapeError>([&] { b.import(); });
    EXPECT_CONTAINS(e, "ArgMin");
    EXPECT_CONTAINS(e, "scalar");
  }
  {
    Builder b;
    b.input("x", {3}, 11).output("y", {1}, 7);  // double
    b.node("ArgMax", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }), "double");
  }
}

// Trilu keeps a triangle of the last two dims (k shifts the diagonal; the leading dims
// broadcast), of floats and of int64; the import's where and mask export and come back.
TEST(OnnxImport, TriluKeepsATriangle) {
  Builder b;
  b.input("x", {2, 3, 4}).input("i", {3, 4}, 7).output("up", {2, 3, 4}).output("lo", {3, 4}, 7);
  b.ints("k", {1}).ints("m", {-1});
  b.node("Trilu", {"x", "k"}, {"up"});
  Builder::attr(b.node("Trilu", {"i", "m"}, {"lo"}), "upper", std::int64_t{0});
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  std::vector<float> x(24);
  std::vector<std::int32_t> i(12);
  std::vector<float> up(24);
  std::vector<std::int32_t> lo(12);
  for (int e = 0; e < 24; ++e) {
    x[static_cast<std::size_t>(e)] = static_cast<float>(e) - 7.5f;
    const int r = e / 4 % 3, col = e % 4;
    up[static_cast<std::size_t>(e)] = col - r >= 1 ? x[static_cast<std::size_t>(e)] : 0.0f;
    if (e < 12) {
      i[static_cast<std::size_t>(e)] = 16777217 + e;
      lo[static_cast<std::size_t>(e)] = col - r <= -1 ? i[static_cast<std::size_t>(e)] : 0;
    }
  }
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"i", i}});
      EXPECT_EQ(cg.read(model->outputs[0]), up);
      EXPECT_EQ(cg.read_i32(model->outputs[1]), lo);
    }
  }
  Builder flat;
  flat.input("x", {4}).output("y", {4});
  flat.node("Trilu", {"x"}, {"y"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { flat.import(); }), "rank 2 or more");
}

// ReverseSequence (opset 10): each batch entry's first sequence_lens[b] steps reversed, time
// major and batch major, lengths fed at run time (0 and the whole axis among them); against the
// definition on every platform, and exported and imported back. A length beyond the time axis or
// below 0 is a FeedError naming the node, after export too; axes other than 0 and 1 are a
// ShapeError.
TEST(OnnxImport, ReverseSequenceReversesEachPrefix) {
  Builder b(10);
  b.input("x", {4, 2, 3}).input("len", {2}, 7).input("xb", {3, 4}).input("lenb", {3}, 7);
  b.output("y", {4, 2, 3}).output("yb", {3, 4});
  b.node("ReverseSequence", {"x", "len"}, {"y"})->set_name("rev_time_major");
  auto* n = b.node("ReverseSequence", {"xb", "lenb"}, {"yb"});
  Builder::attr(n, "time_axis", std::int64_t{1});
  Builder::attr(n, "batch_axis", std::int64_t{0});
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  std::vector<float> x(24), xb(12);
  for (std::size_t k = 0; k < 24; ++k) x[k] = static_cast<float>(k);
  for (std::size_t k = 0; k < 12; ++k) xb[k] = static_cast<float>(k) * 0.5f - 1.0f;
  const std::vector<std::int32_t> len{3, 4}, lenb{0, 4, 2};
  std::vector<float> want(24), wantb(12);
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t bi = 0; bi < 2; ++bi) {
      const std::size_t l = static_cast<std::size_t>(len[bi]), from = t < l ? l - 1 - t : t;
      for (std::size_t e = 0; e < 3; ++e) want[(t * 2 + bi) * 3 + e] = x[(from * 2 + bi) * 3 + e];
    }
  for (std::size_t bi = 0; bi < 3; ++bi)
    for (std::size_t t = 0; t < 4; ++t) {
      const std::size_t l = static_cast<std::size_t>(lenb[bi]), from = t < l ? l - 1 - t : t;
      wantb[bi * 4 + t] = xb[bi * 4 + from];
    }
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"len", len}, {"xb", xb}, {"lenb", lenb}});
      EXPECT_EQ(cg.read(model->outputs[0]), want);
      EXPECT_EQ(cg.read(model->outputs[1]), wantb);
    }
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      for (std::int32_t l : {5, -1}) {
        const std::string e = error_of<FeedError>([&] {
          cg.run({{"x", x}, {"len", std::vector<std::int32_t>{1, l}}, {"xb", xb}, {"lenb", lenb}});
        });
        EXPECT_CONTAINS(e, "rev_time_major/ReverseSequence/sequence_lens");
        if (model == &m) {  // (exported, the check is a gather, which words it its own way)
          EXPECT_CONTAINS(e, "index " + std::to_string(l) + " at position 1");
          EXPECT_CONTAINS(e, "outside [0, 5)");
        }
      }
    }
  }
  Builder bad(10);
  bad.input("x", {4, 2, 3}).input("len", {2}, 7).output("y", {4, 2, 3});
  Builder::attr(bad.node("ReverseSequence", {"x", "len"}, {"y"}), "time_axis", std::int64_t{2});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad.import(); }), "ReverseSequence");
}

// Casts to 8- and 16-bit ints truncate floats toward zero and wrap to the width (numpy's and
// ONNX Runtime's result on x86), the same at run time and folded at import.
TEST(OnnxImport, CastsToNarrowIntegersTruncateAndWrap) {
  const std::vector<float> x{300.7f, -1.5f, 255.9f, -129.2f};
  for (bool folded : {false, true}) {
    SCOPED_TRACE(folded ? "folded" : "run time");
    Builder b(13);
    b.output("u8", {4}, 2).output("i8", {4}, 3).output("i16", {4}, 5);
    if (folded) {  // a Constant (a float initializer would be a variable, cast at run time)
      auto* a = b.node("Constant", {}, {"x"})->add_attribute();
      a->set_name("value");
      a->set_type(::onnx::AttributeProto::TENSOR);
      a->mutable_t()->set_data_type(1);
      a->mutable_t()->add_dims(4);
      for (float v : x) a->mutable_t()->add_float_data(v);
    } else {
      b.input("x", {4});
    }
    Builder::attr(b.node("Cast", {"x"}, {"u8"}), "to", std::int64_t{2});
    Builder::attr(b.node("Cast", {"x"}, {"i8"}), "to", std::int64_t{3});
    Builder::attr(b.node("Cast", {"u8"}, {"i16"}), "to", std::int64_t{5});
    const ho::Model m = b.import();
    run_everywhere(
        m, folded ? std::vector<FeedItem>{} : std::vector<FeedItem>{{"x", x}}, false,
        [&](CompiledGraph& cg, const ho::Model&) {
          EXPECT_EQ(cg.read_i32(m.outputs[0]), (std::vector<std::int32_t>{44, 255, 255, 127}));
          EXPECT_EQ(cg.read_i32(m.outputs[1]), (std::vector<std::int32_t>{44, -1, -1, 127}));
          EXPECT_EQ(cg.read_i32(m.outputs[2]), (std::vector<std::int32_t>{44, 255, 255, 127}));
        });
  }
  // Known int64 values cast to uint8 wrap too.
  Builder k(13);
  k.output("y", {2}, 2);
  k.int_tensor("v", {2}, {257, -2});
  Builder::attr(k.node("Cast", {"v"}, {"y"}), "to", std::int64_t{2});
  const ho::Model m = k.import();
  CompiledGraph cg = m.compile(GraphCompiler());
  cg.run({});
  EXPECT_EQ(cg.read_i32(m.outputs[0]), (std::vector<std::int32_t>{1, 254}));
}

// Layout chains through high ranks: ShuffleNet's channel shuffle (Reshape to rank 5,
// Transpose, Reshape back) and PixelShuffle's rank 6 one. At ranks hetgraph holds they are plain
// reshapes and transposes (the transpose's geometry merges their dims back to rank 3 or 4). With
// four more leading 1s (ranks 9 and 10, above Shape::kMaxRank) they go through views: one
// transpose of rank 3 or 4 in the end (ImportOptions::views_as_transposes), or with it off one
// gather of positions, with the same values; a value left above the rank is refused by name.
TEST(OnnxImport, LayoutChainsThroughHighRanks) {
  const auto chain = [](std::int64_t lead) {
    Builder b(13);
    const auto ones = [&](std::vector<std::int64_t> d) {
      d.insert(d.begin(), static_cast<std::size_t>(lead), 1);
      return d;
    };
    const auto shifted = [&](std::vector<std::int64_t> p) {
      std::vector<std::int64_t> o;
      for (std::int64_t i = 0; i < lead; ++i) o.push_back(i);
      for (const std::int64_t v : p) o.push_back(v + lead);
      return o;
    };
    b.input("x", {1, 6, 2, 2}).output("shuffled", {1, 6, 2, 2}).output("pixels", {1, 1, 4, 6});
    b.ints("s5", ones({1, 2, 3, 2, 2})).ints("s4", {1, 6, 2, 2});
    b.ints("p6", ones({1, 1, 2, 3, 2, 2})).ints("p4", {1, 1, 4, 6});
    b.node("Reshape", {"x", "s5"}, {"g"});
    Builder::attr(b.node("Transpose", {"g"}, {"gt"}), "perm", shifted({0, 2, 1, 3, 4}));
    b.node("Reshape", {"gt", "s4"}, {"shuffled"});
    // [N, C, r1, r2, H, W] -> [N, C, H, r1, W, r2] -> [N, C, H r1, W r2] (r1 = 2, r2 = 3)
    b.node("Reshape", {"x", "p6"}, {"p"});
    Builder::attr(b.node("Transpose", {"p"}, {"pt"}), "perm", shifted({0, 1, 4, 2, 5, 3}));
    b.node("Reshape", {"pt", "p4"}, {"pixels"});
    return b;
  };
  std::vector<float> x(24);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<float> shuffled, pixels(24);
  for (int c = 0; c < 6; ++c) {  // output channel c = (c % 2) * 3 + c / 2 of the input's
    const int from = (c % 2) * 3 + c / 2;
    shuffled.insert(shuffled.end(), x.begin() + from * 4, x.begin() + from * 4 + 4);
  }
  for (int r1 = 0; r1 < 2; ++r1)
    for (int r2 = 0; r2 < 3; ++r2)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w)
          pixels[static_cast<std::size_t>((h * 2 + r1) * 6 + w * 3 + r2)] =
              x[static_cast<std::size_t>(((r1 * 3 + r2) * 2 + h) * 2 + w)];
  auto ops = [](const ho::Model& mm) {
    std::multiset<std::string> s;
    for (std::uint32_t i = 0; i < mm.graph.size(); ++i)
      s.insert(std::string(mm.graph.node(i).op_name()));
    return s;
  };
  for (const std::int64_t lead : {0, 4}) {
    for (const bool as_transposes : {true, false}) {
      SCOPED_TRACE((lead == 0 ? "ranks 5 and 6, " : "ranks 9 and 10, ") +
                   std::string(as_transposes ? "views as transposes" : "views as gathers"));
      const ho::Model m = chain(lead).import({.views_as_transposes = as_transposes});
      const bool transposes = lead == 0 || as_transposes;
      EXPECT_EQ(ops(m).count("transpose"), transposes ? 2u : 0u);
      EXPECT_EQ(ops(m).count("gather"), transposes ? 0u : 2u);
      run_everywhere(m, {{"x", x}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
        EXPECT_EQ(cg.read(mm.outputs[0]), shuffled);
        EXPECT_EQ(cg.read(mm.outputs[1]), pixels);
      });
    }
  }
  Builder r(13);
  r.input("x", {1, 6, 2, 2}).output("g", {1, 1, 1, 1, 1, 2, 3, 2, 2});
  r.ints("s9", {1, 1, 1, 1, 1, 2, 3, 2, 2});
  r.node("Reshape", {"x", "s9"}, {"g"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { r.import(); }),
                  "tensor 'g' has rank 9 [1, 1, 1, 1, 1, 2, 3, 2, 2]; hetgraph tensors have rank 0 "
                  "to 8");
}

// GatherElements and ScatterElements (reduction none, add, mul; opset 16) with int64 indices
// fed at run time, negative ones and repeats among them, and the deprecated Scatter (opset 10):
// against the ONNX definitions, on every platform, and exported and imported back.
TEST(OnnxImport, GatherAndScatterElementsRunAndRoundTrip) {
  Builder b(16);
  b.input("x", {3, 4}).input("i", {2, 4}, 7).input("j", {2, 4}, 7).input("u", {2, 4});
  b.output("g", {2, 4}).output("none", {3, 4}).output("add", {3, 4}).output("mul", {3, 4});
  Builder::attr(b.node("GatherElements", {"x", "i"}, {"g"}), "axis", std::int64_t{1});
  b.node("ScatterElements", {"x", "j", "u"}, {"none"});  // axis 0, reduction none
  for (const char* r : {"add", "mul"}) {
    auto* n = b.node("ScatterElements", {"x", "j", "u"}, {r});
    Builder::attr(n, "axis", std::int64_t{-2});
    Builder::attr(n, "reduction", std::string(r));
  }
  std::vector<float> x(12), u(8);
  for (std::size_t k = 0; k < 12; ++k) x[k] = static_cast<float>(k) * 0.5f - 2.0f;
  for (std::size_t k = 0; k < 8; ++k) u[k] = static_cast<float>(k) + 1.5f;
  const std::vector<std::int32_t> i{3, 0, -1, 1, 2, 2, 0, -4}, j{2, 0, -1, 1, 0, 0, 2, -3};
  std::vector<float> want_g(8), want_none = x, want_add = x, want_mul = x;
  for (std::size_t p = 0; p < 8; ++p) {
    const std::size_t r = p / 4, c = p % 4;
    want_g[p] = x[r * 4 + static_cast<std::size_t>((i[p] + 4) % 4)];
    const std::size_t t = static_cast<std::size_t>((j[p] + 3) % 3) * 4 + c;
    want_none[t] = u[p];  // row-major order: the last repeat wins
    want_add[t] += u[p];
    want_mul[t] *= u[p];
  }
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  // Scatter, ScatterElements' name before opset 11 (no negative indices, no reduction).
  Builder old(10);
  old.input("x", {3, 4}).input("j", {2, 4}, 7).input("u", {2, 4}).output("y", {3, 4});
  Builder::attr(old.node("Scatter", {"x", "j", "u"}, {"y"}), "axis", std::int64_t{0});
  ho::Model mo = old.import();
  const std::vector<std::int32_t> jpos{2, 0, 2, 1, 0, 0, 2, 0};
  std::vector<float> want_old = x;
  for (std::size_t p = 0; p < 8; ++p)
    want_old[static_cast<std::size_t>(jpos[p]) * 4 + p % 4] = u[p];
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"i", i}, {"j", j}, {"u", u}});
      EXPECT_EQ(cg.read("g"), want_g);
      EXPECT_EQ(cg.read("none"), want_none);
      EXPECT_EQ(cg.read("add"), want_add);
      EXPECT_EQ(cg.read("mul"), want_mul);
    }
    CompiledGraph cg = mo.compile(GraphCompiler(pc.make()));
    cg.run({{"x", x}, {"j", jpos}, {"u", u}});
    EXPECT_EQ(cg.read("y"), want_old);
  }
  // Known indices are checked when the model is imported.
  Builder bad(13);
  bad.input("x", {4}).output("y", {3});
  bad.ints("k", {0, 4, 1});
  bad.node("GatherElements", {"x", "k"}, {"y"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad.import(); }), "index 4 is out of range");
}

// GatherND (elements, slices, batch_dims, int32 data, known indices) and ScatterND (none, add,
// mul; rows and elements; repeated tuples), with negative indices fed at run time: against the
// ONNX definitions worked out by hand, on every platform, and exported and imported back.
TEST(OnnxImport, GatherNDAndScatterNDRunAndRoundTrip) {
  Builder b(16);
  b.input("x", {2, 3, 4}).input("n", {3, 2}, 6).input("d", {3, 4}).input("si", {2, 3}, 6);
  b.input("ie", {4, 3}, 7).input("is", {3, 2}, 7).input("ib", {2, 2, 1}, 7);
  b.input("ii", {2, 1}, 7).input("sj", {3, 1}, 7).input("se", {3, 2}, 7);
  b.input("su", {3, 4}).input("sv", {3}, 6).input("sw", {2, 4});
  b.output("elems", {4}).output("slices", {3, 4}).output("batch", {2, 2, 4});
  b.output("ints", {2, 2}, 6).output("known", {2, 4}).output("none", {3, 4});
  b.output("add", {3, 4}).output("mul", {3, 4}).output("iadd", {2, 3}, 6);
  b.output("kset", {3, 4});
  b.int_tensor("kc", {2, 2}, {1, -1, 0, 0}).int_tensor("kr", {2, 1}, {-1, 0});
  b.node("GatherND", {"x", "ie"}, {"elems"});
  b.node("GatherND", {"x", "is"}, {"slices"});
  Builder::attr(b.node("GatherND", {"x", "ib"}, {"batch"}), "batch_dims", std::int64_t{1});
  b.node("GatherND", {"n", "ii"}, {"ints"});
  b.node("GatherND", {"x", "kc"}, {"known"});
  b.node("ScatterND", {"d", "sj", "su"}, {"none"});
  for (const char* r : {"add", "mul"})
    Builder::attr(b.node("ScatterND", {"d", "sj", "su"}, {r}), "reduction", std::string(r));
  Builder::attr(b.node("ScatterND", {"si", "se", "sv"}, {"iadd"}), "reduction", std::string("add"));
  b.node("ScatterND", {"d", "kr", "sw"}, {"kset"});
  std::vector<float> x(24), d(12), su(12), sw(8);
  for (std::size_t k = 0; k < 24; ++k) x[k] = static_cast<float>(k) * 0.5f - 3.0f;
  for (std::size_t k = 0; k < 12; ++k) d[k] = static_cast<float>(k) - 5.5f;
  for (std::size_t k = 0; k < 12; ++k) su[k] = static_cast<float>(k) * 0.25f + 2.0f;
  for (std::size_t k = 0; k < 8; ++k) sw[k] = 100.0f + static_cast<float>(k);
  std::vector<std::int32_t> n(6);
  for (std::size_t k = 0; k < 6; ++k) n[k] = 16777217 + static_cast<std::int32_t>(k);
  const std::vector<std::int32_t> si{1, 2, 3, 4, 5, 6}, sv{10, 20, 30};
  const std::vector<std::int32_t> ie{1, 2, 3, -1, -3, -4, 0, 1, -1, 1, -1, 0};
  const std::vector<std::int32_t> is{0, 2, -1, 0, 1, -2}, ib{2, 0, -1, 1}, ii{2, -3};
  const std::vector<std::int32_t> sj{2, -3, 2}, se{1, 2, -2, 0, 1, -1};
  // Each tuple as the flat position it names in x [2, 3, 4] (x[1, 2, 3] is 23, ...).
  auto rows = [](const std::vector<float>& v, std::vector<std::size_t> starts, std::size_t len) {
    std::vector<float> r;
    for (std::size_t s : starts) r.insert(r.end(), v.begin() + s, v.begin() + s + len);
    return r;
  };
  const std::vector<float> want_elems{x[23], x[12], x[7], x[20]};
  const std::vector<float> want_slices = rows(x, {8, 12, 16}, 4);    // (0,2) (1,0) (1,1)
  const std::vector<float> want_batch = rows(x, {8, 0, 20, 16}, 4);  // x[0,2] x[0,0] x[1,2] x[1,1]
  const std::vector<std::int32_t> want_ints{n[4], n[5], n[0], n[1]};
  const std::vector<float> want_known = rows(x, {20, 0}, 4);  // x[1, -1], x[0, 0]
  // sj names rows 2, 0, 2: with none the last of the two writes to row 2 wins.
  std::vector<float> want_none = d, want_add = d, want_mul = d, want_kset = d;
  const std::size_t srow[] = {2, 0, 2};
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t c = 0; c < 4; ++c) {
      want_none[srow[t] * 4 + c] = su[t * 4 + c];
      want_add[srow[t] * 4 + c] += su[t * 4 + c];
      want_mul[srow[t] * 4 + c] *= su[t * 4 + c];
    }
  for (std::size_t c = 0; c < 4; ++c) {  // kr: rows 2 and 0
    want_kset[8 + c] = sw[c];
    want_kset[c] = sw[4 + c];
  }
  // se names (1, 2), (0, 0), (1, 2): 6 + 10 + 30, 1 + 20
  const std::vector<std::int32_t> want_iadd{21, 2, 3, 4, 5, 46};
  // The same ops in their first versions (no batch_dims, no reduction).
  Builder old(11);
  old.input("x", {2, 3, 4}).input("is", {3, 2}, 7).input("d", {3, 4}).input("sj", {3, 1}, 7);
  old.input("su", {3, 4}).output("slices", {3, 4}).output("none", {3, 4});
  old.node("GatherND", {"x", "is"}, {"slices"});
  old.node("ScatterND", {"d", "sj", "su"}, {"none"});
  ho::Model m = b.import(), mo = old.import();
  ho::Model back = round_trip(m);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x},
              {"n", n},
              {"d", d},
              {"si", si},
              {"ie", ie},
              {"is", is},
              {"ib", ib},
              {"ii", ii},
              {"sj", sj},
              {"se", se},
              {"su", su},
              {"sv", sv},
              {"sw", sw}});
      EXPECT_EQ(cg.read("elems"), want_elems);
      EXPECT_EQ(cg.read("slices"), want_slices);
      EXPECT_EQ(cg.read("batch"), want_batch);
      EXPECT_EQ(cg.read_i32("ints"), want_ints);
      EXPECT_EQ(cg.read("known"), want_known);
      EXPECT_EQ(cg.read("none"), want_none);
      EXPECT_EQ(cg.read("add"), want_add);
      EXPECT_EQ(cg.read("mul"), want_mul);
      EXPECT_EQ(cg.read_i32("iadd"), want_iadd);
      EXPECT_EQ(cg.read("kset"), want_kset);
    }
    CompiledGraph cg = mo.compile(GraphCompiler(pc.make()));
    cg.run({{"x", x}, {"is", is}, {"d", d}, {"sj", sj}, {"su", su}});
    EXPECT_EQ(cg.read("slices"), want_slices);
    EXPECT_EQ(cg.read("none"), want_none);
  }
}

// Each index component is checked against its own dim: (0, 3, 0) in x [2, 3, 4] would be the
// valid flat position 12 (x[1, 0, 0]) but is a FeedError naming the node, on every platform,
// exported and imported back too. Known bad indices and inconsistent shapes are errors at
// import; what hetgraph cannot hold is an UnsupportedError naming the node.
TEST(OnnxImport, GatherNDAndScatterNDIndexErrorsNameTheNode) {
  Builder b(16);
  b.input("x", {2, 3, 4}).input("i", {2, 3}, 7).input("d", {3, 4}).input("j", {2, 1}, 7);
  b.input("u", {2, 4}).output("g", {2, 4}).output("s", {3, 4});
  b.node("GatherND", {"x", "i"}, {"g"})->set_name("gnd");
  b.node("ScatterND", {"d", "j", "u"}, {"s"});
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const auto x = testing_util::random_vec(24, 1), d = testing_util::random_vec(12, 2);
  const auto u = testing_util::random_vec(8, 3);
  const std::vector<std::int32_t> good_i{0, 2, 3, -1, -1, 0}, good_j{2, -3};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      const std::string gather_error = error_of<FeedError>([&] {
        cg.run({{"x", x},
                {"i", std::vector<std::int32_t>{0, 2, 3, 0, 3, 0}},
                {"d", d},
                {"j", good_j},
                {"u", u}});
      });
      EXPECT_CONTAINS(gather_error, "'gnd/GatherND/indices[..., 1]'");
      EXPECT_CONTAINS(gather_error, "index 3 at position 1");
      EXPECT_CONTAINS(gather_error, "[-3, 3)");
      const std::string scatter_error = error_of<FeedError>([&] {
        cg.run(
            {{"x", x}, {"i", good_i}, {"d", d}, {"j", std::vector<std::int32_t>{0, -4}}, {"u", u}});
      });
      EXPECT_CONTAINS(scatter_error, "'s/ScatterND/indices[..., 0]'");
      EXPECT_CONTAINS(scatter_error, "index -4 at position 1");
      // Good indices still run after the errors.
      cg.run({{"x", x}, {"i", good_i}, {"d", d}, {"j", good_j}, {"u", u}});
      EXPECT_EQ(cg.read("g"), (std::vector<float>{x[11], x[20]}));
    }
  }
  // Known indices: checked at import, per component.
  auto known = [](const std::string& op, std::vector<std::int64_t> idims,
                  std::vector<std::int64_t> idx) {
    Builder e(16);
    e.input("x", {2, 3, 4}).input("u", {1, 4}).output("y", {1, 4});
    e.int_tensor("k", std::move(idims), std::move(idx));
    if (op == "GatherND")
      e.node(op, {"x", "k"}, {"y"});
    else
      e.node(op, {"x", "k", "u"}, {"y"});
    e.import();
  };
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    known("GatherND", {1, 2}, {0, 3});
                  }),
                  "index 3 (component 1 of index tuple 0) is out of range for dim 1 of data "
                  "[2, 3, 4]");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    known("ScatterND", {1, 2}, {-3, 0});
                  }),
                  "index -3 (component 0 of index tuple 0) is out of range for dim 0");
  // Shapes that do not fit.
  auto shapes = [](std::vector<Dim> xd, std::vector<Dim> id, std::int64_t batch_dims,
                   std::vector<Dim> ud = {}) {
    Builder e(16);
    e.input("x", std::move(xd)).input("i", std::move(id), 7).output("y", {2});
    if (ud.empty()) {
      Builder::attr(e.node("GatherND", {"x", "i"}, {"y"}), "batch_dims", batch_dims);
    } else {
      e.input("u", std::move(ud));
      e.node("ScatterND", {"x", "i", "u"}, {"y"});
    }
    e.import();
  };
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    shapes({2, 3}, {2, 3}, 0);
                  }),
                  "hold tuples of 3 components; data [2, 3] takes 1 to 2");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    shapes({2, 3, 4}, {3, 2}, 1);
                  }),
                  "the batch dims of the indices [3, 2] differ from data's [2, 3, 4]");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    shapes({2, 3}, {2, 1}, 2);
                  }),
                  "batch_dims 2 must be at least 0 and below the ranks");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    shapes({2, 3}, {2, 1}, 0, {2, 4});
                  }),
                  "updates [2, 4] must be [2, 3]");
  // Empty data or indices (hetgraph tensors are never empty), rows past int32, a result of
  // rank 9, a reduction ONNX added later (opset 18).
  auto refused = [](std::vector<Dim> xd, std::vector<Dim> id, std::vector<Dim> yd) {
    Builder e;
    e.input("x", std::move(xd)).input("i", std::move(id), 7).output("y", std::move(yd));
    e.node("GatherND", {"x", "i"}, {"y"});
    e.import();
  };
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    refused({0, 3}, {2, 1}, {2, 3});
                  }),
                  "GatherND-13): empty data [0, 3]");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    refused({2, 3}, {0, 1}, {0, 3});
                  }),
                  "no index tuples");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    refused({65536, 32768}, {1, 2}, {1});
                  }),
                  "more than 2^31 rows");

  Builder big;
  big.input("x", {2, 2, 2, 2, 2}).input("i", {2, 2, 2, 2, 2, 1}, 7).output("y", {2, 2, 2, 2});
  big.node("GatherND", {"x", "i"}, {"y"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { big.import(); }), "a result of rank 9");
  Builder max(18);
  max.input("x", {3}).input("i", {1, 1}, 7).input("u", {1}).output("y", {3});
  Builder::attr(max.node("ScatterND", {"x", "i", "u"}, {"y"}), "reduction", std::string("max"));
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { max.import(); }),
                  "ScatterND-16): reduction 'max' (none, add and mul are supported)");
}

// TopK: K as an input (opset 10 on) or the attribute k (opset 1), axis, largest (opset 11),
// sorted = 0 (the order stays sorted); float and int64 data; ties keep index order and NaN
// ranks above every number. Values and int64 indices on every platform, then exported and
// imported back to the same outputs.
TEST(OnnxImport, TopKRunsAndRoundTrips) {
  Builder b(11);
  b.input("x", {3, 4}).input("i", {2, 3}, 7).ints("K2", {2}).ints("K3", {3});
  b.output("v", {3, 2}).output("p", {3, 2}, 7).output("sv", {3, 4}).output("sp", {3, 4}, 7);
  b.output("iv", {2, 2}, 7).output("ip", {2, 2}, 7);
  b.node("TopK", {"x", "K2"}, {"v", "p"});  // axis -1, largest
  auto* n = b.node("TopK", {"x", "K3"}, {"sv", "sp"});
  Builder::attr(n, "axis", std::int64_t{0});
  Builder::attr(n, "largest", std::int64_t{0});
  n = b.node("TopK", {"i", "K2"}, {"iv", "ip"});
  Builder::attr(n, "axis", std::int64_t{1});
  Builder::attr(n, "sorted", std::int64_t{0});
  const std::vector<float> x{1, 3, 3, 0, NAN, 2, NAN, 5, -1, -1, -2, -1};
  const std::vector<std::int32_t> i{4, 9, 9, -3, -3, -8};
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  // TopK-1 (k an attribute) and TopK-10 (K an input, no largest): the largest first.
  Builder one(9), ten(10);
  one.input("x", {3, 4}).output("v", {3, 1}).output("p", {3, 1}, 7);
  Builder::attr(one.node("TopK", {"x"}, {"v", "p"}), "k", std::int64_t{1});
  ten.input("x", {3, 4}).ints("K", {1}).output("v", {1, 4}).output("p", {1, 4}, 7);
  Builder::attr(ten.node("TopK", {"x", "K"}, {"v", "p"}), "axis", std::int64_t{0});
  ho::Model m1 = one.import(), m10 = ten.import();
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"i", i}});
      EXPECT_TRUE(same_floats(cg.read("v"), {3, 3, NAN, NAN, -1, -1}));
      EXPECT_EQ(cg.read_i32("p"), (std::vector<std::int32_t>{1, 2, 0, 2, 0, 1}));
      EXPECT_TRUE(same_floats(cg.read("sv"), {-1, -1, -2, -1, 1, 2, 3, 0, NAN, 3, NAN, 5}));
      EXPECT_EQ(cg.read_i32("sp"), (std::vector<std::int32_t>{2, 2, 2, 2, 0, 1, 0, 0, 1, 0, 1, 1}));
      EXPECT_EQ(cg.read_i32("iv"), (std::vector<std::int32_t>{9, 9, -3, -3}));
      EXPECT_EQ(cg.read_i32("ip"), (std::vector<std::int32_t>{1, 2, 0, 1}));
    }
    CompiledGraph c1 = m1.compile(GraphCompiler(pc.make()));
    c1.run({{"x", x}});
    EXPECT_TRUE(same_floats(c1.read("v"), {3, NAN, -1}));
    EXPECT_EQ(c1.read_i32("p"), (std::vector<std::int32_t>{1, 0, 0}));
    CompiledGraph c10 = m10.compile(GraphCompiler(pc.make()));
    c10.run({{"x", x}});
    EXPECT_TRUE(same_floats(c10.read("v"), {NAN, 3, NAN, 5}));
    EXPECT_EQ(c10.read_i32("p"), (std::vector<std::int32_t>{1, 0, 1, 1}));
  }
}

// K must be known at import (a model input can be given then; a computed K cannot), hold one
// number in [1, size of the axis]; the axis must exist; double data is not held.
TEST(OnnxImport, TopKErrorsNameTheNode) {
  auto model = [](std::vector<std::int64_t> k, std::int64_t axis = -1) {
    Builder b;
    b.input("x", {3, 4}).ints("K", std::move(k)).output("v", {3, 2}).output("p", {3, 2}, 7);
    Builder::attr(b.node("TopK", {"x", "K"}, {"v", "p"}), "axis", axis);
    return b;
  };
  std::string e = error_of<ShapeError>([&] { model({5}).import(); });
  EXPECT_CONTAINS(e, "TopK-11");
  EXPECT_CONTAINS(e, "K = 5 is outside [1, 4]");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { model({0}).import(); }), "K = 0 is outside [1, 4]");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { model({1, 2}).import(); }), "K must hold one number");
  e = error_of<ShapeError>([&] { model({2}, 2).import(); });
  EXPECT_CONTAINS(e, "TopK-11");
  EXPECT_CONTAINS(e, "axis 2");
  {
    Builder b;
    b.input("x", {3}, 11).ints("K", {1}).output("v", {1}, 11).output("p", {1}, 7);
    b.node("TopK", {"x", "K"}, {"v", "p"});
    EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }), "double");
  }
  {  // K fed as a model input: needed at import, and enough when given then.
    Builder b;
    b.input("x", {3, 4}).input("K", {1}, 7).output("v", {3, 2}).output("p", {3, 2}, 7);
    b.node("TopK", {"x", "K"}, {"v", "p"});
    try {
      b.import();
      ADD_FAILURE() << "imported a TopK whose K is only known at run time";
    } catch (const ho::UnsupportedError& err) {
      EXPECT_EQ(err.input_needed(), "K");
      EXPECT_CONTAINS(err.what(), "TopK-11");
    }
    ho::ImportOptions o;
    o.input_values.push_back({"K", given("int64", Shape{1}, {2})});
    ho::Model m = b.import(o);
    EXPECT_EQ(m.output_info[1].shape, (Shape{3, 2}));
  }
  {  // K computed from the data: no value at import can stand for it.
    Builder b;
    b.input("x", {3, 4}).input("c", {4}).output("v", {3, 2}).output("p", {3, 2}, 7);
    Builder::attr(b.node("ArgMax", {"c"}, {"K"}), "keepdims", std::int64_t{1});
    b.node("TopK", {"x", "K"}, {"v", "p"});
    try {
      b.import();
      ADD_FAILURE() << "imported a TopK whose K is computed at run time";
    } catch (const ho::UnsupportedError& err) {
      EXPECT_EQ(err.input_needed(), "");
      EXPECT_CONTAINS(err.what(), "TopK-11");
      EXPECT_CONTAINS(err.what(), "computed at run time");
    }
  }
}

// DepthToSpace (DCR and CRD, as ONNX's rank-6 definitions give them) and SpaceToDepth, which
// undoes DCR; of int64, so every element is checked exactly.
TEST(OnnxImport, DepthToSpaceAndBack) {
  Builder b;
  b.input("x", {1, 8, 2, 3}, 7).output("dcr", {1, 2, 4, 6}, 7).output("crd", {1, 2, 4, 6}, 7);
  b.output("back", {1, 8, 2, 3}, 7);
  auto* dcr = b.node("DepthToSpace", {"x"}, {"dcr"});
  Builder::attr(dcr, "blocksize", std::int64_t{2});
  auto* crd = b.node("DepthToSpace", {"x"}, {"crd"});
  Builder::attr(crd, "blocksize", std::int64_t{2});
  Builder::attr(crd, "mode", std::string("CRD"));
  Builder::attr(b.node("SpaceToDepth", {"dcr"}, {"back"}), "blocksize", std::int64_t{2});
  ho::Model m = b.import();
  std::vector<std::int32_t> x(48), want_dcr(48), want_crd(48);
  for (int k = 0; k < 48; ++k) x[static_cast<std::size_t>(k)] = 16777217 + k;
  // out[c, 2h + i, 2w + j] = x[(2i + j) * 2 + c, h, w] (DCR), x[4c + 2i + j, h, w] (CRD)
  for (int ch = 0; ch < 2; ++ch)
    for (int r = 0; r < 4; ++r)
      for (int col = 0; col < 6; ++col) {
        const int i = r % 2, j = col % 2, h = r / 2, w = col / 2;
        const auto o = static_cast<std::size_t>((ch * 4 + r) * 6 + col);
        want_dcr[o] = x[static_cast<std::size_t>((((2 * i + j) * 2 + ch) * 2 + h) * 3 + w)];
        want_crd[o] = x[static_cast<std::size_t>(((4 * ch + 2 * i + j) * 2 + h) * 3 + w)];
      }
  run_everywhere(m, {{"x", x}}, false, [&](CompiledGraph& cg, const ho::Model&) {
    EXPECT_EQ(cg.read_i32(m.outputs[0]), want_dcr);
    EXPECT_EQ(cg.read_i32(m.outputs[1]), want_crd);
    EXPECT_EQ(cg.read_i32(m.outputs[2]), x);
  });
  Builder odd;
  odd.input("x", {1, 6, 2, 2}).output("y", {1, 1, 6, 6});
  Builder::attr(odd.node("DepthToSpace", {"x"}, {"y"}), "blocksize", std::int64_t{3});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { odd.import(); }), "not a multiple of blocksize^2");
}

}  // namespace
