// SPDX-License-Identifier: Apache-2.0
#include "cpu/engine_parallel.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "compiler/graph_stats.hpp"
#include "cpu/parallel.hpp"
#include "cpu/topology.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- ParallelEngine -------------------------------------------------------------------------

ParallelEngine::ParallelEngine(const Program& prog, const EngineConfig& cfg)
    : plan_(prog.plan), cfg_(cfg), kernels_(prog.kernels), lane_(prog) {
  const Plan& p = *plan_;
  const std::size_t n = p.nodes.size();
  if (cfg_.executors < 1 || cfg_.threads < 1)
    throw PlatformError("engine: executors and threads must be >= 1");
  if (cfg_.executors > 64)
    throw PlatformError("engine: at most 64 executors (the idle bitmap is 64 bits)");
  succ_begin_.reserve(n + 1);
  ndeps_.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    succ_begin_.push_back(static_cast<std::uint32_t>(succ_.size()));
    succ_.insert(succ_.end(), p.nodes[i].succs.begin(), p.nodes[i].succs.end());
    ndeps_[i] = static_cast<std::int32_t>(p.nodes[i].deps.size());
    if (ndeps_[i] == 0) sources_.push_back(i);
  }
  succ_begin_.push_back(static_cast<std::uint32_t>(succ_.size()));
  pending_ = std::make_unique<std::atomic<std::int32_t>[]>(n);
  set_costs(static_costs(p));
  sum_us_.assign(n, 0.0);
  threads_.assign(n, cfg_.threads);
  per_op_ = cfg_.per_op_threads && cfg_.threads > 1;
  if (per_op_) {
    for (int t = 1; t < cfg_.threads; t *= 2) team_steps_.push_back(t);
    team_steps_.push_back(cfg_.threads);
    setup_climbs();
  }

  const Topology& topo = Topology::get();
  const int cores = topo.allowed();
  for (int e = 0; e < cfg_.executors; ++e) {
    auto w = std::make_unique<Worker>();
    w->id = e;
    for (int t = 0; t < cfg_.threads; ++t) {
      // More executors than cores is allowed (tests do it): teams then wrap around.
      w->pus.push_back(topo.cores()[static_cast<std::size_t>((e * cfg_.threads + t) % cores)].pu);
    }
    w->ctx.nthreads = cfg_.threads;
    w->ctx.executor = e;
    if (prog.scratch_bytes > 0) {
      w->scratch.reset(
          static_cast<std::byte*>(std::aligned_alloc(64, (prog.scratch_bytes + 63) / 64 * 64)));
      w->ctx.scratch = w->scratch.get();
      w->ctx.scratch_bytes = prog.scratch_bytes;
    }
    if (per_op_) {  // co-running single-thread nodes: one context and scratch per team thread
      for (int t = 0; t < cfg_.threads; ++t) {
        ExecCtx c = w->ctx;
        c.nthreads = 1;
        if (prog.scratch_bytes > 0) {
          w->team_scratch.emplace_back(
              static_cast<std::byte*>(std::aligned_alloc(64, (prog.scratch_bytes + 63) / 64 * 64)),
              std::free);
          c.scratch = w->team_scratch.back().get();
        }
        w->team_ctx.push_back(c);
      }
    }
    // Room for ring_capacity nodes, and for a node per team thread when they co-run.
    w->ring.reset(static_cast<std::size_t>(std::max({1, cfg_.ring_capacity, cfg_.threads})));
    w->readied.reserve(64);
    w->triggered.reset(n + 1);  // every node could become ready on one executor
    w->stack.reserve(64);
    workers_.push_back(std::move(w));
  }
  // A collective's end may be the only thing left to do: wake the executors to pick it up.
  lane_.set_notify([this] {
    for (auto& w : workers_) wake_of(*w).notify_all();
  });
}

void ParallelEngine::start_workers() {
  for (int e = 1; e < cfg_.executors; ++e) {
    Worker& w = *workers_[static_cast<std::size_t>(e)];
    w.thread = std::thread([this, &w] { worker_main(w); });
  }
}

