// The only translation unit that sees ONNX's protobuf classes: ModelProto / TensorProto in and
// out, onnx::checker, ONNX shape inference and function bodies from ONNX's schema registry.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "hetgraph/error.hpp"
#include "onnx/ir.hpp"

namespace hetgraph::onnx::ir {

namespace pb = ::onnx;

const char* elem_name(int elem) {
  switch (elem) {
    case kFloat:
      return "float";
    case kUint8:
      return "uint8";
    case kInt8:
      return "int8";
    case kUint16:
      return "uint16";
    case kInt16:
      return "int16";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case kString:
      return "string";
    case kBool:
      return "bool";
    case kFloat16:
      return "float16";
    case kDouble:
      return "double";
    case kUint32:
      return "uint32";
    case kUint64:
      return "uint64";
    case kComplex64:
      return "complex64";
    case kComplex128:
      return "complex128";
    case kBfloat16:
      return "bfloat16";
    default:
      return "undefined";
  }
}

bool is_integral(int elem) {
  switch (elem) {
    case kUint8:
    case kInt8:
    case kUint16:
    case kInt16:
    case kInt32:
    case kInt64:
    case kBool:
    case kUint32:
    case kUint64:
      return true;
    default:
      return false;
  }
}

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& why) {
  throw DataError(source + ": " + why);
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits = 0;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) {
        man <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((man & 0x3FFu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class T>
std::vector<T> raw_values(const std::string& raw, std::size_t n, const std::string& what) {
  if (raw.size() != n * sizeof(T)) {
    throw DataError(what + ": raw data holds " + std::to_string(raw.size()) + " bytes, " +
                    std::to_string(n) + " elements need " + std::to_string(n * sizeof(T)));
  }
  std::vector<T> v(n);
  if (n) std::memcpy(v.data(), raw.data(), n * sizeof(T));
  return v;
}

Tensor from_proto(const pb::TensorProto& t, const std::string& source) {
  Tensor out;
  out.name = t.name();
  out.elem = t.data_type();
  std::int64_t n = 1;
  for (std::int64_t d : t.dims()) {
    if (d < 0) bad(source, "tensor '" + t.name() + "' has a negative dimension");
    out.dims.push_back(d);
    if (d != 0 && n > (std::int64_t{1} << 40) / d)
      bad(source, "tensor '" + t.name() + "' is too large");
    n *= d;
  }
  const auto count = static_cast<std::size_t>(n);
  const std::string what = source + ": tensor '" + t.name() + "'";
  if (t.data_location() == pb::TensorProto::EXTERNAL) {
    bad(source, "tensor '" + t.name() + "' keeps its data in an external file that was not read");
  }
  const bool raw = t.has_raw_data();
  auto check = [&](int have) {
    if (static_cast<std::size_t>(have) != count) {
      throw DataError(what + " has " + std::to_string(have) + " values for its " +
                      std::to_string(count) + " elements");
    }
  };
  switch (t.data_type()) {
    case kFloat:
      if (raw) {
        out.f = raw_values<float>(t.raw_data(), count, what);
      } else {
        check(t.float_data_size());
        out.f.assign(t.float_data().begin(), t.float_data().end());
      }
      break;
    case kDouble:
      if (raw) {
        for (double d : raw_values<double>(t.raw_data(), count, what))
          out.f.push_back(static_cast<float>(d));
      } else {
        check(t.double_data_size());
        for (double d : t.double_data()) out.f.push_back(static_cast<float>(d));
      }
      break;
    case kFloat16:
    case kBfloat16:
      if (raw) {
        for (std::uint16_t h : raw_values<std::uint16_t>(t.raw_data(), count, what)) {
          if (t.data_type() == kFloat16) {
            out.f.push_back(half_to_float(h));
          } else {
            const std::uint32_t bits = std::uint32_t{h} << 16;
            float f;
            std::memcpy(&f, &bits, 4);
            out.f.push_back(f);
          }
        }
      } else {
        check(t.int32_data_size());
        for (std::int32_t h : t.int32_data()) {
          const auto u = static_cast<std::uint16_t>(h);
          if (t.data_type() == kFloat16) {
            out.f.push_back(half_to_float(u));
          } else {
            const std::uint32_t bits = std::uint32_t{u} << 16;
            float f;
            std::memcpy(&f, &bits, 4);
            out.f.push_back(f);
          }
        }
      }
      break;
    case kInt64:
      if (raw) {
        out.i = raw_values<std::int64_t>(t.raw_data(), count, what);
      } else {
        check(t.int64_data_size());
        out.i.assign(t.int64_data().begin(), t.int64_data().end());
      }
      break;
    case kInt32:
    case kInt16:
    case kInt8:
    case kUint16:
    case kUint8:
    case kBool:
      if (raw) {
        switch (t.data_type()) {
          case kInt32:
            for (auto v : raw_values<std::int32_t>(t.raw_data(), count, what)) out.i.push_back(v);
            break;
          case kInt16:
            for (auto v : raw_values<std::int16_t>(t.raw_data(), count, what)) out.i.push_back(v);
            break;
          case kUint16:
            for (auto v : raw_values<std::uint16_t>(t.raw_data(), count, what)) out.i.push_back(v);
            break;
          case kInt8:
            for (auto v : raw_values<std::int8_t>(t.raw_data(), count, what)) out.i.push_back(v);
            break;
          default:
            for (auto v : raw_values<std::uint8_t>(t.raw_data(), count, what)) out.i.push_back(v);
            break;
        }
      } else {
        check(t.int32_data_size());
        out.i.assign(t.int32_data().begin(), t.int32_data().end());
      }
      break;
    case kUint32:
    case kUint64:
      if (raw) {
        if (t.data_type() == kUint32) {
          for (auto v : raw_values<std::uint32_t>(t.raw_data(), count, what)) out.i.push_back(v);
        } else {
          for (auto v : raw_values<std::uint64_t>(t.raw_data(), count, what))
            out.i.push_back(static_cast<std::int64_t>(v));
        }
      } else {
        check(t.uint64_data_size());
        for (auto v : t.uint64_data()) out.i.push_back(static_cast<std::int64_t>(v));
      }
      break;
    default:
      // Strings, complex numbers: kept without values; the importer says they are unsupported.
      break;
  }
  return out;
}

void to_proto(const Tensor& t, pb::TensorProto& p) {
  p.set_name(t.name);
  p.set_data_type(t.elem);
  for (std::int64_t d : t.dims) p.add_dims(d);
  const auto n = static_cast<std::size_t>(t.numel());
  std::string raw;
  switch (t.elem) {
    case kFloat:
      raw.assign(reinterpret_cast<const char*>(t.f.data()), n * 4);
      break;
    case kInt64:
      raw.assign(reinterpret_cast<const char*>(t.i.data()), n * 8);
      break;
    case kInt32: {
      std::vector<std::int32_t> v(t.i.begin(), t.i.end());
      raw.assign(reinterpret_cast<const char*>(v.data()), n * 4);
      break;
    }
    case kBool: {
      std::vector<std::uint8_t> v(t.i.begin(), t.i.end());
      raw.assign(reinterpret_cast<const char*>(v.data()), n);
      break;
    }
    default:
      throw Error("internal: writing ONNX tensors of type " + std::string(elem_name(t.elem)));
  }
  p.set_raw_data(raw);
}

ValueInfo from_proto(const pb::ValueInfoProto& v) {
  ValueInfo out;
  out.name = v.name();
  if (!v.type().has_tensor_type()) {
    out.non_tensor = v.type().has_sequence_type()        ? "sequence"
                     : v.type().has_optional_type()      ? "optional"
                     : v.type().has_map_type()           ? "map"
                     : v.type().has_sparse_tensor_type() ? "sparse tensor"
                                                         : "untyped";
    return out;
  }
  const auto& tt = v.type().tensor_type();
  out.elem = tt.elem_type();
  out.has_shape = tt.has_shape();
  for (const auto& d : tt.shape().dim()) {
    Dim dim;
    if (d.has_dim_value()) dim.value = d.dim_value();
    if (d.has_dim_param()) dim.param = d.dim_param();
    out.dims.push_back(dim);
  }
  return out;
}

void to_proto(const ValueInfo& v, pb::ValueInfoProto& p) {
  p.set_name(v.name);
  auto* tt = p.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(v.elem);
  if (!v.has_shape) return;
  auto* s = tt->mutable_shape();
  for (const Dim& d : v.dims) {
    auto* pd = s->add_dim();
    if (d.value >= 0)
      pd->set_dim_value(d.value);
    else if (!d.param.empty())
      pd->set_dim_param(d.param);
  }
}

Attr from_proto(const pb::AttributeProto& a, const std::string& source) {
  Attr out;
  switch (a.type()) {
    case pb::AttributeProto::FLOAT:
      out.kind = Attr::kFloatA;
      out.f = a.f();
      break;
    case pb::AttributeProto::INT:
      out.kind = Attr::kIntA;
      out.i = a.i();
      break;
    case pb::AttributeProto::STRING:
      out.kind = Attr::kStringA;
      out.s = a.s();
      break;
    case pb::AttributeProto::TENSOR:
      out.kind = Attr::kTensorA;
      out.t = std::make_shared<const Tensor>(from_proto(a.t(), source));
      break;
    case pb::AttributeProto::FLOATS:
      out.kind = Attr::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case pb::AttributeProto::INTS:
      out.kind = Attr::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case pb::AttributeProto::STRINGS:
      out.kind = Attr::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    default:
      out.kind = Attr::kOther;
      out.other = pb::AttributeProto::AttributeType_Name(a.type());
      break;
  }
  return out;
}

void to_proto(const std::string& name, const Attr& a, pb::AttributeProto& p) {
  p.set_name(name);
  switch (a.kind) {
    case Attr::kFloatA:
      p.set_type(pb::AttributeProto::FLOAT);
      p.set_f(a.f);
      break;
    case Attr::kIntA:
      p.set_type(pb::AttributeProto::INT);
      p.set_i(a.i);
      break;
    case Attr::kStringA:
      p.set_type(pb::AttributeProto::STRING);
      p.set_s(a.s);
      break;
    case Attr::kTensorA:
      p.set_type(pb::AttributeProto::TENSOR);
      to_proto(*a.t, *p.mutable_t());
      break;
    case Attr::kFloats:
      p.set_type(pb::AttributeProto::FLOATS);
      for (float f : a.floats) p.add_floats(f);
      break;
    case Attr::kInts:
      p.set_type(pb::AttributeProto::INTS);
      for (std::int64_t i : a.ints) p.add_ints(i);
      break;
    case Attr::kStrings:
      p.set_type(pb::AttributeProto::STRINGS);
      for (const auto& s : a.strings) p.add_strings(s);
      break;
    default:
      throw Error("internal: writing an ONNX attribute of kind " + std::to_string(a.kind));
  }
}

/// Reads tensors kept in external files into the model (the checker and everything after it
/// see ordinary tensors). Locations must stay inside the model's directory.
void load_external_data(pb::ModelProto& m, const std::string& base_dir, const std::string& source) {
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != pb::TensorProto::EXTERNAL) continue;
    std::string location;
    std::int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      try {
        if (kv.key() == "location")
          location = kv.value();
        else if (kv.key() == "offset")
          offset = std::stoll(kv.value());
        else if (kv.key() == "length")
          length = std::stoll(kv.value());
      } catch (const std::exception&) {
        bad(source,
            "tensor '" + t.name() + "': bad external data " + kv.key() + " '" + kv.value() + "'");
      }
    }
    if (location.empty() || location.front() == '/' || location.find("..") != std::string::npos) {
      bad(source, "tensor '" + t.name() + "': external data location '" + location +
                      "' must be a file name relative to the model");
    }
    if (base_dir.empty()) {
      bad(source, "tensor '" + t.name() +
                      "' keeps its data in an external file; load the model from a path");
    }
    const std::string path = base_dir + "/" + location;
    std::ifstream f(path, std::ios::binary);
    if (!f) bad(source, "tensor '" + t.name() + "': cannot open external data file " + path);
    f.seekg(0, std::ios::end);
    const std::int64_t file_size = f.tellg();
    if (length < 0) length = file_size - offset;
    if (offset < 0 || length < 0 || offset + length > file_size) {
      bad(source, "tensor '" + t.name() + "': external data [" + std::to_string(offset) + ", +" +
                      std::to_string(length) + ") lies outside " + path);
    }
    std::string raw(static_cast<std::size_t>(length), '\0');
    f.seekg(offset);
    f.read(raw.data(), length);
    if (!f) bad(source, "tensor '" + t.name() + "': cannot read external data from " + path);
    t.set_raw_data(std::move(raw));
    t.clear_external_data();
    t.set_data_location(pb::TensorProto::DEFAULT);
  }
}

