// SPDX-License-Identifier: Apache-2.0
// The automatic engine (the CPU platform's default): the graph-width guideline picks a first
// configuration, then the profiler refines it. Each symmetric configuration (E executors x C/E
// threads; with per-op thread counts on, also each one whose teams have 2+ threads with them)
// runs under the critical-path engine until its levels are profiled; then the configurations
// and the sequential engine (all cores, plan order, no scheduler) take turns until the winner
// is clear (see the constants in engine_auto.hpp), and the fastest median is kept (a
// critical-path winner with its profiled levels). Runs during the search are ordinary runs:
// their results are correct, only their thread counts differ. The choice goes to the tuning
// cache; a process that finds it there runs it from the first run, with no search. A process
// that ends before the search does leaves its progress there (profiled levels, timed runs),
// and the next one resumes it.
#include "cpu/engine_auto.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>

#include "compiler/graph_stats.hpp"
#include "cpu/topology.hpp"
#include "hetgraph/compiler.hpp"

namespace hetgraph::detail::cpu {

namespace {

// The runs of automatic engines in flight in this process (several compiled graphs run from
// several threads): each run counts itself for its whole length.
std::atomic<int> g_runs_in_flight{0};

class InFlight {
 public:
  InFlight() { g_runs_in_flight.fetch_add(1, std::memory_order_relaxed); }
  ~InFlight() { g_runs_in_flight.fetch_sub(1, std::memory_order_relaxed); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  /// The other runs in flight now.
  int others() const { return std::max(0, g_runs_in_flight.load(std::memory_order_relaxed) - 1); }
};

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double median_of(std::vector<double> t) {
  if (t.empty()) return 0;
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

}  // namespace

std::vector<int> symmetric_executor_counts(int cores) {
  std::vector<int> out;
  for (int e = 1; e <= cores; ++e) {
    if (cores % e == 0) out.push_back(e);
  }
  return out;
}

double modelled_makespan(const Plan& p, std::span<const double> cost, int executors, int threads) {
  // A node of one-thread cost c on a team of T threads: c below kSplitUs (parallel_for's grain
  // and the team's fork and join take what splitting would gain), else Amdahl's law with serial
  // fraction kSerial (memory bandwidth, imbalance). Against the replayed sweep at 16-64 cores
  // every pair in 12-15 us x 0.1-0.3 picks within 6% of the best on all 21 cases but
  // par-matmul's; 10-100 us x 0.1-0.3 misses at most one more (up to 1.15x); splitting every node,
  // or a serial fraction under 0.1, misses 2-4 (bench/guideline_grid.py,
  // bench/results/2026-11-27-guideline-grid.jsonl).
  constexpr double kSplitUs = 12.0, kSerial = 0.2;
  // Nodes under the default inline threshold run in the thread that readied them, never on an
  // executor of their own (as in GraphStats::work_width): graphs of nothing else stay on one.
  const double inline_us = CpuOptions{}.experimental.inline_below_us;
  const double scale = kSerial + (1.0 - kSerial) / std::max(1, threads);
  std::vector<double> span(p.nodes.size(), 0.0);
  double work = 0.0, longest = 0.0;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const double t = cost[i] < inline_us ? 0.0 : cost[i] < kSplitUs ? cost[i] : cost[i] * scale;
    double before = 0.0;
    for (std::uint32_t u : p.nodes[i].deps) before = std::max(before, span[u]);
    span[i] = before + t;
    work += t;
    longest = std::max(longest, span[i]);
  }
  return std::max(longest, work / std::max(1, executors));  // 0 when every node is inline
}

int guideline_executors(const Plan& p, int cores) {
  const std::vector<double> cost = static_costs(p);
  int best = 1;
  double best_t = 0.0;
  for (int e : symmetric_executor_counts(std::max(1, cores))) {
    const double t = modelled_makespan(p, cost, e, cores / e);
    // Fewer executors on a tie: bigger teams, fewer threads waiting for work.
    if (e == 1 || t < best_t * (1.0 - 1e-9)) {
      best = e;
      best_t = t;
    }
  }
  return best;
}

AutoEngine::AutoEngine(const Program& prog, const EngineConfig& base, int cores, TuningCache cache,
                       bool adapt_to_load)
    : prog_(prog), base_(base), cores_(cores), cache_(std::move(cache)), adapt_(adapt_to_load) {
  base_.node_threads.clear();
  if (std::optional<TunedChoice> hit = cache_.load(prog.plan->nodes.size());
      hit && hit->executors * hit->threads <= cores_ &&
      (!hit->per_op_threads || base.per_op_threads)) {
    if (hit->engine == "sequential") {
      chosen_ = make_sequential_engine(prog_, hit->threads);
    } else {
      EngineConfig c = base_;
      c.executors = hit->executors;
      c.threads = hit->threads;
      c.per_op_threads = hit->per_op_threads;
      c.node_threads = hit->node_threads;
      auto e = std::make_unique<CriticalPathEngine>(prog_, c);
      e->set_costs(hit->cost_us, true);
      chosen_ = std::move(e);
    }
    chosen_info_ = EngineReport::Cpu::Chosen{hit->engine,         hit->executors, hit->threads,
                                             hit->per_op_threads, true,           std::nullopt};
    last_ = chosen_.get();
    tuned_ = true;
    if (hit->engine != "sequential") {
      checking_ = true;
      check_seq_ = make_sequential_engine(prog_, cores_);
      meter_.start();
    }
    return;
  }
  start_search();
}

void AutoEngine::start_search() {
  const Program& prog = prog_;
  const int cores = cores_;
  const EngineConfig& base = base_;
  const int first = guideline_executors(*prog.plan, cores);
  std::vector<int> order{first};
  for (int e : symmetric_executor_counts(cores)) {
    if (e != first) order.push_back(e);
  }
  auto add_parallel = [&](int executors, bool per_op) {
    EngineConfig c = base_;
    c.executors = executors;
    c.threads = cores / executors;
    c.per_op_threads = per_op;
    auto e = std::make_unique<CriticalPathEngine>(prog_, c);
    Candidate cand;
    cand.parallel = e.get();
    cand.engine = std::move(e);
    candidates_.push_back(std::move(cand));
  };
  for (int e : order) add_parallel(e, false);
  if (base.per_op_threads) {
    for (int e : order) {
      if (cores / e > 1) add_parallel(e, true);
    }
  }
  // No scheduler at all: on small or narrow graphs dispatch costs more than it overlaps.
  Candidate seq;
  seq.engine = make_sequential_engine(prog_, cores);
  candidates_.push_back(std::move(seq));
  for (auto& c : candidates_) c.engine->set_recording(recording_);
  last_ = candidates_.front().engine.get();
  resume();
  meter_.start();
}

EngineReport::Cpu::Chosen::Load AutoEngine::load() const {
  EngineReport::Cpu::Chosen::Load l;
  l.caller_share = seq_wall_s_ > 0 ? seq_cpu_s_ / seq_wall_s_ : 1;
  l.preempted = seq_preempted_;
  l.others_share = meter_.others_share();
  // Others' share is the evidence; the caller's own runs must show it too, by a low share or by
  // being preempted (either alone: a caller waiting for a preempted team member sleeps of its
  // own accord, and one whose few timed runs fell between time slices kept its core).
  l.busy = seq_wall_s_ > 0 && l.others_share > kOthersShare &&
           (l.caller_share < kStarvedShare || l.preempted > 0);
  return l;
}

bool AutoEngine::starved() const {
  return load().busy;
}

void AutoEngine::time_sequential(Engine& e, double& wall) {
  rusage u0{}, u1{};
  getrusage(RUSAGE_THREAD, &u0);
  const double c0 = thread_cpu_seconds();
  const auto t0 = Clock::now();
  e.run();
  wall = seconds(t0, Clock::now());
  seq_cpu_s_ += thread_cpu_seconds() - c0;
  seq_wall_s_ += wall;
  getrusage(RUSAGE_THREAD, &u1);
  seq_preempted_ += u1.ru_nivcsw - u0.ru_nivcsw;
}

void AutoEngine::check_run() {
  // Untimed first runs of each (warm caches, teams started), then alternate timed runs.
  const int which = check_runs_ % 2;
  Engine& e = which == 0 ? *chosen_ : *check_seq_;
  last_ = &e;
  double wall = 0;
  if (which == 1 && check_runs_ >= 2) {
    time_sequential(e, wall);
  } else {
    const auto t0 = Clock::now();
    e.run();
    wall = seconds(t0, Clock::now());
  }
  if (check_runs_ >= 2) check_times_[which].push_back(wall);
  ++check_runs_;
  if (check_runs_ < 2 + 2 * kCheckRuns) return;
  checking_ = false;
  last_ = chosen_.get();
  const bool loses = median_of(check_times_[0]) > (1 + kRecheckMargin) * median_of(check_times_[1]);
  check_seq_.reset();
  // Evidence from a busy machine decides nothing: the cached choice stays.
  if (!loses || starved()) return;
  ++rechecks_lost_;
  chosen_.reset();
  chosen_info_.reset();
  tuned_ = false;
  start_search();
}

AutoEngine::~AutoEngine() {
  if (!tuned_ && progressed_ && !starved()) save_progress();
}

std::string AutoEngine::label(const Candidate& c) const {
  const Engine& e = *c.engine;
  return std::string(c.parallel ? "critical-path" : "sequential") + " " +
         std::to_string(e.executors()) + "x" + std::to_string(e.threads_per_executor()) +
         (c.parallel && c.parallel->per_op() ? " per-op" : "");
}

void AutoEngine::resume() {
  // Per-op candidates' climbed thread counts are not kept: their searches start afresh.
  if (base_.per_op_threads) return;
  std::vector<std::string> labels;
  for (const Candidate& c : candidates_) labels.push_back(label(c));
  std::optional<SearchProgress> p = cache_.load_progress(prog_.plan->nodes.size(), labels);
  if (!p) return;
  rounds_ = p->rounds;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    Candidate& c = candidates_[i];
    SearchProgress::Candidate& s = p->candidates[i];
    c.times = std::move(s.times);
    c.turns = s.turns;
    c.dropped = s.dropped;
    // Warm-up goes in order: the warm candidates are the first ones.
    if (s.warm && warming_ == i) {
      if (c.parallel) c.parallel->set_costs(std::move(s.cost_us), true);
      ++warming_;
    }
  }
  // The turn in progress goes on, its timed runs counted; settled already: in a new process no
  // other candidate's team is spinning.
  turn_ = p->turn < candidates_.size() && !candidates_[p->turn].dropped ? p->turn : 0;
  while (turn_ + 1 < candidates_.size() && candidates_[turn_].dropped) ++turn_;
  if (warming_ == candidates_.size() && p->turn_runs > 0) {
    in_turn_ = true;
    settled_ = true;
    turn_t0_ = Clock::now();
    turn_runs_ = p->turn_runs;
  }
}

void AutoEngine::save_progress() {
  if (base_.per_op_threads) return;
  SearchProgress p;
  p.nodes = prog_.plan->nodes.size();
  p.rounds = rounds_;
  p.turn = turn_;
  p.turn_runs = in_turn_ && settled_ ? turn_runs_ : 0;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    const Candidate& c = candidates_[i];
    SearchProgress::Candidate s;
    s.label = label(c);
    s.warm = i < warming_;
    if (s.warm && c.parallel) s.cost_us = c.parallel->costs();
    s.times = c.times;
    s.turns = c.turns;
    s.dropped = c.dropped;
    p.candidates.push_back(std::move(s));
  }
  cache_.store_progress(p);
}

