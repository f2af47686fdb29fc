// SPDX-License-Identifier: Apache-2.0
// Fully connected and normalisation layers as compositions of graph ops (see
// include/hetgraph/layers.hpp).
#include "hetgraph/layers.hpp"

#include <cmath>
#include <string>

#include "compiler/dropout_mask.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::nn {

namespace {

/// x's mean over every axis but 1, kept as [1, C, 1...] so it broadcasts against x.
Node mean_but_channels(Node x, int rank) {
  Node m = reduce_mean(x, 0, true);
  for (int a = 2; a < rank; ++a) m = reduce_mean(m, a, true);
  return m;
}

/// [C] -> [1, C, 1...] of `rank` dims.
Node per_channel(Node v, std::int64_t channels, int rank) {
  std::vector<std::int64_t> shape{1, channels};
  for (int a = 2; a < rank; ++a) shape.push_back(1);
  return reshape(v, std::move(shape));
}

void require_node(Node x, const char* what) {
  if (!x.valid()) throw UsageError(std::string(what) + ": the input is an empty Node");
}

}  // namespace

Initializer initializer(Init kind, std::int64_t fan_in, std::int64_t fan_out, std::uint64_t seed) {
  if (fan_in < 1 || fan_out < 1)
    throw UsageError("initializer: fan-in and fan-out must be >= 1, got " + std::to_string(fan_in) +
                     " and " + std::to_string(fan_out));
  const bool he = kind == Init::he_uniform || kind == Init::he_normal;
  const double variance =
      he ? 2.0 / static_cast<double>(fan_in) : 2.0 / static_cast<double>(fan_in + fan_out);
  if (kind == Init::xavier_uniform || kind == Init::he_uniform) {
    const auto a = static_cast<float>(std::sqrt(3.0 * variance));
    return Initializer::uniform(-a, a, seed);
  }
  return Initializer::normal(0.0f, static_cast<float>(std::sqrt(variance)), seed);
}

namespace {

// FNV-1a of the name: a seed that is the same in every process and differs between layers.
std::uint64_t name_seed(const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

}  // namespace

Linear Linear::create(Graph& g, const std::string& name, std::int64_t in_features,
                      std::int64_t out_features, Init init, std::uint64_t seed, bool bias) {
  if (in_features < 1 || out_features < 1)
    throw UsageError("linear layer '" + name + "': in and out features must be >= 1, got " +
                     std::to_string(in_features) + " and " + std::to_string(out_features));
  Linear l;
  l.weight =
      g.variable(name + ".weight", {in_features, out_features},
                 initializer(init, in_features, out_features, seed != 0 ? seed : name_seed(name)));
  if (bias) l.bias = g.variable(name + ".bias", {out_features});
  l.in_features = in_features;
  l.out_features = out_features;
  return l;
}

Node Linear::operator()(Node x) const {
  require_node(x, "linear layer");
  if (!weight.valid()) throw UsageError("linear layer: not created (use Linear::create)");
  const Node y = matmul(x, weight);
  return bias.valid() ? y + bias : y;
}

std::vector<Node> Linear::parameters() const {
  if (bias.valid()) return {weight, bias};
  return {weight};
}

BatchNorm BatchNorm::create(Graph& g, const std::string& name, std::int64_t channels, int rank,
                            float momentum, float eps) {
  const std::string where = "batch norm '" + name + "': ";
  if (channels < 1)
    throw UsageError(where + "channels must be >= 1, got " + std::to_string(channels));
  if (rank < 2 || rank > 4)
    throw UsageError(where + "rank must be 2, 3 or 4, got " + std::to_string(rank));
  if (!(momentum >= 0.0f && momentum <= 1.0f))
    throw UsageError(where + "momentum must be in [0, 1], got " + std::to_string(momentum));
  if (!(eps > 0.0f)) throw UsageError(where + "eps must be > 0, got " + std::to_string(eps));
  BatchNorm bn;
  bn.gamma = g.variable(name + ".gamma", {channels}, Initializer::fill(1.0f));
  bn.beta = g.variable(name + ".beta", {channels});
  bn.running_mean = g.variable(name + ".running_mean", {channels});
  bn.running_var = g.variable(name + ".running_var", {channels}, Initializer::fill(1.0f));
  bn.channels = channels;
  bn.rank = rank;
  bn.momentum = momentum;
  bn.eps = eps;
  return bn;
}

Normalized BatchNorm::operator()(Node x, Mode mode) const {
  require_node(x, "batch norm");
  if (!gamma.valid()) throw UsageError("batch norm: not created (use BatchNorm::create)");
  const Node g = per_channel(gamma, channels, rank), b = per_channel(beta, channels, rank);
  if (mode == Mode::infer) {
    const Node a = g / sqrt(per_channel(running_var, channels, rank) + eps);
    return {x * a + (b - per_channel(running_mean, channels, rank) * a), Node{}};
  }
  const Node mean = mean_but_channels(x, rank);
  const Node centered = x - mean;
  const Node var = mean_but_channels(centered * centered, rank);  // biased, as PyTorch
  // y = x * a + (b - mean * a), a = g / sqrt(var + eps): the per-channel factors are [C]-sized,
  // so x takes two broadcasting passes forward (and autodiff's backward fewer than through
  // (x - mean) / std * g + b).
  const Node a = g / sqrt(var + eps);
  const Node y = x * a + (b - mean * a);
  // The running variance takes the unbiased estimate: var * n / (n - 1), n the elements per
  // channel, counted on channel 0's slice (1/C of a pass) since shapes are known only at
  // compile time. n = 1 leaves the running variance unchanged instead of dividing by zero.
  const Node n = reduce_sum(slice(x, 1, 0, 1) * 0.0f + 1.0f);
  const Node unbiased = reshape(var, {channels}) * (n / maximum(n - 1.0f, n * 0.0f + 1.0f));
  const Node m = reshape(mean, {channels});
  const float k = momentum;
  const Node new_var =
      where(cast(n - 1.0f, DType::i32), running_var * (1.0f - k) + unbiased * k, running_var);
  Node update = group(
      {assign(running_mean, running_mean * (1.0f - k) + m * k), assign(running_var, new_var)});
  return {y, update};
}

Node dropout(Node x, Node step, float p, std::uint64_t seed, Mode mode) {
  require_node(x, "dropout");
  if (mode == Mode::infer) {
    detail::dropout::check_rate(p);
    return x;
  }
  return hetgraph::dropout(x, step, p, seed);
}

Node layer_norm(Node x, Node gamma, Node beta, float eps) {
  require_node(x, "layer norm");
  if (!gamma.valid() || !beta.valid())
    throw UsageError("layer norm: gamma or beta is an empty Node");
  if (!(eps > 0.0f)) throw UsageError("layer norm: eps must be > 0, got " + std::to_string(eps));
  const Node mean = reduce_mean(x, -1, true);
  const Node centered = x - mean;
  const Node var = reduce_mean(centered * centered, -1, true);
  return centered / sqrt(var + eps) * gamma + beta;
}

}  // namespace hetgraph::nn
