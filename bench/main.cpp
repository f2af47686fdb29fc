// SPDX-License-Identifier: Apache-2.0
// hetgraph-bench: times workloads with PAPI's real-time clock, of completed work, and prints
// one JSON object per workload (--json) or a readable line.
//
//   build/bench/hetgraph-bench --workload par-matmul-8192 --engine critical-path --executors 2x1
//   --json build/bench/hetgraph-bench --workload lstm-small --engine auto --repeat 10 --trace
//   lstm.json
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/executable.hpp"
#include "common/tool_run.hpp"
#include "common/trace.hpp"
#include "compiler/graph_stats.hpp"
#include "compiler/plan.hpp"
#include "cpu/replay.hpp"
#include "cpu/topology.hpp"
#include "cpu/tuning_cache.hpp"
#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "options.hpp"
#include "workloads.hpp"

namespace {

using bench::Options;

// --platform hetero: the members --devices names, in order; --engine is the CPU member's.
using ReplayModelPtr = std::shared_ptr<const hetgraph::detail::cpu::ReplayModel>;

hetgraph::Platform make_platform(const Options& o, ReplayModelPtr replay = nullptr) {
  if (o.platform != "hetero") return hetgraph::tool::make_platform(o, std::move(replay));
  std::vector<hetgraph::Platform> members;
  for (const std::string& d : o.devices) {
    if (d == "cpu") {
      Options cpu = o;
      cpu.platform = "cpu";
      members.push_back(hetgraph::tool::make_platform(cpu));
    } else if (d == "opencl") {
      members.push_back(hetgraph::Platform::opencl());
    } else {
      int p = 0, k = 0;
      if (std::sscanf(d.c_str(), "opencl:%d:%d", &p, &k) != 2)
        throw hetgraph::cli::UsageError("--devices: '" + d + "' is not opencl:P:D");
      members.push_back(hetgraph::Platform::opencl({.platform_index = p, .device_index = k}));
    }
  }
  hetgraph::HeteroOptions h;
  h.placement = o.placement == "heft"    ? hetgraph::HeteroOptions::Placement::heft
                : o.placement == "first" ? hetgraph::HeteroOptions::Placement::first
                                         : hetgraph::HeteroOptions::Placement::automatic;
  return hetgraph::Platform::heterogeneous(std::move(members), h);
}

using bench::mapped_feeds;

// A recorded kernel's time, less the clock read its event spans besides the kernel (about
// 30 ns on this VM: most of what a thread-pool node measures). What is left under one more
// read is below what the clock resolves and counts as nothing.
double event_us(const hetgraph::detail::Executable::Event& e) {
  const std::int64_t read = hetgraph::detail::cpu::clock_read_ns();
  const std::int64_t ns = e.end_ns - e.start_ns - read;
  return ns < read ? 0.0 : static_cast<double>(ns) * 1e-3;
}

// Co-running slowdown per op kind: one single-thread executor per core (critical-path), each
// node's time over 7 runs against its time alone (`alone_us`, per profile node, as measured:
// before the calibration of the sub-microsecond ones), counting the nodes that ran at least 90%
// of their time beside a node on another executor. Clamped to [1, 4]: faster beside others is
// noise.
void measure_corun(bench::Case& c, const Options& o, hetgraph::detail::cpu::ReplayProfile& p,
                   const std::map<std::string, std::size_t>& index,
                   const std::vector<double>& alone_us) {
  namespace hd = hetgraph::detail;
  hetgraph::CpuOptions co;
  co.engine = hetgraph::CpuEngine::critical_path;
  co.executors = p.cores;
  co.threads_per_executor = 1;
  co.pin_threads = o.pin;
  hetgraph::CompileOptions opts;
  opts.fuse = o.fuse;
  opts.experimental.parallel_ops = false;
  hetgraph::CompiledGraph cg = hetgraph::GraphCompiler(hetgraph::Platform::cpu(co), opts)
                                   .compile(c.graph, c.shapes, c.fetches);
  const std::vector<hetgraph::FeedItem> feeds = mapped_feeds(c, cg);
  for (int i = 0; i < std::max(o.warmup, 4); ++i) cg.run(feeds);
  hd::Executable& exe = hd::executable_of(cg);
  const hd::Plan& plan = exe.plan();
  exe.record_events(true);
  std::map<std::string, std::pair<double, double>> sums;  // kind -> (beside, alone) us
  for (int r = 0; r < 7; ++r) {
    cg.run(feeds);
    auto ev = exe.last_run_events();
    std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> lanes;
    for (const auto& e : ev) lanes[e.lane].push_back({e.start_ns, e.end_ns});
    for (auto& [l, v] : lanes) std::sort(v.begin(), v.end());
    for (const auto& e : ev) {
      const std::int64_t len = e.end_ns - e.start_ns;
      if (len <= 0) continue;
      std::int64_t overlap = 0;           // with the union of the other lanes (they do not overlap
      for (const auto& [l, v] : lanes) {  // within a lane; with 2+ others, at most sums)
        if (l == e.lane) continue;
        auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(e.start_ns, std::int64_t{0}));
        if (it != v.begin()) --it;
        for (; it != v.end() && it->first < e.end_ns; ++it)
          overlap += std::max<std::int64_t>(
              0, std::min(it->second, e.end_ns) - std::max(it->first, e.start_ns));
      }
      if (overlap < len * 9 / 10) continue;
      const auto k = index.find(plan.nodes[e.node].label);
      if (k == index.end()) continue;
      auto& [beside, alone] = sums[p.nodes[k->second].op];
      beside += event_us(e);
      alone += alone_us[k->second];
    }
  }
  for (const auto& [op, s] : sums) {
    if (s.second > 0) p.corun[op] = std::clamp(s.first / s.second, 1.0, 4.0);
  }
}

