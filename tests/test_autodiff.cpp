// SPDX-License-Identifier: Apache-2.0
// Gradients of every differentiable op, checked two ways on every platform:
//  - against finite differences of the double-precision reference (eps 1e-6, rtol 1e-3,
//    atol 1e-5): the rule is right;
//  - against central differences of the platform's own float32 forward pass (eps 1e-3,
//    tolerance 2e-3): the compiled gradient graph agrees with the compiled forward graph.
// Inputs are sampled away from kinks (relu at 0, ties of max, log/sqrt/div near 0).
#include <cmath>
#include <functional>

#include "common/executable.hpp"
#include "hetgraph/autodiff.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using testing_util::In;
using testing_util::PlatformCase;

namespace {

struct GradCase {
  std::string name;
  std::vector<In> inputs;
  // Builds the op under test from the input nodes (in `inputs` order).
  std::function<Node(Graph&, const std::vector<Node>&)> build;
};

using testing_util::away_from_zero;
using testing_util::distinct;
using testing_util::one_hot;
using testing_util::uniform;

std::vector<GradCase> cases() {
  std::vector<GradCase> c;
  auto bin = [&](std::string n, Shape sa, Shape sb, Node (*f)(Node, Node), bool safe_b = false) {
    c.push_back({n + " " + sa.str() + " " + sb.str(),
                 {uniform("a", sa, -1, 1, 1),
                  safe_b ? away_from_zero("b", sb, 0.5f, 2, 2) : uniform("b", sb, -1, 1, 2)},
                 [f](Graph&, const std::vector<Node>& in) { return f(in[0], in[1]); }});
  };
  for (auto [sa, sb] : std::vector<std::pair<Shape, Shape>>{
           {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{}, {2, 3}}, {{2, 3, 4}, {3, 1}}}) {
    bin("add", sa, sb, add);
    bin("sub", sa, sb, sub);
    bin("mul", sa, sb, mul);
    bin("div", sa, sb, div, true);
  }
  auto un = [&](std::string n, In x, std::function<Node(Node)> f) {
    c.push_back({n, {std::move(x)}, [f](Graph&, const std::vector<Node>& in) { return f(in[0]); }});
  };
  un("neg", uniform("x", {3, 5}, -1, 1, 3), [](Node x) { return -x; });
  un("scale", uniform("x", {3, 5}, -1, 1, 3), [](Node x) { return scale(x, -1.5f); });
  un("exp", uniform("x", {3, 5}, -2, 2, 4), [](Node x) { return exp(x); });
  un("log", uniform("x", {3, 5}, 0.5f, 3, 5), [](Node x) { return log(x); });
  un("sqrt", uniform("x", {3, 5}, 0.5f, 3, 6), [](Node x) { return sqrt(x); });
  un("relu", away_from_zero("x", {3, 5}, 0.1f, 1, 7), [](Node x) { return relu(x); });
  un("sigmoid", uniform("x", {3, 5}, -3, 3, 8), [](Node x) { return sigmoid(x); });
  un("tanh", uniform("x", {3, 5}, -2, 2, 9), [](Node x) { return tanh(x); });
  c.push_back(
      {"axpby",
       {uniform("a", {4, 3}, -1, 1, 10), uniform("b", {4, 3}, -1, 1, 11)},
       [](Graph&, const std::vector<Node>& in) { return axpby(in[0], in[1], 0.7f, -1.3f); }});
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    c.push_back(
        {"matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb),
         {uniform("a", ta ? Shape{5, 3} : Shape{3, 5}, -1, 1, 12),
          uniform("b", tb ? Shape{4, 5} : Shape{5, 4}, -1, 1, 13)},
         [ta, tb](Graph&, const std::vector<Node>& in) { return matmul(in[0], in[1], ta, tb); }});
  }
  c.push_back({"matmul batched",
               {uniform("a", {2, 3, 4}, -1, 1, 14), uniform("b", {2, 4, 5}, -1, 1, 15)},
               [](Graph&, const std::vector<Node>& in) { return matmul(in[0], in[1]); }});
  c.push_back({"matmul batch x shared",
               {uniform("a", {2, 3, 4}, -1, 1, 16), uniform("b", {4, 5}, -1, 1, 17)},
               [](Graph&, const std::vector<Node>& in) { return matmul(in[0], in[1]); }});
  c.push_back(
      {"matmul shared x batch, transposed",
       {uniform("a", {4, 3}, -1, 1, 18), uniform("b", {2, 5, 4}, -1, 1, 19)},
       [](Graph&, const std::vector<Node>& in) { return matmul(in[0], in[1], true, true); }});
  for (int axis : {0, 1, -1, kAllAxes}) {
    for (bool keep : {false, true}) {
      const std::string tag = " axis " + std::to_string(axis) + (keep ? " keep" : "");
      c.push_back(
          {"reduce_sum" + tag,
           {uniform("x", {3, 4, 2}, -1, 1, 20)},
           [=](Graph&, const std::vector<Node>& in) { return reduce_sum(in[0], axis, keep); }});
      c.push_back(
          {"reduce_mean" + tag,
           {uniform("x", {3, 4, 2}, -1, 1, 21)},
           [=](Graph&, const std::vector<Node>& in) { return reduce_mean(in[0], axis, keep); }});
      c.push_back(
          {"reduce_max" + tag,
           {distinct("x", {3, 4, 2}, 22)},
           [=](Graph&, const std::vector<Node>& in) { return reduce_max(in[0], axis, keep); }});
    }
  }
  for (int axis : {-1, 0}) {
    c.push_back({"softmax axis " + std::to_string(axis),
                 {uniform("x", {3, 5}, -2, 2, 23)},
                 [=](Graph&, const std::vector<Node>& in) { return softmax(in[0], axis); }});
    c.push_back({"log_softmax axis " + std::to_string(axis),
                 {uniform("x", {3, 5}, -2, 2, 24)},
                 [=](Graph&, const std::vector<Node>& in) { return log_softmax(in[0], axis); }});
  }
  c.push_back({"cross_entropy(softmax) fused",
               {uniform("z", {4, 5}, -2, 2, 25), one_hot("y", {4, 5})},
               [](Graph& g, const std::vector<Node>& in) {
                 return cross_entropy(softmax(in[0]), g.find("y"));
               }});
  c.push_back({"cross_entropy(softmax) soft labels",
               {uniform("z", {4, 5}, -2, 2, 26), uniform("y", {4, 5}, 0, 1, 27)},
               [](Graph& g, const std::vector<Node>& in) {
                 return cross_entropy(softmax(in[0]), g.find("y"));
               }});
  c.push_back({"cross_entropy(sigmoid) unfused",
               {uniform("z", {4, 5}, -2, 2, 28), uniform("y", {4, 5}, 0, 1, 29)},
               [](Graph& g, const std::vector<Node>& in) {
                 return cross_entropy(sigmoid(in[0]), g.find("y"));
               }});
  c.push_back({"slice", {uniform("x", {4, 6}, -1, 1, 30)}, [](Graph&, const std::vector<Node>& in) {
                 return slice(in[0], 1, 1, -2);
               }});
  c.push_back({"concat",
               {uniform("a", {2, 3}, -1, 1, 31), uniform("b", {2, 2}, -1, 1, 32)},
               [](Graph&, const std::vector<Node>& in) {
                 return concat({in[0], in[1], in[0]}, 1);
               }});
  c.push_back(
      {"transpose", {uniform("x", {2, 3, 4}, -1, 1, 33)}, [](Graph&, const std::vector<Node>& in) {
         return transpose(in[0], {2, 0, 1});
       }});
  c.push_back(
      {"reshape", {uniform("x", {2, 6}, -1, 1, 34)}, [](Graph&, const std::vector<Node>& in) {
         return reshape(in[0], {3, -1}) * 2.0f;
       }});
  // images and embeddings
  auto conv = [&](std::string n, Shape xs, Shape ws, Conv2dOptions o, bool bias) {
    std::vector<In> ins{uniform("x", xs, -1, 1, 40), uniform("w", ws, -1, 1, 41)};
    if (bias) ins.push_back(uniform("b", {ws[0]}, -1, 1, 42));
    c.push_back({n, ins, [o, bias](Graph&, const std::vector<Node>& in) {
                   return bias ? conv2d(in[0], in[1], in[2], o) : conv2d(in[0], in[1], o);
                 }});
  };
  conv("conv2d 3x3 + bias", {2, 3, 5, 5}, {4, 3, 3, 3}, {}, true);
  conv("conv2d stride 2, padding 1", {1, 2, 6, 5}, {3, 2, 3, 3},
       {.stride = {2, 2}, .padding = {1, 1}}, true);
  conv("conv2d dilation 2, asymmetric padding", {1, 2, 7, 6}, {2, 2, 2, 3},
       {.stride = {1, 2}, .padding = {1, 0}, .padding_end = {0, 2}, .dilation = {2, 2}}, false);
  conv("conv2d 1x1", {2, 4, 3, 3}, {3, 4, 1, 1}, {}, true);
  auto pool = [&](std::string n, bool max, Pool2dOptions o) {
    c.push_back(
        {n, {distinct("x", {2, 2, 5, 6}, 43)}, [max, o](Graph&, const std::vector<Node>& in) {
           return max ? max_pool2d(in[0], o) : avg_pool2d(in[0], o);
         }});
  };
  pool("max_pool2d 2x2", true, {});
  pool("max_pool2d 3x3 stride 2 padding 1", true,
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
  pool("max_pool2d overlapping 2x3", true, {.kernel = {2, 3}, .stride = {1, 1}});
  pool("avg_pool2d 2x2", false, {});
  pool("avg_pool2d 3x3 padding excluded", false,
       {.kernel = {3, 3}, .stride = {2, 1}, .padding = {1, 1}});
  pool("avg_pool2d 3x3 padding included", false,
       {.kernel = {3, 3}, .stride = {1, 2}, .padding = {1, 1}, .count_include_pad = true});
  c.push_back({"embedding with repeated indices",
               {uniform("t", {7, 3}, -1, 1, 44)},
               [](Graph& g, const std::vector<Node>& in) {
                 return embedding(in[0], g.constant_i32({2, 4}, {6, 0, 3, 3, 0, 6, 6, 1}));
               }});
  c.push_back({"shared input (x*x + exp(x))",
               {uniform("x", {3, 3}, -1, 1, 35)},
               [](Graph&, const std::vector<Node>& in) { return in[0] * in[0] + exp(in[0]); }});
  return c;
}

class GradTest : public ::testing::TestWithParam<PlatformCase> {};

// Differentiates loss = sum(op(inputs) * R) for a fixed random R and checks both ways.
void check_case(const PlatformCase& pc, const GradCase& gc) {
  SCOPED_TRACE(gc.name + " on " + pc.name);
  Graph g;
  std::vector<Node> ins;
  ref::Values values;
  InputShapes shapes;
  std::vector<FeedItem> feeds;
  for (const In& in : gc.inputs) {
    ins.push_back(g.input(in.name));
    values[in.name] = testing_util::to_ref(in.shape, in.values);
    shapes.push_back({in.name, in.shape});
    feeds.push_back({in.name, in.values});
  }
  const Node out = gc.build(g, ins);
  const ref::Array out_ref = ref::evaluate(g, std::vector<Node>{out}, values)[0];
  const auto weights = testing_util::random_vec(out_ref.size(), 99, -1, 1);
  const Node loss = reduce_sum(out * g.constant(out_ref.shape, weights));
  // Only inputs that are not labels are differentiated.
  std::vector<Node> wrt;
  for (const Node& n : ins) {
    if (n.name() != "y") wrt.push_back(n);
  }
  const auto grads = gradients(loss, wrt);
  auto cg = GraphCompiler(pc.make()).compile(g, shapes, grads);
  cg.run(feeds);

  auto fwd = GraphCompiler(pc.make()).compile(g, shapes, {loss});
  for (std::size_t w = 0; w < wrt.size(); ++w) {
    const std::vector<float> analytic = cg.read(grads[w]);
    const std::string name = wrt[w].name();
    // (1) double-precision finite differences of the reference
    ref::Array fd(values[name].shape);
    for (std::size_t i = 0; i < fd.size(); ++i) {
      ref::Values plus = values, minus = values;
      plus[name].v[i] += 1e-6;
      minus[name].v[i] -= 1e-6;
      const double fp = ref::evaluate(g, std::vector<Node>{loss}, plus)[0].v[0];
      const double fm = ref::evaluate(g, std::vector<Node>{loss}, minus)[0].v[0];
      fd.v[i] = (fp - fm) / 2e-6;
    }
    testing_util::expect_close(analytic, fd, 1e-3, 1e-5,
                               "d/d" + name + " vs double finite differences");
    // (2) float32 central differences of the compiled forward pass
    ref::Array fd32(values[name].shape);
    std::vector<FeedItem> pf = feeds;
    for (std::size_t i = 0; i < fd32.size(); ++i) {
      std::vector<float> x(values[name].v.begin(), values[name].v.end());
      std::size_t k = 0;
      while (gc.inputs[k].name != name) ++k;
      auto eval = [&](float delta) {
        std::vector<float> xp = x;
        xp[i] += delta;
        pf[k] = {name, xp};
        fwd.run(pf);
        return static_cast<double>(fwd.read(loss)[0]);
      };
      const float eps = 1e-3f;
      fd32.v[i] = (eval(eps) - eval(-eps)) / (2.0 * eps);
    }
    testing_util::expect_close(analytic, fd32, 2e-3, 2e-3,
                               "d/d" + name + " vs float32 central differences");
  }
}

TEST_P(GradTest, EveryDifferentiableOp) {
  for (const GradCase& gc : cases()) check_case(GetParam(), gc);
}

TEST_P(GradTest, FusedSoftmaxCrossEntropyIsStable) {
  // Logits so large that softmax saturates to exact 0/1 in float: log(p) would be -inf, the
  // unfused gradient -y/p infinite. The fused rule gives p - y, finite.
  Graph g;
  auto z = g.input("z"), y = g.input("y");
  auto loss = reduce_mean(cross_entropy(softmax(z), y));
  auto dz = gradients(loss, {z})[0];
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"z", {2, 3}}, {"y", {2, 3}}}, {loss, dz});
  cg.run({{"z", std::vector<float>{1000, 0, -1000, -500, 500, 0}},
          {"y", std::vector<float>{0, 0, 1, 1, 0, 0}}});
  const auto d = cg.read(dz);
  const std::vector<float> want{0.5f, 0, -0.5f, -0.5f, 0.5f, 0};  // (p - y) / 2 rows
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d[i], want[i], 1e-6) << i;
  EXPECT_TRUE(std::isfinite(cg.read(loss)[0]));
}

