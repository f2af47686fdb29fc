// SPDX-License-Identifier: Apache-2.0
// hetgraph-opencl-figures: the OpenCL platform's setup, copy and compute times for one
// hetgraph-bench workload, as JSON lines. Every time is of completed work (run() returns after
// the final events; copies are host work that is done when they return).
//
//   build/bench/hetgraph-opencl-figures --workload mnist-softmax --repeat 50
//
// setup: compile() (programs, CLBlast, buffers) and the first run (PoCL compiles each kernel's
//   work-group function on first use). Run it in a fresh process with an empty
//   POCL_CACHE_DIR for the cold figure, again for the warm one.
// compute: the median run with the inputs already in the mapped buffers.
// copy:  getting one run's inputs from host memory to the device, three ways, measured on a
//   graph that only takes the inputs in (so the run is input traffic plus a tiny kernel):
//   mapped: the caller writes straight into mapped_input() (the run copies nothing);
//   copied: the caller's own vectors are fed (run() copies them into the mapped buffers);
//   staged: the inputs sit in a host staging buffer and each run uploads them with
//           clEnqueueWriteBuffer (what a platform without mapped memory does).
//   copy_s = the caller's write of the batch (in place, or into its own buffers) + what the
//   mode adds to the baseline run (mapped inputs, nothing written).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "hetgraph/hetgraph.hpp"
#include "opencl/executable.hpp"
#include "options.hpp"
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

// Median seconds of `repeat` calls of f (after two warm-up calls).
template <class F>
double median_time(int repeat, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < repeat + 2; ++i) {
    const double t0 = hetgraph::now_s();
    f();
    if (i >= 2) t.push_back(hetgraph::now_s() - t0);
  }
  return median(t);
}

// A graph that only takes the case's inputs in (one row of each is read), so that a run is
// the input traffic plus a fixed, tiny amount of device work.
struct InputsOnly {
  hetgraph::Graph g;
  std::vector<hetgraph::Node> fetches;
  explicit InputsOnly(const bench::Case& c) {
    for (const auto& [name, shape] : c.shapes) {
      const bool i32 = c.int_inputs.count(name) > 0;
      auto in = g.input(name, i32 ? hetgraph::DType::i32 : hetgraph::DType::f32);
      fetches.push_back(shape.rank() > 0 ? slice(in, 0, 0, 1) : in);
    }
  }
};

// copy figure: the run time of InputsOnly without any copy is the baseline; each mode's copy
// is the caller's part plus what it adds to the run.
void copy_figures(const bench::Case& c, const std::string& workload, int repeat) {
  InputsOnly io(c);
  const hetgraph::Platform platform = hetgraph::Platform::opencl();
  CompiledGraph cg = hetgraph::GraphCompiler(platform).compile(io.g, c.shapes, io.fetches);
  hetgraph::detail::cl::OpenClExecutable::force_staged_inputs(true);
  CompiledGraph staged = hetgraph::GraphCompiler(platform).compile(io.g, c.shapes, io.fetches);
  hetgraph::detail::cl::OpenClExecutable::force_staged_inputs(false);
  const std::vector<FeedItem> mapped_feeds = fill_mapped(cg, c);
  const std::vector<FeedItem> staged_feeds = fill_mapped(staged, c);
  std::size_t bytes = 0;
  for (const auto& [name, data] : c.inputs) bytes += data.size() * 4;
  for (const auto& [name, data] : c.int_inputs) bytes += data.size() * 4;

  const double base = median_time(repeat, [&] { cg.run(mapped_feeds); });
  const double mapped_write = median_time(repeat, [&] { fill_mapped(cg, c); });
  // The caller's own buffers: writing the batch there costs what writing it in place does.
  std::map<std::string, std::vector<float>> own_f = c.inputs;
  std::map<std::string, std::vector<std::int32_t>> own_i = c.int_inputs;
  const double own_write = median_time(repeat, [&] {
    for (const auto& [name, data] : c.inputs)
      std::memcpy(own_f[name].data(), data.data(), data.size() * 4);
    for (const auto& [name, data] : c.int_inputs)
      std::memcpy(own_i[name].data(), data.data(), data.size() * 4);
  });
  std::vector<FeedItem> own;
  for (const auto& [name, data] : own_f) own.push_back({name, data});
  for (const auto& [name, data] : own_i) own.push_back({name, data});
  const double copied_run = median_time(repeat, [&] { cg.run(own); });
  const double staged_write = median_time(repeat, [&] { fill_mapped(staged, c); });
  const double staged_run = median_time(repeat, [&] { staged.run(staged_feeds); });
  const struct {
    const char* mode;
    double caller_s, run_s;
  } rows[] = {{"mapped", mapped_write, base},
              {"copied", own_write, copied_run},
              {"staged", staged_write, staged_run}};
  for (const auto& r : rows) {
    std::printf(
        "{\"figure\":\"copy\",\"workload\":\"%s\",\"mode\":\"%s\",\"input_bytes\":%zu,"
        "\"caller_copy_s\":%.9f,\"run_s\":%.9f,\"baseline_run_s\":%.9f,\"copy_s\":%.9f}\n",
        workload.c_str(), r.mode, bytes, r.caller_s, r.run_s, base,
        r.caller_s + std::max(0.0, r.run_s - base));
  }
}

}  // namespace

int figures(const std::string& workload, int repeat) {
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

    const double compute = median_time(repeat, [&] { cg.run(feeds); });
    std::printf(
        "{\"figure\":\"compute\",\"workload\":\"%s\",\"engine\":\"%s\",\"median_run_s\":%.9f}\n",
        workload.c_str(), cg.engine_report().engine.c_str(), compute);
    copy_figures(c, workload, std::max(repeat, 50));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hetgraph-opencl-figures: %s\n", e.what());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  bench::FigureOptions o;
  hetgraph::cli::Parser parser = bench::figures_parser(o);
  return hetgraph::cli::run_main(parser, argc, argv, [&] { return figures(o.workload, o.repeat); });
}
