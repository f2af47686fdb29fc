// SPDX-License-Identifier: Apache-2.0
#include "hetgraph/timer.hpp"

#include <papi.h>

#include <chrono>
#include <mutex>

#include "hetgraph/error.hpp"

namespace hetgraph {

namespace {
// PAPI_library_init once per process; false when PAPI cannot start at all.
bool papi_ready() {
  static const bool ok = [] { return PAPI_library_init(PAPI_VER_CURRENT) == PAPI_VER_CURRENT; }();
  return ok;
}
}  // namespace

// Seconds since the first call. PAPI's clock counts nanoseconds since 1970: that count as a
// double in seconds steps by 2^-22 s (0.24 us), coarser than the runs it times; the time since
// an origin in this process keeps the nanoseconds.
double now_s() {
  if (papi_ready()) {
    static const long long origin = PAPI_get_real_nsec();
    return static_cast<double>(PAPI_get_real_nsec() - origin) * 1e-9;
  }
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
}

struct Counters::Impl {
  int eventset = PAPI_NULL;
  bool available = false;
  bool running = false;
  std::string note;
};

Counters::Counters() : impl_(std::make_unique<Impl>()) {
  if (!papi_ready()) {
    impl_->note = "PAPI could not be initialised";
    return;
  }
  int rc = PAPI_create_eventset(&impl_->eventset);
  if (rc == PAPI_OK) rc = PAPI_add_event(impl_->eventset, PAPI_TOT_INS);
  if (rc == PAPI_OK) rc = PAPI_add_event(impl_->eventset, PAPI_TOT_CYC);
  if (rc != PAPI_OK) {
    impl_->note = std::string("hardware counters unavailable on this machine (PAPI: ") +
                  PAPI_strerror(rc) + "); timing uses the real-time clock only";
    if (impl_->eventset != PAPI_NULL) {
      PAPI_cleanup_eventset(impl_->eventset);
      PAPI_destroy_eventset(&impl_->eventset);
    }
    return;
  }
  impl_->available = true;
}

Counters::~Counters() {
  if (impl_->available) {
    long long v[2];
    if (impl_->running) PAPI_stop(impl_->eventset, v);
    PAPI_cleanup_eventset(impl_->eventset);
    PAPI_destroy_eventset(&impl_->eventset);
  }
}

bool Counters::available() const {
  return impl_->available;
}
const std::string& Counters::note() const {
  return impl_->note;
}

void Counters::start() {
  if (!impl_->available || impl_->running) return;
  if (PAPI_start(impl_->eventset) != PAPI_OK) {
    impl_->available = false;
    impl_->note = "hardware counters could not be started; timing uses the real-time clock only";
    return;
  }
  impl_->running = true;
}

CounterValues Counters::stop() {
  CounterValues out;
  if (!impl_->available || !impl_->running) return out;
  long long v[2] = {0, 0};
  impl_->running = false;
  if (PAPI_stop(impl_->eventset, v) != PAPI_OK) return out;
  out.available = true;
  out.instructions = v[0];
  out.cycles = v[1];
  return out;
}

}  // namespace hetgraph
