// SPDX-License-Identifier: Apache-2.0
// The import driver: inputs and initializers, the nodes in model order (folded when their
// inputs are known, else composed by their handler), the outputs; and the public entry points.
#include "onnx/importer.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_set>

#include "compiler/graph_impl.hpp"
#include "compiler/plan.hpp"

namespace hetgraph::onnx {

namespace imp {

std::int64_t numel(const Dims& d) {
  // Saturates: dims from a damaged model must not wrap around to a plausible count.
  std::int64_t n = 1;
  for (std::int64_t v : d) {
    if (v < 0) return -1;
    if (v != 0 && n > INT64_MAX / v) return INT64_MAX;
    n *= v;
  }
  return n;
}

std::string dims_str(const Dims& d) {
  // An attribute list of a hostile model may hold millions of entries: a message shows the
  // first and last few, and how many there are (a perm of 10^6 zeros made a 3 MB message).
  constexpr std::size_t kHead = 8, kTail = 2;
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d.size() > kHead + kTail + 1 && i == kHead) {
      s += ", ...";
      i = d.size() - kTail - 1;
      continue;
    }
    s += (i ? ", " : "") + std::to_string(d[i]);
  }
  s += "]";
  if (d.size() > kHead + kTail + 1) s += " (" + std::to_string(d.size()) + " values)";
  return s;
}

namespace {

// Calls f on each body (graph attribute) of node n.
template <class F>
void for_bodies(const ir::Node& n, F&& f) {
  for (const auto& a : n.attrs) {
    if (a.second.kind == ir::Attr::kGraphA && a.second.g) f(*a.second.g);
  }
}

// Every name a body (and the bodies in it) reads: its nodes' inputs and its outputs.
void reads_of(const ir::Graph& b, std::set<std::string>& names) {
  for (const ir::Node& n : b.nodes) {
    for (const std::string& in : n.inputs) {
      if (!in.empty()) names.insert(in);
    }
    for_bodies(n, [&](const ir::Graph& inner) { reads_of(inner, names); });
  }
  for (const ir::ValueInfo& o : b.outputs) names.insert(o.name);
}

struct ViewTranspose {
  std::vector<std::int64_t> dims;  // the base viewed with these dims (row-major)
  std::vector<int> perm;           // then transposed
};

// A view's positions (the base's flat index of each element, row-major) as one transpose of the
// base: where they enumerate every element of the base once, as axes of some row-major shape of
// it taken in another order, of rank Shape::kMaxRank at most. Read from the inside out: each
// axis of the view is the longest run that steps by one stride, in blocks of the axes inside it;
// ShuffleNet's channel shuffle of [1, 116, 28, 28] is [2, 58, 784] transposed (1, 0, 2).
// Anything else (a slice, a broadcast, more axes than a shape holds): nullopt, and the view
// stays a gather of its positions.
std::optional<ViewTranspose> view_as_transpose(const std::vector<std::int64_t>& at,
                                               std::int64_t base_count) {
  const auto n = static_cast<std::int64_t>(at.size());
  if (n != base_count || n < 2 || at[0] != 0) return std::nullopt;
  std::vector<std::int64_t> size, stride;  // the view's axes, innermost first
  for (std::int64_t block = 1; block < n;) {
    if (size.size() == static_cast<std::size_t>(Shape::kMaxRank)) return std::nullopt;
    const std::int64_t st = at[static_cast<std::size_t>(block)];
    std::int64_t k = 1;  // the run: positions block * i at i * st
    while (block * (k + 1) <= n && at[static_cast<std::size_t>(block * k)] == k * st) ++k;
    while (k > 1 && (n / block) % k != 0) --k;  // an axis divides what is left
    if (k == 1) return std::nullopt;
    size.push_back(k);
    stride.push_back(st);
    block *= k;
  }
  if (size.empty()) return std::nullopt;
  // Every position as the sum of its digits' strides (the runs were read off single steps).
  for (std::int64_t j = 0; j < n; ++j) {
    std::int64_t rest = j, pos = 0;
    for (std::size_t a = 0; a < size.size(); ++a)
      pos += (rest % size[a]) * stride[a], rest /= size[a];
    if (pos != at[static_cast<std::size_t>(j)]) return std::nullopt;
  }
  // The base's axes: the view's sorted by stride, outermost first; row-major strides needed.
  const std::size_t r = size.size();
  std::vector<std::size_t> order(r);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return stride[a] > stride[b]; });
  ViewTranspose t;
  std::int64_t expect = 1;
  for (std::size_t k = r; k-- > 0;) {
    if (stride[order[k]] != expect) return std::nullopt;
    expect *= size[order[k]];
  }
  std::vector<int> axis_of(r);  // view axis (innermost first) -> base axis
  for (std::size_t k = 0; k < r; ++k) {
    t.dims.push_back(size[order[k]]);
    axis_of[order[k]] = static_cast<int>(k);
  }
  for (std::size_t a = r; a-- > 0;) t.perm.push_back(axis_of[a]);  // outermost view axis first
  return t;
}

}  // namespace

/// The state of one import.
class Importer {
 public:
  Importer(const Model::Source& src, Model& out)
      : src_(src),
        m_(*src.model),
        opt_(src.options),
        out_(out),
        g(out.graph),
        start_(std::chrono::steady_clock::now()) {}

  void run() {
    check_supported();
    if (!opt_.float64_as_float32) check_no_float64();
    check_single_assignment();
    for (const ir::Node& n : m_.graph.nodes) {
      for (const std::string& in : n.inputs) {
        if (!in.empty()) readers_[in].push_back(&n);
      }
      // A body reads values of the graph around it by name: they have that node as a reader
      // (so that no fusion takes them over).
      std::set<std::string> body_reads;
      for_bodies(n, [&](const ir::Graph& b) { reads_of(b, body_reads); });
      for (const std::string& in : body_reads) readers_[in].push_back(&n);
    }
    for (const ir::ValueInfo& o : m_.graph.outputs) readers_[o.name].push_back(nullptr);
    for (const ir::Tensor& t : m_.graph.initializers) {
      Value v;
      v.konst = std::shared_ptr<const ir::Tensor>(src_.model, &t);  // shared, not copied
      v.elem = t.elem;
      v.initializer = ir::held_as_float(t.elem);
      env[t.name] = std::move(v);
    }
    add_inputs();
    for (const ir::Node& n : m_.graph.nodes) add_node(n);
    add_outputs();
    // (ONNX's shape inference is given tensor types: not for models with sequences in or out.)
    if (opt_.check && !has_sequence_io()) check_against_onnx();
  }

  /// Each value of the model's graph is defined once. onnx::checker says so too, but an import
  /// may run without it (ImportOptions::check), and a second definition silently replaced the
  /// first (two nodes computing 'y': the later one was the output).
  void check_single_assignment() const {
    std::set<std::string> inputs, defined;
    for (const ir::ValueInfo& v : m_.graph.inputs) {
      if (!inputs.insert(v.name).second)
        throw DataError(m_.source + ": the graph declares input '" + v.name + "' twice");
    }
    for (const ir::Tensor& t : m_.graph.initializers) {
      if (!defined.insert(t.name).second)
        throw DataError(m_.source + ": the graph has two initializers named '" + t.name + "'");
    }
    defined.insert(inputs.begin(), inputs.end());  // an initializer may be an input's default
    for (const ir::Node& n : m_.graph.nodes) {
      for (const std::string& o : n.outputs) {
        if (!o.empty() && !defined.insert(o).second) {
          throw DataError(m_.source + ": ONNX node " + n.label + " computes '" + o +
                          "', which the model defines already (each value is defined once)");
        }
      }
    }
  }

