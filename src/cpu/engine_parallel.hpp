// SPDX-License-Identifier: Apache-2.0
// Parallel CPU engines: N executors, each a team of T threads pinned to its own cores (while
// PinPolicy allows: not beside busy processes, nor while another engine's run overlaps).
//
// Executor 0 is the thread that calls run() (bound to its core for the run only when the run
// is long enough to pay for the system calls: kBindCallerMinUs); executors 1..N-1 own threads
// created with the engine. Every node has a dependency counter (nodes with one dependency need
// none: their producer readies them); the thread that finishes a node readies its successors, runs
// those cheaper than the inline threshold at once (and their successors in turn), and hands the
// others to the scheduling policy:
//  - CriticalPathEngine (Graphi): ready nodes go to the finishing executor's own triggered
//    queue; a centralized scheduler moves them into the ready set ordered by level (longest
//    cost to a sink) and pushes the top nodes into idle executors' lock-free SPSC rings,
//    finding idle executors in a bitmap with count-trailing-zeros. The scheduler is a role,
//    not a thread: the calling thread runs it, and when the caller is busy inside a node an
//    idle executor takes the same lock and runs the same step, so on few cores no core is kept
//    for it and no executor waits on a busy caller.
//    What makes a node cheap to dispatch (Taskflow's per-task cost is the yardstick):
//    * An executor is given more than one node while the estimated work queued at it stays
//      below `queue_us` (at most `ring_capacity` nodes): tiny nodes travel in batches, a node
//      of more than `queue_us` still goes alone to an idle executor (Graphi's capacity 1).
//    * The executor that readies a node better than anything in the ready set (compared by
//      rank with a hint the scheduler publishes) and has nothing queued runs it next itself:
//      a chain never goes through the scheduler, and a consumer runs where its input is hot.
//    * An executor asks for a scheduling step only when it readied nodes or ran dry, and
//      counts finished nodes against the run's total only when it runs dry.
//    Per-op thread counts (EngineConfig::per_op_threads, teams of 2+ threads; after the
//    runtime-concurrency-control paper): the first runs hill-climb each op kind's thread count
//    (1, 2, 4, ... threads for its largest instances while they get faster), then a node runs
//    with its kind's count, and nodes that run on one thread co-run side by side: an executor
//    given several takes them as a batch into one parallel region of its team, each team
//    thread pulling the next one. A node's thread count is fixed per configuration, whatever
//    runs beside it, so results stay bitwise reproducible.
//  - SharedQueueEngine (TensorFlow/MXNet style): all executors pull from one global FIFO.
// Idle executors spin briefly, then sleep on an event count. Communication nodes go to the
// communication lane instead (comm_lane.hpp): started by the thread that readies them, completed
// by whichever executor picks up their end, never waited for in an executor.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/comm_lane.hpp"
#include "cpu/engine.hpp"
#include "cpu/ready_set.hpp"
#include "cpu/sync.hpp"

namespace hetgraph::detail::cpu {

struct EngineConfig {
  int executors = 1;
  int threads = 1;         // per executor
  int ring_capacity = 16;  // critical-path: nodes queued per executor at most
  double queue_us = 4.0;   // critical-path: estimated work queued per executor (one node always)
  double inline_below_us = 2.0;
  int profile_runs = 3;  // runs recorded before levels come from measured durations
  bool pin = true;
  // Idle executors spin this many pauses before sleeping: long enough to catch the next node
  // of a busy graph (a few microseconds of work), short enough not to burn a core between
  // runs. Replay on more virtual cores than real ones sets 0: spinning threads would take the
  // real cores from the ones whose (replayed) kernels end.
  int spin = 4000;
  // Spin by yielding the core, not pausing on it: where executors outnumber the cores, a thread
  // with work may be waiting for the core an idle one spins on (libgomp shortens its spin the
  // same way when oversubscribed).
  bool spin_yields = false;
  bool per_op_threads = false;    // critical-path with threads > 1: see the file comment
  std::vector<int> node_threads;  // per-op: each node's thread count, known (no hill climb)
};

class ParallelEngine : public Engine {
 public:
  ParallelEngine(const Program& prog, const EngineConfig& cfg);
  ~ParallelEngine() override;

