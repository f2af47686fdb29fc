// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <optional>
#include <span>

#include "cpu/engine_parallel.hpp"
#include "cpu/topology.hpp"
#include "cpu/tuning_cache.hpp"

namespace hetgraph::detail::cpu {

/// Executor counts E with E x (cores / E) = cores: the symmetric configurations.
std::vector<int> symmetric_executor_counts(int cores);
/// A lower bound on the makespan of E executors of T threads (Brent's): the longer of the
/// critical path and the work spread over the executors, each node's time modelled at T
/// threads from its static cost (`cost`: static_costs) by how far it splits.
double modelled_makespan(const Plan& p, std::span<const double> cost, int executors, int threads);
/// Executors by the graph-width guideline: the symmetric configuration E x cores/E whose
/// modelled makespan is least. The guideline paper's width (heavy ops per level), and then
/// work / span rounded to a divisor (GraphStats::work_width), count a node as the same at any
/// team size. Replayed at 16-64 cores that put 4 executors of 8-16 threads where phased LSTM's
/// light gate ops, which do not split, want 8 (1.15-1.22x slower:
/// bench/results/2026-11-27-replay-guideline.jsonl).
int guideline_executors(const Plan& p, int cores);

class AutoEngine final : public Engine {
 public:
  /// `cache`: where the choice is looked up first and stored once made (disabled: neither).
  /// `adapt_to_load`: CpuOptions::adapt_to_load.
  AutoEngine(const Program& prog, const EngineConfig& base, int cores, TuningCache cache,
             bool adapt_to_load = false);
  /// An unfinished search leaves its progress in the cache for the next process.
  ~AutoEngine() override;

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
  std::optional<EngineReport::Cpu::Chosen> chosen() const override { return chosen_info_; }
  int load_threads() const override { return last_ == loaded_.get() ? loaded_threads_ : 0; }
  /// Whether the search ran starved of its cores (other processes took over kOthersShare of the
  /// cores meanwhile, and the sequential engine's caller got under kStarvedShare of a core over
  /// its timed runs or was preempted in them): its choice is then used but not cached.
  bool interfered() const { return interfered_; }
  /// A cached choice being checked against the sequential engine in this process's first runs.
  bool checking() const { return checking_; }
  /// How many times a cached choice lost that check and the search started again.
  int rechecks_lost() const { return rechecks_lost_; }
  std::vector<EngineReport::Cpu::OpThreads> op_threads() const override {
    return last_->op_threads();
  }

 private:
  // The candidates take turns, so a noisy interval of the machine falls on all of them alike
  // instead of deciding the search. A turn of a candidate whose runs are short runs untimed
  // for kSettleSeconds first: OpenMP workers of the previous candidate spin for milliseconds
  // after its last parallel region, on cores this one's pinned threads need. Then runs are
  // timed for kTurnSeconds (one run at least) or kTurnRuns runs, whichever comes first: on
  // graphs of microseconds a time-based turn would take hundreds of runs, more than many
  // processes make (settling is capped at kSettleRuns runs for the same reason; medians absorb
  // the few runs a spinning team may still slow). After every round the search stops as soon as
  // the winner is clear: after kMinTurns turns, when no other candidate's fastest run beat
  // the leader's median; a candidate whose fastest run is kDropMargin slower than the
  // leader's median leaves the search after one turn; kMaxTurns turns at most.
  static constexpr double kSettleSeconds = 0.01;
  static constexpr double kLongRunSeconds = 0.05;  // runs this long need no settling
  static constexpr double kTurnSeconds = 0.005;
  static constexpr int kSettleRuns = 3;
  static constexpr int kTurnRuns = 8;
  static constexpr int kMinTurns = 2;
  static constexpr int kMaxTurns = 4;
  static constexpr double kDropMargin = 0.25;
  // Interference: a search whose sequential runs' caller got less than this share of its core
  // measured the other processes that held the cores, not this graph (a 2x1 choice
  // made beside a compile ran resnet18 1.6-2x slower in every later quiet process). Its choice
  // is not cached, and a check made so decides nothing.
  static constexpr double kStarvedShare = 0.75;
  // A cached critical-path choice is checked in a new process: kCheckRuns timed runs of it and
  // of the sequential engine on all cores, alternately (after one untimed run of each). Losing by
  // more than kRecheckMargin on a quiet machine starts the search again.
  static constexpr int kCheckRuns = 3;
  static constexpr double kRecheckMargin = 0.10;

