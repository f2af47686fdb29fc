// SPDX-License-Identifier: Apache-2.0
// ONNX import of whole models (test_onnx; the ops by family are in tests/test_onnx_*.cpp, the
// shared helpers in tests/onnx_test_util.hpp): errors for every kind of bad or unsupported model,
// values the import must compute, shape computations folded away for the shapes given, batch
// norms folded into convolutions, fine-tuning an imported model, and float16 / bfloat16 models.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <utility>

#include "common/float16.hpp"
#include "onnx/ir.hpp"
#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// ---- bad and unsupported models --------------------------------------------------------------

TEST(OnnxImport, FileErrorsNameTheFile) {
  EXPECT_CONTAINS(error_of<DataError>([] { ho::import("/nonexistent/model.onnx"); }),
                  "/nonexistent/model.onnx");
  const std::string junk = "this is not a protobuf \x01\x02\x03";
  EXPECT_CONTAINS(error_of<DataError>([&] {
                    ho::import_bytes(std::as_bytes(std::span<const char>(junk)), {}, "junk.onnx");
                  }),
                  "junk.onnx: not an ONNX model");
  // onnx::checker: a node reading a value nothing defines.
  Builder b;
  b.input("x", {2}).output("y", {2});
  b.node("Relu", {"nowhere"}, {"y"});
  EXPECT_CONTAINS(error_of<DataError>([&] { b.import(); }), "onnx::checker");
}

TEST(OnnxImport, EveryUnsupportedOpIsListedAtOnce) {
  Builder b;
  b.input("x", {4, 3}).output("i", {4, 3}).output("z", {4, 3});
  Builder::attr(b.node("Multinomial", {"x"}, {"i"}), "sample_size", std::int64_t{3});
  b.node("StringNormalizer", {"x"}, {"r"});
  b.node("Relu", {"r"}, {"z"});
  Builder::attr(b.node("MaxRoiPool", {"x", "x"}, {"d"}), "pooled_shape",
                std::vector<std::int64_t>{2, 2});
  const std::string what = error_of<ho::UnsupportedError>([&] { b.import(); });
  EXPECT_CONTAINS(what, "opset 17");
  EXPECT_CONTAINS(what, "Multinomial-7");
  EXPECT_CONTAINS(what, "StringNormalizer-10");
  EXPECT_CONTAINS(what, "MaxRoiPool-1");
  EXPECT_EQ(what.find("Relu"), std::string::npos) << what;
}

TEST(OnnxImport, UnsupportedTypesRanksAndAttributesAreCleanErrors) {
  {
    Builder b;
    b.input("x", {1, 2, 3, 4, 5, 1, 1, 1, 2}).output("y", {1, 2, 3, 4, 5, 1, 1, 1, 2});
    b.node("Relu", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }), "rank 9");
  }
  {
    Builder b;
    b.input("x", {3}, 11).output("y", {3}, 11);  // double
    b.node("Relu", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }), "double");
  }
  {
    Builder b;
    b.input("x", {2, 3}).input("s", {2}, 7).output("y", {3, 2});
    b.node("Reshape", {"x", "s"}, {"y"});
    try {
      b.import();
      ADD_FAILURE() << "imported a reshape to a shape only known at run time";
    } catch (const ho::UnsupportedError& e) {
      EXPECT_EQ(e.input_needed(), "s");
      // Given the value at import, it imports.
      ho::ImportOptions o;
      ho::TensorData s;
      s.dtype = DType::i32;
      s.onnx_type = "int64";
      s.shape = Shape{2};
      s.i32 = {3, 2};
      o.input_values.push_back({"s", std::make_shared<ho::TensorData>(s)});
      ho::Model m = b.import(o);
      EXPECT_EQ(m.output_info[0].shape, (Shape{3, 2}));
      EXPECT_EQ(m.inputs.size(), 1u);
    }
  }
}

