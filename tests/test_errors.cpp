// SPDX-License-Identifier: Apache-2.0
// The error catalogue: every user mistake gives a typed hetgraph::Error whose message names the
// node, the op and the shapes (or the feed / file), and nothing crashes.
#include <thread>

#include "compiler/attrs.hpp"
#include "distributed/comm.hpp"
#include "hetgraph/onnx.hpp"
#include "test_util.hpp"

using namespace hetgraph;

namespace {

using testing_util::expect_error;

CompiledGraph compile(const Graph& g, const InputShapes& s, std::initializer_list<Node> f) {
  return GraphCompiler().compile(g, s, f);
}

// ---- shapes, one case per op family --------------------------------------------------------

TEST(ShapeErrors, BinaryOpsThatDoNotBroadcast) {
  Graph g;
  auto a = g.input("a"), b = g.input("b");
  auto y = (a + b).named("sum");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"a", {2, 3}}, {"b", {4, 3}}}, {y});
      },
      {"'sum'", "add", "[2, 3]", "[4, 3]", "do not broadcast"});
}

TEST(ShapeErrors, MatmulInnerDimensions) {
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {785, 10});
  auto y = matmul(x, W).named("logits");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {500, 784}}}, {y});
      },
      {"'logits'", "matmul", "[500, 784]", "[785, 10]", "inner dimensions"});
  Graph g2;
  auto v = g2.input("v");
  auto z = matmul(v, v).named("mm");
  expect_error<ShapeError>(
      [&] {
        compile(g2, {{"v", {5}}}, {z});
      },
      {"'mm'", "matmul", "[5]", "rank"});
  Graph g3;
  auto p = g3.input("p"), q = g3.input("q");
  auto r = matmul(p, q).named("bmm");
  expect_error<ShapeError>(
      [&] {
        compile(g3, {{"p", {2, 3, 4}}, {"q", {3, 4, 5}}}, {r});
      },
      {"'bmm'", "batch", "[2, 3, 4]", "[3, 4, 5]"});
}

TEST(ShapeErrors, ReductionAndSoftmaxAxes) {
  Graph g;
  auto x = g.input("x");
  auto r = reduce_sum(x, 2).named("r");
  auto s = softmax(x, -3).named("s");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {3, 4}}}, {r});
      },
      {"'r'", "reduce_sum", "axis 2", "[3, 4]"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {3, 4}}}, {s});
      },
      {"'s'", "softmax", "axis -3", "[3, 4]"});
}

TEST(ShapeErrors, CrossEntropyLabels) {
  Graph g;
  auto p = g.input("p"), y = g.input("y"), ids = g.input("ids", DType::i32);
  auto l1 = cross_entropy(p, y).named("xent");
  auto l2 = cross_entropy(p, ids).named("xent_ids");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"p", {8, 10}}, {"y", {8, 9}}}, {l1});
      },
      {"'xent'", "cross_entropy", "[8, 10]", "[8, 9]"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"p", {8, 10}}, {"ids", {8, 10}}}, {l2});
      },
      {"'xent_ids'", "int32 labels", "[8]"});
}

TEST(ShapeErrors, DataMovement) {
  Graph g;
  auto x = g.input("x"), y = g.input("y");
  auto s = slice(x, 1, 2, 9).named("sl");
  auto c = concat({x, y}, 0).named("cat");
  auto t = transpose(x, {0, 0}).named("tr");
  auto r = reshape(x, {5, 5}).named("rs");
  const InputShapes shapes{{"x", {3, 4}}, {"y", {3, 5}}};
  expect_error<ShapeError>([&] { compile(g, shapes, {s}); },
                           {"'sl'", "slice", "[3, 4]", "out of range"});
  expect_error<ShapeError>([&] { compile(g, shapes, {c}); },
                           {"'cat'", "concat", "[3, 4]", "[3, 5]"});
  expect_error<ShapeError>([&] { compile(g, shapes, {t}); }, {"'tr'", "transpose", "permutation"});
  expect_error<ShapeError>([&] { compile(g, shapes, {r}); }, {"'rs'", "reshape", "25", "12"});
}

TEST(ShapeErrors, SameShapeOpsAndFloatOnlyOps) {
  Graph g;
  auto a = g.input("a"), b = g.input("b"), ids = g.input("ids", DType::i32);
  auto u = axpby(a, b, 1, 1).named("upd");
  auto e = exp(ids).named("e");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"a", {3}}, {"b", {4}}}, {u});
      },
      {"'upd'", "axpby", "[3]", "[4]"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"ids", {3}}}, {e});
      },
      {"'e'", "exp", "float", "i32"});
}

