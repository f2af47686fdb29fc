// SPDX-License-Identifier: Apache-2.0
// hetgraph::onnx::export_model: the part of a Graph some outputs need, for given input shapes,
// as an ONNX model (opset 17). The graph goes through the compiler's first passes (prune,
// order, shape inference) and each node becomes one or a few ONNX nodes; variables and
// constants become initializers (variables with a compiled graph's current values if given).
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "common/executable.hpp"
#include "compiler/geometry.hpp"
#include "compiler/plan.hpp"
#include "hetgraph/onnx.hpp"
#include "onnx/ir.hpp"
#include "util/atomic_file.hpp"
#include "util/parse.hpp"

namespace hetgraph::onnx {

namespace {

using detail::OpKind;
using detail::PlanNode;

constexpr std::int64_t kOpset = 17;
constexpr std::int64_t kIrVersion = 8;  // what ONNX 1.12 writes for opset 17

class Exporter {
 public:
  Exporter(const detail::Plan& p, const ExportOptions& o) : p_(p), o_(o) {
    m_.ir_version = kIrVersion;
    m_.opsets[""] = kOpset;
    m_.producer_name = "hetgraph";
    m_.producer_version = "0.1";
    m_.graph.name = o.graph_name;
  }

  ir::Model run() {
    for (std::uint32_t i = 0; i < p_.nodes.size(); ++i) {
      if (p_.nodes[i].gid != detail::kNoGid && !p_.nodes[i].name.empty())
        used_.insert(p_.nodes[i].name);
    }
    names_.resize(p_.nodes.size());
    // A computed output without a name of its own is that value itself, named as the output
    // (no Identity node).
    std::map<std::uint32_t, std::string> preset;
    for (std::size_t k = 0; k < p_.fetches.size(); ++k) {
      const PlanNode& n = p_.nodes[p_.fetches[k]];
      const std::string want = output_name(k);
      if (n.name.empty() && n.storage == detail::Storage::Computed && !used_.count(want) &&
          !preset.count(p_.fetches[k])) {
        used_.insert(want);
        preset[p_.fetches[k]] = want;
      }
    }
    for (std::uint32_t i = 0; i < p_.nodes.size(); ++i) {
      const PlanNode& n = p_.nodes[i];
      if (auto it = preset.find(i); it != preset.end())
        names_[i] = it->second;
      else if (n.name.empty())
        names_[i] = fresh("n" + std::to_string(n.gid) + "_" + std::string(detail::op_name(n.op)));
      else
        names_[i] = n.name;
      node(i);
    }
    outputs();
    return std::move(m_);
  }

 private:
  std::string fresh(const std::string& base) {
    std::string s = base;
    for (int k = 2; used_.count(s); ++k) s = base + "_" + std::to_string(k);
    used_.insert(s);
    return s;
  }
  static std::vector<std::int64_t> dims(const Shape& s) {
    return {s.dims().begin(), s.dims().end()};
  }
  const std::string& in(const PlanNode& n, std::size_t k) const { return names_[n.inputs[k]]; }

  std::string ints(const std::vector<std::int64_t>& v) {
    ir::Tensor t;
    t.name = fresh("const_i64");
    t.elem = ir::kInt64;
    t.dims = {static_cast<std::int64_t>(v.size())};
    t.i = v;
    m_.graph.initializers.push_back(t);
    return t.name;
  }
  std::string i32(std::int32_t v) {
    ir::Tensor t;
    t.name = fresh("const_i32");
    t.elem = ir::kInt32;
    t.i = {v};
    m_.graph.initializers.push_back(t);
    return t.name;
  }
  // Float constants are Constant nodes: float initializers import as (trainable) variables.
  std::string scalar(float v) {
    ir::Tensor t;
    t.elem = ir::kFloat;
    t.f = {v};
    return constant(fresh("const_f32"), std::move(t));
  }
  std::string constant(const std::string& name, ir::Tensor t) {
    ir::Attr a;
    a.kind = ir::Attr::kTensorA;
    a.t = std::make_shared<const ir::Tensor>(std::move(t));
    add("Constant", {}, {name}).attrs["value"] = a;
    return name;
  }
  ir::Node& add(const std::string& op, std::vector<std::string> inputs,
                std::vector<std::string> outputs) {
    ir::Node n;
    n.op = op;
    n.name = outputs[0] + "/" + op;
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    m_.graph.nodes.push_back(std::move(n));
    return m_.graph.nodes.back();
  }
  static ir::Attr attr_i(std::int64_t v) {
    ir::Attr a;
    a.kind = ir::Attr::kIntA;
    a.i = v;
    return a;
  }
  static ir::Attr attr_f(float v) {
    ir::Attr a;
    a.kind = ir::Attr::kFloatA;
    a.f = v;
    return a;
  }
  static ir::Attr attr_ints(std::vector<std::int64_t> v) {
    ir::Attr a;
    a.kind = ir::Attr::kInts;
    a.ints = std::move(v);
    return a;
  }

