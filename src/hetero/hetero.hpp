// SPDX-License-Identifier: Apache-2.0
// The heterogeneous platform: one plan across the CPU and OpenCL devices.
//
// DESIGN (see also src/compiler/placement.hpp for the compile-time half)
//
// Compile time. The whole graph is one plan. place_devices gives every node a device (pins,
// the capability query, HEFT over the cost model; a node that writes a variable, an assign or
// an optimizer update, runs where the variable lives, and an optimizer's state lives there
// too, since one kernel writes them all); fusion then only fuses nodes that share a
// device; insert_transfers puts a send after each value read on another device and a recv
// before its readers on each such device (explicit plan nodes of op transfer); split_devices
// cuts the plan into one self-contained part per device, and each part gets the passes a
// single-device plan gets: assign elision, its commit point, its memory plan in its device's
// reuse mode. The CPU part also gets a commit gate before its commit point.
//
// Instantiation. Each part is instantiated by its member platform, unchanged: the CPU part by
// the CPU platform (its engine, arena, kernels), each OpenCL part by the OpenCL platform (its
// queue, buffers, mapped inputs). Transfer nodes are ordinary nodes there, whose kernels call
// the endpoints below: a Crossing per value that crosses, and the commit gate.
//
// A crossing moves a value once to each reading device through pinned host memory (an OpenCL
// CL_MEM_ALLOC_HOST_PTR buffer, mapped for the executable's life):
//   CPU -> device    the CPU send kernel copies the value into the staging buffer and sets
//                    each receiving device's user event; the device's recv is a
//                    clEnqueueWriteBuffer from the staging buffer that waits on that event.
//   device -> CPU    the device's send is a clEnqueueReadBuffer into the staging buffer whose
//                    completion callback raises a host flag; the CPU recv kernel sleeps on the
//                    flag (only if it gets there first) and copies the value in.
//   device -> device the sender's read-back callback sets the receiver's user event.
// No thread waits per edge: senders never wait, OpenCL waits are wait lists, and a CPU recv
// only waits where its part would otherwise run its next kernel. A CPU recv does block its
// thread, so split_devices makes it wait for every host send the device may need first: those
// it depends on, and those an earlier command of the device waits for (a device may run its
// commands in order; PoCL's GEMM queue does). Otherwise the thread it blocks could be the one
// that would send, and the run hangs.
//
// A run. The coordinator (execute(), in the caller's thread or the async runner) arms the
// crossings (fresh user events, flags down), starts every OpenCL part (everything before its
// commit point is enqueued), then runs the CPU part in the same thread. The CPU part's commit
// gate runs once the CPU's work before its commit point is done: it checks every OpenCL part's
// work before its commit point (failures, computed labels) and only then enqueues their
// writers of variables and returns, so the CPU's writers run too. Without a CPU part or without
// CPU writers the coordinator commits after the CPU part. Any failure anywhere before that
// point: the crossings are released (events completed, flags raised as failed) so nothing
// waits forever, every part abandons its run, and the error reaches run() with every
// variable as it was. Parts run in their own order, which is the schedule's (plan order), so a
// device never waits for a value that its own later work would send.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/executable.hpp"
#include "compiler/placement.hpp"

namespace hetgraph::detail::cl {
class OpenClExecutable;
}

namespace hetgraph::detail::hetero {

class Crossing;
class CommitGate;
class CostTable;

/// A member of a heterogeneous platform as its executable uses it.
struct Member {
  Platform platform;
  Backend* backend = nullptr;
  Device device;
  std::string name;  // "cpu", "opencl:0:1 (pthread-...)"
};

class HeteroExecutable final : public Executable {
 public:
  HeteroExecutable(std::shared_ptr<const Plan> plan, const std::vector<Member>& members,
                   std::shared_ptr<CostTable> costs, int profile_runs);
  ~HeteroExecutable() override;

  std::string kernel_name(std::uint32_t node) const override;
  EngineReport engine_report() const override;
  std::vector<Event> last_run_events() const override;

  /// Tests: the executable of device d's part (null when d got no node), and its plan.
  Executable* part(std::size_t d) const { return parts_[d].exe.get(); }
  /// The commit: checks every OpenCL part's work before its commit point, then enqueues their
  /// writers. The CPU part's commit gate calls it (or execute(), without one).
  void commit_devices();

 protected:
  void* host_pointer(std::uint32_t node) override;
  void copy_in(std::uint32_t node, const void* src, std::size_t bytes) override;
  void copy_in_at(std::uint32_t node, std::size_t offset, const void* src,
                  std::size_t bytes) override;
  void copy_out(std::uint32_t node, void* dst, std::size_t bytes) override;
  void execute() override;
  void set_recording(bool on) override;
  void add_trace_events(NodeSink& w, std::int64_t run) override;

 private:
  struct Part {
    std::shared_ptr<Plan> plan;
    std::unique_ptr<Executable> exe;
    cl::OpenClExecutable* cl = nullptr;
    std::vector<std::int64_t> global;  // part index -> plan index (-1: the part's own)
    std::string name;
  };
  Part& home(std::uint32_t node);
  const Part& home(std::uint32_t node) const;
  std::uint32_t local(std::uint32_t node) const;
  /// Completes everything the crossings still hold back (a failed run): user events set,
  /// host flags raised as failed.
  void release_all();
  void wait_callbacks();
  void set_parts_recording(bool on);
  void record_profile();
  std::vector<std::string> lane_names() const;

  std::vector<Member> members_;
  std::shared_ptr<CostTable> costs_;
  int profile_runs_ = 0, profiled_ = 0, runs_done_ = 0;
  // Crossings outlive the parts whose kernels hold them.
  std::vector<std::shared_ptr<Crossing>> crossings_;
  std::shared_ptr<CommitGate> gate_;
  std::atomic<int> callbacks_{0};               // event callbacks not yet returned
  std::vector<Part> parts_;                     // per device
  int host_ = -1;                               // the CPU part's device
  std::vector<cl::OpenClExecutable*> started_;  // this run's started OpenCL parts
  bool committed_ = false;
  bool tracing_ = false;
  std::vector<std::string> signature_;  // per plan node, for the cost table
  friend class Crossing;
};

/// Per-op times measured by the compiled graphs of one heterogeneous platform: (device,
/// cost_signature) -> mean microseconds. Shared by the platform and its executables.
class CostTable {
 public:
  void add(const std::string& device, const std::string& signature, double us);
  std::optional<double> find(const std::string& device, const std::string& signature) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::pair<double, int>> table_;
};

}  // namespace hetgraph::detail::hetero
