// SPDX-License-Identifier: Apache-2.0
// A hostile user's probe (issue 11): misuse of every public entry point, each expected to be a
// clean hetgraph::Error of the right kind whose message names what was wrong — never a crash
// (this suite runs under AddressSanitizer and UBSan too), never silence.
#include <thread>

#include "hetgraph/autodiff.hpp"
#include "test_util.hpp"

using namespace hetgraph;

namespace {

struct Probe {
  std::string name;
  std::function<void()> misuse;
  std::function<bool(const Error&)> right_kind;
  std::vector<std::string> says;  // parts of the message
};

template <class E>
Probe expect(std::string name, std::function<void()> f, std::vector<std::string> says) {
  return {std::move(name), std::move(f),
          [](const Error& e) { return dynamic_cast<const E*>(&e) != nullptr; }, std::move(says)};
}

InputShapes x_shape() {
  return {{"x", {2, 3}}};
}

std::vector<Probe> probes() {
  std::vector<Probe> p;
  // ---- building graphs
  p.push_back(expect<GraphError>("op on a default node",
                                 [] {
                                   Graph g;
                                   (void)add(Node{}, g.input("x"));
                                 },
                                 {"invalid"}));
  p.push_back(expect<GraphError>("nodes of two graphs in one op",
                                 [] {
                                   Graph a, b;
                                   (void)add(a.input("x"), b.input("x"));
                                 },
                                 {"another graph"}));
  p.push_back(expect<GraphError>("set_input out of range",
                                 [] {
                                   Graph g;
                                   auto x = g.input("x");
                                   exp(x).set_input(3, x);
                                 },
                                 {"no input 3"}));
  p.push_back(expect<GraphError>("a cycle through set_input",
                                 [] {
                                   Graph g;
                                   auto x = g.input("x");
                                   auto y = exp(x).named("y");
                                   auto z = tanh(y).named("z");
                                   y.set_input(0, z);
                                   (void)GraphCompiler().compile(g, x_shape(), {z});
                                 },
                                 {"cycle", "'y'", "'z'"}));
  p.push_back(expect<GraphError>("two nodes with one name",
                                 [] {
                                   Graph g;
                                   g.input("x");
                                   g.variable("x", {2});
                                 },
                                 {"'x'", "already used"}));
  p.push_back(expect<GraphError>("an unnamed input", [] { Graph().input(""); }, {"name"}));
  p.push_back(expect<ShapeError>("a constant with the wrong count",
                                 [] {
                                   Graph().constant({2, 2}, {1, 2, 3});
                                 },
                                 {"[2, 2]", "3"}));
  p.push_back(expect<ShapeError>("a negative dimension", [] { Shape s{2, -3}; }, {"-3"}));
  p.push_back(expect<ShapeError>("rank 9", [] { Shape s{1, 1, 1, 1, 1, 1, 1, 1, 1}; }, {"rank 9"}));
  p.push_back(expect<ShapeError>("reshape with two -1",
                                 [] {
                                   Graph g;
                                   (void)reshape(g.input("x"), {-1, -1});
                                 },
                                 {"-1"}));
  p.push_back(expect<GraphError>("concat of nothing",
                                 [] { (void)concat(std::span<const Node>(), 0); }, {"concat"}));
  p.push_back(expect<GraphError>("group of nothing", [] { (void)group(std::span<const Node>()); },
                                 {"group"}));
  p.push_back(expect<GraphError>("assign to an input",
                                 [] {
                                   Graph g;
                                   auto x = g.input("x");
                                   (void)assign(x, x);
                                 },
                                 {"not a variable"}));
  p.push_back(
      expect<GraphError>("find an unknown name", [] { (void)Graph().find("nope"); }, {"'nope'"}));
  p.push_back(expect<GraphError>("node id out of range", [] { (void)Graph().node(7); }, {"#7"}));
  // ---- compiling
  p.push_back(expect<GraphError>("an empty graph",
                                 [] {
                                   Graph g;
                                   (void)GraphCompiler().compile(g, {}, {});
                                 },
                                 {"empty"}));
  p.push_back(
      expect<GraphError>("a shape for a name that is no input",
                         [] {
                           Graph g;
                           auto x = g.input("x");
                           (void)GraphCompiler().compile(g, {{"x", {2}}, {"y", {2}}}, {exp(x)});
                         },
                         {"'y'"}));
  p.push_back(expect<ShapeError>("an input without a shape",
                                 [] {
                                   Graph g;
                                   auto x = g.input("x");
                                   (void)GraphCompiler().compile(g, {}, {exp(x)});
                                 },
                                 {"'x'", "no shape"}));
  p.push_back(expect<ShapeError>("an empty variable",
                                 [] {
                                   Graph g;
                                   auto v = g.variable("v", {2, 0});
                                   (void)GraphCompiler().compile(g, {}, {exp(v)});
                                 },
                                 {"'v'", "is empty"}));
  p.push_back(expect<GraphError>("fetching a default node",
                                 [] {
                                   Graph g;
                                   g.input("x");
                                   (void)GraphCompiler().compile(g, x_shape(), {Node{}});
                                 },
                                 {"invalid"}));
  p.push_back(expect<GraphError>("fetching another graph's node",
                                 [] {
                                   Graph g, h;
                                   g.input("x");
                                   (void)GraphCompiler().compile(g, x_shape(), {exp(h.input("x"))});
                                 },
                                 {"another graph"}));
  p.push_back(
      expect<ShapeError>("matmul of rank 4",
                         [] {
                           Graph g;
                           auto x = g.input("x");
                           (void)GraphCompiler().compile(g, {{"x", {1, 2, 3, 3}}}, {matmul(x, x)});
                         },
                         {"rank-2 or rank-3"}));
  p.push_back(expect<ShapeError>(
      "assign of the wrong shape",
      [] {
        Graph g;
        auto v = g.variable("v", {3});
        (void)GraphCompiler().compile(g, {}, {assign(v, g.constant({2}, {1, 2}))});
      },
      {"[3]", "[2]"}));
  p.push_back(expect<ShapeError>("gradients of a non-scalar loss",
                                 [] {
                                   Graph g;
                                   auto x = g.input("x");
                                   auto w = g.variable("w", {2, 3});
                                   (void)GraphCompiler().compile(g, x_shape(),
                                                                 gradients(x * w, {w}));
                                 },
                                 {"scalar loss"}));
  p.push_back(expect<GraphError>("gradients with respect to an unrelated variable",
                                 [] {
                                   Graph g;
                                   auto x = g.input("x");
                                   auto w = g.variable("w", {2});
                                   (void)gradients(reduce_sum(x), {w});
                                 },
                                 {"'w'", "does not influence"}));
  p.push_back(expect<GraphError>("sgd of nothing",
                                 [] {
                                   Graph g;
                                   (void)sgd(reduce_sum(g.input("x")), std::span<const Node>(),
                                             0.1f);
                                 },
                                 {"no variables"}));
  p.push_back(expect<GraphError>("sgd of an input",
                                 [] {
                                   Graph g;
                                   auto x = g.input("x");
                                   (void)sgd(reduce_sum(x), {x}, 0.1f);
                                 },
                                 {"'x'", "not a variable"}));
  p.push_back(expect<ShapeError>(
      "embedding with float indices",
      [] {
        Graph g;
        auto t = g.variable("t", {4, 2});
        (void)GraphCompiler().compile(g, {{"ids", {3}}}, {embedding(t, g.input("ids"))});
      },
      {"int32"}));
  p.push_back(expect<ShapeError>(
      "a zero stride",
      [] {
        Graph g;
        auto x = g.input("x");
        auto w = g.variable("w", {1, 1, 2, 2});
        (void)GraphCompiler().compile(g, {{"x", {1, 1, 4, 4}}}, {conv2d(x, w, {.stride = {0, 1}})});
      },
      {"stride"}));
  p.push_back(expect<PlatformError>("negative threads",
                                    [] { (void)Platform::cpu({.threads = -1}); }, {"threads"}));
  p.push_back(expect<PlatformError>("too many executors",
                                    [] { (void)Platform::cpu({.executors = 65}); }, {"64"}));
  p.push_back(
      expect<PlatformError>("an unknown engine", [] { (void)parse_engine("fast"); }, {"'fast'"}));
  p.push_back(expect<PlatformError>(
      "an OpenCL device that does not exist",
      [] { (void)Platform::opencl({.platform_index = 0, .device_index = 99}); }, {"99"}));
  // ---- running and reading
  auto compiled = [] {
    auto g = std::make_shared<Graph>();
    auto x = g->input("x");
    auto ids = g->input("ids", DType::i32);
    auto y = (exp(x) * 2.0f).named("y");
    auto z = embedding(g->variable("t", {4, 3}), ids).named("z");
    g->constant(1.0f).named("one");
    auto cg = std::make_shared<CompiledGraph>(
        GraphCompiler().compile(*g, {{"x", {2, 3}}, {"ids", {2}}}, {y, z, g->find("one")}));
    return std::make_tuple(g, cg, x, y);
  };
  const std::vector<float> six(6, 0.5f), five(5, 0.5f);
  const std::vector<std::int32_t> ids{0, 3};
  p.push_back(expect<FeedError>("a feed of the wrong size",
                                [=] {
                                  auto [g, cg, x, y] = compiled();
                                  cg->run({{"x", five}, {"ids", ids}});
                                },
                                {"'x'", "5", "6"}));
  p.push_back(expect<FeedError>("int32 data for a float input",
                                [=] {
                                  auto [g, cg, x, y] = compiled();
                                  cg->run({{"x", std::vector<std::int32_t>(6, 1)}, {"ids", ids}});
                                },
                                {"'x'", "i32"}));
  p.push_back(expect<FeedError>("the same input fed twice",
                                [=] {
                                  auto [g, cg, x, y] = compiled();
                                  cg->run({{"x", six}, {"x", six}, {"ids", ids}});
                                },
                                {"twice"}));
  p.push_back(expect<FeedError>("an index out of range",
                                [=] {
                                  auto [g, cg, x, y] = compiled();
                                  cg->run({{"x", six}, {"ids", std::vector<std::int32_t>{0, 4}}});
                                },
                                {"index 4", "[0, 4)"}));
  p.push_back(expect<FeedError>("reading into a buffer of the wrong size",
                                [=] {
                                  auto [g, cg, x, y] = compiled();
                                  cg->run({{"x", six}, {"ids", ids}});
                                  std::vector<float> out(5);
                                  cg->read(y, out);
                                },
                                {"'y'", "5"}));
  p.push_back(expect<GraphError>("read_i32 of a float node",
                                 [=] {
                                   auto [g, cg, x, y] = compiled();
                                   cg->run({{"x", six}, {"ids", ids}});
                                   (void)cg->read_i32(y);
                                 },
                                 {"'y'", "f32"}));
  p.push_back(expect<GraphError>("writing a constant",
                                 [=] {
                                   auto [g, cg, x, y] = compiled();
                                   cg->write("one", std::vector<float>{2});
                                 },
                                 {"constant"}));
  p.push_back(expect<FeedError>("mapped_input of a non-input",
                                [=] {
                                  auto [g, cg, x, y] = compiled();
                                  (void)cg->mapped_input("y");
                                },
                                {"'y'", "not an input"}));
  p.push_back(expect<FeedError>("mapped_input of an int input as float",
                                [=] {
                                  auto [g, cg, x, y] = compiled();
                                  (void)cg->mapped_input("ids");
                                },
                                {"'ids'", "i32"}));
  p.push_back(expect<DataError>("a trace nobody can write",
                                [=] {
                                  auto [g, cg, x, y] = compiled();
                                  cg->start_trace("/proc/hetgraph/no/such/dir/trace.json");
                                  cg->run({{"x", six}, {"ids", ids}});
                                  cg->stop_trace();
                                },
                                {"trace"}));
  p.push_back(expect<GraphError>("reading a node added after compiling",
                                 [=] {
                                   auto [g, cg, x, y] = compiled();
                                   auto later = tanh(x);
                                   cg->run({{"x", six}, {"ids", ids}});
                                   (void)cg->read(later);
                                 },
                                 {"pruned"}));
  p.push_back(expect<UsageError>("reading a computed value before any run",
                                 [=] {
                                   auto [g, cg, x, y] = compiled();
                                   (void)cg->read(y);
                                 },
                                 {"'y'", "run the graph first"}));
  return p;
}

TEST(Probe, EveryMisuseIsACleanErrorOfTheRightKind) {
  int n = 0;
  for (const Probe& pr : probes()) {
    SCOPED_TRACE(pr.name);
    ++n;
    try {
      pr.misuse();
      ADD_FAILURE() << pr.name << ": no error";
    } catch (const Error& e) {
      EXPECT_TRUE(pr.right_kind(e)) << pr.name << ": wrong kind: " << e.what();
      for (const std::string& part : pr.says) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << pr.name << ": the message does not say '" << part << "': " << e.what();
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << pr.name << ": not a hetgraph::Error: " << e.what();
    }
  }
  EXPECT_GE(n, 45);
}

// Misuse that must simply work: destroying a graph mid-run, waiting with nothing in flight, a
// handle outliving its graph, compiling one graph from two threads.
TEST(Probe, LifetimesAndThreadsThatMustJustWork) {
  Graph g;
  auto x = g.input("x");
  Node y = x;
  for (int i = 0; i < 50; ++i) y = tanh(y) * 1.01f;
  const std::vector<float> xv(50000, 0.5f);
  RunHandle h;
  {
    auto cg = GraphCompiler().compile(g, {{"x", {50000}}}, {y});
    cg.wait();  // nothing in flight
    h = cg.run_async({{"x", xv}});
  }  // destroyed with the run in flight: it finishes first
  EXPECT_TRUE(h.done());
  EXPECT_NO_THROW(h.wait());
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int t = 0; t < 2; ++t) {
    ts.emplace_back([&] {
      auto cg = GraphCompiler().compile(g, {{"x", {50000}}}, {y});
      cg.run({{"x", xv}});
      ok += cg.read(y).size() == 50000;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 2);
}

}  // namespace
