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

namespace hetgraph::detail {

class Executable;

/// A platform: what it can run (Capabilities::unsupported, asked by the fusion passes and by
/// compile() for every node before anything is allocated) and how it instantiates a plan.
class Backend : public Capabilities {
 public:
  virtual std::string name() const = 0;
  /// What the memory planner may assume about execution order on this platform.
  virtual ReuseMode reuse_mode() const = 0;
  virtual std::unique_ptr<Executable> instantiate(std::shared_ptr<const Plan> plan) = 0;
};

class Executable {
 public:
  explicit Executable(std::shared_ptr<const Plan> plan);
  virtual ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  const Plan& plan() const { return *plan_; }
  CompileReport& report() { return report_; }

  void run(std::span<const FeedItem> feeds);
  void run_async(std::span<const FeedItem> feeds);
  void wait();

  void read(std::uint32_t node, void* dst, std::size_t count, DType dtype, std::string_view what);
  void write(std::uint32_t node, const void* src, std::size_t count, DType dtype,
             std::string_view what);
  void* mapped_input(std::string_view name, DType dtype, std::size_t& count);
  virtual std::string kernel_name(std::uint32_t node) const = 0;
  /// Bytes copied from feeds into the graph so far (mapped feeds copy nothing).
  std::uint64_t feed_bytes_copied() const { return feed_bytes_copied_; }
  /// Runs and graph statistics; platforms add their lanes and their own fields.
  virtual EngineReport engine_report() const;
  void start_trace(const std::string& path);
  void stop_trace();

  /// Per-node execution records of the last run while recording (tests check schedules).
  struct Event {
    std::uint32_t node;  // plan index
    int lane;            // executor or queue
    std::int64_t start_ns, end_ns;
  };
  void record_events(bool on) { set_recording(on || trace_ != nullptr); }
  virtual std::vector<Event> last_run_events() const { return {}; }

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
  /// Runs the graph once in the calling thread; rethrows kernel errors.
  virtual void execute() = 0;
  /// Asynchronous run. Default: a background thread calls execute().
  virtual void launch_async();
  virtual void finish_async();
  /// Called before a read or write while an async run may be in flight. Default: finish it.
  virtual void settle_for_access(std::uint32_t node);

  /// Writes constants and initial variable values; platforms call it once memory exists.
  void initialize_state();
  /// Tracing: the platform records whether per-node events are wanted, and after each run
  /// adds the run's events to the writer.
  virtual void set_recording(bool on) = 0;
  virtual void add_trace_events(TraceWriter& w, std::int64_t run) = 0;
  /// Adds `events` (after the platform set its lanes): named nodes, op kinds, bytes.
  void add_node_events(TraceWriter& w, const std::vector<Event>& events, std::int64_t run) const;
  /// execute() plus trace collection: what run() calls (wait() collects after async runs).
  void execute_traced();

 private:
  void feed(std::span<const FeedItem> feeds);
  void begin_run(const char* what);
  void access_check(std::uint32_t node, DType dtype, std::size_t count, std::string_view what,
                    bool writing) const;

  std::shared_ptr<const Plan> plan_;
  CompileReport report_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> async_pending_{false};
  std::atomic<std::thread::id> async_owner_{};

  // default async runner
  std::thread runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool job_ = false, done_ = false, quit_ = false;
  std::exception_ptr error_;
  std::uint64_t feed_bytes_copied_ = 0;
  std::unique_ptr<TraceWriter> trace_;
  std::int64_t runs_ = 0;
};

/// Deterministic initial values of a variable, produced in order a chunk at a time: the
/// values do not depend on the chunk sizes, so a variable of any size is written through a
/// small buffer.
///
///   InitialValues gen(var.init);
///   gen.next(chunk);   // the first chunk.size() values, then the next ones ...
class InitialValues {
 public:
  explicit InitialValues(const Initializer& init) : init_(init), state_(init.seed) {}
  /// Writes the next out.size() values.
  void next(std::span<float> out);

 private:
  Initializer init_;
  std::uint64_t state_;
  bool has_pending_ = false;  // normal values come in pairs; the second waits here
  float pending_ = 0;
};

}  // namespace hetgraph::detail
