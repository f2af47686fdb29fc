// SPDX-License-Identifier: Apache-2.0
// Stochastic gradient descent as assigns (sgd in autodiff.hpp), and, for data-parallel
// training, the gradients averaged across ranks bucket by bucket before the update.
#include <algorithm>

#include "compiler/graph_impl.hpp"
#include "compiler/ops/builders.hpp"
#include "hetgraph/autodiff.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

using detail::fresh_name;
using detail::GraphImpl;
using detail::OpKind;

namespace {

void check_variables(std::span<const Node> variables) {
  if (variables.empty()) throw GraphError("sgd: no variables to update");
  for (const Node& v : variables) {
    if (!v.valid() || detail::graph_of(v)->rec(v.id()).op != OpKind::Variable) {
      throw GraphError("sgd: " + v.label() + " is not a variable");
    }
  }
}

// The updates as assigns: v <- v - lr * dv, or with momentum through a velocity variable.
Node sgd_steps(std::span<const Node> variables, const std::vector<Node>& grads, float learning_rate,
               float momentum) {
  GraphImpl& g = *detail::graph_of(variables.front());
  std::vector<Node> steps;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Node v = variables[i];
    const detail::InheritPin pin(g, g.rec(v.id()).pin);  // velocity and update with the variable
    Node update = grads[i];
    if (momentum != 0.0f) {
      // u <- m*u + g, written over u; the variable then steps along u.
      detail::NodeRec r;
      r.op = OpKind::Variable;
      r.name = fresh_name(g, v.name() + "/velocity");
      r.shape = g.rec(v.id()).shape;
      const Node u = g.add(std::move(r));
      update = axpby(u, grads[i], momentum, 1.0f);
      steps.push_back(assign(u, update));
    }
    steps.push_back(assign(v, axpby(v, update, 1.0f, -learning_rate)));
  }
  return group(steps);
}

}  // namespace

// Averages the gradients across ranks. Dense ones go bucket by bucket. A gradient's node id is
// the order in which autodiff made it: it walks the graph backwards from the loss, so the last
// layer's gradients come first, as the backward pass produces them. Consecutive gradients in
// that order share a bucket up to the byte threshold: flattened, concatenated, one allreduce of
// the mean, sliced back into shape.
std::vector<Node> detail::average_gradients(std::span<const Node> variables,
                                            std::vector<Node> grads, const DataParallel& dp) {
  GraphImpl& g = *detail::graph_of(variables.front());
  std::vector<Node> out(grads.size());
  const float inv = 1.0f / static_cast<float>(dp.comm.size());
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const NodeRec r = g.rec(grads[i].id());  // a copy: making nodes below moves the records
    if (r.op != OpKind::EmbeddingGrad) {
      order.push_back(i);
      continue;
    }
    // A table's gradient from one lookup is a scatter-add of the looked-up rows. Exchanged as
    // those rows and their indices (an allgather of each, in rank order: the global batch's
    // order), it is the scatter-add of every rank's rows, which the compiler fuses into a sparse
    // update of the table: nothing table-sized crosses the network (Horovod treats
    // TensorFlow's IndexedSlices this way).
    const Node rows = scale(distributed::allgather(g.handle(r.inputs[0]), dp.comm), inv);
    const Node ids = distributed::allgather(g.handle(r.inputs[1]), dp.comm);
    out[i] = make_op(OpKind::EmbeddingGrad, {rows, ids, g.handle(r.inputs[2])});
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return grads[a].id() < grads[b].id(); });
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t bytes = 0;
  for (std::size_t i : order) {
    const auto b = static_cast<std::size_t>(variables[i].declared_shape().numel()) * 4;
    if (buckets.empty() || (bytes > 0 && bytes + b > dp.bucket_bytes)) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += b;
  }
  for (const auto& bucket : buckets) {
    const std::string name =
        fresh_name(g, "grad bucket " + std::to_string(&bucket - buckets.data()));
    if (bucket.size() == 1) {
      const std::size_t i = bucket.front();
      out[i] = distributed::allreduce(grads[i], dp.comm, distributed::ReduceOp::mean).named(name);
      continue;
    }
    std::vector<Node> flat;
    for (std::size_t i : bucket) flat.push_back(reshape(grads[i], {-1}));
    const Node reduced =
        distributed::allreduce(concat(flat, 0), dp.comm, distributed::ReduceOp::mean).named(name);
    std::int64_t off = 0;
    for (std::size_t i : bucket) {
      const Shape s = variables[i].declared_shape();
      const std::int64_t n = s.numel();
      out[i] = reshape(slice(reduced, 0, off, off + n),
                       std::vector<std::int64_t>(s.dims().begin(), s.dims().end()));
      off += n;
    }
  }
  return out;
}

Node sgd(Node loss, std::span<const Node> variables, float learning_rate, float momentum) {
  check_variables(variables);
  return sgd_steps(variables, gradients(loss, variables), learning_rate, momentum);
}

Node sgd(Node loss, std::initializer_list<Node> variables, float learning_rate, float momentum) {
  return sgd(loss, std::span<const Node>(variables.begin(), variables.size()), learning_rate,
             momentum);
}

Node sgd(Node loss, std::span<const Node> variables, float learning_rate, float momentum,
         const DataParallel& dp) {
  check_variables(variables);
  if (dp.bucket_bytes == 0) throw GraphError("sgd: DataParallel.bucket_bytes must be > 0");
  std::vector<Node> grads = gradients(loss, variables);
  if (dp.comm.size() > 1) grads = detail::average_gradients(variables, std::move(grads), dp);
  return sgd_steps(variables, grads, learning_rate, momentum);
}

Node sgd(Node loss, std::initializer_list<Node> variables, float learning_rate, float momentum,
         const DataParallel& dp) {
  return sgd(loss, std::span<const Node>(variables.begin(), variables.size()), learning_rate,
             momentum, dp);
}

}  // namespace hetgraph