void AutoEngine::set_recording(bool on) {
  recording_ = on;
  for (auto& c : candidates_) c.engine->set_recording(on);
  if (chosen_) chosen_->set_recording(on);
  if (loaded_) loaded_->set_recording(on);
  if (check_seq_) check_seq_->set_recording(on);
}

EngineReport::Cpu::Trial AutoEngine::trial(const Candidate& c) const {
  EngineReport::Cpu::Trial t;
  t.engine = c.parallel ? "critical-path" : "sequential";
  t.executors = c.engine->executors();
  t.threads_per_executor = c.engine->threads_per_executor();
  t.per_op_threads = c.parallel && c.parallel->per_op();
  t.median_s = median_of(c.times);
  t.runs = static_cast<int>(c.times.size());
  return t;
}

// Other processes hold some cores: a team of all of them would wait at every barrier for the
// member that shares a core (one busy process beside mnist_softmax: 1x2 took 2.6x the time of
// 1x1), and a search or a check would measure them. Run on the cores left until they are free
// again; the search and the check wait for that too. Runs of other automatic engines of this
// process at the same moment share what is left (issue 45: four graphs, each run in a loop by
// its own thread on 2 cores, gave 0.62x the throughput of running them one after another with
// a 2-thread team each, on an AVX-512 VM). Returns whether it ran.
bool AutoEngine::run_on_share(int others_in_flight) {
  const int busy = PinPolicy::busy_cores();
  const int here = others_in_flight + 1;
  const int left = std::max(1, (cores_ - busy) / here);
  const int wanted =
      tuned_ && !checking_ ? chosen_->executors() * chosen_->threads_per_executor() : cores_;
  if ((busy == 0 && here == 1) || left >= wanted) return false;
  if (!loaded_ || loaded_threads_ != left) {
    loaded_ = make_sequential_engine(prog_, left);
    loaded_->set_recording(recording_);
    loaded_threads_ = left;
  }
  last_ = loaded_.get();
  loaded_->run();
  return true;
}