void ParallelEngine::shutdown() {
  stop_.store(true, std::memory_order_seq_cst);
  for (auto& w : workers_) wake_of(*w).notify_all();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

ParallelEngine::~ParallelEngine() = default;

std::vector<std::string> ParallelEngine::lane_names() const {
  std::vector<std::string> names;
  for (const auto& w : workers_) {
    std::string cores;
    for (int pu : w->pus) cores += (cores.empty() ? "" : ",") + std::to_string(pu);
    names.push_back("executor " + std::to_string(w->id) + (w->id == 0 ? " (caller)" : "") +
                    " cores " + cores);
  }
  if (per_op_) {  // nodes co-running on a split team: one lane per team thread
    for (const auto& w : workers_) {
      for (int t = 1; t < cfg_.threads; ++t) {
        names.push_back("executor " + std::to_string(w->id) + " team thread " + std::to_string(t) +
                        " core " + std::to_string(w->pus[static_cast<std::size_t>(t)]));
      }
    }
  }
  if (!lane_.empty()) names.push_back("communication");  // comm_lane_id()
  return names;
}

int ParallelEngine::comm_lane_id() const {
  return cfg_.executors + (per_op_ ? cfg_.executors * (cfg_.threads - 1) : 0);
}

void ParallelEngine::set_costs(std::vector<double> cost_us, bool profiled) {
  if (profiled) profiled_ = true;
  cost_ = std::move(cost_us);
  levels_ = levels_from_costs(*plan_, cost_);
  // Scheduling priority: the level, quantised. Levels that differ by less than 1/16 of the
  // makespan's lower bound max(critical path, work / executors) tie, and ties go to plan
  // (depth-first topological) order: nodes near the critical path still go first, nodes with
  // slack keep producer-consumer locality instead of an order set by profiling noise. (Strict
  // levels ran all 1024 products of par-matmul-1024 before any of their consumers: 14% slower
  // than plan order with one executor, 6% with two.) One executor: one bucket, plan order.
  double longest = 0, work = 0;
  for (std::size_t i = 0; i < levels_.size(); ++i) {
    longest = std::max(longest, levels_[i]);
    work += cost_[i];
  }
  const double bound = std::max(longest, work / cfg_.executors);
  // Binding the calling thread to executor 0's core, and back after the run, takes three
  // affinity system calls per run (and moves the thread when it is elsewhere): on a KVM guest,
  // wide-deep-infer-1's runs of 20-50 us were 15-41% faster without
  // (bench/results/2026-11-28-caller-binding-ab-short-zen4.jsonl). Runs modelled shorter than
  // kBindCallerMinUs leave the caller where it is.
  bind_caller_ = cfg_.pin && bound >= kBindCallerMinUs;
  priority_.assign(levels_.size(), 0.0);
  if (cfg_.executors > 1 && bound > 0) {
    const double quantum = bound / 16;
    for (std::size_t i = 0; i < levels_.size(); ++i)
      priority_[i] = std::floor(levels_[i] / quantum);
  }
  ++priority_version_;
  tiny_.assign(cost_.size(), 0);
  cost_ns_.assign(cost_.size(), 1);
  for (std::size_t i = 0; i < cost_.size(); ++i) {
    tiny_[i] = kernels_[i] == nullptr || cost_[i] < cfg_.inline_below_us;
    cost_ns_[i] = static_cast<std::uint64_t>(std::max(1.0, std::round(cost_[i] * 1e3)));
  }
}

void ParallelEngine::bind_team_threads(Worker& w, bool pin) {
  if (cfg_.threads <= 1) return;
  // OpenMP reuses the same threads for the same team size: bound once, they stay so.
  const std::vector<int>& pus = w.pus;
#pragma omp parallel num_threads(cfg_.threads)
  {
    const int t = omp_get_thread_num();
    if (t > 0) {
      if (pin)
        Topology::bind_current_thread(pus[static_cast<std::size_t>(t)]);
      else
        Topology::unbind_current_thread();
    }
  }
}

void ParallelEngine::sync_binding(Worker& w) {
  const std::uint64_t epoch = PinPolicy::epoch();
  if (epoch == w.pin_epoch) return;
  w.pin_epoch = epoch;
  const bool pin = PinPolicy::allowed();
  if (pin == w.bound) return;
  if (pin)
    Topology::bind_current_thread(w.pus[0]);
  else
    Topology::unbind_current_thread();
  bind_team_threads(w, pin);
  w.bound = pin;
}

void ParallelEngine::worker_main(Worker& w) {
  omp_set_num_threads(cfg_.threads);
  if (cfg_.pin) sync_binding(w);
  work(w, false);
}

void ParallelEngine::run() {
  Worker& w0 = *workers_[0];
  std::optional<PinPolicy::Run> in_flight;  // overlapping runs of engines share the cores
  bool pin = false;
  if (cfg_.pin) {
    in_flight.emplace();
    pin = PinPolicy::allowed();
  }
  std::vector<int> saved;
  const bool bind = bind_caller_ && pin;  // (update_profile below may change bind_caller_)
  if (bind) {
    saved = Topology::current_binding();
    Topology::bind_current_thread(w0.pus[0]);
    if (w0.team_pinned_for != std::this_thread::get_id()) {
      TeamSize team(cfg_.threads);
      bind_team_threads(w0, true);
      w0.team_pinned_for = std::this_thread::get_id();
    }
  } else if (!pin && w0.team_pinned_for == std::this_thread::get_id()) {
    // Pinning stopped since this thread's team was pinned: its team threads go free (the
    // calling thread's own binding is the caller's, restored after each run).
    TeamSize team(cfg_.threads);
    bind_team_threads(w0, false);
    w0.team_pinned_for = std::thread::id();
  }
  TeamSize team(cfg_.threads);
  w0.ctx.nthreads = cfg_.threads;  // what the calling thread's OpenMP team is set to now

  recording_ =
      trace_recording_ || climbing_ || (!profiled_ && runs_ - profile_start_ < cfg_.profile_runs);
  lane_.begin_run(recording_);
  for (auto& w : workers_) w->events.clear();
  const std::size_t n = ndeps_.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (ndeps_[i] > 1) pending_[i].store(ndeps_[i], std::memory_order_relaxed);
  }
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  begin_run();
  remaining_.store(static_cast<std::int64_t>(n), std::memory_order_release);

  // Sources: cheap ones run here at once, the rest go to the scheduler.
  for (std::uint32_t v : sources_) {
    if (lane_.is_comm(v)) {
      std::vector<std::uint32_t> abandoned;
      start_comm(v, abandoned);
      if (!abandoned.empty()) complete(v, w0);
    } else if (tiny_[v]) {
      execute(v, w0);
      complete(v, w0);
    } else {
      on_ready(v, w0);
    }
  }
  kick();
  work(w0, true);
  end_run();

  if (bind) Topology::restore_binding(saved);
  ++runs_;
  if (recording_) update_profile();
  if (error_) std::rethrow_exception(error_);
}

