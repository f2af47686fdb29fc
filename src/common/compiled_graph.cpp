// The public GraphCompiler / CompiledGraph / Platform over the internal Backend and Executable.
#include <chrono>
#include <new>

#include "common/executable.hpp"
#include "hetgraph/compiler.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

using detail::Executable;

namespace detail {
Executable& executable_of(const CompiledGraph& cg) {
  return *cg.exe_;
}
Backend& backend_of(const Platform& p) {
  return *p.backend_;
}
}  // namespace detail

std::string Platform::name() const {
  return backend_->name();
}

GraphCompiler::GraphCompiler(Platform platform, CompileOptions options)
    : platform_(std::move(platform)), options_(options) {}

CompiledGraph GraphCompiler::compile(const Graph& graph, const InputShapes& input_shapes,
                                     std::initializer_list<Node> fetches) const {
  return compile(graph, input_shapes, std::span<const Node>(fetches.begin(), fetches.size()));
}

CompiledGraph GraphCompiler::compile(const Graph& graph, const InputShapes& input_shapes,
                                     std::span<const Node> fetches) const {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::uint32_t> ids;
  ids.reserve(fetches.size());
  for (const Node& f : fetches) {
    detail::check_same_graph(&graph.impl(), f, "compile");
    ids.push_back(f.id());
  }
  detail::Backend& backend = detail::backend_of(platform_);
  detail::PlanOptions po;
  po.reuse = options_.plan_memory ? backend.reuse_mode() : detail::ReuseMode::none;
  po.fuse = options_.fuse;
  po.capabilities = &backend;
  auto plan = detail::compile_plan(graph.impl(), input_shapes, ids, po);
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
  std::unique_ptr<detail::Executable> exe;
  try {
    exe = backend.instantiate(plan);
  } catch (const std::bad_alloc&) {
    throw PlatformError("out of host memory instantiating the graph on " + platform_.name() + " (" +
                        std::to_string(plan->nodes.size()) + " nodes, " +
                        std::to_string(plan->arena_bytes) + " planned bytes)");
  }
  CompiledGraph cg(std::move(exe));
  cg.exe_->report().setup_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return cg;
}

CompiledGraph::CompiledGraph(std::unique_ptr<Executable> exe) : exe_(std::move(exe)) {}
CompiledGraph::CompiledGraph(CompiledGraph&&) noexcept = default;
CompiledGraph& CompiledGraph::operator=(CompiledGraph&&) noexcept = default;
CompiledGraph::~CompiledGraph() {
  // A run still in flight must finish before its memory goes; its error has no one to reach.
  if (exe_) {
    try {
      exe_->wait();
    } catch (...) {
    }
  }
}

void CompiledGraph::run(std::initializer_list<FeedItem> feeds) {
  exe_->run(std::span<const FeedItem>(feeds.begin(), feeds.size()));
}
void CompiledGraph::run(std::span<const FeedItem> feeds) {
  exe_->run(feeds);
}
void CompiledGraph::run_async(std::initializer_list<FeedItem> feeds) {
  exe_->run_async(std::span<const FeedItem>(feeds.begin(), feeds.size()));
}
void CompiledGraph::run_async(std::span<const FeedItem> feeds) {
  exe_->run_async(feeds);
}
void CompiledGraph::wait() {
  exe_->wait();
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
  const auto i = exe_->plan().index(n, "read");
  std::vector<float> out = host_vector<float>(exe_->plan(), i, "read");
  exe_->read(i, out.data(), out.size(), DType::f32, "read");
  return out;
}
std::vector<float> CompiledGraph::read(std::string_view name) const {
  const auto i = exe_->plan().named(name, "read");
  std::vector<float> out = host_vector<float>(exe_->plan(), i, "read");
  exe_->read(i, out.data(), out.size(), DType::f32, "read");
  return out;
}
void CompiledGraph::read(Node n, std::span<float> out) const {
  exe_->read(exe_->plan().index(n, "read"), out.data(), out.size(), DType::f32, "read");
}
std::vector<std::int32_t> CompiledGraph::read_i32(Node n) const {
  const auto i = exe_->plan().index(n, "read_i32");
  std::vector<std::int32_t> out = host_vector<std::int32_t>(exe_->plan(), i, "read_i32");
  exe_->read(i, out.data(), out.size(), DType::i32, "read_i32");
  return out;
}
void CompiledGraph::write(Node n, std::span<const float> data) {
  exe_->write(exe_->plan().index(n, "write"), data.data(), data.size(), DType::f32, "write");
}
void CompiledGraph::write(std::string_view name, std::span<const float> data) {
  exe_->write(exe_->plan().named(name, "write"), data.data(), data.size(), DType::f32, "write");
}
void CompiledGraph::write_i32(Node n, std::span<const std::int32_t> data) {
  exe_->write(exe_->plan().index(n, "write_i32"), data.data(), data.size(), DType::i32,
              "write_i32");
}

std::span<float> CompiledGraph::mapped_input(std::string_view name) {
  std::size_t count = 0;
  auto* p = static_cast<float*>(exe_->mapped_input(name, DType::f32, count));
  return {p, count};
}
std::span<std::int32_t> CompiledGraph::mapped_input_i32(std::string_view name) {
  std::size_t count = 0;
  auto* p = static_cast<std::int32_t*>(exe_->mapped_input(name, DType::i32, count));
  return {p, count};
}

Shape CompiledGraph::shape(Node n) const {
  return exe_->plan().nodes[exe_->plan().index(n, "shape")].type.shape;
}
std::string CompiledGraph::kernel_name(Node n) const {
  return exe_->kernel_name(exe_->plan().index(n, "kernel_name"));
}
const CompileReport& CompiledGraph::report() const {
  return exe_->report();
}

}  // namespace hetgraph

namespace hetgraph {
EngineReport CompiledGraph::engine_report() const {
  return exe_->engine_report();
}
void CompiledGraph::start_trace(const std::string& path) {
  exe_->start_trace(path);
}
void CompiledGraph::stop_trace() {
  exe_->stop_trace();
}
}  // namespace hetgraph
