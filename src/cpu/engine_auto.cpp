// The automatic engine: the graph-width guideline picks a first configuration, then the
// profiler refines it. Each symmetric configuration (E executors x C/E threads) runs under the
// critical-path engine until its levels are profiled, is timed over a few more runs, and the
// fastest is kept (with its profiled levels). Runs during the search are ordinary runs: their
// results are correct, only their thread counts differ.
#include "cpu/engine_auto.hpp"

#include <algorithm>
#include <chrono>

#include "compiler/graph_stats.hpp"
#include "cpu/topology.hpp"

namespace hetgraph::detail::cpu {

std::vector<int> symmetric_executor_counts(int cores) {
  std::vector<int> out;
  for (int e = 1; e <= cores; ++e) {
    if (cores % e == 0) out.push_back(e);
  }
  return out;
}

int guideline_executors(const Plan& p, int cores) {
  const GraphStats s = graph_stats(p);
  int e = std::clamp(s.avg_width, 1, cores);
  while (cores % e != 0) --e;  // symmetric teams only
  return e;
}

AutoEngine::AutoEngine(const Program& prog, const EngineConfig& base, int cores)
    : prog_(prog), base_(base) {
  const int first = guideline_executors(*prog.plan, cores);
  order_.push_back(first);
  for (int e : symmetric_executor_counts(cores)) {
    if (e != first) order_.push_back(e);
  }
  cores_ = cores;
  current_ = make(first);
}

std::unique_ptr<ParallelEngine> AutoEngine::make(int executors) const {
  EngineConfig c = base_;
  c.executors = executors;
  c.threads = cores_ / executors;
  c.profile_runs = std::max(1, base_.profile_runs);
  return std::make_unique<CriticalPathEngine>(prog_, c);
}

void AutoEngine::run() {
  if (tuned_) {
    current_->run();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  current_->run();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!current_->levels_profiled()) return;  // still measuring node durations
  if (current_->runs() <= current_->config().profile_runs)
    return;  // the run that finished profiling
  times_.push_back(dt);
  if (static_cast<int>(times_.size()) < kTimedRuns) return;
  std::sort(times_.begin(), times_.end());
  search_.push_back({current_->config().executors, current_->config().threads,
                     times_[times_.size() / 2], static_cast<int>(times_.size())});
  costs_.push_back(current_->costs());
  times_.clear();
  if (search_.size() < order_.size()) {
    runs_ += current_->runs();
    current_ = make(order_[search_.size()]);
    current_->set_recording(recording_);
    return;
  }
  std::size_t best = 0;
  for (std::size_t i = 1; i < search_.size(); ++i) {
    if (search_[i].median_s < search_[best].median_s) best = i;
  }
  if (static_cast<int>(best) != static_cast<int>(search_.size()) - 1) {
    // Rebuild the winner with the levels it was profiled with: no second profiling pass.
    EngineConfig c = base_;
    c.executors = search_[best].executors;
    c.threads = search_[best].threads_per_executor;
    c.profile_runs = 0;
    runs_ += current_->runs();
    current_ = std::make_unique<CriticalPathEngine>(prog_, c);
    current_->set_costs(costs_[best], true);
    current_->set_recording(recording_);
  }
  tuned_ = true;
}

}  // namespace hetgraph::detail::cpu
