// SPDX-License-Identifier: Apache-2.0
// Shared test helpers: the platforms every op test runs on, deterministic random data, a
// runner that checks the memory planner against planner-off, and tolerance comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hetgraph/hetgraph.hpp"
#include "reference.hpp"

namespace testing_util {

// Runs f, expects an exception of type E whose message contains every string in `parts`.
template <class E, class F>
inline void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning " << *parts.begin();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks \"" << p << "\": " << msg;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

struct PlatformCase {
  std::string name;
  std::function<hetgraph::Platform()> make;
};
inline std::ostream& operator<<(std::ostream& os, const PlatformCase& p) {
  return os << p.name;
}

/// Every platform present on this machine, with the thread counts worth covering.
std::vector<PlatformCase> platforms();
/// HETGRAPH_REQUIRE_OPENCL=1: OpenCL tests must run (a missing device is a failure).
bool opencl_required();
/// HETGRAPH_CPU_REFERENCE=1 (the *_cpu_reference tests): the CPU runs its reference kernels.
inline bool cpu_reference_forced() {
  const char* v = std::getenv("HETGRAPH_CPU_REFERENCE");
  return v != nullptr && *v != '\0' && *v != '0';
}

inline std::vector<float> random_vec(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                     float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline ref::Array to_ref(const hetgraph::Shape& s, const std::vector<float>& v) {
  return ref::Array(s, std::vector<double>(v.begin(), v.end()));
}

/// An input for a test graph: name, shape, float values.
struct In {
  std::string name;
  hetgraph::Shape shape;
  std::vector<float> values;
};

/// Uniform values in [lo, hi].
inline In uniform(const std::string& name, const hetgraph::Shape& s, float lo, float hi,
                  std::uint32_t seed) {
  return {name, s, random_vec(static_cast<std::size_t>(s.numel()), seed, lo, hi)};
}
/// |x| in [lo, hi] with alternating sign: away from the kinks and poles at 0.
inline In away_from_zero(const std::string& name, const hetgraph::Shape& s, float lo, float hi,
                         std::uint32_t seed) {
  In in = uniform(name, s, lo, hi, seed);
  for (std::size_t i = 0; i < in.values.size(); i += 2) in.values[i] = -in.values[i];
  return in;
}
/// Distinct values 0.05 apart, shuffled: no ties for max.
inline In distinct(const std::string& name, const hetgraph::Shape& s, std::uint32_t seed) {
  In in = uniform(name, s, 0, 1, seed);
  std::vector<std::size_t> idx(in.values.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(idx.begin(), idx.end(), rng);
  for (std::size_t r = 0; r < idx.size(); ++r)
    in.values[idx[r]] = 0.05f * static_cast<float>(r) - 1.0f;
  return in;
}
/// One-hot rows over the last dimension: row r's 1 in column (3r + shift) mod columns.
inline In one_hot(const std::string& name, const hetgraph::Shape& s, std::int64_t shift = 0) {
  In in{name, s, std::vector<float>(static_cast<std::size_t>(s.numel()), 0.0f)};
  const std::int64_t c = s.dim(-1);
  for (std::int64_t r = 0; r < s.numel() / c; ++r)
    in.values[static_cast<std::size_t>(r * c + (r * 3 + shift) % c)] = 1.0f;
  return in;
}

/// Compiles and runs `fetches` with the memory planner on and off, requires bitwise equal
/// results (the planner must never let two live values share memory), and returns them.
/// `options` are the rest of the compile options.
std::vector<std::vector<float>> run_checked(const PlatformCase& pc, const hetgraph::Graph& g,
                                            const std::vector<In>& inputs,
                                            const std::vector<hetgraph::Node>& fetches,
                                            const hetgraph::CompileOptions& options = {});

/// |got - want| <= atol + rtol * |want| elementwise, with a readable failure.
void expect_close(const std::vector<float>& got, const ref::Array& want, double rtol, double atol,
                  const std::string& what);

/// Runs `out` of `g` on the platform (run_checked) and compares it with the double-precision
/// reference evaluation of the same graph.
void check_against_reference(const PlatformCase& pc, const hetgraph::Graph& g,
                             const std::vector<In>& inputs, hetgraph::Node out, double rtol,
                             double atol, const std::string& what);

/// Peak resident memory of this process in KiB (VmHWM), and its reset to the current
/// resident size (Linux >= 4.0), so a test can measure the peak of one call.
long peak_rss_kib();
void reset_peak_rss();

/// A program of this build tree (e.g. "tools/hetgraph-run"), found from the running test's own
/// path (<tree>/tests/<test>): a test object linked into another tree (cmake/ReuseObjects.cmake)
/// then starts that tree's program, built against that tree's library.
std::string build_program(const std::string& relative);

/// Whether AddressSanitizer's runtime is in this process: asked at run time, since a test
/// object compiled without it may be linked into the instrumented tree.
bool under_address_sanitizer();

/// Every variable of a compiled graph (optimizer state included), in plan order.
std::vector<std::vector<float>> all_variables(const hetgraph::CompiledGraph& cg);

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace testing_util
