// SPDX-License-Identifier: Apache-2.0
// The OpenCL side of op transfer (heterogeneous platforms): a send copies its input to host
// memory, a recv copies its value in once the sender delivered it; both are enqueued commands
// with events like any node's, and the endpoint (src/hetero/) links them across devices.
#include "common/transfer.hpp"

#include "hetgraph/error.hpp"
#include "opencl/ops.hpp"
#include "opencl/transfer.hpp"

namespace hetgraph::detail::cl {

namespace {

class TransferOp final : public ClOp {
 public:
  TransferOp(std::shared_ptr<TransferEndpoint> keep, ClTransferEndpoint* e, TransferLink::Role role,
             cl_mem mem, std::int32_t device)
      : keep_(std::move(keep)), e_(e), role_(role), mem_(mem), device_(device) {}
  Event enqueue(cl_command_queue q, std::span<const cl_event> wait, Event*) override {
    return role_ == TransferLink::Role::send ? e_->enqueue_send(q, mem_, wait)
                                             : e_->enqueue_recv(q, mem_, device_, wait);
  }

 private:
  std::shared_ptr<TransferEndpoint> keep_;
  ClTransferEndpoint* e_;
  TransferLink::Role role_;
  cl_mem mem_;
  std::int32_t device_;
};

const char* reject_transfer(const OpArgs& a) {
  return a.node.attrs.get<TransferLink>().role == TransferLink::Role::commit
             ? "the commit gate runs on the host"
             : nullptr;
}

std::unique_ptr<ClOp> make_transfer(const OpArgs& a) {
  const TransferLink& link = a.node.attrs.get<TransferLink>();
  auto* e = dynamic_cast<ClTransferEndpoint*>(link.endpoint.get());
  if (e == nullptr) {
    throw InternalError("transfer node " + a.node.label +
                        " has no OpenCL endpoint (only a heterogeneous executable runs transfers)");
  }
  const bool send = link.role == TransferLink::Role::send;
  return std::make_unique<TransferOp>(link.endpoint, e, link.role, send ? a.in[0] : a.out, link.to);
}

}  // namespace

void register_transfer_ops(OpRegistry& r) {
  r.add(OpKind::Transfer, {"host_transfer", reject_transfer, make_transfer});
}

}  // namespace hetgraph::detail::cl
