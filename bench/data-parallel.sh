#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Data-parallel scaling on this machine, and the inputs of the model for 8-64 machines.
#
#   flock /tmp/hetgraph-build.lock bench/data-parallel.sh [OUT.jsonl]
#
# For mnist-softmax, lstm-medium and wide-deep-train (global batch as in the single-process
# workloads, shared by the ranks): 1, 2 and 4 ranks of one thread each under mpirun, in
# interleaved rounds (2 ranks are bound to a core each; 4 oversubscribe the 2 cores); then one
# rank's share of the batch alone (--simulate-ranks P, P = 1..64, pinned to core 0): a machine's
# compute in a P-machine job. MPI's own latency and bandwidth through hetgraph's communication
# thread, over shared memory and over TCP loopback. JSON lines into OUT (default
# bench/results/<date>-data-parallel.jsonl); bench/plot_data_parallel.py draws
# bench/charts/data-parallel-scaling.png and prints the tables of bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
out=${1:-bench/results/$(date +%F)-data-parallel.jsonl}
rounds=${ROUNDS:-3}
bench=$build/bench/hetgraph-dp-bench
mpirun=(mpirun --allow-run-as-root --oversubscribe)
[ -x "$bench" ] || { echo "build $bench first (cmake --build $build --target hetgraph-dp-bench)" >&2; exit 1; }

declare -A steps=([mnist-softmax]=200 [lstm-medium]=5 [wide-deep-train]=100)
workloads=(mnist-softmax lstm-medium wide-deep-train)

: >"$out"
for btl in default tcp,self; do
  if [ "$btl" = default ]; then
    "${mpirun[@]}" -np 2 "$bench" --latency >>"$out"
  else
    OMPI_MCA_btl=$btl "${mpirun[@]}" -np 2 "$bench" --latency >>"$out"
  fi
done
for round in $(seq 1 "$rounds"); do
  for w in "${workloads[@]}"; do
    for np in 1 2 4; do
      bind=(--bind-to core)
      [ "$np" -gt 2 ] && bind=(--bind-to none)
      echo "round $round: $w, $np ranks" >&2
      "${mpirun[@]}" -np "$np" "${bind[@]}" "$bench" --workload "$w" --steps "${steps[$w]}" \
        --threads 1 >>"$out"
    done
  done
done
for w in "${workloads[@]}"; do
  for p in 1 2 4 8 16 32 64; do
    echo "model input: $w, 1/$p of the batch" >&2
    taskset -c 0 "$bench" --workload "$w" --steps "${steps[$w]}" --threads 1 --simulate-ranks "$p" \
      >>"$out"
  done
done
# Debian's python3 has python3-matplotlib; a python3 earlier on PATH (pyenv) may not.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" bench/plot_data_parallel.py "$out"
