// ONNX import and export: models built here with ONNX's own protobuf classes, errors for every
// kind of bad or unsupported model, shape computations folded away for the shapes given,
// batch norms folded into convolutions, fine-tuning an imported model, and graphs exported and
// imported back to the same outputs on every platform.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <thread>
#include <variant>

#include "common/executable.hpp"
#include "compiler/graph_impl.hpp"
#include "common/float16.hpp"
#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "onnx/ir.hpp"
#include "random_dag.hpp"
#include "test_util.hpp"

namespace {

using namespace hetgraph;
namespace ho = hetgraph::onnx;
namespace fs = std::filesystem;
using Dim = std::variant<std::int64_t, std::string>;

/// A model written with ONNX's protobuf classes.
struct Builder {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = m.mutable_graph();

  explicit Builder(int opset = 17) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g->set_name("test");
  }
  static void type(::onnx::ValueInfoProto* v, int elem, const std::vector<Dim>& dims, bool shaped) {
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    if (!shaped) return;
    auto* s = tt->mutable_shape();
    for (const Dim& d : dims) {
      auto* x = s->add_dim();
      if (std::holds_alternative<std::int64_t>(d))
        x->set_dim_value(std::get<std::int64_t>(d));
      else
        x->set_dim_param(std::get<std::string>(d));
    }
  }
  Builder& input(const std::string& name, std::vector<Dim> dims, int elem = 1) {
    auto* v = g->add_input();
    v->set_name(name);
    type(v, elem, dims, true);
    return *this;
  }
  Builder& output(const std::string& name, std::vector<Dim> dims, int elem = 1) {
    auto* v = g->add_output();
    v->set_name(name);
    type(v, elem, dims, true);
    return *this;
  }
  Builder& floats(const std::string& name, std::vector<std::int64_t> dims, std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(1);
    for (auto d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return *this;
  }
  Builder& ints(const std::string& name, std::vector<std::int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(7);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
    return *this;
  }
  Builder& int_tensor(const std::string& name, std::vector<std::int64_t> dims,
                      std::vector<std::int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(7);
    for (auto d : dims) t->add_dims(d);
    for (auto x : v) t->add_int64_data(x);
    return *this;
  }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_f(::onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  /// A body (If's branches, Loop's and Scan's body): the graph `body` built.
  static void attr_g(::onnx::NodeProto* n, const std::string& name, const Builder& body) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body.m.graph();
  }
  std::string bytes() const { return m.SerializeAsString(); }
  ho::Model import(const ho::ImportOptions& o = {}) const {
    const std::string b = bytes();
    return ho::import_bytes(std::as_bytes(std::span<const char>(b)), o, "test.onnx");
  }
};

/// The model exported (its graph, outputs and input shapes) and imported back.
ho::Model round_trip(const ho::Model& m) {
  const std::string bytes = ho::export_bytes(m.graph, m.outputs, m.input_shapes);
  return ho::import_bytes(std::as_bytes(std::span<const char>(bytes)), {}, "back.onnx");
}

/// Compiles m (and with `and_back` m exported and imported back) on every platform, runs it
/// with `feeds`, and hands the compiled graph and its model to `check`.
void run_everywhere(const ho::Model& m, const std::vector<FeedItem>& feeds, bool and_back,
                    const std::function<void(CompiledGraph&, const ho::Model&)>& check) {
  std::vector<ho::Model> models{m};
  if (and_back) models.push_back(round_trip(m));
  for (std::size_t k = 0; k < models.size(); ++k) {
    for (const auto& pc : testing_util::platforms()) {
      SCOPED_TRACE(pc.name + (k ? " (exported and imported back)" : ""));
      CompiledGraph cg = models[k].compile(GraphCompiler(pc.make()));
      cg.run(feeds);
      check(cg, models[k]);
    }
  }
}

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

#define EXPECT_CONTAINS(s, sub) EXPECT_NE(std::string(s).find(sub), std::string::npos) << (s)

/// The UnsupportedError importing `b` raises (with the input it needs, if any); a test failure
/// when it raises none.
ho::UnsupportedError unsupported_of(const Builder& b) {
  try {
    b.import();
  } catch (const ho::UnsupportedError& e) {
    return e;
  }
  ADD_FAILURE() << "imported without an UnsupportedError";
  return ho::UnsupportedError("");
}

/// A value given at import (ImportOptions::input_values): int32 words, or floats.
std::shared_ptr<ho::TensorData> given(const std::string& onnx_type, const Shape& shape,
                                      std::vector<std::int32_t> i32, std::vector<float> f32 = {}) {
  auto t = std::make_shared<ho::TensorData>();
  t->onnx_type = onnx_type;
  t->dtype = f32.empty() ? DType::i32 : DType::f32;
  t->shape = shape;
  t->i32 = std::move(i32);
  t->f32 = std::move(f32);
  return t;
}

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
  b.input("x", {4, 3}).output("i", {2, "n"}, 7).output("z", {4, 3});
  b.node("NonMaxSuppression", {"x", "x"}, {"i"});
  b.node("StringNormalizer", {"x"}, {"r"});
  b.node("Relu", {"r"}, {"z"});
  b.node("Unique", {"x"}, {"d"});
  const std::string what = error_of<ho::UnsupportedError>([&] { b.import(); });
  EXPECT_CONTAINS(what, "opset 17");
  EXPECT_CONTAINS(what, "NonMaxSuppression-11");
  EXPECT_CONTAINS(what, "StringNormalizer-10");
  EXPECT_CONTAINS(what, "Unique-11");
  EXPECT_EQ(what.find("Relu"), std::string::npos) << what;
}

TEST(OnnxImport, UnsupportedTypesRanksAndAttributesAreCleanErrors) {
  {
    Builder b;
    b.input("x", {1, 2, 3, 4, 5}).output("y", {1, 2, 3, 4, 5});
    b.node("Relu", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }), "rank 5");
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

// Pad moves data, so integer tensors pad too (int64 held as int32), in every mode; the
// constant is taken exactly.
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

// BatchNormalization in training mode (opset 15): normalised by the batch's statistics per
// channel (population variance), the running statistics moved towards them by momentum; against
// the formula in double, on every platform, and exported and imported back. The gradient of
// the summed output: the bias's is the count per channel, x's is 0 (a normalised channel sums
// to 0 whatever x is). Opset 9's training outputs stay unsupported.
TEST(OnnxImport, BatchNormTrainingModeUsesTheBatchStatistics) {
  Builder b(15);
  b.input("x", {2, 2, 1, 3}).output("y", {2, 2, 1, 3}).output("rm", {2}).output("rv", {2});
  b.floats("scale", {2}, {1.5f, -0.5f}).floats("bias", {2}, {0.25f, 2.0f});
  b.floats("mean", {2}, {0.5f, -1.0f}).floats("var", {2}, {2.0f, 0.5f});
  auto* n = b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm", "rv"});
  Builder::attr(n, "training_mode", std::int64_t{1});
  Builder::attr_f(n, "epsilon", 1e-2f);
  Builder::attr_f(n, "momentum", 0.75f);
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const std::vector<float> x{1, 2, 6, -1, 0, 4, 3, 3, 0, 2, 5, -2};
  const double scale[2] = {1.5, -0.5}, bias[2] = {0.25, 2.0}, mean0[2] = {0.5, -1.0},
               var0[2] = {2.0, 0.5};
  std::vector<float> want_y(12), want_rm(2), want_rv(2);
  for (std::size_t ch = 0; ch < 2; ++ch) {
    double mu = 0, v = 0;
    for (std::size_t nn = 0; nn < 2; ++nn)
      for (std::size_t w = 0; w < 3; ++w) mu += x[nn * 6 + ch * 3 + w] / 6.0;
    for (std::size_t nn = 0; nn < 2; ++nn)
      for (std::size_t w = 0; w < 3; ++w) v += std::pow(x[nn * 6 + ch * 3 + w] - mu, 2) / 6.0;
    for (std::size_t nn = 0; nn < 2; ++nn)
      for (std::size_t w = 0; w < 3; ++w) {
        const std::size_t at = nn * 6 + ch * 3 + w;
        want_y[at] = static_cast<float>((x[at] - mu) / std::sqrt(v + 1e-2) * scale[ch] + bias[ch]);
      }
    want_rm[ch] = static_cast<float>(mean0[ch] * 0.75 + mu * 0.25);
    want_rv[ch] = static_cast<float>(var0[ch] * 0.75 + v * 0.25);
  }
  const auto near = [](const std::vector<float>& got, const std::vector<float>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], tol) << k;
  };
  // variables: the initializers in order (scale, bias, mean, var)
  ASSERT_EQ(m.variables.size(), 4u);
  const std::vector<Node> d = gradients(reduce_sum(m.outputs[0]), {m.variables[1], m.inputs[0]});
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}});
      near(cg.read(model->outputs[0]), want_y, 1e-5);
      near(cg.read(model->outputs[1]), want_rm, 1e-6);
      near(cg.read(model->outputs[2]), want_rv, 1e-5);
    }
    CompiledGraph cg = GraphCompiler(pc.make()).compile(m.graph, m.input_shapes, d);
    cg.run({{"x", x}});
    EXPECT_EQ(cg.read(d[0]), (std::vector<float>{6, 6}));
    near(cg.read(d[1]), std::vector<float>(12, 0.0f), 1e-5);
  }
  Builder old(9);
  old.input("x", {2, 2, 1, 3}).output("y", {2, 2, 1, 3});
  for (const char* o : {"rm", "rv", "sm", "sv"}) old.output(o, {2});
  old.floats("scale", {2}, {1, 1}).floats("bias", {2}, {0, 0});
  old.floats("mean", {2}, {0, 0}).floats("var", {2}, {1, 1});
  old.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"},
           {"y", "rm", "rv", "sm", "sv"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { old.import(); }), "training mode");
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

