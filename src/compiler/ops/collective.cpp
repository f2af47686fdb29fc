// SPDX-License-Identifier: Apache-2.0
// Collectives across processes as graph ops: allreduce (sum or mean), broadcast, reduce to a root,
// allgather and reduce_scatter along axis 0. A Collective payload carries the communicator, the
// reduction and the root. Each rank's node sees its own input; the gradient rules follow from
// the total loss being the sum of every rank's loss:
//   allreduce(x)      -> allreduce of the gradient (same op: the mean's 1/size included)
//   broadcast(x, r)   -> reduce(g, r): rank r's x reaches every rank, so its gradient is the sum
//   reduce(x, r)      -> broadcast(g, r): only rank r's output depends on the inputs
//   allgather(x)      -> reduce_scatter(g): each rank's slice, summed over ranks
//   reduce_scatter(x) -> allgather(g)
// The public builders live here, next to the ops.
#include <algorithm>
#include <cmath>

#include "compiler/comm.hpp"
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"

namespace hetgraph {

namespace detail {

namespace {

Node collective(OpKind k, Node x, const distributed::Communicator& comm,
                distributed::ReduceOp op = distributed::ReduceOp::sum, int root = 0) {
  if (k == OpKind::Broadcast || k == OpKind::Reduce)
    check_root(*detail::comm_of(comm), root, std::string(op_name(k)));
  Attrs at;
  at.set(Collective{detail::comm_of(comm), op, root});
  return make_op(k, {x}, at);
}

Node collective_like(OpKind k, const Attrs& at, Node x) {
  return make_op(k, {x}, at);
}

const Collective& spec(const InferCtx& c) {
  return c.attrs.get<Collective>();
}

void check_float(const InferCtx& c) {
  if (c.in[0].dtype != DType::f32) {
    c.fail(std::string(op_name(c.op)) + " takes float tensors, got " +
           std::string(dtype_name(c.in[0].dtype)));
  }
}

TensorType infer_same(const InferCtx& c) {
  check_float(c);
  return c.in[0];
}

// Broadcast moves data only: int32 too (indices, labels).
TensorType infer_moved(const InferCtx& c) {
  return c.in[0];
}

// Allgather too (the indices of sparse gradients).
TensorType infer_allgather(const InferCtx& c) {
  const Shape& s = c.in[0].shape;
  if (s.rank() < 1) c.fail("allgather stacks along axis 0: it needs a tensor of rank >= 1");
  std::vector<std::int64_t> d(s.dims().begin(), s.dims().end());
  d[0] *= spec(c).comm->size();
  return {Shape(std::span<const std::int64_t>(d)), c.in[0].dtype};
}

TensorType infer_reduce_scatter(const InferCtx& c) {
  check_float(c);
  const Shape& s = c.in[0].shape;
  const int size = spec(c).comm->size();
  if (s.rank() < 1 || s[0] % size != 0) {
    c.fail("reduce_scatter splits axis 0 among " + std::to_string(size) +
           " ranks: its length must be a multiple of " + std::to_string(size));
  }
  std::vector<std::int64_t> d(s.dims().begin(), s.dims().end());
  d[0] /= size;
  return {Shape(std::span<const std::int64_t>(d)), DType::f32};
}

void grad_allreduce(const GradCtx& c) {
  c.add(c.in[0], collective_like(OpKind::Allreduce, c.attrs, c.grad));
}
void grad_broadcast(const GradCtx& c) {
  c.add(c.in[0], collective_like(OpKind::Reduce, c.attrs, c.grad));
}
void grad_reduce(const GradCtx& c) {
  c.add(c.in[0], collective_like(OpKind::Broadcast, c.attrs, c.grad));
}
void grad_allgather(const GradCtx& c) {
  c.add(c.in[0], collective_like(OpKind::ReduceScatter, c.attrs, c.grad));
}
void grad_reduce_scatter(const GradCtx& c) {
  c.add(c.in[0], collective_like(OpKind::Allgather, c.attrs, c.grad));
}

// Before profiling: a ring collective moves about 2 (size-1)/size of its payload through each
// rank's link, taken as ten times slower than memory, after about 20 us of latency per step of a
// log2(size) tree. Profiling replaces this with the measured time in flight.
Cost collective_cost(std::span<const TensorType> in, const TensorType& out, const Attrs& at, Cost) {
  const int size = at.get<Collective>().comm->size();
  const double payload = static_cast<double>(std::max(in[0].bytes(), out.bytes()));
  Cost c;
  if (size > 1) {
    c.bytes = 10.0 * 2.0 * (size - 1) / size * payload + 2e5 * std::ceil(std::log2(size));
  } else {
    c.bytes = payload;
  }
  return c;
}

OpDef collective_def(OpKind k, std::string_view name, InferFn infer, GradFn grad, bool inplace) {
  return {.kind = k,
          .name = name,
          .arity = 1,
          .inplace = inplace ? 0b1u : 0u,
          .infer = infer,
          .grad = grad,
          .cost = collective_cost,
          .communication = true};
}

}  // namespace

CollectiveKind collective_kind(OpKind op) {
  switch (op) {
    case OpKind::Allreduce:
      return CollectiveKind::allreduce;
    case OpKind::Broadcast:
      return CollectiveKind::broadcast;
    case OpKind::Reduce:
      return CollectiveKind::reduce;
    case OpKind::Allgather:
      return CollectiveKind::allgather;
    case OpKind::ReduceScatter:
      return CollectiveKind::reduce_scatter;
    default:
      throw InternalError(std::string(op_name(op)) + " is not a collective");
  }
}

void register_collective_ops(std::vector<OpDef>& t) {
  // In place where the collective's buffer holds the same elements as its input (MPI_IN_PLACE).
  t.push_back(collective_def(OpKind::Allreduce, "allreduce", infer_same, grad_allreduce, true));
  t.push_back(collective_def(OpKind::Broadcast, "broadcast", infer_moved, grad_broadcast, true));
  t.push_back(collective_def(OpKind::Reduce, "reduce", infer_same, grad_reduce, true));
  t.push_back(
      collective_def(OpKind::Allgather, "allgather", infer_allgather, grad_allgather, false));
  t.push_back(collective_def(OpKind::ReduceScatter, "reduce_scatter", infer_reduce_scatter,
                             grad_reduce_scatter, false));
}

}  // namespace detail

namespace distributed {

using detail::OpKind;

Node allreduce(Node x, const Communicator& comm, ReduceOp op) {
  return detail::collective(OpKind::Allreduce, x, comm, op);
}
Node broadcast(Node x, const Communicator& comm, int root) {
  return detail::collective(OpKind::Broadcast, x, comm, ReduceOp::sum, root);
}
Node reduce(Node x, const Communicator& comm, int root) {
  return detail::collective(OpKind::Reduce, x, comm, ReduceOp::sum, root);
}
Node allgather(Node x, const Communicator& comm) {
  return detail::collective(OpKind::Allgather, x, comm);
}
Node reduce_scatter(Node x, const Communicator& comm) {
  return detail::collective(OpKind::ReduceScatter, x, comm);
}

}  // namespace distributed
}  // namespace hetgraph
