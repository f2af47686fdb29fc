// The process-wide oneDNN CPU engine and a stream per executing thread. Only kernel files that
// use oneDNN include this (dnnl.hpp is a large header).
#pragma once

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "cpu/parallel.hpp"

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

/// One object per team size, each created with the calling thread's OpenMP team set to that
/// size. oneDNN fixes a primitive's thread partition (and per-thread buffers) when it creates
/// it, from omp_get_max_threads(), and runs it with that many threads whatever the executing
/// team: measured here, a convolution made for 2 threads spawns 2 threads inside a 1-thread
/// executor (oversubscription), and the gemm-based one crashes. So every primitive is made
/// for each team size the engine may use, plus 1, and a run picks its team's.
template <class T>
class TeamVariants {
 public:
  TeamVariants() = default;
  /// make(threads) creates one variant; it runs with the OpenMP team set to `threads`.
  template <class Make>
  TeamVariants(std::vector<int> sizes, Make&& make) {
    sizes.push_back(1);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (int t : sizes) {
      TeamSize team(t);
      items_.emplace_back(t, make(t));
    }
  }
  /// The variant made for `threads`, else the one for the most threads below it (a variant
  /// never runs more threads than its team has).
  T& pick(int threads) { return items_[index(threads)].second; }
  std::size_t index(int threads) const {
    std::size_t k = 0;
    for (std::size_t i = 0; i < items_.size(); ++i) {
      if (items_[i].first <= threads) k = i;
    }
    return k;
  }
  std::vector<std::pair<int, T>>& all() { return items_; }
  const std::vector<std::pair<int, T>>& all() const { return items_; }

 private:
  std::vector<std::pair<int, T>> items_;
};

}  // namespace hetgraph::detail::cpu
