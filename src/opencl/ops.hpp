// SPDX-License-Identifier: Apache-2.0
// OpenCL node kernels: for each op, the work a node enqueues, created at compile time with its
// buffers and arguments bound so that a run only enqueues. Ops are grouped by family like the
// kernels/*.cl programs they use (elementwise, reduce, nn, movement) plus CLBlast GEMM.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/kernel_registry.hpp"
#include "compiler/plan.hpp"
#include "opencl/cl.hpp"
#include "opencl/device.hpp"

namespace hetgraph::detail::cl {

/// A node's work on the device.
class ClOp {
 public:
  virtual ~ClOp() = default;
  /// Enqueues the work on `q` after every event in `wait`; returns the event of its
  /// completion, and in `first` (when not null and the work is several commands) the event of
  /// its first command, for traces. Throws PlatformError when an enqueue fails.
  virtual Event enqueue(cl_command_queue q, std::span<const cl_event> wait, Event* first) = 0;
  /// The trace lane of its commands: 0 for the main queue, 1 + i for CLBlast's queue i.
  virtual int lane() const { return 0; }
  /// Once the run's commands are complete: rethrows an error of the node's host-side work (a
  /// collective's, from the other processes).
  virtual void after_run() {}
};

/// Everything known about a node when its op is created (compile time).
struct OpArgs {
  const Plan& plan;
  std::uint32_t index;
  const PlanNode& node;
  std::vector<cl_mem> in;  // buffer of each input; nullptr for shape-only inputs
  std::vector<TensorType> in_types;
  cl_mem out = nullptr;  // buffer of the result (the variable's, for a copying assign)
  TensorType out_type;
  Device& device;
  std::function<cl_program(std::string_view family)> program;  // built once per context
  cl_mem status = nullptr;  // int32 error slots (class ids out of range), reset every run
  int status_slot = -1;     // this node's slot, for ops that check int32 labels

  const Shape& in_shape(std::size_t i) const { return in_types[i].shape; }
  const Shape& out_shape() const { return out_type.shape; }
};

/// Kernels per op in the shape every platform registers them (src/common/kernel_registry.hpp).
using OpRegistry = KernelRegistry<OpArgs, ClOp>;
const OpRegistry& op_registry();

void register_elementwise_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_nn_ops(OpRegistry& r);
void register_movement_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);
void register_conv_ops(OpRegistry& r);
void register_embedding_ops(OpRegistry& r);
void register_optimizer_ops(OpRegistry& r);
void register_collective_ops(OpRegistry& r);
void register_transfer_ops(OpRegistry& r);  // heterogeneous platforms

// ---- building blocks shared by the families --------------------------------------------------

/// One NDRange launch with its arguments bound.
struct Launch {
  Kernel kernel;
  cl_uint dims = 1;
  std::array<std::size_t, 2> global{0, 1}, local{1, 1};
};

/// Creates `name` from `program` and binds `args` in order.
template <class... A>
Kernel make_kernel(cl_program program, const char* name, const A&... args) {
  Kernel k(HG_CL_CREATE(clCreateKernel, program, name));
  set_args(k.get(), args...);
  return k;
}

/// Work-group size for a 1-d launch of `k`: at most `cap`, the device's and the kernel's limit.
std::size_t group_size(const Device& dev, cl_kernel k, std::size_t cap = 256);
/// The largest power of two <= min(limit, cap, want), at least 1 (tree reductions need 2^k).
std::size_t pow2_group(const Device& dev, cl_kernel k, std::size_t want, std::size_t cap = 256);

/// A launch on the device's fixed grid (Device::grid_groups() work-groups of the kernel's
/// group size): the kernels stride through their work, so the size never depends on the
/// tensor (see FOR_EACH in kernels/*.cl for why).
Launch launch_1d(const Device& dev, Kernel k);
/// The same with work-groups of `local` work-items (a power of two for tree reductions).
Launch launch_groups(const Device& dev, Kernel k, std::size_t local);

/// Launches run one after another (each waits for the previous one); the last one's event is
/// the node's. Tensors are never empty (the compiler rejects empty dims), so neither are
/// launches.
class KernelSeq final : public ClOp {
 public:
  explicit KernelSeq(std::vector<Launch> launches, std::vector<Mem> scratch = {})
      : launches_(std::move(launches)), scratch_(std::move(scratch)) {}
  Event enqueue(cl_command_queue q, std::span<const cl_event> wait, Event* first) override;

 private:
  std::vector<Launch> launches_;
  std::vector<Mem> scratch_;  // buffers the launches use besides the plan's (partials)
};

std::unique_ptr<ClOp> make_seq(Launch l);

/// A size as the kernels take it (the executable has checked every tensor fits in an int).
inline cl_int to_int(std::int64_t v) {
  return static_cast<cl_int>(v);
}

/// A geometry's right-aligned dims or strides (compiler/geometry.hpp) as the kernels' int8.
static_assert(Shape::kMaxRank == 8, "the kernels take index geometries as int8");
inline cl_int8 to_int8(const std::array<std::int64_t, Shape::kMaxRank>& v) {
  cl_int8 o;
  for (std::size_t i = 0; i < 8; ++i) o.s[i] = to_int(v[i]);
  return o;
}

}  // namespace hetgraph::detail::cl
