// SPDX-License-Identifier: Apache-2.0
// Machine topology from hwloc: the cores this process may use (cgroups and taskset respected),
// which of them share an L2 or L3 cache, and pinning of threads to them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hetgraph::detail::cpu {

struct Core {
  int pu = 0;   // OS index of the processing unit threads are bound to
  int l2 = -1;  // logical index of the L2 cache it shares (or -1)
  int l3 = -1;  // logical index of the L3 cache it shares (or -1)
};

class Topology {
 public:
  /// The machine's topology, read once per process.
  static const Topology& get();

  /// Allowed cores, ordered so that cores sharing an L2, then an L3, are adjacent; no more
  /// than a cgroup CPU quota pays for (cpu.max 150000 100000: 2 of them).
  const std::vector<Core>& cores() const { return cores_; }
  int allowed() const { return static_cast<int>(cores_.size()); }
  /// Cores [first, first + count) of cores(); the teams of a configuration are consecutive.
  std::vector<int> team_pus(int first, int count) const;
  std::string describe() const;
  /// The CPU's model name (/proc/cpuinfo), "unknown" where it cannot be read.
  static std::string cpu_model();

  /// Binds the calling thread to one PU. A failed bind is reported once on stderr, not
  /// thrown: the work is still correct, only placement is lost.
  static bool bind_current_thread(int pu);
  /// Lets the calling thread run on any allowed core again (undoes bind_current_thread).
  static void unbind_current_thread();
  /// The calling thread's current binding, to restore after a run (empty: unbound).
  static std::vector<int> current_binding();
  static void restore_binding(const std::vector<int>& pus);

  /// Whole cores a cgroup v2 cpu.max line ("150000 100000", "max 100000") pays for, rounded
  /// up; nullopt for no limit or a line that does not parse.
  static std::optional<int> quota_cores(std::string_view cpu_max);

 private:
  Topology();
  std::vector<Core> cores_;
};

/// Whether the engines may pin threads to cores now, for the whole process. Pinning pays only
/// on cores that are ours: a thread pinned to a core another process holds cannot move to an
/// idle one (issue 45: a pinned main thread got 0.2% of a CPU beside a busy process), and the
/// pinned teams of several compiled graphs running at once stack on the same cores. So pinning
/// stops while runs of two or more parallel engines overlap in this process, or other processes
/// take more than kBusyShare of the allowed cores (LoadMeter over windows of kWindowSeconds, and
/// from a few samples of /proc/stat's runnable count at the start), and resumes kHoldSeconds
/// after the last such sign. Every change bumps epoch(): teams re-apply their binding then.
///   PinPolicy::Run r;                       // around each run of an engine that pins
///   if (PinPolicy::allowed()) { /* bind */ }
class PinPolicy {
 public:
  static constexpr double kBusyShare = 0.10;
  static constexpr double kWindowSeconds = 0.25;
  static constexpr double kHoldSeconds = 1.0;
  /// Counts a run in flight (overlapping runs of several engines mean shared cores).
  class Run {
   public:
    Run();
    ~Run();
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;
  };
  /// Whether pinning is allowed now (refreshes the measurement at most once per window).
  static bool allowed();
  /// Allowed cores that other processes held in the last window (their share of the allowed
  /// cores' time, rounded), or more in the kHoldSeconds before: the automatic engine runs on
  /// the rest (CpuOptions::adapt_to_load). 0 where the cores are free.
  static int busy_cores();
  /// Changes with every change of allowed().
  static std::uint64_t epoch();
  /// Tests: forget what was seen (allowed again at once), or force a state.
  static void reset_for_testing();
  static void force_for_testing(std::optional<bool> allowed);
};

/// Other processes' share of the allowed cores' time since start(): /proc/stat's busy ticks of
/// those cores less this process's CPU time, less the ticks' rounding (10 ms per core at each
/// end, so only windows of a tenth of a second or more see anything). PinPolicy's windows.
///   LoadMeter m;  /* ... a quarter second ... */  if (m.others_share() > 0.1) { /* busy */ }
class LoadMeter {
 public:
  LoadMeter() { start(); }
  void start();
  /// 0 (quiet) to 1; 0 where /proc/stat cannot be read.
  double others_share() const;

 private:
  struct Sample {
    double busy_s = 0;  // the allowed cores' busy time, every process's
    double own_s = 0;   // this process's CPU time
    double wall_s = 0;
    bool valid = false;  // busy_s was read
  };
  static Sample sample();
  Sample start_;
};

/// Runnable tasks of other processes on the machine now: /proc/loadavg's runnable count less
/// this process's threads in state R (-1 where it cannot be read). An instant's view, racing
/// this process's own threads as they wake and sleep: PinPolicy takes the least of a few.
int others_runnable();

}  // namespace hetgraph::detail::cpu
