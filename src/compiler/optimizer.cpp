// SPDX-License-Identifier: Apache-2.0
// Optimizers, learning-rate schedules and gradient clipping built into the graph (the public
// API of autodiff.hpp). An optimizer step is one optimizer_update node per variable
// (src/compiler/ops/optimizer.cpp), whose state tensors are zero-initialised variables named
// after the variable, plus the increment of the step counter: everything a resumed run needs
// is in variables, which checkpoints save.
#include <cmath>
#include <numbers>

#include "compiler/graph_impl.hpp"
#include "compiler/ops/builders.hpp"
#include "hetgraph/autodiff.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

using detail::GraphImpl;
using detail::OpKind;
using detail::OptimizerRule;

namespace {

struct RuleInfo {
  Optimizer::Rule rule;
  std::string_view name;
  std::array<std::string_view, 2> states;  // names of the state variables, "" for none
};
constexpr RuleInfo kRules[] = {
    {Optimizer::Rule::sgd, "sgd", {"", ""}},
    {Optimizer::Rule::momentum, "momentum", {"velocity", ""}},
    {Optimizer::Rule::nesterov, "nesterov", {"velocity", ""}},
    {Optimizer::Rule::adam, "adam", {"exp_avg", "exp_avg_sq"}},
    {Optimizer::Rule::adamw, "adamw", {"exp_avg", "exp_avg_sq"}},
    {Optimizer::Rule::rmsprop, "rmsprop", {"square_avg", ""}},
    {Optimizer::Rule::adagrad, "adagrad", {"sum", ""}},
};

const RuleInfo& info(Optimizer::Rule r) {
  for (const RuleInfo& i : kRules)
    if (i.rule == r) return i;
  throw UsageError("optimizer: unknown rule " + std::to_string(static_cast<int>(r)));
}

void check_hyper(const Optimizer& o) {
  const std::string what = "optimizer " + std::string(o.name()) + ": ";
  auto finite = [&](float v, std::string_view name) {
    if (!std::isfinite(v))
      throw UsageError(what + std::string(name) + " must be finite, got " + std::to_string(v));
  };
  for (auto [v, n] : {std::pair{o.learning_rate, "learning_rate"},
                      {o.momentum, "momentum"},
                      {o.dampening, "dampening"},
                      {o.beta1, "beta1"},
                      {o.beta2, "beta2"},
                      {o.alpha, "alpha"},
                      {o.eps, "eps"},
                      {o.weight_decay, "weight_decay"},
                      {o.clip_norm, "clip_norm"}}) {
    finite(v, n);
  }
  if (o.learning_rate < 0)
    throw UsageError(what + "the learning rate must be >= 0, got " +
                     std::to_string(o.learning_rate));
  if (o.weight_decay < 0)
    throw UsageError(what + "weight_decay must be >= 0, got " + std::to_string(o.weight_decay));
  if (o.eps < 0) throw UsageError(what + "eps must be >= 0, got " + std::to_string(o.eps));
  if (o.clip_norm < 0)
    throw UsageError(what + "clip_norm must be >= 0 (0: no clipping), got " +
                     std::to_string(o.clip_norm));
  auto unit = [&](float v, std::string_view name, bool open_top) {
    if (v < 0 || v > 1 || (open_top && v == 1))
      throw UsageError(what + std::string(name) + " must lie in [0, 1" + (open_top ? ")" : "]") +
                       ", got " + std::to_string(v));
  };
  unit(o.momentum, "momentum", false);
  unit(o.dampening, "dampening", false);
  unit(o.beta1, "beta1", true);
  unit(o.beta2, "beta2", true);
  unit(o.alpha, "alpha", false);
  if ((o.rule == Optimizer::Rule::momentum || o.rule == Optimizer::Rule::nesterov) &&
      o.momentum == 0)
    throw UsageError(what + "needs a momentum > 0 (use sgd for none)");
}

void check_variables(std::span<const Node> variables, std::string_view who) {
  if (variables.empty()) throw GraphError(std::string(who) + ": no variables to update");
  GraphImpl* g = detail::graph_of(variables.front());
  for (const Node& v : variables) {
    if (!v.valid()) throw GraphError(std::string(who) + ": an invalid node among the variables");
    detail::check_same_graph(g, v, who);
    if (g->rec(v.id()).op != OpKind::Variable)
      throw GraphError(std::string(who) + ": " + v.label() + " is not a variable");
    if (v.dtype() != DType::f32)
      throw GraphError(std::string(who) + ": " + v.label() + " is " +
                       std::string(dtype_name(v.dtype())) +
                       "; optimizers update float32 variables");
  }
  for (std::size_t i = 0; i < variables.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (variables[i] == variables[j])
        throw GraphError(std::string(who) + ": " + variables[i].label() + " is listed twice");
}

Node zero_variable(GraphImpl& g, const std::string& name, const Shape& shape) {
  detail::NodeRec r;
  r.op = OpKind::Variable;
  r.name = detail::fresh_name(g, name);
  r.shape = shape;
  return g.add(std::move(r));
}

// A float scalar argument (learning rate, step): one element, of this graph.
void check_scalar_node(const GraphImpl& g, const Node& n, std::string_view what) {
  if (!n.valid()) return;
  detail::check_same_graph(&g, n, what);
  if (n.dtype() != DType::f32) throw GraphError(std::string(what) + " must be a float node");
}

}  // namespace

Optimizer Optimizer::sgd(float lr, float weight_decay) {
  return {.rule = Rule::sgd, .learning_rate = lr, .weight_decay = weight_decay};
}
Optimizer Optimizer::momentum_sgd(float lr, float momentum, float weight_decay) {
  return {.rule = Rule::momentum,
          .learning_rate = lr,
          .momentum = momentum,
          .weight_decay = weight_decay};
}
Optimizer Optimizer::nesterov(float lr, float momentum, float weight_decay) {
  return {.rule = Rule::nesterov,
          .learning_rate = lr,
          .momentum = momentum,
          .weight_decay = weight_decay};
}
Optimizer Optimizer::adam(float lr, float weight_decay) {
  return {.rule = Rule::adam, .learning_rate = lr, .weight_decay = weight_decay};
}
Optimizer Optimizer::adamw(float lr, float weight_decay) {
  return {.rule = Rule::adamw, .learning_rate = lr, .weight_decay = weight_decay};
}
Optimizer Optimizer::rmsprop(float lr, float weight_decay) {
  return {.rule = Rule::rmsprop, .learning_rate = lr, .weight_decay = weight_decay};
}
Optimizer Optimizer::adagrad(float lr, float weight_decay) {
  return {.rule = Rule::adagrad, .learning_rate = lr, .eps = 1e-10f, .weight_decay = weight_decay};
}

Optimizer Optimizer::named(std::string_view name, float lr, float weight_decay) {
  if (name == "sgd") return sgd(lr, weight_decay);
  if (name == "momentum") return momentum_sgd(lr, 0.9f, weight_decay);
  if (name == "nesterov") return nesterov(lr, 0.9f, weight_decay);
  if (name == "adam") return adam(lr, weight_decay);
  if (name == "adamw") return adamw(lr, weight_decay);
  if (name == "rmsprop") return rmsprop(lr, weight_decay);
  if (name == "adagrad") return adagrad(lr, weight_decay);
  std::string known;
  for (const RuleInfo& i : kRules) known += (known.empty() ? "" : ", ") + std::string(i.name);
  throw UsageError("unknown optimizer '" + std::string(name) + "' (known: " + known + ")");
}

std::string_view Optimizer::name() const {
  return info(rule).name;
}

Node step_counter(Graph& graph, std::string name) {
  GraphImpl& g = detail::impl_of(graph);
  return zero_variable(g, name, Shape{});
}

Node apply_gradients(std::span<const Node> variables, std::span<const Node> grads,
                     const Optimizer& opt, const StepOptions& options) {
  check_hyper(opt);
  check_variables(variables, "apply_gradients");
  if (grads.size() != variables.size())
    throw GraphError("apply_gradients: " + std::to_string(variables.size()) + " variables but " +
                     std::to_string(grads.size()) + " gradients");
  GraphImpl& g = *detail::graph_of(variables.front());
  for (const Node& d : grads) detail::check_same_graph(&g, d, "apply_gradients");
  check_scalar_node(g, options.learning_rate, "apply_gradients: the learning rate");
  check_scalar_node(g, options.step, "apply_gradients: the step counter");
  if (options.step.valid() && g.rec(options.step.id()).op != OpKind::Variable)
    throw GraphError("apply_gradients: the step counter " + options.step.label() +
                     " must be a variable (step_counter)");

  const RuleInfo& ri = info(opt.rule);
  OptimizerRule rule{.kind = static_cast<OptimizerRule::Kind>(opt.rule),
                     .momentum = opt.momentum,
                     .dampening = opt.dampening,
                     .beta1 = opt.beta1,
                     .beta2 = opt.beta2,
                     .alpha = opt.alpha,
                     .eps = opt.eps,
                     .weight_decay = opt.weight_decay};
  const Node lr = options.learning_rate.valid() ? options.learning_rate
                                                : detail::scalar_constant(g, opt.learning_rate);
  Node step = options.step;
  if (!step.valid() && rule.uses_step()) step = zero_variable(g, "step", Shape{});

  std::vector<Node> gs(grads.begin(), grads.end());
  if (opt.clip_norm > 0) gs = clip_by_global_norm(gs, opt.clip_norm);

  std::vector<Node> updates;
  detail::Attrs at;
  at.set(rule);
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Node v = variables[i];
    const detail::InheritPin pin(g, g.rec(v.id()).pin);  // states and update with the variable
    std::vector<Node> in{v, gs[i], lr};
    if (rule.uses_step()) in.push_back(step);
    for (int s = 0; s < rule.states(); ++s) {
      in.push_back(
          zero_variable(g, v.name() + "/" + std::string(ri.states[s]), g.rec(v.id()).shape));
    }
    updates.push_back(detail::make_op(OpKind::OptimizerUpdate, in, at)
                          .named(detail::fresh_name(g, v.name() + "/" + std::string(ri.name))));
  }
  // The count moves on with the step; the updates read its old value (assign orders them).
  if (step.valid()) updates.push_back(assign(step, step + 1.0f));
  return group(updates);
}

