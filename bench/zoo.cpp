// SPDX-License-Identifier: Apache-2.0
// The workload zoo (DESIGN.md's table): Phased LSTM, PathNet and GoogLeNet-style inception
// training steps, wide & deep inference and training, the baseline report's single-kernel
// timings (setup / copy / compute), the guidelines paper's 10,000-task thread-pool test, and
// single convolution / pooling nodes next to raw oneDNN doing the same.
//
// Sizes follow DESIGN.md and the Graphi paper's Table 1. Large sizes (and inception-medium) do
// not fit this machine's time budget; they stay runnable by name.
#include <cmath>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <regex>

#include "builders.hpp"
#include "workloads.hpp"

namespace bench {

using namespace hetgraph;

namespace {

// He-style initial weights for a layer reading `fan_in` values.
Initializer he(std::int64_t fan_in, std::uint64_t seed) {
  return Initializer::normal(0.0f, std::sqrt(2.0f / static_cast<float>(fan_in)), seed);
}

std::vector<std::int32_t> labels(std::int64_t n, int classes, int salt) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7 + salt) % classes);
  return v;
}

// ---- phased-lstm-S --------------------------------------------------------------------------

// The Phased LSTM cell (Neil et al. 2016) as TensorFlow's PhasedLSTMCell computes it, on the
// same fused gates as the LSTM: the LSTM's new state (c~, h~) passes through a time gate
//   phi = mod(t - shift, period) / period                 (cycle ratio, per unit)
//   k   = 2 phi / r_on           if phi < r_on / 2
//         2 - 2 phi / r_on       if phi < r_on
//         leak * phi             otherwise
//   c = k c~ + (1 - k) c,  h = k h~ + (1 - k) h
// with trainable period and shift per unit, r_on = 0.05 and leak = 0.001 (TensorFlow's
// defaults); each step's timestamps t [batch, 1] are inputs. phi = z - floor(z) for
// z = (t - shift) / period; floor passes no gradient, which gives exactly TensorFlow's
// floor-mod gradients. The branches are selected by the steps floor(phi - a + 1) (1 when
// phi >= a), exact for phi in [0, 1). Periods start uniform in [1, 1000) (TensorFlow draws
// them log-uniform there), shifts uniform in [0, 1000).
class PhasedLstm final : public RecurrentCell {
 public:
  void setup(Case& c, int layers, int seq, std::int64_t batch, std::int64_t hidden,
             std::vector<Node>& params) override {
    Graph& g = c.graph;
    for (int l = 0; l < layers; ++l) {
      const auto s = static_cast<std::uint64_t>(l);
      period_.push_back(g.variable("period" + std::to_string(l), {hidden},
                                   Initializer::uniform(1.0f, 1000.0f, 200 + s)));
      shift_.push_back(g.variable("shift" + std::to_string(l), {hidden},
                                  Initializer::uniform(0.0f, 1000.0f, 300 + s)));
      params.push_back(period_.back());
      params.push_back(shift_.back());
    }
    for (int t = 0; t < seq; ++t) {
      // Asynchronous events: step t of sample b happens at t + jitter.
      const std::string name = "time" + std::to_string(t);
      times_.push_back(g.input(name));
      c.shapes.push_back({name, {batch, 1}});
      std::vector<float> ts = random_data(static_cast<std::size_t>(batch),
                                          400 + static_cast<std::uint32_t>(t), 0.0f, 1.0f);
      for (float& v : ts) v += static_cast<float>(t);
      c.inputs[name] = std::move(ts);
    }
  }

  LstmState step(int layer, int t, Node x, const LstmState& s, Node W, Node b,
                 std::int64_t hidden) override {
    const LstmState next = lstm_cell(x, s, W, b, hidden);
    const auto L = static_cast<std::size_t>(layer);
    const Node z = (times_[static_cast<std::size_t>(t)] - shift_[L]) / period_[L];  // [batch, H]
    const Node phi = z - floor(z);
    const Node up = phi * (2.0f / kRatioOn);
    const Node down = 2.0f - up;
    const Node closed = phi * kLeak;
    const Node past_half = floor(phi + (1.0f - 0.5f * kRatioOn));  // 1 when phi >= r_on / 2
    const Node past_on = floor(phi + (1.0f - kRatioOn));           // 1 when phi >= r_on
    const Node k = up + past_half * (down - up) + past_on * (closed - down);
    return {s.h + k * (next.h - s.h), s.c + k * (next.c - s.c)};
  }