  /// ONNX's own shape inference, for the shapes the graph was built for, must agree with the
  /// outputs built: a difference is an importer bug (or a model ONNX reads otherwise).
  void check_against_onnx() {
    std::map<std::string, ir::TypeInfo> in;
    for (const ValueDesc& v : out_.input_info) {
      const auto it = std::find_if(m_.graph.inputs.begin(), m_.graph.inputs.end(),
                                   [&](const ir::ValueInfo& i) { return i.name == v.name; });
      in[v.name] = {it->elem, Dims(v.shape.dims().begin(), v.shape.dims().end()), true};
    }
    for (const auto* list : {&empty_inputs_, &state_inputs_}) {
      for (const auto& e : *list) {  // (clang 14 captures no structured bindings)
        const auto it = std::find_if(m_.graph.inputs.begin(), m_.graph.inputs.end(),
                                     [&](const ir::ValueInfo& i) { return i.name == e.first; });
        in[e.first] = {it->elem, e.second, true};
      }
    }
    for (const auto& given : opt_.input_values) {
      const std::string& name = given.first;
      const auto it = std::find_if(m_.graph.inputs.begin(), m_.graph.inputs.end(),
                                   [&](const ir::ValueInfo& i) { return i.name == name; });
      const Shape& s = given.second->shape;
      in[name] = {it->elem, Dims(s.dims().begin(), s.dims().end()), true};
    }
    const std::vector<ir::TypeInfo> inferred = ir::infer_output_types(m_, in);
    // ONNX 1.12's STFT shape inference is wrong (it takes onesided as 0 when the attribute is
    // absent, and counts frames with the onesided bin count in place of the frame length), so
    // shapes downstream of one are not compared.
    const bool stft = std::find(out_.ops.begin(), out_.ops.end(), "STFT") != out_.ops.end();
    for (std::size_t k = 0; k < inferred.size() && k < out_.output_info.size(); ++k) {
      const ir::TypeInfo& t = inferred[k];
      const ValueDesc& o = out_.output_info[k];
      const Dims built(o.shape.dims().begin(), o.shape.dims().end());
      const bool static_shape =
          !stft && t.has_shape &&
          std::all_of(t.dims.begin(), t.dims.end(), [](std::int64_t d) { return d >= 0; });
      const bool type_differs =
          t.elem != ir::kUndefined && ir::held_as_float(t.elem) != (o.dtype == DType::f32);
      if ((static_shape && t.dims != built) || type_differs) {
        throw ShapeError(m_.source + ": output '" + o.name + "': ONNX's shape inference gives " +
                         ir::elem_name(t.elem) + " " +
                         (static_shape ? dims_str(t.dims) : "(shape unknown)") +
                         ", hetgraph built " + o.onnx_type + " " + dims_str(built));
      }
    }
  }

  const ir::Model& model() const { return m_; }

  const Value& value(const std::string& name, const ir::Node& n) const {
    auto it = env.find(name);
    if (it == env.end()) {
      throw ShapeError(m_.source + ": ONNX node " + n.label + " reads '" + name +
                       "', which no node, input or initializer of the model defines");
    }
    const Value& v = it->second;
    if (v.known() && !ir::is_integral(v.konst->elem) &&
        v.konst->f.size() != static_cast<std::size_t>(v.konst->numel())) {
      // Strings and complex numbers are kept without values.
      throw UnsupportedError(m_.source + ": ONNX node " + n.label + " reads '" + name + "', a " +
                             ir::elem_name(v.konst->elem) + " tensor");
    }
    return v;
  }

  Node materialize(const std::string& name, const ir::Node& n) {
    Value& v = env.at(name);
    if (v.node.valid()) return v.node;
    v.node = make_node(v, name, n);
    return v.node;
  }

  /// A graph node for a value known at import: a constant, or its variable.
  Node make_node(const Value& v, const std::string& name, const ir::Node& n) {
    if (v.view) return view_node(v, name, n);
    if (v.seq) {
      throw UnsupportedError(m_.source + ": ONNX node " + n.label + ": '" + name +
                             "' is a sequence, where a tensor is needed");
    }
    const ir::Tensor& t = *v.konst;
    if (t.dims.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
      throw UnsupportedError(m_.source + ": ONNX node " + n.label + ": tensor '" + name +
                             "' has rank " + std::to_string(t.dims.size()) +
                             "; hetgraph tensors have rank 0 to " +
                             std::to_string(Shape::kMaxRank));
    }
    const Shape shape{std::span<const std::int64_t>(t.dims)};
    Node node;
    if (ir::held_as_float(t.elem)) {
      // float16 / bfloat16 values come rounded from the file; folded ones are rounded by fold.
      // An empty initializer has nothing to train: a constant.
      if (v.initializer && t.numel() != 0) {
        node = g.variable(name, shape, Initializer::values(t.f));
        out_.variables.push_back(node);
      } else {
        node = g.constant(shape, t.f);
      }
    } else if (ir::is_integral(t.elem)) {
      std::vector<std::int32_t> i32;
      i32.reserve(t.i.size());
      for (std::int64_t x : t.i) {
        if (x < INT32_MIN || x > INT32_MAX || (t.elem == ir::kUint64 && x < 0)) {
          throw UnsupportedError(m_.source + ": ONNX node " + n.label + ": " +
                                 ir::elem_name(t.elem) + " tensor '" + name + "' holds " +
                                 std::to_string(x) +
                                 ", outside int32 (hetgraph holds integers as int32)");
        }
        i32.push_back(static_cast<std::int32_t>(x));
      }
      node = g.constant_i32(shape, std::move(i32));
    } else {
      throw UnsupportedError(m_.source + ": ONNX node " + n.label + ": tensor '" + name +
                             "' has element type " + ir::elem_name(t.elem) +
                             "; hetgraph runs float32 and int32 tensors");
    }
    name_node(node, name);
    return node;
  }

  /// A view's elements gathered from its base: a node once its dims fit hetgraph's ranks.
  Node view_node(const Value& v, const std::string& name, const ir::Node& n) {
    const ir::Tensor& at = *v.view;
    if (at.dims.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
      throw UnsupportedError(m_.source + ": ONNX node " + n.label + ": tensor '" + name +
                             "' has rank " + std::to_string(at.dims.size()) + " " +
                             dims_str(at.dims) + "; hetgraph tensors have rank 0 to " +
                             std::to_string(Shape::kMaxRank));
    }
    const std::int64_t count = at.numel();
    const std::int64_t base_count = type(v.view_base).shape.numel();
    Node node;
    if (auto t = opt_.views_as_transposes ? view_as_transpose(at.i, base_count) : std::nullopt) {
      Node base = hetgraph::reshape(v.view_base, t->dims);
      if (!std::is_sorted(t->perm.begin(), t->perm.end()))
        base = hetgraph::transpose(base, t->perm);
      node = hetgraph::reshape(base, at.dims);
    } else {
      Node flat = hetgraph::reshape(v.view_base, {base_count});
      node = hetgraph::reshape(
          gather(flat,
                 g.constant_i32(Shape{count}, std::vector<std::int32_t>(at.i.begin(), at.i.end())),
                 0),
          at.dims);
    }
    type(node);
    name_node(node, name);
    return node;
  }

  /// Shape and type of a node, by the compiler's own shape rules (memoised).
  TensorType type(Node v) {
    auto it = types_.find(v.id());
    if (it != types_.end()) return it->second;
    // The inputs' types first, from an explicit stack: recursion went as deep as the chain of
    // untyped nodes an ONNX node builds (a Sum of 20000 inputs is 19999 adds) and overflowed
    // the stack.
    std::vector<std::uint32_t> todo{v.id()};
    while (!todo.empty()) {
      const std::uint32_t id = todo.back();
      if (types_.count(id)) {
        todo.pop_back();
        continue;
      }
      const detail::NodeRec& r = detail::impl_of(g).rec(id);
      bool ready = true;
      if (r.op != detail::OpKind::Variable && r.op != detail::OpKind::Constant &&
          r.op != detail::OpKind::Input) {
        for (std::uint32_t u : r.inputs) {
          if (!types_.count(u)) {
            todo.push_back(u);
            ready = false;
          }
        }
      }
      if (!ready) continue;
      todo.pop_back();
      type_with_typed_inputs(g.node(id));
    }
    return types_.at(v.id());
  }
  /// The type of v, whose inputs are typed already.
  TensorType type_with_typed_inputs(Node v) {
    const detail::NodeRec& r = detail::impl_of(g).rec(v.id());
    TensorType t;
    if (r.op == detail::OpKind::Variable || r.op == detail::OpKind::Constant) {
      t = {r.shape, r.dtype};
    } else if (r.op == detail::OpKind::Input) {
      throw InternalError("ONNX import: input " + detail::impl_of(g).label(v.id()) +
                          " has no shape");
    } else {
      // Each node reuses scratch_.
      std::vector<TensorType> in;
      for (std::size_t k = 0; k < r.inputs.size(); ++k) in.push_back(types_.at(r.inputs[k]));
      scratch_.nodes.assign(r.inputs.size() + 1, detail::PlanNode{});
      for (std::size_t k = 0; k < r.inputs.size(); ++k) {
        scratch_.nodes[k].label = detail::impl_of(g).label(r.inputs[k]);
        scratch_.nodes.back().inputs.push_back(static_cast<std::uint32_t>(k));
      }
      scratch_.nodes.back().label = detail::impl_of(g).label(v.id());
      const TensorType declared{r.shape, r.dtype};
      const detail::InferCtx ctx{
          scratch_, static_cast<std::uint32_t>(r.inputs.size()), r.op, r.attrs, declared, in};
      t = detail::op_def(r.op).infer(ctx);
    }
    if (const std::string why = too_large(Dims(t.shape.dims().begin(), t.shape.dims().end()));
        !why.empty()) {
      throw ShapeError("node " + detail::impl_of(g).label(v.id()) + " would have the shape " + why);
    }
    types_[v.id()] = t;
    return t;
  }