void ParallelEngine::work(Worker& w, bool caller) {
  EventCount& wake = wake_of(w);
  auto finished = [&] {
    return caller ? remaining_.load(std::memory_order_acquire) == 0
                  : stop_.load(std::memory_order_acquire);
  };
  CommLane::Finished ended;
  for (;;) {
    if (!lane_.empty() && lane_.take(ended)) {
      finish_comm(ended, w);
      continue;
    }
    std::uint32_t v = w.next;
    if (v != kNone) {  // a node it readied itself
      w.next = kNone;
      execute(v, w);
      complete(v, w);
      after_node(w, v, false);
      continue;
    }
    if (take_work(w, v)) {
      if (per_op_ && !climbing_ && threads_[v] == 1 && gather(v, w)) {
        run_batch(w);
        continue;
      }
      execute(v, w);
      complete(v, w);
      after_node(w, v, true);
      continue;
    }
    // Out of work: what it finished counts now (the run may be over), then look for more.
    flush(w);
    if (finished()) return;
    if (!caller && cfg_.pin && w.pin_epoch != PinPolicy::epoch()) sync_binding(w);
    if (poll(w)) continue;
    bool found = false;
    for (int i = 0; i < cfg_.spin && !found; ++i) {
      if (cfg_.spin_yields)
        std::this_thread::yield();
      else
        cpu_relax();
      found = has_work(w, false) || lane_.has_finished() || finished();
    }
    if (found) continue;
    sleeping(w, true);
    const std::uint32_t ticket = wake.ticket();
    if (!has_work(w, true) && !lane_.has_finished() && !finished()) wake.wait(ticket);
    sleeping(w, false);
  }
}

