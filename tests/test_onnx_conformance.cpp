// SPDX-License-Identifier: Apache-2.0
// The ONNX backend test suite (Debian's libonnx-testdata: ~930 node tests and the models
// converted from PyTorch) on every platform, against tests/onnx_conformance/expected.txt.
//
// Each test is a model.onnx with test_data_set_*/input_*.pb and output_*.pb. A test passes on a
// platform when every output matches the expected one as ONNX's own runner checks it: the
// same shape, integer types exact, floats within rtol 1e-3 and atol 1e-7 (NaN equals NaN).
// Outcomes: pass, wrong (a result differs), error (a hetgraph::Error other than
// UnsupportedError), unsupported (a clean UnsupportedError, or a platform without a kernel).
// Anything else thrown, or a crash, fails the run. So does any difference from expected.txt:
// a newly passing test must be promoted there, and a must-pass test that fails is a regression.
// And a node test of an op hetgraph claims (kClaimed) is never allowed to be wrong or an error.
//
//   build/tests/test_onnx_conformance                        # check
//   HETGRAPH_ONNX_CONFORMANCE_UPDATE=1 build/tests/test_onnx_conformance
//       # rewrite tests/onnx_conformance/expected.txt and results.md from this run
//   HETGRAPH_ONNX_CONFORMANCE_STRIDE=10   # every 10th test only (the sanitizer builds)
//   HETGRAPH_ONNX_CONFORMANCE_FILTER=conv # tests whose name contains this
#include <gtest/gtest.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "common/float16.hpp"
#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
namespace ho = hetgraph::onnx;

namespace {

// The ops issue 17 lists: every float32 node test of these must pass on every platform.
const std::set<std::string> kClaimed = {"Conv",
                                        "ConvTranspose",
                                        "BatchNormalization",
                                        "MaxPool",
                                        "AveragePool",
                                        "GlobalAveragePool",
                                        "GlobalMaxPool",
                                        "Gemm",
                                        "MatMul",
                                        "Add",
                                        "Sub",
                                        "Mul",
                                        "Div",
                                        "Pow",
                                        "Sqrt",
                                        "Exp",
                                        "Log",
                                        "Abs",
                                        "Neg",
                                        "Reciprocal",
                                        "Relu",
                                        "LeakyRelu",
                                        "Sigmoid",
                                        "Tanh",
                                        "Clip",
                                        "Erf",
                                        "Softmax",
                                        "LogSoftmax",
                                        "Concat",
                                        "Split",
                                        "Slice",
                                        "Gather",
                                        "Reshape",
                                        "Flatten",
                                        "Squeeze",
                                        "Unsqueeze",
                                        "Transpose",
                                        "ReduceMean",
                                        "ReduceSum",
                                        "ReduceMax",
                                        "ReduceMin",
                                        "Identity",
                                        "Dropout",
                                        "Constant",
                                        "Shape",
                                        "Cast",
                                        "Expand",
                                        "Where",
                                        "Pad",
                                        "LRN",
                                        "LSTM",
                                        "GRU",
                                        "LayerNormalization"};

const char* const kCategories[] = {"node", "pytorch-converted", "pytorch-operator", "simple",
                                   "real"};

std::string data_root() {
  if (const char* e = std::getenv("HETGRAPH_ONNX_TESTDATA")) return e;
  return "/usr/share/libonnx-testdata/data";
}

struct Case {
  std::string category, name, dir;
  std::string id() const { return category + "/" + name; }
};

struct Outcome {
  std::string status = "pass";  // pass | wrong | error | unsupported | absent
  std::string reason;
};

struct Result {
  Case c;
  std::string op;                     // node tests: the op under test
  bool float_only = true;             // every input and output is float32 (or int indices)
  std::map<std::string, Outcome> on;  // platform -> outcome
  // Passing on the CPU: the imported model exported again (onnx::export_bytes), imported back
  // and run; "" when its outputs are the expected ones again, else what went wrong.
  std::optional<std::string> round_trip;
  double seconds = 0;
};

std::vector<Case> discover() {
  std::vector<Case> out;
  const char* filter = std::getenv("HETGRAPH_ONNX_CONFORMANCE_FILTER");
  for (const char* cat : kCategories) {
    const fs::path dir = fs::path(data_root()) / cat;
    if (!fs::is_directory(dir)) continue;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_directory()) names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      if (filter && n.find(filter) == std::string::npos) continue;
      out.push_back({cat, n, (dir / n).string()});
    }
  }
  return out;
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) == 0 && f.size() > prefix.size() + 3 &&
        f.substr(f.size() - 3) == ".pb") {
      v.push_back({std::stoi(f.substr(prefix.size(), f.size() - prefix.size() - 3)), e.path()});
    }
  }
  std::sort(v.begin(), v.end());
  std::vector<fs::path> out;
  for (auto& [k, p] : v) out.push_back(p);
  return out;
}

