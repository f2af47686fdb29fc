// The sequential engine: the calling thread runs the kernels in plan order, each with the
// whole thread team (the baseline framework's CPU platform, with intra-op parallelism).
#include <omp.h>

#include <atomic>
#include <cstdlib>

#include "cpu/engine.hpp"
#include "cpu/parallel.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {
std::atomic<KernelFaultHook> g_fault_hook{nullptr};
}  // namespace

void set_kernel_fault_hook(KernelFaultHook hook) {
  g_fault_hook.store(hook, std::memory_order_release);
}

void run_kernel(CpuKernel& k, const ExecCtx& ctx, const PlanNode& node) {
  try {
    if (const KernelFaultHook h = g_fault_hook.load(std::memory_order_relaxed)) h(node);
    k.run(ctx);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw PlatformError("node " + node.label + ": kernel failed: " + e.what());
  }
}

namespace {

class SequentialEngine final : public Engine {
 public:
  SequentialEngine(const Program& prog, int threads) : plan_(prog.plan), threads_(threads) {
    for (std::size_t i = 0; i < prog.kernels.size(); ++i) {
      if (prog.kernels[i] != nullptr)
        steps_.push_back({prog.kernels[i], &plan_->nodes[i], static_cast<std::uint32_t>(i)});
    }
    if (prog.scratch_bytes > 0) {
      scratch_.reset(
          static_cast<std::byte*>(std::aligned_alloc(64, (prog.scratch_bytes + 63) / 64 * 64)));
      ctx_.scratch = scratch_.get();
      ctx_.scratch_bytes = prog.scratch_bytes;
    }
    ctx_.nthreads = threads_;
  }

  void run() override {
    TeamSize team(threads_);
    ++runs_;
    if (!recording_) {
      for (const Step& s : steps_) run_kernel(*s.kernel, ctx_, *s.node);
      return;
    }
    events_.clear();
    for (const Step& s : steps_) {
      const std::int64_t t0 = now_ns();
      run_kernel(*s.kernel, ctx_, *s.node);
      events_.push_back({s.index, 0, t0, now_ns()});
    }
  }

  std::string_view name() const override { return "sequential"; }
  void set_recording(bool on) override { recording_ = on; }
  const std::vector<NodeEvent>& last_events() const override { return events_; }
  std::vector<std::string> lane_names() const override {
    return {"sequential (" + std::to_string(threads_) + " threads)"};
  }
  int executors() const override { return 1; }
  int threads_per_executor() const override { return threads_; }
  int runs() const override { return runs_; }

 private:
  struct Step {
    CpuKernel* kernel;
    const PlanNode* node;
    std::uint32_t index;
  };
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::shared_ptr<const Plan> plan_;
  int threads_;
  std::vector<Step> steps_;
  std::unique_ptr<std::byte, Free> scratch_;
  ExecCtx ctx_;
  bool recording_ = false;
  int runs_ = 0;
  std::vector<NodeEvent> events_;
};

}  // namespace

std::unique_ptr<Engine> make_sequential_engine(const Program& prog, int threads) {
  return std::make_unique<SequentialEngine>(prog, threads);
}

}  // namespace hetgraph::detail::cpu
