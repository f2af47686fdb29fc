#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 12 part 4: the default CPU configuration (no --engine: auto) in a fresh process, first
# runs included, against every fixed configuration of make bench's engine matrix (sequential,
# critical-path and shared-queue on each NxT with N*T = cores), on each engine workload of
# make bench. Each process makes the runs hetgraph-bench makes by default ((3 warm-up + 10
# samples) x the workload's runs per sample) and times every one from the first
# (hetgraph-bench --cold: auto's tuning runs and the warm-up count). The default runs as a
# sequence of processes sharing one tuning cache, emptied per round: the first process ever
# (default-cold), the second (default-2nd: it resumes the search if the first did not finish
# it), more (default-more) until the cache holds a choice, then one that starts from it
# (default-cached: every later process). Rounds interleave all configurations; each invocation
# holds the build lock alone. BENCH=path picks the hetgraph-bench binary.
#   scripts/default-vs-best.sh [ROUNDS] [OUT]   (defaults 3,
#                                   bench/results/<date>-default-vs-best.jsonl)
#   python3 bench/default_vs_best.py OUT                  the table
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
out=${2:-bench/results/$(date +%Y-%m-%d)-default-vs-best.jsonl}
bench=${BENCH:-build/bench/hetgraph-bench}
cores=$(nproc)
configs=()
for e in $(seq 1 "$cores"); do [ $((cores % e)) -eq 0 ] && configs+=("${e}x$((cores / e))"); done
workloads=(mnist-softmax par-matmul-512 par-matmul-1024 par-matmul-2048 par-matmul-4096
           par-matmul-8192 lstm-small lstm-medium threadpool threadpool-dag phased-lstm-small
           pathnet-small pathnet-medium inception-small wide-deep-infer-1 wide-deep-infer-64
           wide-deep-train threadpool-10k)
[ -n "${WORKLOADS:-}" ] && read -r -a workloads <<<"$WORKLOADS"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
one() {  # label, args...: one process, its JSON line tagged with the round and label
  local label=$1; shift
  flock /tmp/hetgraph-build.lock "$bench" --json --cold "$@" |
    sed "s/^{/{\"round\":$round,\"config\":\"$label\",/" | tee -a "$out"
}
echo "writing $out" >&2
for round in $(seq 1 "$rounds"); do
  for w in "${workloads[@]}"; do
    rm -rf "${cache:?}"/*
    XDG_CACHE_HOME=$cache one default-cold --workload "$w"
    XDG_CACHE_HOME=$cache one default-2nd --workload "$w"
    for _ in 1 2 3 4 5; do
      ls "$cache"/hetgraph/tuning/*.tuning >/dev/null 2>&1 && break
      XDG_CACHE_HOME=$cache one default-more --workload "$w"
    done
    XDG_CACHE_HOME=$cache one default-cached --workload "$w"
    one "sequential-1x$cores" --workload "$w" --engine sequential
    for c in "${configs[@]}"; do
      for e in critical-path shared-queue; do
        one "$e-$c" --workload "$w" --engine "$e" --executors "$c"
      done
    done
  done
done
