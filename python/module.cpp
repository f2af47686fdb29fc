// SPDX-License-Identifier: Apache-2.0
// The `hetgraph` Python module (issue 51): a thin layer over the C++ API with the same names.
// Graphs are built from Node objects with Python operators, compiled for a platform, and run
// with NumPy arrays in and out; the GIL is released while a graph runs. Every hetgraph::Error
// arrives as the Python exception of the same name (all subclasses of hetgraph.Error).
// This unit binds graphs, ops and training; runtime.cpp platforms and compiled graphs; io.cpp
// data sets and ONNX.
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

#include "common.hpp"
#include "hetgraph/onnx.hpp"

namespace hetgraph::python {

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

namespace {

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

// StepOptions from minimize's keyword arguments (None: the optimizer's own).
StepOptions step_options(const std::optional<Node>& learning_rate,
                         const std::optional<Node>& step) {
  StepOptions o;
  if (learning_rate) o.learning_rate = *learning_rate;
  if (step) o.step = *step;
  return o;
}

}  // namespace
}  // namespace hetgraph::python

using namespace hetgraph;
using namespace hetgraph::python;

PYBIND11_MODULE(hetgraph, m) {
  m.doc() = "hetgraph: tensor computation graphs compiled for a CPU or OpenCL devices";

  // Exceptions: hetgraph.Error and a subclass per C++ subclass, with the same message. The
  // base is registered first: pybind11 tries the latest registered translator first.
  const py::object error = py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<GraphError>(m, "GraphError", error);
  py::register_exception<ShapeError>(m, "ShapeError", error);
  py::register_exception<FeedError>(m, "FeedError", error);
  py::register_exception<PlatformError>(m, "PlatformError", error);
  py::register_exception<DataError>(m, "DataError", error);
  py::register_exception<CommunicationError>(m, "CommunicationError", error);
  py::register_exception<UsageError>(m, "UsageError", error);
  py::register_exception<InternalError>(m, "InternalError", error);
  py::register_exception<onnx::UnsupportedError>(m, "UnsupportedError", error);

  py::enum_<DType>(m, "DType").value("f32", DType::f32).value("i32", DType::i32);

  py::class_<Initializer>(m, "Initializer")
      .def_static("zeros", &Initializer::zeros)
      .def_static("fill", &Initializer::fill, py::arg("value"))
      .def_static("uniform", &Initializer::uniform, py::arg("lo"), py::arg("hi"), py::arg("seed"))
      .def_static("normal", &Initializer::normal, py::arg("mean"), py::arg("stddev"),
                  py::arg("seed"));

  // A device of this machine, for pinning nodes on a heterogeneous platform.
  py::class_<Device>(m, "Device")
      .def_static("cpu", &Device::cpu)
      .def_static("opencl", &Device::opencl, py::arg("platform_index"), py::arg("device_index"))
      .def_property_readonly(
          "kind", [](const Device& d) { return d.kind == Device::Kind::cpu ? "cpu" : "opencl"; })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) { return "<hetgraph.Device " + d.str() + ">"; })
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; });

  py::class_<Node>(m, "Node")
      .def_property_readonly("id", &Node::id)
      .def_property_readonly("name", &Node::name)
      .def_property_readonly("op", [](const Node& n) { return std::string(n.op_name()); })
      .def_property_readonly("dtype", &Node::dtype)
      .def("__repr__", [](const Node& n) { return "<hetgraph.Node " + n.label() + ">"; })
      .def("named", &Node::named, py::arg("name"))
      .def("on", &Node::on, py::arg("device"))
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
  HG_UNARY(neg);
  HG_UNARY(tan);
  HG_UNARY(asin);
  HG_UNARY(acos);
  HG_UNARY(atan);
  HG_UNARY(sinh);
  HG_UNARY(cosh);
  HG_UNARY(asinh);
  HG_UNARY(acosh);
  HG_UNARY(atanh);
  HG_UNARY(round);
  HG_UNARY(logical_not);
  HG_UNARY(to_float16);
  HG_UNARY(to_bfloat16);
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
  HG_BINARY(less_equal);
  HG_BINARY(greater_equal);
  HG_BINARY(logical_and);
  HG_BINARY(logical_or);
  HG_BINARY(logical_xor);
  HG_BINARY(mod);
  HG_BINARY(fmod);
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
  m.def("scale", &scale, py::arg("x"), py::arg("s"));
  m.def("axpby", &axpby, py::arg("x"), py::arg("y"), py::arg("a"), py::arg("b"));
  m.def("argmin", &argmin, py::arg("x"), py::arg("axis") = -1, py::arg("keepdims") = false,
        py::arg("last_index") = false);
  m.def("top_k_indices", &top_k_indices, py::arg("x"), py::arg("k"), py::arg("axis") = -1,
        py::arg("largest") = true);
  m.def("reduce_prod", &reduce_prod, py::arg("x"), py::arg("axis") = kAllAxes,
        py::arg("keepdims") = false);
  m.def("cumsum", &cumsum, py::arg("x"), py::arg("axis"), py::arg("exclusive") = false,
        py::arg("reverse") = false);
  m.def("dropout", &dropout, py::arg("x"), py::arg("step"), py::arg("p"), py::arg("seed"));
  m.def("layer_norm", &nn::layer_norm, py::arg("x"), py::arg("gamma"), py::arg("beta"),
        py::arg("eps") = 1e-5f);
  m.def("strided_slice", &strided_slice, py::arg("x"), py::arg("starts"), py::arg("ends"),
        py::arg("axes") = std::vector<std::int64_t>{},
        py::arg("steps") = std::vector<std::int64_t>{});
  m.def("gather_elements", &gather_elements, py::arg("x"), py::arg("indices"), py::arg("axis") = 0);
  m.def(
      "scatter_elements",
      [](Node data, Node indices, Node updates, int axis, const std::string& reduction) {
        ScatterReduction r = ScatterReduction::none;
        if (reduction == "add") {
          r = ScatterReduction::add;
        } else if (reduction == "mul") {
          r = ScatterReduction::mul;
        } else if (reduction != "none") {
          throw UsageError("reduction '" + reduction + "': one of none, add, mul");
        }
        return scatter_elements(data, indices, updates, axis, r);
      },
      py::arg("data"), py::arg("indices"), py::arg("updates"), py::arg("axis") = 0,
      py::arg("reduction") = "none");
  m.def("assign", &assign, py::arg("variable"), py::arg("value"));
  m.def(
      "group", [](const std::vector<Node>& nodes) { return group(nodes); }, py::arg("nodes"));
  // Convolutions and pooling: NCHW, options as keyword arguments of the C++ option structs.
  using Pair = std::array<int, 2>;
  m.def(
      "conv2d",
      [](Node x, Node w, const std::optional<Node>& bias, Pair stride, Pair padding,
         Pair padding_end, Pair dilation, int groups) {
        const Conv2dOptions o{.stride = stride,
                              .padding = padding,
                              .padding_end = padding_end,
                              .dilation = dilation,
                              .groups = groups};
        return bias ? conv2d(x, w, *bias, o) : conv2d(x, w, o);
      },
      py::arg("x"), py::arg("weights"), py::arg("bias") = py::none(), py::kw_only(),
      py::arg("stride") = Pair{1, 1}, py::arg("padding") = Pair{0, 0},
      py::arg("padding_end") = Pair{-1, -1}, py::arg("dilation") = Pair{1, 1},
      py::arg("groups") = 1);
  m.def(
      "conv_transpose2d",
      [](Node x, Node w, const std::optional<Node>& bias, Pair stride, Pair padding,
         Pair padding_end, Pair dilation, Pair output_padding, int groups) {
        const ConvTranspose2dOptions o{.stride = stride,
                                       .padding = padding,
                                       .padding_end = padding_end,
                                       .dilation = dilation,
                                       .output_padding = output_padding,
                                       .groups = groups};
        return bias ? conv_transpose2d(x, w, *bias, o) : conv_transpose2d(x, w, o);
      },
      py::arg("x"), py::arg("weights"), py::arg("bias") = py::none(), py::kw_only(),
      py::arg("stride") = Pair{1, 1}, py::arg("padding") = Pair{0, 0},
      py::arg("padding_end") = Pair{-1, -1}, py::arg("dilation") = Pair{1, 1},
      py::arg("output_padding") = Pair{0, 0}, py::arg("groups") = 1);
  const auto pool = [](Node (*op)(Node, Pool2dOptions)) {
    return [op](Node x, Pair kernel, Pair stride, Pair padding, Pair padding_end, bool ceil_mode,
                bool count_include_pad, Pair dilation) {
      return op(x, {.kernel = kernel,
                    .stride = stride,
                    .padding = padding,
                    .padding_end = padding_end,
                    .count_include_pad = count_include_pad,
                    .ceil_mode = ceil_mode,
                    .dilation = dilation});
    };
  };
  for (const auto& [name, op] :
       {std::pair{"max_pool2d", &max_pool2d}, std::pair{"avg_pool2d", &avg_pool2d}}) {
    m.def(name, pool(op), py::arg("x"), py::kw_only(), py::arg("kernel") = Pair{2, 2},
          py::arg("stride") = Pair{0, 0}, py::arg("padding") = Pair{0, 0},
          py::arg("padding_end") = Pair{-1, -1}, py::arg("ceil_mode") = false,
          py::arg("count_include_pad") = false, py::arg("dilation") = Pair{1, 1});
  }

  // Training.
  py::class_<Optimizer>(m, "Optimizer")
      .def_static("sgd", &Optimizer::sgd, py::arg("lr"), py::arg("weight_decay") = 0.0f)
      .def_static("momentum_sgd", &Optimizer::momentum_sgd, py::arg("lr"),
                  py::arg("momentum") = 0.9f, py::arg("weight_decay") = 0.0f)
      .def_static("nesterov", &Optimizer::nesterov, py::arg("lr"), py::arg("momentum") = 0.9f,
                  py::arg("weight_decay") = 0.0f)
      .def_static("adam", &Optimizer::adam, py::arg("lr") = 1e-3f, py::arg("weight_decay") = 0.0f)
      .def_static("adamw", &Optimizer::adamw, py::arg("lr") = 1e-3f,
                  py::arg("weight_decay") = 1e-2f)
      .def_static("rmsprop", &Optimizer::rmsprop, py::arg("lr") = 1e-2f,
                  py::arg("weight_decay") = 0.0f)
      .def_static("adagrad", &Optimizer::adagrad, py::arg("lr") = 1e-2f,
                  py::arg("weight_decay") = 0.0f)
      .def_static("named", &Optimizer::named, py::arg("name"), py::arg("lr"),
                  py::arg("weight_decay") = 0.0f)
      .def_property_readonly("name", [](const Optimizer& o) { return std::string(o.name()); })
      .def_readwrite("learning_rate", &Optimizer::learning_rate)
      .def_readwrite("momentum", &Optimizer::momentum)
      .def_readwrite("dampening", &Optimizer::dampening)
      .def_readwrite("beta1", &Optimizer::beta1)
      .def_readwrite("beta2", &Optimizer::beta2)
      .def_readwrite("alpha", &Optimizer::alpha)
      .def_readwrite("eps", &Optimizer::eps)
      .def_readwrite("weight_decay", &Optimizer::weight_decay)
      .def_readwrite("clip_norm", &Optimizer::clip_norm);
  m.def(
      "minimize",
      [](Node loss, const std::vector<Node>& vars, const Optimizer& opt,
         const std::optional<Node>& learning_rate, const std::optional<Node>& step) {
        return minimize(loss, std::span<const Node>(vars), opt, step_options(learning_rate, step));
      },
      py::arg("loss"), py::arg("variables"), py::arg("optimizer"), py::kw_only(),
      py::arg("learning_rate") = py::none(), py::arg("step") = py::none());
  m.def(
      "apply_gradients",
      [](const std::vector<Node>& vars, const std::vector<Node>& grads, const Optimizer& opt,
         const std::optional<Node>& learning_rate, const std::optional<Node>& step) {
        return apply_gradients(vars, grads, opt, step_options(learning_rate, step));
      },
      py::arg("variables"), py::arg("gradients"), py::arg("optimizer"), py::kw_only(),
      py::arg("learning_rate") = py::none(), py::arg("step") = py::none());
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
  m.def(
      "clip_by_global_norm",
      [](const std::vector<Node>& grads, float max_norm) {
        return clip_by_global_norm(grads, max_norm);
      },
      py::arg("gradients"), py::arg("max_norm"));
  // Learning-rate schedules of the step count, computed in the graph (no recompilation).
  m.def("step_counter", &step_counter, py::arg("graph"), py::arg("name") = "step");
  m.def("step_decay", &step_decay, py::arg("step"), py::arg("lr"), py::arg("step_size"),
        py::arg("gamma"));
  m.def("exponential_decay", &exponential_decay, py::arg("step"), py::arg("lr"), py::arg("gamma"));
  m.def("cosine_decay", &cosine_decay, py::arg("step"), py::arg("lr"), py::arg("total_steps"),
        py::arg("min_lr") = 0.0f);
  m.def("linear_warmup", &linear_warmup, py::arg("step"), py::arg("lr"), py::arg("warmup_steps"));

  bind_runtime(m);
  bind_io(m);
}
