// SPDX-License-Identifier: Apache-2.0
#include "opencl/device.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>

#include "util/env.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cl {

namespace {

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  std::size_t n = 0;
  HG_CL(clGetPlatformInfo(p, what, 0, nullptr, &n));
  std::string s(n, '\0');
  HG_CL(clGetPlatformInfo(p, what, n, s.data(), nullptr));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string device_string(cl_device_id d, cl_device_info what) {
  std::size_t n = 0;
  HG_CL(clGetDeviceInfo(d, what, 0, nullptr, &n));
  std::string s(n, '\0');
  HG_CL(clGetDeviceInfo(d, what, n, s.data(), nullptr));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  HG_CL(clGetDeviceInfo(d, what, sizeof(v), &v, nullptr));
  return v;
}

const char* kInstallHint =
    "install an OpenCL driver (ICD), e.g. Debian's pocl-opencl-icd for the CPU or the GPU "
    "vendor's; `clinfo` lists what the loader finds";

}  // namespace

std::string type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "GPU";
  if (t & CL_DEVICE_TYPE_CPU) return "CPU";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  if (t & CL_DEVICE_TYPE_CUSTOM) return "custom";
  return "unknown";
}

std::vector<DeviceInfo> enumerate_devices() {
  cl_uint np = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &np);
  if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0)) {
    throw PlatformError(std::string("no OpenCL platform found (clGetPlatformIDs: ") +
                        (err == CL_SUCCESS ? "0 platforms" : error_name(err)) +
                        "): " + kInstallHint);
  }
  HG_CL(err);
  std::vector<cl_platform_id> platforms(np);
  HG_CL(clGetPlatformIDs(np, platforms.data(), nullptr));
  std::vector<DeviceInfo> out;
  for (cl_uint p = 0; p < np; ++p) {
    cl_uint nd = 0;
    const cl_int e = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &nd);
    if (e == CL_DEVICE_NOT_FOUND || nd == 0) continue;  // a platform without devices
    HG_CL(e);
    std::vector<cl_device_id> devs(nd);
    HG_CL(clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr));
    for (cl_uint d = 0; d < nd; ++d) {
      DeviceInfo i;
      i.platform_index = static_cast<int>(p);
      i.device_index = static_cast<int>(d);
      i.platform = platforms[p];
      i.device = devs[d];
      i.platform_name = platform_string(platforms[p], CL_PLATFORM_NAME);
      i.platform_version = platform_string(platforms[p], CL_PLATFORM_VERSION);
      i.name = device_string(devs[d], CL_DEVICE_NAME);
      i.version = device_string(devs[d], CL_DEVICE_VERSION);
      i.driver = device_string(devs[d], CL_DRIVER_VERSION);
      i.type = device_value<cl_device_type>(devs[d], CL_DEVICE_TYPE);
      out.push_back(std::move(i));
    }
  }
  return out;
}

std::string describe(const std::vector<DeviceInfo>& devices) {
  if (devices.empty()) return "  (no devices)\n";
  std::string s;
  for (const DeviceInfo& d : devices) {
    s += "  " + std::to_string(d.platform_index) + ":" + std::to_string(d.device_index) + "  " +
         d.platform_name + " / " + d.name + " (" + type_name(d.type) + ", " + d.version + ")\n";
  }
  return s;
}

DeviceInfo choose_device(const OpenClOptions& o) {
  const std::vector<DeviceInfo> devs = enumerate_devices();
  if (devs.empty()) {
    throw PlatformError("no OpenCL device found: the installed platforms have no devices; " +
                        std::string(kInstallHint));
  }
  int p = o.platform_index, d = o.device_index;
  std::string how;
  if (p >= 0 || d >= 0) {
    p = std::max(p, 0);
    d = std::max(d, 0);
    how = "OpenClOptions";
  } else if (const std::string v = env_value("HETGRAPH_OPENCL_DEVICE"); !v.empty()) {
    const auto spec = parse_device_spec(v);
    if (!spec) {
      throw PlatformError("HETGRAPH_OPENCL_DEVICE=" + quote(v) +
                          " is not platform:device (two indices from 0 to 2147483647, e.g. "
                          "0:0); the devices are:\n" +
                          describe(devs));
    }
    std::tie(p, d) = *spec;
    how = "HETGRAPH_OPENCL_DEVICE";
  } else {
    for (const DeviceInfo& i : devs) {
      if (i.type & CL_DEVICE_TYPE_GPU) return i;
    }
    return devs.front();
  }
  for (const DeviceInfo& i : devs) {
    if (i.platform_index == p && i.device_index == d) return i;
  }
  throw PlatformError("OpenCL device " + std::to_string(p) + ":" + std::to_string(d) + " (from " +
                      how + ") does not exist; the devices are:\n" + describe(devs));
}