std::vector<fs::path> data_sets(const fs::path& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      v.push_back(e.path());
  }
  std::sort(v.begin(), v.end());
  return v;
}

std::string short_reason(const std::string& what) {
  // Drop the model path the importer puts first.
  std::string s = what;
  const auto p = s.find("model.onnx: ");
  if (p != std::string::npos) s = s.substr(p + 12);
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  for (char& ch : s) {
    if (ch == '\n') ch = ' ';
  }
  return s;
}

/// ONNX 1.12's test data holds bfloat16 tensors as uint16 (numpy has no bfloat16): their bits.
void as_bfloat16(ho::TensorData& t) {
  if (t.onnx_type != "uint16") return;
  t.onnx_type = "bfloat16";
  t.dtype = hetgraph::DType::f32;
  for (std::int32_t bits : t.i32)
    t.f32.push_back(hetgraph::detail::bfloat16_value(static_cast<std::uint16_t>(bits)));
  t.i32.clear();
}

/// Compares one output as onnx's runner does (np.testing.assert_allclose, rtol 1e-3, atol 1e-7).
std::string compare(const ho::TensorData& want, const hetgraph::Shape& got_shape,
                    const std::vector<float>& got_f, const std::vector<std::int32_t>& got_i,
                    hetgraph::DType got_type, const std::string& name) {
  if (want.shape != got_shape) {
    return "output '" + name + "' has shape " + got_shape.str() + ", expected " + want.shape.str();
  }
  if (want.dtype != got_type) {
    return "output '" + name + "' is " + std::string(hetgraph::dtype_name(got_type)) +
           ", expected " + want.onnx_type;
  }
  constexpr double kRtol = 1e-3, kAtol = 1e-7;
  const std::size_t n = static_cast<std::size_t>(want.shape.numel());
  std::size_t bad = 0, first = 0;
  for (std::size_t k = 0; k < n; ++k) {
    bool ok;
    if (got_type == hetgraph::DType::i32) {
      ok = got_i[k] == want.i32[k];
    } else {
      const double w = want.f32[k], g = got_f[k];
      ok = (std::isnan(w) && std::isnan(g)) || (w == g) ||
           (std::isfinite(w) && std::isfinite(g) &&
            std::fabs(g - w) <= kAtol + kRtol * std::fabs(w));
    }
    if (!ok && bad++ == 0) first = k;
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os << "output '" << name << "': " << bad << " of " << n << " elements differ; first at " << first
     << ": got ";
  if (got_type == hetgraph::DType::i32)
    os << got_i[first] << ", expected " << want.i32[first];
  else
    os << got_f[first] << ", expected " << want.f32[first];
  return os.str();
}

struct Platforms {
  std::vector<std::pair<std::string, hetgraph::GraphCompiler>> list;
  Platforms() {
    list.push_back({"cpu", hetgraph::GraphCompiler(hetgraph::Platform::cpu())});
    if (hetgraph::Platform::opencl_available() || testing_util::opencl_required()) {
      list.push_back({"opencl", hetgraph::GraphCompiler(hetgraph::Platform::opencl())});
    }
  }
};

Outcome classify(const std::exception& e, bool compiling) {
  if (dynamic_cast<const ho::UnsupportedError*>(&e)) return {"unsupported", short_reason(e.what())};
  const std::string what = e.what();
  if (compiling && dynamic_cast<const hetgraph::PlatformError*>(&e) &&
      what.find("cannot run on the") != std::string::npos) {
    return {"unsupported", short_reason(what)};
  }
  return {"error", std::string(typeid(e).name()).find("Error") != std::string::npos
                       ? short_reason(what)
                       : short_reason(what)};
}

// Dropout in training mode with a ratio draws random masks: its outputs cannot equal the
// file's (numpy's generator made them). They are checked as what they are: each element 0 or
// x / (1 - ratio), the mask (when asked) true exactly where an element was kept, and the kept
// share within 5 standard deviations of 1 - ratio. "" when they are.
bool random_dropout(const std::string& op, const std::vector<ho::TensorData>& ins) {
  if (op != "Dropout" || ins.size() < 3 || ins[2].i32.empty() || ins[2].i32[0] == 0) return false;
  return ins[1].f32.empty() || ins[1].f32[0] != 0.0f;
}
std::string check_random_dropout(const std::vector<ho::TensorData>& ins,
                                 const std::vector<float>& y,
                                 const std::vector<std::int32_t>* mask) {
  const std::vector<float>& x = ins[0].f32;
  const double ratio = ins[1].f32.empty() ? 0.5 : ins[1].f32[0];
  if (y.size() != x.size() || (mask && mask->size() != x.size()))
    return "outputs of " + std::to_string(y.size()) + " elements for an input of " +
           std::to_string(x.size());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] / (1.0 - ratio);
    const bool k = y[i] != 0.0f;
    if (k && std::fabs(y[i] - want) > 1e-5 * std::fabs(want))
      return "element " + std::to_string(i) + " is " + std::to_string(y[i]) + ", neither 0 nor " +
             std::to_string(want);
    if (mask && x[i] != 0.0f && ((*mask)[i] != 0) != k)
      return "the mask at " + std::to_string(i) + " disagrees with the output";
    kept += k;
  }
  const double n = static_cast<double>(x.size()), mean = n * (1.0 - ratio);
  if (std::fabs(static_cast<double>(kept) - mean) > 5.0 * std::sqrt(n * ratio * (1.0 - ratio)) + 1)
    return std::to_string(kept) + " of " + std::to_string(x.size()) + " kept, for ratio " +
           std::to_string(ratio);
  return "";
}