// MaxPool's Indices (opset 12): the flat position in x of each window's maximum, the first in
// window order (ties, a NaN, windows in the padding), row-major or (storage_order 1) column-major
// over the image, 2-d and 1-d; MaxUnpool scatters the maxima back (a larger output_shape pads at
// the end). Against a direct reference on every platform, exported and imported back. Fed
// positions outside the unpooled shape are FeedErrors.
TEST(OnnxImport, MaxPoolIndicesAndMaxUnpool) {
  Builder b(12);
  b.input("x", {2, 2, 3, 4}).input("v", {1, 2, 5}).input("z", {1, 1, 4, 4});
  b.output("y", {2, 2, 2, 2}).output("i", {2, 2, 2, 2}, 7).output("ic", {2, 2, 2, 2}, 7);
  b.output("vi", {1, 2, 2}, 7).output("u", {1, 1, 5, 6});
  b.int_tensor("shape", {4}, {1, 1, 5, 6});
  for (int order : {0, 1}) {
    auto* n = b.node("MaxPool", {"x"}, {order == 0 ? "y" : "yc", order == 0 ? "i" : "ic"});
    Builder::attr(n, "kernel_shape", std::vector<std::int64_t>{3, 3});
    Builder::attr(n, "strides", std::vector<std::int64_t>{2, 2});
    Builder::attr(n, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
    Builder::attr(n, "storage_order", std::int64_t{order});
  }
  auto* n1 = b.node("MaxPool", {"v"}, {"vy", "vi"});
  Builder::attr(n1, "kernel_shape", std::vector<std::int64_t>{2});
  Builder::attr(n1, "strides", std::vector<std::int64_t>{2});
  // z pooled 2 x 2 and unpooled into the 4 x 4 it came from, padded at the end to 5 x 6 (the
  // output_shape input, as ONNX's reference pads).
  for (const char* op : {"MaxPool", "MaxUnpool"}) {
    auto* n = std::string(op) == "MaxPool" ? b.node(op, {"z"}, {"zy", "zi"})
                                           : b.node(op, {"zy", "zi", "shape"}, {"u"});
    Builder::attr(n, "kernel_shape", std::vector<std::int64_t>{2, 2});
    Builder::attr(n, "strides", std::vector<std::int64_t>{2, 2});
  }
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  // Ties (3s), a NaN after a larger value, a plane of -inf.
  std::vector<float> x(48), v{1, 7, 7, 2, 5, -1, -3, -3, 0, 9}, z(16);
  for (std::size_t k = 0; k < 16; ++k) z[k] = static_cast<float>((k * 11) % 7);
  for (std::size_t k = 0; k < 48; ++k) x[k] = static_cast<float>((k * 7) % 5);
  x[6] = NAN;
  for (std::size_t k = 36; k < 48; ++k) x[k] = -INFINITY;
  // The reference: taps in window order, the first maximum, a NaN beating any number.
  std::vector<float> want_y, want_u(30, 0.0f);
  std::vector<std::int32_t> want_i, want_ic, want_vi;
  for (std::size_t q = 0; q < 4; ++q) {
    for (int oh = 0; oh < 2; ++oh) {
      for (int ow = 0; ow < 2; ++ow) {
        int bh = -1, bw = -1;
        float best = 0;
        for (int kh = 0; kh < 3; ++kh) {
          for (int kw = 0; kw < 3; ++kw) {
            const int h = oh * 2 - 1 + kh, w = ow * 2 - 1 + kw;
            if (h < 0 || h >= 3 || w < 0 || w >= 4) continue;
            const float val = x[q * 12 + static_cast<std::size_t>(h * 4 + w)];
            if (bh < 0 || (std::isnan(val) && !std::isnan(best)) ||
                (!std::isnan(best) && val > best)) {
              best = val;
              bh = h;
              bw = w;
            }
          }
        }
        want_y.push_back(best);
        want_i.push_back(static_cast<std::int32_t>(q * 12) + bh * 4 + bw);
        want_ic.push_back(static_cast<std::int32_t>(q * 12) + bh + bw * 3);
      }
    }
  }
  for (std::size_t q = 0; q < 2; ++q) {
    for (std::size_t o = 0; o < 2; ++o) {
      const std::size_t a = q * 5 + 2 * o;
      want_vi.push_back(static_cast<std::int32_t>(v[a + 1] > v[a] ? a + 1 : a));
    }
  }
  for (std::size_t oh = 0; oh < 2; ++oh) {
    for (std::size_t ow = 0; ow < 2; ++ow) {
      std::size_t best = oh * 8 + ow * 2;
      for (std::size_t t : {oh * 8 + ow * 2 + 1, oh * 8 + ow * 2 + 4, oh * 8 + ow * 2 + 5})
        if (z[t] > z[best]) best = t;
      want_u[(best / 4) * 6 + best % 4] = z[best];
    }
  }
  const auto same = [](const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      if (std::isnan(want[k])) {
        EXPECT_TRUE(std::isnan(got[k])) << k;
      } else {
        EXPECT_EQ(got[k], want[k]) << k;
      }
    }
  };
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"v", v}, {"z", z}});
      same(cg.read(model->outputs[0]), want_y);
      EXPECT_EQ(cg.read_i32(model->outputs[1]), want_i);
      EXPECT_EQ(cg.read_i32(model->outputs[2]), want_ic);
      EXPECT_EQ(cg.read_i32(model->outputs[3]), want_vi);
      EXPECT_EQ(cg.read(model->outputs[4]), want_u);
    }
  }
  // MaxUnpool with fed positions: in range they land (the default output shape: 4 x 4); 16 and
  // -1 are FeedErrors naming the node.
  Builder fed(11);
  fed.input("y", {1, 1, 2, 2}).input("i", {1, 1, 2, 2}, 7).output("u", {1, 1, 4, 4});
  auto* fu = fed.node("MaxUnpool", {"y", "i"}, {"u"});
  fu->set_name("unpool");
  Builder::attr(fu, "kernel_shape", std::vector<std::int64_t>{2, 2});
  Builder::attr(fu, "strides", std::vector<std::int64_t>{2, 2});
  ho::Model mf = fed.import();
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = mf.compile(GraphCompiler(pc.make()));
    cg.run({{"y", std::vector<float>{1, 2, 3, 4}}, {"i", std::vector<std::int32_t>{5, 2, 8, 15}}});
    std::vector<float> want(16, 0.0f);
    want[5] = 1;
    want[2] = 2;
    want[8] = 3;
    want[15] = 4;
    EXPECT_EQ(cg.read(mf.outputs[0]), want);
    for (std::int32_t bad : {16, -1}) {
      const std::string e = error_of<FeedError>([&] {
        cg.run({{"y", std::vector<float>{1, 2, 3, 4}},
                {"i", std::vector<std::int32_t>{0, bad, 1, 2}}});
      });
      EXPECT_CONTAINS(e, "unpool/MaxUnpool/indices");
    }
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

// A reference einsum over explicit letters ("ij,jk->ik"; no "..."): every assignment of the
// letters, in double.
std::vector<float> reference_einsum(const std::string& eq,
                                    const std::vector<std::vector<std::int64_t>>& dims,
                                    const std::vector<std::vector<float>>& in) {
  const auto arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  for (std::size_t from = 0, at;; from = at + 1) {
    at = lhs.find(',', from);
    terms.push_back(lhs.substr(from, at == std::string::npos ? at : at - from));
    if (at == std::string::npos) break;
  }
  std::map<char, std::int64_t> size;
  for (std::size_t t = 0; t < terms.size(); ++t)
    for (std::size_t a = 0; a < terms[t].size(); ++a) size[terms[t][a]] = dims[t][a];
  std::string all;
  for (const auto& [ch, n] : size) all += ch;
  std::int64_t out_n = 1;
  for (char ch : out) out_n *= size[ch];
  std::vector<double> acc(static_cast<std::size_t>(out_n), 0.0);
  std::map<char, std::int64_t> at;
  const auto flat = [&](const std::string& letters) {
    std::int64_t f = 0;
    for (char ch : letters) f = f * size[ch] + at[ch];
    return static_cast<std::size_t>(f);
  };
  std::function<void(std::size_t)> walk = [&](std::size_t k) {
    if (k == all.size()) {
      double p = 1;
      for (std::size_t t = 0; t < terms.size(); ++t) p *= in[t][flat(terms[t])];
      acc[flat(out)] += p;
      return;
    }
    for (at[all[k]] = 0; at[all[k]] < size[all[k]]; ++at[all[k]]) walk(k + 1);
  };
  walk(0);
  return std::vector<float>(acc.begin(), acc.end());
}

// Einsum (opset 12): products, batched products, traces of a product, sums, transposes, three
// operands, "..." and the implicit output, against the reference on every platform and after
// export and import back; a diagonal and broadcasting dims are UnsupportedErrors, a term that
// does not fit its input a ShapeError.
TEST(OnnxImport, EinsumContractsPairwise) {
  struct Case {
    std::string eq, ref;  // ref: the same with "..." and the output spelled out
    std::vector<std::vector<std::int64_t>> dims;
  };
  const std::vector<Case> cases{
      {"ij,jk->ik", "ij,jk->ik", {{2, 3}, {3, 4}}},
      {"bij,bjk->bik", "bij,bjk->bik", {{2, 2, 3}, {2, 3, 2}}},
      {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 2, 4}}},
      {"i,i->", "i,i->", {{5}, {5}}},
      {"ij->ji", "ij->ji", {{2, 3}}},
      {"ijk->", "ijk->", {{2, 3, 2}}},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 2}, {2, 4}}},
      {"ij,jk", "ij,jk->ik", {{3, 2}, {2, 2}}},
      {"...ij,...jk->...ik", "aij,ajk->aik", {{2, 2, 3}, {2, 3, 2}}},
      {"b i, b j -> b i j", "bi,bj->bij", {{2, 3}, {2, 2}}},
      {"ik,jk->", "ik,jk->", {{2, 3}, {4, 3}}},
  };
  std::uint32_t seed = 40;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.eq);
    Builder b(12);
    std::vector<std::string> names;
    std::vector<std::vector<float>> values;
    for (std::size_t i = 0; i < k.dims.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      std::vector<Dim> d(k.dims[i].begin(), k.dims[i].end());
      b.input(names.back(), d);
      std::int64_t n = 1;
      for (std::int64_t v : k.dims[i]) n *= v;
      std::vector<float> v(static_cast<std::size_t>(n));
      for (float& f : v) f = static_cast<float>(++seed % 7) * 0.5f - 1.5f;
      values.push_back(std::move(v));
    }
    const std::vector<float> want = reference_einsum(k.ref, k.dims, values);
    std::vector<std::int64_t> out_dims;
    const std::string out = k.ref.substr(k.ref.find("->") + 2);
    for (char ch : out) {
      for (std::size_t t = 0; t < k.dims.size(); ++t) {
        const std::string term = k.ref.substr(0, k.ref.find("->"));
        std::size_t start = 0;
        for (std::size_t u = 0; u < t; ++u) start = term.find(',', start) + 1;
        const std::size_t pos = term.find(ch, start);
        const std::size_t end = term.find(',', start);
        if (pos != std::string::npos && (end == std::string::npos || pos < end)) {
          out_dims.push_back(k.dims[t][pos - start]);
          break;
        }
      }
    }
    b.output("y", std::vector<Dim>(out_dims.begin(), out_dims.end()));
    Builder::attr(b.node("Einsum", names, {"y"}), "equation", k.eq);
    ho::Model m = b.import();
    ho::Model back = round_trip(m);
    for (const auto& pc : testing_util::platforms()) {
      SCOPED_TRACE(pc.name);
      for (ho::Model* model : {&m, &back}) {
        CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
        std::vector<FeedItem> feeds;
        for (std::size_t i = 0; i < names.size(); ++i) feeds.push_back({names[i], values[i]});
        cg.run(feeds);
        const std::vector<float> got = cg.read(model->outputs[0]);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t e = 0; e < got.size(); ++e) EXPECT_NEAR(got[e], want[e], 1e-5) << e;
      }
    }
  }
  const auto refused = [](const std::string& eq, std::vector<std::vector<Dim>> dims) {
    Builder b(12);
    std::vector<std::string> names;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      b.input(names.back(), dims[i]);
    }
    b.output("y", {});
    Builder::attr(b.node("Einsum", names, {"y"}), "equation", eq);
    return [b]() mutable { b.import(); };
  };
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>(refused("ii->i", {{3, 3}})), "diagonal");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>(refused("ij,ij->", {{3, 1}, {3, 4}})),
                  "broadcast");
  EXPECT_CONTAINS(error_of<ShapeError>(refused("ijk,jk->", {{3, 4}, {4, 2}})), "does not fit");
}

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

// ---- control flow: If, Loop and Scan, unrolled at import ------------------------------------

// A bool or int64 scalar initializer.
void scalar_init(Builder& b, const std::string& name, int elem, std::int64_t v) {
  auto* t = b.g->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  if (elem == 9)
    t->add_int32_data(static_cast<std::int32_t>(v));
  else
    t->add_int64_data(v);
}

// If's condition from the input's shape (folded at import): a batch of 3 takes one branch, a
// batch of 2 the other; a condition fed as a model input is asked for by name.
TEST(OnnxImport, IfTakesTheBranchItsConditionPicksAtImport) {
  Builder then_b, else_b;
  then_b.output("t", {"n", 4});
  then_b.node("Relu", {"x"}, {"t"});  // reads x of the graph around it
  else_b.output("e", {"n", 4});
  else_b.node("Neg", {"x"}, {"e"});
  Builder b(16);
  b.input("x", {"n", 4}).output("y", {"n", 4});
  scalar_init(b, "zero", 7, 0);
  scalar_init(b, "two", 7, 2);
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"rows"});
  b.node("Greater", {"rows", "two"}, {"big"});
  auto* n = b.node("If", {"big"}, {"y"});
  Builder::attr_g(n, "then_branch", then_b);
  Builder::attr_g(n, "else_branch", else_b);
  for (std::int64_t rows : {3, 2}) {
    SCOPED_TRACE(rows);
    ho::ImportOptions o;
    o.input_shapes = {{"x", Shape{rows, 4}}};
    const ho::Model m = b.import(o);
    std::vector<float> x(static_cast<std::size_t>(rows * 4)), want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(i) * 0.5f - 2.0f;
      want[i] = rows > 2 ? std::max(x[i], 0.0f) : -x[i];
    }
    run_everywhere(m, {{"x", x}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
      EXPECT_EQ(cg.read(mm.outputs[0]), want);
    });
  }
  // The condition as a model input: named, and taken once given.
  Builder c(16);
  c.input("x", {2, 4}).input("c", {}, 9).output("y", {2, 4});
  auto* ci = c.node("If", {"c"}, {"y"});
  Builder::attr_g(ci, "then_branch", then_b);
  Builder::attr_g(ci, "else_branch", else_b);
  const ho::UnsupportedError e = unsupported_of(c);
  EXPECT_EQ(e.input_needed(), "c");
  EXPECT_CONTAINS(e.what(), "#0 (If-16): input 0 ('c', the condition");
  ho::ImportOptions o;
  o.input_values = {{"c", given("bool", Shape{}, {0})}};
  const ho::Model m = c.import(o);
  CompiledGraph cg = m.compile(GraphCompiler());
  cg.run({{"x", std::vector<float>{1, -2, 3, -4, 5, -6, 7, -8}}});
  EXPECT_EQ(cg.read(m.outputs[0]), (std::vector<float>{-1, 2, -3, 4, -5, 6, -7, 8}));
}

