// SPDX-License-Identifier: Apache-2.0
// A graph compiled for an OpenCL device.
//
// Memory: one cl_mem per buffer of the compiler's memory plan (views alias their source's).
// Inputs live in CL_MEM_ALLOC_HOST_PTR buffers that stay mapped for the caller between runs
// (mapped_input() hands out that pointer); a run unmaps them first and maps them again once
// their last reader is done. Fetched outputs are CL_MEM_ALLOC_HOST_PTR buffers too.
//
// A run enqueues every node in plan order on the device's queue, each with a wait list of the
// events of its dependencies, so an out-of-order queue may overlap independent nodes. A run
// returns at once (run_async) or after waiting for the final events (run, wait); a read of a
// node waits only for the event of the node that last wrote it.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/executable.hpp"
#include "common/variable_store.hpp"
#include "opencl/cl.hpp"
#include "opencl/device.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

class OpenClExecutable final : public Executable {
 public:
  /// `store`: where the variables live (CompileOptions::variables), or null.
  OpenClExecutable(std::shared_ptr<const Plan> plan, std::shared_ptr<Device> dev, bool in_order,
                   const std::shared_ptr<VariableStore::Impl>& store = nullptr);
  ~OpenClExecutable() override;

  std::string kernel_name(std::uint32_t node) const override;
  /// "opencl out-of-order queue" or "opencl in-order queue"; lanes are the queues.
  EngineReport engine_report() const override;
  Device& device() const { return *dev_; }
  /// One per queue work goes to: the device's queue, then CLBlast's (trace tracks, lanes).
  std::vector<std::string> lane_names() const;
  bool out_of_order() const { return dev_->queue(false) == q_ && dev_->out_of_order_supported(); }
  /// How many inputs are handed to the caller as mapped device memory (the rest go through a
  /// host staging buffer, when the driver moves a buffer's mapping between maps).
  std::size_t zero_copy_inputs() const;

  /// Test seam: a hook consulted while runs are launched and finished. Production
  /// executables have none; tests install one to inject device faults (PoCL cannot fail a
  /// queued command reliably: its propagation of a failed user event asserts or hangs).
  class RunHook {
   public:
    virtual ~RunHook() = default;
    /// Before `node` is enqueued: may throw as a failed clEnqueue* would, or add events to
    /// its wait list.
    virtual void before_enqueue(cl_context, std::uint32_t /*node*/, std::vector<cl_event>&) {}
    /// The execution status the run reports for `node`'s event, given the driver's.
    virtual cl_int event_status(std::uint32_t /*node*/, cl_int driver) { return driver; }
    /// A launch failed or the executable goes away: complete anything the hook holds back.
    virtual void release() {}
  };
  void set_run_hook(std::unique_ptr<RunHook> hook) { hook_ = std::move(hook); }
  /// Test seam: inputs of executables created after this call use host staging buffers even
  /// where mapping is stable (to test that path on drivers that never need it).
  static void force_staged_inputs(bool on);

  // ---- one run in steps, for the heterogeneous executable (src/hetero/), whose commit point
  // spans devices: start(), then check_commit() on every device, then enqueue_commit() on
  // every device, then complete(); or abandon() once anything failed anywhere.
  /// Enqueues everything before the commit point (the whole run without one).
  void start() { launch(); }
  /// Waits for the work before the commit point and checks it (failures, computed labels).
  /// Throws the failure after abandoning the run.
  void check_commit();
  /// Enqueues the writers of variables (nothing without a commit point).
  void enqueue_commit();
  /// Waits for the end of the run; throws a failure after the commit point.
  void complete() { finish(); }
  /// Ends a run that another device failed: releases what others hold back (the abort
  /// hook), waits for what was enqueued and restores the input mappings. Never throws.
  void abandon();
  /// Called whenever this executable gives up a run, before it waits for its commands: events
  /// another device was to complete (user events) must complete now or the wait never ends.
  void set_abort_hook(std::function<void()> hook) { abort_hook_ = std::move(hook); }

 protected:
  void* host_pointer(std::uint32_t node) override;
  void copy_in(std::uint32_t node, const void* src, std::size_t bytes) override;
  void copy_out(std::uint32_t node, void* dst, std::size_t bytes) override;
  /// Variable initialisation's chunks (defined here, beside copy_in's declaration, to keep
  /// opencl_platform.cpp as it is): inputs are host memory, everything else a buffer write.
  void copy_in_at(std::uint32_t node, std::size_t offset, const void* src,
                  std::size_t bytes) override {
    if (in_flight_) settle_all();
    const std::uint32_t b = base_of(node);
    if (input_of_[b] >= 0) {
      std::memcpy(static_cast<char*>(inputs_[static_cast<std::size_t>(input_of_[b])].host) + offset,
                  src, bytes);
      return;
    }
    write_buffer(q_, mem_[node], offset, bytes, src);
  }
  void execute() override;
  void launch_async() override;
  std::exception_ptr finish_async() override;
  bool async_finished() override;
  void settle_for_access(std::uint32_t node) override;
  void set_recording(bool on) override { recording_ = on; }
  std::vector<Executable::Event> last_run_events() const override { return last_events_; }
  void add_trace_events(NodeSink& w, std::int64_t run) override;

