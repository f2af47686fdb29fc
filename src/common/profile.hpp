// SPDX-License-Identifier: Apache-2.0
// The profile of a compiled graph's runs (CompiledGraph::start_profile): a NodeSink that sums
// the per-node events the platforms record for traces, by node, into a public Profile.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/executable.hpp"

namespace hetgraph::detail {

class ProfileCollector final : public NodeSink {
 public:
  void add(const Executable& exe, std::uint32_t node, int lane, std::int64_t start_ns,
           std::int64_t end_ns, std::int64_t run) override;
  /// A run's events are all in: counts it.
  void end_run() { ++runs_; }
  /// The profile so far: nodes and op kinds by time, largest first.
  Profile result() const;

 private:
  struct Entry {
    Profile::Node node;  // name, op, kernel and shapes set when first seen
    std::int64_t ns = 0;
  };
  // A heterogeneous graph's parts number their nodes apart: a node is its plan's and index.
  std::map<std::pair<const Executable*, std::uint32_t>, std::size_t> index_;
  std::vector<Entry> entries_;
  std::int64_t runs_ = 0;
};

}  // namespace hetgraph::detail