void ParallelEngine::flush(Worker& w) {
  const std::int64_t d = w.unflushed;
  if (d == 0) return;
  w.unflushed = 0;
  // acq_rel: the caller, seeing zero, sees every node's writes (release sequence).
  if (remaining_.fetch_sub(d, std::memory_order_acq_rel) == d) {
    wake_of(*workers_[0]).notify_all();  // the run is over: wake the caller (executor 0)
  }
}

void ParallelEngine::execute(std::uint32_t v, Worker& w) {
  CpuKernel* k = kernels_[v];
  if (k == nullptr || failed_.load(std::memory_order_relaxed)) return;
  if (const int t = threads_[v]; t != w.ctx.nthreads) {  // per-op thread counts
    w.ctx.nthreads = t;
    omp_set_num_threads(t);
  }
  const std::int64_t t0 = recording_ ? now_ns() : 0;
  try {
    run_kernel(*k, w.ctx, plan_->nodes[v]);
  } catch (...) {
    fail(std::current_exception());
  }
  if (recording_) w.events.push_back({v, w.id, t0, now_ns()});
}

bool ParallelEngine::gather(std::uint32_t v, Worker& w) {
  constexpr std::size_t kMaxBatch = 64;
  w.batch.clear();
  w.batch.push_back(v);
  std::uint32_t u;
  while (w.batch.size() < kMaxBatch && peek_work(w, u) && threads_[u] == 1) {
    take_work(w, u);
    w.batch.push_back(u);
  }
  return w.batch.size() > 1;
}

void ParallelEngine::run_batch(Worker& w) {
  // Co-running: the team splits into single-thread lanes, each taking the next node of the
  // batch; the nodes are completed (successors readied) once the region is over.
  const std::size_t n = w.batch.size();
  const int nt = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(cfg_.threads), n));
  const bool rec = recording_;
  if (rec) w.batch_events.assign(n, NodeEvent{});
  std::atomic<std::size_t> next{0};
#pragma omp parallel num_threads(nt)
  {
    const int tid = omp_get_thread_num();
    omp_set_num_threads(1);  // kernels see a team of one (this implicit task only)
    const ExecCtx& ctx = w.team_ctx[static_cast<std::size_t>(tid)];
    const int lane = tid == 0 ? w.id : cfg_.executors + w.id * (cfg_.threads - 1) + tid - 1;
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      const std::uint32_t v = w.batch[i];
      if (failed_.load(std::memory_order_relaxed)) continue;
      const std::int64_t t0 = rec ? now_ns() : 0;
      try {
        run_kernel(*kernels_[v], ctx, plan_->nodes[v]);
      } catch (...) {
        fail(std::current_exception());
      }
      if (rec) w.batch_events[i] = {v, lane, t0, now_ns()};
    }
  }
  if (rec) {
    for (const NodeEvent& e : w.batch_events) {
      if (e.end_ns != 0) w.events.push_back(e);
    }
  }
  for (std::uint32_t v : w.batch) {
    complete(v, w);
    after_node(w, v, true);
  }
}

