// SPDX-License-Identifier: Apache-2.0
// Files the ONNX importer opens, and budgets of the whole import (issue 46): external data, model
// and tensor files, the budgets as options, and what the probes of issue 46 found.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>
#include <utility>

#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// A fresh folder of this test's own under the temporary directory.
fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_floats(const fs::path& p, const std::vector<float>& v) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()),
             static_cast<std::streamsize>(v.size() * sizeof(float)));
}

// A tensor W [2] kept in an external file at `location`.
void external(::onnx::TensorProto* t, const std::string& location) {
  t->set_name("W");
  t->set_data_type(1);
  t->add_dims(2);
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value(location);
}

// dir/model.onnx: y = x + W, W [2] an initializer kept in an external file at `location` (or,
// with `constant`, the value of a Constant node).
fs::path external_model(const fs::path& dir, const std::string& location, bool constant = false) {
  Builder b;
  b.input("x", {2}).output("y", {2});
  if (constant) {
    auto* a = b.node("Constant", {}, {"W"})->add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    external(a->mutable_t(), location);
  } else {
    external(b.g->add_initializer(), location);
  }
  b.node("Add", {"x", "W"}, {"y"});
  const fs::path model = dir / "model.onnx";
  std::ofstream(model, std::ios::binary) << b.bytes();
  return model;
}

// y = x + W of a model imported from `model`, for x = 0.
std::vector<float> weights_of(const fs::path& model) {
  const ho::Model m = ho::import(model.string());
  CompiledGraph cg = m.compile(GraphCompiler());
  cg.run({{"x", std::vector<float>{0, 0}}});
  return cg.read(m.outputs[0]);
}

