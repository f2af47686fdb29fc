// SPDX-License-Identifier: Apache-2.0
// Graph, Node and Shape, and make_op, which every op builder calls. The public op builders live
// with their op's family in src/compiler/ops/; they only record structure: shape checks happen
// in shape inference (compile time), where input shapes are known.
#include <algorithm>
#include <atomic>
#include <iomanip>
#include <map>
#include <sstream>

#include "compiler/graph_impl.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

using detail::GraphImpl;
using detail::NodeRec;
using detail::OpKind;
using detail::rec_of;

std::string_view dtype_name(DType t) {
  return t == DType::f32 ? "f32" : "i32";
}

// ---- Shape ------------------------------------------------------------------------------

Shape::Shape(std::initializer_list<std::int64_t> dims)
    : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const std::int64_t> dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxRank)) {
    throw ShapeError("shape of rank " + std::to_string(dims.size()) +
                     " is not supported: tensors have rank 0 to " + std::to_string(kMaxRank));
  }
  rank_ = static_cast<int>(dims.size());
  std::int64_t n = 1;
  bool too_many = false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      throw ShapeError("negative dimension " + std::to_string(dims[i]) + " in a shape");
    }
    dims_[i] = dims[i];
    too_many = too_many || __builtin_mul_overflow(n, dims[i], &n) || n > kMaxElements;
  }
  // A zero dim makes the product 0 whatever the others are; the compiler rejects empty
  // tensors with its own message. Overflow is checked dim by dim, before any wrap.
  if (too_many && std::find(dims.begin(), dims.end(), 0) == dims.end()) {
    throw ShapeError("shape " + str() + " has more than 2^61 elements, more than a tensor may " +
                     "hold (its size in bytes must fit in 64 bits)");
  }
}

std::int64_t Shape::dim(int i) const {
  const int j = i < 0 ? i + rank_ : i;
  if (j < 0 || j >= rank_) {
    throw ShapeError("axis " + std::to_string(i) + " out of range for shape " + str());
  }
  return dims_[static_cast<std::size_t>(j)];
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[static_cast<std::size_t>(i)]);
  }
  return s + "]";
}

// ---- GraphImpl -------------------------------------------------------------------------

namespace {
std::atomic<std::uint64_t> g_next_graph_id{1};
}  // namespace

// GraphImpl is Graph::Impl: its members are defined in namespace hetgraph, which encloses it.
GraphImpl::Impl() : id(g_next_graph_id.fetch_add(1, std::memory_order_relaxed)) {}

Node GraphImpl::add(NodeRec rec) {
  const auto id = static_cast<std::uint32_t>(nodes.size());
  if (scope && !rec.pin) rec.pin = scope;
  std::string name = std::move(rec.name);
  nodes.push_back(std::move(rec));
  if (!name.empty()) set_name(id, std::move(name));
  return Node(this, id);
}

void GraphImpl::set_name(std::uint32_t id, std::string name) {
  if (name.empty()) throw GraphError("node names must not be empty");
  auto it = by_name.find(name);
  if (it != by_name.end() && it->second != id) {
    throw GraphError("name '" + name + "' is already used by " + label(it->second));
  }
  if (!nodes[id].name.empty()) by_name.erase(nodes[id].name);
  by_name[name] = id;
  nodes[id].name = std::move(name);
}

std::string GraphImpl::label(std::uint32_t id) const {
  const NodeRec& r = nodes[id];
  const std::string op(op_name(r.op));
  if (r.name.empty()) return "#" + std::to_string(id) + " (" + op + ")";
  return "'" + r.name + "' (#" + std::to_string(id) + ", " + op + ")";
}

namespace detail {

void check_same_graph(const GraphImpl* g, const Node& n, std::string_view what) {
  if (!n.valid()) throw GraphError(std::string(what) + ": invalid (default-constructed) node");
  if (detail::graph_of(n) != g) {
    throw GraphError(std::string(what) + ": node " + n.label() + " belongs to another graph");
  }
}

Node make_op(OpKind op, std::span<const Node> inputs, Attrs attrs) {
  const OpDef& def = op_def(op);
  if (inputs.empty()) throw GraphError(std::string(def.name) + ": needs at least one input");
  if (def.arity >= 0 && static_cast<int>(inputs.size()) != def.arity) {
    throw GraphError(std::string(def.name) + ": takes " + std::to_string(def.arity) +
                     " inputs, got " + std::to_string(inputs.size()));
  }
  GraphImpl* g = detail::graph_of(inputs[0]);
  NodeRec rec;
  rec.op = op;
  rec.attrs = std::move(attrs);
  rec.inputs.reserve(inputs.size());
  for (const Node& n : inputs) {
    check_same_graph(g, n, def.name);
    rec.inputs.push_back(n.id());
  }
  if (g == nullptr) throw GraphError(std::string(def.name) + ": invalid input node");
  return g->add(std::move(rec));
}

Node make_op(OpKind op, std::initializer_list<Node> inputs, Attrs attrs) {
  return make_op(op, std::span<const Node>(inputs.begin(), inputs.size()), std::move(attrs));
}

}  // namespace detail

