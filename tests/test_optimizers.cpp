// SPDX-License-Identifier: Apache-2.0
// Optimizers in the graph (autodiff.hpp: minimize, apply_gradients, schedules, clipping): each
// rule against a float64 reference of its published update over several steps on every
// platform; the ONNX training-op tests (Adam, Adagrad, Momentum, Nesterov) that Debian's
// libonnx-testdata ships; bitwise resumption from a checkpoint; and bad input.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>

#include "common/executable.hpp"
#include "compiler/graph_impl.hpp"
#include "hetgraph/autodiff.hpp"
#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using testing_util::PlatformCase;
using Rule = Optimizer::Rule;
namespace ho = hetgraph::onnx;

namespace {

// The published rule in double, state kept in double (torch.optim's definitions).
struct RefState {
  std::vector<double> w, s0, s1;
  int t = 0;
};

void ref_step(const Optimizer& o, double lr, RefState& st, const std::vector<float>& grad) {
  ++st.t;
  const double wd = o.weight_decay, mu = o.momentum, b1 = o.beta1, b2 = o.beta2;
  for (std::size_t i = 0; i < st.w.size(); ++i) {
    double& w = st.w[i];
    double g = grad[i];
    if (o.rule != Rule::adamw) g += wd * w;
    switch (o.rule) {
      case Rule::sgd:
        w -= lr * g;
        break;
      case Rule::momentum:
      case Rule::nesterov: {
        st.s0[i] = mu * st.s0[i] + (1 - o.dampening) * g;
        w -= lr * (o.rule == Rule::nesterov ? g + mu * st.s0[i] : st.s0[i]);
        break;
      }
      case Rule::adam:
      case Rule::adamw: {
        if (o.rule == Rule::adamw) w *= 1 - lr * wd;
        st.s0[i] = b1 * st.s0[i] + (1 - b1) * g;
        st.s1[i] = b2 * st.s1[i] + (1 - b2) * g * g;
        const double mhat = st.s0[i] / (1 - std::pow(b1, st.t));
        const double vhat = st.s1[i] / (1 - std::pow(b2, st.t));
        w -= lr * mhat / (std::sqrt(vhat) + o.eps);
        break;
      }
      case Rule::rmsprop:
        st.s0[i] = o.alpha * st.s0[i] + (1 - o.alpha) * g * g;
        w -= lr * g / (std::sqrt(st.s0[i]) + o.eps);
        break;
      case Rule::adagrad:
        st.s0[i] += g * g;
        w -= lr * g / (std::sqrt(st.s0[i]) + o.eps);
        break;
    }
  }
}

std::vector<Optimizer> every_rule() {
  Optimizer damped = Optimizer::momentum_sgd(0.05f, 0.8f, 0.01f);
  damped.dampening = 0.25f;
  return {Optimizer::sgd(0.1f, 0.02f),
          Optimizer::momentum_sgd(0.05f, 0.9f),
          damped,
          Optimizer::nesterov(0.05f, 0.9f, 0.01f),
          Optimizer::adam(0.01f),
          Optimizer::adam(0.01f, 0.05f),
          Optimizer::adamw(0.01f, 0.1f),
          Optimizer::rmsprop(0.01f, 0.01f),
          Optimizer::adagrad(0.1f)};
}

class Optimizers : public ::testing::TestWithParam<PlatformCase> {};

// Gradients fed as an input, different at each step: every rule's state has to carry over.
TEST_P(Optimizers, EveryRuleFollowsItsFloat64Reference) {
  const Platform platform = GetParam().make();
  for (const Optimizer& o : every_rule()) {
    SCOPED_TRACE(std::string(o.name()) + " wd " + std::to_string(o.weight_decay));
    Graph g;
    const Shape s{3, 5};
    const auto w0 = testing_util::random_vec(15, 11, -1, 1);
    auto W = g.variable("W", s, Initializer::values(w0));
    auto dW = g.input("dW");
    auto step = apply_gradients(std::vector<Node>{W}, std::vector<Node>{dW}, o);
    auto cg = GraphCompiler(platform).compile(g, {{"dW", s}}, {step});
    RefState st{{w0.begin(), w0.end()}, std::vector<double>(15, 0.0), std::vector<double>(15, 0.0)};
    for (int k = 0; k < 5; ++k) {
      const auto grad = testing_util::random_vec(15, 100 + static_cast<std::uint32_t>(k), -1, 1);
      cg.run({{"dW", grad}});
      ref_step(o, o.learning_rate, st, grad);
      testing_util::expect_close(cg.read(W), ref::Array(s, st.w), 2e-5, 2e-6,
                                 std::string(o.name()) + " step " + std::to_string(k + 1));
    }
    if (o.rule == Rule::adam) {
      EXPECT_EQ(cg.read("step"), std::vector<float>{5.0f});
      testing_util::expect_close(cg.read("W/exp_avg"), ref::Array(s, st.s0), 2e-5, 2e-6, "m");
      testing_util::expect_close(cg.read("W/exp_avg_sq"), ref::Array(s, st.s1), 2e-5, 1e-7, "v");
    }
  }
}

// A whole training step (minimize: gradients, one fused update per variable) for each rule:
// one optimizer_update node per variable, and the loss goes down.
TEST_P(Optimizers, MinimizeMakesOneUpdatePerVariableAndLowersTheLoss) {
  const Platform platform = GetParam().make();
  for (const Optimizer& o : every_rule()) {
    SCOPED_TRACE(o.name());
    Graph g;
    auto x = g.input("x");
    auto W = g.variable("W", {4, 3}, Initializer::uniform(-0.5f, 0.5f, 3));
    auto b = g.variable("b", {3});
    auto loss = reduce_mean((matmul(x, W) + b - 1.0f) * (matmul(x, W) + b - 1.0f));
    auto train = minimize(loss, {W, b}, o);
    auto cg = GraphCompiler(platform).compile(g, {{"x", {8, 4}}}, {loss, train});
    std::size_t updates = 0;
    const detail::Plan& p = detail::executable_of(cg).plan();
    for (const auto& n : p.nodes) updates += n.op == detail::OpKind::OptimizerUpdate;
    EXPECT_EQ(updates, 2u);
    const auto xv = testing_util::random_vec(32, 5, 0, 1);
    cg.run({{"x", xv}});
    const float first = cg.read(loss)[0];
    for (int k = 0; k < 30; ++k) cg.run({{"x", xv}});
    EXPECT_LT(cg.read(loss)[0], first);
  }
}

// N steps straight, or k steps, a checkpoint, a fresh compiled graph loading it and N - k more:
// the variables and every optimizer state are bitwise the same.
TEST_P(Optimizers, ResumedFromACheckpointContinuesBitwise) {
  const Platform platform = GetParam().make();
  const auto dir = std::filesystem::temp_directory_path() / "hetgraph-optim-resume";
  std::filesystem::create_directories(dir);
  for (const Optimizer& o : every_rule()) {
    SCOPED_TRACE(o.name());
    Graph g;
    auto x = g.input("x");
    auto W = g.variable("W", {4, 3}, Initializer::uniform(-0.5f, 0.5f, 3));
    auto b = g.variable("b", {3});
    auto loss = reduce_mean((matmul(x, W) + b - 1.0f) * (matmul(x, W) + b - 1.0f));
    auto stepc = step_counter(g);
    auto lr = exponential_decay(stepc, o.learning_rate, 0.9f);
    auto train = minimize(loss, {W, b}, o, {.learning_rate = lr, .step = stepc});
    const InputShapes shapes{{"x", {8, 4}}};
    auto feed = [](int k) {
      return testing_util::random_vec(32, 40 + static_cast<std::uint32_t>(k), 0, 1);
    };
    auto straight = GraphCompiler(platform).compile(g, shapes, {loss, train});
    for (int k = 0; k < 6; ++k) straight.run({{"x", feed(k)}});
    auto first = GraphCompiler(platform).compile(g, shapes, {loss, train});
    for (int k = 0; k < 3; ++k) first.run({{"x", feed(k)}});
    const std::string path = (dir / (std::string(o.name()) + ".ckpt")).string();
    first.save(path);
    auto resumed = GraphCompiler(platform).compile(g, shapes, {loss, train});
    resumed.load(path);
    for (int k = 3; k < 6; ++k) resumed.run({{"x", feed(k)}});
    std::vector<std::string> names{"W", "b", "step"};
    const detail::Plan& p = detail::executable_of(straight).plan();
    for (std::uint32_t v : p.variables) names.push_back(p.nodes[v].name);
    for (const std::string& n : names) {
      EXPECT_TRUE(testing_util::bitwise_equal(straight.read(n), resumed.read(n))) << n;
    }
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, Optimizers, ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

// ---- ONNX's training ops (ai.onnx.preview.training), from Debian's libonnx-testdata --------

const std::filesystem::path kOnnxNode = "/usr/share/libonnx-testdata/data/node";

struct OnnxCase {
  std::string op;
  std::map<std::string, ::onnx::AttributeProto> attrs;
  std::vector<ho::TensorData> in, out;
  float f(const std::string& name, float dflt) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? dflt : it->second.f();
  }
  std::string s(const std::string& name, const std::string& dflt) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? dflt : it->second.s();
  }
};

OnnxCase load_case(const std::string& test) {
  OnnxCase c;
  const auto dir = kOnnxNode / test;
  std::ifstream f(dir / "model.onnx", std::ios::binary);
  ::onnx::ModelProto m;
  if (!m.ParseFromIstream(&f)) throw std::runtime_error("cannot parse " + test);
  const auto& node = m.graph().node(0);
  c.op = node.op_type();
  for (const auto& a : node.attribute()) c.attrs[a.name()] = a;
  for (int k = 0;; ++k) {
    const auto p = dir / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb");
    if (!std::filesystem::exists(p)) break;
    c.in.push_back(ho::read_tensor(p.string()));
  }
  for (int k = 0;; ++k) {
    const auto p = dir / "test_data_set_0" / ("output_" + std::to_string(k) + ".pb");
    if (!std::filesystem::exists(p)) break;
    c.out.push_back(ho::read_tensor(p.string()));
  }
  return c;
}

// The ONNX op on n tensors (inputs R, T, X1..Xn, G1..Gn, state1 1..n [, state2 1..n]; outputs
// X1_new..Xn_new, state1 new..., state2 new...) as one apply_gradients step of our rule, with
// the state variables written from the test's inputs first.
void check_onnx_case(const PlatformCase& pc, const std::string& test) {
  SCOPED_TRACE(test + " on " + pc.name);
  if (!std::filesystem::exists(kOnnxNode / test)) GTEST_SKIP() << "libonnx-testdata absent";
  const OnnxCase c = load_case(test);
  const float R = c.in[0].f32.at(0);
  const int T = c.in[1].i32.at(0);
  const int states = c.op == "Adam" ? 2 : 1;
  const std::size_t n = (c.in.size() - 2) / static_cast<std::size_t>(2 + states);
  ASSERT_EQ(c.in.size(), 2 + n * static_cast<std::size_t>(2 + states));
  ASSERT_EQ(c.out.size(), n * static_cast<std::size_t>(1 + states));

  Optimizer o;
  float lr = R;
  int step0 = 0;
  if (c.op == "Adagrad") {
    // r = R / (1 + T decay_factor); g = G + norm_coefficient X; H += g^2;
    // X -= r g / (sqrt(H) + epsilon).
    o = Optimizer::adagrad(0, c.f("norm_coefficient", 0));
    o.eps = c.f("epsilon", 0);
    lr = R / (1.0f + static_cast<float>(T) * c.f("decay_factor", 0));
  } else if (c.op == "Momentum") {
    // V = alpha V + beta' g (beta' = beta, or 1 at T = 0); X -= R V (standard) or
    // X -= R (g + alpha V) (nesterov).
    const bool nesterov = c.s("mode", "") == "nesterov";
    o = nesterov ? Optimizer::nesterov(0, c.f("alpha", 0), c.f("norm_coefficient", 0))
                 : Optimizer::momentum_sgd(0, c.f("alpha", 0), c.f("norm_coefficient", 0));
    o.dampening = T > 0 ? 1.0f - c.f("beta", 0) : 0.0f;
  } else {
    ASSERT_EQ(c.op, "Adam");
    // ONNX adds epsilon to sqrt(H) before the bias corrections (R sqrt(1 - beta^T) /
    // (1 - alpha^T)); PyTorch after: the same update with eps / sqrt(1 - beta^T). At T = 0
    // ONNX applies no corrections: what they tend to after many steps (10^7: beta^t is 0).
    ASSERT_EQ(c.f("norm_coefficient_post", 0), 0.0f);
    o = Optimizer::adam(0, c.f("norm_coefficient", 0));
    o.beta1 = c.f("alpha", 0.9f);  // ONNX defaults; epsilon 0
    o.beta2 = c.f("beta", 0.999f);
    const double t = T > 0 ? T : 1e7;
    // test_adam_multiple's model has no epsilon attribute (ONNX's default is 0), but ONNX's
    // generator (onnx/backend/test/case/node/adam.py) computed its outputs with 1e-2.
    const float eps =
        test == "test_adam_multiple" && !c.attrs.count("epsilon") ? 1e-2f : c.f("epsilon", 0);
    o.eps = static_cast<float>(eps / std::sqrt(1.0 - std::pow(o.beta2, t)));
    step0 = static_cast<int>(t) - 1;
  }
  o.learning_rate = lr;

  Graph g;
  std::vector<Node> xs, gs;
  InputShapes shapes;
  std::vector<std::string> names;  // FeedItem holds a view of its name
  for (std::size_t i = 0; i < n; ++i) names.push_back("G" + std::to_string(i));
  std::vector<FeedItem> feeds;
  for (std::size_t i = 0; i < n; ++i) {
    const ho::TensorData& X = c.in[2 + i];
    const ho::TensorData& G = c.in[2 + n + i];
    xs.push_back(g.variable("X" + std::to_string(i), X.shape, Initializer::values(X.f32)));
    gs.push_back(g.input(names[i]));
    shapes.push_back({names[i], G.shape});
    feeds.push_back({names[i], G.f32});
  }
  auto stepc = step_counter(g);
  auto train = apply_gradients(xs, gs, o, {.step = stepc});
  auto cg = GraphCompiler(pc.make()).compile(g, shapes, {train});
  const std::vector<std::string> suffix =
      c.op == "Adam"      ? std::vector<std::string>{"exp_avg", "exp_avg_sq"}
      : c.op == "Adagrad" ? std::vector<std::string>{"sum"}
                          : std::vector<std::string>{"velocity"};
  for (int s = 0; s < states; ++s)
    for (std::size_t i = 0; i < n; ++i)
      cg.write("X" + std::to_string(i) + "/" + suffix[static_cast<std::size_t>(s)],
               c.in[2 + (2 + static_cast<std::size_t>(s)) * n + i].f32);
  cg.write(stepc, std::vector<float>{static_cast<float>(step0)});
  cg.run(std::span<const FeedItem>(feeds));
  for (std::size_t i = 0; i < n; ++i) {
    const auto want = [&](std::size_t k) {
      const ho::TensorData& t = c.out[k];
      return ref::Array(t.shape, std::vector<double>(t.f32.begin(), t.f32.end()));
    };
    testing_util::expect_close(cg.read("X" + std::to_string(i)), want(i), 1e-5, 1e-6, "X_new");
    for (int s = 0; s < states; ++s)
      testing_util::expect_close(
          cg.read("X" + std::to_string(i) + "/" + suffix[static_cast<std::size_t>(s)]),
          want((1 + static_cast<std::size_t>(s)) * n + i), 1e-5, 1e-6,
          suffix[static_cast<std::size_t>(s)]);
  }
}

TEST_P(Optimizers, OnnxTrainingOpTestsGiveTheExpectedOutputs) {
  for (const char* t : {"test_adam", "test_adam_multiple", "test_adagrad", "test_adagrad_multiple",
                        "test_momentum", "test_momentum_multiple", "test_nesterov_momentum"}) {
    check_onnx_case(GetParam(), t);
  }
}

// ---- schedules and clipping, against float64 formulas ------------------------------------

TEST(OptimizerSchedules, FollowTheirFormulasStepByStep) {
  Graph g;
  auto step = step_counter(g);
  auto sd = step_decay(step, 0.5f, 3, 0.1f);
  auto ed = exponential_decay(step, 0.5f, 0.9f);
  auto wu = linear_warmup(step, g.constant(0.2f), 4);
  auto cd = cosine_decay(step, 0.3f, 5, 0.01f);
  auto inc = assign(step, step + 1.0f);
  auto cg = GraphCompiler().compile(g, {}, {sd, ed, wu, cd, inc});
  for (int t = 0; t < 8; ++t) {
    cg.run({});
    const double pi = std::numbers::pi;
    EXPECT_NEAR(cg.read(cd)[0], 0.01 + 0.29 * 0.5 * (1 + std::cos(pi * std::min(t, 5) / 5)), 1e-6)
        << t;
    EXPECT_NEAR(cg.read(sd)[0], 0.5 * std::pow(0.1, t / 3), 1e-7) << t;
    EXPECT_NEAR(cg.read(ed)[0], 0.5 * std::pow(0.9, t), 1e-6) << t;
    EXPECT_NEAR(cg.read(wu)[0], 0.2 * std::min(1.0, (t + 1) / 4.0), 1e-7) << t;
  }
}

TEST(OptimizerClipping, ScalesGradientsToTheGlobalNorm) {
  Graph g;
  auto a = g.input("a");
  auto b = g.input("b");
  const std::vector<Node> gs{a, b};
  auto clipped = clip_by_global_norm(gs, 1.5f);
  auto cg = GraphCompiler().compile(g, {{"a", {2, 3}}, {"b", {4}}}, {clipped[0], clipped[1]});
  for (float k : {0.1f, 3.0f}) {  // below the norm (unchanged) and above it (scaled)
    auto av = testing_util::random_vec(6, 1, -1, 1), bv = testing_util::random_vec(4, 2, -1, 1);
    for (float& v : av) v *= k;
    for (float& v : bv) v *= k;
    cg.run({{"a", av}, {"b", bv}});
    double sq = 0;
    for (float v : av) sq += double(v) * v;
    for (float v : bv) sq += double(v) * v;
    const double f = 1.5 / std::max(std::sqrt(sq), 1.5);
    std::vector<double> wa, wb;
    for (float v : av) wa.push_back(v * f);
    for (float v : bv) wb.push_back(v * f);
    testing_util::expect_close(cg.read(clipped[0]), ref::Array({2, 3}, wa), 1e-6, 1e-7, "a");
    testing_util::expect_close(cg.read(clipped[1]), ref::Array({4}, wb), 1e-6, 1e-7, "b");
  }
}

// A schedule and clipping feeding the update: the learning rate of step t (from the step
// counter the update increments) and the clipped gradient, with no recompilation.
TEST_P(Optimizers, ScheduledAndClippedUpdatesFollowTheFormulas) {
  Graph g;
  const auto w0 = testing_util::random_vec(4, 3);
  auto W = g.variable("W", {4}, Initializer::values(w0));
  auto dW = g.input("dW");
  auto step = step_counter(g);
  auto lr = linear_warmup(step, step_decay(step, 0.2f, 2, 0.5f), 3);
  Optimizer o = Optimizer::momentum_sgd(0, 0.5f);
  o.clip_norm = 0.8f;
  auto train = apply_gradients(std::vector<Node>{W}, std::vector<Node>{dW}, o,
                               {.learning_rate = lr, .step = step});
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"dW", {4}}}, {train});
  std::vector<double> w(w0.begin(), w0.end()), u(4, 0.0);
  for (int t = 0; t < 6; ++t) {
    const auto gv = testing_util::random_vec(4, 60 + static_cast<std::uint32_t>(t), -1, 1);
    cg.run({{"dW", gv}});
    double sq = 0;
    for (float v : gv) sq += double(v) * v;
    const double f = 0.8 / std::max(std::sqrt(sq), 0.8);
    const double lrt = 0.2 * std::pow(0.5, t / 2) * std::min(1.0, (t + 1) / 3.0);
    for (std::size_t i = 0; i < 4; ++i) {
      u[i] = 0.5 * u[i] + gv[i] * f;
      w[i] -= lrt * u[i];
    }
    testing_util::expect_close(cg.read(W), ref::Array({4}, w), 2e-5, 2e-6,
                               "step " + std::to_string(t));
  }
  EXPECT_EQ(cg.read(step), std::vector<float>{6.0f});
}

