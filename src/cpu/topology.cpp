// SPDX-License-Identifier: Apache-2.0
#include "cpu/topology.hpp"

#include <hwloc.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

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

// The tightest CPU quota of this process's cgroup and its parents (cgroup v2; v1's
// cpu.cfs_quota_us / cpu.cfs_period_us pair), in whole cores; nullopt where none is set. A
// container given 1.5 CPUs of a 64-core host sees 64 allowed cores: threads beyond its quota
// only wait for the scheduler's next period.
std::optional<int> cgroup_quota_cores() {
  std::optional<int> best;
  auto take = [&](std::optional<int> q) {
    if (q && (!best || *q < *best)) best = q;
  };
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    if (line.rfind("0::", 0) != 0) continue;  // the v2 hierarchy
    for (std::string dir = line.substr(3);; dir = dir.substr(0, dir.rfind('/'))) {
      std::ifstream f("/sys/fs/cgroup" + dir + "/cpu.max");
      std::string text;
      if (std::getline(f, text)) take(Topology::quota_cores(text));
      if (dir.empty() || dir == "/") break;
    }
  }
  std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  std::string qs, ps;
  if (std::getline(q, qs) && std::getline(p, ps)) take(Topology::quota_cores(qs + " " + ps));
  return best;
}

}  // namespace

std::optional<int> Topology::quota_cores(std::string_view cpu_max) {
  const auto space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view qs = cpu_max.substr(0, space);
  std::string_view ps = cpu_max.substr(space + 1);
  while (!ps.empty() && (ps.back() == '\n' || ps.back() == ' ')) ps.remove_suffix(1);
  long long quota = 0, period = 0;
  if (std::from_chars(qs.data(), qs.data() + qs.size(), quota).ptr != qs.data() + qs.size() ||
      std::from_chars(ps.data(), ps.data() + ps.size(), period).ptr != ps.data() + ps.size() ||
      quota <= 0 || period <= 0)
    return std::nullopt;  // "max", v1's -1, or not numbers
  return static_cast<int>(std::min<long long>((quota + period - 1) / period, 1 << 20));
}

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
  if (const auto q = cgroup_quota_cores(); q && *q < allowed()) cores_.resize(static_cast<std::size_t>(*q));
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

std::string Topology::cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
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

void Topology::unbind_current_thread() {
  // Every allowed PU (hwloc's allowed set), not only the first of each core.
  Hw& h = hw();
  std::lock_guard lk(h.mu);
  if (h.topo == nullptr) return;
  hwloc_bitmap_t set = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(h.topo));
  hwloc_set_cpubind(h.topo, set, HWLOC_CPUBIND_THREAD);
  hwloc_bitmap_free(set);
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

LoadMeter::Sample LoadMeter::sample() {
  Sample out;
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  out.own_s = static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  clock_gettime(CLOCK_MONOTONIC, &t);
  out.wall_s = static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  std::vector<char> mine;
  for (const Core& c : Topology::get().cores()) {
    if (c.pu >= 0 && c.pu < 1 << 16) {
      if (static_cast<std::size_t>(c.pu) >= mine.size())
        mine.resize(static_cast<std::size_t>(c.pu) + 1, 0);
      mine[static_cast<std::size_t>(c.pu)] = 1;
    }
  }
  std::ifstream f("/proc/stat");
  const double tick = 1.0 / static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
  for (std::string line; std::getline(f, line);) {
    // "cpuN user nice system idle iowait irq softirq steal ...": busy is all but idle and iowait.
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9')
      continue;
    std::istringstream in(line.substr(3));
    std::size_t pu = 0;
    double v[8] = {};
    if (!(in >> pu)) continue;
    for (double& x : v) in >> x;
    if (pu >= mine.size() || !mine[pu]) continue;
    out.busy_s += (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * tick;
    out.valid = true;
  }
  return out;
}

void LoadMeter::start() {
  start_ = sample();
}

double LoadMeter::others_share() const {
  const Sample now = sample();
  const double wall = now.wall_s - start_.wall_s;
  if (wall <= 0 || !start_.valid || !now.valid) return 0;
  // Each core's count may be a tick off at either end.
  const double cores = static_cast<double>(Topology::get().allowed());
  const double rounding = 2.0 * cores / static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
  const double others = (now.busy_s - start_.busy_s) - (now.own_s - start_.own_s) - rounding;
  return std::clamp(others / (wall * cores), 0.0, 1.0);
}

namespace {

// This process's threads in state R ("/proc/self/task/T/stat": "T (name) S ...", the state
// after the last ')').
int own_runnable() {
  int own = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream st(task.path() / "stat");
    std::string text;
    std::getline(st, text);
    const auto close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'R') ++own;
  }
  return own;
}

}  // namespace

