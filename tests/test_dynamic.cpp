// SPDX-License-Identifier: Apache-2.0
// DynamicGraph: named dims resolved per run, a plan per shape in a bounded cache, one variable
// state across plans; against graphs compiled for each fixed shape.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "hetgraph/hetgraph.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using testing_util::random_vec;

namespace {

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

#define EXPECT_HAS(s, sub) EXPECT_NE(std::string(s).find(sub), std::string::npos) << (s)

class Dynamic : public testing::TestWithParam<testing_util::PlatformCase> {};

// A classifier over batches of any size, in an order that revisits sizes: every run equals a
// graph compiled for that size, bit for bit, and each size compiles once.
TEST_P(Dynamic, BatchesOfAnySizeEqualFixedShapeGraphs) {
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {5, 4}, Initializer::uniform(-1, 1, 3));
  auto b = g.variable("b", {4}, Initializer::uniform(-1, 1, 4));
  auto y = softmax(matmul(x, W) + b).named("y");
  const GraphCompiler c(GetParam().make());
  DynamicGraph dg(c, g, {{"x", {"N", 5}}}, {y});
  for (const std::int64_t n : {3, 1, 7, 3, 1, 7}) {
    SCOPED_TRACE("N = " + std::to_string(n));
    const std::vector<float> xs = random_vec(static_cast<std::size_t>(n * 5), 10 + n);
    dg.run({{"x", xs}});
    CompiledGraph fixed = c.compile(g, {{"x", {n, 5}}}, {y});
    fixed.run({{"x", xs}});
    EXPECT_EQ(dg.read(y), fixed.read(y));
    EXPECT_EQ(dg.read("y"), fixed.read(y));
    EXPECT_EQ(dg.shape(y), (Shape{n, 4}));
    EXPECT_EQ(dg.dims(), (DimSizes{{"N", n}}));
  }
  EXPECT_EQ(dg.compiles(), 3u);
  EXPECT_EQ(dg.plans(), 3u);
  EXPECT_GT(dg.planned_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, Dynamic, testing::ValuesIn(testing_util::platforms()),
                         [](const auto& i) { return i.param.name; });

// Two inputs share T: each run takes it from whichever feed determines it; disagreeing feeds,
// sizes no dim fits and dims nothing determines are FeedErrors naming inputs and dims, and
// leave the graph usable.
TEST(DynamicErrors, SharedDimsMustAgree) {
  Graph g;
  auto a = g.input("a"), m = g.input("m");
  auto y = reduce_sum(a * m, 1).named("y");  // a [B, T] times m [T]
  DynamicGraph dg(GraphCompiler(), g, {{"a", {"B", "T"}}, {"m", {"T"}}}, {y});
  dg.run({{"a", random_vec(6, 1)}, {"m", {1.0f, 2.0f, 3.0f}}});  // T = 3 from m, then B = 2
  EXPECT_EQ(dg.dims(), (DimSizes{{"B", 2}, {"T", 3}}));
  EXPECT_EQ(dg.shape(y), (Shape{2}));
  EXPECT_HAS(what_of([&] {
               dg.run({{"a", random_vec(8, 1)}, {"m", {1.0f, 2.0f, 3.0f}}});
             }),
             "input 'a' [B, T] has 8 values: no size of 'B' gives that");
  EXPECT_HAS(what_of([&] {
               dg.run({{"a", random_vec(6, 1)}, {"m", {1.0f, 2.0f, 3.0f}}}, {{"B", 3}});
             }),
             "input 'm' [T] has 3 values, where T = 2 (from input 'a') need 2");
  // a alone: two unknowns, so T must come from dims.
  EXPECT_HAS(what_of([&] {
               dg.run({{"a", random_vec(6, 1)}});
             }),
             "the size of dim 'B' is not given");
  EXPECT_HAS(what_of([&] {
               dg.run({{"a", random_vec(6, 1)}}, {{"Q", 2}});
             }),
             "dims: 'Q' is not a named dim of any input");
  EXPECT_HAS(what_of([&] { dg.run({{"a", random_vec(6, 1)}}, {{"T", 0}}); }), "not positive");
  // Dims from `dims` and the feeds together: T = 2, so B = 3; m is then fed [2].
  dg.run({{"a", random_vec(6, 2)}, {"m", {1.0f, -1.0f}}}, {{"T", 2}});
  EXPECT_EQ(dg.dims(), (DimSizes{{"B", 3}, {"T", 2}}));
  EXPECT_EQ(dg.compiles(), 2u);
  EXPECT_THROW(DynamicGraph(GraphCompiler(), g, {{"a", {2, -3}}}, {y}), ShapeError);
  EXPECT_THROW(DynamicGraph(GraphCompiler(), g, {{"a", {"B", 3}}}, {y}, {.max_plans = 0}),
               UsageError);
  DynamicGraph fresh(GraphCompiler(), g, {{"a", {"B", "T"}}, {"m", {"T"}}}, {y});
  EXPECT_THROW(fresh.current(), UsageError);
}

// Training with batches of changing size: the variables are one state. Each step equals a
// fixed-shape graph's step from the same values, and a cache of 2 plans, cycling through 3
// sizes, evicts and recompiles without losing a step. Both ways of keeping one state: plans
// sharing a VariableStore (a DynamicGraph made from a compiler), and plans with their own
// variables, copied into the next plan to run (a user's Build function).
class DynamicTraining : public testing::TestWithParam<bool> {};

TEST_P(DynamicTraining, VariablesCarryAcrossShapesAndEvictions) {
  Graph g;
  auto x = g.input("x"), t = g.input("t", DType::i32);
  auto W = g.variable("W", {6, 3}, Initializer::uniform(-0.5f, 0.5f, 7));
  auto loss = reduce_mean(cross_entropy(softmax(matmul(x, W)), t)).named("loss");
  auto step = sgd(loss, {W}, 0.2f, 0.9f);
  const bool shared = GetParam();
  const DynamicShapes shapes = {{"x", {"N", 6}}, {"t", {"N"}}};
  DynamicGraph dg = shared
                        ? DynamicGraph(GraphCompiler(), g, shapes, {loss, step}, {.max_plans = 2})
                        : DynamicGraph(
                              [&](const InputShapes& s) {
                                return GraphCompiler().compile(g, s, {loss, step});
                              },
                              shapes, {.max_plans = 2});
  std::vector<float> w;  // the reference: a fixed-shape graph per step, state copied by hand
  std::vector<std::pair<std::string, std::vector<float>>> state;
  int k = 0;
  for (const std::int64_t n : {4, 2, 5, 4, 2, 5, 4}) {
    SCOPED_TRACE("step " + std::to_string(k) + ", N = " + std::to_string(n));
    const std::vector<float> xs = random_vec(static_cast<std::size_t>(n * 6), 20 + k);
    std::vector<std::int32_t> ts;
    for (std::int64_t i = 0; i < n; ++i) ts.push_back(static_cast<std::int32_t>((i + k) % 3));
    dg.run({{"x", xs}, {"t", ts}});
    CompiledGraph fixed = GraphCompiler().compile(g, {{"x", {n, 6}}, {"t", {n}}}, {loss, step});
    for (const auto& [name, v] : state) fixed.write(name, v);
    fixed.run({{"x", xs}, {"t", ts}});
    EXPECT_EQ(dg.read(loss), fixed.read(loss));
    EXPECT_EQ(dg.read("W"), fixed.read("W"));
    state.clear();
    for (const char* name : {"W", "W/velocity"}) state.push_back({name, fixed.read(name)});
    ++k;
  }
  EXPECT_EQ(dg.plans(), 2u);
  EXPECT_EQ(dg.compiles(), 7u);  // three sizes through two plans: every step a miss
  // A write goes to the newest state and reaches the next plan that runs.
  const std::vector<float> zeros(18, 0.0f);
  dg.write("W", zeros);
  dg.run({{"x", random_vec(12, 5)}, {"t", {0, 1}}});
  EXPECT_NEAR(dg.read(loss)[0], std::log(3.0f), 1e-6f);  // W was 0: a uniform softmax
  // A checkpoint of the newest state loads into another DynamicGraph (after its first run)
  // and reaches its other plans.
  dg.run({{"x", random_vec(30, 6)}, {"t", {0, 1, 2, 0, 1}}});
  const std::string path = testing::TempDir() + "dynamic.ckpt";
  dg.save(path);
  DynamicGraph other(GraphCompiler(), g, {{"x", {"N", 6}}, {"t", {"N"}}}, {loss, step});
  EXPECT_THROW(other.load(path), UsageError);
  other.run({{"x", random_vec(6, 7)}, {"t", {1}}});
  const LoadReport r = other.load(path);
  EXPECT_EQ(r.loaded, (std::vector<std::string>{"W", "W/velocity"}));
  const std::vector<float> xs = random_vec(18, 8);
  dg.run({{"x", xs}, {"t", {2, 1, 0}}});
  other.run({{"x", xs}, {"t", {2, 1, 0}}});  // N = 3: a plan compiled after the load
  EXPECT_EQ(other.read("W"), dg.read("W"));
  EXPECT_EQ(other.read(loss), dg.read(loss));
}

INSTANTIATE_TEST_SUITE_P(SharedOrCopied, DynamicTraining, testing::Bool(),
                         [](const auto& i) { return i.param ? "shared" : "copied"; });

// Graphs compiled with one VariableStore hold one copy of each variable: a training graph's
// steps reach an inference graph of the same model at once (its packed weights repacked on
// the CPU), a graph compiled later starts from the current values, and a write or a
// checkpoint load through either graph is what the other reads.
class SharedVariables : public testing::TestWithParam<testing_util::PlatformCase> {};

TEST_P(SharedVariables, TrainingAndInferenceGraphsHoldOneCopy) {
  Graph g;
  auto x = g.input("x"), t = g.input("t", DType::i32);
  auto W = g.variable("W", {8, 4}, Initializer::uniform(-0.5f, 0.5f, 11));
  auto b = g.variable("b", {4});
  auto probs = softmax(matmul(x, W) + b).named("probs");
  auto loss = reduce_mean(cross_entropy(probs, t)).named("loss");
  auto step = minimize(loss, {W, b}, Optimizer::adam(0.05f));
  VariableStore store;
  CompileOptions o;
  o.variables = store;
  const GraphCompiler c(GetParam().make(), o);
  CompiledGraph train = c.compile(g, {{"x", {6, 8}}, {"t", {6}}}, {loss, step});
  const std::vector<float> xs = random_vec(48, 31), one = random_vec(8, 32);
  const std::vector<std::int32_t> ts = {0, 1, 2, 3, 0, 1};
  train.run({{"x", xs}, {"t", ts}});
  // Compiled after a step: it starts from the stepped values, not the initial ones.
  CompiledGraph infer = c.compile(g, {{"x", {1, 8}}}, {probs});
  EXPECT_EQ(store.size(), 7u);  // W, b, their two Adam moments each, and the step count
  auto reference = [&] {        // a graph of its own, with the training graph's values written in
    CompiledGraph r = GraphCompiler(GetParam().make()).compile(g, {{"x", {1, 8}}}, {probs});
    r.write("W", train.read("W"));
    r.write("b", train.read("b"));
    r.run({{"x", one}});
    return r.read(probs);
  };
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE("after step " + std::to_string(k + 1));
    infer.run({{"x", one}});
    EXPECT_EQ(infer.read(probs), reference());
    EXPECT_EQ(infer.read("W"), train.read("W"));
    train.run({{"x", xs}, {"t", ts}});
  }
  // Writes and loads through one graph are what the other reads.
  infer.write("W", std::vector<float>(32, 0.0f));
  infer.write("b", std::vector<float>(4, 0.0f));
  train.run({{"x", xs}, {"t", ts}});
  EXPECT_NEAR(train.read(loss)[0], std::log(4.0f), 1e-6f);  // W, b were 0: a uniform softmax
  const std::string path = testing::TempDir() + "shared_" + GetParam().name + ".ckpt";
  train.save(path);
  train.run({{"x", xs}, {"t", ts}});
  infer.load(path, {.strict = false});  // only W and b: infer has no Adam state
  EXPECT_EQ(train.read("W"), infer.read("W"));
  infer.run({{"x", one}});
  EXPECT_EQ(infer.read(probs), reference());
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, SharedVariables,
                         testing::ValuesIn(testing_util::platforms()),
                         [](const auto& i) { return i.param.name; });