  /// Names a node after the ONNX value it computes (errors and traces show it) when it has no
  /// name yet and the name is free.
  void name_node(Node v, const std::string& name) {
    if (name.empty() || !v.name().empty() || detail::impl_of(g).by_name.count(name)) return;
    v.named(name);
  }

  void set_input_type(Node v, TensorType t) { types_[v.id()] = t; }

  const ir::Node* sole_reader(const std::string& value) const {
    if (body_depth_ > 0) return nullptr;  // readers_ knows the model's graph only
    auto it = readers_.find(value);
    if (it == readers_.end() || it->second.size() != 1) return nullptr;
    return it->second[0];
  }
  std::unordered_set<const ir::Node*> absorbed;
  const ImportOptions& options() const { return opt_; }
  Node variable(const std::string& name, const Shape& shape, std::vector<float> values) {
    Node v = g.variable(name, shape, Initializer::values(std::move(values)));
    out_.variables.push_back(v);
    return v;
  }

  /// The step counter training-mode Dropouts draw their masks with: a variable (0 at first)
  /// that every run advances once its other nodes are done (a state update), so each run
  /// draws new masks. One per model.
  Node dropout_step() {
    if (!dropout_step_.valid()) {
      std::string name = "dropout_step";
      for (int k = 2; detail::impl_of(g).by_name.count(name); ++k)
        name = "dropout_step_" + std::to_string(k);
      dropout_step_ = g.variable(name, Shape{});  // 0 at first
      out_.state_updates.push_back(assign(dropout_step_, dropout_step_ + 1.0f));
    }
    return dropout_step_;
  }

  std::vector<Value> run_body(const ir::Node& n, const ir::Graph& body, std::vector<Value> args) {
    if (args.size() != body.inputs.size()) {
      throw ShapeError(m_.source + ": ONNX node " + n.label + ": its body '" + body.name +
                       "' has " + std::to_string(body.inputs.size()) + " inputs, the node gives " +
                       std::to_string(args.size()));
    }
    if (body_depth_ >= 64) {
      throw UnsupportedError(m_.source + ": ONNX node " + n.label +
                             ": bodies nested more than 64 deep");
    }
    for (Value& a : args) {
      if (a.initializer) {  // a trainable initializer: the body reads its variable
        a.node = materialize(a.konst->name, n);
        a.konst = nullptr;
        a.initializer = false;
      }
    }
    // What the body's names hide, put back when it is done (also when it fails).
    std::vector<std::pair<std::string, std::optional<Value>>> hidden;
    auto hide = [&](const std::string& name) {
      if (name.empty()) return;
      auto it = env.find(name);
      hidden.emplace_back(name, it == env.end() ? std::nullopt : std::optional<Value>(it->second));
    };
    struct Restore {
      Importer& im;
      decltype(hidden)& h;
      ~Restore() {
        for (auto it = h.rbegin(); it != h.rend(); ++it) {
          if (it->second)
            im.env[it->first] = *it->second;
          else
            im.env.erase(it->first);
        }
        --im.body_depth_;
      }
    } restore{*this, hidden};
    ++body_depth_;
    for (std::size_t i = 0; i < args.size(); ++i) {
      hide(body.inputs[i].name);
      if (!body.inputs[i].name.empty()) env[body.inputs[i].name] = std::move(args[i]);
    }
    for (const ir::Tensor& t : body.initializers) {
      // A body's initializers are constants of it (not trained), made once however often the
      // body is imported.
      hide(t.name);
      auto [it, fresh] = body_constants_.try_emplace(&t);
      if (fresh) {
        it->second.konst = std::shared_ptr<const ir::Tensor>(src_.model, &t);
        it->second.elem = t.elem;
      }
      env[t.name] = it->second;
    }
    for (const ir::Node& b : body.nodes) {
      for (const std::string& o : b.outputs) hide(o);
    }
    for (const ir::Node& b : body.nodes) add_node(b);
    std::vector<Value> out;
    for (const ir::ValueInfo& o : body.outputs) {
      auto it = env.find(o.name);
      if (it == env.end()) {
        throw ShapeError(m_.source + ": ONNX node " + n.label + ": its body '" + body.name +
                         "' never computes its output '" + o.name + "'");
      }
      out.push_back(it->second);
    }
    for (const ir::Tensor& t : body.initializers) body_constants_[&t] = env[t.name];
    return out;
  }

  /// ONNX nodes the import may still add before ImportOptions::max_nodes (a loop checks its
  /// whole unrolling against it before it starts).
  std::int64_t nodes_left() const { return std::max<std::int64_t>(0, opt_.max_nodes - nodes_); }

