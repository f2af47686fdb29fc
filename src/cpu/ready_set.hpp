// SPDX-License-Identifier: Apache-2.0
// The critical-path scheduler's ready set: node ids ordered by level (longest accumulated cost
// to a sink), ties broken by the lower id so the order is fixed. The order is known before a
// run, so each node gets its rank in it once (set_levels), and the set is a bitmap over ranks
// with a 64-way summary tree above it: push and pop are a few bit operations per tree level
// (3 levels up to 262,144 nodes) whatever the number of ready nodes. A binary heap did
// log2(ready) compare-and-moves per push and pop: with 10,000 ready nodes that was most of the
// scheduler's time per node.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace hetgraph::detail::cpu {

class ReadySet {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  ReadySet() = default;
  explicit ReadySet(std::span<const double> levels) { set_levels(levels); }

  /// Orders the nodes by `levels` (higher first, then lower id). Only while the set is empty.
  void set_levels(std::span<const double> levels) {
    const auto n = static_cast<std::uint32_t>(levels.size());
    node_.resize(n);
    std::iota(node_.begin(), node_.end(), 0u);
    std::stable_sort(node_.begin(), node_.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return levels[a] > levels[b]; });
    rank_.resize(n);
    for (std::uint32_t r = 0; r < n; ++r) rank_[node_[r]] = r;
    bits_.clear();
    std::size_t words = (std::size_t{n} + 63) / 64;
    do {
      bits_.emplace_back(std::max<std::size_t>(words, 1), 0);
      words = (words + 63) / 64;
    } while (bits_.back().size() > 1);
    size_ = 0;
  }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  void clear() {
    if (size_ == 0) return;
    for (auto& level : bits_) std::fill(level.begin(), level.end(), 0);
    size_ = 0;
  }
  /// The position of node v in the order (0 pops first).
  std::uint32_t rank(std::uint32_t v) const { return rank_[v]; }

  /// Adds v (not already in the set).
  void push(std::uint32_t v) {
    std::uint32_t r = rank_[v];
    for (auto& level : bits_) {
      std::uint64_t& word = level[r >> 6];
      const bool was_empty = word == 0;
      word |= std::uint64_t{1} << (r & 63);
      if (!was_empty) break;  // the levels above already say this word has a node
      r >>= 6;
    }
    ++size_;
  }

  /// The rank of the node pop() would return; kNone when empty.
  std::uint32_t top_rank() const {
    if (size_ == 0) return kNone;
    std::uint32_t r = 0;
    for (std::size_t k = bits_.size(); k-- > 0;)
      r = (r << 6) | static_cast<std::uint32_t>(std::countr_zero(bits_[k][r]));
    return r;
  }
  std::uint32_t top() const { return node_[top_rank()]; }

  /// Removes and returns the node with the highest level (lowest id among equals).
  std::uint32_t pop() {
    std::uint32_t r = top_rank();
    const std::uint32_t v = node_[r];
    for (auto& level : bits_) {
      std::uint64_t& word = level[r >> 6];
      word &= ~(std::uint64_t{1} << (r & 63));
      if (word != 0) break;
      r >>= 6;
    }
    --size_;
    return v;
  }

 private:
  std::vector<std::uint32_t> rank_, node_;  // node -> rank, rank -> node
  std::vector<std::vector<std::uint64_t>>
      bits_;  // [0]: a bit per rank; [k+1]: non-empty words of [k]
  std::size_t size_ = 0;
};

}  // namespace hetgraph::detail::cpu
