// SPDX-License-Identifier: Apache-2.0
// The communication lane of the CPU engines. A communication node (OpDef::communication, an
// AsyncKernel) is not given to an executor: the thread that readies it starts it (its kernel
// posts the collective to the communicator and returns), and the communicator's own thread
// reports its end here. Engines pick finished nodes up and complete them like any other node,
// so executors keep computing while collectives are in flight. In traces and profiles the lane
// is one more track: a node's span is its time in flight, which the profiler turns into its
// cost, so the critical-path levels count communication too.
//
//   CommLane lane(prog);
//   if (lane.is_comm(v)) lane.start(v);          // instead of running it
//   CommLane::Finished f;
//   while (lane.take(f)) { /* complete f.node (rethrow f.error at the end of the run) */ }
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cpu/engine.hpp"
#include "cpu/sync.hpp"

namespace hetgraph::detail::cpu {

class CommLane final : public CommDone {
 public:
  explicit CommLane(const Program& prog);

  /// Whether the program has any communication node.
  bool empty() const { return count_ == 0; }
  bool is_comm(std::uint32_t v) const { return async_[v] != nullptr; }

  /// Before a run: whether to keep start and end times.
  void begin_run(bool recording) { recording_ = recording; }
  /// Starts node v: returns at once; its end arrives through take() or wait().
  void start(std::uint32_t v);
  /// The run failed before node v could start: the kernel tells the other processes. The engine
  /// completes the node itself (it has no work).
  void abandon(std::uint32_t v, const std::string& why);

  struct Finished {
    std::uint32_t node = 0;
    std::exception_ptr error;
    std::int64_t start_ns = 0, end_ns = 0;  // steady clock; 0 when not recording
  };
  bool has_finished() const { return ready_.load(std::memory_order_acquire) > 0; }
  /// A finished node, if any (any thread).
  bool take(Finished& f);
  /// Blocks until a node has finished, and takes it.
  Finished wait();
  /// Called after every end, from the thread reporting it (engines wake an idle executor).
  void set_notify(std::function<void()> f) { notify_ = std::move(f); }

  // CommDone: from the communicator's thread (or the starting thread).
  void comm_done(std::uint64_t token, std::exception_ptr error) override;

 private:
  std::vector<AsyncKernel*> async_;     // per plan node; null for other nodes
  std::vector<std::int64_t> start_ns_;  // per plan node, this run
  std::size_t count_ = 0;
  bool recording_ = false;
  std::function<void()> notify_;
  std::mutex mu_;
  std::vector<Finished> finished_;  // guarded by mu_
  std::atomic<std::int64_t> ready_{0};
  EventCount wake_;
};

/// Why a run failed, from its first error: the text the other processes are told.
std::string error_text(const std::exception_ptr& e);

}  // namespace hetgraph::detail::cpu