  /// The budgets of the whole import, checked as each ONNX node is added: loops nested in
  /// loops pass any per-loop limit, so the nodes, the host bytes and the time are counted for
  /// the import as a whole.
  void count_node(const ir::Node& n) {
    if (++nodes_ > opt_.max_nodes) {
      over_budget(n,
                  "it would import more than " + std::to_string(opt_.max_nodes) +
                      " ONNX nodes (every iteration of an unrolled loop and every function "
                      "body counts its nodes again)",
                  "max_nodes");
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (s > opt_.max_seconds) {
      over_budget(n,
                  "building the graph has taken more than " + seconds_str(opt_.max_seconds) +
                      " s (after " + std::to_string(nodes_) + " ONNX nodes)",
                  "max_seconds");
    }
  }
  /// Counts `bytes` of tensors computed on the host (folded values, constants built).
  void count_host_bytes(const ir::Node& n, std::int64_t bytes) {
    host_bytes_ += std::max<std::int64_t>(bytes, 0);
    if (host_bytes_ > opt_.max_host_bytes) {
      over_budget(n,
                  "the tensors it computes at import would take more than " +
                      std::to_string(opt_.max_host_bytes) + " bytes in all",
                  "max_host_bytes");
    }
  }
  /// Why a tensor of the graph (an input, a node) of these dims is too large, or "": over
  /// ImportOptions::max_tensor_bytes, dims come from a damaged or hostile model, and would
  /// fail only when compiled, naming neither the model nor the value.
  std::string too_large(const Dims& dims) const {
    const std::int64_t n = numel(dims);
    if (n <= opt_.max_tensor_bytes / 4) return "";
    return dims_str(dims) + ": " + (n == INT64_MAX ? "more than 2^63" : std::to_string(n)) +
           " elements, more than the " + std::to_string(opt_.max_tensor_bytes) +
           " bytes a tensor may take (ImportOptions::max_tensor_bytes; raise it for a model that "
           "needs more)";
  }

  std::unordered_map<std::string, Value> env;
  std::vector<std::pair<std::string, Dims>> empty_inputs_;  // inputs given an empty shape
  Node dropout_step_;                                       // see dropout_step()
  std::vector<std::pair<std::string, Dims>> state_inputs_;  // ImportOptions::state's inputs

 private:
  void check_supported() {
    std::set<std::string> missing;
    std::string non_tensor;
    std::function<void(const ir::Graph&)> check = [&](const ir::Graph& graph) {
      for (const ir::Node& n : graph.nodes) {
        const bool known_op =
            n.since > 0 &&
            (find_handler(n.op, n.since, n.domain) != nullptr ||
             (n.domain.empty() && (foldable(n.op) || ir::has_function(n.domain, n.op, n.since))));
        if (!known_op) {
          missing.insert((n.domain.empty() ? "" : n.domain + ".") + n.op + "-" +
                         (n.since > 0 ? std::to_string(n.since) : "?"));
        }
        for_bodies(n, check);
      }
    };
    check(m_.graph);
    for (const auto* list : {&m_.graph.inputs, &m_.graph.outputs}) {
      for (const ir::ValueInfo& v : *list) {
        // Sequences of tensors are a tensor each (ImportOptions::sequence_shapes).
        if (!v.non_tensor.empty() && !is_tensor_sequence(v))
          non_tensor += (non_tensor.empty() ? "" : ", ") + v.name + " (" + v.non_tensor + ")";
      }
    }
    if (missing.empty() && non_tensor.empty()) return;
    std::string msg =
        m_.source + ": hetgraph cannot run this model (opset " + std::to_string(opset()) + ")";
    if (!missing.empty()) {
      msg += "; unsupported ops (op-version):";
      for (const auto& s : missing) msg += " " + s;
    }
    if (!non_tensor.empty()) msg += "; inputs/outputs that are not tensors: " + non_tensor;
    throw UnsupportedError(msg);
  }

  /// float64 is held as float32 only when asked (ImportOptions::float64_as_float32): the first
  /// place the model has one (an input, output or initializer, a tensor attribute, a Cast or
  /// a generator to double), bodies included, is an UnsupportedError naming it and the option.
  void check_no_float64() const {
    auto refuse = [&](const std::string& what) {
      throw UnsupportedError(m_.source + ": " + what +
                             " is float64 (double); hetgraph computes in float32. "
                             "ImportOptions::float64_as_float32 (hetgraph-run "
                             "--float64-as-float32) runs it so, its values rounded to float32");
    };
    std::function<void(const ir::Graph&)> check = [&](const ir::Graph& graph) {
      for (const auto* list : {&graph.inputs, &graph.outputs}) {
        for (const ir::ValueInfo& v : *list)
          if (v.elem == ir::kDouble) refuse("tensor '" + v.name + "'");
      }
      for (const ir::Tensor& t : graph.initializers)
        if (t.elem == ir::kDouble) refuse("initializer '" + t.name + "'");
      for (const ir::Node& n : graph.nodes) {
        for (const auto& [name, a] : n.attrs) {
          const bool type_attr = (name == "to" || name == "dtype") && a.kind == ir::Attr::kIntA;
          if ((type_attr && a.i == ir::kDouble) ||
              (a.kind == ir::Attr::kTensorA && a.t && a.t->elem == ir::kDouble)) {
            refuse("ONNX node " + n.label + "'s attribute '" + name + "'");
          }
        }
        for_bodies(n, check);
      }
    };
    check(m_.graph);
  }

  static bool is_tensor_sequence(const ir::ValueInfo& v) {
    return v.non_tensor == "sequence" && (ir::held_as_float(v.elem) || ir::is_integral(v.elem));
  }
  bool has_sequence_io() const {
    for (const auto* list : {&m_.graph.inputs, &m_.graph.outputs}) {
      if (std::any_of(list->begin(), list->end(), is_tensor_sequence)) return true;
    }
    return false;
  }

  /// A sequence input: one graph input per tensor, "<name>[k]", of the shapes
  /// ImportOptions::sequence_shapes gives it.
  void add_sequence_input(const ir::ValueInfo& v, DType dtype) {
    const auto given = std::find_if(opt_.sequence_shapes.begin(), opt_.sequence_shapes.end(),
                                    [&](const auto& p) { return p.first == v.name; });
    if (given == opt_.sequence_shapes.end()) {
      throw UnsupportedError(m_.source + ": input '" + v.name +
                             "' is a sequence of tensors: give their shapes in "
                             "ImportOptions::sequence_shapes");
    }
    auto items = std::make_shared<std::vector<Value>>();
    for (std::size_t k = 0; k < given->second.size(); ++k) {
      const Shape& shape = given->second[k];
      const std::string name = v.name + "[" + std::to_string(k) + "]";
      if (const std::string why = too_large(Dims(shape.dims().begin(), shape.dims().end()));
          !why.empty()) {
        throw ShapeError(m_.source + ": input '" + name + "' has the shape " + why);
      }
      items->push_back(graph_input(name, v.elem, dtype, shape, {}, {}));
    }
    Value val;
    val.seq = std::move(items);
    val.elem = v.elem;
    env[v.name] = std::move(val);
  }

  std::int64_t opset() const {
    auto it = m_.opsets.find("");
    return it == m_.opsets.end() ? 0 : it->second;
  }

  /// Input v's dims: the shape given for it (which must fit its declared one), else its declared
  /// dims with ImportOptions::dynamic_dim for the dynamic ones.
  Dims input_dims(const ir::ValueInfo& v, const std::map<std::string, Shape>& given) const {
    Dims dims;
    if (auto it = given.find(v.name); it != given.end()) {
      const Shape& s = it->second;
      if (v.has_shape && static_cast<std::size_t>(s.rank()) != v.dims.size()) {
        throw ShapeError(m_.source + ": input '" + v.name + "' has rank " +
                         std::to_string(v.dims.size()) + ", the shape given is " + s.str());
      }
      for (int d = 0; d < s.rank(); ++d) {
        const std::int64_t want = v.has_shape ? v.dims[static_cast<std::size_t>(d)].value : -1;
        if (want >= 0 && want != s[d]) {
          throw ShapeError(m_.source + ": input '" + v.name + "' has dim " + std::to_string(d) +
                           " fixed at " + std::to_string(want) + ", the shape given is " + s.str());
        }
        dims.push_back(s[d]);
      }
    } else {
      if (!v.has_shape) {
        throw ShapeError(m_.source + ": input '" + v.name +
                         "' has no declared shape: give it in ImportOptions::input_shapes");
      }
      for (std::size_t d = 0; d < v.dims.size(); ++d) {
        const ir::Dim& dim = v.dims[d];
        if (dim.value >= 0) {
          dims.push_back(dim.value);
        } else if (opt_.dynamic_dim > 0) {
          dims.push_back(opt_.dynamic_dim);
        } else {
          throw ShapeError(m_.source + ": input '" + v.name + "' dim " + std::to_string(d) +
                           (dim.param.empty() ? "" : " ('" + dim.param + "')") +
                           " is dynamic: give the input's shape in ImportOptions::input_shapes");
        }
      }
    }
    return dims;
  }

  void add_inputs() {
    std::map<std::string, Shape> given;
    for (const auto& given_shape : opt_.input_shapes) {
      const std::string& name = given_shape.first;
      const Shape& s = given_shape.second;
      const bool is_input =
          std::any_of(m_.graph.inputs.begin(), m_.graph.inputs.end(),
                      [&](const ir::ValueInfo& v) { return v.name == name && !env.count(name); });
      if (!is_input) {
        throw ShapeError(m_.source + ": input shapes name '" + name +
                         "', which is not an input of the model");
      }
      // Two shapes for one input: the last was taken, silently.
      if (!given.emplace(name, s).second) {
        throw ShapeError(m_.source + ": input shapes give input '" + name + "' twice");
      }
    }
    for (const auto& [name, data] : opt_.input_values) bind_input(name, *data);
    for (const ir::ValueInfo& v : m_.graph.inputs) {
      if (env.count(v.name))
        continue;  // an initializer listed as an input (a default value),
                   // or an input given a value
      DType dtype = DType::f32;
      if (ir::held_as_float(v.elem)) {
        dtype = DType::f32;
      } else if (ir::is_integral(v.elem)) {  // held as int32, uint32 and uint64 too
        dtype = DType::i32;
      } else {
        throw UnsupportedError(m_.source + ": input '" + v.name + "' has element type " +
                               ir::elem_name(v.elem) + "; hetgraph runs float32 and int32 tensors");
      }
      if (is_tensor_sequence(v)) {
        add_sequence_input(v, dtype);
        continue;
      }
      const Dims dims = input_dims(v, given);
      if (dims.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
        throw UnsupportedError(m_.source + ": input '" + v.name + "' has rank " +
                               std::to_string(dims.size()) + " " + dims_str(dims) +
                               "; hetgraph tensors have rank 0 to " +
                               std::to_string(Shape::kMaxRank));
      }
      if (const std::string why = too_large(dims); !why.empty()) {
        throw ShapeError(m_.source + ": input '" + v.name + "' has the shape " + why);
      }
      if (numel(dims) == 0) {
        bind_empty_input(v, dims);
        continue;
      }
      const Shape shape{std::span<const std::int64_t>(dims)};
      if (is_state(v.name)) {
        if (dtype != DType::f32) {
          throw UnsupportedError(m_.source + ": state input '" + v.name + "' is " +
                                 ir::elem_name(v.elem) + "; state is held as float tensors");
        }
        Node var = g.variable(v.name, shape);  // zeros: the state before the first run
        Value val;
        val.node = var;
        val.elem = v.elem;
        env[v.name] = val;
        state_inputs_.push_back({v.name, dims});
        continue;
      }
      Value val = graph_input(v.name, v.elem, dtype, shape, declared_dims(v), dim_names(v));
      val.from_input = v.name;
      env[v.name] = val;
    }
  }

  /// A graph input of the model, listed in the model's inputs; its value.
  Value graph_input(const std::string& name, int elem, DType dtype, const Shape& shape,
                    Dims declared, std::vector<std::string> dim_names) {
    Node in = g.input(name, dtype);
    set_input_type(in, {shape, dtype});
    Value val;
    // A float16 / bfloat16 input takes the values of its type: what is fed is rounded to them.
    val.node = elem == ir::kFloat16 ? to_float16(in) : elem == ir::kBfloat16 ? to_bfloat16(in) : in;
    val.elem = elem;
    out_.inputs.push_back(in);
    out_.input_info.push_back(
        {name, ir::elem_name(elem), dtype, shape, std::move(declared), std::move(dim_names)});
    out_.input_shapes.push_back({name, shape});
    return val;
  }

  /// An empty input holds no values: its shape is all there is to it, so it is a constant
  /// (ReduceSum's axes left empty), not an input of the graph. What reads it is folded as
  /// the compiler folds empty tensors.
  void bind_empty_input(const ir::ValueInfo& v, const Dims& dims) {
    ir::Tensor t;
    t.name = v.name;
    t.elem = ir::held_as_float(v.elem) || ir::is_integral(v.elem) ? v.elem : ir::kInt64;
    t.dims = dims;
    Value val;
    val.elem = t.elem;
    val.konst = std::make_shared<const ir::Tensor>(std::move(t));
    env[v.name] = std::move(val);
    empty_inputs_.push_back({v.name, dims});
  }

  /// An input given a value at import: a known tensor from now on.
  void bind_input(const std::string& name, const TensorData& data) {
    auto v = std::find_if(m_.graph.inputs.begin(), m_.graph.inputs.end(),
                          [&](const ir::ValueInfo& i) { return i.name == name; });
    if (v == m_.graph.inputs.end() || env.count(name)) {
      throw ShapeError(m_.source + ": input values name '" + name +
                       "', which is not an input of the model");
    }
    ir::Tensor t;
    t.name = name;
    t.dims.assign(data.shape.dims().begin(), data.shape.dims().end());
    if (data.dtype == DType::f32) {
      t.elem = ir::held_as_float(v->elem) ? v->elem : ir::kFloat;
      for (float x : data.f32) t.f.push_back(ir::round_to_elem(x, t.elem));
    } else {
      t.elem = ir::is_integral(v->elem) ? v->elem : ir::kInt64;
      t.i.assign(data.i32.begin(), data.i32.end());
    }
    if (ir::held_as_float(t.elem) != ir::held_as_float(v->elem)) {
      throw ShapeError(m_.source + ": input '" + name + "' is " + ir::elem_name(v->elem) +
                       ", the value given is " + data.onnx_type);
    }
    if (static_cast<std::size_t>(t.numel()) !=
        (ir::held_as_float(t.elem) ? t.f.size() : t.i.size())) {
      throw ShapeError(m_.source + ": the value given for input '" + name +
                       "' does not fill its shape");
    }
    Value val;
    val.elem = t.elem;
    val.konst = std::make_shared<const ir::Tensor>(std::move(t));
    env[name] = std::move(val);
  }

  // Names the first input of c's node that is not known at import: a model input's value can
  // be given there (ImportOptions::input_values; hetgraph-run and the conformance runner do).
  static void need_known_inputs(Ctx& c) {
    for (std::size_t i = 0; i < c.n.inputs.size(); ++i) {
      if (c.has(i) && !c.known(i)) (void)c.known_tensor(i, "which " + c.n.op + " needs");
    }
  }

  void add_node(const ir::Node& n, int depth = 0) {
    count_node(n);
    Ctx c(*this, n);
    if (absorbed.count(&n)) {  // done by the node before it (a batch norm folded into a Conv)
      c.alias(0, 0);
      return;
    }
    bool all_known = true, float_initializer = false;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      const Value& v = value(n.inputs[i], n);
      all_known = all_known && v.known();
      float_initializer = float_initializer || v.initializer;
    }
    try {
      // Known inputs are computed now, except a trainable initializer's: it stays a variable
      // (fine-tuning an imported model must reach it).
      if (!(all_known && !float_initializer && !n.inputs.empty() && fold(c))) {
        const Handler* h = find_handler(n.op, n.since, n.domain);
        if (h != nullptr) {
          h->fn(c);
        } else if (ir::has_function(n.domain, n.op, n.since) && depth < 16) {
          try {
            expand(c, depth);
          } catch (const UnsupportedError&) {
            // A body hetgraph cannot run (Range's Loop): an op it folds asks for its inputs.
            if (foldable(n.op)) need_known_inputs(c);
            throw;
          }
        } else if (all_known && !n.inputs.empty() && fold(c)) {
          // An op hetgraph only computes at import, on a trainable initializer: folded from its
          // initial value (shape computations; training it later does not reach them).
        } else {
          need_known_inputs(c);
          c.unsupported(
              "only computed at import, for inputs known there (shape computations); "
              "this one depends on values computed at run time");
        }
      }
    } catch (const UnsupportedError&) {
      throw;
    } catch (const ShapeError& e) {
      throw ShapeError(in_context(n, e.what()));
    } catch (const GraphError& e) {
      throw ShapeError(in_context(n, e.what()));
    }
    // Bytes of the values this node computed on the host (not those it passes on: an Identity
    // of a known tensor, a loop's carried value).
    std::unordered_set<const void*> passed;
    for (const std::string& in : n.inputs) {
      const auto it = env.find(in);
      if (!in.empty() && it != env.end()) {
        passed.insert(it->second.konst.get());
        passed.insert(it->second.view.get());
      }
    }
    std::int64_t bytes = 0;
    for (std::size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      const auto it = env.find(n.outputs[k]);
      if (it == env.end()) {
        c.unsupported("output " + std::to_string(k) + " ('" + n.outputs[k] +
                      "') is not produced by the hetgraph version of this op");
      }
      const Value& v = it->second;
      if (v.known() && !v.initializer && !passed.count(v.konst.get()))
        bytes += 8 * std::max<std::int64_t>(v.konst->numel(), 0);
      if (v.view && !passed.count(v.view.get()))
        bytes += 8 * std::max<std::int64_t>(v.view->numel(), 0);
    }
    count_host_bytes(n, bytes);
    trace_inputs(n);
  }

