// SPDX-License-Identifier: Apache-2.0
#include "common/executable.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

#include "common/profile.hpp"
#include "compiler/graph_stats.hpp"
#include "hetgraph/error.hpp"

// Executable is CompiledGraph::Impl: its members are defined in namespace hetgraph, which
// encloses it, with the library's internals in view.
namespace hetgraph {
using namespace detail;

Executable::Impl(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {
  report_.nodes = plan_->nodes.size();
  report_.planned_bytes = plan_->arena_bytes;
  report_.live_bytes = plan_->live_bytes;
  report_.naive_bytes = plan_->naive_bytes;
  report_.buffers = plan_->buffers;
  report_.in_place = plan_->in_place;
  written_since_.assign(plan_->nodes.size(), 0);
  // Index inputs read straight from a feed (through views) are checked before each run.
  const Plan& p = *plan_;
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    if (!n.has_work()) continue;
    for (const IndexUse& u : index_uses(p, n)) {
      const std::uint32_t idx = n.inputs[u.input];
      // Through views, and through transfers to another device (heterogeneous plans): the
      // user's node reading fed indices is checked on the host, and named, as on one device.
      std::uint32_t base = idx;
      while ((p.nodes[base].storage == Storage::View || p.nodes[base].op == OpKind::Transfer) &&
             !p.nodes[base].inputs.empty())
        base = p.nodes[base].inputs[0];
      if (p.nodes[base].storage != Storage::Input) continue;
      fed_checks_.push_back({i, idx, base, u.bound, u.wraps});
    }
  }
}

void Executable::shutdown() {
  // The compiled graph is going. Another thread inside a call on it (destroying a graph
  // another thread runs is a misuse): its call ends before the memory goes, and calls it
  // starts meanwhile are refused (Use). A call of this thread (a nested one) cannot end.
  closing_.store(true);
  if (user_.load() != std::this_thread::get_id()) {
    while (calls_.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (!inflight_) return;
  holds_ = 1;  // the run's claim: finish_inflight releases it
  finish_inflight();
}

Executable::~Impl() {
  if (inflight_) {  // a platform that did not shut down: the run cannot be finished any more
    inflight_->done = true;
    inflight_->exe = nullptr;
    inflight_->error =
        std::make_exception_ptr(PlatformError("the compiled graph was destroyed during its run"));
  }
  if (runner_.joinable()) {
    {
      std::lock_guard lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    runner_.join();
  }
}

// ---- the claim -----------------------------------------------------------------------------

void Executable::claim(std::string_view what) {
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id expected{};
  if (!user_.compare_exchange_strong(expected, me, std::memory_order_acq_rel) && expected != me) {
    throw UsageError(std::string(what) +
                     ": this compiled graph is in use by another thread (a run in flight or "
                     "another call); calls from several threads must not overlap (compile one "
                     "graph per thread)");
  }
  ++holds_;
}

void Executable::unclaim() {
  if (--holds_ == 0) user_.store(std::thread::id{}, std::memory_order_release);
}

Executable::Use::Use(Executable& e, std::string_view what) : e_(e) {
  // Counted before closing_ is read (both sequentially consistent): shutdown() either sees
  // this call and waits for it, or this call sees shutdown() and is refused.
  e_.calls_.fetch_add(1);
  if (e_.closing_.load()) {
    e_.calls_.fetch_sub(1);
    throw UsageError(std::string(what) +
                     ": this compiled graph is being destroyed (by another thread); calls from "
                     "several threads must not overlap its destruction");
  }
  try {
    e_.claim(what);
  } catch (...) {
    e_.calls_.fetch_sub(1);
    throw;
  }
}
Executable::Use::~Use() {
  e_.unclaim();
  e_.calls_.fetch_sub(1);  // the last touch: shutdown() may free the executable after it
}

// ---- runs ----------------------------------------------------------------------------------

void Executable::begin_run() {
  finish_inflight();  // this thread's previous async run, if any: its error stays with it
}

void Executable::record_outcome(std::exception_ptr e) {
  last_failed_ = e != nullptr;
  if (e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      last_error_ = x.what();
    } catch (...) {
      last_error_ = "unknown error";
    }
  } else {
    ran_ = true;
  }
}

void Executable::run(std::span<const FeedItem> feeds) {
  Use use(*this, "run");
  begin_run();
  feed(feeds);  // a bad feed changes nothing
  ++generation_;
  try {
    execute_traced();
  } catch (...) {
    record_outcome(std::current_exception());
    throw;
  }
  record_outcome(nullptr);
  latest_.reset();  // a synchronous run is the latest now: nothing for wait() to report
}

std::shared_ptr<RunState> Executable::run_async(std::span<const FeedItem> feeds) {
  Use use(*this, "run_async");
  begin_run();
  feed(feeds);  // a bad feed changes nothing
  ++generation_;
  ++runs_;
  launch_async();
  auto s = std::make_shared<RunState>();
  s->exe = this;
  inflight_ = s;
  latest_ = s;
  claim("run_async");  // held by the run until it is finished
  return s;
}

void Executable::finish_inflight() {
  if (!inflight_) return;
  const std::shared_ptr<RunState> s = std::move(inflight_);
  // The run's trace and profile events are collected here, after it finished, for every
  // platform's asynchronous path (a failed run's events too, for traces).
  std::exception_ptr e = finish_async();
  if (collecting()) collect_events(runs_, e == nullptr);
  record_outcome(e);
  s->error = e;
  s->done = true;
  s->exe = nullptr;
  unclaim();
}

void Executable::wait() {
  Use use(*this, "wait");
  finish_inflight();
  if (!latest_) return;
  const std::exception_ptr e = std::exchange(latest_, nullptr)->error;
  if (e) std::rethrow_exception(e);
}

bool Executable::poll(RunState& s) {
  if (s.done) return true;
  Use use(*this, "RunHandle::done");
  if (inflight_.get() != &s) return s.done;
  if (!async_finished()) return false;
  finish_inflight();  // finished: the outcome is recorded, the claim released
  return true;
}

void Executable::wait(RunState& s) {
  if (!s.done) {
    Use use(*this, "RunHandle::wait");
    finish_inflight();
  }
  if (latest_.get() == &s) latest_.reset();  // reported here: not again by wait()
  if (s.error) std::rethrow_exception(s.error);
}

void Executable::launch_async() {
  std::unique_lock lk(mu_);
  if (!runner_.joinable()) {
    runner_ = std::thread([this] {
      std::unique_lock l(mu_);
      for (;;) {
        cv_.wait(l, [this] { return job_ || quit_; });
        if (quit_) return;
        job_ = false;
        l.unlock();
        std::exception_ptr err;
        try {
          execute();  // wait() collects the trace
        } catch (...) {
          err = std::current_exception();
        }
        l.lock();
        error_ = err;
        done_ = true;
        cv_.notify_all();
      }
    });
  }
  done_ = false;
  error_ = nullptr;
  job_ = true;
  cv_.notify_all();
}

std::exception_ptr Executable::finish_async() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [this] { return done_; });
  return std::exchange(error_, nullptr);
}

bool Executable::async_finished() {
  std::lock_guard lk(mu_);
  return done_;
}

void Executable::settle_for_access(std::uint32_t) {
  finish_inflight();
}

void Executable::execute_traced() {
  ++runs_;
  if (!collecting()) {
    execute();
    return;
  }
  try {
    execute();
  } catch (...) {
    collect_events(runs_, false);
    throw;
  }
  collect_events(runs_, true);
}

namespace {
// A trace's view of node events: named nodes, op kinds, bytes read and written.
class TraceSink final : public NodeSink {
 public:
  explicit TraceSink(TraceWriter& w) : w_(w) {}
  void set_lanes(const std::vector<std::string>& names) override { w_.set_lanes(names); }
  void add(const Executable& exe, std::uint32_t node, int lane, std::int64_t start_ns,
           std::int64_t end_ns, std::int64_t run) override {
    const Plan& p = exe.plan();
    const PlanNode& n = p.nodes[node];
    std::size_t in_bytes = 0;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.reads_input(k)) in_bytes += p.nodes[n.inputs[k]].type.bytes();
    }
    w_.add(event_name(n), std::string(op_name(n.op)), lane, start_ns, end_ns, n.label, run,
           in_bytes, n.type.bytes());
  }