void AutoEngine::run() {
  ++runs_;
  const InFlight in_flight;
  if (adapt_ && run_on_share(in_flight.others())) return;
  if (checking_) {
    check_run();
    return;
  }
  if (tuned_) {
    last_ = chosen_.get();
    chosen_->run();
    return;
  }
  progressed_ = true;
  // First each candidate in turn until its levels come from measured durations (critical
  // path: per-op thread counts climbed, levels profiled, then one run with them) or it has run
  // once (sequential): untimed.
  if (warming_ < candidates_.size()) {
    Candidate& c = candidates_[warming_];
    last_ = c.engine.get();
    const bool profiled = c.parallel == nullptr || c.parallel->levels_profiled();
    const auto t0 = Clock::now();
    c.engine->run();
    c.last_run_s = seconds(t0, Clock::now());
    if (profiled) ++warming_;
    return;
  }
  // Then the candidates still in the search by turns: settle untimed, then timed runs.
  Candidate& c = candidates_[turn_];
  last_ = c.engine.get();
  if (!in_turn_) {
    in_turn_ = true;
    settled_ = c.last_run_s >= kLongRunSeconds;
    turn_t0_ = Clock::now();
    turn_runs_ = 0;
  }
  if (settled_ && !c.parallel) {
    time_sequential(*c.engine, c.last_run_s);
  } else {
    const auto t0 = Clock::now();
    c.engine->run();
    c.last_run_s = seconds(t0, Clock::now());
  }
  const auto t1 = Clock::now();
  ++turn_runs_;
  if (!settled_) {
    if (seconds(turn_t0_, t1) >= kSettleSeconds || turn_runs_ >= kSettleRuns) {
      settled_ = true;
      turn_t0_ = t1;
      turn_runs_ = 0;
    }
    return;
  }
  c.times.push_back(c.last_run_s);
  if (seconds(turn_t0_, t1) < kTurnSeconds && turn_runs_ < kTurnRuns) return;
  ++c.turns;
  in_turn_ = false;
  const std::size_t before = turn_;
  do {
    turn_ = (turn_ + 1) % candidates_.size();
  } while (candidates_[turn_].dropped);
  if (turn_ <= before) end_round();  // every candidate had its turn: decide
}

