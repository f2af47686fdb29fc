// SPDX-License-Identifier: Apache-2.0
// hetgraph-soak: random DAGs run on every CPU engine, each run compared bitwise with the
// sequential engine, for as long as a nightly job likes (`make soak`, 100,000 runs).
//
//   build/tests/hetgraph-soak --runs 100000 [--seed 1] [--runs-per-config 4]
//                             [--dags-per-worker 250] [--hang-seconds 300]
//                             [--workers P] [--threads-per-worker T]
//                             [--checkpoints [--kill-seconds S] ...]
//   build/tests/hetgraph-soak --rank-rounds R [--min-ranks 2] [--max-ranks 4] ...
//
// The DAGs run in worker processes (this program again, with --worker), so a crash or a hang
// is counted and the soak goes on after the DAG that caused it. Each DAG is drawn from its
// own seed (seed + index), so any DAG can be replayed alone: --worker --first-dag D --dags 1.
// With --workers P, P workers run at once, each with T threads taking DAGs in turn
// (`make soak-concurrent`); with --checkpoints each worker also saves and loads checkpoints
// to paths of its own and shared ones meanwhile, and with --kill-seconds S the driver kills
// each worker with SIGKILL in the middle of a save about S seconds after it started
// (soak_checkpoints.hpp).
// --rank-rounds is the other soak, of ranks lost under mpirun (soak_ranks.cpp).
// Prints runs, mismatches, crashes, hangs, lost checkpoints, the workers' peak RSS and the
// wall time, as a summary and a JSON line; exits 1 when anything went wrong.
#include "soak.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hetgraph/cli.hpp"
#include "random_dag.hpp"
#include "soak_checkpoints.hpp"
#include "soak_process.hpp"