  // Outputs of an op the import computes when its inputs are known, computed at run time from
  // values that giving model inputs would make known: they are too (Value::from_input).
  void trace_inputs(const ir::Node& n) {
    static const char* const kLayout[] = {"Reshape",   "Flatten", "Squeeze", "Unsqueeze",
                                          "Transpose", "Concat",  "Split",   "Slice",
                                          "Gather",    "Expand",  "Tile",    "Identity"};
    if (!foldable(n.op) && std::none_of(std::begin(kLayout), std::end(kLayout),
                                        [&](const char* op) { return n.op == op; }))
      return;
    std::string from;
    for (const std::string& in : n.inputs) {
      if (in.empty()) continue;
      const Value& v = env.at(in);
      if (v.known() && !v.initializer) continue;
      if (v.from_input.empty()) return;  // a variable, or a value no given input makes known
      if (from.empty()) from = v.from_input;
    }
    for (const std::string& o : n.outputs) {
      auto it = env.find(o);
      if (!o.empty() && it != env.end() && !it->second.known()) it->second.from_input = from;
    }
  }

  std::string in_context(const ir::Node& n, const std::string& what) const {
    if (what.rfind(m_.source + ":", 0) == 0) return what;  // it names the node already
    return m_.source + ": ONNX node " + n.label + ": " + what;
  }

  /// An op ONNX defines as a function of other ops: its body, built for the types of the
  /// inputs as they are here, imported in its place.
  void expand(Ctx& c, int depth) {
    std::vector<ir::TypeInfo> types;
    for (std::size_t i = 0; i < c.inputs(); ++i) {
      ir::TypeInfo t;
      if (c.has(i)) {
        t.elem = c.elem(i);
        t.dims = c.dims(i);
        t.has_shape = true;
      }
      types.push_back(t);
    }
    std::vector<ir::Node> body = ir::function_body(c.n, types, serial_++, m_.source);
    if (body.empty()) c.unsupported("ONNX builds no function body for it here");
    for (ir::Node& b : body) {
      bodies_.push_back(std::move(b));
      add_node(bodies_.back(), depth + 1);
    }
  }

  void add_outputs() {
    std::unordered_set<std::uint32_t> used;
    for (const ir::ValueInfo& o : m_.graph.outputs) {
      auto it = env.find(o.name);
      if (it == env.end()) {
        throw ShapeError(m_.source + ": graph output '" + o.name + "' is never computed");
      }
      static const ir::Node kOutputs = [] {
        ir::Node n;
        n.op = "output";
        n.label = "(graph outputs)";
        return n;
      }();
      const int elem = o.elem != ir::kUndefined ? o.elem : it->second.elem;
      if (it->second.seq) {  // a sequence: one output per tensor, "<name>[k]"
        const std::vector<Value> items = *it->second.seq;  // (materializing grows env)
        for (std::size_t k = 0; k < items.size(); ++k) {
          const std::string name = o.name + "[" + std::to_string(k) + "]";
          Node v = items[k].node.valid() ? items[k].node : make_node(items[k], name, kOutputs);
          add_output(v, name, elem, {}, {}, used);
        }
        continue;
      }
      add_output(materialize(o.name, kOutputs), o.name, elem, declared_dims(o), dim_names(o), used);
    }
    add_state_updates();
  }

