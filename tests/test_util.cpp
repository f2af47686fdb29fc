// SPDX-License-Identifier: Apache-2.0
#include "test_util.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/executable.hpp"

namespace {
// A test binary run by hand must not read or fill the user's tuning cache (an entry left there
// by an earlier run skips the search a test expects); ctest sets the same. Tests of the cache
// point it at a directory of their own.
const bool no_tuning_cache = [] { return ::setenv("HETGRAPH_TUNING_CACHE", "0", 0) == 0; }();
}  // namespace

namespace testing_util {

std::vector<PlatformCase> platforms() {
  std::vector<PlatformCase> out;
  out.push_back({"cpu_seq_1t", [] {
                   return hetgraph::Platform::cpu(
                       {.engine = hetgraph::CpuEngine::sequential, .threads = 1});
                 }});
  out.push_back({"cpu_seq_2t", [] {
                   return hetgraph::Platform::cpu(
                       {.engine = hetgraph::CpuEngine::sequential, .threads = 2});
                 }});
  // The parallel engines (parallel-safe memory plans, kernels on executor teams).
  out.push_back({"cpu_critical_path_2x1", [] {
                   return hetgraph::Platform::cpu({.engine = hetgraph::CpuEngine::critical_path,
                                                   .executors = 2,
                                                   .threads_per_executor = 1});
                 }});
  out.push_back({"cpu_shared_queue_2x1", [] {
                   return hetgraph::Platform::cpu({.engine = hetgraph::CpuEngine::shared_queue,
                                                   .executors = 2,
                                                   .threads_per_executor = 1});
                 }});
  // OpenCL where a device exists. With HETGRAPH_REQUIRE_OPENCL=1 (set by CTest) it is always
  // listed, so a machine without a device fails the tests instead of skipping them silently.
  if (opencl_required() || hetgraph::Platform::opencl_available()) {
    out.push_back({"opencl", [] { return hetgraph::Platform::opencl(); }});
  }
  return out;
}

std::vector<std::vector<float>> all_variables(const hetgraph::CompiledGraph& cg) {
  hetgraph::detail::Executable& e = hetgraph::detail::executable_of(cg);
  std::vector<std::vector<float>> out;
  for (std::uint32_t i : e.plan().variables) {
    std::vector<float> v(static_cast<std::size_t>(e.plan().nodes[i].type.shape.numel()));
    e.read(i, v.data(), v.size(), hetgraph::DType::f32, "test");
    out.push_back(std::move(v));
  }
  return out;
}

std::string build_program(const std::string& relative) {
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  return (self.parent_path().parent_path() / relative).string();
}

bool under_address_sanitizer() {
  return ::dlsym(RTLD_DEFAULT, "__asan_init") != nullptr;
}

long peak_rss_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

bool opencl_required() {
  const char* v = std::getenv("HETGRAPH_REQUIRE_OPENCL");
  return v != nullptr && *v != '\0' && *v != '0';
}

std::vector<std::vector<float>> run_checked(const PlatformCase& pc, const hetgraph::Graph& g,
                                            const std::vector<In>& inputs,
                                            const std::vector<hetgraph::Node>& fetches,
                                            const hetgraph::CompileOptions& options) {
  hetgraph::InputShapes shapes;
  std::vector<hetgraph::FeedItem> feeds;
  for (const In& in : inputs) {
    shapes.push_back({in.name, in.shape});
    feeds.push_back({in.name, in.values});
  }
  std::vector<std::vector<float>> results[2];
  for (int planned = 0; planned < 2; ++planned) {
    hetgraph::CompileOptions opts = options;
    opts.plan_memory = planned == 1;
    auto cg = hetgraph::GraphCompiler(pc.make(), opts).compile(g, shapes, fetches);
    cg.run(feeds);
    for (const hetgraph::Node& f : fetches) results[planned].push_back(cg.read(f));
  }
  for (std::size_t i = 0; i < fetches.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(results[0][i], results[1][i]))
        << "planner on/off differ for fetch " << fetches[i].label() << " on " << pc.name;
  }
  return results[1];
}

void expect_close(const std::vector<float>& got, const ref::Array& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.v.size()) << what << ": element count";
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want.v[i]);
    const double lim = atol + rtol * std::abs(want.v[i]);
    const bool ok = err <= lim || (std::isnan(got[i]) && std::isnan(want.v[i])) ||
                    (std::isinf(got[i]) && got[i] == want.v[i]);
    if (!ok) {
      if (bad++ == 0) first = i;
      worst = std::max(worst, err);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size()
                     << " elements out of tolerance (rtol " << rtol << ", atol " << atol
                     << "); first at " << first << ": got " << got[first] << ", want "
                     << want.v[first] << "; worst error " << worst;
}

void check_against_reference(const PlatformCase& pc, const hetgraph::Graph& g,
                             const std::vector<In>& inputs, hetgraph::Node out, double rtol,
                             double atol, const std::string& what) {
  const auto got = run_checked(pc, g, inputs, {out});
  ref::Values vals;
  for (const In& in : inputs) vals[in.name] = to_ref(in.shape, in.values);
  const auto want = ref::evaluate(g, std::vector<hetgraph::Node>{out}, vals);
  expect_close(got[0], want[0], rtol, atol, what + " on " + pc.name);
}

}  // namespace testing_util
