// SPDX-License-Identifier: Apache-2.0
// Checkpoints for hetgraph-soak --checkpoints: worker threads save and load them to paths of
// their own and to paths every worker shares, while the driver kills workers in the middle of
// saves and keeps a ledger of what each path may hold.
//
// Every saved state says who wrote it: the variable `id` holds its key (the worker's spawn
// serial, the thread, the thread's generation) and `W` a pattern drawn from the key, so a load
// tells which save it got and whether the file is whole (a mix of two saves does not match).
//
// Worker lines (stdout; P is the path's index, then the key):
//   ckpt saving P S T G / ckpt saved P S T G   around each save
//   ckpt loaded P S T G                        a load that gave a whole state
//   ckpt lost P WHY                            a path saved before that no longer loads whole,
//                                              or a private path that does not hold what was
//                                              just saved to it
//   ckpt error P S T G WHY                     a save that failed
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "hetgraph/hetgraph.hpp"
#include "soak.hpp"
#include "soak_process.hpp"

namespace soak {

struct StateKey {
  int serial = 0, thread = 0, gen = 0;
  auto operator<=>(const StateKey&) const = default;
  std::string text() const;
};

/// A compiled graph whose two variables are the checkpointed state.
class CheckpointGraph {
 public:
  explicit CheckpointGraph(int elements);
  void set(const StateKey& k);
  void save(const std::string& path) const;
  /// The state `path` holds, or nothing and `why` (the load failed, or the file is not one
  /// whole saved state).
  std::optional<StateKey> load(const std::string& path, std::string& why);

 private:
  int elements_;
  hetgraph::Graph g_;
  hetgraph::Node w_, id_;
  hetgraph::CompiledGraph cg_;
};

/// Path `index` of the folder: shared-J.ckpt for J < shared_checkpoints, then each worker
/// slot's threads' own, private-SLOT-THREAD.ckpt.
std::string checkpoint_path(const Options& o, int index);
int private_checkpoint(const Options& o, int slot, int thread);

/// A worker thread's saves and loads, until `stop`.
void checkpoint_loop(const Options& o, int thread, const std::atomic<bool>& stop);

/// The driver's account of every path, from the workers' lines.
class CheckpointLedger {
 public:
  explicit CheckpointLedger(const Options& o);
  /// Takes a "ckpt ..." line of the worker in `slot` (false for any other line).
  bool line(int slot, const std::string& text, Clock::time_point now);
  /// Whether a save of that worker is under way (its "saving" line came, its "saved" did not).
  bool saving(int slot) const;
  /// The mean time from a "saving" line to its "saved" line so far.
  double mean_save_seconds() const;
  /// Once the worker in `slot` has ended (killed or not): its private paths must hold their
  /// last completed save, or the one under way when it died. `killed`: by the driver.
  /// A killed worker whose temporary is still there died before the rename: proof that the
  /// kill came inside the save, not between saves.
  void worker_ended(int slot, pid_t pid, bool killed);
  /// After every worker: the shared paths must load, and every state loaded from them must be
  /// one that was saved; then a save to every path must leave no temporary behind.
  void finish();

  long long saves = 0, loads = 0, lost = 0, save_errors = 0, kills = 0, kills_in_save = 0,
            kills_leaving_temporary = 0, orphaned_temporaries = 0;

 private:
  struct Path {
    std::set<StateKey> started;                     // every save begun (shared paths)
    std::optional<StateKey> last_saved, in_flight;  // private paths: one writer at a time
    std::vector<StateKey> loaded;                   // shared paths: what loads gave
    bool completed = false;                         // a save to it returned
  };
  void problem(const std::string& what);
  const Options& o_;
  std::map<int, Path> paths_;
  // Saves under way, per (slot, thread): when their "saving" line came.
  std::map<std::pair<int, int>, Clock::time_point> saving_;
  double save_seconds_ = 0;
  long long timed_saves_ = 0;
  CheckpointGraph reader_;
};

}  // namespace soak