  // An output that is an input, a variable or another output gets a view of its own, named
  // after it (fetching and reading by name then work).
  void add_output(Node v, const std::string& name, int elem, const Dims& dims,
                  const std::vector<std::string>& dim_names,
                  std::unordered_set<std::uint32_t>& used) {
    if (v.name() != name || used.count(v.id())) {
      const TensorType t = type(v);
      v = reshape(v, std::vector<std::int64_t>(t.shape.dims().begin(), t.shape.dims().end()));
      if (!detail::impl_of(g).by_name.count(name)) v.named(name);
      type(v);
    }
    used.insert(v.id());
    const TensorType t = type(v);
    out_.outputs.push_back(v);
    out_.output_info.push_back({name, ir::elem_name(elem), t.dtype, t.shape, dims, dim_names});
  }

  bool is_state(const std::string& input) const {
    return std::any_of(opt_.state.begin(), opt_.state.end(),
                       [&](const auto& p) { return p.first == input; });
  }

  // ImportOptions::state: each state input's variable takes its output's value at the end of
  // every run.
  void add_state_updates() {
    std::set<std::string> seen;
    for (const auto& pair : opt_.state) {  // (clang 14 captures no structured bindings)
      const std::string& input = pair.first;
      const std::string& output = pair.second;
      if (!seen.insert(input).second) {
        throw ShapeError(m_.source + ": state names input '" + input + "' twice");
      }
      const auto in = std::find_if(state_inputs_.begin(), state_inputs_.end(),
                                   [&](const auto& s) { return s.first == input; });
      if (in == state_inputs_.end()) {
        throw ShapeError(m_.source + ": state names '" + input +
                         "', which is not an input of the model");
      }
      const auto out = std::find_if(out_.output_info.begin(), out_.output_info.end(),
                                    [&](const ValueDesc& o) { return o.name == output; });
      if (out == out_.output_info.end()) {
        throw ShapeError(m_.source + ": state takes input '" + input + "' from '" + output +
                         "', which is not an output of the model");
      }
      const Node value = out_.outputs[static_cast<std::size_t>(out - out_.output_info.begin())];
      const Node var = env.at(input).node;
      const TensorType vt = type(var), ot = type(value);
      if (ot.dtype != DType::f32 || ot.shape != vt.shape) {
        throw ShapeError(m_.source + ": state input '" + input + "' " + vt.shape.str() +
                         " cannot take output '" + output + "' (" +
                         std::string(dtype_name(ot.dtype)) + " " + ot.shape.str() + ")");
      }
      out_.state_updates.push_back(assign(var, value));
    }
  }

  const Model::Source& src_;
  const ir::Model& m_;
  const ImportOptions& opt_;
  Model& out_;

 public:
  Graph& g;

 private:
  std::unordered_map<std::uint32_t, TensorType> types_;
  std::unordered_map<std::string, std::vector<const ir::Node*>> readers_;  // nullptr: output
  std::deque<ir::Node> bodies_;  // nodes of expanded functions (stable addresses)
  int body_depth_ = 0;           // > 0 while a node's body (a subgraph) is imported
  std::unordered_map<const ir::Tensor*, Value> body_constants_;
  int serial_ = 0;
  detail::Plan scratch_;
  std::chrono::steady_clock::time_point start_;
  std::int64_t nodes_ = 0, host_bytes_ = 0;

  static std::string seconds_str(double s) {
    std::string t = std::to_string(s);
    t.erase(t.find_last_not_of('0') + 1);
    if (!t.empty() && t.back() == '.') t.pop_back();
    return t;
  }
  [[noreturn]] void over_budget(const ir::Node& n, const std::string& why,
                                const std::string& option) const {
    throw UnsupportedError(m_.source + ": ONNX node " + n.label + ": " + why +
                           "; the import stops at ImportOptions::" + option +
                           " (raise it for a model that needs more)");
  }
};

// ---- Ctx -----------------------------------------------------------------------------------

const Value& Ctx::in(std::size_t i) const {
  if (!has(i)) fail("input " + std::to_string(i) + " is missing");
  return im.value(n.inputs[i], n);
}

Node Ctx::node(std::size_t i) {
  if (!has(i)) fail("input " + std::to_string(i) + " is missing");
  return im.materialize(n.inputs[i], n);
}

Node Ctx::f32(std::size_t i) {
  if (!ir::held_as_float(in(i).elem)) {
    unsupported("input " + std::to_string(i) + " ('" + n.inputs[i] + "') is " +
                ir::elem_name(in(i).elem) + "; hetgraph computes this op in float32 only");
  }
  return node(i);
}

Dims Ctx::dims(std::size_t i) const {
  const Value& v = in(i);
  if (v.known()) return v.konst->dims;
  if (v.view) return v.view->dims;
  if (v.seq)
    unsupported("input " + std::to_string(i) + " ('" + n.inputs[i] +
                "') is a sequence, where a tensor is needed");
  return shape(v.node);
}

const ir::Tensor& Ctx::known_tensor(std::size_t i, std::string_view what) const {
  const Value& v = in(i);
  if (!v.known()) {
    const std::string why = "input " + std::to_string(i) + " ('" + n.inputs[i] + "', " +
                            std::string(what) +
                            ") is computed at run time; hetgraph needs it known when the model "
                            "is imported";
    // Straight from a model input: giving that input's value at import would do. Computed
    // from model inputs: giving them may let the import compute it (shape arithmetic).
    const std::string& from = v.from_input;
    if (from.empty())
      throw UnsupportedError(im.model().source + ": ONNX node " + n.label + ": " + why);
    const bool direct = detail::impl_of(im.g).rec(v.node.id()).op == detail::OpKind::Input;
    throw UnsupportedError(im.model().source + ": ONNX node " + n.label + ": " + why +
                               (direct ? " (give it in ImportOptions::input_values)"
                                       : " (it is computed from input '" + from +
                                             "': give that in ImportOptions::input_values)"),
                           from);
  }
  return *v.konst;
}

Dims Ctx::ints(std::size_t i, std::string_view what) const {
  const ir::Tensor& t = known_tensor(i, what);
  if (!ir::is_integral(t.elem)) {
    fail("input " + std::to_string(i) + " (" + std::string(what) + ") must be integers, it is " +
         ir::elem_name(t.elem));
  }
  return t.i;
}

std::vector<float> Ctx::floats(std::size_t i, std::string_view what) const {
  const ir::Tensor& t = known_tensor(i, what);
  if (ir::is_integral(t.elem)) return std::vector<float>(t.i.begin(), t.i.end());
  return t.f;
}

namespace {
const ir::Attr* find_attr(const ir::Node& n, const std::string& name) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? nullptr : &it->second;
}
}  // namespace

std::int64_t Ctx::attr_i(const std::string& name, std::int64_t def) const {
  const ir::Attr* a = find_attr(n, name);
  if (!a) return def;
  if (a->kind != ir::Attr::kIntA) fail("attribute '" + name + "' must be an int");
  return a->i;
}
float Ctx::attr_f(const std::string& name, float def) const {
  const ir::Attr* a = find_attr(n, name);
  if (!a) return def;
  if (a->kind == ir::Attr::kIntA) return static_cast<float>(a->i);
  if (a->kind != ir::Attr::kFloatA) fail("attribute '" + name + "' must be a float");
  return a->f;
}
std::string Ctx::attr_s(const std::string& name, const std::string& def) const {
  const ir::Attr* a = find_attr(n, name);
  if (!a) return def;
  if (a->kind != ir::Attr::kStringA) fail("attribute '" + name + "' must be a string");
  return a->s;
}
Dims Ctx::attr_ints(const std::string& name, Dims def) const {
  const ir::Attr* a = find_attr(n, name);
  if (!a) return def;
  if (a->kind != ir::Attr::kInts) fail("attribute '" + name + "' must be a list of ints");
  return a->ints;
}
std::vector<float> Ctx::attr_floats(const std::string& name) const {
  const ir::Attr* a = find_attr(n, name);
  if (!a) return {};
  if (a->kind != ir::Attr::kFloats) fail("attribute '" + name + "' must be a list of floats");
  return a->floats;
}
const ir::Tensor* Ctx::attr_t(const std::string& name) const {
  const ir::Attr* a = find_attr(n, name);
  if (!a) return nullptr;
  if (a->kind != ir::Attr::kTensorA) fail("attribute '" + name + "' must be a tensor");
  return a->t.get();
}
const ir::Graph& Ctx::attr_g(const std::string& name) const {
  const ir::Attr* a = find_attr(n, name);
  if (!a) fail("attribute '" + name + "' (a graph) is missing");
  if (a->kind != ir::Attr::kGraphA || !a->g) fail("attribute '" + name + "' must be a graph");
  return *a->g;
}