TEST_P(GradTest, AskingForTheSoftmaxOutputDisablesTheShortcut) {
  Graph g;
  auto z = g.input("z"), y = g.input("y");
  auto p = softmax(z);
  auto loss = reduce_sum(cross_entropy(p, y));
  auto gr = gradients(loss, {p, z});
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"z", {1, 3}}, {"y", {1, 3}}}, gr);
  cg.run({{"z", std::vector<float>{0, 0, 0}}, {"y", std::vector<float>{0, 1, 0}}});
  const auto dp = cg.read(gr[0]), dz = cg.read(gr[1]);
  EXPECT_NEAR(dp[1], -3.0f, 1e-5);  // -y / p with p = 1/3
  EXPECT_NEAR(dp[0], 0.0f, 1e-6);
  EXPECT_NEAR(dz[0], 1.0f / 3, 1e-6);
  EXPECT_NEAR(dz[1], 1.0f / 3 - 1, 1e-6);
}

TEST_P(GradTest, TrainingReducesTheLoss) {
  for (float momentum : {0.0f, 0.9f}) {
    Graph g;
    auto x = g.input("x"), y = g.input("y");
    auto W1 = g.variable("W1", {4, 16}, Initializer::normal(0, 0.5f, 1));
    auto b1 = g.variable("b1", {16});
    auto W2 = g.variable("W2", {16, 3}, Initializer::normal(0, 0.5f, 2));
    auto b2 = g.variable("b2", {3});
    auto loss = reduce_mean(cross_entropy(softmax(matmul(tanh(matmul(x, W1) + b1), W2) + b2), y));
    auto step = sgd(loss, {W1, b1, W2, b2}, 0.2f, momentum);
    auto cg =
        GraphCompiler(GetParam().make()).compile(g, {{"x", {32, 4}}, {"y", {32, 3}}}, {loss, step});
    // three separable classes
    std::vector<float> xv(32 * 4), yv(32 * 3, 0.0f);
    std::mt19937 rng(5);
    std::normal_distribution<float> noise(0, 0.3f);
    for (int i = 0; i < 32; ++i) {
      const int cls = i % 3;
      for (int d = 0; d < 4; ++d)
        xv[static_cast<std::size_t>(i * 4 + d)] = (d == cls ? 2.0f : 0.0f) + noise(rng);
      yv[static_cast<std::size_t>(i * 3 + cls)] = 1.0f;
    }
    std::vector<float> losses;
    for (int it = 0; it < 60; ++it) {
      cg.run({{"x", xv}, {"y", yv}});
      losses.push_back(cg.read(loss)[0]);
    }
    EXPECT_LT(losses.back(), 0.25f * losses.front()) << "momentum " << momentum;
    EXPECT_TRUE(std::isfinite(losses.back()));
  }
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, GradTest, ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

TEST(GradRewrites, SlicesAndSharedWeightsAreFolded) {
  Graph g;
  auto x = g.input("x"), W = g.input("W");
  Node h;
  std::vector<Node> steps;
  for (int t = 0; t < 12; ++t) {
    auto gates = matmul(x * static_cast<float>(t + 1), W);
    steps.push_back(sigmoid(slice(gates, 1, 0, 3)) * tanh(slice(gates, 1, 3, 6)));
  }
  Node loss = reduce_sum(steps[0]);
  for (std::size_t t = 1; t < steps.size(); ++t) loss = loss + reduce_sum(steps[t]);
  const auto dW = gradients(loss, {W})[0];
  auto cg = GraphCompiler().compile(g, {{"x", {2, 4}}, {"W", {4, 6}}}, {dW});
  int slice_grad_n = 0, concats = 0, products = 0;
  for (const auto& n : detail::executable_of(cg).plan().nodes) {
    if (n.fused_into >= 0) continue;  // folded into another node: no work of its own
    slice_grad_n += n.op == detail::OpKind::SliceGradN;
    concats += n.op == detail::OpKind::Concat;
    products += n.op == detail::OpKind::MatMul || n.op == detail::OpKind::FusedMatMul;
  }
  EXPECT_EQ(slice_grad_n, 12);  // one per step instead of two slice_grads and an add
  EXPECT_EQ(concats, 4);        // 12 steps in chunks of 8: two chunks x (A, G)
  EXPECT_EQ(products, 12 + 2);  // forward products + two regrouped gradient products
}

// ---- errors -------------------------------------------------------------------------------

TEST(GradErrors, NonScalarLoss) {
  Graph g;
  auto x = g.input("x");
  auto per_row = reduce_sum(x * x, 1).named("per_row");
  auto d = gradients(per_row, {x})[0];
  try {
    GraphCompiler().compile(g, {{"x", {4, 3}}}, {d});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("scalar"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'per_row'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4]"), std::string::npos) << e.what();
  }
}

TEST(GradErrors, NoPathAndNonDifferentiablePaths) {
  Graph g;
  auto x = g.input("x"), other = g.input("other"), y = g.input("y");
  auto loss = reduce_sum(cross_entropy(softmax(x), y));
  EXPECT_THROW(gradients(loss, {other}), GraphError);
  try {
    gradients(loss, {y});
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("cross_entropy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("labels"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sgd(loss, {x}, 0.1f), GraphError);  // not a variable
  Graph g2;
  auto v = g2.variable("v", {2});
  EXPECT_THROW(sgd(reduce_sum(v), {}, 0.1f), GraphError);
}

TEST(GradErrors, GradientOfTheLossItselfIsOne) {
  Graph g;
  auto x = g.input("x");
  auto loss = reduce_sum(x);
  auto d = gradients(loss, {loss, x});
  auto cg = GraphCompiler().compile(g, {{"x", {3}}}, d);
  cg.run({{"x", std::vector<float>{1, 2, 3}}});
  EXPECT_EQ(cg.read(d[0]), (std::vector<float>{1}));
  EXPECT_EQ(cg.read(d[1]), (std::vector<float>{1, 1, 1}));
}

}  // namespace
