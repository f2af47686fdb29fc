// SPDX-License-Identifier: Apache-2.0
// hetgraph-soak --rank-rounds R (`make soak-ranks`): ranks lost in the middle of data-parallel
// training. Each round runs `mpirun -np N` (N drawn from [--min-ranks, --max-ranks]) of this
// program as --rank-worker: a random training graph (testing_util::random_training) whose SGD
// step averages gradients across the ranks, stepped until something fails. One rank, drawn
// at random, loses itself at a random step: a thread of its own sends it SIGKILL or SIGSTOP
// somewhere inside that step (so inside a collective as often as not), after saying when.
//
//   kill           plain mpirun: mpirun ends the job and names the rank that died
//   stop           a stopped rank, which mpirun cannot see: the others' heartbeat check must
//                  fail their collectives naming it (HETGRAPH_MPI_HEARTBEAT_TIMEOUT =
//                  --heartbeat-seconds), and the job end
//   kill-recovery  mpirun --enable-recovery lets the others run: the same as stop
//
// A round is good when the job ends within --bound-seconds of the fault and some message names
// the lost rank, nothing else crashed, and no rank is left running. Prints a line per round,
// the counts and the times from the fault to the first message naming the rank and to the
// job's end (a summary and a JSON line); exits 1 when any round was bad.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "hetgraph/hetgraph.hpp"
#include "random_dag.hpp"
#include "soak.hpp"
#include "soak_process.hpp"

