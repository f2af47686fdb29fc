// SPDX-License-Identifier: Apache-2.0
// The platform interface. A Backend turns a compiler Plan into an Executable; Executable holds
// the platform-independent half of a compiled graph (feeds, reads and writes by node or name,
// async runs, variable initialisation) and asks the platform for memory access and execution.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "common/trace.hpp"
#include "compiler/plan.hpp"
#include "hetgraph/compiler.hpp"

// Platform, CompiledGraph and RunHandle hold these opaque in the public headers (so that no
// internal type shows there); the library calls them Backend, Executable and RunState.
namespace hetgraph::detail {
using Backend = Platform::Impl;
using Executable = CompiledGraph::Impl;
using RunState = RunHandle::Impl;
namespace hetero {
class HeteroExecutable;
}
namespace cpu {
class ReplayModel;
}
class ProfileCollector;

/// Where a run's per-node events go (Executable::add_node_events): a Chrome trace, a profile.
/// The platforms hand every sink the same events, so a profile reads what traces show.
class NodeSink {
 public:
  virtual ~NodeSink() = default;
  /// The run's lanes (executors, queues), named; sinks that keep no lanes ignore them.
  virtual void set_lanes(const std::vector<std::string>& names) { (void)names; }
  /// One node's execution in run `run`; `exe` holds the node in its plan (a heterogeneous
  /// graph's part holds its own nodes).
  virtual void add(const Executable& exe, std::uint32_t node, int lane, std::int64_t start_ns,
                   std::int64_t end_ns, std::int64_t run) = 0;
};
/// How traces and profiles name a node: its name, else its label (nodes passes made).
std::string event_name(const PlanNode& n);

/// The CPU platform with `options`, whose kernels are replaced by waits of `replay`'s modelled
/// durations when it is set (hetgraph-bench --replay-cores; src/cpu/replay.hpp); nullptr: the
/// plain Platform::cpu(options). Internal, not a CpuOptions field: replay is a measuring tool.
/// Defined in src/cpu/cpu_platform.cpp.
Platform replay_cpu_platform(const CpuOptions& options,
                             std::shared_ptr<const cpu::ReplayModel> replay);

/// An int32 index input whose values come from a fed input (through views): checked on the
/// host before a run, against the dim OpDef::index names.
struct IndexCheck {
  std::uint32_t node = 0;     // the op reading the indices
  std::uint32_t indices = 0;  // its index input (plan index)
  std::uint32_t fed = 0;      // the input node holding them
  std::int64_t bound = 0;     // values must lie in [0, bound), or [-bound, bound) with wraps
  bool wraps = false;         // negative values count from the back (ONNX Gather)
};
/// The FeedError message of a bad index: names the node, the value, where it is, the bound.
std::string index_error(const Plan& p, std::uint32_t node, std::uint32_t indices,
                        const std::string& value, std::int64_t position, std::int64_t bound,
                        bool wraps = false);

}  // namespace hetgraph::detail

/// The outcome of an asynchronous run, shared with its RunHandle (detail::RunState).
struct hetgraph::RunHandle::Impl {
  detail::Executable* exe = nullptr;  // while the run is in flight
  bool done = false;
  std::exception_ptr error;
};