 private:
  static constexpr float kRatioOn = 0.05f, kLeak = 0.001f;
  std::vector<Node> period_, shift_, times_;
};

Case phased_lstm(int seq, int hidden) {
  PhasedLstm cell;
  Case c = recurrent_training_step(seq, hidden, cell);
  return c;
}

// ---- pathnet-S ------------------------------------------------------------------------------

// PathNet (Fernando et al. 2017) as the Graphi paper runs it: 3 layers of 6 parallel modules,
// each a 3x3 convolution (padding 1, bias), relu and 2x2 max pooling; the modules of a layer
// are summed (a pairwise tree) into the next layer's input; then a linear softmax classifier
// over 10 classes. Training step (autodiff, SGD 0.01), batch 64, 3-channel images.
Case pathnet(int image, int neurons) {
  Case c;
  Graph& g = c.graph;
  constexpr int kBatch = 64, kLayers = 3, kModules = 6, kClasses = 10;
  auto x = g.input("x");
  auto y = g.input("y", DType::i32);
  c.shapes = {{"x", {kBatch, 3, image, image}}, {"y", {kBatch}}};
  c.inputs["x"] = random_data(static_cast<std::size_t>(kBatch) * 3 * image * image, 1);
  c.int_inputs["y"] = labels(kBatch, kClasses, 0);
  std::vector<Node> params;
  Node in = x;
  std::int64_t channels = 3, size = image;
  for (int l = 0; l < kLayers; ++l) {
    std::vector<Node> modules;
    for (int m = 0; m < kModules; ++m) {
      const std::string id = std::to_string(l) + "_" + std::to_string(m);
      // He initialisation shrunk by sqrt(6): the six module outputs are summed.
      auto W =
          g.variable("W" + id, {neurons, channels, 3, 3},
                     Initializer::normal(
                         0.0f, std::sqrt(2.0f / (9.0f * static_cast<float>(channels) * kModules)),
                         static_cast<std::uint64_t>(10 * l + m)));
      auto b = g.variable("b" + id, {neurons});
      params.push_back(W);
      params.push_back(b);
      modules.push_back(max_pool2d(relu(conv2d(in, W, b, {.padding = {1, 1}}))));
    }
    while (modules.size() > 1) {
      std::vector<Node> next;
      for (std::size_t i = 0; i + 1 < modules.size(); i += 2)
        next.push_back(modules[i] + modules[i + 1]);
      if (modules.size() % 2) next.push_back(modules.back());
      modules = std::move(next);
    }
    in = modules[0];
    channels = neurons;
    size /= 2;
  }
  const std::int64_t features = channels * size * size;
  auto Wc = g.variable("Wc", {features, kClasses}, he(features, 99));
  auto bc = g.variable("bc", {kClasses});
  params.push_back(Wc);
  params.push_back(bc);
  auto loss =
      reduce_mean(cross_entropy(softmax(matmul(reshape(in, {kBatch, features}), Wc) + bc), y));
  c.fetches = {loss, sgd(loss, params, 0.01f)};
  c.checksum = {loss};
  c.stats["image"] = image;
  c.stats["neurons"] = neurons;
  return c;
}

// ---- inception-S ----------------------------------------------------------------------------

// GoogLeNet (Szegedy et al. 2015) with every filter count multiplied by `width`: a stem
// (7x7/2 convolution, 3x3/2 max pool, 1x1 and 3x3 convolutions, 3x3/2 max pool), nine
// inception blocks (3a-b, 4a-e, 5a-b, with 3x3/2 max pools between the groups), a global
// average pool and a 1000-way softmax classifier; no auxiliary classifiers or LRN. A block
// concatenates four branches along the channels: 1x1; 1x1 -> 3x3; 1x1 -> 5x5; 3x3/1 max pool
// -> 1x1. Every convolution has a bias and a relu. Training step, batch 32.
class Inception {
 public:
  Inception(Graph& g, int width) : g_(g), w_(width) {}