// Test data hetgraph cannot hold, met while reading a data set for the import's sequence shapes.
struct SequenceDataError : hetgraph::DataError {
  using hetgraph::DataError::DataError;
};

// Which of a model's inputs (initializers left out) and outputs are sequences of tensors:
// their data files are SequenceProtos, read as one tensor per element ("<name>[k]", as the
// importer names them).
struct SequenceIo {
  std::vector<bool> inputs, outputs;
  std::vector<std::string> input_names;
  bool any() const {
    return std::find(inputs.begin(), inputs.end(), true) != inputs.end() ||
           std::find(outputs.begin(), outputs.end(), true) != outputs.end();
  }
};
SequenceIo sequence_io(const fs::path& model_path) {
  ::onnx::ModelProto m;
  std::ifstream f(model_path, std::ios::binary);
  SequenceIo io;
  if (!m.ParseFromIstream(&f)) return io;
  std::set<std::string> initializers;
  for (const auto& t : m.graph().initializer()) initializers.insert(t.name());
  for (const auto& v : m.graph().input()) {
    if (initializers.count(v.name())) continue;
    io.inputs.push_back(v.type().has_sequence_type());
    io.input_names.push_back(v.name());
  }
  for (const auto& v : m.graph().output()) io.outputs.push_back(v.type().has_sequence_type());
  return io;
}
// The data files of one kind ("input_", "output_"), sequences flattened into their tensors.
std::vector<ho::TensorData> read_data(const fs::path& set, const std::string& prefix,
                                      const std::vector<bool>& is_sequence,
                                      std::vector<std::size_t>* lengths = nullptr) {
  std::vector<ho::TensorData> out;
  const auto files = numbered(set, prefix);
  for (std::size_t k = 0; k < files.size(); ++k) {
    if (k >= is_sequence.size() || !is_sequence[k]) {
      out.push_back(ho::read_tensor(files[k].string()));
      if (lengths) lengths->push_back(0);
      continue;
    }
    ::onnx::SequenceProto seq;
    std::ifstream f(files[k], std::ios::binary);
    if (!seq.ParseFromIstream(&f) || seq.elem_type() != ::onnx::SequenceProto::TENSOR) {
      throw hetgraph::DataError(files[k].string() + ": not a sequence of tensors");
    }
    for (const auto& t : seq.tensor_values()) {
      const std::string bytes = t.SerializeAsString();
      out.push_back(ho::parse_tensor(std::as_bytes(std::span(bytes.data(), bytes.size())),
                                     files[k].string()));
    }
    if (lengths) lengths->push_back(static_cast<std::size_t>(seq.tensor_values_size()));
  }
  return out;
}

