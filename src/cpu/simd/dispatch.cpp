// SPDX-License-Identifier: Apache-2.0
// The code path this process runs (code_path.hpp): the highest x86-64 level built that the CPU
// has, capped by HETGRAPH_MAX_CPU_ISA; and the entry points baseline code calls through it.
#include <algorithm>
#include <cctype>
#include <string>

#include "util/env.hpp"
#include "cpu/kernel.hpp"
#include "cpu/kernels/winograd.hpp"
#include "cpu/simd/code_path.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

#if defined(HETGRAPH_NATIVE_BUILD)
namespace isa_native {
const CodePath& code_path_table();
}
#else
namespace isa_v2 {
const CodePath& code_path_table();
}
// Builds stop at a top level (CMakeLists.txt: HETGRAPH_ISA_LEVELS; ThreadSanitizer's has the
// baseline only).
#if HETGRAPH_CODE_PATH_TOP >= 3
namespace isa_v3 {
const CodePath& code_path_table();
}
#endif
#if HETGRAPH_CODE_PATH_TOP >= 4
namespace isa_v4 {
const CodePath& code_path_table();
}
#endif
#endif

namespace {

#if !defined(HETGRAPH_NATIVE_BUILD)
// The highest x86-64 level whose instructions the CPU and the OS (saved AVX state) have: libgcc
// checks both (XGETBV) for these names.
int cpu_level() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return 4;
  if (__builtin_cpu_supports("x86-64-v3")) return 3;
  return 2;
}
#endif

const CodePath& choose() {
#if defined(HETGRAPH_NATIVE_BUILD)
  code_path_cap(env_value("HETGRAPH_MAX_CPU_ISA"));  // checked, though one path has no choice
  return isa_native::code_path_table();
#else
  switch (std::min({cpu_level(), code_path_cap(env_value("HETGRAPH_MAX_CPU_ISA")),
                    code_path_top()})) {
#if HETGRAPH_CODE_PATH_TOP >= 4
    case 4:
      return isa_v4::code_path_table();
#endif
#if HETGRAPH_CODE_PATH_TOP >= 3
    case 3:
      return isa_v3::code_path_table();
#endif
    default:
      return isa_v2::code_path_table();
  }
#endif
}

// Why a path has no own Winograd kernel.
constexpr const char* kNoOwnWinograd =
    "not in this CPU's code path (own Winograd kernels need AVX2 and FMA; with AVX-512, "
    "oneDNN's)";

}  // namespace

int code_path_cap(std::string_view value) {
  std::string v(value);
  std::transform(v.begin(), v.end(), v.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v.empty() || v == "x86-64-v4" || v == "avx512") return 4;
  if (v == "x86-64-v3" || v == "avx2") return 3;
  if (v == "x86-64-v2" || v == "sse42" || v == "sse41") return 2;
  throw PlatformError("HETGRAPH_MAX_CPU_ISA=\"" + std::string(value) +
                      "\" is not one of x86-64-v2 (or sse42), x86-64-v3 (or avx2), x86-64-v4 (or "
                      "avx512)");
}

int code_path_top() {
#if defined(HETGRAPH_NATIVE_BUILD)
  return 0;
#else
  return HETGRAPH_CODE_PATH_TOP;
#endif
}

const CodePath& code_path() {
  static const CodePath& path = choose();
  return path;
}

float vec_exp(float x) {
  float y;
  code_path().map(VecFn::exp, 1.0f, &x, nullptr, &y, 1);
  return y;
}

float vec_log(float x) {
  float y;
  code_path().map(VecFn::log, 1.0f, &x, nullptr, &y, 1);
  return y;
}

void register_pool_kernels(KernelRegistry& r) {
  code_path().register_pool(r);
}

void register_reduce_kernels(KernelRegistry& r) {
  code_path().register_reduce(r);
}

void register_elementwise_kernels(KernelRegistry& r) {
  code_path().register_elementwise(r);
}

void register_embedding_kernels(KernelRegistry& r) {
  code_path().register_embedding(r);
}

void register_optimizer_kernels(KernelRegistry& r) {
  code_path().register_optimizer(r);
}

const char* reject_winograd_f4x3(const KernelArgs& a) {
  const CodePath& p = code_path();
  return p.reject_winograd_f4x3 ? p.reject_winograd_f4x3(a) : kNoOwnWinograd;
}

const char* reject_winograd_f2x3(const KernelArgs& a) {
  const CodePath& p = code_path();
  return p.reject_winograd_f2x3 ? p.reject_winograd_f2x3(a) : kNoOwnWinograd;
}

std::unique_ptr<CpuKernel> make_winograd_f4x3(const KernelArgs& a) {
  const CodePath& p = code_path();
  return p.make_winograd_f4x3 ? p.make_winograd_f4x3(a) : nullptr;
}

std::unique_ptr<CpuKernel> make_winograd_f2x3(const KernelArgs& a) {
  const CodePath& p = code_path();
  return p.make_winograd_f2x3 ? p.make_winograd_f2x3(a) : nullptr;
}

bool own_winograd_available() {
  return code_path().make_winograd_f4x3 != nullptr;
}

std::int64_t own_winograd_min_tiles() {
  const CodePath& p = code_path();
  return p.winograd_min_tiles ? p.winograd_min_tiles() : 0;
}

bool any_winograd_kernel() {
  return winograd_available() ||
         (own_winograd_available() && conv_activation_layout() != ActivationLayout::nchw);
}

}  // namespace hetgraph::detail::cpu
