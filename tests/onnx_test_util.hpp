// SPDX-License-Identifier: Apache-2.0
// Helpers shared by test_onnx's files (tests/test_onnx*.cpp, one per area of the importer):
// models written with ONNX's own protobuf classes (Builder), running an imported model on every
// platform and exported and imported back, and the errors an import raises. Each file uses them
// with `using namespace onnx_test;` in its anonymous namespace.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "test_util.hpp"

namespace onnx_test {

using namespace hetgraph;
namespace ho = hetgraph::onnx;
namespace fs = std::filesystem;
using hetgraph::Dim;  // a size or a dim_param name

/// A model written with ONNX's protobuf classes.
struct Builder {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = m.mutable_graph();

  explicit Builder(int opset = 17) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g->set_name("test");
  }
  static void type(::onnx::ValueInfoProto* v, int elem, const std::vector<Dim>& dims, bool shaped) {
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    if (!shaped) return;
    auto* s = tt->mutable_shape();
    for (const Dim& d : dims) {
      auto* x = s->add_dim();
      if (d.named())
        x->set_dim_param(d.name());
      else
        x->set_dim_value(d.size());
    }
  }
  Builder& input(const std::string& name, std::vector<Dim> dims, int elem = 1) {
    auto* v = g->add_input();
    v->set_name(name);
    type(v, elem, dims, true);
    return *this;
  }
  Builder& output(const std::string& name, std::vector<Dim> dims, int elem = 1) {
    auto* v = g->add_output();
    v->set_name(name);
    type(v, elem, dims, true);
    return *this;
  }
  Builder& floats(const std::string& name, std::vector<std::int64_t> dims, std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(1);
    for (auto d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return *this;
  }
  Builder& ints(const std::string& name, std::vector<std::int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(7);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
    return *this;
  }
  Builder& int_tensor(const std::string& name, std::vector<std::int64_t> dims,
                      std::vector<std::int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(7);
    for (auto d : dims) t->add_dims(d);
    for (auto x : v) t->add_int64_data(x);
    return *this;
  }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_f(::onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  /// A body (If's branches, Loop's and Scan's body): the graph `body` built.
  static void attr_g(::onnx::NodeProto* n, const std::string& name, const Builder& body) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body.m.graph();
  }
  std::string bytes() const { return m.SerializeAsString(); }
  ho::Model import(const ho::ImportOptions& o = {}) const {
    const std::string b = bytes();
    return ho::import_bytes(std::as_bytes(std::span<const char>(b)), o, "test.onnx");
  }
};

/// The model exported (its graph, outputs and input shapes) and imported back.
inline ho::Model round_trip(const ho::Model& m) {
  const std::string bytes = ho::export_bytes(m.graph, m.outputs, m.input_shapes);
  return ho::import_bytes(std::as_bytes(std::span<const char>(bytes)), {}, "back.onnx");
}

/// Compiles m (and with `and_back` m exported and imported back) on every platform, runs it
/// with `feeds`, and hands the compiled graph and its model to `check`.
inline void run_everywhere(const ho::Model& m, const std::vector<FeedItem>& feeds, bool and_back,
                           const std::function<void(CompiledGraph&, const ho::Model&)>& check) {
  std::vector<ho::Model> models{m};
  if (and_back) models.push_back(round_trip(m));
  for (std::size_t k = 0; k < models.size(); ++k) {
    for (const auto& pc : testing_util::platforms()) {
      SCOPED_TRACE(pc.name + (k ? " (exported and imported back)" : ""));
      CompiledGraph cg = models[k].compile(GraphCompiler(pc.make()));
      cg.run(feeds);
      check(cg, models[k]);
    }
  }
}

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

#define EXPECT_CONTAINS(s, sub) EXPECT_NE(std::string(s).find(sub), std::string::npos) << (s)

/// The UnsupportedError importing `b` raises (with the input it needs, if any); a test failure
/// when it raises none.
inline ho::UnsupportedError unsupported_of(const Builder& b) {
  try {
    b.import();
  } catch (const ho::UnsupportedError& e) {
    return e;
  }
  ADD_FAILURE() << "imported without an UnsupportedError";
  return ho::UnsupportedError("");
}

/// A value given at import (ImportOptions::input_values): int32 words, or floats.
inline std::shared_ptr<ho::TensorData> given(const std::string& onnx_type, const Shape& shape,
                                             std::vector<std::int32_t> i32,
                                             std::vector<float> f32 = {}) {
  auto t = std::make_shared<ho::TensorData>();
  t->onnx_type = onnx_type;
  t->dtype = f32.empty() ? DType::i32 : DType::f32;
  t->shape = shape;
  t->i32 = std::move(i32);
  t->f32 = std::move(f32);
  return t;
}

// A bool or int64 scalar initializer.
inline void scalar_init(Builder& b, const std::string& name, int elem, std::int64_t v) {
  auto* t = b.g->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  if (elem == 9)
    t->add_int32_data(static_cast<std::int32_t>(v));
  else
    t->add_int64_data(v);
}

// Equal, NaN where both are NaN.
inline bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (!(a[k] == b[k] || (std::isnan(a[k]) && std::isnan(b[k])))) return false;
  return true;
}

}  // namespace onnx_test
