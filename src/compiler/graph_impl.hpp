// SPDX-License-Identifier: Apache-2.0
// The user-built graph: nodes in creation order, each with its op, inputs and attributes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/ops.hpp"
#include "hetgraph/error.hpp"
#include "hetgraph/graph.hpp"

namespace hetgraph::detail {

struct NodeRec {
  OpKind op = OpKind::Input;
  std::vector<std::uint32_t> inputs;
  Attrs attrs;
  std::string name;
  DType dtype = DType::f32;                                     // inputs, variables, constants
  Shape shape;                                                  // variables, constants
  std::shared_ptr<const std::vector<float>> f32_values;         // constants
  std::shared_ptr<const std::vector<std::int32_t>> i32_values;  // int constants
  Initializer init;                                             // variables
  bool grad_sum = false;      // an add made by gradients() to sum contributions (regroup_gradients)
  std::optional<Device> pin;  // Node::on or a DeviceScope: where a heterogeneous platform runs it
};

}  // namespace hetgraph::detail

namespace hetgraph {

// The public Graph's records, opaque in its header (so that no internal type shows there);
// the library calls it detail::GraphImpl.
struct Graph::Impl {
  Impl();
  /// Unique per graph for the life of the process: compiled graphs recognise their graph's
  /// nodes by it (an address may be reused by a later graph).
  const std::uint64_t id;
  std::vector<detail::NodeRec> nodes;
  std::unordered_map<std::string, std::uint32_t> by_name;
  std::optional<Device> scope;  // the innermost DeviceScope: pins every node added
  /// A graph built again from the same model for other shapes (onnx::Model::with_shapes)
  /// stands in for the earlier one: that graph's id, and its nodes' ids here (inputs, outputs,
  /// variables), so handles of the earlier graph read a graph compiled from this one.
  std::uint64_t stands_for = 0;
  std::unordered_map<std::uint32_t, std::uint32_t> stand_ins;

  Node add(detail::NodeRec rec);
  Node handle(std::uint32_t id) const { return Node(const_cast<Impl*>(this), id); }
  const detail::NodeRec& rec(std::uint32_t id) const { return nodes[id]; }
  /// "'name' (#id, op)" or "#id (op)" for unnamed nodes.
  std::string label(std::uint32_t id) const;
  void set_name(std::uint32_t id, std::string name);

  /// The way in from the public handles (a nested class sees their private members).
  /// UsageError on a moved-from Graph.
  static Impl& of(const Graph& g);
  static Impl* of(const Node& n) { return n.g_; }
};

}  // namespace hetgraph

namespace hetgraph::detail {

using GraphImpl = Graph::Impl;

/// A graph's records (UsageError on a moved-from Graph), and the graph a node belongs to
/// (nullptr for a default-constructed node).
inline GraphImpl& impl_of(const Graph& g) {
  return GraphImpl::of(g);
}
inline GraphImpl* graph_of(const Node& n) {
  return GraphImpl::of(n);
}

/// A node's record (GraphError for an invalid, default-constructed node): the Node handles'
/// accessors and the builders that check what they are given (assign).
inline const NodeRec& rec_of(const Node& n) {
  if (!n.valid()) throw GraphError("use of an invalid (default-constructed) node");
  return detail::graph_of(n)->rec(n.id());
}

/// Checks a node handle belongs to `g`; throws GraphError otherwise.
void check_same_graph(const GraphImpl* g, const Node& n, std::string_view what);

/// While alive, nodes added to `g` outside any DeviceScope are pinned to `pin` (where it is
/// set): what autodiff and the optimizers add for a pinned node or variable runs on its device,
/// as PyTorch users expect of a layer moved to a device. An enclosing DeviceScope wins.
class InheritPin {
 public:
  InheritPin(GraphImpl& g, const std::optional<Device>& pin) : g_(g), outer_(g.scope) {
    if (!outer_ && pin) g_.scope = pin;
  }
  ~InheritPin() { g_.scope = outer_; }
  InheritPin(const InheritPin&) = delete;
  InheritPin& operator=(const InheritPin&) = delete;

 private:
  GraphImpl& g_;
  std::optional<Device> outer_;
};
/// Creates an op node: checks arity and that all inputs come from one graph.
Node make_op(OpKind op, std::span<const Node> inputs, Attrs attrs = {});
Node make_op(OpKind op, std::initializer_list<Node> inputs, Attrs attrs = {});

/// A name not yet used in the graph: `base`, else base2, base3, ... (optimizer state).
inline std::string fresh_name(const GraphImpl& g, const std::string& base) {
  std::string name = base;
  for (int k = 2; g.by_name.count(name); ++k) name = base + std::to_string(k);
  return name;
}

}  // namespace hetgraph::detail