 private:
  TraceWriter& w_;
};
}  // namespace

void Executable::collect_events(std::int64_t run, bool succeeded) {
  if (trace_) {
    TraceSink sink(*trace_);
    add_trace_events(sink, run);
  }
  // A failed run stopped part way: its times would skew the profile's means.
  if (profile_ && succeeded) {
    add_trace_events(*profile_, run);
    profile_->end_run();
  }
}

EngineReport Executable::report_engine() {
  Use use(*this, "engine_report");
  return engine_report();
}

EngineReport Executable::engine_report() const {
  EngineReport r;
  r.engine = "platform";
  r.runs = static_cast<int>(runs_);
  const GraphStats st = graph_stats(plan());
  r.nodes = st.nodes;
  r.heavy_nodes = st.heavy;
  r.heavy_levels = st.heavy_levels;
  r.max_width = st.max_width;
  r.avg_width = st.avg_width;
  r.work_width = st.work_width;
  return r;
}

void Executable::start_trace(const std::string& path) {
  Use use(*this, "start_trace");
  finish_inflight();
  trace_ = std::make_unique<TraceWriter>(path);
  set_recording(true);
}

void Executable::stop_trace() {
  Use use(*this, "stop_trace");
  finish_inflight();
  if (!trace_) return;
  auto t = std::move(trace_);
  set_recording(collecting());  // a profile still wants the events
  t->flush();
}

