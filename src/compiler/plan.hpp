// The compiler's IR and output: the pruned graph in topological order with shapes, execution
// dependencies and a memory plan. Platforms instantiate kernels from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "hetgraph/compiler.hpp"

namespace hetgraph::detail {

enum class Storage : std::uint8_t {
  None,      // assign, group: no data
  Input,     // fed each run; never reused
  Variable,  // persistent; written only by its assign
  Constant,  // written once at instantiation
  Computed,  // a planned buffer
  View,      // input 0's memory reinterpreted (reshape, identity sum_to)
};

struct PlanNode {
  std::uint32_t gid = 0;  // id in the user's graph
  OpKind op = OpKind::Input;
  Attrs attrs;
  std::string name;                   // user name, may be empty
  std::string label;                  // for messages and traces
  std::vector<std::uint32_t> inputs;  // plan indices, shape-only ones included
  std::vector<std::uint32_t> deps;    // execution predecessors: data inputs and ordering edges
  std::vector<std::uint32_t> succs;   // execution successors
  TensorType type;
  Storage storage = Storage::Computed;
  // memory plan
  std::int32_t buffer = -1;  // -1: no storage
  std::size_t offset = 0;    // byte offset into the arena
  bool fetched = false;
  bool in_place = false;   // writes over one of its inputs' buffer
  bool clobbered = false;  // a later node overwrites its buffer within a run
  bool elided = false;     // assign whose value is computed straight into the variable
  std::int64_t fused_into = -1;  // fused into that node by the fusion pass: no kernel, no data
  // state
  Initializer init;
  std::shared_ptr<const std::vector<float>> f32_values;
  std::shared_ptr<const std::vector<std::int32_t>> i32_values;

  bool reads_input(std::size_t i) const;  // false for shape-only inputs
};

/// What the planner may assume about execution order.
enum class ReuseMode : std::uint8_t {
  none,        // one buffer per node (planner off)
  sequential,  // nodes run one at a time in plan order
  dag,         // nodes run in any order the dependencies allow (parallel engines)
};

struct Plan {
  const GraphImpl* graph = nullptr;
  std::vector<PlanNode> nodes;                                // topological order
  std::unordered_map<std::uint32_t, std::uint32_t> index_of;  // gid -> plan index
  std::vector<std::uint32_t> inputs, variables, fetches;
  ReuseMode reuse = ReuseMode::sequential;
  std::size_t arena_bytes = 0;
  std::size_t naive_bytes = 0;
  std::size_t buffers = 0;
  /// Size and arena offset of each planned buffer (a node's `buffer` indexes these), for
  /// platforms that allocate one device buffer per planned buffer instead of an arena.
  std::vector<std::size_t> buffer_bytes, buffer_offset;
  std::size_t in_place = 0;

  /// Plan index of a user node; throws GraphError naming it when it was pruned or is foreign.
  std::uint32_t index(const Node& n, std::string_view what) const;
  /// Plan index of the input called `name`, or -1.
  std::int64_t input_named(std::string_view name) const;
  /// Plan index of the node called `name`; throws GraphError when none.
  std::uint32_t named(std::string_view name, std::string_view what) const;
};

// ---- passes, in pipeline order (compile_plan runs them) ----
/// Nodes that the fetches need (transitively), as graph ids in increasing order.
std::vector<std::uint32_t> prune(const GraphImpl& g, std::span<const std::uint32_t> fetches);
/// Kahn's algorithm over the pruned nodes; ties go to depth-first post-order from the fetches,
/// which keeps producers next to consumers (short lifetimes). A cycle is a GraphError that
/// lists the nodes on it.
std::vector<std::uint32_t> topo_order(const GraphImpl& g, std::span<const std::uint32_t> needed,
                                      std::span<const std::uint32_t> fetches);
Plan build_plan(const GraphImpl& g, std::span<const std::uint32_t> order,
                std::span<const std::uint32_t> fetches);
void infer_shapes(Plan& p, const InputShapes& shapes);
/// Rewrites after shape inference: sum_to of an unchanged shape becomes a view.
void simplify(Plan& p);
/// Execution dependencies: data inputs, plus every reader of a variable before its assign.
void link_dependencies(Plan& p);
/// Re-sorts the plan over all its dependencies, the assign-ordering ones included (the first
/// order only knew data edges): a stable Kahn order that keeps the current order where it is
/// already valid. Assigns that wait on each other are a GraphError naming them.
void order_by_dependencies(Plan& p);
void plan_memory(Plan& p, ReuseMode mode);

/// Folds a matmul's single consumer into it: a unary elementwise op becomes its epilogue, an
/// add of a same-shape value becomes an accumulation (C = epilogue(A B) + X, in place over X).
/// Looks through identity views. Folds an embedding gradient into the plain SGD step on its
/// table (v + beta * dv): only the looked-up rows change, no dense gradient is made. Only for
/// platforms with kernels for the fused ops.
void fuse(Plan& p);

struct PlanOptions {
  ReuseMode reuse = ReuseMode::sequential;
  bool fuse = false;
};
std::shared_ptr<const Plan> compile_plan(const GraphImpl& g, const InputShapes& shapes,
                                         std::span<const std::uint32_t> fetches,
                                         const PlanOptions& options);

/// Human-readable dump of a plan (HETGRAPH_DUMP_PLAN=1 prints it after compile).
std::string dump(const Plan& p);

}  // namespace hetgraph::detail
