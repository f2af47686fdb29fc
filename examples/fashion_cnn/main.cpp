// SPDX-License-Identifier: Apache-2.0
// A small CNN on Fashion-MNIST, trained with Adam through the input pipeline, reporting test
// accuracy after every epoch.
//
//   build/examples/fashion_cnn [--data DIR] [--epochs 5] [--batch 100] [--lr 0.001]
//                              [--train N] [--test N] [--seed S] [--threads N]
//                              [--dropout 0.25] [--pipeline auto|on|off] [--trace FILE] [--json]
//
// x [B, 1, 28, 28] -> conv 3x3 16 + batch norm + relu -> max pool 2 -> conv 3x3 32 + batch norm
//   + relu -> max pool 2
//   -> dense 1568x128 + relu + dropout -> dense 128x10 -> softmax cross-entropy, Adam (PyTorch's
//   defaults). Dropout (--dropout P, 0 for none) draws a new mask each step from the optimizer's
//   step counter; the test set runs the inference network (no dropout, running statistics).
// bench/fashion_cnn/ trains the same network on the same data in PyTorch.
//
// Batches come from hetgraph::data::BatchLoader in a shuffled order per epoch (--seed): a
// background thread converts batch k + 1 while step k runs (--pipeline on; auto: when the
// graph's threads leave a core free). --train/--test keep the first N images of each split
// (the ctest trains on a few hundred). Weights start He-normal from fixed seeds: the same
// command gives the same accuracies on the same machine and thread count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "hetgraph/cli.hpp"
#include "hetgraph/hetgraph.hpp"