// Unique and NonMaxSuppression have output shapes that depend on their inputs' values: they
// are computed at import from inputs known there, and a run-time input is an UnsupportedError
// naming it (which ImportOptions::input_values then gives). NonMaxSuppression's result may be
// empty.
TEST(OnnxImport, UniqueAndNonMaxSuppressionComputeFromKnownInputs) {
  auto values = [](const std::string& name, Shape shape, std::vector<float> f,
                   std::vector<std::int32_t> i, const char* type) {
    auto t = std::make_shared<ho::TensorData>();
    t->name = name;
    t->shape = shape;
    t->onnx_type = type;
    t->dtype = f.empty() ? DType::i32 : DType::f32;
    t->f32 = std::move(f);
    t->i32 = std::move(i);
    return t;
  };
  Builder u(11);
  u.input("x", {6}, 7).output("y", {"u"}, 7).output("first", {"u"}, 7).output("inverse", {6}, 7);
  u.output("counts", {"u"}, 7);
  Builder::attr(u.node("Unique", {"x"}, {"y", "first", "inverse", "counts"}), "sorted",
                std::int64_t{0});
  try {
    u.import();
    ADD_FAILURE() << "Unique of a run-time input imported";
  } catch (const ho::UnsupportedError& e) {
    EXPECT_EQ(e.input_needed(), "x");
    EXPECT_CONTAINS(std::string(e.what()), "ImportOptions::input_values");
  }
  ho::ImportOptions o;
  o.input_values.push_back({"x", values("x", Shape{6}, {}, {2, 1, 1, 3, 4, 3}, "int64")});
  ho::Model m = u.import(o);
  CompiledGraph cg = m.compile(GraphCompiler(), {});
  cg.run({});
  EXPECT_EQ(cg.read_i32("y"), (std::vector<std::int32_t>{2, 1, 3, 4}));
  EXPECT_EQ(cg.read_i32("first"), (std::vector<std::int32_t>{0, 1, 3, 4}));
  EXPECT_EQ(cg.read_i32("inverse"), (std::vector<std::int32_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(cg.read_i32("counts"), (std::vector<std::int32_t>{1, 2, 2, 1}));

  // Two overlapping boxes and one apart; the second is suppressed (IoU 0.6 > 0.5), and a
  // score threshold above every score selects none: an empty [0, 3].
  for (const float threshold : {0.0f, 0.99f}) {
    Builder n(11);
    n.input("boxes", {1, 3, 4}).input("scores", {1, 1, 3}).output("sel", {"k", 3}, 7);
    n.ints("max", {10}).floats("iou", {}, {0.5f}).floats("min_score", {}, {threshold});
    n.node("NonMaxSuppression", {"boxes", "scores", "max", "iou", "min_score"}, {"sel"});
    ho::ImportOptions no;
    no.input_values.push_back(
        {"boxes", values("boxes", Shape{1, 3, 4}, {0, 0, 1, 1, 0, 0.25f, 1, 1.25f, 5, 5, 6, 6}, {},
                         "float")});
    no.input_values.push_back(
        {"scores", values("scores", Shape{1, 1, 3}, {0.9f, 0.8f, 0.7f}, {}, "float")});
    ho::Model nm = n.import(no);
    CompiledGraph ng = nm.compile(GraphCompiler(), {});
    ng.run({});
    EXPECT_EQ(ng.read_i32("sel"), threshold > 0 ? std::vector<std::int32_t>{}
                                                : (std::vector<std::int32_t>{0, 0, 0, 0, 0, 2}));
    EXPECT_EQ(nm.output_info[0].shape, threshold > 0 ? (Shape{0, 3}) : (Shape{2, 3}));
  }
}

// Constants the importer builds on the host (positions, masks, zeros) are bounded: a model
// whose dims would make one of more than 2^28 elements is an UnsupportedError naming the node,
// not gigabytes allocated (the fuzzer found Hardmax-11 over [1, 65536, 102400] allocating 26 GB).
TEST(OnnxImport, ConstantsBuiltAtImportAreBounded) {
  Builder hm(11);
  hm.input("x", {1, 65536, 102400}).output("y", {1, 65536, 102400});
  hm.node("Hardmax", {"x"}, {"y"})->set_name("huge_hardmax");
  const std::string e = error_of<ho::UnsupportedError>([&] { hm.import(); });
  EXPECT_CONTAINS(e, "huge_hardmax");
  EXPECT_CONTAINS(e, "2^28");
  Builder un(11);
  un.input("y", {1, 1, 2, 2}).input("i", {1, 1, 2, 2}, 7).output("u", {1, 1, 65536, 65536});
  un.int_tensor("shape", {4}, {1, 1, 65536, 65536});
  auto* n = un.node("MaxUnpool", {"y", "i", "shape"}, {"u"});
  Builder::attr(n, "kernel_shape", std::vector<std::int64_t>{2, 2});
  Builder::attr(n, "strides", std::vector<std::int64_t>{2, 2});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { un.import(); }), "2^28");
}

// ---- values the import computes, and the shapes it needs ---------------------------------------