/// A platform: what it can run (Capabilities::unsupported, asked by the fusion passes and by
/// compile() for every node before anything is allocated) and how it instantiates a plan.
class hetgraph::Platform::Impl : public detail::Capabilities {
 public:
  virtual std::string name() const = 0;
  /// Platform::description: its device in words.
  virtual std::string description() const = 0;
  /// What the memory planner may assume about execution order on this platform.
  virtual detail::ReuseMode reuse_mode() const = 0;
  /// Whether it lays a plan's buffers out in one arena at their offsets (packed by the
  /// planner) rather than allocating each buffer.
  virtual bool packs_arena() const { return false; }
  /// Threads one kernel gets (the largest team the engine may use); 0 where kernels do not
  /// run on host threads. Parallel-op fusion pays only above 1 (the automatic CPU engine says
  /// 1: one plan serves all its candidates, and groups slow down its one-thread teams).
  virtual int kernel_threads() const { return 0; }
  /// The layout its convolutions pass values between them in (assign_layouts); nchw: values
  /// stay plain.
  virtual detail::ActivationLayout conv_layout() const { return detail::ActivationLayout::nchw; }
  /// The layout its Winograd convolutions (3x3, stride 1) take, with channels in whole blocks
  /// of it; nchw: it has none, and CompileOptions::winograd_convs is ignored (the layout alone
  /// would only move the direct kernels to another one). The compiler decides where Winograd
  /// pays (assign_layouts); which layout and which channel counts is the platform's say.
  virtual detail::ActivationLayout winograd_layout() const {
    return detail::ActivationLayout::nchw;
  }
  /// Layouts besides conv_layout() that the layout search may compile the graph with
  /// (CompileOptions::experimental.layout_search); empty: no search on this platform.
  virtual std::vector<detail::ActivationLayout> layout_alternatives() const { return {}; }
  /// Which of `plans` to instantiate: the same graph planned once per layout (the first with
  /// conv_layout()), none writing variables. `seconds` gets each plan's time per run where the
  /// platform timed them (empty when it knew its choice, from the tuning cache).
  virtual std::size_t pick_plan(std::span<const std::shared_ptr<const detail::Plan>> plans,
                                std::vector<double>& seconds) {
    (void)plans;
    seconds.clear();
    return 0;
  }
  /// `store`: where the plan's variables live (CompileOptions::variables), or null for the
  /// executable's own memory.
  virtual std::unique_ptr<detail::Executable> instantiate(
      std::shared_ptr<const detail::Plan> plan,
      const std::shared_ptr<VariableStore::Impl>& store) = 0;
  /// The devices it runs on (Platform::devices).
  virtual std::vector<Device> devices() const = 0;
  /// Heterogeneous platforms place nodes on their devices (compile_plan's placement passes).
  virtual const detail::Placer* placer() const { return nullptr; }

  /// The way in from the public handle (a nested class sees its private members); UsageError
  /// on a moved-from Platform.
  static Impl& of(const Platform& p);
};

class hetgraph::CompiledGraph::Impl {
  // The heterogeneous executable runs platforms' executables as its parts, through the
  // protected interface below (memory access, execute, traces).
  friend class detail::hetero::HeteroExecutable;

 public:
  explicit Impl(std::shared_ptr<const detail::Plan> plan);
  virtual ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  /// The way in from the public handle (a nested class sees its private members); UsageError
  /// on a moved-from compiled graph.
  static Impl& of(const CompiledGraph& cg);

  const detail::Plan& plan() const { return *plan_; }
  CompileReport& report() { return report_; }
  const CompileReport& report() const { return report_; }

  // The run protocol; CompiledGraph documents the contract.
  void run(std::span<const FeedItem> feeds);
  std::shared_ptr<detail::RunState> run_async(std::span<const FeedItem> feeds);
  /// Finishes the latest run and rethrows its error once.
  void wait();
  /// Finishes the run of a handle (its thread only) and rethrows its error.
  void wait(detail::RunState& s);
  /// Whether the run of a handle has finished, without waiting (RunHandle::done, its thread
  /// only): a run that finished is finished here (its error stays with its handle).
  bool poll(detail::RunState& s);
  /// Before the executable goes: waits for a call another thread is making on it (later
  /// calls are refused, UsageError), then finishes a run in flight (its error stays with its
  /// handle). Platforms' destructors call it while they can still run.
  void shutdown();

