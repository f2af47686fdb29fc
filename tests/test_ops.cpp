// SPDX-License-Identifier: Apache-2.0
// Every op, forward, against the double-precision reference on every platform: broadcasting,
// size-1 and odd sizes, sizes large enough for the parallel paths. Each run also checks the
// memory planner (planner on and off must agree bitwise).
#include <cmath>
#include <limits>

#include "test_util.hpp"

using namespace hetgraph;
using testing_util::expect_error;
using testing_util::In;
using testing_util::PlatformCase;

namespace {

class OpTest : public ::testing::TestWithParam<PlatformCase> {
 protected:
  // Runs `out` of `g` on the platform and compares it with the reference.
  void check(const Graph& g, const std::vector<In>& ins, Node out, double rtol, double atol,
             const std::string& what) {
    testing_util::check_against_reference(GetParam(), g, ins, out, rtol, atol, what);
  }
};

std::uint32_t seed_of(const Shape& s, int salt) {
  return static_cast<std::uint32_t>(s.numel() * 131 + s.rank() * 17 + salt);
}

In rand_in(const std::string& name, Shape s, int salt, float lo = -1.0f, float hi = 1.0f) {
  return {name, s,
          testing_util::random_vec(static_cast<std::size_t>(s.numel()), seed_of(s, salt), lo, hi)};
}

// Values of magnitude in [0.5, 2] with random sign: safe divisors.
In divisor_in(const std::string& name, Shape s, int salt) {
  In in = rand_in(name, s, salt, 0.5f, 2.0f);
  for (std::size_t i = 0; i < in.values.size(); i += 2) in.values[i] = -in.values[i];
  return in;
}

const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{3, 5}, {3, 5}},
    {{4, 7}, {7}},
    {{4, 7}, {4, 1}},
    {{1, 7}, {5, 1}},
    {{}, {2, 3}},
    {{2, 3, 4}, {3, 1}},
    {{2, 1, 4, 3}, {5, 1, 3}},
    {{6}, {}},
    {{1}, {1}},
    {{300, 257}, {257}},
    {{129, 1}, {129, 301}},
    {{2, 3, 4, 5}, {2, 3, 4, 5}},
    {{8, 1, 9}, {1, 5, 1}},
    {{70000}, {70000}},
};

TEST_P(OpTest, BinaryOpsBroadcast) {
  for (const auto& [sa, sb] : kBroadcastPairs) {
    for (int op = 0; op < 5; ++op) {
      Graph g;
      auto a = g.input("a"), b = g.input("b");
      Node y;
      switch (op) {
        case 0:
          y = a + b;
          break;
        case 1:
          y = a - b;
          break;
        case 2:
          y = a * b;
          break;
        case 3:
          y = a / b;
          break;
        case 4:
          y = sa == sb ? axpby(a, b, 0.75f, -1.5f) : a + b;
          break;
      }
      const In ia = rand_in("a", sa, 1),
               ib = op == 3 ? divisor_in("b", sb, 2) : rand_in("b", sb, 2);
      check(g, {ia, ib}, y, 1e-6, 1e-6,
            std::string("binary op ") + std::to_string(op) + " " + sa.str() + " " + sb.str());
    }
  }
}

