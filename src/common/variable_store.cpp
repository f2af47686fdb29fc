// SPDX-License-Identifier: Apache-2.0
#include "common/variable_store.hpp"

#include <utility>

#include "hetgraph/error.hpp"

namespace hetgraph {

VariableStore::VariableStore() : impl_(std::make_shared<Impl>()) {}

VariableStore VariableStore::none() {
  return VariableStore(nullptr);
}

std::size_t VariableStore::size() const {
  if (!impl_) return 0;
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->blocks.size();
}

std::size_t VariableStore::bytes() const {
  if (!impl_) return 0;
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::size_t b = 0;
  for (const auto& [name, block] : impl_->blocks) b += block.bytes;
  return b;
}

VariableStore::Impl::Binding VariableStore::Impl::bind(
    const detail::Plan& p, const std::string& where,
    const std::function<Block(std::size_t bytes)>& make) {
  std::lock_guard<std::mutex> lock(mu);
  if (platform.empty()) {
    platform = where;
  } else if (platform != where) {
    throw PlatformError("a VariableStore holds memory of one platform: it has " + platform +
                        "'s, and this graph is compiled for " + where);
  }
  Binding b;
  b.buffer.assign(p.buffer_bytes.size(), nullptr);
  b.preset.assign(p.nodes.size(), 0);
  for (std::uint32_t v : p.variables) {
    const detail::PlanNode& n = p.nodes[v];
    if (n.buffer < 0) continue;
    const auto buf = static_cast<std::size_t>(n.buffer);
    const std::size_t bytes = p.buffer_bytes[buf];
    const std::string& key = n.name.empty() ? n.label : n.name;
    auto it = blocks.find(key);
    if (it != blocks.end()) {
      const Block& have = it->second;
      if (have.shape != n.type.shape || have.dtype != n.type.dtype || have.bytes < bytes) {
        throw ShapeError("variable " + n.label + " is " + n.type.shape.str() + " " +
                         std::string(dtype_name(n.type.dtype)) + " in this graph and " +
                         have.shape.str() + " " + std::string(dtype_name(have.dtype)) +
                         " in the VariableStore it is compiled with");
      }
      b.preset[v] = 1;
    } else {
      Block made = make(bytes);
      made.shape = n.type.shape;
      made.dtype = n.type.dtype;
      made.bytes = bytes;
      it = blocks.emplace(key, std::move(made)).first;
    }
    b.buffer[buf] = it->second.data;
  }
  return b;
}

GraphCompiler detail::sharing_variables(GraphCompiler c, std::optional<VariableStore>& store) {
  if (c.options().variables) {
    store = c.options().variables;
  } else if (c.platform().devices().size() == 1) {
    store.emplace();
    CompileOptions o = c.options();
    o.variables = *store;
    c = GraphCompiler(c.platform(), o);
  }
  return c;
}

}  // namespace hetgraph
