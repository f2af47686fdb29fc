// What hetgraph's command-line programs share when they time compiled graphs (hetgraph-bench,
// hetgraph-run): the platform from the engine flags, the timed loop and its statistics.
// Internal: the hetgraph_tool library.
//
//   tool::EngineFlags e;
//   tool::add_engine_flags(parser, e);            // --platform --engine --executors --threads
//   auto cg = GraphCompiler(tool::make_platform(e)).compile(g, shapes, fetches);
//   tool::Timing t = tool::time_runs(cg, feeds, {.repeat = 10, .warmup = 3});
//   std::printf("%.6f s\n", tool::median(t.samples));
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/engine_flags.hpp"
#include "hetgraph/compiler.hpp"

namespace hetgraph::detail::cpu {
class ReplayModel;
}

namespace hetgraph::tool {

/// `replay`: the CPU platform replays kernels with that model (hetgraph-bench --replay-cores).
Platform make_platform(const EngineFlags& e,
                       std::shared_ptr<const detail::cpu::ReplayModel> replay = nullptr);

struct TimingOptions {
  int repeat = 10;
  int warmup = 3;
  int runs_per_sample = 1;
  std::string trace;  // Chrome trace of the timed runs, when set
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
};

/// Runs until an automatic engine has tuned itself, then the warm-up runs, then `repeat`
/// timed samples (cold: every run timed from the first).
Timing time_runs(CompiledGraph& cg, std::span<const FeedItem> feeds, const TimingOptions& o);

double median(std::vector<double> v);
/// "NxT": lanes (CPU executors, OpenCL queues) x threads of the first.
std::string lanes_label(const EngineReport& r);

}  // namespace hetgraph::tool
