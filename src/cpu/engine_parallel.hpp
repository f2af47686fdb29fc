// Parallel CPU engines: N executors, each a team of T threads pinned to its own cores.
//
// Executor 0 is the thread that calls run(); executors 1..N-1 own threads created with the
// engine. Every node has a dependency counter; the thread that finishes a node decrements its
// successors' counters, runs successors cheaper than the inline threshold at once (and those
// nodes' successors in turn), and hands the others to the scheduling policy:
//  - CriticalPathEngine (Graphi): ready nodes go to the finishing executor's own triggered
//    queue; a centralized scheduler moves them into a max-heap by level (longest cost to a
//    sink) and pushes the top node into an idle executor's lock-free SPSC ring, finding idle
//    executors in a bitmap with count-trailing-zeros. The scheduler is a role, not a thread:
//    the calling thread runs it, and when the caller is busy inside a node an idle executor
//    takes the same lock and runs the same step, so on few cores no core is kept for it and
//    no executor waits on a busy caller.
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
#include "cpu/ready_heap.hpp"
#include "cpu/sync.hpp"

namespace hetgraph::detail::cpu {

struct EngineConfig {
  int executors = 1;
  int threads = 1;        // per executor
  int ring_capacity = 1;  // critical-path: nodes queued per executor
  double inline_below_us = 2.0;
  int profile_runs = 3;  // runs recorded before levels come from measured durations
  bool pin = true;
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
  /// Replaces node costs (microseconds): levels and inline decisions follow. Between runs only.
  /// `profiled`: the costs are measured ones (no profiling pass needed).
  void set_costs(std::vector<double> cost_us, bool profiled = false);
  const std::vector<double>& costs() const { return cost_; }
  std::span<const double> levels() const override { return levels_; }

 protected:
  struct Worker {
    int id = 0;
    ExecCtx ctx;
    std::vector<int> pus;
    std::unique_ptr<std::byte, void (*)(void*)> scratch{nullptr, std::free};
    SpscRing<std::uint32_t> ring;       // critical-path: nodes the scheduler gave it
    SpscRing<std::uint32_t> triggered;  // critical-path: nodes it made ready
    alignas(64) std::atomic<std::uint64_t> completed{0};
    std::uint64_t assigned = 0;  // scheduler-owned
    EventCount wake;
    std::vector<std::uint32_t> stack;  // inline cascade
    std::vector<NodeEvent> events;
    std::thread thread;
    std::thread::id team_pinned_for;  // executor 0: the caller thread whose team is pinned
  };

  // Scheduling policy.
  virtual void on_ready(std::uint32_t v, Worker& w) = 0;    // a node to schedule
  virtual bool take_work(Worker& w, std::uint32_t& v) = 0;  // next node for w, if any
  virtual bool has_work(const Worker& w) const = 0;
  virtual bool poll(Worker& w) = 0;  // idle hook; true when it produced work for w
  virtual void after_node(Worker& w) = 0;
  virtual void after_comm(Worker& w) = 0;  // w completed a communication node
  virtual void begin_run() = 0;
  virtual void kick() = 0;  // after the sources went through on_ready
  virtual EventCount& wake_of(Worker& w) = 0;

  /// Executor threads call the policy's virtuals: derived constructors start them last and
  /// derived destructors stop them first.
  void start_workers();
  void shutdown();

  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<double> levels_;
  std::vector<double> priority_;  // quantised levels: the heap's key

 private:
  void worker_main(Worker& w);
  void pin_team(Worker& w);
  void work(Worker& w, bool caller);
  void execute(std::uint32_t v, Worker& w);
  void complete(std::uint32_t v, Worker& w);
  /// A ready communication node: onto the lane, or (the run failed) abandoned onto `stack`.
  void start_comm(std::uint32_t v, std::vector<std::uint32_t>& stack);
  void finish_comm(CommLane::Finished& f, Worker& w);
  void fail(std::exception_ptr e);
  void update_profile();

  std::shared_ptr<const Plan> plan_;
  EngineConfig cfg_;
  std::vector<CpuKernel*> kernels_;
  std::vector<std::uint32_t> succ_begin_,
      succ_;  // successors, flattened (CSR): node lists stay in cache
  std::vector<std::int32_t> ndeps_;
  std::vector<std::uint32_t> sources_;
  std::vector<double> cost_;
  std::vector<char> tiny_;
  std::unique_ptr<std::atomic<std::int32_t>[]> pending_;
  alignas(64) std::atomic<std::int64_t> remaining_{0};
  alignas(64) std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;
  CommLane lane_;
  // profiler
  int runs_ = 0;
  bool profiled_ = false;
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
  void on_ready(std::uint32_t v, Worker& w) override;
  bool take_work(Worker& w, std::uint32_t& v) override { return w.ring.pop(v); }
  bool has_work(const Worker& w) const override;
  bool poll(Worker& w) override;
  void after_node(Worker& w) override;
  void after_comm(Worker& w) override { request(w); }
  void begin_run() override;
  void kick() override { request(*workers_[0]); }
  EventCount& wake_of(Worker& w) override { return w.wake; }

  // `self`: the executor whose thread runs the scheduling step (it needs no wake-up).
  void request(Worker& self);
  void try_schedule(Worker& self);
  void step(Worker& self);

  ReadyHeap heap_;
  TryLock lock_;
  alignas(64) std::atomic<std::int64_t> requests_{0};
};

class SharedQueueEngine final : public ParallelEngine {
 public:
  SharedQueueEngine(const Program& prog, const EngineConfig& cfg);
  ~SharedQueueEngine() override { shutdown(); }
  std::string_view name() const override { return "shared-queue"; }

 private:
  void on_ready(std::uint32_t v, Worker& w) override;
  bool take_work(Worker& w, std::uint32_t& v) override;
  bool has_work(const Worker&) const override { return size_.load(std::memory_order_acquire) > 0; }
  bool poll(Worker&) override { return false; }
  void after_node(Worker&) override {}
  void after_comm(Worker&) override {}
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
