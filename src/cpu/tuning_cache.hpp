// SPDX-License-Identifier: Apache-2.0
// The tuning cache, like FFTW's wisdom: what the automatic engine chose for a graph on a
// machine (engine, executors x threads, per-op thread counts, the profiled node costs that give
// the critical-path levels), kept on disk so that a later process runs that configuration from
// its first run instead of searching again.
//
// An entry is a text file in $XDG_CACHE_HOME/hetgraph/tuning (else ~/.cache/hetgraph/tuning),
// named by a hash of its key: the graph's fingerprint (every node's op, type, inputs,
// dependencies and chosen kernel), the engine options that shape the search, and the machine
// (allowed cores and their caches, CPU model, hetgraph, oneDNN, hwloc and OpenMP versions).
// The key is written in the entry too and compared when it is read, with the node count and a
// checksum of the contents: an entry that does not match (stale) or does not parse (corrupt)
// is ignored with one note on stderr, and the search runs as if there were none. Entries are
// written to a temporary file and renamed, so a reader never sees half of one.
// HETGRAPH_TUNING_CACHE=0 turns the cache off (1 or unset: on; anything else is an error).
//
// A search that a process does not finish (it ended before the winner was clear) leaves its
// progress beside the entry (.progress: each candidate's profiled costs and timed runs), and the
// next process resumes from there, so programs that run a graph only a few times per process
// still reach a choice. The progress is checked like an entry and removed once one is stored.
//
//   TuningCache cache(graph_fingerprint, options);
//   if (auto c = cache.load(plan.nodes.size())) { /* run c->engine ... */ }
//   cache.store(choice);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hetgraph::detail::cpu {

/// A configuration the automatic engine settled on.
struct TunedChoice {
  std::string engine = "critical-path";  // or "sequential"
  int executors = 1, threads = 1;        // threads per executor (sequential: all of them)
  bool per_op_threads = false;
  std::size_t nodes = 0;          // of the plan it was tuned for
  std::vector<double> cost_us;    // critical-path: each node's profiled cost (its levels)
  std::vector<int> node_threads;  // per-op: each node's thread count
  std::size_t variant = 0;        // the layout search's entries: the plan it chose
};

/// An unfinished search: the candidates in the automatic engine's order.
struct SearchProgress {
  struct Candidate {
    std::string label;            // "critical-path 2x1", "sequential 1x2": must match
    bool warm = false;            // profiled (critical-path: cost_us holds its levels)
    std::vector<double> cost_us;  // critical-path, warm: each node's profiled cost
    std::vector<double> times;    // timed runs, seconds
    int turns = 0;
    bool dropped = false;
  };
  std::size_t nodes = 0;
  int rounds = 0;
  std::size_t turn = 0;  // the candidate whose turn it is
  int turn_runs = 0;     // its timed runs in this turn (0: the turn starts afresh)
  std::vector<Candidate> candidates;
};

class TuningCache {
 public:
  /// `graph`: a fingerprint of the compiled plan and its kernels; `options`: the engine options
  /// the search depended on. The machine is added here.
  TuningCache(std::uint64_t graph, std::string options);

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  /// The entry for this key, if there is a valid one for a plan of `nodes` nodes. A stale or
  /// corrupt entry gives nullopt and one note on stderr (once per file per process).
  std::optional<TunedChoice> load(std::size_t nodes) const;
  /// Writes (replaces) the entry and drops any progress; false when it could not (the cache is
  /// only an optimisation).
  bool store(const TunedChoice& c) const;
  /// The progress of an unfinished search for a plan of `nodes` nodes whose candidates are
  /// `labels`, if there is a valid one (else nullopt, with one note when it is stale or corrupt).
  std::optional<SearchProgress> load_progress(std::size_t nodes,
                                              const std::vector<std::string>& labels) const;
  bool store_progress(const SearchProgress& p) const;

  /// This machine, as the key describes it.
  static const std::string& machine();
  /// $XDG_CACHE_HOME/hetgraph/tuning, else $HOME/.cache/hetgraph/tuning; empty when off.
  static std::string directory();

 private:
  std::string key_;
  std::string path_;  // the entry; its progress is path_ + ".progress"
};

/// FNV-1a, 64 bits: fingerprints and checksums (not a cryptographic hash: a cache entry is a
/// hint whose structure is checked, never code).
std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h = 14695981039346656037ull);

}  // namespace hetgraph::detail::cpu
