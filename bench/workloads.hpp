// SPDX-License-Identifier: Apache-2.0
// hetgraph-bench workloads: each builds a graph (or a raw library call to compare against)
// and says how to feed and check it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hetgraph/hetgraph.hpp"

namespace bench {

struct Case {
  hetgraph::Graph graph;
  hetgraph::InputShapes shapes;
  std::vector<hetgraph::Node> fetches;   // compiled and kept
  std::vector<hetgraph::Node> checksum;  // summed into the checksum after the timed runs
  std::map<std::string, std::vector<float>> inputs;  // written once into the mapped buffers
  std::map<std::string, std::vector<std::int32_t>> int_inputs;
  int runs_per_sample = 1;  // runs timed together (tiny workloads)
  // A raw library call instead of a graph (the baseline a node is compared with).
  std::function<void()> raw;
  std::function<double()> raw_checksum;
  std::map<std::string, double> stats;  // extra numeric fields for the JSON line
  /// Write the inputs before every run and time that apart from the run (copy_s): the
  /// baseline report's setup / copy / compute split of single kernels.
  bool time_copies = false;
};

struct Workload {
  std::string name;
  std::string help;
  std::function<Case()> make;
};

/// Writes the case's inputs into the compiled graph's mapped buffers; the feeds that name them.
std::vector<hetgraph::FeedItem> mapped_feeds(const Case& c, hetgraph::CompiledGraph& cg);

/// Every workload, including parameterised families (e.g. matmul-MxKxN) resolved by name.
std::optional<Workload> find_workload(const std::string& name);
std::vector<std::string> workload_names();
/// The workload zoo (zoo.cpp): phased LSTM, PathNet, inception, wide & deep, kernels, ...
std::optional<Workload> find_zoo_workload(const std::string& name);
std::vector<std::string> zoo_workload_names();

}  // namespace bench