  [[noreturn]] void cannot(const PlanNode& n, const std::string& why) const {
    throw GraphError("export_model: node " + n.label + " " + why);
  }

  /// A variable (an initializer) or a constant (a Constant node).
  void tensor(std::uint32_t i, std::vector<float> f, const std::vector<std::int32_t>* i32,
              bool variable) {
    const PlanNode& n = p_.nodes[i];
    ir::Tensor t;
    t.dims = dims(n.type.shape);
    if (i32) {
      t.elem = ir::kInt32;
      t.i.assign(i32->begin(), i32->end());
    } else {
      t.elem = ir::kFloat;
      t.f = std::move(f);
    }
    if (!variable) {
      constant(names_[i], std::move(t));
      return;
    }
    t.name = names_[i];
    m_.graph.initializers.push_back(std::move(t));
  }

  std::vector<float> variable_values(const PlanNode& n) {
    const auto count = static_cast<std::size_t>(n.type.shape.numel());
    if (o_.values) {
      const CompiledGraph& cg = *o_.values;
      std::vector<float> v;
      try {
        v = cg.read(n.name);
      } catch (const Error& e) {
        throw GraphError("export_model: variable '" + n.name +
                         "' has no value in the compiled graph given: " + e.what());
      }
      if (v.size() != count) {
        throw GraphError("export_model: variable '" + n.name + "' has " + std::to_string(v.size()) +
                         " values in the compiled graph given, " + std::to_string(count) +
                         " in the graph");
      }
      return v;
    }
    detail::InitialValues::check(n.init, n.label);
    std::vector<float> v(count);
    detail::InitialValues(n.init).next(v);
    return v;
  }

  void node(std::uint32_t i) {
    const PlanNode& n = p_.nodes[i];
    (this->*export_of(n.op))(i, n, names_[i]);
  }

  // How one op kind is written: node i (n) as ONNX nodes whose last output is `out`.
  using ExportFn = void (Exporter::*)(std::uint32_t i, const PlanNode& n, const std::string& out);

  /// The row's ONNX form where it has one (OpDef::onnx), else its family's function below.
  static ExportFn export_of(OpKind op) {
    static const std::array<ExportFn, detail::kNumOps> table = [] {
      struct Family {
        OpKind op;
        ExportFn fn;
      };
      const Family families[] = {
          {OpKind::Mod, &Exporter::mod},
          {OpKind::FMod, &Exporter::mod},
          {OpKind::Input, &Exporter::graph_input},
          {OpKind::Variable, &Exporter::variable},
          {OpKind::Constant, &Exporter::constant_value},
          {OpKind::GradSeed, &Exporter::grad_seed},
          {OpKind::Cast, &Exporter::cast},
          {OpKind::ToFloat16, &Exporter::round_to_narrow_float},
          {OpKind::ToBfloat16, &Exporter::round_to_narrow_float},
          {OpKind::Scale, &Exporter::scale},
          {OpKind::Axpby, &Exporter::axpby},
          {OpKind::Gelu, &Exporter::gelu},
          {OpKind::Clip, &Exporter::clip},
          {OpKind::Equal, &Exporter::comparison},
          {OpKind::Less, &Exporter::comparison},
          {OpKind::LessEqual, &Exporter::comparison},
          {OpKind::Greater, &Exporter::comparison},
          {OpKind::GreaterEqual, &Exporter::comparison},
          {OpKind::LogicalAnd, &Exporter::comparison},
          {OpKind::LogicalOr, &Exporter::comparison},
          {OpKind::LogicalXor, &Exporter::comparison},
          {OpKind::Where, &Exporter::where},
          {OpKind::ReduceSum, &Exporter::reduce},
          {OpKind::ReduceMean, &Exporter::reduce},
          {OpKind::ReduceMax, &Exporter::reduce},
          {OpKind::ReduceProd, &Exporter::reduce},
          {OpKind::ArgMax, &Exporter::arg_extreme},
          {OpKind::ArgMin, &Exporter::arg_extreme},
          {OpKind::TopK, &Exporter::top_k},
          {OpKind::MatMul, &Exporter::matmul},
          {OpKind::CrossEntropy, &Exporter::cross_entropy},
          {OpKind::Slice, &Exporter::slice},
          {OpKind::StridedSlice, &Exporter::strided_slice},
          {OpKind::Expand, &Exporter::expand},
          {OpKind::CumSum, &Exporter::cum_sum},
          {OpKind::CheckIndices, &Exporter::check_indices},
          {OpKind::ScatterElements, &Exporter::scatter_elements},
          {OpKind::Transpose, &Exporter::transpose},
          {OpKind::SumTo, &Exporter::sum_to},
          {OpKind::Reshape, &Exporter::reshape},
          {OpKind::ReshapeLike, &Exporter::reshape},
          {OpKind::Conv2d, &Exporter::window},
          {OpKind::ConvTranspose2d, &Exporter::window},
          {OpKind::MaxPool2d, &Exporter::window},
          {OpKind::AvgPool2d, &Exporter::window},
          {OpKind::Embedding, &Exporter::embedding},
          {OpKind::Assign, &Exporter::updates_variables},
          {OpKind::OptimizerUpdate, &Exporter::updates_variables},
          {OpKind::SparseOptimizerUpdate, &Exporter::updates_variables},
          {OpKind::Group, &Exporter::updates_variables},
      };
      std::array<ExportFn, detail::kNumOps> t;
      t.fill(&Exporter::no_form);
      for (const Family& f : families) t[static_cast<std::size_t>(f.op)] = f.fn;
      for (std::size_t k = 0; k < t.size(); ++k) {
        const detail::OnnxForm& form = detail::op_def(static_cast<OpKind>(k)).onnx;
        if (!form.op.empty() || !form.body.empty()) t[k] = &Exporter::from_row;
      }
      return t;
    }();
    return table[static_cast<std::size_t>(op)];
  }

