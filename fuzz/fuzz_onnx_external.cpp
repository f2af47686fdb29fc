// SPDX-License-Identifier: Apache-2.0
// ONNX external data: each input lays out a model's folder (files, folders, FIFOs and symlinks,
// some pointing outside it: to a secret file next to the folder, to /etc/passwd, /dev/zero, a
// linked folder, chains and loops of links) and a model whose tensors (initializers, a
// Constant's value, a Loop body's initializer) keep their data there at fuzzed locations,
// offsets and lengths, then imports the model from its path. Anything but a hetgraph::Error is a
// bug, and so is an import that succeeds with bytes of a file outside the folder in a tensor.
// libFuzzer's -timeout bounds each input (a FIFO opened blockingly would hang), and the import's
// own budgets are small.
#include <fuzzer/FuzzedDataProvider.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "hetgraph/error.hpp"
#include "hetgraph/onnx.hpp"
#include "onnx/importer.hpp"

namespace {

namespace fs = std::filesystem;
namespace ho = hetgraph::onnx;

// What no tensor may hold: the secret file's bytes, and /etc/passwd's first line.
constexpr char kSecret[] = "HGSECRET";

const fs::path& root() {
  static const fs::path r = [] {
    const fs::path p =
        fs::temp_directory_path() / ("hetgraph-fuzz-external-" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p / "outside");
    std::ofstream s(p / "outside" / "secret.bin", std::ios::binary);
    for (int i = 0; i < 64; ++i) s << kSecret;
    return p;
  }();
  return r;
}

const char* const kNames[] = {"a.bin", "b.bin", "sub", "sub/c.bin", "link",          "link/c.bin",
                              "loop",  "fifo",  "d",   "sub/sub2",  "sub/sub2/e.bin"};
std::string pick_name(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange(0, 7) == 0) return in.ConsumeRandomLengthString(24);
  return kNames[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kNames) - 1)];
}

std::string pick_target(FuzzedDataProvider& in) {
  const std::string outside = (root() / "outside").string();
  const std::string targets[] = {"../outside/secret.bin",
                                 outside + "/secret.bin",
                                 "/etc/passwd",
                                 "/dev/zero",
                                 outside,
                                 "../outside",
                                 "a.bin",
                                 "sub",
                                 "sub/c.bin",
                                 "link",
                                 "loop",
                                 "sub/../../outside/secret.bin",
                                 ".",
                                 "..",
                                 "fifo"};
  if (in.ConsumeIntegralInRange(0, 7) == 0) return in.ConsumeRandomLengthString(32);
  return targets[in.ConsumeIntegralInRange<std::size_t>(0, std::size(targets) - 1)];
}

// The model's folder: entries made in order (some fail: a file under a missing folder).
void lay_out(FuzzedDataProvider& in, const fs::path& dir) {
  const int entries = in.ConsumeIntegralInRange(0, 8);
  for (int e = 0; e < entries; ++e) {
    const fs::path p = dir / pick_name(in);
    std::error_code ec;
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0: {
        std::ofstream f(p, std::ios::binary);
        f << in.ConsumeRandomLengthString(256);
        break;
      }
      case 1:
        fs::create_directories(p, ec);
        break;
      case 2:
        fs::create_symlink(pick_target(in), p, ec);
        break;
      default:
        ::mkfifo(p.c_str(), 0600);
        break;
    }
  }
}

void external(FuzzedDataProvider& in, ::onnx::TensorProto* t, const std::string& name) {
  t->set_name(name);
  static const int kTypes[] = {1, 6, 7, 9, 10};  // float, int32, int64, bool, float16
  t->set_data_type(kTypes[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kTypes) - 1)]);
  const int rank = in.ConsumeIntegralInRange(0, 2);
  for (int d = 0; d < rank; ++d) t->add_dims(in.ConsumeIntegralInRange<std::int64_t>(0, 70));
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  const int keys = in.ConsumeIntegralInRange(1, 3);
  for (int k = 0; k < keys; ++k) {
    auto* e = t->add_external_data();
    const int which = in.ConsumeIntegralInRange(0, 3);
    e->set_key(which == 0 ? "offset" : which == 1 ? "length" : "location");
    if (which < 2) {
      e->set_value(in.ConsumeBool() ? std::to_string(in.ConsumeIntegral<std::int64_t>())
                                    : in.ConsumeRandomLengthString(12));
    } else {
      e->set_value(pick_name(in));
    }
  }
}

// Whether `bytes` holds the secret's bytes or /etc/passwd's.
bool leaked(const void* data, std::size_t n) {
  const std::string_view s(static_cast<const char*>(data), n);
  return s.find("HGSE") != std::string_view::npos || s.find("root:") != std::string_view::npos;
}

bool leaked(const hetgraph::onnx::ir::Tensor& t) {
  return leaked(t.f.data(), t.f.size() * sizeof(float)) ||
         leaked(t.i.data(), t.i.size() * sizeof(std::int64_t));
}

bool leaked(const hetgraph::onnx::ir::Graph& g) {
  for (const auto& t : g.initializers) {
    if (leaked(t)) return true;
  }
  for (const auto& n : g.nodes) {
    for (const auto& [name, a] : n.attrs) {
      if (a.t && leaked(*a.t)) return true;
      if (a.g && leaked(*a.g)) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const fs::path dir = root() / "model";
  fs::remove_all(dir);
  fs::create_directories(dir);
  lay_out(in, dir);

  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(16);
  auto* g = m.mutable_graph();
  g->set_name("fuzz");
  const int tensors = in.ConsumeIntegralInRange(1, 3);
  for (int k = 0; k < tensors; ++k) {
    const std::string name = "t" + std::to_string(k);
    switch (in.ConsumeIntegralInRange(0, 2)) {
      case 0:  // an initializer
        external(in, g->add_initializer(), name);
        break;
      case 1: {  // a Constant's value
        auto* n = g->add_node();
        n->set_op_type("Constant");
        n->add_output(name);
        auto* a = n->add_attribute();
        a->set_name("value");
        a->set_type(::onnx::AttributeProto::TENSOR);
        external(in, a->mutable_t(), name);
        break;
      }
      default: {  // an If whose branches give a tensor kept in an initializer of theirs
        const std::string cond = name + "_cond";
        auto* c = g->add_initializer();
        c->set_name(cond);
        c->set_data_type(9);
        c->add_int32_data(in.ConsumeBool() ? 1 : 0);
        auto* n = g->add_node();
        n->set_op_type("If");
        n->add_input(cond);
        n->add_output(name);
        for (const char* branch : {"then_branch", "else_branch"}) {
          auto* a = n->add_attribute();
          a->set_name(branch);
          a->set_type(::onnx::AttributeProto::GRAPH);
          auto* b = a->mutable_g();
          b->set_name(branch);
          external(in, b->add_initializer(), std::string(branch) + "_w");
          auto* id = b->add_node();
          id->set_op_type("Identity");
          id->add_input(std::string(branch) + "_w");
          id->add_output(std::string(branch) + "_out");
          b->add_output()->set_name(std::string(branch) + "_out");
        }
        break;
      }
    }
    auto* out = g->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  }
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  try {
    ho::ImportOptions opt;
    opt.check = in.ConsumeBool();
    opt.max_nodes = 1000;
    opt.max_seconds = 2;
    opt.max_host_bytes = 1 << 24;
    opt.max_tensor_bytes = 1 << 24;
    const ho::Model model = ho::import((dir / "model.onnx").string(), opt);
    if (!model.source || leaked(model.source->model->graph)) __builtin_trap();
  } catch (const hetgraph::Error&) {
  }
  return 0;
}