// The sub-microsecond nodes' times at team size p.team_sizes[ti] (`measured`: the profile's
// nodes the plan timed there), calibrated against whole runs. A node timed alone pays for what
// a free run overlaps: the clock reads around it stall the core's out-of-order window, so its
// loads' cache misses count in full. threadpool-dag's 59k kernels of about 10 ns, reading
// scattered buffers, summed to 4 times its whole run. What the kernels take in a whole run is
// the run less the engine's own work: the same graph replayed with waits of zero. Both on the
// sequential engine, whose own work is the least (a parallel engine's differs between real and
// replayed kernels by more than such kernels take), in alternating blocks of 7 runs, the median
// of 5 blocks' differences of their fastest runs (a run another process interrupts only looks
// slower, and on a busy machine every time would grow, the difference with them). Only nodes under
// a microsecond are scaled, and only down: the calibration moves their share of the profile and
// nothing else. And only where they hold most of its time: beside larger nodes their share is below
// what whole runs resolve (lstm-small's 0.3 of 46 ms came out as nothing: the sequential engine's
// own memory plan ran faster).
void calibrate_small_nodes(bench::Case& c, const hetgraph::CompileOptions& opts, int warmup,
                           hetgraph::detail::cpu::ReplayProfile& p, std::size_t ti,
                           const std::vector<std::size_t>& measured) {
  namespace hd = hetgraph::detail;
  double small = 0, big = 0;
  for (std::size_t k : measured) (p.nodes[k].us[ti] < 1 ? small : big) += p.nodes[k].us[ti];
  if (small <= 0 || small < big) return;
  hetgraph::CpuOptions co;
  co.engine = hetgraph::CpuEngine::sequential;
  co.threads = p.team_sizes[ti];
  const auto compile = [&](const hetgraph::CpuOptions& with, ReplayModelPtr replay) {
    return hetgraph::GraphCompiler(hd::replay_cpu_platform(with, std::move(replay)), opts)
        .compile(c.graph, c.shapes, c.fetches);
  };
  hetgraph::CompiledGraph real = compile(co, nullptr);
  hd::cpu::ReplayProfile zero;
  zero.team_sizes = p.team_sizes;
  for (const hd::PlanNode& n : hd::executable_of(real).plan().nodes) {
    if (n.has_work())
      zero.nodes.push_back(
          {n.label, std::string(hd::op_name(n.op)), std::vector<double>(p.team_sizes.size(), 0.0)});
  }
  hetgraph::CompiledGraph engine_only =
      compile(co, std::make_shared<hd::cpu::ReplayModel>(std::move(zero), p.team_sizes[ti], 1.0));
  const std::vector<hetgraph::FeedItem> feeds = mapped_feeds(c, real);
  const std::vector<hetgraph::FeedItem> zfeeds = mapped_feeds(c, engine_only);
  for (int i = 0; i < std::max(warmup, 4); ++i) {
    real.run(feeds);
    engine_only.run(zfeeds);
  }
  const auto fastest_us = [](hetgraph::CompiledGraph& g, const std::vector<hetgraph::FeedItem>& f) {
    double best = std::numeric_limits<double>::max();
    for (int r = 0; r < 7; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      g.run(f);
      best = std::min(
          best,
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  std::vector<double> kernels_us;
  for (int r = 0; r < 5; ++r) {
    const double whole = fastest_us(real, feeds);
    kernels_us.push_back(whole - fastest_us(engine_only, zfeeds));
  }
  const double scale = std::clamp((hetgraph::tool::median(kernels_us) - big) / small, 0.0, 1.0);
  for (std::size_t k : measured) {
    if (p.nodes[k].us[ti] < 1) p.nodes[k].us[ti] *= scale;
  }
}

// The replay profile of a workload on this machine: each node's median time over 7 recorded
// runs on one executor of T threads (T = 1, 2, 4, ... up to the cores; the team sizes' runs
// taken in turns), nodes one at a time, under the parallel engines' memory plan. Compiled without
// parallel ops, so that every node has its own time, and (T >= 2) with them, for the groups' own
// times. The nodes under a microsecond are then calibrated against whole runs
// (calibrate_small_nodes).
hetgraph::detail::cpu::ReplayProfile measure_profile(bench::Case& c, const Options& o,
                                                     const std::string& name) {
  namespace hd = hetgraph::detail;
  hd::cpu::ReplayProfile p;
  p.workload = name;
  p.machine = hd::cpu::TuningCache::machine();
  p.cores = hd::cpu::Topology::get().allowed();
  p.team_sizes.clear();
  for (int t = 1; t <= p.cores; t *= 2) p.team_sizes.push_back(t);
  // One compiled graph per team size and pass. Pass 0 of each team size: every node on its
  // own; pass 1 (team sizes 2+, parallel ops asked for): the parallel groups as they run.
  struct Config {
    std::size_t ti;
    int pass;
    hetgraph::CompileOptions opts;
    hetgraph::CompiledGraph cg;
    std::vector<hetgraph::FeedItem> feeds;
    std::vector<std::vector<double>> us;  // per plan node, a sample a round
  };
  std::vector<Config> configs;
  for (std::size_t ti = 0; ti < p.team_sizes.size(); ++ti) {
    for (int pass = 0; pass < (ti > 0 && o.parallel_ops ? 2 : 1); ++pass) {
      hetgraph::CpuOptions co;
      co.engine = hetgraph::CpuEngine::critical_path;
      co.executors = 1;
      co.threads_per_executor = p.team_sizes[ti];
      co.pin_threads = o.pin;
      hetgraph::CompileOptions opts;
      opts.fuse = o.fuse;
      opts.experimental.parallel_ops = pass == 1;
      // Every concat copies in pass 0, so that each has a time: whether one is computed in
      // place depends on the plan (a parallel group's members keep the copy), and a replayed
      // plan may copy where this one would not.
      opts.experimental.concat_in_place = pass == 1;
      hetgraph::CompiledGraph cg = hetgraph::GraphCompiler(hetgraph::Platform::cpu(co), opts)
                                       .compile(c.graph, c.shapes, c.fetches);
      std::vector<hetgraph::FeedItem> feeds = mapped_feeds(c, cg);
      for (int i = 0; i < std::max(o.warmup, 4); ++i) cg.run(feeds);
      const std::size_t nodes = hd::executable_of(cg).plan().nodes.size();
      configs.push_back({ti, pass, opts, std::move(cg), std::move(feeds),
                         std::vector<std::vector<double>>(nodes)});
    }
  }
  // 7 rounds, each a recorded run of every configuration in turn: a slow spell of the machine
  // then falls on a few samples of each configuration, which their medians leave out, not on
  // every sample of one (lstm-small's 2-thread times once came out 35% high, 2026-11-28).
  for (Config& k : configs) hd::executable_of(k.cg).record_events(true);
  for (int r = 0; r < 7; ++r) {
    for (Config& k : configs) {
      k.cg.run(k.feeds);
      for (const auto& e : hd::executable_of(k.cg).last_run_events())
        k.us[e.node].push_back(event_us(e));
    }
  }
  for (Config& k : configs) hd::executable_of(k.cg).record_events(false);
  std::map<std::string, std::size_t> index;
  std::vector<double> alone_us;
  for (Config& k : configs) {
    const std::size_t ti = k.ti;
    const hd::Plan& plan = hd::executable_of(k.cg).plan();
    std::vector<std::size_t> measured;
    for (std::uint32_t i = 0; i < plan.nodes.size(); ++i) {
      const hd::PlanNode& n = plan.nodes[i];
      if (k.us[i].empty() || (k.pass == 1 && n.op != hd::OpKind::ParallelGroup)) continue;
      auto it = index.find(n.label);
      if (it == index.end()) {
        std::vector<double> t(p.team_sizes.size(), -1.0);
        if (k.pass == 1) {  // at one thread a group is its members in turn
          t[0] = 0;
          for (std::uint32_t m : n.members) {
            const auto found = index.find(plan.nodes[m].label);
            if (found != index.end()) t[0] += p.nodes[found->second].us[0];
          }
        } else if (ti != 0) {
          continue;  // not in the 1-thread plan: cannot be modelled
        }
        it = index.emplace(n.label, p.nodes.size()).first;
        p.nodes.push_back({n.label, std::string(hd::op_name(n.op)), std::move(t)});
      }
      p.nodes[it->second].us[ti] = hetgraph::tool::median(k.us[i]);
      measured.push_back(it->second);
    }
    if (ti == 0) {  // the times alone as measured, for the co-run slowdown
      for (const auto& n : p.nodes) alone_us.push_back(n.us[0]);
    }
    if (k.pass == 0) calibrate_small_nodes(c, k.opts, o.warmup, p, ti, measured);
  }
  for (auto& n : p.nodes) {  // a node missing at a team size: its time at the size below
    for (std::size_t ti = 1; ti < n.us.size(); ++ti) {
      if (n.us[ti] < 0) n.us[ti] = n.us[ti - 1];
    }
  }
  if (p.cores >= 2) measure_corun(c, o, p, index, alone_us);
  return p;
}

// What a replayed run says besides its makespan: the modelled lower bound of the configuration
// it ran (executors x threads), its busy thread-time, and the overhead above the bound.
struct ReplayStats {
  double critical_path_s = 0, work_s = 0, bound_s = 0, busy_s = 0;
  std::size_t kernels = 0;
};

ReplayStats replay_stats(const hetgraph::CompiledGraph& cg,
                         const hetgraph::detail::cpu::ReplayModel& m, int executors, int threads) {
  namespace hd = hetgraph::detail;
  const hd::Plan& plan = hd::executable_of(cg).plan();
  ReplayStats s;
  const std::vector<double> us = m.plan_us(plan, threads);
  const std::vector<double> busy = m.plan_busy_us(plan, threads);
  for (double l : hd::levels_from_costs(plan, us))
    s.critical_path_s = std::max(s.critical_path_s, l * 1e-6);
  for (std::size_t i = 0; i < us.size(); ++i) {
    s.work_s += us[i] * 1e-6;
    s.busy_s += busy[i] * 1e-6;
    s.kernels += us[i] > 0;
  }
  s.bound_s = std::max(s.critical_path_s, s.work_s / executors);
  return s;
}

// --time-scale 0: long enough that the typical kernel the engines do not inline waits 100 us
// or more in wall time (the sleep's residual error, a few microseconds after the oversleep is
// taken off, stays near 5% of it), at most 20x (engine overhead is divided by it too). A graph
// whose every kernel is inlined (the thread-pool workloads) replays at 1x: its waits are
// spins of nanoseconds, no sleep's error to spread, and its time is mostly the engines' own
// work, which a scale would divide.
double auto_time_scale(const hetgraph::detail::cpu::ReplayProfile& p, double inline_us) {
  std::vector<double> us;
  for (const auto& n : p.nodes) {
    if (n.us.front() >= inline_us) us.push_back(n.us.front());
  }
  if (us.empty()) return 1;
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return std::clamp(std::ceil(100.0 / std::max(us[us.size() / 2], 1e-3)), 1.0, 20.0);
}

struct Result {
  std::vector<double> samples;  // seconds per run
  std::vector<double> copies;   // time_copies: seconds writing the inputs before each run
  double setup_s = 0, checksum = 0;
  std::size_t planned = 0, naive = 0;
  int tuning_runs = 0;
  hetgraph::EngineReport engine;
  std::optional<ReplayStats> replay;
  double host_load = 0;  // CPU time / (wall time x real cores) of the timed loop
};

// This process's user + system CPU seconds.
double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The plan as the guideline sees it, one JSON line per node: label, op, static cost (us at one
// thread: static_costs), execution predecessors. bench/guideline_grid.py models on it.
void dump_costs(const hetgraph::detail::Plan& p, const std::string& path) {
  namespace hd = hetgraph::detail;
  std::ofstream f(path);
  const std::vector<double> cost = hd::static_costs(p);
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const hd::PlanNode& n = p.nodes[i];
    f << "{\"node\":" << i << ",\"label\":\"" << hd::json_escape(n.label) << "\",\"op\":\""
      << hd::op_name(n.op) << "\",\"cost_us\":" << cost[i] << ",\"deps\":[";
    for (std::size_t k = 0; k < n.deps.size(); ++k) f << (k ? "," : "") << n.deps[k];
    f << "]}\n";
  }
  if (!f.flush()) throw hetgraph::DataError(path + ": cannot write the plan's costs");
}

Result time_case(bench::Case& c, const Options& o, ReplayModelPtr replay) {
  Result r;
  if (c.raw) {
    for (int i = 0; i < o.warmup; ++i) c.raw();
    for (int s = 0; s < o.repeat; ++s) {
      const double t0 = hetgraph::now_s();
      for (int i = 0; i < c.runs_per_sample; ++i) c.raw();
      r.samples.push_back((hetgraph::now_s() - t0) / c.runs_per_sample);
    }
    r.checksum = c.raw_checksum();
    return r;
  }
  const double t0 = hetgraph::now_s();
  hetgraph::CompileOptions co;
  co.fuse = o.fuse;
  co.experimental.parallel_ops = o.parallel_ops;
  co.experimental.grouped_embeddings = o.grouped_embeddings;
  co.experimental.stacked_products = o.stacked_products;
  hetgraph::CompiledGraph cg =
      hetgraph::GraphCompiler(make_platform(o, replay), co).compile(c.graph, c.shapes, c.fetches);
  r.setup_s = hetgraph::now_s() - t0;
  if (!o.dump_costs.empty()) dump_costs(hetgraph::detail::executable_of(cg).plan(), o.dump_costs);
  r.planned = cg.planned_bytes();
  r.naive = cg.naive_bytes();
  // Mapped (default): inputs go into the graph's mapped buffers and every run feeds those
  // (nothing to copy). --no-mapped: runs feed the case's own vectors, which run() copies in.
  std::vector<hetgraph::FeedItem> feeds, mapped_feeds;
  for (const auto& [name, data] : c.inputs) {
    auto buf = cg.mapped_input(name);
    std::copy(data.begin(), data.end(), buf.begin());
    mapped_feeds.push_back({name, buf});
    feeds.push_back(o.mapped ? mapped_feeds.back() : hetgraph::FeedItem{name, data});
  }
  for (const auto& [name, data] : c.int_inputs) {
    auto buf = cg.mapped_input_i32(name);
    std::copy(data.begin(), data.end(), buf.begin());
    mapped_feeds.push_back({name, buf});
    feeds.push_back(o.mapped ? mapped_feeds.back() : hetgraph::FeedItem{name, data});
  }
  // time_copies: the inputs are written before every run and that is timed on its own, as
  // the baseline report splits copy from compute: mapped, the caller's copy into the mapped
  // buffers; not mapped, CompiledGraph::write (the copy run() does for an unmapped feed).
  // The run itself then feeds the buffers already in place.
  auto write_inputs = [&] {
    for (const auto& [name, data] : c.inputs) {
      if (o.mapped) {
        auto buf = cg.mapped_input(name);
        std::copy(data.begin(), data.end(), buf.begin());
      } else {
        cg.write(name, data);
      }
    }
    for (const auto& [name, data] : c.int_inputs) {
      if (o.mapped) {
        auto buf = cg.mapped_input_i32(name);
        std::copy(data.begin(), data.end(), buf.begin());
      } else {
        cg.write_i32(c.graph.find(name), data);
      }
    }
  };
  if (c.time_copies) feeds = mapped_feeds;
  hetgraph::tool::TimingOptions to;
  to.repeat = o.repeat;
  to.warmup = o.warmup;
  to.runs_per_sample = c.runs_per_sample;
  to.trace = o.trace;
  to.cold = o.cold;
  if (c.time_copies) to.before_sample = write_inputs;
  const double cpu0 = process_cpu_s(), wall0 = hetgraph::now_s();
  hetgraph::tool::Timing t = hetgraph::tool::time_runs(cg, feeds, to);
  r.host_load = (process_cpu_s() - cpu0) /
                ((hetgraph::now_s() - wall0) * hetgraph::detail::cpu::Topology::get().allowed());
  r.samples = std::move(t.samples);
  r.copies = std::move(t.before);
  r.tuning_runs = t.tuning_runs;
  for (const hetgraph::Node& n : c.checksum) {
    for (float v : cg.read(n)) r.checksum += v;
  }
  r.engine = cg.engine_report();
  if (replay) {
    // Wall time is time_scale x the modelled time: samples are scaled back.
    for (double& x : r.samples) x /= replay->time_scale();
    const auto& cpu = r.engine.cpu.value();
    r.replay = replay_stats(cg, *replay, cpu.executors, cpu.threads_per_executor);
  }
  return r;
}

// The workload's graph as DIR/NAME.onnx (its fetches the outputs, its variables at their
// initial values) and its inputs as DIR/NAME/<input>.pb: what hetgraph-run times against the
// hand-built graph.
void export_case(const bench::Case& c, const std::string& name, const std::string& dir) {
  namespace ho = hetgraph::onnx;
  if (c.raw) throw hetgraph::GraphError(name + " is a raw library call, not a graph");
  const std::filesystem::path d(dir);
  std::filesystem::create_directories(d / name);
  ho::export_model(c.graph, c.fetches, c.shapes, (d / (name + ".onnx")).string());
  auto shape_of = [&](const std::string& input) {
    for (const auto& [n, s] : c.shapes) {
      if (n == input) return s;
    }
    throw hetgraph::GraphError(name + ": input '" + input + "' has no shape");
  };
  for (const auto& [input, data] : c.inputs) {
    ho::TensorData t{input, "float", hetgraph::DType::f32, shape_of(input), data, {}};
    ho::write_tensor((d / name / (input + ".pb")).string(), t);
  }
  for (const auto& [input, data] : c.int_inputs) {
    ho::TensorData t{input, "int32", hetgraph::DType::i32, shape_of(input), {}, data};
    ho::write_tensor((d / name / (input + ".pb")).string(), t);
  }
  std::printf("%s -> %s\n", name.c_str(), (d / (name + ".onnx")).string().c_str());
}

}  // namespace

int run(const Options& o) {
  bench::check_bench_options(o);
  if (o.list) {
    for (const auto& n : bench::workload_names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  int status = 0;
  for (const std::string& name : o.workloads) {
    const auto w = bench::find_workload(name);
    if (!w) {
      std::fprintf(stderr, "hetgraph-bench: unknown workload '%s' (--list shows them)\n",
                   name.c_str());
      status = 2;
      continue;
    }
    try {
      bench::Case c = w->make();
      if (!o.export_onnx.empty()) {
        export_case(c, name, o.export_onnx);
        continue;
      }
      ReplayModelPtr replay;
      if (!o.record_profile.empty() || o.replay_cores > 0) {
        namespace hc = hetgraph::detail::cpu;
        hc::ReplayProfile p;
        if (o.replay_profile.empty()) {
          p = measure_profile(c, o, name);
        } else {
          p = hc::load_profile(o.replay_profile);
        }
        if (!o.record_profile.empty()) {
          hc::save_profile(p, o.record_profile);
          std::fprintf(stderr, "hetgraph-bench: %s: profile of %zu nodes at %zu team sizes -> %s\n",
                       name.c_str(), p.nodes.size(), p.team_sizes.size(), o.record_profile.c_str());
        }
        if (o.replay_cores == 0) continue;  // --record-profile alone: nothing to time
        const double inl = o.inline_below_us >= 0
                               ? o.inline_below_us
                               : hetgraph::CpuOptions{}.experimental.inline_below_us;
        const double k = o.time_scale > 0 ? o.time_scale : auto_time_scale(p, inl);
        replay = std::make_shared<hc::ReplayModel>(std::move(p), o.replay_cores, k);
      }
      const Result r = time_case(c, o, replay);
      const double med = hetgraph::tool::median(r.samples);
      const double mn = *std::min_element(r.samples.begin(), r.samples.end());
      const double mx = *std::max_element(r.samples.begin(), r.samples.end());
      const std::string platform = c.raw ? "raw" : o.platform;
      const std::string engine = c.raw ? "none" : r.engine.engine;
      // lanes x threads: CPU executors x their team size, OpenCL queues x compute units
      const std::string executors = hetgraph::tool::lanes_label(r.engine);
      const hetgraph::EngineReport::Cpu cpu = r.engine.cpu.value_or(hetgraph::EngineReport::Cpu{});
      if (o.json) {
        std::printf(
            "{\"workload\":\"%s\",\"platform\":\"%s\",\"engine\":\"%s\",\"executors\":\"%s\","
            "\"repeat\":%d,\"runs_per_sample\":%d,\"median_s\":%.9g,\"min_s\":%.9g,\"max_s\":%.9g,"
            "\"setup_s\":%.9g,\"checksum\":%.17g,\"planned_bytes\":%zu,\"naive_bytes\":%zu,"
            "\"nodes\":%zu,\"heavy_nodes\":%zu,\"max_width\":%d,\"avg_width\":%d,"
            "\"work_width\":%d,\"guideline_executors\":%d,\"tuning_runs\":%d,\"fused\":%s,"
            "\"parallel_ops\":%s,"
            "\"grouped_embeddings\":%s,\"stacked_products\":%s,\"mapped\":%s,"
            "\"compute_s\":%.9g",
            name.c_str(), platform.c_str(), engine.c_str(), executors.c_str(), o.repeat,
            c.runs_per_sample, med, mn, mx, r.setup_s, r.checksum, r.planned, r.naive,
            r.engine.nodes, r.engine.heavy_nodes, r.engine.max_width, r.engine.avg_width,
            r.engine.work_width, cpu.guideline_executors, r.tuning_runs, o.fuse ? "true" : "false",
            o.parallel_ops ? "true" : "false", o.grouped_embeddings ? "true" : "false",
            o.stacked_products ? "true" : "false", o.mapped ? "true" : "false", med);
        if (!cpu.code_path.empty()) std::printf(",\"code_path\":\"%s\"", cpu.code_path.c_str());
        if (!r.copies.empty()) std::printf(",\"copy_s\":%.9g", hetgraph::tool::median(r.copies));
        if (o.cold) {  // every run from the first: the mean is what the process paid per run
          const auto mean = [&](std::size_t n) {
            double sum = 0;
            for (std::size_t i = 0; i < n; ++i) sum += r.samples[i];
            return sum / static_cast<double>(n);
          };
          std::printf(
              ",\"cold\":true,\"cold_runs\":%zu,\"mean_s\":%.9g,\"first10_mean_s\":%.9g,"
              "\"first_s\":%.9g",
              r.samples.size(), mean(r.samples.size()),
              mean(std::min<std::size_t>(10, r.samples.size())), r.samples.front());
        }
        if (o.platform == "cpu" && !c.raw) {
          // Nodes cheaper than this ran in the thread that readied them (0: inlining off).
          const double inl = o.inline_below_us >= 0
                                 ? o.inline_below_us
                                 : hetgraph::CpuOptions{}.experimental.inline_below_us;
          std::printf(",\"inline_below_us\":%.9g,\"inline\":%s,\"pin\":%s,\"per_op_threads\":%s",
                      inl, inl > 0 ? "true" : "false", o.pin ? "true" : "false",
                      o.per_op_threads ? "true" : "false");
        }
        if (cpu.chosen) {  // what the automatic engine settled on
          std::printf(
              ",\"chosen\":{\"engine\":\"%s\",\"executors\":\"%dx%d\",\"per_op_threads\":%s,"
              "\"from_cache\":%s}",
              cpu.chosen->engine.c_str(), cpu.chosen->executors, cpu.chosen->threads_per_executor,
              cpu.chosen->per_op_threads ? "true" : "false",
              cpu.chosen->from_cache ? "true" : "false");
        }
        if (!cpu.op_threads.empty()) {  // per-op thread counts and their hill climbs
          std::printf(",\"op_threads\":[");
          for (std::size_t i = 0; i < cpu.op_threads.size(); ++i) {
            const auto& k = cpu.op_threads[i];
            std::printf("%s{\"op\":\"%s\",\"threads\":%d,\"curve\":[", i ? "," : "", k.op.c_str(),
                        k.threads);
            for (std::size_t j = 0; j < k.curve.size(); ++j)
              std::printf("%s[%d,%.6g]", j ? "," : "", k.curve[j].first, k.curve[j].second);
            std::printf("]}");
          }
          std::printf("]");
        }
        if (!cpu.search.empty()) {
          std::printf(",\"search\":[");
          for (std::size_t i = 0; i < cpu.search.size(); ++i) {
            const auto& t = cpu.search[i];
            std::printf("%s{\"engine\":\"%s\",\"executors\":\"%dx%d\",\"median_s\":%.9g}",
                        i ? "," : "", t.engine.c_str(), t.executors, t.threads_per_executor,
                        t.median_s);
          }
          std::printf("]");
        }
        if (const auto& h = r.engine.hetero) {
          // Where the nodes went: "cpu:12,opencl:0:0:3".
          std::map<std::string, int> count;
          for (const auto& n : h->nodes) ++count[n.device];
          std::string where;
          for (const auto& [d, k] : count)
            where += (where.empty() ? "" : ",") + d + ":" + std::to_string(k);
          std::string decision;
          for (char ch : h->decision) decision += ch == '"' || ch == '\\' ? '\'' : ch;
          std::printf(
              ",\"placement\":\"%s\",\"devices\":\"%s\",\"nodes_on\":\"%s\",\"transfers\":%zu,"
              "\"transfer_bytes\":%zu,\"estimated_us\":%.9g,\"decision\":\"%s\"",
              o.placement.c_str(), join(o.devices).c_str(), where.c_str(), h->transfers,
              h->transfer_bytes, h->estimated_us, decision.c_str());
        }
        if (r.replay) {
          // Simulated: median_s is the makespan on the virtual machine (wall / time_scale).
          const ReplayStats& rs = *r.replay;
          std::printf(
              ",\"replay\":{\"cores\":%d,\"time_scale\":%.9g,\"profile\":\"%s\","
              "\"makespan_s\":%.9g,\"critical_path_s\":%.9g,\"work_s\":%.9g,\"bound_s\":%.9g,"
              "\"utilisation\":%.6g,\"overhead_s\":%.9g,\"overhead_per_kernel_us\":%.6g,"
              "\"kernels\":%zu,\"host_load\":%.3g}",
              replay->cores(), replay->time_scale(),
              o.replay_profile.empty() ? "measured" : o.replay_profile.c_str(), med,
              rs.critical_path_s, rs.work_s, rs.bound_s, rs.busy_s / (replay->cores() * med),
              med - rs.bound_s,
              rs.kernels ? (med - rs.bound_s) * 1e6 / static_cast<double>(rs.kernels) : 0.0,
              rs.kernels, r.host_load);
        }
        for (const auto& [k, v] : c.stats) std::printf(",\"%s\":%.9g", k.c_str(), v);
        std::printf("}\n");
      } else {
        std::printf(
            "%-24s %-4s %-13s %-5s median %11.6f s  min %11.6f  max %11.6f  setup %.4f s  checksum "
            "%.6g",
            name.c_str(), platform.c_str(), engine.c_str(), executors.c_str(), med, mn, mx,
            r.setup_s, r.checksum);
        if (!r.copies.empty()) std::printf("  copy %.6f s", hetgraph::tool::median(r.copies));
        std::printf("\n");
        for (const auto& t : cpu.search) {
          std::printf("    search: %-13s %dx%d  median %.6f s\n", t.engine.c_str(), t.executors,
                      t.threads_per_executor, t.median_s);
        }
      }
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hetgraph-bench: %s: %s\n", name.c_str(), e.what());
      status = 1;
    }
  }
  return status;
}

int main(int argc, char** argv) {
  Options o;
  hetgraph::cli::Parser parser = bench::bench_parser(o);
  return hetgraph::cli::run_main(parser, argc, argv, [&] { return run(o); });
}
