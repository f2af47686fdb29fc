// SPDX-License-Identifier: Apache-2.0
// Graphs compiled once for input shapes with named dims, run with any size of them.
//
//   Graph g;
//   auto x = g.input("x"), ids = g.input("ids", DType::i32);
//   auto y = softmax(matmul(x, W) + b);
//   DynamicGraph dg(GraphCompiler(), g, {{"x", {"N", 784}}}, {y});
//   dg.run({{"x", batch17}});   // N = 17, from the feed's size: compiled for [17, 784]
//   dg.run({{"x", batch64}});   // N = 64: compiled once more, then cached
//   dg.run({{"x", batch17}});   // the [17, 784] plan again, no compile
//   dg.shape(y);                // [17, 10]
//   dg.read(y);
//
// How: a plan per distinct set of dim sizes, compiled on first sight and kept in a
// least-recently-used cache of DynamicOptions::max_plans plans. A run of a cached shape costs
// what a graph compiled for that shape costs. Variables are one state across plans: the plans
// are compiled with one VariableStore (compiler.hpp), so they hold one copy of the weights
// between them, and what a plan's run writes (training) the next plan reads, with nothing
// copied; memory is bounded by the weights once plus max_plans plans' activations. (Built by a
// user's Build function, or on a heterogeneous platform, which takes no store, each plan holds
// its own variables, and the next plan to run after a run that wrote them copies them first.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hetgraph/compiler.hpp"

namespace hetgraph {

/// One dim of a dynamic input shape: a fixed size, or a name whose size each run gives.
/// Inputs naming the same dim must agree on it.
class Dim {
 public:
  Dim(std::int64_t size) : size_(size) {}  // NOLINT(google-explicit-constructor): {"N", 3}
  Dim(int size) : size_(size) {}           // NOLINT(google-explicit-constructor)
  Dim(const char* name) : name_(name) {}   // NOLINT(google-explicit-constructor)
  Dim(std::string name) : name_(std::move(name)) {}  // NOLINT(google-explicit-constructor)

  bool named() const { return !name_.empty(); }
  const std::string& name() const { return name_; }
  std::int64_t size() const { return size_; }  // -1 where named

 private:
  std::int64_t size_ = -1;
  std::string name_;
};

/// Each input's shape with named dims: {{"x", {"N", 3, 224, 224}}, {"ids", {"B", "T"}}}.
using DynamicShapes = std::vector<std::pair<std::string, std::vector<Dim>>>;
/// Sizes of named dims: {{"B", 4}, {"T", 37}}.
using DimSizes = std::vector<std::pair<std::string, std::int64_t>>;

struct DynamicOptions {
  /// Compiled plans kept at once; the least recently run one goes first. At least 1.
  std::size_t max_plans = 16;
};

class DynamicGraph {
 public:
  /// Builds the compiled graph for concrete input shapes (an ONNX model is imported again per
  /// shape: onnx::dynamic). Every call must give a graph with the same variables.
  using Build = std::function<CompiledGraph(const InputShapes&)>;

  /// `fetches` as for GraphCompiler::compile. The graph is shared, not copied: compile() reads
  /// it whenever a new shape is first run (its variables' values at that time seed a plan only
  /// while no run has written variables).
  DynamicGraph(GraphCompiler compiler, Graph graph, DynamicShapes shapes, std::vector<Node> fetches,
               DynamicOptions options = {});
  DynamicGraph(Build build, DynamicShapes shapes, DynamicOptions options = {});
  /// `build` compiles with CompileOptions::variables = `variables`: the plans share their
  /// variables through it, and nothing is copied between them (onnx::dynamic builds so).
  DynamicGraph(Build build, DynamicShapes shapes, VariableStore variables,
               DynamicOptions options = {});
  DynamicGraph(DynamicGraph&&) noexcept;
  DynamicGraph& operator=(DynamicGraph&&) noexcept;
  ~DynamicGraph();

  /// Runs with these feeds. Named dims come from `dims`, else from the feeds' sizes (an input
  /// with one named dim not given otherwise); a dim no feed determines, sizes that do not
  /// divide, or two inputs that disagree on a dim are a FeedError naming the inputs and dims.
  void run(std::span<const FeedItem> feeds, const DimSizes& dims = {});
  void run(std::initializer_list<FeedItem> feeds, const DimSizes& dims = {});

  /// The last run's values and shapes.
  std::vector<float> read(Node n) const;
  std::vector<float> read(std::string_view name) const;
  std::vector<std::int32_t> read_i32(Node n) const;
  std::vector<std::int32_t> read_i32(std::string_view name) const;
  Shape shape(Node n) const;
  Shape shape(std::string_view name) const;
  /// The named dims' sizes in the last run, by name.
  const DimSizes& dims() const;
  /// The compiled graph the last run used (engine report, profiles, traces). UsageError before
  /// the first run.
  CompiledGraph& current();

  /// Variables, whichever plan holds their latest values (UsageError before the first run:
  /// no plan exists yet).
  void write(std::string_view name, std::span<const float> data);
  void save(const std::string& path);
  LoadReport load(const std::string& path, const LoadOptions& options = {});

  std::size_t plans() const;     // compiled plans held now
  std::size_t compiles() const;  // plans compiled so far (misses of the cache)
  /// Bytes the held plans planned (CompileReport::planned_bytes summed); where they share a
  /// VariableStore, its bytes once instead of each plan's room for the variables (planned in
  /// its arena, never touched).
  std::size_t planned_bytes() const;

  struct State;

 private:
  // The plan holding the newest variable state (UsageError naming `what` before a run), and
  // the mark that it was just written (every other plan copies from it before it next runs).
  CompiledGraph& state_plan(std::string_view what);
  const CompiledGraph& last_run() const;  // UsageError before the first run
  void state_written();

  std::unique_ptr<State> s_;
};

}  // namespace hetgraph