  Node conv(Node x, std::int64_t in, std::int64_t out, int k, int stride = 1) {
    const std::string id = std::to_string(params_.size() / 2);
    auto W = g_.variable("W" + id, {out, in, k, k}, he(in * k * k, params_.size()));
    auto b = g_.variable("b" + id, {out});
    params_.push_back(W);
    params_.push_back(b);
    return relu(conv2d(x, W, b, {.stride = {stride, stride}, .padding = {k / 2, k / 2}}));
  }
  static Node pool(Node x, int stride) {
    return max_pool2d(x, {.kernel = {3, 3}, .stride = {stride, stride}, .padding = {1, 1}});
  }
  // One inception block; returns its output and sets `channels` to its width.
  Node block(Node x, std::int64_t& channels, int b1, int b3r, int b3, int b5r, int b5, int bp) {
    const std::int64_t in = channels;
    auto one = conv(x, in, w_ * b1, 1);
    auto three = conv(conv(x, in, w_ * b3r, 1), w_ * b3r, w_ * b3, 3);
    auto five = conv(conv(x, in, w_ * b5r, 1), w_ * b5r, w_ * b5, 5);
    auto proj = conv(pool(x, 1), in, w_ * bp, 1);
    channels = w_ * (b1 + b3 + b5 + bp);
    return concat({one, three, five, proj}, 1);
  }
  std::vector<Node>& params() { return params_; }

 private:
  Graph& g_;
  std::int64_t w_;
  std::vector<Node> params_;
};

Case inception(int image, int width) {
  Case c;
  Graph& g = c.graph;
  constexpr int kBatch = 32, kClasses = 1000;
  auto x = g.input("x");
  auto y = g.input("y", DType::i32);
  c.shapes = {{"x", {kBatch, 3, image, image}}, {"y", {kBatch}}};
  c.inputs["x"] = random_data(static_cast<std::size_t>(kBatch) * 3 * image * image, 2);
  c.int_inputs["y"] = labels(kBatch, kClasses, 1);
  Inception net(g, width);
  const std::int64_t w = width;
  Node h = Inception::pool(net.conv(x, 3, 64 * w, 7, 2), 2);
  h = Inception::pool(net.conv(net.conv(h, 64 * w, 64 * w, 1), 64 * w, 192 * w, 3), 2);
  std::int64_t ch = 192 * w;
  h = net.block(h, ch, 64, 96, 128, 16, 32, 32);    // 3a
  h = net.block(h, ch, 128, 128, 192, 32, 96, 64);  // 3b
  h = Inception::pool(h, 2);
  h = net.block(h, ch, 192, 96, 208, 16, 48, 64);     // 4a
  h = net.block(h, ch, 160, 112, 224, 24, 64, 64);    // 4b
  h = net.block(h, ch, 128, 128, 256, 24, 64, 64);    // 4c
  h = net.block(h, ch, 112, 144, 288, 32, 64, 64);    // 4d
  h = net.block(h, ch, 256, 160, 320, 32, 128, 128);  // 4e
  h = Inception::pool(h, 2);
  h = net.block(h, ch, 256, 160, 320, 32, 128, 128);  // 5a
  h = net.block(h, ch, 384, 192, 384, 48, 128, 128);  // 5b
  const int rest = image / 32;                        // spatial size left after five halvings
  h = reshape(avg_pool2d(h, {.kernel = {rest, rest}}), {kBatch, ch});
  auto Wc = g.variable("Wc", {ch, kClasses}, he(ch, 999));
  auto bc = g.variable("bc", {kClasses});
  net.params().push_back(Wc);
  net.params().push_back(bc);
  auto loss = reduce_mean(cross_entropy(softmax(matmul(h, Wc) + bc), y));
  c.fetches = {loss, sgd(loss, net.params(), 0.01f)};
  c.checksum = {loss};
  c.stats["image"] = image;
  c.stats["width"] = width;
  return c;
}

// ---- wide-deep ------------------------------------------------------------------------------

// Wide & deep style recommendation model (the parallel-op proposal's 26 embedding lookups):
// 26 categorical features, each an int32 column of ids [batch, 26] sliced out and looked up
// in its own table (rows log-spaced from 1,000 to 100,000, dims cycling 16, 32, 64: 590k rows,
// 88 MB), concatenated with 13 dense features into a 3-layer MLP (512, 256, 2 classes, relu
// between). Inference fetches the class probabilities; training adds mean cross-entropy,
// autodiff (dense scatter-add table gradients) and SGD (0.01) over tables and MLP.
}  // namespace

