// SPDX-License-Identifier: Apache-2.0
// Data-parallel training across processes and machines: communicators and collective ops.
//
//   // mpirun -np 4 ./train        (link hetgraph::mpi, the MPI component, besides hetgraph)
//   namespace dist = hetgraph::distributed;
//   dist::Communicator comm = dist::world();          // MPI_COMM_WORLD; MPI starts on first use
//   hetgraph::Graph g;
//   auto x = g.input("x");                            // this rank's share of the global batch
//   auto W = g.variable("W", {784, 10}), b = g.variable("b", {10});
//   auto y = g.input("y", hetgraph::DType::i32);
//   auto loss = reduce_mean(cross_entropy(softmax(matmul(x, W) + b), y));  // local rows' mean
//   auto step = hetgraph::sgd(loss, {W, b}, 0.1f, 0.0f, hetgraph::DataParallel{comm});
//   auto cg = hetgraph::GraphCompiler().compile(g, shapes, {loss, step});
//   dist::broadcast_variables(cg, comm);              // every rank starts from rank 0's values
//   for (int s = 0; s < steps; ++s) cg.run(feeds);    // gradients are averaged across ranks
//
// Collectives are graph ops (allreduce, broadcast, reduce, allgather, reduce_scatter), each with
// its gradient, compiled and run like any other. On the CPU they run on the engine's
// communication lane: started without blocking when their inputs are ready, completed by the
// communicator's own thread, so they overlap the rest of the graph. On OpenCL they work on
// mapped host copies of the device buffers. Every rank must build and compile the same graphs
// in the same order (as with any MPI program): each collective node gets its own channel (a
// duplicated MPI communicator) when it is compiled, so nodes may complete in any order.
//
// Failure: a rank whose run fails tells the others (they raise CommunicationError naming it); a
// rank that dies or stops responding is found by heartbeats while a collective waits for it;
// a collective that does not complete within its deadline fails. After any of these the
// communicator stays failed: collectives cannot resynchronise once one rank skipped one.
//
// Communicator::self() is a one-process communicator that needs no MPI: the same program runs
// single-process. MPI itself is only in libhetgraph_mpi (world()); this header includes no MPI.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "hetgraph/graph.hpp"

namespace hetgraph {

class CompiledGraph;

namespace distributed {

enum class ReduceOp : std::uint8_t {
  sum,
  mean,  // the sum divided by the number of ranks
};

/// A group of processes that run the same graphs, and the collectives among them.
class Communicator {
 public:
  /// The communicator's implementation: opaque, the library's own (src/compiler/comm.hpp).
  class Impl;

  /// self(): one process.
  Communicator();
  /// The library's communicators (world(), self()) are made with this.
  explicit Communicator(std::shared_ptr<Impl> impl);

  /// A communicator of this process alone: collectives return their input. Needs no MPI.
  static Communicator self();

  int rank() const;
  int size() const;
  /// Ranks of this communicator on this machine, this one included (they share its cores).
  int local_size() const;
  /// "MPI_COMM_WORLD (rank 1 of 4)", "self".
  std::string name() const;

  /// Blocking collectives on host memory, for values outside graphs (test accuracy, counts).
  /// Every rank must call them in the same order.
  void allreduce(std::span<float> data, ReduceOp op = ReduceOp::sum) const;
  void broadcast(std::span<float> data, int root = 0) const;
  void barrier() const;
  /// Tells every other rank that this one gives up (their waiting collectives raise
  /// CommunicationError naming this rank and `why`), and fails this communicator's later
  /// collectives. For errors outside graph runs (a run that fails does this by itself).
  void abort(std::string_view why) const;

  friend bool operator==(const Communicator& a, const Communicator& b) {
    return a.impl_ == b.impl_;
  }

 private:
  std::shared_ptr<Impl> impl_;
};

/// How world() detects failures. Times in seconds.
struct WorldOptions {
  /// Each rank tells every other it is alive this often (a tiny message).
  double heartbeat_interval_s = 0.25;
  /// A collective waiting for a rank not heard from for this long fails, naming the rank.
  double heartbeat_timeout_s = 10.0;
  /// A collective not complete after this long fails (ranks alive but out of step). 0: none.
  double collective_timeout_s = 600.0;
};

/// MPI_COMM_WORLD, through Open MPI. Defined in libhetgraph_mpi (CMake target hetgraph::mpi).
/// MPI is initialised on the first call, in the communication thread that makes every MPI call
/// of the process (MPI_THREAD_FUNNELED), and finalised at exit. Environment overrides of the
/// options: HETGRAPH_MPI_HEARTBEAT_TIMEOUT, HETGRAPH_MPI_COLLECTIVE_TIMEOUT (seconds). Later
/// calls return the same communicator (their options are ignored). Throws CommunicationError
/// when MPI cannot start.
Communicator world(const WorldOptions& options = {});

// ---- collective ops ----------------------------------------------------------------------------
// Each rank feeds its own value; shapes must agree across ranks. Gradients: of allreduce the
// allreduce of the gradient (same op), of broadcast a reduce to the root, of reduce a
// broadcast, of allgather a reduce_scatter, of reduce_scatter an allgather.

/// The sum (or mean) over ranks of x, on every rank.
Node allreduce(Node x, const Communicator& comm, ReduceOp op = ReduceOp::sum);
/// Rank root's x, on every rank. Float or int32.
Node broadcast(Node x, const Communicator& comm, int root = 0);
/// The sum over ranks of x on rank root; zeros on the others.
Node reduce(Node x, const Communicator& comm, int root = 0);
/// Every rank's x [n, ...] stacked along axis 0 in rank order: [size * n, ...]. Float or int32.
Node allgather(Node x, const Communicator& comm);
/// The sum over ranks of x [size * n, ...], of which rank r keeps rows [r * n, (r + 1) * n).
Node reduce_scatter(Node x, const Communicator& comm);

/// A value every rank of a data-parallel job must share: a count or a text.
struct Agreed {
  std::string name;  // "epochs", "batches per epoch", "optimizer"
  std::string text;  // the value as the message shows it (every byte is compared)
  Agreed(std::string n, std::int64_t v) : name(std::move(n)), text(std::to_string(v)) {}
  Agreed(std::string n, std::string v) : name(std::move(n)), text(std::move(v)) {}
};

/// Checks up front that every rank passes the same values (one small allgather), so that ranks
/// out of step fail at once rather than at a collective's deadline. A mismatch throws
/// CommunicationError on every rank, naming each value that differs and every rank's:
///   "ranks disagree on epochs: '3' on rank 0; '2' on rank 1". The communicator stays usable.
/// Every rank calls it with the same names in the same order (at most 32 values).
void check_agreement(const Communicator& comm, std::span<const Agreed> values);

/// Overwrites every variable of `cg` with rank root's value (one fused broadcast, variables in
/// plan order), so that every replica starts from the same state. Every rank calls it. It first
/// checks that the ranks compiled the same graph (variables' names, shapes and types, inputs'
/// shapes, ops): a mismatch is a CommunicationError on every rank naming what differs.
void broadcast_variables(CompiledGraph& cg, const Communicator& comm, int root = 0);

}  // namespace distributed
}  // namespace hetgraph
