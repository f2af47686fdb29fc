// SPDX-License-Identifier: Apache-2.0
#include "soak_checkpoints.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace soak {

namespace fs = std::filesystem;
using namespace hetgraph;

std::string StateKey::text() const {
  return std::to_string(serial) + " " + std::to_string(thread) + " " + std::to_string(gen);
}

namespace {

// Element i of the state `k`: integers below 2^24, exact as floats, different for every key
// and position (a block of another save, or of zeros, does not match).
float pattern(const StateKey& k, std::size_t i) {
  std::uint32_t v = static_cast<std::uint32_t>(k.serial) * 0x9E3779B1u ^
                    static_cast<std::uint32_t>(k.thread) * 0x85EBCA77u ^
                    static_cast<std::uint32_t>(k.gen) * 0xC2B2AE3Du;
  v += static_cast<std::uint32_t>(i) * 0x27D4EB2Fu;
  v ^= v >> 15;
  v *= 0x2C1B3C6Du;
  v ^= v >> 12;
  return static_cast<float>(v >> 8);
}

}  // namespace

CheckpointGraph::CheckpointGraph(int elements)
    : elements_(elements),
      w_(g_.variable("W", {elements})),
      id_(g_.variable("id", {3})),
      cg_(GraphCompiler(Platform::cpu({.engine = CpuEngine::sequential, .threads = 1}))
              .compile(g_, {}, {reduce_sum(w_) + reduce_sum(id_)})) {}

void CheckpointGraph::set(const StateKey& k) {
  std::vector<float> w(static_cast<std::size_t>(elements_));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = pattern(k, i);
  cg_.write(w_, w);
  const std::vector<float> id = {static_cast<float>(k.serial), static_cast<float>(k.thread),
                                 static_cast<float>(k.gen)};
  cg_.write(id_, id);
}

void CheckpointGraph::save(const std::string& path) const {
  cg_.save(path);
}

std::optional<StateKey> CheckpointGraph::load(const std::string& path, std::string& why) {
  try {
    cg_.load(path);
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
  const std::vector<float> id = cg_.read(id_), w = cg_.read(w_);
  const StateKey k{static_cast<int>(id[0]), static_cast<int>(id[1]), static_cast<int>(id[2])};
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = w.size(); i-- > 0;) {
    if (w[i] != pattern(k, i)) {
      ++wrong;
      first = i;
    }
  }
  if (wrong > 0) {
    why = "W is not state " + k.text() + "'s at " + std::to_string(wrong) + " of " +
          std::to_string(w.size()) + " elements, the first " + std::to_string(first);
    return std::nullopt;
  }
  return k;
}

std::string checkpoint_path(const Options& o, int index) {
  if (index < o.shared_checkpoints)
    return o.checkpoint_dir + "/shared-" + std::to_string(index) + ".ckpt";
  const int p = index - o.shared_checkpoints;
  return o.checkpoint_dir + "/private-" + std::to_string(p / o.checkpoint_threads) + "-" +
         std::to_string(p % o.checkpoint_threads) + ".ckpt";
}

int private_checkpoint(const Options& o, int slot, int thread) {
  return o.shared_checkpoints + slot * o.checkpoint_threads + thread;
}

void checkpoint_loop(const Options& o, int thread, const std::atomic<bool>& stop) {
  CheckpointGraph cg(o.checkpoint_elements), reader(o.checkpoint_elements);
  std::mt19937 rng(static_cast<std::uint32_t>(o.seed) * 31u +
                   static_cast<std::uint32_t>(o.serial) * 7919u +
                   static_cast<std::uint32_t>(thread));
  const int shared = o.shared_checkpoints, mine = private_checkpoint(o, o.slot, thread);
  std::vector<int> saved_shared;  // shared paths this thread has completed a save to
  bool damaged = false;
  for (int gen = 1; !stop.load(); ++gen) {
    const StateKey k{o.serial, thread, gen};
    cg.set(k);
    const int target =
        shared == 0 || rng() % 2 ? mine : static_cast<int>(rng() % static_cast<unsigned>(shared));
    const std::string path = checkpoint_path(o, target);
    say("ckpt saving %d %s", target, k.text().c_str());
    try {
      cg.save(path);
    } catch (const Error& e) {
      say("ckpt error %d %s %s", target, k.text().c_str(), e.what());
      continue;
    }
    say("ckpt saved %d %s", target, k.text().c_str());
    std::string why;
    if (target == mine) {
      if (o.damage_checkpoint && !damaged && gen >= 2) {  // the test hook: a checkpoint lost
        fs::resize_file(path, fs::file_size(path) / 2);
        damaged = true;
      }
      // Nobody else writes this path: it holds exactly what was just saved.
      const auto got = reader.load(path, why);
      if (got && *got == k)
        say("ckpt loaded %d %s", target, got->text().c_str());
      else
        say("ckpt lost %d after saving %s: %s", target, k.text().c_str(),
            got ? ("it holds " + got->text()).c_str() : why.c_str());
    } else if (std::find(saved_shared.begin(), saved_shared.end(), target) == saved_shared.end()) {
      saved_shared.push_back(target);
    }
    // A shared path saved before must load whole, whichever process saved it last.
    if (!saved_shared.empty()) {
      const int j = saved_shared[rng() % saved_shared.size()];
      const auto got = reader.load(checkpoint_path(o, j), why);
      if (got)
        say("ckpt loaded %d %s", j, got->text().c_str());
      else
        say("ckpt lost %d %s", j, why.c_str());
    }
    if (o.checkpoint_pause_ms > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(
          rng() % (static_cast<unsigned>(o.checkpoint_pause_ms) * 1000u + 1u)));
  }
}

