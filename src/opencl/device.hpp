// SPDX-License-Identifier: Apache-2.0
// An OpenCL device as hetgraph uses it: chosen once (GPU preferred, else any; or explicitly by
// option or HETGRAPH_OPENCL_DEVICE=platform:device), with one context, an out-of-order
// command queue where the device has one (in-order otherwise), a few in-order queues for
// CLBlast, and the program cache. Devices are shared by every Platform::opencl() of a process
// that selects the same device, so programs are built once per process.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "hetgraph/compiler.hpp"
#include "opencl/cl.hpp"
#include "opencl/program_cache.hpp"

namespace hetgraph::detail::cl {

struct DeviceInfo {
  int platform_index = 0, device_index = 0;
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  std::string platform_name, platform_version, name, version, driver;
  cl_device_type type = 0;
};

/// Every device of every platform. Throws PlatformError when no OpenCL platform is installed.
std::vector<DeviceInfo> enumerate_devices();
std::string type_name(cl_device_type t);
/// "  0:0  Portable Computing Language / pthread-... (CPU)" lines.
std::string describe(const std::vector<DeviceInfo>& devices);
/// The device the options (or HETGRAPH_OPENCL_DEVICE, or the automatic choice) select.
DeviceInfo choose_device(const OpenClOptions& options);

class Device {
 public:
  /// The shared device for these options, created on first use (and again after a device
  /// error marked the previous one broken).
  static std::shared_ptr<Device> get(const OpenClOptions& options);
  explicit Device(const DeviceInfo& info);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  cl_context context() const { return ctx_.get(); }
  cl_device_id id() const { return info_.device; }
  bool is_pocl() const { return pocl_; }
  /// The main queue: out-of-order unless the device lacks it or `in_order` is asked for.
  cl_command_queue queue(bool in_order) const;
  bool out_of_order_supported() const { return bool(ooo_queue_); }
  /// In-order queues for CLBlast calls, which cannot take a wait list themselves.
  cl_command_queue gemm_queue(std::size_t i) const {
    return gemm_queues_[i % gemm_queues_.size()].get();
  }
  std::size_t gemm_queue_count() const { return gemm_queues_.size(); }
  std::size_t max_work_group() const { return max_wg_; }
  /// Work-groups of every kernel launch: 8 per compute unit, at most 1024. Fixed per device,
  /// so launch sizes (and results) never depend on the tensor or on timing. (On PoCL, 2 per
  /// unit made small graphs' steps slightly faster and wide graphs slower: A/B runs of
  /// mnist-softmax and par-matmul-512 within noise of each other, par-matmul favouring 8.)
  std::size_t grid_groups() const { return std::clamp<std::size_t>(8 * compute_units_, 8, 1024); }
  cl_uint compute_units() const { return compute_units_; }
  std::size_t max_alloc() const { return max_alloc_; }
  ProgramCache& programs() { return *programs_; }
  /// "OpenCL device <name>", for messages.
  std::string label() const { return "OpenCL device " + info_.name; }

  /// True the first time it is asked for `what` on this device (one-time preparations).
  bool first_use(const std::string& what) {
    std::lock_guard lk(mu_);
    return done_.insert(what).second;
  }

  /// After a failure that may leave the context unusable (real GPUs lose it on a device
  /// fault), the next Device::get makes a new one; graphs compiled earlier keep this one.
  void mark_broken() { broken_ = true; }
  bool broken() const { return broken_; }

 private:
  DeviceInfo info_;
  Context ctx_;
  Queue ooo_queue_, in_order_queue_;
  std::vector<Queue> gemm_queues_;
  std::unique_ptr<ProgramCache> programs_;
  bool pocl_ = false;
  std::size_t max_wg_ = 1, max_alloc_ = 0;
  cl_uint compute_units_ = 1;
  std::atomic<bool> broken_{false};
  std::mutex mu_;
  std::set<std::string> done_;
};

}  // namespace hetgraph::detail::cl