Case wide_deep(int global_batch, bool train, const Training& t) {
  Case c;
  Graph& g = c.graph;
  constexpr int kTables = 26, kDense = 13, kClasses = 2;
  const std::int64_t batch = t.local(global_batch);
  auto ids = g.input("ids", DType::i32);
  auto dense = g.input("dense");
  c.shapes = {{"ids", {batch, kTables}}, {"dense", {batch, kDense}}};
  c.inputs["dense"] = random_data(static_cast<std::size_t>(batch) * kDense, 3);
  std::vector<std::int32_t> idv(static_cast<std::size_t>(batch) * kTables);
  std::vector<Node> features, params;
  std::int64_t width = kDense;
  std::uint32_t state = 12345;
  for (int t = 0; t < kTables; ++t) {
    const auto rows = static_cast<std::int64_t>(std::llround(1000.0 * std::pow(100.0, t / 25.0)));
    const std::int64_t dim = std::int64_t{16} << (t % 3);
    auto table =
        g.variable("table" + std::to_string(t), {rows, dim},
                   Initializer::uniform(-0.05f, 0.05f, 500 + static_cast<std::uint64_t>(t)));
    params.push_back(table);
    for (std::int64_t b = 0; b < batch; ++b) {
      state = state * 1664525u + 1013904223u;
      idv[static_cast<std::size_t>(b * kTables + t)] =
          static_cast<std::int32_t>((state >> 8) % static_cast<std::uint32_t>(rows));
    }
    features.push_back(embedding(table, reshape(slice(ids, 1, t, t + 1), {batch})));
    width += dim;
  }
  c.int_inputs["ids"] = std::move(idv);
  features.push_back(dense);
  Node h = concat(std::span<const Node>(features), 1);
  const std::int64_t sizes[] = {width, 512, 256, kClasses};
  for (int l = 0; l < 3; ++l) {
    auto W = g.variable("mlpW" + std::to_string(l), {sizes[l], sizes[l + 1]},
                        he(sizes[l], 600 + static_cast<std::uint64_t>(l)));
    auto b = g.variable("mlpb" + std::to_string(l), {sizes[l + 1]});
    params.push_back(W);
    params.push_back(b);
    h = matmul(h, W) + b;
    if (l < 2) h = relu(h);
  }
  auto probs = softmax(h);
  if (train) {
    auto y = g.input("y", DType::i32);
    c.shapes.push_back({"y", {batch}});
    c.int_inputs["y"] = labels(batch, kClasses, 2);
    auto loss = reduce_mean(cross_entropy(probs, y));
    c.fetches = {loss, t.step(loss, params, 0.01f)};
    c.checksum = {loss};
  } else {
    c.fetches = {probs};
    c.checksum = {probs};
  }
  c.stats["batch"] = static_cast<double>(batch);
  c.stats["embedding_width"] = static_cast<double>(width - kDense);
  return c;
}

namespace {

// ---- kernel-* (the baseline report's Tables 1-3) --------------------------------------------

// Large inputs filled fast (mt19937 would take seconds for 225M values): a multiplicative
// hash of the index, in [-1, 1).
std::vector<float> pattern(std::size_t n, std::uint32_t salt) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t h = (static_cast<std::uint32_t>(i) + salt) * 2654435761u;
    v[i] = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return v;
}

Case kernel_case(Node y, InputShapes shapes, std::uint32_t salt) {
  Case c;
  c.shapes = std::move(shapes);
  for (const auto& [name, s] : c.shapes) {
    c.inputs[name] = pattern(static_cast<std::size_t>(s.numel()), salt++);
  }
  c.fetches = {y};
  c.checksum = {y};
  c.time_copies = true;
  return c;
}

