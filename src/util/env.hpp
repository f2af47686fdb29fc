// SPDX-License-Identifier: Apache-2.0
// Environment variables read strictly: a value that does not parse is an error naming the
// variable and the value, never a silent default or a wrapped number. Header-only (the
// library, tests, the soak and the fuzz targets share it).
//
// Every variable the library reads is a row of kEnvironment and of docs/errors.md's "Environment
// variables" table, and is read through these functions (test_cli's Environment tests check
// the sources and docs/errors.md against the table).
//
//   auto dev = parse_device_spec("0:1");            // {0, 1}; "4294967296:0" -> nullopt
//   double r = env_real<UsageError>("HETGRAPH_STACK_RATIO", 0, 1e9, 64);   // 64 when unset
//   std::string m = env_choice<PlatformError>("HETGRAPH_CL_CACHE", {"", "0", "1", "force"});
#pragma once

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "util/parse.hpp"

namespace hetgraph::detail {

/// One environment variable the library reads, and what it does.
struct EnvVar {
  std::string_view name;
  std::string_view what;
};
inline constexpr EnvVar kEnvironment[] = {
    {"HETGRAPH_ADAPT_TO_LOAD", "0: the automatic CPU engine ignores other processes' load"},
    {"HETGRAPH_CL_CACHE", "OpenCL program binaries cache: 0 off, 1 automatic, force"},
    {"HETGRAPH_CL_KERNELS", "a folder whose <family>.cl replace the embedded OpenCL sources"},
    {"HETGRAPH_CPU_REFERENCE", "1: every CPU op runs its reference kernel"},
    {"HETGRAPH_DUMP_PLAN", "1: print each compiled plan; after:<pass>[,<pass>] or after:all"},
    {"HETGRAPH_LOG", "OpenCL build notes on stderr: info (default), verbose, quiet"},
    {"HETGRAPH_LOG_KERNELS", "1: print why each kernel candidate was taken or rejected"},
    {"HETGRAPH_MAX_CPU_ISA", "cap the CPU code path: x86-64-v2, x86-64-v3 or x86-64-v4"},
    {"HETGRAPH_MPI_COLLECTIVE_TIMEOUT", "seconds a collective may wait before it fails (600)"},
    {"HETGRAPH_MPI_HEARTBEAT_TIMEOUT", "seconds a silent rank is waited for (10)"},
    {"HETGRAPH_OPENCL_DEVICE", "platform:device, the OpenCL device Platform::opencl() takes"},
    {"HETGRAPH_STACK_RATIO",
     "largest cost ratio within a group stack_shared_products stacks (64; 0 stacks every group)"},
    {"HETGRAPH_TUNING_CACHE", "0: the automatic CPU engine's tuning cache is off"},
    {"HETGRAPH_WINOGRAD_MIN_TILES",
     "fewest output tiles for hetgraph's own Winograd kernels (16 with AVX2, 192 with AVX-512)"},
    {"XDG_CACHE_HOME", "where the tuning cache lives (XDG_CACHE_HOME/hetgraph/tuning)"},
    {"HOME", "the tuning cache's folder without XDG_CACHE_HOME (~/.cache/hetgraph/tuning)"},
    {"OMP_WAIT_POLICY", "set by you: libhetgraph_omp_env leaves OpenMP's spinning alone"},
    {"GOMP_SPINCOUNT", "set by you: the same; else libhetgraph_omp_env sets 10000"},
};

/// "P:D", two decimal indices in [0, INT_MAX] (HETGRAPH_OPENCL_DEVICE); nullopt otherwise.
inline std::optional<std::pair<int, int>> parse_device_spec(std::string_view v) {
  const auto parts = split_pair(v, ':');
  // Indices are unsigned: no sign at all ("-0" would parse as 0).
  if (!parts || parts->first.starts_with('-') || parts->second.starts_with('-'))
    return std::nullopt;
  const auto p = parse_int(parts->first), d = parse_int(parts->second);
  if (!p || !d || *p < 0 || *d < 0 || *p > INT_MAX || *d > INT_MAX) return std::nullopt;
  return std::pair{static_cast<int>(*p), static_cast<int>(*d)};
}

/// The value of `name`, or "" when unset.
inline std::string env_value(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

/// A switch: off when unset, empty or "0", on otherwise.
inline bool env_flag(const char* name) {
  const std::string v = env_value(name);
  return !v.empty() && v != "0";
}

/// A real number in [min, max]; `fallback` when unset or empty. Throws E otherwise.
template <class E>
double env_real(const char* name, double min, double max, double fallback) {
  const std::string v = env_value(name);
  if (v.empty()) return fallback;
  double out = 0;
  if (parse_real(v, out) != ParseStatus::ok || !(out >= min) || !(out <= max)) {
    char range[64];
    std::snprintf(range, sizeof range, "from %g to %g", min, max);
    throw E(std::string(name) + "=" + quote(v) + " is not a number " + range);
  }
  return out;
}

/// An integer variable in [min, max]; `fallback` when unset or empty. Throws E otherwise.
template <class E>
std::int64_t env_int(const char* name, std::int64_t min, std::int64_t max, std::int64_t fallback) {
  const std::string v = env_value(name);
  if (v.empty()) return fallback;
  std::int64_t out = 0;
  const ParseStatus st = parse_int(v, out);
  if (st == ParseStatus::malformed)
    throw E(std::string(name) + "=" + quote(v) + " is not an integer");
  if (st == ParseStatus::out_of_range || out < min || out > max) {
    throw E(std::string(name) + "=" + quote(v) + " is out of range (from " + std::to_string(min) +
            " to " + std::to_string(max) + ")");
  }
  return out;
}

/// A variable that holds one of `choices` ("" when unset). Throws E otherwise.
template <class E>
std::string env_choice(const char* name, std::initializer_list<std::string_view> choices) {
  const std::string v = env_value(name);
  std::string all;
  for (std::string_view c : choices) {
    if (c == v) return v;
    if (!c.empty()) all += (all.empty() ? "" : ", ") + std::string(c);
  }
  throw E(std::string(name) + "=" + quote(v) + " is not one of " + all + " (or unset)");
}

}  // namespace hetgraph::detail