Node Ctx::node_named(const std::string& name) {
  (void)im.value(name, n);  // defined, and a tensor hetgraph holds
  return im.materialize(name, n);
}

Node Ctx::node_of(const Value& v) {
  if (v.node.valid()) return v.node;
  // A trainable initializer is its one variable; other known values become constants.
  return v.initializer ? im.materialize(v.konst->name, n) : im.make_node(v, v.konst->name, n);
}

std::vector<Value> Ctx::run_body(const ir::Graph& body, std::vector<Value> args) {
  return im.run_body(n, body, std::move(args));
}

void Ctx::set(std::size_t k, const Value& v) {
  if (!wants(k)) return;
  Value out = v;
  if (v.initializer) {  // a trainable initializer passed through: its variable, not its values
    out.node = im.materialize(v.konst->name, n);
    out.konst = nullptr;
    out.initializer = false;
  }
  im.env[n.outputs[k]] = out;
}

Value view_of(Ctx& c, std::size_t i, const Dims& dims) {
  const Value& in = c.in(i);
  Value r;
  r.elem = in.elem;
  if (in.view) {
    r.view = std::make_shared<const ir::Tensor>(host::with_dims(*in.view, dims));
    r.view_base = in.view_base;
    return r;
  }
  r.view_base = c.node(i);
  ir::Tensor at;
  at.elem = ir::kInt64;
  at.dims = dims;
  at.i = c.host<std::int64_t>(numel(dims));
  std::iota(at.i.begin(), at.i.end(), std::int64_t{0});
  r.view = std::make_shared<const ir::Tensor>(std::move(at));
  return r;
}

Value known_value(ir::Tensor t) {
  Value v;
  v.elem = t.elem;
  v.konst = std::make_shared<const ir::Tensor>(std::move(t));
  return v;
}

void Ctx::set(std::size_t k, Node v, int elem) {
  if (!wants(k)) return;
  const TensorType t = im.type(v);  // shape errors surface at this node
  if (elem == ir::kUndefined) {     // float, of the type of the node's float inputs
    elem = ir::kFloat;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      if (has(i) && !in(i).seq && ir::held_as_float(in(i).elem)) {
        elem = in(i).elem;
        break;
      }
    }
  }
  if ((t.dtype == DType::f32) != ir::held_as_float(elem)) {
    throw InternalError("ONNX import: " + n.label + " output " + std::to_string(k) + " typed " +
                        ir::elem_name(elem) + " for a " + std::string(dtype_name(t.dtype)) +
                        " node");
  }
  im.name_node(v, n.outputs[k]);
  Value val;
  val.node = v;
  val.elem = elem;
  im.env[n.outputs[k]] = val;
}

void Ctx::label(Node v, std::string_view what) {
  const std::string base =
      (n.name.empty() ? n.outputs[0] : n.name) + "/" + n.op + "/" + std::string(what);
  std::string s = base;
  for (int k = 2; detail::impl_of(im.g).by_name.count(s); ++k) s = base + "_" + std::to_string(k);
  v.named(s);
}

void Ctx::set(std::size_t k, ir::Tensor t) {
  if (!wants(k)) return;
  const std::int64_t count = t.numel();
  const std::size_t have = ir::is_integral(t.elem) ? t.i.size() : t.f.size();
  if (static_cast<std::size_t>(count) != have) {
    throw InternalError("ONNX import: " + n.label + " folded " + std::to_string(have) +
                        " values for " + dims_str(t.dims));
  }
  t.name = n.outputs[k];
  Value val;
  val.elem = t.elem;
  val.konst = std::make_shared<const ir::Tensor>(std::move(t));
  im.env[n.outputs[k]] = val;
}

void Ctx::alias(std::size_t k, std::size_t i) {
  if (!wants(k)) return;
  Value v = in(i);
  v.initializer = false;  // the alias is a value of its own: an initializer stays one variable
  if (in(i).initializer) v.node = node(i);
  im.env[n.outputs[k]] = v;
}

Graph& Ctx::graph() const {
  return im.g;
}
const ImportOptions& Ctx::options() const {
  return im.options();
}
Node Ctx::dropout_step() {
  return im.dropout_step();
}

Node Ctx::variable(const std::string& name, const Dims& dims, std::vector<float> values) {
  if (dims.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    unsupported("a variable of rank " + std::to_string(dims.size()));
  }
  std::string unique = name;
  for (int k = 2; detail::impl_of(im.g).by_name.count(unique); ++k)
    unique = name + "_" + std::to_string(k);
  return im.variable(unique, Shape(std::span<const std::int64_t>(dims)), std::move(values));
}
const ir::Node* Ctx::sole_consumer(std::size_t k) const {
  return wants(k) ? im.sole_reader(n.outputs[k]) : nullptr;
}
void Ctx::absorb(const ir::Node& later) {
  im.absorbed.insert(&later);
}
bool Ctx::absorbed() const {
  return im.absorbed.count(&n) != 0;
}

TensorType Ctx::type(Node v) const {
  return im.type(v);
}

Dims Ctx::shape(Node v) const {
  const Shape s = im.type(v).shape;
  return Dims(s.dims().begin(), s.dims().end());
}

Node Ctx::constant(float v) {
  return im.g.constant(v);
}

Node Ctx::constant(const Dims& dims, std::vector<float> values) {
  return float_constant(*this, dims, std::move(values));
}

Node Ctx::reshape(Node v, const Dims& dims) {
  if (shape(v) == dims) return v;
  if (dims.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    unsupported("the result " + dims_str(dims) + " has rank " + std::to_string(dims.size()) +
                "; hetgraph tensors have rank 0 to " + std::to_string(Shape::kMaxRank));
  }
  Node r = hetgraph::reshape(v, dims);
  im.type(r);
  return r;
}

void Ctx::host_check(std::int64_t n) const {
  if (n < 0 || n > kMaxImportElements) {
    unsupported("a constant of " + std::to_string(n) +
                " elements built at import (at most 2^28: dims this large come from a damaged "
                "model)");
  }
  im.count_host_bytes(this->n, 4 * n);
}

std::int64_t Ctx::nodes_left() const {
  return im.nodes_left();
}

void Ctx::unsupported(const std::string& why) const {
  throw UnsupportedError(im.model().source + ": ONNX node " + n.label + ": " + why);
}

void Ctx::fail(const std::string& why) const {
  throw ShapeError(im.model().source + ": ONNX node " + n.label + ": " + why);
}

int Ctx::axis(std::int64_t a, int r) const {
  const std::int64_t v = a < 0 ? a + r : a;
  if (v < 0 || v >= r) {
    fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  }
  return static_cast<int>(v);
}

// ---- helpers -------------------------------------------------------------------------------

Dims broadcast(const Dims& a, const Dims& b, const Ctx& c) {
  const std::size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const std::int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (da != db && da != 1 && db != 1) {
      c.fail("shapes " + dims_str(a) + " and " + dims_str(b) + " do not broadcast");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Node float_constant(Ctx& c, const Dims& dims, std::vector<float> values) {
  if (dims.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    c.unsupported("a constant of rank " + std::to_string(dims.size()) +
                  "; hetgraph tensors have rank 0 to " + std::to_string(Shape::kMaxRank));
  }
  return c.graph().constant(Shape(std::span<const std::int64_t>(dims)), std::move(values));
}

Node iota_along(Ctx& c, int rank, int axis, std::int64_t n, std::int64_t shift) {
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank), 1);
  dims[static_cast<std::size_t>(axis)] = n;
  std::vector<std::int32_t> v = c.host<std::int32_t>(n);
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i - shift);
  return c.graph().constant_i32(Shape(std::span<const std::int64_t>(dims)), std::move(v));
}

bool narrow_int(int elem) {
  return elem == ir::kUint8 || elem == ir::kInt8 || elem == ir::kUint16 || elem == ir::kInt16;
}

Node wrap_to(Ctx& c, Node r, int elem) {
  const int bits = elem == ir::kUint8 || elem == ir::kInt8 ? 8 : 16;
  const bool is_signed = elem == ir::kInt8 || elem == ir::kInt16;
  const auto word = [&](std::int32_t v) { return c.graph().constant_i32(Shape{}, {v}); };
  const std::int32_t span = std::int32_t{1} << bits, half = span / 2;
  if (!is_signed) return mod(r, word(span));
  return sub(mod(add(r, word(half)), word(span)), word(half));
}

