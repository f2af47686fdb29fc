// SPDX-License-Identifier: Apache-2.0
// ONNX models in and out: import a model.onnx as a Graph, export a Graph as one, and read and
// write the ONNX backend tests' TensorProto (.pb) files.
//
//   namespace ho = hetgraph::onnx;
//   ho::Model m = ho::import("resnet.onnx", {.input_shapes = {{"x", {1, 3, 224, 224}}}});
//   hetgraph::CompiledGraph cg = m.compile(hetgraph::GraphCompiler(hetgraph::Platform::cpu()));
//   ho::TensorData x = ho::read_tensor("input_0.pb");
//   cg.run({{"x", x.f32}});
//   std::vector<float> y = cg.read(m.outputs[0]);          // or cg.read("output name")
//
//   // Initializers are variables: an imported model can be fine-tuned.
//   auto loss = reduce_mean(cross_entropy(softmax(m.outputs[0]), m.graph.input("y", DType::i32)));
//   auto step = hetgraph::sgd(loss, m.variables, 0.01f);
//
//   // And back out: the graph with the trained values of a compiled graph.
//   ho::export_model(m.graph, m.outputs, m.input_shapes, "tuned.onnx", {.values = &cg});
//
// Import parses with ONNX's own library (protobuf classes, onnx::checker, ONNX shape
// inference; ops ONNX defines as functions are expanded into their bodies). Dynamic input
// dims take their sizes from the input shapes given to import() or Model::compile(); the graph
// is built for concrete shapes, so shape computations (Shape -> Gather -> Concat -> Reshape,
// as exporters write them) are folded away while it is built. int64 and bool tensors are held
// as int32 (feed them as int32). A model with ops hetgraph cannot run is an UnsupportedError
// listing every such op type with its opset version at once.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hetgraph/compiler.hpp"
#include "hetgraph/dynamic.hpp"
#include "hetgraph/error.hpp"
#include "hetgraph/graph.hpp"

namespace hetgraph::onnx {

/// A model, or a part of one, that hetgraph cannot run: an op type or op version it does not
/// have, an element type other than float32 / int32 / int64 / bool, a tensor of rank above 4
/// or an attribute value it does not implement. The message lists every unsupported op type of
/// the model (with its version), or names the node and what it needs.
class UnsupportedError : public Error {
 public:
  using Error::Error;
  UnsupportedError(const std::string& what, std::string input)
      : Error(what), input_(std::move(input)) {}
  /// Set when the model is unsupported only because hetgraph needs the values of this input
  /// when the graph is built (a Reshape's shape, Slice's starts, ... fed as an input): give
  /// them in ImportOptions::input_values and it imports.
  const std::string& input_needed() const { return input_; }

