// Environment variables read strictly: a value that does not parse is an error naming the
// variable and the value, never a silent default or a wrapped number. Header-only (the
// library, tests, the soak and the fuzz targets share it).
//
//   auto dev = parse_device_spec("0:1");            // {0, 1}; "4294967296:0" -> nullopt
//   int n = env_int<Error>("HETGRAPH_STRESS_DAGS", 1, 1'000'000, 1000);   // 1000 when unset
//   std::string m = env_choice<PlatformError>("HETGRAPH_CL_CACHE", {"", "0", "1", "force"});
#pragma once

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/parse.hpp"

namespace hetgraph::detail {

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