TEST_P(OpTest, UnaryOps) {
  for (Shape s : {Shape{}, Shape{1}, Shape{7}, Shape{33, 31}, Shape{2, 3, 4, 5}, Shape{100003}}) {
    struct Case {
      const char* name;
      Node (*f)(Node);
      float lo, hi;
      double rtol, atol;
    };
    const Case cases[] = {
        {"neg", [](Node x) { return -x; }, -3, 3, 0, 0},
        {"scale", [](Node x) { return scale(x, -2.5f); }, -3, 3, 1e-7, 0},
        {"exp", [](Node x) { return exp(x); }, -30, 30, 2e-7 * 4, 1e-30},
        {"log", [](Node x) { return log(x); }, 1e-4f, 100, 2e-7, 1e-7},
        {"sqrt", [](Node x) { return sqrt(x); }, 0, 100, 2e-7, 0},
        {"relu", [](Node x) { return relu(x); }, -3, 3, 0, 0},
        {"sigmoid", [](Node x) { return sigmoid(x); }, -20, 20, 1e-6, 1e-7},
        {"tanh", [](Node x) { return tanh(x); }, -12, 12, 1e-6, 1e-7},
        {"tanh_small", [](Node x) { return tanh(x); }, -0.7f, 0.7f, 1e-6, 1e-8},
    };
    for (const Case& c : cases) {
      Graph g;
      auto x = g.input("x");
      check(g, {rand_in("x", s, 3, c.lo, c.hi)}, c.f(x), c.rtol, c.atol,
            std::string(c.name) + " " + s.str());
    }
  }
}

TEST_P(OpTest, UnaryOpsAtTheEdges) {
  Graph g;
  auto x = g.input("x");
  auto e = exp(x), l = log(x), s = sigmoid(x), t = tanh(x);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {-200.0f, -88.0f, 0.0f, 1e-40f, 88.0f, 89.0f, 200.0f, inf, -inf};
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", {9}}}, {e, l, s, t});
  cg.run({{"x", v}});
  const auto ev = cg.read(e), lv = cg.read(l), sv = cg.read(s), tv = cg.read(t);
  EXPECT_EQ(ev[0], 0.0f);
  EXPECT_EQ(ev[2], 1.0f);
  EXPECT_EQ(ev[5], inf);
  EXPECT_EQ(ev[6], inf);
  EXPECT_EQ(ev[7], inf);
  EXPECT_EQ(ev[8], 0.0f);
  EXPECT_NEAR(ev[4] / std::exp(88.0f), 1.0f, 1e-6f);
  EXPECT_EQ(lv[2], -inf);
  EXPECT_TRUE(std::isnan(lv[0]));
  EXPECT_NEAR(lv[3], std::log(1e-40), 1e-4);  // subnormal input
  EXPECT_EQ(lv[7], inf);
  EXPECT_EQ(sv[0], 0.0f);
  EXPECT_EQ(sv[6], 1.0f);
  EXPECT_EQ(tv[0], -1.0f);
  EXPECT_EQ(tv[6], 1.0f);
  EXPECT_EQ(tv[2], 0.0f);
}

TEST_P(OpTest, MatmulAllTransposes) {
  const std::vector<std::array<std::int64_t, 3>> mkn = {
      {1, 1, 1}, {3, 5, 4}, {65, 129, 33}, {200, 100, 200}};
  for (const auto& [m, k, n] : mkn) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      Graph g;
      auto a = g.input("a"), b = g.input("b");
      auto c = matmul(a, b, ta, tb);
      check(g,
            {rand_in("a", ta ? Shape{k, m} : Shape{m, k}, 4),
             rand_in("b", tb ? Shape{n, k} : Shape{k, n}, 5)},
            c, 1e-5, 2e-6 * std::sqrt(static_cast<double>(k)),
            "matmul " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
                " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    }
  }
}

TEST_P(OpTest, MatmulBatched) {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{3, 4, 5}, {3, 5, 6}, false, false}, {{3, 5, 4}, {3, 5, 6}, true, false},
      {{3, 4, 5}, {3, 6, 5}, false, true},  {{3, 4, 5}, {5, 6}, false, false},
      {{3, 5, 4}, {6, 5}, true, true},      {{4, 5}, {3, 5, 6}, false, false},
      {{5, 4}, {3, 5, 6}, true, false},
  };
  for (const Case& c : cases) {
    Graph g;
    auto a = g.input("a"), b = g.input("b");
    check(g, {rand_in("a", c.a, 6), rand_in("b", c.b, 7)}, matmul(a, b, c.ta, c.tb), 1e-5, 1e-5,
          "batched matmul " + c.a.str() + " x " + c.b.str());
  }
}