TEST(ShapeErrors, OnnxElementwise) {
  Graph g;
  auto a = g.input("a"), b = g.input("b"), c = g.input("c", DType::i32);
  auto ids = g.input("ids", DType::i32);
  auto wf = where(a, a, b).named("w_float_cond");
  auto wm = where(c, a, ids).named("w_mixed");
  auto wb = where(c, a, b).named("w_shapes");
  auto mx = maximum(a, b).named("mx");
  auto mi = minimum(ids, a).named("mi");
  auto ad = add(a, c).named("ad");
  auto pw = pow(a, ids).named("pw");
  auto cl = clip(ids, 0, 1).named("cl");
  const InputShapes s{{"a", {2, 3}}, {"b", {4, 3}}, {"c", {3}}, {"ids", {3}}};
  expect_error<ShapeError>([&] { compile(g, s, {wf}); },
                           {"'w_float_cond'", "where", "condition must be int32", "f32"});
  expect_error<ShapeError>([&] { compile(g, s, {wm}); },
                           {"'w_mixed'", "where", "one type", "f32", "i32"});
  expect_error<ShapeError>([&] { compile(g, s, {wb}); },
                           {"'w_shapes'", "where", "[3]", "[2, 3]", "[4, 3]", "do not broadcast"});
  expect_error<ShapeError>([&] { compile(g, s, {mx}); },
                           {"'mx'", "maximum", "[2, 3]", "[4, 3]", "do not broadcast"});
  expect_error<ShapeError>([&] { compile(g, s, {mi}); },
                           {"'mi'", "minimum", "two floats or two int32s", "i32", "f32"});
  expect_error<ShapeError>([&] { compile(g, s, {ad}); },
                           {"'ad'", "add", "two floats or two int32s", "f32", "i32"});
  expect_error<ShapeError>([&] { compile(g, s, {pw}); }, {"'pw'", "pow", "float", "i32"});
  expect_error<ShapeError>([&] { compile(g, s, {cl}); }, {"'cl'", "clip", "float", "i32"});
}

TEST(ShapeErrors, ComparisonsAndLogic) {
  Graph g;
  auto a = g.input("a"), b = g.input("b"), ids = g.input("ids", DType::i32);
  auto mixed = less(a, ids).named("lt_mixed");
  auto shapes = equal(a, b).named("eq_shapes");
  auto floats = logical_and(a, a).named("and_floats");
  auto one_float = logical_xor(ids, a).named("xor_float");
  auto not_float = logical_not(b).named("not_float");
  const InputShapes s{{"a", {2, 3}}, {"b", {4, 3}}, {"ids", {3}}};
  expect_error<ShapeError>([&] { compile(g, s, {mixed}); },
                           {"'lt_mixed'", "less", "one type", "f32", "i32"});
  expect_error<ShapeError>([&] { compile(g, s, {shapes}); },
                           {"'eq_shapes'", "equal", "[2, 3]", "[4, 3]", "do not broadcast"});
  expect_error<ShapeError>([&] { compile(g, s, {floats}); },
                           {"'and_floats'", "logical_and", "int32", "f32"});
  expect_error<ShapeError>([&] { compile(g, s, {one_float}); },
                           {"'xor_float'", "logical_xor", "int32", "i32", "f32"});
  // logical_not(x) is equal(x, 0) with an int32 zero: a float x is refused by equal.
  expect_error<ShapeError>([&] { compile(g, s, {not_float}); },
                           {"'not_float'", "equal", "one type", "f32", "i32"});
}

TEST(ShapeErrors, ArgMaxAndArgMin) {
  Graph g;
  auto x = g.input("x"), s = g.input("s");
  auto past = argmax(x, 2).named("am");
  auto before = argmin(x, -3, true).named("an");
  auto scalar = argmax(s).named("as");
  auto flat = argmin(s, kAllAxes).named("af");
  auto huge = argmax(x, 1).named("ah");
  const InputShapes shapes{{"x", {3, 4}}, {"s", {}}};
  expect_error<ShapeError>([&] { compile(g, shapes, {past}); },
                           {"'am'", "argmax", "axis 2", "out of range", "[3, 4]"});
  expect_error<ShapeError>([&] { compile(g, shapes, {before}); },
                           {"'an'", "argmin", "axis -3", "out of range", "[3, 4]"});
  expect_error<ShapeError>([&] { compile(g, shapes, {scalar}); }, {"'as'", "argmax", "scalar"});
  expect_error<ShapeError>([&] { compile(g, shapes, {flat}); }, {"'af'", "argmin", "scalar"});
  // Positions are int32: a longer axis is refused before any memory is planned.
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {2, 3000000000}}}, {huge});
      },
      {"'ah'", "argmax", "3000000000 elements along axis 1", "int32"});
}

// Positions carry no gradient: a loss that depends on x only through them has none for x.
TEST(GraphErrors, NoGradientThroughArgMax) {
  Graph g;
  auto x = g.input("x");
  auto loss = reduce_sum(cast(argmax(x), DType::f32)).named("loss");
  expect_error<GraphError>([&] { gradients(loss, {x}); }, {"no gradient reaches", "'x'", "'loss'"});
}

