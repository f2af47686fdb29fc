#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Replay validation (issue 15): every engine workload of `make bench`, run for real and replayed
# (hetgraph-bench --replay-cores, src/cpu/replay.hpp) on this machine's cores, configuration by
# configuration, interleaved. JSON lines to bench/results/<date>-replay-validate.jsonl (a
# replayed line has a "replay" object), then bench/replay_table.py prints the comparison.
#   scripts/replay-validate.sh [WORKLOAD...]
# REPLAY_OUT names another results file; REPLAY_BIG_REPEAT / REPLAY_BIG_WARMUP (default 3 / 3)
# set the samples of the long workloads (a partial re-run on a busy machine); REPLAY_ONLY=1
# skips the real runs (a change of the model: pair its lines with an earlier file's real ones);
# REPLAY_ARGS adds options to the replayed runs (--time-scale 1: the engines' work undivided).
# REPLAY_SELF=1 (interleaved) adds a second real sample after each replayed one:
# `bench/replay_table.py --self FILE` compares the two real halves, the spread real runs
# themselves have, against which the replay's is read.
# REPLAY_INTERLEAVE=1 takes the samples one by one, real and replayed alternately (a process
# each, --repeat 1 after the warm-up runs; the median of REPLAY_SMALL_RUNS (20) runs for the
# graphs of microseconds), so a slow spell of this shared machine falls on both sides alike;
# bench/replay_table.py compares the medians of the samples.
# Profiles (per-node times at 1 and 2 threads) are recorded once per workload into
# $REPLAY_PROFILES (default /tmp/hetgraph-replay-profiles) and reused.
set -uo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/hetgraph-bench
mkdir -p bench/results
out=${REPLAY_OUT:-bench/results/$(date +%Y-%m-%d)-replay-validate.jsonl}
prof=${REPLAY_PROFILES:-/tmp/hetgraph-replay-profiles}
mkdir -p "$prof"
cores=$(nproc)
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(mnist-softmax lstm-small par-matmul-512 par-matmul-1024 wide-deep-train
  wide-deep-infer-1 wide-deep-infer-64 threadpool threadpool-10k pathnet-small par-matmul-2048
  pathnet-medium phased-lstm-small threadpool-dag lstm-medium inception-small)
# 1x1, 1x2 and 2x1 (on 2 cores): the parallel engines, and the sequential engine on all cores.
configs=("--engine sequential" "--engine critical-path --executors 1x1"
  "--engine critical-path --executors 1x${cores}" "--engine critical-path --executors ${cores}x1"
  "--engine shared-queue --executors 1x${cores}" "--engine shared-queue --executors ${cores}x1")
run() { flock /tmp/hetgraph-build.lock "$bench" --json "$@" | tee -a "$out"; }
# An interleaved sample: marked, so that bench/replay_table.py takes the median of a key's
# samples (otherwise its last line counts: a re-run supersedes).
sample() { flock /tmp/hetgraph-build.lock "$bench" --json "$@" | sed 's/^{/{"sample":true,/' | tee -a "$out"; }
echo "writing $out" >&2
for w in "${workloads[@]}"; do
  case $w in  # the long ones: fewer samples (3 warm-up runs: the engines profile on them)
    lstm-medium|inception-small|pathnet-medium|par-matmul-*)
      r=${REPLAY_BIG_REPEAT:-3} wu=${REPLAY_BIG_WARMUP:-3} ;;
    *) r=5 wu=3 ;;
  esac
  # Interleaved, a sample is a process; for graphs of microseconds its median of 20 runs (one
  # run of 40 us is at the mercy of a single interrupt).
  per=1
  case $w in threadpool*|wide-deep-infer-1) per=${REPLAY_SMALL_RUNS:-20} ;; esac
  p=$prof/$w.json
  # (written aside and renamed: the other replay script may be reading or writing it too)
  [ -f "$p" ] || { flock /tmp/hetgraph-build.lock "$bench" --workload "$w" --record-profile "$p.$$" &&
    mv "$p.$$" "$p"; } || continue
  for c in "${configs[@]}"; do
    if [ "${REPLAY_INTERLEAVE:-0}" = 1 ]; then
      for _ in $(seq "$r"); do
        # shellcheck disable=SC2086
        [ "${REPLAY_ONLY:-0}" = 1 ] || sample --workload "$w" $c --repeat "$per" --warmup "$wu"
        # shellcheck disable=SC2086
        sample --workload "$w" $c --repeat "$per" --warmup "$wu" --replay-cores "$cores" --replay-profile "$p" \
          ${REPLAY_ARGS:-}
        # shellcheck disable=SC2086
        [ "${REPLAY_SELF:-0}" = 1 ] && sample --workload "$w" $c --repeat "$per" --warmup "$wu"
      done
      continue
    fi
    # shellcheck disable=SC2086
    [ "${REPLAY_ONLY:-0}" = 1 ] || run --workload "$w" $c --repeat "$r" --warmup "$wu"
    # shellcheck disable=SC2086
    run --workload "$w" $c --repeat "$r" --warmup "$wu" --replay-cores "$cores" --replay-profile "$p" \
      ${REPLAY_ARGS:-}
  done
done
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
$py bench/replay_table.py "$out"