CheckpointLedger::CheckpointLedger(const Options& o) : o_(o), reader_(o.checkpoint_elements) {}

void CheckpointLedger::problem(const std::string& what) {
  ++lost;
  std::fprintf(stderr, "soak: lost checkpoint: %s\n", what.c_str());
}

bool CheckpointLedger::line(int slot, const std::string& text, Clock::time_point now) {
  char word[16] = {};
  int index = 0, consumed = 0;
  if (std::sscanf(text.c_str(), "ckpt %15s %d %n", word, &index, &consumed) < 2) return false;
  const std::string w = word, rest = text.substr(static_cast<std::size_t>(consumed));
  StateKey k;
  const bool keyed = std::sscanf(rest.c_str(), "%d %d %d", &k.serial, &k.thread, &k.gen) == 3;
  Path& p = paths_[index];
  const bool is_private = index >= o_.shared_checkpoints;
  if (w == "saving" && keyed) {
    p.started.insert(k);
    if (is_private) p.in_flight = k;
    saving_[{slot, k.thread}] = now;
  } else if (w == "saved" && keyed) {
    ++saves;
    p.completed = true;
    if (is_private) {
      p.last_saved = k;
      p.in_flight.reset();
    }
    const auto it = saving_.find({slot, k.thread});
    if (it != saving_.end()) {
      save_seconds_ += seconds(it->second, now);
      ++timed_saves_;
      saving_.erase(it);
    }
  } else if (w == "loaded" && keyed) {
    ++loads;
    if (!is_private) p.loaded.push_back(k);
  } else if (w == "lost") {
    problem(checkpoint_path(o_, index) + ": " + rest);
  } else if (w == "error" && keyed) {
    ++save_errors;
    std::fprintf(stderr, "soak: a save to %s failed: %s\n", checkpoint_path(o_, index).c_str(),
                 rest.c_str());
    saving_.erase(std::make_pair(slot, k.thread));
    if (is_private) p.in_flight.reset();  // a failed save leaves the previous checkpoint
  } else {
    return false;
  }
  return true;
}

bool CheckpointLedger::saving(int slot) const {
  const auto it = saving_.lower_bound({slot, 0});
  return it != saving_.end() && it->first.first == slot;
}

double CheckpointLedger::mean_save_seconds() const {
  return timed_saves_ > 0 ? save_seconds_ / static_cast<double>(timed_saves_) : 0.005;
}

void CheckpointLedger::worker_ended(int slot, pid_t pid, bool killed) {
  if (killed) {
    ++kills;
    if (saving(slot)) ++kills_in_save;
    const std::string mine = ".tmp." + std::to_string(pid) + ".";
    for (const auto& e : fs::directory_iterator(o_.checkpoint_dir)) {
      if (e.path().filename().string().find(mine) != std::string::npos) {
        ++kills_leaving_temporary;
        break;
      }
    }
  }
  for (auto it = saving_.lower_bound({slot, 0}); it != saving_.end() && it->first.first == slot;)
    it = saving_.erase(it);
  for (int t = 0; t < o_.checkpoint_threads; ++t) {
    const int index = private_checkpoint(o_, slot, t);
    Path& p = paths_[index];
    if (!p.last_saved && !p.in_flight) continue;  // never saved
    const std::string path = checkpoint_path(o_, index);
    std::string why;
    const auto got = reader_.load(path, why);
    ++loads;
    if (!got) {
      // Killed inside the first save to it, before the rename: there is no checkpoint yet.
      if (!p.last_saved && !fs::exists(path)) {
        p.in_flight.reset();
        continue;
      }
      problem(path + " after its worker ended: " + why);
    } else if (*got != p.last_saved && *got != p.in_flight) {
      problem(path + " holds state " + got->text() + " after its worker ended; its last save " +
              (p.last_saved ? p.last_saved->text() : "none") + ", under way " +
              (p.in_flight ? p.in_flight->text() : "none"));
    } else {
      p.last_saved = *got;  // the save under way may have completed its rename
    }
    p.in_flight.reset();
  }
}

void CheckpointLedger::finish() {
  for (int j = 0; j < o_.shared_checkpoints; ++j) {
    Path& p = paths_[j];
    if (p.started.empty()) continue;
    const std::string path = checkpoint_path(o_, j);
    std::string why;
    const auto got = reader_.load(path, why);
    ++loads;
    if (!got) {
      // A shared path every save of which was killed before its rename has no checkpoint.
      if (p.completed || fs::exists(path)) problem(path + " at the end: " + why);
    } else {
      p.loaded.push_back(*got);
    }
    for (const StateKey& k : p.loaded) {
      if (!p.started.count(k)) {
        problem(path + " gave state " + k.text() + ", which no worker saved to it");
        break;
      }
    }
  }
  // The next save to a path removes the temporaries of saves killed half-way: after one to
  // every path, the folder holds none.
  reader_.set({0, 0, 0});
  for (const auto& [index, p] : paths_) reader_.save(checkpoint_path(o_, index));
  for (const auto& e : fs::directory_iterator(o_.checkpoint_dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) {
      ++orphaned_temporaries;
      std::fprintf(stderr, "soak: a temporary left behind: %s\n", e.path().c_str());
    }
  }
}

}  // namespace soak
