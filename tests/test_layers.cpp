// Normalisation layers (include/hetgraph/layers.hpp): batch norm in both modes and layer norm,
// forward values and running statistics against float64 references, gradients against float64
// central differences of the same references, on every platform.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <random>

#include "hetgraph/hetgraph.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using testing_util::PlatformCase;

namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -2.0f,
                                 float hi = 3.0f) {
  return testing_util::random_vec(n, seed, lo, hi);
}

// Reference batch norm over [N, C, S] (S = the spatial elements), training mode.
struct BnRef {
  std::vector<double> y, mean, var;  // var biased
};
BnRef bn_train_ref(const std::vector<double>& x, const std::vector<double>& g,
                   const std::vector<double>& b, std::int64_t N, std::int64_t C, std::int64_t S,
                   double eps) {
  BnRef r{std::vector<double>(x.size()), std::vector<double>(C), std::vector<double>(C)};
  for (std::int64_t c = 0; c < C; ++c) {
    double s = 0, ss = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < S; ++i) s += x[(n * C + c) * S + i];
    const double m = s / static_cast<double>(N * S);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < S; ++i) {
        const double d = x[(n * C + c) * S + i] - m;
        ss += d * d;
      }
    const double v = ss / static_cast<double>(N * S);
    r.mean[c] = m;
    r.var[c] = v;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < S; ++i) {
        const std::size_t k = static_cast<std::size_t>((n * C + c) * S + i);
        r.y[k] = (x[k] - m) / std::sqrt(v + eps) * g[c] + b[c];
      }
  }
  return r;
}

std::vector<double> ln_ref(const std::vector<double>& x, const std::vector<double>& g,
                           const std::vector<double>& b, std::int64_t D, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / D; ++r) {
    double s = 0, ss = 0;
    for (std::int64_t i = 0; i < D; ++i) s += x[r * D + i];
    const double m = s / D;
    for (std::int64_t i = 0; i < D; ++i) ss += (x[r * D + i] - m) * (x[r * D + i] - m);
    const double v = ss / D;
    for (std::int64_t i = 0; i < D; ++i)
      y[r * D + i] = (x[r * D + i] - m) / std::sqrt(v + eps) * g[i] + b[i];
  }
  return y;
}

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << what << " [" << i << "]";
}

/// d/dv of sum(f(v) * w) by float64 central differences.
std::vector<double> central_diff(
    std::vector<double> v, const std::vector<double>& w,
    const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  std::vector<double> d(v.size());
  const double h = 1e-6;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    auto dot = [&] {
      const auto y = f(v);
      double s = 0;
      for (std::size_t k = 0; k < y.size(); ++k) s += y[k] * w[k];
      return s;
    };
    v[i] = keep + h;
    const double up = dot();
    v[i] = keep - h;
    const double down = dot();
    v[i] = keep;
    d[i] = (up - down) / (2 * h);
  }
  return d;
}

class Layers : public ::testing::TestWithParam<PlatformCase> {};

TEST_P(Layers, BatchNormTrainingNormalisesAndMovesTheRunningStatistics) {
  const std::int64_t N = 4, C = 3, H = 2, W = 3, S = H * W;
  Graph g;
  Node x = g.input("x");
  auto bn = nn::BatchNorm::create(g, "bn", C, 4, 0.25f);
  auto [y, update] = bn(x, nn::Mode::train);
  ASSERT_TRUE(update.valid());
  CompiledGraph cg =
      GraphCompiler(GetParam().make()).compile(g, {{"x", {N, C, H, W}}}, {y, update});
  const auto xv = random_values(N * C * S, 1);
  const std::vector<float> gv{0.5f, 1.5f, -1.0f}, bv{0.1f, -0.2f, 0.3f};
  cg.write(bn.gamma, gv);
  cg.write(bn.beta, bv);
  cg.run({{"x", xv}});
  const BnRef r = bn_train_ref(to_double(xv), to_double(gv), to_double(bv), N, C, S, 1e-5);
  expect_near_all(cg.read(y), r.y, 1e-5, "y");
  std::vector<double> rm(C), rv(C);
  const double n = static_cast<double>(N * S);
  for (std::int64_t c = 0; c < C; ++c) {
    rm[c] = 0.25 * r.mean[c];                            // from 0
    rv[c] = 0.75 * 1.0 + 0.25 * r.var[c] * n / (n - 1);  // from 1, unbiased
  }
  expect_near_all(cg.read(bn.running_mean), rm, 1e-6, "running mean");
  expect_near_all(cg.read(bn.running_var), rv, 1e-6, "running var");
  // A second step moves them again from where the first left them.
  cg.run({{"x", xv}});
  for (std::int64_t c = 0; c < C; ++c) {
    rm[c] = 0.75 * rm[c] + 0.25 * r.mean[c];
    rv[c] = 0.75 * rv[c] + 0.25 * r.var[c] * n / (n - 1);
  }
  expect_near_all(cg.read(bn.running_mean), rm, 1e-6, "running mean, step 2");
  expect_near_all(cg.read(bn.running_var), rv, 1e-6, "running var, step 2");
}

