// SPDX-License-Identifier: Apache-2.0
#include "workloads.hpp"

#include <algorithm>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <regex>

#include "builders.hpp"

namespace bench {

using namespace hetgraph;

std::vector<float> random_data(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

namespace {

// One matmul node, M x K times K x N.
// One matmul node: [m, k] x [k, n], or with `batch` > 0 a batch of [m, k] times one shared
// [k, n] (a sequence times its weights), which runs as one batched product.
Case matmul_node(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t batch = 0) {
  Case c;
  auto a = c.graph.input("a"), b = c.graph.input("b");
  auto y = matmul(a, b);
  const std::int64_t bm = std::max<std::int64_t>(batch, 1) * m;
  c.shapes = {{"a", batch > 0 ? Shape{batch, m, k} : Shape{m, k}}, {"b", {k, n}}};
  c.fetches = {y};
  c.checksum = {y};
  c.inputs["a"] = random_data(static_cast<std::size_t>(bm * k), 1);
  c.inputs["b"] = random_data(static_cast<std::size_t>(k * n), 2);
  c.runs_per_sample = static_cast<int>(std::max<std::int64_t>(1, 20'000'000 / (2 * bm * n * k)));
  c.stats["gflop"] = 2.0 * static_cast<double>(bm * n * k) * 1e-9;
  return c;
}

// One top_k node over the rows of [rows, n] (largest first): random rows, or rows sorted
// ascending (each row's largest values last), the order a scan from the front finds them late.
Case top_k_node(std::int64_t rows, std::int64_t n, std::int64_t k, bool sorted) {
  Case c;
  auto x = c.graph.input("x");
  auto y = cast(top_k_indices(x, k, 1, true), DType::f32);  // (the checksum reads floats)
  c.shapes = {{"x", {rows, n}}};
  c.fetches = {y};
  c.checksum = {y};
  std::vector<float> v = random_data(static_cast<std::size_t>(rows * n), 3);
  if (sorted) {
    for (std::int64_t r = 0; r < rows; ++r) std::sort(v.begin() + r * n, v.begin() + (r + 1) * n);
  }
  c.inputs["x"] = std::move(v);
  c.runs_per_sample = static_cast<int>(std::max<std::int64_t>(1, 2'000'000 / (rows * n)));
  c.stats["elements"] = static_cast<double>(rows * n);
  return c;
}

// The same product through dnnl_sgemm: the speed a matmul node should match.
Case raw_sgemm(std::int64_t m, std::int64_t k, std::int64_t n) {
  Case c = matmul_node(m, k, n);
  auto a = std::make_shared<std::vector<float>>(c.inputs["a"]);
  auto b = std::make_shared<std::vector<float>>(c.inputs["b"]);
  auto out = std::make_shared<std::vector<float>>(static_cast<std::size_t>(m * n));
  c.raw = [=] {
    dnnl_sgemm('N', 'N', m, n, k, 1.0f, a->data(), k, b->data(), n, 0.0f, out->data(), n);
  };
  c.raw_checksum = [out] {
    double s = 0;
    for (float v : *out) s += v;
    return s;
  };
  return c;
}

// One epoch (60000 / 500 training steps) of the MNIST softmax model on synthetic data of the
// real shape; the batch stays in the mapped buffers (compute only).
Case mnist_softmax() {
  Case c = mnist_softmax_step({});
  c.runs_per_sample = 120;
  c.stats["steps_per_sample"] = 120;
  return c;
}

// N branches log(x @ y), x[200,100], y[100,200], summed by a binary tree to one [200,200].
// The values summed as a balanced tree of adds (pairs, then pairs of sums, ...).
Node pairwise_sum(std::vector<Node> level) {
  while (level.size() > 1) {
    std::vector<Node> next;
    for (std::size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(level[i] + level[i + 1]);
    if (level.size() % 2) next.push_back(level.back());
    level = std::move(next);
  }
  return level[0];
}

Case par_matmul(int n) {
  Case c;
  Graph& g = c.graph;
  auto x = g.input("x"), y = g.input("y");
  std::vector<Node> level;
  for (int i = 0; i < n; ++i) level.push_back(log(matmul(x, y)));
  const Node sum = pairwise_sum(std::move(level));
  c.shapes = {{"x", {200, 100}}, {"y", {100, 200}}};
  c.fetches = {sum};
  c.checksum = {sum};
  c.inputs["x"] = random_data(200 * 100, 4, 0.0f, 1.0f);
  c.inputs["y"] = random_data(100 * 200, 5, 0.0f, 1.0f);
  c.stats["gflop"] = 2.0 * 200 * 200 * 100 * n * 1e-9;
  return c;
}

// stack_shared_products' case: `count` independent products x_i W (x_i fed, [m, k]; W a
// variable [k, n]), summed pairwise into one fetched [m, n] value.
Case shared_matmul(int count, std::int64_t m, std::int64_t k, std::int64_t n) {
  Case c;
  Graph& g = c.graph;
  auto W = g.variable("W", {k, n}, Initializer::uniform(-0.05f, 0.05f, 7));
  std::vector<Node> level;
  for (int i = 0; i < count; ++i) {
    const std::string name = "x" + std::to_string(i);
    level.push_back(matmul(g.input(name), W));
    c.shapes.push_back({name, {m, k}});
    c.inputs[name] =
        random_data(static_cast<std::size_t>(m * k), 300 + static_cast<std::uint32_t>(i));
  }
  c.fetches = {pairwise_sum(std::move(level))};
  c.checksum = c.fetches;
  c.stats["gflop"] = 2.0 * static_cast<double>(m * k * n) * count * 1e-9;
  return c;
}

}  // namespace

Case mnist_softmax_step(const Training& t) {
  Case c;
  Graph& g = c.graph;
  const std::int64_t B = t.local(500);
  auto x = g.input("x");
  auto y = g.input("y", DType::i32);
  auto W = g.variable("W", {784, 10});
  auto b = g.variable("b", {10});
  auto loss = reduce_mean(cross_entropy(softmax(matmul(x, W) + b), y));
  const Node params[] = {W, b};
  auto step = t.step(loss, params, 0.1f);
  c.shapes = {{"x", {B, 784}}, {"y", {B}}};
  c.fetches = {loss, step};
  c.checksum = {loss};
  c.inputs["x"] = random_data(static_cast<std::size_t>(B) * 784, 3, 0.0f, 1.0f);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(B));
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>(i % 10);
  c.int_inputs["y"] = labels;
  c.stats["batch"] = static_cast<double>(B);
  return c;
}

namespace {
// The LSTM's state update from its gate pre-activations [batch, 4H] (input, forget, cell,
// output gates side by side).
LstmState lstm_update(Node gates, const LstmState& s, std::int64_t H) {
  auto i = sigmoid(slice(gates, 1, 0, H));
  auto f = sigmoid(slice(gates, 1, H, 2 * H));
  auto gg = tanh(slice(gates, 1, 2 * H, 3 * H));
  auto o = sigmoid(slice(gates, 1, 3 * H, 4 * H));
  const Node c = f * s.c + i * gg;
  return {o * tanh(c), c};
}
}  // namespace

LstmState lstm_cell(Node x, const LstmState& s, Node W, Node b, std::int64_t H) {
  return lstm_update(matmul(concat({x, s.h}, 1), W) + b, s, H);
}

Case recurrent_training_step(int seq, int hidden, RecurrentCell& cell, const Training& tr,
                             bool train, std::int64_t batch) {
  Case c;
  Graph& g = c.graph;
  constexpr int kLayers = 4, kClasses = 10;
  const std::int64_t kBatch = tr.local(batch);
  const std::int64_t H = hidden;
  std::vector<Node> xs, ys;
  for (int t = 0; t < seq; ++t) {
    xs.push_back(g.input("x" + std::to_string(t)));
    c.shapes.push_back({"x" + std::to_string(t), {kBatch, H}});
    c.inputs["x" + std::to_string(t)] =
        random_data(static_cast<std::size_t>(kBatch * H), 100 + static_cast<std::uint32_t>(t));
    if (!train) continue;
    ys.push_back(g.input("y" + std::to_string(t), DType::i32));
    c.shapes.push_back({"y" + std::to_string(t), {kBatch}});
    std::vector<std::int32_t> lab(kBatch);
    for (int i = 0; i < kBatch; ++i) lab[static_cast<std::size_t>(i)] = (i * 7 + t) % kClasses;
    c.int_inputs["y" + std::to_string(t)] = lab;
  }
  std::vector<Node> params;
  const float scale = 1.0f / std::sqrt(static_cast<float>(2 * H));
  std::vector<Node> Ws, bs;
  for (int l = 0; l < kLayers; ++l) {
    Ws.push_back(
        g.variable("W" + std::to_string(l), {2 * H, 4 * H},
                   Initializer::uniform(-scale, scale, 10 + static_cast<std::uint64_t>(l))));
    bs.push_back(g.variable("b" + std::to_string(l), {4 * H}));
    params.push_back(Ws.back());
    params.push_back(bs.back());
  }
  auto Wout = g.variable("Wout", {H, kClasses}, Initializer::uniform(-scale, scale, 99));
  auto bout = g.variable("bout", {kClasses});
  params.push_back(Wout);
  params.push_back(bout);
  cell.setup(c, kLayers, seq, kBatch, H, params);
  auto zeros =
      g.constant(Shape{kBatch, H}, std::vector<float>(static_cast<std::size_t>(kBatch * H), 0.0f));
  std::vector<LstmState> state(kLayers, LstmState{zeros, zeros});
  std::vector<Node> losses, probs;
  for (int t = 0; t < seq; ++t) {
    Node in = xs[static_cast<std::size_t>(t)];
    for (int l = 0; l < kLayers; ++l) {
      const auto L = static_cast<std::size_t>(l);
      state[L] = cell.step(l, t, in, state[L], Ws[L], bs[L], H);
      in = state[L].h;
    }
    probs.push_back(softmax(matmul(in, Wout) + bout));
    if (train)
      losses.push_back(reduce_mean(cross_entropy(probs.back(), ys[static_cast<std::size_t>(t)])));
  }
  if (!train) {  // inference: every step's class probabilities, [seq * batch, classes]
    c.fetches = {concat(std::span<const Node>(probs), 0).named("probs")};
    c.checksum = c.fetches;
    c.stats["seq"] = seq;
    c.stats["hidden"] = hidden;
    return c;
  }
  Node loss = losses[0];
  for (std::size_t t = 1; t < losses.size(); ++t) loss = loss + losses[t];
  loss = loss * (1.0f / static_cast<float>(seq));
  auto step = tr.step(loss, params, 0.01f);
  c.fetches = {loss, step};
  c.checksum = {loss};
  c.stats["batch"] = static_cast<double>(kBatch);
  c.stats["seq"] = seq;
  c.stats["hidden"] = hidden;
  return c;
}

Case lstm_training(int seq, int hidden, const Training& t, bool train) {
  struct Lstm final : RecurrentCell {
    LstmState step(int, int, Node x, const LstmState& s, Node W, Node b, std::int64_t H) override {
      return lstm_cell(x, s, W, b, H);
    }
  } cell;
  return recurrent_training_step(seq, hidden, cell, t, train);
}

// torch.nn.LSTM's form of the cell: x W_ih + h W_hh + b with separate input and recurrent
// weights per layer (the fused [2H, 4H] W goes unused). Layer 0's x_t W_ih are independent of
// each other, so stack_shared_products can make them one GEMM.
struct SplitLstm final : RecurrentCell {
  std::vector<Node> w_ih, w_hh;
  void setup(Case& c, int layers, int, std::int64_t, std::int64_t H,
             std::vector<Node>& params) override {
    const float scale = 1.0f / std::sqrt(static_cast<float>(2 * H));
    for (int l = 0; l < layers; ++l) {
      const auto seed = 200 + 2 * static_cast<std::uint64_t>(l);
      w_ih.push_back(c.graph.variable("W_ih" + std::to_string(l), {H, 4 * H},
                                      Initializer::uniform(-scale, scale, seed)));
      w_hh.push_back(c.graph.variable("W_hh" + std::to_string(l), {H, 4 * H},
                                      Initializer::uniform(-scale, scale, seed + 1)));
      params.push_back(w_ih.back());
      params.push_back(w_hh.back());
    }
  }
  LstmState step(int layer, int, Node x, const LstmState& s, Node, Node b,
                 std::int64_t H) override {
    const auto L = static_cast<std::size_t>(layer);
    return lstm_update(matmul(x, w_ih[L]) + matmul(s.h, w_hh[L]) + b, s, H);
  }
};

// Scheduler overhead: n independent tiny nodes (one float each).
Case threadpool_independent(int n) {
  Case c;
  Graph& g = c.graph;
  auto x = g.input("x");
  for (int i = 0; i < n; ++i) c.fetches.push_back(x * static_cast<float>(i % 7 + 1));
  c.shapes = {{"x", {1}}};
  c.inputs["x"] = {0.5f};
  c.checksum = {c.fetches.front()};
  c.stats["tasks"] = n;
  return c;
}

namespace {

// A 4-layer LSTM training step from primitive ops (concat, matmul, add, slice, sigmoid,
// tanh, mul), batch 64: forward over the sequence, a softmax classifier on every step's
// top-layer output, mean cross-entropy, autodiff backward, SGD. Input size = hidden size.
Case lstm(int seq, int hidden, bool train = true) {
  return lstm_training(seq, hidden, {}, train);
}

// Scheduler overhead: a layered random DAG of tiny nodes, each reading one or two nodes of
// the layer before.
Case threadpool_dag(int layers, int width) {
  Case c;
  Graph& g = c.graph;
  std::mt19937 rng(7);
  auto x = g.input("x");
  std::vector<Node> prev(static_cast<std::size_t>(width), x);
  for (int l = 0; l < layers; ++l) {
    std::vector<Node> cur;
    for (int i = 0; i < width; ++i) {
      const Node a = prev[rng() % prev.size()];
      cur.push_back(rng() % 2 ? a * 0.5f : a + prev[rng() % prev.size()]);
    }
    prev = std::move(cur);
  }
  c.fetches = prev;
  c.shapes = {{"x", {1}}};
  c.inputs["x"] = {0.25f};
  c.checksum = {prev.front()};
  c.stats["tasks"] = static_cast<double>(layers) * width;
  return c;
}

// Scheduler overhead: a chain of n tiny nodes, each reading the one before (no parallelism:
// what a node costs when its producer readies it).
Case threadpool_chain(int n) {
  Case c;
  Graph& g = c.graph;
  auto x = g.input("x");
  Node y = x;
  for (int i = 0; i < n; ++i) y = y * (i % 2 ? 2.0f : 0.5f);
  c.fetches = {y};
  c.shapes = {{"x", {1}}};
  c.inputs["x"] = {0.5f};
  c.checksum = {y};
  c.stats["tasks"] = n;
  return c;
}

// The cost of crossing devices (issue 13): a chain of `hops` negations of n floats, half
// pinned to the OpenCL device and half to the CPU. `alternate`: the pins alternate, so every
// link is a crossing (hops crossings); else the first half runs on the device and the second
// on the CPU (2 crossings). Both do the same work on each device, so (t_alternate - t_blocks) /
// (hops - 2) is what one crossing of n * 4 bytes costs, its transfer and synchronisation. On
// one device the pins are ignored.
Case pingpong(std::int64_t n, int hops, bool alternate) {
  Case c;
  Graph& g = c.graph;
  const Device gpu =
      Platform::opencl_available() ? Platform::opencl().devices().front() : Device::opencl(0, 0);
  auto x = g.input("x").on(Device::cpu());
  Node y = x;
  for (int i = 0; i < hops; ++i) {
    const bool on_gpu = alternate ? i % 2 == 0 : i < hops / 2;
    y = neg(y).on(on_gpu ? gpu : Device::cpu());
  }
  c.shapes = {{"x", {n}}};
  c.fetches = {y};
  c.checksum = {y};
  c.inputs["x"] = random_data(static_cast<std::size_t>(n), 11);
  c.runs_per_sample = static_cast<int>(std::clamp<std::int64_t>(4'000'000 / n, 1, 200));
  c.stats["bytes"] = static_cast<double>(n) * 4;
  c.stats["hops"] = hops;
  c.stats["crossings"] = alternate ? hops : 2;
  return c;
}

bool parse_mkn(const std::string& s, const std::string& prefix, std::int64_t& m, std::int64_t& k,
               std::int64_t& n) {
  std::smatch mt;
  const std::regex re(prefix + "-([0-9]+)x([0-9]+)x([0-9]+)");
  if (!std::regex_match(s, mt, re)) return false;
  m = std::stoll(mt[1]);
  k = std::stoll(mt[2]);
  n = std::stoll(mt[3]);
  return true;
}

}  // namespace

std::optional<Workload> find_workload(const std::string& name) {
  if (auto zoo = find_zoo_workload(name)) return zoo;
  std::int64_t m = 0, k = 0, n = 0;
  if (parse_mkn(name, "matmul", m, k, n))
    return Workload{name, "one matmul node", [=] { return matmul_node(m, k, n); }};
  std::smatch bm;
  if (std::regex_match(name, bm,
                       std::regex("batched-matmul-([0-9]+)x([0-9]+)x([0-9]+)x([0-9]+)"))) {
    const std::int64_t b = std::stoll(bm[1]);
    m = std::stoll(bm[2]), k = std::stoll(bm[3]), n = std::stoll(bm[4]);
    return Workload{name, "one matmul node: a batch of B [M, K] times one shared [K, N]",
                    [=] { return matmul_node(m, k, n, b); }};
  }
  if (parse_mkn(name, "sgemm", m, k, n)) {
    return Workload{name, "raw dnnl_sgemm of the same shape", [=] { return raw_sgemm(m, k, n); }};
  }
  if (name == "mnist-softmax")
    return Workload{name, "one epoch of MNIST softmax training", mnist_softmax};
  std::smatch mo;
  if (std::regex_match(name, mo, std::regex("mnist-softmax-([a-z]+)"))) {
    const hetgraph::Optimizer o = hetgraph::Optimizer::named(mo[1].str(), 0.1f);
    return Workload{name, "one epoch of MNIST softmax training with " + mo[1].str(), [o] {
                      Case c = mnist_softmax_step({.optimizer = o});
                      c.runs_per_sample = 120;
                      c.stats["steps_per_sample"] = 120;
                      return c;
                    }};
  }
  std::smatch mt;
  if (std::regex_match(name, mt, std::regex("top-k-([0-9]+)x([0-9]+)-([0-9]+)(-sorted)?"))) {
    const std::int64_t rows = std::stoll(mt[1]), n = std::stoll(mt[2]), k = std::stoll(mt[3]);
    const bool sorted = mt[4].matched;
    return Workload{name,
                    std::string("one top_k node (largest K of each row of R x N") +
                        (sorted ? ", rows sorted ascending)" : ", random)"),
                    [=] { return top_k_node(rows, n, k, sorted); }};
  }
  if (std::regex_match(name, mt, std::regex("par-matmul-([0-9]+)"))) {
    const int branches = std::stoi(mt[1]);
    return Workload{name, "parallel matmul branches + tree sum",
                    [=] { return par_matmul(branches); }};
  }
  if (std::regex_match(name, mt, std::regex("pingpong(-blocks)?-([0-9]+)"))) {
    const std::int64_t floats = std::stoll(mt[2]);
    const bool alternate = !mt[1].matched;
    return Workload{name,
                    alternate ? "8 negations of N floats alternating between OpenCL and CPU"
                              : "4 negations of N floats on OpenCL, then 4 on the CPU",
                    [=] { return pingpong(floats, 8, alternate); }};
  }
  if (std::regex_match(name, mt, std::regex("lstm-([0-9]+)x([0-9]+)"))) {
    const int seq = std::stoi(mt[1]), hidden = std::stoi(mt[2]);
    return Workload{name, "4-layer LSTM step, seq x hidden", [=] { return lstm(seq, hidden); }};
  }
  if (name == "lstm-small")
    return Workload{name, "4-layer LSTM step, seq 20, hidden 128", [] { return lstm(20, 128); }};
  if (name == "lstm-medium")
    return Workload{name, "4-layer LSTM step, seq 30, hidden 512", [] { return lstm(30, 512); }};
  if (name == "lstm-large")
    return Workload{name, "4-layer LSTM step, seq 40, hidden 1024", [] { return lstm(40, 1024); }};
  if (name == "lstm-infer-small")
    return Workload{name, "4-layer LSTM forward (inference), seq 20, hidden 128",
                    [] { return lstm(20, 128, false); }};
  if (name == "lstm-infer-medium")
    return Workload{name, "4-layer LSTM forward (inference), seq 30, hidden 512",
                    [] { return lstm(30, 512, false); }};
  if (parse_mkn(name, "shared-matmul", m, k, n)) {
    return Workload{name, "30 independent [M, K] x [K, N] products of one W, summed",
                    [=] { return shared_matmul(30, m, k, n); }};
  }
  if (name == "lstm-split-infer-b1") {
    return Workload{
        name, "4-layer LSTM forward at batch 1, x W_ih + h W_hh form, seq 30, hidden 512", [] {
          SplitLstm cell;
          return recurrent_training_step(30, 512, cell, {}, false, 1);
        }};
  }
  if (name == "threadpool")
    return Workload{name, "10,000 independent tiny nodes",
                    [] { return threadpool_independent(10000); }};
  if (name == "threadpool-dag") {
    return Workload{name, "100,000-node layered random DAG of tiny nodes",
                    [] { return threadpool_dag(100, 1000); }};
  }
  if (name == "threadpool-chain")
    return Workload{name, "a chain of 10,000 tiny nodes", [] { return threadpool_chain(10000); }};
  return std::nullopt;
}

std::vector<hetgraph::FeedItem> mapped_feeds(const Case& c, hetgraph::CompiledGraph& cg) {
  std::vector<hetgraph::FeedItem> feeds;
  for (const auto& [name, data] : c.inputs) {
    auto buf = cg.mapped_input(name);
    std::copy(data.begin(), data.end(), buf.begin());
    feeds.push_back({name, buf});
  }
  for (const auto& [name, data] : c.int_inputs) {
    auto buf = cg.mapped_input_i32(name);
    std::copy(data.begin(), data.end(), buf.begin());
    feeds.push_back({name, buf});
  }
  return feeds;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names{"matmul-MxKxN",        "batched-matmul-BxMxKxN",
                                 "sgemm-MxKxN",         "shared-matmul-MxKxN",
                                 "mnist-softmax",       "mnist-softmax-RULE",
                                 "par-matmul-N",        "pingpong-N",
                                 "pingpong-blocks-N",   "lstm-small",
                                 "lstm-medium",         "lstm-large",
                                 "lstm-infer-small",    "lstm-infer-medium",
                                 "lstm-split-infer-b1", "threadpool",
                                 "threadpool-dag",      "threadpool-chain",
                                 "top-k-RxN-K[-sorted]"};
  for (std::string& z : zoo_workload_names()) names.push_back(std::move(z));
  return names;
}

}  // namespace bench
