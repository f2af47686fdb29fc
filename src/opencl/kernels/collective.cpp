// SPDX-License-Identifier: Apache-2.0
// Collectives across processes on OpenCL, through mapped host memory: the node maps its input
// and output buffers (after its dependencies, without blocking the host), a callback on the
// map's event posts the collective on the mapped pointers to the communicator, whose end
// completes a user event, and the unmaps wait for that event. Later nodes wait for the unmaps,
// independent ones run meanwhile on an out-of-order queue.
//
// The user event always completes normally (PoCL mishandles failed user events, see
// executable.hpp): a collective's error is kept here and rethrown by after_run().
#include <mutex>

#include "compiler/comm.hpp"
#include "hetgraph/error.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

class CollectiveOp final : public ClOp, private CommDone {
 public:
  explicit CollectiveOp(const OpArgs& a)
      : ctx_(a.device.context()),
        in_(a.in[0]),
        out_(a.out),
        in_bytes_(a.in_types[0].bytes()),
        out_bytes_(a.out_type.bytes()) {
    const Collective& c = a.node.attrs.get<Collective>();
    comm_ = c.comm;
    call_ = {.kind = collective_kind(a.node.op),
             .op = c.op,
             .root = c.root,
             .dtype = a.in_types[0].dtype,
             .count = static_cast<std::size_t>(a.out_shape().numel())};
    channel_ = comm_->open_channel(std::string(op_name(a.node.op)) + " node " + a.node.label);
  }

  Event enqueue(cl_command_queue q, std::span<const cl_event> wait, Event* first) override {
    {
      std::lock_guard lk(mu_);
      error_ = nullptr;
    }
    const bool in_place = in_ == out_;
    Event map_in, map_out;
    cl_int err = CL_SUCCESS;
    void* host_in =
        clEnqueueMapBuffer(q, in_, CL_FALSE, in_place ? CL_MAP_READ | CL_MAP_WRITE : CL_MAP_READ, 0,
                           in_bytes_, static_cast<cl_uint>(wait.size()),
                           wait.empty() ? nullptr : wait.data(), map_in.out(), &err);
    check(err, "clEnqueueMapBuffer", __FILE__, __LINE__, channel_->label());
    void* host_out = host_in;
    cl_event maps_done = map_in.get();
    if (!in_place) {
      const cl_event after = map_in.get();
      host_out = clEnqueueMapBuffer(q, out_, CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION, 0,
                                    out_bytes_, 1, &after, map_out.out(), &err);
      check(err, "clEnqueueMapBuffer", __FILE__, __LINE__, channel_->label());
      maps_done = map_out.get();
    }
    call_.in = host_in;
    call_.out = host_out;
    collective_done_ = Event(HG_CL_CREATE(clCreateUserEvent, ctx_));
    // The callback runs on the driver's thread once both maps are done: post from there.
    HG_CL(clSetEventCallback(maps_done, CL_COMPLETE, &CollectiveOp::on_mapped, this));
    const cl_event done = collective_done_.get();
    Event unmap_in, unmap_out;
    HG_CL(clEnqueueUnmapMemObject(q, in_, host_in, 1, &done, unmap_in.out()));
    if (in_place) return unmap_in;
    const cl_event after = unmap_in.get();
    HG_CL(clEnqueueUnmapMemObject(q, out_, host_out, 1, &after, unmap_out.out()));
    if (first != nullptr) *first = map_in;
    return unmap_out;
  }

  void after_run() override {
    std::lock_guard lk(mu_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static void CL_CALLBACK on_mapped(cl_event, cl_int status, void* self) {
    auto* op = static_cast<CollectiveOp*>(self);
    if (status < 0) {
      const std::string why = op->channel_->label() +
                              ": mapping its buffers failed on the device: " + error_name(status);
      op->comm_->abort(why);  // the other processes must not wait for this rank
      op->comm_done(0, std::make_exception_ptr(PlatformError(why)));
      return;
    }
    op->comm_->post(*op->channel_, op->call_, *op, 0);
  }

  // From the communicator's thread. Once the user event completes the run may end and the
  // executable go: nothing may touch `this` then, and the event is kept alive by a reference of
  // our own until clSetUserEventStatus has returned.
  void comm_done(std::uint64_t, std::exception_ptr error) override {
    {
      std::lock_guard lk(mu_);
      if (error && !error_) error_ = std::move(error);
    }
    const Event done = collective_done_;
    clSetUserEventStatus(done.get(), CL_COMPLETE);
  }

  cl_context ctx_;
  cl_mem in_, out_;
  std::size_t in_bytes_, out_bytes_;
  std::shared_ptr<Comm> comm_;
  std::unique_ptr<CommChannel> channel_;
  CollectiveCall call_;
  Event collective_done_;
  std::mutex mu_;
  std::exception_ptr error_;
};

std::unique_ptr<ClOp> make_collective(const OpArgs& a) {
  return std::make_unique<CollectiveOp>(a);
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
  for (OpKind op : {OpKind::Allreduce, OpKind::Broadcast, OpKind::Reduce, OpKind::Allgather,
                    OpKind::ReduceScatter}) {
    r.add(op, {"cl_mapped_collective", nullptr, make_collective});
  }
}

}  // namespace hetgraph::detail::cl