std::string node_label(const pb::NodeProto& n, std::size_t index, int since) {
  const std::string op = n.op_type() + "-" + std::to_string(since);
  if (n.name().empty()) return "#" + std::to_string(index) + " (" + op + ")";
  return "'" + n.name() + "' (" + op + ")";
}

/// Replaces nodes of ops the importer does not take by their ONNX function bodies, where
/// ONNX defines one (Celu, LayerNormalization, ...), recursively.
class FunctionInliner {
 public:
  FunctionInliner(const std::unordered_map<std::string, int>& opsets,
                  const std::unordered_map<std::string, pb::TypeProto>& types,
                  bool (*handled)(const std::string&, const std::string&, int))
      : opsets_(opsets), types_(types), handled_(handled) {}

  // Appends `n` (or its expansion) to `out`, with versions resolved under `opsets`.
  void add(const pb::NodeProto& n, const std::unordered_map<std::string, int>& opsets,
           std::vector<std::pair<pb::NodeProto, int>>& out, int depth) {
    const pb::OpSchema* s = schema(n, opsets);
    const int since = s ? s->SinceVersion() : 0;
    if (!s || !handled_ || handled_(n.domain(), n.op_type(), since) || depth > 8) {
      out.push_back({n, since});
      return;
    }
    pb::FunctionProto body;
    if (s->HasFunction()) {
      body = *s->GetFunction();
    } else if (s->HasContextDependentFunction()) {
      std::vector<pb::TypeProto> in_types;
      for (const auto& name : n.input()) {
        auto it = types_.find(name);
        in_types.push_back(it == types_.end() ? pb::TypeProto() : it->second);
      }
      pb::FunctionBodyBuildContextImpl ctx(n, in_types);
      try {
        if (!s->BuildContextDependentFunction(ctx, body)) body.Clear();
      } catch (const std::exception&) {
        body.Clear();
      }
    }
    if (body.node_size() == 0) {
      out.push_back({n, since});
      return;
    }
    std::unordered_map<std::string, int> inner = opsets;
    for (const auto& o : body.opset_import()) inner[o.domain()] = static_cast<int>(o.version());
    // Formal names -> actual names; values the body makes get names of their own.
    std::unordered_map<std::string, std::string> rename;
    for (int i = 0; i < body.input_size(); ++i)
      rename[body.input(i)] = i < n.input_size() ? n.input(i) : "";
    for (int i = 0; i < body.output_size(); ++i)
      rename[body.output(i)] = i < n.output_size() ? n.output(i) : "";
    const std::string prefix = (n.output_size() ? n.output(0) : n.name()) + "::" + n.op_type() +
                               "_" + std::to_string(serial_++) + "::";
    auto mapped = [&](const std::string& name) {
      if (name.empty()) return name;
      auto it = rename.find(name);
      if (it != rename.end()) return it->second;
      return prefix + name;
    };
    std::unordered_map<std::string, const pb::AttributeProto*> given;
    for (const auto& a : n.attribute()) given[a.name()] = &a;
    for (pb::NodeProto b : body.node()) {
      for (auto& in : *b.mutable_input()) in = mapped(in);
      for (auto& o : *b.mutable_output()) o = mapped(o);
      google::protobuf::RepeatedPtrField<pb::AttributeProto> attrs;
      for (const auto& a : b.attribute()) {
        if (a.ref_attr_name().empty()) {
          *attrs.Add() = a;
        } else if (auto it = given.find(a.ref_attr_name()); it != given.end()) {
          pb::AttributeProto v = *it->second;
          v.set_name(a.name());
          *attrs.Add() = v;
        } else if (const auto d = s->attributes().find(a.ref_attr_name());
                   d != s->attributes().end() && d->second.default_value.type() != 0) {
          pb::AttributeProto v = d->second.default_value;
          v.set_name(a.name());
          *attrs.Add() = v;
        }
      }
      *b.mutable_attribute() = attrs;
      b.set_name(n.name() + "::" + (b.name().empty() ? b.op_type() : b.name()));
      add(b, inner, out, depth + 1);
    }
  }

