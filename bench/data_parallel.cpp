// SPDX-License-Identifier: Apache-2.0
// hetgraph-dp-bench: data-parallel training steps under mpirun, one JSON line per run (rank 0).
//
//   mpirun -np 2 --bind-to core build/bench/hetgraph-dp-bench --workload lstm-medium
//   build/bench/hetgraph-dp-bench --workload lstm-medium --simulate-ranks 16   # one machine of 16
//   mpirun -np 2 build/bench/hetgraph-dp-bench --latency                       # MPI itself
//
// A step keeps the single-process global batch (500 for mnist-softmax, 64 for lstm-S and
// wide-deep-train), divided among the ranks. Per step, from the engine's own records (the
// communication lane is a track of its own): the step's wall time (the slowest rank's), the
// time the executor computed, the time collectives were in flight, the fraction of that time
// during which the executor computed too (hidden behind compute), and the fraction of compute
// that ran after the first collective started (the window a collective can hide in). Bytes per
// step: the collectives' payload, and what a ring algorithm sends per rank (2 (P-1)/P of an
// allreduce's buffer, (P-1)/P of an allgather's result).
//
// --simulate-ranks P runs one rank's share of the batch alone, with plain SGD: the compute
// time of one machine of a P-machine job, which bench/plot_data_parallel.py's model needs.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "builders.hpp"
#include "common/executable.hpp"
#include "hetgraph/cli.hpp"
#include "hetgraph/distributed.hpp"
#include "hetgraph/hetgraph.hpp"