// Loop of 3 iterations: h = h * W + i, W a trainable initializer of the graph around the body
// (one variable, however many iterations read it), each h stacked as a scan output; on every
// platform, and exported and imported back.
TEST(OnnxImport, LoopUnrollsCarriedValuesAndScanOutputs) {
  Builder body;
  body.input("i", {}, 7).input("cond_in", {}, 9).input("h_in", {2});
  body.output("cond_out", {}, 9).output("h_out", {2}).output("h_scan", {2});
  auto* cast = body.node("Cast", {"i"}, {"i_f"});
  Builder::attr(cast, "to", std::int64_t{1});
  body.node("Mul", {"h_in", "W"}, {"hw"});
  body.node("Add", {"hw", "i_f"}, {"h_out"});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.node("Identity", {"h_out"}, {"h_scan"});
  Builder b(16);
  b.input("x", {2}).output("h", {2}).output("hs", {3, 2});
  b.floats("W", {2}, {0.5f, -1.0f});
  scalar_init(b, "M", 7, 3);
  Builder::attr_g(b.node("Loop", {"M", "", "x"}, {"h", "hs"}), "body", body);
  const ho::Model m = b.import();
  ASSERT_EQ(m.variables.size(), 1u);
  EXPECT_EQ(m.variables[0].name(), "W");
  const std::vector<float> x{2.0f, 3.0f}, w{0.5f, -1.0f};
  std::vector<float> h = x, hs;
  for (int i = 0; i < 3; ++i) {
    for (std::size_t k = 0; k < 2; ++k) h[k] = h[k] * w[k] + static_cast<float>(i);
    hs.insert(hs.end(), h.begin(), h.end());
  }
  run_everywhere(m, {{"x", x}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
    EXPECT_EQ(cg.read(mm.outputs[0]), h);
    EXPECT_EQ(cg.read(mm.outputs[1]), hs);
  });
}

// An If inside a Loop's body: its condition from the iteration number, its branches reading the
// body's carried value and the outer graph's input (names resolve scope by scope, and a
// branch's names come and go each iteration): h = (h0 + x) * 2 * 2.
TEST(OnnxImport, IfInsideALoopSeesEveryEnclosingScope) {
  Builder then_b, else_b;
  then_b.output("t", {2});
  then_b.node("Add", {"h_in", "x"}, {"t"});
  else_b.output("t2", {2});
  else_b.node("Mul", {"h_in", "two"}, {"t2"});
  Builder body;
  body.input("i", {}, 7).input("c", {}, 9).input("h_in", {2});
  body.output("c_out", {}, 9).output("h_out", {2});
  body.node("Identity", {"c"}, {"c_out"});
  body.node("Less", {"i", "one"}, {"first"});
  auto* n = body.node("If", {"first"}, {"h_out"});
  Builder::attr_g(n, "then_branch", then_b);
  Builder::attr_g(n, "else_branch", else_b);
  Builder b(16);
  b.input("x", {2}).input("h0", {2}).output("h", {2});
  b.floats("two", {}, {2.0f});
  scalar_init(b, "one", 7, 1);
  scalar_init(b, "M", 7, 3);
  Builder::attr_g(b.node("Loop", {"M", "", "h0"}, {"h"}), "body", body);
  const ho::Model m = b.import();
  run_everywhere(m, {{"x", std::vector<float>{1, 2}}, {"h0", std::vector<float>{10, -5}}}, false,
                 [&](CompiledGraph& cg, const ho::Model&) {
                   EXPECT_EQ(cg.read(m.outputs[0]), (std::vector<float>{44, -12}));
                 });
}

// A loop ended by the condition its body computes from the iteration number (i < 2: three
// iterations), and the errors: a condition computed at run time, a trip count beyond what is
// unrolled, a body of the wrong arity, and a shape error inside a body, each naming the node.
TEST(OnnxImport, LoopConditionsAndErrorsNameTheNode) {
  const auto model = [](const std::string& cond_from, std::int64_t trip, bool extra_input,
                        std::int64_t zero_trip = -1) {
    Builder body;
    body.input("i", {}, 7).input("cond_in", {}, 9).input("y_in", {2});
    if (extra_input) body.input("junk", {2});
    body.output("cond_out", {}, 9).output("y_out", {2}).output("y_scan", {2});
    body.node("Add", {"y_in", "one"}, {"y_out"});
    if (cond_from == "i") {
      body.node("Less", {"i", "two"}, {"cond_out"});
    } else {
      body.node("ReduceSum", {"y_in"}, {"total"});
      body.node("Greater", {"total", "zero_f"}, {"cond_out"});
    }
    body.node("Identity", {"y_out"}, {"y_scan"});
    Builder b(11);
    b.input("x", {2}).output("y", {2}).output("ys", {3, 2});
    b.floats("one", {}, {1.0f}).floats("zero_f", {}, {0.0f});
    scalar_init(b, "two", 7, 2);
    scalar_init(b, "yes", 9, 1);
    std::vector<std::string> ins{"", "yes", "x"};
    if (trip > 0 || zero_trip == 0) {
      scalar_init(b, "M", 7, trip);
      ins[0] = "M";
    }
    Builder::attr_g(b.node("Loop", ins, {"y", "ys"}), "body", body);
    return b;
  };
  const ho::Model m = model("i", 0, false).import();
  run_everywhere(m, {{"x", std::vector<float>{1, -1}}}, false,
                 [&](CompiledGraph& cg, const ho::Model&) {
                   EXPECT_EQ(cg.read(m.outputs[0]), (std::vector<float>{4, 2}));
                   EXPECT_EQ(cg.read(m.outputs[1]), (std::vector<float>{2, 0, 3, 1, 4, 2}));
                 });
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { model("sum", 0, false).import(); }),
                  "#0 (Loop-11): the condition its body gives in iteration 0 is computed at run "
                  "time");
  EXPECT_CONTAINS(
      error_of<ho::UnsupportedError>([&] { model("i", std::int64_t{1} << 40, false).import(); }),
      "#0 (Loop-11): a loop of 1099511627776 iterations");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    ho::ImportOptions o;
                    o.check = false;  // the checker would refuse it first
                    model("i", 0, true).import(o);
                  }),
                  "#0 (Loop-11): the body takes 4 inputs");
  // No iteration: the scan output would be empty (fuzzing found Scan-8 reading past an empty
  // list of iterations here).
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { model("i", 0, false, 0).import(); }),
                  "#0 (Loop-11): scan output 0 stacks no iteration");
  // A body whose Add does not broadcast: the error names the body's node inside the Loop.
  Builder body;
  body.input("i", {}, 7).input("c", {}, 9).input("y_in", {2});
  body.output("c_out", {}, 9).output("y_out", {2});
  body.node("Identity", {"c"}, {"c_out"});
  body.node("Add", {"y_in", "three"}, {"y_out"});
  Builder b(11);
  b.input("x", {2}).output("y", {2});
  b.floats("three", {3}, {1, 2, 3});
  scalar_init(b, "M", 7, 2);
  Builder::attr_g(b.node("Loop", {"M", "", "x"}, {"y"}), "body", body);
  ho::ImportOptions o;
  o.check = false;
  EXPECT_CONTAINS(error_of<ShapeError>([&] { b.import(o); }), "#0 (Loop-11) body: #1 (Add-7)");
}

// Scan (opset 16) over two inputs, one along axis 0 forwards and one along axis 1 backwards,
// its scan output stacked along axis 1 in reverse, against the same walk on the host.
TEST(OnnxImport, ScanWalksItsInputsInTheirDirections) {
  Builder body;
  body.input("s_in", {2}).input("a_t", {2}).input("b_t", {2});
  body.output("s_out", {2}).output("o", {2});
  body.node("Mul", {"a_t", "b_t"}, {"ab"});
  body.node("Add", {"s_in", "ab"}, {"s_out"});
  body.node("Identity", {"s_out"}, {"o"});
  Builder b(16);
  b.input("s", {2}).input("a", {3, 2}).input("bt", {2, 3}).output("fin", {2}).output("os", {2, 3});
  auto* n = b.node("Scan", {"s", "a", "bt"}, {"fin", "os"});
  Builder::attr_g(n, "body", body);
  Builder::attr(n, "num_scan_inputs", std::int64_t{2});
  Builder::attr(n, "scan_input_axes", std::vector<std::int64_t>{0, 1});
  Builder::attr(n, "scan_input_directions", std::vector<std::int64_t>{0, 1});
  Builder::attr(n, "scan_output_axes", std::vector<std::int64_t>{1});
  Builder::attr(n, "scan_output_directions", std::vector<std::int64_t>{1});
  const std::vector<float> s{1, 2}, a{1, 2, 3, 4, 5, 6}, bt{1, -1, 2, 0.5f, 3, -2};
  std::vector<float> st = s, os(6);
  for (int t = 0; t < 3; ++t) {
    for (int k = 0; k < 2; ++k) {
      st[k] += a[t * 2 + k] * bt[k * 3 + (2 - t)];
      os[k * 3 + (2 - t)] = st[k];  // axis 1, in reverse order
    }
  }
  const ho::Model m = b.import();
  run_everywhere(m, {{"s", s}, {"a", a}, {"bt", bt}}, true,
                 [&](CompiledGraph& cg, const ho::Model& mm) {
                   EXPECT_EQ(cg.read(mm.outputs[0]), st);
                   EXPECT_EQ(cg.read(mm.outputs[1]), os);
                 });
  // Scan inputs of length 0: no iteration, so the scan output would be empty (fuzzing found
  // this reading past the empty list of iterations).
  Builder e(16);
  e.input("s", {2}).input("a", {0, 2}).output("fin", {2}).output("os", {0, 2});
  auto* ne = e.node("Scan", {"s", "a"}, {"fin", "os"});
  Builder one;
  one.input("s_in", {2}).input("a_t", {2});
  one.output("s_out", {2}).output("o", {2});
  one.node("Add", {"s_in", "a_t"}, {"s_out"});
  one.node("Identity", {"s_out"}, {"o"});
  Builder::attr_g(ne, "body", one);
  Builder::attr(ne, "num_scan_inputs", std::int64_t{1});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { e.import(); }),
                  "#0 (Scan-16): scan output 0 stacks no iteration");
}

