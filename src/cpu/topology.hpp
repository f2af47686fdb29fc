// Machine topology from hwloc: the cores this process may use (cgroups and taskset respected),
// which of them share an L2 or L3 cache, and pinning of threads to them.
#pragma once

#include <string>
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

  /// Allowed cores, ordered so that cores sharing an L2, then an L3, are adjacent.
  const std::vector<Core>& cores() const { return cores_; }
  int allowed() const { return static_cast<int>(cores_.size()); }
  /// Cores [first, first + count) of cores(); the teams of a configuration are consecutive.
  std::vector<int> team_pus(int first, int count) const;
  std::string describe() const;

  /// Binds the calling thread to one PU. A failed bind is reported once on stderr, not
  /// thrown: the work is still correct, only placement is lost.
  static bool bind_current_thread(int pu);
  /// The calling thread's current binding, to restore after a run (empty: unbound).
  static std::vector<int> current_binding();
  static void restore_binding(const std::vector<int>& pus);

 private:
  Topology();
  std::vector<Core> cores_;
};

}  // namespace hetgraph::detail::cpu