// ---- Node ------------------------------------------------------------------------------

const std::string& Node::name() const {
  return rec_of(*this).name;
}
std::string_view Node::op_name() const {
  return detail::op_name(rec_of(*this).op);
}
std::string Node::label() const {
  if (!valid()) return "<invalid node>";
  return g_->label(id_);
}
Shape Node::declared_shape() const {
  return rec_of(*this).shape;
}
DType Node::dtype() const {
  return rec_of(*this).dtype;
}

Node Node::named(std::string name) const {
  rec_of(*this);
  g_->set_name(id_, std::move(name));
  return *this;
}

Node Node::on(Device device) const {
  rec_of(*this);
  if (device.kind == Device::Kind::opencl && (device.platform_index < 0 || device.device_index < 0))
    throw GraphError(label() + ": on(" + device.str() + "): OpenCL indices must be >= 0");
  g_->nodes[id_].pin = device;
  return *this;
}

std::optional<Device> Node::device() const {
  return rec_of(*this).pin;
}

std::string Device::str() const {
  if (kind == Kind::cpu) return "cpu";
  return "opencl:" + std::to_string(platform_index) + ":" + std::to_string(device_index);
}

DeviceScope::DeviceScope(Graph& graph, Device device)
    : g_(&detail::impl_of(graph)), previous_(g_->scope) {
  g_->scope = device;
}
DeviceScope::~DeviceScope() {
  g_->scope = previous_;
}

int Node::num_inputs() const {
  return static_cast<int>(rec_of(*this).inputs.size());
}

Node Node::input(int index) const {
  const auto& r = rec_of(*this);
  if (index < 0 || index >= static_cast<int>(r.inputs.size())) {
    throw GraphError(label() + ": no input " + std::to_string(index));
  }
  return Node(g_, r.inputs[static_cast<std::size_t>(index)]);
}

void Node::set_input(int index, Node producer) const {
  const auto& r = rec_of(*this);
  detail::check_same_graph(g_, producer, "set_input");
  if (index < 0 || index >= static_cast<int>(r.inputs.size())) {
    throw GraphError(label() + ": set_input: no input " + std::to_string(index) + " (it has " +
                     std::to_string(r.inputs.size()) + ")");
  }
  g_->nodes[id_].inputs[static_cast<std::size_t>(index)] = producer.id();
}

// ---- Graph -----------------------------------------------------------------------------

Graph::Graph() : impl_(std::make_shared<GraphImpl>()) {}

GraphImpl& GraphImpl::of(const Graph& g) {
  if (!g.impl_) throw UsageError("this Graph was moved from; use the one it was moved to");
  return *g.impl_;
}

Node Graph::input(std::string name, DType dtype) {
  if (name.empty()) throw GraphError("input: a name is required (feeds are by name)");
  NodeRec r;
  r.op = OpKind::Input;
  r.name = std::move(name);
  r.dtype = dtype;
  return detail::impl_of(*this).add(std::move(r));
}

Node Graph::variable(std::string name, Shape shape, Initializer init) {
  if (name.empty()) throw GraphError("variable: a name is required");
  if (init.kind == Initializer::Kind::values &&
      (!init.data || static_cast<std::int64_t>(init.data->size()) != shape.numel())) {
    throw ShapeError("variable '" + name + "' of shape " + shape.str() + " needs " +
                     std::to_string(shape.numel()) + " initial values, got " +
                     std::to_string(init.data ? init.data->size() : 0));
  }
  NodeRec r;
  r.op = OpKind::Variable;
  r.name = std::move(name);
  r.shape = shape;
  r.init = init;
  return detail::impl_of(*this).add(std::move(r));
}

