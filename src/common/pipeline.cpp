// SPDX-License-Identifier: Apache-2.0
// BatchLoader (pipeline.hpp): one background thread, two slots. The caller holds the slot of
// the batch next() returned; the thread fills the other one with the batch after it.
#include "hetgraph/pipeline.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "hetgraph/compiler.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::data {

namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Page-aligned, so a slot never shares a page (or a cache line) with anything the graph's
// threads write.
template <class T>
struct PageBuffer {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> p;
  std::size_t n = 0;
  explicit PageBuffer(std::size_t count) : n(count) {
    const std::size_t bytes = ((count * sizeof(T) + 4095) / 4096) * 4096;
    p.reset(static_cast<T*>(std::aligned_alloc(4096, bytes ? bytes : 4096)));
    if (!p) throw std::bad_alloc();
  }
  std::span<T> span() { return {p.get(), n}; }
};

struct Slot {
  PageBuffer<float> images;
  PageBuffer<std::int32_t> labels;
  std::int64_t holds = -1;  // the batch filled into it; -1: none
  Slot(std::size_t pixels, std::size_t batch) : images(pixels), labels(batch) {}
};

struct FillEvent {
  std::int64_t batch, start_ns, end_ns;
};

}  // namespace

struct BatchLoader::State {
  const Split& split;
  BatchOrder order;
  LoaderOptions opt;
  std::vector<Slot> slots;

  // Guarded by mu: the request to the thread, the slots' `holds`, the error, the events.
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t request = -1;  // batch the thread is asked to fill (into slot request % 2)
  bool busy = false;          // the thread is filling
  bool quit = false;
  std::exception_ptr error;
  std::vector<FillEvent> events;
  double fill_s = 0;

  // The caller's side only.
  int epoch = 0;
  std::int64_t next_batch = 0;
  double wait_s = 0;
  std::int64_t taken = 0;
  CompiledGraph* trace = nullptr;
  std::string lane;
  std::thread worker;

  State(const Split& s, std::int64_t batch, LoaderOptions o)
      : split(s), order(s.count, batch, o.seed), opt(o) {
    const auto b = static_cast<std::size_t>(batch);
    const auto px = static_cast<std::size_t>(batch * s.image_size());
    slots.emplace_back(px, b);
    slots.emplace_back(px, b);
  }

  // The synchronous path's batch k, written into `slot` (no lock: nobody else touches it).
  void fill(std::int64_t k, Slot& slot) {
    const std::int64_t B = order.batch_size();
    if (order.shuffled()) {
      split.gather(order.batch(k), slot.images.span(), slot.labels.span(), opt.threads);
    } else {  // file order: batch k is records [k B, (k + 1) B)
      split.images(k * B, B, slot.images.span(), opt.threads);
      std::memcpy(slot.labels.p.get(), split.labels.data() + k * B,
                  static_cast<std::size_t>(B) * sizeof(std::int32_t));
    }
  }

  // fill, timed: the event for the trace (the caller adds its time to fill_s).
  FillEvent timed_fill(std::int64_t k, Slot& slot) {
    const std::int64_t t0 = steady_ns();
    fill(k, slot);
    return {k, t0, steady_ns()};
  }
  static double seconds(const FillEvent& e) {
    return static_cast<double>(e.end_ns - e.start_ns) * 1e-9;
  }

  void run() {
    std::unique_lock lk(mu);
    for (;;) {
      cv.wait(lk, [this] { return quit || request >= 0; });
      if (quit) return;
      const std::int64_t k = std::exchange(request, -1);
      Slot& slot = slots[static_cast<std::size_t>(k % 2)];
      busy = true;
      lk.unlock();
      std::exception_ptr err;
      FillEvent ev{};
      try {
        ev = timed_fill(k, slot);
      } catch (...) {
        err = std::current_exception();
      }
      lk.lock();
      busy = false;
      if (err) {
        error = err;
      } else {
        fill_s += seconds(ev);
        slot.holds = k;
        events.push_back(ev);
      }
      cv.notify_all();
    }
  }