// Opens the FIFO for writing after `delay` (and closes it at once), so that a reader blocked
// in open() on it is let go: without the fix, the test fails instead of hanging.
struct FifoReleaser {
  explicit FifoReleaser(fs::path p, std::chrono::milliseconds delay = std::chrono::seconds(3))
      : t([p = std::move(p), delay, this] {
          const auto until = std::chrono::steady_clock::now() + delay;
          while (!stop && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          if (stop) return;
          const int fd = ::open(p.c_str(), O_WRONLY | O_NONBLOCK);
          if (fd >= 0) ::close(fd);
        }) {}
  ~FifoReleaser() {
    stop = true;
    t.join();
  }
  std::atomic<bool> stop{false};
  std::thread t;
};

// External data is read only from inside the model's folder: a symlink there to a file outside
// (to /etc/passwd), a linked folder on the way, and a chain of links are refused, naming the
// model and the location; links that stay inside, and a model reached through a linked folder,
// import.
TEST(OnnxImport, ExternalDataStaysInsideTheModelsFolder) {
  const fs::path root = fresh_dir("hetgraph-external"), dir = root / "model",
                 outside = root / "outside";
  fs::create_directories(dir / "real");
  fs::create_directories(outside);
  write_floats(dir / "w.bin", {1, 2});
  write_floats(dir / "real" / "w.bin", {3, 4});
  write_floats(outside / "secret.bin", {7, 8});
  fs::create_symlink("real/w.bin", dir / "inside_link.bin");
  fs::create_symlink(dir, root / "linked_model");
  EXPECT_EQ(weights_of(external_model(dir, "w.bin")), (std::vector<float>{1, 2}));
  EXPECT_EQ(weights_of(external_model(dir, "real/w.bin")), (std::vector<float>{3, 4}));
  EXPECT_EQ(weights_of(external_model(dir, "inside_link.bin")), (std::vector<float>{3, 4}));
  EXPECT_EQ(weights_of(root / "linked_model" / "model.onnx"), (std::vector<float>{3, 4}));

  fs::create_symlink(outside / "secret.bin", dir / "weights.bin");
  fs::create_symlink("/etc/passwd", dir / "passwd.bin");
  fs::create_symlink(outside, dir / "linked");  // a linked folder on the way
  fs::create_symlink("chain2.bin", dir / "chain1.bin");
  fs::create_symlink("real/chain3.bin", dir / "chain2.bin");
  fs::create_symlink("../../outside/secret.bin", dir / "real" / "chain3.bin");
  for (const std::string location :
       {"weights.bin", "passwd.bin", "linked/secret.bin", "chain1.bin", "./real/chain3.bin"}) {
    SCOPED_TRACE(location);
    const fs::path model = external_model(dir, location);
    const std::string what = error_of<DataError>([&] { weights_of(model); });
    EXPECT_CONTAINS(what, model.string() + ": ");
    EXPECT_CONTAINS(what, "'" + location + "'");
    EXPECT_CONTAINS(what, "outside the model's folder");
  }
  fs::remove_all(root);
}

// A Constant's tensor kept as external data is read too (ONNX's external-data helper moves
// those out as well), under the same rule.
TEST(OnnxImport, ExternalDataOfConstantsIsReadUnderTheSameRule) {
  const fs::path root = fresh_dir("hetgraph-external-constant"), dir = root / "model";
  fs::create_directories(dir);
  fs::create_directories(root / "outside");
  write_floats(dir / "w.bin", {5, 6});
  write_floats(root / "outside" / "secret.bin", {7, 8});
  fs::create_symlink(root / "outside" / "secret.bin", dir / "weights.bin");
  EXPECT_EQ(weights_of(external_model(dir, "w.bin", true)), (std::vector<float>{5, 6}));
  EXPECT_CONTAINS(
      error_of<DataError>([&] { weights_of(external_model(dir, "weights.bin", true)); }),
      "outside the model's folder");
  fs::remove_all(root);
}

// External data must be a regular file: a FIFO would block the import in open(), a folder is
// no data; and tensors may not claim one file's bytes over and over (a few bytes of model
// would make the import allocate without end).
TEST(OnnxImport, ExternalDataIsRegularFilesReadOnce) {
  const fs::path dir = fresh_dir("hetgraph-external-kinds");
  ASSERT_EQ(::mkfifo((dir / "fifo.bin").c_str(), 0600), 0);
  fs::create_directories(dir / "folder.bin");
  for (const std::string location : {"fifo.bin", "folder.bin"}) {
    SCOPED_TRACE(location);
    FifoReleaser release(dir / "fifo.bin");
    const auto t0 = std::chrono::steady_clock::now();
    const std::string what =
        error_of<DataError>([&] { weights_of(external_model(dir, location)); });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    EXPECT_CONTAINS(what, "'" + location + "'");
    EXPECT_CONTAINS(what, "not a regular file");
  }
  write_floats(dir / "w.bin", {1, 2});
  Builder b;
  b.input("x", {2}).output("y", {2});
  for (const std::string name : {"W", "V", "U"}) {
    auto* t = b.g->add_initializer();
    external(t, "w.bin");
    t->set_name(name);
  }
  b.node("Add", {"x", "W"}, {"a"});
  b.node("Add", {"a", "V"}, {"c"});
  b.node("Add", {"c", "U"}, {"y"});
  std::ofstream(dir / "model.onnx", std::ios::binary) << b.bytes();
  EXPECT_CONTAINS(error_of<DataError>([&] { ho::import((dir / "model.onnx").string()); }),
                  "tensors may not claim the same bytes");
  fs::remove_all(dir);
}

// A model or tensor file that is not a regular file (a FIFO, a folder) is a DataError naming
// it, at once: before, a FIFO blocked the import and /dev/zero was read until memory ran out.
TEST(OnnxImport, ModelAndTensorFilesAreRegularFiles) {
  const fs::path dir = fresh_dir("hetgraph-model-kinds");
  const fs::path fifo = dir / "fifo.onnx";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (int tensor = 0; tensor < 2; ++tensor) {
    for (const fs::path& p : {fifo, dir}) {
      SCOPED_TRACE(p.string() + (tensor ? " as a tensor" : " as a model"));
      FifoReleaser release(fifo);
      const auto t0 = std::chrono::steady_clock::now();
      const std::string what = error_of<DataError>(
          [&] { tensor ? (void)ho::read_tensor(p.string()) : (void)ho::import(p.string()); });
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
      EXPECT_CONTAINS(what, p.string() + ": ");
      EXPECT_CONTAINS(what, "not a regular file");
    }
  }
  fs::remove_all(dir);
}

// A Loop of Loops: each within the per-loop budget, 1100 x 1000 unrolled nodes in all. The
// budget bounds the whole import: an UnsupportedError naming the model and ImportOptions::
// max_nodes, soon; before, the import unrolled every node (and two more levels never ended).
TEST(OnnxImport, NestedLoopsAreBoundedForTheWholeImport) {
  Builder inner;
  inner.input("j", {}, 7).input("c2", {}, 9).input("h2", {1});
  inner.output("c2_out", {}, 9).output("h2_out", {1});
  inner.node("Identity", {"c2"}, {"c2_out"});
  inner.node("Identity", {"h2"}, {"h2_out"});
  Builder outer;
  outer.input("i", {}, 7).input("c", {}, 9).input("h", {1});
  outer.output("c_out", {}, 9).output("h_out", {1});
  outer.node("Identity", {"c"}, {"c_out"});
  Builder::attr_g(outer.node("Loop", {"N", "", "h"}, {"h_out"}), "body", inner);
  Builder b(16);
  b.input("x", {1}).output("y", {1});
  scalar_init(b, "M", 7, 1100);
  scalar_init(b, "N", 7, 1000);
  Builder::attr_g(b.node("Loop", {"M", "", "x"}, {"y"}), "body", outer);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string what = error_of<ho::UnsupportedError>([&] { b.import(); });
  EXPECT_CONTAINS(what, "test.onnx: ");
  EXPECT_CONTAINS(what, "ImportOptions::max_nodes");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

// The budgets are options: lowered, they stop smaller imports (nodes, bytes computed at
// import, time), each naming its option; raised, the import goes on.
TEST(OnnxImport, ImportBudgetsAreOptions) {
  const auto loop = [](std::int64_t trip) {
    Builder body;
    body.input("i", {}, 7).input("c", {}, 9).input("h", {2});
    body.output("c_out", {}, 9).output("h_out", {2});
    body.node("Identity", {"c"}, {"c_out"});
    body.node("Relu", {"h"}, {"h_out"});
    Builder b(16);
    b.input("x", {2}).output("y", {2});
    scalar_init(b, "M", 7, trip);
    Builder::attr_g(b.node("Loop", {"M", "", "x"}, {"y"}), "body", body);
    return b;
  };
  ho::ImportOptions o;
  o.max_nodes = 100;
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { loop(60).import(o); }),
                  "ImportOptions::max_nodes");
  o.max_nodes = 200;
  EXPECT_NO_THROW(loop(60).import(o));
  o = {};
  o.max_seconds = 0;
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { loop(2).import(o); }),
                  "ImportOptions::max_seconds");
  Builder big(16);
  big.input("x", {1}).output("y", {1000, 1000});
  big.ints("shape", {1000, 1000});
  big.node("ConstantOfShape", {"shape"}, {"z"});
  big.node("Add", {"x", "z"}, {"y"});
  o = {};
  o.max_host_bytes = 1 << 20;
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { big.import(o); }),
                  "ImportOptions::max_host_bytes");
}

