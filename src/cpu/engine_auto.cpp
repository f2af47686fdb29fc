// The automatic engine: the graph-width guideline picks a first configuration, then the
// profiler refines it. Each symmetric configuration (E executors x C/E threads) runs under the
// critical-path engine until its levels are profiled; then the configurations and the
// sequential engine (all cores, plan order, no scheduler) take turns (10 ms untimed, then
// 5 ms of timed runs) until each has 3 turns and 20 ms timed, and the fastest median is kept
// (a critical-path winner with its profiled levels). Runs during the search are ordinary
// runs: their results are correct, only their thread counts differ.
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
    : cores_(cores), profile_runs_(std::max(1, base.profile_runs)) {
  const int first = guideline_executors(*prog.plan, cores);
  std::vector<int> order{first};
  for (int e : symmetric_executor_counts(cores)) {
    if (e != first) order.push_back(e);
  }
  for (int e : order) {
    EngineConfig c = base;
    c.executors = e;
    c.threads = cores / e;
    c.profile_runs = profile_runs_;
    candidates_.push_back(std::make_unique<CriticalPathEngine>(prog, c));
  }
  // No scheduler at all: on small or narrow graphs dispatch costs more than it overlaps.
  candidates_.push_back(make_sequential_engine(prog, cores));
  times_.resize(candidates_.size());
  turns_.assign(candidates_.size(), 0);
  last_ = candidates_.front().get();
}

void AutoEngine::set_recording(bool on) {
  for (auto& c : candidates_) c->set_recording(on);
  if (chosen_) chosen_->set_recording(on);
}

bool AutoEngine::enough(std::size_t c) const {
  double total = 0;
  for (double t : times_[c]) total += t;
  return turns_[c] >= kTurns && total >= kTimedSeconds;
}

void AutoEngine::run() {
  ++runs_;
  if (tuned_) {
    chosen_->run();
    return;
  }
  // First each candidate in turn until its levels come from measured durations (critical
  // path) or it has run once (sequential): untimed.
  if (warming_ < candidates_.size()) {
    Engine& e = *candidates_[warming_];
    last_ = &e;
    e.run();
    const bool parallel = warming_ + 1 < candidates_.size();
    if (!parallel || (e.levels_profiled() && e.runs() > profile_runs_)) ++warming_;
    return;
  }
  // Then all of them by turns: settle untimed, then timed runs.
  using clock = std::chrono::steady_clock;
  const std::size_t c = turn_;
  last_ = candidates_[c].get();
  if (!in_turn_) {
    in_turn_ = true;
    settled_ = false;
    turn_t0_ = clock::now();
  }
  const auto t0 = clock::now();
  candidates_[c]->run();
  const auto t1 = clock::now();
  if (!settled_) {
    if (std::chrono::duration<double>(t1 - turn_t0_).count() >= kSettleSeconds) {
      settled_ = true;
      turn_t0_ = t1;
    }
    return;
  }
  times_[c].push_back(std::chrono::duration<double>(t1 - t0).count());
  if (std::chrono::duration<double>(t1 - turn_t0_).count() < kTurnSeconds) return;
  ++turns_[c];
  in_turn_ = false;
  turn_ = (turn_ + 1) % candidates_.size();
  if (turn_ != 0) return;  // decide after whole rounds only
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    if (!enough(i)) return;
  }
  finish();
}

void AutoEngine::finish() {
  std::size_t best = 0;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    std::vector<double>& t = times_[i];
    std::sort(t.begin(), t.end());
    const bool sequential = i + 1 == candidates_.size();
    search_.push_back({sequential ? 1 : candidates_[i]->executors(),
                       sequential ? cores_ : candidates_[i]->threads_per_executor(),
                       t[t.size() / 2], static_cast<int>(t.size()),
                       sequential ? "sequential" : "critical-path"});
    if (search_[i].median_s < search_[best].median_s) best = i;
  }
  chosen_ = std::move(candidates_[best]);  // keeps its profiled levels
  candidates_.clear();                     // the others' executor threads end here
  last_ = chosen_.get();
  tuned_ = true;
}

}  // namespace hetgraph::detail::cpu
