// SPDX-License-Identifier: Apache-2.0
// The compiler's IR and output: the pruned graph in topological order with shapes, execution
// dependencies and a memory plan. Platforms instantiate kernels from it.
//
// A Plan owns everything it needs (nodes, names, values of constants): a compiled graph keeps
// working after the Graph it came from is gone. Passes are named (see PassList below) and run
// in order by compile_plan; HETGRAPH_DUMP_PLAN=after:<pass> prints the plan after that pass
// (after:all after every pass, 1 the final plan).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "hetgraph/compiler.hpp"

namespace hetgraph::detail {

/// gid of a node a pass made: it has no node in the user's graph.
inline constexpr std::uint32_t kNoGid = 0xFFFFFFFFu;

/// How a 4-d value is laid out in memory: plain NCHW (every value a user sees), or a layout the
/// platform's convolutions compute in, kept between them by assign_layouts: channels-last
/// (NHWC) or channels in blocks of 8 or 16 (oneDNN's nChw8c, nChw16c).
enum class ActivationLayout : std::uint8_t { nchw, nhwc, nChw8c, nChw16c };
inline const char* layout_name(ActivationLayout l) {
  switch (l) {
    case ActivationLayout::nhwc:
      return "nhwc";
    case ActivationLayout::nChw8c:
      return "nChw8c";
    case ActivationLayout::nChw16c:
      return "nChw16c";
    default:
      return "nchw";
  }
}
/// Channels one block holds (1: channels-last, 0: plain): a value's channels must fill whole
/// blocks for it to keep its plain size.
inline int channel_block(ActivationLayout l) {
  switch (l) {
    case ActivationLayout::nhwc:
      return 1;
    case ActivationLayout::nChw8c:
      return 8;
    case ActivationLayout::nChw16c:
      return 16;
    default:
      return 0;
  }
}

struct PlanNode {
  // Fields by the pass that writes them, in pipeline order (passes() and
  // docs/ARCHITECTURE.md's table); a later pass may rewrite an earlier one's where it says so.

  // build_plan, from the user's graph (Plan::add_node for nodes passes make; the fusion passes
  // rewrite op, attrs and inputs; simplify, fusion and concat_in_place make views or no-data
  // nodes of some).
  std::uint32_t gid = kNoGid;  // id in the user's graph; kNoGid for nodes passes made
  OpKind op = OpKind::Input;
  Attrs attrs;
  std::string name;                   // user name, may be empty
  std::string label;                  // for messages and traces
  std::vector<std::uint32_t> inputs;  // plan indices, shape-only ones included
  TensorType declared;  // variables and constants: their declared type; inputs: the dtype
  Storage storage = Storage::Computed;
  bool grad_sum = false;      // an add autodiff made to sum gradient contributions
  bool fetched = false;       // one of the plan's fetches: the host reads it after a run
  std::optional<Device> pin;  // Node::on / DeviceScope (place_devices honours it)
  // build_plan: state.
  /// A variable's first value. Mutable: the executable that initialises the plan's memory
  /// drops its reference to the values then (Executable::initialize_state), so the weights are
  /// not kept twice once the graph that shares them is gone.
  mutable Initializer init;
  std::shared_ptr<const std::vector<float>> f32_values;
  std::shared_ptr<const std::vector<std::int32_t>> i32_values;

  // infer_shapes.
  TensorType type;

  // place_devices and insert_transfers (heterogeneous platforms: src/compiler/placement.hpp).
  std::int32_t device = -1;                 // index of its device in the platform's; -1: not placed
  std::string placed_by;                    // why it runs there (engine_report)
  double est_start_us = 0, est_end_us = 0;  // its slot in the placement's schedule

  // The fusion passes.
  std::int64_t fused_into = -1;  // fused into that node by a fusion pass: no kernel, no data

  // assign_layouts.
  ActivationLayout layout = ActivationLayout::nchw;

