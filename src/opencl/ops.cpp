// SPDX-License-Identifier: Apache-2.0
// The OpenCL op table and the launch helpers every family uses.
#include "opencl/ops.hpp"

#include "hetgraph/error.hpp"

namespace hetgraph::detail::cl {

const OpRegistry& op_registry() {
  static const OpRegistry registry = [] {
    OpRegistry r("OpenCL");
    register_elementwise_ops(r);
    register_reduce_ops(r);
    register_nn_ops(r);
    register_movement_ops(r);
    register_matmul_ops(r);
    register_conv_ops(r);
    register_embedding_ops(r);
    register_optimizer_ops(r);
    register_collective_ops(r);
    register_transfer_ops(r);
    return r;
  }();
  return registry;
}

std::size_t group_size(const Device& dev, cl_kernel k, std::size_t cap) {
  std::size_t kmax = 0;
  HG_CL(clGetKernelWorkGroupInfo(k, dev.id(), CL_KERNEL_WORK_GROUP_SIZE, sizeof(kmax), &kmax,
                                 nullptr));
  return std::max<std::size_t>(1, std::min({cap, kmax, dev.max_work_group()}));
}

std::size_t pow2_group(const Device& dev, cl_kernel k, std::size_t want, std::size_t cap) {
  const std::size_t lim = std::min(group_size(dev, k, cap), std::max<std::size_t>(want, 1));
  std::size_t p = 1;
  while (p * 2 <= lim) p *= 2;
  return p;
}

Launch launch_1d(const Device& dev, Kernel k) {
  const std::size_t g = group_size(dev, k.get());
  return launch_groups(dev, std::move(k), g);
}

Launch launch_groups(const Device& dev, Kernel k, std::size_t local) {
  Launch l;
  l.kernel = std::move(k);
  l.dims = 1;
  l.local = {local, 1};
  l.global = {dev.grid_groups() * local, 1};
  return l;
}

std::unique_ptr<ClOp> make_seq(Launch l) {
  std::vector<Launch> v;
  v.push_back(std::move(l));
  return std::make_unique<KernelSeq>(std::move(v));
}

Event KernelSeq::enqueue(cl_command_queue q, std::span<const cl_event> wait, Event* first) {
  Event prev;
  for (std::size_t i = 0; i < launches_.size(); ++i) {
    Launch& l = launches_[i];
    Event ev;
    const cl_event prev_ev = prev.get();
    const cl_uint nwait = i == 0 ? static_cast<cl_uint>(wait.size()) : 1;
    const cl_event* list = i == 0 ? wait.data() : &prev_ev;
    HG_CL(clEnqueueNDRangeKernel(q, l.kernel.get(), l.dims, nullptr, l.global.data(),
                                 l.local.data(), nwait, nwait ? list : nullptr, ev.out()));
    if (i == 0 && first != nullptr && launches_.size() > 1) *first = ev;
    prev = std::move(ev);
  }
  return prev;
}

}  // namespace hetgraph::detail::cl
