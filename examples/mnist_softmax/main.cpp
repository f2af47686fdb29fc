// SPDX-License-Identifier: Apache-2.0
// MNIST softmax classifier: x[B,784] @ W[784,10] + b, softmax, mean cross-entropy, SGD.
//
//   build/examples/mnist_softmax [--data DIR] [--epochs 10] [--batch 500] [--lr 0.1]
//                                [--platform cpu|opencl|hetero] [--threads N] [--json]
//                                [--save MODEL.onnx] [--checkpoint FILE] [--load FILE]
//                                [--optimizer sgd|momentum|nesterov|adam|adamw|rmsprop|adagrad]
//                                [--weight-decay X] [--shuffle SEED] [--pipeline auto|on|off]
//                                [--trace FILE]
//
// --optimizer other than sgd trains with hetgraph::minimize (one fused update per variable,
// its state in variables that --checkpoint saves); --shuffle visits the training images in a
// seeded order drawn anew every epoch (hetgraph::data::BatchOrder). The default run is plain
// SGD in file order.
//
// --checkpoint saves W and b after every epoch (atomically: a killed run leaves the last
// one), --load resumes from such a file, --save writes the trained classifier as an ONNX model
// (x [batch, 784] -> probabilities [batch, 10], the batch a dynamic dim) that
// build/tools/hetgraph-run or any ONNX runtime runs.
//
//   mpirun -np 2 build/examples/mnist_softmax --data-parallel      # the same training, 2 ranks
//
// Data parallel: each rank reads its share of every global batch (its shard of the IDX files),
// sgd averages the gradients across ranks, and every rank ends with the same weights, those of
// the single-process run to float rounding. Rank 0 prints; test accuracy is counted per shard
// and summed.
//
// --platform hetero: the CPU and the OpenCL device as one heterogeneous platform, the forward
// matmul pinned to the device and everything else (the gradients and the SGD step included)
// to the CPU: x and the product cross between them every step.
//
// The backward pass comes from hetgraph::sgd (autodiff), W and b start at zero and live in the
// compiled graph between steps, batches go in order (no shuffling) through the input pipeline
// (hetgraph::data::BatchLoader: a background thread converts batch k + 1 while step k runs;
// --pipeline off converts it between the steps). Timing with PAPI: setup (compile), copy (waiting
// for / converting batches), compute (runs), train (the whole loop); instructions and cycles where
// counters exist.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "hetgraph/distributed.hpp"
#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "options.hpp"

namespace {

using mnist::Args;

// Threads per rank when --threads is not given: every allowed core, unless the ranks on this
// machine would then start more threads than it has cores (mpirun binds a rank to a core only
// while there are cores for all; oversubscribed ranks are unbound and each sees every core).
int default_threads(const hetgraph::distributed::Communicator& comm) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  const int allowed = CPU_COUNT(&set);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int local = comm.local_size();
  return allowed * local > cores ? std::max(1, cores / local) : 0;
}

hetgraph::Platform make_platform(const Args& a, const hetgraph::distributed::Communicator& comm) {
  hetgraph::CpuOptions o;
  o.engine = hetgraph::parse_engine(a.engine);
  o.threads = a.threads > 0 ? a.threads : default_threads(comm);
  o.executors = a.executors;
  o.threads_per_executor = a.threads_per_executor;
  if (a.platform == "cpu") return hetgraph::Platform::cpu(o);
  if (a.platform == "hetero") {
    return hetgraph::Platform::heterogeneous(
        {hetgraph::Platform::cpu(o), hetgraph::Platform::opencl()});
  }
  return hetgraph::Platform::opencl();  // HETGRAPH_OPENCL_DEVICE picks
}

