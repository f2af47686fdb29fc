// The CPU kernel table and the choice of an implementation for a node.
#include <cstdlib>
#include <iostream>

#include "cpu/kernel.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {
bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && *v != '0';
}
}  // namespace

const KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t;
    register_elementwise_kernels(t);
    register_reduce_kernels(t);
    register_matmul_kernels(t);
    register_nn_kernels(t);
    register_movement_kernels(t);
    register_graph_kernels(t);
    register_conv_kernels(t);
    register_embedding_kernels(t);
    register_eltwise_dnnl_kernels(t);
    return t;
  }();
  return table;
}

std::unique_ptr<CpuKernel> create_kernel(const KernelArgs& args, std::string_view& chosen) {
  static const bool log = env_on("HETGRAPH_LOG_KERNELS");
  static const bool reference = env_on("HETGRAPH_CPU_REFERENCE");
  const auto& impls = kernel_table()[static_cast<std::size_t>(args.node.op)];
  std::string reasons;
  for (std::size_t i = reference && !impls.empty() ? impls.size() - 1 : 0; i < impls.size(); ++i) {
    const KernelImpl& impl = impls[i];
    const char* why = impl.reject ? impl.reject(args) : nullptr;
    std::unique_ptr<CpuKernel> k;
    if (why == nullptr) {
      k = impl.make(args);
      if (!k) why = "the library could not create it for these shapes";
    }
    if (k) {
      chosen = impl.name;
      return k;
    }
    reasons += std::string(reasons.empty() ? "" : "; ") + std::string(impl.name) + ": " + why;
    if (log)
      std::cerr << "hetgraph: " << args.node.label << ": " << impl.name << " rejected: " << why
                << '\n';
  }
  std::string shapes;
  for (const TensorType& t : args.in_types) shapes += (shapes.empty() ? "" : ", ") + t.shape.str();
  throw PlatformError("no CPU kernel for node " + args.node.label + " with inputs " + shapes +
                      (reasons.empty() ? std::string(" (none registered)") : " (" + reasons + ")"));
}

}  // namespace hetgraph::detail::cpu
