// SPDX-License-Identifier: Apache-2.0
// The OpenCL side of a value crossing devices: what the op of a transfer node asks of the
// runtime's endpoint (src/common/transfer.hpp has the host side; src/hetero/ implements both).
#pragma once

#include <cstdint>
#include <span>

#include "opencl/cl.hpp"

namespace hetgraph::detail::cl {

class ClTransferEndpoint {
 public:
  virtual ~ClTransferEndpoint() = default;
  /// Enqueues the copy of `src` (the value, on this device) into host memory after `wait`,
  /// and arranges that its completion tells the receivers; returns its event.
  virtual Event enqueue_send(cl_command_queue q, cl_mem src, std::span<const cl_event> wait) = 0;
  /// Enqueues the copy of the value into `dst` on device `device` once the sender delivered it
  /// (and after `wait`); returns its event.
  virtual Event enqueue_recv(cl_command_queue q, cl_mem dst, std::int32_t device,
                             std::span<const cl_event> wait) = 0;
};

}  // namespace hetgraph::detail::cl
