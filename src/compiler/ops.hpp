// The op table: every op declared once (name, arity, in-place candidates, shape inference,
// differentiation rule). Kernels live per platform and are looked up by OpKind.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hetgraph/graph.hpp"
#include "hetgraph/tensor.hpp"

namespace hetgraph::detail {

struct GraphImpl;
struct NodeRec;

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
  Scale,
  Axpby,
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
  // images (conv.cpp): NCHW convolution and pooling, geometry in Attrs::ints (see window.hpp)
  Conv2d,            // (x, w[, b])
  Conv2dGradInput,   // (g, w, x): x lends its shape
  Conv2dGradWeight,  // (g, x, w): w lends its shape
  Conv2dGradBias,    // (g): sum of g over N, H, W
  MaxPool2d,
  MaxPool2dGrad,  // (g, x, y): y is the max_pool2d node (its kernel may keep the argmax)
  AvgPool2d,
  AvgPool2dGrad,  // (g, x): x lends its shape
  // embedding.cpp
  Embedding,      // (table, int32 indices)
  EmbeddingGrad,  // (g, indices, table): scatter-add into a zero table; table lends its shape
  EmbeddingUpdate,  // compiler-made: (v, g, indices) -> v + beta * embedding_grad; fusion.cpp
  Floor,          // elementwise.cpp; no gradient flows through it
  Count_
};
inline constexpr int kNumOps = static_cast<int>(OpKind::Count_);

/// Attributes of all ops in one plain struct; each op reads the fields it documents.
struct Attrs {
  float alpha = 1.0f;  // scale factor, axpby a
  float beta = 0.0f;   // axpby b
  int axis = 0;        // reductions, softmax, slice, concat (kAllAxes: all)
  bool keepdims = false;
  bool trans_a = false, trans_b = false;  // matmul
  bool mean = false;                      // expand: divide by the reduced count
  std::int64_t begin = 0, end = 0;        // slice / slice_grad
  std::vector<std::int64_t> ints;         // transpose perm, reshape target

  friend bool operator==(const Attrs&, const Attrs&) = default;
};

struct TensorType {
  Shape shape;
  DType dtype = DType::f32;
  std::size_t bytes() const { return static_cast<std::size_t>(shape.numel()) * 4; }
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

/// What shape inference sees of one node.
struct InferCtx {
  const GraphImpl& graph;
  std::uint32_t node;
  const NodeRec& rec;
  std::span<const TensorType> in;
  /// Throws ShapeError naming the node, the op and every input shape.
  [[noreturn]] void fail(const std::string& why) const;
  int norm_axis(int axis, int rank) const;  // negative axes; fails when out of range
};
using InferFn = TensorType (*)(const InferCtx&);

/// What a differentiation rule sees: the forward node, its inputs and the incoming gradient.
/// It adds gradient contributions with `add` (usually to its inputs; a fused rule may skip a
/// node, as softmax + cross-entropy does) and names inputs it cannot differentiate.
struct GradCtx {
  Node node;
  std::vector<Node> in;
  Node grad;
  virtual void add(Node target, Node contribution) const = 0;
  virtual void not_differentiable(int input, std::string_view why) const = 0;
  /// Whether the caller asked for this node's own gradient (a fused rule must not skip it).
  virtual bool wanted(Node n) const = 0;
  virtual ~GradCtx() = default;
};
using GradFn = void (*)(const GradCtx&);

struct OpDef {
  OpKind kind;
  std::string_view name;
  int arity;                     // -1: any number >= 1
  std::uint32_t inplace = 0;     // bit i: output may overwrite input i (same shape and type)
  std::uint32_t shape_only = 0;  // bit i: input i only lends its shape; its data is not read
  bool view = false;             // output is input 0's memory reinterpreted (no kernel)
  InferFn infer = nullptr;
  GradFn grad = nullptr;        // null: not differentiable
  float flops_per_elem = 1.0f;  // static cost estimate before profiling (per output element)
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

/// Numpy broadcasting of two shapes; returns false when they do not broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out);
/// True when `small` broadcasts to `big` (every dim equal or 1, rank <= big's).
bool broadcasts_to(const Shape& small, const Shape& big);

}  // namespace hetgraph::detail