void ParallelEngine::complete(std::uint32_t v, Worker& w) {
  std::vector<std::uint32_t>& stack = w.stack;
  stack.clear();
  stack.push_back(v);
  std::int64_t done = 0;
  while (!stack.empty()) {
    const std::uint32_t u = stack.back();
    stack.pop_back();
    ++done;
    for (std::uint32_t k = succ_begin_[u], end = succ_begin_[u + 1]; k < end; ++k) {
      const std::uint32_t s = succ_[k];
      // A node with one dependency is ready now (this thread finished it, so whoever runs the
      // node sees its input through the hand-off). Otherwise acq_rel: the last decrement sees
      // every predecessor's writes (release sequence).
      if (ndeps_[s] == 1 || pending_[s].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        if (lane_.is_comm(s)) {
          start_comm(s, stack);
        } else if (tiny_[s]) {
          execute(s, w);
          stack.push_back(s);
        } else {
          on_ready(s, w);
        }
      }
    }
  }
  // Counted off the run's total when w runs dry (flush): the count cannot reach zero before,
  // because these nodes are in it.
  w.unflushed += done;
}

void ParallelEngine::start_comm(std::uint32_t v, std::vector<std::uint32_t>& stack) {
  if (!failed_.load(std::memory_order_relaxed)) {
    lane_.start(v);
    return;
  }
  // The run failed: the other processes must not wait for this node. It completes here.
  std::exception_ptr e;
  {
    std::lock_guard lk(error_mu_);
    e = error_;
  }
  lane_.abandon(v, error_text(e));
  stack.push_back(v);
}

void ParallelEngine::finish_comm(CommLane::Finished& f, Worker& w) {
  if (f.error) fail(std::move(f.error));
  if (recording_) w.events.push_back({f.node, comm_lane_id(), f.start_ns, f.end_ns});
  complete(f.node, w);
  after_node(w, f.node, /*given=*/false);  // hand over what it readied, as after any node
}

void ParallelEngine::fail(std::exception_ptr e) {
  std::lock_guard lk(error_mu_);
  if (!error_) error_ = std::move(e);
  // The rest of the run drains without computing: dependents would read garbage anyway.
  failed_.store(true, std::memory_order_relaxed);
}

void ParallelEngine::update_profile() {
  events_.clear();
  for (const auto& w : workers_) events_.insert(events_.end(), w->events.begin(), w->events.end());
  std::sort(events_.begin(), events_.end(), [](const NodeEvent& a, const NodeEvent& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.node < b.node;
  });
  if (climbing_) {
    // Not from the first run: its page faults and primitive creation would be charged to the
    // first thread count tried (a 1-thread matmul measured 10x its later time).
    if (!error_ && runs_ > 1) update_climbs();
    return;
  }
  const int k = runs_ - profile_start_;  // profiled runs so far, this one included
  if (profiled_ || k < 1 || k > cfg_.profile_runs) return;
  for (const NodeEvent& e : events_)
    sum_us_[e.node] += static_cast<double>(e.end_ns - e.start_ns) * 1e-3;
  if (k == cfg_.profile_runs) {
    // Averaged measured durations replace the static estimates: the scheduler is rebuilt.
    std::vector<double> cost(sum_us_.size());
    for (std::size_t i = 0; i < cost.size(); ++i) cost[i] = sum_us_[i] / cfg_.profile_runs;
    set_costs(std::move(cost));
    profiled_ = true;
  }
}

// ---- per-op thread counts ------------------------------------------------------------------

void ParallelEngine::setup_climbs() {
  // One thread count per op kind (the paper's Strategy 2: frequent changes of a kind's
  // concurrency cost more than they gain), found on the kind's largest instances.
  const Plan& p = *plan_;
  std::vector<std::int32_t> index(static_cast<std::size_t>(kNumOps), -1);
  for (std::uint32_t v = 0; v < p.nodes.size(); ++v) {
    if (kernels_[v] == nullptr) continue;
    auto& slot = index[static_cast<std::size_t>(p.nodes[v].op)];
    if (slot < 0) {
      slot = static_cast<std::int32_t>(climbs_.size());
      climbs_.push_back({p.nodes[v].op, {}, {}, {}, 0, false});
    }
    climbs_[static_cast<std::size_t>(slot)].nodes.push_back(v);
  }
  for (Climb& c : climbs_) {
    double most = 0;
    for (std::uint32_t v : c.nodes) most = std::max(most, cost_[v]);
    for (std::uint32_t v : c.nodes) {
      if (cost_[v] >= 0.5 * most) c.large.push_back(v);
    }
  }
  if (!cfg_.node_threads.empty()) {  // known counts (the tuning cache): no climbing
    if (cfg_.node_threads.size() != p.nodes.size())
      throw PlatformError("engine: per-op thread counts for " +
                          std::to_string(cfg_.node_threads.size()) + " nodes, the plan has " +
                          std::to_string(p.nodes.size()));
    for (std::size_t v = 0; v < p.nodes.size(); ++v) {
      const int t = cfg_.node_threads[v];
      if (std::find(team_steps_.begin(), team_steps_.end(), t) == team_steps_.end())
        throw PlatformError("engine: per-op thread count " + std::to_string(t) + " of node " +
                            p.nodes[v].label + " is not one the kernels were made for");
      threads_[v] = t;
    }
    for (Climb& c : climbs_) c.done = true;
    return;
  }
  climbing_ = !climbs_.empty();
  for (std::size_t c = 0; c < climbs_.size(); ++c) set_kind_threads(c, team_steps_.front());
}