namespace {

struct Args {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int epochs = 5, batch = 100, train = 0, test = 0, seed = 1, threads = 0;
  float lr = 1e-3f, dropout = 0.25f;
  std::string pipeline = "auto", trace;
  bool json = false;
};

constexpr const char* kUsage =
    "usage: fashion_cnn [--data DIR] [--epochs N] [--batch N] [--lr X] [--train N] [--test N]\n"
    "                   [--seed S] [--threads N] [--dropout P] [--pipeline auto|on|off]\n"
    "                   [--trace FILE] [--json]\n"
    "  --train N / --test N: the first N images of each split (0: all)\n"
    "  --seed S: the shuffle of the training images (per epoch)\n"
    "  --dropout P: the drop probability after the first dense layer (0: none)";

// The first `n` records of a split (all for 0). More than it holds is a DataError.
void keep_first(hetgraph::data::Split& s, int n, const char* what) {
  if (n == 0) return;
  if (n > s.count) {
    throw hetgraph::DataError(std::string("--") + what + " " + std::to_string(n) +
                              ": the split holds " + std::to_string(s.count) + " images");
  }
  s.count = n;
  s.pixels.resize(static_cast<std::size_t>(n * s.image_size()));
  s.labels.resize(static_cast<std::size_t>(n));
}

struct Model {
  hetgraph::Node x, y, logits, loss;  // logits: inference mode (running statistics)
  hetgraph::Node hits;                // test images whose first largest logit is the label
  hetgraph::Node step;                // the optimizer's step counter, which keys dropout
  std::vector<hetgraph::Node> params;
  std::vector<hetgraph::Node> state;    // every variable the test graph copies (params + stats)
  std::vector<hetgraph::Node> updates;  // running-statistics updates, fetched with each step
};

Model build(hetgraph::Graph& g, float dropout_p) {
  using namespace hetgraph;
  Model m;
  m.step = step_counter(g);
  m.x = g.input("x");
  m.y = g.input("y", DType::i32);
  std::uint64_t seed = 1;
  // He-normal: keeps the activations' scale through the relus.
  auto weight = [&](const std::string& name, Shape shape, std::int64_t fan_in) {
    auto w =
        g.variable(name, shape,
                   Initializer::normal(0.0f, std::sqrt(2.0f / static_cast<float>(fan_in)), seed++));
    m.params.push_back(w);
    return w;
  };
  auto bias = [&](const std::string& name, std::int64_t n) {
    auto b = g.variable(name, {n});
    m.params.push_back(b);
    return b;
  };
  const Conv2dOptions same{.padding = {1, 1}};
  const Pool2dOptions pool{.kernel = {2, 2}, .stride = {2, 2}};
  // Convolutions without bias: batch norm's beta takes its place.
  auto bn1 = nn::BatchNorm::create(g, "bn1", 16), bn2 = nn::BatchNorm::create(g, "bn2", 32);
  for (const auto* bn : {&bn1, &bn2})
    for (Node p : bn->parameters()) m.params.push_back(p);
  const Node w1 = weight("conv1.w", {16, 1, 3, 3}, 9), w2 = weight("conv2.w", {32, 16, 3, 3}, 144);
  const Node fc1 = weight("fc1.w", {32 * 7 * 7, 128}, 32 * 7 * 7), fc1b = bias("fc1.b", 128);
  const Node fc2 = weight("fc2.w", {128, 10}, 128), fc2b = bias("fc2.b", 10);
  // One network, two modes on the same variables: batch statistics for training, running
  // statistics for the test set.
  auto logits = [&](nn::Mode mode) {
    auto block = [&](Node h, Node w, const nn::BatchNorm& bn) {
      nn::Normalized n = bn(conv2d(h, w, same), mode);
      if (n.update.valid()) m.updates.push_back(n.update);
      return max_pool2d(relu(n.y), pool);
    };
    Node h = block(block(reshape(m.x, {-1, 1, 28, 28}), w1, bn1), w2, bn2);
    h = relu(matmul(reshape(h, {-1, 32 * 7 * 7}), fc1) + fc1b);
    if (dropout_p > 0.0f) h = nn::dropout(h, m.step, dropout_p, /*seed=*/1, mode);
    return matmul(h, fc2) + fc2b;
  };
  const Node train_logits = logits(nn::Mode::train);
  m.logits = logits(nn::Mode::infer).named("logits");
  m.state = m.params;
  for (const auto* bn : {&bn1, &bn2}) {
    m.state.push_back(bn->running_mean);
    m.state.push_back(bn->running_var);
  }
  m.loss = reduce_mean(cross_entropy(softmax(train_logits), m.y)).named("loss");
  m.hits = reduce_sum(cast(equal(argmax(m.logits, 1), m.y), DType::f32)).named("hits");
  return m;
}

int run(const Args& a) {
  using namespace hetgraph;
  // The trace's file is checked before training, not found unwritable at its end.
  if (!a.trace.empty()) cli::check_output_file("--trace", a.trace);
  data::Mnist ds = data::load_mnist(a.data);
  keep_first(ds.train, a.train, "train");
  keep_first(ds.test, a.test, "test");
  const std::int64_t B = a.batch;
  const std::int64_t pixels = ds.train.image_size();

  Graph g;
  Model m = build(g, a.dropout);
  Node step = minimize(m.loss, m.params, Optimizer::adam(a.lr), {.step = m.step});
  std::vector<Node> train_fetches{m.loss, step};
  train_fetches.insert(train_fetches.end(), m.updates.begin(), m.updates.end());
  CpuOptions co;
  co.threads = a.threads;
  const Platform platform = Platform::cpu(co);
  double t0 = now_s();
  CompiledGraph train =
      GraphCompiler(platform).compile(g, {{"x", {B, pixels}}, {"y", {B}}}, train_fetches);
  // The test set in chunks of up to 500 images: a forward-only graph per chunk size.
  const std::int64_t TB = std::min<std::int64_t>(500, ds.test.count);
  CompiledGraph test =
      GraphCompiler(platform).compile(g, {{"x", {TB, pixels}}, {"y", {TB}}}, {m.hits});
  const double setup_s = now_s() - t0;

  data::BatchLoader loader(
      ds.train, B,
      data::loader_options(train, static_cast<std::uint64_t>(a.seed),
                           a.pipeline == "on"    ? data::Background::on
                           : a.pipeline == "off" ? data::Background::off
                                                 : data::Background::automatic));
  if (!a.trace.empty()) {
    train.start_trace(a.trace);
    loader.trace_into(train);
  }

  std::vector<float> tx(static_cast<std::size_t>(TB * pixels));
  auto accuracy = [&] {
    for (const Node& p : m.state) test.write(p, train.read(p));
    std::int64_t correct = 0, seen = 0;
    for (std::int64_t first = 0; first + TB <= ds.test.count; first += TB) {
      ds.test.images(first, TB, tx);
      const std::span<const std::int32_t> labels(ds.test.labels.data() + first,
                                                 static_cast<std::size_t>(TB));
      test.run({{"x", tx}, {"y", labels}});
      correct += static_cast<std::int64_t>(test.read(m.hits)[0]);
      seen += TB;
    }
    return static_cast<double>(correct) / static_cast<double>(seen);
  };

  double train_s = 0, wait_s = 0, last_acc = 0, last_loss = 0;
  for (int epoch = 1; epoch <= a.epochs; ++epoch) {
    const double e0 = now_s();
    const double w0 = loader.stats().wait_s;
    double loss_sum = 0;
    loader.start_epoch(epoch);
    for (std::int64_t k = 0; k < loader.batches(); ++k) {
      const data::Batch b = loader.next();
      train.run({{"x", b.images}, {"y", b.labels}});
      float l = 0;
      train.read(m.loss, std::span<float>(&l, 1));
      loss_sum += l;
    }
    const double epoch_s = now_s() - e0;
    train_s += epoch_s;
    wait_s += loader.stats().wait_s - w0;
    last_loss = loss_sum / static_cast<double>(loader.batches());
    last_acc = accuracy();
    std::printf("epoch %d/%d  mean loss %.4f  test accuracy %.4f  epoch %.2f s\n", epoch, a.epochs,
                last_loss, last_acc, epoch_s);
    std::fflush(stdout);
    if (a.json) {
      std::printf(
          "{\"example\":\"fashion_cnn\",\"epoch\":%d,\"train_images\":%lld,\"batch\":%d,"
          "\"threads\":%d,\"dropout\":%g,\"pipeline\":\"%s\",\"mean_loss\":%.6f,\"test_accuracy\":%"
          ".6f,"
          "\"epoch_s\":%.4f,\"wait_s\":%.4f,\"setup_s\":%.4f}\n",
          epoch, static_cast<long long>(ds.train.count), a.batch, a.threads,
          static_cast<double>(a.dropout), loader.background() ? "on" : "off", last_loss, last_acc,
          epoch_s, loader.stats().wait_s - w0, setup_s);
    }
  }
  if (!a.trace.empty()) train.stop_trace();
  std::printf("ran on %s\n", platform.description().c_str());
  std::printf("final test accuracy %.4f  train %.2f s (%d epochs, data waits %.3f s)\n", last_acc,
              train_s, a.epochs, wait_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  hetgraph::cli::Parser p("fashion_cnn", kUsage);
  p.text("--data", a.data)
      .integer("--epochs", a.epochs, 1, 1000)
      .integer("--batch", a.batch, 1, 1 << 20)
      .real("--lr", a.lr, 0.0, 1e3, hetgraph::cli::Bound::open)
      .real("--dropout", a.dropout, 0.0, 0.99)
      .integer("--train", a.train, 0, 1 << 30)
      .integer("--test", a.test, 0, 1 << 30)
      .integer("--seed", a.seed, 0, 2147483647)
      .integer("--threads", a.threads, 0, 4096)
      .choice("--pipeline", a.pipeline, {"auto", "on", "off"})
      .text("--trace", a.trace)
      .flag("--json", a.json);
  return hetgraph::cli::run_main(p, argc, argv, [&] { return run(a); });
}
