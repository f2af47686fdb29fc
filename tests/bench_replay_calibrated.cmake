# The replay profile of a graph of nanosecond kernels sums to less than a whole run of it:
# threadpool-dag's 59k kernels of about 10 ns, each timed alone, count cache misses that a
# free run overlaps, and summed to 4 times the run before the profile's sub-microsecond nodes
# were calibrated against whole runs (bench/main.cpp, calibrate_small_nodes).
#   cmake -DBENCH=path/to/hetgraph-bench -P bench_replay_calibrated.cmake
set(config --workload threadpool-dag --engine sequential --executors 1x1 --json)
execute_process(COMMAND "${BENCH}" ${config} --repeat 20 OUTPUT_VARIABLE real RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hetgraph-bench (real) failed (${rc})")
endif()
# No --replay-profile: the profile is measured first, as --record-profile would write it.
execute_process(COMMAND "${BENCH}" ${config} --repeat 1 --warmup 0 --replay-cores 1
                OUTPUT_VARIABLE replayed RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hetgraph-bench (replay) failed (${rc})")
endif()
string(JSON run_s GET "${real}" median_s)
string(JSON work_s GET "${replayed}" replay work_s)
if(NOT work_s LESS run_s)
  message(FATAL_ERROR "the profile's kernels sum to ${work_s} s, a whole run takes ${run_s} s")
endif()
message(STATUS "the profile's kernels: ${work_s} s; a whole run: ${run_s} s")