  void run() override;
  void set_recording(bool on) override { trace_recording_ = on; }
  const std::vector<NodeEvent>& last_events() const override { return events_; }
  std::vector<std::string> lane_names() const override;
  int executors() const override { return cfg_.executors; }
  int threads_per_executor() const override { return cfg_.threads; }
  bool levels_profiled() const override { return profiled_; }
  int runs() const override { return runs_; }

  const EngineConfig& config() const { return cfg_; }
  /// Runs whose modelled makespan (max(critical path, work / executors)) is shorter run the
  /// calling thread (executor 0) where it is, unbound: binding it costs more than it saves.
  static constexpr double kBindCallerMinUs = 1000;
  /// Whether run() binds the calling thread to executor 0's core (pinning on, runs long enough).
  bool binds_caller() const { return bind_caller_; }
  /// Replaces node costs (microseconds): levels and inline decisions follow. Between runs only.
  /// `profiled`: the costs are measured ones (no profiling pass needed).
  void set_costs(std::vector<double> cost_us, bool profiled = false);
  const std::vector<double>& costs() const { return cost_; }
  std::span<const double> levels() const override { return levels_; }
  /// Per-op thread counts are on (and the teams have 2+ threads).
  bool per_op() const { return per_op_; }
  /// Each node's thread count (the team size unless per-op thread counts are on).
  const std::vector<int>& node_threads() const { return threads_; }
  /// Per-op thread counts are chosen (not on, or the hill climbs are over).
  bool climbed() const { return !climbing_; }
  std::vector<EngineReport::Cpu::OpThreads> op_threads() const override;

 protected:
  static constexpr std::uint32_t kNone = ReadySet::kNone;

  struct Worker {
    int id = 0;
    ExecCtx ctx;
    std::vector<int> pus;
    std::unique_ptr<std::byte, void (*)(void*)> scratch{nullptr, std::free};
    SpscRing<std::uint32_t> ring;       // critical-path: nodes the scheduler gave it
    SpscRing<std::uint32_t> triggered;  // critical-path: nodes it readied for the scheduler
    // Published by the worker (its only writer), read by the scheduler: what it has finished
    // of what it was given, and the estimated cost of the node it runs on its own (0: none).
    alignas(64) std::atomic<std::uint64_t> done{0};
    std::atomic<std::uint64_t> done_ns{0};
    std::atomic<std::uint64_t> own_ns{0};
    // Scheduler-owned: what it gave this worker (count, estimated nanoseconds).
    alignas(64) std::uint64_t assigned = 0, assigned_ns = 0;
    // Worker-local.
    alignas(64) std::uint64_t done_local = 0, done_ns_local = 0;
    std::int64_t unflushed = 0;          // finished nodes not yet taken off the run's count
    std::uint32_t next = kNone;          // a node it readied and runs next itself
    std::vector<std::uint32_t> stack;    // inline cascade
    std::vector<std::uint32_t> readied;  // critical-path: nodes the last completion readied
    // Per-op: a context and scratch per team thread, and the batch co-running now.
    std::vector<ExecCtx> team_ctx;
    std::vector<std::unique_ptr<std::byte, void (*)(void*)>> team_scratch;
    std::vector<std::uint32_t> batch;
    std::vector<NodeEvent> batch_events;
    EventCount wake;
    std::vector<NodeEvent> events;
    std::thread thread;
    std::thread::id team_pinned_for;  // executor 0: the caller thread whose team is pinned
    std::uint64_t pin_epoch = ~std::uint64_t{0};  // executors 1..N-1: PinPolicy::epoch() applied
    bool bound = false;                           // executors 1..N-1: their team is pinned
  };

