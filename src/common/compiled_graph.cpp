// SPDX-License-Identifier: Apache-2.0
// The public GraphCompiler / CompiledGraph / Platform over the internal Backend and Executable.
#include <algorithm>
#include <chrono>
#include <new>
#include <sstream>

#include "common/executable.hpp"
#include "compiler/graph_impl.hpp"
#include "hetgraph/compiler.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

using detail::Executable;

detail::Backend& detail::Backend::of(const Platform& p) {
  if (!p.backend_) throw UsageError("this Platform was moved from; use the one it was moved to");
  return *p.backend_;
}

std::string Platform::name() const {
  return detail::backend_of(*this).name();
}

std::string Platform::description() const {
  return detail::backend_of(*this).description();
}

std::vector<Device> Platform::devices() const {
  return detail::backend_of(*this).devices();
}

GraphCompiler::GraphCompiler(Platform platform, CompileOptions options)
    : platform_(std::move(platform)), options_(options) {}

CompiledGraph GraphCompiler::compile(const Graph& graph, const InputShapes& input_shapes,
                                     std::initializer_list<Node> fetches) const {
  return compile(graph, input_shapes, std::span<const Node>(fetches.begin(), fetches.size()),
                 false);
}

CompiledGraph GraphCompiler::compile(const Graph& graph, const InputShapes& input_shapes,
                                     std::span<const Node> fetches) const {
  return compile(graph, input_shapes, fetches, false);
}

CompiledGraph GraphCompiler::compile(Graph&& graph, const InputShapes& input_shapes,
                                     std::initializer_list<Node> fetches) const {
  return compile(graph, input_shapes, std::span<const Node>(fetches.begin(), fetches.size()), true);
}

CompiledGraph GraphCompiler::compile(Graph&& graph, const InputShapes& input_shapes,
                                     std::span<const Node> fetches) const {
  return compile(graph, input_shapes, fetches, true);
}

namespace {

// What compile() asks of the passes: the options' switches and what the platform says.
detail::PlanOptions plan_options(const CompileOptions& o, detail::Backend& backend) {
  detail::PlanOptions po;
  po.reuse = o.plan_memory ? backend.reuse_mode() : detail::ReuseMode::none;
  po.arena = backend.packs_arena();
  po.fuse = o.fuse;
  po.conv_post_ops = o.experimental.conv_post_ops;
  po.silu = o.experimental.silu_nodes;
  po.layer_norm = o.experimental.layer_norm_nodes;
  po.gelu = o.experimental.gelu_nodes;
  po.attention = o.experimental.attention_nodes;
  po.attention_transposes = o.experimental.attention_transposes;
  po.channel_affine = o.experimental.channel_affine;
  po.lstm_cells = o.experimental.lstm_cells;
  po.recurrent_sequences = o.experimental.recurrent_sequences;
  po.gru_cells = o.experimental.gru_cells;
  po.matmul_bias = o.experimental.matmul_bias;
  if (o.experimental.blocked_layouts) po.conv_layout = backend.conv_layout();
  po.layouts_through_pool_concat = o.experimental.layouts_through_pool_concat;
  po.grouped_conv_layouts = o.experimental.grouped_conv_layouts;
  if (o.winograd_convs) po.winograd_layout = backend.winograd_layout();
  po.own_winograd = o.experimental.own_winograd;
  po.parallel_ops = o.experimental.parallel_ops;
  po.grouped_embeddings = o.experimental.grouped_embeddings;
  po.stacked_products = o.experimental.stacked_products;
  po.concat_in_place = o.experimental.concat_in_place;
  po.slice_views = o.experimental.slice_views;
  po.packed_weights = o.experimental.packed_weights;
  po.kernel_threads = backend.kernel_threads();
  po.capabilities = &backend;
  po.placer = backend.placer();
  return po;
}

// Convolution work below which the layout search does not pay for its trial runs (a test's
// small network; mobilenet_v3_small at batch 1 has 6e7).
constexpr double kLayoutSearchMacs = 5e7;

// The layout convolutions pass values in: the first blocked value's, else plain.
std::string conv_layout_of(const detail::Plan& p) {
  for (const detail::PlanNode& n : p.nodes) {
    if (n.layout != detail::ActivationLayout::nchw) return detail::layout_name(n.layout);
  }
  return "nchw";
}

// The layout search (CompileOptions::experimental.layout_search): the graph planned once per
// layout the platform offers besides its own, where that changes the plan, and the platform's
// pick among them. Plans that write variables are not searched: the platform times them by
// running them.
std::shared_ptr<const detail::Plan> search_layouts(const detail::GraphImpl& g,
                                                   const InputShapes& shapes,
                                                   const std::vector<std::uint32_t>& ids,
                                                   detail::PlanOptions po, detail::Backend& backend,
                                                   std::shared_ptr<const detail::Plan> plan,
                                                   CompileReport& r) {
  using detail::PlanNode;
  const std::vector<detail::ActivationLayout> alternatives = backend.layout_alternatives();
  if (alternatives.empty() || po.conv_layout == detail::ActivationLayout::nchw || plan->winograd ||
      detail::convolution_macs(*plan) < kLayoutSearchMacs ||
      std::any_of(plan->nodes.begin(), plan->nodes.end(),
                  [](const PlanNode& n) { return n.writes_variable(); }))
    return plan;
  auto layouts = [](const detail::Plan& p) {
    std::vector<detail::ActivationLayout> l;
    for (const PlanNode& n : p.nodes) l.push_back(n.layout);
    return l;
  };
  std::vector<std::shared_ptr<const detail::Plan>> plans{plan};
  std::vector<std::vector<detail::ActivationLayout>> seen{layouts(*plan)};
  for (const detail::ActivationLayout l : alternatives) {
    po.conv_layout = l;
    auto q = detail::compile_plan(g, shapes, ids, po);
    auto ql = layouts(*q);
    if (q->winograd || std::find(seen.begin(), seen.end(), ql) != seen.end()) continue;
    plans.push_back(std::move(q));
    seen.push_back(std::move(ql));
  }
  if (plans.size() == 1) return plan;
  std::vector<double> seconds;
  const std::size_t k = std::min(backend.pick_plan(plans, seconds), plans.size() - 1);
  for (std::size_t i = 0; i < seconds.size() && i < plans.size(); ++i)
    r.layout_seconds.emplace_back(conv_layout_of(*plans[i]), seconds[i]);
  return plans[k];
}

}  // namespace

