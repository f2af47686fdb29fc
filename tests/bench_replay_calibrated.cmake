# SPDX-License-Identifier: Apache-2.0
# The replay profile of a graph of nanosecond kernels sums to well under 4 times a whole run of
# it: threadpool-dag's 59k kernels of about 10 ns, each timed alone, count cache misses that a
# free run overlaps, and summed to 4.6 times the run (3.8 ms against 0.83) before the profile's
# sub-microsecond nodes were calibrated against whole runs (bench/main.cpp,
# calibrate_small_nodes). Calibrated, they sum to about half a run, but the calibration and the
# whole runs are timed in different processes, and a slow spell of this shared machine during
# the one and not the others moved the sum to 1.4 times a run (2026-11-28): the bound is twice
# the slower of two whole runs, timed before and after the profile.
#   cmake -DBENCH=path/to/hetgraph-bench -P bench_replay_calibrated.cmake
set(config --workload threadpool-dag --engine sequential --executors 1x1 --json)
function(whole_run out)
  execute_process(COMMAND "${BENCH}" ${config} --repeat 20 OUTPUT_VARIABLE real RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "hetgraph-bench (real) failed (${rc})")
  endif()
  string(JSON s GET "${real}" median_s)
  set(${out} ${s} PARENT_SCOPE)
endfunction()
whole_run(before_s)
# No --replay-profile: the profile is measured first, as --record-profile would write it.
execute_process(COMMAND "${BENCH}" ${config} --repeat 1 --warmup 0 --replay-cores 1
                OUTPUT_VARIABLE replayed RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hetgraph-bench (replay) failed (${rc})")
endif()
whole_run(after_s)
string(JSON work_s GET "${replayed}" replay work_s)
if(before_s GREATER after_s)
  set(run_s ${before_s})
else()
  set(run_s ${after_s})
endif()
# Floating point: CMake's math() has integers only.
execute_process(COMMAND awk "BEGIN { exit !(${work_s} < 2 * ${run_s}) }" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the profile's kernels sum to ${work_s} s, twice a whole run or more (a "
                      "whole run: ${before_s} s before the profile, ${after_s} s after)")
endif()
message(STATUS "the profile's kernels: ${work_s} s; a whole run: ${before_s} s, ${after_s} s")