Node minimize(Node loss, std::span<const Node> variables, const Optimizer& optimizer,
              const StepOptions& options) {
  check_hyper(optimizer);
  check_variables(variables, "minimize");
  return apply_gradients(variables, gradients(loss, variables), optimizer, options);
}

Node minimize(Node loss, std::span<const Node> variables, const Optimizer& optimizer,
              const StepOptions& options, const DataParallel& dp) {
  check_hyper(optimizer);
  check_variables(variables, "minimize");
  if (dp.bucket_bytes == 0) throw GraphError("minimize: DataParallel.bucket_bytes must be > 0");
  std::vector<Node> grads = gradients(loss, variables);
  if (dp.comm.size() > 1) grads = detail::average_gradients(variables, std::move(grads), dp);
  return apply_gradients(variables, grads, optimizer, options);
}

Node minimize(Node loss, std::initializer_list<Node> variables, const Optimizer& optimizer,
              const StepOptions& options, const DataParallel& dp) {
  return minimize(loss, std::span<const Node>(variables.begin(), variables.size()), optimizer,
                  options, dp);
}

Node minimize(Node loss, std::initializer_list<Node> variables, const Optimizer& optimizer,
              const StepOptions& options) {
  return minimize(loss, std::span<const Node>(variables.begin(), variables.size()), optimizer,
                  options);
}

