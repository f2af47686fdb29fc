// SPDX-License-Identifier: Apache-2.0
// ONNX training ops of ai.onnx.preview.training (version 1) on hetgraph ops: the optimizer
// steps Adagrad, Momentum and Adam, and Gradient by hetgraph's autodiff.
#include <cmath>
#include <span>
#include <string>

#include "hetgraph/autodiff.hpp"
#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

// ---- Optimizer steps (ai.onnx.preview.training, version 1) ------------------------------------
// Adagrad, Momentum and Adam update n tensors at once: inputs R (learning rate), T (the step
// count), then n of each of X, G and the optimizer's state; outputs the new X, then the new
// state, in the same groups. Elementwise, as ONNX's definitions write them.

struct OptimizerStep {
  Node R, T;              // T as float
  std::size_t n = 0;      // tensors updated
  std::size_t state = 0;  // state tensors per X
};

OptimizerStep optimizer_inputs(Ctx& c, std::size_t state) {
  const std::size_t groups = 2 + state;  // X, G and the state
  if (c.inputs() < 2 + groups || (c.inputs() - 2) % groups != 0 ||
      c.outputs() != (c.inputs() - 2) / groups * (1 + state)) {
    c.fail(std::to_string(c.inputs()) + " inputs and " + std::to_string(c.outputs()) +
           " outputs do not make groups of X, G and " + std::to_string(state) + " state tensors");
  }
  OptimizerStep s{c.f32(0), cast(c.node(1), DType::f32), (c.inputs() - 2) / groups, state};
  if (numel(c.shape(s.R)) != 1 || numel(c.shape(s.T)) != 1) c.fail("R and T must be scalars");
  s.R = c.reshape(s.R, {});
  s.T = c.reshape(s.T, {});
  for (std::size_t k = 0; k < s.n; ++k) {
    for (std::size_t g = 1; g < groups; ++g) {
      if (c.dims(2 + g * s.n + k) != c.dims(2 + k))
        c.fail("input " + std::to_string(2 + g * s.n + k) + " is not shaped as its X " +
               dims_str(c.dims(2 + k)));
    }
  }
  return s;
}

/// norm_coefficient * X + G, for tensor k.
Node regularized_gradient(Ctx& c, const OptimizerStep& s, std::size_t k) {
  const float norm = c.attr_f("norm_coefficient", 0.0f);
  Node g = c.f32(2 + s.n + k);
  return norm == 0.0f ? g : add(mul(c.f32(2 + k), c.constant(norm)), g);
}

void adagrad(Ctx& c) {
  const OptimizerStep s = optimizer_inputs(c, 1);
  const float decay = c.attr_f("decay_factor", 0.0f), eps = c.attr_f("epsilon", 1e-6f);
  Node r = div(s.R, add(mul(s.T, c.constant(decay)), c.constant(1.0f)));
  for (std::size_t k = 0; k < s.n; ++k) {
    Node g = regularized_gradient(c, s, k);
    Node h = add(c.f32(2 + 2 * s.n + k), mul(g, g));
    c.set(k, sub(c.f32(2 + k), div(mul(r, g), add(sqrt(h), c.constant(eps)))));
    c.set(s.n + k, h);
  }
}