// Sequences are lists known at import: every sequence op over run-time tensors, on every
// platform and exported and imported back (where no sequence is left); a position outside the
// sequence and a sequence where a tensor is needed are errors naming the node.
TEST(OnnxImport, SequencesAreListsKnownAtImport) {
  Builder b(13);
  b.input("X", {2, 3}).input("Y", {1, 3});
  b.output("len", {}, 7).output("cat", {3, 3}).output("st", {2, 2, 3}).output("at", {2, 2});
  b.output("at2", {1, 3});
  scalar_init(b, "zero", 7, 0);
  scalar_init(b, "last", 7, -1);
  b.ints("split", {1, 2});
  b.node("SequenceEmpty", {}, {"s0"});
  b.node("SequenceInsert", {"s0", "X"}, {"s1"});
  b.node("SequenceInsert", {"s1", "Y", "zero"}, {"s2"});  // [Y, X]
  Builder::attr(b.node("SplitToSequence", {"X", "split"}, {"s3"}), "axis", std::int64_t{1});
  b.node("SequenceLength", {"s3"}, {"len"});
  Builder::attr(b.node("ConcatFromSequence", {"s2"}, {"cat"}), "axis", std::int64_t{0});
  b.node("SequenceConstruct", {"X", "X"}, {"s4"});
  auto* st = b.node("ConcatFromSequence", {"s4"}, {"st"});  // stacked along a new axis 1
  Builder::attr(st, "axis", std::int64_t{1});
  Builder::attr(st, "new_axis", std::int64_t{1});
  b.node("SequenceAt", {"s3", "last"}, {"at"});
  b.node("SequenceErase", {"s2"}, {"s5"});  // [Y]
  b.node("SequenceAt", {"s5", "zero"}, {"at2"});
  const std::vector<float> x{1, 2, 3, 4, 5, 6}, y{7, 8, 9};
  const ho::Model m = b.import();
  run_everywhere(m, {{"X", x}, {"Y", y}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
    EXPECT_EQ(cg.read_i32(mm.outputs[0]), (std::vector<std::int32_t>{2}));
    EXPECT_EQ(cg.read(mm.outputs[1]), (std::vector<float>{7, 8, 9, 1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(cg.read(mm.outputs[2]), (std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
    EXPECT_EQ(cg.read(mm.outputs[3]), (std::vector<float>{2, 3, 5, 6}));
    EXPECT_EQ(cg.read(mm.outputs[4]), y);
  });
  Builder bad(13);
  bad.input("X", {2, 3}).output("a", {2, 3});
  scalar_init(bad, "two", 7, 2);
  bad.node("SequenceConstruct", {"X", "X"}, {"s"});
  bad.node("SequenceAt", {"s", "two"}, {"a"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad.import(); }),
                  "#1 (SequenceAt-11): position 2 is outside a sequence of 2");
  Builder as_tensor(13);
  as_tensor.input("X", {2, 3}).output("r", {2, 3});
  as_tensor.node("SequenceConstruct", {"X"}, {"s"});
  as_tensor.node("Relu", {"s"}, {"r"});
  ho::ImportOptions o;
  o.check = false;  // (the checker would refuse the types first)
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { as_tensor.import(o); }),
                  "#1 (Relu-13): 's' is a sequence, where a tensor is needed");
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

// Det of a [2, 3, 4, 4] batch: random matrices, one needing a row swap first (a zero at [0, 0]),
// one singular (two equal rows: 0); against a determinant by cofactors in double.
TEST(OnnxImport, DetPivotsAndFindsSingularMatrices) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(6 * 16);
  for (auto& v : x) v = u(rng);
  x[16] = 0.0f;  // matrix 1: pivot first
  for (int j = 0; j < 4; ++j) x[2 * 16 + 3 * 4 + j] = x[2 * 16 + 1 * 4 + j];  // matrix 2: singular
  std::function<double(const std::vector<double>&, int)> cofactor =
      [&](const std::vector<double>& m, int n) -> double {
    if (n == 1) return m[0];
    double r = 0;
    for (int j = 0; j < n; ++j) {
      std::vector<double> minor;
      for (int i = 1; i < n; ++i)
        for (int k = 0; k < n; ++k)
          if (k != j) minor.push_back(m[static_cast<std::size_t>(i * n + k)]);
      r += (j % 2 ? -1 : 1) * m[static_cast<std::size_t>(j)] * cofactor(minor, n - 1);
    }
    return r;
  };
  std::vector<double> want;
  for (int b = 0; b < 6; ++b)
    want.push_back(cofactor(std::vector<double>(x.begin() + b * 16, x.begin() + b * 16 + 16), 4));
  Builder bd(11);
  bd.input("x", {2, 3, 4, 4}).output("d", {2, 3});
  bd.node("Det", {"x"}, {"d"});
  const ho::Model m = bd.import();
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
    cg.run({{"x", x}});
    const auto got = cg.read(m.outputs[0]);
    ASSERT_EQ(got.size(), 6u);
    for (std::size_t k = 0; k < 6; ++k)
      EXPECT_NEAR(got[k], want[k], 1e-4 * (1 + std::abs(want[k]))) << k;
    EXPECT_EQ(got[2], 0.0f);  // exactly: the elimination leaves a zero row
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
  // A scalar B (the fuzzer's; reading its last dim was undefined behaviour).
  Builder s(10);
  s.input("a", {2, 3}, 2).input("b", {}, 2).output("y", {2}, 6);
  s.node("MatMulInteger", {"a", "b"}, {"y"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { s.import(o); }),
                  "an integer product of [2, 3] and []");
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

// Gradient (ai.onnx.preview.training) by hetgraph's autodiff: y = sum(x * x * W), W [3]
// broadcast over x's rows; dy/dx = 2 x W, dy/dW = the column sums of x * x; a y of several
// elements is summed first. On every platform, and exported (the seed and the sum back to W's
// shape have ONNX forms) and imported back.
TEST(OnnxImport, GradientDifferentiatesByAutodiff) {
  Builder b(17);
  auto* o = b.m.add_opset_import();
  o->set_domain("ai.onnx.preview.training");
  o->set_version(1);
  b.input("x", {2, 3}).output("y", {}).output("dx", {2, 3}).output("dW", {3});
  b.output("dsq", {2, 3});
  b.floats("W", {3}, {0.5f, -1.0f, 2.0f});
  b.node("Mul", {"x", "x"}, {"sq"});
  b.node("Mul", {"sq", "W"}, {"p"});
  Builder::attr(b.node("ReduceSum", {"p"}, {"y"}), "keepdims", std::int64_t{0});
  auto* g = b.node("Gradient", {"x", "W"}, {"dx", "dW"});
  g->set_domain("ai.onnx.preview.training");
  auto* xs = g->add_attribute();
  xs->set_name("xs");
  xs->set_type(::onnx::AttributeProto::STRINGS);
  xs->add_strings("x");
  xs->add_strings("W");
  Builder::attr(g, "y", std::string("y"));
  auto* g2 = b.node("Gradient", {"x"}, {"dsq"});  // of a y of 6 elements: summed
  g2->set_domain("ai.onnx.preview.training");
  auto* xs2 = g2->add_attribute();
  xs2->set_name("xs");
  xs2->set_type(::onnx::AttributeProto::STRINGS);
  xs2->add_strings("x");
  Builder::attr(g2, "y", std::string("sq"));
  const std::vector<float> x{1, -2, 3, 0.5f, 4, -1}, w{0.5f, -1.0f, 2.0f};
  std::vector<float> dx, dw(3, 0.0f), dsq;
  for (std::size_t i = 0; i < 6; ++i) {
    dx.push_back(2 * x[i] * w[i % 3]);
    dw[i % 3] += x[i] * x[i];
    dsq.push_back(2 * x[i]);
  }
  const ho::Model m = b.import();
  run_everywhere(m, {{"x", x}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
    EXPECT_EQ(cg.read(mm.outputs[1]), dx);
    EXPECT_EQ(cg.read(mm.outputs[2]), dw);
    EXPECT_EQ(cg.read(mm.outputs[3]), dsq);
  });
}

// ONNX's RoiAlign reference (avg mode), per sample point, for the test below.
std::vector<float> roi_align_reference(const std::vector<float>& x, int n_img, int ch, int h, int w,
                                       const std::vector<float>& rois,
                                       const std::vector<std::int32_t>& ids, int oh, int ow,
                                       int ratio, float scale, bool half_pixel) {
  (void)n_img;
  std::vector<float> out;
  const int r_count = static_cast<int>(ids.size());
  for (int r = 0; r < r_count; ++r) {
    const float off = half_pixel ? 0.5f : 0.0f;
    const float sw = rois[r * 4] * scale - off, sh = rois[r * 4 + 1] * scale - off;
    float rw = rois[r * 4 + 2] * scale - off - sw, rh = rois[r * 4 + 3] * scale - off - sh;
    if (!half_pixel) rw = std::max(rw, 1.0f), rh = std::max(rh, 1.0f);
    const float bh = rh / static_cast<float>(oh), bw = rw / static_cast<float>(ow);
    const int gh = ratio > 0 ? ratio : static_cast<int>(std::ceil(rh / static_cast<float>(oh)));
    const int gw = ratio > 0 ? ratio : static_cast<int>(std::ceil(rw / static_cast<float>(ow)));
    for (int c = 0; c < ch; ++c) {
      const float* img = x.data() + (ids[r] * ch + c) * h * w;
      for (int ph = 0; ph < oh; ++ph) {
        for (int pw = 0; pw < ow; ++pw) {
          double acc = 0;
          for (int iy = 0; iy < gh; ++iy) {
            float y = sh + ph * bh + (iy + 0.5f) * bh / static_cast<float>(gh);
            for (int ix = 0; ix < gw; ++ix) {
              float xx = sw + pw * bw + (ix + 0.5f) * bw / static_cast<float>(gw);
              if (y < -1.0f || y > h || xx < -1.0f || xx > w) continue;
              float yy = std::max(y, 0.0f), xc = std::max(xx, 0.0f);
              int yl = static_cast<int>(yy), xl = static_cast<int>(xc), yh, xh;
              if (yl >= h - 1)
                yh = yl = h - 1, yy = static_cast<float>(yl);
              else
                yh = yl + 1;
              if (xl >= w - 1)
                xh = xl = w - 1, xc = static_cast<float>(xl);
              else
                xh = xl + 1;
              const float ly = yy - yl, lx = xc - xl, hy = 1 - ly, hx = 1 - lx;
              acc += hy * hx * img[yl * w + xl] + hy * lx * img[yl * w + xh] +
                     ly * hx * img[yh * w + xl] + ly * lx * img[yh * w + xh];
            }
          }
          out.push_back(static_cast<float>(acc / (gh * gw)));
        }
      }
    }
  }
  return out;
}

// RoiAlign against ONNX's reference algorithm: rois reaching outside the image, both
// coordinate modes, a fixed sampling grid and the adaptive one (rois known at import); a batch
// index outside the images is a FeedError naming it.
TEST(OnnxImport, RoiAlignMatchesTheReference) {
  const int n = 2, ch = 2, h = 5, w = 6;
  std::vector<float> x(n * ch * h * w);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.7f) * 3;
  const std::vector<float> rois{0.5f, 1.0f, 4.0f, 3.5f, -2.0f, -1.5f,
                                3.0f, 2.0f, 3.0f, 2.5f, 7.5f,  6.5f};
  const std::vector<std::int32_t> ids{1, 0, 1}, bad_ids{1, 2, 0};
  for (bool half_pixel : {true, false}) {
    for (int ratio : {2, 0}) {
      SCOPED_TRACE(std::to_string(half_pixel) + " ratio " + std::to_string(ratio));
      Builder b(16);
      b.input("x", {n, ch, h, w}).input("ids", {3}, 7).output("y", {3, ch, 3, 2});
      if (ratio > 0)
        b.input("rois", {3, 4});
      else
        b.floats("rois", {3, 4}, rois);
      auto* r = b.node("RoiAlign", {"x", "rois", "ids"}, {"y"});
      Builder::attr(r, "output_height", std::int64_t{3});
      Builder::attr(r, "output_width", std::int64_t{2});
      Builder::attr(r, "sampling_ratio", std::int64_t{ratio});
      Builder::attr_f(r, "spatial_scale", 0.75f);
      Builder::attr(r, "coordinate_transformation_mode",
                    std::string(half_pixel ? "half_pixel" : "output_half_pixel"));
      const ho::Model m = b.import();  // (these rois' adaptive grids are all 1 x 2)
      const auto want =
          roi_align_reference(x, n, ch, h, w, rois, ids, 3, 2, ratio, 0.75f, half_pixel);
      for (const auto& pc : testing_util::platforms()) {
        SCOPED_TRACE(pc.name);
        CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
        std::vector<FeedItem> feeds{{"x", x}, {"ids", ids}};
        if (ratio > 0) feeds.push_back({"rois", rois});
        cg.run(feeds);
        const auto got = cg.read(m.outputs[0]);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5) << k;
        if (ratio > 0) {
          feeds[1] = {"ids", bad_ids};
          EXPECT_CONTAINS(error_of<FeedError>([&] { cg.run(feeds); }), "batch_indices");
        }
      }
    }
  }
  // Adaptive grids of different sizes would need shapes per roi: refused, not approximated.
  Builder b(16);
  b.input("x", {n, ch, h, w}).input("ids", {2}, 7).output("y", {2, ch, 1, 1});
  b.floats("rois", {2, 4}, {0, 0, 1, 1, 0, 0, 4, 4});
  b.node("RoiAlign", {"x", "rois", "ids"}, {"y"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }),
                  "#0 (RoiAlign-16): rois whose adaptive sampling grids differ");
}

// Layout chains through ranks above 4, which hetgraph tensors cannot hold: ShuffleNet's channel
// shuffle (Reshape to rank 5, Transpose, Reshape back) and PixelShuffle's rank 6 one, each one
// gather of positions in the end; a value left at rank 5 is refused by name.
TEST(OnnxImport, LayoutChainsThroughRanksAboveFour) {
  Builder b(13);
  b.input("x", {1, 6, 2, 2}).output("shuffled", {1, 6, 2, 2}).output("pixels", {1, 1, 4, 6});
  b.ints("s5", {1, 2, 3, 2, 2}).ints("s4", {1, 6, 2, 2});
  b.ints("p6", {1, 1, 2, 3, 2, 2}).ints("p4", {1, 1, 4, 6});
  b.node("Reshape", {"x", "s5"}, {"g"});
  Builder::attr(b.node("Transpose", {"g"}, {"gt"}), "perm",
                std::vector<std::int64_t>{0, 2, 1, 3, 4});
  b.node("Reshape", {"gt", "s4"}, {"shuffled"});
  // [N, C, r1, r2, H, W] -> [N, C, H, r1, W, r2] -> [N, C, H r1, W r2] (r1 = 2, r2 = 3)
  b.node("Reshape", {"x", "p6"}, {"p"});
  Builder::attr(b.node("Transpose", {"p"}, {"pt"}), "perm",
                std::vector<std::int64_t>{0, 1, 4, 2, 5, 3});
  b.node("Reshape", {"pt", "p4"}, {"pixels"});
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
  const ho::Model m = b.import();
  run_everywhere(m, {{"x", x}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
    EXPECT_EQ(cg.read(mm.outputs[0]), shuffled);
    EXPECT_EQ(cg.read(mm.outputs[1]), pixels);
  });
  Builder r(13);
  r.input("x", {1, 6, 2, 2}).output("g", {1, 2, 3, 2, 2});
  r.ints("s5", {1, 2, 3, 2, 2});
  r.node("Reshape", {"x", "s5"}, {"g"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { r.import(); }),
                  "tensor 'g' has rank 5 [1, 2, 3, 2, 2]; hetgraph tensors have rank 0 to 4");
}