// ---- schedules and clipping --------------------------------------------------------------

namespace {
void check_schedule_step(const Node& step, std::string_view who) {
  if (!step.valid()) throw GraphError(std::string(who) + ": invalid step node");
  if (step.dtype() != DType::f32) throw GraphError(std::string(who) + ": the step must be float");
}
Node scalar(const Node& like, float v) {
  return detail::scalar_constant(*detail::graph_of(like), v);
}
}  // namespace

Node step_decay(Node step, float lr, std::int64_t step_size, float gamma) {
  check_schedule_step(step, "step_decay");
  if (step_size <= 0)
    throw UsageError("step_decay: step_size must be > 0, got " + std::to_string(step_size));
  return lr * pow(scalar(step, gamma), floor(step * (1.0f / static_cast<float>(step_size))));
}

Node exponential_decay(Node step, float lr, float gamma) {
  check_schedule_step(step, "exponential_decay");
  return lr * pow(scalar(step, gamma), step);
}

Node cosine_decay(Node step, float lr, std::int64_t total_steps, float min_lr) {
  check_schedule_step(step, "cosine_decay");
  if (total_steps <= 0)
    throw UsageError("cosine_decay: total_steps must be > 0, got " + std::to_string(total_steps));
  const float total = static_cast<float>(total_steps);
  const Node phase = minimum(step, scalar(step, total)) * (std::numbers::pi_v<float> / total);
  return min_lr + (0.5f * (lr - min_lr)) * (1.0f + cos(phase));
}

Node linear_warmup(Node step, Node lr, std::int64_t warmup_steps) {
  check_schedule_step(step, "linear_warmup");
  if (warmup_steps <= 0)
    throw UsageError("linear_warmup: warmup_steps must be > 0, got " +
                     std::to_string(warmup_steps));
  const Node ramp = (step + 1.0f) * (1.0f / static_cast<float>(warmup_steps));
  return lr * minimum(ramp, scalar(step, 1.0f));
}

std::vector<Node> clip_by_global_norm(std::span<const Node> grads, float max_norm) {
  if (grads.empty()) return {};
  if (!(max_norm > 0) || !std::isfinite(max_norm))
    throw UsageError("clip_by_global_norm: max_norm must be finite and > 0, got " +
                     std::to_string(max_norm));
  Node sq;
  for (const Node& d : grads) {
    const Node s = reduce_sum(d * d);
    sq = sq.valid() ? sq + s : s;
  }
  const Node norm = sqrt(sq);
  const Node factor = max_norm / maximum(norm, scalar(norm, max_norm));
  std::vector<Node> out;
  for (const Node& d : grads) out.push_back(d * factor);
  return out;
}

}  // namespace hetgraph
