// SPDX-License-Identifier: Apache-2.0
// The `hetgraph` Python module (issue 51): a thin layer over the C++ API with the same names.
// Graphs are built from Node objects with Python operators, compiled for a platform, and run
// with NumPy arrays in and out; the GIL is released while a graph runs. Every hetgraph::Error
// arrives as the Python exception of the same name (all subclasses of hetgraph.Error).
//
//   import numpy as np, hetgraph as hg
//   g = hg.Graph()
//   x = g.input("x")
//   W = g.variable("W", (3, 2), np.full((3, 2), 0.5, np.float32))
//   p = hg.softmax(hg.matmul(x, W))
//   cg = hg.GraphCompiler(hg.Platform.cpu()).compile(g, {"x": (4, 3)}, [p])
//   cg.run({"x": np.arange(12, dtype=np.float32).reshape(4, 3)})
//   cg.read(p)   # a (4, 2) float32 array
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "hetgraph/data.hpp"
#include "hetgraph/hetgraph.hpp"
#include "hetgraph/onnx.hpp"

namespace py = pybind11;
using namespace hetgraph;

namespace {

// C-contiguous arrays of one type; ensure() converts (a copy) where an array is not one.
using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

std::vector<std::int64_t> dims_of(const py::array& a) {
  return std::vector<std::int64_t>(a.shape(), a.shape() + a.ndim());
}

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(static_cast<std::size_t>(s.rank()));
  for (int i = 0; i < s.rank(); ++i) t[static_cast<std::size_t>(i)] = s[i];
  return t;
}

Shape shape_of(const std::vector<std::int64_t>& dims) {
  return Shape(std::span<const std::int64_t>(dims));
}

// Feeds: float32 and int32 arrays are viewed where they are C-contiguous (no copy); float64
// is converted to float32, as the C++ Feed converts doubles. Anything else is a FeedError
// naming the input. The items view the names and arrays `keep` holds while the run lasts.
struct Kept {
  std::deque<std::string> names;  // a deque: FeedItem views the names, which must not move
  std::vector<py::array> arrays;
};
std::vector<FeedItem> feeds_of(const py::dict& feeds, Kept& kept) {
  std::vector<FeedItem> items;
  std::vector<py::array>& keep = kept.arrays;
  for (const auto& [key, value] : feeds) {
    const std::string& name = kept.names.emplace_back(py::cast<std::string>(key));
    py::array a = py::array::ensure(value);
    if (!a) throw FeedError("feed '" + name + "' is not an array or a sequence of numbers");
    const char kind = a.dtype().kind();
    const auto size = a.dtype().itemsize();
    if (kind == 'f' && (size == 4 || size == 8)) {
      keep.push_back(F32::ensure(a));
      const auto& v = keep.back();
      items.push_back({name, std::span<const float>(static_cast<const float*>(v.data()),
                                                    static_cast<std::size_t>(v.size()))});
    } else if (kind == 'i' && size == 4) {
      keep.push_back(I32::ensure(a));
      const auto& v = keep.back();
      items.push_back(
          {name, std::span<const std::int32_t>(static_cast<const std::int32_t*>(v.data()),
                                               static_cast<std::size_t>(v.size()))});
    } else {
      throw FeedError("feed '" + name + "' has dtype " + py::str(a.dtype()).cast<std::string>() +
                      ": hetgraph takes float32, int32 or float64 (converted to float32) arrays");
    }
  }
  return items;
}