TEST(SharedVariablesErrors, NamedMismatchesAndOtherPlatforms) {
  Graph g;
  auto x = g.input("x");
  auto y = matmul(x, g.variable("W", {3, 2}));
  Graph other;
  auto x2 = other.input("x");
  auto y2 = matmul(x2, other.variable("W", {3, 5}));
  VariableStore store;
  CompileOptions o;
  o.variables = store;
  CompiledGraph first = GraphCompiler(Platform::cpu(), o).compile(g, {{"x", {1, 3}}}, {y});
  EXPECT_HAS(what_of([&] {
               GraphCompiler(Platform::cpu(), o).compile(other, {{"x", {1, 3}}}, {y2});
             }),
             "variable 'W' (#1, variable) is [3, 5] f32 in this graph and [3, 2] f32 in the "
             "VariableStore");
  EXPECT_THROW(GraphCompiler(Platform::cpu(), o).compile(other, {{"x", {1, 3}}}, {y2}), ShapeError);
  if (Platform::opencl_available()) {
    const std::string e = what_of([&] {
      GraphCompiler(Platform::opencl(), o).compile(g, {{"x", {1, 3}}}, {y});
    });
    EXPECT_HAS(e, "a VariableStore holds memory of one platform: it has cpu's");
    const std::string h = what_of([&] {
      VariableStore fresh;
      CompileOptions ho;
      ho.variables = fresh;
      GraphCompiler(Platform::heterogeneous({Platform::cpu(), Platform::opencl()}), ho)
          .compile(g, {{"x", {1, 3}}}, {y});
    });
    EXPECT_HAS(h, "the heterogeneous platform does not take one");
  }
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), 64u);  // 6 floats, padded to 64 bytes
}

}  // namespace
