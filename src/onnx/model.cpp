// SPDX-License-Identifier: Apache-2.0
// Model::compile: the one part of an imported model that needs the runtime (kept apart so the
// import fuzz target builds without it).
#include <algorithm>
#include <utility>

#include "hetgraph/onnx.hpp"

namespace hetgraph::onnx {

namespace {
bool built_for(const Model& m, const InputShapes& shapes) {
  bool same = true;
  for (const auto& [name, s] : shapes) {
    auto it = std::find_if(m.input_shapes.begin(), m.input_shapes.end(),
                           [&](const auto& p) { return p.first == name; });
    same = same && it != m.input_shapes.end() && it->second == s;
  }
  return same;
}
}  // namespace

CompiledGraph Model::compile(const GraphCompiler& compiler, const InputShapes& shapes) const& {
  if (!built_for(*this, shapes)) return with_shapes(shapes).compile(compiler);
  return compiler.compile(graph, input_shapes, outputs);
}

CompiledGraph Model::compile(const GraphCompiler& compiler, const InputShapes& shapes) && {
  if (!built_for(*this, shapes)) return with_shapes(shapes).compile(compiler);
  return compiler.compile(std::move(graph), input_shapes, outputs);
}

}  // namespace hetgraph::onnx
