// The critical-path scheduler's ready set: a binary max-heap of node ids ordered by level
// (longest accumulated cost to a sink), ties broken by the lower id so the order is fixed.
// Entries carry their level, so comparisons never chase the level array (that indirection
// dominated the scheduler's cost on wide graphs of tiny nodes).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hetgraph::detail::cpu {

class ReadyHeap {
 public:
  /// `levels` must outlive the heap; a node's level is read when it is pushed.
  explicit ReadyHeap(std::span<const double> levels = {}) : levels_(levels) {}
  void set_levels(std::span<const double> levels) { levels_ = levels; }

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  void clear() { heap_.clear(); }
  void reserve(std::size_t n) { heap_.reserve(n); }

  void push(std::uint32_t v) {
    heap_.push_back({levels_[v], v});
    std::size_t i = heap_.size() - 1;
    const Entry e = heap_[i];
    while (i > 0) {
      const std::size_t p = (i - 1) / 2;
      if (!above(e, heap_[p])) break;
      heap_[i] = heap_[p];
      i = p;
    }
    heap_[i] = e;
  }

  std::uint32_t top() const { return heap_.front().id; }

  std::uint32_t pop() {
    const std::uint32_t out = heap_.front().id;
    const Entry last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return out;
    std::size_t i = 0;
    for (;;) {
      const std::size_t l = 2 * i + 1, r = l + 1;
      if (l >= n) break;
      const std::size_t c = r < n && above(heap_[r], heap_[l]) ? r : l;
      if (!above(heap_[c], last)) break;
      heap_[i] = heap_[c];
      i = c;
    }
    heap_[i] = last;
    return out;
  }

 private:
  struct Entry {
    double level;
    std::uint32_t id;
  };
  static bool above(const Entry& a, const Entry& b) {
    return a.level > b.level || (a.level == b.level && a.id < b.id);
  }
  std::span<const double> levels_;
  std::vector<Entry> heap_;
};

}  // namespace hetgraph::detail::cpu
