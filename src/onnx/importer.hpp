// SPDX-License-Identifier: Apache-2.0
// Building a hetgraph Graph from an ONNX model (ir::Model), for concrete input shapes.
//
// Every ONNX value is either known at import (a constant: an initializer, a Constant node, or
// something computed from those and from shapes, e.g. Shape -> Gather -> Concat) or computed
// at run time by a node of the graph. Ops whose inputs are all known are evaluated here
// (fold.cpp); the others are composed from hetgraph ops by one handler per ONNX op
// (ops_*.cpp). Shapes of graph nodes come from the compiler's own shape rules (the OpDefs), so
// a handler can look at what it built.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/ops.hpp"
#include "hetgraph/onnx.hpp"
#include "onnx/ir.hpp"

namespace hetgraph::onnx {

struct Model::Source {
  std::shared_ptr<const ir::Model> model;  // shared by the models with_shapes() builds
  ImportOptions options;
};

namespace imp {

using detail::TensorType;
using Dims = std::vector<std::int64_t>;

/// An ONNX value during import: a graph node or a tensor known now.
struct Value {
  Node node;                                // valid once it exists in the graph
  std::shared_ptr<const ir::Tensor> konst;  // set when the value is known at import
  int elem = ir::kFloat;                    // its ONNX element type
  bool initializer = false;                 // konst is a float initializer: a variable
  /// A layout chain through ranks above 4 (a Reshape to rank 6 and a Transpose, PixelShuffle's
  /// and channel shuffle's way), which hetgraph tensors cannot hold: the value is the elements
  /// of `view_base` (flattened) at these int64 positions, shaped as view->dims. It becomes one
  /// gather when a node needs it (Ctx::node). `node` and `konst` are unset.
  std::shared_ptr<const ir::Tensor> view;
  Node view_base;
  /// A sequence (SequenceConstruct, SplitToSequence, ...): its tensors, a list known at import
  /// (positions into it must be known there too). `elem` is its tensors' element type.
  std::shared_ptr<const std::vector<Value>> seq;
  /// Computed at run time from this model input only through ops the import computes when
  /// their inputs are known: giving the input's value at import makes this value known.
  std::string from_input;
  bool known() const { return konst != nullptr; }
};

class Importer;

/// What a handler sees of one ONNX node.
/// Tensors computed on the host while importing (folded shapes, position tables, masks,
/// zeros) hold at most this many elements: anything bigger comes from a damaged or hostile
/// model's dims, and would take gigabytes before the graph is even built.
inline constexpr std::int64_t kMaxImportElements = std::int64_t{1} << 28;

class Ctx {
 public:
  Ctx(Importer& im, const ir::Node& n) : im(im), n(n), version(n.since) {}

  Importer& im;
  const ir::Node& n;
  const int version;  // the op's schema version in effect

  // ---- inputs
  std::size_t inputs() const { return n.inputs.size(); }
  bool has(std::size_t i) const { return i < n.inputs.size() && !n.inputs[i].empty(); }
  const Value& in(std::size_t i) const;
  bool known(std::size_t i) const { return has(i) && in(i).known(); }
  /// Input i as a graph node (a known value becomes a constant, or its variable).
  Node node(std::size_t i);
  /// Input i as a float node: int inputs are an UnsupportedError (hetgraph computes in float).
  Node f32(std::size_t i);
  Dims dims(std::size_t i) const;
  int rank(std::size_t i) const { return static_cast<int>(dims(i).size()); }
  int elem(std::size_t i) const { return in(i).elem; }
  /// Input i's values, which must be known at import (`what` says what they are).
  const ir::Tensor& known_tensor(std::size_t i, std::string_view what) const;
  Dims ints(std::size_t i, std::string_view what) const;
  std::vector<float> floats(std::size_t i, std::string_view what) const;

  // ---- attributes
  bool has_attr(const std::string& name) const { return n.attrs.count(name) != 0; }
  std::int64_t attr_i(const std::string& name, std::int64_t def) const;
  float attr_f(const std::string& name, float def) const;
  std::string attr_s(const std::string& name, const std::string& def) const;
  Dims attr_ints(const std::string& name, Dims def = {}) const;
  std::vector<float> attr_floats(const std::string& name) const;
  const ir::Tensor* attr_t(const std::string& name) const;
  /// The body held by graph attribute `name` (If's branches, Loop's and Scan's body).
  const ir::Graph& attr_g(const std::string& name) const;