// ---- bad input -----------------------------------------------------------------------------

template <class E, class F>
void expect_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted one saying " << needle;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(OptimizerErrors, BadInputIsAClearError) {
  expect_error<UsageError>([] { Optimizer::named("adamax", 0.1f); }, "unknown optimizer 'adamax'");
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {3});
  auto loss = reduce_sum(W * x);
  expect_error<UsageError>([&] { minimize(loss, {W}, Optimizer::adam(-0.1f)); },
                           "learning rate must be >= 0");
  expect_error<UsageError>([&] { minimize(loss, {W}, Optimizer::sgd(0.1f, -1.0f)); },
                           "weight_decay must be >= 0");
  Optimizer bad = Optimizer::adam(0.1f);
  bad.beta2 = 1.0f;
  expect_error<UsageError>([&] { minimize(loss, {W}, bad); }, "beta2 must lie in [0, 1)");
  expect_error<GraphError>([&] { minimize(loss, {x}, Optimizer::adam()); }, "is not a variable");
  expect_error<GraphError>([&] { minimize(loss, {}, Optimizer::adam()); }, "no variables");
  expect_error<GraphError>([&] { minimize(loss, {W, W}, Optimizer::adam()); }, "listed twice");
  // An int32 variable (the graph API makes float ones; imported graphs may hold others).
  detail::NodeRec r;
  r.op = detail::OpKind::Variable;
  r.name = "counts";
  r.dtype = DType::i32;
  r.shape = Shape{3};
  const Node counts = detail::impl_of(g).add(std::move(r));
  expect_error<GraphError>(
      [&] {
        apply_gradients(std::vector<Node>{counts}, std::vector<Node>{x}, Optimizer::sgd(0.1f));
      },
      "optimizers update float32 variables");
  // A learning rate that is not a scalar: named at compile time.
  auto lr = g.input("lr");
  auto train = minimize(loss, {W}, Optimizer::sgd(0.1f), {.learning_rate = lr});
  expect_error<ShapeError>(
      [&] {
        GraphCompiler().compile(g, {{"x", {3}}, {"lr", {2}}}, {train});
      },
      "learning rate 'lr'");
}