// Vector addition of 50 million elements (a [50000, 1000] batch, as in the report).
Case kernel_vector_add() {
  Graph g;
  auto a = g.input("a"), b = g.input("b");
  Case c = kernel_case(a + b, {{"a", {50000, 1000}}, {"b", {50000, 1000}}}, 1);
  c.graph = g;
  return c;
}
Case kernel_matmul() {
  Graph g;
  auto a = g.input("a"), b = g.input("b");
  Case c = kernel_case(matmul(a, b), {{"a", {1000, 10000}}, {"b", {10000, 1000}}}, 3);
  c.graph = g;
  c.stats["gflop"] = 2.0 * 1000 * 10000 * 1000 * 1e-9;
  return c;
}
Case kernel_reduce_mean(int axis) {
  Graph g;
  auto x = g.input("x");
  Case c = kernel_case(reduce_mean(x, axis), {{"x", {15000, 15000}}}, 5);
  c.graph = g;
  return c;
}

// ---- single convolution and pooling nodes, and raw oneDNN ------------------------------------

struct ConvShape {
  std::int64_t n, c, h, w, o, kh, kw;
  int stride = 1, pad = 0;
};

Case conv_node(const ConvShape& s) {
  Case c;
  Graph& g = c.graph;
  auto x = g.input("x"), w = g.input("w"), b = g.input("b");
  auto y = conv2d(x, w, b, {.stride = {s.stride, s.stride}, .padding = {s.pad, s.pad}});
  c.shapes = {{"x", {s.n, s.c, s.h, s.w}}, {"w", {s.o, s.c, s.kh, s.kw}}, {"b", {s.o}}};
  for (const auto& [name, sh] : c.shapes) {
    c.inputs[name] =
        random_data(static_cast<std::size_t>(sh.numel()), static_cast<std::uint32_t>(name[0]));
  }
  c.fetches = {y};
  c.checksum = {y};
  const std::int64_t oh = (s.h + 2 * s.pad - s.kh) / s.stride + 1,
                     ow = (s.w + 2 * s.pad - s.kw) / s.stride + 1;
  c.stats["gflop"] = 2.0 * static_cast<double>(s.n * s.o * oh * ow * s.c * s.kh * s.kw) * 1e-9;
  c.runs_per_sample = static_cast<int>(std::max(1.0, 2e-3 / (c.stats["gflop"] / 100.0)));
  return c;
}

// The same convolution in raw oneDNN, the way its own example (examples/primitives/
// convolution.cpp) does it for a user holding plain NCHW / OIHW data: the primitive picks its
// layouts (format_tag::any: nChw16c and OIhw16i16o here), the source and weights are
// reordered into them and the result back to NCHW at each run; everything is created once,
// and it runs on the calling thread's OpenMP team (all cores). `blocked_only` times the
// primitive alone on data already in its layouts: a lower bound no NCHW user reaches.
Case raw_conv(const ConvShape& s, bool blocked_only) {
  using namespace dnnl;
  using tag = memory::format_tag;
  Case c = conv_node(s);
  struct Raw {
    engine eng{engine::kind::cpu, 0};
    stream st{eng};
    memory x, w, b, y, xb, wb, yb;
    convolution_forward conv;
    reorder rx, rw, ry;
    bool blocked_only = false;
    void run() {
      if (!blocked_only) {
        if (rx) rx.execute(st, x, xb);
        if (rw) rw.execute(st, w, wb);
      }
      conv.execute(
          st, {{DNNL_ARG_SRC, xb}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, yb}});
      if (!blocked_only && ry) ry.execute(st, yb, y);
      st.wait();
    }
  };
  auto r = std::make_shared<Raw>();
  r->blocked_only = blocked_only;
  const memory::dims xd{s.n, s.c, s.h, s.w}, wd{s.o, s.c, s.kh, s.kw}, bd{s.o};
  const std::int64_t oh = (s.h + 2 * s.pad - s.kh) / s.stride + 1,
                     ow = (s.w + 2 * s.pad - s.kw) / s.stride + 1;
  const memory::dims yd{s.n, s.o, oh, ow};
  auto md = [](const memory::dims& d, tag t) { return memory::desc(d, memory::data_type::f32, t); };
  const convolution_forward::primitive_desc pd({prop_kind::forward_inference,
                                                algorithm::convolution_direct,
                                                md(xd, tag::any),
                                                md(wd, tag::any),
                                                md(bd, tag::x),
                                                md(yd, tag::any),
                                                {s.stride, s.stride},
                                                {s.pad, s.pad},
                                                {s.pad, s.pad}},
                                               r->eng);
  r->x = memory(md(xd, tag::nchw), r->eng);
  r->w = memory(md(wd, tag::oihw), r->eng);
  r->b = memory(md(bd, tag::x), r->eng);
  r->y = memory(md(yd, tag::nchw), r->eng);
  std::memcpy(r->x.get_data_handle(), c.inputs["x"].data(), c.inputs["x"].size() * 4);
  std::memcpy(r->w.get_data_handle(), c.inputs["w"].data(), c.inputs["w"].size() * 4);
  std::memcpy(r->b.get_data_handle(), c.inputs["b"].data(), c.inputs["b"].size() * 4);
  auto staged = [&](memory& user, memory& prim, const memory::desc& want, reorder& r_in, bool in) {
    if (want == user.get_desc()) {
      prim = user;
      return;
    }
    prim = memory(want, r->eng);
    r_in = in ? reorder(user, prim) : reorder(prim, user);
  };
  staged(r->x, r->xb, pd.src_desc(), r->rx, true);
  staged(r->w, r->wb, pd.weights_desc(), r->rw, true);
  staged(r->y, r->yb, pd.dst_desc(), r->ry, false);
  if (blocked_only) {  // the data is already in the primitive's layouts
    if (r->rx) r->rx.execute(r->st, r->x, r->xb);
    if (r->rw) r->rw.execute(r->st, r->w, r->wb);
    r->st.wait();
  }
  r->conv = convolution_forward(pd);
  c.raw = [r] { r->run(); };
  c.raw_checksum = [r, blocked_only] {
    if (blocked_only && r->ry) {
      r->ry.execute(r->st, r->yb, r->y);
      r->st.wait();
    }
    const auto* p = static_cast<const float*>(r->y.get_data_handle());
    double sum = 0;
    for (std::size_t i = 0; i < r->y.get_desc().get_size() / 4; ++i) sum += p[i];
    return sum;
  };
  return c;
}

