// SPDX-License-Identifier: Apache-2.0
// Collectives across processes on the CPU: the node's kernel posts the collective to its
// communicator on the node's own channel (opened when the kernel is made, at compile time, in
// plan order on every rank) and the engine's communication lane hears when it is done. The
// reference implementation waits for it in the thread that starts it instead.
#include <memory>

#include "cpu/kernel.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {

struct Bound {
  std::shared_ptr<Comm> comm;
  std::unique_ptr<CommChannel> channel;
  CollectiveCall call;
};

Bound bind(const KernelArgs& a) {
  const Collective& c = a.node.attrs.get<Collective>();
  Bound b;
  b.comm = c.comm;
  b.call = {.kind = collective_kind(a.node.op),
            .op = c.op,
            .root = c.root,
            .dtype = a.in_types[0].dtype,
            .in = a.in[0],
            .out = a.out,
            .count = static_cast<std::size_t>(a.out_shape().numel())};
  b.channel = c.comm->open_channel(std::string(op_name(a.node.op)) + " node " + a.node.label);
  return b;
}

const char* reject_non_float(const KernelArgs& a) {
  return a.in_types[0].dtype == DType::f32 || moves_only(collective_kind(a.node.op))
             ? nullptr
             : "reductions take float tensors";
}

// `blocking`: start() waits for the collective (the reference: no overlap, nothing in flight).
class CollectiveKernel final : public AsyncKernel {
 public:
  CollectiveKernel(Bound b, bool blocking) : b_(std::move(b)), blocking_(blocking) {}
  void start(CommDone& done, std::uint64_t token) override {
    if (!blocking_) {
      b_.comm->post(*b_.channel, b_.call, done, token);
      return;
    }
    std::exception_ptr error;
    try {
      b_.comm->run_blocking(*b_.channel, b_.call);
    } catch (...) {
      error = std::current_exception();
    }
    done.comm_done(token, error);
  }
  void abandon(const std::string& why) override { b_.comm->abort(why); }

 private:
  Bound b_;
  bool blocking_;
};

std::unique_ptr<CpuKernel> make_async(const KernelArgs& a) {
  return std::make_unique<CollectiveKernel>(bind(a), false);
}

std::unique_ptr<CpuKernel> make_blocking_ref(const KernelArgs& a) {
  return std::make_unique<CollectiveKernel>(bind(a), true);
}

}  // namespace

void register_collective_kernels(KernelRegistry& r) {
  for (OpKind op : {OpKind::Allreduce, OpKind::Broadcast, OpKind::Reduce, OpKind::Allgather,
                    OpKind::ReduceScatter}) {
    r.add(op, {"comm_lane", reject_non_float, make_async});
    r.add(op, {"blocking_reference", reject_non_float, make_blocking_ref, true});
  }
}

}  // namespace hetgraph::detail::cpu
