// SPDX-License-Identifier: Apache-2.0
// The runtime's side of a value crossing devices (a transfer node's TransferLink::endpoint),
// as a platform's kernel sees it. The heterogeneous executable (src/hetero/) implements it;
// the CPU kernel of op transfer calls the host methods, the OpenCL op its own interface
// (src/opencl/ops.hpp: ClTransferEndpoint). A run never blocks a thread per crossing: a send
// hands its value over and signals the receivers (an OpenCL user event, or a host flag that
// a waiting recv kernel sleeps on); only a recv whose value has not arrived yet waits, in the
// thread that would run the next kernel of its device anyway.
#pragma once

namespace hetgraph::detail {

class TransferEndpoint {
 public:
  virtual ~TransferEndpoint() = default;
  /// The CPU produced the value at `src`: copy it out and tell every receiving device.
  virtual void host_send(const void* src) = 0;
  /// The CPU needs the value at `dst`: waits until it arrived (PlatformError when the device
  /// that sends it failed), then copies it in.
  virtual void host_recv(void* dst) = 0;
  /// The commit gate: the CPU's work before its commit point is done; checks every other
  /// device's work before theirs and lets their writers of variables run (throws the first
  /// failure: then no device writes a variable).
  virtual void commit() = 0;
};

}  // namespace hetgraph::detail