// k must lie in [1, size of the axis]; the axis in range; the input not a scalar.
TEST(ShapeErrors, TopK) {
  Graph g;
  auto x = g.input("x"), s = g.input("s");
  auto none = top_k_indices(x, 0).named("k0");
  auto many = top_k_indices(x, 4, 0).named("k4");
  auto negative = top_k_indices(x, -2, 1, false).named("kneg");
  auto past = top_k_indices(x, 1, 2).named("ax2");
  auto before = top_k_indices(x, 1, -3).named("axm3");
  auto scalar = top_k_indices(s, 1).named("ks");
  auto huge = top_k_indices(x, 5, 1).named("kh");
  const InputShapes shapes{{"x", {3, 4}}, {"s", {}}};
  expect_error<ShapeError>([&] { compile(g, shapes, {none}); },
                           {"'k0'", "top_k", "k = 0 is outside [1, 4]", "axis -1", "[3, 4]"});
  expect_error<ShapeError>([&] { compile(g, shapes, {many}); },
                           {"'k4'", "top_k", "k = 4 is outside [1, 3]", "axis 0", "[3, 4]"});
  expect_error<ShapeError>([&] { compile(g, shapes, {negative}); },
                           {"'kneg'", "top_k", "k = -2 is outside [1, 4]"});
  expect_error<ShapeError>([&] { compile(g, shapes, {past}); },
                           {"'ax2'", "top_k", "axis 2", "out of range", "[3, 4]"});
  expect_error<ShapeError>([&] { compile(g, shapes, {before}); },
                           {"'axm3'", "top_k", "axis -3", "out of range", "[3, 4]"});
  expect_error<ShapeError>([&] { compile(g, shapes, {scalar}); }, {"'ks'", "top_k", "scalar"});
  // The values are a gather of the positions: a bad k is the top_k node's error there too.
  auto values = top_k(x, 9).values.named("vals");
  expect_error<ShapeError>([&] { compile(g, shapes, {values}); },
                           {"top_k", "k = 9 is outside [1, 4]", "[3, 4]"});
  // Positions are int32: a longer axis is refused before any memory is planned.
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {2, 3000000000}}}, {huge});
      },
      {"'kh'", "top_k", "3000000000 elements along axis 1", "int32"});
}

// Positions carry no gradient (the values do, through gather_elements).
TEST(GraphErrors, NoGradientThroughTopKIndices) {
  Graph g;
  auto x = g.input("x");
  auto loss = reduce_sum(cast(top_k_indices(x, 2), DType::f32)).named("loss");
  expect_error<GraphError>([&] { gradients(loss, {x}); }, {"no gradient reaches", "'x'", "'loss'"});
}

TEST(ShapeErrors, Gather) {
  Graph g;
  auto x = g.input("x"), f = g.input("f"), ids = g.input("ids", DType::i32);
  auto by_float = gather(x, f).named("g_float");
  auto too_big = gather(x, ids, 1).named("g_rank");
  auto bad_axis = gather(x, ids, 3).named("g_axis");
  const InputShapes s{{"x", {2, 3, 4}}, {"f", {2}}, {"ids", {1, 1, 1, 1, 1, 2, 2}}};
  expect_error<ShapeError>([&] { compile(g, s, {by_float}); },
                           {"'g_float'", "gather", "int32", "f32"});
  expect_error<ShapeError>([&] { compile(g, s, {too_big}); },
                           {"'g_rank'", "gather", "[2, 3, 4]", "[1, 1, 1, 1, 1, 2, 2]", "rank 9"});
  expect_error<ShapeError>([&] { compile(g, s, {bad_axis}); },
                           {"'g_axis'", "gather", "axis 3", "rank 3"});
}

TEST(ShapeErrors, GatherAndScatterElements) {
  Graph g;
  auto x = g.input("x"), f = g.input("f"), ids = g.input("ids", DType::i32),
       wide = g.input("wide", DType::i32), flat = g.input("flat", DType::i32), u = g.input("u"),
       iu = g.input("iu", DType::i32);
  auto by_float = gather_elements(x, f).named("ge_float");
  auto rank = gather_elements(x, flat, 0).named("ge_rank");
  auto larger = gather_elements(x, wide, 0).named("ge_larger");
  auto bad_axis = gather_elements(x, ids, -3).named("ge_axis");
  auto bad_updates = scatter_elements(x, ids, x, 1).named("se_updates");
  auto int_updates = scatter_elements(x, ids, iu, 1).named("se_type");
  auto ok = scatter_elements(x, ids, u, 1, ScatterReduction::mul).named("se_ok");
  const InputShapes s{{"x", {2, 3}}, {"f", {2, 3}}, {"ids", {2, 5}}, {"wide", {2, 4}},
                      {"flat", {6}}, {"u", {2, 5}}, {"iu", {2, 5}}};
  expect_error<ShapeError>([&] { compile(g, s, {by_float}); },
                           {"'ge_float'", "gather_elements", "int32", "f32"});
  expect_error<ShapeError>([&] { compile(g, s, {rank}); },
                           {"'ge_rank'", "gather_elements", "[6]", "rank 2", "[2, 3]"});
  // Not broadcasting: indices larger than the data on an axis other than `axis`.
  expect_error<ShapeError>([&] { compile(g, s, {larger}); },
                           {"'ge_larger'", "gather_elements", "[2, 4]", "[2, 3]", "axis 1"});
  expect_error<ShapeError>([&] { compile(g, s, {bad_axis}); },
                           {"'ge_axis'", "gather_elements", "axis -3", "rank 2"});
  expect_error<ShapeError>([&] { compile(g, s, {bad_updates}); },
                           {"'se_updates'", "scatter_elements", "[2, 5]", "[2, 3]"});
  expect_error<ShapeError>([&] { compile(g, s, {int_updates}); },
                           {"'se_type'", "scatter_elements", "i32", "f32"});
  // Indices longer than the data along the axis are fine; mul has no gradient.
  compile(g, s, {ok});
  expect_error<GraphError>([&] { gradients(reduce_sum(ok), {x}); }, {"mul"});
}

