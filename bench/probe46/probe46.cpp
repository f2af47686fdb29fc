// SPDX-License-Identifier: Apache-2.0
// Issue 46, second probe: hostile but realistic uses of ONNX import, checkpoints, the run API
// and traces. `probe46 list` lists the cases; `probe46 N` runs case N in this process and
// prints one line: "ERROR <kind>: <message>", "STD <type>: <message>" or "NONE" (no exception;
// for cases that must fail, a silent answer). run.sh runs each in its own process under a
// time limit, so crashes, aborts and hangs show as such. Not part of the build: see run.sh.
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <typeinfo>
#include <variant>

#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "onnx/checkpoint_format.hpp"

using namespace hetgraph;
namespace ho = hetgraph::onnx;
namespace fs = std::filesystem;

namespace {

using Dim = std::variant<std::int64_t, std::string>;

struct Builder {  // as tests/onnx_test_util.hpp's
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = m.mutable_graph();
  explicit Builder(int opset = 17) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g->set_name("probe");
  }
  static void type(::onnx::ValueInfoProto* v, int elem, const std::vector<Dim>& dims) {
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* s = tt->mutable_shape();
    for (const Dim& d : dims) {
      auto* x = s->add_dim();
      if (std::holds_alternative<std::int64_t>(d))
        x->set_dim_value(std::get<std::int64_t>(d));
      else
        x->set_dim_param(std::get<std::string>(d));
    }
  }
  Builder& input(const std::string& name, std::vector<Dim> dims, int elem = 1) {
    auto* v = g->add_input();
    v->set_name(name);
    type(v, elem, dims);
    return *this;
  }
  Builder& output(const std::string& name, std::vector<Dim> dims, int elem = 1) {
    auto* v = g->add_output();
    v->set_name(name);
    type(v, elem, dims);
    return *this;
  }
  ::onnx::TensorProto* floats(const std::string& name, std::vector<std::int64_t> dims,
                              std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(1);
    for (auto d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return t;
  }
  ::onnx::TensorProto* ints(const std::string& name, std::vector<std::int64_t> dims,
                            std::vector<std::int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(7);
    for (auto d : dims) t->add_dims(d);
    for (auto x : v) t->add_int64_data(x);
    return t;
  }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  static void ints_attr(::onnx::NodeProto* n, const std::string& name,
                        std::vector<std::int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void int_attr(::onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

fs::path dir() {
  static const fs::path d = [] {
    fs::path p = fs::temp_directory_path() / ("probe46-" + std::to_string(::getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}
struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("probe46-" + std::to_string(::getpid())), ec);
  }
} cleanup;

std::string write_model(const Builder& b, const std::string& name = "model.onnx") {
  const fs::path p = dir() / name;
  std::ofstream(p, std::ios::binary) << b.bytes();
  return p.string();
}
void write_floats(const fs::path& p, std::size_t n) {
  std::vector<float> v(n, 1.5f);
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(n * 4));
}
// Imports, compiles on the CPU and runs with zero inputs of the declared shapes.
void import_and_run(const std::string& path, const ho::ImportOptions& o = {}) {
  ho::Model m = ho::import(path, o);
  CompiledGraph cg = m.compile(GraphCompiler());
  std::vector<std::vector<float>> f;
  std::vector<std::vector<std::int32_t>> i;
  std::vector<FeedItem> feeds;
  f.reserve(m.input_info.size());
  i.reserve(m.input_info.size());
  for (const auto& in : m.input_info) {
    if (in.dtype == DType::f32) {
      f.emplace_back(in.shape.numel(), 0.0f);
      feeds.push_back({in.name, f.back()});
    } else {
      i.emplace_back(in.shape.numel(), 0);
      feeds.push_back({in.name, i.back()});
    }
  }
  cg.run(feeds);
  for (std::size_t k = 0; k < m.outputs.size(); ++k) {
    auto v = m.output_info[k].dtype == DType::f32 ? cg.read(m.outputs[k]).size()
                                                  : cg.read_i32(m.outputs[k]).size();
    std::printf("  output %s: %zu values\n", m.output_info[k].name.c_str(), v);
  }
}
// A model with external W [2] at `location` (with `length`/`offset` if >= 0).
Builder external_model(const std::string& location, std::int64_t length = -1,
                       std::int64_t offset = -1, std::vector<std::int64_t> dims = {2}) {
  Builder b;
  b.input("x", {2}).output("y", {2});
  auto* t = b.g->add_initializer();
  t->set_name("W");
  t->set_data_type(1);
  for (auto d : dims) t->add_dims(d);
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto kv = [&](const std::string& k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  if (offset >= 0) kv("offset", std::to_string(offset));
  if (length >= 0) kv("length", std::to_string(length));
  b.node("Add", {"x", "W"}, {"y"});
  return b;
}

// A small trained graph for the run-API and checkpoint cases.
struct Small {
  Graph g;
  Node x = g.input("x");
  Node ids = g.input("ids", DType::i32);
  Node W = g.variable("W", {4, 3}, Initializer::uniform(-1, 1, 1));
  Node E = g.variable("E", {5, 4}, Initializer::uniform(-1, 1, 2));
  Node h = matmul(x + embedding(E, ids), W).named("h");
  Node loss = reduce_sum(h * h).named("loss");
  Node step = sgd(loss, {W, E}, 0.01f);
  InputShapes shapes{{"x", {2, 4}}, {"ids", {2}}};
  CompiledGraph cg = GraphCompiler().compile(g, shapes, {loss, step, h});
  std::vector<float> xv = std::vector<float>(8, 0.5f);
  std::vector<std::int32_t> iv{1, 3};
  void run() { cg.run({{"x", xv}, {"ids", iv}}); }
};

std::string ckpt_bytes(
    const std::vector<std::tuple<std::string, bool, std::vector<std::int64_t>>>& vars) {
  std::string bytes;
  detail::CheckpointWriter w(
      [&](const void* p, std::size_t n) { bytes.append(static_cast<const char*>(p), n); });
  w.header(static_cast<std::uint32_t>(vars.size()));
  for (const auto& [name, f32, dims] : vars) {
    std::int64_t n = 1;
    for (auto d : dims) n *= d;
    std::vector<float> data(static_cast<std::size_t>(n), 0.25f);
    w.entry(name, f32, dims, data.data(), data.size() * 4);
  }
  w.trailer();
  return bytes;
}
std::string spit(const std::string& name, const std::string& bytes) {
  const std::string p = (dir() / name).string();
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  return p;
}

// A character device of our own (root only): /dev/null's numbers, in the probe's folder, so
// that a write which replaces devices damages nothing.
std::string device_node() {
  const std::string p = (dir() / "null.dev").string();
  if (!fs::exists(p) && ::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    throw std::runtime_error("mknod: not root?");
  return p;
}
// What the path is now (a writer must not have replaced a device or FIFO).
void report_node(const std::string& p) {
  struct stat st {};
  ::lstat(p.c_str(), &st);
  std::printf("  %s is now %s\n", p.c_str(),
              S_ISCHR(st.st_mode)    ? "still the device"
              : S_ISFIFO(st.st_mode) ? "still the FIFO"
              : S_ISLNK(st.st_mode)  ? "still the link"
              : S_ISREG(st.st_mode)  ? "A REGULAR FILE (replaced)"
                                     : "something else");
}

struct Case {
  std::string name;
  std::function<void()> body;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  // ---- ONNX models
  c.push_back({"onnx: two nodes in a cycle (a reads b, b reads a)", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.node("Add", {"x", "b"}, {"a"});
                 b.node("Relu", {"a"}, {"b"});
                 b.node("Identity", {"b"}, {"y"});
                 b.m.mutable_graph();
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: a node reading its own output", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.node("Add", {"x", "y"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: two nodes writing the same output name", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.node("Relu", {"x"}, {"y"});
                 b.node("Neg", {"x"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: one graph output listed twice", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2}).output("y", {2});
                 b.node("Relu", {"x"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: two initializers of one name (checked model)", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.floats("W", {2}, {1, 2});
                 b.floats("W", {2}, {10, 20});
                 b.node("Add", {"x", "W"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: a node output named like a graph input (checked model)", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.node("Neg", {"x"}, {"x"});
                 b.node("Relu", {"x"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: two nodes writing one output (checked model)", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.node("Relu", {"x"}, {"y"});
                 b.node("Neg", {"x"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: an initializer shadowing a graph input (a default value)", [] {
                 Builder b;
                 b.input("x", {2}).input("W", {2}).output("y", {2});
                 b.floats("W", {2}, {1, 2});
                 b.node("Add", {"x", "W"}, {"y"});
                 ho::Model m = ho::import(write_model(b));
                 std::string ins;
                 for (auto& i : m.input_info) ins += " " + i.name;
                 std::printf("  inputs:%s\n", ins.c_str());
                 CompiledGraph cg = m.compile(GraphCompiler());
                 // The user feeds W: the value fed must be what is added.
                 const std::vector<float> z{0, 0}, w{10, 20};
                 std::vector<FeedItem> feeds{{"x", z}};
                 bool w_in = false;
                 for (auto& i : m.input_info) w_in = w_in || i.name == "W";
                 if (w_in) feeds.push_back({"W", w});
                 cg.run(feeds);
                 auto y = cg.read(m.outputs[0]);
                 std::printf("  y = %g %g\n", y[0], y[1]);
               }});
  c.push_back({"onnx: an input with a negative dim", [] {
                 Builder b;
                 b.input("x", {int64_t{-5}}).output("y", {int64_t{-5}});
                 b.node("Relu", {"x"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: an input with a zero dim", [] {
                 Builder b;
                 b.input("x", {int64_t{0}, int64_t{3}}).output("y", {int64_t{0}, int64_t{3}});
                 b.node("Relu", {"x"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: an initializer with a negative dim", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.floats("W", {-2}, {1, 2});
                 b.node("Add", {"x", "W"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: an initializer with fewer values than its dims", [] {
                 Builder b;
                 b.input("x", {2, 2}).output("y", {2, 2});
                 b.floats("W", {2, 2}, {1, 2, 3});
                 b.node("Add", {"x", "W"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: an initializer's raw_data shorter than its dims", [] {
                 Builder b;
                 b.input("x", {4}).output("y", {4});
                 auto* t = b.g->add_initializer();
                 t->set_name("W");
                 t->set_data_type(1);
                 t->add_dims(4);
                 t->set_raw_data(std::string(10, '\0'));
                 b.node("Add", {"x", "W"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: external data with a length beyond the file", [] {
                 write_floats(dir() / "w.bin", 2);
                 import_and_run(write_model(external_model("w.bin", 4096)));
               }});
  c.push_back({"onnx: external data with an offset beyond the file", [] {
                 write_floats(dir() / "w.bin", 2);
                 import_and_run(write_model(external_model("w.bin", 8, 1 << 20)));
               }});
  c.push_back({"onnx: external data whose length disagrees with the dims", [] {
                 write_floats(dir() / "w.bin", 8);
                 import_and_run(write_model(external_model("w.bin", 12)));
               }});
  c.push_back({"onnx: external data with a negative offset", [] {
                 write_floats(dir() / "w.bin", 8);
                 Builder b = external_model("w.bin", 8);
                 auto* e = b.g->mutable_initializer(0)->add_external_data();
                 e->set_key("offset");
                 e->set_value("-8");
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: external data offset/length that are not numbers", [] {
                 write_floats(dir() / "w.bin", 8);
                 Builder b = external_model("w.bin");
                 auto* e = b.g->mutable_initializer(0)->add_external_data();
                 e->set_key("offset");
                 e->set_value("12abc");
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: external data with an empty location",
               [] { import_and_run(write_model(external_model(""))); }});
  c.push_back({"onnx: external data naming the model file itself",
               [] { import_and_run(write_model(external_model("model.onnx", 8))); }});
  c.push_back({"onnx: a Transpose with a perm of a million entries", [] {
                 Builder b;
                 b.input("x", {2, 3}).output("y", {3, 2});
                 auto* n = b.node("Transpose", {"x"}, {"y"});
                 std::vector<std::int64_t> perm(1'000'000, 0);
                 Builder::ints_attr(n, "perm", perm);
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: a Sum of 20000 inputs", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 std::vector<std::string> ins(20000, "x");
                 b.node("Sum", ins, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: a Reshape whose shape has -1 twice", [] {
                 Builder b;
                 b.input("x", {2, 6}).output("y", {int64_t{3}, int64_t{4}});
                 b.ints("s", {2}, {-1, -1});
                 b.node("Reshape", {"x", "s"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: a graph output nothing computes", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2}).output("z", {2});
                 b.node("Relu", {"x"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: a node with an empty op type", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.node("", {"x"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: no opset import at all", [] {
                 Builder b;
                 b.m.clear_opset_import();
                 b.input("x", {2}).output("y", {2});
                 b.node("Relu", {"x"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: opset 1000", [] {
                 Builder b(1000);
                 b.input("x", {2}).output("y", {2});
                 b.node("Relu", {"x"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: an empty model file", [] {
                 std::ofstream(dir() / "empty.onnx");
                 import_and_run((dir() / "empty.onnx").string());
               }});
  c.push_back({"onnx: a model file cut in half", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.floats("W", {2}, {1, 2});
                 b.node("Add", {"x", "W"}, {"y"});
                 const std::string s = b.bytes();
                 spit("half.onnx", s.substr(0, s.size() / 2));
                 import_and_run((dir() / "half.onnx").string());
               }});
  c.push_back({"onnx: an input of rank 7", [] {
                 Builder b;
                 std::vector<Dim> d(7, int64_t{2});
                 b.input("x", d).output("y", d);
                 b.node("Relu", {"x"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: Gather with a constant index out of range", [] {
                 Builder b;
                 b.input("x", {4, 2}).output("y", {1, 2});
                 b.ints("i", {1}, {9});
                 b.node("Gather", {"x", "i"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: an input of element type string", [] {
                 Builder b;
                 b.input("x", {2}, 8).output("y", {2}, 8);
                 b.node("Identity", {"x"}, {"y"});
                 import_and_run(write_model(b));
               }});
  c.push_back({"onnx: an input of element type 0 (undefined)", [] {
                 Builder b;
                 b.input("x", {2}, 0).output("y", {2});
                 b.node("Relu", {"x"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: a required input given as \"\"", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.node("Add", {"x", ""}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: two graph inputs of one name", [] {
                 Builder b;
                 b.input("x", {2}).input("x", {3}).output("y", {2});
                 b.node("Relu", {"x"}, {"y"});
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: input_shapes naming no input of the model", [] {
                 Builder b;
                 b.input("x", {"n"}).output("y", {"n"});
                 b.node("Relu", {"x"}, {"y"});
                 ho::ImportOptions o;
                 o.input_shapes = {{"x", {3}}, {"typo", {3}}};
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: a Loop whose body is not a graph attribute", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.ints("n", {}, {3});
                 auto* n = b.node("Loop", {"n", "", "x"}, {"y"});
                 Builder::int_attr(n, "body", 5);
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  c.push_back({"onnx: an If whose branches have no outputs", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 auto* t = b.g->add_initializer();
                 t->set_name("c");
                 t->set_data_type(9);
                 t->add_int32_data(1);
                 auto* n = b.node("If", {"c"}, {"y"});
                 for (const char* br : {"then_branch", "else_branch"}) {
                   auto* a = n->add_attribute();
                   a->set_name(br);
                   a->set_type(::onnx::AttributeProto::GRAPH);
                   a->mutable_g()->set_name(br);
                 }
                 ho::ImportOptions o;
                 o.check = false;
                 import_and_run(write_model(b), o);
               }});
  // ---- checkpoints
  c.push_back(
      {"ckpt: a variable of the file's other dtype (i32 in the file, f32 in the graph)", [] {
         Small s;
         s.cg.load(spit("dtype.ckpt", ckpt_bytes({{"W", false, {4, 3}}, {"E", true, {5, 4}}})));
       }});
  c.push_back({"ckpt: a variable named twice in the file", [] {
                 Small s;
                 s.cg.load(spit(
                     "twice.ckpt",
                     ckpt_bytes({{"W", true, {4, 3}}, {"W", true, {4, 3}}, {"E", true, {5, 4}}})));
               }});
  c.push_back({"ckpt: count 2^32-1 in a 40-byte file", [] {
                 Small s;
                 std::string b = ckpt_bytes({});
                 const std::uint32_t n = 0xFFFFFFFFu;
                 std::memcpy(&b[12], &n, 4);
                 s.cg.load(spit("count.ckpt", b));
               }});
  c.push_back({"ckpt: a name length of 2^32-1", [] {
                 Small s;
                 std::string b = ckpt_bytes({{"W", true, {4, 3}}, {"E", true, {5, 4}}});
                 const std::uint32_t n = 0xFFFFFFFFu;
                 std::memcpy(&b[16], &n, 4);
                 s.cg.load(spit("namelen.ckpt", b));
               }});
  c.push_back({"ckpt: rank 9", [] {
                 Small s;
                 std::string b = ckpt_bytes({{"W", true, {4, 3}}, {"E", true, {5, 4}}});
                 b[16 + 4 + 1 + 1] = 9;
                 s.cg.load(spit("rank.ckpt", b));
               }});
  c.push_back({"ckpt: dtype byte 7", [] {
                 Small s;
                 std::string b = ckpt_bytes({{"W", true, {4, 3}}, {"E", true, {5, 4}}});
                 b[16 + 4 + 1] = 7;
                 s.cg.load(spit("dtype7.ckpt", b));
               }});
  c.push_back(
      {"ckpt: a negative dim", [] {
         Small s;
         s.cg.load(spit("neg.ckpt", ckpt_bytes({{"W", true, {-4, -3}}, {"E", true, {5, 4}}})));
       }});
  c.push_back({"ckpt: save to a path whose folder is a file", [] {
                 Small s;
                 spit("afile", "x");
                 s.cg.save((dir() / "afile" / "x.ckpt").string());
               }});
  c.push_back({"ckpt: save to \"\"", [] {
                 Small s;
                 s.cg.save("");
               }});
  c.push_back({"ckpt: load \"\"", [] {
                 Small s;
                 s.cg.load("");
               }});
  c.push_back({"ckpt: save over a character device (a private copy of /dev/null)", [] {
                 Small s;
                 const std::string dev = device_node();
                 try {
                   s.cg.save(dev);
                 } catch (...) {
                   report_node(dev);
                   throw;
                 }
                 report_node(dev);
               }});
  c.push_back({"ckpt: save over a FIFO", [] {
                 Small s;
                 const std::string f = (dir() / "fifo.ckpt").string();
                 ::mkfifo(f.c_str(), 0600);
                 try {
                   s.cg.save(f);
                 } catch (...) {
                   report_node(f);
                   throw;
                 }
                 report_node(f);
               }});
  c.push_back({"ckpt: save through a link to a device", [] {
                 Small s;
                 const std::string link = (dir() / "link.ckpt").string();
                 fs::create_symlink(device_node(), link);
                 try {
                   s.cg.save(link);
                 } catch (...) {
                   report_node(link);
                   throw;
                 }
                 report_node(link);
               }});
  c.push_back({"ckpt: save in a read-only folder (not root: skipped)", [] {
                 Small s;
                 fs::create_directories(dir() / "ro");
                 fs::permissions(dir() / "ro", fs::perms::owner_read | fs::perms::owner_exec);
                 s.cg.save((dir() / "ro" / "x.ckpt").string());
               }});
  c.push_back({"ckpt: load after a failed load keeps the graph usable", [] {
                 Small s;
                 s.run();
                 const std::string p = (dir() / "ok.ckpt").string();
                 s.cg.save(p);
                 try {
                   s.cg.load(spit("bad.ckpt", "HGCKPT"));
                 } catch (const DataError&) {
                 }
                 s.cg.load(p);
                 s.run();
                 std::printf("  loaded and ran after a failed load\n");
               }});
  // ---- the run API
  c.push_back({"run: an i32 feed for an f32 input", [] {
                 Small s;
                 const std::vector<std::int32_t> bad(8, 1);
                 s.cg.run({{"x", bad}, {"ids", s.iv}});
               }});
  c.push_back({"run: an f32 feed for an i32 input", [] {
                 Small s;
                 const std::vector<float> bad(2, 1.0f);
                 s.cg.run({{"x", s.xv}, {"ids", bad}});
               }});
  c.push_back({"run: a feed of the wrong element count", [] {
                 Small s;
                 const std::vector<float> bad(7, 1.0f);
                 s.cg.run({{"x", bad}, {"ids", s.iv}});
               }});
  c.push_back({"run: a missing feed", [] {
                 Small s;
                 s.cg.run({{"x", s.xv}});
               }});
  c.push_back({"run: an extra feed name", [] {
                 Small s;
                 s.cg.run({{"x", s.xv}, {"ids", s.iv}, {"typo", s.xv}});
               }});
  c.push_back({"run: a feed to a variable's name", [] {
                 Small s;
                 const std::vector<float> w(12, 1.0f);
                 s.cg.run({{"x", s.xv}, {"ids", s.iv}, {"W", w}});
               }});
  c.push_back({"run: an empty feed span for a non-empty input", [] {
                 Small s;
                 s.cg.run({{"x", std::span<const float>()}, {"ids", s.iv}});
               }});
  c.push_back({"run: NaN-free check: read a computed value before any run", [] {
                 Small s;
                 (void)s.cg.read(s.h);
               }});
  c.push_back({"api: read of a name that is no node", [] {
                 Small s;
                 s.run();
                 (void)s.cg.read("nope");
               }});
  c.push_back({"api: read_i32 of an f32 node", [] {
                 Small s;
                 s.run();
                 (void)s.cg.read_i32(s.h);
               }});
  c.push_back({"api: write of the wrong size to a variable", [] {
                 Small s;
                 const std::vector<float> w(5, 1.0f);
                 s.cg.write(s.W, w);
               }});
  c.push_back({"api: write to a computed node", [] {
                 Small s;
                 const std::vector<float> w(6, 1.0f);
                 s.cg.write(s.h, w);
               }});
  c.push_back({"api: write_i32 to an f32 variable", [] {
                 Small s;
                 const std::vector<std::int32_t> w(12, 1);
                 s.cg.write_i32(s.W, w);
               }});
  c.push_back({"api: mapped_input (f32) of an i32 input", [] {
                 Small s;
                 (void)s.cg.mapped_input("ids");
               }});
  c.push_back({"api: read of a node of another graph", [] {
                 Small s, t;
                 s.run();
                 (void)s.cg.read(t.h);
               }});
  c.push_back({"api: run after a failed run", [] {
                 Small s;
                 try {
                   s.cg.run({{"x", s.xv}, {"ids", std::vector<std::int32_t>{1, 9}}});
                 } catch (const FeedError&) {
                 }
                 s.run();
                 std::printf("  ran after a failed run; loss %g\n", s.cg.read(s.loss)[0]);
               }});
  c.push_back({"api: run() while a run_async is in flight (same thread)", [] {
                 Small s;
                 auto h = s.cg.run_async({{"x", s.xv}, {"ids", s.iv}});
                 s.run();
               }});
  c.push_back({"api: save() while a run_async is in flight (same thread)", [] {
                 Small s;
                 auto h = s.cg.run_async({{"x", s.xv}, {"ids", s.iv}});
                 s.cg.save((dir() / "inflight.ckpt").string());
               }});
  c.push_back({"api: a RunHandle dropped without wait, then run", [] {
                 Small s;
                 { auto h = s.cg.run_async({{"x", s.xv}, {"ids", s.iv}}); }
                 s.run();
                 std::printf("  ran\n");
               }});
  c.push_back({"api: wait() twice on one handle", [] {
                 Small s;
                 auto h = s.cg.run_async({{"x", s.xv}, {"ids", s.iv}});
                 h.wait();
                 h.wait();
               }});
  c.push_back({"api: compile with a shape for a name that is no input", [] {
                 Small s;
                 InputShapes sh = s.shapes;
                 sh.push_back({"typo", {3}});
                 (void)GraphCompiler().compile(s.g, sh, {s.loss});
               }});
  c.push_back(
      {"api: compile with an input shape of a zero dim", [] {
         Small s;
         (void)GraphCompiler().compile(s.g, {{"x", {0, 4}}, {"ids", {0}}}, {s.loss, s.step});
       }});
  c.push_back({"api: compile with an input given two shapes", [] {
                 Small s;
                 InputShapes sh = s.shapes;
                 sh.push_back({"x", {3, 4}});
                 (void)GraphCompiler().compile(s.g, sh, {s.loss});
               }});
  // ---- traces
  c.push_back({"trace: start_trace on a directory", [] {
                 Small s;
                 s.cg.start_trace(dir().string());
                 s.run();
                 s.cg.stop_trace();
               }});
  c.push_back({"trace: start_trace twice", [] {
                 Small s;
                 s.cg.start_trace((dir() / "t1.json").string());
                 s.cg.start_trace((dir() / "t2.json").string());
                 s.run();
                 s.cg.stop_trace();
               }});
  c.push_back({"trace: stop_trace without start", [] {
                 Small s;
                 s.cg.stop_trace();
                 std::printf("  nothing\n");
               }});
  c.push_back({"trace: a trace file in a folder that does not exist", [] {
                 Small s;
                 s.cg.start_trace((dir() / "no" / "t.json").string());
                 s.run();
                 s.cg.stop_trace();
               }});
  c.push_back({"trace: over a character device (a private copy of /dev/null)", [] {
                 Small s;
                 const std::string dev = device_node();
                 try {
                   s.cg.start_trace(dev);
                   s.run();
                   s.cg.stop_trace();
                 } catch (...) {
                   report_node(dev);
                   throw;
                 }
                 report_node(dev);
               }});
  c.push_back({"trace: to a FIFO nobody reads", [] {
                 Small s;
                 const std::string f = (dir() / "trace.fifo").string();
                 ::mkfifo(f.c_str(), 0600);
                 s.cg.start_trace(f);
                 s.run();
                 s.cg.stop_trace();
               }});
  c.push_back({"trace: two graphs tracing to one file at once", [] {
                 const std::string path = (dir() / "shared.json").string();
                 std::atomic<int> failed{0};
                 std::vector<std::thread> ts;
                 for (int t = 0; t < 4; ++t) {
                   ts.emplace_back([&] {
                     try {
                       Small s;
                       for (int r = 0; r < 30; ++r) {
                         s.cg.start_trace(path);
                         s.run();
                         s.cg.stop_trace();
                       }
                     } catch (const Error& e) {
                       if (failed++ == 0) std::printf("  a thread: %s\n", e.what());
                     }
                   });
                 }
                 for (auto& t : ts) t.join();
                 std::string text;
                 {
                   std::ifstream in(path);
                   text.assign(std::istreambuf_iterator<char>(in), {});
                 }
                 const bool whole = text.rfind("\n]}\n") == text.size() - 4 &&
                                    text.find("{\"displayTimeUnit\"", 1) == std::string::npos;
                 std::printf("  %d of 4 threads failed; the file is %s\n", failed.load(),
                             whole ? "whole" : "NOT whole");
                 if (failed) throw DataError("some traces failed");
               }});
  c.push_back({"pb: write_tensor over a FIFO", [] {
                 const std::string f = (dir() / "t.fifo").string();
                 ::mkfifo(f.c_str(), 0600);
                 ho::TensorData t;
                 t.shape = Shape{2};
                 t.f32 = {1, 2};
                 try {
                   ho::write_tensor(f, t);
                 } catch (...) {
                   report_node(f);
                   throw;
                 }
                 report_node(f);
               }});
  // ---- tensor files
  c.push_back({"pb: write_tensor whose shape disagrees with its data", [] {
                 ho::TensorData t;
                 t.shape = Shape{2, 3};
                 t.f32 = {1, 2};
                 ho::write_tensor((dir() / "t.pb").string(), t);
               }});
  c.push_back({"pb: write_tensor to a folder", [] {
                 ho::TensorData t;
                 t.shape = Shape{2};
                 t.f32 = {1, 2};
                 ho::write_tensor(dir().string(), t);
               }});
  c.push_back({"pb: read_tensor of a model file", [] {
                 Builder b;
                 b.input("x", {2}).output("y", {2});
                 b.node("Relu", {"x"}, {"y"});
                 (void)ho::read_tensor(write_model(b));
               }});
  c.push_back({"pb: a tensor whose dims overflow", [] {
                 ::onnx::TensorProto t;
                 t.set_data_type(1);
                 t.add_dims(std::int64_t{1} << 40);
                 t.add_dims(std::int64_t{1} << 40);
                 t.add_float_data(1);
                 spit("big.pb", t.SerializeAsString());
                 (void)ho::read_tensor((dir() / "big.pb").string());
               }});
  c.push_back({"export: to a path in a folder that does not exist", [] {
                 Small s;
                 ho::export_model(s.g, std::vector<Node>{s.h}, s.shapes,
                                  (dir() / "no" / "m.onnx").string());
               }});
  c.push_back({"export: a graph with no outputs", [] {
                 Small s;
                 ho::export_model(s.g, std::vector<Node>{}, s.shapes, (dir() / "m.onnx").string());
               }});
  return c;
}

}  // namespace

// Models for run.sh's hetgraph-run cases, written into `out`.
void tool_models(const fs::path& out) {
  fs::create_directories(out);
  auto save = [&](const Builder& b, const std::string& name) {
    std::ofstream(out / name, std::ios::binary) << b.bytes();
  };
  {
    Builder b;
    b.input("x", {2}).output("y", {2});
    b.node("Relu", {"x"}, {"y"});
    save(b, "relu.onnx");
  }
  {  // two outputs whose names are one file name once made safe
    Builder b;
    b.input("x", {2}).output("a/b", {2}).output("a_b", {2});
    b.node("Relu", {"x"}, {"a/b"});
    b.node("Neg", {"x"}, {"a_b"});
    save(b, "collide.onnx");
  }
  {  // outputs named like folders
    Builder b;
    b.input("x", {2}).output("..", {2}).output(".", {2});
    b.node("Relu", {"x"}, {".."});
    b.node("Neg", {"x"}, {"."});
    save(b, "dots.onnx");
  }
  {  // an int64 input, for a .pb of values beyond int32
    Builder b;
    b.input("i", {2}, 7).output("y", {2}, 7);
    b.node("Identity", {"i"}, {"y"});
    save(b, "int64.onnx");
    ::onnx::TensorProto t;
    t.set_name("i");
    t.set_data_type(7);
    t.add_dims(2);
    t.add_int64_data(std::int64_t{1} << 40);
    t.add_int64_data(1);
    std::ofstream(out / "big_int64.pb", std::ios::binary) << t.SerializeAsString();
    ::onnx::TensorProto f;
    f.set_name("x");
    f.set_data_type(1);
    f.add_dims(3);
    for (int k = 0; k < 3; ++k) f.add_float_data(1.0f);
    std::ofstream(out / "three_floats.pb", std::ios::binary) << f.SerializeAsString();
  }
  {  // a loop of 2^21 iterations: over the node budget
    Builder body;
    body.input("i", {}, 7).input("c", {}, 9).input("v", {2});
    body.output("c_out", {}, 9).output("v_out", {2});
    body.node("Identity", {"c"}, {"c_out"});
    body.node("Relu", {"v"}, {"v_out"});
    Builder b;
    b.input("x", {2}).output("y", {2});
    b.ints("n", {}, {std::int64_t{1} << 21});
    auto* n = b.node("Loop", {"n", "", "x"}, {"y"});
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body.m.graph();
    save(b, "loop.onnx");
  }
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "models") {
    tool_models(argv[2]);
    return 0;
  }
  const auto all = cases();
  if (argc < 2 || std::string(argv[1]) == "list") {
    for (std::size_t i = 0; i < all.size(); ++i) std::printf("%zu\t%s\n", i, all[i].name.c_str());
    return 0;
  }
  const std::size_t k = std::stoul(argv[1]);
  std::printf("case %zu: %s\n", k, all.at(k).name.c_str());
  std::fflush(stdout);
  try {
    all[k].body();
    std::printf("NONE\n");
  } catch (const Error& e) {
    const char* kind = dynamic_cast<const ho::UnsupportedError*>(&e) ? "UnsupportedError"
                       : dynamic_cast<const GraphError*>(&e)         ? "GraphError"
                       : dynamic_cast<const ShapeError*>(&e)         ? "ShapeError"
                       : dynamic_cast<const FeedError*>(&e)          ? "FeedError"
                       : dynamic_cast<const PlatformError*>(&e)      ? "PlatformError"
                       : dynamic_cast<const DataError*>(&e)          ? "DataError"
                       : dynamic_cast<const UsageError*>(&e)         ? "UsageError"
                                                                     : "Error";
    std::printf("ERROR %s: %s\n", kind, e.what());
  } catch (const std::exception& e) {
    std::printf("STD %s: %s\n", typeid(e).name(), e.what());
  }
  return 0;
}