TEST_P(OpTest, Reductions) {
  struct Case {
    Shape s;
    int axis;
  };
  const Case cases[] = {
      {{3, 4, 5}, 0},   {{3, 4, 5}, 1},       {{3, 4, 5}, 2},
      {{3, 4, 5}, -1},  {{2, 3, 4, 5}, 2},    {{2, 3, 4, 5}, kAllAxes},
      {{7}, 0},         {{7}, kAllAxes},      {{1000, 300}, 0},
      {{1000, 300}, 1}, {{200000}, kAllAxes}, {{1, 1}, 1},
      {{5, 1, 3}, 1},   {{600, 1100}, 0},
  };
  for (const Case& c : cases) {
    const std::int64_t n = c.axis == kAllAxes ? c.s.numel() : c.s.dim(c.axis);
    for (bool keep : {false, true}) {
      for (int op = 0; op < 3; ++op) {
        Graph g;
        auto x = g.input("x");
        Node y = op == 0   ? reduce_sum(x, c.axis, keep)
                 : op == 1 ? reduce_mean(x, c.axis, keep)
                           : reduce_max(x, c.axis, keep);
        check(g, {rand_in("x", c.s, 8)}, y, 1e-5, 1e-7 * static_cast<double>(n) + 1e-6,
              std::string(op == 0   ? "sum"
                          : op == 1 ? "mean"
                                    : "max") +
                  " " + c.s.str() + " axis " + std::to_string(c.axis) + (keep ? " keepdims" : ""));
      }
    }
  }
}

TEST_P(OpTest, SoftmaxAndLogSoftmax) {
  struct Case {
    Shape s;
    int axis;
  };
  const Case cases[] = {{{5, 10}, -1},  {{3, 1000}, 1}, {{7, 4}, 0},
                        {{2, 3, 4}, 1}, {{9}, 0},       {{64, 1}, -1}};
  for (const Case& c : cases) {
    for (bool logsm : {false, true}) {
      Graph g;
      auto x = g.input("x");
      check(g, {rand_in("x", c.s, 9, -8, 8)}, logsm ? log_softmax(x, c.axis) : softmax(x, c.axis),
            // log_softmax is x - lse: cancellation leaves an absolute error of ~ulp(|x|) = 1e-6.
            2e-6, logsm ? 2e-6 : 1e-7,
            std::string(logsm ? "log_softmax " : "softmax ") + c.s.str() + " axis " +
                std::to_string(c.axis));
    }
  }
}

TEST_P(OpTest, CrossEntropyFloatAndIntLabels) {
  for (Shape s : {Shape{5, 10}, Shape{64, 3}, Shape{2, 3, 7}, Shape{10}}) {
    const std::int64_t c = s.dim(-1), rows = s.numel() / c;
    // one-hot labels, soft labels
    for (bool soft : {false, true}) {
      Graph g;
      auto x = g.input("x"), y = g.input("y");
      In labels{"y", s, std::vector<float>(static_cast<std::size_t>(s.numel()), 0.0f)};
      if (soft) {
        labels = rand_in("y", s, 10, 0, 1);
      } else {
        for (std::int64_t r = 0; r < rows; ++r)
          labels.values[static_cast<std::size_t>(r * c + (r * 7) % c)] = 1.0f;
      }
      check(g, {rand_in("x", s, 11, -4, 4), labels}, cross_entropy(softmax(x), y), 1e-5, 1e-6,
            std::string("cross_entropy ") + (soft ? "soft " : "one-hot ") + s.str());
    }
    // int32 class ids
    Graph g;
    auto x = g.input("x"), y = g.input("y", DType::i32);
    auto loss = cross_entropy(softmax(x), y);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r)
      ids[static_cast<std::size_t>(r)] = static_cast<std::int32_t>((r * 5) % c);
    std::vector<std::int64_t> rd(s.dims().begin(), s.dims().end() - 1);
    const Shape row_shape{std::span<const std::int64_t>(rd)};
    const In xin = rand_in("x", s, 12, -4, 4);
    auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", s}, {"y", row_shape}}, {loss});
    cg.run({{"x", xin.values}, {"y", ids}});
    ref::Values vals{{"x", testing_util::to_ref(s, xin.values)},
                     {"y", ref::Array(row_shape, std::vector<double>(ids.begin(), ids.end()))}};
    const auto want = ref::evaluate(g, std::vector<Node>{loss}, vals);
    testing_util::expect_close(cg.read(loss), want[0], 1e-5, 1e-6,
                               "cross_entropy int labels " + s.str());
  }
}