void run_case(const Case& c, Platforms& platforms, Result& r) {
  const auto t0 = std::chrono::steady_clock::now();
  r.c = c;
  auto all = [&](Outcome o) {
    for (auto& [name, comp] : platforms.list) r.on[name] = o;
  };
  const fs::path model_path = fs::path(c.dir) / "model.onnx";
  if (!fs::exists(model_path)) {
    all({"absent", "the model is not shipped (data.json names a download)"});
    return;
  }
  ho::Model base;
  const SequenceIo seq = sequence_io(model_path);
  try {
    ho::ImportOptions base_options{.float64_as_float32 = true};
    if (seq.any()) {  // the importer needs the sequences' shapes: the first data set's
      const auto sets = data_sets(c.dir);
      std::vector<std::size_t> lengths;
      std::vector<ho::TensorData> ins;
      try {
        if (!sets.empty()) ins = read_data(sets[0], "input_", seq.inputs, &lengths);
      } catch (const hetgraph::DataError& e) {
        throw SequenceDataError(e.what());
      }
      std::size_t at = 0;
      for (std::size_t k = 0; k < lengths.size(); ++k) {
        if (!seq.inputs[k]) {
          ++at;
          continue;
        }
        std::vector<hetgraph::Shape> shapes;
        for (std::size_t e = 0; e < lengths[k]; ++e) shapes.push_back(ins[at++].shape);
        base_options.sequence_shapes.push_back({seq.input_names[k], shapes});
      }
    }
    base = ho::read_model(model_path.string(), base_options);
  } catch (const SequenceDataError& e) {
    all({"unsupported", short_reason(e.what())});  // data hetgraph cannot hold (an optional)
    return;
  } catch (const hetgraph::Error& e) {
    all(classify(e, false));
    return;
  }
  r.op = "?";
  for (const auto& op : base.ops) {
    if (op != "Constant") {
      r.op = op;
      break;
    }
  }
  if (r.op == "?" && !base.ops.empty()) r.op = base.ops[0];
  for (auto& [name, comp] : platforms.list) r.on[name] = {"pass", ""};
  for (const fs::path& set : data_sets(c.dir)) {
    std::vector<ho::TensorData> ins, outs;
    hetgraph::InputShapes shapes;
    ho::Model m;
    try {
      std::vector<std::size_t> lengths;
      ins = read_data(set, "input_", seq.inputs, &lengths);
      outs = read_data(set, "output_", seq.outputs);
      if (ins.size() != base.input_info.size()) {
        all({"error", std::to_string(ins.size()) + " input files for " +
                          std::to_string(base.input_info.size()) + " model inputs"});
        return;
      }
      std::vector<std::pair<std::string, std::vector<hetgraph::Shape>>> sequence_shapes;
      for (std::size_t k = 0, at = 0; k < lengths.size(); ++k) {
        const bool is_seq = k < seq.inputs.size() && seq.inputs[k];
        if (is_seq) sequence_shapes.push_back({seq.input_names[k], {}});
        for (std::size_t e = 0; e < (is_seq ? lengths[k] : 1); ++e, ++at) {
          if (base.input_info[at].onnx_type == "bfloat16") as_bfloat16(ins[at]);
          if (is_seq)
            sequence_shapes.back().second.push_back(ins[at].shape);
          else
            shapes.push_back({base.input_info[at].name, ins[at].shape});
          r.float_only = r.float_only &&
                         (ins[at].onnx_type == "float" || ins[at].dtype == hetgraph::DType::i32);
        }
      }
      for (const auto& o : outs) r.float_only = r.float_only && o.onnx_type == "float";
      // Inputs that are parameters (axes, shapes, pads fed as inputs) are given at import when
      // the importer asks for them.
      ho::ImportOptions opts;
      opts.input_shapes = shapes;
      opts.sequence_shapes = sequence_shapes;
      opts.float64_as_float32 = true;
      for (std::size_t tries = 0;; ++tries) {
        try {
          m = base.with_options(opts);
          break;
        } catch (const ho::UnsupportedError& e) {
          if (e.input_needed().empty() || tries > ins.size()) throw;
          for (std::size_t k = 0; k < ins.size(); ++k) {
            if (base.input_info[k].name != e.input_needed()) continue;
            opts.input_values.push_back(
                {e.input_needed(), std::make_shared<ho::TensorData>(ins[k])});
            opts.input_shapes.erase(
                std::find_if(opts.input_shapes.begin(), opts.input_shapes.end(),
                             [&](const auto& p) { return p.first == e.input_needed(); }));
          }
        }
      }
    } catch (const hetgraph::DataError& e) {
      // Test data hetgraph cannot hold (double, strings, rank 9, sequences, ...).
      r.float_only = false;
      all({"unsupported", short_reason(e.what())});
      return;
    } catch (const hetgraph::Error& e) {
      all(classify(e, false));
      return;
    }
    if (outs.size() != m.outputs.size()) {
      all({"error", std::to_string(outs.size()) + " expected outputs for " +
                        std::to_string(m.outputs.size()) + " model outputs"});
      return;
    }
    for (std::size_t k = 0; k < outs.size(); ++k)
      if (m.output_info[k].onnx_type == "bfloat16") as_bfloat16(outs[k]);
    // Runs `model` compiled by `comp` on the data set: a pass when its outputs are the expected
    // ones, else what went wrong.
    auto check = [&](const ho::Model& model, const hetgraph::GraphCompiler& comp) -> Outcome {
      bool compiling = true;
      try {
        hetgraph::CompiledGraph cg = model.compile(comp);
        compiling = false;
        std::vector<hetgraph::FeedItem> feeds;
        for (const ho::ValueDesc& in : model.input_info) {
          std::size_t k = 0;
          while (k < ins.size() && base.input_info[k].name != in.name) ++k;
          if (k == ins.size()) return {"error", "input " + in.name + " is not the model's"};
          if (ins[k].dtype != in.dtype) {
            return {"error", "input " + std::to_string(k) + " is " + ins[k].onnx_type +
                                 ", the model takes " + in.onnx_type};
          }
          if (ins[k].dtype == hetgraph::DType::f32)
            feeds.push_back({in.name, hetgraph::Feed(ins[k].f32)});
          else
            feeds.push_back({in.name, hetgraph::Feed(ins[k].i32)});
        }
        cg.run(feeds);
        if (random_dropout(r.op, ins)) {
          std::vector<std::int32_t> mask;
          if (model.outputs.size() > 1) mask = cg.read_i32(model.outputs[1]);
          const std::string why = check_random_dropout(ins, cg.read(model.outputs[0]),
                                                       model.outputs.size() > 1 ? &mask : nullptr);
          return why.empty() ? Outcome{} : Outcome{"wrong", why};
        }
        for (std::size_t k = 0; k < outs.size(); ++k) {
          const hetgraph::Node n = model.outputs[k];
          const hetgraph::DType t = model.output_info[k].dtype;
          std::vector<float> f;
          std::vector<std::int32_t> i;
          if (t == hetgraph::DType::f32)
            f = cg.read(n);
          else
            i = cg.read_i32(n);
          const std::string diff =
              compare(outs[k], cg.shape(n), f, i, t, model.output_info[k].name);
          if (!diff.empty()) return {"wrong", diff};
        }
      } catch (const hetgraph::Error& e) {
        return classify(e, compiling);
      }
      return {};
    };
    for (auto& [pname, comp] : platforms.list) {
      Outcome& o = r.on[pname];
      if (o.status == "pass") o = check(m, comp);
    }
    // What hetgraph reads, it writes back: the exported model must give the same outputs.
    // (Not a training-mode Dropout: training ops are not exported.)
    if (r.on.at(platforms.list.front().first).status == "pass" && !r.round_trip &&
        !random_dropout(r.op, ins)) {
      try {
        const std::string bytes = ho::export_bytes(m.graph, m.outputs, m.input_shapes);
        const ho::Model back =
            ho::import_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())));
        const Outcome o = check(back, platforms.list.front().second);
        r.round_trip = o.status == "pass" ? "" : o.status + ": " + o.reason;
      } catch (const hetgraph::Error& e) {
        r.round_trip = std::string("export or import: ") + e.what();
      }
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- expectations and the report -----------------------------------------------------------

