// SPDX-License-Identifier: Apache-2.0
// The OpenCL C sources of kernels/*.cl, embedded into the library at build time by
// cmake/EmbedKernels.cmake (the generated kernel_sources.cpp defines embedded_kernels()).
#pragma once

#include <span>
#include <string_view>

namespace hetgraph::detail::cl {

struct EmbeddedKernel {
  std::string_view family;  // file name without .cl
  std::string_view source;
};

std::span<const EmbeddedKernel> embedded_kernels();

}  // namespace hetgraph::detail::cl