  void read(std::uint32_t node, void* dst, std::size_t count, DType dtype, std::string_view what);
  void write(std::uint32_t node, const void* src, std::size_t count, DType dtype,
             std::string_view what);
  void* mapped_input(std::string_view name, DType dtype, std::size_t& count);
  virtual std::string kernel_name(std::uint32_t node) const = 0;
  /// The engine report, with the calling thread's claim on the graph (see Use).
  EngineReport report_engine();
  /// Bytes copied from feeds into the graph so far (mapped feeds copy nothing).
  std::uint64_t feed_bytes_copied() const { return feed_bytes_copied_; }
  /// Runs and graph statistics; platforms add their lanes and their own fields.
  virtual EngineReport engine_report() const;
  void start_trace(const std::string& path);
  void stop_trace();
  void trace_event(const std::string& lane, const std::string& name, std::int64_t start_ns,
                   std::int64_t end_ns);
  void start_profile();
  Profile profile();
  Profile stop_profile();

  /// Per-node execution records of the last run while recording (tests check schedules).
  struct Event {
    std::uint32_t node;  // plan index
    int lane;            // executor or queue
    std::int64_t start_ns, end_ns;
  };
  void record_events(bool on) { set_recording(on || collecting()); }
  virtual std::vector<Event> last_run_events() const { return {}; }
  /// Per plan node, the scheduler's critical-path level (tests check what profiling does);
  /// empty where the platform does not schedule by level.
  virtual std::vector<double> node_levels() const { return {}; }

 protected:
  /// Host pointer to a node's memory that stays valid for the executable's life (CPU: the
  /// arena; OpenCL: a mapped pinned buffer). Only asked for inputs.
  virtual void* host_pointer(std::uint32_t node) = 0;
  /// Copies into / out of a node's memory; no run is in flight.
  virtual void copy_in(std::uint32_t node, const void* src, std::size_t bytes) = 0;
  /// Copies into part of a node's memory, from byte `offset` on (variable initialisation
  /// writes in chunks); no run is in flight.
  virtual void copy_in_at(std::uint32_t node, std::size_t offset, const void* src,
                          std::size_t bytes) = 0;
  /// Whether a node's memory reads as zeros before anything is written (then zero-initialised
  /// variables are not written at all, and cost no memory until used).
  virtual bool memory_starts_zeroed() const { return false; }
  virtual void copy_out(std::uint32_t node, void* dst, std::size_t bytes) = 0;
  /// Runs the graph once in the calling thread; rethrows kernel errors. A run that throws
  /// must leave variables unchanged (the commit_writes pass orders the plan so that nothing
  /// can fail once a variable is written; platforms check fed indices first).
  virtual void execute() = 0;
  /// Asynchronous run. Default: a background thread calls execute().
  virtual void launch_async();
  /// Completes the run launch_async started; returns its error instead of throwing it.
  virtual std::exception_ptr finish_async();
  /// Whether finish_async would return without waiting; may advance the run (a platform
  /// whose run waits for the host between phases). Default: the runner thread is done.
  virtual bool async_finished();
  /// Before a read or write of `node` while an async run is in flight: waits until the run
  /// no longer writes the node. Default: finishes the run (finish_inflight).
  virtual void settle_for_access(std::uint32_t node);
  /// Completes the in-flight async run (if any) and records its outcome; never throws the
  /// run's error (that goes to the run's wait()).
  void finish_inflight();

  /// Writes constants and initial variable values; platforms call it once memory exists.
  void initialize_state();
  /// Per node, whether its value was in a VariableStore before this graph was compiled:
  /// initialize_state leaves it as it is (empty: no store).
  std::vector<char> preset_;
  /// Traces and profiles: the platform records whether per-node events are wanted, and after
  /// each run hands the run's events to a sink.
  virtual void set_recording(bool on) = 0;
  virtual void add_trace_events(detail::NodeSink& w, std::int64_t run) = 0;
  /// Adds `events` (after the platform set its lanes), as nodes of this executable's plan.
  void add_node_events(detail::NodeSink& w, const std::vector<Event>& events,
                       std::int64_t run) const;
  /// execute() plus trace and profile collection: what run() calls (wait() collects after
  /// async runs).
  void execute_traced();