fs::path source_dir() {
  return fs::path(HETGRAPH_SOURCE_DIR) / "tests" / "onnx_conformance";
}

std::map<std::string, std::vector<std::string>> read_expected() {
  std::map<std::string, std::vector<std::string>> out;
  std::ifstream f(source_dir() / "expected.txt");
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string id, s;
    is >> id;
    std::vector<std::string> st;
    while (is >> s) st.push_back(s);
    out[id] = st;
  }
  return out;
}

/// Unsupported by design on every platform: ranks above 8.
bool out_of_scope(const Result& r) {
  for (const auto& [p, o] : r.on) {
    const std::string& w = o.reason;
    if (o.status != "unsupported") return false;
    if (w.find("has rank") == std::string::npos && w.find("of rank") == std::string::npos) {
      return false;
    }
  }
  return true;
}

/// A float32 node test of an op hetgraph claims (the function-body variants aside).
bool claimed_test(const Result& r) {
  return r.c.category == "node" && kClaimed.count(r.op) && r.float_only &&
         r.c.name.find("_expanded") == std::string::npos;
}
bool claimed_node_test(const Result& r) {
  return claimed_test(r) && !out_of_scope(r);
}

void write_files(const std::vector<Result>& results, const Platforms& platforms, double seconds) {
  {
    std::ofstream f(source_dir() / "expected.txt");
    f << "# The ONNX backend test suite (Debian libonnx-testdata 1.12) on hetgraph: the outcome\n"
         "# each test must have on each platform (pass | wrong | error | unsupported | absent).\n"
         "# Written by HETGRAPH_ONNX_CONFORMANCE_UPDATE=1 build/tests/test_onnx_conformance;\n"
         "# test_onnx_conformance fails when a run differs. Details: results.md.\n"
         "# test";
    for (const auto& [p, c] : platforms.list) f << " " << p;
    f << "\n";
    for (const Result& r : results) {
      f << r.c.id();
      for (const auto& [p, c] : platforms.list) f << " " << r.on.at(p).status;
      f << "\n";
    }
  }
  std::ofstream f(source_dir() / "results.md");
  f << "# ONNX backend test suite: results\n\n"
       "The ONNX backend tests shipped by Debian's `libonnx-testdata` (ONNX 1.12) run through\n"
       "`hetgraph::onnx::import` on each platform by `build/tests/test_onnx_conformance` (Release\n"
       "build, one process: "
    << std::fixed;
  f.precision(1);
  f << seconds
    << " s wall time on the 2-core development VM). Outputs are compared as ONNX's\n"
       "runner does: same shape and type, rtol 1e-3, atol 1e-7. *unsupported*: a clean\n"
       "`hetgraph::onnx::UnsupportedError` (or a platform without the kernel); *wrong*: a result\n"
       "outside the tolerance; *error*: another `hetgraph::Error`; *absent*: the model is not\n"
       "shipped (the `real` models are downloads). Models with float64 (double) tensors are\n"
       "imported with `ImportOptions::float64_as_float32` (held and computed as float32, as\n"
       "float16 is); without it they are an `UnsupportedError` naming the tensor. Dropout in\n"
       "training mode with a ratio draws random masks, which cannot equal the files' (numpy's\n"
       "generator made them): its outputs are checked as such (each element 0 or\n"
       "x / (1 - ratio), the mask true where kept, the kept share within 5 standard\n"
       "deviations).\n\n";
  int round_trips = 0, round_trips_ok = 0;
  for (const Result& r : results) {
    round_trips += r.round_trip.has_value();
    round_trips_ok += r.round_trip.has_value() && r.round_trip->empty();
  }
  f << "Every model that passes on the CPU is also exported again (`onnx::export_bytes`),\n"
       "imported back and run on the CPU against the same expected outputs: "
    << round_trips_ok << " of " << round_trips
    << " give them.\n\n## Per category\n\n| category | tests |";
  for (const auto& [p, c] : platforms.list)
    f << " " << p << " pass | " << p << " wrong/error | " << p << " unsupported |";
  f << "\n|---|---|";
  for (std::size_t i = 0; i < platforms.list.size(); ++i) f << "---|---|---|";
  f << "\n";
  auto row = [&](const std::string& label, const std::vector<const Result*>& rs) {
    f << "| " << label << " | " << rs.size() << " |";
    for (const auto& [p, c] : platforms.list) {
      int pass = 0, bad = 0, unsup = 0;
      for (const Result* r : rs) {
        const std::string& s = r->on.at(p).status;
        pass += s == "pass";
        bad += s == "wrong" || s == "error";
        unsup += s == "unsupported" || s == "absent";
      }
      f << " " << pass << " | " << bad << " | " << unsup << " |";
    }
    f << "\n";
  };
  std::vector<const Result*> everything;
  for (const char* cat : kCategories) {
    std::vector<const Result*> rs;
    for (const Result& r : results) {
      if (r.c.category == cat) rs.push_back(&r), everything.push_back(&r);
    }
    if (!rs.empty()) row(cat, rs);
  }
  row("**all**", everything);

  std::map<std::string, std::vector<const Result*>> by_op;
  for (const Result& r : results) {
    if (r.c.category == "node")
      by_op[r.op + (r.c.name.find("_expanded") != std::string::npos ? " (expanded)" : "")]
          .push_back(&r);
  }
  f << "\n## Claimed ops: float32 node tests\n\nThe node tests of the ops hetgraph claims, with "
       "float32 data (the goal: all pass on every platform). *out of scope*: tests that need a "
       "rank "
       "above 8, which hetgraph does not have.\n\n| op | tests |";
  for (const auto& [p, c] : platforms.list) f << " " << p << " pass |";
  f << " not passing | out of scope |\n|---|---|";
  for (std::size_t i = 0; i < platforms.list.size(); ++i) f << "---|";
  f << "---|---|\n";
  for (const std::string& op : kClaimed) {
    std::vector<const Result*> rs;
    std::string excluded;
    for (const Result& r : results) {
      if (claimed_node_test(r) && r.op == op) rs.push_back(&r);
      if (claimed_test(r) && r.op == op && out_of_scope(r)) excluded += r.c.name + " ";
    }
    f << "| " << op << " | " << rs.size() << " |";
    std::set<std::string> notpass;
    for (const auto& [p, c] : platforms.list) {
      int pass = 0;
      for (const Result* r : rs) {
        if (r->on.at(p).status == "pass")
          ++pass;
        else
          notpass.insert(r->c.name);
      }
      f << " " << pass << " |";
    }
    f << " ";
    for (const auto& n : notpass) f << n << " ";
    f << "| " << excluded << "|\n";
  }
  f << "\n## Per op (node tests; *expanded*: the op's ONNX function body)\n\n| op | tests |";
  for (const auto& [p, c] : platforms.list)
    f << " " << p << " pass | " << p << " wrong/error | " << p << " unsupported |";
  f << "\n|---|---|";
  for (std::size_t i = 0; i < platforms.list.size(); ++i) f << "---|---|---|";
  f << "\n";
  for (const auto& [op, rs] : by_op) row(op, rs);

  f << "\n## Not passing, with the reason\n\n";
  for (const Result& r : results) {
    std::string line;
    for (const auto& [p, c] : platforms.list) {
      const Outcome& o = r.on.at(p);
      if (o.status == "pass" || o.status == "absent") continue;
      line += " " + p + ": " + o.status + " — " + o.reason + ";";
    }
    if (!line.empty()) f << "- `" << r.c.id() << "`" << line << "\n";
  }
}

