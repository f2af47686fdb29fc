// SPDX-License-Identifier: Apache-2.0
// ONNX import on raw model bytes: parsing (protobuf, onnx::checker, ONNX shape inference and
// function bodies from libonnx) and building the graph for the declared shapes (dynamic dims
// 1). Anything but a hetgraph::Error is a bug; a built model's outputs must have the graph
// nodes and shapes it says.
#include <span>

#include "hetgraph/error.hpp"
#include "hetgraph/onnx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace ho = hetgraph::onnx;
  try {
    ho::ImportOptions o;
    o.dynamic_dim = 1;
    // Budgets of the whole import small enough that no input runs into libFuzzer's timeout.
    o.max_nodes = 1 << 16;
    o.max_seconds = 3;
    const ho::Model m =
        ho::import_bytes(std::as_bytes(std::span<const std::uint8_t>(data, size)), o, "fuzz.onnx");
    if (m.outputs.size() != m.output_info.size()) __builtin_trap();
    for (const auto& n : m.outputs) {
      if (!n.valid()) __builtin_trap();
    }
  } catch (const hetgraph::Error&) {
  }
  return 0;
}
