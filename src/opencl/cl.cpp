// SPDX-License-Identifier: Apache-2.0
#include "opencl/cl.hpp"

#include "hetgraph/error.hpp"

namespace hetgraph::detail::cl {

std::string error_name(cl_int code) {
  switch (code) {
#define HG_CL_NAME(c) \
  case c:             \
    return #c;
    HG_CL_NAME(CL_SUCCESS)
    HG_CL_NAME(CL_DEVICE_NOT_FOUND)
    HG_CL_NAME(CL_DEVICE_NOT_AVAILABLE)
    HG_CL_NAME(CL_COMPILER_NOT_AVAILABLE)
    HG_CL_NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    HG_CL_NAME(CL_OUT_OF_RESOURCES)
    HG_CL_NAME(CL_OUT_OF_HOST_MEMORY)
    HG_CL_NAME(CL_PROFILING_INFO_NOT_AVAILABLE)
    HG_CL_NAME(CL_MEM_COPY_OVERLAP)
    HG_CL_NAME(CL_IMAGE_FORMAT_MISMATCH)
    HG_CL_NAME(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    HG_CL_NAME(CL_BUILD_PROGRAM_FAILURE)
    HG_CL_NAME(CL_MAP_FAILURE)
    HG_CL_NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    HG_CL_NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    HG_CL_NAME(CL_COMPILE_PROGRAM_FAILURE)
    HG_CL_NAME(CL_LINKER_NOT_AVAILABLE)
    HG_CL_NAME(CL_LINK_PROGRAM_FAILURE)
    HG_CL_NAME(CL_DEVICE_PARTITION_FAILED)
    HG_CL_NAME(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    HG_CL_NAME(CL_INVALID_VALUE)
    HG_CL_NAME(CL_INVALID_DEVICE_TYPE)
    HG_CL_NAME(CL_INVALID_PLATFORM)
    HG_CL_NAME(CL_INVALID_DEVICE)
    HG_CL_NAME(CL_INVALID_CONTEXT)
    HG_CL_NAME(CL_INVALID_QUEUE_PROPERTIES)
    HG_CL_NAME(CL_INVALID_COMMAND_QUEUE)
    HG_CL_NAME(CL_INVALID_HOST_PTR)
    HG_CL_NAME(CL_INVALID_MEM_OBJECT)
    HG_CL_NAME(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    HG_CL_NAME(CL_INVALID_IMAGE_SIZE)
    HG_CL_NAME(CL_INVALID_SAMPLER)
    HG_CL_NAME(CL_INVALID_BINARY)
    HG_CL_NAME(CL_INVALID_BUILD_OPTIONS)
    HG_CL_NAME(CL_INVALID_PROGRAM)
    HG_CL_NAME(CL_INVALID_PROGRAM_EXECUTABLE)
    HG_CL_NAME(CL_INVALID_KERNEL_NAME)
    HG_CL_NAME(CL_INVALID_KERNEL_DEFINITION)
    HG_CL_NAME(CL_INVALID_KERNEL)
    HG_CL_NAME(CL_INVALID_ARG_INDEX)
    HG_CL_NAME(CL_INVALID_ARG_VALUE)
    HG_CL_NAME(CL_INVALID_ARG_SIZE)
    HG_CL_NAME(CL_INVALID_KERNEL_ARGS)
    HG_CL_NAME(CL_INVALID_WORK_DIMENSION)
    HG_CL_NAME(CL_INVALID_WORK_GROUP_SIZE)
    HG_CL_NAME(CL_INVALID_WORK_ITEM_SIZE)
    HG_CL_NAME(CL_INVALID_GLOBAL_OFFSET)
    HG_CL_NAME(CL_INVALID_EVENT_WAIT_LIST)
    HG_CL_NAME(CL_INVALID_EVENT)
    HG_CL_NAME(CL_INVALID_OPERATION)
    HG_CL_NAME(CL_INVALID_GL_OBJECT)
    HG_CL_NAME(CL_INVALID_BUFFER_SIZE)
    HG_CL_NAME(CL_INVALID_MIP_LEVEL)
    HG_CL_NAME(CL_INVALID_GLOBAL_WORK_SIZE)
    HG_CL_NAME(CL_INVALID_PROPERTY)
    HG_CL_NAME(CL_INVALID_IMAGE_DESCRIPTOR)
    HG_CL_NAME(CL_INVALID_COMPILER_OPTIONS)
    HG_CL_NAME(CL_INVALID_LINKER_OPTIONS)
    HG_CL_NAME(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef HG_CL_NAME
    case -1001:  // cl_khr_icd: the loader found no vendor library
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return "CL error " + std::to_string(code);
  }
}

void check(cl_int code, std::string_view call, const char* file, int line,
           std::string_view context) {
  if (code == CL_SUCCESS) return;
  std::string msg =
      std::string(call) + " failed: " + error_name(code) + " (" + std::to_string(code) + ")";
  if (!context.empty()) msg += " [" + std::string(context) + "]";
  std::string_view f(file);
  if (const auto slash = f.rfind("src/"); slash != std::string_view::npos) f = f.substr(slash);
  msg += " at " + std::string(f) + ":" + std::to_string(line);
  throw PlatformError(msg);
}

namespace {
void wait_for(const Event& ev, const char* what) {
  const cl_event e = ev.get();
  check(clWaitForEvents(1, &e), "clWaitForEvents", __FILE__, __LINE__, what);
}
}  // namespace

void read_buffer(cl_command_queue q, cl_mem m, std::size_t offset, std::size_t bytes, void* dst) {
  Event ev;
  HG_CL(clEnqueueReadBuffer(q, m, CL_FALSE, offset, bytes, dst, 0, nullptr, ev.out()));
  wait_for(ev, "read");
}

void write_buffer(cl_command_queue q, cl_mem m, std::size_t offset, std::size_t bytes,
                  const void* src) {
  Event ev;
  HG_CL(clEnqueueWriteBuffer(q, m, CL_FALSE, offset, bytes, src, 0, nullptr, ev.out()));
  wait_for(ev, "write");
}

void* map_buffer(cl_command_queue q, cl_mem m, std::size_t bytes, cl_event after,
                 std::string_view what) {
  Event ev;
  cl_int err = CL_SUCCESS;
  void* ptr = clEnqueueMapBuffer(q, m, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes,
                                 after ? 1 : 0, after ? &after : nullptr, ev.out(), &err);
  check(err, "clEnqueueMapBuffer", __FILE__, __LINE__, what);
  wait_for(ev, "map");
  return ptr;
}

void unmap_buffer(cl_command_queue q, cl_mem m, void* ptr) {
  Event ev;
  HG_CL(clEnqueueUnmapMemObject(q, m, ptr, 0, nullptr, ev.out()));
  wait_for(ev, "unmap");
}

void set_arg(cl_kernel k, cl_uint index, std::size_t size, const void* value) {
  const cl_int err = clSetKernelArg(k, index, size, value);
  if (err == CL_SUCCESS) return;
  char name[128] = {};
  clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof(name) - 1, name, nullptr);
  check(err, "clSetKernelArg", __FILE__, __LINE__,
        "kernel " + std::string(name) + ", argument " + std::to_string(index));
}

}  // namespace hetgraph::detail::cl