// Adagrad, Momentum (standard and Nesterov) and Adam of ai.onnx.preview.training, two tensors
// at once, at step 0 and step 3, against ONNX's definitions in double, on every platform. The
// first Adam case is ONNX's test_adam_multiple with its epsilon (1e-2) on the node: the suite's
// model leaves it out, so hetgraph's result there (the default 1e-6) differs from the file's.
TEST(OnnxImport, PreviewTrainingOptimizersStep) {
  const std::vector<float> x{1.0f, 1.0f, 2.0f}, g{-1.0f, -2.0f, 1.5f}, v{2.0f, 0.5f, -1.0f},
      h{0.5f, 0.25f, 2.0f};
  for (const std::string op : {"Adagrad", "Momentum", "Nesterov", "Adam"}) {
    for (std::int32_t t : {0, 3}) {
      SCOPED_TRACE(op + " T=" + std::to_string(t));
      Builder b(17);
      auto* o = b.m.add_opset_import();
      o->set_domain("ai.onnx.preview.training");
      o->set_version(1);
      b.input("R", {}).input("T", {}, 7);
      const bool adam = op == "Adam";
      std::vector<std::string> ins{"R", "T", "X1", "X2", "G1", "G2", "S1", "S2"},
          outs{"X1n", "X2n", "S1n", "S2n"};
      for (const char* n : {"X1", "G1", "S1"}) b.input(n, {1});
      for (const char* n : {"X2", "G2", "S2"}) b.input(n, {2});
      if (adam) {
        ins.insert(ins.end(), {"H1", "H2"});
        outs.insert(outs.end(), {"H1n", "H2n"});
        b.input("H1", {1}).input("H2", {2});
      }
      for (const std::string& n : outs) b.output(n, {n[1] == '1' ? 1 : 2});
      auto* n = b.node(op == "Nesterov" ? "Momentum" : op, ins, outs);
      n->set_domain("ai.onnx.preview.training");
      const double norm = 0.001, alpha = 0.95, beta = op == "Adam" ? 0.85 : 0.1, eps = 1e-2,
                   decay = 0.1;
      Builder::attr_f(n, "norm_coefficient", static_cast<float>(norm));
      if (op == "Adagrad") {
        Builder::attr_f(n, "epsilon", static_cast<float>(eps));
        Builder::attr_f(n, "decay_factor", static_cast<float>(decay));
      } else {
        Builder::attr_f(n, "alpha", static_cast<float>(alpha));
        Builder::attr_f(n, "beta", static_cast<float>(beta));
      }
      if (op == "Momentum" || op == "Nesterov")
        Builder::attr(n, "mode", std::string(op == "Momentum" ? "standard" : "nesterov"));
      if (adam) Builder::attr_f(n, "epsilon", static_cast<float>(eps));
      ho::Model m = b.import();
      const double R = 0.1, T = t;
      std::vector<std::vector<float>> want(outs.size());
      for (std::size_t k = 0; k < 3;
           ++k) {  // element k: tensor 1 holds element 0, tensor 2 the rest
        const std::size_t out = k == 0 ? 0 : 1;
        const double gr = norm * x[k] + g[k];
        double xn = 0, sn = 0, hn = 0;
        if (op == "Adagrad") {
          sn = v[k] + gr * gr;  // (the state input holds H)
          xn = x[k] - R / (1 + T * decay) * gr / (std::sqrt(sn) + eps);
        } else if (!adam) {
          sn = alpha * v[k] + (T > 0 ? beta : 1.0) * gr;
          xn = x[k] - R * (op == "Momentum" ? sn : gr + alpha * sn);
        } else {
          sn = alpha * v[k] + (1 - alpha) * gr;
          hn = beta * h[k] + (1 - beta) * gr * gr;
          const double r =
              T > 0 ? R * std::sqrt(1 - std::pow(beta, T)) / (1 - std::pow(alpha, T)) : R;
          xn = x[k] - r * sn / (std::sqrt(hn) + eps);
        }
        want[out].push_back(static_cast<float>(xn));
        want[2 + out].push_back(static_cast<float>(sn));
        if (adam) want[4 + out].push_back(static_cast<float>(hn));
      }
      if (adam && t == 0) {
        EXPECT_NEAR(want[0][0], 0.759136f, 1e-6);  // ONNX's expected X1_new
      }
      for (const auto& pc : testing_util::platforms()) {
        SCOPED_TRACE(pc.name);
        CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
        const std::vector<float> r{0.1f}, x1{x[0]}, x2{x[1], x[2]}, g1{g[0]}, g2{g[1], g[2]},
            s1{v[0]}, s2{v[1], v[2]}, h1{h[0]}, h2{h[1], h[2]};
        const std::vector<std::int32_t> steps{t};
        std::vector<FeedItem> feeds{{"R", r},   {"T", steps}, {"X1", x1}, {"X2", x2},
                                    {"G1", g1}, {"G2", g2},   {"S1", s1}, {"S2", s2}};
        if (adam) feeds.insert(feeds.end(), {{"H1", h1}, {"H2", h2}});
        cg.run(feeds);
        for (std::size_t o2 = 0; o2 < outs.size(); ++o2) {
          const std::vector<float> got = cg.read(m.outputs[o2]);
          ASSERT_EQ(got.size(), want[o2].size()) << outs[o2];
          for (std::size_t e = 0; e < got.size(); ++e)
            EXPECT_NEAR(got[e], want[o2][e], 1e-5) << outs[o2];
        }
      }
    }
  }
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
  // rank 6, a reduction ONNX added later (opset 18).
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
  big.input("x", {2, 2, 2, 2}).input("i", {2, 2, 2, 1}, 7).output("y", {2, 2, 2, 2, 2, 2});
  big.node("GatherND", {"x", "i"}, {"y"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { big.import(); }), "a result of rank 6");
  Builder max(18);
  max.input("x", {3}).input("i", {1, 1}, 7).input("u", {1}).output("y", {3});
  Builder::attr(max.node("ScatterND", {"x", "i", "u"}, {"y"}), "reduction", std::string("max"));
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { max.import(); }),
                  "ScatterND-16): reduction 'max' (none, add and mul are supported)");
}

// Equal, NaN where both are NaN.
bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (!(a[k] == b[k] || (std::isnan(a[k]) && std::isnan(b[k])))) return false;
  return true;
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

// GridSample on x = [[1, 2, 3], [4, 5, 6]] at grid points inside, between pixels, half outside
// and far outside (reflected twice), in each padding mode, bilinear and nearest (half to even):
// against values worked out by hand from PyTorch's grid_sample, on every platform, exported and
// imported back; the gradient reaches the grid (a variable here). Bad grids and modes are
// errors naming the node.
TEST(OnnxImport, GridSampleInterpolatesAndPads) {
  Builder b(16);
  b.input("x", {1, 1, 2, 3}).floats("grid", {1, 1, 4, 2}, {0, 0, 1, 1, -1, -1, 3, 0});
  const char* modes[][2] = {{"bilinear", "zeros"},
                            {"bilinear", "border"},
                            {"bilinear", "reflection"},
                            {"nearest", "zeros"}};
  for (const auto& [mode, pad] : modes) {
    const std::string y = std::string(mode) + "_" + pad;
    b.output(y, {1, 1, 1, 4});
    auto* n = b.node("GridSample", {"x", "grid"}, {y});
    Builder::attr(n, "mode", std::string(mode));
    Builder::attr(n, "padding_mode", std::string(pad));
  }
  ho::Model m = b.import();
  ASSERT_EQ(m.variables.size(), 1u);
  ho::Model back = round_trip(m);
  const std::vector<std::vector<float>> want{
      {3.5f, 1.5f, 0.25f, 0.0f}, {3.5f, 6, 1, 4.5f}, {3.5f, 6, 1, 2.5f}, {2, 0, 1, 0}};
  const Node d_grid = gradients(reduce_sum(m.outputs[0]), {m.variables[0]})[0];
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = GraphCompiler(pc.make()).compile(
        m.graph, m.input_shapes, {m.outputs[0], m.outputs[1], m.outputs[2], m.outputs[3], d_grid});
    const std::vector<float> x{1, 2, 3, 4, 5, 6};
    cg.run({{"x", x}});
    for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(cg.read(m.outputs[k]), want[k]) << k;
    // At the first point: x = 1 + 1.5 gx (3 pixels) and y = 0.5 + gy (2 rows); the value
    // rises by 1 per pixel and by 3 per row.
    const std::vector<float> g = cg.read(d_grid);
    EXPECT_FLOAT_EQ(g[0], 1.5f);
    EXPECT_FLOAT_EQ(g[1], 3.0f);
    CompiledGraph again = back.compile(GraphCompiler(pc.make()));
    again.run({{"x", x}});
    for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(again.read(back.outputs[k]), want[k]) << k;
  }
  Builder bad(16);
  bad.input("x", {1, 1, 2, 3}).input("grid", {2, 1, 4, 2}).output("y", {1, 1, 1, 4});
  bad.node("GridSample", {"x", "grid"}, {"y"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad.import({.check = false}); }), "GridSample");
  Builder odd(16);
  odd.input("x", {1, 1, 2, 3}).input("grid", {1, 1, 4, 2}).output("y", {1, 1, 1, 4});
  Builder::attr(odd.node("GridSample", {"x", "grid"}, {"y"}), "mode", std::string("area"));
  EXPECT_CONTAINS(error_of<ShapeError>([&] { odd.import({.check = false}); }), "mode must be");
}

// Resize: nearest of int64 (gathers only: 2^24 + 1 stays exact), tf_crop_and_resize's
// extrapolation outside the region, exported and imported back; bad scales are errors.
TEST(OnnxImport, ResizeGathersAndWeighsEachAxis) {
  Builder b;
  b.input("i", {1, 1, 2, 2}, 7).input("x", {1, 1, 1, 4});
  b.output("up", {1, 1, 4, 6}, 7).output("crop", {1, 1, 1, 3});
  b.floats("scales", {4}, {1, 1, 2, 3}).floats("roi", {8}, {0, 0, 0, -0.5f, 1, 1, 1, 1.5f});
  b.ints("sizes", {1, 1, 1, 3});
  b.node("Resize", {"i", "", "scales"}, {"up"});
  auto* crop = b.node("Resize", {"x", "roi", "", "sizes"}, {"crop"});
  Builder::attr(crop, "mode", std::string("linear"));
  Builder::attr(crop, "coordinate_transformation_mode", std::string("tf_crop_and_resize"));
  Builder::attr_f(crop, "extrapolation_value", 10.0f);
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const std::vector<std::int32_t> i{16777217, 2, 3, 4};
  std::vector<std::int32_t> up;
  for (int r = 0; r < 4; ++r)  // each element a 2 x 3 block
    for (int col = 0; col < 6; ++col)
      up.push_back(i[static_cast<std::size_t>(r / 2 * 2 + col / 3)]);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"i", i}, {"x", std::vector<float>{1, 2, 3, 4}}});
      EXPECT_EQ(cg.read_i32(model->outputs[0]), up);
      // source x = 3 o - 1.5: -1.5 and 4.5 fall outside [0, 3]; 1.5 is halfway from 2 to 3
      EXPECT_EQ(cg.read(model->outputs[1]), (std::vector<float>{10, 2.5f, 10}));
    }
  }
  auto bad = [](std::vector<float> scales, const std::string& mode) {
    Builder e;
    e.input("i", {1, 2}, 7).output("y", {1, 4}, 7);
    e.floats("s", {static_cast<std::int64_t>(scales.size())}, scales);
    Builder::attr(e.node("Resize", {"i", "", "s"}, {"y"}), "mode", mode);
    e.import();
  };
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad({1, 2, 2}, "nearest"); }), "scales must give 2");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    bad({1, -2}, "nearest");
                  }),
                  "scales must be positive");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad({1, INFINITY}, "nearest"); }), "and finite");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    bad({1, 1e12f}, "nearest");
                  }),
                  "an output dim of");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    bad({1, 0.25f}, "nearest");
                  }),
                  "an output dim of 0");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    bad({1, 2}, "linear");
                  }),
                  "linear resizing of integers");
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
// noop_with_empty_axes. The empty input is not an input of the compiled graph.
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
  {  // A graph whose result would be empty still gets a clean error naming the tensor.
    Builder b;
    b.input("x", {"n"}).output("y", {"n"});
    b.node("Relu", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                      b.import({.input_shapes = {{"x", Shape{0}}}});
                    }),
                    "'y' is empty [0]; hetgraph tensors have at least one element");
  }
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

TEST(OnnxImport, BidirectionalLstmDirectionsAreIndependentChains) {
  // Two directions, 6 steps: the graph is at least two wide, so parallel engines overlap them.
  Builder b;
  constexpr int kSeq = 6, kBatch = 2, kIn = 3, kH = 4;
  b.input("x", {kSeq, kBatch, kIn}).output("y", {kSeq, 2, kBatch, kH}).output("h", {2, kBatch, kH});
  b.floats("W", {2, 4 * kH, kIn}, testing_util::random_vec(2 * 4 * kH * kIn, 1));
  b.floats("R", {2, 4 * kH, kH}, testing_util::random_vec(2 * 4 * kH * kH, 2));
  auto* n = b.node("LSTM", {"x", "W", "R"}, {"y", "h"});
  auto* a = n->add_attribute();
  a->set_name("direction");
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s("bidirectional");
  Builder::attr(n, "hidden_size", std::int64_t{kH});
  ho::Model m = b.import();
  EXPECT_EQ(m.output_info[0].shape, (Shape{kSeq, 2, kBatch, kH}));
  CompiledGraph cg = m.compile(GraphCompiler(Platform::cpu(
      {.engine = CpuEngine::critical_path, .executors = 2, .threads_per_executor = 1})));
  EXPECT_GE(cg.engine_report().max_width, 2);
}

