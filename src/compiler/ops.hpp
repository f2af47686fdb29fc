// SPDX-License-Identifier: Apache-2.0
// The op table: every op declared once, with every fact that holds on every platform: arity,
// storage, in-place candidates, shape inference, differentiation rule, cost and heavy flag,
// fusion traits and index inputs. Kernels live per platform and are looked up by OpKind.
// CONTRIBUTING.md walks through adding an op.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/attrs.hpp"
#include "hetgraph/graph.hpp"
#include "hetgraph/tensor.hpp"

namespace hetgraph::detail {

enum class OpKind : std::uint8_t {
  // graph structure
  Input,
  Variable,
  Constant,
  Assign,
  Group,
  GradSeed,
  // elementwise (elementwise.cpp)
  Add,
  Sub,
  Mul,
  Div,
  Neg,
  Scale,  // ScaleFactor
  Axpby,  // AxpbyCoeffs
  Exp,
  Log,
  Sqrt,
  Relu,
  Sigmoid,
  Tanh,
  ReluGrad,
  SigmoidGrad,
  TanhGrad,
  // reductions and broadcasting back (reduce.cpp)
  ReduceSum,
  ReduceMean,
  ReduceMax,
  ReduceMaxGrad,
  ReduceProd,
  ReduceProdGrad,
  CumSum,  // float or int32 (wrapping), axis; ScanMode
  Expand,
  SumTo,
  // matmul.cpp
  MatMul,
  FusedMatMul,  // compiler-made: epilogue(op(a) op(b)) [+ x]; see fusion.cpp
  // nn.cpp
  Softmax,
  LogSoftmax,
  CrossEntropy,
  SoftmaxGrad,
  LogSoftmaxGrad,
  CrossEntropyGrad,
  SoftmaxXentGrad,
  // data movement (movement.cpp)
  Slice,
  SliceGrad,
  SliceGradN,
  Concat,
  ConcatGrad,
  Transpose,
  Reshape,
  ReshapeLike,
  // images (conv.cpp): NCHW convolution and pooling, geometry in a Window2d payload
  Conv2d,            // (x, w[, b])
  Conv2dGradInput,   // (g, w, x): x lends its shape
  Conv2dGradWeight,  // (g, x, w): w lends its shape
  Conv2dGradBias,    // (g): sum of g over N, H, W
  MaxPool2d,
  MaxPool2dGrad,  // (g, x, y): y is the max_pool2d node (its kernel may keep the argmax)
  AvgPool2d,
  AvgPool2dGrad,  // (g, x): x lends its shape
  // embedding.cpp
  Embedding,        // (table, int32 indices)
  EmbeddingGrad,    // (g, indices, table): scatter-add into a zero table; table lends its shape
  EmbeddingUpdate,  // compiler-made: (v, g, indices) -> v + scale * embedding_grad; fusion.cpp
  Floor,            // elementwise.cpp; no gradient flows through it
  Gelu,             // elementwise.cpp
  GeluGrad,
  // elementwise.cpp: the ONNX set (issue 17)
  Abs,
  AbsGrad,
  Erf,
  ErfGrad,
  LeakyRelu,      // LeakySlope: the slope below 0
  LeakyReluGrad,  // (g, x), LeakySlope
  Clip,           // ClipRange: the bounds
  ClipGrad,       // (g, x), ClipRange
  Pow,
  XLogY,  // x * log(y), 0 where x == 0: pow's gradient with respect to the exponent
  Maximum,
  Minimum,
  MaximumGrad,  // (g, a, b), InputChoice: the input (0: a, 1: b) whose share of g it is
  MinimumGrad,
  Where,  // (int32 cond, a, b)
  Cast,   // TargetType payload
  // reduce.cpp: the int32 position of the extreme along an axis (keepdims, last_index)
  ArgMax,
  ArgMin,
  // embedding.cpp: ONNX Gather
  Gather,      // (x, int32 indices), axis
  GatherGrad,  // (g, indices, x): scatter-add into zeros; x lends its shape
  // movement.cpp: ONNX Slice
  StridedSlice,      // SliceSpec payload
  StridedSliceGrad,  // (g, x): g placed into zeros; x lends its shape
  ConvTranspose2d,   // conv.cpp: (x, w[, b]); Window2d
  CheckIndices,      // compiler-made: (indices, like) checks indices < like.dim(0); commit_writes
  ParallelGroup,     // compiler-made: runs its member nodes' kernels side by side; parallel_ops.cpp
  // collectives across processes (collective.cpp): a Collective payload names the communicator
  Allreduce,
  Broadcast,
  Reduce,  // to a root rank
  Allgather,
  ReduceScatter,
  Sin,  // elementwise.cpp: cos is sin's gradient and the reverse (cosine schedules)
  Cos,
  OptimizerUpdate,
  SparseOptimizerUpdate,  // compiler-made (fuse_sparse_update): (v, rows, indices, lr[, sum]) for
  // sgd and adagrad without weight decay: only looked-up rows change  // optimizer.cpp: (v, g, lr[,
  // step], states...), OptimizerRule; writes v
  // and its states like an assign
  Transfer,     // compiler-made: a value crossing devices (send, recv) or the commit gate;
                // graph_ops.cpp, src/compiler/placement.cpp
  FusedConv2d,  // compiler-made: op(conv2d(x, w) [+ b] [+ r]); ConvEpilogue; fusion.cpp
  // compiler-made (fuse_embedding_concat): concat along the last axis of lookups (table,
  // indices) and values, written straight into the one output; LookupPieces; embedding.cpp
  EmbeddingConcat,
  Dropout,  // nn.cpp: (x, step); DropoutMask; its own gradient (the same mask, recomputed)
  // elementwise.cpp: comparisons (a, b of one type, float or int32) and logic (int32, nonzero
  // is true), broadcasting; int32 results of 0 or 1 (ONNX's bool); no gradient flows
  Equal,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  LogicalAnd,
  LogicalOr,
  LogicalXor,
  // elementwise.cpp: the rest of ONNX's unary math (gradients built from other ops; round,
  // like floor, passes none)
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  Round,  // halves to even (ONNX Round, numpy's round)
  // elementwise.cpp: float32 values rounded to float16's or bfloat16's (the ONNX types held in
  // float32); the gradient passes through
  ToFloat16,
  ToBfloat16,
  // elementwise.cpp: remainders of float or int32 pairs, broadcasting
  Mod,   // floored: the sign of the divisor (numpy's mod, Python's %)
  FMod,  // truncated: the sign of the dividend (C's fmod and %)
  // embedding.cpp: ONNX GatherElements and ScatterElements, indices of the data's rank
  GatherElements,      // (x, int32 indices), axis
  GatherElementsGrad,  // (g, indices, x): scatter-add into zeros; x lends its shape
  ScatterElements,     // (data, int32 indices, updates), axis; ScatterMode
  // reduce.cpp: the int32 indices of the k best along an axis, best first; TopKSpec
  TopK,
  // nn.cpp, compiler-made (fuse_layer_norm): (x, gamma, beta) normalised over x's last axis,
  // (x - mean) / sqrt(var + eps) * gamma + beta; LayerNormEps
  LayerNorm,
  // nn.cpp, compiler-made (fuse_lstm_cells), LstmGates: an LSTM step's elementwise tail over
  // its gate pre-activations G [B, 4H]. lstm_cell (G[, c_prev]) is the new cell state
  // sigmoid(f) * c_prev + sigmoid(i) * tanh(g) (without c_prev: sigmoid(i) * tanh(g));
  // lstm_hidden (G, c) is the hidden state sigmoid(o) * tanh(c).
  LstmCell,
  LstmHidden,
  // nn.cpp, compiler-made (fuse_gru_cells), GruGates: a GRU step with linear_before_reset (as
  // PyTorch exports it) after its products: gru_hidden(X, Rc, h_prev), X the step's input
  // projection and Rc its recurrent one (with its bias), both [B, 3H]; z = sigmoid(X_z + Rc_z),
  // r = sigmoid(X_r + Rc_r), n = tanh(X_h + r * Rc_h), h = (1 - z) * n + z * h_prev.
  GruHidden,
  // nn.cpp, compiler-made (fuse_recurrent_sequences), SequenceSpec: a chain of steps of one
  // direction as one node. lstm_sequence (P [rows, 4H], R [4H, H], h0, c0 [B, H]): each step
  // G = its rows of P + h_prev R^T, then lstm_cell and lstm_hidden; -> [(steps + 1) * B, H],
  // the hidden state after step s in rows [s * B, (s + 1) * B), the last cell state in the last
  // B rows. gru_sequence (P [rows, 3H], R [3H, H], h0 [B, H][, Rb [3H]]): each step
  // gru_hidden(its rows of P, h_prev R^T (+ Rb), h_prev); -> [steps * B, H], as lstm_sequence's.
  LstmSequence,
  GruSequence,
  // nn.cpp, compiler-made (fuse_channel_affine), ChannelAffineAct: (x, s, t) with x [N, C, ...]
  // and s, t one value per channel ([C, 1, ...] or [1, C, 1, ...]): x * s + t, then relu where
  // the payload says: an inference BatchNormalization the importer could not fold into a
  // convolution (DenseNet's, before each layer), with the relu after it.
  ChannelAffine,
  // nn.cpp, compiler-made (fuse_attention), AttentionSpec: (q, kt, v[, mask]) with q [.., Tq, d],
  // kt [.., d, Tk] (k [.., Tk, d] where trans_k), v [.., Tk, dv], the same leading dims:
  // softmax(scaled q kt + mask) v over the last axis, [.., Tq, dv]; the mask broadcasts to the
  // scores (AttentionSpec::mask_dims).
  Attention,
// elementwise.cpp: the ops declared by their rows alone (softsign, prelu, ...), in the rows'
// order; written by cmake/GenerateOps.cmake (CONTRIBUTING.md, "Adding an op")
#include "compiler/row_op_kinds.inc"
  Count_
};
inline constexpr int kNumOps = static_cast<int>(OpKind::Count_);

/// A fused convolution's op parameters as OpenCL's fused_conv2d_fwd takes them (two floats
/// whatever the op): leaky_relu {slope, 0}, clip {lo, hi}, others {1, 0}.
inline std::array<float, 2> conv_op_params(const ConvEpilogue& e) {
  if (e.op == OpKind::LeakyRelu) return {e.leaky.slope, 0.0f};
  if (e.op == OpKind::Clip) return {e.clip.lo, e.clip.hi};
  return {1.0f, 0.0f};
}

struct TensorType {
  Shape shape;
  DType dtype = DType::f32;
  std::size_t bytes() const { return static_cast<std::size_t>(shape.numel()) * 4; }
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

struct Plan;

/// What shape inference sees of one node.
struct InferCtx {
  const Plan& plan;
  std::uint32_t node;  // plan index
  OpKind op;
  const Attrs& attrs;
  const TensorType& declared;  // variables and constants: their declared type
  std::span<const TensorType> in;
  /// Throws ShapeError naming the node, the op and every input shape.
  [[noreturn]] void fail(const std::string& why) const;
  int norm_axis(int axis, int rank) const;  // negative axes; fails when out of range
  std::string input_label(std::size_t i) const;
};
using InferFn = TensorType (*)(const InferCtx&);

/// What a differentiation rule sees: the forward node, its inputs and the incoming gradient.
/// It adds gradient contributions with `add` (usually to its inputs; a fused rule may skip a
/// node, as softmax + cross-entropy does) and names inputs it cannot differentiate.
struct GradCtx {
  Node node;
  std::vector<Node> in;
  Node grad;
  /// A copy of the forward node's attributes (building nodes may move its record).
  Attrs attrs;
  virtual void add(Node target, Node contribution) const = 0;
  virtual void not_differentiable(int input, std::string_view why) const = 0;
  /// Whether the caller asked for this node's own gradient (a fused rule must not skip it).
  virtual bool wanted(Node n) const = 0;
  virtual ~GradCtx() = default;
};
using GradFn = void (*)(const GradCtx&);

/// How a node of an op holds its value.
enum class Storage : std::uint8_t {
  None,      // assign, group: no data
  Input,     // fed each run; never reused
  Variable,  // persistent; written only by its assign
  Constant,  // written once at instantiation
  Computed,  // a planned buffer
  View,      // input 0's memory reinterpreted (reshape, identity sum_to)
};

/// Elementwise ops map each element (unary: f(x)) or each broadcast pair (binary: f(a, b)) on
/// their own: platforms run them through one generic kernel per kind (an OpenCL op `name`
/// is the kernel name_f32, or name_ff / name_bc, in kernels/elementwise.cl). Unary kernels
/// get the node's two float parameters (elementwise_params in attrs.hpp: a scale's factor,
/// axpby's a and b, ...), binary and ternary ones too.
/// Ternary ops (where, the maximum/minimum gradients) broadcast three inputs (name_bc, or
/// name_ff when all have the output's shape).
enum class Elementwise : std::uint8_t { none, unary, binary, ternary };

/// Static work estimate of one node, before profiling.
struct Cost {
  double flops = 0.0;
  double bytes = 0.0;  // memory traffic
};
/// Adjusts `base`, the default estimate (flops_per_elem per output element; the bytes of the
/// output and of every input read), where the shapes say more.
using CostFn = Cost (*)(std::span<const TensorType> in, const TensorType& out, const Attrs& at,
                        Cost base);

/// An int32 input whose values index into another input's dim: checked before a kernel reads
/// with them (a bad value is a FeedError naming the node, the value and where it is).
struct IndexInput {
  int input = -1;         // -1: the op has none
  int bound_input = 0;    // the input whose dim bounds the values
  int bound_dim = 0;      // that dim (negative: from the back)
  std::string_view what;  // "class id" (one per row) or "index" (one per position)
  bool axis_dim = false;  // the bounding dim is the node's axis attribute, not bound_dim
  bool wraps = false;     // values lie in [-n, n); negative ones count from the back (ONNX)

