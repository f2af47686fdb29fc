// SPDX-License-Identifier: Apache-2.0
// The command lines of hetgraph-bench and hetgraph-opencl-figures, apart so the tests and the
// command-line fuzz target parse exactly what the programs do.
#pragma once

#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "hetgraph/cli.hpp"
#include "hetgraph/tool.hpp"

namespace bench {

struct Options : hetgraph::tool::EngineFlags {
  std::vector<std::string> workloads;
  int repeat = 10;
  int warmup = 3;
  std::string trace;
  bool json = false;
  bool fuse = true;
  // --no-parallel-ops: CompileOptions::Experimental::parallel_ops = false
  bool parallel_ops = true;
  // --no-grouped-embeddings: CompileOptions::Experimental::grouped_embeddings = false
  bool grouped_embeddings = true;
  // --no-stacked-products: CompileOptions::Experimental::stacked_products = false
  bool stacked_products = true;
  bool mapped = true;  // inputs written into the graph's mapped buffers (no copy at run())
  bool cold = false;   // --cold: every run timed from the first (TimingOptions::cold)
  bool list = false;
  std::string export_onnx;  // --export-onnx DIR: write each workload as ONNX instead of timing
  // --platform hetero: the members in order ("cpu", "opencl" (the default device) or
  // "opencl:P:D"), and how unpinned nodes are placed (HeteroOptions::Placement).
  std::vector<std::string> devices{"cpu", "opencl"};
  std::string placement = "auto";
  // Replay (src/cpu/replay.hpp, bench/README.md "replay"): the CPU engines on a virtual machine
  // of replay_cores cores, kernels replaced by waits of their modelled durations.
  int replay_cores = 0;        // 0: a real run
  std::string replay_profile;  // per-node times to model from (default: measured here first)
  std::string record_profile;  // write the measured profile there
  std::string dump_costs;      // --dump-costs FILE: the plan's nodes, static costs and deps
  double time_scale = 0;       // modelled durations are waited this many times longer (0: auto)
};

inline constexpr const char* kUsage =
    "usage: hetgraph-bench --workload NAME[,NAME...] [--platform cpu|opencl|hetero]\n"
    "                      [--engine sequential|shared-queue|critical-path|auto] [--executors "
    "NxT|auto]\n"
    "                      (opencl: --engine out-of-order|in-order)\n"
    "                      [--threads N] [--inline-below-us X] [--repeat 10] [--warmup 3]\n"
    "                      [--trace FILE] [--no-fuse] [--no-parallel-ops] "
    "[--no-grouped-embeddings]\n"
    "                      [--no-stacked-products]\n"
    "                      [--no-mapped] [--no-pin]\n"
    "                      [--per-op-threads] [--cold]\n"
    "                      [--replay-cores C [--replay-profile FILE] [--time-scale K|0]]\n"
    "                      [--record-profile FILE]  (per-node times at team sizes 1, 2, ...)\n"
    "                      [--dump-costs FILE]  (the plan: JSON lines of node, op, static cost, "
    "deps)\n"
    "                      [--json] [--list] [--export-onnx DIR]  (DIR/NAME.onnx and "
    "DIR/NAME/<input>.pb;\n"
    "                      no timing)\n"
    "                      (hetero: [--devices cpu,opencl[:P:D],...] [--placement "
    "auto|heft|first];\n"
    "                       --engine picks the CPU member's engine)";

/// hetgraph-bench's parser, filling `o` (which must outlive it). After parse, a run needs
/// --workload unless --list or --help was given (check_bench_options).
inline hetgraph::cli::Parser bench_parser(Options& o) {
  hetgraph::cli::Parser p("hetgraph-bench", kUsage);
  p.list("--workload", o.workloads);
  hetgraph::tool::add_engine_flags(p, o, /*hetero=*/true);
  p.real("--inline-below-us", o.inline_below_us, 0, 1e9)
      .integer("--repeat", o.repeat, 1, 1'000'000'000)
      .integer("--warmup", o.warmup, 0, 1'000'000'000)
      .text("--trace", o.trace)
      .flag("--json", o.json)
      .flag("--no-fuse", o.fuse, false)
      .flag("--no-parallel-ops", o.parallel_ops, false)
      .flag("--no-grouped-embeddings", o.grouped_embeddings, false)
      .flag("--no-stacked-products", o.stacked_products, false)
      .flag("--no-mapped", o.mapped, false)
      .text("--export-onnx", o.export_onnx)
      .flag("--no-pin", o.pin, false)
      .flag("--cold", o.cold)
      .flag("--list", o.list)
      .list("--devices", o.devices)
      .choice("--placement", o.placement, {"auto", "heft", "first"})
      .integer("--replay-cores", o.replay_cores, 1, 64)
      .text("--replay-profile", o.replay_profile)
      .text("--record-profile", o.record_profile)
      .text("--dump-costs", o.dump_costs)
      .real("--time-scale", o.time_scale, 0, 1e6);
  return p;
}

/// What the parser cannot see alone: a run needs workloads; engines per platform.
inline void check_bench_options(const Options& o) {
  using hetgraph::cli::UsageError;
  if (o.list) return;
  if (o.workloads.empty()) throw UsageError("--workload is required (--list shows them)");
  hetgraph::tool::check_engine_flags(o);
  if ((o.replay_cores > 0 || !o.record_profile.empty()) && o.platform != "cpu")
    throw UsageError("--replay-cores and --record-profile replay the CPU platform's engines");
  if (!o.replay_profile.empty() && o.replay_cores == 0)
    throw UsageError("--replay-profile needs --replay-cores");
  if (o.platform == "hetero" && o.devices.empty()) throw UsageError("--devices: none given");
  for (const std::string& d : o.devices) {
    int p = 0, k = 0, end = 0;
    const bool indexed = std::sscanf(d.c_str(), "opencl:%d:%d%n", &p, &k, &end) == 2 &&
                         static_cast<std::size_t>(end) == d.size() && p >= 0 && k >= 0;
    if (d != "cpu" && d != "opencl" && !indexed)
      throw UsageError("--devices: '" + d + "' is not cpu, opencl or opencl:P:D");
  }
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
