// SPDX-License-Identifier: Apache-2.0
// The OpenCL C API as hetgraph uses it: one checking function that turns every failed call
// into a PlatformError naming the call, the CL error by name, file and line; and reference
// holders for CL objects so no error path leaks them.
//
//   HG_CL(clFinish(queue));                                      // status-returning calls
//   cl_mem m = HG_CL_CREATE(clCreateBuffer, ctx, flags, bytes, nullptr);  // errcode_ret calls
#pragma once

#include <CL/cl.h>

#include <string>
#include <string_view>
#include <utility>

namespace hetgraph::detail::cl {

/// "CL_OUT_OF_RESOURCES" for -5; "CL error -1234" for codes OpenCL does not define.
std::string error_name(cl_int code);

/// Throws PlatformError("<call> failed: <CL error name> (<code>) [<context>] at <file>:<line>")
/// unless code is CL_SUCCESS.
void check(cl_int code, std::string_view call, const char* file, int line,
           std::string_view context = {});

/// What a failed creator was making, from its arguments: clCreateKernel(program, name) names
/// the kernel, its family and source file (program_cache.cpp) and the program's kernels;
/// other creators add nothing.
std::string failure_context(cl_program program, const char* kernel);
template <class... A>
std::string failure_context(const A&...) {
  return {};
}

/// The function name of a call expression ("clFinish(q)" -> "clFinish").
constexpr std::string_view call_name(std::string_view expr) {
  return expr.substr(0, expr.find('('));
}

}  // namespace hetgraph::detail::cl

#define HG_CL(call)                                                                         \
  ::hetgraph::detail::cl::check((call), ::hetgraph::detail::cl::call_name(#call), __FILE__, \
                                __LINE__)

// For creators that report through a trailing `cl_int* errcode_ret`. A failure says what was
// being created where the arguments tell (failure_context).
#define HG_CL_CREATE(fn, ...)                                                              \
  [&] {                                                                                    \
    cl_int hg_err_ = CL_SUCCESS;                                                           \
    auto hg_obj_ = fn(__VA_ARGS__, &hg_err_);                                              \
    if (hg_err_ != CL_SUCCESS) {                                                           \
      ::hetgraph::detail::cl::check(hg_err_, #fn, __FILE__, __LINE__,                      \
                                    ::hetgraph::detail::cl::failure_context(__VA_ARGS__)); \
    }                                                                                      \
    return hg_obj_;                                                                        \
  }()

namespace hetgraph::detail::cl {

template <class T>
struct RefTraits;
template <>
struct RefTraits<cl_context> {
  static void retain(cl_context o) { clRetainContext(o); }
  static void release(cl_context o) { clReleaseContext(o); }
};
template <>
struct RefTraits<cl_command_queue> {
  static void retain(cl_command_queue o) { clRetainCommandQueue(o); }
  static void release(cl_command_queue o) { clReleaseCommandQueue(o); }
};
template <>
struct RefTraits<cl_mem> {
  static void retain(cl_mem o) { clRetainMemObject(o); }
  static void release(cl_mem o) { clReleaseMemObject(o); }
};
template <>
struct RefTraits<cl_program> {
  static void retain(cl_program o) { clRetainProgram(o); }
  static void release(cl_program o) { clReleaseProgram(o); }
};
template <>
struct RefTraits<cl_kernel> {
  static void retain(cl_kernel o) { clRetainKernel(o); }
  static void release(cl_kernel o) { clReleaseKernel(o); }
};
template <>
struct RefTraits<cl_event> {
  static void retain(cl_event o) { clRetainEvent(o); }
  static void release(cl_event o) { clReleaseEvent(o); }
};

/// Owns one reference to a CL object (released in the destructor; release codes are ignored
/// because destructors must not throw and nothing useful can be done about them).
template <class T>
class Ref {
 public:
  Ref() = default;
  /// Adopts a reference the caller owns (what clCreate* returned).
  explicit Ref(T o) : o_(o) {}
  Ref(const Ref& r) : o_(r.o_) {
    if (o_) RefTraits<T>::retain(o_);
  }
  Ref(Ref&& r) noexcept : o_(std::exchange(r.o_, nullptr)) {}
  Ref& operator=(Ref r) noexcept {
    std::swap(o_, r.o_);
    return *this;
  }
  ~Ref() {
    if (o_) RefTraits<T>::release(o_);
  }
  T get() const { return o_; }
  T* out() {  // for APIs that return a new reference through a pointer
    reset();
    return &o_;
  }
  void reset() { *this = Ref(); }
  explicit operator bool() const { return o_ != nullptr; }

 private:
  T o_ = nullptr;
};

using Context = Ref<cl_context>;
using Queue = Ref<cl_command_queue>;
using Mem = Ref<cl_mem>;
using Program = Ref<cl_program>;
using Kernel = Ref<cl_kernel>;
using Event = Ref<cl_event>;

// Host transfers that block on their own event only. Some drivers (PoCL) implement the
// blocking flag as a clFinish of the whole queue, which on an out-of-order queue would also
// wait for unrelated work still running.
void read_buffer(cl_command_queue q, cl_mem m, std::size_t offset, std::size_t bytes, void* dst);
void write_buffer(cl_command_queue q, cl_mem m, std::size_t offset, std::size_t bytes,
                  const void* src);
/// Maps the first `bytes` of `m` for reading and writing, after `after` when given.
void* map_buffer(cl_command_queue q, cl_mem m, std::size_t bytes, cl_event after,
                 std::string_view what);
/// Unmaps and waits until the unmap is done.
void unmap_buffer(cl_command_queue q, cl_mem m, void* ptr);

/// Sets kernel arguments in order; each failure names the kernel and the argument index.
void set_arg(cl_kernel k, cl_uint index, std::size_t size, const void* value);
template <class... A>
void set_args(cl_kernel k, const A&... a) {
  cl_uint i = 0;
  (set_arg(k, i++, sizeof(A), &a), ...);
}

}  // namespace hetgraph::detail::cl
