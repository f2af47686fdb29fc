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
    active().set_recording(on);
  }
  const std::vector<NodeEvent>& last_events() const override { return active().last_events(); }
  std::vector<std::string> lane_names() const override { return active().lane_names(); }
  int executors() const override { return active().executors(); }
  int threads_per_executor() const override { return active().threads_per_executor(); }
  bool levels_profiled() const override { return active().levels_profiled(); }
  int runs() const override { return runs_ + active().runs(); }
  bool tuned() const override { return tuned_; }
  std::vector<EngineReport::Trial> search() const override { return search_; }

 private:
  // Each configuration is timed over at least kTimedRuns runs and kTimedSeconds (a few runs
  // of a millisecond graph are at the mercy of one noisy interval), at most kMaxTimedRuns.
  static constexpr int kTimedRuns = 3;
  static constexpr int kMaxTimedRuns = 64;
  static constexpr double kTimedSeconds = 0.02;
  std::unique_ptr<ParallelEngine> make(int executors) const;
  // The engine running now: the sequential candidate while it is timed or once it won.
  Engine& active() const { return plain_ ? *plain_ : *current_; }
  bool timed(double seconds);  // records a timed run; true once the candidate has enough
  double take_median();
  void finish();  // keeps the fastest candidate

  Program prog_;
  EngineConfig base_;
  int cores_ = 1;
  std::vector<int> order_;  // executor counts to try, the guideline's first
  std::unique_ptr<ParallelEngine> current_;
  std::unique_ptr<Engine> plain_;
  std::vector<double> times_;
  std::vector<EngineReport::Trial> search_;
  std::vector<std::vector<double>> costs_;
  bool tuned_ = false;
  bool recording_ = false;
  int runs_ = 0;
};

}  // namespace hetgraph::detail::cpu