TEST_P(OpTest, SliceConcatTransposeReshape) {
  {
    Graph g;
    auto x = g.input("x");
    const In xin = rand_in("x", {4, 6, 5}, 13);
    check(g, {xin}, slice(x, 0, 1, 3), 0, 0, "slice axis 0");
    check(g, {xin}, slice(x, 1, 2, 6), 0, 0, "slice axis 1");
    check(g, {xin}, slice(x, -1, -3, 5), 0, 0, "slice axis -1, negative begin");
    check(g, {xin}, slice(x, 2, 0, 1), 0, 0, "slice to size 1");
  }
  {
    Graph g;
    auto a = g.input("a"), b = g.input("b"), c = g.input("c");
    check(g,
          {rand_in("a", {2, 3, 4}, 14), rand_in("b", {2, 5, 4}, 15), rand_in("c", {2, 1, 4}, 16)},
          concat({a, b, c}, 1), 0, 0, "concat axis 1");
    Graph g2;
    auto p = g2.input("a"), q = g2.input("b");
    check(g2, {rand_in("a", {3, 4}, 17), rand_in("b", {2, 4}, 18)}, concat({p, q}, 0), 0, 0,
          "concat axis 0");
    Graph g3;
    auto u = g3.input("a"), v = g3.input("b");
    check(g3, {rand_in("a", {3, 4}, 17), rand_in("b", {3, 7}, 18)}, concat({u, v}, -1), 0, 0,
          "concat axis -1");
  }
  struct T {
    Shape s;
    std::vector<int> perm;
  };
  for (const T& t :
       {T{{37, 53}, {}}, T{{300, 200}, {1, 0}}, T{{2, 3, 4}, {2, 0, 1}}, T{{2, 3, 4}, {0, 2, 1}},
        T{{2, 3, 4, 5}, {3, 1, 0, 2}}, T{{2, 3, 4, 5}, {0, 1, 3, 2}}, T{{6}, {}}}) {
    Graph g;
    auto x = g.input("x");
    check(g, {rand_in("x", t.s, 19)}, transpose(x, t.perm), 0, 0, "transpose " + t.s.str());
  }
  {
    Graph g;
    auto x = g.input("x");
    auto y = reshape(x, {-1, 6}) + 1.0f;  // a view read by an op
    check(g, {rand_in("x", {4, 3, 2}, 20)}, y, 0, 0, "reshape view");
    check(g, {rand_in("x", {4, 3, 2}, 20)}, reshape(x, {2, 12}), 0, 0, "reshape fetched");
  }
}

TEST_P(OpTest, Int32DataMovement) {
  Graph g;
  auto ids = g.input("ids", DType::i32);
  auto s = slice(ids, 1, 1, 3);
  auto t = transpose(s);
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"ids", {2, 4}}}, {t});
  cg.run({{"ids", std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7}}});
  EXPECT_EQ(cg.read_i32(t), (std::vector<std::int32_t>{1, 5, 2, 6}));
}

TEST_P(OpTest, ConstantsAndScalarOperators) {
  Graph g;
  auto x = g.input("x");
  auto c = g.constant({2, 2}, {1, 2, 3, 4});
  auto y = (2.0f * x + c - 1.0f) / 2.0f + (3.0f - x) * 0.5f + 1.0f / (x + 4.0f) + (x - 1.0f) -
           (1.0f + x);
  check(g, {rand_in("x", {2, 2}, 21)}, y, 1e-6, 1e-6, "scalar operators");
}

