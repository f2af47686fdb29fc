// SPDX-License-Identifier: Apache-2.0
// The CPU platform: one arena laid out by the memory plan, a kernel per node created at
// compile time, and an engine that runs them.

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "common/executable.hpp"
#include "common/variable_store.hpp"
#include "compiler/graph_stats.hpp"
#include "cpu/engine.hpp"
#include "cpu/engine_auto.hpp"
#include "cpu/engine_parallel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/replay.hpp"
#include "cpu/simd/code_path.hpp"
#include "cpu/topology.hpp"
#include "cpu/tuning_cache.hpp"
#include "hetgraph/error.hpp"
#include "util/env.hpp"

// libhetgraph_omp_env (src/common/omp_env.cpp): 1 when it set GOMP_SPINCOUNT for libgomp.
extern "C" int hetgraph_omp_env_state();

namespace {
// libgomp, a library this one needs, was initialised before this one and has read
// GOMP_SPINCOUNT: the value set for it is taken back, so that programs this process starts
// (a PyTorch baseline, mpirun) see the user's own environment.
const bool g_openmp_env_restored = [] {
  if (hetgraph_omp_env_state() == 1) unsetenv("GOMP_SPINCOUNT");
  return true;
}();
}  // namespace

namespace hetgraph {

std::string_view engine_name(CpuEngine e) {
  switch (e) {
    case CpuEngine::sequential:
      return "sequential";
    case CpuEngine::shared_queue:
      return "shared-queue";
    case CpuEngine::critical_path:
      return "critical-path";
    case CpuEngine::automatic:
      return "auto";
  }
  return "?";
}

CpuEngine parse_engine(std::string_view name) {
  for (CpuEngine e : {CpuEngine::sequential, CpuEngine::shared_queue, CpuEngine::critical_path,
                      CpuEngine::automatic}) {
    if (engine_name(e) == name) return e;
  }
  throw PlatformError("unknown engine '" + std::string(name) +
                      "' (choose sequential, shared-queue, critical-path or auto)");
}

namespace detail::cpu {

int openmp_env_state() {
  return hetgraph_omp_env_state();
}

int allowed_cores() {
  return Topology::get().allowed();
}

namespace {
/// What the CPU platform runs with: the user's options, and the replay model of
/// replay_cpu_platform (internal, so not a CpuOptions field).
struct CpuConfig : CpuOptions {
  std::shared_ptr<const ReplayModel> replay;
};

/// The cores engines configure: replay's virtual ones, else the allowed ones.
int cores_of(const CpuConfig& o) {
  return o.replay ? o.replay->cores() : allowed_cores();
}
}  // namespace

namespace {

struct Unmap {
  std::size_t bytes = 0;
  void operator()(std::byte* p) const { munmap(p, bytes); }
};

// A number from a file such as /proc/meminfo ("MemAvailable:  123 kB", key given) or a cgroup
// limit (a bare number; "max" is none).
std::optional<std::uint64_t> read_number(const char* path, std::string_view key = {}) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    if (!key.empty() && line.rfind(key, 0) != 0) continue;
    std::string_view v(line);
    v.remove_prefix(key.size());
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    std::uint64_t n = 0;
    const char* last = v.data() + v.size();
    const auto [end, ec] = std::from_chars(v.data(), last, n);
    if (ec != std::errc()) return std::nullopt;
    return std::string_view(end, static_cast<std::size_t>(last - end)).find("kB") !=
                   std::string_view::npos
               ? n * 1024
               : n;
  }
  return std::nullopt;
}

// Memory this process can still fill without swapping or the OOM killer: MemAvailable,
// lowered by a cgroup (v2 or v1) limit; nullopt when nothing says.
std::optional<std::uint64_t> available_memory() {
  std::optional<std::uint64_t> avail = read_number("/proc/meminfo", "MemAvailable:");
  auto lower = [&](const char* limit, const char* usage) {
    const auto l = read_number(limit), u = read_number(usage);
    if (l && u && *l < (std::uint64_t{1} << 60)) {
      const std::uint64_t left = *l > *u ? *l - *u : 0;
      avail = avail ? std::min(*avail, left) : left;
    }
  };
  lower("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current");
  lower("/sys/fs/cgroup/memory/memory.limit_in_bytes",
        "/sys/fs/cgroup/memory/memory.usage_in_bytes");
  return avail;
}

// The largest values the arena holds, for an allocation error: "'W' (#3, variable) [784, 10]
// (31360 bytes), ...".
std::string largest_nodes(const Plan& p) {
  std::vector<const PlanNode*> nodes;
  for (const PlanNode& n : p.nodes) {
    if (n.buffer >= 0) nodes.push_back(&n);
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const PlanNode* a, const PlanNode* b) { return a->type.bytes() > b->type.bytes(); });
  std::string s;
  for (std::size_t i = 0; i < std::min<std::size_t>(nodes.size(), 3); ++i) {
    s += (i ? ", " : "") + nodes[i]->label + " " + nodes[i]->type.shape.str() + " (" +
         std::to_string(nodes[i]->type.bytes()) + " bytes)";
  }
  return s.empty() ? "no values" : s;
}

