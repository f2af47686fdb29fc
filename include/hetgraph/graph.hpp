// SPDX-License-Identifier: Apache-2.0
// Building computation graphs.
//
// A Graph owns nodes; a Node is a small value handle (graph pointer + id) that ops take and
// return, so graphs read like the math they compute:
//
//   hetgraph::Graph g;
//   auto x = g.input("x");                          // shape given at compile time
//   auto W = g.variable("W", {784, 10});            // zero-initialised, persistent
//   auto b = g.variable("b", {10});
//   auto p = softmax(matmul(x, W) + b);
//   auto loss = reduce_mean(cross_entropy(p, g.input("y")));
//
// Node handles stay valid while their Graph lives. Ops only record structure; shapes are
// checked when the graph is compiled for concrete input shapes (see compiler.hpp).
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hetgraph/tensor.hpp"

namespace hetgraph {

/// How a variable gets its first value. Random initialisers are deterministic in `seed`.
struct Initializer {
  enum class Kind : std::uint8_t { zeros, fill, uniform, normal, values };
  Kind kind = Kind::zeros;
  float a = 0.0f;  // fill value, uniform low, normal mean
  float b = 0.0f;  // uniform high, normal stddev
  std::uint64_t seed = 0;
  std::shared_ptr<const std::vector<float>> data;  // values: one per element, row-major

  static Initializer zeros() { return {}; }
  static Initializer fill(float v) { return {Kind::fill, v, 0.0f, 0, {}}; }
  static Initializer uniform(float lo, float hi, std::uint64_t seed) {
    return {Kind::uniform, lo, hi, seed, {}};
  }
  static Initializer normal(float mean, float stddev, std::uint64_t seed) {
    return {Kind::normal, mean, stddev, seed, {}};
  }
  /// Exactly these values (e.g. an imported model's weights).
  static Initializer values(std::vector<float> v) {
    return {Kind::values, 0.0f, 0.0f, 0, std::make_shared<const std::vector<float>>(std::move(v))};
  }
};

class Node;

/// A device of this machine, for placing nodes on a heterogeneous platform
/// (Platform::heterogeneous in compiler.hpp): the CPU, or an OpenCL device by its platform and
/// device index (as Platform::opencl_devices() lists them). A value: it names a device, it
/// does not open one.
///
///   const Device gpu = Device::opencl(0, 1);
///   auto logits = matmul(x, W).on(gpu);           // this node runs on the OpenCL device
///   {
///     DeviceScope on_cpu(g, Device::cpu());       // nodes made in this scope run on the CPU
///     loss = reduce_mean(cross_entropy(softmax(logits + b), y));
///   }
struct Device {
  enum class Kind : std::uint8_t { cpu, opencl };
  Kind kind = Kind::cpu;
  int platform_index = 0, device_index = 0;  // OpenCL only

  static Device cpu() { return {}; }
  static Device opencl(int platform_index, int device_index) {
    return {Kind::opencl, platform_index, device_index};
  }
  /// "cpu" or "opencl:<platform>:<device>".
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

class Graph {
 public:
  Graph();

  /// A value fed at every run; its shape is given at compile time.
  Node input(std::string name, DType dtype = DType::f32);
  /// Persistent state, initialised once when the graph is compiled, updated by assign.
  Node variable(std::string name, Shape shape, Initializer init = Initializer::zeros());
  Node constant(float value);
  Node constant(Shape shape, std::vector<float> values);
  Node constant_i32(Shape shape, std::vector<std::int32_t> values);

  std::size_t size() const;
  Node node(std::uint32_t id) const;
  /// The node with this user name; throws GraphError when there is none.
  Node find(std::string_view name) const;

