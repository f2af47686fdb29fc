// SPDX-License-Identifier: Apache-2.0
// Structural ops: input, variable, constant, assign, group, and the gradient seed.
// Inputs are typed by the compile-time shapes (see infer_shapes); the rest infer here.
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail {

namespace {

TensorType infer_declared(const InferCtx& c) {
  return c.declared;
}

TensorType infer_assign(const InferCtx& c) {
  if (c.in[0] != c.in[1]) {
    c.fail("assign of a mismatched value: the variable is " + c.in[0].shape.str() +
           std::string(" ") + std::string(dtype_name(c.in[0].dtype)) + ", the value " +
           c.in[1].shape.str() + " " + std::string(dtype_name(c.in[1].dtype)));
  }
  return c.in[0];
}

TensorType infer_group(const InferCtx&) {
  return {Shape{0}, DType::f32};
}

TensorType infer_grad_seed(const InferCtx& c) {
  if (c.in[0].shape.numel() != 1) {
    c.fail("gradients need a scalar loss, but " + c.input_label(0) + " has shape " +
           c.in[0].shape.str());
  }
  if (c.in[0].dtype != DType::f32) c.fail("gradients need a float loss");
  return c.in[0];
}

// A transfer's value: a recv's is the value it receives, a send's or the commit gate's a token.
TensorType infer_transfer(const InferCtx& c) {
  return c.declared;
}

}  // namespace

void register_graph_ops(std::vector<OpDef>& t) {
  // Inputs are typed by the compile-time shapes (infer_shapes).
  t.push_back({.kind = OpKind::Input, .name = "input", .arity = 0, .storage = Storage::Input});
  t.push_back({.kind = OpKind::Variable,
               .name = "variable",
               .arity = 0,
               .storage = Storage::Variable,
               .infer = infer_declared});
  t.push_back({.kind = OpKind::Constant,
               .name = "constant",
               .arity = 0,
               .storage = Storage::Constant,
               .infer = infer_declared});
  // Input 0 of assign is the variable it writes, not a read: marking it shape-only keeps the
  // assign out of the variable's readers. Its kernel (a copy, unless elided) writes there.
  t.push_back({.kind = OpKind::Assign,
               .name = "assign",
               .arity = 2,
               .shape_only = 0b01u,
               .storage = Storage::None,
               .writes_input = 0,
               .works_without_value = true,  // a copy, unless elided
               .infer = infer_assign,
               .flops_per_elem = 0.0f});
  t.push_back({.kind = OpKind::Group,
               .name = "group",
               .arity = -1,
               .storage = Storage::None,
               .infer = infer_group,
               .flops_per_elem = 0.0f});
  // Made by fuse_parallel_ops: its members (PlanNode::members) keep their values; it runs
  // their kernels together. No value of its own.
  t.push_back({.kind = OpKind::ParallelGroup,
               .name = "parallel_group",
               .arity = -1,
               .storage = Storage::None,
               .works_without_value = true,
               .infer = infer_group,
               .flops_per_elem = 0.0f});
  // Made after shape inference (insert_transfers), with its type set: never inferred.
  t.push_back({.kind = OpKind::Transfer,
               .name = "transfer",
               .arity = -1,
               .infer = infer_transfer,
               .flops_per_elem = 0.0f});
  t.push_back({.kind = OpKind::GradSeed,
               .name = "grad_seed",
               .arity = 1,
               .shape_only = 1u,
               .infer = infer_grad_seed,
               .flops_per_elem = 0.0f});
}

}  // namespace hetgraph::detail

namespace hetgraph {

using detail::make_op;
using detail::OpKind;
using detail::rec_of;

Node assign(Node variable, Node value) {
  if (!variable.valid()) throw GraphError("assign: invalid variable node");
  if (rec_of(variable).op != OpKind::Variable) {
    throw GraphError("assign: target " + variable.label() +
                     " is not a variable (only variables can be assigned)");
  }
  return make_op(OpKind::Assign, {variable, value});
}

Node group(std::span<const Node> nodes) {
  return make_op(OpKind::Group, nodes);
}
Node group(std::initializer_list<Node> nodes) {
  return group(std::span<const Node>(nodes.begin(), nodes.size()));
}

}  // namespace hetgraph