// Ops hetgraph computes only at import (Range, ConstantOfShape) on model inputs: the error
// names the input to give (UnsupportedError::input_needed), also for Range, whose ONNX function
// body (a Loop) would otherwise be the complaint; given in input_values, they fold and run.
TEST(OnnxImport, ImportTimeOpsNameTheInputTheyNeed) {
  Builder b(11);
  b.input("start", {}, 7).input("limit", {}, 7).input("delta", {}, 7).input("shape", {1}, 7);
  b.input("x", {4}).output("r", {4}, 7).output("y", {4});
  b.node("Range", {"start", "limit", "delta"}, {"r"});
  b.node("ConstantOfShape", {"shape"}, {"c"});
  b.node("Add", {"x", "c"}, {"y"});
  std::vector<std::string> asked;
  ho::ImportOptions o;
  const auto scalar = [](std::int32_t v, const Shape& s) {
    return given("int64", s, std::vector<std::int32_t>(static_cast<std::size_t>(s.numel()), v));
  };
  const std::map<std::string, std::shared_ptr<ho::TensorData>> values{
      {"start", scalar(10, Shape{})},
      {"limit", scalar(2, Shape{})},
      {"delta", scalar(-2, Shape{})},
      {"shape", scalar(4, Shape{1})}};
  for (int tries = 0; tries < 8; ++tries) {
    try {
      ho::Model m = b.import(o);
      run_everywhere(
          m, {{"x", std::vector<float>{1, 2, 3, 4}}}, false,
          [&](CompiledGraph& cg, const ho::Model&) {
            EXPECT_EQ(cg.read_i32(m.outputs[0]), (std::vector<std::int32_t>{10, 8, 6, 4}));
            EXPECT_EQ(cg.read(m.outputs[1]), (std::vector<float>{1, 2, 3, 4}));  // zeros added
          });
      break;
    } catch (const ho::UnsupportedError& e) {
      ASSERT_FALSE(e.input_needed().empty()) << e.what();
      asked.push_back(e.input_needed());
      o.input_values.push_back({e.input_needed(), values.at(e.input_needed())});
    }
  }
  EXPECT_EQ(asked, (std::vector<std::string>{"start", "limit", "delta", "shape"}));
}

// A value needed at import but computed from a model input names that input, so that giving
// it there lets the import compute the value (Reshape's shape from a fed input plus one).
TEST(OnnxImport, ValuesComputedFromInputsNameTheInputBehind) {
  Builder b(13);
  b.input("x", {2, 3}).input("k", {2}, 7).output("y", {3, 2});
  scalar_init(b, "one", 7, 1);
  b.node("Add", {"k", "one"}, {"shape"});
  b.node("Reshape", {"x", "shape"}, {"y"});
  const ho::UnsupportedError e = unsupported_of(b);
  EXPECT_EQ(e.input_needed(), "k");
  EXPECT_CONTAINS(e.what(), "computed from input 'k'");
  ho::ImportOptions o;
  o.input_values = {{"k", given("int64", Shape{2}, {2, 1})}};
  const ho::Model m = b.import(o);
  EXPECT_EQ(m.output_info[0].shape, (Shape{3, 2}));
}

// NonZero, whose output's shape depends on its input's values, is computed at import: on a
// known input, or on a fed one once its value is given there.
TEST(OnnxImport, NonZeroIsComputedAtImport) {
  Builder b(13);
  b.input("x", {2, 3}).output("y", {2, 3}, 7);
  b.node("NonZero", {"x"}, {"y"});
  EXPECT_EQ(unsupported_of(b).input_needed(), "x");
  ho::ImportOptions o;
  o.input_values = {
      {"x", given("float", Shape{2, 3}, {}, {0, 1.5f, 0, -2, 0, NAN})}};  // NaN: not 0
  const ho::Model m = b.import(o);
  CompiledGraph cg = m.compile(GraphCompiler());
  cg.run({});
  EXPECT_EQ(cg.read_i32(m.outputs[0]), (std::vector<std::int32_t>{0, 1, 1, 1, 0, 2}));
}

TEST(OnnxImport, DynamicDimsNeedShapesAndAreChecked) {
  Builder b;
  b.input("x", {std::string("batch"), 3}).output("y", {std::string("batch"), 3});
  b.node("Relu", {"x"}, {"y"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { b.import(); }),
                  "input 'x' dim 0 ('batch') is dynamic");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    b.import({.input_shapes = {{"x", {5, 4}}}});
                  }),
                  "dim 1 fixed at 3");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    b.import({.input_shapes = {{"nope", {5, 3}}}});
                  }),
                  "'nope'");
  ho::Model m = b.import({.input_shapes = {{"x", {5, 3}}}});
  EXPECT_EQ(m.input_shapes[0].second, (Shape{5, 3}));
  EXPECT_EQ(m.input_info[0].declared, (std::vector<std::int64_t>{-1, 3}));
  EXPECT_EQ(b.import({.dynamic_dim = 2}).input_shapes[0].second, (Shape{2, 3}));
}

