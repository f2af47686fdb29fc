// SPDX-License-Identifier: Apache-2.0
// Code paths: hetgraph's own vector kernels (vmath.hpp's functions and what is built on them,
// the elementwise, reduction, pooling, embedding and optimizer kernels whose loops vectorise,
// the Winograd convolutions) compiled once per x86-64 level, and the one
// this process runs, chosen once at startup from what the CPU has, as oneDNN chooses its own.
//
// The default build runs on any x86-64-v2 CPU (SSE4.2): the rest of the library is compiled for
// that level, and these kernels for x86-64-v2 (4 floats a vector), x86-64-v3 (AVX2 and FMA, 8
// floats; the own Winograd kernels) and x86-64-v4 (AVX-512, 16 floats). HETGRAPH_MAX_CPU_ISA
// caps the choice (x86-64-v2, x86-64-v3 or x86-64-v4; also sse42, avx2, avx512), as
// ONEDNN_MAX_CPU_ISA caps oneDNN's; a HETGRAPH_NATIVE build has one path, -march=native.
//
// Every value comes out of one path: the scalar entry points below are the vector code on one
// element, so a number is bit-identical whichever kernel computes it; paths differ from each
// other by rounding (FMA, vector width of sums), never within a process.
//
//   const CodePath& p = code_path();
//   p.map(VecFn::exp, 1.0f, x, nullptr, y, n);   // y = exp(x), p.lanes floats at a time
//   std::printf("%s\n", p.name);                 // "x86-64-v3 (AVX2, FMA)"
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#if defined(HETGRAPH_ISA)
#include "cpu/simd/isa_ns.hpp"
#endif

namespace hetgraph::detail {
template <class Args, class Kernel>
class KernelRegistry;  // common/kernel_registry.hpp
}