  // ---- the export functions, one per family of ops whose ONNX form is alike

  // Ops that are one ONNX op of their own inputs say so in their row (OpDef::onnx).
  void from_row(std::uint32_t, const PlanNode& n, const std::string& out) {
    const detail::OnnxForm& form = detail::op_def(n.op).onnx;
    if (form.op.empty() || form.since > kOpset) return body(n, form, out);  // silu: no ONNX op
    std::vector<std::string> ins;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) ins.push_back(in(n, k));
    ir::Node& e = add(std::string(form.op), std::move(ins), {out});
    if (form.attr == detail::OnnxForm::Attr::axis) e.attrs["axis"] = attr_i(n.attrs.axis);
    if (form.attr == detail::OnnxForm::Attr::alpha)
      e.attrs["alpha"] = attr_f(detail::elementwise_params(n.attrs)[0]);
  }

  // ONNX's Mod takes fmod = 0 (numpy's mod) for ints only: a float mod is fmod's remainder
  // r, plus b where r and b have opposite signs (sign(r) sign(b) < 0, exact).
  void mod(std::uint32_t, const PlanNode& n, const std::string& out) {
    const bool floored_float = n.op == OpKind::Mod && n.type.dtype == DType::f32;
    const std::string r = floored_float ? fresh(out + "/fmod") : out;
    add("Mod", {in(n, 0), in(n, 1)}, {r}).attrs["fmod"] =
        attr_i(n.op == OpKind::FMod || floored_float);
    if (!floored_float) return;
    const std::string sr = fresh(out + "/sign_r"), sb = fresh(out + "/sign_b"),
                      p = fresh(out + "/signs"), flip = fresh(out + "/flip"),
                      rb = fresh(out + "/r_plus_b");
    add("Sign", {r}, {sr});
    add("Sign", {in(n, 1)}, {sb});
    add("Mul", {sr, sb}, {p});
    add("Less", {p, scalar(0.0f)}, {flip});
    add("Add", {r, in(n, 1)}, {rb});
    add("Where", {flip, rb, r}, {out});
  }

  void graph_input(std::uint32_t, const PlanNode& n, const std::string& out) {
    ir::ValueInfo v;
    v.name = out;
    v.elem = n.type.dtype == DType::f32 ? ir::kFloat : ir::kInt32;
    v.has_shape = true;
    for (std::int64_t d : n.type.shape.dims()) v.dims.push_back({d, ""});
    if (o_.dynamic_batch && !v.dims.empty()) v.dims[0] = {-1, "batch"};
    m_.graph.inputs.push_back(v);
  }

  void variable(std::uint32_t i, const PlanNode& n, const std::string&) {
    tensor(i, variable_values(n), nullptr, true);
  }

  void constant_value(std::uint32_t i, const PlanNode& n, const std::string&) {
    if (n.type.dtype == DType::f32) return tensor(i, *n.f32_values, nullptr, false);
    tensor(i, {}, n.i32_values.get(), false);
  }

