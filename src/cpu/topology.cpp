#include "cpu/topology.hpp"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

namespace hetgraph::detail::cpu {

namespace {

// One hwloc topology per process; hwloc calls on it are serialised here.
struct Hw {
  hwloc_topology_t topo = nullptr;
  std::mutex mu;
  Hw() {
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) topo = nullptr;
  }
  ~Hw() {
    if (topo) hwloc_topology_destroy(topo);
  }
};

Hw& hw() {
  static Hw h;
  return h;
}

void warn_once(const char* what) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    std::fprintf(stderr, "hetgraph: warning: %s; threads run unpinned\n", what);
  }
}

int cache_index(hwloc_topology_t t, hwloc_obj_t core, hwloc_obj_type_t type) {
  hwloc_obj_t c = hwloc_get_ancestor_obj_by_type(t, type, core);
  return c ? static_cast<int>(c->logical_index) : -1;
}

}  // namespace

Topology::Topology() {
  Hw& h = hw();
  std::lock_guard lk(h.mu);
  if (h.topo != nullptr) {
    // The cores this process may run on: hwloc already drops cgroup-disallowed CPUs; the
    // process binding (taskset) narrows them further.
    hwloc_bitmap_t allowed = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(h.topo));
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(h.topo, bound, HWLOC_CPUBIND_PROCESS) == 0 &&
        !hwloc_bitmap_iszero(bound)) {
      hwloc_bitmap_and(allowed, allowed, bound);
    }
    const int ncores = hwloc_get_nbobjs_by_type(h.topo, HWLOC_OBJ_CORE);
    for (int i = 0; i < ncores; ++i) {
      hwloc_obj_t core = hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
      hwloc_bitmap_t mine = hwloc_bitmap_alloc();
      hwloc_bitmap_and(mine, core->cpuset, allowed);
      const int pu = hwloc_bitmap_first(mine);
      hwloc_bitmap_free(mine);
      if (pu < 0) continue;
      cores_.push_back({pu, cache_index(h.topo, core, HWLOC_OBJ_L2CACHE),
                        cache_index(h.topo, core, HWLOC_OBJ_L3CACHE)});
    }
    hwloc_bitmap_free(bound);
    hwloc_bitmap_free(allowed);
  }
  if (cores_.empty()) {
    // No topology: fall back to the affinity mask, with no cache information.
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) cores_.push_back({c, -1, -1});
      }
    }
    if (cores_.empty()) cores_.push_back({0, -1, -1});
  }
  std::stable_sort(cores_.begin(), cores_.end(), [](const Core& a, const Core& b) {
    return a.l3 != b.l3 ? a.l3 < b.l3 : a.l2 < b.l2;
  });
}

const Topology& Topology::get() {
  static const Topology t;
  return t;
}

std::vector<int> Topology::team_pus(int first, int count) const {
  std::vector<int> pus;
  for (int i = first; i < first + count && i < allowed(); ++i)
    pus.push_back(cores_[static_cast<std::size_t>(i)].pu);
  return pus;
}

std::string Topology::describe() const {
  std::string s = std::to_string(cores_.size()) + " cores:";
  for (const Core& c : cores_) {
    s += " pu" + std::to_string(c.pu) + "(L2 " + std::to_string(c.l2) + ", L3 " +
         std::to_string(c.l3) + ")";
  }
  return s;
}

bool Topology::bind_current_thread(int pu) {
  Hw& h = hw();
  std::lock_guard lk(h.mu);
  if (h.topo == nullptr) {
    warn_once("hwloc topology unavailable");
    return false;
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  hwloc_bitmap_only(set, static_cast<unsigned>(pu));
  const int rc = hwloc_set_cpubind(h.topo, set, HWLOC_CPUBIND_THREAD);
  hwloc_bitmap_free(set);
  if (rc != 0) warn_once("binding a thread to its core failed");
  return rc == 0;
}

std::vector<int> Topology::current_binding() {
  Hw& h = hw();
  std::lock_guard lk(h.mu);
  std::vector<int> pus;
  if (h.topo == nullptr) return pus;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (hwloc_get_cpubind(h.topo, set, HWLOC_CPUBIND_THREAD) == 0) {
    for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) pus.push_back(i);
  }
  hwloc_bitmap_free(set);
  return pus;
}

void Topology::restore_binding(const std::vector<int>& pus) {
  if (pus.empty()) return;
  Hw& h = hw();
  std::lock_guard lk(h.mu);
  if (h.topo == nullptr) return;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int p : pus) hwloc_bitmap_set(set, static_cast<unsigned>(p));
  hwloc_set_cpubind(h.topo, set, HWLOC_CPUBIND_THREAD);
  hwloc_bitmap_free(set);
}

}  // namespace hetgraph::detail::cpu
