// SPDX-License-Identifier: Apache-2.0
// VariableStore's memory (include/hetgraph/compiler.hpp): one block per variable name, made by
// the platform of the first graph that needs it, bound into every graph compiled with the store.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/plan.hpp"
#include "hetgraph/compiler.hpp"

namespace hetgraph {

struct VariableStore::Impl {
  /// One variable's memory: a host pointer (CPU) or a cl_mem (OpenCL), which `owner` keeps.
  struct Block {
    Shape shape;
    DType dtype = DType::f32;
    std::size_t bytes = 0;
    void* data = nullptr;
    std::shared_ptr<void> owner;
  };

  /// What a plan's buffers are bound to: per planned buffer, the store's block of the variable
  /// it holds (null for every other buffer), and per node whether its value was in the store
  /// already (not to be initialised again).
  struct Binding {
    std::vector<void*> buffer;
    std::vector<char> preset;
  };

  /// Binds every variable of plan `p`, made on `platform` (a name that identifies the memory:
  /// "cpu", or an OpenCL device and context): blocks already in the store are checked against
  /// the variable's shape and type, the others are made by `make(bytes)`.
  Binding bind(const detail::Plan& p, const std::string& platform,
               const std::function<Block(std::size_t bytes)>& make);

  /// Bumped by every graph that writes a variable of the store (a run that writes variables,
  /// a host write): what kernels watching a weight for changes (packed copies) read.
  std::atomic<std::uint64_t> writes{0};

  std::mutex mu;
  std::string platform;
  std::unordered_map<std::string, Block> blocks;
};

namespace detail {
/// `c` compiling with a VariableStore for a DynamicGraph's plans to share: the one its options
/// name, else a new one; or `c` as it is on a heterogeneous platform, which takes none (its
/// plans copy their variables). `store` is set to the store used.
GraphCompiler sharing_variables(GraphCompiler c, std::optional<VariableStore>& store);
}  // namespace detail

}  // namespace hetgraph