// A new array of a value read from a compiled graph.
py::array values_of(const Shape& shape, DType dtype, const std::function<std::vector<float>()>& f32,
                    const std::function<std::vector<std::int32_t>()>& i32) {
  std::vector<py::ssize_t> dims;
  for (int i = 0; i < shape.rank(); ++i) dims.push_back(shape[i]);
  if (dtype == DType::i32) {
    std::vector<std::int32_t> v = i32();
    I32 out(dims);
    std::copy(v.begin(), v.end(), out.mutable_data());
    return out;
  }
  std::vector<float> v = f32();
  F32 out(dims);
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

Initializer initializer_of(const py::object& init, const Shape& shape) {
  if (init.is_none()) return Initializer::zeros();
  if (py::isinstance<Initializer>(init)) return init.cast<Initializer>();
  if (py::isinstance<py::float_>(init) || py::isinstance<py::int_>(init))
    return Initializer::fill(init.cast<float>());
  F32 a = F32::ensure(init);
  if (!a) throw UsageError("a variable's initial value is an Initializer, a number or an array");
  if (static_cast<std::int64_t>(a.size()) != shape.numel()) {
    throw ShapeError("initial value of " + std::to_string(a.size()) +
                     " elements for a variable of shape " + shape.str());
  }
  return Initializer::values(std::vector<float>(a.data(), a.data() + a.size()));
}

InputShapes shapes_of(const py::dict& d) {
  InputShapes s;
  for (const auto& [k, v] : d)
    s.push_back({py::cast<std::string>(k), shape_of(py::cast<std::vector<std::int64_t>>(v))});
  return s;
}

// An ONNX model compiled once, run like ONNX Runtime's InferenceSession.
class Session {
 public:
  Session(const std::string& path, const py::dict& input_shapes, const Platform& platform)
      : model_(onnx::import(path, {.input_shapes = shapes_of(input_shapes)})),
        cg_(model_.compile(GraphCompiler(platform))) {}
  std::vector<std::string> inputs() const {
    std::vector<std::string> n;
    for (const auto& v : model_.input_info) n.push_back(v.name);
    return n;
  }
  std::vector<std::string> outputs() const {
    std::vector<std::string> n;
    for (const auto& v : model_.output_info) n.push_back(v.name);
    return n;
  }
  // run(None or [names], {input: array}) -> [arrays], as InferenceSession.run.
  std::vector<py::array> run(const py::object& names, const py::dict& feeds) {
    Kept keep;
    const std::vector<FeedItem> items = feeds_of(feeds, keep);
    {
      py::gil_scoped_release release;
      cg_.run(items);
    }
    const std::vector<std::string> want =
        names.is_none() ? outputs() : names.cast<std::vector<std::string>>();
    std::vector<py::array> out;
    for (const std::string& n : want) {
      out.push_back(values_of(
          cg_.shape(n), model_.output_info.empty() ? DType::f32 : dtype_of(n),
          [&] { return cg_.read(n); }, [&] { return cg_.read_i32(n); }));
    }
    return out;
  }

 private:
  DType dtype_of(const std::string& name) const {
    for (const auto& v : model_.output_info)
      if (v.name == name) return v.dtype;
    return DType::f32;
  }
  onnx::Model model_;
  CompiledGraph cg_;
};

}  // namespace

PYBIND11_MODULE(hetgraph, m) {
  m.doc() = "hetgraph: tensor computation graphs compiled for a CPU or OpenCL devices";

  // Exceptions: hetgraph.Error and a subclass per C++ subclass, with the same message.
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<GraphError> graph_error(m, "GraphError", error.ptr());
  static py::exception<ShapeError> shape_error(m, "ShapeError", error.ptr());
  static py::exception<FeedError> feed_error(m, "FeedError", error.ptr());
  static py::exception<PlatformError> platform_error(m, "PlatformError", error.ptr());
  static py::exception<DataError> data_error(m, "DataError", error.ptr());
  static py::exception<UsageError> usage_error(m, "UsageError", error.ptr());
  static py::exception<InternalError> internal_error(m, "InternalError", error.ptr());
  static py::exception<onnx::UnsupportedError> unsupported_error(m, "UnsupportedError",
                                                                 error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const onnx::UnsupportedError& e) {
      unsupported_error(e.what());
    } catch (const GraphError& e) {
      graph_error(e.what());
    } catch (const ShapeError& e) {
      shape_error(e.what());
    } catch (const FeedError& e) {
      feed_error(e.what());
    } catch (const PlatformError& e) {
      platform_error(e.what());
    } catch (const DataError& e) {
      data_error(e.what());
    } catch (const UsageError& e) {
      usage_error(e.what());
    } catch (const InternalError& e) {
      internal_error(e.what());
    } catch (const Error& e) {
      error(e.what());
    }
  });

  py::enum_<DType>(m, "DType").value("f32", DType::f32).value("i32", DType::i32);

  py::class_<Initializer>(m, "Initializer")
      .def_static("zeros", &Initializer::zeros)
      .def_static("fill", &Initializer::fill, py::arg("value"))
      .def_static("uniform", &Initializer::uniform, py::arg("lo"), py::arg("hi"), py::arg("seed"))
      .def_static("normal", &Initializer::normal, py::arg("mean"), py::arg("stddev"),
                  py::arg("seed"));

  py::class_<Node>(m, "Node")
      .def_property_readonly("id", &Node::id)
      .def("named", &Node::named, py::arg("name"))
      .def("__add__", [](Node a, Node b) { return a + b; })
      .def("__add__", [](Node a, float b) { return a + b; })
      .def("__radd__", [](Node a, float b) { return b + a; })
      .def("__sub__", [](Node a, Node b) { return a - b; })
      .def("__sub__", [](Node a, float b) { return a - b; })
      .def("__rsub__", [](Node a, float b) { return b - a; })
      .def("__mul__", [](Node a, Node b) { return a * b; })
      .def("__mul__", [](Node a, float b) { return a * b; })
      .def("__rmul__", [](Node a, float b) { return b * a; })
      .def("__truediv__", [](Node a, Node b) { return a / b; })
      .def("__truediv__", [](Node a, float b) { return a / b; })
      .def("__neg__", [](Node a) { return -a; })
      .def("__matmul__", [](Node a, Node b) { return matmul(a, b); });

  py::class_<Graph>(m, "Graph")
      .def(py::init<>())
      .def("input", &Graph::input, py::arg("name"), py::arg("dtype") = DType::f32)
      .def(
          "variable",
          [](Graph& g, const std::string& name, const std::vector<std::int64_t>& dims,
             const py::object& init) {
            const Shape s = shape_of(dims);
            return g.variable(name, s, initializer_of(init, s));
          },
          py::arg("name"), py::arg("shape"), py::arg("init") = py::none())
      .def("constant", [](Graph& g, float v) { return g.constant(v); })
      .def("constant",
           [](Graph& g, const F32& a) {
             return g.constant(shape_of(dims_of(a)),
                               std::vector<float>(a.data(), a.data() + a.size()));
           })
      .def("summary", &Graph::summary)
      .def("to_dot", &Graph::to_dot);

  // Ops: the C++ builders under the same names (cast: <cmath> has functions of these names).
  using Unary = Node (*)(Node);
  using Binary = Node (*)(Node, Node);