  // link_dependencies (order_by_dependencies keeps them across its reorder; elide_assigns,
  // commit_writes and plan_memory add ordering edges).
  std::vector<std::uint32_t> deps;   // execution predecessors: data inputs and ordering edges
  std::vector<std::uint32_t> succs;  // execution successors

  // elide_assigns.
  bool elided = false;              // assign whose value is computed straight into the variable
  std::int64_t into_variable = -1;  // computed straight into this variable

  // fuse_parallel_ops: a member's kernel runs inside the group node `group`; a group node lists
  // its members.
  std::int64_t group = -1;
  std::vector<std::uint32_t> members;

  // commit_writes.
  bool commit = false;  // the commit point: every writer of a variable waits for it
  // An index out of range names this label instead of the node's own: the user's op that
  // reads the same indices (name_index_readers, run by commit_writes and split_devices), where
  // the node is one autodiff or a pass made (an embedding gradient, a sparse update, a check).
  // Empty: the node's own label.
  std::string index_reader;

  // concat_in_place: the concat whose buffer holds this value, at sub_offset bytes (its band);
  // that concat is then a view of the whole and runs no kernel.
  std::int64_t in_concat = -1;
  std::size_t sub_offset = 0;  // bytes into `buffer` before `offset` (views: their input's)

  // plan_memory.
  std::int32_t buffer = -1;  // -1: no storage
  std::size_t offset = 0;    // byte offset into the arena
  bool in_place = false;     // writes over one of its inputs' buffer
  bool clobbered = false;    // a later node overwrites its buffer within a run

  // split_devices (which copies its parts' plan_memory and elide_assigns fields back here).
  std::int32_t local = -1;  // its index in its device's part

  bool reads_input(std::size_t i) const { return !op_def(op).shape_only_input(i); }
  /// What index errors of this node name (see index_reader).
  const std::string& index_label() const { return index_reader.empty() ? label : index_reader; }
  /// Whether a platform runs a kernel for this node: computed values and copying assigns.
  bool has_work() const {
    return storage == Storage::Computed || (op_def(op).works_without_value && !elided);
  }
  /// Whether the node's kernel writes a variable (a copying assign, an optimizer update, or a
  /// value computed in place over its variable): such nodes run after the commit point.
  bool writes_variable() const {
    return has_work() && (op_def(op).writes_input >= 0 || into_variable >= 0);
  }
  /// The inputs (plan indices) whose memory the node's kernel writes (OpDef::writes_input and
  /// also_writes): an assign's variable; an optimizer update's variable and its states.
  /// Empty for every other node.
  std::vector<std::uint32_t> written_inputs() const {
    const OpDef& d = op_def(op);
    if (d.writes_input < 0) return {};
    std::vector<std::uint32_t> w{inputs[static_cast<std::size_t>(d.writes_input)]};
    if (d.also_writes != nullptr) {
      const InputRange r = d.also_writes(attrs);
      for (int s = 0; s < r.count; ++s) w.push_back(inputs[static_cast<std::size_t>(r.first + s)]);
    }
    return w;
  }
};

/// What the planner may assume about execution order.
enum class ReuseMode : std::uint8_t {
  none,        // one buffer per node (planner off)
  sequential,  // nodes run one at a time in plan order
  dag,         // nodes run in any order the dependencies allow (parallel engines)
};

struct PlacementSummary;  // src/compiler/placement.hpp

/// gid -> plan index, over the user graph's ids (a vector: plans are rebuilt often and may hold
/// a million nodes).
class GidIndex {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  void reset(std::size_t graph_size) { at_.assign(graph_size, kNone); }
  void set(std::uint32_t gid, std::uint32_t index) { at_[gid] = index; }
  std::size_t count(std::uint32_t gid) const { return gid < at_.size() && at_[gid] != kNone; }
  /// Throws std::out_of_range for a gid not in the plan (a bug where it is used).
  std::uint32_t at(std::uint32_t gid) const {
    if (!count(gid)) throw std::out_of_range("GidIndex::at");
    return at_[gid];
  }
  /// The plan index, or -1.
  std::int64_t find(std::uint32_t gid) const {
    return count(gid) ? static_cast<std::int64_t>(at_[gid]) : std::int64_t{-1};
  }