TEST(ShapeErrors, StridedSlice) {
  Graph g;
  auto x = g.input("x");
  auto zero = strided_slice(x, {0}, {3}, {1}, {0}).named("step0");
  auto twice = strided_slice(x, {0, 1}, {3, 3}, {1, -1}).named("twice");
  auto empty = strided_slice(x, {2}, {1}, {0}).named("empty");
  auto counts = strided_slice(x, {0, 1}, {3}).named("counts");
  auto axis = strided_slice(x, {0}, {1}, {2}).named("axis");
  const InputShapes s{{"x", {3, 4}}};
  expect_error<ShapeError>([&] { compile(g, s, {zero}); },
                           {"'step0'", "strided_slice", "[3, 4]", "step along axis 1 is 0"});
  expect_error<ShapeError>([&] { compile(g, s, {twice}); }, {"'twice'", "axis 1 is sliced twice"});
  expect_error<ShapeError>([&] { compile(g, s, {empty}); },
                           {"'empty'", "axis 0 (size 3) from 2 to 1 by 1 is empty"});
  expect_error<ShapeError>([&] { compile(g, s, {counts}); }, {"'counts'", "2 starts, 1 ends"});
  expect_error<ShapeError>([&] { compile(g, s, {axis}); }, {"'axis'", "axis 2", "rank 2"});
}

TEST(ShapeErrors, ShapesThemselves) {
  expect_error<ShapeError>([] { Shape s{1, 2, 3, 4, 5, 1, 1, 1, 1}; }, {"rank 9", "0 to 8"});
  Graph g;
  auto x = g.input("x");
  auto y = relu(x);
  Graph h;
  auto v = h.variable("v", {3, 0});
  expect_error<ShapeError>([&] { compile(h, {}, {relu(v)}); }, {"'v'", "[3, 0]", "is empty"});
  expect_error<ShapeError>([&] { compile(g, {}, {y}); }, {"input 'x' has no shape"});
  expect_error<GraphError>(
      [&] {
        compile(g, {{"x", {3}}, {"z", {3}}}, {y});
      },
      {"'z'", "not an input"});
  expect_error<ShapeError>([&] { g.constant({2, 2}, {1, 2, 3}); }, {"[2, 2]", "4 values", "3"});
}

// ---- graph structure --------------------------------------------------------------------------

TEST(ShapeErrors, Conv2d) {
  Graph g;
  auto x = g.input("x"), w = g.input("w"), b = g.input("b"), ids = g.input("ids", DType::i32);
  auto y = conv2d(x, w).named("conv");
  auto yb = conv2d(x, w, b).named("conv_b");
  auto yi = conv2d(ids, w).named("conv_i");
  auto strided = conv2d(x, w, {.stride = {0, 1}}).named("conv_s");
  auto dilated = conv2d(x, w, {.dilation = {1, -2}}).named("conv_d");
  auto padded = conv2d(x, w, {.padding = {-1, 0}}).named("conv_p");
  auto wide = conv2d(x, w, {.padding = {0, 1}, .dilation = {1, 5}}).named("conv_w");
  const InputShapes ok{{"x", {2, 3, 8, 8}}, {"w", {4, 3, 3, 3}}, {"b", {4}}};
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {3, 8, 8}}, {"w", {4, 3, 3, 3}}}, {y});
      },
      {"'conv'", "conv2d", "rank 4", "[3, 8, 8]"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {2, 3, 8, 8}}, {"w", {4, 3, 3}}}, {y});
      },
      {"'conv'", "weights", "[4, 3, 3]"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {2, 5, 8, 8}}, {"w", {4, 3, 3, 3}}}, {y});
      },
      {"'conv'", "channel mismatch", "[2, 5, 8, 8]", "5 channels", "expect 3"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {2, 3, 8, 8}}, {"w", {4, 3, 3, 3}}, {"b", {3}}}, {yb});
      },
      {"'conv_b'", "bias", "[4]", "[3]"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"ids", {2, 3, 8, 8}}, {"w", {4, 3, 3, 3}}}, {yi});
      },
      {"'conv_i'", "float", "i32"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {2, 3, 2, 8}}, {"w", {4, 3, 3, 3}}}, {y});
      },
      {"'conv'", "kernel spans 3 rows", "padded input's 2"});
  expect_error<ShapeError>([&] { compile(g, ok, {wide}); },
                           {"'conv_w'", "spans 11 columns (with dilation)", "padded input's 10"});
  expect_error<ShapeError>([&] { compile(g, ok, {strided}); }, {"'conv_s'", "stride", "(0, 1)"});
  expect_error<ShapeError>([&] { compile(g, ok, {dilated}); }, {"'conv_d'", "dilation", "-2"});
  expect_error<ShapeError>([&] { compile(g, ok, {padded}); }, {"'conv_p'", "padding", ">= 0"});
}