  // ---- bodies (control flow, unrolled at import)
  /// Imports `body` once with its inputs bound to `args`, and gives the values of its outputs.
  /// Names the body defines hide the same names around it only while it is imported, so a
  /// body can be imported many times (a loop's iterations); it reads other values of the
  /// graphs around it by name, as ONNX's scoping says.
  std::vector<Value> run_body(const ir::Graph& body, std::vector<Value> args);
  /// The value named `name` (an ONNX value computed before this node) as a graph node.
  Node node_named(const std::string& name);
  /// A graph node for `v` (a value a body gave): its node, or a constant made of it.
  Node node_of(const Value& v);
  /// Output k is `v` (a value a body gave).
  void set(std::size_t k, const Value& v);

  // ---- outputs
  std::size_t outputs() const { return n.outputs.size(); }
  bool wants(std::size_t k) const { return k < n.outputs.size() && !n.outputs[k].empty(); }
  /// Output k is node v, of ONNX type `elem`; by default a float of the type its float inputs
  /// have (float16 in, float16 out).
  void set(std::size_t k, Node v, int elem = ir::kUndefined);
  void set(std::size_t k, ir::Tensor t);
  /// The output passes input i through unchanged (Identity, Dropout at inference).
  void alias(std::size_t k, std::size_t i);

  // ---- building
  Graph& graph() const;
  const ImportOptions& options() const;
  /// A trainable variable made at import (e.g. weights with a batch norm folded in).
  Node variable(const std::string& name, const Dims& dims, std::vector<float> values);
  /// The model's step counter for training-mode Dropout masks (advanced after every run).
  Node dropout_step();
  /// The one node that reads output k (nullptr when it has no or several readers, or is a
  /// graph output).
  const ir::Node* sole_consumer(std::size_t k) const;
  /// Marks a later node as done by this one (a folded batch norm): it passes its input on.
  void absorb(const ir::Node& later);
  bool absorbed() const;
  TensorType type(Node v) const;
  Dims shape(Node v) const;
  Node constant(float v);
  Node constant(const Dims& dims, std::vector<float> values);
  Node reshape(Node v, const Dims& dims);
  /// Names a node built for this ONNX node after it ("<its name, or else its first output's>/
  /// <op>/<what>", made unique), so that a run-time error in it (an index check's FeedError)
  /// says which ONNX node it serves.
  void label(Node v, std::string_view what);

  /// `n` values for a constant this node builds at import, filled with `fill`; above
  /// kMaxImportElements (or negative) an UnsupportedError naming the node.
  template <class T>
  std::vector<T> host(std::int64_t n, T fill = T{}) const {
    host_check(n);
    return std::vector<T>(static_cast<std::size_t>(n), fill);
  }
  void host_check(std::int64_t n) const;
  /// ONNX nodes the import may still add (ImportOptions::max_nodes less those added so far).
  std::int64_t nodes_left() const;

