// SPDX-License-Identifier: Apache-2.0
// The op table and helpers shared by the op family files.
#include <algorithm>
#include <mutex>

#include "compiler/ops.hpp"
#include "compiler/plan.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail {

namespace {
std::vector<OpDef> build_table() {
  std::vector<OpDef> defs;
  register_graph_ops(defs);
  register_elementwise_ops(defs);
  register_reduce_ops(defs);
  register_matmul_ops(defs);
  register_nn_ops(defs);
  register_movement_ops(defs);
  register_conv_ops(defs);
  register_embedding_ops(defs);
  register_collective_ops(defs);
  register_optimizer_ops(defs);
  std::vector<OpDef> table(kNumOps);
  std::vector<bool> seen(kNumOps, false);
  for (const OpDef& d : defs) {
    const auto i = static_cast<std::size_t>(d.kind);
    if (seen[i]) throw InternalError("op declared twice: " + std::string(d.name));
    seen[i] = true;
    table[i] = d;
  }
  for (int i = 0; i < kNumOps; ++i) {
    if (!seen[static_cast<std::size_t>(i)]) {
      throw InternalError("op kind " + std::to_string(i) + " has no declaration");
    }
  }
  return table;
}
}  // namespace

const OpDef& op_def(OpKind k) {
  static const std::vector<OpDef> table = build_table();
  return table[static_cast<std::size_t>(k)];
}

void InferCtx::fail(const std::string& why) const {
  std::string msg = "node " + plan.nodes[node].label + ": " + why + " (inputs:";
  if (in.empty()) msg += " none";
  for (std::size_t i = 0; i < in.size(); ++i) {
    msg += (i ? ", " : " ") + in[i].shape.str();
    if (in[i].dtype != DType::f32) msg += std::string(" ") + std::string(dtype_name(in[i].dtype));
  }
  throw ShapeError(msg + ")");
}

std::string InferCtx::input_label(std::size_t i) const {
  return plan.nodes[plan.nodes[node].inputs[i]].label;
}

Cost op_cost(OpKind k, std::span<const TensorType> in, const TensorType& out, const Attrs& at) {
  const OpDef& d = op_def(k);
  Cost c;
  c.flops = static_cast<double>(out.shape.numel()) * d.flops_per_elem;
  c.bytes = static_cast<double>(out.bytes());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!d.shape_only_input(i)) c.bytes += static_cast<double>(in[i].bytes());
  }
  return d.cost != nullptr ? d.cost(in, out, at, c) : c;
}

int InferCtx::norm_axis(int axis, int rank) const {
  const int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return a;
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out) {
  const int r = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> d(static_cast<std::size_t>(r));
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i, ib = b.rank() - r + i;
    const std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    d[static_cast<std::size_t>(i)] = da == 1 ? db : da;
  }
  out = Shape(std::span<const std::int64_t>(d));
  return true;
}

bool broadcasts_to(const Shape& small, const Shape& big) {
  if (small.rank() > big.rank()) return false;
  for (int i = 0; i < small.rank(); ++i) {
    const std::int64_t s = small[small.rank() - 1 - i], b = big[big.rank() - 1 - i];
    if (s != b && s != 1) return false;
  }
  return true;
}

}  // namespace hetgraph::detail