TEST(ShapeErrors, Pooling) {
  Graph g;
  auto x = g.input("x");
  auto m = max_pool2d(x, {.kernel = {3, 3}}).named("mp");
  auto a = avg_pool2d(x, {.kernel = {2, 2}, .padding = {2, 0}}).named("ap");
  auto z = max_pool2d(x, {.kernel = {0, 2}}).named("zero");
  auto s = avg_pool2d(x, {.kernel = {2, 2}, .stride = {1, -1}}).named("neg_stride");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {2, 3, 2, 8}}}, {m});
      },
      {"'mp'", "max_pool2d", "[2, 3, 2, 8]", "kernel spans 3 rows"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {8, 8}}}, {m});
      },
      {"'mp'", "max_pool2d input", "rank 4", "[8, 8]"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 1, 8, 8}}}, {a});
      },
      {"'ap'", "avg_pool2d", "smaller than the pooling kernel", "(2, 0)"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 1, 8, 8}}}, {z});
      },
      {"'zero'", "kernel must be >= 1"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 1, 8, 8}}}, {s});
      },
      {"'neg_stride'", "stride must be >= 1"});
}

// Groups, auto_pad, ceil_mode and conv_transpose2d: each bad combination names the node.
TEST(ShapeErrors, ConvGroupsAndPads) {
  Graph g;
  auto x = g.input("x"), w = g.input("w"), b = g.input("b");
  auto grouped = conv2d(x, w, {.groups = 2}).named("grp");
  auto zero = conv2d(x, w, {.groups = 0}).named("grp0");
  auto both = conv2d(x, w, {.padding = {1, 1}, .auto_pad = AutoPad::same_upper}).named("both");
  auto ct = conv_transpose2d(x, w, b, {.stride = {2, 2}, .output_padding = {2, 0}}).named("ct");
  auto ct_c = conv_transpose2d(x, w).named("ct_c");
  auto ceil_only_pad =
      max_pool2d(x, {.kernel = {2, 2}, .stride = {3, 3}, .padding = {1, 1}, .ceil_mode = true})
          .named("ceil");
  auto avg_dil = avg_pool2d(x, {.kernel = {2, 2}, .dilation = {2, 1}}).named("avg_dil");
  // Padding below the kernel, but the dilated taps of the first window skip a one-row image.
  auto dil_only_pad =
      max_pool2d(x, {.kernel = {2, 1}, .padding = {1, 0}, .dilation = {2, 1}}).named("dil_pad");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 6, 8, 8}}, {"w", {4, 2, 3, 3}}}, {grouped});
      },
      {"'grp'", "channel mismatch", "expect 4", "2 per group, 2 groups"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 6, 8, 8}}, {"w", {3, 3, 3, 3}}}, {grouped});
      },
      {"'grp'", "2 groups must divide", "6 channels", "3 output channels"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 3, 8, 8}}, {"w", {3, 3, 3, 3}}}, {zero});
      },
      {"'grp0'", "groups must be >= 1", "0"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 3, 8, 8}}, {"w", {3, 3, 3, 3}}}, {both});
      },
      {"'both'", "auto_pad", "(1, 1)"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 3, 4, 4}}, {"w", {3, 2, 3, 3}}, {"b", {2}}}, {ct});
      },
      {"'ct'", "output_padding (2, 0)", "smaller than the stride (2, 2)"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 3, 4, 4}}, {"w", {4, 2, 3, 3}}}, {ct_c});
      },
      {"'ct_c'", "channel mismatch", "3 channels", "expect 4"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 1, 4, 4}}}, {ceil_only_pad});
      },
      {"'ceil'", "holds only padding", "ceil_mode"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 1, 8, 8}}}, {avg_dil});
      },
      {"'avg_dil'", "avg_pool2d takes no dilation", "(2, 1)"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {1, 1, 1, 4}}}, {dil_only_pad});
      },
      {"'dil_pad'", "window 0 of the rows holds only padding", "dilation (2, 1)"});
}