  // Scheduling policy.
  virtual void on_ready(std::uint32_t v, Worker& w) = 0;             // a node to schedule
  virtual bool take_work(Worker& w, std::uint32_t& v) = 0;           // next node for w, if any
  virtual bool peek_work(Worker&, std::uint32_t&) { return false; }  // ... left in place
  /// Whether w has something to do. `before_sleep`: the last check before w sleeps, after
  /// sleeping(w, true): it must see any hand-over that did not see w sleeping.
  virtual bool has_work(const Worker& w, bool before_sleep) const = 0;
  virtual bool poll(Worker& w) = 0;        // idle hook; true when it produced work for w
  virtual void sleeping(Worker&, bool) {}  // w is about to sleep (true), or woke (false)
  /// After w completed a node (and its inline cascade); `given`: the node came from
  /// take_work (not w.next).
  virtual void after_node(Worker& w, std::uint32_t v, bool given) = 0;
  virtual void begin_run() = 0;
  /// The run is over (every node completed): wait until no executor is still inside the
  /// policy's scheduling code, so the caller may change what it reads (costs, priorities).
  virtual void end_run() {}
  virtual void kick() = 0;  // after the sources went through on_ready
  virtual EventCount& wake_of(Worker& w) = 0;

  /// Executor threads call the policy's virtuals: derived constructors start them last and
  /// derived destructors stop them first.
  void start_workers();
  void shutdown();
  /// Takes w's finished nodes off the run's count (wakes the caller when that ends the run).
  void flush(Worker& w);
  std::uint64_t cost_ns(std::uint32_t v) const { return cost_ns_[v]; }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<double> levels_;
  std::vector<double> priority_;        // quantised levels: the ready set's order
  std::uint64_t priority_version_ = 0;  // changes with priority_

 private:
  void worker_main(Worker& w);
  /// Binds the team threads of w's OpenMP team (not the calling thread) to w's cores, or lets
  /// them run anywhere again.
  void bind_team_threads(Worker& w, bool pin);
  /// Executors 1..N-1: their own thread and team pinned or not, as PinPolicy says now.
  void sync_binding(Worker& w);
  void work(Worker& w, bool caller);
  void execute(std::uint32_t v, Worker& w);
  /// Per-op: v and the single-thread nodes queued behind it as one batch; false when alone.
  bool gather(std::uint32_t v, Worker& w);
  void run_batch(Worker& w);
  void complete(std::uint32_t v, Worker& w);
  /// A ready communication node: onto the lane, or (the run failed) abandoned onto `stack`.
  void start_comm(std::uint32_t v, std::vector<std::uint32_t>& stack);
  void finish_comm(CommLane::Finished& f, Worker& w);
  /// The trace lane of the communication lane: after the executors and their team threads.
  int comm_lane_id() const;
  void fail(std::exception_ptr e);
  void update_profile();
  void setup_climbs();
  void update_climbs();
  void set_kind_threads(std::size_t climb, int threads);

  std::shared_ptr<const Plan> plan_;
  EngineConfig cfg_;
  std::vector<CpuKernel*> kernels_;
  std::vector<std::uint32_t> succ_begin_,
      succ_;  // successors, flattened (CSR): node lists stay in cache
  std::vector<std::int32_t> ndeps_;
  std::vector<std::uint32_t> sources_;
  std::vector<double> cost_;
  std::vector<std::uint64_t> cost_ns_;  // cost_ in whole nanoseconds, at least 1
  std::vector<char> tiny_;
  std::unique_ptr<std::atomic<std::int32_t>[]> pending_;
  alignas(64) std::atomic<std::int64_t> remaining_{0};
  alignas(64) std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;
  CommLane lane_;
  // Per-op thread counts.
  bool per_op_ = false;
  std::vector<int> threads_;  // per node
  struct Climb {
    OpKind op{};
    std::vector<std::uint32_t> nodes, large;    // every instance; the largest ones
    std::vector<std::pair<int, double>> curve;  // (threads, us per run of `large`)
    std::size_t step = 0;
    bool done = false;
  };
  std::vector<Climb> climbs_;
  std::vector<int> team_steps_;  // thread counts a climb tries: 1, 2, 4, ..., threads
  bool climbing_ = false;
  // The run after which level profiling starts: not the first, whose page faults and lazily
  // made primitives would be averaged into every node's cost.
  int profile_start_ = 1;
  // profiler
  int runs_ = 0;
  bool profiled_ = false;
  bool bind_caller_ = false;  // run() binds the calling thread to executor 0's core
  bool trace_recording_ = false;
  bool recording_ = false;
  std::vector<double> sum_us_;
  std::vector<NodeEvent> events_;
};

class CriticalPathEngine final : public ParallelEngine {
 public:
  CriticalPathEngine(const Program& prog, const EngineConfig& cfg);
  ~CriticalPathEngine() override { shutdown(); }
  std::string_view name() const override { return "critical-path"; }