struct PoolShape {
  std::int64_t n, c, h, w;
  int kernel = 2, stride = 2, pad = 0;
  bool max = true;
};

Case pool_node(const PoolShape& s) {
  Case c;
  Graph& g = c.graph;
  auto x = g.input("x");
  const Pool2dOptions o{
      .kernel = {s.kernel, s.kernel}, .stride = {s.stride, s.stride}, .padding = {s.pad, s.pad}};
  auto y = s.max ? max_pool2d(x, o) : avg_pool2d(x, o);
  c.shapes = {{"x", {s.n, s.c, s.h, s.w}}};
  c.inputs["x"] = random_data(static_cast<std::size_t>(s.n * s.c * s.h * s.w), 7);
  c.fetches = {y};
  c.checksum = {y};
  c.runs_per_sample =
      static_cast<int>(std::max<std::int64_t>(1, 4'000'000 / (s.n * s.c * s.h * s.w)));
  return c;
}

// The same max pooling between two 1x1 convolutions of its channels, so that it runs in the
// layout the convolutions compute in (blocked on AVX2 and AVX-512, channels-last otherwise), as
// a CNN's poolings do; trace it for the pooling's own time.
Case conv_pool_node(const PoolShape& s) {
  Case c;
  Graph& g = c.graph;
  auto x = g.input("x");
  auto w1 = g.variable("w1", {s.c, s.c, 1, 1}, he(s.c, 1));
  auto w2 = g.variable("w2", {s.c, s.c, 1, 1}, he(s.c, 2));
  const Pool2dOptions o{
      .kernel = {s.kernel, s.kernel}, .stride = {s.stride, s.stride}, .padding = {s.pad, s.pad}};
  auto y = conv2d(max_pool2d(conv2d(x, w1), o), w2);
  c.shapes = {{"x", {s.n, s.c, s.h, s.w}}};
  c.inputs["x"] = random_data(static_cast<std::size_t>(s.n * s.c * s.h * s.w), 7);
  c.fetches = {y};
  c.checksum = {y};
  return c;
}

