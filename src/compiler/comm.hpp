// SPDX-License-Identifier: Apache-2.0
// What the compiler and collective kernels see of a communicator: post a collective on a
// channel, be told when it is done. In the core layer (docs/ARCHITECTURE.md) because collective
// ops' shape rules ask a communicator's size; implementations live above it: SelfComm (one
// process, src/distributed/communicator.cpp) and the MPI communicator of libhetgraph_mpi
// (mpi_comm.cpp), which makes every MPI call from one communication thread.
//
//   auto ch = comm->open_channel("allreduce 'g' (#12)");  // collective: all ranks, same order
//   comm->post(*ch, {.kind = CollectiveKind::allreduce, .in = x, .out = y, .count = n}, sink, 7);
//   // ... later, on the communicator's thread: sink.comm_done(7, nullptr)
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "hetgraph/distributed.hpp"
#include "hetgraph/error.hpp"
#include "hetgraph/tensor.hpp"

namespace hetgraph::detail {

enum class CollectiveKind : std::uint8_t {
  allreduce,
  broadcast,
  reduce,
  allgather,
  reduce_scatter
};
std::string_view collective_name(CollectiveKind k);
enum class OpKind : std::uint8_t;
/// The collective a collective op performs (compiler/ops/collective.cpp).
CollectiveKind collective_kind(OpKind op);

/// One collective over memory that stays untouched by anyone else until it completes. Elements
/// are 4 bytes: float, or int32 for the collectives that only move data (broadcast, allgather).
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::allreduce;
  distributed::ReduceOp op = distributed::ReduceOp::sum;
  int root = 0;
  DType dtype = DType::f32;
  const void* in = nullptr;  // allreduce, broadcast, reduce: may equal out (in place)
  void* out = nullptr;
  /// Elements of `out`: allgather's out holds size * (its in), reduce_scatter's in holds
  /// size * (its out).
  std::size_t count = 0;
};

/// Where a posted collective reports that it finished: exactly once per post, from any thread
/// (the communicator's own, or the posting thread when it completes at once).
class CommDone {
 public:
  virtual void comm_done(std::uint64_t token, std::exception_ptr error) = 0;

 protected:
  ~CommDone() = default;
};

/// A CommDone to block on: wait() returns once comm_done was called, rethrowing its error.
class CommWaiter final : public CommDone {
 public:
  void comm_done(std::uint64_t token, std::exception_ptr error) override;
  void wait();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// Collectives on one channel are matched across ranks in the order they are posted; channels
/// are independent of each other. Graphs open one per collective node, so nodes that become
/// ready in different orders on different ranks never match the wrong partner.
class CommChannel {
 public:
  virtual ~CommChannel() = default;
  const std::string& label() const { return label_; }

 protected:
  explicit CommChannel(std::string label) : label_(std::move(label)) {}

 private:
  std::string label_;  // the node it serves, for errors
};

}  // namespace hetgraph::detail

// The public Communicator's implementation, opaque in its header (so that no internal type
// shows there); the library calls it detail::Comm.
class hetgraph::distributed::Communicator::Impl {
 public:
  virtual ~Impl() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_size() const { return 1; }  // ranks on this machine
  virtual std::string name() const = 0;
  /// A new channel. Collective: every rank opens its channels in the same order (graphs do it
  /// at compile time, in plan order). Blocks until every rank has opened it.
  virtual std::unique_ptr<detail::CommChannel> open_channel(std::string label) = 0;
  /// Starts a collective and returns at once; `done` hears of it exactly once. Errors (a failed
  /// rank, a timeout) arrive there as CommunicationError naming the channel's label.
  virtual void post(detail::CommChannel& ch, const detail::CollectiveCall& call,
                    detail::CommDone& done, std::uint64_t token) = 0;
  /// This rank gives up: tell the others, fail every later collective. Idempotent.
  virtual void abort(const std::string& why) = 0;
  /// The channel of the blocking host-side collectives (Communicator::allreduce, ...).
  virtual detail::CommChannel& host_channel() = 0;

  /// Posts on `ch` and waits; rethrows the collective's error.
  void run_blocking(detail::CommChannel& ch, const detail::CollectiveCall& call);

  /// The way in from the public handle (a nested class sees its private members).
  static const std::shared_ptr<Impl>& of(const Communicator& c) { return c.impl_; }
};

namespace hetgraph::detail {

using Comm = distributed::Communicator::Impl;

/// The communicator behind a public handle (nullptr for none).
inline const std::shared_ptr<Comm>& comm_of(const distributed::Communicator& c) {
  return Comm::of(c);
}

/// Whether a collective of this kind moves data only (no reduction): it may carry int32.
inline bool moves_only(CollectiveKind k) {
  return k == CollectiveKind::broadcast || k == CollectiveKind::allgather;
}

/// Checks a collective's root against the communicator; the error names `what`. Inline: the op
/// table's shape rules use it, and the ONNX import fuzz target links those without the runtime.
inline void check_root(const Comm& c, int root, const std::string& what) {
  if (root < 0 || root >= c.size()) {
    throw GraphError(what + ": root " + std::to_string(root) + " is not a rank of " + c.name() +
                     " (ranks 0.." + std::to_string(c.size() - 1) + ")");
  }
}

}  // namespace hetgraph::detail
