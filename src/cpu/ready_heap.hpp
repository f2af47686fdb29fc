// The critical-path scheduler's ready set: a binary max-heap of node ids ordered by level
// (longest accumulated cost to a sink), ties broken by the lower id so the order is fixed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hetgraph::detail::cpu {

class ReadyHeap {
 public:
  /// `levels` must outlive the heap and not change while it holds nodes.
  explicit ReadyHeap(std::span<const double> levels = {}) : levels_(levels) {}
  void set_levels(std::span<const double> levels) { levels_ = levels; }

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  void clear() { heap_.clear(); }
  void reserve(std::size_t n) { heap_.reserve(n); }

  void push(std::uint32_t v) {
    heap_.push_back(v);
    std::size_t i = heap_.size() - 1;
    while (i > 0) {
      const std::size_t p = (i - 1) / 2;
      if (!above(heap_[i], heap_[p])) break;
      std::swap(heap_[i], heap_[p]);
      i = p;
    }
  }

  std::uint32_t top() const { return heap_.front(); }

  std::uint32_t pop() {
    const std::uint32_t out = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    std::size_t i = 0;
    const std::size_t n = heap_.size();
    for (;;) {
      const std::size_t l = 2 * i + 1, r = l + 1;
      std::size_t best = i;
      if (l < n && above(heap_[l], heap_[best])) best = l;
      if (r < n && above(heap_[r], heap_[best])) best = r;
      if (best == i) break;
      std::swap(heap_[i], heap_[best]);
      i = best;
    }
    return out;
  }

 private:
  bool above(std::uint32_t a, std::uint32_t b) const {
    const double la = levels_[a], lb = levels_[b];
    return la > lb || (la == lb && a < b);
  }
  std::span<const double> levels_;
  std::vector<std::uint32_t> heap_;
};

}  // namespace hetgraph::detail::cpu