namespace soak {

using namespace hetgraph;

void say(const char* fmt, ...) {
  static std::mutex mu;
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard lk(mu);
  std::fputs(buf, stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

namespace {

struct Config {
  const char* label;
  CpuOptions options;
};

// Every engine, with several executor configurations; one thread per executor team, so the
// results must equal the one-thread sequential engine's bit for bit.
std::vector<Config> configs() {
  std::vector<Config> c;
  for (int e : {1, 2, 3}) {
    CpuOptions o;
    o.engine = CpuEngine::critical_path;
    o.executors = e;
    o.threads_per_executor = 1;
    c.push_back({e == 1   ? "critical-path 1x1"
                 : e == 2 ? "critical-path 2x1"
                          : "critical-path 3x1",
                 o});
  }
  for (int e : {2, 4}) {
    CpuOptions o;
    o.engine = CpuEngine::shared_queue;
    o.executors = e;
    o.threads_per_executor = 1;
    c.push_back({e == 2 ? "shared-queue 2x1" : "shared-queue 4x1", o});
  }
  CpuOptions inl;
  inl.engine = CpuEngine::critical_path;
  inl.executors = 2;
  inl.threads_per_executor = 1;
  inl.experimental.inline_below_us = 1e9;  // every node inline
  c.push_back({"critical-path 2x1 all inline", inl});
  CpuOptions seq;
  seq.threads = 1;
  c.push_back({"sequential again", seq});
  return c;
}

// DAG d on every configuration; says "mismatch ..." for each run that differs and returns
// the runs and mismatches.
std::pair<int, int> run_dag(const Options& o, int d, const std::vector<Config>& cs) {
  const std::vector<FeedItem> feeds = testing_util::random_dag_feeds();
  const InputShapes& shapes = testing_util::random_dag_shapes();
  std::mt19937 rng(static_cast<std::uint32_t>(o.seed) + static_cast<std::uint32_t>(d) * 7919u);
  const testing_util::RandomDag dag = testing_util::next_random_dag(rng, d);
  const std::vector<Node>& fetches = dag.sinks;
  const Graph& g = dag.graph;
  auto seq = GraphCompiler(Platform::cpu({.engine = CpuEngine::sequential, .threads = 1}))
                 .compile(g, shapes, fetches);
  seq.run(feeds);
  std::vector<std::vector<float>> want;
  for (const Node& f : fetches) want.push_back(seq.read(f));
  int runs = 0, mismatches = 0;
  auto check = [&](CompiledGraph& cg, const char* label) {
    for (int r = 0; r < o.runs_per_config; ++r) {
      cg.run(feeds);
      ++runs;
      for (std::size_t k = 0; k < fetches.size(); ++k) {
        const auto got = cg.read(fetches[k]);
        if (got.size() != want[k].size() ||
            std::memcmp(got.data(), want[k].data(), got.size() * sizeof(float)) != 0) {
          ++mismatches;
          say("mismatch dag %d config '%s' run %d fetch %zu", d, label, r, k);
          break;
        }
      }
    }
  };
  for (const Config& c : cs) {
    auto cg = GraphCompiler(Platform::cpu(c.options)).compile(g, shapes, fetches);
    check(cg, c.label);
  }
  if (d % 4 == 0) {  // the automatic engine tunes itself for a while: every fourth DAG
    CpuOptions a;
    a.engine = CpuEngine::automatic;
    auto cg = GraphCompiler(Platform::cpu(a)).compile(g, shapes, fetches);
    for (int k = 0; k < 8; ++k) check(cg, "auto");  // through its configuration search
  }
  return {runs, mismatches};
}

}  // namespace

// Runs DAGs [first, first + count) on threads_per_worker threads, each taking the next DAG;
// says "start dag D" before each and "dag D runs R mismatches M" after it, so the driver
// knows which DAGs were running when a worker died. Checkpoint threads run meanwhile.
int dag_worker(const Options& o) {
  const std::vector<Config> cs = configs();
  std::atomic<int> next{o.first_dag};
  std::atomic<bool> dags_done{false};
  auto dags = [&] {
    for (int d; (d = next.fetch_add(1)) < o.first_dag + o.dags;) {
      say("start dag %d", d);
      if (d == o.crash_dag) std::abort();
      try {
        const auto [runs, mismatches] = run_dag(o, d, cs);
        say("dag %d runs %d mismatches %d", d, runs, mismatches);
      } catch (const std::exception& e) {  // counted as a crash of the worker, DAG named
        std::fprintf(stderr, "hetgraph-soak worker: dag %d: %s\n", d, e.what());
        std::_Exit(1);
      }
    }
  };
  auto checkpoints = [&](int t) {
    try {
      checkpoint_loop(o, t, dags_done);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hetgraph-soak worker: checkpoint thread %d: %s\n", t, e.what());
      std::_Exit(1);
    }
  };
  std::vector<std::thread> savers;
  if (o.checkpoints) {
    for (int t = 0; t < o.checkpoint_threads; ++t) savers.emplace_back(checkpoints, t);
  }
  std::vector<std::thread> runners;
  for (int t = 1; t < o.threads_per_worker; ++t) runners.emplace_back(dags);
  dags();
  for (auto& t : runners) t.join();
  dags_done = true;
  for (auto& t : savers) t.join();
  return 0;
}

namespace {

struct Totals {
  long long runs = 0, mismatches = 0, crashes = 0, hangs = 0, dags = 0, interrupted = 0;
};

struct Range {
  int first = 0, count = 0;
};

// A worker process and what the driver knows of it.
struct Worker {
  Child child;
  Range range;
  std::vector<bool> begun;  // per DAG of the range
  int done = 0;
  std::set<int> running;  // begun, not reported done
  bool killed = false, hung = false;
  Clock::time_point last_progress;
  Clock::time_point kill_after = Clock::time_point::max();  // kill it in a save after this
  Clock::time_point kill_at = Clock::time_point::max();     // kill it now (inside that save)
};

class DagSoak {
 public:
  explicit DagSoak(const Options& o)
      : o_(o), self_(self_path()), slots_(static_cast<std::size_t>(o.workers)), rng_(o.seed) {
    if (o.checkpoints) ledger_.emplace(o);
  }

  int run();

 private:
  void spawn(int slot, Range r);
  void take(int slot, const std::string& line);
  void ended(int slot);
  std::string in_flight_text(const Worker& w) const;
  // A range of DAGs for a new worker, while the runs wanted are not all there or under way.
  bool next_range(Range& r);

  const Options& o_;
  const std::string self_;
  std::vector<Worker> slots_;
  std::vector<bool> active_ = std::vector<bool>(slots_.size(), false);
  std::deque<Range> pending_;  // DAGs given back by workers that died before running them
  std::set<int> rerun_;        // DAGs interrupted by a kill and queued again
  int next_dag_ = 0, serial_ = 0;
  Totals t_;
  std::optional<CheckpointLedger> ledger_;
  std::mt19937 rng_;
};

bool DagSoak::next_range(Range& r) {
  const long long per_dag = t_.dags > 0 ? std::max(1LL, t_.runs / t_.dags) : 30;
  long long under_way = 0;
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    if (active_[s]) under_way += (slots_[s].range.count - slots_[s].done) * per_dag;
  }
  const long long left = o_.runs - t_.runs - under_way;
  if (left <= 0) return false;
  if (!pending_.empty()) {
    r = pending_.front();
    pending_.pop_front();
    return true;
  }
  // Enough DAGs for the runs left at the rate seen so far, shared among the workers.
  const long long want = (left + per_dag - 1) / per_dag;
  const long long share = (want + o_.workers - 1) / o_.workers;
  r = {next_dag_, static_cast<int>(std::clamp<long long>(share, 1, o_.dags_per_worker))};
  next_dag_ += r.count;
  return true;
}

void DagSoak::spawn(int slot, Range r) {
  std::vector<std::string> args = {self_,
                                   "--worker",
                                   "--first-dag",
                                   std::to_string(r.first),
                                   "--dags",
                                   std::to_string(r.count),
                                   "--seed",
                                   std::to_string(o_.seed),
                                   "--runs-per-config",
                                   std::to_string(o_.runs_per_config),
                                   "--crash-dag",
                                   std::to_string(o_.crash_dag),
                                   "--threads-per-worker",
                                   std::to_string(o_.threads_per_worker)};
  if (o_.checkpoints) {
    const std::vector<std::string> more = {"--checkpoints",
                                           "--checkpoint-dir",
                                           o_.checkpoint_dir,
                                           "--slot",
                                           std::to_string(slot),
                                           "--serial",
                                           std::to_string(++serial_),
                                           "--checkpoint-threads",
                                           std::to_string(o_.checkpoint_threads),
                                           "--checkpoint-elements",
                                           std::to_string(o_.checkpoint_elements),
                                           "--shared-checkpoints",
                                           std::to_string(o_.shared_checkpoints),
                                           "--checkpoint-pause-ms",
                                           std::to_string(o_.checkpoint_pause_ms)};
    args.insert(args.end(), more.begin(), more.end());
    if (o_.damage_checkpoint) args.push_back("--damage-checkpoint");
  }
  Worker& w = slots_[static_cast<std::size_t>(slot)];
  w = Worker{};
  w.child = soak::spawn(args);
  w.range = r;
  w.begun.assign(static_cast<std::size_t>(r.count), false);
  w.last_progress = Clock::now();
  if (o_.checkpoints && o_.kill_seconds > 0) {
    std::uniform_real_distribution<double> after(0.5 * o_.kill_seconds, 1.5 * o_.kill_seconds);
    w.kill_after = w.last_progress + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(after(rng_)));
  }
  active_[static_cast<std::size_t>(slot)] = true;
}

void DagSoak::take(int slot, const std::string& line) {
  Worker& w = slots_[static_cast<std::size_t>(slot)];
  const auto now = Clock::now();
  int d = 0, runs = 0, mism = 0;
  if (std::sscanf(line.c_str(), "start dag %d", &d) == 1) {
    w.running.insert(d);
    if (d >= w.range.first && d < w.range.first + w.range.count)
      w.begun[static_cast<std::size_t>(d - w.range.first)] = true;
  } else if (std::sscanf(line.c_str(), "dag %d runs %d mismatches %d", &d, &runs, &mism) == 3) {
    t_.runs += runs;
    t_.mismatches += mism;
    ++t_.dags;
    ++w.done;
    w.running.erase(d);
    w.last_progress = now;
  } else if (ledger_ && ledger_->line(slot, line, now)) {
    // Once its time has come, kill the worker somewhere inside the save it has just begun.
    if (now >= w.kill_after && line.rfind("ckpt saving", 0) == 0 && !w.killed &&
        w.kill_at == Clock::time_point::max()) {
      std::uniform_real_distribution<double> in_save(0.0, ledger_->mean_save_seconds());
      w.kill_at = now + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(in_save(rng_)));
    }
  } else {
    std::fprintf(stderr, "soak: %s\n", line.c_str());
  }
}

std::string DagSoak::in_flight_text(const Worker& w) const {
  if (w.running.empty()) return "no dag";
  std::string s = w.running.size() == 1 ? "dag " : "dags ";
  for (int d : w.running) s += (d == *w.running.begin() ? "" : ", ") + std::to_string(d);
  return s;
}

void DagSoak::ended(int slot) {
  Worker& w = slots_[static_cast<std::size_t>(slot)];
  const pid_t pid = w.child.pid();
  const int status = w.child.wait();
  active_[static_cast<std::size_t>(slot)] = false;
  const bool clean = !w.hung && !w.killed && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (ledger_) ledger_->worker_ended(slot, pid, w.killed);
  if (clean && w.done == w.range.count) return;
  // DAGs not begun go back in the queue; those running when it died are skipped if they may
  // have caused it, and run again (once) if the driver killed it on purpose.
  for (int i = w.range.count; i-- > 0;) {
    if (w.begun[static_cast<std::size_t>(i)]) continue;
    int j = i;  // [j, i]: a run of DAGs not begun
    while (j > 0 && !w.begun[static_cast<std::size_t>(j - 1)]) --j;
    pending_.push_front({w.range.first + j, i - j + 1});
    i = j;
  }
  if (w.killed) {
    // Run again once: a DAG longer than the time between kills would be killed for ever.
    t_.interrupted += static_cast<long long>(w.running.size());
    for (int d : w.running) {
      if (rerun_.insert(d).second) pending_.push_back({d, 1});
    }
  } else if (w.hung) {
    ++t_.hangs;
    std::fprintf(stderr, "soak: %s (seed %d) hung for %d s\n", in_flight_text(w).c_str(), o_.seed,
                 o_.hang_seconds);
  } else {
    ++t_.crashes;
    std::fprintf(stderr, "soak: %s (seed %d) crashed the worker: %s\n", in_flight_text(w).c_str(),
                 o_.seed, describe_status(status).c_str());
  }
}

int DagSoak::run() {
  const auto t0 = Clock::now();
  long long report = o_.runs / 10;
  for (;;) {
    for (int s = 0; s < o_.workers; ++s) {
      Range r;
      if (!active_[static_cast<std::size_t>(s)] && next_range(r)) spawn(s, r);
    }
    std::vector<pollfd> fds;
    std::vector<int> which;
    auto wake = Clock::now() + std::chrono::seconds(1);  // hangs are looked for every second
    for (int s = 0; s < o_.workers; ++s) {
      if (!active_[static_cast<std::size_t>(s)]) continue;
      const Worker& w = slots_[static_cast<std::size_t>(s)];
      fds.push_back({w.child.fd(), POLLIN, 0});
      which.push_back(s);
      wake = std::min(wake, w.kill_at);
    }
    if (fds.empty()) break;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now());
    poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(0, ms.count())));
    const auto now = Clock::now();
    for (std::size_t i = 0; i < fds.size(); ++i) {
      const int s = which[i];
      Worker& w = slots_[static_cast<std::size_t>(s)];
      std::vector<std::string> lines;
      const bool open = fds[i].revents == 0 || w.child.read_available(lines);
      for (const auto& l : lines) take(s, l);
      if (!open) {
        ended(s);
        continue;
      }
      if (now >= w.kill_at && !w.killed) {
        w.child.signal(SIGKILL);
        w.killed = true;
      } else if (!w.killed && now - w.last_progress > std::chrono::seconds(o_.hang_seconds)) {
        w.child.signal(SIGKILL);  // no DAG finished for hang_seconds
        w.hung = true;
        w.killed = false;
      }
    }
    if (t_.runs >= report) {
      std::fprintf(stderr, "soak: %lld/%d runs, %lld dags, %lld mismatches, %lld crashes, %.0f s\n",
                   t_.runs, o_.runs, t_.dags, t_.mismatches, t_.crashes, seconds(t0, Clock::now()));
      while (report <= t_.runs) report += std::max(1, o_.runs / 10);
    }
  }
  if (ledger_) ledger_->finish();
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  const double wall = seconds(t0, Clock::now());
  const double rss = static_cast<double>(ru.ru_maxrss) / 1024.0;
  std::printf(
      "soak: runs %lld, dags %lld, mismatches %lld, crashes %lld, hangs %lld, peak RSS %.1f MiB "
      "(largest worker), wall %.1f s, seed %d, %zu engine configurations + auto, %d worker(s) "
      "x %d thread(s)\n",
      t_.runs, t_.dags, t_.mismatches, t_.crashes, t_.hangs, rss, wall, o_.seed, configs().size(),
      o_.workers, o_.threads_per_worker);
  std::string ckpt_json;
  long long lost = 0, errors = 0, orphans = 0;
  if (ledger_) {
    const CheckpointLedger& l = *ledger_;
    lost = l.lost;
    errors = l.save_errors;
    orphans = l.orphaned_temporaries;
    std::printf(
        "soak: checkpoints: saves %lld, loads %lld, lost %lld, failed saves %lld, workers killed "
        "%lld (%lld inside a save, %lld of them before its rename; %lld dags interrupted, each run "
        "again once), temporaries left %lld\n",
        l.saves, l.loads, l.lost, l.save_errors, l.kills, l.kills_in_save,
        l.kills_leaving_temporary, t_.interrupted, l.orphaned_temporaries);
    ckpt_json = ",\"checkpoints\":{\"saves\":" + std::to_string(l.saves) +
                ",\"loads\":" + std::to_string(l.loads) + ",\"lost\":" + std::to_string(l.lost) +
                ",\"failed_saves\":" + std::to_string(l.save_errors) +
                ",\"kills\":" + std::to_string(l.kills) +
                ",\"kills_inside_save\":" + std::to_string(l.kills_in_save) +
                ",\"kills_before_rename\":" + std::to_string(l.kills_leaving_temporary) +
                ",\"temporaries_left\":" + std::to_string(l.orphaned_temporaries) +
                ",\"elements\":" + std::to_string(o_.checkpoint_elements) +
                ",\"threads_per_worker\":" + std::to_string(o_.checkpoint_threads) + "}";
  }
  std::printf(
      "{\"soak\":\"dags\",\"runs\":%lld,\"dags\":%lld,\"mismatches\":%lld,\"crashes\":%lld,"
      "\"hangs\":%lld,\"dags_interrupted\":%lld,\"workers\":%d,\"threads_per_worker\":%d,"
      "\"peak_rss_mib\":%.1f,\"wall_s\":%.1f,\"seed\":%d%s}\n",
      t_.runs, t_.dags, t_.mismatches, t_.crashes, t_.hangs, t_.interrupted, o_.workers,
      o_.threads_per_worker, rss, wall, o_.seed, ckpt_json.c_str());
  return t_.mismatches + t_.crashes + t_.hangs + lost + errors + orphans == 0 ? 0 : 1;
}

}  // namespace