void momentum(Ctx& c) {
  const OptimizerStep s = optimizer_inputs(c, 1);
  const float alpha = c.attr_f("alpha", 0.0f), beta = c.attr_f("beta", 0.0f);
  const std::string mode = c.attr_s("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    c.fail("mode '" + mode + "' is neither standard nor nesterov");
  // beta from the second step on; the first takes the gradient whole
  Node b = where(greater(s.T, c.constant(0.0f)), c.constant(beta), c.constant(1.0f));
  for (std::size_t k = 0; k < s.n; ++k) {
    Node g = regularized_gradient(c, s, k);
    Node v = add(mul(c.f32(2 + 2 * s.n + k), c.constant(alpha)), mul(b, g));
    Node step = mode == "standard" ? v : add(g, mul(v, c.constant(alpha)));
    c.set(k, sub(c.f32(2 + k), mul(s.R, step)));
    c.set(s.n + k, v);
  }
}

// Gradient: d(y)/d(x) for each x of xs, by hetgraph's reverse-mode autodiff; a y of more than
// one element is summed first (its gradient seeded with ones). The inputs are the xs'
// values, which must be the xs themselves: feeding other values would mean differentiating a
// copy of the graph at them.
void gradient(Ctx& c) {
  const ir::Attr* xs = c.has_attr("xs") ? &c.n.attrs.at("xs") : nullptr;
  if (xs == nullptr || xs->kind != ir::Attr::kStrings || xs->strings.empty())
    c.fail("attribute 'xs' must name the tensors to differentiate by");
  if (c.has_attr("zs")) c.unsupported("the attribute 'zs'");
  const std::string y_name = c.attr_s("y", "");
  if (y_name.empty()) c.fail("attribute 'y' must name the tensor to differentiate");
  if (c.inputs() != xs->strings.size() || c.outputs() != xs->strings.size())
    c.fail("it has " + std::to_string(c.inputs()) + " inputs and " + std::to_string(c.outputs()) +
           " outputs for " + std::to_string(xs->strings.size()) + " xs");
  std::vector<Node> wrt;
  for (std::size_t i = 0; i < c.inputs(); ++i) {
    if (c.n.inputs[i] != xs->strings[i]) {
      c.unsupported("input " + std::to_string(i) + " ('" + c.n.inputs[i] + "') is not x '" +
                    xs->strings[i] + "' itself");
    }
    if (c.in(i).known() && !c.in(i).initializer)
      c.unsupported("x '" + xs->strings[i] + "' is a constant: nothing to differentiate by");
    wrt.push_back(c.f32(i));
  }
  Node y = c.node_named(y_name);
  if (c.type(y).dtype != DType::f32) c.fail("y '" + y_name + "' is not float");
  if (numel(c.shape(y)) != 1) y = reduce_sum(y);
  std::vector<Node> g;
  try {
    g = gradients(c.reshape(y, {}), std::span<const Node>(wrt));
  } catch (const GraphError& e) {
    c.unsupported(std::string("differentiating y '") + y_name + "': " + e.what());
  }
  for (std::size_t i = 0; i < g.size(); ++i) c.set(i, g[i]);
}

void adam(Ctx& c) {
  const OptimizerStep s = optimizer_inputs(c, 2);
  const float alpha = c.attr_f("alpha", 0.9f), beta = c.attr_f("beta", 0.999f),
              eps = c.attr_f("epsilon", 1e-6f), post = c.attr_f("norm_coefficient_post", 0.0f);
  // From the second step on, R * sqrt(1 - beta^T) / (1 - alpha^T) (bias correction); at T = 0
  // R (the corrected form divides 0 by 0 there, and where() does not take it).
  const auto power = [&](float base) { return exp(mul(s.T, c.constant(std::log(base)))); };
  Node one = c.constant(1.0f);
  Node corrected = div(mul(s.R, sqrt(sub(one, power(beta)))), sub(one, power(alpha)));
  Node r = where(greater(s.T, c.constant(0.0f)), corrected, s.R);
  for (std::size_t k = 0; k < s.n; ++k) {
    Node g = regularized_gradient(c, s, k);
    Node v = add(mul(c.f32(2 + 2 * s.n + k), c.constant(alpha)), mul(g, c.constant(1.0f - alpha)));
    Node h =
        add(mul(c.f32(2 + 3 * s.n + k), c.constant(beta)), mul(mul(g, g), c.constant(1.0f - beta)));
    Node x = sub(c.f32(2 + k), mul(r, div(v, add(sqrt(h), c.constant(eps)))));
    c.set(k, post == 0.0f ? x : mul(x, c.constant(1.0f - post)));
    c.set(s.n + k, v);
    c.set(2 * s.n + k, h);
  }
}

}  // namespace

void register_training_ops(std::vector<Handler>& h) {
  h.push_back({"Adagrad", 1, 1, adagrad, "ai.onnx.preview.training"});
  h.push_back({"Momentum", 1, 1, momentum, "ai.onnx.preview.training"});
  h.push_back({"Adam", 1, 1, adam, "ai.onnx.preview.training"});
  h.push_back({"Gradient", 1, 1, gradient, "ai.onnx.preview.training"});
}

}  // namespace hetgraph::onnx::imp