void ParallelEngine::set_kind_threads(std::size_t climb, int threads) {
  for (std::uint32_t v : climbs_[climb].nodes) threads_[v] = threads;
}

void ParallelEngine::update_climbs() {
  // Hill climbing (the paper's Section III-C, with doubling steps): a kind goes to the next
  // thread count while its largest instances get at least kGain faster.
  constexpr double kGain = 0.05;
  std::vector<double> us(threads_.size(), 0.0);
  for (const NodeEvent& e : events_)
    us[e.node] += static_cast<double>(e.end_ns - e.start_ns) * 1e-3;
  bool more = false;
  for (std::size_t i = 0; i < climbs_.size(); ++i) {
    Climb& c = climbs_[i];
    if (c.done) continue;
    double t_us = 0;
    for (std::uint32_t v : c.large) t_us += us[v];
    c.curve.push_back({team_steps_[c.step], t_us});
    if (c.step > 0 && t_us > c.curve[c.step - 1].second * (1 - kGain)) {
      c.done = true;
      set_kind_threads(i, c.curve[c.step - 1].first);
    } else if (c.step + 1 < team_steps_.size()) {
      set_kind_threads(i, team_steps_[++c.step]);
      more = true;
    } else {
      c.done = true;
    }
  }
  if (!more) {  // levels are profiled from here on, with the chosen counts
    climbing_ = false;
    profile_start_ = runs_;
  }
}

std::vector<EngineReport::Cpu::OpThreads> ParallelEngine::op_threads() const {
  std::vector<EngineReport::Cpu::OpThreads> out;
  for (const Climb& c : climbs_) {
    out.push_back({std::string(op_def(c.op).name), threads_[c.nodes.front()], c.curve});
  }
  return out;
}

// ---- CriticalPathEngine ---------------------------------------------------------------------

CriticalPathEngine::CriticalPathEngine(const Program& prog, const EngineConfig& cfg)
    : ParallelEngine(prog, cfg),
      queue_ns_(static_cast<std::uint64_t>(std::max(0.0, cfg.queue_us) * 1e3)),
      capacity_(static_cast<std::uint64_t>(std::max(1, cfg.ring_capacity))),
      wide_seq_(static_cast<std::size_t>(cfg.executors), 0) {
  start_workers();
}

void CriticalPathEngine::begin_run() {
  // A late executor may still be finishing the previous run's last scheduling step.
  while (!lock_.try_lock()) cpu_relax();
  if (ready_version_ != priority_version_) {
    ready_.set_levels(priority_);
    ready_version_ = priority_version_;
  } else {
    ready_.clear();
  }
  top_rank_.store(kNone, std::memory_order_relaxed);
  lock_.unlock();
}

void CriticalPathEngine::end_run() {
  // An executor may still be in the step that handed out the last node (it reads the node's
  // cost after the push the caller saw): the profile update after this rewrites the costs.
  // Taking the lock orders that step's reads before those writes; a step after this finds
  // the ready set empty and reads no cost.
  while (!lock_.try_lock()) cpu_relax();
  lock_.unlock();
}

void CriticalPathEngine::kick() {
  dispatch_readied(*workers_[0]);
  request(*workers_[0]);
}

