// SPDX-License-Identifier: Apache-2.0
// Replay mode of the CPU platform (issue 15; design in bench/README.md, "replay"): the real
// engines run a graph whose kernels are replaced by waits of their modelled durations, so that
// N executors of T threads on a virtual machine of C cores (C up to 64) can be run and timed on
// a 2-core machine. Every kernel becomes a ReplayKernel that blocks its executor thread (it
// sleeps; it does not spin, so 64 virtual cores fit on 2 real ones) for
// time_scale x duration(node, T) microseconds, T being the team size it is run with. The
// scheduler, rings, teams, inline path and the automatic engine's search are the real code.
//
// The duration model: a profile of per-node times at team sizes 1, 2, ... (measured on this
// machine by hetgraph-bench, or loaded from a profile JSON taken on a bigger one), extended to
// team sizes beyond the profile's largest by Amdahl's law with a serial fraction fitted per op
// kind.
//
//   ReplayProfile p = load_profile("lstm-small.profile.json");
//   CpuOptions o;
//   o.engine = CpuEngine::critical_path; o.executors = 16; o.threads_per_executor = 4;
//   auto m = std::make_shared<ReplayModel>(std::move(p), /*cores=*/64, /*time_scale=*/10);
//   auto cg = GraphCompiler(replay_cpu_platform(o, m)).compile(g, shapes, fetches);
//   // wall time of cg.run() / 10 = simulated makespan on 64 cores
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cpu/kernel.hpp"

namespace hetgraph::detail {
struct Plan;
struct PlanNode;
}  // namespace hetgraph::detail

namespace hetgraph::detail::cpu {

/// Per-node kernel times at a few team sizes. File format (JSON, version 1):
///   {"format": "hetgraph-replay-profile", "version": 1, "workload": "lstm-small",
///    "machine": "<free text>", "cores": 16, "team_sizes": [1, 2, 4, 8, 16],
///    "nodes": [{"label": "<plan label>", "op": "matmul", "us": [t1, t2, t4, t8, t16]}, ...],
///    "corun": {"matmul": 1.15, ...}}
/// team_sizes ascend and start at 1; each node's "us" has one time (microseconds, >= 0) per
/// team size, measured with nothing else running. Parallel groups (op "parallel_group", from a
/// compile with parallel ops at team sizes 2+) carry their measured times at those sizes
/// (their "us" at size 1 is their members' summed 1-thread time). "corun" (optional, default 1 per
/// kind): how much longer a kind's kernels take while another kernel runs on other cores (shared
/// caches and memory bandwidth), measured with one single-thread executor per core. Nodes are
/// matched to a compiled plan by label (the plan of the same workload compiled without parallel
/// ops: groups are modelled from their members).
struct ReplayProfile {
  std::string source = "measured";  // the file it was loaded from, for messages
  std::string workload, machine;
  int cores = 1;
  std::vector<int> team_sizes{1};
  struct Node {
    std::string label, op;
    std::vector<double> us;  // per team size
  };
  std::vector<Node> nodes;
  std::map<std::string, double> corun;  // op kind -> slowdown beside other kernels (>= 1)
};

/// Writes `p` as the JSON above; DataError naming the file when it cannot.
void save_profile(const ReplayProfile& p, const std::string& path);
/// Reads and checks a profile; DataError naming the file and what is wrong.
ReplayProfile load_profile(const std::string& path);

/// Amdahl's serial fraction s from a time t1 on one thread and tT on T > 1 threads
/// (tT = t1 (s + (1 - s) / T)), clamped to [0, 1]: slower on more threads is s = 1.
double amdahl_serial_fraction(double t1, double tT, int T);
/// t1 (s + (1 - s) / T).
inline double amdahl_time(double t1, double s, int T) {
  return t1 * (s + (1 - s) / T);
}

class ReplayModel {
 public:
  /// `cores`: the virtual machine's cores (1..64); `time_scale`: factor every modelled duration
  /// is multiplied by in wall time (>= 1; see bench/README.md for why).
  ReplayModel(ReplayProfile profile, int cores, double time_scale);

