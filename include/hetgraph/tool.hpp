// SPDX-License-Identifier: Apache-2.0
// What hetgraph's command-line programs share when they compile and time graphs (hetgraph-run,
// hetgraph-bench), installed for programs built on hetgraph: the platform and engine flags
// (--platform, --engine, --executors NxT|auto, --threads) over the command-line parser, the
// platform they name, and a timed loop with its statistics.
//
//   hetgraph::tool::EngineFlags e;
//   hetgraph::cli::Parser parser("prog", "usage: prog [--engine E] [--threads N]");
//   hetgraph::tool::add_engine_flags(parser, e);
//   parser.parse(argc, argv);
//   hetgraph::tool::check_engine_flags(e);
//   hetgraph::GraphCompiler compiler(hetgraph::tool::make_platform(e));
//   auto cg = compiler.compile(g, shapes, fetches);
//   auto t = hetgraph::tool::time_runs(cg, feeds, {.repeat = 10, .warmup = 3});
//   std::printf("%.6f s\n", hetgraph::tool::median(t.samples));
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "hetgraph/cli.hpp"
#include "hetgraph/compiler.hpp"

namespace hetgraph::tool {

struct EngineFlags {
  std::string platform = "cpu";
  // Empty: the platform's default (CPU: auto; OpenCL: out-of-order). opencl: in-order or
  // out-of-order ("sequential" is taken as the default too).
  std::string engine;
  int executors = 0, threads_per_executor = 0;  // --executors NxT (0: engine's choice / auto)
  int threads = 0;
  double inline_below_us = -1;  // <0: library default
  bool pin = true;              // CpuOptions::pin_threads
  bool per_op_threads = false;  // --per-op-threads: CpuOptions::Experimental::per_op_threads
};

/// `hetero`: --platform also takes "hetero" (hetgraph-bench's heterogeneous platform).
inline void add_engine_flags(cli::Parser& p, EngineFlags& e, bool hetero = false) {
  if (hetero) {
    p.choice("--platform", e.platform, {"cpu", "opencl", "hetero"});
  } else {
    p.choice("--platform", e.platform, {"cpu", "opencl"});
  }
  p.choice("--engine", e.engine,
           {"sequential", "shared-queue", "critical-path", "auto", "in-order", "out-of-order"})
      .custom("--executors",
              [&e](std::string_view v) {
                if (v == "auto") return;
                std::tie(e.executors, e.threads_per_executor) = cli::to_executors("--executors", v);
              })
      .integer("--threads", e.threads, 0, 4096)
      .flag("--per-op-threads", e.per_op_threads);
}

/// The engines each platform takes (a UsageError otherwise).
inline void check_engine_flags(const EngineFlags& e) {
  const bool cl_engine = e.engine == "in-order" || e.engine == "out-of-order";
  if (e.platform != "opencl" && cl_engine)
    throw cli::UsageError("--engine: '" + e.engine +
                          "' is an OpenCL queue mode (--platform opencl)");
  if (e.platform == "opencl" && !cl_engine && !e.engine.empty() && e.engine != "sequential")
    throw cli::UsageError("--engine: '" + e.engine +
                          "' is a CPU engine (opencl: in-order or out-of-order)");
}

/// The platform the flags name (CPU options from --engine, --executors, --threads).
Platform make_platform(const EngineFlags& e);

struct TimingOptions {
  int repeat = 10;
  int warmup = 3;
  int runs_per_sample = 1;
  std::string trace;  // Chrome trace of the timed runs, when set
  bool profile = false;  // Timing::profile: the timed runs' Profile (not tuning or warm-up)
  /// Run and timed apart before each sample (one run per sample then), e.g. writing inputs.
  std::function<void()> before_sample = nullptr;
  /// Every run timed from the first, one run per sample: an automatic engine's tuning runs
  /// count, and the warm-up runs are samples too (what a fresh process pays):
  /// (warmup + repeat) x runs_per_sample runs in all.
  bool cold = false;
};

struct Timing {
  std::vector<double> samples;  // seconds per run
  std::vector<double> before;   // seconds of before_sample, per sample
  int tuning_runs = 0;          // runs an automatic engine spent choosing its configuration
  Profile profile;              // TimingOptions::profile: the timed runs' (cold: every run's)
};

/// Runs until an automatic engine has tuned itself, then the warm-up runs, then `repeat`
/// timed samples (cold: every run timed from the first).
Timing time_runs(CompiledGraph& cg, std::span<const FeedItem> feeds, const TimingOptions& o);

double median(std::vector<double> v);
/// "NxT": lanes (CPU executors, OpenCL queues) x threads of the first.
std::string lanes_label(const EngineReport& r);

}  // namespace hetgraph::tool
