// SPDX-License-Identifier: Apache-2.0
// optimizer_update: one training step of one variable under one rule (SGD with momentum or
// Nesterov, Adam, AdamW, RMSprop, Adagrad), with its state, in one kernel. Like assign it has
// no value of its own: it writes its variable (input 0) and the variable's state tensors after
// the commit point, so a run that fails changes none of them. Built by hetgraph::minimize and
// apply_gradients (src/compiler/optimizer.cpp).
#include "compiler/geometry.hpp"
#include "compiler/ops.hpp"
#include "compiler/plan.hpp"

namespace hetgraph::detail {

namespace {

// (variable, gradient, learning rate[, step], states...): the gradient and the states have the
// variable's type; the learning rate and the step count are float scalars (one element).
TensorType infer_optimizer_update(const InferCtx& c) {
  const OptimizerRule& r = c.attrs.get<OptimizerRule>();
  const TensorType& v = c.in[0];
  if (c.plan.nodes[c.plan.nodes[c.node].inputs[0]].op != OpKind::Variable)
    c.fail("optimizer_update writes input 0, which must be a variable, not " + c.input_label(0));
  if (v.dtype != DType::f32)
    c.fail("optimizers update float32 variables; " + c.input_label(0) + " is " +
           std::string(dtype_name(v.dtype)));
  const auto want = static_cast<std::size_t>(r.first_state() + r.states());
  if (c.in.size() != want)
    c.fail("optimizer_update needs " + std::to_string(want) + " inputs for its rule, got " +
           std::to_string(c.in.size()));
  if (c.in[1] != v)
    c.fail("the gradient " + c.input_label(1) + " must have the variable's shape " + v.shape.str());
  for (int k = 2; k < r.first_state(); ++k) {
    const TensorType& s = c.in[static_cast<std::size_t>(k)];
    if (s.dtype != DType::f32 || s.shape.numel() != 1)
      c.fail(std::string(k == 2 ? "the learning rate " : "the step count ") + c.input_label(k) +
             " must be a float scalar, got " + s.shape.str());
  }
  for (std::size_t k = static_cast<std::size_t>(r.first_state()); k < want; ++k) {
    if (c.in[k] != v || c.plan.nodes[c.plan.nodes[c.node].inputs[k]].op != OpKind::Variable)
      c.fail("optimizer state " + c.input_label(k) + " must be a variable shaped like " +
             v.shape.str());
  }
  return v;
}

// (v, rows, indices, lr[, sum]): made by fuse_sparse_update from an optimizer_update whose
// gradient was an embedding_grad; rows has the lookup's shape.
TensorType infer_sparse_update(const InferCtx& c) {
  const OptimizerRule& r = c.attrs.get<OptimizerRule>();
  const TensorType& v = c.in[0];
  if (v.dtype != DType::f32 || v.shape.rank() != 2) c.fail("the table must be float [rows, dim]");
  if (c.in[2].dtype != DType::i32) c.fail("the indices must be int32");
  std::vector<std::int64_t> d(c.in[2].shape.dims().begin(), c.in[2].shape.dims().end());
  d.push_back(v.shape[1]);
  if (c.in[1].dtype != DType::f32 ||
      !GradientBand::fits(c.in[1].shape, Shape(std::span<const std::int64_t>(d)), r.band))
    c.fail("the gradient rows must have the lookup's shape (or hold it from column " +
           std::to_string(r.band) + ")");
  if (c.in[3].shape.numel() != 1) c.fail("the learning rate must be a scalar");
  if (c.in.size() != static_cast<std::size_t>(4 + r.states()) || (r.states() == 1 && c.in[4] != v))
    c.fail("sparse_optimizer_update: wrong state inputs");
  return v;
}

// A few flops per element; it reads the variable, the gradient and the states and writes the
// variable and the states.
Cost update_cost(std::span<const TensorType> in, const TensorType& out, const Attrs& at, Cost) {
  const OptimizerRule& r = at.get<OptimizerRule>();
  const auto n = static_cast<double>(out.shape.numel());
  return {.flops = 10.0 * n,
          .bytes = static_cast<double>(out.bytes()) * (3.0 + 2.0 * r.states()) +
                   8.0 * static_cast<double>(in.size())};
}

// The state tensors follow the variable, gradient, learning rate (and step): an update writes
// them with its variable.
InputRange update_states(const Attrs& at) {
  const OptimizerRule& r = at.get<OptimizerRule>();
  return {r.first_state(), r.states()};
}
// (v, rows, indices, lr, states...)
InputRange sparse_update_states(const Attrs& at) {
  return {4, at.get<OptimizerRule>().states()};
}

}  // namespace

void register_optimizer_ops(std::vector<OpDef>& t) {
  // Every input is read (the variable and its states too); writes_input names the variable,
  // the state inputs are written as well (PlanNode::written_inputs).
  t.push_back({.kind = OpKind::OptimizerUpdate,
               .name = "optimizer_update",
               .arity = -1,
               .storage = Storage::None,
               .writes_input = 0,
               .also_writes = update_states,
               .works_without_value = true,
               .infer = infer_optimizer_update,
               .cost = update_cost});
  // Only the looked-up rows: reads the rows and their indices, writes those rows of the table
  // (and of its state).
  t.push_back({.kind = OpKind::SparseOptimizerUpdate,
               .name = "sparse_optimizer_update",
               .arity = -1,
               .storage = Storage::None,
               .writes_input = 0,
               .also_writes = sparse_update_states,
               .works_without_value = true,
               .infer = infer_sparse_update,
               .flops_per_elem = 0.0f,
               .index = {.input = 2, .bound_input = 0, .bound_dim = 0, .what = "index"}});
}

}  // namespace hetgraph::detail
