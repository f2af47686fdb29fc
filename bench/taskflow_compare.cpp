// SPDX-License-Identifier: Apache-2.0
// hetgraph-taskflow-bench: Taskflow's per-task cost on the shapes of hetgraph-bench's
// thread-pool workloads, for side-by-side figures only. Built only when CMake is given a
// Taskflow checkout (nothing is downloaded):
//
//   git clone --branch v4.1.0 https://github.com/taskflow/taskflow /path/to/taskflow
//   cmake --preset release -DHETGRAPH_TASKFLOW_DIR=/path/to/taskflow
//   cmake --build build --target hetgraph-taskflow-bench
//   build/bench/hetgraph-taskflow-bench --workload threadpool,threadpool-dag,threadpool-chain
//
// Each task does what a hetgraph node of the same workload does (one float read, scaled or
// added, written) and has the same dependencies: threadpool = 10,000 independent tasks,
// threadpool-dag = 100 layers x 1,000 tasks each reading one or two tasks of the layer before
// (the same random draws as bench/workloads.cpp), threadpool-chain = 10,000 tasks in a line.
// One JSON line per workload, the fields hetgraph-bench prints (platform "taskflow").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <taskflow/taskflow.hpp>
#include <vector>

#include "hetgraph/cli.hpp"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Shape {
  tf::Taskflow flow;
  std::vector<float> value;  // one float per task (index 0: the input)
  double tasks = 0;
};

void independent(Shape& s, int n) {
  s.value.assign(static_cast<std::size_t>(n) + 1, 0.0f);
  s.value[0] = 0.5f;
  float* v = s.value.data();
  for (int i = 0; i < n; ++i) {
    const float c = static_cast<float>(i % 7 + 1);
    s.flow.emplace([v, i, c] { v[i + 1] = v[0] * c; });
  }
  s.tasks = n;
}

// The same draws as bench/workloads.cpp threadpool_dag: a node reads one node of the layer
// before (x 0.5) or two (a + b).
void layered(Shape& s, int layers, int width) {
  s.value.assign(static_cast<std::size_t>(layers) * width + 1, 0.0f);
  s.value[0] = 0.25f;
  float* v = s.value.data();
  std::mt19937 rng(7);
  std::vector<int> prev(static_cast<std::size_t>(width), 0);  // value index; 0 = the input
  std::vector<tf::Task> prev_task(static_cast<std::size_t>(width));
  int next = 1;
  for (int l = 0; l < layers; ++l) {
    std::vector<int> cur;
    std::vector<tf::Task> cur_task;
    for (int i = 0; i < width; ++i) {
      const auto ia = static_cast<std::size_t>(rng() % prev.size());
      const int a = prev[ia];
      const int out = next++;
      tf::Task t;
      if (rng() % 2) {
        t = s.flow.emplace([v, a, out] { v[out] = v[a] * 0.5f; });
        if (l > 0) prev_task[ia].precede(t);
      } else {
        const auto ib = static_cast<std::size_t>(rng() % prev.size());
        const int b = prev[ib];
        t = s.flow.emplace([v, a, b, out] { v[out] = v[a] + v[b]; });
        if (l > 0) {
          prev_task[ia].precede(t);
          if (ib != ia) prev_task[ib].precede(t);
        }
      }
      cur.push_back(out);
      cur_task.push_back(t);
    }
    prev = std::move(cur);
    prev_task = std::move(cur_task);
  }
  s.tasks = static_cast<double>(layers) * width;
}

void chain(Shape& s, int n) {
  s.value.assign(static_cast<std::size_t>(n) + 1, 0.0f);
  s.value[0] = 0.5f;
  float* v = s.value.data();
  tf::Task prev;
  for (int i = 0; i < n; ++i) {
    const float c = i % 2 ? 2.0f : 0.5f;
    tf::Task t = s.flow.emplace([v, i, c] { v[i + 1] = v[i] * c; });
    if (i > 0) prev.precede(t);
    prev = t;
  }
  s.tasks = n;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> workloads{"threadpool", "threadpool-dag", "threadpool-chain"};
  int workers = 2, repeat = 20, warmup = 3;
  hetgraph::cli::Parser p("hetgraph-taskflow-bench",
                          "usage: hetgraph-taskflow-bench [--workload NAME[,NAME...]] "
                          "[--workers 2] [--repeat 20] [--warmup 3]");
  p.list("--workload", workloads)
      .integer("--workers", workers, 1, 1024)
      .integer("--repeat", repeat, 1, 1'000'000)
      .integer("--warmup", warmup, 0, 1'000'000);
  return hetgraph::cli::run_main(p, argc, argv, [&] {
    tf::Executor executor(static_cast<std::size_t>(workers));
    for (const std::string& w : workloads) {
      Shape s;
      if (w == "threadpool") {
        independent(s, 10000);
      } else if (w == "threadpool-dag") {
        layered(s, 100, 1000);
      } else if (w == "threadpool-chain") {
        chain(s, 10000);
      } else {
        std::fprintf(stderr, "hetgraph-taskflow-bench: unknown workload '%s'\n", w.c_str());
        return 2;
      }
      for (int i = 0; i < warmup; ++i) executor.run(s.flow).wait();
      std::vector<double> t;
      for (int r = 0; r < repeat; ++r) {
        const double t0 = now_s();
        executor.run(s.flow).wait();
        t.push_back(now_s() - t0);
      }
      std::sort(t.begin(), t.end());
      const double med =
          repeat % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
      std::printf(
          "{\"workload\":\"%s\",\"platform\":\"taskflow\",\"engine\":\"taskflow-%d.%d.%d\","
          "\"executors\":\"%dx1\",\"repeat\":%d,\"median_s\":%.9g,\"min_s\":%.9g,\"max_s\":%.9g,"
          "\"tasks\":%.9g,\"ns_per_task\":%.4g,\"checksum\":%.9g}\n",
          w.c_str(), TF_MAJOR_VERSION, TF_MINOR_VERSION, TF_PATCH_VERSION, workers, repeat, med,
          t.front(), t.back(), s.tasks, med / s.tasks * 1e9, static_cast<double>(s.value.back()));
      std::fflush(stdout);
    }
    return 0;
  });
}
