// hetgraph-soak: random DAGs run on every CPU engine, each run compared bitwise with the
// sequential engine, for as long as a nightly job likes (`make soak`, 100,000 runs).
//
//   build/tests/hetgraph-soak --runs 100000 [--seed 1] [--runs-per-config 4]
//                             [--dags-per-worker 250] [--hang-seconds 300]
//
// The DAGs run in worker processes (this program again, with --worker), so a crash or a hang
// is counted and the soak goes on after the DAG that caused it. Each DAG is drawn from its
// own seed (seed + index), so any DAG can be replayed alone: --worker --first-dag D --dags 1.
// Prints runs, mismatches, crashes, hangs, the workers' peak RSS and the wall time; exits 1
// when anything went wrong.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "random_dag.hpp"

extern char** environ;

using namespace hetgraph;

namespace {

struct Options {
  int runs = 100000;
  int seed = 1;
  int runs_per_config = 4;
  int dags_per_worker = 250;
  int hang_seconds = 300;
  bool worker = false;
  int first_dag = 0, dags = 0;  // --worker: the DAGs to run
  int crash_dag = -1;           // test hook: the worker aborts at this DAG
};

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
  inl.inline_below_us = 1e9;  // every node inline
  c.push_back({"critical-path 2x1 all inline", inl});
  CpuOptions seq;
  seq.threads = 1;
  c.push_back({"sequential again", seq});
  return c;
}

// Runs DAGs [first, first + count) and reports each on stdout: "dag D runs R mismatches M"
// (and a "mismatch ..." line for each), flushed, so the parent knows where a crash was.
int worker(const Options& o) {
  const std::vector<Config> cs = configs();
  const std::vector<FeedItem> feeds = testing_util::random_dag_feeds();
  const InputShapes& shapes = testing_util::random_dag_shapes();
  for (int d = o.first_dag; d < o.first_dag + o.dags; ++d) {
    if (d == o.crash_dag) std::abort();
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
            std::printf("mismatch dag %d config '%s' run %d fetch %zu\n", d, label, r, k);
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
    std::printf("dag %d runs %d mismatches %d\n", d, runs, mismatches);
    std::fflush(stdout);
  }
  return 0;
}

struct Totals {
  long long runs = 0, mismatches = 0, crashes = 0, hangs = 0, dags = 0;
};

// One worker process for DAGs [first, first + count); returns the next DAG to run.
int run_worker(const Options& o, const char* self, int first, int count, Totals& t) {
  const std::vector<std::string> args = {self,
                                         "--worker",
                                         "--first-dag",
                                         std::to_string(first),
                                         "--dags",
                                         std::to_string(count),
                                         "--seed",
                                         std::to_string(o.seed),
                                         "--runs-per-config",
                                         std::to_string(o.runs_per_config),
                                         "--crash-dag",
                                         std::to_string(o.crash_dag)};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) throw Error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, self, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (err != 0) throw Error(std::string("posix_spawn: ") + std::strerror(err));

  int next = first;  // the first DAG not reported done
  std::string buf;
  bool hung = false;
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, o.hang_seconds * 1000);
    if (ready == 0) {  // no DAG finished for hang_seconds
      hung = true;
      kill(pid, SIGKILL);
      break;
    }
    char chunk[4096];
    const ssize_t n = read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
      const std::string line = buf.substr(0, nl);
      int d = 0, runs = 0, mism = 0;
      if (std::sscanf(line.c_str(), "dag %d runs %d mismatches %d", &d, &runs, &mism) == 3) {
        t.runs += runs;
        t.mismatches += mism;
        ++t.dags;
        next = d + 1;
      } else {
        std::fprintf(stderr, "soak: %s\n", line.c_str());
      }
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool clean = !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (clean && next == first + count) return next;
  // The DAG being run when the worker died (or stopped answering) is skipped.
  if (hung) {
    ++t.hangs;
    std::fprintf(stderr, "soak: dag %d (seed %d) hung for %d s\n", next, o.seed, o.hang_seconds);
  } else {
    ++t.crashes;
    std::fprintf(stderr, "soak: dag %d (seed %d) crashed the worker: %s %d\n", next, o.seed,
                 WIFSIGNALED(status) ? "signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  return next + 1;
}

int soak(const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) throw Error("cannot find this program (/proc/self/exe)");
  self[len] = '\0';
  Totals t;
  int dag = 0;
  long long report = o.runs / 10;
  while (t.runs < o.runs) {
    // Enough DAGs for the runs left, at the rate seen so far (the first worker: a few).
    const long long per_dag = t.dags > 0 ? std::max(1LL, t.runs / t.dags) : 30;
    const long long want = (o.runs - t.runs + per_dag - 1) / per_dag;
    dag =
        run_worker(o, self, dag, static_cast<int>(std::min<long long>(o.dags_per_worker, want)), t);
    if (t.runs >= report) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "soak: %lld/%d runs, %lld dags, %lld mismatches, %lld crashes, %.0f s\n",
                   t.runs, o.runs, t.dags, t.mismatches, t.crashes, s);
      report += o.runs / 10;
    }
  }
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "soak: runs %lld, dags %lld, mismatches %lld, crashes %lld, hangs %lld, peak RSS %.1f MiB "
      "(largest worker), wall %.1f s, seed %d, %zu engine configurations + auto\n",
      t.runs, t.dags, t.mismatches, t.crashes, t.hangs, static_cast<double>(ru.ru_maxrss) / 1024.0,
      wall, o.seed, configs().size());
  return t.mismatches + t.crashes + t.hangs == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  cli::Parser p("hetgraph-soak",
                "usage: hetgraph-soak [--runs N] [--seed S] [--runs-per-config R]\n"
                "                     [--dags-per-worker D] [--hang-seconds T]\n"
                "       hetgraph-soak --worker --first-dag D --dags N [--seed S] (one worker)");
  p.integer("--runs", o.runs, 1, 1'000'000'000)
      .integer("--seed", o.seed, 0, 1'000'000'000)
      .integer("--runs-per-config", o.runs_per_config, 1, 1000)
      .integer("--dags-per-worker", o.dags_per_worker, 1, 1'000'000)
      .integer("--hang-seconds", o.hang_seconds, 1, 86400)
      .flag("--worker", o.worker)
      .integer("--first-dag", o.first_dag, 0, 1'000'000'000)
      .integer("--dags", o.dags, 1, 1'000'000'000)
      .integer("--crash-dag", o.crash_dag, -1, 1'000'000'000);
  return cli::run_main(p, argc, argv, [&] { return o.worker ? worker(o) : soak(o); });
}