// ---- shapes computed in the model ------------------------------------------------------------

// y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): [batch, 3, 4] -> [batch, 12],
// the way exporters flatten with a dynamic batch.
Builder flatten_model() {
  Builder b;
  b.input("x", {std::string("batch"), 3, 4}).output("y", {std::string("batch"), 12});
  b.ints("zero", {0}).ints("minus_one", {-1});
  b.node("Shape", {"x"}, {"shape"});
  Builder::attr(b.node("Gather", {"shape", "zero"}, {"batch"}), "axis", std::int64_t{0});
  Builder::attr(b.node("Concat", {"batch", "minus_one"}, {"target"}), "axis", std::int64_t{0});
  b.node("Reshape", {"x", "target"}, {"flat"});
  b.node("Relu", {"flat"}, {"y"});
  return b;
}

TEST(OnnxImport, ShapeComputationsFoldForEachBatchSize) {
  const Builder b = flatten_model();
  for (const auto& pc : testing_util::platforms()) {
    ho::Model m = b.import({.input_shapes = {{"x", {2, 3, 4}}}});
    for (std::int64_t batch : {2, 5}) {
      SCOPED_TRACE(pc.name + " batch " + std::to_string(batch));
      const hetgraph::InputShapes shapes{{"x", {batch, 3, 4}}};
      CompiledGraph cg = m.compile(GraphCompiler(pc.make()), shapes);
      // Only the reshape (a view) and the relu are left of the shape computation.
      EXPECT_EQ(cg.report().nodes, 3u);
      const auto x = testing_util::random_vec(static_cast<std::size_t>(batch * 12), 1);
      cg.run({{"x", x}});
      const auto y = cg.read("y");
      ASSERT_EQ(y.size(), x.size());
      for (std::size_t k = 0; k < x.size(); ++k) ASSERT_EQ(y[k], std::max(x[k], 0.0f));
    }
  }
}

// An input given an empty shape holds no values: it is folded as an empty constant, so ReduceSum
// (opset 13) with its axes input left empty reduces every axis, or passes x through with
// noop_with_empty_axes. The empty input is not an input of the compiled graph. What is
// computed from it is empty too.
TEST(OnnxImport, EmptyInputsFoldAsEmptyConstants) {
  for (const int noop : {0, 1}) {
    Builder b(13);
    b.input("x", {2, 3}).input("axes", {"n"}, 7).output("y", {"a", "b"});
    Builder::attr(b.node("ReduceSum", {"x", "axes"}, {"y"}), "noop_with_empty_axes",
                  std::int64_t{noop});
    ho::Model m = b.import({.input_shapes = {{"axes", Shape{0}}}});
    ASSERT_EQ(m.input_info.size(), 1u);
    EXPECT_EQ(m.input_info[0].name, "x");
    EXPECT_EQ(m.output_info[0].shape, noop ? (Shape{2, 3}) : (Shape{1, 1}));
    for (const auto& pc : testing_util::platforms()) {
      SCOPED_TRACE(pc.name + " noop " + std::to_string(noop));
      CompiledGraph cg = m.compile(GraphCompiler(pc.make()), {});
      const std::vector<float> x{1, 2, 3, 4, 5, 6};
      cg.run({{"x", x}});
      EXPECT_EQ(cg.read("y"), noop ? x : std::vector<float>{21});
    }
  }
  {  // An empty result is a value too: the output is empty, on every platform.
    Builder b;
    b.input("x", {"n"}).output("y", {"n"});
    b.node("Relu", {"x"}, {"y"});
    ho::Model m = b.import({.input_shapes = {{"x", Shape{0}}}});
    EXPECT_EQ(m.output_info[0].shape, Shape{0});
    for (const auto& pc : testing_util::platforms()) {
      SCOPED_TRACE(pc.name);
      CompiledGraph cg = m.compile(GraphCompiler(pc.make()), {});
      cg.run({});
      EXPECT_TRUE(cg.read("y").empty());
    }
  }
}