 private:
  /// A call's claim on the graph: the first call of a thread claims it (another thread's
  /// call then throws UsageError); nested calls of the claiming thread, and its async run in
  /// flight, keep the claim until the last of them ends.
  class Use {
   public:
    Use(Impl& e, std::string_view what);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    Impl& e_;
  };
  void claim(std::string_view what);
  void unclaim();

  /// Checks every feed (names, types, sizes, and the values of fed index inputs against
  /// their bounds: OpDef::index), then copies them in: a bad feed changes nothing.
  void feed(std::span<const FeedItem> feeds);
  void check_indices(const detail::IndexCheck& c, const std::int32_t* ids) const;
  void begin_run();
  void record_outcome(std::exception_ptr e);
  void access_check(std::uint32_t node, DType dtype, std::size_t count, std::string_view what,
                    bool writing) const;
  void value_check(std::uint32_t node, std::string_view what) const;
  /// Whether runs' node events are wanted (a trace or a profile is being recorded).
  bool collecting() const { return trace_ != nullptr || profile_ != nullptr; }
  /// Hands the run's node events to the trace and (a run that succeeded) the profile.
  void collect_events(std::int64_t run, bool succeeded);

  std::shared_ptr<const detail::Plan> plan_;
  CompileReport report_;
  // The claim: the claiming thread and its count of open calls and runs (that thread only).
  std::atomic<std::thread::id> user_{};
  int holds_ = 0;
  // Calls under way (Use), of any thread, and whether the executable is going: shutdown()
  // waits until another thread's call ends and refuses new ones.
  std::atomic<int> calls_{0};
  std::atomic<bool> closing_{false};
  std::shared_ptr<detail::RunState> inflight_;  // the async run in flight
  std::shared_ptr<detail::RunState> latest_;    // the latest async run, until wait() reports it
  // Validity of computed values: the last run failed (its error), or written since it started.
  bool last_failed_ = false;
  bool ran_ = false;  // a run succeeded at least once
  std::string last_error_;
  std::uint64_t generation_ = 1;              // runs started, plus one
  std::vector<std::uint64_t> written_since_;  // per node: generation of its last write

  // default async runner
  std::thread runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool job_ = false, done_ = false, quit_ = false;
  std::exception_ptr error_;
  std::uint64_t feed_bytes_copied_ = 0;
  std::unique_ptr<detail::TraceWriter> trace_;
  std::unique_ptr<detail::ProfileCollector> profile_;
  std::int64_t runs_ = 0;
  std::vector<detail::IndexCheck> fed_checks_;
};

namespace hetgraph::detail {

/// The internals behind the public handles, for the library and its tests.
inline Backend& backend_of(const Platform& p) {
  return Backend::of(p);
}
inline Executable& executable_of(const CompiledGraph& cg) {
  return Executable::of(cg);
}

/// Deterministic initial values of a variable, produced in order a chunk at a time: the
/// values do not depend on the chunk sizes, so a variable of any size is written through a
/// small buffer.
///
///   InitialValues gen(var.init);
///   gen.next(chunk);   // the first chunk.size() values, then the next ones ...
class InitialValues {
 public:
  explicit InitialValues(const Initializer& init) : init_(init), state_(init.seed) {}
  /// GraphError naming the variable (`label`) where its values moved into a graph compiled
  /// with compile(std::move(graph)).
  static void check(const Initializer& init, const std::string& label);
  /// Writes the next out.size() values.
  void next(std::span<float> out);

 private:
  Initializer init_;
  std::uint64_t state_;
  bool has_pending_ = false;  // normal values come in pairs; the second waits here
  float pending_ = 0;
};

}  // namespace hetgraph::detail