  // d(loss)/d(loss): a one (the loss is a scalar)
  void grad_seed(std::uint32_t i, const PlanNode& n, const std::string&) {
    tensor(i, std::vector<float>(static_cast<std::size_t>(n.type.shape.numel()), 1.0f), nullptr,
           false);
  }

  void cast(std::uint32_t, const PlanNode& n, const std::string& out) {
    add("Cast", {in(n, 0)}, {out}).attrs["to"] =
        attr_i(n.attrs.get<detail::TargetType>().dtype == DType::f32 ? ir::kFloat : ir::kInt32);
  }

  // To the narrower type and back: its values, as float32.
  void round_to_narrow_float(std::uint32_t, const PlanNode& n, const std::string& out) {
    const std::string narrow = fresh(out + "/narrow");
    add("Cast", {in(n, 0)}, {narrow}).attrs["to"] =
        attr_i(n.op == OpKind::ToFloat16 ? ir::kFloat16 : ir::kBfloat16);
    add("Cast", {narrow}, {out}).attrs["to"] = attr_i(ir::kFloat);
  }

  void scale(std::uint32_t, const PlanNode& n, const std::string& out) {
    add("Mul", {in(n, 0), scalar(n.attrs.get_or_default<detail::ScaleFactor>().factor)}, {out});
  }

  void axpby(std::uint32_t, const PlanNode& n, const std::string& out) {
    const std::string ax = fresh(out + "/ax"), by = fresh(out + "/by");
    const detail::AxpbyCoeffs& k = n.attrs.get_or_default<detail::AxpbyCoeffs>();
    add("Mul", {in(n, 0), scalar(k.a)}, {ax});
    add("Mul", {in(n, 1), scalar(k.b)}, {by});
    add("Add", {ax, by}, {out});
  }

  // x * (1 + erf(x / sqrt 2)) / 2: opset 17 has no Gelu
  void gelu(std::uint32_t, const PlanNode& n, const std::string& out) {
    const std::string a = fresh(out + "/scaled"), e = fresh(out + "/erf"),
                      p = fresh(out + "/plus1"), m = fresh(out + "/times_x");
    add("Mul", {in(n, 0), scalar(0.70710678118654752f)}, {a});
    add("Erf", {a}, {e});
    add("Add", {e, scalar(1.0f)}, {p});
    add("Mul", {in(n, 0), p}, {m});
    add("Mul", {m, scalar(0.5f)}, {out});
  }

  void clip(std::uint32_t, const PlanNode& n, const std::string& out) {
    const detail::ClipRange& r = n.attrs.get_or_default<detail::ClipRange>();
    add("Clip",
        {in(n, 0), std::isinf(r.lo) ? "" : scalar(r.lo), std::isinf(r.hi) ? "" : scalar(r.hi)},
        {out});
  }

  // ONNX's comparisons and logic give bool, which hetgraph holds as int32: cast back.
  void comparison(std::uint32_t, const PlanNode& n, const std::string& out) {
    const bool logic =
        n.op == OpKind::LogicalAnd || n.op == OpKind::LogicalOr || n.op == OpKind::LogicalXor;
    std::vector<std::string> ins{in(n, 0), in(n, 1)};
    if (logic) {  // And, Or, Xor take bools: x != 0
      for (std::string& i : ins) {
        const std::string b = fresh(out + "/bool");
        add("Cast", {i}, {b}).attrs["to"] = attr_i(ir::kBool);
        i = b;
      }
    }
    const char* op = n.op == OpKind::Equal          ? "Equal"
                     : n.op == OpKind::Less         ? "Less"
                     : n.op == OpKind::LessEqual    ? "LessOrEqual"
                     : n.op == OpKind::Greater      ? "Greater"
                     : n.op == OpKind::GreaterEqual ? "GreaterOrEqual"
                     : n.op == OpKind::LogicalAnd   ? "And"
                     : n.op == OpKind::LogicalOr    ? "Or"
                                                    : "Xor";
    const std::string r = fresh(out + "/bool");
    add(op, ins, {r});
    add("Cast", {r}, {out}).attrs["to"] = attr_i(ir::kInt32);
  }

  // ONNX's condition is bool
  void where(std::uint32_t, const PlanNode& n, const std::string& out) {
    const std::string cond = fresh(out + "/cond");
    add("Cast", {in(n, 0)}, {cond}).attrs["to"] = attr_i(ir::kBool);
    add("Where", {cond, in(n, 1), in(n, 2)}, {out});
  }