CompiledGraph GraphCompiler::compile(const Graph& graph, const InputShapes& input_shapes,
                                     std::span<const Node> fetches, bool take_values) const {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::uint32_t> ids;
  ids.reserve(fetches.size());
  for (const Node& f : fetches) {
    detail::check_same_graph(&detail::impl_of(graph), f, "compile");
    ids.push_back(f.id());
  }
  detail::Backend& backend = detail::backend_of(platform_);
  const detail::PlanOptions po = plan_options(options_, backend);
  CompileReport searched;
  std::shared_ptr<const detail::Plan> plan =
      detail::compile_plan(detail::impl_of(graph), input_shapes, ids, po);
  const auto t_search = std::chrono::steady_clock::now();
  if (options_.experimental.layout_search)
    plan = search_layouts(detail::impl_of(graph), input_shapes, ids, po, backend, plan, searched);
  for (std::uint32_t v : plan->variables) {
    detail::InitialValues::check(plan->nodes[v].init, plan->nodes[v].label);
  }
  const auto t_plan = std::chrono::steady_clock::now();
  // Every kernel the plan needs exists on this platform: checked before anything is allocated.
  for (const detail::PlanNode& n : plan->nodes) {
    if (!n.has_work()) continue;
    if (const std::string why = backend.unsupported(*plan, n); !why.empty()) {
      throw PlatformError("node " + n.label + " cannot run on the " + backend.name() +
                          " platform: " + why);
    }
  }
  // Allocation sites name what they allocate (the CPU arena, OpenCL buffers); any other
  // allocation failing while the platform builds the graph is still a PlatformError.
  // take_values: the plan holds the only reference to the values while the platform builds the
  // graph, and Executable::initialize_state frees each once it is in the graph's memory. If the
  // build fails first, the graph gets back what the plan still holds.
  auto move_values = [&](bool to_plan) {
    if (!take_values) return;
    for (std::uint32_t v : plan->variables) {
      const std::uint32_t gid = plan->nodes[v].gid;
      if (gid == detail::kNoGid) continue;
      auto& data = detail::impl_of(graph).nodes[gid].init.data;
      if (to_plan)
        data.reset();
      else if (plan->nodes[v].init.data)
        data = plan->nodes[v].init.data;
    }
  };
  move_values(true);
  std::unique_ptr<detail::Executable> exe;
  try {
    exe = backend.instantiate(plan, options_.variables.impl());
  } catch (const std::bad_alloc&) {
    move_values(false);
    throw PlatformError("out of host memory instantiating the graph on " + platform_.name() + " (" +
                        std::to_string(plan->nodes.size()) + " nodes, " +
                        std::to_string(plan->arena_bytes) + " planned bytes)");
  } catch (...) {
    move_values(false);
    throw;
  }
  CompiledGraph cg(std::move(exe));
  const auto t1 = std::chrono::steady_clock::now();
  CompileReport& r = cg.exe_->report();
  r.setup_s = std::chrono::duration<double>(t1 - t0).count();
  r.pass_seconds = cg.exe_->plan().pass_seconds;
  if (!searched.layout_seconds.empty())
    r.pass_seconds.emplace_back("layout_search",
                                std::chrono::duration<double>(t_plan - t_search).count());
  r.pass_seconds.emplace_back("instantiate", std::chrono::duration<double>(t1 - t_plan).count());
  r.conv_layout = conv_layout_of(*plan);
  r.layout_seconds = std::move(searched.layout_seconds);
  return cg;
}