// The arena: anonymous memory, checked first against what the machine has left, since Linux
// overcommits: an arena larger than that would be granted, then kill the process (or another)
// when a run fills it.
void* map_arena(const Plan& p, std::size_t bytes) {
  const std::string what = "the graph's memory (" + std::to_string(bytes) +
                           " bytes; largest values: " + largest_nodes(p) + ")";
  if (const auto avail = available_memory(); avail && bytes > *avail) {
    throw PlatformError("cannot allocate " + what + ": only " + std::to_string(*avail) +
                        " bytes of memory are available");
  }
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    throw PlatformError("cannot allocate " + what + ": mmap: " + std::strerror(errno) +
                        " (more than is available)");
  }
  return mem;
}

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::shared_ptr<const Plan> plan, const CpuConfig& opts,
                std::shared_ptr<VariableStore::Impl> store)
      : Executable(plan),
        opts_(opts),
        threads_(opts.threads > 0 ? opts.threads : cores_of(opts)),
        store_(std::move(store)),
        writes_(store_ ? &store_->writes : &host_writes_) {
    const Plan& p = *plan;
    writes_variables_ = std::any_of(p.nodes.begin(), p.nodes.end(),
                                    [](const PlanNode& n) { return n.writes_variable(); });
    if (store_) bind_store(p);
    // Anonymous memory arrives zeroed, page by page on first touch: no memset of an arena
    // that may be gigabytes (parallel-safe plans of wide graphs reuse little).
    arena_bytes_ = std::max<std::size_t>(p.arena_bytes, 64);
    void* mem = map_arena(p, arena_bytes_);
    // Huge pages where the kernel gives them on request (THP "madvise", as on these VMs):
    // GEMMs over multi-megabyte operands otherwise spend time in TLB misses.
    if (arena_bytes_ >= (2u << 20)) madvise(mem, arena_bytes_, MADV_HUGEPAGE);
    arena_.reset(static_cast<std::byte*>(mem));
    arena_.get_deleter().bytes = arena_bytes_;

    Program prog;
    prog.plan = plan;
    prog.kernels.assign(p.nodes.size(), nullptr);
    kernels_.resize(p.nodes.size());
    names_.assign(p.nodes.size(), "none");
    const std::vector<int> teams = team_sizes(p);
    // Parallel groups last: their kernels run their members' kernels.
    std::vector<std::uint32_t> order;
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      if (p.nodes[i].op != OpKind::ParallelGroup) order.push_back(i);
    }
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      if (p.nodes[i].op == OpKind::ParallelGroup) order.push_back(i);
    }
    for (std::uint32_t i : order) {
      const PlanNode& n = p.nodes[i];
      if (!n.has_work()) continue;
      KernelArgs args{p, i, n, {}, {}, nullptr, n.type, threads_, teams, &kernels_, writes_};
      for (std::size_t k = 0; k < n.inputs.size(); ++k) {
        const PlanNode& u = p.nodes[n.inputs[k]];
        args.in.push_back(n.reads_input(k) && u.buffer >= 0 ? address(n.inputs[k]) : nullptr);
        args.in_types.push_back(u.type);
      }
      args.out = address(p.output_of(i));  // an assign: its variable
      std::string_view chosen;
      kernels_[i] = create_kernel(args, chosen);
      names_[i] = n.group < 0 ? std::string(chosen)
                              : std::string(chosen) + " in " +
                                    p.nodes[static_cast<std::size_t>(n.group)].label;
      // A member runs inside its group's kernel, not on its own.
      if (n.group < 0) prog.kernels[i] = kernels_[i].get();
      prog.scratch_bytes = std::max(prog.scratch_bytes, kernels_[i]->scratch_bytes());
    }
    if (opts_.replay) replay_kernels(prog);
    engine_ = make_engine(prog, fingerprint(p));
    initialize_state();
  }

  ~CpuExecutable() override { shutdown(); }

  std::string kernel_name(std::uint32_t node) const override { return names_[node]; }

  EngineReport engine_report() const override {
    EngineReport r = Executable::engine_report();
    r.engine = std::string(engine_->name());
    r.runs = engine_->runs();
    EngineReport::Cpu c;
    c.code_path = code_path().name;
    c.executors = engine_->executors();
    c.threads_per_executor = engine_->threads_per_executor();
    c.levels_profiled = engine_->levels_profiled();
    c.tuned = engine_->tuned();
    c.search = engine_->search();
    c.chosen = engine_->chosen();
    c.load_threads = engine_->load_threads();
    c.op_threads = engine_->op_threads();
    c.guideline_executors = guideline_executors(plan(), auto_cores());
    const std::vector<std::string> names = engine_->lane_names();
    for (int e = 0; e < c.executors; ++e) {
      const auto k = static_cast<std::size_t>(e);
      r.lanes.push_back(
          {k < names.size() ? names[k] : "executor " + std::to_string(e), c.threads_per_executor});
    }
    r.cpu = std::move(c);
    return r;
  }

 protected:
  void* host_pointer(std::uint32_t node) override { return address(node); }
  void copy_in(std::uint32_t node, const void* src, std::size_t bytes) override {
    std::memcpy(host_pointer(node), src, bytes);
    note_host_write(node);
  }
  void copy_out(std::uint32_t node, void* dst, std::size_t bytes) override {
    std::memcpy(dst, host_pointer(node), bytes);
  }
  void copy_in_at(std::uint32_t node, std::size_t offset, const void* src,
                  std::size_t bytes) override {
    std::memcpy(static_cast<std::byte*>(host_pointer(node)) + offset, src, bytes);
    note_host_write(node);
  }
  // Packed copies of fixed weights are reordered again after a host write of a variable or a
  // constant; inputs are never fixed weights, and feeding them each run must not count.
  void note_host_write(std::uint32_t node) {
    if (plan().nodes[node].storage != Storage::Input)
      writes_->fetch_add(1, std::memory_order_release);
  }
  // The arena is fresh anonymous memory when variables are initialised.
  bool memory_starts_zeroed() const override { return true; }
  void execute() override {
    engine_->run();
    // Other graphs of the store keep packed copies of weights this run may have changed.
    if (store_ && writes_variables_) store_->writes.fetch_add(1, std::memory_order_release);
  }
  void set_recording(bool on) override { engine_->set_recording(on); }
  std::vector<Event> last_run_events() const override {
    std::vector<Event> out;
    for (const NodeEvent& e : engine_->last_events())
      out.push_back({e.node, e.executor, e.start_ns, e.end_ns});
    return out;
  }
  std::vector<double> node_levels() const override {
    const std::span<const double> l = engine_->levels();
    return {l.begin(), l.end()};
  }
  void add_trace_events(NodeSink& w, std::int64_t run) override {
    w.set_lanes(engine_->lane_names());
    add_node_events(w, last_run_events(), run);
  }

  /// Replay: every kernel the engine runs becomes a wait of the node's modelled duration at
  /// each team size (communication kernels stay: their work is elsewhere).
  void replay_kernels(Program& prog) {
    const Plan& p = plan();
    const ReplayModel& m = *opts_.replay;
    std::vector<std::uint32_t> nodes;
    std::vector<double> corun;
    for (std::size_t i = 0; i < p.nodes.size(); ++i) {
      if (prog.kernels[i] == nullptr || dynamic_cast<AsyncKernel*>(prog.kernels[i])) continue;
      nodes.push_back(static_cast<std::uint32_t>(i));
      // A group's members co-run inside it: their corun factor is in its modelled time.
      corun.push_back(p.nodes[i].op == OpKind::ParallelGroup ? 1.0
                                                             : m.corun(op_name(p.nodes[i].op)));
    }
    replayed_ = std::make_unique<ReplayKernels>(m, p, nodes, std::move(corun));
    for (std::size_t k = 0; k < nodes.size(); ++k) prog.kernels[nodes[k]] = &(*replayed_)[k];
  }

  /// Executors and threads per executor of a fixed parallel engine.
  std::pair<int, int> fixed_teams(const Plan& p) const {
    const int cores = cores_of(opts_);
    const int e = opts_.executors > 0 ? opts_.executors : guideline_executors(p, cores);
    return {e,
            opts_.threads_per_executor > 0 ? opts_.threads_per_executor : std::max(1, cores / e)};
  }
  /// Cores the automatic engine configures: CpuOptions::threads when set, else all allowed.
  int auto_cores() const {
    const int cores = cores_of(opts_);
    return opts_.threads > 0 ? std::min(opts_.threads, cores) : cores;
  }
  /// Every team size the engine may run kernels with (the automatic engine tries them all;
  /// per-op thread counts: 1, 2, 4, ... up to a team).
  std::vector<int> team_sizes(const Plan& p) const {
    if (opts_.engine == CpuEngine::sequential) return {threads_};
    std::vector<int> teams;
    if (opts_.engine == CpuEngine::automatic) {
      const int cores = auto_cores();
      for (int e : symmetric_executor_counts(cores)) teams.push_back(cores / e);
    } else {
      teams.push_back(fixed_teams(p).second);
    }
    std::vector<int> out = teams;
    if (opts_.experimental.per_op_threads) {
      for (int t : teams) {
        for (int s = 1; s < t; s *= 2) out.push_back(s);
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  /// The compiled plan as the tuning cache keys it: every node's op, type, inputs,
  /// dependencies and kernel.
  std::uint64_t fingerprint(const Plan& p) const {
    std::string s;
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      s += std::to_string(static_cast<int>(n.op)) + ":" +
           std::to_string(static_cast<int>(n.type.dtype)) + n.type.shape.str() + "<";
      for (std::uint32_t u : n.inputs) s += std::to_string(u) + ",";
      s += "|";
      for (std::uint32_t u : n.deps) s += std::to_string(u) + ",";
      s += ">" + std::string(names_[i]) + ";";
    }
    return fnv1a64(s.data(), s.size());
  }

  std::unique_ptr<Engine> make_engine(const Program& prog, std::uint64_t graph) const {
    if (opts_.engine == CpuEngine::sequential) return make_sequential_engine(prog, threads_);
    EngineConfig c;
    c.ring_capacity = opts_.experimental.ring_capacity;
    c.queue_us = opts_.experimental.queue_us;
    c.inline_below_us = opts_.experimental.inline_below_us;
    c.profile_runs = opts_.experimental.profile_runs;
    c.pin = opts_.pin_threads;
    c.per_op_threads = opts_.experimental.per_op_threads;
    std::string replay;
    if (const auto& m = opts_.replay) {
      // The engine sees a machine time_scale times slower: its thresholds follow, so that it
      // decides as it would at the modelled speed. Threads are not pinned (the cores are
      // virtual), and do not spin where they outnumber the real cores.
      c.inline_below_us *= m->time_scale();
      c.queue_us *= m->time_scale();
      c.pin = false;
      if (m->cores() > allowed_cores()) c.spin = 0;
      replay = " replay " + std::to_string(m->cores()) + " scale " +
               std::to_string(m->time_scale()) + " model " + std::to_string(m->fingerprint());
    }
    if (opts_.engine == CpuEngine::automatic) {
      const int cores = auto_cores();
      // Everything the search's outcome depends on besides the graph and the machine.
      const std::string options =
          "auto cores " + std::to_string(cores) + " ring " + std::to_string(c.ring_capacity) +
          " queue_us " + std::to_string(c.queue_us) + " inline_us " +
          std::to_string(c.inline_below_us) + " profile " + std::to_string(c.profile_runs) +
          " pin " + std::to_string(c.pin) + " per_op " + std::to_string(c.per_op_threads) + replay;
      // HETGRAPH_ADAPT_TO_LOAD=0 turns adapting off without a code change (the test suite
      // sets it: its bitwise comparisons run beside other tests).
      const bool adapt = opts_.adapt_to_load && !opts_.replay &&
                         env_choice<PlatformError>("HETGRAPH_ADAPT_TO_LOAD", {"", "0", "1"}) != "0";
      return std::make_unique<AutoEngine>(prog, c, cores, TuningCache(graph, options), adapt);
    }
    std::tie(c.executors, c.threads) = fixed_teams(*prog.plan);
    // More threads than cores: idle executors yield a few times, then sleep. The random-DAG
    // stress test (up to 8 executors on 2 cores) runs in half the time this way. (Replay keeps
    // its own rule above.)
    if (!opts_.replay && c.executors * c.threads > allowed_cores()) {
      c.spin = 8;
      c.spin_yields = true;
    }
    if (opts_.engine == CpuEngine::shared_queue)
      return std::make_unique<SharedQueueEngine>(prog, c);
    return std::make_unique<CriticalPathEngine>(prog, c);
  }

  // Where a node's value lies: its variable's block in the store for a variable's buffer (the
  // variable, its views, an update written into it), else the arena.
  std::byte* address(std::uint32_t node) const {
    const PlanNode& n = plan().nodes[node];
    if (n.buffer >= 0 && !stored_.empty()) {
      const auto b = static_cast<std::size_t>(n.buffer);
      if (stored_[b] != nullptr) return stored_[b] + (n.offset - plan().buffer_offset[b]);
    }
    return arena_.get() + n.offset;
  }

  // The variables' blocks in the store: made zeroed here on first sight (64-byte aligned, as
  // the arena's buffers), so zero-initialised variables are not written.
  void bind_store(const Plan& p) {
    VariableStore::Impl::Binding b = store_->bind(p, "cpu", [](std::size_t bytes) {
      const std::size_t size = (bytes + 63) / 64 * 64;
      void* mem = std::aligned_alloc(64, size);
      if (mem == nullptr) throw std::bad_alloc();
      std::memset(mem, 0, size);
      return VariableStore::Impl::Block{
          {}, DType::f32, 0, mem, std::shared_ptr<void>(mem, std::free)};
    });
    stored_.resize(b.buffer.size());
    for (std::size_t i = 0; i < b.buffer.size(); ++i)
      stored_[i] = static_cast<std::byte*>(b.buffer[i]);
    preset_ = std::move(b.preset);
  }

 private:
  CpuConfig opts_;
  std::size_t arena_bytes_ = 0;
  int threads_;
  std::unique_ptr<std::byte, Unmap> arena_;
  std::atomic<std::uint64_t> host_writes_{0};   // KernelArgs::host_writes without a store
  std::shared_ptr<VariableStore::Impl> store_;  // where the variables live, or null
  std::atomic<std::uint64_t>* writes_;  // the counter kernels watch: host_writes_ or the store's
  bool writes_variables_ = false;
  std::vector<std::byte*>
      stored_;  // per planned buffer: its variable's memory in the store, or null
  std::vector<std::unique_ptr<CpuKernel>> kernels_;
  std::unique_ptr<ReplayKernels> replayed_;  // replay: what the engine runs instead
  std::vector<std::string> names_;
  std::unique_ptr<Engine> engine_;
};

// The layout search's timing (Backend::pick_plan): each plan on the sequential engine with
// `cores` threads, fed zeros, in interleaved rounds after kWarmRuns runs each, until
// kMinRounds rounds and kBudgetSeconds have passed (kMaxRounds at most). An alternative
// replaces the first plan (the platform's layout) only if its median is kMargin faster: a tie
// keeps what runs without a search. The choice is kept per process (every compile of a graph
// in it agrees, so its results are bitwise the same) and, when no other process took a
// tenth of the cores meanwhile, in the tuning cache (a choice interference made is not kept).
class LayoutSearch {
 public:
  static constexpr int kWarmRuns = 2, kMinRounds = 3, kMaxRounds = 9;
  static constexpr double kBudgetSeconds = 1.5, kMargin = 0.03, kBusyShare = 0.10;

  LayoutSearch(std::span<const std::shared_ptr<const Plan>> plans, int cores)
      : plans_(plans), cores_(cores) {
    std::string key;
    for (const auto& p : plans) {
      for (const PlanNode& n : p->nodes) {
        key += std::to_string(static_cast<int>(n.op)) + ":" +
               std::to_string(static_cast<int>(n.type.dtype)) + n.type.shape.str() + "/" +
               layout_name(n.layout) + "<";
        for (std::uint32_t u : n.inputs) key += std::to_string(u) + ",";
        key += ">";
      }
      key += ";";
    }
    // The cores are part of it: platforms of other thread counts in one process time their own.
    key += "cores " + std::to_string(cores);
    fingerprint_ = fnv1a64(key.data(), key.size());
  }

  std::size_t pick(const CpuConfig& trial, std::vector<double>& seconds) {
    seconds.clear();
    static std::mutex mu;
    static std::map<std::uint64_t, std::size_t> chosen;
    {
      std::lock_guard lk(mu);
      if (auto it = chosen.find(fingerprint_); it != chosen.end()) return it->second;
    }
    const TuningCache cache(fingerprint_, "layout-search cores " + std::to_string(cores_));
    std::size_t k = 0;
    if (auto hit = cache.load(plans_[0]->nodes.size()); hit && hit->variant < plans_.size()) {
      k = hit->variant;
    } else {
      LoadMeter load;
      seconds = time_plans(trial);
      if (seconds.empty()) return 0;  // not runnable on zeros: no search
      for (std::size_t i = 1; i < seconds.size(); ++i) {
        if (seconds[i] < seconds[k]) k = i;
      }
      if (seconds[k] > (1.0 - kMargin) * seconds[0]) k = 0;
      if (load.others_share() <= kBusyShare) {
        TunedChoice c;
        c.engine = "sequential";
        c.threads = cores_;
        c.nodes = plans_[0]->nodes.size();
        c.variant = k;
        cache.store(c);
      }
    }
    std::lock_guard lk(mu);
    return chosen.emplace(fingerprint_, k).first->second;
  }

 private:
  // Each plan's median seconds per run; empty where a plan cannot run on zeros.
  std::vector<double> time_plans(const CpuConfig& trial);

  std::span<const std::shared_ptr<const Plan>> plans_;
  int cores_;
  std::uint64_t fingerprint_ = 0;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuOptions o) : opts_{o, nullptr} {}
  /// replay_cpu_platform: kernels become waits of the model's durations.
  void replay(std::shared_ptr<const ReplayModel> m) { opts_.replay = std::move(m); }
  std::string name() const override { return "cpu"; }
  std::string description() const override {
    return "cpu: " + Topology::cpu_model() + ", " + std::to_string(Topology::get().allowed()) +
           " cores, code path " + code_path().name;
  }
  // Parallel engines run nodes in any order the dependencies allow: buffers may only be
  // reused between dependency-ordered nodes.
  ReuseMode reuse_mode() const override {
    return opts_.engine == CpuEngine::sequential ? ReuseMode::sequential : ReuseMode::dag;
  }
  bool packs_arena() const override { return true; }
  std::string unsupported(const Plan& p, const PlanNode& n) const override {
    return cpu::unsupported(p, n);
  }
  bool grouped_conv_takes_layout(const Plan& p, const PlanNode& n,
                                 ActivationLayout layout) const override {
    // Its engines' largest team: the threads it was given, else its cores.
    return cpu::grouped_conv_takes_layout(p, n, layout, std::max(opts_.threads, cores_of(opts_)));
  }
  bool passes_layout(const Plan& p, const PlanNode& n, ActivationLayout layout) const override {
    return cpu::passes_layout(p, n, layout);
  }
  int kernel_threads() const override {
    const int cores = cores_of(opts_);
    switch (opts_.engine) {
      case CpuEngine::sequential:
        return opts_.threads > 0 ? opts_.threads : cores;
      case CpuEngine::automatic:
        // No parallel groups: auto compiles one plan for all its candidates, and on teams of
        // one thread (the Cx1 configurations it often keeps) a group runs its members one
        // after another on one executor (measured 1.2-1.6x slower on par-matmul-N and
        // lstm-small than the same configuration without groups).
        return 1;
      default:  // a fixed parallel engine: its teams (the guideline's, when not given, is 1+)
        if (opts_.threads_per_executor > 0) return opts_.threads_per_executor;
        return opts_.executors > 0 ? std::max(1, cores / opts_.executors) : 1;
    }
  }
  ActivationLayout conv_layout() const override { return conv_activation_layout(); }
  // oneDNN 2.6's Winograd convolutions (AVX-512 only) take nChw16c values.
  ActivationLayout winograd_layout() const override {
    return winograd_available() ? ActivationLayout::nChw16c : ActivationLayout::nchw;
  }
  std::unique_ptr<Executable> instantiate(
      std::shared_ptr<const Plan> plan,
      const std::shared_ptr<VariableStore::Impl>& store) override {
    return std::make_unique<CpuExecutable>(std::move(plan), opts_, store);
  }
  std::vector<Device> devices() const override { return {Device::cpu()}; }
  std::vector<ActivationLayout> layout_alternatives() const override {
    if (opts_.engine != CpuEngine::automatic || opts_.replay) return {};
    return conv_layout_alternatives();
  }
  std::size_t pick_plan(std::span<const std::shared_ptr<const Plan>> plans,
                        std::vector<double>& seconds) override {
    const int cores =
        opts_.threads > 0 ? std::min(opts_.threads, cores_of(opts_)) : cores_of(opts_);
    CpuConfig trial = opts_;
    trial.engine = CpuEngine::sequential;
    trial.threads = cores;
    return LayoutSearch(plans, cores).pick(trial, seconds);
  }

 private:
  CpuConfig opts_;
};