#define HG_UNARY(name) m.def(#name, static_cast<Unary>(&hetgraph::name), py::arg("x"))
#define HG_BINARY(name) \
  m.def(#name, static_cast<Binary>(&hetgraph::name), py::arg("a"), py::arg("b"))
  HG_UNARY(relu);
  HG_UNARY(sigmoid);
  HG_UNARY(tanh);
  HG_UNARY(gelu);
  HG_UNARY(exp);
  HG_UNARY(log);
  HG_UNARY(sqrt);
  HG_UNARY(abs);
  HG_UNARY(erf);
  HG_UNARY(sin);
  HG_UNARY(cos);
  HG_UNARY(floor);
  HG_BINARY(add);
  HG_BINARY(sub);
  HG_BINARY(mul);
  HG_BINARY(div);
  HG_BINARY(maximum);
  HG_BINARY(minimum);
  HG_BINARY(pow);
  HG_BINARY(equal);
  HG_BINARY(less);
  HG_BINARY(greater);
#undef HG_UNARY
#undef HG_BINARY
  m.def("leaky_relu", &leaky_relu, py::arg("x"), py::arg("alpha") = 0.01f);
  m.def("clip", &clip, py::arg("x"), py::arg("lo"), py::arg("hi"));
  m.def("where", &where, py::arg("cond"), py::arg("a"), py::arg("b"));
  m.def("cast", &cast, py::arg("x"), py::arg("to"));
  m.def("matmul", &matmul, py::arg("a"), py::arg("b"), py::arg("transpose_a") = false,
        py::arg("transpose_b") = false);
  m.def("reduce_sum", &reduce_sum, py::arg("x"), py::arg("axis") = kAllAxes,
        py::arg("keepdims") = false);
  m.def("reduce_mean", &reduce_mean, py::arg("x"), py::arg("axis") = kAllAxes,
        py::arg("keepdims") = false);
  m.def("reduce_max", &reduce_max, py::arg("x"), py::arg("axis") = kAllAxes,
        py::arg("keepdims") = false);
  m.def("argmax", &argmax, py::arg("x"), py::arg("axis") = -1, py::arg("keepdims") = false,
        py::arg("last_index") = false);
  m.def("softmax", &softmax, py::arg("x"), py::arg("axis") = -1);
  m.def("log_softmax", &log_softmax, py::arg("x"), py::arg("axis") = -1);
  m.def("cross_entropy", &cross_entropy, py::arg("probs"), py::arg("labels"));
  m.def("slice", &slice, py::arg("x"), py::arg("axis"), py::arg("begin"), py::arg("end"));
  m.def(
      "concat", [](const std::vector<Node>& xs, int axis) { return concat(xs, axis); },
      py::arg("xs"), py::arg("axis"));
  m.def("transpose", &transpose, py::arg("x"), py::arg("perm") = std::vector<int>{});
  m.def("reshape", &reshape, py::arg("x"), py::arg("shape"));
  m.def("embedding", &embedding, py::arg("table"), py::arg("indices"));
  m.def("gather", &gather, py::arg("x"), py::arg("indices"), py::arg("axis") = 0);

  // Training.
  py::class_<Optimizer>(m, "Optimizer")
      .def_static("sgd", &Optimizer::sgd, py::arg("lr"), py::arg("weight_decay") = 0.0f)
      .def_static("momentum_sgd", &Optimizer::momentum_sgd, py::arg("lr"),
                  py::arg("momentum") = 0.9f, py::arg("weight_decay") = 0.0f)
      .def_static("adam", &Optimizer::adam, py::arg("lr") = 1e-3f, py::arg("weight_decay") = 0.0f)
      .def_static("adamw", &Optimizer::adamw, py::arg("lr") = 1e-3f,
                  py::arg("weight_decay") = 1e-2f)
      .def_static("rmsprop", &Optimizer::rmsprop, py::arg("lr") = 1e-2f,
                  py::arg("weight_decay") = 0.0f)
      .def_static("adagrad", &Optimizer::adagrad, py::arg("lr") = 1e-2f,
                  py::arg("weight_decay") = 0.0f);
  m.def(
      "minimize",
      [](Node loss, const std::vector<Node>& vars, const Optimizer& opt) {
        return minimize(loss, std::span<const Node>(vars), opt);
      },
      py::arg("loss"), py::arg("variables"), py::arg("optimizer"));
  m.def(
      "sgd",
      [](Node loss, const std::vector<Node>& vars, float lr, float momentum) {
        return sgd(loss, std::span<const Node>(vars), lr, momentum);
      },
      py::arg("loss"), py::arg("variables"), py::arg("lr"), py::arg("momentum") = 0.0f);
  m.def(
      "gradients",
      [](Node loss, const std::vector<Node>& wrt) {
        return gradients(loss, std::span<const Node>(wrt));
      },
      py::arg("loss"), py::arg("wrt"));

  // Platforms and compiling.
  py::class_<Platform>(m, "Platform")
      .def_static(
          "cpu",
          [](const std::string& engine, int threads) {
            CpuOptions o;
            o.threads = threads;
            if (engine == "sequential")
              o.engine = CpuEngine::sequential;
            else if (engine == "critical-path")
              o.engine = CpuEngine::critical_path;
            else if (engine == "shared-queue")
              o.engine = CpuEngine::shared_queue;
            else if (engine != "auto")
              throw UsageError("engine '" + engine +
                               "': one of auto, sequential, critical-path, shared-queue");
            return Platform::cpu(o);
          },
          py::arg("engine") = "auto", py::arg("threads") = 0)
      .def_static("opencl", [] { return Platform::opencl(); })
      .def_static("opencl_available", [] { return Platform::opencl_available(); })
      .def("name", &Platform::name)
      .def("description", &Platform::description);

  py::class_<CompiledGraph>(m, "CompiledGraph")
      .def(
          "run",
          [](CompiledGraph& cg, const py::dict& feeds) {
            Kept keep;
            const std::vector<FeedItem> items = feeds_of(feeds, keep);
            py::gil_scoped_release release;
            cg.run(items);
          },
          py::arg("feeds") = py::dict())
      .def("read",
           [](const CompiledGraph& cg, Node n) {
             return values_of(
                 cg.shape(n), DType::f32, [&] { return cg.read(n); },
                 [&] { return cg.read_i32(n); });
           })
      .def("read",
           [](const CompiledGraph& cg, const std::string& name) {
             return values_of(
                 cg.shape(name), DType::f32, [&] { return cg.read(name); },
                 [&] { return cg.read_i32(name); });
           })
      .def("read_i32",
           [](const CompiledGraph& cg, Node n) {
             return values_of(
                 cg.shape(n), DType::i32, [&] { return cg.read(n); },
                 [&] { return cg.read_i32(n); });
           })
      .def("write",
           [](CompiledGraph& cg, const std::string& name, const F32& a) {
             cg.write(name, std::span<const float>(a.data(), static_cast<std::size_t>(a.size())));
           })
      .def("shape", [](const CompiledGraph& cg, Node n) { return shape_tuple(cg.shape(n)); })
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
      .def("save", &CompiledGraph::save, py::arg("path"))
      .def(
          "load",
          [](CompiledGraph& cg, const std::string& path, bool strict) {
            const LoadReport r = cg.load(path, {.strict = strict});
            py::dict d;
            d["loaded"] = r.loaded;
            d["not_in_graph"] = r.not_in_graph;
            d["not_in_file"] = r.not_in_file;
            return d;
          },
          py::arg("path"), py::arg("strict") = true)
      .def("planned_bytes", &CompiledGraph::planned_bytes)
      .def("engine_report", [](CompiledGraph& cg) {
        const EngineReport r = cg.engine_report();
        py::dict d;
        d["engine"] = r.engine;
        d["runs"] = r.runs;
        d["lanes"] = r.lanes.size();
        if (r.cpu) {
          d["code_path"] = r.cpu->code_path;
          d["executors"] = r.cpu->executors;
          d["threads_per_executor"] = r.cpu->threads_per_executor;
        }
        return d;
      });

  py::class_<GraphCompiler>(m, "GraphCompiler")
      .def(py::init([](const Platform& p) { return GraphCompiler(p); }),
           py::arg("platform") = Platform::cpu())
      .def(
          "compile",
          [](const GraphCompiler& c, const Graph& g, const py::dict& shapes,
             const std::vector<Node>& fetches) {
            const InputShapes s = shapes_of(shapes);
            py::gil_scoped_release release;
            return c.compile(g, s, std::span<const Node>(fetches));
          },
          py::arg("graph"), py::arg("shapes"), py::arg("fetches"));

  // Data sets: MNIST-format folders, images written straight into an array (a mapped input).
  py::module_ data_m = m.def_submodule("data", "MNIST-format data sets");
  py::class_<data::Split>(data_m, "Split")
      .def_readonly("count", &data::Split::count)
      .def_readonly("rows", &data::Split::rows)
      .def_readonly("cols", &data::Split::cols)
      .def_property_readonly("labels",
                             [](const data::Split& s) {
                               I32 out(static_cast<py::ssize_t>(s.labels.size()));
                               std::copy(s.labels.begin(), s.labels.end(), out.mutable_data());
                               return out;
                             })
      .def(
          "images",
          [](const data::Split& s, std::int64_t first, std::int64_t n, py::array out) {
            if (out.dtype().kind() != 'f' || out.itemsize() != 4 ||
                !(out.flags() & py::array::c_style) || !out.writeable()) {
              throw UsageError("Split.images writes into a writable C-contiguous float32 array");
            }
            std::span<float> dst(static_cast<float*>(out.mutable_data()),
                                 static_cast<std::size_t>(out.size()));
            py::gil_scoped_release release;
            s.images(first, n, dst);
          },
          py::arg("first"), py::arg("n"), py::arg("out"));
  py::class_<data::Mnist>(data_m, "Mnist")
      .def_readonly("train", &data::Mnist::train)
      .def_readonly("test", &data::Mnist::test)
      .def_readonly("classes", &data::Mnist::classes);
  data_m.def(
      "load_mnist",
      [](const std::string& dir, int classes) {
        py::gil_scoped_release release;
        return data::load_mnist(dir, classes);
      },
      py::arg("dir"), py::arg("classes") = 10);

  // ONNX: sessions shaped like ONNX Runtime's, and export.
  py::module_ onnx_m = m.def_submodule("onnx", "ONNX models in and out");
  py::class_<Session>(onnx_m, "InferenceSession")
      .def(py::init<const std::string&, const py::dict&, const Platform&>(), py::arg("path"),
           py::arg("input_shapes") = py::dict(), py::arg("platform") = Platform::cpu())
      .def("input_names", &Session::inputs)
      .def("output_names", &Session::outputs)
      .def("run", &Session::run, py::arg("output_names"), py::arg("feeds"));
  onnx_m.def(
      "load",
      [](const std::string& path, const py::dict& input_shapes, const Platform& platform) {
        return Session(path, input_shapes, platform);
      },
      py::arg("path"), py::arg("input_shapes") = py::dict(), py::arg("platform") = Platform::cpu());
  onnx_m.def(
      "export",
      [](const Graph& g, const std::vector<Node>& outputs, const py::dict& shapes,
         const std::string& path, const CompiledGraph* values,
         const std::vector<std::string>& names) {
        onnx::export_model(g, outputs, shapes_of(shapes), path,
                           {.values = values, .output_names = names});
      },
      py::arg("graph"), py::arg("outputs"), py::arg("shapes"), py::arg("path"),
      py::arg("values") = nullptr, py::arg("output_names") = std::vector<std::string>{});
}