// ---- Device ----------------------------------------------------------------------------------

Device::Device(const DeviceInfo& info) : info_(info) {
  const cl_device_id dev = info_.device;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(info_.platform), 0};
  ctx_ = Context(HG_CL_CREATE(clCreateContext, props, 1, &dev, nullptr, nullptr));
  pocl_ = info_.platform_name.find("Portable Computing Language") != std::string::npos ||
          info_.version.find("PoCL") != std::string::npos;
  max_wg_ = device_value<std::size_t>(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  compute_units_ = device_value<cl_uint>(dev, CL_DEVICE_MAX_COMPUTE_UNITS);
  max_alloc_ = static_cast<std::size_t>(device_value<cl_ulong>(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE));

  // Out-of-order when the device reports it; some drivers still refuse the property at
  // creation, which leaves only the in-order queue.
  // Every queue records command times (for traces); OpenCL requires the capability.
  const auto qprops = device_value<cl_command_queue_properties>(dev, CL_DEVICE_QUEUE_PROPERTIES);
  const cl_command_queue_properties prof = qprops & CL_QUEUE_PROFILING_ENABLE;
  if (qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q =
        clCreateCommandQueue(ctx_.get(), dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | prof, &err);
    if (err == CL_SUCCESS) {
      ooo_queue_ = Queue(q);
    } else if (err != CL_INVALID_QUEUE_PROPERTIES) {
      check(err, "clCreateCommandQueue", __FILE__, __LINE__, "out-of-order queue");
    }
  }
  in_order_queue_ = Queue(HG_CL_CREATE(clCreateCommandQueue, ctx_.get(), dev, prof));
  // Independent GEMMs overlap across these; one per compute unit up to 4 is plenty. PoCL gets
  // one: CLBlast's kernels run on grids that depend on the shapes, and PoCL 3.1 aborts when one
  // kernel runs at once with two grid sizes (see FOR_EACH in kernels/*.cl). Its GEMMs use every
  // core anyway.
  const std::size_t ng = pocl_ ? 1 : std::clamp<std::size_t>(compute_units_, 2, 4);
  for (std::size_t i = 0; i < ng; ++i)
    gemm_queues_.emplace_back(HG_CL_CREATE(clCreateCommandQueue, ctx_.get(), dev, prof));

  std::string options = "-cl-std=CL1.2";
  const auto fp = device_value<cl_device_fp_config>(dev, CL_DEVICE_SINGLE_FP_CONFIG);
  if (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)
    options += " -cl-fp32-correctly-rounded-divide-sqrt";
  programs_ = std::make_unique<ProgramCache>(
      ctx_.get(), dev, info_.name, info_.driver + " / " + info_.platform_version, options, pocl_);
}

Device::~Device() {
  // Work still queued must finish before its context goes (errors cannot be reported here).
  if (ooo_queue_) clFinish(ooo_queue_.get());
  if (in_order_queue_) clFinish(in_order_queue_.get());
  for (const Queue& q : gemm_queues_) clFinish(q.get());
}

cl_command_queue Device::queue(bool in_order) const {
  return in_order || !ooo_queue_ ? in_order_queue_.get() : ooo_queue_.get();
}

std::shared_ptr<Device> Device::get(const OpenClOptions& options) {
  const DeviceInfo info = choose_device(options);
  // Process-wide and never destroyed: drivers may already be unloaded when static
  // destructors run at exit, so releasing contexts then is unsafe.
  static auto* registry = new std::map<std::pair<int, int>, std::shared_ptr<Device>>();
  static std::mutex mu;
  std::lock_guard lk(mu);
  auto& slot = (*registry)[{info.platform_index, info.device_index}];
  if (!slot || slot->broken()) slot = std::make_shared<Device>(info);
  return slot;
}

}  // namespace hetgraph::detail::cl
