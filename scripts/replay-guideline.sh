#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The graph-width guideline against every symmetric configuration, replayed at 16, 32 and 64
# virtual cores (issue 15): per round, workload and core count, the critical-path engine with
# the guideline's executors (no --executors: config "guideline"), on every E x C/E, and the
# sequential engine on all C cores. Rounds interleave everything. JSON lines tagged with
# "round" and "config"; bench/replay_guideline.py prints the table (the guideline's pick and
# the old rule's, floor of the paper's avg_width, each against the best of the sweep).
#   [ROUNDS=2] [GUIDELINE_ONLY=1 BUILD=label] scripts/replay-guideline.sh OUT WORKLOAD...
# GUIDELINE_ONLY=1 runs only the guideline's configuration (another build's rule against a
# sweep already in OUT); BUILD tags the lines ("build":"label").
# Profiles: $REPLAY_PROFILES (default /tmp/hetgraph-replay-profiles), recorded when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
shift
bench=${BENCH:-build/bench/hetgraph-bench}
prof=${REPLAY_PROFILES:-/tmp/hetgraph-replay-profiles}
mkdir -p "$prof"
for w in "$@"; do
  p=$prof/$w.json
  [ -f "$p" ] || { flock /tmp/hetgraph-build.lock "$bench" --workload "$w" --record-profile "$p.$$" &&
    mv "$p.$$" "$p"; }
done
one() {  # round, config label, args...
  local r=$1 label=$2
  shift 2
  flock /tmp/hetgraph-build.lock "$bench" --json "$@" |
    sed "s/^{/{\"round\":$r,\"config\":\"$label\",${BUILD:+\"build\":\"$BUILD\",}/" >> "$out"
}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for w in "$@"; do
    for c in 16 32 64; do
      rp=(--workload "$w" --repeat 5 --warmup 3 --replay-cores "$c" --replay-profile "$prof/$w.json")
      one "$r" guideline "${rp[@]}" --engine critical-path
      [ -n "${GUIDELINE_ONLY:-}" ] && continue
      one "$r" sequential "${rp[@]}" --engine sequential
      for e in $(seq 1 "$c"); do
        [ $((c % e)) -eq 0 ] || continue
        one "$r" "${e}x$((c / e))" "${rp[@]}" --engine critical-path --executors "${e}x$((c / e))"
      done
    done
  done
  echo "round $r done" >&2
done