void AutoEngine::end_round() {
  ++rounds_;
  std::size_t lead = candidates_.size();
  double lead_median = 0;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    if (candidates_[i].dropped) continue;
    const double m = median_of(candidates_[i].times);
    if (lead == candidates_.size() || m < lead_median) {
      lead = i;
      lead_median = m;
    }
  }
  std::size_t left = 0;
  bool clear = true;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    Candidate& c = candidates_[i];
    if (c.dropped || i == lead) continue;
    const double fastest = *std::min_element(c.times.begin(), c.times.end());
    if (fastest > lead_median * (1 + kDropMargin)) {
      c.dropped = true;  // clearly slower: no more turns
      continue;
    }
    ++left;
    clear = clear && fastest >= lead_median;
  }
  if (left == 0 || (rounds_ >= kMinTurns && clear) || rounds_ >= kMaxTurns) {
    finish();
    return;
  }
  turn_ = 0;  // the next round starts with the first candidate still in
  while (candidates_[turn_].dropped) ++turn_;
}

void AutoEngine::finish() {
  std::size_t best = candidates_.size();
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    search_.push_back(trial(candidates_[i]));
    // A candidate that left the search early has a median too (from its turn): the fastest
    // median over all of them wins (it is one of the survivors unless the machine was noisy).
    if (best == candidates_.size() || search_[i].median_s < search_[best].median_s) best = i;
  }
  Candidate& win = candidates_[best];
  const EngineReport::Cpu::Trial& t = search_[best];
  chosen_info_ = EngineReport::Cpu::Chosen{t.engine,         t.executors, t.threads_per_executor,
                                           t.per_op_threads, false,       load()};
  TunedChoice choice;
  choice.engine = t.engine;
  choice.executors = t.executors;
  choice.threads = t.threads_per_executor;
  choice.per_op_threads = t.per_op_threads;
  choice.nodes = prog_.plan->nodes.size();
  if (win.parallel) {
    choice.cost_us = win.parallel->costs();
    if (choice.per_op_threads) choice.node_threads = win.parallel->node_threads();
  }
  interfered_ = chosen_info_->load->busy;
  if (!interfered_) cache_.store(choice);
  chosen_ = std::move(win.engine);  // keeps its profiled levels
  candidates_.clear();              // the others' executor threads end here
  last_ = chosen_.get();
  tuned_ = true;
}

}  // namespace hetgraph::detail::cpu