 private:
  std::string input_;
};

struct TensorData;

struct ImportOptions {
  /// Shapes of the model's inputs, by name: required for dynamic dims (symbolic or unknown),
  /// checked against the fixed ones. Inputs not named keep the shapes the model declares.
  InputShapes input_shapes{};
  /// Size given to dynamic dims of inputs not in `input_shapes`; 0: such a dim is an error.
  std::int64_t dynamic_dim = 0;
  /// Inputs whose values are fixed when the graph is built: they become constants (and are
  /// no longer inputs), so computations on them fold. For inputs that are parameters, such
  /// as the axes, shapes and pads some models take as inputs.
  std::vector<std::pair<std::string, std::shared_ptr<const TensorData>>> input_values{};
  /// Inputs that carry state from one run to the next, each with the output that gives its
  /// next value: {"past_k0", "present_k0"} makes past_k0 a variable (zeros at first, in the
  /// platform's memory: on an OpenCL device it stays there) that every run overwrites with
  /// present_k0 once the run's other nodes are done, as a decoder's key/value cache is fed back
  /// token after token. Such an input is not fed; read, write or reset it by name as a
  /// variable (and checkpoints hold it). Both must be float and of the same shape; an input or
  /// output the model lacks is a ShapeError naming it.
  ///   ImportOptions o;
  ///   o.state = {{"past_k0", "present_k0"}, {"past_v0", "present_v0"}};
  std::vector<std::pair<std::string, std::string>> state{};
  /// Inputs that are sequences of tensors, by name: the shapes of their tensors, in order.
  /// Each tensor is an input of its own, named "<name>[k]" (input_info lists them); an output
  /// that is a sequence is likewise one output per tensor, "<name>[0]", "<name>[1]", ...
  ///   o.sequence_shapes = {{"frames", {Shape{3, 4}, Shape{5, 4}}}};
  ///   ... cg.run({{"frames[0]", a}, {"frames[1]", b}});
  std::vector<std::pair<std::string, std::vector<Shape>>> sequence_shapes{};
  /// Run onnx::checker on the model first.
  bool check = true;
  /// Hold float64 (double) tensors as float32, as float16 and bfloat16 are held: their values
  /// rounded to float32, every op computed in float32, outputs read as floats. Off, a model
  /// with a double anywhere (an input, an initializer, a Cast to double) is an UnsupportedError
  /// naming it: the precision it asks for is not what hetgraph computes.
  bool float64_as_float32 = false;
  /// Fold an inference BatchNormalization into the Conv before it (its weights and bias are
  /// rescaled once, at import).
  bool fold_batch_norm = true;
  /// A tensor viewed through ranks above Shape::kMaxRank (Reshape, Transpose, Reshape) becomes
  /// one transpose of rank 8 at most where its elements' order is one; false: always a gather
  /// of its positions (one index read per element).
  bool views_as_transposes = true;
  /// Budgets of the whole import, against damaged or hostile models (a few hundred bytes of
  /// loops nested in loops unroll to billions of nodes). Over one, import is an
  /// UnsupportedError (ShapeError for a tensor's size) naming the model and the budget; raise
  /// it here for a model that needs more.
  /// ONNX nodes imported in all: each iteration of an unrolled Loop or Scan, each branch taken
  /// and each function body counts its nodes again.
  std::int64_t max_nodes = std::int64_t{1} << 20;
  /// Bytes of the tensors the import computes on the host, in all (folded shape computations,
  /// constants it builds).
  std::int64_t max_host_bytes = std::int64_t{1} << 33;
  /// Bytes of the largest tensor of the graph (an input or a node; 4 per element).
  std::int64_t max_tensor_bytes = std::int64_t{1} << 36;
  /// Seconds building the graph may take.
  double max_seconds = 300;
};

/// One input or output of an imported model.
struct ValueDesc {
  std::string name;
  std::string onnx_type;  // the model's element type: "float", "int64", "bool", ...
  DType dtype = DType::f32;
  Shape shape;                         // as built (dynamic dims resolved)
  std::vector<std::int64_t> declared;  // as the model declares it; -1: a dynamic dim
  std::vector<std::string> dim_names;  // per declared dim its dim_param ("batch"), or ""
};

/// An imported model: a Graph plus how its inputs, outputs and initializers map onto nodes.
class Model {
 public:
  Graph graph;
  std::vector<Node> inputs;     // in the model's order; named by the ONNX input names
  std::vector<Node> outputs;    // in the model's order; named by the ONNX output names
  std::vector<Node> variables;  // initializers used as float tensors (trainable)
  /// One assign per ImportOptions::state pair (its input's variable <- its output), and one
  /// that advances the step counter of training-mode Dropouts (each run draws new masks),
  /// which compile() fetches beside the outputs.
  std::vector<Node> state_updates;
  std::vector<ValueDesc> input_info, output_info;
  InputShapes input_shapes;      // the shapes the graph was built for: give them to compile()
  std::int64_t opset = 0;        // the model's ONNX opset version
  std::string producer;          // "pytorch 1.13", ...
  std::vector<std::string> ops;  // the model's op types in order, as written (before ONNX
                                 // functions are expanded)

  /// Compiles the outputs. `shapes` other than input_shapes (dynamic dims) build the graph
  /// again for them first: shape computations fold differently per shape.
  CompiledGraph compile(const GraphCompiler& compiler = GraphCompiler(),
                        const InputShapes& shapes = {}) const&;
  /// The same, and the weights move into the compiled graph instead of being copied
  /// (GraphCompiler::compile(Graph&&)): `std::move(m).compile(c)` compiles a large model with
  /// one copy of its weights. The model's graph keeps its nodes, without their values.
  CompiledGraph compile(const GraphCompiler& compiler = GraphCompiler(),
                        const InputShapes& shapes = {}) &&;
  /// The same model built for other input shapes.
  Model with_shapes(const InputShapes& shapes) const;
  /// The same model built with other options.
  Model with_options(const ImportOptions& options) const;