Node index_check(Ctx& c, Node ids, std::int64_t n, std::string_view what) {
  Node check =
      detail::make_op(detail::OpKind::CheckIndices, {ids, c.constant({n}, c.host<float>(n))});
  c.label(check, what);
  return check;
}

Node broadcast_to(Ctx& c, Node x, const Dims& dims) {
  const Dims have = c.shape(x);
  if (have == dims) return x;
  const Dims out = broadcast(have, dims, c);
  if (out != dims) c.fail("cannot broadcast " + dims_str(have) + " to " + dims_str(dims));
  // x * ones: exact for every value (NaN, infinities and -0 included); the ones tensor spans
  // only the dims x lacks.
  Dims ones(dims.size(), 1);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::size_t off = dims.size() - have.size();
    if (i < off || have[i - off] == 1) ones[i] = dims[i];
  }
  if (ones.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    c.unsupported("a result of rank " + std::to_string(ones.size()));
  }
  Node r;
  if (c.type(x).dtype == DType::f32) {
    r = mul(x, float_constant(c, ones, c.host<float>(numel(ones), 1.0f)));
  } else {  // int32: where(true, x, x) broadcasts the words as they are
    Node t = c.graph().constant_i32(Shape(std::span<const std::int64_t>(ones)),
                                    c.host<std::int32_t>(numel(ones), 1));
    r = where(t, x, x);
  }
  c.type(r);
  return r;
}

// ---- the handler table ----------------------------------------------------------------------

namespace {

// A unary or binary float op whose row names this ONNX op and schema version (OpDef::onnx): one
// node of its inputs (a binary one broadcasts them as ONNX does from opset 7 on).
void row_op(Ctx& c) {
  for (int k = 0; k < detail::kNumOps; ++k) {
    const detail::OpDef& d = detail::op_def(static_cast<detail::OpKind>(k));
    const detail::OnnxForm& f = d.onnx;
    if (f.since > 0 && f.op == c.n.op && c.version >= f.since && c.version <= f.until) {
      std::vector<Node> in{c.f32(0)};
      if (d.elementwise == detail::Elementwise::binary) in.push_back(c.f32(1));
      c.set(0, detail::make_op(static_cast<detail::OpKind>(k), in));
      return;
    }
  }
  // find_handler found this handler through a row that matches
  throw InternalError("ONNX import: " + c.n.label + " has no op row");
}

// Ops the op table imports by their rows: a new elementwise op needs no handler here.
void register_row_ops(std::vector<Handler>& h) {
  for (int k = 0; k < detail::kNumOps; ++k) {
    const detail::OpDef& d = detail::op_def(static_cast<detail::OpKind>(k));
    if (d.onnx.since > 0 && (d.elementwise == detail::Elementwise::unary ||
                             d.elementwise == detail::Elementwise::binary))
      h.push_back({d.onnx.op, d.onnx.since, d.onnx.until, row_op});
  }
}

}  // namespace

const std::vector<Handler>& handlers() {
  static const std::vector<Handler> table = [] {
    std::vector<Handler> h;
    register_row_ops(h);
    register_math_ops(h);
    register_reduce_ops(h);
    register_linalg_ops(h);
    register_signal_ops(h);
    register_quant_ops(h);
    register_training_ops(h);
    register_tensor_ops(h);
    register_nn_ops(h);
    register_rnn_ops(h);
    register_control_ops(h);
    return h;
  }();
  return table;
}

const Handler* find_handler(const std::string& op, int since, const std::string& domain) {
  for (const Handler& h : handlers()) {
    if (h.op == op && h.domain == domain && since >= h.min_since && since <= h.max_since) return &h;
  }
  return nullptr;
}

Dims declared_dims(const ir::ValueInfo& v) {
  Dims d;
  for (const ir::Dim& x : v.dims) d.push_back(x.value);
  return d;
}

std::vector<std::string> dim_names(const ir::ValueInfo& v) {
  std::vector<std::string> n;
  for (const ir::Dim& x : v.dims) n.push_back(x.param);
  return n;
}

void describe(const std::shared_ptr<const Model::Source>& src, Model& out) {
  out.source = src;
  const ir::Model& m = *src->model;
  auto it = m.opsets.find("");
  out.opset = it == m.opsets.end() ? 0 : it->second;
  out.producer = m.producer_name + (m.producer_version.empty() ? "" : " " + m.producer_version);
  out.ops = m.ops;
}

void build(const std::shared_ptr<const Model::Source>& src, Model& out) {
  describe(src, out);
  Importer im(*src, out);
  im.run();
}

}  // namespace imp

// ---- public entry points ---------------------------------------------------------------------

namespace {

Model import_parsed(ir::Model parsed, const ImportOptions& options, bool build) {
  auto src = std::make_shared<Model::Source>();
  src->model = std::make_shared<const ir::Model>(std::move(parsed));
  src->options = options;
  Model m;
  if (build) {
    imp::build(src, m);
    return m;
  }
  imp::describe(src, m);
  const ir::Graph& g = src->model->graph;
  for (const ir::ValueInfo& v : g.inputs) {
    const bool init = std::any_of(g.initializers.begin(), g.initializers.end(),
                                  [&](const ir::Tensor& t) { return t.name == v.name; });
    if (init) continue;
    const DType dtype = ir::held_as_float(v.elem) ? DType::f32 : DType::i32;
    const auto seq = std::find_if(options.sequence_shapes.begin(), options.sequence_shapes.end(),
                                  [&](const auto& p) { return p.first == v.name; });
    if (v.non_tensor == "sequence" && seq != options.sequence_shapes.end()) {
      for (std::size_t k = 0; k < seq->second.size(); ++k)  // as the import names them
        m.input_info.push_back({v.name + "[" + std::to_string(k) + "]",
                                ir::elem_name(v.elem),
                                dtype,
                                seq->second[k],
                                {},
                                {}});
      continue;
    }
    m.input_info.push_back(
        {v.name, ir::elem_name(v.elem), dtype, Shape{}, imp::declared_dims(v), imp::dim_names(v)});
  }
  return m;
}

std::string read_bytes(const std::string& path) {
  // A regular file only (a FIFO would block the import, /dev/zero never end), and no larger
  // than protobuf parses.
  return ir::read_regular_file(path, "the ONNX model", INT_MAX,
                               "models larger than 2 GiB must keep their tensors as external data");
}
std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);  // a model in / has its data there
}

}  // namespace

Model import(const std::string& path, const ImportOptions& options) {
  return import_parsed(ir::parse_model(read_bytes(path), path, dir_of(path), options.check),
                       options, true);
}

Model read_model(const std::string& path, const ImportOptions& options) {
  return import_parsed(ir::parse_model(read_bytes(path), path, dir_of(path), options.check),
                       options, false);
}

Model import_bytes(std::span<const std::byte> bytes, const ImportOptions& options,
                   const std::string& what) {
  return import_parsed(ir::parse_model(bytes.data(), bytes.size(), what, "", options.check),
                       options, true);
}

Model Model::with_shapes(const InputShapes& shapes) const {
  if (!source) throw GraphError("Model::with_shapes: the model was not imported");
  auto src = std::make_shared<Source>(*source);
  for (const auto& shape : shapes) {
    const std::string& name = shape.first;
    const Shape& s = shape.second;
    auto it = std::find_if(src->options.input_shapes.begin(), src->options.input_shapes.end(),
                           [&](const auto& p) { return p.first == name; });
    if (it != src->options.input_shapes.end())
      it->second = s;
    else
      src->options.input_shapes.push_back({name, s});
  }
  Model m;
  imp::build(src, m);
  // This model's handles name the same inputs, outputs and variables of the new graph.
  if (graph.size() > 0) {
    detail::GraphImpl& g = detail::impl_of(m.graph);
    g.stands_for = detail::impl_of(graph).id;
    auto map = [&](const std::vector<Node>& from, const std::vector<Node>& to) {
      for (std::size_t i = 0; i < from.size() && i < to.size(); ++i)
        g.stand_ins[from[i].id()] = to[i].id();
    };
    map(inputs, m.inputs);
    map(outputs, m.outputs);
    map(variables, m.variables);
  }
  return m;
}

Model Model::with_options(const ImportOptions& options) const {
  if (!source) throw GraphError("Model::with_options: the model was not imported");
  auto src = std::make_shared<Source>(*source);
  src->options = options;
  Model m;
  imp::build(src, m);
  return m;
}

}  // namespace hetgraph::onnx
