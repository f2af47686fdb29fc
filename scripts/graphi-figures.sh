#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 12's two Graphi-style charts, as JSON lines (bench/plot_graphi_figures.py draws them):
#  - Figure 2, op scalability: per-op thread counts on one team of all cores (critical-path
#    1xC --per-op-threads); each heavy op kind's hill climb reports its time per run at 1, 2,
#    4, ... threads (op_threads curves).
#  - Figure 3, pinned vs unpinned executor teams (--no-pin) on each symmetric configuration.
#  - The engine table's two switches: parallel-op fusion on/off (--no-parallel-ops, on the
#    sequential engine: groups form only where a kernel gets several threads) and per-op thread
#    counts on/off (critical-path 1xC, --per-op-threads).
# FIGS (default "scalability pin switches") picks the parts; FIRST_ROUND (default 1) the first
# round number, to add rounds to a file.
# Rounds interleave everything; each invocation holds the build lock alone.
#   scripts/graphi-figures.sh [ROUNDS] [OUT]   (defaults 3, bench/results/<date>-issue12-figures.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
out=${2:-bench/results/$(date +%Y-%m-%d)-issue12-figures.jsonl}
bench=${BENCH:-build/bench/hetgraph-bench}
cores=$(nproc)
configs=()
for e in $(seq 1 "$cores"); do [ $((cores % e)) -eq 0 ] && configs+=("${e}x$((cores / e))"); done
one() {  # figure, args...
  local fig=$1; shift
  flock /tmp/hetgraph-build.lock "$bench" --json "$@" |
    sed "s/^{/{\"round\":$round,\"figure\":\"$fig\",/" | tee -a "$out"
}
echo "writing $out" >&2
figs=${FIGS:-scalability pin switches}
has() { [[ " $figs " == *" $1 "* ]]; }
for round in $(seq "${FIRST_ROUND:-1}" "$rounds"); do
  has scalability && for w in lstm-small par-matmul-1024 inception-small pathnet-small wide-deep-train; do
    one scalability --workload "$w" --engine critical-path --executors "1x$cores" --per-op-threads --repeat 5
  done
  has pin && for w in lstm-small par-matmul-1024 inception-small threadpool-dag; do
    for c in "${configs[@]}"; do
      one pin --workload "$w" --engine critical-path --executors "$c" --repeat 10
      one pin --workload "$w" --engine critical-path --executors "$c" --repeat 10 --no-pin
    done
  done
  has switches && for w in pathnet-small phased-lstm-small wide-deep-infer-1 wide-deep-infer-64 wide-deep-train \
           mnist-softmax lstm-small par-matmul-1024 threadpool-10k pathnet-medium inception-small \
           lstm-medium par-matmul-8192; do
    for x in "" --no-parallel-ops; do
      one switches --workload "$w" --engine sequential --repeat 5 --warmup 2 $x
    done
    for x in "" --per-op-threads; do
      one switches --workload "$w" --engine critical-path --executors "1x$cores" --repeat 5 --warmup 2 $x
    done
  done
done