 private:
  std::vector<std::uint32_t> at_;
};

struct Plan {
  std::uint64_t graph_id = 0;    // identity of the user's graph (not its address)
  std::uint64_t stands_for = 0;  // GraphImpl::stands_for and stand_ins, copied
  std::unordered_map<std::uint32_t, std::uint32_t> stand_ins;
  std::uint32_t graph_size = 0;  // nodes in the user's graph when it was compiled
  std::uint32_t next_label = 0;  // "#n" in the labels of nodes passes make (after the graph's)
  std::vector<PlanNode> nodes;   // topological order
  GidIndex index_of;             // gid -> plan index
  std::unordered_map<std::string, std::uint32_t> names;  // every user name -> gid
  std::unordered_set<std::string> graph_inputs;          // names of every input of the user's graph
  std::vector<std::uint32_t> inputs, variables, fetches;
  ReuseMode reuse = ReuseMode::sequential;
  std::size_t arena_bytes = 0;
  /// The peak of bytes live at once in plan order (the least arena a plan run in that order
  /// can have; arena_bytes is near it on platforms that pack an arena).
  std::size_t live_bytes = 0;
  std::size_t naive_bytes = 0;
  std::size_t buffers = 0;
  /// Size and arena offset of each planned buffer (a node's `buffer` indexes these), for
  /// platforms that allocate one device buffer per planned buffer instead of an arena.
  std::vector<std::size_t> buffer_bytes, buffer_offset;
  std::size_t in_place = 0;
  /// assign_layouts chose the platform's Winograd layout (winograd_layout) for Winograd
  /// convolutions (the CPU kernels' cue).
  bool winograd = false;
  ActivationLayout winograd_layout = ActivationLayout::nchw;
  /// assign_layouts ran with PlanOptions::own_winograd: the CPU's own Winograd kernel may take
  /// 3x3 convolutions between blocked values.
  bool own_winograd = false;
  /// PlanOptions::packed_weights (the CPU's matmul kernels read it).
  bool packed_weights = true;
  /// Heterogeneous platforms (split_devices): one self-contained plan per device (null where
  /// the device got no node), each with its own order, commit point and memory plan.
  std::vector<std::shared_ptr<Plan>> parts;
  /// The placement's summary for engine_report (place_devices).
  std::shared_ptr<const PlacementSummary> placement;

  std::size_t ordering_edges = 0;  // dependencies plan_memory added to reuse buffers (dag mode)
  /// Wall time of each pass that made this plan ("build" first).
  std::vector<std::pair<std::string, double>> pass_seconds;