 private:
  struct InputBuf {
    std::uint32_t node = 0;
    cl_mem mem = nullptr;   // the buffer kernels read
    Mem staging;            // host-side copy when not zero-copy
    void* host = nullptr;   // what the caller sees (mapped pointer)
    std::size_t bytes = 0;  // mapped size (the whole planned buffer)
    bool zero_copy = true;
    bool mapped = true;                  // zero-copy: mapped for the host right now
    std::vector<std::uint32_t> readers;  // work nodes that read it (through views too)
    cl::Event remap;                     // this run's map after the last reader
  };
  struct LabelCheck {
    std::uint32_t node = 0;              // the cross-entropy (or embedding) node
    std::uint32_t labels = 0;            // its int32 labels (indices) input (plan index)
    std::int64_t rows = 0, classes = 0;  // embedding: indices and table rows
    bool wraps = false;                  // values lie in [-classes, classes) (gather)
    int slot = 0;
    bool on_host = false;    // labels are an input: checked before the run, on the host
    bool embedding = false;  // indices of an embedding lookup (or of its gradient)
  };
  /// The FeedError message for value `v` at `row` of a check's labels.
  std::string label_error(const LabelCheck& c, const std::string& value, std::int64_t row) const;

  std::uint32_t base_of(std::uint32_t node) const;  // through views
  // The constructor's steps, in this order.
  void bind_store();
  void allocate_buffers();
  void map_inputs();
  void plan_label_checks();
  void make_ops();
  void order_work();
  void plan_waits();
  void find_finals();
  void mark_committed();
  void find_input_readers();
  void find_writers();
  void launch();
  void finish();
  /// Waits for everything this run enqueued; errors stay for finish() to report. True when
  /// the final events all completed normally.
  bool settle_all();
  /// Waits for every event of the run one by one (after a failure or a partial launch).
  void settle_each();
  /// Maps inputs whose map was lost (a failed run, a failed enqueue).
  void restore_maps();
  void enqueue_work(std::size_t from, std::size_t to);
  /// "node ... failed on ...": the first of work_[0, upto) whose command failed, or "".
  std::string first_failure(std::size_t upto) const;
  void check_device_labels();
  /// Waits for everything before the commit point, checks it, then enqueues the writers.
  void commit();
  void enqueue_input_unmaps();
  void enqueue_input_remaps();

  std::shared_ptr<Device> dev_;
  cl_command_queue q_ = nullptr;
  std::vector<Mem> bufs_;      // one per planned buffer (a variable's: its block in the store)
  std::vector<void*> stored_;  // per planned buffer: the store's cl_mem for it, or null
  std::shared_ptr<VariableStore::Impl> store_;
  std::vector<cl_mem> mem_;  // per plan node; nullptr without storage
  std::vector<InputBuf> inputs_;
  std::vector<std::int32_t> input_of_;      // plan node -> index into inputs_, or -1
  std::vector<std::unique_ptr<ClOp>> ops_;  // per plan node; null without device work
  std::vector<std::string_view> names_;
  std::vector<std::uint32_t> work_;                 // nodes with device work, plan order
  std::vector<std::vector<std::uint32_t>> waits_;   // per node: whose events it waits for
  std::vector<std::vector<std::uint32_t>> writer_;  // per node: events a host access waits for
  std::vector<std::uint32_t> finals_;               // work nodes no other work node waits for
  std::vector<LabelCheck> labels_;
  std::vector<char> checked_;   // per node: has a label check (waits for the status reset)
  Mem status_;                  // one int per label check: smallest bad row, INT_MAX when none
  bool device_checks_ = false;  // some labels are computed: read status_ after each run
  cl::Event status_reset_;
  std::vector<cl::Event> ev_;     // this run's event per node
  std::vector<cl::Event> first_;  // the first command's, for nodes of several (when recording)
  bool recording_ = false;
  std::int64_t run_t0_ns_ = 0;                  // host steady clock when this run's launch began
  std::int64_t clock_offset_ns_ = 0;            // host steady clock minus device clock, this run
  std::vector<Executable::Event> last_events_;  // the last recorded run, host clock
  /// Reads the command times of the run just finished into last_events_.
  void collect_events();
  bool in_flight_ = false;
  // A commit async_finished() made that failed: the run's error, for finish_async.
  std::exception_ptr async_error_;
  int runs_ = 0;
  std::unique_ptr<RunHook> hook_;
  std::function<void()> abort_hook_;
  /// The test hook's and the abort hook's release, before a failed run waits for its events.
  void release_waiters() {
    if (hook_) hook_->release();
    if (abort_hook_) abort_hook_();
  }
  // The commit point (see commit_writes): writers of variables are work_[phase1_, end).
  std::int64_t commit_ = -1;
  std::size_t phase1_ = 0;
  std::vector<std::uint32_t> finals1_;  // work before the commit no other such work waits for
  std::vector<char> committed_by_;      // per node: written after the commit point
  bool committed_ = true;               // this run's writers are enqueued
};

}  // namespace hetgraph::detail::cl