TEST(ShapeErrors, Embedding) {
  Graph g;
  auto t = g.input("t"), fidx = g.input("f"), ids = g.input("ids", DType::i32);
  auto e1 = embedding(t, fidx).named("emb_f");
  auto e2 = embedding(t, ids).named("emb");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"t", {10, 4}}, {"f", {3}}}, {e1});
      },
      {"'emb_f'", "embedding", "int32", "f32"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"t", {10, 4, 2}}, {"ids", {3}}}, {e2});
      },
      {"'emb'", "table", "[rows, dim]", "[10, 4, 2]"});
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"t", {10, 4}}, {"ids", {2, 2, 2, 2, 1, 1, 1, 1}}}, {e2});
      },
      {"'emb'", "[2, 2, 2, 2, 1, 1, 1, 1]", "rank 8"});
  auto cg = compile(g, {{"t", {10, 4}}, {"ids", {2, 3}}}, {e2});
  const std::vector<float> table(40, 1.0f);
  expect_error<FeedError>(
      [&] {
        cg.run({{"t", table}, {"ids", std::vector<std::int32_t>{0, 1, 2, 3, 4, 10}}});
      },
      {"'emb'", "index 10", "position 5", "[2, 3]", "[0, 10)"});
  cg.run({{"t", table}, {"ids", std::vector<std::int32_t>{0, 1, 2, 3, 4, 9}}});  // still usable
}

// A communicator of `size` ranks that is only compiled against (shape inference rejects first).
class FakeComm final : public detail::Comm {
 public:
  explicit FakeComm(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::string name() const override { return "fake of " + std::to_string(size_); }
  std::unique_ptr<detail::CommChannel> open_channel(std::string) override {
    throw CommunicationError("fake: compile only");
  }
  void post(detail::CommChannel&, const detail::CollectiveCall&, detail::CommDone&,
            std::uint64_t) override {}
  void abort(const std::string&) override {}
  detail::CommChannel& host_channel() override { throw CommunicationError("fake"); }

 private:
  int size_;
};

TEST(ShapeErrors, Collectives) {
  const distributed::Communicator three(std::make_shared<FakeComm>(3));
  Graph g;
  auto x = g.input("x");
  auto ids = g.input("ids", DType::i32);
  auto scattered = distributed::reduce_scatter(x, three).named("rs");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {4, 2}}}, {scattered});
      },
      {"'rs'", "reduce_scatter", "[4, 2]", "multiple of 3"});
  auto gathered = distributed::allgather(x, three).named("ag");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"x", {}}}, {gathered});
      },
      {"'ag'", "allgather", "rank >= 1"});
  auto summed = distributed::allreduce(ids, distributed::Communicator::self()).named("ar");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"ids", {4}}}, {summed});
      },
      {"'ar'", "allreduce takes float tensors", "i32"});
  // Roots outside the communicator, when the graph is built.
  expect_error<GraphError>([&] { distributed::broadcast(x, three, 3); },
                           {"broadcast", "root 3", "fake of 3"});
  expect_error<GraphError>([&] { distributed::reduce(x, distributed::Communicator::self(), -1); },
                           {"reduce", "root -1", "self"});
  expect_error<GraphError>([&] { distributed::Communicator(nullptr); }, {"no communicator"});
  // A data-parallel step with no room for a gradient.
  auto W = g.variable("W", {2, 2});
  expect_error<GraphError>(
      [&] {
        sgd(reduce_sum(matmul(x, W)), {W}, 0.1f, 0.0f, DataParallel{three, 0});
      },
      {"bucket_bytes"});
}

TEST(GraphErrors, CycleWithoutAssignNamesItsNodes) {
  Graph g;
  auto x = g.input("x");
  auto a = (x + 1.0f).named("a");
  auto b = (a * 2.0f).named("b");
  auto c = relu(b).named("c");
  a.set_input(0, c);  // a = c + 1: a -> b -> c -> a
  expect_error<GraphError>(
      [&] {
        compile(g, {{"x", {3}}}, {c});
      },
      {"cycle", "'a'", "'b'", "'c'", "assign"});
}

TEST(GraphErrors, AssignMisuse) {
  Graph g;
  auto x = g.input("x");
  auto v = g.variable("v", {3});
  expect_error<GraphError>([&] { assign(x, x + 1.0f); }, {"'x'", "not a variable"});
  auto bad = assign(v, g.input("w")).named("upd");
  expect_error<ShapeError>(
      [&] {
        compile(g, {{"w", {4}}}, {bad});
      },
      {"'upd'", "assign", "[3]", "[4]"});
  auto twice = group({assign(v, v + 1.0f), assign(v, v * 2.0f)});
  expect_error<GraphError>([&] { compile(g, {}, {twice}); }, {"'v'", "assigned twice"});
}

TEST(GraphErrors, EmptyGraphForeignNodesAndNames) {
  Graph empty;
  expect_error<GraphError>([&] { GraphCompiler().compile(empty, {}, {}); }, {"empty graph"});
  Graph g1, g2;
  auto a = g1.input("a");
  auto b = g2.input("b");
  expect_error<GraphError>([&] { (void)(a + b); }, {"another graph"});
  expect_error<GraphError>([&] { compile(g2, {{"b", {1}}}, {a}); }, {"another graph"});
  expect_error<GraphError>([&] { g1.input("a"); }, {"'a'", "already used"});
  expect_error<GraphError>([&] { (void)relu(Node{}); }, {"invalid"});
  expect_error<GraphError>([&] { g1.find("nope"); }, {"'nope'"});
}

