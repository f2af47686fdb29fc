// CPU execution engines: how the kernels of one compiled graph are run.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "compiler/plan.hpp"
#include "cpu/kernel.hpp"

namespace hetgraph::detail::cpu {

/// What an engine runs: the plan and one kernel per plan node (null for nodes with no work:
/// inputs, variables, constants, views, groups and elided assigns).
struct Program {
  std::shared_ptr<const Plan> plan;
  std::vector<CpuKernel*> kernels;
  std::size_t scratch_bytes = 0;  // largest scratchpad any kernel asks for
};

class Engine {
 public:
  virtual ~Engine() = default;
  /// Runs every kernel once, respecting dependencies; rethrows the first kernel error.
  virtual void run() = 0;
  virtual std::string_view name() const = 0;
};

/// Runs a kernel and turns foreign exceptions into PlatformError naming the node.
void run_kernel(CpuKernel& k, const ExecCtx& ctx, const PlanNode& node);

std::unique_ptr<Engine> make_sequential_engine(const Program& prog, int threads);

}  // namespace hetgraph::detail::cpu
