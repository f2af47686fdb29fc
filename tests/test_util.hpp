// Shared test helpers: the platforms every op test runs on, deterministic random data, a
// runner that checks the memory planner against planner-off, and tolerance comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hetgraph/hetgraph.hpp"
#include "reference.hpp"

namespace testing_util {

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

/// Compiles and runs `fetches` with the memory planner on and off, requires bitwise equal
/// results (the planner must never let two live values share memory), and returns them.
std::vector<std::vector<float>> run_checked(const PlatformCase& pc, const hetgraph::Graph& g,
                                            const std::vector<In>& inputs,
                                            const std::vector<hetgraph::Node>& fetches);

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

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace testing_util