TEST(GraphErrors, ReadingPrunedClobberedOrDataless) {
  Graph g;
  auto x = g.input("x");
  auto pruned = exp(x).named("pruned");
  auto a = tanh(x).named("inner");
  auto y = relu(a * 2.0f);
  auto v = g.variable("v", {3});
  auto step = assign(v, x).named("step");
  auto cg = compile(g, {{"x", {3}}}, {y, step});
  cg.run({{"x", std::vector<float>{1, 2, 3}}});
  expect_error<GraphError>([&] { cg.read(pruned); }, {"'pruned'", "pruned"});
  expect_error<GraphError>([&] { cg.read(a); }, {"'inner'", "not kept", "Fetch it"});
  expect_error<GraphError>([&] { cg.read(step); }, {"'step'", "no data"});
  expect_error<GraphError>([&] { cg.read("nothing"); }, {"'nothing'"});
  std::vector<float> small(2);
  expect_error<FeedError>([&] { cg.read(y, small); }, {"[3]", "3 elements", "has 2"});
}

TEST(GraphErrors, WritingConstants) {
  Graph g;
  auto c = g.constant({2}, {1, 2});
  auto y = c + 1.0f;
  auto cg = compile(g, {}, {y, c});
  expect_error<GraphError>([&] { cg.write(c, std::vector<float>{3, 4}); }, {"constant"});
}

// ---- feeds ----------------------------------------------------------------------------------

TEST(FeedErrors, UnknownMissingWrongSizeWrongType) {
  Graph g;
  auto x = g.input("x"), y = g.input("y");
  auto z = x + y;
  auto cg = compile(g, {{"x", {4}}, {"y", {4}}}, {z});
  const std::vector<float> four(4, 1.0f), three(3, 1.0f);
  const std::vector<std::int32_t> ints(4, 1);
  expect_error<FeedError>(
      [&] {
        cg.run({{"x", four}, {"y", four}, {"q", four}});
      },
      {"unknown feed 'q'", "'x'", "'y'"});
  expect_error<FeedError>([&] { cg.run({{"x", four}}); }, {"missing feed", "'y'", "[4]"});
  expect_error<FeedError>(
      [&] {
        cg.run({{"x", four}, {"y", three}});
      },
      {"'y'", "3 elements", "[4]", "needs 4"});
  expect_error<FeedError>([&] { cg.run({{"x", four}, {"y", ints}}); }, {"'y'", "i32", "f32"});
  expect_error<FeedError>(
      [&] {
        cg.run({{"x", four}, {"x", four}, {"y", four}});
      },
      {"'x'", "twice"});
  expect_error<FeedError>([&] { cg.mapped_input("nope"); }, {"'nope'", "not an input"});
  expect_error<FeedError>([&] { cg.mapped_input_i32("x"); }, {"'x'", "f32"});
  // the graph is still usable after every one of these
  cg.run({{"x", four}, {"y", four}});
  EXPECT_EQ(cg.read(z), (std::vector<float>{2, 2, 2, 2}));
}

TEST(FeedErrors, KernelErrorsReachRunAndTheGraphStaysUsable) {
  Graph g;
  auto x = g.input("x"), ids = g.input("ids", DType::i32);
  auto loss = reduce_mean(cross_entropy(softmax(x), ids)).named("loss");
  auto cg = compile(g, {{"x", {2, 3}}, {"ids", {2}}}, {loss});
  const std::vector<float> xv(6, 0.0f);
  expect_error<FeedError>(
      [&] {
        cg.run({{"x", xv}, {"ids", std::vector<std::int32_t>{0, 7}}});
      },
      {"cross_entropy", "class id 7", "row 1", "[0, 3)"});
  expect_error<FeedError>(
      [&] {
        cg.run_async({{"x", xv}, {"ids", std::vector<std::int32_t>{-1, 0}}});
        cg.wait();
      },
      {"class id -1"});
  cg.run({{"x", xv}, {"ids", std::vector<std::int32_t>{0, 2}}});
  EXPECT_NEAR(cg.read(loss)[0], std::log(3.0f), 1e-6);
}

