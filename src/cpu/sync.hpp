// SPDX-License-Identifier: Apache-2.0
// Synchronisation for the parallel engines: a lock-free single-producer/single-consumer ring,
// an event count for spin-then-block waiting without lost wake-ups, and a try-lock. All
// ordering is expressed on the atomics themselves (no standalone fences), so
// ThreadSanitizer understands every edge.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace hetgraph::detail::cpu {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Bounded SPSC queue. push() by one thread at a time and pop() by one thread at a time; the
/// producer (or consumer) may change between calls when a lock orders the hand-over.
template <class T>
class SpscRing {
 public:
  explicit SpscRing(std::size_t capacity = 1) { reset(capacity); }

  /// Capacity is rounded up to a power of two; only call while nobody uses the ring.
  void reset(std::size_t capacity) {
    std::size_t c = 1;
    while (c < capacity) c <<= 1;
    buf_ = std::make_unique<T[]>(c);
    mask_ = c - 1;
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
  }
  std::size_t capacity() const { return mask_ + 1; }

  /// `order` seq_cst: the push is in the single total order, for a producer that next reads
  /// whether a consumer went to sleep (and a consumer that re-checks with seq_cst_empty()).
  bool push(const T& v, std::memory_order order = std::memory_order_release) {
    const std::size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) > mask_) return false;  // full
    buf_[t & mask_] = v;
    tail_.store(t + 1, order);
    return true;
  }
  bool pop(T& out) {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;  // empty
    out = buf_[h & mask_];
    head_.store(h + 1, std::memory_order_release);
    return true;
  }
  /// The item pop() would return, left in place (consumer only).
  bool peek(T& out) const {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    out = buf_[h & mask_];
    return true;
  }
  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  bool seq_cst_empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_seq_cst);
  }
  std::size_t size() const {
    return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire);
  }

 private:
  std::unique_ptr<T[]> buf_;
  std::size_t mask_ = 0;
  alignas(64) std::atomic<std::size_t> head_{0};  // consumer
  alignas(64) std::atomic<std::size_t> tail_{0};  // producer
};

/// Event count: a waiter takes a ticket, re-checks its condition, and sleeps only if no
/// notify happened since the ticket. Notifiers publish their work first, then notify; the
/// futex syscall is skipped while nobody sleeps.
class EventCount {
 public:
  std::uint32_t ticket() const { return epoch_.load(std::memory_order_acquire); }

  /// Sleeps until notify() is called after `ticket` was taken (returns at once if it was).
  /// The caller must re-check its condition after ticket() and before calling this.
  void wait(std::uint32_t ticket) {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (epoch_.load(std::memory_order_seq_cst) == ticket)
      epoch_.wait(ticket, std::memory_order_seq_cst);
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }

  void notify_one() {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) epoch_.notify_one();
  }
  void notify_all() {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) epoch_.notify_all();
  }

 private:
  alignas(64) std::atomic<std::uint32_t> epoch_{0};
  std::atomic<std::int32_t> sleepers_{0};
};

/// A try-lock for the scheduler role.
class TryLock {
 public:
  bool try_lock() { return !held_.exchange(true, std::memory_order_seq_cst); }
  void unlock() { held_.store(false, std::memory_order_seq_cst); }

 private:
  alignas(64) std::atomic<bool> held_{false};
};

}  // namespace hetgraph::detail::cpu
