// SPDX-License-Identifier: Apache-2.0
// hetgraph-run: runs an ONNX model on a platform and reports what a user compares with
// onnxruntime_perf_test: per-run latency (median, min, max), setup time and planned memory.
//
//   build/tools/hetgraph-run model.onnx --platform cpu --engine auto --repeat 50
//   build/tools/hetgraph-run model.onnx --input x=input_0.pb --output-dir out/   # out/y.pb
//   build/tools/hetgraph-run model.onnx --json     # one JSON line, like hetgraph-bench
//   build/tools/hetgraph-run model.onnx --profile  # time by op kind, the slowest nodes
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "hetgraph/tool.hpp"
#include "options.hpp"

namespace {

namespace ho = hetgraph::onnx;
using hetgraph::cli::UsageError;

std::string file_name(const std::string& output) {  // an output name as a file name
  std::string s = output;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  }
  return s.empty() || s[0] == '.' ? "_" + s : s;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

// The process's peak resident memory so far (import, compile and the runs), in MiB.
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

// The --input files, by the model input each feeds.
using InputFiles = std::map<std::string, std::shared_ptr<ho::TensorData>>;

// Where the outputs and the trace go is checked before the model is even read: a folder
// that cannot be made must not be found only after the whole run.
void check_destinations(const hgrun::Options& o) {
  if (!o.output_dir.empty()) hetgraph::cli::prepare_output_dir("--output-dir", o.output_dir);
  if (!o.trace.empty()) {
    hetgraph::cli::check_output_file("--trace", o.trace);
    // The trace replaces its file: never the model's or an input's (two arguments swapped
    // destroyed the model being run).
    std::error_code ec;
    if (std::filesystem::equivalent(o.trace, o.model, ec))
      throw UsageError("--trace: '" + o.trace + "' is the model file");
    for (const auto& in : o.inputs) {
      if (std::filesystem::equivalent(o.trace, in.second, ec))
        throw UsageError("--trace: '" + o.trace + "' is an --input file");
    }
  }
}

InputFiles read_input_files(const hgrun::Options& o, const ho::Model& base) {
  InputFiles data;
  std::size_t next = 0;  // files without a name go to the inputs in order
  for (auto [name, file] : o.inputs) {
    if (name.empty()) {
      while (next < base.input_info.size() && data.count(base.input_info[next].name)) ++next;
      if (next == base.input_info.size()) {
        throw UsageError("--input: more files than the model has inputs");
      }
      name = base.input_info[next].name;
    }
    const bool known = std::any_of(base.input_info.begin(), base.input_info.end(),
                                   [&](const ho::ValueDesc& v) { return v.name == name; });
    if (!known) {
      std::string list;
      for (const auto& v : base.input_info) list += " " + v.name;
      throw UsageError("--input: the model has no input '" + name + "' (its inputs:" + list + ")");
    }
    if (data.count(name)) throw UsageError("--input: '" + name + "' given twice");
    data[name] = std::make_shared<ho::TensorData>(ho::read_tensor(file));
  }
  return data;
}

// The shapes the graph is built for: the input files' and --shape's.
void add_input_shapes(const hgrun::Options& o, const InputFiles& data, ho::ImportOptions& io) {
  for (const auto& [name, d] : data) io.input_shapes.push_back({name, d->shape});
  for (const auto& [name, dims] : o.shapes) {
    if (data.count(name)) throw UsageError("--shape: '" + name + "' also has an --input file");
    try {
      io.input_shapes.push_back({name, hetgraph::Shape(std::span<const std::int64_t>(dims))});
    } catch (const hetgraph::ShapeError& e) {  // more elements than any tensor may hold
      throw UsageError("--shape: " + name + ": " + e.what());
    }
  }
}

// The graph for those shapes. Inputs the importer needs the values of (shapes, axes fed as
// inputs) are given from their files, which then feed nothing.
ho::Model build_graph(const ho::Model& base, ho::ImportOptions& io, InputFiles& data) {
  try {
    for (;;) {
      try {
        return base.with_options(io);
      } catch (const ho::UnsupportedError& e) {
        auto it = data.find(e.input_needed());
        if (e.input_needed().empty() || it == data.end()) throw;
        io.input_values.push_back({it->first, it->second});
        std::erase_if(io.input_shapes, [&](const auto& s) { return s.first == it->first; });
        data.erase(it);
      }
    }
  } catch (const ho::UnsupportedError& e) {
    if (const char* flag = hgrun::budget_flag(e.what()))
      throw ho::UnsupportedError(std::string(e.what()) + "; here: " + flag + " raises it");
    throw;
  } catch (const hetgraph::ShapeError& e) {  // a tensor over max_tensor_bytes
    if (const char* flag = hgrun::budget_flag(e.what()))
      throw hetgraph::ShapeError(std::string(e.what()) + "; here: " + flag + " raises it");
    throw;
  }
}

// The weights move into the compiled graph's memory rather than being copied there: the
// model is not held twice at the end of compiling. Leaves m's graph with its nodes only.
hetgraph::CompiledGraph compile(ho::Model& m, const hgrun::Options& o,
                                const hetgraph::Platform& platform) {
  hetgraph::CompileOptions co;
  co.fuse = o.fuse;
  co.winograd_convs = o.winograd;
  co.experimental.own_winograd = o.own_winograd;
  co.experimental.layout_search = o.layout_search;
  co.experimental.layouts_through_pool_concat = o.layouts_through;
  co.experimental.grouped_conv_layouts = o.grouped_layouts;
  co.experimental.packed_weights = o.packed_weights;
  co.experimental.layer_norm_nodes = o.layer_norm;
  co.experimental.gelu_nodes = o.gelu;
  co.experimental.attention_nodes = o.attention;
  co.experimental.attention_transposes = o.attention_transposes;
  co.experimental.channel_affine = o.channel_affine;
  co.experimental.lstm_cells = o.lstm_cells;
  co.experimental.recurrent_sequences = o.recurrent_sequences;
  co.experimental.slice_views = o.slice_views;
  co.experimental.gru_cells = o.gru_cells;
  co.experimental.matmul_bias = o.matmul_bias;
  co.experimental.concat_in_place = o.concat_in_place;
  return std::move(m).compile(hetgraph::GraphCompiler(platform, co));
}

// The rest reads outputs by name: the graph (nodes only now) can go. Returns the outputs'
// shapes.
std::vector<hetgraph::Shape> release_graph(ho::Model& m, const hetgraph::CompiledGraph& cg) {
  std::vector<hetgraph::Shape> out_shapes;
  for (const hetgraph::Node& out : m.outputs) out_shapes.push_back(cg.shape(out));
  m.graph = hetgraph::Graph();
  m.inputs.clear();
  m.outputs.clear();
  m.variables.clear();
  malloc_trim(0);
  return out_shapes;
}

struct Feeds {
  std::vector<hetgraph::FeedItem> items;
  bool random = false;  // some input had no file
};

// Inputs go into the graph's mapped buffers once; every run feeds those (no copies).
Feeds fill_inputs(const ho::Model& m, hetgraph::CompiledGraph& cg, const InputFiles& data,
                  int seed) {
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  Feeds feeds;
  for (const ho::ValueDesc& in : m.input_info) {
    auto it = data.find(in.name);
    if (it != data.end() && it->second->dtype != in.dtype) {
      throw hetgraph::DataError("input '" + in.name + "': the file holds " + it->second->onnx_type +
                                ", the model takes " + in.onnx_type);
    }
    // An input the outputs do not need was pruned: nothing to feed.
    try {
      in.dtype == hetgraph::DType::f32 ? (void)cg.mapped_input(in.name)
                                       : (void)cg.mapped_input_i32(in.name);
    } catch (const hetgraph::FeedError&) {
      continue;
    }
    feeds.random = feeds.random || it == data.end();
    if (in.dtype == hetgraph::DType::f32) {
      auto buf = cg.mapped_input(in.name);
      if (it != data.end())
        std::copy(it->second->f32.begin(), it->second->f32.end(), buf.begin());
      else
        for (float& v : buf) v = uni(rng);
      feeds.items.push_back({in.name, buf});
    } else {
      auto buf = cg.mapped_input_i32(in.name);
      if (it != data.end())
        std::copy(it->second->i32.begin(), it->second->i32.end(), buf.begin());
      else
        std::fill(buf.begin(), buf.end(), 0);  // a valid index for any lookup
      feeds.items.push_back({in.name, buf});
    }
  }
  return feeds;
}

// Output names made file names can meet ("a/b" and "a_b" are both a_b): the later ones get
// their output's number, so no output's file is written over by another's.
std::vector<std::string> output_files(const ho::Model& m) {
  std::vector<std::string> files;
  for (std::size_t k = 0; k < m.output_info.size(); ++k) {
    std::string f = file_name(m.output_info[k].name);
    while (std::find(files.begin(), files.end(), f) != files.end()) f += "_" + std::to_string(k);
    files.push_back(f);
  }
  return files;
}

struct Outputs {
  double checksum = 0;               // of every output's values
  std::vector<std::string> written;  // the files, with --output-dir
  std::vector<std::string> first;    // each output's first values, as the report prints them
};

// Up to kShown values of an output, "%.6g" each, then how many there are in all.
constexpr std::size_t kShown = 6;
template <class T>
std::string first_values(const std::vector<T>& v) {
  std::string s;
  for (std::size_t i = 0; i < std::min(v.size(), kShown); ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.6g", i ? " " : "", static_cast<double>(v[i]));
    s += b;
  }
  if (v.size() > kShown) s += " ... (" + std::to_string(v.size()) + " values)";
  return s;
}

// A duration in the unit that keeps it readable: "4.21 us", "12.345 ms", "1.234 s".
std::string duration(double s) {
  char b[32];
  if (s < 1e-3)
    std::snprintf(b, sizeof b, "%.2f us", s * 1e6);
  else if (s < 1.0)
    std::snprintf(b, sizeof b, "%.3f ms", s * 1e3);
  else
    std::snprintf(b, sizeof b, "%.3f s", s);
  return b;
}

Outputs read_outputs(const ho::Model& m, hetgraph::CompiledGraph& cg,
                     const std::vector<hetgraph::Shape>& shapes, const std::string& dir) {
  Outputs r;
  const std::vector<std::string> files = output_files(m);
  for (std::size_t k = 0; k < m.output_info.size(); ++k) {
    const ho::ValueDesc& out = m.output_info[k];
    ho::TensorData td;
    td.name = out.name;
    td.onnx_type = out.onnx_type;
    td.dtype = out.dtype;
    td.shape = shapes[k];
    if (out.dtype == hetgraph::DType::f32) {
      td.f32 = cg.read(out.name);
      for (float v : td.f32) r.checksum += v;
      r.first.push_back(first_values(td.f32));
    } else {
      td.i32 = cg.read_i32(out.name);
      for (std::int32_t v : td.i32) r.checksum += v;
      r.first.push_back(first_values(td.i32));
    }
    if (!dir.empty()) {
      const std::string path = (std::filesystem::path(dir) / (files[k] + ".pb")).string();
      ho::write_tensor(path, td);
      r.written.push_back(path);
    }
  }
  return r;
}

// What the report says besides the model and the compiled graph's own reports.
struct Summary {
  double import_s = 0, setup_s = 0;     // from the start of reading the model
  double median = 0, min = 0, max = 0;  // seconds per run
  int tuning_runs = 0;
  bool random = false;
  std::vector<hetgraph::Shape> out_shapes;
  Outputs outputs;
  hetgraph::Profile profile;  // --profile
  std::string device;         // Platform::description
};

void print_json(const hgrun::Options& o, const ho::Model& m, const hetgraph::CompiledGraph& cg,
                const Summary& s) {
  const hetgraph::EngineReport er = cg.engine_report();
  const hetgraph::CompileReport& cr = cg.report();
  const double peak_mib = peak_rss_mib();
  std::printf(
      "{\"model\":\"%s\",\"platform\":\"%s\",\"engine\":\"%s\",\"executors\":\"%s\","
      "\"repeat\":%d,\"median_s\":%.9g,\"min_s\":%.9g,\"max_s\":%.9g,\"setup_s\":%.9g,"
      "\"import_s\":%.9g,\"compile_s\":%.9g,\"checksum\":%.17g,\"planned_bytes\":%zu,"
      "\"live_bytes\":%zu,\"naive_bytes\":%zu,\"peak_rss_mib\":%.1f,\"nodes\":%zu,\"heavy_"
      "nodes\":%zu,\"max_width\":%d,\"avg_width\":%d,"
      "\"tuning_runs\":%d,\"fused\":%s,\"inputs\":\"%s\",\"opset\":%lld,\"onnx_nodes\":%zu,"
      "\"producer\":\"%s\",\"code_path\":\"%s\",\"device\":\"%s\"",
      json_escape(o.model).c_str(), o.platform.c_str(), er.engine.c_str(),
      hetgraph::tool::lanes_label(er).c_str(), o.repeat, s.median, s.min, s.max, s.setup_s,
      s.import_s, s.setup_s - s.import_s, s.outputs.checksum, cr.planned_bytes, cr.live_bytes,
      cr.naive_bytes, peak_mib, er.nodes, er.heavy_nodes, er.max_width, er.avg_width, s.tuning_runs,
      o.fuse ? "true" : "false", s.random ? "random" : "files", static_cast<long long>(m.opset),
      m.ops.size(), json_escape(m.producer).c_str(), er.cpu ? er.cpu->code_path.c_str() : "",
      json_escape(s.device).c_str());
  std::printf(",\"conv_layout\":\"%s\",\"layout_seconds\":{", cr.conv_layout.c_str());
  for (std::size_t i = 0; i < cr.layout_seconds.size(); ++i)
    std::printf("%s\"%s\":%.9g", i ? "," : "", cr.layout_seconds[i].first.c_str(),
                cr.layout_seconds[i].second);
  std::printf("}");
  // The profile in the same line: a benchmark harness reads one JSON object per run.
  if (o.profile) std::printf(",\"profile\":%s", s.profile.json().c_str());
  std::printf("}\n");
}

void print_text(const hgrun::Options& o, const ho::Model& m, const hetgraph::CompiledGraph& cg,
                const Summary& s) {
  const hetgraph::EngineReport er = cg.engine_report();
  const hetgraph::CompileReport& cr = cg.report();
  const double peak_mib = peak_rss_mib();
  std::printf("model     %s (opset %lld%s%s, %zu ONNX nodes -> %zu graph nodes)\n", o.model.c_str(),
              static_cast<long long>(m.opset), m.producer.empty() ? "" : ", ", m.producer.c_str(),
              m.ops.size(), er.nodes);
  std::printf("device    %s\n", s.device.c_str());
  std::printf("platform  %s, %s engine, %s%s%s\n", o.platform.c_str(), er.engine.c_str(),
              hetgraph::tool::lanes_label(er).c_str(), er.cpu ? ", code path " : "",
              er.cpu ? er.cpu->code_path.c_str() : "");
  std::printf("setup     %s (import %s, compile %s)\n", duration(s.setup_s).c_str(),
              duration(s.import_s).c_str(), duration(s.setup_s - s.import_s).c_str());
  if (cr.conv_layout != "nchw" || !cr.layout_seconds.empty()) {
    // The layout search's trial times, where it ran (CompileOptions::experimental.layout_search).
    std::string searched;
    for (const auto& [layout, t] : cr.layout_seconds)
      searched += (searched.empty() ? " (searched: " : ", ") + layout + " " + duration(t);
    std::printf("layout    %s%s\n", cr.conv_layout.c_str(),
                searched.empty() ? "" : (searched + ")").c_str());
  }
  std::printf(
      "memory    %.3f MB planned (live at once: %.3f MB; one buffer per node: %.3f MB); process "
      "peak %.1f MiB\n",
      cr.planned_bytes / 1e6, cr.live_bytes / 1e6, cr.naive_bytes / 1e6, peak_mib);
  std::printf("latency   median %s  min %s  max %s  (%d runs after %d warm-up%s)\n",
              duration(s.median).c_str(), duration(s.min).c_str(), duration(s.max).c_str(),
              o.repeat, o.warmup, s.tuning_runs ? ", and the engine's tuning runs" : "");
  std::printf("inputs    %s\n", s.random ? "random where no file was given" : "from files");
  const std::vector<std::string>& written = s.outputs.written;
  for (std::size_t k = 0; k < m.output_info.size(); ++k) {
    std::printf("output    %s %s %s%s%s\n          %s\n", m.output_info[k].name.c_str(),
                s.out_shapes[k].str().c_str(), m.output_info[k].onnx_type.c_str(),
                written.empty() ? "" : " -> ", written.empty() ? "" : written[k].c_str(),
                s.outputs.first[k].c_str());
  }
  if (o.profile) std::fputs(s.profile.table().c_str(), stdout);
}

int run_one(const hgrun::Options& o) {
  const double t0 = hetgraph::now_s();
  ho::ImportOptions io = o.budgets;
  io.dynamic_dim = 1;
  ho::Model base = ho::read_model(o.model, io);
  InputFiles data = read_input_files(o, base);
  add_input_shapes(o, data, io);
  ho::Model m = build_graph(base, io, data);
  // The parsed model (its initializers, a copy of the weights the graph holds again, and
  // BatchNormalization's unfolded ones) is needed only to build the graph again: free it
  // before compiling, which makes the arena's copy.
  m.source.reset();
  base = ho::Model{};
  // glibc keeps freed heap pages mapped; the arena is a mapping of its own and would not reuse
  // them.
  malloc_trim(0);
  Summary s;
  s.import_s = hetgraph::now_s() - t0;
  const hetgraph::Platform platform = hetgraph::tool::make_platform(o);
  s.device = platform.description();
  hetgraph::CompiledGraph cg = compile(m, o, platform);
  s.setup_s = hetgraph::now_s() - t0;
  s.out_shapes = release_graph(m, cg);
  const Feeds feeds = fill_inputs(m, cg, data, o.seed);
  s.random = feeds.random;
  data.clear();  // the inputs are in the graph's buffers now

  hetgraph::tool::TimingOptions to;
  to.repeat = o.repeat;
  to.warmup = o.warmup;
  to.trace = o.trace;
  to.profile = o.profile;
  const hetgraph::tool::Timing t = hetgraph::tool::time_runs(cg, feeds.items, to);
  s.median = hetgraph::tool::median(t.samples);
  s.min = *std::min_element(t.samples.begin(), t.samples.end());
  s.max = *std::max_element(t.samples.begin(), t.samples.end());
  s.tuning_runs = t.tuning_runs;
  s.profile = t.profile;

  s.outputs = read_outputs(m, cg, s.out_shapes, o.output_dir);
  o.json ? print_json(o, m, cg, s) : print_text(o, m, cg, s);
  return 0;
}

// --shape repeated for an input: the k-th of each input's (or its last) is the k-th set, run
// one after the other in this process.
std::vector<hgrun::Options> shape_sets(const hgrun::Options& o) {
  std::map<std::string, std::vector<std::vector<std::int64_t>>> by_name;
  std::vector<std::string> order;
  for (const auto& [name, dims] : o.shapes) {
    if (by_name.count(name) == 0) order.push_back(name);
    by_name[name].push_back(dims);
  }
  std::size_t sets = 1;
  for (const auto& [name, list] : by_name) sets = std::max(sets, list.size());
  std::vector<hgrun::Options> out;
  for (std::size_t k = 0; k < sets; ++k) {
    hgrun::Options ok = o;
    ok.shapes.clear();
    for (const std::string& name : order) {
      const auto& list = by_name[name];
      ok.shapes.push_back({name, list[std::min(k, list.size() - 1)]});
    }
    out.push_back(std::move(ok));
  }
  return out;
}

int run(const hgrun::Options& o) {
  hetgraph::tool::check_engine_flags(o);
  check_destinations(o);
  const std::vector<hgrun::Options> sets = shape_sets(o);
  if (sets.size() > 1 && (!o.inputs.empty() || !o.output_dir.empty()))
    throw hetgraph::cli::UsageError(
        "--shape given several times for an input runs random inputs: not with --input or "
        "--output-dir");
  for (const hgrun::Options& k : sets) {
    if (sets.size() > 1 && !o.json) {
      std::string what;
      for (const auto& [name, dims] : k.shapes) {
        what += (what.empty() ? "" : ", ") + name + "=" +
                hetgraph::Shape(std::span<const std::int64_t>(dims)).str();
      }
      std::printf("shapes    %s\n", what.c_str());
    }
    run_one(k);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hgrun::Options o;
  auto p = hgrun::parser(o);
  return hetgraph::cli::run_main(p, argc, argv, [&] { return run(o); });
}