// On a heterogeneous platform an update runs where its variable lives, with its state: W on
// the OpenCL device, b on the CPU, the loss on the CPU; the same steps as the CPU alone.
TEST(OptimizerHetero, UpdatesRunWhereTheirVariableLives) {
  if (!testing_util::opencl_required() && !Platform::opencl_available()) GTEST_SKIP();
  const Platform cl = Platform::opencl();
  const Platform both = Platform::heterogeneous({Platform::cpu(), cl});
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {3, 2}, Initializer::uniform(-1, 1, 3)).on(cl.devices()[0]);
  auto b = g.variable("b", {2}).on(Device::cpu());
  auto y = matmul(x, W).on(cl.devices()[0]) + b;
  auto loss = reduce_sum(y * y).on(Device::cpu());
  auto train = minimize(loss, {W, b}, Optimizer::adam(0.05f));
  const std::vector<float> xv = testing_util::random_vec(6, 4);
  auto h = GraphCompiler(both).compile(g, {{"x", {2, 3}}}, {loss, train});
  auto c = GraphCompiler(Platform::cpu()).compile(g, {{"x", {2, 3}}}, {loss, train});
  for (int i = 0; i < 4; ++i) {
    h.run({{"x", xv}});
    c.run({{"x", xv}});
  }
  for (const char* v : {"W", "b", "W/exp_avg_sq"}) {
    const std::vector<float> want = c.read(v);
    testing_util::expect_close(
        h.read(v), testing_util::to_ref(Shape{std::int64_t(want.size())}, want), 1e-5, 1e-6, v);
  }
  // Labels read "'W/adam' (#21, optimizer_update)".
  std::map<std::string, std::string> where;
  const EngineReport report = h.engine_report();
  for (const auto& n : report.hetero->nodes) where[n.node.substr(0, n.node.find(" ("))] = n.device;
  EXPECT_EQ(where.at("'W/adam'"), where.at("'W'"));
  EXPECT_EQ(where.at("'W/exp_avg'"), where.at("'W'"));
  EXPECT_EQ(where.at("'b/adam'"), where.at("'b'"));
  EXPECT_NE(where.at("'W'"), where.at("'b'"));
}

}  // namespace