namespace soak {

using namespace hetgraph;
namespace dist = hetgraph::distributed;

namespace {

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace

int rank_worker(const Options& o) {
  const dist::Communicator comm = dist::world();
  const int r = comm.rank();
  say("soak-rank %d pid %d of %d", r, static_cast<int>(getpid()), comm.size());
  try {
    std::mt19937 rng(static_cast<std::uint32_t>(o.seed));  // the same graph on every rank
    const DataParallel dp{comm};
    const testing_util::Training t = testing_util::random_training(rng, nullptr, &dp);
    auto cg = GraphCompiler(Platform::cpu({.engine = CpuEngine::sequential, .threads = 1}))
                  .compile(t.g, {{"x", {4, 4}}}, t.fetches);
    dist::broadcast_variables(cg, comm);
    std::mt19937 data(static_cast<std::uint32_t>(o.seed) * 31u + static_cast<std::uint32_t>(r));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(16);
    for (float& v : x) v = u(data);

    // The victim's fault: once the loop has passed fault_step - 1 steps, somewhere within the
    // mean step time, so the signal lands inside step fault_step as a rule.
    std::atomic<int> steps{0};
    std::atomic<bool> over{false};
    const auto t0 = Clock::now();
    std::thread fault;
    if (r == o.fault_rank) {
      fault = std::thread([&] {
        while (!over.load() && steps.load() < o.fault_step - 1)
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        if (over.load()) return;
        const double mean = seconds(t0, Clock::now()) / std::max(1, steps.load());
        std::uniform_real_distribution<double> within(0.0, mean);
        std::this_thread::sleep_for(std::chrono::duration<double>(within(data)));
        say("soak-rank %d fault %s at step %d t %lld", r, o.fault.c_str(), steps.load() + 1,
            now_ns());
        ::kill(getpid(), o.fault == "stop" ? SIGSTOP : SIGKILL);
      });
    }
    const double limit = 4.0 * o.bound_seconds + 60;  // a stray rank never trains for ever
    int rc = 0;
    try {
      for (int s = 1;; ++s) {
        cg.run({{"x", x}});
        steps = s;
        if (seconds(t0, Clock::now()) > limit) {
          say("soak-rank %d: still training after %.0f s (step %d)", r, limit, s);
          rc = 3;
          break;
        }
      }
    } catch (const CommunicationError& e) {
      say("soak-rank %d: lost: %s", r, e.what());
      rc = 1;
    }
    over = true;
    if (fault.joinable()) fault.join();
    return rc;
  } catch (const std::exception& e) {
    say("soak-rank %d: error: %s", r, e.what());
    return 2;
  }
}

namespace {

// The ranks a line names as lost: mpirun's "process rank R with PID P ... exited on signal"
// or a rank's "rank R stopped responding" / "ranks R, S stopped responding".
std::vector<int> lost_ranks(const std::string& line) {
  std::vector<int> out;
  int r = 0;
  const auto at = line.find("process rank ");
  if (at != std::string::npos && line.find("exited on signal") != std::string::npos &&
      std::sscanf(line.c_str() + at, "process rank %d", &r) == 1)
    out.push_back(r);
  for (std::size_t end = line.find(" stopped responding"); end != std::string::npos;
       end = line.find(" stopped responding", end + 1)) {
    const auto word = line.rfind("rank", end);
    if (word == std::string::npos) continue;
    std::size_t i = line.find(' ', word);
    while (i < end) {
      char* stop = nullptr;
      const long v = std::strtol(line.c_str() + i, &stop, 10);
      if (stop == line.c_str() + i) break;
      out.push_back(static_cast<int>(v));
      i = static_cast<std::size_t>(stop - line.c_str());
      while (i < end && (line[i] == ',' || line[i] == ' ')) ++i;
    }
  }
  return out;
}

// Whether a line says that something crashed.
bool crash_line(const std::string& line) {
  for (const char* s : {"Segmentation fault", "core dumped", "terminate called", "Aborted",
                        "soak-rank", "AddressSanitizer", "double free"}) {
    if (line.find(s) == std::string::npos) continue;
    if (std::string(s) != "soak-rank") return true;
    if (line.find(": error: ") != std::string::npos ||
        line.find(": still training") != std::string::npos)
      return true;
  }
  return false;
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

struct Round {
  int np = 0, victim = 0, step = 0;
  std::string fault;
  std::string outcome = "ok";  // ok, hang, crash, unnamed, early, left-running
  double detect_s = -1, end_s = -1;
  int status = 0;
};

struct Stats {
  std::vector<double> detect, end;
  int rounds = 0, ok = 0;
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

Round run_round(const Options& o, const std::string& self, std::mt19937& rng, int index) {
  Round rd;
  rd.np =
      o.min_ranks + static_cast<int>(rng() % static_cast<unsigned>(o.max_ranks - o.min_ranks + 1));
  rd.victim = static_cast<int>(rng() % static_cast<unsigned>(rd.np));
  rd.step = 1 + static_cast<int>(rng() % static_cast<unsigned>(o.max_step));
  rd.fault = o.faults[rng() % o.faults.size()];
  char hb[32];
  std::snprintf(hb, sizeof hb, "%g", o.heartbeat_seconds);
  std::vector<std::string> args = {o.mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
                                   std::to_string(rd.np)};
  if (rd.fault == "kill-recovery") args.push_back("--enable-recovery");
  const std::vector<std::string> rest = {"-x",
                                         "HETGRAPH_MPI_HEARTBEAT_TIMEOUT",
                                         self,
                                         "--rank-worker",
                                         "--seed",
                                         std::to_string(o.seed * 1000 + index),
                                         "--fault-rank",
                                         std::to_string(rd.victim),
                                         "--fault-step",
                                         std::to_string(rd.step),
                                         "--fault",
                                         rd.fault == "stop" ? "stop" : "kill",
                                         "--bound-seconds",
                                         std::to_string(o.bound_seconds)};
  args.insert(args.end(), rest.begin(), rest.end());
  const auto start = Clock::now();
  Child job = spawn(args, {.merge_stderr = true,
                           .new_group = true,
                           .env = {std::string("HETGRAPH_MPI_HEARTBEAT_TIMEOUT=") + hb}});
  std::optional<Clock::time_point> fault_at, named_at;
  std::vector<std::string> log;
  std::map<int, pid_t> pids;
  bool crashed = false, early = false, hung = false;
  std::vector<std::string> lines;
  // Before the fault: startup and the steps up to it, generously bounded (2-4 ranks share
  // this machine's cores with whatever else runs).
  const auto startup_bound = std::chrono::seconds(120 + o.bound_seconds);
  while (!job.eof()) {
    lines.clear();
    job.read_lines(lines, 100);
    const auto now = Clock::now();
    for (const auto& l : lines) {
      log.push_back(l);
      int r = 0, p = 0, s = 0;
      long long t = 0;
      char what[16];
      if (std::sscanf(l.c_str(), "soak-rank %d pid %d", &r, &p) == 2) {
        pids[r] = p;
      } else if (std::sscanf(l.c_str(), "soak-rank %d fault %15s at step %d t %lld", &r, what, &s,
                             &t) == 4) {
        fault_at = Clock::time_point(
            std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(t)));
      } else if (crash_line(l)) {
        crashed = true;
      }
      const std::vector<int> named = lost_ranks(l);
      if (!named.empty()) {
        if (!fault_at) {
          early = true;  // a rank given up for lost before any was
        } else if (std::find(named.begin(), named.end(), rd.victim) != named.end()) {
          if (!named_at) named_at = now;
        } else if (l.find("exited on signal") != std::string::npos) {
          crashed = true;  // mpirun names another rank that died
        }
      }
    }
    if ((fault_at && now - *fault_at > std::chrono::seconds(o.bound_seconds)) ||
        (!fault_at && now - start > startup_bound)) {
      hung = true;
      break;
    }
  }
  if (hung) job.signal(SIGKILL);
  rd.status = job.wait();
  const auto end = Clock::now();
  // mpirun must take its ranks with it; a stopped one is killed here if not.
  bool left = false;
  for (const auto& [r, p] : pids) {
    if (!alive(p)) continue;
    if (!hung) left = true;
    ::kill(p, SIGKILL);
  }
  if (fault_at) {
    rd.end_s = seconds(*fault_at, end);
    if (named_at) rd.detect_s = seconds(*fault_at, *named_at);
  }
  if (hung)
    rd.outcome = "hang";
  else if (crashed)
    rd.outcome = "crash";
  else if (early || !fault_at)
    rd.outcome = "early";
  else if (!named_at)
    rd.outcome = "unnamed";
  else if (left)
    rd.outcome = "left-running";
  std::fprintf(stderr,
               "soak-ranks: round %d: -np %d, %s rank %d at step %d: %s, named after %.2f s, job "
               "ended after %.2f s (mpirun %s)\n",
               index, rd.np, rd.fault.c_str(), rd.victim, rd.step, rd.outcome.c_str(), rd.detect_s,
               rd.end_s, describe_status(rd.status).c_str());
  if (rd.outcome != "ok") {
    for (const auto& l : log) std::fprintf(stderr, "  | %s\n", l.c_str());
  }
  return rd;
}

}  // namespace

int rank_soak(const Options& o) {
  const auto t0 = Clock::now();
  const std::string self = self_path();
  std::mt19937 rng(static_cast<std::uint32_t>(o.seed));
  std::map<std::string, int> outcomes = {{"ok", 0},      {"hang", 0},  {"crash", 0},
                                         {"unnamed", 0}, {"early", 0}, {"left-running", 0}};
  std::map<std::string, Stats> by_fault;
  Stats all;
  int status_0 = 0;  // jobs that lost a rank yet mpirun called a success (recorded, not bad)
  for (int i = 1; i <= o.rank_rounds; ++i) {
    const Round rd = run_round(o, self, rng, i);
    ++outcomes[rd.outcome];
    if (WIFEXITED(rd.status) && WEXITSTATUS(rd.status) == 0) ++status_0;
    for (Stats* s : {&all, &by_fault[rd.fault]}) {
      ++s->rounds;
      if (rd.outcome != "ok") continue;
      ++s->ok;
      s->detect.push_back(rd.detect_s);
      s->end.push_back(rd.end_s);
    }
  }
  const double wall = seconds(t0, Clock::now());
  const int bad = o.rank_rounds - outcomes["ok"];
  std::printf(
      "soak-ranks: rounds %d, ok %d, hangs %d, crashes %d, unnamed %d, early errors %d, ranks "
      "left running %d, mpirun exit status 0 %d; fault to a message naming the rank: median %.2f "
      "s, max %.2f s; to the "
      "job's end: median %.2f s, max %.2f s; heartbeat timeout %g s, bound %d s, wall %.1f s, "
      "seed %d\n",
      o.rank_rounds, outcomes["ok"], outcomes["hang"], outcomes["crash"], outcomes["unnamed"],
      outcomes["early"], outcomes["left-running"], status_0, quantile(all.detect, 0.5),
      quantile(all.detect, 1.0), quantile(all.end, 0.5), quantile(all.end, 1.0),
      o.heartbeat_seconds, o.bound_seconds, wall, o.seed);
  std::string faults;
  for (const auto& [name, s] : by_fault) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s\"%s\":{\"rounds\":%d,\"ok\":%d,\"detect_median_s\":%.3f,\"detect_max_s\":"
                  "%.3f,\"end_median_s\":%.3f,\"end_max_s\":%.3f}",
                  faults.empty() ? "" : ",", name.c_str(), s.rounds, s.ok, quantile(s.detect, 0.5),
                  quantile(s.detect, 1.0), quantile(s.end, 0.5), quantile(s.end, 1.0));
    faults += buf;
  }
  std::printf(
      "{\"soak\":\"ranks\",\"rounds\":%d,\"ok\":%d,\"hangs\":%d,\"crashes\":%d,\"unnamed\":%d,"
      "\"early_errors\":%d,\"left_running\":%d,\"mpirun_status_0\":%d,\"detect_median_s\":%.3f,"
      "\"detect_max_s\":%.3f,"
      "\"end_median_s\":%.3f,\"end_max_s\":%.3f,\"by_fault\":{%s},\"ranks\":[%d,%d],"
      "\"max_step\":%d,\"heartbeat_timeout_s\":%g,\"bound_s\":%d,\"wall_s\":%.1f,\"seed\":%d}\n",
      o.rank_rounds, outcomes["ok"], outcomes["hang"], outcomes["crash"], outcomes["unnamed"],
      outcomes["early"], outcomes["left-running"], status_0, quantile(all.detect, 0.5),
      quantile(all.detect, 1.0), quantile(all.end, 0.5), quantile(all.end, 1.0), faults.c_str(),
      o.min_ranks, o.max_ranks, o.max_step, o.heartbeat_seconds, o.bound_seconds, wall, o.seed);
  return bad == 0 ? 0 : 1;
}

}  // namespace soak
