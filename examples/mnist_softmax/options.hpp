// SPDX-License-Identifier: Apache-2.0
// The command line of examples/mnist_softmax, apart so the tests and the command-line fuzz
// target parse exactly what the program does.
#pragma once

#include <string>
#include <tuple>

#include "hetgraph/cli.hpp"

namespace mnist {

struct Args {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int epochs = 10;
  int batch = 500;
  float lr = 0.1f;
  std::string platform = "cpu";
  std::string engine = "auto";                  // the library's default
  int executors = 0, threads_per_executor = 0;  // --executors NxT
  int threads = 0;
  bool json = false;
  std::string save;            // --save PATH: the trained model as ONNX (x -> class probabilities)
  std::string checkpoint;      // --checkpoint PATH: the training state after every epoch
  std::string load;            // --load PATH: start from a checkpoint
  bool data_parallel = false;  // one process per share of each batch (under mpirun)
  std::string optimizer = "sgd";  // hetgraph::Optimizer::named
  float weight_decay = 0.0f;
  int shuffle = -1;               // --shuffle SEED: a seeded order per epoch; -1: file order
  std::string pipeline = "auto";  // on: a background thread fills batches; off: the loop does
  std::string trace;              // --trace PATH: Chrome trace of the training runs
};

inline constexpr const char* kUsage =
    "usage: mnist_softmax [--data DIR] [--epochs N] [--batch N] [--lr X]\n"
    "                     [--platform cpu|opencl|hetero] [--engine "
    "sequential|shared-queue|critical-path|auto]\n"
    "                     [--executors NxT] [--threads N] [--json] [--data-parallel]\n"
    "                     [--save MODEL.onnx] [--checkpoint FILE] [--load FILE]\n"
    "                     [--optimizer sgd|momentum|nesterov|adam|adamw|rmsprop|adagrad]\n"
    "                     [--weight-decay X] [--shuffle SEED] [--pipeline auto|on|off]\n"
    "                     [--trace FILE]\n"
    "  --optimizer: the update rule (PyTorch's definitions and defaults, --lr for all); sgd is\n"
    "               the default; with --data-parallel every rule averages the gradients\n"
    "  --shuffle SEED: a shuffled order of the training images in every epoch, drawn from SEED\n"
    "                  and the epoch (deterministic); the default is file order\n"
    "  --pipeline: on, the next batch is converted by a background thread while the step\n"
    "              runs (hetgraph::data::BatchLoader); off, between the steps; auto (default),\n"
    "              on when the graph's threads leave a core free\n"
    "  --trace FILE: the training runs and the pipeline's fills as a Chrome trace (Perfetto)\n"
    "  --data-parallel: under mpirun -np P, each process trains on its P-th of every batch\n"
    "                   (--batch is the global batch, a multiple of P; rank 0 checkpoints)";

/// A parser that fills `a` (which must outlive it).
inline hetgraph::cli::Parser parser(Args& a) {
  using hetgraph::cli::Bound;
  hetgraph::cli::Parser p("mnist_softmax", kUsage);
  p.text("--data", a.data)
      .integer("--epochs", a.epochs, 1, 1'000'000)
      .integer("--batch", a.batch, 1, 1 << 30)
      .real("--lr", a.lr, 0.0, 1e6, Bound::open)
      .choice("--platform", a.platform, {"cpu", "opencl", "hetero"})
      .choice("--engine", a.engine, {"sequential", "shared-queue", "critical-path", "auto"})
      .custom("--executors",
              [&a](std::string_view v) {
                std::tie(a.executors, a.threads_per_executor) =
                    hetgraph::cli::to_executors("--executors", v);
              })
      .integer("--threads", a.threads, 0, 4096)
      .flag("--json", a.json)
      .text("--save", a.save)
      .text("--checkpoint", a.checkpoint)
      .text("--load", a.load)
      .flag("--data-parallel", a.data_parallel)
      .choice("--optimizer", a.optimizer,
              {"sgd", "momentum", "nesterov", "adam", "adamw", "rmsprop", "adagrad"})
      .real("--weight-decay", a.weight_decay, 0.0, 1e6)
      .integer("--shuffle", a.shuffle, 0, 2147483647)
      .choice("--pipeline", a.pipeline, {"auto", "on", "off"})
      .text("--trace", a.trace);
  return p;
}

}  // namespace mnist