// ---- export ----------------------------------------------------------------------------------

// A graph of most ops, exported and imported back: the same outputs on every platform.
TEST(OnnxExport, RoundTripGivesTheSameOutputs) {
  Graph g;
  auto img = g.input("img");
  auto ids = g.input("ids", DType::i32);
  auto vec = g.input("vec");
  auto W = g.variable("W", {4, 3, 3, 3}, Initializer::uniform(-0.3f, 0.3f, 1));
  auto cb = g.variable("cb", {4}, Initializer::uniform(-0.1f, 0.1f, 2));
  auto E = g.variable("E", {10, 6}, Initializer::normal(0, 1, 3));
  auto c = relu(conv2d(img, W, cb, {.stride = {1, 1}, .padding = {1, 1}}));
  auto p = avg_pool2d(max_pool2d(c, {.kernel = {2, 2}}),
                      {.kernel = {2, 2}, .stride = {1, 1}, .padding = {1, 1}});
  auto flat = reshape(p, {2, -1});  // [2, 4 * 5 * 5]
  auto M = g.variable("M", {100, 6}, Initializer::uniform(-0.1f, 0.1f, 4));
  auto h = tanh(matmul(flat, M)) + reduce_sum(embedding(E, ids), 1);  // [2, 6]
  auto mix = concat({slice(h, 1, 0, 3), transpose(slice(h, 1, 3, 6), {0, 1}) * 2.0f}, 1);
  auto z = gelu(mix) + clip(vec, -0.5f, 0.5f) - leaky_relu(abs(vec), 0.1f);
  auto w = where(g.constant_i32({6}, {1, 0, 1, 0, 1, 0}), z, maximum(z, erf(vec)));
  auto out1 = softmax(matmul(w, w, false, true)).named("probs");
  auto out2 = log_softmax(reduce_mean(w, 0, true) / sqrt(exp(vec) + 1.0f)).named("other");
  const InputShapes shapes{{"img", {2, 3, 8, 8}}, {"ids", {2, 3}}, {"vec", {6}}};
  const std::vector<Node> outs{out1, out2};
  const std::string path = (fs::temp_directory_path() / "hetgraph-roundtrip.onnx").string();
  ho::export_model(g, outs, shapes, path);
  ho::Model m = ho::import(path);
  fs::remove(path);
  ASSERT_EQ(m.output_info.size(), 2u);
  EXPECT_EQ(m.output_info[0].name, "probs");
  EXPECT_EQ(m.variables.size(), 4u);
  const auto imgs = testing_util::random_vec(2 * 3 * 64, 7);
  const auto vecs = testing_util::random_vec(6, 8);
  const std::vector<std::int32_t> idv{1, 9, 4, 0, 0, 7};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph a = GraphCompiler(pc.make()).compile(g, shapes, outs);
    CompiledGraph b = m.compile(GraphCompiler(pc.make()));
    for (CompiledGraph* cg : {&a, &b}) cg->run({{"img", imgs}, {"ids", idv}, {"vec", vecs}});
    for (const char* name : {"probs", "other"}) {
      const auto x = a.read(name), y = b.read(name);
      ASSERT_EQ(x.size(), y.size());
      for (std::size_t k = 0; k < x.size(); ++k)
        EXPECT_NEAR(x[k], y[k], 1e-5 + 1e-4 * std::fabs(x[k])) << name << " " << k;
    }
  }
}

// A unary row whose ONNX op is newer than the exporter's opset 17 (OnnxForm::body): it exports
// as its body in opset 17 ops, which imports back to the same values; the op itself, in a model
// of its opset, imports as the row's op where this ONNX knows that opset (Debian's ONNX 1.12
// knows opset 17 at most: such a node is an unsupported op there, named as such).
void check_row_newer_than_the_exporter(detail::OpKind op, const std::string& bytes) {
  const detail::OnnxForm& form = detail::op_def(op).onnx;
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  ASSERT_GE(proto.graph().node_size(), 1);
  for (const auto& node : proto.graph().node())
    EXPECT_NE(form.body.find(node.op_type() + "("), std::string_view::npos) << node.op_type();
  const ho::Model m = ho::import_bytes(std::as_bytes(std::span<const char>(bytes)), {}, "b.onnx");
  Graph g;
  const Node y = detail::make_op(op, {g.input("a")});
  const std::vector<float> a{-30, -4, -0.25f, 0.5f, 2.5f, 40};  // the exported shape, [2, 3]
  CompiledGraph want = GraphCompiler(Platform::cpu()).compile(g, {{"a", {2, 3}}}, {y});
  CompiledGraph got = m.compile(GraphCompiler(Platform::cpu()));
  want.run({{"a", a}});
  got.run({{"a", a}});
  const auto w = want.read(y), v = got.read(m.outputs[0]);
  ASSERT_EQ(w.size(), v.size());
  for (std::size_t k = 0; k < w.size(); ++k)
    EXPECT_NEAR(v[k], w[k], 1e-6 + 1e-5 * std::fabs(w[k])) << "x = " << a[k];
  // The op itself, in a model of its opset.
  proto.mutable_graph()->clear_node();
  ::onnx::NodeProto* n = proto.mutable_graph()->add_node();
  n->set_op_type(std::string(form.op));
  n->add_input(proto.graph().input(0).name());
  n->add_output(proto.graph().output(0).name());
  proto.mutable_opset_import(0)->set_version(form.since);
  const std::string model = proto.SerializeAsString();
  ho::ImportOptions opts;
  opts.check = false;  // onnx::checker of an ONNX without this opset refuses the model
  const auto model_bytes = std::as_bytes(std::span<const char>(model));
  if (::onnx::OpSchemaRegistry::Schema(std::string(form.op), form.since, "") == nullptr) {
    try {
      ho::import_bytes(model_bytes, opts, "op.onnx");
      ADD_FAILURE() << "imported an op this ONNX does not know";
    } catch (const ho::UnsupportedError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(form.op) + "-?"), std::string::npos)
          << e.what();
    }
    return;
  }
  const ho::Model back = ho::import_bytes(model_bytes, opts, "op.onnx");
  const auto& nodes = detail::impl_of(back.graph).nodes;
  EXPECT_EQ(std::count_if(nodes.begin(), nodes.end(), [&](const auto& r) { return r.op == op; }),
            1);
}

// An elementwise op whose row names an ONNX op (OpDef::onnx) exports as that one ONNX node, and
// a unary one with schema versions comes back as the same op: a new op's ONNX support is its row.
TEST(OnnxExport, OpRowsExportAsTheirOnnxOpAndImportBack) {
  int exported = 0, imported = 0;
  for (int k = 0; k < detail::kNumOps; ++k) {
    const auto op = static_cast<detail::OpKind>(k);
    const detail::OpDef& d = detail::op_def(op);
    const bool unary = d.elementwise == detail::Elementwise::unary;
    if (d.onnx.op.empty() || (!unary && d.elementwise != detail::Elementwise::binary)) continue;
    SCOPED_TRACE(std::string(d.name));
    Graph g;
    std::vector<Node> ins{g.input("a")};
    InputShapes shapes{{"a", {2, 3}}};
    if (!unary) {
      ins.push_back(g.input("b"));
      shapes.push_back({"b", {2, 3}});
    }
    const Node y = detail::make_op(op, ins).named("y");
    const std::string bytes = ho::export_bytes(g, std::vector<Node>{y}, shapes);
    if (d.onnx.since > 17) {  // newer than the exporter's opset
      check_row_newer_than_the_exporter(op, bytes);
      ++exported;
      continue;
    }
    ::onnx::ModelProto proto;
    ASSERT_TRUE(proto.ParseFromString(bytes));
    ASSERT_EQ(proto.graph().node_size(), 1);
    EXPECT_EQ(proto.graph().node(0).op_type(), d.onnx.op);
    ++exported;
    if (d.onnx.since == 0) continue;
    const ho::Model m =
        ho::import_bytes(std::as_bytes(std::span<const char>(bytes)), {}, "row.onnx");
    const auto& nodes = detail::impl_of(m.graph).nodes;
    EXPECT_EQ(std::count_if(nodes.begin(), nodes.end(), [&](const auto& n) { return n.op == op; }),
              1);
    ++imported;
  }
  EXPECT_GE(exported, 30);
  EXPECT_GE(imported, 23);
}

// argmax / argmin go out as ONNX ArgMax / ArgMin (int64) cast to int32, the flat position over
// all axes as one over the flattened input, and come back to the same positions.
TEST(OnnxExport, ArgMaxRoundTrips) {
  Graph g;
  auto x = g.input("x");
  auto ids = g.input("ids", DType::i32);
  const std::vector<Node> outs{
      argmax(x).named("max_last_axis"),
      argmin(x, 0, true, true).named("min_first_axis"),
      argmax(x, kAllAxes, true).named("max_flat"),
      argmin(ids, -1).named("min_ids"),
      (cast(argmax(x, 1), DType::f32) * 0.5f).named("as_float"),
  };
  const InputShapes shapes{{"x", {3, 4}}, {"ids", {2, 3}}};
  const std::string path = (fs::temp_directory_path() / "hetgraph-argmax.onnx").string();
  ho::export_model(g, outs, shapes, path);
  ho::Model m = ho::import(path);
  fs::remove(path);
  ASSERT_EQ(m.output_info.size(), outs.size());
  EXPECT_EQ(m.output_info[2].shape, (Shape{1, 1}));
  const std::vector<float> xv{1, 3, 3, 0, NAN, 2, NAN, 5, -1, -1, -2, 7};
  const std::vector<std::int32_t> iv{4, -2, -2, 0, 0, 1};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph a = GraphCompiler(pc.make()).compile(g, shapes, outs);
    CompiledGraph b = m.compile(GraphCompiler(pc.make()));
    for (CompiledGraph* cg : {&a, &b}) cg->run({{"x", xv}, {"ids", iv}});
    for (const char* name : {"max_last_axis", "min_first_axis", "max_flat", "min_ids"})
      EXPECT_EQ(a.read_i32(name), b.read_i32(name)) << name;
    EXPECT_EQ(b.read_i32("max_last_axis"), (std::vector<std::int32_t>{1, 0, 3}));
    EXPECT_EQ(b.read_i32("min_first_axis"), (std::vector<std::int32_t>{1, 2, 1, 0}));
    EXPECT_EQ(b.read_i32("max_flat"), (std::vector<std::int32_t>{4}));
    EXPECT_EQ(b.read_i32("min_ids"), (std::vector<std::int32_t>{1, 0}));
    EXPECT_EQ(a.read("as_float"), b.read("as_float"));
  }
}

// top_k goes out as ONNX TopK (its int64 indices cast to int32, its values output unused: the
// graph's values are a GatherElements of them) and comes back to the same outputs.
TEST(OnnxExport, TopKRoundTrips) {
  Graph g;
  auto x = g.input("x");
  auto ids = g.input("ids", DType::i32);
  const TopK best = top_k(x, 2);
  const std::vector<Node> outs{
      best.values.named("best"),
      best.indices.named("best_at"),
      top_k_indices(x, 3, 0, false).named("low_at"),
      top_k(ids, 1, -2).values.named("ids_top"),
  };
  const InputShapes shapes{{"x", {3, 4}}, {"ids", {2, 3}}};
  const std::string bytes = ho::export_bytes(g, outs, shapes);
  ho::Model m = ho::import_bytes(std::as_bytes(std::span<const char>(bytes)), {}, "topk.onnx");
  ASSERT_EQ(m.output_info.size(), outs.size());
  EXPECT_EQ(m.output_info[2].shape, (Shape{3, 4}));
  const std::vector<float> xv{1, 3, 3, 0, NAN, 2, NAN, 5, -1, -1, -2, 7};
  const std::vector<std::int32_t> iv{4, -2, -2, 4, 0, 1};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph a = GraphCompiler(pc.make()).compile(g, shapes, outs);
    CompiledGraph b = m.compile(GraphCompiler(pc.make()));
    for (CompiledGraph* cg : {&a, &b}) cg->run({{"x", xv}, {"ids", iv}});
    for (const char* name : {"best_at", "low_at", "ids_top"})
      EXPECT_EQ(a.read_i32(name), b.read_i32(name)) << name;
    EXPECT_TRUE(same_floats(b.read("best"), {3, 3, NAN, NAN, 7, -1}));
    EXPECT_EQ(b.read_i32("best_at"), (std::vector<std::int32_t>{1, 2, 0, 2, 3, 0}));
    EXPECT_EQ(b.read_i32("low_at"),
              (std::vector<std::int32_t>{2, 2, 2, 0, 0, 1, 0, 1, 1, 0, 1, 2}));
    EXPECT_EQ(b.read_i32("ids_top"), (std::vector<std::int32_t>{4, 0, 1}));
    EXPECT_TRUE(same_floats(a.read("best"), b.read("best")));
  }
}

