// SPDX-License-Identifier: Apache-2.0
// ONNX export (src/onnx/exporter.cpp): graphs exported and imported back to the same outputs on
// every platform, and tensor files.
#include <onnx/defs/schema.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>

#include "compiler/graph_impl.hpp"
#include "onnx_test_util.hpp"
#include "random_dag.hpp"

namespace {

using namespace onnx_test;

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
// one with schema versions (unary or binary) comes back as the same op: a new op's ONNX support is
// its row.
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

// silu has no ONNX op: it exports as its row's body, Mul(x, Sigmoid(x)), which imports as those
// two nodes and runs as one silu node again (fuse_silu), to the same values.
TEST(OnnxExport, SiluExportsAsItsBodyAndComesBack) {
  Graph g;
  const Node a = g.input("a");
  const Node y = silu(a).named("y");
  const InputShapes shapes{{"a", {4, 25}}};
  const std::string bytes = ho::export_bytes(g, std::vector<Node>{y}, shapes);
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  std::multiset<std::string> types;
  for (const auto& n : proto.graph().node()) types.insert(n.op_type());
  EXPECT_EQ(types, (std::multiset<std::string>{"Mul", "Sigmoid"}));
  const ho::Model m =
      ho::import_bytes(std::as_bytes(std::span<const char>(bytes)), {}, "silu.onnx");
  const std::vector<float> av = testing_util::random_vec(100, 54, -8, 8);
  auto ours = GraphCompiler().compile(g, shapes, {y});
  ours.run({{"a", av}});
  CompiledGraph back = m.compile(GraphCompiler());
  back.run({{m.inputs[0].name(), av}});
  EXPECT_EQ(back.read(m.outputs[0]), ours.read(y));
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
  // uint32 and uint64 are held as int32 too, their type kept; values above int32 (a uint64
  // above 2^63 reads as a negative int64) are refused, with the value as the file has it.
  for (const std::string type : {"uint32", "uint64"}) {
    t.onnx_type = type;
    t.i32 = {0, 7, 65535, 2147483647};
    ho::write_tensor(path, t);
    const ho::TensorData u = ho::read_tensor(path);
    EXPECT_EQ(u.onnx_type, type);
    EXPECT_EQ(u.dtype, DType::i32);
    EXPECT_EQ(u.i32, t.i32);
  }
  for (const std::uint64_t v : {std::uint64_t{1} << 31, ~std::uint64_t{0}}) {
    ::onnx::TensorProto u64;
    u64.set_data_type(13);  // uint64
    u64.add_dims(1);
    u64.add_uint64_data(v);
    std::ofstream(path, std::ios::binary) << u64.SerializeAsString();
    const std::string e = error_of<DataError>([&] { ho::read_tensor(path); });
    EXPECT_CONTAINS(e, std::to_string(v));
    EXPECT_CONTAINS(e, "outside int32");
  }
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
