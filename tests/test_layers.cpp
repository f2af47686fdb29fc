// SPDX-License-Identifier: Apache-2.0
// Layers (include/hetgraph/layers.hpp): the linear layer and its initial weights, batch norm in
// both modes and layer norm, forward values
// and running statistics against float64 references, gradients against float64 central
// differences of the same references; dropout's mask statistics, its gradient, its step and
// its modes; on every platform.
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

// Dropout of x (shape {R, C}) at a fed step: the compiled graph and the output node.
struct DropoutRun {
  Graph g;
  Node x, y;
  CompiledGraph cg;
  DropoutRun(const Platform& platform, std::int64_t R, std::int64_t C, float p, std::uint64_t seed)
      : x(g.input("x")),
        y(dropout(x, g.input("step"), p, seed)),
        cg(GraphCompiler(platform).compile(g, {{"x", {R, C}}, {"step", {}}}, {y})) {}
  std::vector<float> operator()(const std::vector<float>& xv, float step) {
    const std::vector<float> sv{step};
    cg.run({{"x", xv}, {"step", sv}});
    return cg.read(y);
  }
};

TEST_P(Layers, DropoutKeepsOneMinusPOfTheElementsScaled) {
  const std::int64_t R = 256, C = 512, n = R * C;
  const float p = 0.3f, scale = 1.0f / (1.0f - p);
  DropoutRun run(GetParam().make(), R, C, p, 1234);
  auto xv = random_values(static_cast<std::size_t>(n), 2, 0.5f, 2.0f);
  xv[5] = std::nanf("");
  const auto y = run(xv, 0.0f);
  std::int64_t kept = 0, pairs = 0;
  std::vector<std::int64_t> kept_in_row(R, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (i == 5) {
      EXPECT_TRUE(std::isnan(y[k])) << "NaN * mask stays NaN";
      continue;
    }
    const bool keep = y[k] != 0.0f;
    // Each output is exactly x * scale (kept) or 0 (dropped).
    if (keep) {
      ASSERT_EQ(y[k], xv[k] * scale) << i;
    }
    kept += keep;
    kept_in_row[static_cast<std::size_t>(i / C)] += keep;
    if (i % C != 0 && keep && y[k - 1] != 0.0f) ++pairs;
  }
  // Binomial: sd of the kept fraction is sqrt(p (1 - p) / n) = 0.0013; allow 5 sd.
  EXPECT_NEAR(static_cast<double>(kept) / (n - 1), 1.0 - p, 0.0065);
  // Neighbours independent: both kept (1 - p)^2 of the time.
  EXPECT_NEAR(static_cast<double>(pairs) / (R * (C - 1)), (1 - p) * (1 - p), 0.008);
  // No row is far off (a stream's structure would show per row): 512 draws, sd 10.4; 6 sd.
  for (std::int64_t r = 0; r < R; ++r)
    EXPECT_NEAR(static_cast<double>(kept_in_row[static_cast<std::size_t>(r)]), (1 - p) * C, 63)
        << "row " << r;
}

TEST_P(Layers, DropoutMaskFollowsTheStepAndTheSeed) {
  const std::int64_t R = 64, C = 100, n = R * C;
  const float p = 0.5f;
  DropoutRun run(GetParam().make(), R, C, p, 7), other_seed(GetParam().make(), R, C, p, 8);
  const auto xv = random_values(static_cast<std::size_t>(n), 3, 1.0f, 2.0f);
  const auto a = run(xv, 0.0f), b = run(xv, 1.0f), a2 = run(xv, 0.0f), c = other_seed(xv, 0.0f);
  auto agree = [&](const std::vector<float>& u, const std::vector<float>& v) {
    std::int64_t same = 0;
    for (std::size_t i = 0; i < u.size(); ++i) same += (u[i] != 0.0f) == (v[i] != 0.0f);
    return static_cast<double>(same) / static_cast<double>(u.size());
  };
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(a2[i])) << i;
  // Independent masks of p = 0.5 agree on half the elements (sd 0.0063).
  EXPECT_NEAR(agree(a, b), 0.5, 0.035) << "a new step draws a new mask";
  EXPECT_NEAR(agree(a, c), 0.5, 0.035) << "another seed draws another mask";
}

TEST_P(Layers, DropoutOfZeroAndOne) {
  const auto xv = random_values(60, 4);
  DropoutRun none(GetParam().make(), 6, 10, 0.0f, 1), all(GetParam().make(), 6, 10, 1.0f, 1);
  const auto y0 = none(xv, 3.0f), y1 = all(xv, 3.0f);
  for (std::size_t i = 0; i < xv.size(); ++i) {
    EXPECT_EQ(y0[i], xv[i]) << i;
    EXPECT_EQ(y1[i], 0.0f) << i;
  }
}

