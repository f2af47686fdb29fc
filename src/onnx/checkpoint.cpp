// SPDX-License-Identifier: Apache-2.0
// CompiledGraph::save / load: every variable of a compiled graph in one checkpoint file
// (the format: checkpoint_format.hpp). Variables are written in the compiled plan's order;
// load() matches them by name and checks everything before it writes any.
#include <algorithm>
#include <map>

#include "common/executable.hpp"
#include "hetgraph/compiler.hpp"
#include "hetgraph/dynamic.hpp"
#include "hetgraph/error.hpp"
#include "onnx/checkpoint_format.hpp"
#include "util/atomic_file.hpp"

namespace hetgraph {

void CompiledGraph::save(const std::string& path) const {
  detail::Executable& exe = live("save");
  const detail::Plan& p = exe.plan();
  for (std::uint32_t i : p.variables) {
    if (p.nodes[i].name.size() > detail::kMaxCheckpointName) {
      throw DataError(path + ": variable " + p.nodes[i].label + " has a name of " +
                      std::to_string(p.nodes[i].name.size()) + " bytes; a checkpoint holds " +
                      std::to_string(detail::kMaxCheckpointName) + " at most");
    }
  }
  detail::write_file_atomically(path, [&](const auto& write) {
    detail::CheckpointWriter w(write);
    w.header(static_cast<std::uint32_t>(p.variables.size()));
    std::vector<char> data;
    for (std::uint32_t i : p.variables) {
      const detail::PlanNode& n = p.nodes[i];
      const auto count = static_cast<std::size_t>(n.type.shape.numel());
      data.resize(count * 4);
      exe.read(i, data.data(), count, n.type.dtype, "save");
      w.entry(n.name, n.type.dtype == DType::f32,
              {n.type.shape.dims().begin(), n.type.shape.dims().end()}, data.data(), data.size());
    }
    w.trailer();
  });
}

LoadReport CompiledGraph::load(const std::string& path, const LoadOptions& options) {
  detail::Executable& exe = live("load");
  const detail::Plan& p = exe.plan();
  auto fail = [&](const std::string& why) { throw DataError(path + ": " + why); };
  std::map<std::string, std::uint32_t> vars;
  for (std::uint32_t i : p.variables) vars[p.nodes[i].name] = i;
  // Each variable of the file as soon as its dims are read, before its data is: a file of
  // another graph is refused without being read whole.
  auto check = [&](const detail::CheckpointEntry& e) {
    auto it = vars.find(e.name);
    if (it == vars.end()) {
      if (!options.strict) return;  // skipped, reported below
      fail("variable '" + e.name + "' is not a variable of the compiled graph" +
           " (load with {.strict = false} to skip it)");
    }
    const detail::PlanNode& n = p.nodes[it->second];
    Shape shape;
    try {
      shape = Shape(std::span<const std::int64_t>(e.dims));
    } catch (const ShapeError& x) {
      fail("variable '" + e.name + "': " + x.what());
    }
    const DType dtype = e.f32 ? DType::f32 : DType::i32;
    if (n.type.shape != shape || n.type.dtype != dtype) {
      fail("variable '" + e.name + "' is " + std::string(dtype_name(dtype)) + " " + shape.str() +
           " in the file, " + std::string(dtype_name(n.type.dtype)) + " " + n.type.shape.str() +
           " in the graph");
    }
  };
  const detail::CheckpointFile file = detail::read_checkpoint(path, check);
  LoadReport report;
  std::vector<std::pair<const detail::CheckpointEntry*, std::uint32_t>> writes;
  for (const auto& e : file.entries) {
    auto it = vars.find(e.name);
    if (it == vars.end()) {  // only where not strict: check() refused it otherwise
      report.not_in_graph.push_back(e.name);
      continue;
    }
    writes.push_back({&e, it->second});
    report.loaded.push_back(e.name);
    vars.erase(it);
  }
  for (const auto& [name, i] : vars) report.not_in_file.push_back(name);
  if (options.strict && !report.not_in_file.empty()) {
    std::string missing;
    for (const std::string& name : report.not_in_file)
      missing += (missing.empty() ? "'" : ", '") + name + "'";
    fail("the checkpoint lacks variable " + missing +
         " of the compiled graph (load with {.strict = false} to keep their values)");
  }
  // Everything checked: only now is the graph written.
  for (const auto& [e, i] : writes) {
    exe.write(i, file.bytes.data() + e->offset, e->bytes / 4, e->f32 ? DType::f32 : DType::i32,
              "load");
  }
  std::sort(report.loaded.begin(), report.loaded.end());
  std::sort(report.not_in_graph.begin(), report.not_in_graph.end());
  return report;
}

void DynamicGraph::save(const std::string& path) {
  state_plan("save").save(path);
}

LoadReport DynamicGraph::load(const std::string& path, const LoadOptions& options) {
  LoadReport r = state_plan("load").load(path, options);
  state_written();
  return r;
}

}  // namespace hetgraph
