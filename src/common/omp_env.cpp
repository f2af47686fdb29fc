// SPDX-License-Identifier: Apache-2.0
// libhetgraph_omp_env: bounds how long idle OpenMP workers spin before they sleep, for every
// OpenMP region of the process (oneDNN's and ours).
//
// libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its own ELF constructor, and offers
// no call to change them later. Its default when neither is set is to spin about 300,000 pauses
// (milliseconds) at every barrier and in every idle worker: on a machine where other processes
// hold the cores, a spinning worker takes the time slice of the thread it waits for, and a 0.2 s
// training run took 20-40 s (issue 45). This library sets GOMP_SPINCOUNT first, from its own
// constructor, unless the user set either variable. It must be initialised before libgomp: the
// dynamic loader initialises, among libraries that do not depend on each other, the one loaded
// later first, so libhetgraph lists it after libgomp among its needed libraries (CMakeLists.txt)
// and a test (tests/test_engine.cpp, OmpWorkersSleepSoon) checks that libgomp saw the value.
#include <cstdlib>

namespace {

// About 0.1 ms of pauses: long enough that the next region of a run (a kernel's microseconds
// later) finds its workers awake, short enough that an idle or preempted wait costs little.
// bench/results/load.jsonl has the measurements behind it.
constexpr const char* kSpinCount = "10000";

int g_state = 0;  // 1: set here; 2: the user's environment decides

__attribute__((constructor)) void bound_openmp_spinning() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) {
    g_state = 2;
    return;
  }
  if (setenv("GOMP_SPINCOUNT", kSpinCount, 0) == 0) g_state = 1;
}

}  // namespace

/// 1: this library set GOMP_SPINCOUNT; 2: the environment already set OMP_WAIT_POLICY or
/// GOMP_SPINCOUNT; 0: setting it failed.
extern "C" __attribute__((visibility("default"))) int hetgraph_omp_env_state() {
  return g_state;
}