void Executable::start_profile() {
  Use use(*this, "start_profile");
  finish_inflight();  // a run started before belongs to no profile
  profile_ = std::make_unique<ProfileCollector>();
  set_recording(true);
}

Profile Executable::profile() {
  Use use(*this, "profile");
  if (!profile_)
    throw UsageError("profile: no profile is being recorded (call start_profile() first)");
  finish_inflight();  // the run in flight counts
  return profile_->result();
}

Profile Executable::stop_profile() {
  Use use(*this, "stop_profile");
  if (!profile_)
    throw UsageError("stop_profile: no profile is being recorded (call start_profile() first)");
  finish_inflight();
  const std::unique_ptr<ProfileCollector> c = std::move(profile_);
  set_recording(collecting());  // a trace still wants the events
  return c->result();
}

void Executable::trace_event(const std::string& lane, const std::string& name,
                             std::int64_t start_ns, std::int64_t end_ns) {
  Use use(*this, "trace_event");
  if (trace_) trace_->add_external(lane, name, start_ns, end_ns);
}

// ---- feeds ---------------------------------------------------------------------------------

namespace {
std::string input_list(const Plan& p) {
  std::string s;
  for (std::uint32_t i : p.inputs) s += (s.empty() ? "" : ", ") + ("'" + p.nodes[i].name + "'");
  return s.empty() ? "none" : s;
}
}  // namespace