// Groups, auto_pad, transposed convolutions, ceil_mode, dilated and padding-counting pools:
// each attribute goes out as ONNX's own and comes back to the same outputs.
TEST(OnnxExport, WindowAttributesRoundTrip) {
  Graph g;
  auto img = g.input("img");
  auto Wd = g.variable("Wd", {4, 1, 3, 3}, Initializer::uniform(-0.5f, 0.5f, 11));
  auto Wg = g.variable("Wg", {6, 2, 3, 3}, Initializer::uniform(-0.3f, 0.3f, 12));
  auto bg = g.variable("bg", {6}, Initializer::uniform(-0.1f, 0.1f, 13));
  auto Wt = g.variable("Wt", {6, 2, 3, 3}, Initializer::uniform(-0.3f, 0.3f, 14));
  auto bt = g.variable("bt", {4}, Initializer::uniform(-0.1f, 0.1f, 15));
  auto dw = conv2d(img, Wd, {.stride = {2, 2}, .groups = 4, .auto_pad = AutoPad::same_upper});
  auto gc = relu(conv2d(dw, Wg, bg, {.padding = {1, 1}, .groups = 2}));  // [2, 6, 5, 5]
  auto ct = conv_transpose2d(
      gc, Wt, bt, {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}, .groups = 2});
  auto avg = avg_pool2d(ct, {.kernel = {3, 3},
                             .stride = {2, 2},
                             .padding = {1, 1},
                             .count_include_pad = true,
                             .ceil_mode = true})
                 .named("avg");  // [2, 4, 6, 6]
  auto mx =
      max_pool2d(ct, {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true, .dilation = {1, 2}})
          .named("max");  // [2, 4, 5, 5]
  const InputShapes shapes{{"img", {2, 4, 9, 9}}};
  const std::vector<Node> outs{avg, mx};
  const std::string path = (fs::temp_directory_path() / "hetgraph-windows.onnx").string();
  ho::export_model(g, outs, shapes, path);
  ho::Model m = ho::import(path);
  fs::remove(path);
  ASSERT_EQ(m.output_info.size(), 2u);
  EXPECT_EQ(m.output_info[0].shape, (Shape{2, 4, 6, 6}));
  EXPECT_EQ(m.output_info[1].shape, (Shape{2, 4, 5, 5}));
  const auto imgs = testing_util::random_vec(2 * 4 * 81, 17);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph a = GraphCompiler(pc.make()).compile(g, shapes, outs);
    CompiledGraph b = m.compile(GraphCompiler(pc.make()));
    for (CompiledGraph* cg : {&a, &b}) cg->run({{"img", imgs}});
    for (const char* name : {"avg", "max"}) {
      const auto x = a.read(name), y = b.read(name);
      ASSERT_EQ(x.size(), y.size());
      for (std::size_t k = 0; k < x.size(); ++k)
        EXPECT_NEAR(x[k], y[k], 1e-5 + 1e-4 * std::fabs(x[k])) << name << " " << k;
    }
  }
}

TEST(OnnxExport, TrainedValuesComeFromTheCompiledGraph) {
  Graph g;
  auto x = g.input("x");
  auto y = g.input("y", DType::i32);
  auto W = g.variable("W", {5, 3});
  auto b = g.variable("b", {3});
  auto probs = softmax(matmul(x, W) + b).named("probs");
  auto loss = reduce_mean(cross_entropy(probs, y));
  CompiledGraph train =
      GraphCompiler().compile(g, {{"x", {4, 5}}, {"y", {4}}}, {loss, sgd(loss, {W, b}, 0.5f)});
  const auto xs = testing_util::random_vec(20, 1);
  const std::vector<std::int32_t> ys{0, 1, 2, 1};
  for (int i = 0; i < 10; ++i) train.run({{"x", xs}, {"y", ys}});
  const std::string bytes =
      ho::export_bytes(g, std::vector<Node>{probs}, {{"x", {4, 5}}}, {.values = &train});
  ho::Model m = ho::import_bytes(std::as_bytes(std::span<const char>(bytes)));
  CompiledGraph cg = m.compile();
  EXPECT_EQ(cg.read("W"), train.read(W));
  cg.run({{"x", xs}});
  train.run({{"x", xs}, {"y", ys}});  // one more step changes W; compare with a forward pass
  CompiledGraph fwd = GraphCompiler().compile(g, {{"x", {4, 5}}}, {probs});
  fwd.write(W, cg.read("W"));
  fwd.write(b, cg.read("b"));
  fwd.run({{"x", xs}});
  const auto p1 = fwd.read(probs), p2 = cg.read("probs");
  for (std::size_t k = 0; k < p1.size(); ++k) EXPECT_NEAR(p1[k], p2[k], 1e-6);
  // Input shapes default to the compiled graph's.
  EXPECT_NO_THROW(ho::export_bytes(g, std::vector<Node>{probs}, {}, {.values = &train}));
}

TEST(OnnxExport, TrainingNodesAreNamedErrors) {
  Graph g;
  auto W = g.variable("W", {2});
  auto step = assign(W, W * 0.5f);
  EXPECT_CONTAINS(error_of<GraphError>([&] { ho::export_bytes(g, std::vector<Node>{step}, {}); }),
                  "assign");
  // A gradient through relu needs relu_grad, which has no ONNX form. (The seed and sum_to,
  // which Gradient models use, have: OnnxImport.GradientDifferentiatesByAutodiff.)
  auto loss = reduce_sum(relu(W) * W);
  auto grad = gradients(loss, {W})[0];
  EXPECT_CONTAINS(error_of<GraphError>([&] { ho::export_bytes(g, std::vector<Node>{grad}, {}); }),
                  "(relu_grad) has no ONNX form");
}

// ---- tensor files ----------------------------------------------------------------------------

TEST(OnnxTensorFile, WritesAndReadsBack) {
  const std::string path = (fs::temp_directory_path() / "hetgraph-tensor.pb").string();
  ho::TensorData t;
  t.name = "ids";
  t.dtype = DType::i32;
  t.onnx_type = "int64";
  t.shape = Shape{2, 2};
  t.i32 = {1, -2, 3, 2147483647};
  ho::write_tensor(path, t);
  const ho::TensorData r = ho::read_tensor(path);
  EXPECT_EQ(r.name, "ids");
  EXPECT_EQ(r.onnx_type, "int64");
  EXPECT_EQ(r.shape, t.shape);
  EXPECT_EQ(r.i32, t.i32);
  // int64 values outside int32 are a DataError naming the file.
  ::onnx::TensorProto big;
  big.set_data_type(7);
  big.add_dims(1);
  big.add_int64_data(std::int64_t{1} << 40);
  std::ofstream(path, std::ios::binary) << big.SerializeAsString();
  EXPECT_CONTAINS(error_of<DataError>([&] { ho::read_tensor(path); }), path);
  fs::remove(path);
}

// Random graphs over the ops the exporter writes (tests/random_dag), exported and imported
// back: the same outputs. (Found strided_slice, gather, cast, sin and cos without an ONNX form,
// and Where's condition exported as a cast the importer refused.)
TEST(OnnxExport, RandomGraphsRoundTrip) {
  const std::vector<float> xv = testing_util::random_vec(16, 1),
                           yv = testing_util::random_vec(16, 2);
  const InputShapes shapes{{"x", {4, 4}}, {"y", {4, 4}}};
  for (int seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    std::vector<Node> sinks;
    const Graph g = testing_util::random_op_graph(rng, 5 + static_cast<int>(rng() % 40), sinks);
    CompiledGraph a = GraphCompiler().compile(g, shapes, sinks);
    a.run({{"x", xv}, {"y", yv}});
    const std::string bytes = ho::export_bytes(g, sinks, shapes);
    const ho::Model m = ho::import_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())));
    CompiledGraph b = m.compile();
    std::vector<FeedItem> feeds;  // the inputs the exported part reads
    for (const ho::ValueDesc& in : m.input_info)
      feeds.push_back({in.name, in.name == "x" ? xv : yv});
    b.run(feeds);
    ASSERT_EQ(m.outputs.size(), sinks.size());
    for (std::size_t s = 0; s < sinks.size(); ++s) {
      const auto want = a.read(sinks[s]), got = b.read(m.outputs[s]);
      ASSERT_EQ(want.size(), got.size());
      for (std::size_t k = 0; k < want.size(); ++k)
        ASSERT_NEAR(got[k], want[k], 1e-5 + 1e-4 * std::fabs(want[k]))
            << "output " << s << " at " << k;
    }
  }
}

}  // namespace

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

// ---- files the importer opens, and budgets of the whole import (issue 46) -------------------

namespace {

// A fresh folder of this test's own under the temporary directory.
fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_floats(const fs::path& p, const std::vector<float>& v) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()),
             static_cast<std::streamsize>(v.size() * sizeof(float)));
}

// A tensor W [2] kept in an external file at `location`.
void external(::onnx::TensorProto* t, const std::string& location) {
  t->set_name("W");
  t->set_data_type(1);
  t->add_dims(2);
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value(location);
}

// dir/model.onnx: y = x + W, W [2] an initializer kept in an external file at `location` (or,
// with `constant`, the value of a Constant node).
fs::path external_model(const fs::path& dir, const std::string& location, bool constant = false) {
  Builder b;
  b.input("x", {2}).output("y", {2});
  if (constant) {
    auto* a = b.node("Constant", {}, {"W"})->add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    external(a->mutable_t(), location);
  } else {
    external(b.g->add_initializer(), location);
  }
  b.node("Add", {"x", "W"}, {"y"});
  const fs::path model = dir / "model.onnx";
  std::ofstream(model, std::ios::binary) << b.bytes();
  return model;
}

// y = x + W of a model imported from `model`, for x = 0.
std::vector<float> weights_of(const fs::path& model) {
  const ho::Model m = ho::import(model.string());
  CompiledGraph cg = m.compile(GraphCompiler());
  cg.run({{"x", std::vector<float>{0, 0}}});
  return cg.read(m.outputs[0]);
}

// Opens the FIFO for writing after `delay` (and closes it at once), so that a reader blocked
// in open() on it is let go: without the fix, the test fails instead of hanging.
struct FifoReleaser {
  explicit FifoReleaser(fs::path p, std::chrono::milliseconds delay = std::chrono::seconds(3))
      : t([p = std::move(p), delay, this] {
          const auto until = std::chrono::steady_clock::now() + delay;
          while (!stop && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          if (stop) return;
          const int fd = ::open(p.c_str(), O_WRONLY | O_NONBLOCK);
          if (fd >= 0) ::close(fd);
        }) {}
  ~FifoReleaser() {
    stop = true;
    t.join();
  }
  std::atomic<bool> stop{false};
  std::thread t;
};

}  // namespace

// External data is read only from inside the model's folder: a symlink there to a file outside
// (to /etc/passwd), a linked folder on the way, and a chain of links are refused, naming the
// model and the location; links that stay inside, and a model reached through a linked folder,
// import.
TEST(OnnxImport, ExternalDataStaysInsideTheModelsFolder) {
  const fs::path root = fresh_dir("hetgraph-external"), dir = root / "model",
                 outside = root / "outside";
  fs::create_directories(dir / "real");
  fs::create_directories(outside);
  write_floats(dir / "w.bin", {1, 2});
  write_floats(dir / "real" / "w.bin", {3, 4});
  write_floats(outside / "secret.bin", {7, 8});
  fs::create_symlink("real/w.bin", dir / "inside_link.bin");
  fs::create_symlink(dir, root / "linked_model");
  EXPECT_EQ(weights_of(external_model(dir, "w.bin")), (std::vector<float>{1, 2}));
  EXPECT_EQ(weights_of(external_model(dir, "real/w.bin")), (std::vector<float>{3, 4}));
  EXPECT_EQ(weights_of(external_model(dir, "inside_link.bin")), (std::vector<float>{3, 4}));
  EXPECT_EQ(weights_of(root / "linked_model" / "model.onnx"), (std::vector<float>{3, 4}));

  fs::create_symlink(outside / "secret.bin", dir / "weights.bin");
  fs::create_symlink("/etc/passwd", dir / "passwd.bin");
  fs::create_symlink(outside, dir / "linked");  // a linked folder on the way
  fs::create_symlink("chain2.bin", dir / "chain1.bin");
  fs::create_symlink("real/chain3.bin", dir / "chain2.bin");
  fs::create_symlink("../../outside/secret.bin", dir / "real" / "chain3.bin");
  for (const std::string location :
       {"weights.bin", "passwd.bin", "linked/secret.bin", "chain1.bin", "./real/chain3.bin"}) {
    SCOPED_TRACE(location);
    const fs::path model = external_model(dir, location);
    const std::string what = error_of<DataError>([&] { weights_of(model); });
    EXPECT_CONTAINS(what, model.string() + ": ");
    EXPECT_CONTAINS(what, "'" + location + "'");
    EXPECT_CONTAINS(what, "outside the model's folder");
  }
  fs::remove_all(root);
}