  int cores() const { return cores_; }
  double time_scale() const { return time_scale_; }
  const ReplayProfile& profile() const { return profile_; }
  /// The op kind's fitted serial fraction (1 for a kind the profile has one team size of).
  double serial_fraction(std::string_view op) const;
  /// Modelled microseconds of profile node `k` on T threads: the measured time at the largest
  /// profiled team size <= T, scaled by the kind's Amdahl curve from there.
  double node_us(std::size_t k, int threads) const;
  /// Per plan node, modelled microseconds on T threads (0: no kernel). A parallel group is its
  /// members on one thread each, taken in turns by min(T, members) threads, times the ratio of
  /// measured to modelled the profile has for it (or for its groups on the whole). DataError naming
  /// the profile and the node when a node with work is not in the profile.
  std::vector<double> plan_us(const Plan& p, int threads) const;
  /// Per plan node, thread-microseconds its kernel keeps busy on T threads (utilisation).
  std::vector<double> plan_busy_us(const Plan& p, int threads) const;
  /// The kind's slowdown while other kernels run (1 when the profile does not say).
  double corun(std::string_view op) const;
  /// Kernels of this model running now (replay kernels count themselves in and out).
  std::atomic<int>& running() const { return running_; }
  /// Identifies the model in the tuning cache's key.
  std::uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::size_t find(const Plan& p, std::uint32_t node) const;
  double members_us(const Plan& p, std::uint32_t node, int threads) const;
  /// A parallel group's time in the profile at the largest profiled team size (2+) <= threads.
  bool measured_group(const PlanNode& n, int threads, int& at, double& us) const;

  ReplayProfile profile_;
  int cores_;
  double time_scale_;
  std::unordered_map<std::string, std::size_t> by_label_;
  std::unordered_map<std::string, double> serial_;
  std::uint64_t fingerprint_ = 0;
  mutable std::atomic<int> running_{0};
};

class ReplayKernel;

/// The kernels that replace plan nodes `nodes`: kernel k waits time_scale x the model's time of
/// nodes[k] on the team size it runs with (ReplayModel::plan_us), corun[k] times longer when
/// another kernel of the model is running as it starts. The kernels lie side by side and their
/// waits in one table, a row per team size: a graph of nanosecond kernels replays as a walk
/// over two arrays, where kernels and waits each in their own heap block cost a cache miss per
/// kernel, more than its wait.
class ReplayKernels {
 public:
  ReplayKernels(const ReplayModel& m, const Plan& p, const std::vector<std::uint32_t>& nodes,
                std::vector<double> corun);
  ~ReplayKernels();
  ReplayKernels(const ReplayKernels&) = delete;
  ReplayKernels& operator=(const ReplayKernels&) = delete;
  std::size_t size() const { return n_; }
  CpuKernel& operator[](std::size_t k);
  /// Kernel k's wait in nanoseconds on a team of `threads` (clamped to the table's sizes).
  std::int64_t wait_ns(std::size_t k, int threads) const {
    const std::size_t t = static_cast<std::size_t>(std::clamp(threads, 1, max_threads_));
    return ns_[t * n_ + k];
  }

 private:
  std::size_t n_ = 0;
  int max_threads_ = 1;           // the model's cores
  std::vector<std::int64_t> ns_;  // [team size][kernel]
  std::vector<ReplayKernel> kernels_;
};

/// Blocks the calling thread for about `ns` nanoseconds without spinning: an absolute-deadline
/// sleep ended early by this machine's measured oversleep (the timer slack is set to 1 ns);
/// waits shorter than that oversleep yield until the deadline instead, and those under a
/// microsecond spin a loop counted from its speed measured once (a yield or a few clock
/// reads cost about as much). Waits under 250 ns are pooled per thread and spun together once
/// 250 ns have gathered: they keep their length in sum, each ending up to 250 ns late.
void replay_wait(std::int64_t ns);

/// What reading the engines' clock (`now_ns`) costs, measured once per process: the median
/// gap between two back-to-back reads (about 30 ns on a VM's kvm-clock). A recorded kernel
/// event spans about one read more than the kernel, which a profile of nanosecond kernels
/// takes off.
std::int64_t clock_read_ns();

}  // namespace hetgraph::detail::cpu