void Executable::feed(std::span<const FeedItem> feeds) {
  const Plan& p = *plan_;
  // Check everything first: a bad feed must leave every input as it was.
  std::vector<const FeedItem*> by_input(p.inputs.size(), nullptr);
  for (const FeedItem& f : feeds) {
    std::size_t k = 0;
    while (k < p.inputs.size() && p.nodes[p.inputs[k]].name != f.name) ++k;
    if (k == p.inputs.size()) {
      // An input of the graph that no fetch needs was pruned: its data is not wanted.
      if (p.graph_inputs.count(std::string(f.name))) continue;
      throw FeedError("unknown feed '" + std::string(f.name) +
                      "': not an input of the compiled graph (its inputs: " + input_list(p) + ")");
    }
    const PlanNode& in = p.nodes[p.inputs[k]];
    if (by_input[k]) throw FeedError("input '" + in.name + "' is fed twice");
    by_input[k] = &f;
    if (f.value.dtype() != in.type.dtype) {
      throw FeedError("feed '" + in.name + "' holds " + std::string(dtype_name(f.value.dtype())) +
                      " values, the input expects " + std::string(dtype_name(in.type.dtype)));
    }
    const auto need = static_cast<std::size_t>(in.type.shape.numel());
    if (f.value.count() != need) {
      throw FeedError("feed '" + in.name + "' has " + std::to_string(f.value.count()) +
                      " elements; input '" + in.name + "' of shape " + in.type.shape.str() +
                      " needs " + std::to_string(need));
    }
  }
  for (std::size_t k = 0; k < by_input.size(); ++k) {
    if (!by_input[k]) {
      const PlanNode& in = p.nodes[p.inputs[k]];
      throw FeedError("missing feed for input '" + in.name + "' of shape " + in.type.shape.str() +
                      " (every input must be fed at each run)");
    }
  }
  // Fed indices against their bounds (before any kernel could read out of range).
  for (const IndexCheck& c : fed_checks_) {
    const auto k = static_cast<std::size_t>(std::find(p.inputs.begin(), p.inputs.end(), c.fed) -
                                            p.inputs.begin());
    check_indices(c, static_cast<const std::int32_t*>(by_input[k]->value.data()));
  }
  for (std::size_t k = 0; k < by_input.size(); ++k) {
    const FeedItem& f = *by_input[k];
    const std::size_t bytes = f.value.count() * 4;
    // The caller wrote straight into the mapped buffer: nothing to copy.
    if (bytes != 0 && f.value.data() != host_pointer(p.inputs[k])) {  // empty: nothing
      copy_in(p.inputs[k], f.value.data(), bytes);
      feed_bytes_copied_ += bytes;
    }
  }
}

std::string detail::index_error(const Plan& p, std::uint32_t node, std::uint32_t indices,
                        const std::string& value, std::int64_t position, std::int64_t bound,
                        bool wraps) {
  const PlanNode& n = p.nodes[node];
  const std::string range =
      "[" + std::to_string(wraps ? -bound : 0) + ", " + std::to_string(bound) + ")";
  const std::string_view what = op_def(n.op).index.what;
  if (what == "class id") {
    return "node " + n.index_label() + ": " + (value.empty() ? "a class id" : "class id " + value) +
           " at row " + std::to_string(position) + " is outside " + range;
  }
  return "node " + n.index_label() + ": " + (value.empty() ? "an index" : "index " + value) +
         " at position " + std::to_string(position) + " of the indices " +
         p.nodes[indices].type.shape.str() + " is outside " + range;
}

void Executable::check_indices(const IndexCheck& c, const std::int32_t* ids) const {
  const std::int64_t n = plan_->nodes[c.fed].type.shape.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    if (ids[i] < (c.wraps ? -c.bound : 0) || ids[i] >= c.bound) {
      throw FeedError(
          index_error(*plan_, c.node, c.indices, std::to_string(ids[i]), i, c.bound, c.wraps));
    }
  }
}

// ---- node access ---------------------------------------------------------------------------

