// The automatic engine: the graph-width guideline picks a first configuration, then the
// profiler refines it. Each symmetric configuration (E executors x C/E threads) runs under the
// critical-path engine until its levels are profiled, is timed over a few more runs (20 ms'
// worth at least, 64 runs at most); last the sequential engine (all cores, plan order, no
// scheduler) is timed the same way, and the fastest median is kept (a critical-path winner
// with its profiled levels). Runs during the search are ordinary runs: their
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

bool AutoEngine::timed(double dt) {
  times_.push_back(dt);
  const int n = static_cast<int>(times_.size());
  if (n < kTimedRuns) return false;
  double total = 0;
  for (double t : times_) total += t;
  return total >= kTimedSeconds || n >= kMaxTimedRuns;
}

double AutoEngine::take_median() {
  std::sort(times_.begin(), times_.end());
  const double m = times_[times_.size() / 2];
  times_.clear();
  return m;
}

void AutoEngine::run() {
  if (tuned_) {
    active().run();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (plain_) {  // the last candidate: the sequential engine (its first run untimed)
    plain_->run();
    const double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (plain_->runs() == 1 || !timed(dt)) return;
    const int n = static_cast<int>(times_.size());
    search_.push_back({1, cores_, take_median(), n, "sequential"});
    finish();
    return;
  }
  current_->run();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!current_->levels_profiled()) return;  // still measuring node durations
  if (current_->runs() <= current_->config().profile_runs)
    return;  // the run that finished profiling
  if (!timed(dt)) return;
  const int n = static_cast<int>(times_.size());
  search_.push_back(
      {current_->config().executors, current_->config().threads, take_median(), n});
  costs_.push_back(current_->costs());
  runs_ += current_->runs();
  if (search_.size() < order_.size()) {
    current_ = make(order_[search_.size()]);
    current_->set_recording(recording_);
    return;
  }
  // Last, no scheduler at all: on small or narrow graphs dispatch costs more than it overlaps.
  plain_ = make_sequential_engine(prog_, cores_);
  plain_->set_recording(recording_);
}

void AutoEngine::finish() {
  std::size_t best = 0;
  for (std::size_t i = 1; i < search_.size(); ++i) {
    if (search_[i].median_s < search_[best].median_s) best = i;
  }
  tuned_ = true;
  if (search_[best].engine == "sequential") {
    current_.reset();  // its executor threads are not needed any more
    return;
  }
  runs_ += plain_->runs();
  plain_.reset();
  // Rebuild the winner with the levels it was profiled with: no second profiling pass.
  EngineConfig c = base_;
  c.executors = search_[best].executors;
  c.threads = search_[best].threads_per_executor;
  c.profile_runs = 0;
  current_ = std::make_unique<CriticalPathEngine>(prog_, c);
  current_->set_costs(costs_[best], true);
  current_->set_recording(recording_);
}

}  // namespace hetgraph::detail::cpu