CompiledGraph::CompiledGraph(std::unique_ptr<Executable> exe) : exe_(std::move(exe)) {}
CompiledGraph::CompiledGraph(CompiledGraph&&) noexcept = default;
CompiledGraph& CompiledGraph::operator=(CompiledGraph&& other) noexcept {
  if (this != &other) {
    if (exe_) exe_->shutdown();
    exe_ = std::move(other.exe_);
  }
  return *this;
}
CompiledGraph::~CompiledGraph() {
  // A run still in flight must finish before its memory goes; its error stays with its handle.
  if (exe_) exe_->shutdown();
}

Executable& CompiledGraph::live(std::string_view what) const {
  if (!exe_) {
    throw UsageError(std::string(what) +
                     ": this CompiledGraph was moved from; use the one it was moved to");
  }
  return *exe_;
}

Executable& Executable::of(const CompiledGraph& cg) {
  if (!cg.exe_) throw UsageError("this CompiledGraph was moved from; use the one it was moved to");
  return *cg.exe_;
}

// ---- runs ----------------------------------------------------------------------------------

RunHandle::RunHandle(std::shared_ptr<detail::RunState> s) : state_(std::move(s)) {}
RunHandle::RunHandle(RunHandle&&) noexcept = default;
RunHandle& RunHandle::operator=(RunHandle&&) noexcept = default;
RunHandle::~RunHandle() = default;

void RunHandle::wait() {
  if (!state_)
    throw UsageError("RunHandle::wait: this handle has no run (default-constructed or moved from)");
  if (!state_->done && state_->exe != nullptr) {
    state_->exe->wait(*state_);
    return;
  }
  if (state_->error) std::rethrow_exception(state_->error);
}
bool RunHandle::done() const {
  if (!state_ || state_->done) return true;
  // Asked of the platform: nothing else marks a run finished until someone waits for it.
  return state_->exe == nullptr || state_->exe->poll(*state_);
}

void CompiledGraph::run(std::initializer_list<FeedItem> feeds) {
  live("run").run(std::span<const FeedItem>(feeds.begin(), feeds.size()));
}
void CompiledGraph::run(std::span<const FeedItem> feeds) {
  live("run").run(feeds);
}
RunHandle CompiledGraph::run_async(std::initializer_list<FeedItem> feeds) {
  return RunHandle(
      live("run_async").run_async(std::span<const FeedItem>(feeds.begin(), feeds.size())));
}
RunHandle CompiledGraph::run_async(std::span<const FeedItem> feeds) {
  return RunHandle(live("run_async").run_async(feeds));
}
void CompiledGraph::wait() {
  live("wait").wait();
}

namespace {
// A host vector for node i's values; running out of memory is a PlatformError naming it.
template <class T>
std::vector<T> host_vector(const detail::Plan& p, std::uint32_t i, std::string_view what) {
  const auto n = static_cast<std::size_t>(p.nodes[i].type.shape.numel());
  try {
    return std::vector<T>(n);
  } catch (const std::bad_alloc&) {
    throw PlatformError(std::string(what) + ": cannot allocate " + std::to_string(n * sizeof(T)) +
                        " bytes of host memory for node " + p.nodes[i].label + " " +
                        p.nodes[i].type.shape.str());
  }
}
}  // namespace