 private:
  const pb::OpSchema* schema(const pb::NodeProto& n,
                             const std::unordered_map<std::string, int>& opsets) const {
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    auto it = opsets.find(domain);
    if (it == opsets.end()) return nullptr;
    return pb::OpSchemaRegistry::Schema(n.op_type(), it->second, domain);
  }

  const std::unordered_map<std::string, int>& opsets_;
  const std::unordered_map<std::string, pb::TypeProto>& types_;
  bool (*handled_)(const std::string&, const std::string&, int);
  int serial_ = 0;
};

}  // namespace

Model parse_model(const void* data, std::size_t size, const std::string& source,
                  const std::string& base_dir, bool check,
                  bool (*handled)(const std::string&, const std::string&, int)) {
  if (size > static_cast<std::size_t>(INT_MAX)) {
    bad(source, "models larger than 2 GiB must keep their tensors as external data");
  }
  pb::ModelProto m;
  if (size == 0 || !m.ParseFromArray(data, static_cast<int>(size))) {
    bad(source, "not an ONNX model (the file does not parse as an ONNX ModelProto)");
  }
  if (!m.has_graph()) bad(source, "the model has no graph");
  load_external_data(m, base_dir, source);
  if (check) {
    try {
      pb::checker::check_model(m);
    } catch (const std::exception& e) {
      bad(source, std::string("onnx::checker rejects the model: ") + e.what());
    }
  }
  try {
    pb::shape_inference::InferShapes(m);
  } catch (const std::exception& e) {
    bad(source, std::string("ONNX shape inference fails: ") + e.what());
  }

  Model out;
  out.source = source;
  out.ir_version = m.ir_version();
  out.producer_name = m.producer_name();
  out.producer_version = m.producer_version();
  out.doc = m.doc_string();
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : m.opset_import()) {
    const std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    out.opsets[domain] = o.version();
    opsets[domain] = static_cast<int>(o.version());
  }
  const pb::GraphProto& g = m.graph();
  out.graph.name = g.name();
  for (const auto& v : g.input()) out.graph.inputs.push_back(from_proto(v));
  for (const auto& v : g.output()) out.graph.outputs.push_back(from_proto(v));
  std::unordered_map<std::string, pb::TypeProto> types;
  for (const auto* list : {&g.input(), &g.output(), &g.value_info()}) {
    for (const auto& v : *list) types[v.name()] = v.type();
  }
  for (const auto& v : g.value_info()) out.graph.value_info.push_back(from_proto(v));
  for (const auto& t : g.initializer()) out.graph.initializers.push_back(from_proto(t, source));
  if (g.sparse_initializer_size() > 0) bad(source, "sparse initializers are not supported");

  FunctionInliner inliner(opsets, types, handled);
  std::vector<std::pair<pb::NodeProto, int>> nodes;
  for (const auto& n : g.node()) {
    out.ops.push_back(n.op_type());
    inliner.add(n, opsets, nodes, 0);
  }
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const auto& [n, since] = nodes[k];
    Node node;
    node.op = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.name = n.name();
    node.since = since;
    node.label = node_label(n, k, since);
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) node.attrs[a.name()] = from_proto(a, source);
    out.graph.nodes.push_back(std::move(node));
  }
  return out;
}