TEST_P(Layers, DropoutGradientIsTheForwardMask) {
  Graph g;
  Node x = g.input("x"), r = g.input("r"), step = g.input("step");
  Node y = dropout(x, step, 0.4f, 99);
  Node dx = gradients(reduce_sum(y * r), {x})[0];
  CompiledGraph cg = GraphCompiler(GetParam().make())
                         .compile(g, {{"x", {8, 50}}, {"r", {8, 50}}, {"step", {}}}, {y, dx});
  const auto xv = random_values(400, 5, 0.5f, 1.5f), rv = random_values(400, 6);
  for (float s : {0.0f, 17.0f}) {
    const std::vector<float> sv{s};
    cg.run({{"x", xv}, {"r", rv}, {"step", sv}});
    const auto yv = cg.read(y), dv = cg.read(dx);
    for (std::size_t i = 0; i < xv.size(); ++i) {
      // dy/dx = y / x: the scale where kept, 0 where dropped.
      EXPECT_EQ(dv[i], yv[i] == 0.0f ? 0.0f : rv[i] * (1.0f / 0.6f)) << "step " << s << " " << i;
    }
  }
}

TEST_P(Layers, TrainingWithDropoutDrawsANewMaskEachStepAndRepeatsBitwise) {
  auto train = [&](std::vector<std::vector<float>>* masks) {
    Graph g;
    Node x = g.input("x");
    Node w = g.variable("w", {4, 16}, Initializer::normal(0.0f, 0.5f, 9));
    Node v = g.variable("v", {16, 1}, Initializer::normal(0.0f, 0.5f, 10));
    Node step = step_counter(g);
    Node h = nn::dropout(relu(matmul(x, w)), step, 0.5f, 3, nn::Mode::train);
    Node loss = reduce_mean(matmul(h, v) * matmul(h, v));
    Node train_step = minimize(loss, {w, v}, Optimizer::adam(0.01f), {.step = step});
    CompiledGraph cg =
        GraphCompiler(GetParam().make()).compile(g, {{"x", {8, 4}}}, {h, loss, train_step});
    const auto xv = random_values(32, 11, 0.5f, 1.0f);
    for (int i = 0; i < 3; ++i) {
      cg.run({{"x", xv}});
      if (masks) masks->push_back(cg.read(h));
    }
    EXPECT_EQ(cg.read(step)[0], 3.0f);
    auto out = cg.read(w);
    for (float f : cg.read(v)) out.push_back(f);
    return out;
  };
  std::vector<std::vector<float>> masks;
  const auto a = train(&masks), b = train(nullptr);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i])) << i;
  // Each step's mask differs from the last (x > 0 and relu: a zero is a drop or a dead unit).
  for (std::size_t s = 1; s < masks.size(); ++s) {
    std::size_t differ = 0;
    for (std::size_t i = 0; i < masks[s].size(); ++i)
      differ += (masks[s][i] == 0.0f) != (masks[s - 1][i] == 0.0f);
    EXPECT_GT(differ, 10u) << "step " << s;
  }
}

// nn::Linear: y = x W + b for rank-2 and rank-3 inputs, with and without a bias.
TEST_P(Layers, LinearIsXTimesWPlusB) {
  for (const bool with_bias : {true, false}) {
    for (const bool rank3 : {false, true}) {
      SCOPED_TRACE(std::string(with_bias ? "bias" : "no bias") + (rank3 ? ", rank 3" : ""));
      Graph g;
      Node x = g.input("x");
      auto fc = nn::Linear::create(g, "fc", 5, 3, nn::Init::he_normal, 11, with_bias);
      ASSERT_EQ(fc.parameters().size(), with_bias ? 2u : 1u);
      Node y = fc(x);
      const Shape xs = rank3 ? Shape{2, 4, 5} : Shape{4, 5};
      CompiledGraph cg = GraphCompiler(GetParam().make()).compile(g, {{"x", xs}}, {y});
      const auto xv = random_values(static_cast<std::size_t>(xs.numel()), 3);
      const auto w = cg.read(fc.weight);
      std::vector<float> b(3, 0.0f);
      if (with_bias) {
        b = {0.5f, -1.0f, 2.0f};
        cg.write(fc.bias, b);
      }
      cg.run({{"x", xv}});
      const std::int64_t rows = xs.numel() / 5;
      std::vector<double> want(static_cast<std::size_t>(rows * 3));
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t o = 0; o < 3; ++o) {
          double acc = b[static_cast<std::size_t>(o)];
          for (std::int64_t i = 0; i < 5; ++i)
            acc += static_cast<double>(xv[static_cast<std::size_t>(r * 5 + i)]) *
                   w[static_cast<std::size_t>(i * 3 + o)];
          want[static_cast<std::size_t>(r * 3 + o)] = acc;
        }
      }
      expect_near_all(cg.read(y), want, 1e-5, "y");
    }
  }
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