  /// The model asks for something hetgraph does not do (UnsupportedError naming the node).
  [[noreturn]] void unsupported(const std::string& why) const;
  /// The model is inconsistent (ShapeError naming the node).
  [[noreturn]] void fail(const std::string& why) const;
  /// Axis in [-rank, rank) normalised; out of range is fail().
  int axis(std::int64_t a, int rank) const;
};

using HandlerFn = void (*)(Ctx&);
struct Handler {
  std::string_view op;
  int min_since = 1, max_since = 17;  // schema versions this handler implements
  HandlerFn fn = nullptr;
  std::string_view domain{};  // "" for ONNX's own (ai.onnx)
};

/// Every handler of ops_*.cpp.
const std::vector<Handler>& handlers();
const Handler* find_handler(const std::string& op, int since, const std::string& domain = "");
void register_math_ops(std::vector<Handler>& h);
void register_reduce_ops(std::vector<Handler>& h);
void register_linalg_ops(std::vector<Handler>& h);
void register_signal_ops(std::vector<Handler>& h);
void register_quant_ops(std::vector<Handler>& h);
void register_training_ops(std::vector<Handler>& h);
void register_tensor_ops(std::vector<Handler>& h);
void register_nn_ops(std::vector<Handler>& h);
void register_rnn_ops(std::vector<Handler>& h);
void register_control_ops(std::vector<Handler>& h);

/// Evaluates node `n` at import when all its inputs are known and its op is one fold.cpp
/// implements; false otherwise (the node then gets graph nodes).
bool fold(Ctx& c);
/// Ops fold() implements (for ops with no handler: they work only on known inputs).
bool foldable(std::string_view op);

/// Tensors known at import: layout and arithmetic on their values (fold.cpp), with ONNX's
/// semantics. Handlers of layout ops use these when their data input is known.
namespace host {
ir::Tensor with_dims(const ir::Tensor& t, Dims dims);
ir::Tensor transpose(const ir::Tensor& t, const Dims& perm);
/// Elements at `index` (already in range) along `axis`; index dims replace that axis.
ir::Tensor gather(const ir::Tensor& t, int axis, const Dims& index, const Dims& index_dims);
ir::Tensor concat(const std::vector<const ir::Tensor*>& ts, int axis);
/// Per axis: start, step and count of the elements kept (steps may be negative).
ir::Tensor slice(const ir::Tensor& t, const Dims& start, const Dims& step, const Dims& count);
ir::Tensor broadcast_to(const ir::Tensor& t, const Dims& dims);
ir::Tensor scalar_ints(const Dims& values, int elem = ir::kInt64);  // rank 1
/// A value of no elements (a zero dim): known at import whatever computes it.
ir::Tensor empty(int elem, Dims dims);
}  // namespace host

/// Builds the graph of `src` for its options into `out`.
void build(const std::shared_ptr<const Model::Source>& src, Model& out);
/// Fills what `out` says about the model without building it (opset, producer, ops).
void describe(const std::shared_ptr<const Model::Source>& src, Model& out);
Dims declared_dims(const ir::ValueInfo& v);
std::vector<std::string> dim_names(const ir::ValueInfo& v);

// ---- small helpers shared by the handler files
Dims broadcast(const Dims& a, const Dims& b, const Ctx& c);
std::int64_t numel(const Dims& d);
std::string dims_str(const Dims& d);
/// y = x broadcast to `dims` (numpy rules; x * 1 with a ones tensor over the new dims).
Node broadcast_to(Ctx& c, Node x, const Dims& dims);
/// A float tensor of the given shape and values, checked for hetgraph's rank limit.
Node float_constant(Ctx& c, const Dims& dims, std::vector<float> values);
/// 0, 1, ..., n - 1 along `axis` of a rank-`rank` int32 constant (1 along every other axis),
/// minus `shift`: positions to compare or compute with.
Node iota_along(Ctx& c, int rank, int axis, std::int64_t n, std::int64_t shift = 0);
/// A value known at import.
Value known_value(ir::Tensor t);
/// Input i laid out as `dims` (any rank) by positions into it: a Value::view.
Value view_of(Ctx& c, std::size_t i, const Dims& dims);
/// 8- and 16-bit ints (held as int32 here).
bool narrow_int(int elem);
/// r (int32) brought into `elem`'s range as ONNX's wrapping arithmetic would leave it (uint8
/// 200 + 100 is 44): a mod by 2^8 or 2^16.
Node wrap_to(Ctx& c, Node r, int elem);
/// min over `axis` (kAllAxes: all) as -max of -x: exact (negation is), NaN included
/// (ops_reduce.cpp; ReduceMin, and DynamicQuantizeLinear's range).
Node reduce_min_of(Node x, int axis, bool keepdims);
// ---- quantization (ops_quant.cpp)
/// The range of a quantized element type: uint8 or int8 (others: UnsupportedError).
std::pair<float, float> quantized_range(Ctx& c, int elem);
/// Input i (a scale or zero point) as float, shaped to broadcast against a rank-`rank_x` x: a
/// scalar as it is, a 1-D tensor along attribute `axis` (per-axis quantization).
Node quantization_param(Ctx& c, std::size_t i, int rank_x);
/// saturate(round(x / scale) + zero_point) as int32 words.
Node quantize(Node x, Node scale, Node zero_point, std::pair<float, float> range);
/// saturate(round(x * scale) + zp), as `elem`'s int32 words (zp: int32, broadcasting).
Node requantize(Ctx& c, Node x, Node scale, Node zp, int elem);
/// a . b of int32 values of magnitude up to 255, exactly (float products of 256-term chunks).
/// `b_host`, when given, holds a rank-2 b's values (known at import): each chunk of b is then a
/// constant made at import, not per-run work.
Node exact_int_matmul(Ctx& c, Node a, Node b, const std::vector<float>* b_host = nullptr);
/// Input i (8-bit, known at import) less its zero point (input zp, optional; known too), as
/// floats: element k takes zero point number (k / inner) % count (count 1: one for all).
/// Empty when either is not known at import.
std::vector<float> known_less_zero_point(Ctx& c, std::size_t i, std::size_t zp, std::int64_t inner,
                                         std::int64_t count);

/// A float zero that, when computed, checks the int32 `ids` against [0, n): a FeedError naming
/// this ONNX node's `what` (the check_indices op, named by Ctx::label). Add it to a node that
/// needs the ids checked first; the exporter writes it as a gather, so the check round-trips.
Node index_check(Ctx& c, Node ids, std::int64_t n, std::string_view what);

}  // namespace imp
}  // namespace hetgraph::onnx
