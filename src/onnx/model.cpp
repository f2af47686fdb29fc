// SPDX-License-Identifier: Apache-2.0
// Model::compile: the one part of an imported model that needs the runtime (kept apart so the
// import fuzz target builds without it).
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "common/variable_store.hpp"
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
// The outputs, then the state updates (ImportOptions::state).
std::vector<Node> fetches(const Model& m) {
  std::vector<Node> f = m.outputs;
  f.insert(f.end(), m.state_updates.begin(), m.state_updates.end());
  return f;
}
}  // namespace

CompiledGraph Model::compile(const GraphCompiler& compiler, const InputShapes& shapes) const& {
  if (!built_for(*this, shapes)) return with_shapes(shapes).compile(compiler);
  return compiler.compile(graph, input_shapes, fetches(*this));
}

CompiledGraph Model::compile(const GraphCompiler& compiler, const InputShapes& shapes) && {
  if (!built_for(*this, shapes)) return with_shapes(shapes).compile(compiler);
  const std::vector<Node> f = fetches(*this);
  return compiler.compile(std::move(graph), input_shapes, f);
}

DynamicGraph dynamic(const Model& model, const GraphCompiler& compiler, DynamicOptions options) {
  DynamicShapes shapes;
  for (const ValueDesc& v : model.input_info) {
    std::vector<Dim> dims;
    for (std::size_t a = 0; a < v.declared.size(); ++a) {
      if (v.declared[a] >= 0) {
        dims.emplace_back(v.declared[a]);
      } else {
        const bool named = a < v.dim_names.size() && !v.dim_names[a].empty();
        dims.emplace_back(named ? v.dim_names[a] : v.name + "." + std::to_string(a));
      }
    }
    shapes.push_back({v.name, std::move(dims)});
  }
  // The plans share one copy of the weights (a VariableStore) where the platform takes one.
  std::optional<VariableStore> store;
  DynamicGraph::Build build = [m = model, c = detail::sharing_variables(compiler, store)](
                                  const InputShapes& s) { return m.with_shapes(s).compile(c); };
  if (store) return DynamicGraph(std::move(build), std::move(shapes), *store, options);
  return DynamicGraph(std::move(build), std::move(shapes), options);
}

DynamicGraph dynamic(const std::string& path, const GraphCompiler& compiler,
                     const ImportOptions& import, DynamicOptions options) {
  return dynamic(read_model(path, import), compiler, options);
}

}  // namespace hetgraph::onnx