  struct Source;  // the parsed model (internal)
  std::shared_ptr<const Source> source;
};

/// Imports a model file. Errors: DataError (missing, corrupt or invalid file, naming it),
/// UnsupportedError, ShapeError (shapes that do not fit the model).
Model import(const std::string& path, const ImportOptions& options = {});
/// Reads and checks a model without building its graph: input_info (with `declared` dims),
/// opset, producer and ops are set, the graph is empty. with_shapes() builds it, e.g. once the
/// shapes of dynamic inputs are known from the data to run.
Model read_model(const std::string& path, const ImportOptions& options = {});

/// A model with dynamic dims as one DynamicGraph: each input's dims as declared, the dynamic
/// ones named by their dim_param ("batch"; an unnamed one "<input>.<axis>"). Each new set of
/// sizes imports the model again for it (shape computations fold per shape) and compiles it;
/// outputs are read by their ONNX names.
///   DynamicGraph dg = ho::dynamic("bert.onnx");
///   dg.run({{"ids", ids}}, {{"batch", 4}, {"seq", 37}});  // or sizes from the feeds alone
///   std::vector<float> logits = dg.read("logits");
DynamicGraph dynamic(const Model& model, const GraphCompiler& compiler = GraphCompiler(),
                     DynamicOptions options = {});
DynamicGraph dynamic(const std::string& path, const GraphCompiler& compiler = GraphCompiler(),
                     const ImportOptions& import = {}, DynamicOptions options = {});
/// Imports a model from its serialised bytes (tensors kept as external data are refused).
Model import_bytes(std::span<const std::byte> bytes, const ImportOptions& options = {},
                   const std::string& what = "<bytes>");

struct ExportOptions {
  /// Variables take their current values from this compiled graph (e.g. after training);
  /// without it, their initial values. Its variables must include the exported ones.
  const CompiledGraph* values = nullptr;
  /// ONNX names of the outputs; default: the nodes' names, or output_0, output_1, ...
  std::vector<std::string> output_names{};
  /// Declare dim 0 of every input and output as the dynamic dim "batch" (the shapes given
  /// fix the rest). Only for graphs whose nodes do not depend on the batch size (no reshape
  /// that names it): importing with another batch size then checks that.
  bool dynamic_batch = false;
  std::string graph_name = "hetgraph";
};

/// Writes the part of `graph` that `outputs` need, for these input shapes, as an ONNX model
/// (opset 17) that onnx::checker accepts; variables and constants become initializers. Written
/// atomically (a temporary file renamed over `path`). Nodes without an ONNX form (assign,
/// gradient ops) are a GraphError naming them.
void export_model(const Graph& graph, std::span<const Node> outputs, const InputShapes& shapes,
                  const std::string& path, const ExportOptions& options = {});
/// The same, as the model's bytes.
std::string export_bytes(const Graph& graph, std::span<const Node> outputs,
                         const InputShapes& shapes, const ExportOptions& options = {});

/// A tensor of an ONNX TensorProto file (the backend tests' input_0.pb, output_0.pb).
struct TensorData {
  std::string name;
  std::string onnx_type = "float";  // element type in the file
  // float32, float16, bfloat16 and double (rounded) as f32; every integer type and bool as i32
  DType dtype = DType::f32;
  Shape shape;
  std::vector<float> f32;
  std::vector<std::int32_t> i32;
};
/// Reads a .pb file; a value outside int32 or an element type hetgraph does not hold is a
/// DataError naming the file.
TensorData read_tensor(const std::string& path);
TensorData parse_tensor(std::span<const std::byte> bytes, const std::string& what = "<bytes>");
/// Writes a .pb file: f32 as float (or as `onnx_type` "float16" / "bfloat16", rounded to it,
/// or "double"), i32 as `onnx_type` (an integer type or "bool"; int64 for others).
void write_tensor(const std::string& path, const TensorData& t);

}  // namespace hetgraph::onnx
