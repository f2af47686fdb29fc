#pragma once

#include <chrono>

#include "cpu/engine_parallel.hpp"

namespace hetgraph::detail::cpu {

/// Executor counts E with E x (cores / E) = cores: the symmetric configurations.
std::vector<int> symmetric_executor_counts(int cores);
/// Executors by the graph-width guideline: average heavy width, at most `cores`, rounded down
/// to a symmetric configuration.
int guideline_executors(const Plan& p, int cores);

class AutoEngine final : public Engine {
 public:
  AutoEngine(const Program& prog, const EngineConfig& base, int cores);

  void run() override;
  std::string_view name() const override { return "auto"; }
  void set_recording(bool on) override;
  const std::vector<NodeEvent>& last_events() const override { return last_->last_events(); }
  std::vector<std::string> lane_names() const override { return last_->lane_names(); }
  int executors() const override { return last_->executors(); }
  int threads_per_executor() const override { return last_->threads_per_executor(); }
  bool levels_profiled() const override { return last_->levels_profiled(); }
  std::span<const double> levels() const override { return last_->levels(); }
  int runs() const override { return runs_; }
  bool tuned() const override { return tuned_; }
  std::vector<EngineReport::Cpu::Trial> search() const override { return search_; }

 private:
  // The candidates take turns, so a noisy interval of the machine falls on all of them alike
  // instead of deciding the search. A turn runs untimed for kSettleSeconds first: OpenMP
  // workers of the previous candidate spin for milliseconds after its last parallel region,
  // on cores this one's pinned threads need. Then runs are timed for kTurnSeconds (one run at
  // least). A candidate is done after kTurns turns and kTimedSeconds of timed runs.
  static constexpr double kSettleSeconds = 0.01;
  static constexpr double kTurnSeconds = 0.005;
  static constexpr int kTurns = 3;
  static constexpr double kTimedSeconds = 0.02;
  bool enough(std::size_t candidate) const;
  void finish();  // keeps the fastest candidate, drops the others

  int cores_ = 1;
  int profile_runs_ = 1;
  // The critical-path configurations (the guideline's first), then the sequential engine.
  std::vector<std::unique_ptr<Engine>> candidates_;
  std::vector<std::vector<double>> times_;         // per candidate, timed runs
  std::vector<int> turns_;                         // per candidate, turns done
  std::size_t warming_ = 0;                        // candidates [0, warming_) are profiled and warm
  std::size_t turn_ = 0;                           // timing: the candidate whose turn it is
  bool settled_ = false;                           // its turn's untimed part is over
  std::chrono::steady_clock::time_point turn_t0_;  // when this turn (or its timed part) began
  bool in_turn_ = false;
  std::unique_ptr<Engine> chosen_;
  Engine* last_ = nullptr;  // the engine that ran last (or runs next, before any run)
  std::vector<EngineReport::Cpu::Trial> search_;
  bool tuned_ = false;
  int runs_ = 0;
};

}  // namespace hetgraph::detail::cpu
