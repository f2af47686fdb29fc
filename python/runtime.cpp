// SPDX-License-Identifier: Apache-2.0
// The Python module's platforms, compiler and graphs that run (python/module.cpp has the rest):
// Platform.cpu / opencl / heterogeneous with their options, GraphCompiler with its options
// and a VariableStore, CompiledGraph (runs, asynchronous runs, reads and writes, mapped
// inputs, checkpoints, reports, profiles and traces) and DynamicGraph. The GIL is released
// wherever C++ may run a graph or wait for one.
//
//   cpu = hg.Platform.cpu(engine="critical-path", executors=2, threads_per_executor=1)
//   cg = hg.GraphCompiler(cpu, fuse=False).compile(g, {"x": (4, 3)}, [p])
//   h = cg.run_async({"x": xs})   # returns at once
//   h.wait()                      # the run's error, if any, as its exception
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"

namespace hetgraph::python {
namespace {

py::list lanes_of(const EngineReport& r) {
  py::list out;
  for (const auto& l : r.lanes)
    out.append(py::dict(py::arg("name") = l.name, py::arg("threads") = l.threads));
  return out;
}

py::dict cpu_report(const EngineReport::Cpu& c) {
  py::dict d;
  d["code_path"] = c.code_path;
  d["executors"] = c.executors;
  d["threads_per_executor"] = c.threads_per_executor;
  d["levels_profiled"] = c.levels_profiled;
  d["tuned"] = c.tuned;
  d["guideline_executors"] = c.guideline_executors;
  py::list search;
  for (const auto& t : c.search) {
    search.append(py::dict(py::arg("engine") = t.engine, py::arg("executors") = t.executors,
                           py::arg("threads_per_executor") = t.threads_per_executor,
                           py::arg("median_s") = t.median_s, py::arg("runs") = t.runs,
                           py::arg("per_op_threads") = t.per_op_threads));
  }
  d["search"] = search;
  if (c.chosen) {
    py::dict chosen(py::arg("engine") = c.chosen->engine,
                    py::arg("executors") = c.chosen->executors,
                    py::arg("threads_per_executor") = c.chosen->threads_per_executor,
                    py::arg("per_op_threads") = c.chosen->per_op_threads,
                    py::arg("from_cache") = c.chosen->from_cache);
    if (c.chosen->load) {
      const auto& l = *c.chosen->load;
      chosen["load"] =
          py::dict(py::arg("caller_share") = l.caller_share, py::arg("preempted") = l.preempted,
                   py::arg("others_share") = l.others_share, py::arg("busy") = l.busy);
    }
    d["chosen"] = chosen;
  } else {
    d["chosen"] = py::none();
  }
  d["load_threads"] = c.load_threads;
  return d;
}

py::list placement_of(const std::vector<EngineReport::Hetero::Placed>& nodes) {
  py::list out;
  for (const auto& n : nodes) {
    out.append(py::dict(py::arg("node") = n.node, py::arg("device") = n.device,
                        py::arg("reason") = n.reason));
  }
  return out;
}

// EngineReport as a dict of the same field names; a platform's part is None elsewhere.
py::dict report_of(const EngineReport& r) {
  py::dict d;
  d["engine"] = r.engine;
  d["lanes"] = lanes_of(r);
  d["runs"] = r.runs;
  d["nodes"] = r.nodes;
  d["heavy_nodes"] = r.heavy_nodes;
  d["heavy_levels"] = r.heavy_levels;
  d["max_width"] = r.max_width;
  d["avg_width"] = r.avg_width;
  d["work_width"] = r.work_width;
  d["tuned"] = r.tuned();
  d["cpu"] = r.cpu ? py::object(cpu_report(*r.cpu)) : py::none();
  if (r.opencl) {
    d["opencl"] = py::dict(py::arg("device") = r.opencl->device,
                           py::arg("out_of_order") = r.opencl->out_of_order,
                           py::arg("compute_units") = r.opencl->compute_units);
  } else {
    d["opencl"] = py::none();
  }
  if (r.hetero) {
    const auto& h = *r.hetero;
    d["hetero"] = py::dict(
        py::arg("devices") = h.devices, py::arg("nodes") = placement_of(h.nodes),
        py::arg("transfers") = h.transfers, py::arg("transfer_bytes") = h.transfer_bytes,
        py::arg("estimated_us") = h.estimated_us, py::arg("split_us") = h.split_us,
        py::arg("single_device_us") = h.single_device_us, py::arg("decision") = h.decision);
  } else {
    d["hetero"] = py::none();
  }
  return d;
}

py::list shape_list(const Shape& s) {
  return py::list(shape_tuple(s));
}

HeteroOptions::Placement placement_named(const std::string& name) {
  if (name == "auto") return HeteroOptions::Placement::automatic;
  if (name == "heft") return HeteroOptions::Placement::heft;
  if (name == "first") return HeteroOptions::Placement::first;
  throw UsageError("placement '" + name + "': one of auto, heft, first");
}

// {"x": ["N", 3, 224, 224]} -> DynamicShapes: ints are fixed sizes, strings named dims.
DynamicShapes dynamic_shapes_of(const py::dict& d) {
  DynamicShapes out;
  for (const auto& [k, v] : d) {
    std::vector<Dim> dims;
    for (const py::handle item : v) {
      if (py::isinstance<py::str>(item)) {
        dims.emplace_back(item.cast<std::string>());
      } else if (py::isinstance<py::int_>(item)) {
        dims.emplace_back(item.cast<std::int64_t>());
      } else {
        throw ShapeError("input '" + py::cast<std::string>(k) +
                         "': each dim is a size (int) or a name (str), not " +
                         py::str(item).cast<std::string>());
      }
    }
    out.emplace_back(py::cast<std::string>(k), std::move(dims));
  }
  return out;
}

DimSizes dim_sizes_of(const py::dict& d) {
  DimSizes out;
  for (const auto& [k, v] : d) out.emplace_back(py::cast<std::string>(k), v.cast<std::int64_t>());
  return out;
}

// What compiled and dynamic graphs share: values read as new arrays (a node in its own type,
// a name as float32 unless read_i32), shapes, variables written by name, checkpoints.
template <class G>
void bind_values(py::class_<G>& c) {
  c.def(
       "read", [](const G& g, Node n) { return read_array(g, n, n.dtype()); }, py::arg("node"))
      .def(
          "read",
          [](const G& g, const std::string& name) { return read_array(g, name, DType::f32); },
          py::arg("name"))
      .def("read_i32", [](const G& g, Node n) { return read_array(g, n, DType::i32); })
      .def("read_i32",
           [](const G& g, const std::string& name) { return read_array(g, name, DType::i32); })
      .def("shape", [](const G& g, Node n) { return shape_tuple(g.shape(n)); })
      .def("shape", [](const G& g, const std::string& name) { return shape_tuple(g.shape(name)); })
      .def(
          "write",
          [](G& g, const std::string& name, const F32& a) {
            g.write(name, std::span<const float>(a.data(), static_cast<std::size_t>(a.size())));
          },
          py::arg("name"), py::arg("values"))
      .def("save", &G::save, py::arg("path"), py::call_guard<py::gil_scoped_release>())
      .def(
          "load",
          [](G& g, const std::string& path, bool strict) {
            const LoadReport r = g.load(path, {.strict = strict});
            return py::dict(py::arg("loaded") = r.loaded, py::arg("not_in_graph") = r.not_in_graph,
                            py::arg("not_in_file") = r.not_in_file);
          },
          py::arg("path"), py::arg("strict") = true);
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<Platform>(m, "Platform")
      .def_static(
          "cpu",
          [](const std::string& engine, int threads, int executors, int threads_per_executor,
             bool pin_threads, bool adapt_to_load) {
            CpuOptions o;
            o.engine = parse_engine(engine);
            o.threads = threads;
            o.executors = executors;
            o.threads_per_executor = threads_per_executor;
            o.pin_threads = pin_threads;
            o.adapt_to_load = adapt_to_load;
            return Platform::cpu(o);
          },
          py::arg("engine") = "auto", py::arg("threads") = 0, py::arg("executors") = 0,
          py::arg("threads_per_executor") = 0, py::arg("pin_threads") = true,
          py::arg("adapt_to_load") = true)
      .def_static(
          "opencl",
          [](int platform_index, int device_index, bool in_order) {
            return Platform::opencl({platform_index, device_index, in_order});
          },
          py::arg("platform_index") = -1, py::arg("device_index") = -1, py::arg("in_order") = false)
      .def_static(
          "opencl_available",
          [](int platform_index, int device_index) {
            return Platform::opencl_available({platform_index, device_index});
          },
          py::arg("platform_index") = -1, py::arg("device_index") = -1)
      .def_static("opencl_devices",
                  [] {
                    py::list out;
                    for (const auto& d : Platform::opencl_devices()) {
                      out.append(py::dict(py::arg("platform_index") = d.platform_index,
                                          py::arg("device_index") = d.device_index,
                                          py::arg("platform") = d.platform,
                                          py::arg("name") = d.name, py::arg("type") = d.type));
                    }
                    return out;
                  })
      .def_static(
          "heterogeneous",
          [](std::vector<Platform> members, const std::string& placement, double min_split_gain,
             int profile_runs) {
            HeteroOptions o;
            o.placement = placement_named(placement);
            o.min_split_gain = min_split_gain;
            o.profile_runs = profile_runs;
            return Platform::heterogeneous(std::move(members), o);
          },
          py::arg("members"), py::arg("placement") = "auto", py::arg("min_split_gain") = 0.1,
          py::arg("profile_runs") = 3)
      .def("devices", &Platform::devices)
      .def("name", &Platform::name)
      .def("description", &Platform::description)
      .def("__repr__",
           [](const Platform& p) { return "<hetgraph.Platform " + p.description() + ">"; });

  py::class_<VariableStore>(m, "VariableStore")
      .def(py::init<>())
      .def("size", &VariableStore::size)
      .def("bytes", &VariableStore::bytes);

  py::class_<RunHandle>(m, "RunHandle")
      .def("wait", &RunHandle::wait, py::call_guard<py::gil_scoped_release>())
      .def("done", &RunHandle::done);

  py::class_<Profile>(m, "Profile")
      .def_readonly("runs", &Profile::runs)
      .def_readonly("node_s", &Profile::node_s)
      .def_property_readonly(
          "ops",
          [](const Profile& p) {
            py::list out;
            for (const auto& o : p.ops) {
              out.append(py::dict(py::arg("op") = o.op, py::arg("nodes") = o.nodes,
                                  py::arg("calls") = o.calls, py::arg("total_s") = o.total_s,
                                  py::arg("share") = o.share));
            }
            return out;
          })
      .def_property_readonly(
          "nodes",
          [](const Profile& p) {
            py::list out;
            for (const auto& n : p.nodes) {
              py::list inputs;
              for (const Shape& s : n.input_shapes) inputs.append(shape_list(s));
              out.append(py::dict(
                  py::arg("name") = n.name, py::arg("op") = n.op, py::arg("kernel") = n.kernel,
                  py::arg("shape") = shape_list(n.shape), py::arg("input_shapes") = inputs,
                  py::arg("calls") = n.calls, py::arg("total_s") = n.total_s,
                  py::arg("mean_s") = n.mean_s, py::arg("share") = n.share));
            }
            return out;
          })
      .def("table", &Profile::table, py::arg("top") = 20)
      .def("json", &Profile::json);

  py::class_<CompiledGraph> compiled(m, "CompiledGraph");
  bind_values(compiled);
  compiled
      .def(
          "run",
          [](CompiledGraph& cg, const py::dict& feeds) {
            Kept keep;
            const std::vector<FeedItem> items = feeds_of(feeds, keep);
            py::gil_scoped_release release;
            cg.run(items);
          },
          py::arg("feeds") = py::dict())
      // Feeds are consumed before run_async returns; the handle keeps the graph alive.
      .def(
          "run_async",
          [](CompiledGraph& cg, const py::dict& feeds) {
            Kept keep;
            const std::vector<FeedItem> items = feeds_of(feeds, keep);
            py::gil_scoped_release release;
            return cg.run_async(items);
          },
          py::arg("feeds") = py::dict(), py::keep_alive<0, 1>())
      .def("wait", &CompiledGraph::wait, py::call_guard<py::gil_scoped_release>())
      // Into an array of the caller's (float32, C-contiguous, as many elements): no allocation.
      .def(
          "read",
          [](const CompiledGraph& cg, Node n, py::array out) {
            cg.read(n, writable<float>(out, "CompiledGraph.read(node, out)"));
            return out;
          },
          py::arg("node"), py::arg("out"))
      .def(
          "write_i32",
          [](CompiledGraph& cg, Node n, const I32& a) {
            cg.write_i32(
                n, std::span<const std::int32_t>(a.data(), static_cast<std::size_t>(a.size())));
          },
          py::arg("node"), py::arg("values"))
      // The graph's own input buffer as a writable array (no copy): fill it, then feed it and
      // it is not copied either. The array keeps the compiled graph alive.
      .def(
          "mapped_input",
          [](py::object self, const std::string& name) {
            CompiledGraph& cg = self.cast<CompiledGraph&>();
            const Shape s = cg.shape(name);
            std::vector<py::ssize_t> dims;
            for (int i = 0; i < s.rank(); ++i) dims.push_back(s[i]);
            std::span<float> f;
            try {
              f = cg.mapped_input(name);
            } catch (const Error&) {  // an int32 input (or none: then this throws the error)
              std::span<std::int32_t> m = cg.mapped_input_i32(name);
              return py::array(py::dtype::of<std::int32_t>(), dims, m.data(), self);
            }
            return py::array(py::dtype::of<float>(), dims, f.data(), self);
          },
          py::arg("name"))
      .def("planned_bytes", &CompiledGraph::planned_bytes)
      .def("naive_bytes", &CompiledGraph::naive_bytes)
      .def("kernel_name", &CompiledGraph::kernel_name, py::arg("node"))
      .def("to_dot", &CompiledGraph::to_dot)
      .def("engine_report", [](const CompiledGraph& cg) { return report_of(cg.engine_report()); })
      .def("placement", [](const CompiledGraph& cg) { return placement_of(cg.placement()); })
      // Traces: Chrome trace-event JSON of every following run, written by stop_trace().
      .def("start_trace", &CompiledGraph::start_trace, py::arg("path"))
      .def("stop_trace", &CompiledGraph::stop_trace, py::call_guard<py::gil_scoped_release>())
      .def("trace_event", &CompiledGraph::trace_event, py::arg("lane"), py::arg("name"),
           py::arg("start_ns"), py::arg("end_ns"))
      .def("start_profile", &CompiledGraph::start_profile)
      .def("profile", &CompiledGraph::profile)
      .def("stop_profile", &CompiledGraph::stop_profile);

  py::class_<GraphCompiler>(m, "GraphCompiler")
      .def(py::init([](const Platform& p, bool plan_memory, bool fuse, bool winograd_convs,
                       const std::optional<VariableStore>& variables) {
             CompileOptions o;
             o.plan_memory = plan_memory;
             o.fuse = fuse;
             o.winograd_convs = winograd_convs;
             if (variables) o.variables = *variables;
             return GraphCompiler(p, o);
           }),
           py::arg("platform") = Platform::cpu(), py::kw_only(), py::arg("plan_memory") = true,
           py::arg("fuse") = true, py::arg("winograd_convs") = false,
           py::arg("variables") = py::none())
      .def(
          "compile",
          [](const GraphCompiler& c, const Graph& g, const py::dict& shapes,
             const std::vector<Node>& fetches) {
            const InputShapes s = shapes_of(shapes);
            py::gil_scoped_release release;
            return c.compile(g, s, std::span<const Node>(fetches));
          },
          py::arg("graph"), py::arg("shapes"), py::arg("fetches"));

  // One graph, any sizes of its named dims: a plan per shape, compiled on first use and kept
  // (the least recently run goes first beyond max_plans), the variables shared between them.
  py::class_<DynamicGraph> dynamic(m, "DynamicGraph");
  bind_values(dynamic);
  dynamic
      .def(py::init([](const Graph& g, const py::dict& shapes, std::vector<Node> fetches,
                       const GraphCompiler& compiler, std::size_t max_plans) {
             return DynamicGraph(compiler, g, dynamic_shapes_of(shapes), std::move(fetches),
                                 {.max_plans = max_plans});
           }),
           py::arg("graph"), py::arg("shapes"), py::arg("fetches"),
           py::arg("compiler") = GraphCompiler(), py::arg("max_plans") = 16)
      .def(
          "run",
          [](DynamicGraph& dg, const py::dict& feeds, const py::dict& dims) {
            Kept keep;
            const std::vector<FeedItem> items = feeds_of(feeds, keep);
            const DimSizes sizes = dim_sizes_of(dims);
            py::gil_scoped_release release;
            dg.run(items, sizes);
          },
          py::arg("feeds"), py::arg("dims") = py::dict())
      .def("dims",
           [](const DynamicGraph& dg) {
             py::dict d;
             for (const auto& [name, size] : dg.dims()) d[py::str(name)] = size;
             return d;
           })
      .def("current", &DynamicGraph::current, py::return_value_policy::reference_internal)
      .def("plans", &DynamicGraph::plans)
      .def("compiles", &DynamicGraph::compiles)
      .def("planned_bytes", &DynamicGraph::planned_bytes);
}

}  // namespace hetgraph::python
