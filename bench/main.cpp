// hetgraph-bench: times workloads with PAPI's real-time clock, of completed work, and prints
// one JSON object per workload (--json) or a readable line.
//
//   build/bench/hetgraph-bench --workload par-matmul-8192 --engine critical-path --executors 2x1
//   --json build/bench/hetgraph-bench --workload lstm-small --engine auto --repeat 10 --trace
//   lstm.json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/tool_run.hpp"
#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"
#include "options.hpp"
#include "workloads.hpp"

namespace {

using bench::Options;

// --platform hetero: the members --devices names, in order; --engine is the CPU member's.
hetgraph::Platform make_platform(const Options& o) {
  if (o.platform != "hetero") return hetgraph::tool::make_platform(o);
  std::vector<hetgraph::Platform> members;
  for (const std::string& d : o.devices) {
    if (d == "cpu") {
      Options cpu = o;
      cpu.platform = "cpu";
      members.push_back(hetgraph::tool::make_platform(cpu));
    } else if (d == "opencl") {
      members.push_back(hetgraph::Platform::opencl());
    } else {
      int p = 0, k = 0;
      if (std::sscanf(d.c_str(), "opencl:%d:%d", &p, &k) != 2)
        throw hetgraph::cli::UsageError("--devices: '" + d + "' is not opencl:P:D");
      members.push_back(hetgraph::Platform::opencl({.platform_index = p, .device_index = k}));
    }
  }
  hetgraph::HeteroOptions h;
  h.placement = o.placement == "heft"    ? hetgraph::HeteroOptions::Placement::heft
                : o.placement == "first" ? hetgraph::HeteroOptions::Placement::first
                                         : hetgraph::HeteroOptions::Placement::automatic;
  return hetgraph::Platform::heterogeneous(std::move(members), h);
}

struct Result {
  std::vector<double> samples;  // seconds per run
  std::vector<double> copies;   // time_copies: seconds writing the inputs before each run
  double setup_s = 0, checksum = 0;
  std::size_t planned = 0, naive = 0;
  int tuning_runs = 0;
  hetgraph::EngineReport engine;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

Result time_case(bench::Case& c, const Options& o) {
  Result r;
  if (c.raw) {
    for (int i = 0; i < o.warmup; ++i) c.raw();
    for (int s = 0; s < o.repeat; ++s) {
      const double t0 = hetgraph::now_s();
      for (int i = 0; i < c.runs_per_sample; ++i) c.raw();
      r.samples.push_back((hetgraph::now_s() - t0) / c.runs_per_sample);
    }
    r.checksum = c.raw_checksum();
    return r;
  }
  const double t0 = hetgraph::now_s();
  hetgraph::CompileOptions co;
  co.fuse = o.fuse;
  co.parallel_ops = o.parallel_ops;
  hetgraph::CompiledGraph cg = hetgraph::GraphCompiler(make_platform(o), co)
                                   .compile(c.graph, c.shapes, c.fetches);
  r.setup_s = hetgraph::now_s() - t0;
  r.planned = cg.planned_bytes();
  r.naive = cg.naive_bytes();
  // Mapped (default): inputs go into the graph's mapped buffers and every run feeds those
  // (nothing to copy). --no-mapped: runs feed the case's own vectors, which run() copies in.
  std::vector<hetgraph::FeedItem> feeds, mapped_feeds;
  for (const auto& [name, data] : c.inputs) {
    auto buf = cg.mapped_input(name);
    std::copy(data.begin(), data.end(), buf.begin());
    mapped_feeds.push_back({name, buf});
    feeds.push_back(o.mapped ? mapped_feeds.back() : hetgraph::FeedItem{name, data});
  }
  for (const auto& [name, data] : c.int_inputs) {
    auto buf = cg.mapped_input_i32(name);
    std::copy(data.begin(), data.end(), buf.begin());
    mapped_feeds.push_back({name, buf});
    feeds.push_back(o.mapped ? mapped_feeds.back() : hetgraph::FeedItem{name, data});
  }
  // time_copies: the inputs are written before every run and that is timed on its own, as
  // the baseline report splits copy from compute: mapped, the caller's copy into the mapped
  // buffers; not mapped, CompiledGraph::write (the copy run() does for an unmapped feed).
  // The run itself then feeds the buffers already in place.
  auto write_inputs = [&] {
    for (const auto& [name, data] : c.inputs) {
      if (o.mapped) {
        auto buf = cg.mapped_input(name);
        std::copy(data.begin(), data.end(), buf.begin());
      } else {
        cg.write(name, data);
      }
    }
    for (const auto& [name, data] : c.int_inputs) {
      if (o.mapped) {
        auto buf = cg.mapped_input_i32(name);
        std::copy(data.begin(), data.end(), buf.begin());
      } else {
        cg.write_i32(c.graph.find(name), data);
      }
    }
  };
  if (c.time_copies) feeds = mapped_feeds;
  hetgraph::tool::TimingOptions to;
  to.repeat = o.repeat;
  to.warmup = o.warmup;
  to.runs_per_sample = c.runs_per_sample;
  to.trace = o.trace;
  to.cold = o.cold;
  if (c.time_copies) to.before_sample = write_inputs;
  hetgraph::tool::Timing t = hetgraph::tool::time_runs(cg, feeds, to);
  r.samples = std::move(t.samples);
  r.copies = std::move(t.before);
  r.tuning_runs = t.tuning_runs;
  for (const hetgraph::Node& n : c.checksum) {
    for (float v : cg.read(n)) r.checksum += v;
  }
  r.engine = cg.engine_report();
  return r;
}

// The workload's graph as DIR/NAME.onnx (its fetches the outputs, its variables at their
// initial values) and its inputs as DIR/NAME/<input>.pb: what hetgraph-run times against the
// hand-built graph.
void export_case(const bench::Case& c, const std::string& name, const std::string& dir) {
  namespace ho = hetgraph::onnx;
  if (c.raw) throw hetgraph::GraphError(name + " is a raw library call, not a graph");
  const std::filesystem::path d(dir);
  std::filesystem::create_directories(d / name);
  ho::export_model(c.graph, c.fetches, c.shapes, (d / (name + ".onnx")).string());
  auto shape_of = [&](const std::string& input) {
    for (const auto& [n, s] : c.shapes) {
      if (n == input) return s;
    }
    throw hetgraph::GraphError(name + ": input '" + input + "' has no shape");
  };
  for (const auto& [input, data] : c.inputs) {
    ho::TensorData t{input, "float", hetgraph::DType::f32, shape_of(input), data, {}};
    ho::write_tensor((d / name / (input + ".pb")).string(), t);
  }
  for (const auto& [input, data] : c.int_inputs) {
    ho::TensorData t{input, "int32", hetgraph::DType::i32, shape_of(input), {}, data};
    ho::write_tensor((d / name / (input + ".pb")).string(), t);
  }
  std::printf("%s -> %s\n", name.c_str(), (d / (name + ".onnx")).string().c_str());
}

}  // namespace

int run(const Options& o) {
  bench::check_bench_options(o);
  if (o.list) {
    for (const auto& n : bench::workload_names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  int status = 0;
  for (const std::string& name : o.workloads) {
    const auto w = bench::find_workload(name);
    if (!w) {
      std::fprintf(stderr, "hetgraph-bench: unknown workload '%s' (--list shows them)\n",
                   name.c_str());
      status = 2;
      continue;
    }
    try {
      bench::Case c = w->make();
      if (!o.export_onnx.empty()) {
        export_case(c, name, o.export_onnx);
        continue;
      }
      const Result r = time_case(c, o);
      const double med = hetgraph::tool::median(r.samples);
      const double mn = *std::min_element(r.samples.begin(), r.samples.end());
      const double mx = *std::max_element(r.samples.begin(), r.samples.end());
      const std::string platform = c.raw ? "raw" : o.platform;
      const std::string engine = c.raw ? "none" : r.engine.engine;
      // lanes x threads: CPU executors x their team size, OpenCL queues x compute units
      const std::string executors = hetgraph::tool::lanes_label(r.engine);
      const hetgraph::EngineReport::Cpu cpu = r.engine.cpu.value_or(hetgraph::EngineReport::Cpu{});
      if (o.json) {
        std::printf(
            "{\"workload\":\"%s\",\"platform\":\"%s\",\"engine\":\"%s\",\"executors\":\"%s\","
            "\"repeat\":%d,\"runs_per_sample\":%d,\"median_s\":%.9g,\"min_s\":%.9g,\"max_s\":%.9g,"
            "\"setup_s\":%.9g,\"checksum\":%.17g,\"planned_bytes\":%zu,\"naive_bytes\":%zu,"
            "\"nodes\":%zu,\"heavy_nodes\":%zu,\"max_width\":%d,\"avg_width\":%d,"
            "\"guideline_executors\":%d,\"tuning_runs\":%d,\"fused\":%s,\"parallel_ops\":%s,"
            "\"mapped\":%s,"
            "\"compute_s\":%.9g",
            name.c_str(), platform.c_str(), engine.c_str(), executors.c_str(), o.repeat,
            c.runs_per_sample, med, mn, mx, r.setup_s, r.checksum, r.planned, r.naive,
            r.engine.nodes, r.engine.heavy_nodes, r.engine.max_width, r.engine.avg_width,
            cpu.guideline_executors, r.tuning_runs, o.fuse ? "true" : "false",
            o.parallel_ops ? "true" : "false", o.mapped ? "true" : "false", med);
        if (!r.copies.empty()) std::printf(",\"copy_s\":%.9g", hetgraph::tool::median(r.copies));
        if (o.cold) {  // every run from the first: the mean is what the process paid per run
          const auto mean = [&](std::size_t n) {
            double sum = 0;
            for (std::size_t i = 0; i < n; ++i) sum += r.samples[i];
            return sum / static_cast<double>(n);
          };
          std::printf(",\"cold\":true,\"cold_runs\":%zu,\"mean_s\":%.9g,\"first10_mean_s\":%.9g,"
                      "\"first_s\":%.9g",
                      r.samples.size(), mean(r.samples.size()),
                      mean(std::min<std::size_t>(10, r.samples.size())), r.samples.front());
        }
        if (o.platform == "cpu" && !c.raw) {
          // Nodes cheaper than this ran in the thread that readied them (0: inlining off).
          const double inl =
              o.inline_below_us >= 0 ? o.inline_below_us : hetgraph::CpuOptions{}.inline_below_us;
          std::printf(",\"inline_below_us\":%.9g,\"inline\":%s,\"pin\":%s,\"per_op_threads\":%s",
                      inl, inl > 0 ? "true" : "false", o.pin ? "true" : "false",
                      o.per_op_threads ? "true" : "false");
        }
        if (cpu.chosen) {  // what the automatic engine settled on
          std::printf(
              ",\"chosen\":{\"engine\":\"%s\",\"executors\":\"%dx%d\",\"per_op_threads\":%s,"
              "\"from_cache\":%s}",
              cpu.chosen->engine.c_str(), cpu.chosen->executors, cpu.chosen->threads_per_executor,
              cpu.chosen->per_op_threads ? "true" : "false",
              cpu.chosen->from_cache ? "true" : "false");
        }
        if (!cpu.op_threads.empty()) {  // per-op thread counts and their hill climbs
          std::printf(",\"op_threads\":[");
          for (std::size_t i = 0; i < cpu.op_threads.size(); ++i) {
            const auto& k = cpu.op_threads[i];
            std::printf("%s{\"op\":\"%s\",\"threads\":%d,\"curve\":[", i ? "," : "", k.op.c_str(),
                        k.threads);
            for (std::size_t j = 0; j < k.curve.size(); ++j)
              std::printf("%s[%d,%.6g]", j ? "," : "", k.curve[j].first, k.curve[j].second);
            std::printf("]}");
          }
          std::printf("]");
        }
        if (!cpu.search.empty()) {
          std::printf(",\"search\":[");
          for (std::size_t i = 0; i < cpu.search.size(); ++i) {
            const auto& t = cpu.search[i];
            std::printf("%s{\"engine\":\"%s\",\"executors\":\"%dx%d\",\"median_s\":%.9g}",
                        i ? "," : "", t.engine.c_str(), t.executors, t.threads_per_executor,
                        t.median_s);
          }
          std::printf("]");
        }
        if (const auto& h = r.engine.hetero) {
          // Where the nodes went: "cpu:12,opencl:0:0:3".
          std::map<std::string, int> count;
          for (const auto& n : h->nodes) ++count[n.device];
          std::string where;
          for (const auto& [d, k] : count)
            where += (where.empty() ? "" : ",") + d + ":" + std::to_string(k);
          std::string decision;
          for (char ch : h->decision) decision += ch == '"' || ch == '\\' ? '\'' : ch;
          std::printf(
              ",\"placement\":\"%s\",\"devices\":\"%s\",\"nodes_on\":\"%s\",\"transfers\":%zu,"
              "\"transfer_bytes\":%zu,\"estimated_us\":%.9g,\"decision\":\"%s\"",
              o.placement.c_str(), join(o.devices).c_str(), where.c_str(), h->transfers,
              h->transfer_bytes, h->estimated_us, decision.c_str());
        }
        for (const auto& [k, v] : c.stats) std::printf(",\"%s\":%.9g", k.c_str(), v);
        std::printf("}\n");
      } else {
        std::printf(
            "%-24s %-4s %-13s %-5s median %11.6f s  min %11.6f  max %11.6f  setup %.4f s  checksum "
            "%.6g",
            name.c_str(), platform.c_str(), engine.c_str(), executors.c_str(), med, mn, mx,
            r.setup_s, r.checksum);
        if (!r.copies.empty()) std::printf("  copy %.6f s", hetgraph::tool::median(r.copies));
        std::printf("\n");
        for (const auto& t : cpu.search) {
          std::printf("    search: %-13s %dx%d  median %.6f s\n", t.engine.c_str(), t.executors,
                      t.threads_per_executor, t.median_s);
        }
      }
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hetgraph-bench: %s: %s\n", name.c_str(), e.what());
      status = 1;
    }
  }
  return status;
}

int main(int argc, char** argv) {
  Options o;
  hetgraph::cli::Parser parser = bench::bench_parser(o);
  return hetgraph::cli::run_main(parser, argc, argv, [&] { return run(o); });
}
