// The platform and engine flags of the programs that compile and time graphs (hetgraph-bench,
// hetgraph-run): --platform, --engine, --executors NxT|auto, --threads. Header-only over the
// command-line parser, so the command-line fuzz target parses exactly what the programs do.
#pragma once

#include <string>
#include <tuple>

#include "common/cli.hpp"

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
  p
      .choice("--engine", e.engine,
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

}  // namespace hetgraph::tool
