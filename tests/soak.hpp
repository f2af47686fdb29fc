// SPDX-License-Identifier: Apache-2.0
// hetgraph-soak's modes (tests/soak.cpp): what they share.
#pragma once

#include <string>
#include <vector>

namespace soak {

struct Options {
  // Random DAGs (soak.cpp), in worker processes.
  int runs = 100000;
  int seed = 1;
  int runs_per_config = 4;
  int dags_per_worker = 250;
  int hang_seconds = 300;
  int workers = 1;             // worker processes at once
  int threads_per_worker = 1;  // threads running DAGs in each
  // Checkpoints (soak_checkpoints.cpp), saved and loaded by each worker while its DAGs run.
  bool checkpoints = false;
  int checkpoint_threads = 2;         // per worker, each with its own compiled graph
  int checkpoint_elements = 1 << 18;  // floats in the checkpointed variable (1 MiB)
  int shared_checkpoints = 2;         // paths every worker saves to; each thread also has its own
  int checkpoint_pause_ms = 10;       // at most this long between a thread's checkpoint steps
  double kill_seconds = 0;            // each worker is killed (SIGKILL) inside the first save it
                                      // begins after U(0.5, 1.5) x this many seconds; 0: never
  std::string checkpoint_dir;         // default: a new folder under $TMPDIR, removed when clean
  // Worker processes (--worker): what to run.
  bool worker = false;
  int first_dag = 0, dags = 0;
  int slot = 0, serial = 0;        // which worker slot, and which spawn (checkpoint states)
  int crash_dag = -1;              // test hook: the worker aborts at this DAG
  bool damage_checkpoint = false;  // test hook: the worker truncates its second private save

  // Ranks (soak_ranks.cpp): rounds of data-parallel training under mpirun with a rank lost.
  int rank_rounds = 0;
  int min_ranks = 2, max_ranks = 4;
  int max_step = 200;            // the fault comes at a step drawn from [1, max_step]
  double heartbeat_seconds = 3;  // HETGRAPH_MPI_HEARTBEAT_TIMEOUT of the jobs
  int bound_seconds = 30;        // a job not ended this long after the fault hangs
  std::string mpirun = "mpirun";
  std::vector<std::string> faults = {"kill", "stop", "kill-recovery"};
  // A rank of such a job (--rank-worker).
  bool rank_worker = false;
  int fault_rank = -1, fault_step = 0;
  std::string fault;
};

int dag_soak(const Options& o);
int dag_worker(const Options& o);
int rank_soak(const Options& o);
int rank_worker(const Options& o);

/// Writes one whole line on stdout and flushes it (a driver reads it at once); several threads
/// may call it.
void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace soak