  void reduce(std::uint32_t, const PlanNode& n, const std::string& out) {
    const auto& at = n.attrs;
    const char* op = n.op == OpKind::ReduceSum    ? "ReduceSum"
                     : n.op == OpKind::ReduceMean ? "ReduceMean"
                     : n.op == OpKind::ReduceMax  ? "ReduceMax"
                                                  : "ReduceProd";
    std::vector<std::int64_t> axes;
    if (at.axis != kAllAxes) axes.push_back(at.axis);
    ir::Node& r = n.op == OpKind::ReduceSum
                      ? add(op, {in(n, 0), axes.empty() ? "" : ints(axes)}, {out})
                      : add(op, {in(n, 0)}, {out});
    if (n.op != OpKind::ReduceSum && !axes.empty()) r.attrs["axes"] = attr_ints(axes);
    r.attrs["keepdims"] = attr_i(at.keepdims ? 1 : 0);
  }

  // ArgMax, ArgMin: ONNX's positions are int64, cast to the int32 they are here
  void arg_extreme(std::uint32_t, const PlanNode& n, const std::string& out) {
    const auto& at = n.attrs;
    std::string x = in(n, 0);
    const bool all = at.axis == kAllAxes;
    if (all) {  // ONNX takes one axis: the flat position is one along the flattened input
      const std::string flat = fresh(out + "/flat");
      add("Reshape", {x, ints({-1})}, {flat});
      x = flat;
    }
    const std::string pos = fresh(out + "/int64"), cast = all ? fresh(out + "/int32") : out;
    ir::Node& r = add(n.op == OpKind::ArgMax ? "ArgMax" : "ArgMin", {x}, {pos});
    r.attrs["axis"] = attr_i(all ? 0 : at.axis);
    r.attrs["keepdims"] = attr_i(at.keepdims ? 1 : 0);
    if (at.last_index) r.attrs["select_last_index"] = attr_i(1);
    add("Cast", {pos}, {cast}).attrs["to"] = attr_i(ir::kInt32);
    if (all) add("Reshape", {cast, ints(dims(n.type.shape))}, {out});
  }

  // ONNX TopK's indices (int64) cast to int32; its values go unused
  void top_k(std::uint32_t, const PlanNode& n, const std::string& out) {
    const auto& spec = n.attrs.get<detail::TopKSpec>();
    const std::string values = fresh(out + "/values"), pos = fresh(out + "/int64");
    ir::Node& t = add("TopK", {in(n, 0), ints({spec.k})}, {values, pos});
    t.attrs["axis"] = attr_i(n.attrs.axis);
    t.attrs["largest"] = attr_i(spec.largest ? 1 : 0);
    add("Cast", {pos}, {out}).attrs["to"] = attr_i(ir::kInt32);
  }

  void matmul(std::uint32_t, const PlanNode& n, const std::string& out) {
    const auto& at = n.attrs;
    const Shape& a = p_.nodes[n.inputs[0]].type.shape;
    const Shape& b = p_.nodes[n.inputs[1]].type.shape;
    if (a.rank() == 2 && b.rank() == 2) {
      ir::Node& g = add("Gemm", {in(n, 0), in(n, 1)}, {out});
      if (at.trans_a) g.attrs["transA"] = attr_i(1);
      if (at.trans_b) g.attrs["transB"] = attr_i(1);
      return;
    }
    auto swapped = [&](std::size_t k, const Shape& s) {
      std::vector<std::int64_t> perm;
      for (int d = 0; d < s.rank(); ++d) perm.push_back(d);
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      const std::string t = fresh(out + "/t" + std::to_string(k));
      add("Transpose", {in(n, k)}, {t}).attrs["perm"] = attr_ints(perm);
      return t;
    };
    add("MatMul", {at.trans_a ? swapped(0, a) : in(n, 0), at.trans_b ? swapped(1, b) : in(n, 1)},
        {out});
  }

  void cross_entropy(std::uint32_t, const PlanNode& n, const std::string& out) {
    if (p_.nodes[n.inputs[1]].type.dtype != DType::f32) {
      cannot(n,
             "(cross-entropy with int32 class ids) has no ONNX form here; export the "
             "probabilities");
    }
    const std::string l = fresh(out + "/log"), m = fresh(out + "/times_labels"),
                      s = fresh(out + "/sum");
    add("Log", {in(n, 0)}, {l});
    add("Mul", {in(n, 1), l}, {m});
    add("ReduceSum", {m, ints({-1})}, {s}).attrs["keepdims"] = attr_i(0);
    add("Neg", {s}, {out});
  }