// float64 is held as float32 only when asked: without ImportOptions::float64_as_float32 a
// double input, or a Cast to double, is refused naming it and the option; with it the model
// runs in float32 on every platform.
TEST(OnnxImport, Float64RunsAsFloat32OnlyWhenAsked) {
  constexpr int kDouble = 11;
  Builder b;
  b.input("x", {2, 3}, kDouble).input("z", {2, 3}).output("y", {2, 3}, kDouble);
  b.output("w", {2, 3});
  b.node("Add", {"x", "x"}, {"y"});
  Builder::attr(b.node("Cast", {"z"}, {"zd"}), "to", std::int64_t{kDouble});
  b.node("Sqrt", {"zd"}, {"sd"});
  Builder::attr(b.node("Cast", {"sd"}, {"w"}), "to", std::int64_t{1});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }),
                  "tensor 'x' is float64 (double); hetgraph computes in float32. "
                  "ImportOptions::float64_as_float32");
  ho::Model m = b.import({.float64_as_float32 = true});
  EXPECT_EQ(m.input_info[0].onnx_type, "double");
  EXPECT_EQ(m.input_info[0].dtype, DType::f32);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()), {});
    const std::vector<float> x{0.1f, 2, 3, 4, 5, 6}, z{1, 4, 9, 16, 25, 36};
    cg.run({{"x", x}, {"z", z}});
    EXPECT_EQ(cg.read("y"), (std::vector<float>{0.2f, 4, 6, 8, 10, 12}));
    EXPECT_EQ(cg.read("w"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
  // Only the Cast to double: named by its node.
  Builder c;
  c.input("z", {2}).output("w", {2});
  Builder::attr(c.node("Cast", {"z"}, {"zd"}), "to", std::int64_t{kDouble});
  c.node("Neg", {"zd"}, {"nd"});
  Builder::attr(c.node("Cast", {"nd"}, {"w"}), "to", std::int64_t{1});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { c.import(); }), "attribute 'to'");
}

// The cross-check after every import: ONNX's shape inference, run for the shapes the graph was
// built for, sees the same output shape.
TEST(OnnxImport, OnnxShapeInferenceAgreesWithTheBuiltGraph) {
  const Builder b = flatten_model();
  const std::string bytes = b.bytes();
  const auto m =
      hetgraph::onnx::ir::parse_model(bytes.data(), bytes.size(), "flatten.onnx", "", true);
  const auto t = hetgraph::onnx::ir::infer_output_types(m, {{"x", {1, {7, 3, 4}, true}}});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t[0].has_shape);
  EXPECT_EQ(t[0].dims, (std::vector<std::int64_t>{7, 12}));
  EXPECT_EQ(t[0].elem, 1);
}

// ---- initializers, batch norm folding, fine-tuning --------------------------------------------

Builder conv_bn_model() {
  Builder b;
  b.input("x", {1, 2, 5, 5}).output("y", {1, 3, 5, 5});
  b.floats("W", {3, 2, 3, 3}, testing_util::random_vec(54, 3));
  b.floats("B", {3}, {0.1f, -0.2f, 0.3f});
  b.floats("scale", {3}, {1.5f, 0.5f, 2.0f}).floats("bias", {3}, {0.0f, 1.0f, -1.0f});
  b.floats("mean", {3}, {0.2f, -0.1f, 0.05f}).floats("var", {3}, {0.9f, 1.1f, 0.3f});
  auto* conv = b.node("Conv", {"x", "W", "B"}, {"c"});
  Builder::attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"y"});
  return b;
}

TEST(OnnxImport, BatchNormFoldsIntoTheConvolution) {
  const Builder b = conv_bn_model();
  ho::Model folded = b.import();
  ho::Model plain = b.import({.fold_batch_norm = false});
  const auto x = testing_util::random_vec(50, 9);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph f = folded.compile(GraphCompiler(pc.make()));
    CompiledGraph p = plain.compile(GraphCompiler(pc.make()));
    EXPECT_LT(f.report().nodes, p.report().nodes);
    f.run({{"x", x}});
    p.run({{"x", x}});
    const auto a = f.read("y"), c = p.read("y");
    for (std::size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], c[k], 1e-5 + 1e-5 * std::fabs(c[k]));
  }
  // The folded weights are trainable variables of their own.
  EXPECT_EQ(folded.variables.size(), 2u);
  EXPECT_EQ(folded.variables[0].name(), "W/bn_folded");
}

