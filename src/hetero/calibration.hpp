// SPDX-License-Identifier: Apache-2.0
// The cost figures placement assumes of a device when the user gave none: measured through
// hetgraph itself on that device (its real kernels), once per process and device.
#pragma once

#include "hetgraph/compiler.hpp"

namespace hetgraph::detail::hetero {

/// Times a 256x256x256 matmul (gflops), a streaming add of 2^20 floats (gbytes_per_s), a
/// chain of 32 tiny adds (node_us) on `member`; for an OpenCL device also copies between
/// pinned host memory and the device both ways (rates, and the latency of a small copy whose
/// completion reaches the host through an event callback). A few tens of milliseconds plus the
/// kernels' first build on that device.
DeviceCosts measure_costs(const Platform& member);

}  // namespace hetgraph::detail::hetero