void Executable::access_check(std::uint32_t node, DType dtype, std::size_t count,
                              std::string_view what, bool writing) const {
  const PlanNode& n = plan_->nodes[node];
  if (n.fused_into >= 0) {
    // A fused node may itself have been fused further: name where the value ended up.
    std::size_t into = static_cast<std::size_t>(n.fused_into);
    while (plan_->nodes[into].fused_into >= 0)
      into = static_cast<std::size_t>(plan_->nodes[into].fused_into);
    throw GraphError(std::string(what) + ": node " + n.label + " was fused into " +
                     plan_->nodes[into].label +
                     " and has no value of its own: fetch it at compile time to keep it");
  }
  if (n.storage == Storage::None) {
    throw GraphError(std::string(what) + ": node " + n.label + " has no data (it is an " +
                     std::string(op_name(n.op)) + ")");
  }
  if (n.clobbered) {
    throw GraphError(std::string(what) + ": node " + n.label +
                     " is not kept after a run: the memory planner reuses its buffer. Fetch it "
                     "at compile time, or compile with plan_memory = false");
  }
  if (writing && n.storage == Storage::Constant) {
    throw GraphError(std::string(what) + ": node " + n.label + " is a constant");
  }
  if (n.type.dtype != dtype) {
    throw GraphError(std::string(what) + ": node " + n.label + " holds " +
                     std::string(dtype_name(n.type.dtype)) + " values, not " +
                     std::string(dtype_name(dtype)));
  }
  if (count != static_cast<std::size_t>(n.type.shape.numel())) {
    throw FeedError(std::string(what) + ": node " + n.label + " of shape " + n.type.shape.str() +
                    " has " + std::to_string(n.type.shape.numel()) +
                    " elements, the buffer given has " + std::to_string(count));
  }
}

// Computed values (and views of them) are valid after a successful run, or once written.
void Executable::value_check(std::uint32_t node, std::string_view what) const {
  std::uint32_t base = node;
  while (plan_->nodes[base].storage == Storage::View) base = plan_->nodes[base].inputs[0];
  if (plan_->nodes[base].storage != Storage::Computed) return;  // inputs, variables, constants
  if (written_since_[node] == generation_ || written_since_[base] == generation_) return;
  if (last_failed_) {
    throw UsageError(std::string(what) + ": node " + plan_->nodes[node].label +
                     " has no valid value: the last run failed (" + last_error_ +
                     "); variables and inputs kept their values");
  }
  if (!ran_) {
    throw UsageError(std::string(what) + ": node " + plan_->nodes[node].label +
                     " has no value yet: run the graph first");
  }
}

void Executable::read(std::uint32_t node, void* dst, std::size_t count, DType dtype,
                      std::string_view what) {
  Use use(*this, what);
  access_check(node, dtype, count, what, false);
  settle_for_access(node);
  value_check(node, what);
  if (count != 0) copy_out(node, dst, count * 4);  // an empty value: nothing to copy
}

void Executable::write(std::uint32_t node, const void* src, std::size_t count, DType dtype,
                       std::string_view what) {
  Use use(*this, what);
  access_check(node, dtype, count, what, true);
  settle_for_access(node);
  if (count != 0) copy_in(node, src, count * 4);
  written_since_[node] = generation_;
}

void* Executable::mapped_input(std::string_view name, DType dtype, std::size_t& count) {
  Use use(*this, "mapped_input");
  const std::int64_t k = plan_->input_named(name);
  if (k < 0) {
    throw FeedError("mapped_input: '" + std::string(name) +
                    "' is not an input of the compiled graph (its inputs: " + input_list(*plan_) +
                    ")");
  }
  const PlanNode& n = plan_->nodes[static_cast<std::size_t>(k)];
  if (n.type.dtype != dtype) {
    throw FeedError("mapped_input: input '" + n.name + "' holds " +
                    std::string(dtype_name(n.type.dtype)) + " values");
  }
  count = static_cast<std::size_t>(n.type.shape.numel());
  return host_pointer(static_cast<std::uint32_t>(k));
}

// ---- state ---------------------------------------------------------------------------------