// std::move(m).compile() gives the same results with the weights moved, not copied; the model
// can then be exported only with values from a compiled graph.
TEST(OnnxImport, MovingTheModelIntoCompileTakesItsWeights) {
  const Builder b = conv_bn_model();
  const auto x = testing_util::random_vec(50, 9);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    ho::Model kept = b.import(), moved = b.import();
    CompiledGraph k = kept.compile(GraphCompiler(pc.make()));
    CompiledGraph m = std::move(moved).compile(GraphCompiler(pc.make()));
    k.run({{"x", x}});
    m.run({{"x", x}});
    EXPECT_TRUE(testing_util::bitwise_equal(m.read("y"), k.read("y")));
    // The model moved from is what is checked: it compiles and exports no more.
    // NOLINTNEXTLINE(bugprone-use-after-move)
    EXPECT_CONTAINS(error_of<GraphError>([&] { (void)moved.compile(GraphCompiler(pc.make())); }),
                    "'W/bn_folded' (#");
    EXPECT_CONTAINS(error_of<GraphError>(
                        [&] { ho::export_bytes(moved.graph, moved.outputs, moved.input_shapes); }),
                    "no values");
    const std::string bytes =
        ho::export_bytes(moved.graph, moved.outputs, moved.input_shapes, {.values = &m});
    CompiledGraph again = ho::import_bytes(std::as_bytes(std::span<const char>(bytes)))
                              .compile(GraphCompiler(pc.make()));
    again.run({{"x", x}});
    EXPECT_TRUE(testing_util::bitwise_equal(again.read("y"), k.read("y")));
  }
}

TEST(OnnxImport, InitializersAreVariablesThatTrain) {
  Builder b;
  b.input("x", {4, 3}).output("y", {4, 2});
  b.floats("W", {3, 2}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}).floats("B", {2}, {0.0f, 0.0f});
  b.node("Gemm", {"x", "W", "B"}, {"y"});
  ho::Model m = b.import();
  ASSERT_EQ(m.variables.size(), 2u);
  auto target = m.graph.input("target");
  auto diff = m.outputs[0] - target;
  auto loss = reduce_mean(diff * diff);
  auto step = sgd(loss, m.variables, 0.1f);
  CompiledGraph cg =
      GraphCompiler().compile(m.graph, {{"x", {4, 3}}, {"target", {4, 2}}}, {loss, step});
  EXPECT_EQ(cg.read("W"), (std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}));
  const auto x = testing_util::random_vec(12, 4), t = testing_util::random_vec(8, 5);
  float first = 0, last = 0;
  for (int i = 0; i < 50; ++i) {
    cg.run({{"x", x}, {"target", t}});
    (i == 0 ? first : last) = cg.read(loss)[0];
  }
  EXPECT_LT(last, first * 0.5f);
}

// ---- float16 and bfloat16 (computed in float32, rounded where the model makes them) ----------