  struct Candidate {
    std::unique_ptr<Engine> engine;
    ParallelEngine* parallel = nullptr;  // null: the sequential engine
    std::vector<double> times;           // timed runs
    int turns = 0;
    bool dropped = false;
    double last_run_s = 0;
  };
  void start_search();  // the candidates, from the guideline's first
  void check_run();     // one run of the cached choice's check
  // One run on this run's share of the cores left by other processes and other runs in flight
  // in this process, where that is fewer than the configuration wants; false where it is not.
  bool run_on_share(int others_in_flight);
  void end_round();
  std::string label(const Candidate& c) const;
  void resume();  // from the cache's progress, when it has some for these candidates
  void save_progress();
  void finish();  // keeps the fastest candidate, drops the others, stores the choice
  EngineReport::Cpu::Trial trial(const Candidate& c) const;

  Program prog_;
  EngineConfig base_;
  int cores_ = 1;
  TuningCache cache_;
  std::vector<Candidate> candidates_;  // critical-path configurations (the guideline's
                                       // first), per-op variants, then the sequential engine
  std::size_t warming_ = 0;            // candidates [0, warming_) are profiled and warm
  std::size_t turn_ = 0;               // timing: the candidate whose turn it is
  bool settled_ = false;               // its turn's untimed part is over
  std::chrono::steady_clock::time_point turn_t0_;  // when this turn (or its timed part) began
  bool in_turn_ = false;
  int turn_runs_ = 0;  // runs of this turn so far (settling, then timed)
  int rounds_ = 0;
  bool progressed_ = false;  // this process ran a candidate since the progress was loaded
  std::unique_ptr<Engine> chosen_;
  std::optional<EngineReport::Cpu::Chosen> chosen_info_;
  Engine* last_ = nullptr;  // the engine that ran last (or runs next, before any run)
  std::vector<EngineReport::Cpu::Trial> search_;
  bool tuned_ = false;
  int runs_ = 0;
  // The calling thread's CPU time and the wall time of the sequential engine's timed runs (it
  // runs every node itself, its team's share included): their ratio is near 1 where the cores
  // are ours and falls where another process takes the caller's core, within a run or, for
  // runs of microseconds, as the few runs that wait out another's time slice. Exact (thread
  // CPU clock), and there in every search and check, however short.
  double seq_cpu_s_ = 0, seq_wall_s_ = 0;
  // ... and the calling thread's involuntary context switches in them: a thread waiting for a
  // team member sleeps of its own accord (a low ratio on a quiet machine, in runs of
  // microseconds); only another task preempts it.
  long seq_preempted_ = 0;
  // Other processes' share of the cores since the search (or the check) began (/proc/stat):
  // starved() needs it over kOthersShare, and one of the two above. The caller's signals alone
  // have false alarms on a quiet machine (a daemon's wake-up preempting a short search; a thread
  // waiting for its team); others' share alone is not this graph's runs (issue 45's CI: a
  // caller whose few timed runs kept its core beside two spinning processes per core).
  LoadMeter meter_;
  static constexpr double kOthersShare = 0.2;
  void time_sequential(Engine& e, double& wall);  // one run, counted in the three above
  EngineReport::Cpu::Chosen::Load load() const;   // the evidence starved() judges
  bool starved() const;
  bool interfered_ = false;
  // The check of a cached choice: the sequential engine, and each one's timed runs.
  bool checking_ = false;
  std::unique_ptr<Engine> check_seq_;
  std::vector<double> check_times_[2];  // [0]: the cached choice, [1]: sequential
  int check_runs_ = 0;
  int rechecks_lost_ = 0;
  // Adapting to load: the sequential engine on the cores other processes leave (made when
  // first needed, remade when that count changes).
  bool adapt_ = false;
  std::unique_ptr<Engine> loaded_;
  int loaded_threads_ = 0;
  // Traces and profiles want events: engines made later (a search started again, a run on
  // the cores left) record from their first run too.
  bool recording_ = false;
};

}  // namespace hetgraph::detail::cpu
