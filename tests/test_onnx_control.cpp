// SPDX-License-Identifier: Apache-2.0
// ONNX import of control flow and sequences (src/onnx/ops_control.cpp): If, Loop and Scan
// unrolled at import, and sequences as lists known at import.
#include <algorithm>
#include <fstream>

#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// If's condition from the input's shape (folded at import): a batch of 3 takes one branch, a
// batch of 2 the other; a condition fed as a model input is asked for by name.
// Sequences as model inputs and outputs: ImportOptions::sequence_shapes gives the shapes of a
// sequence input's tensors, each an input "<name>[k]"; a sequence output is an output per
// tensor. Without the shapes, the error names the input and the option.
TEST(OnnxImport, SequencesInAndOutAreATensorEach) {
  Builder b(12);
  auto as_sequence = [](::onnx::ValueInfoProto* v, int elem) {
    v->mutable_type()
        ->mutable_sequence_type()
        ->mutable_elem_type()
        ->mutable_tensor_type()
        ->set_elem_type(elem);
  };
  as_sequence(b.g->add_input(), 1);
  b.g->mutable_input(0)->set_name("xs");
  b.input("t", {2});
  as_sequence(b.g->add_output(), 1);
  b.g->mutable_output(0)->set_name("ys");
  b.output("n", {}, 7);
  b.node("SequenceInsert", {"xs", "t"}, {"ys"});
  b.node("SequenceLength", {"ys"}, {"n"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }),
                  "input 'xs' is a sequence of tensors: give their shapes in "
                  "ImportOptions::sequence_shapes");
  ho::ImportOptions o;
  o.sequence_shapes = {{"xs", {Shape{3}, Shape{1}}}};
  const ho::Model m = b.import(o);
  ASSERT_EQ(m.input_info.size(), 3u);
  EXPECT_EQ(m.input_info[0].name, "xs[0]");
  EXPECT_EQ(m.input_info[1].shape, Shape{1});
  ASSERT_EQ(m.output_info.size(), 4u);  // ys[0..2], n
  EXPECT_EQ(m.output_info[2].name, "ys[2]");
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()), {});
    const std::vector<float> a{1, 2, 3}, c{4}, t{5, 6};
    cg.run({{"xs[0]", a}, {"xs[1]", c}, {"t", t}});
    EXPECT_EQ(cg.read("ys[0]"), a);
    EXPECT_EQ(cg.read("ys[1]"), c);
    EXPECT_EQ(cg.read("ys[2]"), t);
    EXPECT_EQ(cg.read_i32("n"), std::vector<std::int32_t>{3});
  }
  // What read_model describes before building: the same inputs.
  const std::string path = (fs::temp_directory_path() / "hetgraph-sequences.onnx").string();
  std::ofstream(path, std::ios::binary) << b.bytes();
  const ho::Model described = ho::read_model(path, o);
  ASSERT_EQ(described.input_info.size(), 3u);
  EXPECT_EQ(described.input_info[1].name, "xs[1]");
  fs::remove(path);
}

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

}  // namespace