std::vector<double> LayoutSearch::time_plans(const CpuConfig& trial) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<std::int32_t>> i32;
  std::vector<FeedItem> feeds;
  const Plan& first = *plans_[0];
  for (std::uint32_t in : first.inputs) {
    const PlanNode& n = first.nodes[in];
    const auto count = static_cast<std::size_t>(n.type.shape.numel());
    if (n.type.dtype == DType::f32) {
      f32.emplace_back(count, 0.0f);
    } else {
      i32.emplace_back(count, 0);
    }
  }
  std::size_t a = 0, b = 0;
  for (std::uint32_t in : first.inputs) {
    const PlanNode& n = first.nodes[in];
    if (n.type.dtype == DType::f32) {
      feeds.push_back({n.name, Feed(f32[a++])});
    } else {
      feeds.push_back({n.name, Feed(i32[b++])});
    }
  }
  try {
    std::vector<std::unique_ptr<CpuExecutable>> exes;
    for (const auto& p : plans_) {
      // A copy: an executable lets go of its plan's initial values once they are in its memory,
      // and the chosen plan is instantiated again.
      exes.push_back(
          std::make_unique<CpuExecutable>(std::make_shared<const Plan>(*p), trial, nullptr));
      for (int w = 0; w < kWarmRuns; ++w) exes.back()->run(feeds);  // the arena's first touch
    }
    std::vector<std::vector<double>> times(exes.size());
    const auto start = Clock::now();
    for (int r = 0; r < kMaxRounds; ++r) {
      if (r >= kMinRounds &&
          std::chrono::duration<double>(Clock::now() - start).count() > kBudgetSeconds)
        break;
      for (std::size_t k = 0; k < exes.size(); ++k) {
        const auto t0 = Clock::now();
        exes[k]->run(feeds);
        times[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
    }
    std::vector<double> out;
    for (auto& t : times) {
      std::sort(t.begin(), t.end());
      out.push_back(t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]));
    }
    return out;
  } catch (const Error&) {
    return {};  // e.g. a value check zeros fail: the platform's layout, unsearched
  }
}

}  // namespace
}  // namespace detail::cpu

namespace detail {
Platform replay_cpu_platform(const CpuOptions& options,
                             std::shared_ptr<const cpu::ReplayModel> replay) {
  Platform p = Platform::cpu(options);
  // The platform is this function's alone until it returns: its backend may still change.
  if (replay) static_cast<cpu::CpuBackend&>(backend_of(p)).replay(std::move(replay));
  return p;
}
}  // namespace detail

Platform Platform::cpu(CpuOptions options) {
  if (options.threads < 0 || options.executors < 0 || options.threads_per_executor < 0) {
    throw PlatformError("CpuOptions: threads, executors and threads_per_executor must be >= 0");
  }
  if (options.executors > 64) throw PlatformError("CpuOptions: at most 64 executors");
  const CpuOptions::Experimental& x = options.experimental;
  if (x.ring_capacity < 1)
    throw PlatformError("CpuOptions.experimental.ring_capacity must be >= 1");
  if (!(x.queue_us >= 0)) throw PlatformError("CpuOptions.experimental.queue_us must be >= 0");
  if (x.profile_runs < 0) throw PlatformError("CpuOptions.experimental.profile_runs must be >= 0");
  return Platform(std::make_shared<detail::cpu::CpuBackend>(options));
}

}  // namespace hetgraph
