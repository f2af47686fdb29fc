// The command line of examples/mnist_softmax, apart so the tests and the command-line fuzz
// target parse exactly what the program does.
#pragma once

#include <string>
#include <tuple>

#include "common/cli.hpp"

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
};

inline constexpr const char* kUsage =
    "usage: mnist_softmax [--data DIR] [--epochs N] [--batch N] [--lr X]\n"
    "                     [--platform cpu|opencl] [--engine "
    "sequential|shared-queue|critical-path|auto]\n"
    "                     [--executors NxT] [--threads N] [--json]";

/// A parser that fills `a` (which must outlive it).
inline hetgraph::cli::Parser parser(Args& a) {
  using hetgraph::cli::Bound;
  hetgraph::cli::Parser p("mnist_softmax", kUsage);
  p.text("--data", a.data)
      .integer("--epochs", a.epochs, 1, 1'000'000)
      .integer("--batch", a.batch, 1, 1 << 30)
      .real("--lr", a.lr, 0.0, 1e6, Bound::open)
      .choice("--platform", a.platform, {"cpu", "opencl"})
      .choice("--engine", a.engine, {"sequential", "shared-queue", "critical-path", "auto"})
      .custom("--executors",
              [&a](std::string_view v) {
                std::tie(a.executors, a.threads_per_executor) =
                    hetgraph::cli::to_executors("--executors", v);
              })
      .integer("--threads", a.threads, 0, 4096)
      .flag("--json", a.json);
  return p;
}

}  // namespace mnist