// A Constant's tensor kept as external data is read too (ONNX's external-data helper moves
// those out as well), under the same rule.
TEST(OnnxImport, ExternalDataOfConstantsIsReadUnderTheSameRule) {
  const fs::path root = fresh_dir("hetgraph-external-constant"), dir = root / "model";
  fs::create_directories(dir);
  fs::create_directories(root / "outside");
  write_floats(dir / "w.bin", {5, 6});
  write_floats(root / "outside" / "secret.bin", {7, 8});
  fs::create_symlink(root / "outside" / "secret.bin", dir / "weights.bin");
  EXPECT_EQ(weights_of(external_model(dir, "w.bin", true)), (std::vector<float>{5, 6}));
  EXPECT_CONTAINS(
      error_of<DataError>([&] { weights_of(external_model(dir, "weights.bin", true)); }),
      "outside the model's folder");
  fs::remove_all(root);
}

// External data must be a regular file: a FIFO would block the import in open(), a folder is
// no data; and tensors may not claim one file's bytes over and over (a few bytes of model
// would make the import allocate without end).
TEST(OnnxImport, ExternalDataIsRegularFilesReadOnce) {
  const fs::path dir = fresh_dir("hetgraph-external-kinds");
  ASSERT_EQ(::mkfifo((dir / "fifo.bin").c_str(), 0600), 0);
  fs::create_directories(dir / "folder.bin");
  for (const std::string location : {"fifo.bin", "folder.bin"}) {
    SCOPED_TRACE(location);
    FifoReleaser release(dir / "fifo.bin");
    const auto t0 = std::chrono::steady_clock::now();
    const std::string what =
        error_of<DataError>([&] { weights_of(external_model(dir, location)); });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    EXPECT_CONTAINS(what, "'" + location + "'");
    EXPECT_CONTAINS(what, "not a regular file");
  }
  write_floats(dir / "w.bin", {1, 2});
  Builder b;
  b.input("x", {2}).output("y", {2});
  for (const std::string name : {"W", "V", "U"}) {
    auto* t = b.g->add_initializer();
    external(t, "w.bin");
    t->set_name(name);
  }
  b.node("Add", {"x", "W"}, {"a"});
  b.node("Add", {"a", "V"}, {"c"});
  b.node("Add", {"c", "U"}, {"y"});
  std::ofstream(dir / "model.onnx", std::ios::binary) << b.bytes();
  EXPECT_CONTAINS(error_of<DataError>([&] { ho::import((dir / "model.onnx").string()); }),
                  "tensors may not claim the same bytes");
  fs::remove_all(dir);
}

// A model or tensor file that is not a regular file (a FIFO, a folder) is a DataError naming
// it, at once: before, a FIFO blocked the import and /dev/zero was read until memory ran out.
TEST(OnnxImport, ModelAndTensorFilesAreRegularFiles) {
  const fs::path dir = fresh_dir("hetgraph-model-kinds");
  const fs::path fifo = dir / "fifo.onnx";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (int tensor = 0; tensor < 2; ++tensor) {
    for (const fs::path& p : {fifo, dir}) {
      SCOPED_TRACE(p.string() + (tensor ? " as a tensor" : " as a model"));
      FifoReleaser release(fifo);
      const auto t0 = std::chrono::steady_clock::now();
      const std::string what = error_of<DataError>(
          [&] { tensor ? (void)ho::read_tensor(p.string()) : (void)ho::import(p.string()); });
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
      EXPECT_CONTAINS(what, p.string() + ": ");
      EXPECT_CONTAINS(what, "not a regular file");
    }
  }
  fs::remove_all(dir);
}

// A Loop of Loops: each within the per-loop budget, 1100 x 1000 unrolled nodes in all. The
// budget bounds the whole import: an UnsupportedError naming the model and ImportOptions::
// max_nodes, soon; before, the import unrolled every node (and two more levels never ended).
TEST(OnnxImport, NestedLoopsAreBoundedForTheWholeImport) {
  Builder inner;
  inner.input("j", {}, 7).input("c2", {}, 9).input("h2", {1});
  inner.output("c2_out", {}, 9).output("h2_out", {1});
  inner.node("Identity", {"c2"}, {"c2_out"});
  inner.node("Identity", {"h2"}, {"h2_out"});
  Builder outer;
  outer.input("i", {}, 7).input("c", {}, 9).input("h", {1});
  outer.output("c_out", {}, 9).output("h_out", {1});
  outer.node("Identity", {"c"}, {"c_out"});
  Builder::attr_g(outer.node("Loop", {"N", "", "h"}, {"h_out"}), "body", inner);
  Builder b(16);
  b.input("x", {1}).output("y", {1});
  scalar_init(b, "M", 7, 1100);
  scalar_init(b, "N", 7, 1000);
  Builder::attr_g(b.node("Loop", {"M", "", "x"}, {"y"}), "body", outer);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string what = error_of<ho::UnsupportedError>([&] { b.import(); });
  EXPECT_CONTAINS(what, "test.onnx: ");
  EXPECT_CONTAINS(what, "ImportOptions::max_nodes");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

// The budgets are options: lowered, they stop smaller imports (nodes, bytes computed at
// import, time), each naming its option; raised, the import goes on.
TEST(OnnxImport, ImportBudgetsAreOptions) {
  const auto loop = [](std::int64_t trip) {
    Builder body;
    body.input("i", {}, 7).input("c", {}, 9).input("h", {2});
    body.output("c_out", {}, 9).output("h_out", {2});
    body.node("Identity", {"c"}, {"c_out"});
    body.node("Relu", {"h"}, {"h_out"});
    Builder b(16);
    b.input("x", {2}).output("y", {2});
    scalar_init(b, "M", 7, trip);
    Builder::attr_g(b.node("Loop", {"M", "", "x"}, {"y"}), "body", body);
    return b;
  };
  ho::ImportOptions o;
  o.max_nodes = 100;
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { loop(60).import(o); }),
                  "ImportOptions::max_nodes");
  o.max_nodes = 200;
  EXPECT_NO_THROW(loop(60).import(o));
  o = {};
  o.max_seconds = 0;
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { loop(2).import(o); }),
                  "ImportOptions::max_seconds");
  Builder big(16);
  big.input("x", {1}).output("y", {1000, 1000});
  big.ints("shape", {1000, 1000});
  big.node("ConstantOfShape", {"shape"}, {"z"});
  big.node("Add", {"x", "z"}, {"y"});
  o = {};
  o.max_host_bytes = 1 << 20;
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { big.import(o); }),
                  "ImportOptions::max_host_bytes");
}

// Declared dims too large for any tensor name the model and the input (before: an input of
// 2^40 elements imported and failed to compile naming neither, and 2^62 was a bare
// ShapeError); a node that would be that large names the ONNX node.
TEST(OnnxImport, HugeDeclaredDimsNameTheModelAndTheInput) {
  for (std::int64_t d : {std::int64_t{1} << 40, std::int64_t{1} << 62}) {
    SCOPED_TRACE(d);
    Builder b;
    b.input("x", {d}).output("y", {d});
    b.node("Relu", {"x"}, {"y"});
    const std::string what = error_of<ShapeError>([&] { b.import(); });
    EXPECT_CONTAINS(what, "test.onnx: input 'x'");
    EXPECT_CONTAINS(what, "ImportOptions::max_tensor_bytes");
  }
  Builder e(13);
  e.input("a", {1 << 20, 1}).input("b", {1, 1 << 20}).output("y", {1 << 20, 1 << 20});
  e.node("MatMul", {"a", "b"}, {"y"})->set_name("huge_matmul");
  const std::string what = error_of<ShapeError>([&] { e.import(); });
  EXPECT_CONTAINS(what, "test.onnx: ONNX node 'huge_matmul'");
  EXPECT_CONTAINS(what, "ImportOptions::max_tensor_bytes");
}

// ---- issue 46, second probe ----------------------------------------------------------------

// A Sum of 20000 inputs is a chain of 19999 adds, typed at the end: the importer typed it by
// recursion as deep as the chain, and the stack overflowed (a segmentation fault). It imports,
// and adds.
TEST(OnnxImport, ALongChainBuiltByOneNodeImports) {
  Builder b;
  b.input("x", {2}).output("y", {2});
  b.node("Sum", std::vector<std::string>(20000, "x"), {"y"});
  const ho::Model m = b.import();
  CompiledGraph cg = m.compile(GraphCompiler());
  cg.run({{"x", std::vector<float>{1, 0.5f}}});
  EXPECT_EQ(cg.read(m.outputs[0]), (std::vector<float>{20000, 10000}));
}

// Each value is defined once, with or without onnx::checker (ImportOptions::check): without
// it, two nodes computing 'y' imported and the later one silently was the output, and two
// inputs of one name were one input.
TEST(OnnxImport, AValueDefinedTwiceIsRefusedWithoutTheChecker) {
  ho::ImportOptions unchecked;
  unchecked.check = false;
  {
    Builder b;
    b.input("x", {2}).output("y", {2});
    b.node("Relu", {"x"}, {"y"});
    b.node("Neg", {"x"}, {"y"});
    const std::string what = error_of<DataError>([&] { b.import(unchecked); });
    EXPECT_CONTAINS(what, "test.onnx: ");
    EXPECT_CONTAINS(what, "(Neg-13) computes 'y', which the model defines already");
  }
  {
    Builder b;
    b.input("x", {2}).input("x", {3}).output("y", {2});
    b.node("Relu", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<DataError>([&] { b.import(unchecked); }), "declares input 'x' twice");
  }
  {
    Builder b;
    b.input("x", {2}).output("y", {2});
    b.node("Neg", {"x"}, {"x"});
    b.node("Relu", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<DataError>([&] { b.import(unchecked); }),
                    "computes 'x', which the model defines already");
  }
  {
    Builder b;
    b.input("x", {2}).output("y", {2});
    b.floats("W", {2}, {1, 2}).floats("W", {2}, {3, 4});
    b.node("Add", {"x", "W"}, {"y"});
    EXPECT_CONTAINS(error_of<DataError>([&] { b.import(unchecked); }),
                    "two initializers named 'W'");
  }
  // An initializer named like an input is that input's default value: still imports.
  Builder b;
  b.input("x", {2}).input("W", {2}).output("y", {2});
  b.floats("W", {2}, {1, 2});
  b.node("Add", {"x", "W"}, {"y"});
  EXPECT_NO_THROW(b.import(unchecked));
}

// External data's offset and length are integers, whole: "12abc" was read as 12 (the tensor
// then failed with a misleading byte count, or read other bytes than meant).
TEST(OnnxImport, ExternalDataNumbersAreWholeIntegers) {
  const fs::path dir = fresh_dir("hetgraph-external-numbers");
  write_floats(dir / "w.bin", {1, 2, 3, 4, 5, 6, 7, 8});
  for (const char* bad : {"12abc", "0x10", "", " 8", "8.0"}) {
    SCOPED_TRACE(bad);
    Builder b;
    b.input("x", {2}).output("y", {2});
    auto* t = b.g->add_initializer();
    external(t, "w.bin");
    auto* e = t->add_external_data();
    e->set_key("offset");
    e->set_value(bad);
    b.node("Add", {"x", "W"}, {"y"});
    std::ofstream(dir / "model.onnx", std::ios::binary | std::ios::trunc) << b.bytes();
    const std::string what =
        error_of<DataError>([&] { ho::import((dir / "model.onnx").string()); });
    EXPECT_CONTAINS(what, "bad external data offset '" + std::string(bad) + "'");
  }
  fs::remove_all(dir);
}

// An attribute list of a million entries in a message: its first and last few and its count,
// not all of it (a 3 MB message before).
TEST(OnnxImport, HugeAttributeListsAreShortInMessages) {
  Builder b;
  b.input("x", {2, 3}).output("y", {3, 2});
  auto* n = b.node("Transpose", {"x"}, {"y"});
  Builder::attr(n, "perm", std::vector<std::int64_t>(1'000'000, 0));
  ho::ImportOptions unchecked;
  unchecked.check = false;
  const std::string what = error_of<ShapeError>([&] { b.import(unchecked); });
  EXPECT_LT(what.size(), 400u) << what.substr(0, 400);
  EXPECT_CONTAINS(what, "perm [0, 0, 0, 0, 0, 0, 0, 0, ..., 0, 0] (1000000 values)");
}

// Two shapes for one input: the import took the last one, silently.
TEST(OnnxImport, AnInputGivenTwoShapesIsRefused) {
  Builder b;
  b.input("x", {"n"}).output("y", {"n"});
  b.node("Relu", {"x"}, {"y"});
  ho::ImportOptions o;
  o.input_shapes = {{"x", {3}}, {"x", {4}}};
  EXPECT_CONTAINS(error_of<ShapeError>([&] { b.import(o); }), "give input 'x' twice");
}
