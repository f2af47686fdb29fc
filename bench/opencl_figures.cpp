// hetgraph-opencl-figures: the OpenCL platform's setup, copy and compute times for one
// hetgraph-bench workload, as JSON lines. Every time is of completed work (run() returns after
// the final events; copies are host work that is done when they return).
//
//   build/bench/hetgraph-opencl-figures --workload mnist-softmax --repeat 50
//
// setup: compile() (programs, CLBlast, buffers) and the first run (PoCL compiles each kernel's
//   work-group function on first use). Run it in a fresh process with an empty
//   POCL_CACHE_DIR for the cold figure, again for the warm one.
// copy:  getting one run's inputs from host memory to the device, three ways:
//   mapped: the caller writes straight into mapped_input() (the run copies nothing);
//   copied: the caller's own vectors are fed (run() copies them into the mapped buffers);
//   staged: inputs in a host staging buffer, uploaded by clEnqueueWriteBuffer each run (what
//           a platform without mapped memory does).
//   copy_s is the caller's copy plus the part of the run that the mode adds over `mapped`.
// compute: the median run with mapped inputs.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hetgraph/hetgraph.hpp"
#include "opencl/executable.hpp"
#include "workloads.hpp"

namespace {

using hetgraph::CompiledGraph;
using hetgraph::FeedItem;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Writes the case's inputs into the graph's mapped buffers; returns feeds naming them.
std::vector<FeedItem> fill_mapped(CompiledGraph& cg, const bench::Case& c) {
  std::vector<FeedItem> feeds;
  for (const auto& [name, data] : c.inputs) {
    auto buf = cg.mapped_input(name);
    std::memcpy(buf.data(), data.data(), data.size() * 4);
    feeds.push_back({name, buf});
  }
  for (const auto& [name, data] : c.int_inputs) {
    auto buf = cg.mapped_input_i32(name);
    std::memcpy(buf.data(), data.data(), data.size() * 4);
    feeds.push_back({name, buf});
  }
  return feeds;
}

std::vector<FeedItem> own_feeds(const bench::Case& c) {
  std::vector<FeedItem> feeds;
  for (const auto& [name, data] : c.inputs) feeds.push_back({name, data});
  for (const auto& [name, data] : c.int_inputs) feeds.push_back({name, data});
  return feeds;
}

struct Times {
  double copy_s = 0, run_s = 0;
};

// Median per-run times of `repeat` runs, the inputs brought in the given way.
Times measure(CompiledGraph& cg, const bench::Case& c, const std::string& mode, int repeat) {
  std::vector<double> copies, runs;
  const std::vector<FeedItem> own = own_feeds(c);
  for (int i = 0; i < repeat + 2; ++i) {
    const double t0 = hetgraph::now_s();
    std::vector<FeedItem> feeds = mode == "copied" ? own : fill_mapped(cg, c);
    const double t1 = hetgraph::now_s();
    cg.run(feeds);
    const double t2 = hetgraph::now_s();
    if (i < 2) continue;  // warm-up
    copies.push_back(t1 - t0);
    runs.push_back(t2 - t1);
  }
  return {median(copies), median(runs)};
}

}  // namespace

int main(int argc, char** argv) {
  std::string workload = "mnist-softmax";
  int repeat = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--workload") {
      workload = argv[i + 1];
    } else if (k == "--repeat") {
      repeat = std::max(1, std::stoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: hetgraph-opencl-figures [--workload NAME] [--repeat N]\n");
      return 2;
    }
  }
  try {
    const auto w = bench::find_workload(workload);
    if (!w) throw hetgraph::Error("unknown workload " + workload);
    bench::Case c = w->make();
    const hetgraph::Platform platform = hetgraph::Platform::opencl();

    double t0 = hetgraph::now_s();
    CompiledGraph cg = hetgraph::GraphCompiler(platform).compile(c.graph, c.shapes, c.fetches);
    const double setup_s = hetgraph::now_s() - t0;
    std::vector<FeedItem> feeds = fill_mapped(cg, c);
    t0 = hetgraph::now_s();
    cg.run(feeds);
    const double first_run_s = hetgraph::now_s() - t0;
    std::printf(
        "{\"figure\":\"setup\",\"workload\":\"%s\",\"setup_s\":%.6f,\"first_run_s\":%.6f}\n",
        workload.c_str(), setup_s, first_run_s);

    const Times mapped = measure(cg, c, "mapped", repeat);
    const Times copied = measure(cg, c, "copied", repeat);
    hetgraph::detail::cl::OpenClExecutable::force_staged_inputs(true);
    CompiledGraph staged_cg =
        hetgraph::GraphCompiler(platform).compile(c.graph, c.shapes, c.fetches);
    hetgraph::detail::cl::OpenClExecutable::force_staged_inputs(false);
    const Times staged = measure(staged_cg, c, "staged", repeat);
    std::size_t bytes = 0;
    for (const auto& [name, data] : c.inputs) bytes += data.size() * 4;
    for (const auto& [name, data] : c.int_inputs) bytes += data.size() * 4;
    for (const auto& [mode, t] :
         {std::pair{"mapped", mapped}, std::pair{"copied", copied}, std::pair{"staged", staged}}) {
      const double copy_s = t.copy_s + std::max(0.0, t.run_s - mapped.run_s);
      std::printf(
          "{\"figure\":\"copy\",\"workload\":\"%s\",\"mode\":\"%s\",\"input_bytes\":%zu,"
          "\"copy_s\":%.9f,\"run_s\":%.9f}\n",
          workload.c_str(), mode, bytes, copy_s, t.run_s);
    }
    std::printf(
        "{\"figure\":\"compute\",\"workload\":\"%s\",\"engine\":\"%s\",\"median_run_s\":%.9f}\n",
        workload.c_str(), cg.engine_report().engine.c_str(), mapped.run_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hetgraph-opencl-figures: %s\n", e.what());
    return 1;
  }
  return 0;
}
