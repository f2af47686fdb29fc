// SPDX-License-Identifier: Apache-2.0
// CPU execution engines: how the kernels of one compiled graph are run.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "compiler/plan.hpp"
#include "cpu/kernel.hpp"
#include "hetgraph/compiler.hpp"

namespace hetgraph::detail::cpu {

/// What an engine runs: the plan and one kernel per plan node (null for nodes with no work:
/// inputs, variables, constants, views, groups and elided assigns).
struct Program {
  std::shared_ptr<const Plan> plan;
  std::vector<CpuKernel*> kernels;
  std::size_t scratch_bytes = 0;  // largest scratchpad any kernel asks for
};

/// One node's execution, recorded by the profiler (steady-clock nanoseconds).
struct NodeEvent {
  std::uint32_t node = 0;
  std::int32_t executor = 0;
  std::int64_t start_ns = 0, end_ns = 0;
};

std::int64_t now_ns();

class Engine {
 public:
  virtual ~Engine() = default;
  /// Runs every kernel once, respecting dependencies; rethrows the first kernel error.
  virtual void run() = 0;
  virtual std::string_view name() const = 0;

  /// Record every node's start, end and executor in the following runs (for traces).
  virtual void set_recording(bool on) = 0;
  /// The events of the last run while recording (or a profiling run).
  virtual const std::vector<NodeEvent>& last_events() const = 0;
  /// A name per executor ("executor 1 (cores 2,3)"), indexed by NodeEvent::executor.
  virtual std::vector<std::string> lane_names() const = 0;
  virtual int executors() const = 0;
  virtual int threads_per_executor() const = 0;
  virtual bool levels_profiled() const { return false; }
  /// Per plan node, the critical-path level the scheduler orders by (microseconds); empty
  /// for engines that do not schedule by level.
  virtual std::span<const double> levels() const { return {}; }
  virtual int runs() const = 0;
  /// Automatic engines: the configuration search is over (fixed engines: always).
  virtual bool tuned() const { return true; }
  virtual std::vector<EngineReport::Cpu::Trial> search() const { return {}; }
  /// Automatic engines: what they run once tuned.
  virtual std::optional<EngineReport::Cpu::Chosen> chosen() const { return std::nullopt; }
  /// automatic: the threads of the last run if it ran on the cores other processes left, else 0.
  virtual int load_threads() const { return 0; }
  /// Per-op thread counts and the hill climbs that chose them (empty when off).
  virtual std::vector<EngineReport::Cpu::OpThreads> op_threads() const { return {}; }
};

/// Runs a kernel and turns foreign exceptions into PlatformError naming the node.
void run_kernel(CpuKernel& k, const ExecCtx& ctx, const PlanNode& node);

/// Test seam: when set, called before every kernel (any engine) and may throw as the kernel
/// would; tests inject failures with it. Null in production.
using KernelFaultHook = void (*)(const PlanNode& node);
void set_kernel_fault_hook(KernelFaultHook hook);

std::unique_ptr<Engine> make_sequential_engine(const Program& prog, int threads);

}  // namespace hetgraph::detail::cpu
