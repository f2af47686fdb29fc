// SPDX-License-Identifier: Apache-2.0
// A double-precision reference interpreter for hetgraph graphs, written independently of the
// kernels (plain index arithmetic, no tricks). Op tests compare platforms against it, and
// gradient tests take finite differences with it.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "hetgraph/graph.hpp"

namespace ref {

struct Array {
  hetgraph::Shape shape;
  std::vector<double> v;

  Array() = default;
  Array(hetgraph::Shape s, std::vector<double> values) : shape(s), v(std::move(values)) {}
  explicit Array(hetgraph::Shape s) : shape(s), v(static_cast<std::size_t>(s.numel()), 0.0) {}
  std::size_t size() const { return v.size(); }
};

using Values = std::map<std::string, Array>;

/// Evaluates `outputs` given input (and optionally variable) values by name. Variables not
/// given use their zero/fill initialiser.
std::vector<Array> evaluate(const hetgraph::Graph& g, std::span<const hetgraph::Node> outputs,
                            const Values& inputs, const Values& variables = {});

/// f(a, b) element by element, a and b broadcast as numpy does.
Array broadcast_binary(const Array& a, const Array& b,
                       const std::function<double(double, double)>& f);

}  // namespace ref