int dag_soak(const Options& given) {
  Options o = given;
  namespace fs = std::filesystem;
  bool made_dir = false;
  if (o.checkpoints) {
    if (o.checkpoint_dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/hetgraph-soak-XXXXXX";
      if (mkdtemp(dir.data()) == nullptr) throw Error("cannot make a folder like " + dir);
      o.checkpoint_dir = dir;
      made_dir = true;
    } else {
      // The ledger knows only what this soak saved: a folder of older checkpoints would not do.
      fs::create_directories(o.checkpoint_dir);
      if (!fs::is_empty(o.checkpoint_dir))
        throw cli::UsageError("--checkpoint-dir: '" + o.checkpoint_dir + "' is not empty");
    }
  }
  const int rc = DagSoak(o).run();
  if (made_dir && rc == 0) fs::remove_all(o.checkpoint_dir);
  if (made_dir && rc != 0)
    std::fprintf(stderr, "soak: checkpoints kept in %s\n", o.checkpoint_dir.c_str());
  return rc;
}

}  // namespace soak

int main(int argc, char** argv) {
  soak::Options o;
  hetgraph::cli::Parser p(
      "hetgraph-soak",
      "usage: hetgraph-soak [--runs N] [--seed S] [--runs-per-config R]\n"
      "                     [--dags-per-worker D] [--hang-seconds T]\n"
      "                     [--workers P] [--threads-per-worker T]\n"
      "                     [--checkpoints] [--checkpoint-threads K] [--checkpoint-elements E]\n"
      "                     [--shared-checkpoints S] [--checkpoint-pause-ms MS]\n"
      "                     [--kill-seconds S] [--checkpoint-dir DIR]\n"
      "       hetgraph-soak --rank-rounds R [--seed S] [--min-ranks 2] [--max-ranks 4]\n"
      "                     [--max-step 200] [--heartbeat-seconds 3] [--bound-seconds 30]\n"
      "                     [--faults kill,stop,kill-recovery] [--mpirun PATH]\n"
      "       hetgraph-soak --worker --first-dag D --dags N [--seed S] (one worker)");
  p.integer("--runs", o.runs, 1, 1'000'000'000)
      .integer("--seed", o.seed, 0, 1'000'000'000)
      .integer("--runs-per-config", o.runs_per_config, 1, 1000)
      .integer("--dags-per-worker", o.dags_per_worker, 1, 1'000'000)
      .integer("--hang-seconds", o.hang_seconds, 1, 86400)
      .integer("--workers", o.workers, 1, 64)
      .integer("--threads-per-worker", o.threads_per_worker, 1, 64)
      .flag("--checkpoints", o.checkpoints)
      .integer("--checkpoint-threads", o.checkpoint_threads, 1, 64)
      .integer("--checkpoint-elements", o.checkpoint_elements, 1, 1 << 28)
      .integer("--shared-checkpoints", o.shared_checkpoints, 0, 64)
      .integer("--checkpoint-pause-ms", o.checkpoint_pause_ms, 0, 60'000)
      .real("--kill-seconds", o.kill_seconds, 0, 86400)
      .text("--checkpoint-dir", o.checkpoint_dir)
      .flag("--worker", o.worker)
      .integer("--first-dag", o.first_dag, 0, 1'000'000'000)
      .integer("--dags", o.dags, 1, 1'000'000'000)
      .integer("--slot", o.slot, 0, 64)
      .integer("--serial", o.serial, 0, 1 << 24)
      .integer("--crash-dag", o.crash_dag, -1, 1'000'000'000)
      .flag("--damage-checkpoint", o.damage_checkpoint)
      .integer("--rank-rounds", o.rank_rounds, 1, 1'000'000)
      .integer("--min-ranks", o.min_ranks, 2, 64)
      .integer("--max-ranks", o.max_ranks, 2, 64)
      .integer("--max-step", o.max_step, 1, 1'000'000)
      .real("--heartbeat-seconds", o.heartbeat_seconds, 0.5, 3600)
      .integer("--bound-seconds", o.bound_seconds, 1, 86400)
      .text("--mpirun", o.mpirun)
      .list("--faults", o.faults)
      .flag("--rank-worker", o.rank_worker)
      .integer("--fault-rank", o.fault_rank, -1, 64)
      .integer("--fault-step", o.fault_step, 0, 1'000'000)
      .text("--fault", o.fault);
  return hetgraph::cli::run_main(p, argc, argv, [&] {
    if (o.worker) return soak::dag_worker(o);
    if (o.rank_worker) return soak::rank_worker(o);
    if (p.given("--rank-rounds")) {
      if (o.min_ranks > o.max_ranks)
        throw hetgraph::cli::UsageError("--min-ranks: more than --max-ranks");
      for (const auto& f : o.faults) {
        if (f != "kill" && f != "stop" && f != "kill-recovery")
          throw hetgraph::cli::UsageError("--faults: '" + f +
                                          "' is not one of kill, stop, kill-recovery");
      }
      return soak::rank_soak(o);
    }
    return soak::dag_soak(o);
  });
}