bool CriticalPathEngine::handed_over(std::memory_order order) const {
  for (const auto& w : workers_) {
    if (order == std::memory_order_seq_cst ? !w->triggered.seq_cst_empty() : !w->triggered.empty())
      return true;
  }
  return false;
}

bool CriticalPathEngine::has_work(const Worker& w, bool before_sleep) const {
  return !w.ring.empty() || requests_.load(std::memory_order_seq_cst) > 0 ||
         handed_over(before_sleep ? std::memory_order_seq_cst : std::memory_order_acquire);
}

bool CriticalPathEngine::poll(Worker& w) {
  // Idle: the scheduler's role if a step was asked for or nodes were handed over.
  if (requests_.load(std::memory_order_acquire) == 0 && !handed_over(std::memory_order_acquire))
    return false;
  try_schedule(w);
  return !w.ring.empty();
}

void CriticalPathEngine::after_node(Worker& w, std::uint32_t v, bool given) {
  if (given) {  // what the scheduler counts against this executor's queue
    w.done_ns_local += cost_ns(v);
    w.done_ns.store(w.done_ns_local, std::memory_order_release);
    w.done.store(++w.done_local, std::memory_order_release);
  }
  const bool handed = dispatch_readied(w);
  // A step is needed to get more work, or for the nodes it handed over if an executor sleeps
  // (one that spins finds them itself; busy ones step when they run dry). Dekker-style with
  // sleeping(): the hand-over is a seq_cst push, then sleeping_ is read; a sleeper counts
  // itself, then reads the rings seq_cst: one of the two sees the other.
  if ((w.next == kNone && w.ring.empty()) ||
      (handed && sleeping_.load(std::memory_order_seq_cst) > 0)) {
    request(w);
  }
}

bool CriticalPathEngine::dispatch_readied(Worker& w) {
  std::uint32_t keep = kNone;
  if (w.next == kNone && w.ring.empty() && !w.readied.empty()) {
    // The best readied node, if it beats the ready set's best: the scheduler would hand it to
    // an idle executor next, and this one is idle now.
    std::uint32_t best = top_rank_.load(std::memory_order_relaxed);
    for (std::uint32_t s : w.readied) {
      const std::uint32_t r = ready_.rank(s);
      if (r < best) {
        best = r;
        keep = s;
      }
    }
  }
  // Published before the hand-over below (and the request that follows it), so a step that
  // sees those nodes counts this one against w. A node kept earlier and not yet run stays
  // (co-running: each node of a batch completes in turn before any of them runs next).
  if (w.next == kNone) {
    w.own_ns.store(keep == kNone ? 0 : cost_ns(keep), std::memory_order_release);
    w.next = keep;
  }
  std::uint32_t last = kNone;
  for (std::uint32_t s : w.readied) {
    if (s == keep) continue;
    if (last != kNone) w.triggered.push(last);  // capacity is the node count: cannot fail
    last = s;
  }
  w.readied.clear();
  if (last == kNone) return false;
  w.triggered.push(last, std::memory_order_seq_cst);  // see after_node
  return true;
}

void CriticalPathEngine::request(Worker& self) {
  requests_.fetch_add(1, std::memory_order_seq_cst);
  try_schedule(self);
}

void CriticalPathEngine::try_schedule(Worker& self) {
  // Whoever holds the lock is the scheduler. A request made while another thread holds it is
  // seen by that thread when it re-checks after unlocking (seq_cst on both sides).
  while (lock_.try_lock()) {
    requests_.store(0, std::memory_order_seq_cst);
    step(self);
    lock_.unlock();
    if (requests_.load(std::memory_order_seq_cst) == 0) return;
  }
}