// Declared dims too large for any tensor name the model and the input (before: an input of
// 2^40 elements imported and failed to compile naming neither, and 2^62 was a bare
// ShapeError); a node that would be that large names the ONNX node.
TEST(OnnxImport, HugeDeclaredDimsNameTheModelAndTheInput) {
  for (std::int64_t d : {std::int64_t{1} << 40, std::int64_t{1} << 62}) {
    SCOPED_TRACE(d);
    Builder b;
    b.input("x", {d}).output("y", {d});
    b.node("Relu", {"x"}, {"y"});
    const std::string what = error_of<ShapeError>([&] { b.import(); });
    EXPECT_CONTAINS(what, "test.onnx: input 'x'");
    EXPECT_CONTAINS(what, "ImportOptions::max_tensor_bytes");
  }
  Builder e(13);
  e.input("a", {1 << 20, 1}).input("b", {1, 1 << 20}).output("y", {1 << 20, 1 << 20});
  e.node("MatMul", {"a", "b"}, {"y"})->set_name("huge_matmul");
  const std::string what = error_of<ShapeError>([&] { e.import(); });
  EXPECT_CONTAINS(what, "test.onnx: ONNX node 'huge_matmul'");
  EXPECT_CONTAINS(what, "ImportOptions::max_tensor_bytes");
}

// ---- issue 46, second probe ----------------------------------------------------------------

// A Sum of 20000 inputs is a chain of 19999 adds, typed at the end: the importer typed it by
// recursion as deep as the chain, and the stack overflowed (a segmentation fault). It imports,
// and adds.
TEST(OnnxImport, ALongChainBuiltByOneNodeImports) {
  Builder b;
  b.input("x", {2}).output("y", {2});
  b.node("Sum", std::vector<std::string>(20000, "x"), {"y"});
  const ho::Model m = b.import();
  CompiledGraph cg = m.compile(GraphCompiler());
  cg.run({{"x", std::vector<float>{1, 0.5f}}});
  EXPECT_EQ(cg.read(m.outputs[0]), (std::vector<float>{20000, 10000}));
}

