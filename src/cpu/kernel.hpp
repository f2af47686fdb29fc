// SPDX-License-Identifier: Apache-2.0
// CPU kernels: the interface a node's kernel implements, and the registry that maps each op to
// an ordered list of implementations (src/common/kernel_registry.hpp). The first
// implementation that accepts a node wins; a reference implementation ends every list (the
// registry refuses to start otherwise). HETGRAPH_LOG_KERNELS=1 prints why candidates were
// rejected; HETGRAPH_CPU_REFERENCE=1 runs the reference implementations everywhere.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "common/kernel_registry.hpp"
#include "compiler/comm.hpp"
#include "compiler/plan.hpp"

namespace hetgraph::detail::cpu {

/// What a kernel gets at run time from the executor running it.
struct ExecCtx {
  int nthreads = 1;  // size of the executor's thread team
  int executor = 0;
  void* scratch = nullptr;  // executor-owned scratchpad (oneDNN user-mode scratchpads)
  std::size_t scratch_bytes = 0;
};

class CpuKernel {
 public:
  virtual ~CpuKernel() = default;
  virtual void run(const ExecCtx& ctx) = 0;
  /// Scratchpad this kernel needs from its executor.
  virtual std::size_t scratch_bytes() const { return 0; }
};

/// The kernel of a communication node (OpDef::communication): its work runs elsewhere (the
/// communicator's thread), so engines start it from whichever thread readied the node and learn
/// of its end through `done`, without keeping an executor waiting (see comm_lane.hpp).
class AsyncKernel : public CpuKernel {
 public:
  /// Starts the work and returns at once; done.comm_done(token, error) follows exactly once,
  /// from any thread (possibly this one, before start returns).
  virtual void start(CommDone& done, std::uint64_t token) = 0;
  /// The run failed before this node could start: tell the other processes that wait for it.
  virtual void abandon(const std::string& why) = 0;
  /// Blocking: start, then wait (engines without a lane, the reference path).
  void run(const ExecCtx& ctx) override;
};

template <class F>
class FnKernel final : public CpuKernel {
 public:
  explicit FnKernel(F f) : f_(std::move(f)) {}
  void run(const ExecCtx& ctx) override { f_(ctx); }

 private:
  F f_;
};

/// Wraps a callable `void(const ExecCtx&)` as a kernel.
template <class F>
std::unique_ptr<CpuKernel> make_kernel(F f) {
  return std::make_unique<FnKernel<F>>(std::move(f));
}

/// Everything known about a node when its kernel is created (compile time). Reject functions
/// see it before memory exists (in, out and kernels null): they read types and attributes only.
struct KernelArgs {
  const Plan& plan;
  std::uint32_t index;
  const PlanNode& node;
  std::vector<const void*> in;  // memory of each input; nullptr for shape-only inputs
  std::vector<TensorType> in_types;
  void* out = nullptr;  // memory of the result (the variable, for a copying assign)
  TensorType out_type;
  int max_threads = 1;  // team size kernels will be run with
  /// Every team size the engine may run this kernel with (oneDNN primitives are made per size).
  std::vector<int> team_sizes;
  /// Kernels of the nodes before this one in plan order (null where a node has none): a
  /// backward kernel may use state its forward node's kernel keeps (max pooling's argmax).
  const std::vector<std::unique_ptr<CpuKernel>>* kernels = nullptr;
  /// Counts the host's writes into the graph's memory (variables written between runs): a
  /// kernel keeping a copy of a value fixed_between_runs refreshes it when this moves.
  const std::atomic<std::uint64_t>* host_writes = nullptr;

  const float* in_f(std::size_t i) const { return static_cast<const float*>(in[i]); }
  const std::int32_t* in_i(std::size_t i) const { return static_cast<const std::int32_t*>(in[i]); }
  float* out_f() const { return static_cast<float*>(out); }
  const Shape& in_shape(std::size_t i) const { return in_types[i].shape; }
  const Shape& out_shape() const { return out_type.shape; }
};

using KernelRegistry = detail::KernelRegistry<KernelArgs, CpuKernel>;
using KernelImpl = KernelRegistry::Candidate;
const KernelRegistry& kernel_registry();

/// Why the CPU platform cannot run node `n` of `p` (empty when it can).
std::string unsupported(const Plan& p, const PlanNode& n);
/// Chooses and creates the kernel for a node; throws PlatformError when nothing accepts it.
std::unique_ptr<CpuKernel> create_kernel(const KernelArgs& args, std::string_view& chosen);

void register_elementwise_kernels(KernelRegistry& r);
void register_reduce_kernels(KernelRegistry& r);
void register_matmul_kernels(KernelRegistry& r);
void register_nn_kernels(KernelRegistry& r);
void register_movement_kernels(KernelRegistry& r);
void register_graph_kernels(KernelRegistry& r);
void register_conv_kernels(KernelRegistry& r);
/// The layout oneDNN's convolutions pick on this CPU for a typical layer, which
/// assign_layouts keeps between them; nchw with reference kernels only
/// (HETGRAPH_CPU_REFERENCE) or a layout it does not know.
ActivationLayout conv_activation_layout();
/// Whether oneDNN's forward kernel for grouped (or depthwise) convolution `n` of `p` takes its
/// image and result in `layout` with a fast (jit or brgemm) implementation, its post-ops
/// included, for every team size up to `max_team` (assign_layouts keeps the layout through it
/// then).
bool grouped_conv_takes_layout(const Plan& p, const PlanNode& n, ActivationLayout layout,
                               int max_team);
/// The layouts besides conv_activation_layout() in which oneDNN has fast (jit or brgemm)
/// convolutions for a typical layer on this CPU: the layout search's alternatives (empty with
/// reference kernels only).
std::vector<ActivationLayout> conv_layout_alternatives();
/// Reorders of fixed weights into their packed copies (FixedWeights) in this process so far:
/// tests check that feeding inputs causes none.
std::uint64_t fixed_weight_reorders();
/// Capabilities::passes_layout: channel_affine in any layout (its channels_last kernel),
/// average pooling where oneDNN has a jit kernel for the layer in `layout`.
bool passes_layout(const Plan& p, const PlanNode& n, ActivationLayout layout);
/// Whether a Linear layer's product [m, k] x [k, n] (B stored transposed: trans_b) with fixed
/// weights runs as oneDNN's brgemm matmul, B packed and the bias added by the primitive (the
/// dnnl_matmul_packed_bias kernel); not where oneDNN has no brgemm matmul (below AVX-512).
bool packed_bias_matmul(std::int64_t m, std::int64_t k, std::int64_t n, bool trans_b);
/// Whether oneDNN has Winograd convolutions on this CPU (assign_layouts' nChw16c layers); never
/// with reference kernels only.
bool winograd_available();
void register_pool_kernels(KernelRegistry& r);
void register_embedding_kernels(KernelRegistry& r);
void register_eltwise_dnnl_kernels(KernelRegistry& r);  // after the elementwise ones
void register_collective_kernels(KernelRegistry& r);
void register_transfer_kernels(KernelRegistry& r);  // heterogeneous platforms
void register_group_kernels(KernelRegistry& r);
void register_optimizer_kernels(KernelRegistry& r);

}  // namespace hetgraph::detail::cpu