  void slice(std::uint32_t, const PlanNode& n, const std::string& out) {
    const auto& at = n.attrs;
    const detail::SliceRange& r = at.get_or_default<detail::SliceRange>();
    add("Slice", {in(n, 0), ints({r.begin}), ints({r.end}), ints({at.axis})}, {out});
  }

  // The spec is ONNX Slice's own (axes and steps filled in).
  void strided_slice(std::uint32_t, const PlanNode& n, const std::string& out) {
    const auto& spec = n.attrs.get<detail::SliceSpec>();
    std::vector<std::int64_t> axes = spec.axes, steps = spec.steps;
    for (std::size_t k = axes.size(); k < spec.starts.size(); ++k)
      axes.push_back(static_cast<std::int64_t>(k));
    steps.resize(spec.starts.size(), 1);
    add("Slice", {in(n, 0), ints(spec.starts), ints(spec.ends), ints(axes), ints(steps)}, {out});
  }

  // To the shape of input 1 (which lends only its shape).
  void expand(std::uint32_t, const PlanNode& n, const std::string& out) {
    add("Expand", {in(n, 0), ints(dims(n.type.shape))}, {out});
  }

  void cum_sum(std::uint32_t, const PlanNode& n, const std::string& out) {
    ir::Tensor axis;  // a 0-d tensor
    axis.name = fresh("const_i64");
    axis.elem = ir::kInt64;
    axis.i = {n.attrs.axis};
    m_.graph.initializers.push_back(axis);
    ir::Node& s = add("CumSum", {in(n, 0), axis.name}, {out});
    const detail::ScanMode m = n.attrs.get<detail::ScanMode>();
    s.attrs["exclusive"] = attr_i(m.exclusive ? 1 : 0);
    s.attrs["reverse"] = attr_i(m.reverse ? 1 : 0);
  }

  // ONNX has no check: a Gather from zeros, one per row of the bound, with negative ids moved
  // out of range (Gather takes [-n, n)) is one that an importer which checks its Gathers
  // (hetgraph's) keeps. The zeros summed are check_indices' zero.
  void check_indices(std::uint32_t, const PlanNode& n, const std::string& out) {
    const std::int64_t rows = p_.nodes[n.inputs[1]].type.shape[0];
    const std::string neg = fresh(out + "/negative"), moved = fresh(out + "/moved"),
                      picked = fresh(out + "/picked"), sum = fresh(out + "/sum");
    add("Less", {in(n, 0), i32(0)}, {neg});
    add("Where", {neg, i32(static_cast<std::int32_t>(rows)), in(n, 0)}, {moved});
    ir::Tensor zeros;
    zeros.elem = ir::kFloat;
    zeros.dims = {rows};
    zeros.f.assign(static_cast<std::size_t>(rows), 0.0f);
    add("Gather", {constant(fresh("zeros"), std::move(zeros)), moved}, {picked});
    add("ReduceSum", {picked}, {sum}).attrs["keepdims"] = attr_i(0);
    add("Reshape", {sum, ints({1})}, {out});
  }

  // The reduction as opset 16 on spells it.
  void scatter_elements(std::uint32_t, const PlanNode& n, const std::string& out) {
    ir::Node& s = add("ScatterElements", {in(n, 0), in(n, 1), in(n, 2)}, {out});
    s.attrs["axis"] = attr_i(n.attrs.axis);
    const ScatterReduction r = n.attrs.get<detail::ScatterMode>().reduction;
    if (r != ScatterReduction::none) {
      ir::Attr a;
      a.kind = ir::Attr::kStringA;
      a.s = r == ScatterReduction::add ? "add" : "mul";
      s.attrs["reduction"] = a;
    }
  }

  void transpose(std::uint32_t, const PlanNode& n, const std::string& out) {
    std::vector<std::int64_t> perm = n.attrs.get<detail::Permutation>().perm;
    if (perm.empty()) {
      const int r = p_.nodes[n.inputs[0]].type.shape.rank();
      for (int d = 0; d < r; ++d) perm.push_back(d);
      if (r >= 2) std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    }
    add("Transpose", {in(n, 0)}, {out}).attrs["perm"] = attr_ints(perm);
  }

