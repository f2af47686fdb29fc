// SPDX-License-Identifier: Apache-2.0
// Environment variables parsed as numbers or choices (src/util/env.hpp): HETGRAPH_OPENCL_DEVICE
// and the integer and choice readers. The input is the variable's value. What parses must
// print back as exactly the input (no prefix parsing, no wrapping); the rest must throw.
#include <cstdlib>
#include <string>

#include "util/env.hpp"
#include "hetgraph/error.hpp"

namespace {
void check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string value(reinterpret_cast<const char*>(data), size);
  using namespace hetgraph::detail;
  if (const auto dev = parse_device_spec(value)) {
    check(dev->first >= 0 && dev->second >= 0);
    for (char c : value) check((c >= '0' && c <= '9') || c == ':');
    const std::string back = std::to_string(dev->first) + ":" + std::to_string(dev->second);
    // Leading zeros are the one spelling that does not print back.
    if (value.find("0") == std::string::npos) check(back == value);
  }
  if (const auto n = parse_int(value)) {
    if (value.rfind("0", 0) != 0 && value.rfind("-0", 0) != 0) check(std::to_string(*n) == value);
  }
  double d = 0;
  (void)parse_real(value, d);
  (void)quote(value);

  if (value.find('\0') != std::string::npos) return 0;  // not an environment value
  setenv("HETGRAPH_FUZZ_VALUE", value.c_str(), 1);
  try {
    const std::int64_t v = env_int<hetgraph::Error>("HETGRAPH_FUZZ_VALUE", -5, 1000, 7);
    check(v >= -5 && v <= 1000);
    check(!value.empty() || v == 7);
  } catch (const hetgraph::Error&) {
    check(!value.empty());
  }
  try {
    const std::string c =
        env_choice<hetgraph::Error>("HETGRAPH_FUZZ_VALUE", {"", "0", "1", "force"});
    check(c == value);
  } catch (const hetgraph::Error&) {
    check(value != "" && value != "0" && value != "1" && value != "force");
  }
  return 0;
}
