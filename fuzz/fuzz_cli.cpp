// SPDX-License-Identifier: Apache-2.0
// The command lines of mnist_softmax, hetgraph-bench and hetgraph-opencl-figures: the input,
// split at newlines, is argv. Parsing either throws UsageError or yields values in range.
#include <cmath>
#include <string>
#include <vector>

#include "bench/options.hpp"
#include "examples/mnist_softmax/options.hpp"
#include "tools/hetgraph-run/options.hpp"

namespace {

template <class Parser>
bool parses(Parser&& p, const std::vector<const char*>& argv) {
  try {
    p.parse(static_cast<int>(argv.size()), argv.data());
    return !p.help();
  } catch (const hetgraph::cli::UsageError& e) {
    if (std::string(e.what()).empty()) __builtin_trap();
    return false;
  }
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> words{"prog"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      words.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  words.push_back(cur);
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());

  mnist::Args a;
  if (parses(mnist::parser(a), argv)) {
    check(a.epochs >= 1 && a.batch >= 1 && std::isfinite(a.lr) && a.lr > 0 && a.threads >= 0);
    check(a.executors == 0 ||
          (a.executors >= 1 && a.executors <= 64 && a.threads_per_executor >= 1));
  }
  bench::Options o;
  if (parses(bench::bench_parser(o), argv)) {
    check(o.repeat >= 1 && o.warmup >= 0 && o.threads >= 0);
    check(o.inline_below_us == -1 || (std::isfinite(o.inline_below_us) && o.inline_below_us >= 0));
    for (const auto& w : o.workloads) check(!w.empty() && w.find(',') == std::string::npos);
    try {
      bench::check_bench_options(o);
    } catch (const hetgraph::cli::UsageError&) {
    }
  }
  bench::FigureOptions f;
  if (parses(bench::figures_parser(f), argv)) check(f.repeat >= 1);
  hgrun::Options r;
  if (parses(hgrun::parser(r), argv)) {
    check(!r.model.empty() && r.repeat >= 1 && r.warmup >= 0);
    // An empty name: FILE alone, the next model input in order.
    for (const auto& [name, file] : r.inputs) check(!file.empty());
    for (const auto& [name, dims] : r.shapes) {
      check(!name.empty() && !dims.empty() && dims.size() <= 4);
      for (auto d : dims) check(d >= 1);
    }
  }
  return 0;
}