TEST_P(Layers, BatchNormInferenceUsesTheRunningStatistics) {
  const std::int64_t N = 2, C = 3, L = 5;
  Graph g;
  Node x = g.input("x");
  auto bn = nn::BatchNorm::create(g, "bn", C, 3);
  auto [y, update] = bn(x, nn::Mode::infer);
  EXPECT_FALSE(update.valid());
  CompiledGraph cg = GraphCompiler(GetParam().make()).compile(g, {{"x", {N, C, L}}}, {y});
  const std::vector<float> mean{0.5f, -1.0f, 2.0f}, var{4.0f, 0.25f, 1.0f}, gv{2.0f, 1.0f, -1.0f},
      bv{0.0f, 1.0f, 0.5f};
  cg.write(bn.running_mean, mean);
  cg.write(bn.running_var, var);
  cg.write(bn.gamma, gv);
  cg.write(bn.beta, bv);
  const auto xv = random_values(N * C * L, 2);
  cg.run({{"x", xv}});
  std::vector<double> want(xv.size());
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < L; ++i) {
        const std::size_t k = static_cast<std::size_t>((n * C + c) * L + i);
        want[k] = (xv[k] - mean[c]) / std::sqrt(double{var[c]} + 1e-5) * gv[c] + bv[c];
      }
  expect_near_all(cg.read(y), want, 1e-5, "y");
}

TEST_P(Layers, BatchNormGradientsMatchCentralDifferences) {
  const std::int64_t N = 3, C = 2;  // rank 2: [N, C]
  Graph g;
  Node x = g.variable("x", {N, C});
  auto bn = nn::BatchNorm::create(g, "bn", C, 2);
  Node wt = g.input("w");
  auto [y, update] = bn(x, nn::Mode::train);
  Node loss = reduce_sum(y * wt);
  auto grads = gradients(loss, {x, bn.gamma, bn.beta});
  CompiledGraph cg = GraphCompiler(GetParam().make()).compile(g, {{"w", {N, C}}}, grads);
  const auto xv = random_values(N * C, 3), wv = random_values(N * C, 4);
  const std::vector<float> gv{1.5f, -0.5f}, bv{0.2f, 0.1f};
  cg.write(x, xv);
  cg.write(bn.gamma, gv);
  cg.write(bn.beta, bv);
  cg.run({{"w", wv}});
  const auto X = to_double(xv), Wd = to_double(wv), G = to_double(gv), B = to_double(bv);
  expect_near_all(
      cg.read(grads[0]),
      central_diff(X, Wd, [&](const auto& v) { return bn_train_ref(v, G, B, N, C, 1, 1e-5).y; }),
      2e-3, "d/dx");
  expect_near_all(
      cg.read(grads[1]),
      central_diff(G, Wd, [&](const auto& v) { return bn_train_ref(X, v, B, N, C, 1, 1e-5).y; }),
      2e-3, "d/dgamma");
  expect_near_all(
      cg.read(grads[2]),
      central_diff(B, Wd, [&](const auto& v) { return bn_train_ref(X, G, v, N, C, 1, 1e-5).y; }),
      2e-3, "d/dbeta");
}

