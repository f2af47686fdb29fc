// SPDX-License-Identifier: Apache-2.0
// The Python module's data sets (hetgraph.data: MNIST-format folders, batch orders) and ONNX
// models (hetgraph.onnx: sessions shaped like ONNX Runtime's, dynamic models, export).
//
//   sess = hg.onnx.load("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
//   (logits,) = sess.run(None, {"x": image})
//   order = hg.data.BatchOrder(60000, 100, seed=1)
//   order.start_epoch(0); ids = order.batch(0)   # int64 record ids
#include <string>
#include <vector>

#include "common.hpp"
#include "hetgraph/onnx.hpp"

namespace hetgraph::python {
namespace {

// ImportOptions::state from a dict {input: output}.
using State = std::vector<std::pair<std::string, std::string>>;
State state_of(const py::dict& d) {
  State s;
  for (const auto& [k, v] : d) s.emplace_back(py::cast<std::string>(k), py::cast<std::string>(v));
  return s;
}

// An ONNX model compiled once, run like ONNX Runtime's InferenceSession; inputs named in
// `state` are fed back from their outputs after every run instead of being fed.
class Session {
 public:
  Session(const std::string& path, const py::dict& input_shapes, const Platform& platform,
          const py::dict& state, bool float64_as_float32)
      : model_(onnx::import(path, {.input_shapes = shapes_of(input_shapes),
                                   .state = state_of(state),
                                   .float64_as_float32 = float64_as_float32})),
        cg_(model_.compile(GraphCompiler(platform))) {}
  std::vector<std::string> inputs() const { return names(model_.input_info); }
  std::vector<std::string> outputs() const { return names(model_.output_info); }
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
    for (const std::string& n : want) out.push_back(read_array(cg_, n, dtype_of(n)));
    return out;
  }
  CompiledGraph& compiled() { return cg_; }

 private:
  static std::vector<std::string> names(const std::vector<onnx::ValueDesc>& values) {
    std::vector<std::string> n;
    for (const auto& v : values) n.push_back(v.name);
    return n;
  }
  DType dtype_of(const std::string& name) const {
    for (const auto& v : model_.output_info)
      if (v.name == name) return v.dtype;
    return DType::f32;
  }
  onnx::Model model_;
  CompiledGraph cg_;
};

}  // namespace

void bind_io(py::module_& m) {
  // Data sets: MNIST-format folders, images written straight into an array (a mapped input).
  py::module_ data_m = m.def_submodule("data", "MNIST-format data sets and batch orders");
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
            const std::span<float> dst = writable<float>(out, "Split.images");
            py::gil_scoped_release release;
            s.images(first, n, dst);
          },
          py::arg("first"), py::arg("n"), py::arg("out"))
      // The records `ids` (a BatchOrder's batch) into images and labels, e.g. mapped inputs.
      .def(
          "gather",
          [](const data::Split& s,
             const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& ids,
             py::array images, py::array labels) {
            const std::span<float> img = writable<float>(images, "Split.gather");
            const std::span<std::int32_t> lab = writable<std::int32_t>(labels, "Split.gather");
            const std::span<const std::int64_t> id(ids.data(),
                                                   static_cast<std::size_t>(ids.size()));
            py::gil_scoped_release release;
            s.gather(id, img, lab);
          },
          py::arg("ids"), py::arg("images"), py::arg("labels"));
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
  // File order, or a shuffle per epoch that is a function of (seed, epoch) alone.
  py::class_<data::BatchOrder>(data_m, "BatchOrder")
      .def(py::init<std::int64_t, std::int64_t, std::optional<std::uint64_t>>(), py::arg("records"),
           py::arg("batch"), py::arg("seed") = py::none())
      .def("batches", &data::BatchOrder::batches)
      .def_property_readonly("batch_size", &data::BatchOrder::batch_size)
      .def_property_readonly("shuffled", &data::BatchOrder::shuffled)
      .def("start_epoch", &data::BatchOrder::start_epoch, py::arg("epoch"))
      .def(
          "batch",
          [](const data::BatchOrder& o, std::int64_t k) {
            if (k < 0 || k >= o.batches()) {
              throw DataError("batch " + std::to_string(k) + " of an epoch of " +
                              std::to_string(o.batches()) + " batches");
            }
            const std::span<const std::int64_t> ids = o.batch(k);
            py::array_t<std::int64_t> out(static_cast<py::ssize_t>(ids.size()));
            std::copy(ids.begin(), ids.end(), out.mutable_data());
            return out;
          },
          py::arg("k"));

  // ONNX: sessions shaped like ONNX Runtime's, dynamic models, and export.
  py::module_ onnx_m = m.def_submodule("onnx", "ONNX models in and out");
  py::class_<Session>(onnx_m, "InferenceSession")
      .def(py::init<const std::string&, const py::dict&, const Platform&, const py::dict&, bool>(),
           py::arg("path"), py::arg("input_shapes") = py::dict(),
           py::arg("platform") = Platform::cpu(), py::arg("state") = py::dict(),
           py::arg("float64_as_float32") = false)
      .def("input_names", &Session::inputs)
      .def("output_names", &Session::outputs)
      .def("run", &Session::run, py::arg("output_names"), py::arg("feeds"))
      .def("compiled", &Session::compiled, py::return_value_policy::reference_internal);
  onnx_m.def(
      "load",
      [](const std::string& path, const py::dict& input_shapes, const Platform& platform,
         const py::dict& state, bool float64_as_float32) {
        return Session(path, input_shapes, platform, state, float64_as_float32);
      },
      py::arg("path"), py::arg("input_shapes") = py::dict(), py::arg("platform") = Platform::cpu(),
      py::arg("state") = py::dict(), py::arg("float64_as_float32") = false);
  onnx_m.def(
      "dynamic",
      [](const std::string& path, const Platform& platform, std::size_t max_plans) {
        return onnx::dynamic(path, GraphCompiler(platform), {}, {.max_plans = max_plans});
      },
      py::arg("path"), py::arg("platform") = Platform::cpu(), py::arg("max_plans") = 16);
  onnx_m.def(
      "export",
      [](const Graph& g, const std::vector<Node>& outputs, const py::dict& shapes,
         const std::string& path, const CompiledGraph* values,
         const std::vector<std::string>& names, bool dynamic_batch) {
        onnx::export_model(
            g, outputs, shapes_of(shapes), path,
            {.values = values, .output_names = names, .dynamic_batch = dynamic_batch});
      },
      py::arg("graph"), py::arg("outputs"), py::arg("shapes"), py::arg("path"),
      py::arg("values") = nullptr, py::arg("output_names") = std::vector<std::string>{},
      py::arg("dynamic_batch") = false);
}

}  // namespace hetgraph::python
