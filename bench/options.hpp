// The command lines of hetgraph-bench and hetgraph-opencl-figures, apart so the tests and the
// command-line fuzz target parse exactly what the programs do.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "common/cli.hpp"

namespace bench {

struct Options {
  std::vector<std::string> workloads;
  std::string platform = "cpu";
  std::string engine;  // empty: the platform's default (CPU: auto; OpenCL: out-of-order)
  int executors = 0, threads_per_executor = 0;  // --executors NxT (0: engine's choice / auto)
  int threads = 0;
  double inline_below_us = -1;  // <0: library default
  int repeat = 10;
  int warmup = 3;
  std::string trace;
  bool json = false;
  bool fuse = true;
  bool parallel_ops = true;  // --no-parallel-ops: CompileOptions::parallel_ops = false
  bool mapped = true;        // inputs written into the graph's mapped buffers (no copy at run())
  bool pin = true;           // --no-pin: executor teams unbound (CpuOptions::pin_threads = false)
  bool per_op_threads = false;  // --per-op-threads: CpuOptions::per_op_threads
  bool list = false;
};

inline constexpr const char* kUsage =
    "usage: hetgraph-bench --workload NAME[,NAME...] [--platform cpu|opencl]\n"
    "                      [--engine auto|sequential|shared-queue|critical-path] [--executors "
    "NxT|auto]\n"
    "                      (opencl: --engine out-of-order|in-order)\n"
    "                      [--threads N] [--inline-below-us X] [--repeat 10] [--warmup 3]\n"
    "                      [--trace FILE] [--no-fuse] [--no-parallel-ops] [--no-mapped] "
    "[--no-pin]\n"
    "                      [--per-op-threads]\n"
    "                      [--json] [--list]";

/// hetgraph-bench's parser, filling `o` (which must outlive it). After parse, a run needs
/// --workload unless --list or --help was given (check_bench_options).
inline hetgraph::cli::Parser bench_parser(Options& o) {
  hetgraph::cli::Parser p("hetgraph-bench", kUsage);
  p.list("--workload", o.workloads)
      .choice("--platform", o.platform, {"cpu", "opencl"})
      .choice("--engine", o.engine,
              {"sequential", "shared-queue", "critical-path", "auto", "in-order", "out-of-order"})
      .custom("--executors",
              [&o](std::string_view v) {
                if (v == "auto") return;
                std::tie(o.executors, o.threads_per_executor) =
                    hetgraph::cli::to_executors("--executors", v);
              })
      .integer("--threads", o.threads, 0, 4096)
      .real("--inline-below-us", o.inline_below_us, 0, 1e9)
      .integer("--repeat", o.repeat, 1, 1'000'000'000)
      .integer("--warmup", o.warmup, 0, 1'000'000'000)
      .text("--trace", o.trace)
      .flag("--json", o.json)
      .flag("--no-fuse", o.fuse, false)
      .flag("--no-parallel-ops", o.parallel_ops, false)
      .flag("--no-mapped", o.mapped, false)
      .flag("--no-pin", o.pin, false)
      .flag("--per-op-threads", o.per_op_threads)
      .flag("--list", o.list);
  return p;
}

/// What the parser cannot see alone: a run needs workloads; engines per platform.
inline void check_bench_options(const Options& o) {
  using hetgraph::cli::UsageError;
  if (o.list) return;
  if (o.workloads.empty()) throw UsageError("--workload is required (--list shows them)");
  const bool cl_engine = o.engine == "in-order" || o.engine == "out-of-order";
  if (o.platform == "cpu" && cl_engine)
    throw UsageError("--engine: '" + o.engine + "' is an OpenCL queue mode (--platform opencl)");
  if (o.platform == "opencl" && !cl_engine && !o.engine.empty() && o.engine != "sequential")
    throw UsageError("--engine: '" + o.engine +
                     "' is a CPU engine (opencl: in-order or out-of-order)");
}

struct FigureOptions {
  std::string workload = "mnist-softmax";
  int repeat = 20;
};

inline hetgraph::cli::Parser figures_parser(FigureOptions& o) {
  hetgraph::cli::Parser p("hetgraph-opencl-figures",
                          "usage: hetgraph-opencl-figures [--workload NAME] [--repeat N]");
  p.text("--workload", o.workload).integer("--repeat", o.repeat, 1, 1'000'000'000);
  return p;
}

}  // namespace bench