void CriticalPathEngine::step(Worker& self) {
  std::uint32_t v;
  for (auto& w : workers_) {
    while (w->triggered.pop(v)) ready_.push(v);
  }
  if (ready_.empty()) {
    top_rank_.store(kNone, std::memory_order_relaxed);
    return;
  }
  // An executor takes another node while it has none, or fewer than the ring holds and less
  // estimated work than queue_us (its own readied node included): tiny nodes go in batches,
  // big ones one at a time. Per-op thread counts: a team of T threads takes up to T
  // single-thread nodes to co-run, and a node of more threads only when it has nothing else.
  const std::size_t n = workers_.size();
  const bool co_run = per_op() && climbed();
  const std::uint64_t team = static_cast<std::uint64_t>(config().threads);
  const std::vector<int>& threads = node_threads();
  std::uint64_t count[64], work[64];
  bool wide[64];
  std::uint64_t open = 0;  // bit e: executor e may take a node
  for (std::size_t e = 0; e < n; ++e) {
    Worker& w = *workers_[e];
    const std::uint64_t own = w.own_ns.load(std::memory_order_acquire);
    const std::uint64_t done = w.done.load(std::memory_order_acquire);
    count[e] = w.assigned - done + (own != 0);
    work[e] = w.assigned_ns - w.done_ns.load(std::memory_order_acquire) + own;
    wide[e] = co_run && wide_seq_[e] > done;
    if (count[e] == 0 || (!wide[e] && count[e] < std::max(capacity_, co_run ? team : 1)))
      open |= std::uint64_t{1} << e;
  }
  auto takes = [&](std::size_t e, std::uint32_t v) {
    if (count[e] == 0) return true;
    const bool cheap = count[e] < capacity_ && work[e] < queue_ns_;
    if (!co_run) return cheap;
    return threads[v] == 1 && !wide[e] && (count[e] < team || cheap);
  };
  std::uint64_t fed = 0;
  auto give = [&](std::size_t e) {
    Worker& w = *workers_[e];
    const std::uint32_t v = ready_.pop();
    [[maybe_unused]] const bool pushed = w.ring.push(v);
    assert(pushed && "the ring holds every node an executor may be given");
    const std::uint64_t c = cost_ns(v);
    ++w.assigned;
    w.assigned_ns += c;
    ++count[e];
    work[e] += c;
    if (co_run && threads[v] > 1) {
      wide_seq_[e] = w.assigned;
      wide[e] = true;
    }
    fed |= std::uint64_t{1} << e;
  };
  // The best nodes first to executors with nothing at all, then round robin over those that
  // can take more (in ready order: a node that fits nowhere stops the others behind it).
  for (std::uint64_t m = open; m != 0 && !ready_.empty(); m &= m - 1) {
    const auto e = static_cast<std::size_t>(std::countr_zero(m));
    if (count[e] == 0) give(e);
  }
  while (open != 0 && !ready_.empty()) {
    for (std::uint64_t m = open; m != 0 && !ready_.empty(); m &= m - 1) {
      const auto e = static_cast<std::size_t>(std::countr_zero(m));
      if (takes(e, ready_.top())) {
        give(e);
      } else {
        open &= ~(std::uint64_t{1} << e);
      }
    }
  }
  top_rank_.store(ready_.top_rank(), std::memory_order_relaxed);
  for (std::uint64_t m = fed; m != 0; m &= m - 1) {
    Worker& w = *workers_[static_cast<std::size_t>(std::countr_zero(m))];
    if (&w != &self) w.wake.notify_one();  // the thread scheduling is awake
  }
}

// ---- SharedQueueEngine ----------------------------------------------------------------------

SharedQueueEngine::SharedQueueEngine(const Program& prog, const EngineConfig& cfg)
    : ParallelEngine(prog, cfg) {
  queue_.reserve(prog.plan->nodes.size());
  start_workers();
}

void SharedQueueEngine::on_ready(std::uint32_t v, Worker&) {
  {
    std::lock_guard lk(mu_);
    if (head_ == queue_.size()) {
      queue_.clear();
      head_ = 0;
    }
    queue_.push_back(v);
    size_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_one();
}

bool SharedQueueEngine::take_work(Worker&, std::uint32_t& v) {
  if (size_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lk(mu_);
  if (head_ == queue_.size()) return false;
  v = queue_[head_++];
  size_.fetch_sub(1, std::memory_order_release);
  return true;
}

}  // namespace hetgraph::detail::cpu