TEST(LayerErrors, DropoutArgumentsAndInferenceMode) {
  Graph g;
  Node x = g.input("x"), step = g.input("step");
  EXPECT_THROW(dropout(x, step, 1.5f, 0), UsageError);
  EXPECT_THROW(dropout(x, step, -0.1f, 0), UsageError);
  EXPECT_THROW(dropout(x, step, std::nanf(""), 0), UsageError);
  EXPECT_THROW(nn::dropout(x, step, 2.0f, 0, nn::Mode::infer), UsageError);
  EXPECT_THROW(nn::dropout(Node{}, step, 0.5f, 0, nn::Mode::train), UsageError);
  // Inference: the identity, no node at all.
  EXPECT_EQ(nn::dropout(x, step, 0.5f, 0, nn::Mode::infer), x);
  // The step must be one float: a ShapeError naming the dropout node.
  auto compile_error = [&](Shape xs, Shape ss, DType sd) {
    Graph h;
    Node hy = dropout(h.input("x"), h.input("step", sd), 0.5f, 0).named("drop1");
    try {
      GraphCompiler(Platform::cpu()).compile(h, {{"x", xs}, {"step", ss}}, {hy});
    } catch (const ShapeError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const std::string& why :
       {compile_error({2, 3}, {2}, DType::f32), compile_error({2, 3}, {}, DType::i32)}) {
    EXPECT_NE(why.find("drop1"), std::string::npos) << why;
    EXPECT_NE(why.find("step must be a float scalar"), std::string::npos) << why;
  }
}

// Xavier and He initial weights have their variances (within sampling error over 40,000
// values), uniform ones stay within their bound, layers of different names draw different
// weights and a rebuilt graph the same ones.
TEST(LayerInit, XavierAndHeDrawWithTheirVariances) {
  const std::int64_t in = 400, out = 100;
  auto draw = [&](nn::Init kind, const std::string& name) {
    Graph g;
    Node x = g.input("x");
    auto fc = nn::Linear::create(g, name, in, out, kind);
    CompiledGraph cg = GraphCompiler(Platform::cpu()).compile(g, {{"x", {1, in}}}, {fc(x)});
    return cg.read(fc.weight);
  };
  const struct {
    nn::Init kind;
    double variance;
    bool uniform;
  } cases[] = {{nn::Init::xavier_uniform, 2.0 / (in + out), true},
               {nn::Init::xavier_normal, 2.0 / (in + out), false},
               {nn::Init::he_uniform, 2.0 / in, true},
               {nn::Init::he_normal, 2.0 / in, false}};
  for (const auto& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.kind));
    const std::vector<float> w = draw(c.kind, "fc");
    double sum = 0.0, sq = 0.0, largest = 0.0;
    for (float v : w) {
      sum += v;
      sq += static_cast<double>(v) * v;
      largest = std::max(largest, std::fabs(static_cast<double>(v)));
    }
    const double n = static_cast<double>(w.size()), mean = sum / n, var = sq / n - mean * mean;
    EXPECT_LT(std::fabs(mean), 4.0 * std::sqrt(c.variance / n));
    EXPECT_NEAR(var / c.variance, 1.0, 0.03);
    if (c.uniform) {
      EXPECT_LE(largest, std::sqrt(3.0 * c.variance) * (1 + 1e-6));
    }
    EXPECT_EQ(draw(c.kind, "fc"), w) << "a rebuilt graph draws the same weights";
    EXPECT_NE(draw(c.kind, "fc2"), w) << "another layer draws other weights";
  }
}

TEST(LayerErrors, LinearArgumentsAndInputs) {
  Graph g;
  EXPECT_THROW(nn::initializer(nn::Init::he_normal, 0, 4, 1), UsageError);
  EXPECT_THROW(nn::Linear{}(g.input("x")), UsageError);
  try {
    nn::Linear::create(g, "encoder.fc9", 0, 3);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.fc9"), std::string::npos) << e.what();
  }
  // 6 features into a layer of 5.
  Graph g2;
  Node x = g2.input("x");
  Node y = nn::Linear::create(g2, "fc", 5, 3)(x);
  EXPECT_THROW(GraphCompiler(Platform::cpu()).compile(g2, {{"x", {2, 6}}}, {y}), ShapeError);
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
