// SPDX-License-Identifier: Apache-2.0
// hetgraph's own Winograd convolution kernels (winograd.cpp): F(4x4, 3x3) and F(2x2, 3x3), for
// conv2d and fused_conv2d between blocked or channels-last values on AVX2 and AVX-512 CPUs;
// registered with the convolution kernels (conv.cpp), F(4x4) first, ahead of oneDNN's direct ones.
// These entry points call the code path's kernels (simd/code_path.hpp, simd/dispatch.cpp), and
// reject every node where the path has none.
#pragma once

#include <memory>

#include "cpu/kernel.hpp"

namespace hetgraph::detail::cpu {

/// Why a kernel does not take this node (null when it does).
const char* reject_winograd_f4x3(const KernelArgs& a);
const char* reject_winograd_f2x3(const KernelArgs& a);
std::unique_ptr<CpuKernel> make_winograd_f4x3(const KernelArgs& a);
std::unique_ptr<CpuKernel> make_winograd_f2x3(const KernelArgs& a);
/// Whether this process's code path has the kernels (AVX2 and FMA; AVX-512 too).
bool own_winograd_available();
/// The fewest output tiles of its own size (2x2 or 4x4) a layer needs for them on this code
/// path: 16 with AVX2 (F(2x2) only; F(4x4) has its 28x28 rule), 192 with AVX-512 (both), where
/// oneDNN's direct kernels are stronger; 0 without the kernels.
std::int64_t own_winograd_min_tiles();
/// Whether some Winograd kernel (oneDNN's or ours) can take a 3x3 stride-1 convolution between
/// blocked values on this CPU with CompileOptions' defaults: what a test that expects Winograd
/// asks, instead of assuming the build machine's ISA.
bool any_winograd_kernel();

}  // namespace hetgraph::detail::cpu