// Empty tensors (a zero dim) are values, as ONNX allows: what reads one folds at compile time
// (an empty result, a reduction's identity, a concatenation without it), so no kernel sees one.
TEST_P(OpTest, EmptyTensorsAreValues) {
  Graph g;
  auto e = g.input("e");  // [0, 3]
  auto x = g.input("x");  // [2, 3]
  auto a = g.input("a");  // [2, 0]
  auto b = g.input("b");  // [0, 4]
  auto k = g.constant_i32({0, 3}, {});
  auto ew = (relu(e) * 2.0f + slice(x, 0, 0, 1)).named("elementwise");  // [0, 3]
  auto t = transpose(exp(e));                                           // [3, 0]
  auto first = concat({e, x}, 0);                                       // x alone
  auto middle = concat({x, sigmoid(e), x * 2.0f}, 0).named("middle");   // x, 2x
  auto sum = reduce_sum(e, 0), mean = reduce_mean(e, 0), max = reduce_max(e, 0),
       prod = reduce_prod(e, 0), all = reduce_sum(e);
  auto ints = concat({k, g.constant_i32({1, 3}, {7, 8, 9})}, 0);
  auto product = matmul(a, b);  // K = 0: zeros
  auto used = reduce_sum(x) + reduce_sum(product);
  const std::vector<Node> outs{ew,  t,    first, middle, sum,     mean,
                               max, prod, all,   ints,   product, used};
  const InputShapes shapes{{"e", {0, 3}}, {"x", {2, 3}}, {"a", {2, 0}}, {"b", {0, 4}}};
  CompiledGraph cg = GraphCompiler(GetParam().make()).compile(g, shapes, outs);
  const std::vector<float> xv{1, 2, 3, 4, 5, 6}, none;
  for (int run = 0; run < 2; ++run) {
    cg.run({{"e", none}, {"x", xv}, {"a", none}, {"b", none}});
    EXPECT_TRUE(cg.read(ew).empty());
    EXPECT_TRUE(cg.read(t).empty());
    EXPECT_EQ(cg.read(first), xv);
    EXPECT_EQ(cg.read(middle), (std::vector<float>{1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12}));
    EXPECT_EQ(cg.read(sum), std::vector<float>(3, 0.0f));
    for (float v : cg.read(mean)) EXPECT_TRUE(std::isnan(v));
    EXPECT_EQ(cg.read(max), std::vector<float>(3, -std::numeric_limits<float>::infinity()));
    EXPECT_EQ(cg.read(prod), std::vector<float>(3, 1.0f));
    EXPECT_EQ(cg.read(all), std::vector<float>{0.0f});
    EXPECT_EQ(cg.read_i32(ints), (std::vector<std::int32_t>{7, 8, 9}));
    EXPECT_EQ(cg.read(product), std::vector<float>(8, 0.0f));
    EXPECT_EQ(cg.read(used), std::vector<float>{21.0f});
  }
  // A wrong feed is still refused, with the input's shape.
  expect_error<FeedError>(
      [&] {
        cg.run({{"e", xv}, {"x", xv}, {"a", none}, {"b", none}});
      },
      {"'e'", "[0, 3]"});
}

// An op that would have to compute from an empty input (not an empty result, a reduction or
// a concatenation) says so, naming the node, its op and the shapes.
TEST(EmptyTensors, AnOpThatCannotTakeOneNamesIt) {
  Graph g;
  auto x = g.input("x");
  auto w = g.input("w");
  auto y = conv2d(x, w).named("conv");
  expect_error<ShapeError>(
      [&] {
        GraphCompiler().compile(g, {{"x", {1, 0, 4, 4}}, {"w", {2, 0, 3, 3}}}, {y});
      },
      {"'conv'", "conv2d", "[1, 0, 4, 4]", "empty"});
  // Variables hold state across runs: an empty one is refused where it is declared.
  Graph h;
  auto v = h.variable("v", {0, 2});
  expect_error<ShapeError>([&] { GraphCompiler().compile(h, {}, {v + 1.0f}); },
                           {"'v'", "[0, 2]", "empty"});
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, OpTest, ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

}  // namespace