int run(const Args& args, const hetgraph::distributed::Communicator& comm) {
  using namespace hetgraph;
  const int ranks = comm.size(), rank = comm.rank();
  const bool lead = rank == 0;  // prints (and would write checkpoints)
  // Where the run writes is checked before it trains, not found unwritable at its end.
  if (lead && !args.save.empty()) cli::check_output_file("--save", args.save);
  if (lead && !args.checkpoint.empty()) cli::check_output_file("--checkpoint", args.checkpoint);
  if (!args.trace.empty()) cli::check_output_file("--trace", args.trace);
  if (args.batch % ranks != 0) {
    throw DataError("--batch " + std::to_string(args.batch) + " cannot be shared by " +
                    std::to_string(ranks) + " ranks: make it a multiple of " +
                    std::to_string(ranks));
  }
  // This rank's part of every global batch, and a contiguous part of the test set.
  const data::Mnist mnist =
      ranks == 1
          ? data::load_mnist(args.data)
          : data::load_mnist(args.data, 10, {.rank = rank, .size = ranks, .block = args.batch},
                             {.rank = rank, .size = ranks});
  const std::int64_t pixels = mnist.train.rows * mnist.train.cols;
  const std::int64_t B = args.batch / ranks;  // rows per rank and step
  const std::int64_t steps = mnist.train.count / B;
  if (steps == 0) throw DataError("--batch " + std::to_string(B) + " exceeds the training set");
  if (mnist.train.count % B != 0 && lead) {
    std::fprintf(stderr,
                 "note: the last %lld training images do not fill a batch and are skipped\n",
                 static_cast<long long>(mnist.train.count % B));
  }

  // Ranks out of step (other epochs, data, batch or rule) would each wait at a collective its
  // partner never posts, until the deadline: compare the plan up front, and fail at once.
  char lr[32], decay[32];
  std::snprintf(lr, sizeof lr, "%g", static_cast<double>(args.lr));
  std::snprintf(decay, sizeof decay, "%g", static_cast<double>(args.weight_decay));
  const distributed::Agreed plan[] = {{"--epochs", args.epochs},
                                      {"training images per rank", mnist.train.count},
                                      {"batches per epoch", steps},
                                      {"--batch", args.batch},
                                      {"--optimizer", args.optimizer},
                                      {"--lr", std::string(lr)},
                                      {"--weight-decay", std::string(decay)},
                                      {"--shuffle", args.shuffle}};
  distributed::check_agreement(comm, plan);

  const Platform platform = make_platform(args, comm);
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
  auto probs = softmax(logits).named("probs");
  auto loss = reduce_mean(cross_entropy(probs, y)).named("loss");
  // Test images classified right: the first largest logit against the label, in the graph.
  auto hits = reduce_sum(cast(equal(argmax(logits, 1), y), DType::f32)).named("hits");
  Node step;
  if (args.optimizer == "sgd" && args.weight_decay == 0.0f) {
    step = sgd(loss, {W, b}, args.lr, 0.0f, DataParallel{comm});
  } else {
    step = minimize(loss, {W, b}, Optimizer::named(args.optimizer, args.lr, args.weight_decay), {},
                    DataParallel{comm});
  }

  double t0 = now_s();
  CompiledGraph train =
      GraphCompiler(platform).compile(g, {{"x", {B, pixels}}, {"y", {B}}}, {loss, step});
  distributed::broadcast_variables(train, comm);  // every replica starts from rank 0's values
  const double setup_s = now_s() - t0;
  if (!args.load.empty()) {
    // Not strict: a checkpoint of another optimizer gives W and b (its state is skipped, this
    // optimizer's starts from zero), as fine-tuning with Adam after SGD needs.
    const LoadReport r = train.load(args.load, {.strict = false});
    auto names = [](const std::vector<std::string>& v) {
      std::string s;
      for (const std::string& n : v) s += (s.empty() ? "" : ", ") + n;
      return s;
    };
    std::fprintf(stderr, "resumed from checkpoint %s (%s)\n", args.load.c_str(),
                 names(r.loaded).c_str());
    if (!r.not_in_graph.empty())
      std::fprintf(stderr, "  skipped, not in this graph: %s\n", names(r.not_in_graph).c_str());
    if (!r.not_in_file.empty())
      std::fprintf(stderr, "  not in the checkpoint, starting fresh: %s\n",
                   names(r.not_in_file).c_str());
  }

  // Batches are converted by the loader's thread while the previous step runs (--pipeline on),
  // or in the loop (off); auto: in the background only where the graph leaves a core free.
  // Either way the same bits reach the graph.
  data::BatchLoader loader(
      mnist.train, B,
      data::loader_options(
          train, args.shuffle >= 0 ? std::optional<std::uint64_t>(args.shuffle) : std::nullopt,
          args.pipeline == "on"    ? data::Background::on
          : args.pipeline == "off" ? data::Background::off
                                   : data::Background::automatic));
  if (!args.trace.empty()) {
    train.start_trace(args.trace);
    loader.trace_into(train);
  }
  Counters counters;
  if (!counters.available() && lead) std::fprintf(stderr, "note: %s\n", counters.note().c_str());
  double copy_s = 0, compute_s = 0, final_loss = 0;
  const double train_t0 = now_s();
  counters.start();
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    double loss_sum = 0;
    loader.start_epoch(epoch);
    for (std::int64_t s = 0; s < steps; ++s) {
      double t = now_s();
      const data::Batch batch = loader.next();  // waits only if the fill is not done yet
      const double t1 = now_s();
      train.run({{"x", batch.images}, {"y", batch.labels}});
      const double t2 = now_s();
      copy_s += t1 - t;
      compute_s += t2 - t1;
      float l = 0;
      train.read(loss, std::span<float>(&l, 1));
      loss_sum += l;
    }
    final_loss = loss_sum / static_cast<double>(steps);
    if (ranks > 1) {
      // Each rank's loss is the mean over its share: their mean is the global batch's.
      float mean = static_cast<float>(final_loss);
      comm.allreduce(std::span<float>(&mean, 1), distributed::ReduceOp::mean);
      final_loss = mean;
    }
    if (lead) {  // every rank holds the same weights: rank 0 alone prints and checkpoints
      std::fprintf(stderr, "epoch %2d/%d  mean loss %.6f  elapsed %.3f s\n", epoch, args.epochs,
                   final_loss, now_s() - train_t0);
      if (!args.checkpoint.empty()) train.save(args.checkpoint);
    }
  }
  const CounterValues cv = counters.stop();
  const double train_s = now_s() - train_t0;
  if (!args.trace.empty()) train.stop_trace();

  // Test accuracy: the same graph compiled forward-only for the whole test set, with the
  // trained variables written in; it counts the hits itself (exact in float up to 2^24).
  CompiledGraph test = GraphCompiler(platform).compile(
      g, {{"x", {mnist.test.count, pixels}}, {"y", {mnist.test.count}}}, {hits});
  test.write(W, train.read(W));
  test.write(b, train.read(b));
  std::span<float> tx = test.mapped_input("x");
  mnist.test.images(0, mnist.test.count, tx);
  test.run({{"x", tx}, {"y", mnist.test.labels}});
  auto correct = static_cast<std::int64_t>(test.read(hits)[0]);
  // Counts of every rank's part of the test set (exact in float up to 2^24 images).
  float counts[2] = {static_cast<float>(correct), static_cast<float>(mnist.test.count)};
  comm.allreduce(counts);
  correct = static_cast<std::int64_t>(counts[0]);
  const auto tested = static_cast<std::int64_t>(counts[1]);
  const double accuracy = static_cast<double>(correct) / static_cast<double>(tested);
  if (!lead) return 0;
  if (!args.save.empty()) {
    onnx::export_model(g, std::vector<Node>{probs}, {{"x", {1, pixels}}}, args.save,
                       {.values = &train, .dynamic_batch = true});
    std::fprintf(stderr, "saved the trained model to %s\n", args.save.c_str());
  }

  std::printf("ran on %s\n", platform.description().c_str());
  std::printf("test accuracy %.4f (%lld/%lld)\n", accuracy, static_cast<long long>(correct),
              static_cast<long long>(tested));
  if (ranks > 1)
    std::printf("data parallel: %d ranks of %lld images per step\n", ranks,
                static_cast<long long>(B));
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
        "\"cycles\":%lld,\"ranks\":%d,\"optimizer\":\"%s\",\"weight_decay\":%g,\"shuffle\":%d,"
        "\"pipeline\":\"%s\"}\n",
        platform.name().c_str(), er.engine.c_str(), static_cast<int>(er.lanes.size()),
        er.lanes.front().threads, args.threads, args.epochs, args.batch,
        static_cast<double>(args.lr), setup_s, copy_s, compute_s, train_s, final_loss, accuracy,
        cv.available ? "true" : "false", cv.instructions, cv.cycles, ranks, args.optimizer.c_str(),
        static_cast<double>(args.weight_decay), args.shuffle, loader.background() ? "on" : "off");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  hetgraph::cli::Parser parser = mnist::parser(args);
  return hetgraph::cli::run_main(parser, argc, argv, [&] {
    namespace dist = hetgraph::distributed;
    const dist::Communicator comm = args.data_parallel ? dist::world() : dist::Communicator::self();
    // Started without a launcher, MPI makes a world of one: say so instead of training alone
    // in silence.
    if (args.data_parallel && comm.size() == 1)
      std::fputs(
          "mnist_softmax: --data-parallel with one process: this run trains alone; start "
          "it under an MPI launcher (mpirun -np P ...) to share each batch among P\n",
          stderr);
    try {
      return run(args, comm);
    } catch (const std::exception& e) {
      comm.abort(e.what());  // the other ranks fail at once, naming this one, instead of waiting
      throw;
    }
  });
}