  /// What the graph holds, before it is compiled: node counts (inputs, variables, constants,
  /// ops by kind), every variable with its shape and element count, and the parameters in
  /// all (input shapes are known only at compile time).
  ///   std::cout << g.summary();
  ///   // graph: 7 nodes (1 input, 2 variables, 0 constants, 4 ops)
  ///   // variables: 2, 7850 elements (30.7 KiB as float)
  ///   //   fc.weight  [784, 10]  7840 ...
  std::string summary() const;
  /// The graph in Graphviz's DOT language: a node per graph node (its name or #id and its op;
  /// variables and constants with their shapes), an edge per input, in creation order.
  ///   std::ofstream("model.dot") << g.to_dot();   // then: dot -Tsvg model.dot -o model.svg
  std::string to_dot() const;

  /// The graph's records: opaque, the library's own (src/compiler/graph_impl.hpp defines it
  /// and how the library reaches a graph's).
  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// A handle to one node of a Graph.
class Node {
 public:
  Node() = default;

  bool valid() const { return g_ != nullptr; }
  std::uint32_t id() const { return id_; }
  const std::string& name() const;   // user name, may be empty
  std::string_view op_name() const;  // "matmul", "input", ...
  std::string label() const;         // "'name' (#id, op)" for messages
  Shape declared_shape() const;      // variables and constants only
  DType dtype() const;

  /// Gives the node a name (shown in errors and traces); returns the same node.
  Node named(std::string name) const;
  /// Pins the node to a device: a heterogeneous platform runs it there (a device without a
  /// kernel for it is a PlatformError at compile time, naming both). Inputs and variables
  /// pinned to a device live there. Single-device platforms ignore pins. Returns the same node.
  Node on(Device device) const;
  /// The device the node is pinned to, if any.
  std::optional<Device> device() const;

  /// Graph surgery: makes `producer` input `index` of this node. This is the only way to
  /// form a cycle; compiling a graph with a cycle that no assign breaks is a GraphError.
  void set_input(int index, Node producer) const;
  int num_inputs() const;
  Node input(int index) const;

  friend bool operator==(const Node& a, const Node& b) { return a.g_ == b.g_ && a.id_ == b.id_; }

