// SPDX-License-Identifier: Apache-2.0
// The sequential engine: the calling thread runs the kernels in plan order, each with the
// whole thread team (the baseline framework's CPU platform, with intra-op parallelism).
// Communication nodes are started on the communication lane and waited for only where a later
// node needs them.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <queue>

#include "compiler/graph_stats.hpp"
#include "cpu/comm_lane.hpp"
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
  SequentialEngine(const Program& prog, int threads)
      : plan_(prog.plan), threads_(threads), lane_(prog) {
    for (std::size_t i = 0; i < prog.kernels.size(); ++i) {
      if (prog.kernels[i] != nullptr)
        steps_.push_back({prog.kernels[i], &plan_->nodes[i], static_cast<std::uint32_t>(i), {}});
    }
    if (!lane_.empty()) link_comm_waits(prog);
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
    if (!lane_.empty()) {
      run_with_lane();
      return;
    }
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
    std::vector<std::string> names{"sequential (" + std::to_string(threads_) + " threads)"};
    if (!lane_.empty()) names.push_back("communication");
    return names;
  }
  int executors() const override { return 1; }
  int threads_per_executor() const override { return threads_; }
  int runs() const override { return runs_; }

 private:
  struct Step {
    CpuKernel* kernel;
    const PlanNode* node;
    std::uint32_t index;
    std::vector<std::uint32_t> waits;  // communication nodes whose end it needs
  };

  // A step waits for the communication nodes among its dependencies, looking through nodes
  // that have no kernel (views, groups, elided assigns): those complete with their inputs.
  // The steps are reordered too, by list scheduling. Among the ready steps a collective starts
  // first (starting it costs nothing), one that waits for a collective goes last (so the
  // collective stays in flight while the others run; plan order often puts an update right
  // after its gradient's allreduce), and otherwise the highest level first (the longest
  // estimated path to the end, collectives' time included: the work that feeds a collective
  // goes early). Any order that respects the dependencies is safe: plans with communication
  // nodes are memory-planned as for parallel engines.
  void link_comm_waits(const Program& prog) {
    const Plan& p = *prog.plan;
    const std::size_t n = p.nodes.size();
    std::vector<std::vector<std::uint32_t>> reach(n);  // kernel nodes a node's value waits for
    for (std::uint32_t i = 0; i < n; ++i) {
      for (std::uint32_t d : p.nodes[i].deps) {
        if (prog.kernels[d] != nullptr) {
          reach[i].push_back(d);
        } else {
          reach[i].insert(reach[i].end(), reach[d].begin(), reach[d].end());
        }
      }
      std::sort(reach[i].begin(), reach[i].end());
      reach[i].erase(std::unique(reach[i].begin(), reach[i].end()), reach[i].end());
    }
    std::vector<std::int32_t> step_of(n, -1), missing(steps_.size(), 0);
    for (std::size_t k = 0; k < steps_.size(); ++k)
      step_of[steps_[k].index] = static_cast<std::int32_t>(k);
    std::vector<std::vector<std::uint32_t>> after(steps_.size());
    for (std::size_t k = 0; k < steps_.size(); ++k) {
      for (std::uint32_t d : reach[steps_[k].index]) {
        after[static_cast<std::size_t>(step_of[d])].push_back(static_cast<std::uint32_t>(k));
        ++missing[k];
        if (lane_.is_comm(d)) steps_[k].waits.push_back(d);
      }
    }
    // Kahn's algorithm: collectives first, waiting steps last, then by level, then plan order.
    const std::vector<double> level = levels_from_costs(p, static_costs(p));
    auto later = [&](std::uint32_t a, std::uint32_t b) {
      const double la = level[steps_[a].index], lb = level[steps_[b].index];
      return la != lb ? la < lb : a > b;
    };
    using Heap = std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, decltype(later)>;
    Heap comm_steps(later), free_steps(later), waiting_steps(later);
    auto ready = [&](std::uint32_t k) {
      if (lane_.is_comm(steps_[k].index)) {
        comm_steps.push(k);
      } else {
        (steps_[k].waits.empty() ? free_steps : waiting_steps).push(k);
      }
    };
    for (std::uint32_t k = 0; k < steps_.size(); ++k) {
      if (missing[k] == 0) ready(k);
    }
    std::vector<Step> order;
    order.reserve(steps_.size());
    while (!comm_steps.empty() || !free_steps.empty() || !waiting_steps.empty()) {
      Heap& h = !comm_steps.empty() ? comm_steps : !free_steps.empty() ? free_steps : waiting_steps;
      const std::uint32_t k = h.top();
      h.pop();
      order.push_back(steps_[k]);
      for (std::uint32_t s : after[k]) {
        if (--missing[s] == 0) ready(s);
      }
    }
    steps_ = std::move(order);
    in_flight_.assign(n, 0);
  }

  // After a failure the rest of the run only abandons communication nodes (the other processes
  // are told) and waits for the ones in flight: their memory is the graph's.
  void run_with_lane() {
    if (recording_) events_.clear();
    lane_.begin_run(recording_);
    std::exception_ptr error;
    std::size_t flying = 0;
    auto settle = [&] {
      CommLane::Finished f = lane_.wait();
      in_flight_[f.node] = 0;
      --flying;
      if (f.error && !error) error = f.error;
      if (recording_) events_.push_back({f.node, 1, f.start_ns, f.end_ns});
    };
    for (const Step& s : steps_) {
      for (std::uint32_t c : s.waits) {
        while (in_flight_[c]) settle();
      }
      if (lane_.is_comm(s.index)) {
        if (error) {
          lane_.abandon(s.index, error_text(error));
        } else {
          in_flight_[s.index] = 1;
          ++flying;
          lane_.start(s.index);
        }
        continue;
      }
      if (error) continue;
      const std::int64_t t0 = recording_ ? now_ns() : 0;
      try {
        run_kernel(*s.kernel, ctx_, *s.node);
      } catch (...) {
        error = std::current_exception();
      }
      if (recording_) events_.push_back({s.index, 0, t0, now_ns()});
    }
    while (flying > 0) settle();
    if (error) std::rethrow_exception(error);
  }
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
  CommLane lane_;
  std::vector<char> in_flight_;  // per plan node: a communication node started, not yet ended
};

}  // namespace

std::unique_ptr<Engine> make_sequential_engine(const Program& prog, int threads) {
  return std::make_unique<SequentialEngine>(prog, threads);
}

}  // namespace hetgraph::detail::cpu
