// SPDX-License-Identifier: Apache-2.0
#include "common/tool_run.hpp"

#include <algorithm>
#include <chrono>

#include "common/executable.hpp"
#include "hetgraph/timer.hpp"

namespace hetgraph::tool {

Platform make_platform(const EngineFlags& e,
                       std::shared_ptr<const detail::cpu::ReplayModel> replay) {
  if (e.platform == "opencl") {  // --engine in-order: one in-order queue (a serial run)
    return Platform::opencl({.in_order = e.engine == "in-order"});
  }
  CpuOptions c;
  if (!e.engine.empty()) c.engine = parse_engine(e.engine);
  c.threads = e.threads;
  c.executors = e.executors;
  c.threads_per_executor = e.threads_per_executor;
  if (e.inline_below_us >= 0) c.experimental.inline_below_us = e.inline_below_us;
  c.pin_threads = e.pin;
  c.experimental.per_op_threads = e.per_op_threads;
  return detail::replay_cpu_platform(c, std::move(replay));
}

Platform make_platform(const EngineFlags& e) {
  return make_platform(e, nullptr);
}

Timing time_runs(CompiledGraph& cg, std::span<const FeedItem> feeds, const TimingOptions& o) {
  Timing t;
  if (o.cold) {
    if (!o.trace.empty()) cg.start_trace(o.trace);
    if (o.profile) cg.start_profile();
    const int runs = (o.warmup + o.repeat) * o.runs_per_sample;
    for (int s = 0; s < runs; ++s) {
      if (!cg.engine_report().tuned()) ++t.tuning_runs;
      const double ts = now_s();
      cg.run(feeds);
      t.samples.push_back(now_s() - ts);
    }
    if (!o.trace.empty()) cg.stop_trace();
    if (o.profile) t.profile = cg.stop_profile();
    return t;
  }
  // An automatic engine tunes itself on the first runs (timed turns per candidate): those are
  // warm-up, not samples.
  const auto tune_t0 = std::chrono::steady_clock::now();
  while (!cg.engine_report().tuned() &&
         std::chrono::steady_clock::now() - tune_t0 < std::chrono::seconds(300)) {
    cg.run(feeds);
    ++t.tuning_runs;
  }
  for (int i = 0; i < o.warmup; ++i) cg.run(feeds);
  if (!o.trace.empty()) cg.start_trace(o.trace);
  if (o.profile) cg.start_profile();  // the timed runs only: not the search, not the warm-up
  for (int s = 0; s < o.repeat; ++s) {
    if (o.before_sample) {  // one run per sample, the preparation timed apart
      const double t0 = now_s();
      o.before_sample();
      const double t1 = now_s();
      cg.run(feeds);
      t.before.push_back(t1 - t0);
      t.samples.push_back(now_s() - t1);
      continue;
    }
    const double ts = now_s();
    for (int i = 0; i < o.runs_per_sample; ++i) cg.run(feeds);
    t.samples.push_back((now_s() - ts) / o.runs_per_sample);
  }
  if (!o.trace.empty()) cg.stop_trace();
  if (o.profile) t.profile = cg.stop_profile();
  return t;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string lanes_label(const EngineReport& r) {
  return r.lanes.empty()
             ? "1x1"
             : std::to_string(r.lanes.size()) + "x" + std::to_string(r.lanes.front().threads);
}

}  // namespace hetgraph::tool