  // Waits until the thread is idle (no request pending, no fill under way).
  void settle(std::unique_lock<std::mutex>& lk) {
    cv.wait(lk, [this] { return request < 0 && !busy; });
  }

  void post_events(std::vector<FillEvent>& evs) {
    if (!trace) return;
    for (const FillEvent& e : evs) {
      trace->trace_event(lane, "fill batch " + std::to_string(e.batch), e.start_ns, e.end_ns);
    }
  }
};

BatchLoader::BatchLoader(const Split& split, std::int64_t batch, LoaderOptions options)
    : s_(std::make_unique<State>(split, batch, options)) {
  if (options.background) s_->worker = std::thread([s = s_.get()] { s->run(); });
}

BatchLoader::~BatchLoader() {
  if (!s_->worker.joinable()) return;
  {
    std::lock_guard lk(s_->mu);
    s_->quit = true;
  }
  s_->cv.notify_all();
  s_->worker.join();
}

std::int64_t BatchLoader::batches() const {
  return s_->order.batches();
}
std::int64_t BatchLoader::batch_size() const {
  return s_->order.batch_size();
}
bool BatchLoader::background() const {
  return s_->worker.joinable();
}

void BatchLoader::start_epoch(int epoch) {
  State& s = *s_;
  s.epoch = epoch;
  s.next_batch = 0;
  if (!s.worker.joinable()) {
    s.order.start_epoch(epoch);
    return;
  }
  std::unique_lock lk(s.mu);
  s.settle(lk);  // the thread reads the order while it fills
  if (s.error) std::rethrow_exception(std::exchange(s.error, nullptr));
  s.order.start_epoch(epoch);
  for (Slot& slot : s.slots) slot.holds = -1;
  s.request = 0;
  s.cv.notify_all();
}

Batch BatchLoader::next() {
  State& s = *s_;
  if (s.epoch == 0) throw UsageError("BatchLoader::next before start_epoch");
  const std::int64_t k = s.next_batch;
  if (k >= s.order.batches()) {
    throw UsageError("BatchLoader::next: epoch " + std::to_string(s.epoch) + " has " +
                     std::to_string(s.order.batches()) + " batches, all taken");
  }
  Slot& slot = s.slots[static_cast<std::size_t>(k % 2)];
  if (!s.worker.joinable()) {
    std::vector<FillEvent> ev{s.timed_fill(k, slot)};
    s.fill_s += State::seconds(ev.front());
    s.post_events(ev);
  } else {
    std::vector<FillEvent> ev;
    {
      std::unique_lock lk(s.mu);
      const std::int64_t t0 = steady_ns();
      s.cv.wait(lk, [&] { return slot.holds == k || s.error; });
      s.wait_s += static_cast<double>(steady_ns() - t0) * 1e-9;
      if (s.error) std::rethrow_exception(std::exchange(s.error, nullptr));
      // The other slot held batch k - 1, which the caller has done with now.
      if (k + 1 < s.order.batches()) {
        s.request = k + 1;
        s.cv.notify_all();
      }
      ev.swap(s.events);
    }
    s.post_events(ev);  // the graph is the caller's: post from this thread
  }
  s.next_batch = k + 1;
  ++s.taken;
  return {k, slot.images.span(), slot.labels.span()};
}

LoaderOptions loader_options(const CompiledGraph& cg, std::optional<std::uint64_t> seed,
                             Background mode) {
  const EngineReport engine = cg.engine_report();
  int threads = 0;
  for (const auto& lane : engine.lanes) threads += lane.threads;
  const bool background =
      mode == Background::on || (mode == Background::automatic &&
                                 threads < static_cast<int>(std::thread::hardware_concurrency()));
  return {.seed = seed,
          .background = background,
          .threads = background || engine.lanes.empty() ? 1 : engine.lanes.front().threads};
}

void BatchLoader::trace_into(CompiledGraph& cg, std::string lane) {
  s_->trace = &cg;
  s_->lane = std::move(lane);
}

LoaderStats BatchLoader::stats() const {
  std::lock_guard lk(s_->mu);
  return {s_->fill_s, s_->wait_s, s_->taken};
}

}  // namespace hetgraph::data
