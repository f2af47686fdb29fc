#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Replay at 16, 32 and 64 virtual cores (issue 15): per workload, every symmetric configuration
# E x C/E of the critical-path and shared-queue engines, the sequential engine on all C cores
# (the framework default, 1xC), and the automatic engine. JSON lines to
# bench/results/<date>-replay-figures.jsonl; bench/plot_replay.py draws bench/charts/replay-*.
#   [ENGINES="critical-path shared-queue"] scripts/replay-figures.sh [WORKLOAD...]
# Profiles come from $REPLAY_PROFILES (default /tmp/hetgraph-replay-profiles; recorded here
# first when missing) or, for a profile taken on a bigger machine, any file put there.
set -uo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/hetgraph-bench
mkdir -p bench/results
out=bench/results/$(date +%Y-%m-%d)-replay-figures.jsonl
prof=${REPLAY_PROFILES:-/tmp/hetgraph-replay-profiles}
mkdir -p "$prof"
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(lstm-small mnist-softmax par-matmul-1024 wide-deep-train
  pathnet-medium lstm-medium inception-small threadpool-dag)
run() { flock /tmp/hetgraph-build.lock "$bench" --json "$@" | tee -a "$out"; }
echo "writing $out" >&2
for w in "${workloads[@]}"; do
  p=$prof/$w.json
  # (written aside and renamed: the other replay script may be reading or writing it too)
  [ -f "$p" ] || { flock /tmp/hetgraph-build.lock "$bench" --workload "$w" --record-profile "$p.$$" &&
    mv "$p.$$" "$p"; } || continue
  for c in 16 32 64; do
    rp=(--workload "$w" --repeat 5 --warmup 3 --replay-cores "$c" --replay-profile "$p")
    run "${rp[@]}" --engine sequential
    for e in $(seq 1 "$c"); do
      [ $((c % e)) -eq 0 ] || continue
      for engine in ${ENGINES:-critical-path shared-queue}; do
        run "${rp[@]}" --engine "$engine" --executors "${e}x$((c / e))"
      done
    done
    HETGRAPH_TUNING_CACHE=0 run "${rp[@]}" --engine auto
  done
done
echo "results appended to $out" >&2