// Each value is defined once, with or without onnx::checker (ImportOptions::check): without
// it, two nodes computing 'y' imported and the later one silently was the output, and two
// inputs of one name were one input.
TEST(OnnxImport, AValueDefinedTwiceIsRefusedWithoutTheChecker) {
  ho::ImportOptions unchecked;
  unchecked.check = false;
  {
    Builder b;
    b.input("x", {2}).output("y", {2});
    b.node("Relu", {"x"}, {"y"});
    b.node("Neg", {"x"}, {"y"});
    const std::string what = error_of<DataError>([&] { b.import(unchecked); });
    EXPECT_CONTAINS(what, "test.onnx: ");
    EXPECT_CONTAINS(what, "(Neg-13) computes 'y', which the model defines already");
  }
  {
    Builder b;
    b.input("x", {2}).input("x", {3}).output("y", {2});
    b.node("Relu", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<DataError>([&] { b.import(unchecked); }), "declares input 'x' twice");
  }
  {
    Builder b;
    b.input("x", {2}).output("y", {2});
    b.node("Neg", {"x"}, {"x"});
    b.node("Relu", {"x"}, {"y"});
    EXPECT_CONTAINS(error_of<DataError>([&] { b.import(unchecked); }),
                    "computes 'x', which the model defines already");
  }
  {
    Builder b;
    b.input("x", {2}).output("y", {2});
    b.floats("W", {2}, {1, 2}).floats("W", {2}, {3, 4});
    b.node("Add", {"x", "W"}, {"y"});
    EXPECT_CONTAINS(error_of<DataError>([&] { b.import(unchecked); }),
                    "two initializers named 'W'");
  }
  // An initializer named like an input is that input's default value: still imports.
  Builder b;
  b.input("x", {2}).input("W", {2}).output("y", {2});
  b.floats("W", {2}, {1, 2});
  b.node("Add", {"x", "W"}, {"y"});
  EXPECT_NO_THROW(b.import(unchecked));
}

// External data's offset and length are integers, whole: "12abc" was read as 12 (the tensor
// then failed with a misleading byte count, or read other bytes than meant).
TEST(OnnxImport, ExternalDataNumbersAreWholeIntegers) {
  const fs::path dir = fresh_dir("hetgraph-external-numbers");
  write_floats(dir / "w.bin", {1, 2, 3, 4, 5, 6, 7, 8});
  for (const char* bad : {"12abc", "0x10", "", " 8", "8.0"}) {
    SCOPED_TRACE(bad);
    Builder b;
    b.input("x", {2}).output("y", {2});
    auto* t = b.g->add_initializer();
    external(t, "w.bin");
    auto* e = t->add_external_data();
    e->set_key("offset");
    e->set_value(bad);
    b.node("Add", {"x", "W"}, {"y"});
    std::ofstream(dir / "model.onnx", std::ios::binary | std::ios::trunc) << b.bytes();
    const std::string what =
        error_of<DataError>([&] { ho::import((dir / "model.onnx").string()); });
    EXPECT_CONTAINS(what, "bad external data offset '" + std::string(bad) + "'");
  }
  fs::remove_all(dir);
}

// An attribute list of a million entries in a message: its first and last few and its count,
// not all of it (a 3 MB message before).
TEST(OnnxImport, HugeAttributeListsAreShortInMessages) {
  Builder b;
  b.input("x", {2, 3}).output("y", {3, 2});
  auto* n = b.node("Transpose", {"x"}, {"y"});
  Builder::attr(n, "perm", std::vector<std::int64_t>(1'000'000, 0));
  ho::ImportOptions unchecked;
  unchecked.check = false;
  const std::string what = error_of<ShapeError>([&] { b.import(unchecked); });
  EXPECT_LT(what.size(), 400u) << what.substr(0, 400);
  EXPECT_CONTAINS(what, "perm [0, 0, 0, 0, 0, 0, 0, 0, ..., 0, 0] (1000000 values)");
}

// Two shapes for one input: the import took the last one, silently.
TEST(OnnxImport, AnInputGivenTwoShapesIsRefused) {
  Builder b;
  b.input("x", {"n"}).output("y", {"n"});
  b.node("Relu", {"x"}, {"y"});
  ho::ImportOptions o;
  o.input_shapes = {{"x", {3}}, {"x", {4}}};
  EXPECT_CONTAINS(error_of<ShapeError>([&] { b.import(o); }), "give input 'x' twice");
}

}  // namespace