 private:
  void on_ready(std::uint32_t v, Worker& w) override { w.readied.push_back(v); }
  bool take_work(Worker& w, std::uint32_t& v) override { return w.ring.pop(v); }
  bool peek_work(Worker& w, std::uint32_t& v) override { return w.ring.peek(v); }
  bool has_work(const Worker& w, bool before_sleep) const override;
  bool poll(Worker& w) override;
  void sleeping(Worker&, bool on) override {
    sleeping_.fetch_add(on ? 1 : -1, std::memory_order_seq_cst);
  }
  void after_node(Worker& w, std::uint32_t v, bool given) override;
  void begin_run() override;
  void end_run() override;
  void kick() override;
  EventCount& wake_of(Worker& w) override { return w.wake; }

  /// Keeps the best node w readied as its next one when nothing better is ready and w has
  /// nothing queued; the others go to w's triggered queue. True when some went there.
  bool dispatch_readied(Worker& w);
  /// Whether any executor handed over nodes no step has taken yet.
  bool handed_over(std::memory_order order) const;
  // `self`: the executor whose thread runs the scheduling step (it needs no wake-up).
  void request(Worker& self);
  void try_schedule(Worker& self);
  void step(Worker& self);

  ReadySet ready_;
  std::uint64_t ready_version_ = 0;  // the priority_version_ ready_ is ordered by
  TryLock lock_;
  std::uint64_t queue_ns_ = 0;
  std::uint64_t capacity_ = 1;
  // Per-op: for each executor, the assignment count of the last node of 2+ threads given to
  // it (it takes nothing else until done reaches it).
  std::vector<std::uint64_t> wide_seq_;
  alignas(64) std::atomic<std::int64_t> requests_{0};
  // Executors asleep: a hand-over wakes one through a scheduling step only then (idle
  // executors that spin find handed-over nodes themselves).
  alignas(64) std::atomic<std::int32_t> sleeping_{0};
  // The rank of the ready set's best node after the last step (kNone: empty): executors
  // compare what they ready with it without the lock. A stale value only costs priority.
  alignas(64) std::atomic<std::uint32_t> top_rank_{kNone};
};

class SharedQueueEngine final : public ParallelEngine {
 public:
  SharedQueueEngine(const Program& prog, const EngineConfig& cfg);
  ~SharedQueueEngine() override { shutdown(); }
  std::string_view name() const override { return "shared-queue"; }

 private:
  void on_ready(std::uint32_t v, Worker& w) override;
  bool take_work(Worker& w, std::uint32_t& v) override;
  bool has_work(const Worker&, bool) const override {
    return size_.load(std::memory_order_acquire) > 0;
  }
  bool poll(Worker&) override { return false; }
  void after_node(Worker&, std::uint32_t, bool) override {}
  void begin_run() override {}
  void kick() override {}
  EventCount& wake_of(Worker&) override { return wake_; }

  std::mutex mu_;
  std::vector<std::uint32_t> queue_;  // FIFO: [head_, end)
  std::size_t head_ = 0;
  alignas(64) std::atomic<std::int64_t> size_{0};
  EventCount wake_;
};

}  // namespace hetgraph::detail::cpu
