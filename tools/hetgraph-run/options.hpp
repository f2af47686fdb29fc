// SPDX-License-Identifier: Apache-2.0
// hetgraph-run's command line, apart so the tests and the command-line fuzz target parse
// exactly what the program does.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hetgraph/cli.hpp"
#include "hetgraph/onnx.hpp"
#include "hetgraph/tool.hpp"

namespace hgrun {

struct Options : hetgraph::tool::EngineFlags {
  std::string model;
  std::vector<std::pair<std::string, std::string>> inputs;                // --input name=file.pb
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;  // --shape name=AxB
  std::string output_dir, trace;
  int repeat = 10, warmup = 3, seed = 1;
  bool json = false, fuse = true, winograd = false;
  bool profile = false;  // --profile: time by op kind and the top nodes (in the JSON with --json)
  // --no-own-winograd, --no-layouts-through, --no-grouped-layouts, --no-concat-in-place,
  // --no-packed-weights, --no-layer-norm, --no-matmul-bias, --no-gelu, --no-attention,
  // --no-attention-transposes, --no-channel-affine, --no-lstm-cells, --no-recurrent-sequences,
  // --no-gru-cells,
  // --no-slice-views, --no-layout-search: CompileOptions::Experimental's own_winograd,
  // layouts_through_pool_concat, grouped_conv_layouts, concat_in_place, packed_weights,
  // layer_norm_nodes, matmul_bias, gelu_nodes, attention_nodes, attention_transposes,
  // channel_affine, lstm_cells, recurrent_sequences, gru_cells, slice_views, layout_search
  bool own_winograd = true, layouts_through = true, grouped_layouts = true, concat_in_place = true,
       packed_weights = true, layer_norm = true, matmul_bias = true, gelu = true, attention = true,
       attention_transposes = true, channel_affine = true, lstm_cells = true,
       recurrent_sequences = true, gru_cells = true, slice_views = true, layout_search = true;
  // The import's budgets (ImportOptions): --max-import-nodes, --max-import-host-bytes,
  // --max-import-tensor-bytes, --max-import-seconds; a model over one fails naming the flag.
  // And --float64-as-float32 (ImportOptions::float64_as_float32).
  hetgraph::onnx::ImportOptions budgets;
};

/// The flag that sets the ImportOptions budget an import error names, or nullptr.
inline const char* budget_flag(std::string_view what) {
  static constexpr std::pair<const char*, const char*> kFlags[] = {
      {"ImportOptions::max_nodes", "--max-import-nodes"},
      {"ImportOptions::max_host_bytes", "--max-import-host-bytes"},
      {"ImportOptions::max_tensor_bytes", "--max-import-tensor-bytes"},
      {"ImportOptions::max_seconds", "--max-import-seconds"}};
  for (const auto& [option, flag] : kFlags) {
    if (what.find(option) != std::string_view::npos) return flag;
  }
  return nullptr;
}

inline constexpr const char* kUsage =
    "usage: hetgraph-run MODEL.onnx [--platform cpu|opencl]\n"
    "                    [--engine sequential|shared-queue|critical-path|auto] [--executors "
    "NxT|auto]\n"
    "                    (opencl: --engine out-of-order|in-order) [--threads N]\n"
    "                    [--input [NAME=]FILE.pb ...] [--shape NAME=DxDxD ...] [--output-dir DIR]\n"
    "                    [--repeat 10] [--warmup 3] [--trace FILE] [--profile] [--seed N]\n"
    "                    [--no-fuse] [--winograd] [--no-own-winograd] [--no-layouts-through]\n"
    "                    [--no-grouped-layouts] [--no-concat-in-place] [--no-packed-weights]\n"
    "                    [--no-layer-norm] [--no-matmul-bias] [--no-gelu] [--no-attention]\n"
    "                    [--no-attention-transposes]\n"
    "                    [--no-channel-affine] [--no-lstm-cells] [--no-recurrent-sequences]\n"
    "                    [--no-gru-cells]\n"
    "                    [--no-slice-views] [--no-layout-search] [--json]\n"
    "                    [--float64-as-float32]\n"
    "                    [--max-import-nodes N] [--max-import-host-bytes N]\n"
    "                    [--max-import-tensor-bytes N] [--max-import-seconds S]\n"
    "Inputs come from ONNX TensorProto files (the backend tests' format; a file without NAME= is\n"
    "the next input in the model's order) or are random (floats in\n"
    "[-1, 1), integers 0) in the shape the model declares, dynamic dims 1 unless --shape says.\n"
    "--shape given more than once for an input runs the model at each: the k-th --shape of every\n"
    "input (or its last) makes the k-th run, one report each, in one process.\n"
    "--output-dir writes each output as DIR/<output name>.pb.\n"
    "--profile prints the timed runs' time by op kind and the 20 slowest nodes with their kernels\n"
    "and shapes; with --json it is the line's \"profile\" object instead (every node).\n"
    "--float64-as-float32 runs a model with double tensors in float32 (refused otherwise).\n"
    "The import's budgets against hostile models (a model over one fails naming the flag to\n"
    "raise): --max-import-nodes (ONNX nodes, unrolled loops counted; default 1048576),\n"
    "--max-import-host-bytes (tensors computed at import; default 8 GiB),\n"
    "--max-import-tensor-bytes (the largest input or node; default 64 GiB) and\n"
    "--max-import-seconds (default 300).";

/// "name=value" split at the first '='; a UsageError naming the flag otherwise.
inline std::pair<std::string, std::string> name_value(std::string_view flag, std::string_view v) {
  const auto eq = v.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == v.size()) {
    throw hetgraph::cli::UsageError(std::string(flag) + ": '" + std::string(v.substr(0, 200)) +
                                    "' is not NAME=VALUE");
  }
  return {std::string(v.substr(0, eq)), std::string(v.substr(eq + 1))};
}

