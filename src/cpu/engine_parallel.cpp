#include "cpu/engine_parallel.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>

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

namespace {

// Bounded spin before sleeping: long enough to catch the next node of a busy graph (a few
// microseconds of work), short enough not to burn a core between runs.
constexpr int kSpin = 4000;

}  // namespace

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
    w->ring.reset(static_cast<std::size_t>(std::max(1, cfg_.ring_capacity)));
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
  if (!lane_.empty()) names.push_back("communication");
  return names;
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
  priority_.assign(levels_.size(), 0.0);
  if (cfg_.executors > 1 && bound > 0) {
    const double quantum = bound / 16;
    for (std::size_t i = 0; i < levels_.size(); ++i)
      priority_[i] = std::floor(levels_[i] / quantum);
  }
  tiny_.assign(cost_.size(), 0);
  for (std::size_t i = 0; i < cost_.size(); ++i) {
    tiny_[i] = kernels_[i] == nullptr || cost_[i] < cfg_.inline_below_us;
  }
}

void ParallelEngine::pin_team(Worker& w) {
  if (!cfg_.pin) return;
  Topology::bind_current_thread(w.pus[0]);
  if (cfg_.threads > 1) {
    // OpenMP reuses the same threads for the same team size: pin them once.
    const std::vector<int>& pus = w.pus;
#pragma omp parallel num_threads(cfg_.threads)
    {
      const int t = omp_get_thread_num();
      if (t > 0) Topology::bind_current_thread(pus[static_cast<std::size_t>(t)]);
    }
  }
}

void ParallelEngine::worker_main(Worker& w) {
  omp_set_num_threads(cfg_.threads);
  pin_team(w);
  work(w, false);
}

void ParallelEngine::run() {
  Worker& w0 = *workers_[0];
  std::vector<int> saved;
  if (cfg_.pin) {
    saved = Topology::current_binding();
    if (w0.team_pinned_for != std::this_thread::get_id()) {
      TeamSize team(cfg_.threads);
      pin_team(w0);
      w0.team_pinned_for = std::this_thread::get_id();
    } else {
      Topology::bind_current_thread(w0.pus[0]);
    }
  }
  TeamSize team(cfg_.threads);

  recording_ = trace_recording_ || runs_ < cfg_.profile_runs;
  lane_.begin_run(recording_);
  for (auto& w : workers_) w->events.clear();
  const std::size_t n = ndeps_.size();
  for (std::size_t i = 0; i < n; ++i) pending_[i].store(ndeps_[i], std::memory_order_relaxed);
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

  if (cfg_.pin) Topology::restore_binding(saved);
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
    if (finished()) return;
    if (lane_.take(ended)) {
      finish_comm(ended, w);
      continue;
    }
    std::uint32_t v;
    if (take_work(w, v)) {
      execute(v, w);
      complete(v, w);
      after_node(w);
      continue;
    }
    if (poll(w)) continue;
    bool found = false;
    for (int i = 0; i < kSpin && !found; ++i) {
      cpu_relax();
      found = has_work(w) || lane_.has_finished() || finished();
    }
    if (found) continue;
    const std::uint32_t ticket = wake.ticket();
    if (has_work(w) || lane_.has_finished() || finished()) continue;
    wake.wait(ticket);
  }
}

void ParallelEngine::execute(std::uint32_t v, Worker& w) {
  CpuKernel* k = kernels_[v];
  if (k == nullptr || failed_.load(std::memory_order_relaxed)) return;
  const std::int64_t t0 = recording_ ? now_ns() : 0;
  try {
    run_kernel(*k, w.ctx, plan_->nodes[v]);
  } catch (...) {
    fail(std::current_exception());
  }
  if (recording_) w.events.push_back({v, w.id, t0, now_ns()});
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
      // acq_rel: the last decrement sees every predecessor's writes (release sequence).
      if (pending_[s].fetch_sub(1, std::memory_order_acq_rel) == 1) {
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
  // One decrement for the whole cascade: the count cannot reach zero before it, because these
  // nodes are in it.
  if (remaining_.fetch_sub(done, std::memory_order_acq_rel) == done) {
    // The run is over: wake the caller (executor 0).
    wake_of(*workers_[0]).notify_all();
  }
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
  if (recording_) w.events.push_back({f.node, cfg_.executors, f.start_ns, f.end_ns});
  complete(f.node, w);
  after_comm(w);
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
  if (profiled_ || runs_ > cfg_.profile_runs) return;
  for (const NodeEvent& e : events_)
    sum_us_[e.node] += static_cast<double>(e.end_ns - e.start_ns) * 1e-3;
  if (runs_ == cfg_.profile_runs) {
    // Averaged measured durations replace the static estimates: the scheduler is rebuilt.
    std::vector<double> cost(sum_us_.size());
    for (std::size_t i = 0; i < cost.size(); ++i) cost[i] = sum_us_[i] / cfg_.profile_runs;
    set_costs(std::move(cost));
    profiled_ = true;
  }
}

// ---- CriticalPathEngine ---------------------------------------------------------------------

CriticalPathEngine::CriticalPathEngine(const Program& prog, const EngineConfig& cfg)
    : ParallelEngine(prog, cfg) {
  heap_.reserve(prog.plan->nodes.size());
  start_workers();
}

void CriticalPathEngine::begin_run() {
  // A late executor may still be finishing the previous run's last scheduling step.
  while (!lock_.try_lock()) cpu_relax();
  heap_.clear();
  heap_.set_levels(priority_);
  lock_.unlock();
}

void CriticalPathEngine::on_ready(std::uint32_t v, Worker& w) {
  // Capacity is the node count: this cannot fail.
  w.triggered.push(v);
}

bool CriticalPathEngine::has_work(const Worker& w) const {
  return !w.ring.empty() || requests_.load(std::memory_order_acquire) > 0;
}

bool CriticalPathEngine::poll(Worker& w) {
  if (requests_.load(std::memory_order_acquire) == 0) return false;
  try_schedule(w);
  return !w.ring.empty();
}

void CriticalPathEngine::after_node(Worker& w) {
  w.completed.fetch_add(1, std::memory_order_release);
  request(w);
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
    while (w->triggered.pop(v)) heap_.push(v);
  }
  if (heap_.empty()) return;
  const std::uint64_t cap = static_cast<std::uint64_t>(std::max(1, config().ring_capacity));
  std::uint64_t idle = 0;  // bit e: executor e can take a node
  for (std::size_t e = 0; e < workers_.size(); ++e) {
    Worker& w = *workers_[e];
    if (w.assigned - w.completed.load(std::memory_order_acquire) < cap)
      idle |= std::uint64_t{1} << e;
  }
  while (idle != 0 && !heap_.empty()) {
    const int e = std::countr_zero(idle);
    Worker& w = *workers_[static_cast<std::size_t>(e)];
    w.ring.push(heap_.pop());
    ++w.assigned;
    if (w.assigned - w.completed.load(std::memory_order_acquire) >= cap)
      idle &= ~(std::uint64_t{1} << e);
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
