#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Per-node dispatch cost, interleaved: each round runs the three thread-pool shapes
# (threadpool: 10,000 independent tiny nodes; threadpool-dag: a 100 x 1,000 layered random
# DAG; threadpool-chain: 10,000 in a line) on every CPU engine with 2 single-thread executors
# (the sequential engine: one), inlining off and on, and Taskflow's executor with 2 workers on
# the same shapes when hetgraph-taskflow-bench was built (cmake -DHETGRAPH_TASKFLOW_DIR=<a
# Taskflow checkout>: bench/taskflow_compare.cpp). Each run is a fresh process; the summary is
# the median over rounds of ns per node. JSON lines go to $OUT, each with the build it came
# from ("build": the NAME of NAME=PATH; several builds take turns within each round) and the
# --inline-below-us it was given ("inline_below_us_arg": older builds do not print theirs).
#   scripts/dispatch-bench.sh ROUNDS [NAME=PATH-TO-hetgraph-bench ...]
#   (OUT=file, default /tmp/dispatch.jsonl; TFBENCH=path to hetgraph-taskflow-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
builds=("$@")
[ ${#builds[@]} -eq 0 ] && builds=("this=build/bench/hetgraph-bench")
tfbench=${TFBENCH:-build/bench/hetgraph-taskflow-bench}
out=${OUT:-/tmp/dispatch.jsonl}
: > "$out"
shapes=threadpool,threadpool-dag,threadpool-chain
run() {  # TAG, command... (a build without a workload, e.g. an older one, is skipped)
  local tag=$1; shift
  "$@" 2>/dev/null | grep '^{' | sed "s/^{/{$tag,/" >> "$out" || true
}
round() {
  [ -x "$tfbench" ] && run '"build":"taskflow"' "$tfbench" --workload "$shapes" --workers 2 --repeat 20
  for b in "${builds[@]}"; do
    name=${b%%=*} bench=${b#*=}
    for inl in 0 2; do
      for e in "critical-path --executors 2x1" "shared-queue --executors 2x1" "sequential"; do
        for w in ${shapes//,/ }; do
          # shellcheck disable=SC2086
          run "\"build\":\"$name\",\"inline_below_us_arg\":$inl" "$bench" --json --workload "$w" --engine $e --repeat 20 --inline-below-us "$inl"
        done
      done
    done
  done
}
# One hold of the build lock per round (a round is a minute or two): timings never overlap
# another build or run, and other users get the machine between rounds.
for r in $(seq "$rounds"); do
  flock /tmp/hetgraph-build.lock bash -c "$(declare -f run round); out='$out' tfbench='$tfbench' shapes='$shapes'; builds=(${builds[*]}); round"
done
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    inl = "" if r["platform"] == "taskflow" else (" inline" if r["inline_below_us_arg"] else " no-inline")
    b = "" if r["platform"] == "taskflow" else f'[{r.get("build")}] '
    key = (r["workload"], f'{b}{r["engine"]} {r["executors"]}{inl}')
    by.setdefault(key, []).append(r["median_s"] / r["tasks"] * 1e9)
for w in ("threadpool", "threadpool-dag", "threadpool-chain"):
    print(w)
    for (ww, k), v in sorted(by.items(), key=lambda kv: statistics.median(kv[1])):
        if ww == w:
            print(f"  {k:50s} {statistics.median(v):7.1f} ns/node  (rounds {len(v)}: {' '.join(f'{x:.0f}' for x in v)})")
PY