namespace hetgraph::detail::cpu {

struct KernelArgs;
class CpuKernel;
using KernelRegistry = detail::KernelRegistry<KernelArgs, CpuKernel>;  // as cpu/kernel.hpp

/// An element function of the vector kernels.
enum class VecFn : std::uint8_t {
  identity,
  exp,
  log,
  neg_log,  // -log(x)
  sigmoid,
  tanh,
  erf,
  relu,   // NaN stays NaN, -0 becomes +0
  scale,  // alpha * x
  neg,
};

/// How attention's scores change before their softmax (CodePath::exp_rows): multiplied by
/// `scale` (divided where `divide`) where `scaled`, then plus row r's mask, its elements at
/// mask + r * mask_row + j * mask_col (no mask where null).
struct ScoreRows {
  float scale = 1.0f;
  bool scaled = false, divide = false;
  const float* mask = nullptr;
  std::int64_t mask_row = 0, mask_col = 1;
};

/// Columns in one panel of CodePath::panel_product's packed operand, on every path.
inline constexpr std::int64_t kPanelWidth = 16;

/// One code path: its functions, compiled for one x86-64 level (src/cpu/simd/code_path.cpp).
struct CodePath {
  const char* level;  // "x86-64-v3", or "native"
  const char* name;   // "x86-64-v3 (AVX2, FMA)": what engine_report() says
  int lanes;          // floats per vector
  /// o[i] = f(x[i]) (+ add[i] where add is not null) for i < n; alpha is scale's factor. o may
  /// be x or add.
  void (*map)(VecFn f, float alpha, const float* x, const float* add, float* o, std::int64_t n);
  /// softmax (or log-softmax) of `rows` contiguous rows of n.
  void (*softmax_rows)(const float* x, float* o, std::int64_t rows, std::int64_t n, bool log_sm);
  /// Attention's scores, `rows` contiguous rows of n: each changed as `how` says, then
  /// exp(s - the row's max) in place; inv[r] = 1 / the row's sum (the softmax, unnormalised).
  void (*exp_rows)(float* s, std::int64_t rows, std::int64_t n, const ScoreRows& how, float* inv);
  /// softmax (or log-softmax) of one line of n elements s apart.
  void (*softmax_line)(const float* x, float* o, std::int64_t n, std::int64_t s, bool log_sm);
  /// o[j] = g[j] - exp(y[j]) * dot along one line (log-softmax's gradient); o may be g or y.
  void (*log_softmax_grad_line)(const float* g, const float* y, float* o, std::int64_t n,
                                std::int64_t s, float dot);
  /// sum of y[c] * log(max(p[c], FLT_MIN)) (cross-entropy against soft labels).
  float (*xlogy_sum)(const float* y, const float* p, std::int64_t n);
  /// out[r, j] = add[r, j] + sum over i < k of a[r, i] w[i, j], for r < rows and j < cols (a
  /// multiple of kPanelWidth); without `add` (null) the sum alone. w is packed in panels of
  /// kPanelWidth columns, each k rows of them: w[i, j] at panels[(j / kPanelWidth) * k *
  /// kPanelWidth + i * kPanelWidth + j % kPanelWidth]. Rows of a, add and out are lda, ldadd
  /// and ldo floats apart. Each sum runs over i in order: a result is the same whichever rows
  /// and columns a call covers.
  void (*panel_product)(const float* a, std::int64_t lda, std::int64_t rows, std::int64_t k,
                        const float* panels, std::int64_t cols, const float* add,
                        std::int64_t ldadd, float* out, std::int64_t ldo);
  /// The kernel families compiled per path (pool.cpp, reduce.cpp, elementwise.cpp,
  /// embedding.cpp, optimizer.cpp): kernel_registry.cpp registers them through these.
  void (*register_pool)(KernelRegistry& r);
  void (*register_reduce)(KernelRegistry& r);
  void (*register_elementwise)(KernelRegistry& r);
  void (*register_embedding)(KernelRegistry& r);
  void (*register_optimizer)(KernelRegistry& r);
  /// hetgraph's own Winograd kernels (winograd.cpp); null where the path has none.
  const char* (*reject_winograd_f4x3)(const KernelArgs& a);
  const char* (*reject_winograd_f2x3)(const KernelArgs& a);
  std::unique_ptr<CpuKernel> (*make_winograd_f4x3)(const KernelArgs& a);
  std::unique_ptr<CpuKernel> (*make_winograd_f2x3)(const KernelArgs& a);
  /// The fewest output tiles (of the kernel's own size) a layer needs for them.
  std::int64_t (*winograd_min_tiles)();
};

/// The path this process runs: the highest level built that the CPU (and HETGRAPH_MAX_CPU_ISA)
/// allows, chosen at the first call. Throws UsageError for an HETGRAPH_MAX_CPU_ISA it does not
/// know.
const CodePath& code_path();

/// The x86-64 level (2, 3 or 4) a value of HETGRAPH_MAX_CPU_ISA caps the choice at: 4 for "";
/// x86-64-v2 or sse42 (sse41 as oneDNN's name for it), x86-64-v3 or avx2, x86-64-v4 or avx512,
/// in any case. Throws PlatformError naming the variable otherwise.
int code_path_cap(std::string_view value);

/// The highest x86-64 level this library has a path for (2, 3 or 4; 0 in a HETGRAPH_NATIVE
/// build). The sanitizer builds compile levels 2 and 3 only (CMakeLists.txt says why).
int code_path_top();

/// Scalar vector math: one element through the path's vector code (bit-identical to it).
float vec_exp(float x);
float vec_log(float x);

#if defined(HETGRAPH_ISA_NS)
// What each path's sources define (in the path's namespace).
namespace HETGRAPH_ISA_NS {
const CodePath& code_path_table();
void register_pool_kernels(KernelRegistry& r);
void register_reduce_kernels(KernelRegistry& r);
void register_elementwise_kernels(KernelRegistry& r);
void register_embedding_kernels(KernelRegistry& r);
void register_optimizer_kernels(KernelRegistry& r);
#if HETGRAPH_OWN_WINOGRAD
const char* reject_winograd_f4x3(const KernelArgs& a);
const char* reject_winograd_f2x3(const KernelArgs& a);
std::unique_ptr<CpuKernel> make_winograd_f4x3(const KernelArgs& a);
std::unique_ptr<CpuKernel> make_winograd_f2x3(const KernelArgs& a);
std::int64_t winograd_min_tiles();
#endif
}  // namespace HETGRAPH_ISA_NS
#endif

}  // namespace hetgraph::detail::cpu