  /// Plan index of a user node; throws GraphError naming it when it was pruned or is foreign.
  std::uint32_t index(const Node& n, std::string_view what) const;
  /// Plan index of the input called `name`, or -1.
  std::int64_t input_named(std::string_view name) const;
  /// Plan index of the node called `name`; throws GraphError when none.
  std::uint32_t named(std::string_view name, std::string_view what) const;
  /// The node whose memory node i's kernel writes: the variable for an assign, else i.
  std::uint32_t output_of(std::uint32_t i) const {
    const int k = op_def(nodes[i].op).writes_input;
    return k >= 0 ? nodes[i].inputs[static_cast<std::size_t>(k)] : i;
  }
  /// Appends a node made by a pass (storage from its op, no user node). The plan is out of
  /// topological order until the pass calls sort_topologically.
  std::uint32_t add_node(OpKind op, std::vector<std::uint32_t> inputs, Attrs attrs = {});
};

/// What the platform being compiled for can run: the fusion passes only make nodes it has a
/// kernel for, and compile() rejects a plan with a node it has none for.
class Capabilities {
 public:
  virtual ~Capabilities() = default;
  /// Why the platform cannot run node `n` of plan `p` (whose inputs are typed); empty when it
  /// can. `n` need not be in `p.nodes` yet (a fusion pass asks before rewriting).
  virtual std::string unsupported(const Plan& p, const PlanNode& n) const = 0;
  /// assign_layouts: whether the platform's kernel for grouped (depthwise included)
  /// convolution `n` takes its image and gives its result in `layout` as fast as it runs
  /// in the layout's own terms (no fallback to a slow path); no by default.
  virtual bool grouped_conv_takes_layout(const Plan&, const PlanNode&, ActivationLayout) const {
    return false;
  }
  /// assign_layouts: whether the platform's kernel for average pooling or channel_affine node
  /// `n` reads its value and writes its result in `layout` (as max pooling and channel concat
  /// always do on a platform that has a conv layout); no by default.
  virtual bool passes_layout(const Plan&, const PlanNode&, ActivationLayout) const { return false; }
};

/// Placement for a heterogeneous platform (src/compiler/placement.hpp): the passes
/// place_devices, insert_transfers and split_devices ask it. Null for single-device platforms.
class Placer {
 public:
  virtual ~Placer() = default;
  /// place_devices: a device for every node (PlanNode::device, placed_by, est_*).
  virtual void place(Plan& p) const = 0;
  /// Devices of the platform, and what the memory planner may assume on each.
  virtual std::size_t device_count() const = 0;
  virtual ReuseMode reuse_mode(std::size_t device) const = 0;
  /// Whether device d's platform lays its part's buffers out in one arena (plan_memory).
  virtual bool packs_arena(std::size_t) const { return false; }
  /// Which device hosts the CPU part (its parts commit for the others), or -1.
  virtual int host_device() const = 0;
  virtual std::string device_name(std::size_t device) const = 0;
  /// The threads one kernel of device d's engine gets, and what it runs: split_devices fuses
  /// parallel ops in each part where a kernel has several (as on that device alone).
  virtual int kernel_threads(std::size_t) const { return 0; }
  virtual const Capabilities* capabilities(std::size_t) const { return nullptr; }
};

struct PlanOptions {
  ReuseMode reuse = ReuseMode::sequential;
  /// plan_memory: the platform lays buffers out in one arena (Backend::packs_arena).
  bool arena = false;
  bool fuse = false;
  /// fuse_conv_residual and fuse_conv_epilogue (with fuse).
  bool conv_post_ops = true;
  /// fuse_silu (with fuse).
  bool silu = true;
  /// fuse_layer_norm (with fuse).
  bool layer_norm = true;
  /// fuse_gelu (with fuse).
  bool gelu = true;
  /// fuse_attention (with fuse), and the transposes around the block folded into it.
  bool attention = true;
  bool attention_transposes = true;
  /// fuse_channel_affine (with fuse).
  bool channel_affine = true;
  /// fuse_lstm_cells and fuse_gru_cells (with fuse).
  bool lstm_cells = true;
  bool gru_cells = true;
  /// fuse_recurrent_sequences (with fuse), after fuse_lstm_cells and fuse_gru_cells.
  bool recurrent_sequences = true;
  /// fuse_matmul_accumulate takes bias adds too (with fuse).
  bool matmul_bias = true;
  /// assign_layouts: the layout the platform's convolutions compute in (Backend::conv_layout);
  /// nchw turns the pass off.
  ActivationLayout conv_layout = ActivationLayout::nchw;
  /// assign_layouts: max pooling and channel concat keep the layout (channels-last only).
  bool layouts_through_pool_concat = true;
  /// assign_layouts: grouped and depthwise convolutions keep the layout where the platform's
  /// kernel takes it (Capabilities::grouped_conv_takes_layout).
  bool grouped_conv_layouts = true;
  /// assign_layouts: the layout of the platform's Winograd convolutions (Backend::winograd_layout)
  /// where CompileOptions::winograd_convs asks for them, used where they pay; nchw: none.
  ActivationLayout winograd_layout = ActivationLayout::nchw;
  /// CompileOptions::Experimental::own_winograd (the CPU kernels read it from Plan::own_winograd).
  bool own_winograd = true;
  /// fuse_parallel_ops, and the threads one kernel of the target engine gets (groups pay only
  /// where a kernel has several: 0 or 1 turns the pass off).
  bool parallel_ops = false;
  int kernel_threads = 0;
  /// fuse_embedding_concat (with fuse).
  bool grouped_embeddings = true;
  /// stack_shared_products (with fuse).
  bool stacked_products = true;
  /// concat_in_place (with reuse, into an arena).
  bool concat_in_place = true;
  /// slice_views (with reuse, into an arena).
  bool slice_views = true;
  /// CompileOptions::Experimental::packed_weights (Plan::packed_weights).
  bool packed_weights = true;
  const Capabilities* capabilities = nullptr;  // null: every op is supported (tests)
  const Placer* placer = nullptr;              // heterogeneous platforms
};

/// What passes see besides the plan.
struct PassContext {
  const InputShapes& shapes;
  const PlanOptions& options;
};
/// One named pass over the plan.
struct Pass {
  std::string_view name;
  void (*run)(Plan&, const PassContext&);
  bool (*enabled)(const PlanOptions&) = nullptr;  // null: always
};
/// The passes compile_plan runs after build_plan, in order.
std::span<const Pass> passes();

// ---- passes and pieces of them, in pipeline order ----
/// Nodes that the fetches need (transitively), as graph ids in increasing order.
std::vector<std::uint32_t> prune(const GraphImpl& g, std::span<const std::uint32_t> fetches);
/// Kahn's algorithm over the pruned nodes; ties go to depth-first post-order from the fetches,
/// which keeps producers next to consumers (short lifetimes). A cycle is a GraphError that
/// lists the nodes on it.
std::vector<std::uint32_t> topo_order(const GraphImpl& g, std::span<const std::uint32_t> needed,
                                      std::span<const std::uint32_t> fetches);
/// The "build" step: the pruned nodes in topological order, self-contained (names, values).
Plan build_plan(const GraphImpl& g, std::span<const std::uint32_t> fetches);
/// Drops nodes no fetch needs and sorts the rest in topo_order's order (after a pass rewired
/// the plan). Only before link_dependencies.
/// keep_inputs: inputs no fetch needs stay (their feeds are still checked).
void prune_and_sort(Plan& p, bool keep_inputs = false);
/// Moves the nodes into `order` (old indices; nodes left out are dropped) and remaps every
/// index the plan holds. Lists keep their order.
void reorder(Plan& p, const std::vector<std::uint32_t>& order);
/// Sums of gradient contributions (grad_sum adds) regrouped: slice gradients of one tensor into
/// one slice_grad_n, per-step weight gradients into products over concatenated steps.
void regroup_gradients(Plan& p);
void infer_shapes(Plan& p, const InputShapes& shapes);
/// Empty tensors (a zero dim) folded: a node with an empty result becomes an empty constant, a
/// reduction or product of an empty input its identity, a concatenation drops its empty
/// pieces; any other op with an empty input is an error. No kernel ever sees an empty tensor.
void fold_empty_tensors(Plan& p);
/// Rewrites after shape inference: sum_to of an unchanged shape and identity transposes
/// become views.
void simplify(Plan& p);
/// Folds a matmul's single consumer into it: a unary elementwise op becomes its epilogue, an
/// add of a same-shape value becomes an accumulation (C = epilogue(A B) + X, in place over X).
/// Looks through identity views. Only where the platform has a kernel for the fused node.
void fuse_matmul_epilogue(Plan& p, const Capabilities* caps);
void fuse_matmul_accumulate(Plan& p, const Capabilities* caps, bool biases = true);
/// A convolution's only reader folded into it as a oneDNN post-op: an add of a same-shape value
/// (residual: sum post-op) and then relu / clip / leaky_relu / sigmoid (eltwise post-op).
/// Only where the platform has a fused_conv2d kernel (PlanOptions::conv_post_ops).
void fuse_conv_residual(Plan& p, const Capabilities* caps);
/// mul(x, sigmoid(x)) (either order, the sigmoid read by the product alone) becomes silu(x) at
/// the product; the sigmoid does no work. Only where the platform has a silu kernel.
void fuse_silu(Plan& p, const Capabilities* caps);
void fuse_layer_norm(Plan& p, const Capabilities* caps);
void fuse_gelu(Plan& p, const Capabilities* caps);
void fuse_attention(Plan& p, const Capabilities* caps, bool transposes);
void fuse_channel_affine(Plan& p, const Capabilities* caps);
void fuse_lstm_cells(Plan& p, const Capabilities* caps);
/// Chains of LSTM steps after fuse_lstm_cells -> lstm_sequence nodes (fusion.cpp says which).
void fuse_recurrent_sequences(Plan& p, const Capabilities* caps);
void fuse_gru_cells(Plan& p, const Capabilities* caps);
void fuse_conv_epilogue(Plan& p, const Capabilities* caps);
/// Marks the values that stay in the platform's blocked layout between convolutions
/// (PlanNode::layout); src/compiler/layouts.cpp says which.
/// `winograd_layout`: the platform's Winograd layout (PlanOptions::winograd_layout; nchw: none).
/// `grouped`: asked whether a grouped convolution keeps the layout (null: none does);
/// `through` (with `through_pool_concat`): whether an average pooling or channel_affine passes
/// it through (null: none does).
void assign_layouts(Plan& p, ActivationLayout layout, bool through_pool_concat,
                    ActivationLayout winograd_layout = ActivationLayout::nchw,
                    const Capabilities* grouped = nullptr, const Capabilities* through = nullptr);
/// A convolution a platform's Winograd kernels in `layout` take: 3x3, stride 1, no dilation,
/// one group, input and output channels in whole blocks of the layout (Plan::winograd_layout
/// once assign_layouts chose it).
bool winograd_convolution(const Plan& p, const PlanNode& n, ActivationLayout layout);
/// Multiply-adds of the plan's convolutions (grouped ones included) per run.
double convolution_macs(const Plan& p);
/// Folds an embedding gradient into the plain SGD step on its table (v + beta * dv): only the
/// looked-up rows change, no dense gradient is made.
void fuse_sparse_update(Plan& p, const Capabilities* caps);
/// Allgathers on one communicator and of one type become one allgather of their concatenated
/// inputs (up to 4 MiB each), sliced back: one collective's latency instead of many.
void fuse_collectives(Plan& p);
/// Execution dependencies: data inputs, plus every reader of a variable before its assign.
void link_dependencies(Plan& p);
/// Re-sorts the plan over all its dependencies, the assign-ordering ones included (the first
/// order only knew data edges): a stable Kahn order that keeps the current order where it is
/// already valid. Assigns that wait on each other are a GraphError naming them.
void order_by_dependencies(Plan& p);
/// Marks each assign whose value can be computed in place over its variable (SGD's W - lr*dW
/// straight into W: the assign does nothing). Every other reader of the variable must run
/// before the value's node: they must precede it in plan order, and in dag mode each one that
/// is not already an ancestor gets an ordering edge to it. The value's other readers must write
/// variables themselves (momentum's velocity feeds its weight's update), so that nothing that
/// can fail depends on a written variable.
void elide_assigns(Plan& p, ReuseMode mode);
/// Parallel-op fusion (the MXNet proposal): independent nodes of one kind, equal shapes and
/// attributes, at one depth of the graph and small enough that their kernels use several
/// threads poorly, run as one parallel_group node whose kernel runs their kernels side by
/// side (one thread each). Members keep their own values; groups stay small enough that their
/// outputs are live together without growing the plan much.
void fuse_parallel_ops(Plan& p, const PlanOptions& options);
/// Independent products of few rows sharing their right operand W -> one product of their
/// stacked left operands and a slice of it per product, where W is large enough against the
/// rows that one GEMM beats many (parallel_ops.cpp).
void stack_shared_products(Plan& p, const Capabilities* caps);
/// Lookups read only by a concat along the last axis -> one embedding_concat (fusion.cpp).
void fuse_embedding_concat(Plan& p, const Capabilities* caps);

/// An int32 index input of a node that executables check (fed: before the run; computed: on
/// the device), with its bound: values lie in [0, bound), or [-bound, bound) where `wraps`.
struct IndexUse {
  std::size_t input = 0;
  std::int64_t bound = 0;
  bool wraps = false;
};
/// OpDef::index's one input (when it is int32), or each lookup's of an embedding_concat.
std::vector<IndexUse> index_uses(const Plan& p, const PlanNode& n);
/// Sets index_reader of the nodes that check indices on a user's op's behalf (gradients,
/// sparse updates, checks: ops without a gradient of their own) to the label of the op with a
/// gradient that reads the same indices (through transfers) with the same bound: a user's
/// lookup, gather or cross entropy, named ones first. Checks their maker named keep theirs.
void name_index_readers(Plan& p);
/// Makes runs atomic: every node that writes a variable waits for a commit point that waits
/// for every other node with work. A run that fails before the commit changes no variable;
/// after it only writes run (copies and in-place arithmetic, whose inputs are all computed).
void commit_writes(Plan& p);
/// `arena`: the platform lays all buffers out in one arena (Plan::buffer_offset) rather than
/// allocating each (Plan::buffer_bytes): buffers are then in-place chains, packed so that
/// buffers sharing memory never live at the same time.
void plan_memory(Plan& p, ReuseMode mode, bool arena = false);
/// Before plan_memory: a concat whose inputs lie one after another in its memory (nothing
/// outside the concat axis: batch 1 along channels, plain or in blocks of whole channel blocks)
/// has each input computed straight into its band (PlanNode::in_concat) and becomes a view of
/// them, with no kernel. Inputs that are views, fetched, another concat's, or read twice by it
/// keep their own buffers (and the concat its copy). A concat whose inputs begin a later
/// concat's, in order, waits for it: where the later one is in place, the earlier one becomes a
/// view of the start of its buffer (DenseNet's blocks copy nothing).
void concat_in_place(Plan& p);
/// Before plan_memory, after concat_in_place: a slice whose range is one run of its input's
/// memory (nothing outside the axis: an LSTM's rows of one time step in the input projection of
/// every step) at a 64-byte boundary becomes a view of that memory, with no kernel. Not where
/// the slice is fetched, a concat's band or a variable's new value, nor of an input, variable
/// or constant (their feeds are checked and written as a whole), nor where a reader may write
/// its result over the slice in place (the copy is then that reader's output as well).
void slice_views(Plan& p);
/// slice_views: a slice view's byte offset in its input's memory; -1 for anything else.
std::int64_t slice_view_offset(const Plan& p, const PlanNode& n);

/// Whether node i's value can change only between runs (by the host writing it): a constant,
/// or a variable that no node of the plan writes, seen through views. Kernels may keep a
/// derived copy of such a value (a convolution's weights in oneDNN's blocked layout) and
/// refresh it only after host writes.
bool fixed_between_runs(const Plan& p, std::uint32_t i);

/// Runs build_plan and every pass, printing the plan where HETGRAPH_DUMP_PLAN asks.
std::shared_ptr<const Plan> compile_plan(const GraphImpl& g, const InputShapes& shapes,
                                         std::span<const std::uint32_t> fetches,
                                         const PlanOptions& options);

/// Human-readable dump of a plan.
std::string dump(const Plan& p);

}  // namespace hetgraph::detail
