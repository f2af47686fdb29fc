// SPDX-License-Identifier: Apache-2.0
// hetgraph-many-models: several compiled graphs of one process, each run in a loop by its own
// thread, against the same graphs run one after another (issue 45: they must share the cores,
// not collapse). Each graph is compiled with the default CPU platform, then run until its
// configuration is tuned. One JSON line per round: the runs per second one after another (each
// graph's runs in a row), in turns (one run of each graph, then again: what a server that
// takes one request at a time does when requests for the graphs alternate) and all at once,
// and the ratios of all at once to each. In a row keeps each graph's weights in the caches for
// all its runs; in turns and all at once cannot.
//   hetgraph-many-models [--models
//   lstm-infer-small,pathnet-small,phased-lstm-small,wide-deep-infer-64]
//                        [--runs 40] [--rounds 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "hetgraph/cli.hpp"
#include "hetgraph/hetgraph.hpp"
#include "workloads.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Model {
  std::string name;
  bench::Case c;
  hetgraph::CompiledGraph cg;
  std::vector<hetgraph::FeedItem> feeds;  // the inputs' mapped buffers, written once
  void run() { cg.run(feeds); }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names{"lstm-infer-small", "pathnet-small", "phased-lstm-small",
                                 "wide-deep-infer-64"};
  int runs = 40, rounds = 3;
  hetgraph::cli::Parser p("hetgraph-many-models",
                          "usage: hetgraph-many-models [--models A,B,...] [--runs N] [--rounds R]");
  p.list("--models", names).integer("--runs", runs, 1, 1'000'000).integer("--rounds", rounds, 1, 100);
  return hetgraph::cli::run_main(p, argc, argv, [&] {
    std::vector<Model> models;
    for (const std::string& n : names) {
      auto w = bench::find_workload(n);
      if (!w) throw hetgraph::UsageError("unknown workload '" + n + "'");
      bench::Case c = w->make();
      auto cg = hetgraph::GraphCompiler().compile(c.graph, c.shapes, c.fetches);
      std::vector<hetgraph::FeedItem> feeds = bench::mapped_feeds(c, cg);
      models.push_back({n, std::move(c), std::move(cg), std::move(feeds)});
    }
    // Tuned first (the automatic engine's search), alone.
    for (Model& m : models) {
      for (int i = 0; i < 200 && !m.cg.engine_report().tuned(); ++i) m.run();
      for (int i = 0; i < 3; ++i) m.run();
    }
    const double n = static_cast<double>(models.size()) * runs;
    for (int r = 0; r < rounds; ++r) {
      auto t0 = Clock::now();
      for (Model& m : models)
        for (int i = 0; i < runs; ++i) m.run();
      const double seq_s = since(t0);
      t0 = Clock::now();
      for (int i = 0; i < runs; ++i)
        for (Model& m : models) m.run();
      const double turns_s = since(t0);
      t0 = Clock::now();
      {
        std::vector<std::jthread> threads;
        for (Model& m : models)
          threads.emplace_back([&m, runs] {
            for (int i = 0; i < runs; ++i) m.run();
          });
      }
      const double conc_s = since(t0);
      std::string list;
      for (const Model& m : models) list += (list.empty() ? "" : ",") + m.name;
      std::printf(
          "{\"program\":\"hetgraph-many-models\",\"models\":\"%s\",\"repetition\":%d,\"runs_each\":"
          "%d,"
          "\"sequential_s\":%.6f,\"turns_s\":%.6f,\"concurrent_s\":%.6f,"
          "\"sequential_runs_per_s\":%.3f,\"turns_runs_per_s\":%.3f,\"concurrent_runs_per_s\":%.3f,"
          "\"concurrent_over_sequential\":%.4f,\"concurrent_over_turns\":%.4f}\n",
          list.c_str(), r, runs, seq_s, turns_s, conc_s, n / seq_s, n / turns_s, n / conc_s,
          seq_s / conc_s, turns_s / conc_s);
      std::fflush(stdout);
    }
    return 0;
  });
}
