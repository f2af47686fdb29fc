// MNIST softmax classifier: x[B,784] @ W[784,10] + b, softmax, mean cross-entropy, SGD.
//
//   build/examples/mnist_softmax [--data DIR] [--epochs 10] [--batch 500] [--lr 0.1]
//                                [--platform cpu|opencl|hetero] [--threads N] [--json]
//
// --platform hetero: the CPU and the OpenCL device as one heterogeneous platform, the forward
// matmul pinned to the device and everything else (the gradients and the SGD step included)
// to the CPU: x and the product cross between them every step.
//
// The backward pass comes from hetgraph::sgd (autodiff), W and b start at zero and live in the
// compiled graph between steps, batches go in order (no shuffling) straight into the graph's
// mapped input buffers. Timing with PAPI: setup (compile), copy (writing batches), compute
// (runs), train (the whole loop); instructions and cycles where counters exist.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "hetgraph/hetgraph.hpp"
#include "options.hpp"

namespace {

using mnist::Args;

hetgraph::Platform make_platform(const Args& a) {
  hetgraph::CpuOptions o;
  o.engine = hetgraph::parse_engine(a.engine);
  o.threads = a.threads;
  o.executors = a.executors;
  o.threads_per_executor = a.threads_per_executor;
  if (a.platform == "cpu") return hetgraph::Platform::cpu(o);
  if (a.platform == "hetero") {
    return hetgraph::Platform::heterogeneous(
        {hetgraph::Platform::cpu(o), hetgraph::Platform::opencl()});
  }
  return hetgraph::Platform::opencl();  // HETGRAPH_OPENCL_DEVICE picks
}

int run(const Args& args) {
  using namespace hetgraph;
  const data::Mnist mnist = data::load_mnist(args.data);
  const std::int64_t pixels = mnist.train.rows * mnist.train.cols;
  const std::int64_t B = args.batch;
  const std::int64_t steps = mnist.train.count / B;
  if (steps == 0) throw DataError("--batch " + std::to_string(B) + " exceeds the training set");
  if (mnist.train.count % B != 0) {
    std::fprintf(stderr,
                 "note: the last %lld training images do not fill a batch and are skipped\n",
                 static_cast<long long>(mnist.train.count % B));
  }

  const Platform platform = make_platform(args);
  Graph g;
  std::optional<DeviceScope> on_cpu;  // hetero: everything on the CPU but the matmul
  if (args.platform == "hetero") on_cpu.emplace(g, Device::cpu());
  auto x = g.input("x");
  auto y = g.input("y", DType::i32);
  auto W = g.variable("W", {pixels, mnist.classes});
  auto b = g.variable("b", {mnist.classes});
  auto product = matmul(x, W).named("product");
  if (args.platform == "hetero") product.on(platform.devices().back());
  auto logits = product + b;
  auto loss = reduce_mean(cross_entropy(softmax(logits), y)).named("loss");
  auto step = sgd(loss, {W, b}, args.lr);

  double t0 = now_s();
  CompiledGraph train =
      GraphCompiler(platform).compile(g, {{"x", {B, pixels}}, {"y", {B}}}, {loss, step});
  const double setup_s = now_s() - t0;

  std::span<float> xb = train.mapped_input("x");
  std::span<std::int32_t> yb = train.mapped_input_i32("y");
  const FeedItem feeds[] = {{"x", xb}, {"y", yb}};

  // Batches are converted with the executor-0 team's threads: more would spin on the cores the
  // other executors are pinned to.
  const int copy_threads = train.engine_report().lanes.front().threads;
  Counters counters;
  if (!counters.available()) std::fprintf(stderr, "note: %s\n", counters.note().c_str());
  double copy_s = 0, compute_s = 0, final_loss = 0;
  const double train_t0 = now_s();
  counters.start();
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    double loss_sum = 0;
    for (std::int64_t s = 0; s < steps; ++s) {
      double t = now_s();
      mnist.train.images(s * B, B, xb, copy_threads);
      std::memcpy(yb.data(), mnist.train.labels.data() + s * B, yb.size_bytes());
      const double t1 = now_s();
      train.run(feeds);
      const double t2 = now_s();
      copy_s += t1 - t;
      compute_s += t2 - t1;
      float l = 0;
      train.read(loss, std::span<float>(&l, 1));
      loss_sum += l;
    }
    final_loss = loss_sum / static_cast<double>(steps);
    std::fprintf(stderr, "epoch %2d/%d  mean loss %.6f  elapsed %.3f s\n", epoch, args.epochs,
                 final_loss, now_s() - train_t0);
  }
  const CounterValues cv = counters.stop();
  const double train_s = now_s() - train_t0;

  // Test accuracy: the same graph compiled forward-only for the whole test set, with the
  // trained variables written in.
  CompiledGraph test =
      GraphCompiler(platform).compile(g, {{"x", {mnist.test.count, pixels}}}, {logits});
  test.write(W, train.read(W));
  test.write(b, train.read(b));
  std::span<float> tx = test.mapped_input("x");
  mnist.test.images(0, mnist.test.count, tx);
  test.run({{"x", tx}});
  const std::vector<float> out = test.read(logits);
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < mnist.test.count; ++i) {
    const float* row = out.data() + i * mnist.classes;
    const auto pred = std::max_element(row, row + mnist.classes) - row;
    correct += pred == mnist.test.labels[static_cast<std::size_t>(i)];
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(mnist.test.count);

  std::printf("test accuracy %.4f (%lld/%lld)\n", accuracy, static_cast<long long>(correct),
              static_cast<long long>(mnist.test.count));
  std::printf(
      "timing: setup %.4f s  copy %.4f s  compute %.4f s  train %.4f s (%d epochs, %lld steps)\n",
      setup_s, copy_s, compute_s, train_s, args.epochs,
      static_cast<long long>(steps * args.epochs));
  if (cv.available) {
    std::printf(
        "counters: %lld instructions, %lld cycles (IPC %.2f)\n", cv.instructions, cv.cycles,
        cv.cycles ? static_cast<double>(cv.instructions) / static_cast<double>(cv.cycles) : 0.0);
  }
  if (args.json) {
    const EngineReport er = train.engine_report();
    std::printf(
        "{\"platform\":\"%s\",\"engine\":\"%s\",\"executors\":\"%dx%d\",\"threads\":%d,\"epochs\":%"
        "d,"
        "\"batch\":%d,"
        "\"lr\":%g,\"setup_s\":%.6f,\"copy_s\":%.6f,\"compute_s\":%.6f,\"train_s\":%.6f,"
        "\"final_loss\":%.8f,\"test_accuracy\":%.6f,\"counters\":%s,\"instructions\":%lld,"
        "\"cycles\":%lld}\n",
        platform.name().c_str(), er.engine.c_str(), static_cast<int>(er.lanes.size()),
        er.lanes.front().threads, args.threads, args.epochs, args.batch,
        static_cast<double>(args.lr), setup_s, copy_s, compute_s, train_s, final_loss, accuracy,
        cv.available ? "true" : "false", cv.instructions, cv.cycles);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  hetgraph::cli::Parser parser = mnist::parser(args);
  return hetgraph::cli::run_main(parser, argc, argv, [&] { return run(args); });
}