TEST(OnnxConformance, BackendTestSuite) {
  const std::vector<Case> cases = discover();
  if (cases.empty())
    GTEST_FAIL() << "no ONNX backend tests under " << data_root() << " (install libonnx-testdata)";
  std::size_t stride = 1;
  if (const char* s = std::getenv("HETGRAPH_ONNX_CONFORMANCE_STRIDE"))
    stride = std::max(1, std::atoi(s));
  const bool update = std::getenv("HETGRAPH_ONNX_CONFORMANCE_UPDATE") != nullptr;
  Platforms platforms;
  std::vector<Result> results;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < cases.size(); i += stride) {
    Result r;
    try {
      run_case(cases[i], platforms, r);
    } catch (const std::exception& e) {
      ADD_FAILURE() << cases[i].id() << ": " << typeid(e).name() << " escaped: " << e.what();
      continue;
    }
    results.push_back(std::move(r));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, int> counts;
  for (const Result& r : results) {
    for (const auto& [p, o] : r.on) ++counts[p + " " + o.status];
  }
  std::printf("ONNX backend tests: %zu in %.1f s;", results.size(), seconds);
  for (const auto& [k, v] : counts) std::printf(" %s %d;", k.c_str(), v);
  std::printf("\n");
  std::vector<const Result*> slow;
  for (const Result& r : results) slow.push_back(&r);
  std::sort(slow.begin(), slow.end(), [](auto* a, auto* b) { return a->seconds > b->seconds; });
  std::printf("slowest:");
  for (std::size_t i = 0; i < std::min<std::size_t>(5, slow.size()); ++i)
    std::printf(" %s %.2fs", slow[i]->c.id().c_str(), slow[i]->seconds);
  std::printf("\n");

  if (update) {
    ASSERT_EQ(stride, 1u) << "update the expectations from a full run";
    write_files(results, platforms, seconds);
  }
  const auto expected = read_expected();
  int diffs = 0;
  for (const Result& r : results) {
    for (std::size_t k = 0; k < platforms.list.size(); ++k) {
      const std::string& p = platforms.list[k].first;
      const Outcome& o = r.on.at(p);
      if (claimed_node_test(r) && (o.status == "wrong" || o.status == "error")) {
        ADD_FAILURE() << r.c.id() << " on " << p << " (" << r.op
                      << ", an op hetgraph claims): " << o.status << ": " << o.reason;
      }
      auto it = expected.find(r.c.id());
      const std::string want =
          it == expected.end() || it->second.size() <= k ? "(none)" : it->second[k];
      if (want != o.status && ++diffs <= 50) {
        ADD_FAILURE() << r.c.id() << " on " << p << ": expected " << want << ", got " << o.status
                      << (o.reason.empty() ? "" : ": " + o.reason)
                      << (o.status == "pass" ? " (newly passing: promote it in expected.txt)" : "");
      }
    }
  }
  int round_trips = 0;
  for (const Result& r : results) {
    if (!r.round_trip) continue;
    ++round_trips;
    EXPECT_EQ(*r.round_trip, "") << r.c.id() << ", exported and imported back";
  }
  std::printf("exported and imported back: %d models\n", round_trips);
  EXPECT_EQ(diffs, 0) << "outcomes differ from tests/onnx_conformance/expected.txt; if intended, "
                         "rerun with HETGRAPH_ONNX_CONFORMANCE_UPDATE=1 and commit both files";
}

}  // namespace