TEST_P(Layers, LayerNormValuesAndGradientsMatchTheReference) {
  const std::int64_t R = 3, D = 5;
  Graph g;
  Node x = g.variable("x", {R, D});
  Node gamma = g.variable("gamma", {D}), beta = g.variable("beta", {D});
  Node wt = g.input("w");
  Node y = nn::layer_norm(x, gamma, beta);
  auto grads = gradients(reduce_sum(y * wt), {x, gamma, beta});
  std::vector<Node> fetch{y};
  fetch.insert(fetch.end(), grads.begin(), grads.end());
  CompiledGraph cg = GraphCompiler(GetParam().make()).compile(g, {{"w", {R, D}}}, fetch);
  const auto xv = random_values(R * D, 5), wv = random_values(R * D, 6),
             gv = random_values(D, 7, 0.5f, 1.5f), bv = random_values(D, 8);
  cg.write(x, xv);
  cg.write(gamma, gv);
  cg.write(beta, bv);
  cg.run({{"w", wv}});
  const auto X = to_double(xv), Wd = to_double(wv), G = to_double(gv), B = to_double(bv);
  expect_near_all(cg.read(y), ln_ref(X, G, B, D, 1e-5), 1e-5, "y");
  expect_near_all(cg.read(grads[0]),
                  central_diff(X, Wd, [&](const auto& v) { return ln_ref(v, G, B, D, 1e-5); }),
                  2e-3, "d/dx");
  expect_near_all(cg.read(grads[1]),
                  central_diff(G, Wd, [&](const auto& v) { return ln_ref(X, v, B, D, 1e-5); }),
                  2e-3, "d/dgamma");
  expect_near_all(cg.read(grads[2]),
                  central_diff(B, Wd, [&](const auto& v) { return ln_ref(X, G, v, D, 1e-5); }),
                  2e-3, "d/dbeta");
}

TEST_P(Layers, TrainingWithBatchNormIsBitwiseRepeatable) {
  auto train = [&] {
    Graph g;
    Node x = g.input("x");
    Node w = g.variable("w", {4, 3}, Initializer::normal(0.0f, 0.5f, 9));
    auto bn = nn::BatchNorm::create(g, "bn", 3, 2);
    auto [y, update] = bn(matmul(x, w), nn::Mode::train);
    Node loss = reduce_mean(y * y * y);
    std::vector<Node> params{w, bn.gamma, bn.beta};
    Node step = minimize(loss, params, Optimizer::adam(0.01f));
    CompiledGraph cg =
        GraphCompiler(GetParam().make()).compile(g, {{"x", {8, 4}}}, {loss, step, update});
    const auto xv = random_values(32, 10);
    for (int i = 0; i < 3; ++i) cg.run({{"x", xv}});
    auto out = cg.read(w);
    for (Node v : bn.variables())
      for (float f : cg.read(v)) out.push_back(f);
    return out;
  };
  const auto a = train(), b = train();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, Layers, ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

TEST(LayerErrors, BadArgumentsAreUsageErrors) {
  Graph g;
  EXPECT_THROW(nn::BatchNorm::create(g, "a", 0), UsageError);
  EXPECT_THROW(nn::BatchNorm::create(g, "b", 4, 5), UsageError);
  EXPECT_THROW(nn::BatchNorm::create(g, "c", 4, 4, 1.5f), UsageError);
  EXPECT_THROW(nn::BatchNorm::create(g, "d", 4, 4, 0.1f, 0.0f), UsageError);
  EXPECT_THROW(nn::BatchNorm{}(g.input("x"), nn::Mode::train), UsageError);
  try {
    nn::BatchNorm::create(g, "conv1.bn", -3);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("conv1.bn"), std::string::npos) << e.what();
  }
}

TEST(LayerErrors, WrongChannelsOrRankAreCompileErrors) {
  for (auto mode : {nn::Mode::train, nn::Mode::infer}) {
    Graph g;
    Node x = g.input("x");
    auto bn = nn::BatchNorm::create(g, "bn", 3);
    Node y = bn(x, mode).y;
    // 4 channels against a layer of 3.
    EXPECT_THROW(GraphCompiler(Platform::cpu()).compile(g, {{"x", {2, 4, 2, 2}}}, {y}), Error);
    // rank 2 against a layer of rank 4 (training mode reduces over the spatial axes).
    if (mode == nn::Mode::train) {
      EXPECT_THROW(GraphCompiler(Platform::cpu()).compile(g, {{"x", {2, 3}}}, {y}), Error);
    }
  }
  Graph g;
  Node x = g.input("x");
  Node y = nn::layer_norm(x, g.variable("g", {5}), g.variable("b", {5}));
  EXPECT_THROW(GraphCompiler(Platform::cpu()).compile(g, {{"x", {2, 4}}}, {y}), ShapeError);
}

}  // namespace