// The same pooling in raw oneDNN on plain NCHW memory (inference: no workspace), which is
// what the node runs: oneDNN's jit pools NCHW directly, and staging through nChw16c was
// measured slower (conv.cpp).
Case raw_pool(const PoolShape& s) {
  using namespace dnnl;
  using tag = memory::format_tag;
  Case c = pool_node(s);
  struct Raw {
    engine eng{engine::kind::cpu, 0};
    stream st{eng};
    memory x, y;
    pooling_forward pool;
  };
  auto r = std::make_shared<Raw>();
  const std::int64_t oh = (s.h + 2 * s.pad - s.kernel) / s.stride + 1,
                     ow = (s.w + 2 * s.pad - s.kernel) / s.stride + 1;
  const memory::desc xd({s.n, s.c, s.h, s.w}, memory::data_type::f32, tag::nchw);
  const memory::desc yd({s.n, s.c, oh, ow}, memory::data_type::f32, tag::nchw);
  const pooling_forward::primitive_desc pd(
      {prop_kind::forward_inference,
       s.max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding,
       xd,
       yd,
       {s.stride, s.stride},
       {s.kernel, s.kernel},
       {s.pad, s.pad},
       {s.pad, s.pad}},
      r->eng);
  r->x = memory(xd, r->eng);
  r->y = memory(yd, r->eng);
  std::memcpy(r->x.get_data_handle(), c.inputs["x"].data(), c.inputs["x"].size() * 4);
  r->pool = pooling_forward(pd);
  c.raw = [r] {
    r->pool.execute(r->st, {{DNNL_ARG_SRC, r->x}, {DNNL_ARG_DST, r->y}});
    r->st.wait();
  };
  c.raw_checksum = [r] {
    const auto* p = static_cast<const float*>(r->y.get_data_handle());
    double sum = 0;
    for (std::size_t i = 0; i < r->y.get_desc().get_size() / 4; ++i) sum += p[i];
    return sum;
  };
  return c;
}

// conv-NxCxHxW-OxKHxKW[-sS][-pP]
bool parse_conv(const std::string& name, const std::string& prefix, ConvShape& s) {
  std::smatch m;
  const std::regex re(prefix +
                      "-([0-9]+)x([0-9]+)x([0-9]+)x([0-9]+)-([0-9]+)x([0-9]+)x([0-9]+)(?:-s([0-9]+)"
                      ")?(?:-p([0-9]+))?");
  if (!std::regex_match(name, m, re)) return false;
  s = {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4]),
       std::stoll(m[5]), std::stoll(m[6]), std::stoll(m[7])};
  if (m[8].matched) s.stride = std::stoi(m[8]);
  if (m[9].matched) s.pad = std::stoi(m[9]);
  return true;
}
// maxpool-NxCxHxW-kK[-sS][-pP] (and avgpool-)
bool parse_pool(const std::string& name, const std::string& prefix, PoolShape& s) {
  std::smatch m;
  const std::regex re(
      prefix + "pool-([0-9]+)x([0-9]+)x([0-9]+)x([0-9]+)-k([0-9]+)(?:-s([0-9]+))?(?:-p([0-9]+))?");
  if (!std::regex_match(name, m, re)) return false;
  s = {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4])};
  s.kernel = std::stoi(m[5]);
  s.stride = m[6].matched ? std::stoi(m[6]) : s.kernel;
  if (m[7].matched) s.pad = std::stoi(m[7]);
  return true;
}

}  // namespace