  /// The dim of the bounding input's shape `s` that bounds node values with attributes `at`.
  int dim_of(const Shape& s, const Attrs& at) const {
    const int d = axis_dim ? at.axis : bound_dim;
    return d < 0 ? d + s.rank() : d;
  }
};

/// The op's ONNX form where it is exactly one ONNX op of the same inputs, in order, and one
/// output: the exporter (opset 17) writes it from here. `attr` names the one attribute it
/// carries over from the node's Attrs, if any. Unary float ops with `since` set are imported
/// back through this too, for ONNX schema versions [since, until]; other ops have an importer
/// handler of their own (src/onnx/ops_*.cpp).
struct OnnxForm {
  // "axis" (int), "alpha" (float: the first of elementwise_params, e.g. LeakySlope's slope)
  enum class Attr : std::uint8_t { none, axis, alpha };
  std::string_view op;  // empty: the exporter spells the op out, or it has no ONNX form
  Attr attr = Attr::none;
  int since = 0, until = 0;  // 0: imported by a handler of its own
  /// An op newer than the exporter's opset (since > 17), or one ONNX has no op for (op
  /// empty: silu), as ONNX ops of that opset over the input x, as ONNX's function body spells
  /// it: "Mul(x, Tanh(Softplus(x)))". The exporter writes this instead; without it such an op
  /// does not export.
  std::string_view body{};
};

/// The inputs a node writes besides `writes_input`, from its attributes: `count` inputs from
/// `first` (an optimizer update's state tensors).
struct InputRange {
  int first = 0, count = 0;
};
using WrittenFn = InputRange (*)(const Attrs&);

/// Everything true of an op on every platform. Kernels live per platform (src/cpu,
/// src/opencl) and are looked up by OpKind.
struct OpDef {
  OpKind kind;
  std::string_view name;
  int arity;                     // -1: any number >= 1
  std::uint32_t inplace = 0;     // bit i: output may overwrite input i (same shape and type)
  std::uint32_t shape_only = 0;  // bit i: input i only lends its shape; its data is not read
                                 // (bit 31 covers every input from 31 on)
  Storage storage = Storage::Computed;
  int writes_input = -1;  // the kernel writes input k's memory instead of its own (assign)
  WrittenFn also_writes = nullptr;  // more inputs its kernel writes (optimizer states)
  /// Runs a kernel although it holds no value (Storage::None): a copying assign (unless
  /// elided into its variable), an optimizer update, a parallel group. PlanNode::has_work.
  bool works_without_value = false;
  InferFn infer = nullptr;
  GradFn grad = nullptr;  // null: not differentiable
  // ---- cost model, used before profiling and by the graph-width guideline
  bool heavy = false;           // compute-intensive (products, convolutions, embedding lookups)
  float flops_per_elem = 1.0f;  // default cost: per output element, plus the bytes read/written
  CostFn cost = nullptr;        // replaces the default where shapes say more (products)
  // ---- traits the rewrites use
  Elementwise elementwise = Elementwise::none;
  bool epilogue = false;  // unary elementwise: may fold into a matmul as its epilogue
  IndexInput index{};
  /// A collective across processes: CPU engines start it on their communication lane and the
  /// communicator completes it, so it never occupies an executor while it waits for the others.
  bool communication = false;
  OnnxForm onnx{};

