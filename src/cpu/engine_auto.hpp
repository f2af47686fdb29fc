#pragma once

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
  void set_recording(bool on) override {
    recording_ = on;
    current_->set_recording(on);
  }
  const std::vector<NodeEvent>& last_events() const override { return current_->last_events(); }
  std::vector<std::string> lane_names() const override { return current_->lane_names(); }
  int executors() const override { return current_->executors(); }
  int threads_per_executor() const override { return current_->threads_per_executor(); }
  bool levels_profiled() const override { return current_->levels_profiled(); }
  int runs() const override { return runs_ + current_->runs(); }
  bool tuned() const override { return tuned_; }
  std::vector<EngineReport::Trial> search() const override { return search_; }

 private:
  static constexpr int kTimedRuns = 3;
  std::unique_ptr<ParallelEngine> make(int executors) const;

  Program prog_;
  EngineConfig base_;
  int cores_ = 1;
  std::vector<int> order_;  // executor counts to try, the guideline's first
  std::unique_ptr<ParallelEngine> current_;
  std::vector<double> times_;
  std::vector<EngineReport::Trial> search_;
  std::vector<std::vector<double>> costs_;
  bool tuned_ = false;
  bool recording_ = false;
  int runs_ = 0;
};

}  // namespace hetgraph::detail::cpu