// Every float16 value survives the trip through its bits; every halfway point between two
// neighbours rounds to the one with the even last bit; past 65504 comes inf from 65520 on.
TEST(OnnxImport, Float16RoundingIsTheFormatsOnEveryValue) {
  using hetgraph::detail::float16_bits;
  using hetgraph::detail::float16_value;
  using hetgraph::detail::round_to_bfloat16;
  using hetgraph::detail::round_to_float16;
  int checked = 0;
  for (std::uint32_t h = 0; h < 0x7c00u; ++h) {  // the positive finite values
    const auto bits = static_cast<std::uint16_t>(h);
    const float v = float16_value(bits);
    ASSERT_EQ(round_to_float16(v), v) << h;
    ASSERT_EQ(float16_bits(v), bits) << h;
    ASSERT_EQ(float16_bits(-v), bits | 0x8000u) << h;
    if (h + 1 < 0x7c00u) {
      const float next = float16_value(static_cast<std::uint16_t>(h + 1));
      const float mid = v + (next - v) / 2;  // exact: one more bit than float16 has
      ASSERT_EQ(round_to_float16(mid), (h & 1u) ? next : v) << h;
      ASSERT_EQ(round_to_float16(std::nextafter(mid, 0.0f)), v) << h;
      ASSERT_EQ(round_to_float16(std::nextafter(mid, next)), next) << h;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 0x7c00 - 1);
  EXPECT_EQ(round_to_float16(65519.0f), 65504.0f);
  EXPECT_EQ(round_to_float16(65520.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(float16_bits(1e6f), 0x7c00u);
  EXPECT_TRUE(std::isnan(float16_value(float16_bits(std::nanf("")))));
  // bfloat16 keeps float32's upper half, halves to even.
  EXPECT_EQ(round_to_bfloat16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(round_to_bfloat16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(round_to_bfloat16(0.1f), 0.10009765625f);
}

// A float16 model: its input takes float16 values (what is fed is rounded), its float16
// initializer is a variable, arithmetic runs in float32, Cast rounds to float16 or bfloat16
// and back is exact; the output declared float16 is written as float16.
TEST(OnnxImport, Float16ModelsComputeInFloat32WithTheirTypesValues) {
  Builder b(13);
  b.input("x", {4}, 10).output("y", {4}, 10).output("f", {4}).output("bf", {4}, 16);
  auto* w = b.g->add_initializer();  // float16 [0.5, 3, -2, 1000] as bits
  w->set_name("w");
  w->set_data_type(10);
  w->add_dims(4);
  for (std::int32_t h : {0x3800, 0x4200, 0xc000, 0x63d0}) w->add_int32_data(h);
  b.node("Mul", {"x", "w"}, {"y"});
  Builder::attr(b.node("Cast", {"y"}, {"yf"}), "to", std::int64_t{1});
  b.node("Mul", {"yf", "yf"}, {"sq"});  // float: not rounded
  Builder::attr(b.node("Cast", {"sq"}, {"h"}), "to", std::int64_t{10});
  Builder::attr(b.node("Cast", {"h"}, {"f"}), "to", std::int64_t{1});
  Builder::attr(b.node("Cast", {"sq"}, {"bf"}), "to", std::int64_t{16});
  const ho::Model m = b.import();
  EXPECT_EQ(m.input_info[0].onnx_type, "float16");
  EXPECT_EQ(m.input_info[0].dtype, DType::f32);
  EXPECT_EQ(m.output_info[0].onnx_type, "float16");
  EXPECT_EQ(m.output_info[2].onnx_type, "bfloat16");
  ASSERT_EQ(m.variables.size(), 1u);
  const std::vector<float> x{0.1f, 1.0f / 3, 70.0f, 65.5f};
  const auto h = [](double v) { return hetgraph::detail::round_to_float16(static_cast<float>(v)); };
  const auto bh = [](double v) {
    return hetgraph::detail::round_to_bfloat16(static_cast<float>(v));
  };
  const std::vector<double> ww{0.5, 3, -2, 1000};
  std::vector<float> y, f, bf;
  for (std::size_t i = 0; i < 4; ++i) {
    const float p = h(x[i]) * static_cast<float>(ww[i]);  // fed values rounded; w exact
    y.push_back(p);
    f.push_back(h(static_cast<double>(p) * p));
    bf.push_back(bh(static_cast<double>(p) * p));
  }
  EXPECT_EQ(f[3], std::numeric_limits<float>::infinity());  // 65500^2: past float16
  EXPECT_NE(h(y[1]), y[1]);  // 1 - 2^-12: the float16 product computed in float32, unrounded
  run_everywhere(m, {{"x", x}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
    EXPECT_EQ(cg.read(mm.outputs[0]), y);
    EXPECT_EQ(cg.read(mm.outputs[1]), f);
    EXPECT_EQ(cg.read(mm.outputs[2]), bf);
  });
  // Written as float16 and read back: the same values.
  const auto dir = std::filesystem::temp_directory_path() / "hetgraph-float16-test";
  std::filesystem::create_directories(dir);
  ho::TensorData t;
  t.name = "y";
  t.onnx_type = "float16";
  t.shape = Shape{4};
  t.f32 = {0.1f, -65520.0f, 1e-7f, 2.0f};
  ho::write_tensor((dir / "y.pb").string(), t);
  const ho::TensorData back = ho::read_tensor((dir / "y.pb").string());
  EXPECT_EQ(back.onnx_type, "float16");
  EXPECT_EQ(back.f32,
            (std::vector<float>{h(0.1), -std::numeric_limits<float>::infinity(), h(1e-7), 2.0f}));
  std::filesystem::remove_all(dir);
}

// Model::compile with other shapes builds the graph again; the model's own handles (inputs,
// outputs, variables) still read the compiled graph, on every platform (issue 50: they threw
// "belongs to another graph"). A node of an unrelated graph still does.
TEST(OnnxImport, ModelHandlesReadAGraphCompiledForOtherShapes) {
  Builder b(17);
  b.input("x", {"N", 2}).output("y", {"N", 3});
  b.floats("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.node("MatMul", {"x", "w"}, {"y"});
  const ho::Model m = b.import({.input_shapes = {{"x", {1, 2}}}});
  ASSERT_EQ(m.variables.size(), 1u);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()), {{"x", {3, 2}}});
    cg.run({{"x", {1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f}}});
    EXPECT_EQ(cg.read(m.outputs[0]), (std::vector<float>{1, 2, 3, 4, 5, 6, 5, 7, 9}));
    EXPECT_EQ(cg.shape(m.outputs[0]), (Shape{3, 3}));
    EXPECT_EQ(cg.read(m.variables[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(cg.shape(m.inputs[0]), (Shape{3, 2}));
    Graph other;
    const Node stranger = other.input("x");
    EXPECT_THROW(cg.read(stranger), GraphError);
  }
}

// A model whose inputs declare symbolic dims runs from one DynamicGraph at any sizes: "N" and
// "T" from the feeds (the inputs agree on T), an unnamed dim as "<input>.<axis>"; each new set
// of sizes is imported and compiled once, and outputs are read by their ONNX names.
TEST(OnnxImport, DynamicDimsRunFromOneObject) {
  Builder b(17);
  b.input("a", {"N", "T"}).input("m", {"T"}).output("y", {"N", "T"});
  b.node("Add", {"a", "m"}, {"y"});
  const auto dir = std::filesystem::temp_directory_path() /
                   ("hetgraph-dynamic-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "add.onnx").string();
  std::ofstream(path, std::ios::binary) << b.bytes();
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    DynamicGraph dg = ho::dynamic(path, GraphCompiler(pc.make()));
    for (const int t : {3, 2, 3}) {
      const std::vector<float> a = testing_util::random_vec(static_cast<std::size_t>(2 * t), t);
      const std::vector<float> m = testing_util::random_vec(static_cast<std::size_t>(t), 9);
      dg.run({{"a", a}, {"m", m}});
      std::vector<float> want;
      for (std::size_t i = 0; i < a.size(); ++i) want.push_back(a[i] + m[i % m.size()]);
      EXPECT_EQ(dg.read("y"), want);
      EXPECT_EQ(dg.shape("y"), (Shape{2, t}));
      EXPECT_EQ(dg.dims(), (DimSizes{{"N", 2}, {"T", t}}));
    }
    EXPECT_EQ(dg.compiles(), 2u);
    EXPECT_THROW(dg.run({{"a", testing_util::random_vec(5, 1)}, {"m", {1.0f, 2.0f}}}), FeedError);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

namespace {

// ImportOptions::state: an input fed back from an output at every run (a decoder's key/value
// cache), held as a variable in the platform's memory.
TEST(OnnxImport, StateInputsTakeTheirOutputsAfterEveryRun) {
  Builder b(17);
  b.input("past", {2, 3}).input("x", {2, 3}).output("present", {2, 3}).output("twice", {2, 3});
  b.node("Add", {"past", "x"}, {"present"});
  b.node("Add", {"present", "present"}, {"twice"});
  ho::ImportOptions o;
  o.state = {{"past", "present"}};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    const ho::Model m = b.import(o);
    ASSERT_EQ(m.input_info.size(), 1u);  // past is not fed
    EXPECT_EQ(m.input_info[0].name, "x");
    ASSERT_EQ(m.state_updates.size(), 1u);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
    const std::vector<float> x{1, 2, 3, 4, 5, 6};
    for (int run = 1; run <= 3; ++run) {
      cg.run({{"x", x}});
      std::vector<float> want;
      for (float v : x) want.push_back(2 * v * static_cast<float>(run));
      EXPECT_EQ(cg.read("twice"), want);
    }
    std::vector<float> three;
    for (float v : x) three.push_back(3 * v);
    EXPECT_EQ(cg.read("past"), three);              // the state after three runs
    cg.write("past", std::vector<float>(6, 0.0f));  // reset
    cg.run({{"x", x}});
    EXPECT_EQ(cg.read("present"), x);
  }
  o.state = {{"x", "twice"}, {"past", "present"}, {"x", "present"}};
  using testing_util::expect_error;
  expect_error<ShapeError>([&] { (void)b.import(o); }, {"'x'", "twice"});
  o.state = {{"nope", "present"}};
  expect_error<ShapeError>([&] { (void)b.import(o); }, {"'nope'", "not an input"});
  o.state = {{"past", "nope"}};
  expect_error<ShapeError>([&] { (void)b.import(o); }, {"'nope'", "not an output"});
  Builder sum(17);
  sum.input("past", {2, 3}).output("total", {});
  Builder::attr(sum.node("ReduceSum", {"past"}, {"total"}), "keepdims", std::int64_t{0});
  o.state = {{"past", "total"}};
  expect_error<ShapeError>([&] { (void)sum.import(o); }, {"'past'", "[2, 3]", "'total'"});
}

}  // namespace
