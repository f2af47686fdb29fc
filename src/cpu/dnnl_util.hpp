// SPDX-License-Identifier: Apache-2.0
// The process-wide oneDNN CPU engine and a stream per executing thread. Only kernel files that
// use oneDNN include this (dnnl.hpp is a large header).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
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

/// Weights that change only between runs (fixed_between_runs: an imported model's), kept in
/// the layout a primitive wants: reordered at the first run and after each host write,
/// instead of at every run. Measured at batch 1 (issue 18), where reordering every weight
/// each run is a large share of a CNN's time; matmul weights likewise (issue 48: oneDNN's
/// brgemm matmul packs plain weights at every call, 22 us of an LSTM step's 1-row product
/// that takes 5 us on packed ones). Shared by a kernel's team variants when they want the
/// same layout, and by the kernels that read the same weights in the same layout
/// (shared_fixed_weights: an unrolled LSTM's 64 steps pack their recurrent weights once, and
/// read one copy that stays in cache); the first refresh after a host write reorders, under a
/// lock, while the others wait (within a run no host write happens).
class FixedWeights {
 public:
  FixedWeights(const dnnl::memory::desc& user, const dnnl::memory::desc& prim, const void* data,
               const std::atomic<std::uint64_t>* host_writes)
      : host_writes_(host_writes), desc_(prim) {
    auto& eng = dnnl_engine();
    const dnnl::reorder::primitive_desc rpd(eng, user, eng, prim);
    if (rpd.scratchpad_desc().get_size() > 0) throw dnnl::error(dnnl_unimplemented, "scratchpad");
    buffer_.resize((prim.get_size() + sizeof(float) - 1) / sizeof(float));
    copy_ = dnnl::memory(prim, eng, buffer_.data());
    reorder_ = dnnl::reorder(rpd);
    args_ = {{DNNL_ARG_FROM, dnnl::memory(user, eng, const_cast<void*>(data))},
             {DNNL_ARG_TO, copy_}};
  }
  const dnnl::memory::desc& desc() const { return desc_; }
  const void* data() const { return buffer_.data(); }
  void refresh() {
    const std::uint64_t now = host_writes_->load(std::memory_order_acquire);
    if (fresh_.load(std::memory_order_acquire) && seen_.load(std::memory_order_relaxed) == now)
      return;
    const std::lock_guard<std::mutex> lock(mu_);
    if (fresh_.load(std::memory_order_relaxed) && seen_.load(std::memory_order_relaxed) == now)
      return;
    reorder_.execute(dnnl_stream(), args_);
    reorders_.fetch_add(1, std::memory_order_relaxed);
    seen_.store(now, std::memory_order_relaxed);
    fresh_.store(true, std::memory_order_release);
  }
  const std::atomic<std::uint64_t>* host_writes() const { return host_writes_; }
  /// Reorders of every FixedWeights in the process (fixed_weight_reorders).
  static std::uint64_t reorders() { return reorders_.load(std::memory_order_relaxed); }

 private:
  static inline std::atomic<std::uint64_t> reorders_{0};
  const std::atomic<std::uint64_t>* host_writes_;
  dnnl::memory::desc desc_;
  std::vector<float> buffer_;
  dnnl::memory copy_;
  dnnl::reorder reorder_;
  std::unordered_map<int, dnnl::memory> args_;
  std::mutex mu_;
  std::atomic<std::uint64_t> seen_{0};
  std::atomic<bool> fresh_{false};
};

/// The FixedWeights of `data` (watched through `host_writes`) in layout `prim`, shared with
/// every other kernel alive that asked for the same; made here when none is.
inline std::shared_ptr<FixedWeights> shared_fixed_weights(
    const dnnl::memory::desc& user, const dnnl::memory::desc& prim, const void* data,
    const std::atomic<std::uint64_t>* host_writes) {
  static std::mutex mu;
  static std::unordered_map<const void*, std::vector<std::weak_ptr<FixedWeights>>> made;
  const std::lock_guard<std::mutex> lock(mu);
  if (made.size() > 4096) {  // weights of executables gone
    std::erase_if(made, [](const auto& e) {
      return std::all_of(e.second.begin(), e.second.end(),
                         [](const auto& w) { return w.expired(); });
    });
  }
  auto& list = made[data];
  std::erase_if(list, [](const std::weak_ptr<FixedWeights>& w) { return w.expired(); });
  for (const auto& w : list) {
    auto f = w.lock();
    if (f && f->desc() == prim && f->host_writes() == host_writes) return f;
  }
  auto f = std::make_shared<FixedWeights>(user, prim, data, host_writes);
  list.push_back(f);
  return f;
}

}  // namespace hetgraph::detail::cpu