int others_runnable() {
  // "0.61 0.92 1.07 3/412 19522": runnable / all tasks, this reader included. Our own threads
  // are counted before and after it: one that went to sleep in between (a team spinning down
  // after a run) is ours in the larger count.
  const int before = own_runnable();
  std::ifstream la("/proc/loadavg");
  std::string a, b, c, counts;
  if (!(la >> a >> b >> c >> counts)) return -1;
  const int runnable = std::atoi(counts.c_str());
  const int own = std::max({before, own_runnable(), 1});
  return std::max(0, runnable - own);
}

namespace {

double monotonic_s() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct PinState {
  std::mutex mu;
  std::atomic<int> running{0};
  std::atomic<bool> allowed{true};
  std::atomic<std::uint64_t> epoch{0};
  std::optional<bool> forced;  // guarded by mu
  LoadMeter meter;             // guarded by mu: the current window
  double window_start = 0, last_contended = -1e300;
  std::atomic<int> busy{0};    // busy_cores()
  double busy_since = -1e300;  // guarded by mu: when busy last rose (or held)
  PinState() {
    // A busy machine at start: the least of a few samples of other processes' runnable tasks.
    int least = 1 << 30;
    for (int i = 0; i < 3; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
      const int r = others_runnable();
      if (r >= 0) least = std::min(least, r);
    }
    window_start = monotonic_s();
    if (least != 1 << 30 && least > 0) {
      last_contended = window_start;
      allowed = false;
      busy = std::min(least, Topology::get().allowed());
      busy_since = window_start;
    }
  }
};

PinState& pin_state() {
  static PinState s;
  return s;
}

}  // namespace

PinPolicy::Run::Run() {
  pin_state().running.fetch_add(1, std::memory_order_relaxed);
}

PinPolicy::Run::~Run() {
  pin_state().running.fetch_sub(1, std::memory_order_relaxed);
}

int PinPolicy::busy_cores() {
  allowed();  // refreshes the window
  return pin_state().busy.load(std::memory_order_acquire);
}

bool PinPolicy::allowed() {
  PinState& s = pin_state();
  std::unique_lock lk(s.mu, std::try_to_lock);
  if (!lk.owns_lock()) return s.allowed.load(std::memory_order_acquire);  // another decides
  const double now = monotonic_s();
  bool contended = s.running.load(std::memory_order_relaxed) > 1;
  if (now - s.window_start >= kWindowSeconds) {
    const double share = s.meter.others_share();
    contended = contended || share > kBusyShare;
    // Whole cores, rounded: a busy loop beside this process's threads gets about half to all
    // of a core of two.
    const int cores = Topology::get().allowed();
    const int busy = std::min(cores, static_cast<int>(std::lround(share * cores)));
    if (busy >= s.busy.load(std::memory_order_relaxed)) {
      s.busy.store(busy, std::memory_order_release);
      s.busy_since = now;
    } else if (now - s.busy_since >= kHoldSeconds) {
      s.busy.store(busy, std::memory_order_release);
    }
    s.meter.start();
    s.window_start = now;
  }
  if (contended) s.last_contended = now;
  const bool ok = s.forced ? *s.forced : now - s.last_contended >= kHoldSeconds;
  if (ok != s.allowed.load(std::memory_order_relaxed)) {
    s.allowed.store(ok, std::memory_order_release);
    s.epoch.fetch_add(1, std::memory_order_acq_rel);
  }
  return ok;
}

std::uint64_t PinPolicy::epoch() {
  return pin_state().epoch.load(std::memory_order_acquire);
}

void PinPolicy::reset_for_testing() {
  PinState& s = pin_state();
  std::lock_guard lk(s.mu);
  s.forced.reset();
  s.last_contended = -1e300;
  s.busy = 0;
  s.busy_since = -1e300;
  s.meter.start();
  s.window_start = monotonic_s();
  if (!s.allowed.exchange(true)) s.epoch.fetch_add(1);
}

void PinPolicy::force_for_testing(std::optional<bool> allowed) {
  PinState& s = pin_state();
  {
    std::lock_guard lk(s.mu);
    s.forced = allowed;
  }
  PinPolicy::allowed();
}

}  // namespace hetgraph::detail::cpu
