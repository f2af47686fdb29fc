// SPDX-License-Identifier: Apache-2.0
// An ONNX model as plain C++ values: what proto.cpp reads out of (and writes into) ONNX's
// protobuf classes. Everything else in src/onnx works on these, so protobuf headers stay in
// one translation unit and out of every public header.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hetgraph::onnx::ir {

/// ONNX TensorProto.DataType values.
enum Elem : int {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBfloat16 = 16,
};
/// "float", "int64", ... as ONNX names them.
const char* elem_name(int elem);
/// Integer and boolean types: their values are held as int64.
bool is_integral(int elem);
/// float, float16, bfloat16 and double: hetgraph computes them in float32 (the narrower ones
/// hold their own values, rounded where they are made: inputs, initializers, casts; double
/// only with ImportOptions::float64_as_float32, rounded to float32).
bool held_as_float(int elem);
/// v rounded to the values of `elem` (float16, bfloat16); v itself for other types.
float round_to_elem(float v, int elem);

/// A tensor's values: float32 ones in `f`, integral and boolean ones in `i`.
struct Tensor {
  std::string name;
  int elem = kFloat;
  std::vector<std::int64_t> dims;
  std::vector<float> f;
  std::vector<std::int64_t> i;
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : dims) n *= d;
    return n;
  }
};

/// One dim of a declared shape: a value, a named parameter ("batch"), or unknown.
struct Dim {
  std::int64_t value = -1;  // -1: not a fixed size
  std::string param;
};

struct ValueInfo {
  std::string name;
  int elem = kUndefined;
  bool has_shape = false;
  std::vector<Dim> dims;
  std::string non_tensor;  // "sequence", "optional", ...: a value that is not a tensor
                           // (a sequence of tensors: `elem` is its tensors' type)
};

struct Graph;

struct Attr {
  enum Kind : int {
    kNone,
    kFloatA,
    kIntA,
    kStringA,
    kTensorA,
    kFloats,
    kInts,
    kStrings,
    kGraphA,
    kOther
  };
  Kind kind = kNone;
  float f = 0;
  std::int64_t i = 0;
  std::string s;
  std::shared_ptr<const Tensor> t;
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
  std::shared_ptr<const Graph> g;  // kGraphA: a body (If's branches, Loop's and Scan's body)
  std::string other;               // kOther: the attribute type's name (graph, sparse tensor, ...)
};

struct Node {
  std::string op, domain, name;
  int since = 0;           // the op's schema version in effect under the model's opset (0: unknown)
  std::int64_t opset = 0;  // the opset of its domain it is read under (a function's own)
  std::vector<std::string> inputs, outputs;  // "" marks an omitted optional input
  std::map<std::string, Attr> attrs;
  /// "'name' (Op-13)" or "#k (Op-13)" for messages.
  std::string label;
};

/// The model's graph, or a body of a node (a subgraph: it may read the values of the graphs
/// around it by name).
struct Graph {
  std::string name;
  std::vector<Node> nodes;  // as the model lists them (topologically sorted, per ONNX)
  std::vector<ValueInfo> inputs, outputs;
  std::vector<Tensor> initializers;
};

struct Model {
  std::int64_t ir_version = 0;
  std::map<std::string, std::int64_t> opsets;  // domain ("" is ONNX) -> version
  std::string producer_name, producer_version, doc;
  Graph graph;
  std::vector<std::string>
      ops;  // op types as written, bodies' included (before function expansion)
  /// Where the model came from, for messages: a path or "<bytes>".
  std::string source;
};

/// Reads a model (binary protobuf), runs onnx::checker on it when `check`, and converts it.
/// Tensors stored as external data are read relative to `base_dir`. Errors are DataErrors
/// naming `source`.
Model parse_model(const void* data, std::size_t size, const std::string& source,
                  const std::string& base_dir, bool check);
/// The same from a file's bytes, which it frees once parsed: the bytes, the protobuf and the
/// converted tensors are never all alive at once (peak memory about twice the weights, not
/// three times).
Model parse_model(std::string&& bytes, const std::string& source, const std::string& base_dir,
                  bool check);

/// A value's type as the importer knows it when it reaches a node.
struct TypeInfo {
  int elem = kUndefined;
  std::vector<std::int64_t> dims;  // -1: unknown
  bool has_shape = false;
};

/// Whether ONNX defines this op version as a function (a body of other ops).
bool has_function(const std::string& domain, const std::string& op, int since);
/// The body that replaces node `n`: ONNX's function for its op (or the body ONNX builds for
/// these input types), values renamed into the caller's (the body's own made unique with
/// `serial`), attributes resolved, versions under the function's opset. Empty when none.
std::vector<Node> function_body(const Node& n, const std::vector<TypeInfo>& input_types, int serial,
                                const std::string& source);
/// ONNX's shape inference on `m` with its inputs of these types: the type of each graph
/// output (has_shape false where ONNX infers none; empty when inference itself fails). Run
/// only on models hetgraph has built, whose nodes it has already checked: ONNX 1.12's
/// inference crashes on some malformed nodes (strides of 0, RNN inputs of the wrong rank).
std::vector<TypeInfo> infer_output_types(const Model& m,
                                         const std::map<std::string, TypeInfo>& inputs);

/// Serialises a model (the exporter's), after onnx::checker accepted it; the bytes of a
/// ModelProto.
std::string serialize_model(const Model& m);

/// The bytes of the file at `path` (`what` says what it is, for errors): only a regular file
/// of at most `max_bytes` (a FIFO would block the import, a device such as /dev/zero never
/// ends). DataErrors name `path`; `too_large` says what to do about a larger file.
std::string read_regular_file(const std::string& path, const std::string& what,
                              std::int64_t max_bytes, const std::string& too_large = "");

/// A TensorProto file (the ONNX backend tests' input_N.pb / output_N.pb).
Tensor parse_tensor(const void* data, std::size_t size, const std::string& source);
std::string serialize_tensor(const Tensor& t);

}  // namespace hetgraph::onnx::ir