  bool shape_only_input(std::size_t i) const {
    return i < 31 ? ((shape_only >> i) & 1u) != 0 : ((shape_only >> 31) & 1u) != 0;
  }
  bool inplace_input(std::size_t i) const { return i < 32 && ((inplace >> i) & 1u) != 0; }
};

const OpDef& op_def(OpKind k);
inline std::string_view op_name(OpKind k) {
  return op_def(k).name;
}

/// Registration hooks, one per op family file.
void register_graph_ops(std::vector<OpDef>& table);
void register_elementwise_ops(std::vector<OpDef>& table);
void register_reduce_ops(std::vector<OpDef>& table);
void register_matmul_ops(std::vector<OpDef>& table);
void register_nn_ops(std::vector<OpDef>& table);
void register_movement_ops(std::vector<OpDef>& table);
void register_conv_ops(std::vector<OpDef>& table);
void register_embedding_ops(std::vector<OpDef>& table);
void register_collective_ops(std::vector<OpDef>& table);
void register_optimizer_ops(std::vector<OpDef>& table);

/// The estimated work of a node of op `k` (OpDef::cost, or the default from flops_per_elem).
Cost op_cost(OpKind k, std::span<const TensorType> in, const TensorType& out, const Attrs& at);

/// Numpy broadcasting of two shapes; returns false when they do not broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out);
/// True when `small` broadcasts to `big` (every dim equal or 1, rank <= big's).
bool broadcasts_to(const Shape& small, const Shape& big);

}  // namespace hetgraph::detail
