// The process-wide oneDNN CPU engine and a stream per executing thread. Only kernel files that
// use oneDNN include this (dnnl.hpp is a large header).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace hetgraph::detail::cpu {

inline dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

/// Streams are cheap but not free to create; each executor thread keeps one.
inline dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream s(dnnl_engine());
  return s;
}

}  // namespace hetgraph::detail::cpu
