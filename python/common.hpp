// SPDX-License-Identifier: Apache-2.0
// What the Python module's translation units share (python/module.cpp, runtime.cpp, io.cpp):
// NumPy arrays to feeds and back, shapes as tuples, and the functions each unit binds with.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "hetgraph/hetgraph.hpp"

namespace hetgraph::python {

namespace py = pybind11;

// C-contiguous arrays of one type; ensure() converts (a copy) where an array is not one.
using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

inline std::vector<std::int64_t> dims_of(const py::array& a) {
  return std::vector<std::int64_t>(a.shape(), a.shape() + a.ndim());
}

inline Shape shape_of(const std::vector<std::int64_t>& dims) {
  return Shape(std::span<const std::int64_t>(dims));
}

inline py::tuple shape_tuple(const Shape& s) {
  py::tuple t(static_cast<std::size_t>(s.rank()));
  for (int i = 0; i < s.rank(); ++i) t[static_cast<std::size_t>(i)] = s[i];
  return t;
}

// {"x": (4, 3)} -> InputShapes, in the dict's order.
inline InputShapes shapes_of(const py::dict& d) {
  InputShapes s;
  for (const auto& [k, v] : d)
    s.push_back({py::cast<std::string>(k), shape_of(py::cast<std::vector<std::int64_t>>(v))});
  return s;
}

// Feeds: float32 and int32 arrays are viewed where they are C-contiguous (no copy); float64
// is converted to float32, as the C++ Feed converts doubles. Anything else is a FeedError
// naming the input. The items view the names and arrays a Kept holds while the run lasts.
struct Kept {
  std::deque<std::string> names;  // a deque: FeedItem views the names, which must not move
  std::vector<py::array> arrays;
};
std::vector<FeedItem> feeds_of(const py::dict& feeds, Kept& kept);

// A new array of the value `key` (a Node or a name) of a compiled or dynamic graph holds.
template <class G, class K>
py::array read_array(const G& g, const K& key, DType dtype) {
  const Shape s = g.shape(key);
  std::vector<py::ssize_t> dims(static_cast<std::size_t>(s.rank()));
  for (int i = 0; i < s.rank(); ++i) dims[static_cast<std::size_t>(i)] = s[i];
  if (dtype == DType::i32) {
    const std::vector<std::int32_t> v = g.read_i32(key);
    I32 out(dims);
    std::copy(v.begin(), v.end(), out.mutable_data());
    return out;
  }
  const std::vector<float> v = g.read(key);
  F32 out(dims);
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

// A writable C-contiguous array of `T`'s dtype viewed as a span (UsageError naming `what`).
template <class T>
inline std::span<T> writable(py::array& a, const char* what) {
  if (!a.dtype().is(py::dtype::of<T>()) || !(a.flags() & py::array::c_style) || !a.writeable()) {
    throw UsageError(std::string(what) + " writes into a writable C-contiguous " +
                     py::str(py::dtype::of<T>()).cast<std::string>() + " array");
  }
  return {static_cast<T*>(a.mutable_data()), static_cast<std::size_t>(a.size())};
}

// What each translation unit binds.
void bind_runtime(py::module_& m);  // platforms, compiling, compiled and dynamic graphs
void bind_io(py::module_& m);       // hetgraph.data and hetgraph.onnx

}  // namespace hetgraph::python