namespace {
std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double unit(std::uint64_t& s) {  // in (0, 1)
  return (static_cast<double>(splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
}  // namespace

void detail::InitialValues::check(const Initializer& init, const std::string& label) {
  if (init.kind == Initializer::Kind::values && !init.data) {
    throw GraphError("variable " + label +
                     " has no values: they moved into the graph compiled from it with "
                     "compile(std::move(graph), ...)");
  }
}

void detail::InitialValues::next(std::span<float> out) {
  const Initializer& in = init_;
  switch (in.kind) {
    case Initializer::Kind::zeros:
      std::fill(out.begin(), out.end(), 0.0f);
      break;
    case Initializer::Kind::fill:
      std::fill(out.begin(), out.end(), in.a);
      break;
    case Initializer::Kind::uniform:
      for (float& x : out) x = static_cast<float>(in.a + (in.b - in.a) * unit(state_));
      break;
    case Initializer::Kind::values:  // state_ (seed 0) counts the values given out
      std::copy_n(in.data->begin() + static_cast<std::ptrdiff_t>(state_), out.size(), out.begin());
      state_ += out.size();
      break;
    case Initializer::Kind::normal:
      // Box-Muller: each pair of uniforms gives two values (the second of a last odd one is
      // dropped).
      for (float& x : out) {
        if (has_pending_) {
          x = pending_;
          has_pending_ = false;
          continue;
        }
        const double r = std::sqrt(-2.0 * std::log(unit(state_)));
        const double t = 6.283185307179586 * unit(state_);
        x = static_cast<float>(in.a + in.b * r * std::cos(t));
        pending_ = static_cast<float>(in.a + in.b * r * std::sin(t));
        has_pending_ = true;
      }
      break;
  }
}

void Executable::initialize_state() {
  constexpr std::size_t kChunk = std::size_t{1} << 20;  // floats: 4 MiB at a time
  std::vector<float> chunk;
  constexpr std::size_t kTrimBytes = std::size_t{4} << 20;
  std::size_t freed = 0;
  for (std::uint32_t node = 0; node < plan_->nodes.size(); ++node) {
    const PlanNode& n = plan_->nodes[node];
    if (n.storage == Storage::Constant && n.type.bytes() != 0) {  // empty ones hold nothing
      const void* src = n.type.dtype == DType::f32 ? static_cast<const void*>(n.f32_values->data())
                                                   : static_cast<const void*>(n.i32_values->data());
      copy_in(node, src, n.type.bytes());
    } else if (n.storage == Storage::Variable) {
      if (!preset_.empty() && preset_[node]) continue;  // another graph's value, in the store
      if (n.init.kind == Initializer::Kind::zeros && memory_starts_zeroed()) continue;
      const auto count = static_cast<std::size_t>(n.type.shape.numel());
      chunk.resize(std::min(count, kChunk));
      {
        InitialValues gen(n.init);  // holds a reference to the values while it lives
        for (std::size_t at = 0; at < count; at += kChunk) {
          const std::size_t len = std::min(kChunk, count - at);
          gen.next(std::span<float>(chunk.data(), len));
          copy_in_at(node, at * sizeof(float), chunk.data(), len * sizeof(float));
        }
      }
      // The graph's memory holds the values now, and nothing reads them from the plan again.
      // Where the plan held them alone (compile(std::move(graph))), they are freed here.
      if (n.init.data && n.init.data.use_count() == 1) freed += n.init.data->size() * sizeof(float);
      n.init.data.reset();
#if defined(__GLIBC__)
      // glibc keeps freed heap pages resident: hand them back as we go, or the weights are
      // held twice at the end after all.
      if (freed >= kTrimBytes) {
        malloc_trim(0);
        freed = 0;
      }
#endif
    }
  }
#if defined(__GLIBC__)
  if (freed > 0) malloc_trim(0);
#endif
}

std::string detail::event_name(const PlanNode& n) {
  // Nodes passes made have no graph id: their label says what they are ("send ...").
  return !n.name.empty()   ? n.name
         : n.gid == kNoGid ? n.label
                           : std::string(op_name(n.op)) + " #" + std::to_string(n.gid);
}

void Executable::add_node_events(NodeSink& w, const std::vector<Event>& events,
                                 std::int64_t run) const {
  for (const Event& e : events) w.add(*this, e.node, e.lane, e.start_ns, e.end_ns, run);
}

}  // namespace hetgraph
