// SPDX-License-Identifier: Apache-2.0
// hetgraph-scale: how compile time, memory and scheduling grow with the graph (issue 15):
// layered random DAGs of tiny nodes and unrolled 4-layer LSTM training steps (hidden 8) of about
// N nodes. One JSON line per graph: nodes, build and compile seconds (each pass, and the
// platform's instantiation), peak resident memory grown per node, and the time per node of a
// run on the chosen engine.
//   hetgraph-scale --kind random|lstm --nodes 10000,100000,1000000 [--engine sequential]
//                  [--runs 3] [--json]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "hetgraph/cli.hpp"
#include "hetgraph/hetgraph.hpp"
#include "workloads.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
// Resident memory now, in bytes (VmRSS of /proc/self/status).
double rss_bytes() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  }
  return 0;
}

// A layered random DAG of about n tiny nodes ([1] values), each reading one or two nodes of the
// layer before (the thread-pool workload's shape, any size).
bench::Case random_dag(std::int64_t n) {
  bench::Case c;
  hetgraph::Graph& g = c.graph;
  std::mt19937 rng(7);
  const int width = 1000;
  const std::int64_t layers = std::max<std::int64_t>(1, n / width);
  auto x = g.input("x");
  std::vector<hetgraph::Node> prev(width, x);
  for (std::int64_t l = 0; l < layers; ++l) {
    std::vector<hetgraph::Node> cur;
    cur.reserve(width);
    for (int i = 0; i < width; ++i) {
      const hetgraph::Node a = prev[rng() % prev.size()];
      cur.push_back(rng() % 2 ? a * 0.5f : a + prev[rng() % prev.size()]);
    }
    prev = std::move(cur);
  }
  c.fetches = prev;
  c.shapes = {{"x", {1}}};
  c.inputs["x"] = {0.25f};
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind = "random", engine = "sequential";
  std::vector<std::string> sizes{"10000"};
  int runs = 3;
  hetgraph::cli::Parser p("hetgraph-scale",
                          "usage: hetgraph-scale --kind random|lstm --nodes N[,N...] "
                          "[--engine sequential|critical-path|shared-queue] [--runs 3]");
  p.choice("--kind", kind, {"random", "lstm"})
      .list("--nodes", sizes)
      .choice("--engine", engine, {"sequential", "critical-path", "shared-queue"})
      .integer("--runs", runs, 0, 1000);
  return hetgraph::cli::run_main(p, argc, argv, [&] {
    for (const std::string& s : sizes) {
      const std::int64_t n = hetgraph::cli::to_int("--nodes", s, 100, 100'000'000);
      const double rss0 = rss_bytes();
      auto t = Clock::now();
      // An LSTM step is about 200 nodes per time step (4 layers, forward and backward).
      const std::string lstm = "lstm-" + std::to_string(std::max<std::int64_t>(1, n / 200)) + "x8";
      bench::Case c = kind == "random" ? random_dag(n) : bench::find_workload(lstm)->make();
      const double build_s = since(t);
      const double rss_graph = rss_bytes();
      hetgraph::CpuOptions o;
      o.engine = hetgraph::parse_engine(engine);
      if (o.engine != hetgraph::CpuEngine::sequential) o.threads_per_executor = 1;
      t = Clock::now();
      auto cg = hetgraph::GraphCompiler(hetgraph::Platform::cpu(o))
                    .compile(c.graph, c.shapes, c.fetches);
      const double compile_s = since(t);
      const double rss_compiled = rss_bytes();
      std::vector<hetgraph::FeedItem> feeds;
      for (const auto& [name, data] : c.inputs) feeds.push_back({name, data});
      for (const auto& [name, data] : c.int_inputs) feeds.push_back({name, data});
      double run_s = 0;
      if (runs > 0) {
        cg.run(feeds);  // warm-up (and, for the parallel engines, a profiled run)
        t = Clock::now();
        for (int r = 0; r < runs; ++r) cg.run(feeds);
        run_s = since(t) / runs;
      }
      const auto& rep = cg.report();
      const auto nodes = static_cast<double>(rep.nodes);
      std::printf(
          "{\"tool\":\"hetgraph-scale\",\"kind\":\"%s\",\"engine\":\"%s\",\"graph_nodes\":%zu,"
          "\"plan_nodes\":%zu,\"build_s\":%.6g,\"compile_s\":%.6g,\"graph_bytes_per_node\":%.1f,"
          "\"compiled_bytes_per_node\":%.1f,\"planned_bytes\":%zu,\"run_s\":%.6g,"
          "\"run_ns_per_node\":%.1f,\"passes\":{",
          kind.c_str(), engine.c_str(), c.graph.size(), rep.nodes, build_s, compile_s,
          (rss_graph - rss0) / static_cast<double>(c.graph.size()),
          (rss_compiled - rss_graph) / nodes, rep.planned_bytes, run_s, run_s * 1e9 / nodes);
      for (std::size_t i = 0; i < rep.pass_seconds.size(); ++i) {
        std::printf("%s\"%s\":%.6g", i ? "," : "", rep.pass_seconds[i].first.c_str(),
                    rep.pass_seconds[i].second);
      }
      std::printf("}}\n");
      std::fflush(stdout);
    }
    return 0;
  });
}