Node Graph::constant(float value) {
  return constant(Shape{}, std::vector<float>{value});
}

Node Graph::constant(Shape shape, std::vector<float> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel()) {
    throw ShapeError("constant of shape " + shape.str() + " needs " +
                     std::to_string(shape.numel()) + " values, got " +
                     std::to_string(values.size()));
  }
  NodeRec r;
  r.op = OpKind::Constant;
  r.shape = shape;
  r.f32_values = std::make_shared<const std::vector<float>>(std::move(values));
  return detail::impl_of(*this).add(std::move(r));
}

Node Graph::constant_i32(Shape shape, std::vector<std::int32_t> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel()) {
    throw ShapeError("constant of shape " + shape.str() + " needs " +
                     std::to_string(shape.numel()) + " values, got " +
                     std::to_string(values.size()));
  }
  NodeRec r;
  r.op = OpKind::Constant;
  r.shape = shape;
  r.dtype = DType::i32;
  r.i32_values = std::make_shared<const std::vector<std::int32_t>>(std::move(values));
  return detail::impl_of(*this).add(std::move(r));
}

std::size_t Graph::size() const {
  return detail::impl_of(*this).nodes.size();
}

Node Graph::node(std::uint32_t id) const {
  if (id >= detail::impl_of(*this).nodes.size()) throw GraphError("no node #" + std::to_string(id));
  return detail::impl_of(*this).handle(id);
}

Node Graph::find(std::string_view name) const {
  auto it = detail::impl_of(*this).by_name.find(std::string(name));
  if (it == detail::impl_of(*this).by_name.end())
    throw GraphError("no node named '" + std::string(name) + "'");
  return detail::impl_of(*this).handle(it->second);
}

namespace {

// A DOT double-quoted string's contents: quotes and backslashes escaped, newlines as \n.
std::string dot_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string Graph::summary() const {
  const auto& g = detail::impl_of(*this);
  std::map<std::string_view, int> ops;
  int inputs = 0, variables = 0, constants = 0;
  std::int64_t elements = 0;
  std::ostringstream vars;
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const detail::NodeRec& n = g.nodes[i];
    if (n.op == detail::OpKind::Input) {
      ++inputs;
    } else if (n.op == detail::OpKind::Variable) {
      ++variables;
      elements += n.shape.numel();
      vars << "  " << (n.name.empty() ? "#" + std::to_string(i) : n.name) << "  " << n.shape.str()
           << "  " << n.shape.numel() << "\n";
    } else if (n.op == detail::OpKind::Constant) {
      ++constants;
    } else {
      ++ops[detail::op_name(n.op)];
    }
  }
  int op_count = 0;
  for (const auto& [name, count] : ops) op_count += count;
  std::ostringstream os;
  os << "graph: " << g.nodes.size() << " nodes (" << inputs
     << (inputs == 1 ? " input, " : " inputs, ") << variables
     << (variables == 1 ? " variable, " : " variables, ") << constants
     << (constants == 1 ? " constant, " : " constants, ") << op_count
     << (op_count == 1 ? " op)\n" : " ops)\n");
  os << "variables: " << variables << ", " << elements << " elements (" << std::fixed
     << std::setprecision(1) << static_cast<double>(elements) * 4.0 / 1024.0 << " KiB as float)\n"
     << vars.str();
  if (!ops.empty()) {
    os << "ops:";
    const char* sep = " ";
    for (const auto& [name, count] : ops) {
      os << sep << name << " " << count;
      sep = ", ";
    }
    os << "\n";
  }
  return os.str();
}

std::string Graph::to_dot() const {
  const auto& g = detail::impl_of(*this);
  std::ostringstream os;
  os << "digraph hetgraph {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const detail::NodeRec& n = g.nodes[i];
    std::string label = n.name.empty() ? "#" + std::to_string(i) : n.name;
    label += "\n" + std::string(detail::op_name(n.op));
    if (n.op == detail::OpKind::Variable || n.op == detail::OpKind::Constant)
      label += " " + n.shape.str();
    os << "  n" << i << " [label=\"" << dot_escaped(label) << "\"";
    if (n.op == detail::OpKind::Input) os << ", shape=ellipse";
    if (n.op == detail::OpKind::Variable) os << ", style=filled, fillcolor=\"#e8f0fe\"";
    os << "];\n";
  }
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    for (const std::uint32_t in : g.nodes[i].inputs) os << "  n" << in << " -> n" << i << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace hetgraph