std::optional<Workload> find_zoo_workload(const std::string& name) {
  struct Size {
    const char* name;
    int a, b;
  };
  const Size lstm_sizes[] = {{"small", 20, 128}, {"medium", 30, 512}, {"large", 40, 1024}};
  const Size pathnet_sizes[] = {{"small", 32, 16}, {"medium", 48, 32}, {"large", 64, 48}};
  const Size inception_sizes[] = {{"small", 128, 1}, {"medium", 192, 2}, {"large", 256, 4}};
  for (const Size& s : lstm_sizes) {
    if (name == std::string("phased-lstm-") + s.name) {
      return Workload{name, "4-layer Phased LSTM training step",
                      [s] { return phased_lstm(s.a, s.b); }};
    }
  }
  for (const Size& s : pathnet_sizes) {
    if (name == std::string("pathnet-") + s.name) {
      return Workload{name, "PathNet training step, 3 layers x 6 modules",
                      [s] { return pathnet(s.a, s.b); }};
    }
  }
  for (const Size& s : inception_sizes) {
    if (name == std::string("inception-") + s.name) {
      return Workload{name, "GoogLeNet-style inception training step",
                      [s] { return inception(s.a, s.b); }};
    }
  }
  if (name == "wide-deep-infer-1")
    return Workload{name, "wide & deep inference, batch 1", [] { return wide_deep(1, false); }};
  if (name == "wide-deep-infer-64")
    return Workload{name, "wide & deep inference, batch 64", [] { return wide_deep(64, false); }};
  if (name == "wide-deep-train")
    return Workload{name, "wide & deep training step, batch 64",
                    [] { return wide_deep(64, true); }};
  // With another optimizer (adagrad's table updates are sparse on the CPU, like sgd's).
  if (name.starts_with("wide-deep-train-")) {
    const hetgraph::Optimizer o = hetgraph::Optimizer::named(name.substr(16), 0.01f);
    return Workload{name, "wide & deep training step, batch 64, " + std::string(o.name()),
                    [o] { return wide_deep(64, true, {.optimizer = o}); }};
  }
  if (name == "kernel-vector-add")
    return Workload{name, "50M-element vector add", kernel_vector_add};
  if (name == "kernel-matmul") return Workload{name, "1000x10000 @ 10000x1000", kernel_matmul};
  if (name == "kernel-reduce-mean-axis0")
    return Workload{name, "15000x15000 mean over axis 0", [] { return kernel_reduce_mean(0); }};
  if (name == "kernel-reduce-mean-axis1")
    return Workload{name, "15000x15000 mean over axis 1", [] { return kernel_reduce_mean(1); }};
  if (name == "threadpool-10k")
    return Workload{name, "10,000 independent tiny tasks",
                    [] { return threadpool_independent(10000); }};
  ConvShape cs;
  if (parse_conv(name, "conv", cs))
    return Workload{name, "one conv2d node", [cs] { return conv_node(cs); }};
  if (parse_conv(name, "dnnl-conv", cs))
    return Workload{name, "raw oneDNN convolution from NCHW", [cs] { return raw_conv(cs, false); }};
  if (parse_conv(name, "dnnl-conv-blocked", cs))
    return Workload{name, "raw oneDNN convolution primitive alone",
                    [cs] { return raw_conv(cs, true); }};
  PoolShape ps;
  if (parse_pool(name, "conv-max", ps))
    return Workload{name, "max pooling between two 1x1 convolutions",
                    [ps] { return conv_pool_node(ps); }};
  for (bool max : {true, false}) {
    const std::string kind = max ? "max" : "avg";
    if (parse_pool(name, kind, ps)) {
      ps.max = max;
      return Workload{name, "one pooling node", [ps] { return pool_node(ps); }};
    }
    if (parse_pool(name, "dnnl-" + kind, ps)) {
      ps.max = max;
      return Workload{name, "raw oneDNN pooling on NCHW", [ps] { return raw_pool(ps); }};
    }
  }
  return std::nullopt;
}

std::vector<std::string> zoo_workload_names() {
  return {"phased-lstm-small",
          "phased-lstm-medium",
          "phased-lstm-large",
          "pathnet-small",
          "pathnet-medium",
          "pathnet-large",
          "inception-small",
          "inception-medium",
          "inception-large",
          "wide-deep-infer-1",
          "wide-deep-infer-64",
          "wide-deep-train",
          "wide-deep-train-RULE",
          "kernel-vector-add",
          "kernel-matmul",
          "kernel-reduce-mean-axis0",
          "kernel-reduce-mean-axis1",
          "threadpool-10k",
          "conv-NxCxHxW-OxKHxKW[-sS][-pP]",
          "dnnl-conv-NxCxHxW-OxKHxKW[-sS][-pP]",
          "dnnl-conv-blocked-NxCxHxW-OxKHxKW[-sS][-pP]",
          "maxpool-NxCxHxW-kK[-sS][-pP]",
          "conv-maxpool-NxCxHxW-kK[-sS][-pP]",
          "avgpool-NxCxHxW-kK[-sS][-pP]",
          "dnnl-maxpool-NxCxHxW-kK[-sS][-pP]",
          "dnnl-avgpool-NxCxHxW-kK[-sS][-pP]"};
}

}  // namespace bench