std::vector<float> CompiledGraph::read(Node n) const {
  Executable& e = live("read");
  const auto i = e.plan().index(n, "read");
  std::vector<float> out = host_vector<float>(e.plan(), i, "read");
  e.read(i, out.data(), out.size(), DType::f32, "read");
  return out;
}
std::vector<float> CompiledGraph::read(std::string_view name) const {
  Executable& e = live("read");
  const auto i = e.plan().named(name, "read");
  std::vector<float> out = host_vector<float>(e.plan(), i, "read");
  e.read(i, out.data(), out.size(), DType::f32, "read");
  return out;
}
void CompiledGraph::read(Node n, std::span<float> out) const {
  Executable& e = live("read");
  e.read(e.plan().index(n, "read"), out.data(), out.size(), DType::f32, "read");
}
std::vector<std::int32_t> CompiledGraph::read_i32(Node n) const {
  Executable& e = live("read_i32");
  const auto i = e.plan().index(n, "read_i32");
  std::vector<std::int32_t> out = host_vector<std::int32_t>(e.plan(), i, "read_i32");
  e.read(i, out.data(), out.size(), DType::i32, "read_i32");
  return out;
}
std::vector<std::int32_t> CompiledGraph::read_i32(std::string_view name) const {
  Executable& e = live("read_i32");
  const auto i = e.plan().named(name, "read_i32");
  std::vector<std::int32_t> out = host_vector<std::int32_t>(e.plan(), i, "read_i32");
  e.read(i, out.data(), out.size(), DType::i32, "read_i32");
  return out;
}
void CompiledGraph::write(Node n, std::span<const float> data) {
  Executable& e = live("write");
  e.write(e.plan().index(n, "write"), data.data(), data.size(), DType::f32, "write");
}
void CompiledGraph::write(std::string_view name, std::span<const float> data) {
  Executable& e = live("write");
  e.write(e.plan().named(name, "write"), data.data(), data.size(), DType::f32, "write");
}
void CompiledGraph::write_i32(Node n, std::span<const std::int32_t> data) {
  Executable& e = live("write_i32");
  e.write(e.plan().index(n, "write_i32"), data.data(), data.size(), DType::i32, "write_i32");
}

std::span<float> CompiledGraph::mapped_input(std::string_view name) {
  std::size_t count = 0;
  auto* p = static_cast<float*>(live("mapped_input").mapped_input(name, DType::f32, count));
  return {p, count};
}
std::span<std::int32_t> CompiledGraph::mapped_input_i32(std::string_view name) {
  std::size_t count = 0;
  auto* p =
      static_cast<std::int32_t*>(live("mapped_input_i32").mapped_input(name, DType::i32, count));
  return {p, count};
}

Shape CompiledGraph::shape(Node n) const {
  const Executable& e = live("shape");
  return e.plan().nodes[e.plan().index(n, "shape")].type.shape;
}
Shape CompiledGraph::shape(std::string_view name) const {
  const Executable& e = live("shape");
  return e.plan().nodes[e.plan().named(name, "shape")].type.shape;
}
std::string CompiledGraph::kernel_name(Node n) const {
  const Executable& e = live("kernel_name");
  return e.kernel_name(e.plan().index(n, "kernel_name"));
}
std::string CompiledGraph::to_dot() const {
  const Executable& e = live("to_dot");
  const detail::Plan& p = e.plan();
  auto escaped = [](const std::string& t) {
    std::string out;
    for (const char c : t) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  };
  std::ostringstream os;
  os << "digraph plan {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const detail::PlanNode& n = p.nodes[i];
    if (n.storage == detail::Storage::None) continue;  // fused into another node
    const std::string name = n.name.empty() ? "#" + std::to_string(i) : n.name;
    os << "  n" << i << " [label=\"" << escaped(name) << "\\n"
       << detail::op_name(n.op) << " " << n.type.shape.str();
    if (n.storage == detail::Storage::Computed) os << "\\n" << escaped(e.kernel_name(i));
    os << "\"];\n";
  }
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].storage == detail::Storage::None) continue;
    for (const std::uint32_t in : p.nodes[i].inputs) os << "  n" << in << " -> n" << i << ";\n";
  }
  os << "}\n";
  return os.str();
}
const CompileReport& CompiledGraph::report() const {
  return live("report").report();
}
EngineReport CompiledGraph::engine_report() const {
  return live("engine_report").report_engine();
}
std::vector<EngineReport::Hetero::Placed> CompiledGraph::placement() const {
  EngineReport r = live("placement").report_engine();
  if (!r.hetero) return {};
  return std::move(r.hetero->nodes);
}
void CompiledGraph::start_trace(const std::string& path) {
  live("start_trace").start_trace(path);
}
void CompiledGraph::stop_trace() {
  live("stop_trace").stop_trace();
}
void CompiledGraph::start_profile() {
  live("start_profile").start_profile();
}
Profile CompiledGraph::profile() const {
  return live("profile").profile();
}
Profile CompiledGraph::stop_profile() {
  return live("stop_profile").stop_profile();
}
void CompiledGraph::trace_event(const std::string& lane, const std::string& name,
                                std::int64_t start_ns, std::int64_t end_ns) {
  live("trace_event").trace_event(lane, name, start_ns, end_ns);
}

}  // namespace hetgraph
