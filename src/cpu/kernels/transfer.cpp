// SPDX-License-Identifier: Apache-2.0
// The CPU side of op transfer (heterogeneous platforms, src/compiler/placement.hpp): a send
// hands its input to the runtime's endpoint, a recv waits for its value there, the commit
// gate commits the other devices. The endpoint does the work (src/hetero/); this kernel is its
// own reference: there is nothing plainer.
#include "common/transfer.hpp"

#include "cpu/kernel.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {

std::unique_ptr<CpuKernel> make_transfer(const KernelArgs& k) {
  const TransferLink& link = k.node.attrs.get<TransferLink>();
  std::shared_ptr<TransferEndpoint> e = link.endpoint;
  if (!e) {
    throw InternalError("transfer node " + k.node.label +
                        " has no endpoint (only a heterogeneous executable runs transfers)");
  }
  switch (link.role) {
    case TransferLink::Role::send: {
      const void* src = k.in[0];
      return make_kernel([e, src](const ExecCtx&) { e->host_send(src); });
    }
    case TransferLink::Role::recv: {
      void* dst = k.out;
      return make_kernel([e, dst](const ExecCtx&) { e->host_recv(dst); });
    }
    case TransferLink::Role::commit:
      break;
  }
  return make_kernel([e](const ExecCtx&) { e->commit(); });
}

}  // namespace

void register_transfer_kernels(KernelRegistry& r) {
  r.add(OpKind::Transfer, {"host_transfer", nullptr, make_transfer, true});
}

}  // namespace hetgraph::detail::cpu