inline hetgraph::cli::Parser parser(Options& o) {
  using hetgraph::cli::UsageError;
  hetgraph::cli::Parser p("hetgraph-run", kUsage);
  p.positional("MODEL.onnx", o.model);
  hetgraph::tool::add_engine_flags(p, o);
  p.repeated("--input",
             [&o](std::string_view v) {
               // FILE alone: the next model input in order (the backend tests' input_N.pb).
               if (v.find('=') == std::string_view::npos && !v.empty()) {
                 o.inputs.push_back({"", std::string(v)});
                 return;
               }
               o.inputs.push_back(name_value("--input", v));
             })
      .repeated(
          "--shape",
          [&o](std::string_view v) {
            auto [name, dims] = name_value("--shape", v);
            std::vector<std::int64_t> d;
            std::size_t at = 0;
            while (true) {
              const std::size_t x = dims.find('x', at);
              d.push_back(hetgraph::cli::to_int("--shape", dims.substr(at, x - at), 1, 1 << 30));
              if (x == std::string::npos) break;
              at = x + 1;
            }
            if (d.size() > static_cast<std::size_t>(hetgraph::Shape::kMaxRank))
              throw UsageError("--shape: " + name + " has rank above " +
                               std::to_string(hetgraph::Shape::kMaxRank));
            o.shapes.push_back({name, d});
          })
      .text("--output-dir", o.output_dir)
      .integer("--repeat", o.repeat, 1, 1'000'000'000)
      .integer("--warmup", o.warmup, 0, 1'000'000'000)
      .integer("--seed", o.seed, 0, 1'000'000'000)
      .text("--trace", o.trace)
      .flag("--profile", o.profile)
      .flag("--no-fuse", o.fuse, false)
      .flag("--winograd", o.winograd)
      .flag("--no-own-winograd", o.own_winograd, false)
      .flag("--no-layouts-through", o.layouts_through, false)
      .flag("--no-grouped-layouts", o.grouped_layouts, false)
      .flag("--no-packed-weights", o.packed_weights, false)
      .flag("--no-layer-norm", o.layer_norm, false)
      .flag("--no-gelu", o.gelu, false)
      .flag("--no-channel-affine", o.channel_affine, false)
      .flag("--no-lstm-cells", o.lstm_cells, false)
      .flag("--no-recurrent-sequences", o.recurrent_sequences, false)
      .flag("--no-slice-views", o.slice_views, false)
      .flag("--no-layout-search", o.layout_search, false)
      .flag("--no-gru-cells", o.gru_cells, false)
      .flag("--no-matmul-bias", o.matmul_bias, false)
      .flag("--no-attention", o.attention, false)
      .flag("--no-attention-transposes", o.attention_transposes, false)
      .flag("--no-concat-in-place", o.concat_in_place, false)
      .flag("--json", o.json)
      .flag("--float64-as-float32", o.budgets.float64_as_float32)
      .custom("--max-import-nodes",
              [&o](std::string_view v) {
                o.budgets.max_nodes =
                    hetgraph::cli::to_int("--max-import-nodes", v, 1, std::int64_t{1} << 40);
              })
      .custom("--max-import-host-bytes",
              [&o](std::string_view v) {
                o.budgets.max_host_bytes =
                    hetgraph::cli::to_int("--max-import-host-bytes", v, 0, std::int64_t{1} << 62);
              })
      .custom("--max-import-tensor-bytes",
              [&o](std::string_view v) {
                o.budgets.max_tensor_bytes =
                    hetgraph::cli::to_int("--max-import-tensor-bytes", v, 4, std::int64_t{1} << 62);
              })
      .real("--max-import-seconds", o.budgets.max_seconds, 0, 1e9, hetgraph::cli::Bound::open);
  return p;
}

}  // namespace hgrun