// gather_elements / scatter_elements indices outside [-n, n): fed ones are checked before the
// run, computed ones by the kernels (on OpenCL, the device's status slot); a FeedError naming
// the node, the index and its position, and the graph stays usable.
TEST(FeedErrors, ElementIndicesOutsideTheAxisOnEveryPlatform) {
  for (const testing_util::PlatformCase& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    Graph g;
    auto x = g.variable("x", {3, 5}, Initializer::uniform(-1, 1, 3));
    auto f = g.input("f"), u = g.input("u"), fed = g.input("fed", DType::i32);
    auto ids = cast(f, DType::i32);  // computed
    auto picked = gather_elements(x, ids, 1).named("picked");
    auto scattered = scatter_elements(x, ids, u, -1, ScatterReduction::add).named("scattered");
    auto by_fed = gather_elements(x, fed, 0).named("by_fed");
    auto dx = gradients(reduce_sum(picked) + reduce_sum(scattered), {x})[0];
    auto cg = GraphCompiler(pc.make()).compile(g, {{"f", {3, 2}}, {"u", {3, 2}}, {"fed", {2, 5}}},
                                               {dx, scattered, by_fed});
    std::vector<float> fv{0, 4, -5, 1, 2, 2};
    const std::vector<float> uv(6, 0.5f);
    std::vector<std::int32_t> fedv{0, 2, -3, 1, 1, 2, 2, 0, 0, -1};
    cg.run({{"f", fv}, {"u", uv}, {"fed", fedv}});
    fv[3] = 5;
    expect_error<FeedError>(
        [&] {
          cg.run({{"f", fv}, {"u", uv}, {"fed", fedv}});
        },
        {"index 5 at position 3", "[-5, 5)"});
    fv[3] = -6;
    expect_error<FeedError>(
        [&] {
          cg.run({{"f", fv}, {"u", uv}, {"fed", fedv}});
        },
        {"index -6 at position 3", "[-5, 5)"});
    fv[3] = 1;
    fedv[7] = 3;
    expect_error<FeedError>(
        [&] {
          cg.run({{"f", fv}, {"u", uv}, {"fed", fedv}});
        },
        {"'by_fed'", "index 3 at position 7", "[-3, 3)"});
    fedv[7] = -3;
    cg.run({{"f", fv}, {"u", uv}, {"fed", fedv}});
    const std::vector<float> xv = cg.read(x), y = cg.read(by_fed);
    EXPECT_EQ(y[7], xv[2]);  // by_fed[1, 2] = x[-3 + 3, 2]
  }
}

TEST(Concurrency, OneGraphFromSeveralThreadsIsSafeOrRejected) {
  Graph g;
  auto x = g.input("x");
  Node y = x;
  for (int i = 0; i < 50; ++i) y = tanh(y) + 0.5f;
  auto cg = compile(g, {{"x", {10000}}}, {y});
  const std::vector<float> xv(10000, 0.25f);
  std::atomic<int> ok{0}, rejected{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        try {
          cg.run({{"x", xv}});
          ++ok;
        } catch (const UsageError& e) {
          EXPECT_NE(std::string(e.what()).find("in use by another thread"), std::string::npos);
          ++rejected;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok + rejected, 80);
  EXPECT_GT(ok.load(), 0);
  cg.run({{"x", xv}});
  const auto v = cg.read(y);
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [&](float f) { return f == v[0]; }));
}

}  // namespace

namespace {
TEST(FeedErrors, FeedsOfPrunedInputsAreIgnored) {
  Graph g;
  auto x = g.input("x");
  g.input("labels");  // not needed by the fetch below
  auto y = relu(x);
  auto cg = GraphCompiler().compile(g, {{"x", {2}}}, {y});
  cg.run({{"x", std::vector<float>{-1, 1}}, {"labels", std::vector<float>{1, 2, 3}}});
  EXPECT_EQ(cg.read(y), (std::vector<float>{0, 1}));
}
}  // namespace

// Issue 46, second probe: an input given two shapes was compiled with the first, silently.
TEST(GraphErrors, AnInputGivenTwoShapes) {
  Graph g;
  auto x = g.input("x");
  auto y = tanh(x);
  expect_error<GraphError>(
      [&] {
        (void)GraphCompiler().compile(g, {{"x", {2}}, {"x", {3}}}, {y});
      },
      {"input 'x' twice"});
}

// Issue 46, second probe: a file written to an empty path put a temporary ".tmp.<pid>.<nonce>"
// in the working folder and failed naming it; one written into a missing folder named the
// temporary too. Each says what is wrong with the path it was given.
TEST(DataErrors, WritesToAnEmptyPathOrAMissingFolder) {
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {2});
  auto y = (x + W).named("y");
  auto cg = GraphCompiler().compile(g, {{"x", {2}}}, {y});
  expect_error<DataError>([&] { cg.save(""); }, {"empty path"});
  expect_error<DataError>(
      [&] {
        onnx::export_model(g, std::vector<Node>{y}, {{"x", {2}}}, "");
      },
      {"empty path"});
  expect_error<DataError>([&] { cg.start_trace(""); }, {"empty path"});
  const std::string missing = "/tmp/hetgraph-no-such-folder-46/sub/w.ckpt";
  try {
    cg.save(missing);
    ADD_FAILURE() << "saved into a missing folder";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(missing + ": cannot create a file in /tmp/hetgraph-no-such-folder-46/sub"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find(".tmp."), std::string::npos) << m;
  }
}

// ---- the library's own bugs --------------------------------------------------------------

// A broken invariant is an InternalError: a caller's catch of hetgraph::Error takes it too, and
// its message says the bug is the library's.
TEST(InternalErrors, AreErrorsThatSayInternal) {
  expect_error<Error>([] { throw InternalError("a test invariant"); },
                      {"internal: a test invariant"});
  // A real site: attributes read as a kind they do not hold.
  const detail::Attrs none;
  expect_error<InternalError>([&] { (void)none.get<detail::Permutation>(); },
                              {"internal: ", "permutation"});
}
