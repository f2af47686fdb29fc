#include "common/executable.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiler/graph_stats.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail {

Executable::Executable(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {
  report_.nodes = plan_->nodes.size();
  report_.planned_bytes = plan_->arena_bytes;
  report_.naive_bytes = plan_->naive_bytes;
  report_.buffers = plan_->buffers;
  report_.in_place = plan_->in_place;
}

Executable::~Executable() {
  if (runner_.joinable()) {
    {
      std::lock_guard lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    runner_.join();
  }
}

// ---- runs ----------------------------------------------------------------------------------

void Executable::begin_run(const char* what) {
  if (async_pending_.load() && async_owner_.load() == std::this_thread::get_id()) wait();
  bool expected = false;
  if (!busy_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    throw Error(std::string(what) +
                ": this compiled graph is already running in another thread; runs of one "
                "compiled graph must not overlap (compile one per thread)");
  }
}

void Executable::run(std::span<const FeedItem> feeds) {
  begin_run("run");
  try {
    feed(feeds);
    execute_traced();
  } catch (...) {
    busy_.store(false, std::memory_order_release);
    throw;
  }
  busy_.store(false, std::memory_order_release);
}

void Executable::run_async(std::span<const FeedItem> feeds) {
  begin_run("run_async");
  try {
    feed(feeds);
    ++runs_;
    launch_async();
  } catch (...) {
    busy_.store(false, std::memory_order_release);
    throw;
  }
  async_owner_.store(std::this_thread::get_id());
  async_pending_.store(true);
}

void Executable::wait() {
  if (!async_pending_.exchange(false)) return;
  // The run's trace events are collected here, after it finished, for every platform's
  // asynchronous path (a failed run's events too).
  try {
    finish_async();
  } catch (...) {
    if (trace_) add_trace_events(*trace_, runs_);
    busy_.store(false, std::memory_order_release);
    throw;
  }
  if (trace_) add_trace_events(*trace_, runs_);
  busy_.store(false, std::memory_order_release);
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

void Executable::finish_async() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [this] { return done_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void Executable::settle_for_access(std::uint32_t) {
  wait();
}

void Executable::execute_traced() {
  ++runs_;
  if (!trace_) {
    execute();
    return;
  }
  try {
    execute();
  } catch (...) {
    add_trace_events(*trace_, runs_);
    throw;
  }
  add_trace_events(*trace_, runs_);
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
  return r;
}

void Executable::start_trace(const std::string& path) {
  wait();
  trace_ = std::make_unique<TraceWriter>(path);
  set_recording(true);
}

void Executable::stop_trace() {
  wait();
  if (!trace_) return;
  set_recording(false);
  auto t = std::move(trace_);
  t->flush();
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
  std::vector<char> fed(p.inputs.size(), 0);
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
    if (fed[k]) throw FeedError("input '" + in.name + "' is fed twice");
    fed[k] = 1;
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
    // The caller wrote straight into the mapped buffer: nothing to copy.
    if (f.value.data() != host_pointer(p.inputs[k])) {
      copy_in(p.inputs[k], f.value.data(), need * 4);
      feed_bytes_copied_ += need * 4;
    }
  }
  for (std::size_t k = 0; k < fed.size(); ++k) {
    if (!fed[k]) {
      const PlanNode& in = p.nodes[p.inputs[k]];
      throw FeedError("missing feed for input '" + in.name + "' of shape " + in.type.shape.str() +
                      " (every input must be fed at each run)");
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

void Executable::read(std::uint32_t node, void* dst, std::size_t count, DType dtype,
                      std::string_view what) {
  access_check(node, dtype, count, what, false);
  settle_for_access(node);
  copy_out(node, dst, count * 4);
}

void Executable::write(std::uint32_t node, const void* src, std::size_t count, DType dtype,
                       std::string_view what) {
  access_check(node, dtype, count, what, true);
  settle_for_access(node);
  copy_in(node, src, count * 4);
}

void* Executable::mapped_input(std::string_view name, DType dtype, std::size_t& count) {
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

void InitialValues::next(std::span<float> out) {
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
  for (std::uint32_t node = 0; node < plan_->nodes.size(); ++node) {
    const PlanNode& n = plan_->nodes[node];
    if (n.storage == Storage::Constant) {
      const void* src = n.type.dtype == DType::f32 ? static_cast<const void*>(n.f32_values->data())
                                                   : static_cast<const void*>(n.i32_values->data());
      copy_in(node, src, n.type.bytes());
    } else if (n.storage == Storage::Variable) {
      if (n.init.kind == Initializer::Kind::zeros && memory_starts_zeroed()) continue;
      const auto count = static_cast<std::size_t>(n.type.shape.numel());
      chunk.resize(std::min(count, kChunk));
      InitialValues gen(n.init);
      for (std::size_t at = 0; at < count; at += kChunk) {
        const std::size_t len = std::min(kChunk, count - at);
        gen.next(std::span<float>(chunk.data(), len));
        copy_in_at(node, at * sizeof(float), chunk.data(), len * sizeof(float));
      }
    }
  }
}

void Executable::add_node_events(TraceWriter& w, const std::vector<Event>& events,
                                 std::int64_t run) const {
  for (const Event& e : events) {
    const PlanNode& n = plan().nodes[e.node];
    const std::string name =
        n.name.empty() ? std::string(op_name(n.op)) + " #" + std::to_string(n.gid) : n.name;
    std::size_t in_bytes = 0;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.reads_input(k)) in_bytes += plan().nodes[n.inputs[k]].type.bytes();
    }
    w.add(name, std::string(op_name(n.op)), e.lane, e.start_ns, e.end_ns, n.label, run, in_bytes,
          n.type.bytes());
  }
}

}  // namespace hetgraph::detail
