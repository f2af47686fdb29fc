// Model::compile: the one part of an imported model that needs the runtime (kept apart so the
// import fuzz target builds without it).
#include <algorithm>

#include "hetgraph/onnx.hpp"

namespace hetgraph::onnx {

CompiledGraph Model::compile(const GraphCompiler& compiler, const InputShapes& shapes) const {
  bool same = true;
  for (const auto& [name, s] : shapes) {
    auto it = std::find_if(input_shapes.begin(), input_shapes.end(),
                           [&](const auto& p) { return p.first == name; });
    same = same && it != input_shapes.end() && it->second == s;
  }
  if (!same) return with_shapes(shapes).compile(compiler);
  return compiler.compile(graph, input_shapes, outputs);
}

}  // namespace hetgraph::onnx