namespace {

namespace dist = hetgraph::distributed;
using hetgraph::detail::Executable;

struct Options {
  std::string workload = "mnist-softmax";
  int steps = 20, warmup = 3;
  int bucket_kib = 4096;
  int threads = 1;
  std::string engine = "sequential";
  int simulate = 0;
  bool latency = false;
};

constexpr const char* kUsage =
    "usage: hetgraph-dp-bench [--workload mnist-softmax|lstm-small|lstm-medium|wide-deep-train]\n"
    "                         [--steps 20] [--warmup 3] [--bucket-kib 4096] [--threads 1]\n"
    "                         [--engine sequential|critical-path|auto] [--simulate-ranks P]\n"
    "       hetgraph-dp-bench --latency        (under mpirun: MPI allreduce latency, bandwidth)";

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Sorted, merged intervals (nanoseconds).
using Spans = std::vector<std::pair<std::int64_t, std::int64_t>>;
Spans merge(Spans s) {
  std::sort(s.begin(), s.end());
  Spans out;
  for (const auto& x : s) {
    if (!out.empty() && x.first <= out.back().second) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}
double length_s(const Spans& s) {
  double t = 0;
  for (const auto& x : s) t += static_cast<double>(x.second - x.first);
  return t * 1e-9;
}
double overlap_s(const Spans& a, const Spans& b) {
  double t = 0;
  for (const auto& x : a) {
    for (const auto& y : b) {
      const std::int64_t lo = std::max(x.first, y.first), hi = std::min(x.second, y.second);
      if (hi > lo) t += static_cast<double>(hi - lo);
    }
  }
  return t * 1e-9;
}

// The slowest rank's value of each entry.
std::vector<double> max_over_ranks(const dist::Communicator& comm, const std::vector<double>& v) {
  const int P = comm.size();
  std::vector<float> all(v.size() * static_cast<std::size_t>(P), 0.0f);
  for (std::size_t i = 0; i < v.size(); ++i)
    all[i * static_cast<std::size_t>(P) + static_cast<std::size_t>(comm.rank())] =
        static_cast<float>(v[i]);
  comm.allreduce(all);
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out[i] = *std::max_element(all.begin() + static_cast<std::ptrdiff_t>(i * P),
                               all.begin() + static_cast<std::ptrdiff_t>((i + 1) * P));
  }
  return out;
}

bench::Case make(const std::string& w, const bench::Training& t) {
  if (w == "mnist-softmax") return bench::mnist_softmax_step(t);
  if (w == "lstm-small") return bench::lstm_training(20, 128, t);
  if (w == "lstm-medium") return bench::lstm_training(30, 512, t);
  if (w == "wide-deep-train") return bench::wide_deep(64, true, t);
  throw hetgraph::cli::UsageError("--workload: '" + w +
                                  "' is not one of mnist-softmax, "
                                  "lstm-small, lstm-medium, wide-deep-train");
}

int run_workload(const Options& o) {
  const dist::Communicator comm = o.simulate > 0 ? dist::Communicator::self() : dist::world();
  const int ranks = o.simulate > 0 ? o.simulate : comm.size();
  const hetgraph::DataParallel dp{comm, static_cast<std::size_t>(o.bucket_kib) * 1024};
  const bench::Training training{o.simulate > 0 ? nullptr : &dp, ranks};
  bench::Case c = make(o.workload, training);

  hetgraph::CpuOptions co;
  co.engine = hetgraph::parse_engine(o.engine);
  co.threads = o.threads;
  co.executors = co.engine == hetgraph::CpuEngine::automatic ? 0 : 1;
  co.threads_per_executor = o.threads;
  auto cg =
      hetgraph::GraphCompiler(hetgraph::Platform::cpu(co)).compile(c.graph, c.shapes, c.fetches);
  dist::broadcast_variables(cg, comm);
  const std::vector<hetgraph::FeedItem> feeds = bench::mapped_feeds(c, cg);

  // What crosses the network per step, from the plan.
  Executable& exe = hetgraph::detail::executable_of(cg);
  const auto& plan = exe.plan();
  double payload = 0, wire = 0;
  int collectives = 0, allreduces = 0;
  std::string allreduce_bytes, allgather_bytes;  // JSON lists: the scaling model's input
  for (const auto& n : plan.nodes) {
    if (!hetgraph::detail::op_def(n.op).communication) continue;
    ++collectives;
    const double bytes = static_cast<double>(n.type.bytes());
    payload += bytes;
    const double share = static_cast<double>(ranks - 1) / ranks;
    std::string& list =
        n.op == hetgraph::detail::OpKind::Allreduce ? allreduce_bytes : allgather_bytes;
    list += (list.empty() ? "" : ",") + std::to_string(n.type.bytes());
    if (n.op == hetgraph::detail::OpKind::Allreduce) {
      ++allreduces;
      wire += 2 * share * bytes;
    } else {
      wire += share * bytes;  // allgather: the other ranks' parts of the result
    }
  }

  for (int i = 0; i < o.warmup; ++i) cg.run(feeds);
  exe.record_events(true);
  comm.barrier();
  std::vector<double> step, compute, in_flight, hidden, window;
  for (int s = 0; s < o.steps; ++s) {
    const double t0 = hetgraph::now_s();
    cg.run(feeds);
    step.push_back(hetgraph::now_s() - t0);
    Spans comp, comms;
    std::int64_t first_comm = INT64_MAX;
    for (const auto& e : exe.last_run_events()) {
      if (hetgraph::detail::op_def(plan.nodes[e.node].op).communication) {
        comms.push_back({e.start_ns, e.end_ns});
        first_comm = std::min(first_comm, e.start_ns);
      } else {
        comp.push_back({e.start_ns, e.end_ns});
      }
    }
    comp = merge(comp);
    comms = merge(comms);
    compute.push_back(length_s(comp));
    in_flight.push_back(length_s(comms));
    hidden.push_back(comms.empty() ? 0 : overlap_s(comms, comp) / length_s(comms));
    window.push_back(comms.empty() ? 0
                                   : overlap_s({{first_comm, INT64_MAX}}, comp) / compute.back());
  }
  const std::vector<double> slowest = max_over_ranks(comm, step);
  if (comm.rank() != 0) return 0;
  std::printf(
      "{\"bench\":\"data-parallel\",\"workload\":\"%s\",\"ranks\":%d,\"simulated\":%s,"
      "\"global_batch\":%g,\"local_batch\":%g,\"engine\":\"%s\",\"threads\":%d,"
      "\"bucket_bytes\":%lld,\"steps\":%d,\"step_s\":%.6f,\"step_s_min\":%.6f,"
      "\"compute_s\":%.6f,\"comm_s\":%.6f,\"hidden_fraction\":%.4f,\"overlap_window\":%.4f,"
      "\"collectives\":%d,\"allreduces\":%d,\"payload_bytes\":%.0f,\"wire_bytes_per_rank\":%.0f,"
      "\"allreduce_bytes\":[%s],\"allgather_bytes\":[%s]}\n",
      o.workload.c_str(), ranks, o.simulate > 0 ? "true" : "false", c.stats["batch"] * ranks,
      c.stats["batch"], o.engine.c_str(), o.threads, static_cast<long long>(dp.bucket_bytes),
      o.steps, median(slowest), *std::min_element(slowest.begin(), slowest.end()), median(compute),
      median(in_flight), median(hidden), median(window), collectives, allreduces, payload, wire,
      allreduce_bytes.c_str(), allgather_bytes.c_str());
  return 0;
}

// MPI itself: the median time of a blocking allreduce of 1 float (latency) and of 1 and 16 MiB
// (bandwidth, as algorithm bytes: 2 (P-1)/P of the buffer per rank), through hetgraph's host
// collectives (the communication thread included, as the graphs see it).
int run_latency() {
  const dist::Communicator comm = dist::world();
  const int P = comm.size();
  auto time_allreduce = [&](std::size_t floats, int reps) {
    std::vector<float> buf(floats, 1.0f);
    for (int i = 0; i < 3; ++i) comm.allreduce(buf);
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      comm.barrier();
      const double t0 = hetgraph::now_s();
      comm.allreduce(buf);
      t.push_back(hetgraph::now_s() - t0);
    }
    return max_over_ranks(comm, {median(t)})[0];
  };
  const double lat = time_allreduce(1, 400);
  const double t1 = time_allreduce(1 << 18, 40), t16 = time_allreduce(1 << 22, 10);
  const double share = 2.0 * (P - 1) / P;
  const char* btl = std::getenv("OMPI_MCA_btl");
  if (comm.rank() == 0) {
    std::printf(
        "{\"bench\":\"mpi-latency\",\"ranks\":%d,\"btl\":\"%s\",\"allreduce_1float_s\":%.8f,"
        "\"allreduce_1MiB_s\":%.6f,\"allreduce_16MiB_s\":%.6f,\"bus_GBps_1MiB\":%.3f,"
        "\"bus_GBps_16MiB\":%.3f}\n",
        P, btl ? btl : "default", lat, t1, t16, share * (1 << 20) / t1 * 1e-9,
        share * (16 << 20) / t16 * 1e-9);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  hetgraph::cli::Parser p("hetgraph-dp-bench", kUsage);
  p.text("--workload", o.workload)
      .integer("--steps", o.steps, 1, 100000)
      .integer("--warmup", o.warmup, 0, 100000)
      .integer("--bucket-kib", o.bucket_kib, 1, 1 << 20)
      .integer("--threads", o.threads, 1, 4096)
      .choice("--engine", o.engine, {"sequential", "critical-path", "auto"})
      .integer("--simulate-ranks", o.simulate, 1, 4096)
      .flag("--latency", o.latency);
  return hetgraph::cli::run_main(p, argc, argv,
                                 [&] { return o.latency ? run_latency() : run_workload(o); });
}