  // A gradient summed back to the shape it was broadcast from.
  void sum_to(std::uint32_t, const PlanNode& n, const std::string& out) {
    const Shape& from = p_.nodes[n.inputs[0]].type.shape;
    const Shape& to = n.type.shape;
    const int lead = from.rank() - to.rank();
    std::vector<std::int64_t> axes;
    for (int d = 0; d < from.rank(); ++d) {
      if (d < lead || (to[d - lead] == 1 && from[d] != 1)) axes.push_back(d);
    }
    std::string x = in(n, 0);
    if (!axes.empty()) {
      const std::string sum = fresh(out + "/sum");
      add("ReduceSum", {x, ints(axes)}, {sum}).attrs["keepdims"] = attr_i(1);
      x = sum;
    }
    add("Reshape", {x, ints(dims(to))}, {out});
  }

  void reshape(std::uint32_t, const PlanNode& n, const std::string& out) {
    add("Reshape", {in(n, 0), ints(dims(n.type.shape))}, {out});
  }

  // Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d: a Window2d's attributes.
  void window(std::uint32_t, const PlanNode& n, const std::string& out) {
    const bool conv = n.op == OpKind::Conv2d || n.op == OpKind::ConvTranspose2d;
    const Shape& x = p_.nodes[n.inputs[0]].type.shape;
    // auto_pad as the pads it resolves to for this input (the plan's shapes are fixed);
    // a convolution's kernel is its weights'.
    detail::Window2d win = n.attrs.get<detail::Window2d>();
    if (conv)
      win.kernel = {p_.nodes[n.inputs[1]].type.shape[2], p_.nodes[n.inputs[1]].type.shape[3]};
    const auto w = detail::resolve_pads(win, x[2], x[3]);
    std::vector<std::string> ins{in(n, 0)};
    if (conv) {
      ins.push_back(in(n, 1));
      if (n.inputs.size() > 2) ins.push_back(in(n, 2));
    }
    ir::Node& c = add(n.op == OpKind::Conv2d            ? "Conv"
                      : n.op == OpKind::ConvTranspose2d ? "ConvTranspose"
                      : n.op == OpKind::MaxPool2d       ? "MaxPool"
                                                        : "AveragePool",
                      ins, {out});
    c.attrs["kernel_shape"] = attr_ints({w.kernel[0], w.kernel[1]});
    c.attrs["strides"] = attr_ints({w.stride[0], w.stride[1]});
    c.attrs["pads"] = attr_ints({w.pad_begin[0], w.pad_begin[1], w.pad_end[0], w.pad_end[1]});
    if (n.op != OpKind::AvgPool2d) c.attrs["dilations"] = attr_ints({w.dilation[0], w.dilation[1]});
    if (conv) c.attrs["group"] = attr_i(w.groups);
    if (n.op == OpKind::ConvTranspose2d)
      c.attrs["output_padding"] = attr_ints({w.output_padding[0], w.output_padding[1]});
    if (!conv) c.attrs["ceil_mode"] = attr_i(w.ceil_mode ? 1 : 0);
    if (n.op == OpKind::AvgPool2d)
      c.attrs["count_include_pad"] = attr_i(w.count_include_pad ? 1 : 0);
  }

  void embedding(std::uint32_t, const PlanNode& n, const std::string& out) {
    add("Gather", {in(n, 0), in(n, 1)}, {out}).attrs["axis"] = attr_i(0);
  }

  // Assign, optimizer updates, groups.
  [[noreturn]] void updates_variables(std::uint32_t, const PlanNode& n, const std::string&) {
    cannot(n, "updates variables (training): export the inference outputs, not the step");
  }

  [[noreturn]] void no_form(std::uint32_t, const PlanNode& n, const std::string&) {
    cannot(n, std::string("(") + std::string(detail::op_name(n.op)) +
                  ") has no ONNX form (gradient and training ops are not exported)");
  }

  // An op newer than kOpset as its row's body (OnnxForm::body), e.g. "Mul(x, Tanh(Softplus(x)))":
  // one ONNX node per call, the outermost one writing the node's output `out`.
  void body(const PlanNode& n, const detail::OnnxForm& form, const std::string& out) {
    if (form.body.empty()) {
      cannot(n, "(" + std::string(form.op) + ") needs ONNX opset " + std::to_string(form.since) +
                    "; the exporter writes opset " + std::to_string(kOpset));
    }
    std::string_view rest = form.body;
    body_term(n, rest, out, true);
    if (rest.find_first_not_of(' ') != std::string_view::npos)
      throw InternalError("OnnxForm::body '" + std::string(form.body) + "': text after the call");
  }
  // The term at the front of `rest` (consumed): x, a number (a float scalar), or Op(term, ...),
  // written to `out` when `outer`, else to a fresh name after it. Returns the name of its value.
  std::string body_term(const PlanNode& n, std::string_view& rest, const std::string& out,
                        bool outer) {
    rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
    const std::size_t end = std::min(rest.find_first_of("(,) "), rest.size());
    const std::string op(rest.substr(0, end));
    rest.remove_prefix(end);
    if (rest.empty() || rest.front() != '(') {
      double v = 0;  // a number, read whatever the program's locale
      if (!outer && detail::parse_real(op, v) == detail::ParseStatus::ok)
        return scalar(static_cast<float>(v));
      if (op != "x" || outer) throw InternalError("OnnxForm::body: '" + op + "' is not a call");
      return in(n, 0);
    }
    std::vector<std::string> args;
    for (char c = ','; c == ',';) {
      rest.remove_prefix(1);  // '(' or ','
      args.push_back(body_term(n, rest, out, false));
      rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
      c = rest.empty() ? '\0' : rest.front();
      if (c != ',' && c != ')') throw InternalError("OnnxForm::body: " + op + "( is not closed");
    }
    rest.remove_prefix(1);  // ')'
    const std::string value = outer ? out : fresh(out + "/" + op);
    add(op, std::move(args), {value});
    return value;
  }