std::string serialize_model(const Model& m) {
  pb::ModelProto p;
  p.set_ir_version(m.ir_version);
  p.set_producer_name(m.producer_name);
  p.set_producer_version(m.producer_version);
  if (!m.doc.empty()) p.set_doc_string(m.doc);
  for (const auto& [domain, version] : m.opsets) {
    auto* o = p.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
  auto* g = p.mutable_graph();
  g->set_name(m.graph.name);
  for (const auto& v : m.graph.inputs) to_proto(v, *g->add_input());
  for (const auto& v : m.graph.outputs) to_proto(v, *g->add_output());
  for (const auto& t : m.graph.initializers) to_proto(t, *g->add_initializer());
  for (const auto& n : m.graph.nodes) {
    auto* pn = g->add_node();
    pn->set_op_type(n.op);
    pn->set_domain(n.domain);
    pn->set_name(n.name);
    for (const auto& i : n.inputs) pn->add_input(i);
    for (const auto& o : n.outputs) pn->add_output(o);
    for (const auto& [name, a] : n.attrs) to_proto(name, a, *pn->add_attribute());
  }
  try {
    pb::checker::check_model(p);
  } catch (const std::exception& e) {
    throw Error(std::string("internal: the exported model fails onnx::checker: ") + e.what());
  }
  std::string bytes;
  if (!p.SerializeToString(&bytes)) throw Error("internal: the exported model does not serialise");
  return bytes;
}

Tensor parse_tensor(const void* data, std::size_t size, const std::string& source) {
  pb::TensorProto t;
  if (size > static_cast<std::size_t>(INT_MAX) || !t.ParseFromArray(data, static_cast<int>(size))) {
    bad(source, "not an ONNX TensorProto");
  }
  if (!pb::TensorProto::DataType_IsValid(t.data_type()) || t.data_type() == kUndefined) {
    bad(source, "tensor has no valid element type");
  }
  return from_proto(t, source);
}

std::string serialize_tensor(const Tensor& t) {
  pb::TensorProto p;
  to_proto(t, p);
  std::string bytes;
  if (!p.SerializeToString(&bytes)) throw Error("internal: a tensor does not serialise");
  return bytes;
}

}  // namespace hetgraph::onnx::ir