namespace {

// Matmul fusion: an elementwise epilogue and/or an accumulation folded into the product. The
// fused graph must match the reference (and the unfused compile) within float tolerance.
TEST_P(OpTest, FusedMatmulEpiloguesAndAccumulation) {
  struct Epi {
    const char* name;
    Node (*f)(Node);
  };
  const Epi epis[] = {{"exp", [](Node v) { return exp(v * 0.1f); }},  // scale, then exp of it
                      {"log", [](Node v) { return log(v); }},
                      {"sqrt", [](Node v) { return sqrt(v); }},
                      {"relu", [](Node v) { return relu(v - 6.0f); }},
                      {"sigmoid", [](Node v) { return sigmoid(v); }},
                      {"tanh", [](Node v) { return tanh(v * 0.2f); }},
                      {"neg", [](Node v) { return -v; }}};
  for (const Epi& e : epis) {
    for (bool acc : {false, true}) {
      Graph g;
      auto a = g.input("a"), b = g.input("b"), c = g.input("c");
      Node y = e.f(matmul(a, b, false, true));
      if (acc) y = c + y;
      // positive products keep log/sqrt defined
      check(g,
            {rand_in("a", {5, 7}, 40, 0.1f, 1.0f), rand_in("b", {6, 7}, 41, 0.1f, 1.0f),
             rand_in("c", {5, 6}, 42)},
            y, 2e-5, 2e-5, std::string("fused ") + e.name + (acc ? " + accumulate" : ""));
    }
  }
  // an accumulation chain through identity views (autodiff's summed weight gradients)
  Graph g;
  auto x1 = g.input("x1"), x2 = g.input("x2"), x3 = g.input("x3"), d = g.input("d");
  auto s = matmul(x1, d, true, false) + matmul(x2, d, true, false) + matmul(x3, d, true, false);
  check(g,
        {rand_in("x1", {16, 40}, 43), rand_in("x2", {16, 40}, 44), rand_in("x3", {16, 40}, 45),
         rand_in("d", {16, 48}, 46)},
        s, 1e-5, 1e-5, "accumulated products");
}

TEST(Fusion, RewritesAndTheFusedNodeNamesItsFate) {
  Graph g;
  auto a = g.input("a"), b = g.input("b"), c = g.input("c");
  auto mm = matmul(a, b).named("product");
  auto y = (c + log(mm)).named("y");
  auto cg = GraphCompiler().compile(g, {{"a", {4, 3}}, {"b", {3, 5}}, {"c", {4, 5}}}, {y});
  EXPECT_EQ(cg.kernel_name(y), "product_then_epilogue");
  const std::vector<float> av(12, 1.0f), bv(15, 1.0f), cv(20, 0.5f);
  cg.run({{"a", av}, {"b", bv}, {"c", cv}});
  for (float v : cg.read(y)) EXPECT_NEAR(v, 0.5f + std::log(3.0f), 1e-6);
  try {
    cg.read(mm);
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("'product'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fused into 'y'"), std::string::npos) << e.what();
  }
  // fetched products are not fused; neither is anything with fusion off
  auto kept = GraphCompiler().compile(g, {{"a", {4, 3}}, {"b", {3, 5}}, {"c", {4, 5}}}, {y, mm});
  EXPECT_EQ(kept.kernel_name(y), "broadcast_simd");
  auto off = GraphCompiler(Platform::cpu(), {.fuse = false})
                 .compile(g, {{"a", {4, 3}}, {"b", {3, 5}}, {"c", {4, 5}}}, {y});
  EXPECT_EQ(off.kernel_name(y), "broadcast_simd");
}

}  // namespace