  std::string output_name(std::size_t k) const {
    const PlanNode& n = p_.nodes[p_.fetches[k]];
    return k < o_.output_names.size() ? o_.output_names[k]
           : n.name.empty()           ? "output_" + std::to_string(k)
                                      : n.name;
  }

  void outputs() {
    for (std::size_t k = 0; k < p_.fetches.size(); ++k) {
      const std::uint32_t i = p_.fetches[k];
      const PlanNode& n = p_.nodes[i];
      std::string name = output_name(k);
      const bool taken = std::any_of(m_.graph.outputs.begin(), m_.graph.outputs.end(),
                                     [&](const ir::ValueInfo& v) { return v.name == name; });
      // A value that is a graph input, an initializer or an output already, or another name:
      // an Identity gives it the output's own name.
      const bool direct = name == names_[i] && !taken && n.op != OpKind::Input &&
                          n.op != OpKind::Variable && n.op != OpKind::Constant;
      if (!direct) {
        if (name == names_[i] || taken)
          name = fresh(name);
        else
          used_.insert(name);
        add("Identity", {names_[i]}, {name});
      }
      ir::ValueInfo v;
      v.name = name;
      v.elem = n.type.dtype == DType::f32 ? ir::kFloat : ir::kInt32;
      v.has_shape = true;
      for (std::int64_t d : n.type.shape.dims()) v.dims.push_back({d, ""});
      if (o_.dynamic_batch && !v.dims.empty()) v.dims[0] = {-1, "batch"};
      m_.graph.outputs.push_back(v);
    }
  }

  const detail::Plan& p_;
  const ExportOptions& o_;
  ir::Model m_;
  std::vector<std::string> names_;  // ONNX value name of each plan node
  std::set<std::string> used_;
};

}  // namespace

std::string export_bytes(const Graph& graph, std::span<const Node> outputs,
                         const InputShapes& shapes, const ExportOptions& options) {
  if (outputs.empty()) throw GraphError("export_model: no outputs given");
  std::vector<std::uint32_t> ids;
  for (const Node& n : outputs) {
    detail::check_same_graph(&detail::impl_of(graph), n, "export_model");
    if (std::find(ids.begin(), ids.end(), n.id()) != ids.end()) {
      throw GraphError("export_model: output " + n.label() + " is given twice");
    }
    ids.push_back(n.id());
  }
  detail::Plan p = detail::build_plan(detail::impl_of(graph), ids);
  // Shapes not given come from the compiled graph the values come from.
  InputShapes all = shapes;
  if (options.values) {
    const detail::Plan& cp = detail::executable_of(*options.values).plan();
    for (std::uint32_t i : cp.inputs) {
      const std::string& name = cp.nodes[i].name;
      if (std::none_of(all.begin(), all.end(), [&](const auto& s) { return s.first == name; })) {
        all.push_back({name, cp.nodes[i].type.shape});
      }
    }
    all.erase(std::remove_if(all.begin(), all.end(),
                             [&](const auto& s) { return !p.graph_inputs.count(s.first); }),
              all.end());
  }
  detail::infer_shapes(p, all);
  const ir::Model m = Exporter(p, options).run();
  return ir::serialize_model(m);
}

void export_model(const Graph& graph, std::span<const Node> outputs, const InputShapes& shapes,
                  const std::string& path, const ExportOptions& options) {
  const std::string bytes = export_bytes(graph, outputs, shapes, options);
  detail::write_file_atomically(path,
                                [&](const auto& write) { write(bytes.data(), bytes.size()); });
}

}  // namespace hetgraph::onnx
