// SPDX-License-Identifier: Apache-2.0
// hetgraph-dynamic-bench: one DynamicGraph run at batch sizes 1..max in a random order, against
// a graph compiled for each size run in the same order (issue 49). Every size is run once by
// both before timing (the dynamic graph compiles its plans then). One JSON line per round (the
// order reshuffled, which of the two goes first alternating), then a summary with the medians.
//   hetgraph-dynamic-bench [--model mlp|mlp-train] [--max 64] [--max-plans N] [--rounds 5]
//                          [--seed 1] [--variables shared|copied]
// --max-plans (default --max): the dynamic graph's cache; below --max, sizes evicted since
// their last run compile again in the timed loops (what bounding memory further costs).
// mlp: a 784-1024-1024-10 classifier's probabilities; mlp-train: its SGD step (every run
// writes the weights). --variables shared (default): the plans share one VariableStore, as a
// DynamicGraph made from a compiler does; copied: each plan holds its own variables, copied
// into the next plan to run after a run that wrote them (a DynamicGraph made from a Build
// function; what every DynamicGraph did before the store).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "hetgraph/cli.hpp"
#include "hetgraph/hetgraph.hpp"

namespace {

using namespace hetgraph;
using Clock = std::chrono::steady_clock;

struct Mlp {
  Graph g;
  Node x = g.input("x"), y = g.input("y", DType::i32);
  Node w1 = g.variable("w1", {784, 1024}, Initializer::uniform(-0.05f, 0.05f, 1));
  Node w2 = g.variable("w2", {1024, 1024}, Initializer::uniform(-0.05f, 0.05f, 2));
  Node w3 = g.variable("w3", {1024, 10}, Initializer::uniform(-0.05f, 0.05f, 3));
  Node probs = softmax(matmul(relu(matmul(relu(matmul(x, w1)), w2)), w3));
  Node loss = reduce_mean(cross_entropy(probs, y));
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "mlp", variables = "shared";
  int max = 64, max_plans = 0, rounds = 5, seed = 1;
  cli::Parser p("hetgraph-dynamic-bench",
                "usage: hetgraph-dynamic-bench [--model mlp|mlp-train] [--max 64] [--max-plans N] "
                "[--rounds 5] [--seed 1] [--variables shared|copied]");
  p.choice("--model", model, {"mlp", "mlp-train"})
      .integer("--max", max, 1, 4096)
      .integer("--max-plans", max_plans, 1, 4096)
      .integer("--rounds", rounds, 1, 1000)
      .integer("--seed", seed, 0, 1 << 30)
      .choice("--variables", variables, {"shared", "copied"});
  return cli::run_main(p, argc, argv, [&] {
    Mlp m;
    const bool train = model == "mlp-train";
    std::vector<Node> fetches{m.probs};
    if (train) fetches = {m.loss, sgd(m.loss, {m.w1, m.w2, m.w3}, 0.01f)};
    const GraphCompiler compiler;
    DynamicShapes shapes{{"x", {"N", 784}}};
    if (train) shapes.push_back({"y", {"N"}});
    const int plans = max_plans > 0 ? max_plans : max;
    const DynamicOptions o{.max_plans = static_cast<std::size_t>(plans)};
    DynamicGraph dg = variables == "shared"
                          ? DynamicGraph(compiler, m.g, shapes, fetches, o)
                          : DynamicGraph(
                                [&](const InputShapes& s) {
                                  return compiler.compile(m.g, s, std::span<const Node>(fetches));
                                },
                                shapes, o);
    std::vector<CompiledGraph> fixed;
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> xs(static_cast<std::size_t>(max) * 784);
    for (float& v : xs) v = u(rng);
    std::vector<std::int32_t> ys(static_cast<std::size_t>(max));
    for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<std::int32_t>(i % 10);
    auto feeds = [&](std::int64_t n) {
      std::vector<FeedItem> f{
          {"x", std::span<const float>(xs.data(), static_cast<std::size_t>(n * 784))}};
      if (train) f.push_back({"y", std::span<const std::int32_t>(ys.data(), n)});
      return f;
    };
    std::size_t fixed_bytes = 0;
    for (std::int64_t n = 1; n <= max; ++n) {  // untimed: every plan compiled once
      InputShapes s{{"x", {n, 784}}};
      if (train) s.push_back({"y", {n}});
      fixed.push_back(compiler.compile(m.g, s, std::span<const Node>(fetches)));
      fixed.back().run(feeds(n));
      fixed_bytes += fixed.back().planned_bytes();
      dg.run(feeds(n));
    }
    std::vector<std::int64_t> order(static_cast<std::size_t>(max));
    std::iota(order.begin(), order.end(), 1);
    auto time_loop = [&](bool dynamic) {
      const auto t0 = Clock::now();
      for (const std::int64_t n : order) {
        if (dynamic)
          dg.run(feeds(n));
        else
          fixed[static_cast<std::size_t>(n - 1)].run(feeds(n));
      }
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    std::vector<double> ratios, dyn, fix;
    for (int r = 0; r < rounds; ++r) {
      std::shuffle(order.begin(), order.end(), rng);
      double d = 0, f = 0;
      if (r % 2 == 0) {
        d = time_loop(true);
        f = time_loop(false);
      } else {
        f = time_loop(false);
        d = time_loop(true);
      }
      dyn.push_back(d);
      fix.push_back(f);
      ratios.push_back(d / f);
      std::printf(
          "{\"kind\":\"dynamic-batches\",\"model\":\"%s\",\"variables\":\"%s\",\"round\":%d,"
          "\"sizes\":%d,\"max_plans\":%d,\"dynamic_s\":%.6f,\"fixed_s\":%.6f,\"ratio\":%.4f}\n",
          model.c_str(), variables.c_str(), r, max, plans, d, f, d / f);
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf(
        "{\"kind\":\"dynamic-batches-summary\",\"model\":\"%s\",\"variables\":\"%s\","
        "\"rounds\":%d,\"sizes\":%d,\"max_plans\":%d,"
        "\"median_dynamic_s\":%.6f,\"median_fixed_s\":%.6f,\"median_ratio\":%.4f,"
        "\"plans\":%zu,\"compiles\":%zu,\"dynamic_planned_bytes\":%zu,\"fixed_planned_bytes\":%zu,"
        "\"peak_rss_kib\":%ld}\n",
        model.c_str(), variables.c_str(), rounds, max, plans, median(dyn), median(fix),
        median(ratios), dg.plans(), dg.compiles(), dg.planned_bytes(), fixed_bytes, ru.ru_maxrss);
    return 0;
  });
}
