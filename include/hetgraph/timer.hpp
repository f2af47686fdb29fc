// SPDX-License-Identifier: Apache-2.0
// Timing with PAPI: wall-clock time from PAPI_get_real_nsec, and hardware counters
// (instructions, cycles) where the machine exposes them. On machines without counters (most
// VMs) counting degrades to "unavailable" with a note; timing always works.
//
//   hetgraph::Counters counters;               // tries PAPI_TOT_INS and PAPI_TOT_CYC
//   double t0 = hetgraph::now_s();
//   counters.start();
//   train();
//   auto c = counters.stop();
//   double elapsed = hetgraph::now_s() - t0;
//   if (c.available) std::printf("%lld instructions\n", c.instructions);
//   else std::printf("counters unavailable: %s\n", counters.note().c_str());
#pragma once

#include <memory>
#include <string>

namespace hetgraph {

/// Seconds on PAPI's real-time clock (monotonic, nanosecond resolution).
double now_s();

struct CounterValues {
  bool available = false;
  long long instructions = 0;
  long long cycles = 0;
};

class Counters {
 public:
  Counters();
  ~Counters();
  Counters(const Counters&) = delete;
  Counters& operator=(const Counters&) = delete;

  bool available() const;
  /// Why counters are unavailable (empty when they are available).
  const std::string& note() const;
  void start();
  CounterValues stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hetgraph
