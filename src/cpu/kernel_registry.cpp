// SPDX-License-Identifier: Apache-2.0
// The CPU kernel registry, the capability query and the choice of an implementation for a node.
#include <cstdlib>

#include "cpu/kernel.hpp"
#include "hetgraph/error.hpp"
#include "util/env.hpp"

namespace hetgraph::detail::cpu {

namespace {
std::string shapes_of(const std::vector<TensorType>& types) {
  std::string s;
  for (const TensorType& t : types) s += (s.empty() ? "" : ", ") + t.shape.str();
  return s;
}
}  // namespace

const KernelRegistry& kernel_registry() {
  static const KernelRegistry registry = [] {
    KernelRegistry r("CPU");
    register_elementwise_kernels(r);
    register_reduce_kernels(r);
    register_matmul_kernels(r);
    register_nn_kernels(r);
    register_movement_kernels(r);
    register_graph_kernels(r);
    register_conv_kernels(r);
    register_pool_kernels(r);
    register_embedding_kernels(r);
    register_eltwise_dnnl_kernels(r);
    register_collective_kernels(r);
    register_transfer_kernels(r);
    register_group_kernels(r);
    register_optimizer_kernels(r);
    // The promise HETGRAPH_CPU_REFERENCE=1 relies on.
    if (const auto missing = r.lists_without_reference(); !missing.empty()) {
      std::string ops;
      for (OpKind k : missing) ops += (ops.empty() ? "" : ", ") + std::string(op_name(k));
      throw InternalError("CPU kernel lists without a reference implementation: " + ops);
    }
    return r;
  }();
  return registry;
}

std::string unsupported(const Plan& p, const PlanNode& n) {
  if (!n.has_work()) return {};
  KernelArgs args{p, 0, n, {}, {}, nullptr, n.type, 1, {1}, nullptr};
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    args.in.push_back(nullptr);
    args.in_types.push_back(p.nodes[n.inputs[k]].type);
  }
  std::string why = kernel_registry().unsupported(args, n.op);
  if (!why.empty()) why += " (inputs " + shapes_of(args.in_types) + ")";
  return why;
}

std::unique_ptr<CpuKernel> create_kernel(const KernelArgs& args, std::string_view& chosen) {
  static const bool reference = env_flag("HETGRAPH_CPU_REFERENCE");
  return kernel_registry().create(args, args.node.op,
                                  args.node.label + " with inputs " + shapes_of(args.in_types),
                                  reference, chosen);
}

}  // namespace hetgraph::detail::cpu
