// SPDX-License-Identifier: Apache-2.0
// Nested control flow: each input builds a model of Loops, Ifs and Scans nested up to five deep
// (trip counts, conditions and scan lengths fuzzed, some huge), with a little arithmetic in
// every body, and imports it with small budgets (ImportOptions::max_nodes, max_seconds,
// max_host_bytes). Anything but a hetgraph::Error is a bug, and so is an import that takes
// far longer than its time budget: the budgets must bound the import as a whole, however the
// loops nest. libFuzzer's -timeout and -rss_limit_mb bound each input besides.
#include <fuzzer/FuzzedDataProvider.h>
#include <onnx/onnx_pb.h>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "hetgraph/error.hpp"
#include "hetgraph/onnx.hpp"

namespace {

namespace ho = hetgraph::onnx;
using ::onnx::GraphProto;
using ::onnx::NodeProto;

constexpr int kMaxDepth = 5;
constexpr double kBudgetSeconds = 1.0;

struct Gen {
  FuzzedDataProvider& in;
  int serial = 0;

  std::string fresh(const std::string& what) { return what + std::to_string(serial++); }

  static void typed(::onnx::ValueInfoProto* v, const std::string& name, int elem, int rank) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* s = tt->mutable_shape();
    for (int d = 0; d < rank; ++d) s->add_dim()->set_dim_value(2);
  }

  static NodeProto* node(GraphProto* g, const std::string& op, std::vector<std::string> ins,
                         std::vector<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }

  // A Constant node of g: an int64, bool or float scalar, or float zeros of [rows, 2].
  std::string constant(GraphProto* g, int elem, std::int64_t v, std::int64_t rows = -1) {
    const std::string name = fresh("k");
    auto* a = node(g, "Constant", {}, {name})->add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(elem);
    if (rows >= 0) {
      t->add_dims(rows);
      t->add_dims(2);
      for (std::int64_t k = 0; k < rows * 2; ++k) t->add_float_data(static_cast<float>(v));
    } else if (elem == 1) {
      t->add_float_data(static_cast<float>(v));
    } else if (elem == 7) {
      t->add_int64_data(v);
    } else {
      t->add_int32_data(static_cast<std::int32_t>(v));
    }
    return name;
  }

  std::int64_t count() {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
        return in.ConsumeIntegral<std::int64_t>();  // negative, huge
      case 1:
        return in.ConsumeIntegralInRange<std::int64_t>(0, std::int64_t{1} << 20);
      default:
        return in.ConsumeIntegralInRange<std::int64_t>(0, 40);
    }
  }

  // Nodes of g computing `out` ([2] float) from `x`.
  void chain(GraphProto* g, const std::string& x, const std::string& out, int depth) {
    std::string cur = x;
    const int steps = in.ConsumeIntegralInRange(1, 3);
    for (int s = 0; s < steps; ++s) {
      const std::string next = s + 1 == steps ? out : fresh("v");
      const int kind =
          depth < kMaxDepth ? in.ConsumeIntegralInRange(0, 4) : in.ConsumeIntegralInRange(0, 1);
      switch (kind) {
        case 0:
          node(g, "Relu", {cur}, {next});
          break;
        case 1:
          node(g, "Add", {cur, cur}, {next});
          break;
        case 2:
          loop(g, cur, next, depth);
          break;
        case 3:
          branch(g, cur, next, depth);
          break;
        default:
          scan(g, cur, next, depth);
          break;
      }
      cur = next;
    }
  }

  void loop(GraphProto* g, const std::string& x, const std::string& out, int depth) {
    const bool by_cond = in.ConsumeBool();
    const std::string trip = by_cond && in.ConsumeBool() ? "" : constant(g, 7, count());
    const std::string cond = by_cond ? constant(g, 9, 1) : "";
    auto* n = node(g, "Loop", {trip, cond, x}, {out});
    const bool scans = in.ConsumeBool();
    if (scans) n->add_output(fresh("scan"));
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    GraphProto* b = a->mutable_g();
    b->set_name(fresh("loop"));
    const std::string i = fresh("i"), c = fresh("c"), h = fresh("h"), c_out = fresh("c_out"),
                      h_out = fresh("h_out");
    typed(b->add_input(), i, 7, 0);
    typed(b->add_input(), c, 9, 0);
    typed(b->add_input(), h, 1, 1);
    if (by_cond) {
      node(b, "Less", {i, constant(b, 7, count())}, {c_out});
    } else {
      node(b, "Identity", {c}, {c_out});
    }
    chain(b, h, h_out, depth + 1);
    typed(b->add_output(), c_out, 9, 0);
    typed(b->add_output(), h_out, 1, 1);
    if (scans) {
      const std::string y = fresh("y");
      node(b, "Identity", {h_out}, {y});
      typed(b->add_output(), y, 1, 1);
    }
  }

  void branch(GraphProto* g, const std::string& x, const std::string& out, int depth) {
    auto* n = node(g, "If", {constant(g, 9, in.ConsumeBool())}, {out});
    for (const char* name : {"then_branch", "else_branch"}) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(::onnx::AttributeProto::GRAPH);
      GraphProto* b = a->mutable_g();
      b->set_name(fresh(name));
      const std::string r = fresh("r");
      chain(b, x, r, depth + 1);  // reads x of the graph around it
      typed(b->add_output(), r, 1, 1);
    }
  }

  void scan(GraphProto* g, const std::string& x, const std::string& out, int depth) {
    std::int64_t rows = count();
    if (rows < 0 || rows > 4096) rows = 4096;  // a constant the model holds
    const std::string xs = constant(g, 1, 1, rows);
    auto* n = node(g, "Scan", {x, xs}, {out, fresh("ys")});
    auto* k = n->add_attribute();
    k->set_name("num_scan_inputs");
    k->set_type(::onnx::AttributeProto::INT);
    k->set_i(1);
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    GraphProto* b = a->mutable_g();
    b->set_name(fresh("scan"));
    const std::string h = fresh("h"), s = fresh("s"), sum = fresh("sum"), h_out = fresh("h_out"),
                      y = fresh("y");
    typed(b->add_input(), h, 1, 1);
    typed(b->add_input(), s, 1, 1);
    node(b, "Add", {h, s}, {sum});
    chain(b, sum, h_out, depth + 1);
    node(b, "Identity", {h_out}, {y});
    typed(b->add_output(), h_out, 1, 1);
    typed(b->add_output(), y, 1, 1);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(16);
  GraphProto* g = m.mutable_graph();
  g->set_name("fuzz");
  Gen gen{in};
  Gen::typed(g->add_input(), "x", 1, 1);
  gen.chain(g, "x", "y", 0);
  Gen::typed(g->add_output(), "y", 1, 1);
  const std::string bytes = m.SerializeAsString();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    ho::ImportOptions opt;
    opt.check = in.ConsumeBool();
    opt.max_nodes = 20000;
    opt.max_seconds = kBudgetSeconds;
    opt.max_host_bytes = 1 << 26;
    opt.max_tensor_bytes = 1 << 24;
    const ho::Model model =
        ho::import_bytes(std::as_bytes(std::span<const char>(bytes)), opt, "fuzz.onnx");
    if (model.outputs.size() != 1 || !model.outputs[0].valid()) __builtin_trap();
  } catch (const hetgraph::Error&) {
  }
  // The time budget holds between nodes; a node itself is bounded by the per-node limits.
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s > kBudgetSeconds + 5.0) __builtin_trap();
  return 0;
}