 private:
  friend struct Graph::Impl;
  Node(Graph::Impl* g, std::uint32_t id) : g_(g), id_(id) {}
  Graph::Impl* g_ = nullptr;
  std::uint32_t id_ = 0;
};

/// Pins every node made in `graph` while it lives to `device` (as Node::on does), gradients
/// that gradients() builds in it included. Scopes nest; the innermost wins; the graph must
/// outlive the scope. See Device.
class DeviceScope {
 public:
  DeviceScope(Graph& graph, Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Graph::Impl* g_;
  std::optional<Device> previous_;
};

// ---- ops ---------------------------------------------------------------------------------
// Binary elementwise ops broadcast numpy-style (rank 0-4). add, sub and mul also take two
// int32s (wrapping around, two's complement); the others take floats.
Node add(Node a, Node b);
Node sub(Node a, Node b);
Node mul(Node a, Node b);
Node div(Node a, Node b);
Node neg(Node x);
Node scale(Node x, float s);                   // s * x
Node axpby(Node x, Node y, float a, float b);  // a*x + b*y, same shapes (optimizer updates)
Node exp(Node x);
Node log(Node x);
Node sqrt(Node x);
/// Rounds down. No gradient flows through floor (its derivative is zero almost everywhere):
/// x - floor(x) differentiates like x, which gives a floor-mod with TensorFlow's gradients.
Node floor(Node x);
Node relu(Node x);
Node sigmoid(Node x);
Node tanh(Node x);
/// Gaussian error linear unit x * Phi(x), with the exact normal CDF
/// Phi(x) = (1 + erf(x / sqrt(2))) / 2 (PyTorch's default gelu, ONNX's Gelu).
Node gelu(Node x);
// More elementwise ops (softsign, prelu, ...): hetgraph/elementwise_ops.hpp, included at the end,
// which the build generates from their rows (src/compiler/ops/elementwise.cpp) and installs
// beside this.
Node abs(Node x);
/// The Gauss error function (ONNX Erf).
Node erf(Node x);
/// Sine and cosine of x in radians (ONNX Sin, Cos); a cosine learning-rate schedule:
///   auto lr = 0.5f * 0.1f * (1.0f + cos(step * (3.14159265f / 1000.0f)));
Node sin(Node x);
Node cos(Node x);
/// The rest of the trigonometric and hyperbolic functions and their inverses (ONNX Tan, Asin,
/// Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh), as the C library defines them: outside an
/// inverse's domain (asin of 2, acosh of 0.5, atanh of 3) the result is NaN. The gradient of
/// asin or acos at +-1 and of atanh at +-1 is infinite.
///   auto angle = atan(y / x);
Node tan(Node x);
Node asin(Node x);
Node acos(Node x);
Node atan(Node x);
Node sinh(Node x);
Node cosh(Node x);
Node asinh(Node x);
Node acosh(Node x);
Node atanh(Node x);
/// x rounded to the nearest integer, halves to the even one (ONNX Round, numpy's round):
/// round(2.5) == 2, round(-1.5) == -2. Like floor, it passes no gradient on.
Node round(Node x);
/// x (float) rounded to the nearest float16 value, halves to even, still held as float32: the
/// values a float16 tensor can hold (to_float16(0.1) == 0.0999755859375; from 65520 on, inf).
/// The gradient passes through unchanged. ONNX models' float16 tensors are computed this way.
Node to_float16(Node x);
/// x (float) rounded to the nearest bfloat16 value (float32's upper half), halves to even.
Node to_bfloat16(Node x);
/// Remainders of a / b, float or int32 (both the same), broadcasting (ONNX Mod). mod's has b's
/// sign (numpy's mod, Python's %: mod(-7, 3) == 2), fmod's a's (C's: fmod(-7, 3) == -1). A
/// float divisor of 0 gives NaN; an int divisor of 0 gives 0 (numpy's), never a trap.
///   auto phase = mod(t, g.constant(6.2831853f));
Node mod(Node a, Node b);
Node fmod(Node a, Node b);
Node fmod(Node a, float b);
/// x for x > 0, alpha * x otherwise (ONNX LeakyRelu; its default alpha is 0.01).
Node leaky_relu(Node x, float alpha = 0.01f);
/// min(max(x, lo), hi) (ONNX Clip): lo > hi gives hi. Bounds are attributes: ONNX Clip-11+
/// takes them as inputs, nearly always constants, whose values become these (a missing
/// bound is -inf or +inf). Bounds computed at run time: minimum(maximum(x, lo), hi).
///   auto relu6 = clip(x, 0.0f, 6.0f);
Node clip(Node x, float lo, float hi);
/// a^b elementwise with broadcasting, C's powf (a < 0 with a non-integer b is NaN).
Node pow(Node a, Node b);
/// Elementwise maximum / minimum with broadcasting (ONNX Max / Min of two inputs): both float
/// or both int32 (an int32 result; no gradient flows into ints).
Node maximum(Node a, Node b);
Node minimum(Node a, Node b);
/// a where cond is nonzero, else b, with numpy broadcasting of all three (ONNX Where).
/// cond is int32 (ONNX's bool); a and b are both float or both int32.
///   auto masked = where(mask, scores, g.constant(-1e9f));
Node where(Node cond, Node a, Node b);
/// Comparisons (ONNX Equal, Less, LessOrEqual, Greater, GreaterOrEqual), broadcasting: int32
/// 1 where a op b holds, else 0 (ONNX's bool). a and b are both float or both int32 (compare
/// ints as ints: cast to float is inexact above 2^24). A NaN compares false, so equal(x, x)
/// is 0 at a NaN. No gradient flows through a comparison.
///   auto hits = reduce_sum(cast(equal(argmax(logits, 1), labels), DType::f32));  // int32 labels
///   auto masked = where(greater(x, g.constant(0.0f)), x, g.constant(0.0f));
Node equal(Node a, Node b);
Node less(Node a, Node b);
Node less_equal(Node a, Node b);
Node greater(Node a, Node b);
Node greater_equal(Node a, Node b);
/// Logic on int32 truth values (nonzero is true; ONNX And, Or, Xor, Not), broadcasting:
/// int32 0 / 1. logical_not(x) is equal(x, 0).
///   auto keep = logical_and(greater(x, lo), less(x, hi));
Node logical_and(Node a, Node b);
Node logical_or(Node a, Node b);
Node logical_xor(Node a, Node b);
Node logical_not(Node x);
/// Converts to `to` (ONNX Cast to float, int32 or int64, which is int32 here). Float to int32
/// rounds toward zero and saturates; NaN becomes 0 (C leaves these undefined; this is Java's,
/// Rust's and OpenCL's convert_int_sat_rtz). Int32 to float rounds to nearest. No gradient
/// flows into ints.
///   auto ids = cast(floor(x * 10.0f), DType::i32);
Node cast(Node x, DType to);
/// The int32 index of the largest (argmax) or smallest (argmin) element along `axis`
/// (negative counts from the back; kAllAxes: the flat index, as torch.argmax without a dim),
/// which is dropped unless keepdims (ONNX ArgMax / ArgMin, whose int64 indices are int32 here).
/// Ties give the first index, or the last with last_index (ONNX select_last_index). NaN wins in
/// both, as in PyTorch: a line holding NaN gives the index of its first NaN (its last with
/// last_index). Float or int32 input; no gradient flows into the indices.
///   auto predicted = argmax(logits);  // [batch, classes] -> [batch] class ids
Node argmax(Node x, int axis = -1, bool keepdims = false, bool last_index = false);
Node argmin(Node x, int axis = -1, bool keepdims = false, bool last_index = false);
/// The int32 indices of the k largest (or, with largest = false, smallest) elements along
/// `axis` (negative counts from the back), best first: x's shape with that axis' size k (ONNX
/// TopK's Indices, whose int64 are int32 here). Equal values keep index order (the lower index
/// first). NaN counts as larger than every number, as in numpy's sort, PyTorch's topk and
/// ONNX's reference: NaNs come first with largest, last with smallest (unlike argmin, where NaN
/// wins); -0 equals +0. k must lie in [1, size of the axis] (ShapeError at compile time).
/// Float or int32 x; no gradient flows into the indices. The same indices on every platform and
/// thread count.
///   auto best5 = top_k_indices(logits, 5);  // [batch, classes] -> [batch, 5] class ids
Node top_k_indices(Node x, std::int64_t k, int axis = -1, bool largest = true);
/// ONNX TopK's two outputs: the indices above and values = gather_elements(x, indices, axis),
/// so the gradient reaches float x through gather_elements' (each picked element gets the
/// gradient of its value, the others none).
///   auto [scores, ids] = top_k(logits, 3);  // the 3 best scores and their class ids
struct TopK {
  Node values;
  Node indices;
};
TopK top_k(Node x, std::int64_t k, int axis = -1, bool largest = true);
// NaN: every op propagates NaN as PyTorch and ONNX do: relu, clip, maximum/minimum, the max
// reductions and max pooling return NaN where an input is NaN.

/// op(a) @ op(b) where op transposes the last two dims when asked. Rank 2 x rank 2, or
/// batched: rank 3 x rank 3 (same batch) or rank 3 x rank 2 (b shared by the batch).
Node matmul(Node a, Node b, bool transpose_a = false, bool transpose_b = false);

inline constexpr int kAllAxes = INT_MIN;
/// Reductions over one axis (negative counts from the back) or, by default, all axes.
Node reduce_sum(Node x, int axis = kAllAxes, bool keepdims = false);
Node reduce_mean(Node x, int axis = kAllAxes, bool keepdims = false);
Node reduce_max(Node x, int axis = kAllAxes, bool keepdims = false);
/// The product along the axis, multiplied in order (as numpy's float32 prod); its gradient is
/// the product of the line's other elements, exact where the line holds zeros.
///   auto p = reduce_prod(x, 1, /*keepdims=*/true);
Node reduce_prod(Node x, int axis = kAllAxes, bool keepdims = false);
/// Running sums along `axis`, float or int32 (ints wrap around): element j is x[0] + ... + x[j]
/// (exclusive: up to x[j - 1], the first 0; reverse: from the back). Added in order, so the
/// result is the same on every platform and team size.
///   auto seen = cumsum(mask, 1, /*exclusive=*/true);  // int32 mask: the 1s before each element
Node cumsum(Node x, int axis, bool exclusive = false, bool reverse = false);

Node softmax(Node x, int axis = -1);
Node log_softmax(Node x, int axis = -1);
/// Per-row cross-entropy -sum(labels * log(probs)) over the last axis. `labels` is either
/// float with the shape of `probs` (one-hot or soft) or int32 class ids with the shape of
/// `probs` minus its last axis. The result has the shape of `probs` minus its last axis.
Node cross_entropy(Node probs, Node labels);
/// Inverted dropout (PyTorch's Dropout in training mode): each element of x is kept with
/// probability 1 - p and scaled by 1 / (1 - p), or else zeroed (x * 0: a NaN stays NaN).
/// The mask is a counter-based hash of (seed, step, element index), so it is the same on
/// every platform and thread count, is never stored (the gradient, dropout of the incoming
/// gradient with the same step, recomputes it), and changes with `step`: a float scalar node,
/// usually the optimizer's step counter, so each run draws a new mask without recompiling.
/// p in [0, 1] (1 zeroes everything), else UsageError; step must be a float of one element
/// (ShapeError at compile time). Inference is the identity: see nn::dropout in layers.hpp.
///   Node step = step_counter(g);
///   auto h = dropout(relu(matmul(x, W1)), step, 0.25f, /*seed=*/7);
///   Node train = minimize(loss, params, Optimizer::adam(1e-3f), {.step = step});
Node dropout(Node x, Node step, float p, std::uint64_t seed);

Node slice(Node x, int axis, std::int64_t begin, std::int64_t end);
/// ONNX Slice: along each of `axes` (default 0, 1, ...), from starts[i] toward ends[i] (not
/// included) by steps[i] (default 1; negative steps walk backwards). Negative starts and ends
/// count from the back; out-of-range ones clamp (so INT64_MAX means "to the end"). An empty
/// result is a ShapeError. x may be float or int32.
///   auto rev = strided_slice(x, {-1}, {INT64_MIN}, {1}, {-1});   // axis 1 reversed
Node strided_slice(Node x, std::vector<std::int64_t> starts, std::vector<std::int64_t> ends,
                   std::vector<std::int64_t> axes = {}, std::vector<std::int64_t> steps = {});
Node concat(std::span<const Node> xs, int axis);
Node concat(std::initializer_list<Node> xs, int axis);
/// Permutes axes; an empty perm swaps the last two.
Node transpose(Node x, std::vector<int> perm = {});
/// One entry may be -1 (inferred). Reshape is a view: no data is copied.
Node reshape(Node x, std::vector<std::int64_t> shape);

// ---- images and embeddings ---------------------------------------------------------------
// Images are NCHW float tensors [batch, channels, height, width]; pairs are (height, width).

/// ONNX auto_pad: padding derived from the input size when the graph is compiled. SAME pads so
/// that the output has ceil(in / stride) rows and columns, the odd one at the end (same_upper)
/// or at the start (same_lower); valid pads nothing. Explicit padding must then be 0.
enum class AutoPad : std::uint8_t { none, same_upper, same_lower, valid };

/// Options of conv2d. Zero padding is added before (top, left) and after (bottom, right); by
/// default the same amount on both sides. Dilation 1 is a dense kernel. `groups` splits the
/// channels into independent convolutions (groups = C = O: depthwise).
///   auto y = conv2d(x, W, b, {.stride = {2, 2}, .padding = {1, 1}});
///   auto dw = conv2d(x, Wd, {.padding = {1, 1}, .groups = 32});   // Wd [32, 1, 3, 3]
struct Conv2dOptions {
  std::array<int, 2> stride{1, 1};
  std::array<int, 2> padding{0, 0};
  std::array<int, 2> padding_end{-1, -1};  // -1: the same as `padding`
  std::array<int, 2> dilation{1, 1};
  int groups = 1;
  AutoPad auto_pad = AutoPad::none;
  /// Exact sums for integer-valued data: no Winograd algorithm, whose transforms round. Every
  /// output's partial sums are exact in float32 while they stay below 2^24 (ONNX's integer
  /// convolutions run this way, in chunks of at most 256 taps of 8-bit values).
  bool exact = false;
};
/// Cross-correlation of x [N, C, H, W] with weights [O, C / groups, KH, KW], plus an optional
/// bias [O] per output channel: [N, O, OH, OW] with
/// OH = (H + pad_top + pad_bottom - ((KH - 1) * dilation + 1)) / stride + 1 (OW alike).
Node conv2d(Node x, Node weights, Conv2dOptions options = {});
Node conv2d(Node x, Node weights, Node bias, Conv2dOptions options = {});

/// Options of conv_transpose2d (ONNX ConvTranspose with explicit pads; its output_shape and
/// auto_pad turn into pads given the input and kernel sizes). output_padding adds rows and
/// columns at the end and must be smaller than the stride.
struct ConvTranspose2dOptions {
  std::array<int, 2> stride{1, 1};
  std::array<int, 2> padding{0, 0};
  std::array<int, 2> padding_end{-1, -1};  // -1: the same as `padding`
  std::array<int, 2> dilation{1, 1};
  std::array<int, 2> output_padding{0, 0};
  int groups = 1;
};
/// The transpose of conv2d (the gradient of a convolution with respect to its input) of
/// x [N, C, H, W] with weights [C, O / groups, KH, KW], plus an optional bias [O]:
/// [N, O, OH, OW] with OH = stride * (H - 1) + output_padding + (KH - 1) * dilation + 1 -
/// pad_top - pad_bottom (OW alike).
///   auto up = conv_transpose2d(x, W, b, {.stride = {2, 2}, .padding = {1, 1}, .output_padding =
///   {1, 1}});
Node conv_transpose2d(Node x, Node weights, ConvTranspose2dOptions options = {});
Node conv_transpose2d(Node x, Node weights, Node bias, ConvTranspose2dOptions options = {});

/// Options of max_pool2d and avg_pool2d. Padding must be smaller than the kernel, and every
/// window must hold an element of the image: with dilation or ceil_mode, a window whose taps
/// all fall in the padding is a ShapeError.
///   auto p = max_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
struct Pool2dOptions {
  std::array<int, 2> kernel{2, 2};
  std::array<int, 2> stride{0, 0};  // 0: the kernel size (non-overlapping windows)
  std::array<int, 2> padding{0, 0};
  std::array<int, 2> padding_end{-1, -1};  // -1: the same as `padding`
  /// avg_pool2d: divide by the whole window (padding counts as zeros) instead of by the
  /// number of image elements in it (the default, which ignores padding). With ceil_mode, the
  /// part of the last window past the end padding never counts.
  bool count_include_pad = false;
  /// The output size rounds up: a last, partial window (ONNX ceil_mode; see the note on
  /// max_pool2d).
  bool ceil_mode = false;
  std::array<int, 2> dilation{1, 1};  // max_pool2d only
  AutoPad auto_pad = AutoPad::none;
};
/// Maximum over each window of x [N, C, H, W] (padding never wins; NaN propagates): [N, C,
/// OH, OW]. Every window must hold an image element: with ceil_mode, a last window wholly in
/// the padding (which ONNX 1.12's shape rule keeps and PyTorch drops) is a ShapeError.
Node max_pool2d(Node x, Pool2dOptions options = {});
/// Mean over each window of x [N, C, H, W]: [N, C, OH, OW].
Node avg_pool2d(Node x, Pool2dOptions options = {});

/// Rows of `table` [R, D] picked by the int32 `indices` (any shape S of rank <= 3): the result
/// has shape S + [D]. An index outside [0, R) is a FeedError at run(). The gradient with
/// respect to the table is a scatter-add of the incoming rows into a zero [R, D] table.
///   auto ids = g.input("ids", DType::i32);                 // [batch]
///   auto e = embedding(g.variable("E", {10000, 32}), ids);  // [batch, 32]
Node embedding(Node table, Node indices);

/// ONNX Gather: slices of `x` along `axis` picked by the int32 `indices` (any shape S):
/// x.shape[:axis] + S + x.shape[axis+1:], rank 8 at most. An index may be negative (counting
/// from the back); one outside [-n, n) for the axis' size n is a FeedError at run(). x may be
/// float or int32; the gradient with respect to float x is a scatter-add.
///   auto cols = gather(x, g.constant_i32({2}, {0, -1}), 1);   // first and last columns
Node gather(Node x, Node indices, int axis = 0);

/// ONNX GatherElements: out[p] = x[p with p[axis] replaced by indices[p]] for every position p
/// of the int32 `indices`, which have x's rank (1 to 4) and on every other axis a dim no larger
/// than x's (no broadcasting): the result has the indices' shape and x's type (float or
/// int32). An index may be negative (counting from the back); one outside [-n, n) for the
/// axis' size n is a FeedError at run(). The gradient with respect to float x is a
/// deterministic scatter-add (repeated indices sum in index order, for any thread count).
///   auto picked = gather_elements(scores, labels, 1);   // labels [N, 1]: scores[i, labels[i]]
Node gather_elements(Node x, Node indices, int axis = 0);

/// How scatter_elements combines an update with the value it lands on.
enum class ScatterReduction : std::uint8_t { none, add, mul };

/// ONNX ScatterElements: a copy of `data` in which, for every position p of the int32
/// `indices`, the element at p with p[axis] replaced by indices[p] becomes updates[p] (none),
/// or that value plus (add) or times (mul) updates[p]. `indices` and `updates` have one shape,
/// of data's rank and on every other axis no larger than data's; updates have data's type
/// (float or int32; int32 add and mul wrap around). Indices as in gather_elements. Several
/// updates landing on one element apply in row-major order of the indices: with none the
/// last one wins (ONNX leaves that undefined). Gradients (float data): none gives data the
/// incoming gradient with the written elements zeroed, and every update the gradient of the
/// element it lands on (also a repeated one that lost, as PyTorch's scatter does); add gives
/// data the incoming gradient and updates the same gather; mul is not differentiable.
///   auto y = scatter_elements(x, idx, upd, 1, ScatterReduction::add);
Node scatter_elements(Node data, Node indices, Node updates, int axis = 0,
                      ScatterReduction reduction = ScatterReduction::none);

/// Writes `value` into `variable` at the end of a run (after every read of its old value).
Node assign(Node variable, Node value);
/// A node that completes when all of `nodes` have; no data.
Node group(std::span<const Node> nodes);
Node group(std::initializer_list<Node> nodes);

// Operators. A float operand becomes a scalar constant (or a scale for *).
Node operator+(Node a, Node b);
Node operator-(Node a, Node b);
Node operator*(Node a, Node b);
Node operator/(Node a, Node b);
Node operator-(Node x);
Node operator+(Node a, float b);
Node operator+(float a, Node b);
Node operator-(Node a, float b);
Node operator-(float a, Node b);
Node operator*(Node a, float b);
Node operator*(float a, Node b);
Node operator/(Node a, float b);
Node operator/(float a, Node b);

}  // namespace hetgraph

// The elementwise ops declared by their rows alone (above: "More elementwise ops").
#include "hetgraph/elementwise_ops.hpp"
