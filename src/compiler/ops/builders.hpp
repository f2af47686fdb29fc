// SPDX-License-Identifier: Apache-2.0
// Builders for the internal ops that gradient rules emit (not part of the public API).
#pragma once

#include <span>
#include <vector>

#include "compiler/graph_impl.hpp"

namespace hetgraph {
struct DataParallel;
}

namespace hetgraph::detail {

inline Node sum_to(Node g, Node like) {
  return make_op(OpKind::SumTo, {g, like});
}
inline Node expand(Node g, Node like, int axis, bool keepdims, bool mean) {
  Attrs at;
  at.axis = axis;
  at.keepdims = keepdims;
  at.mean = mean;
  return make_op(OpKind::Expand, {g, like}, at);
}
inline Node reshape_like(Node g, Node like) {
  return make_op(OpKind::ReshapeLike, {g, like});
}
inline Node grad_seed(Node loss) {
  return make_op(OpKind::GradSeed, {loss});
}
/// A float scalar constant (zeros for gradients that select).
inline Node scalar_constant(GraphImpl& g, float v) {
  NodeRec r;
  r.op = OpKind::Constant;
  r.f32_values = std::make_shared<const std::vector<float>>(std::vector<float>{v});
  return g.add(std::move(r));
}
inline Node with_axis(OpKind k, std::initializer_list<Node> in, int axis, bool keepdims = false) {
  Attrs at;
  at.axis = axis;
  at.keepdims = keepdims;
  return make_op(k, in, at);
}

/// Gradients averaged across dp.comm's ranks (src/compiler/autodiff.cpp): dense ones in
/// buckets, one allreduce of the mean each; an embedding table's as its looked-up rows and
/// indices, allgathered.
std::vector<Node> average_gradients(std::span<const Node> variables, std::vector<Node> grads,
                                    const DataParallel& dp);

}  // namespace hetgraph::detail
