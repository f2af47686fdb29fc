#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Parallel-op fusion on and off, interleaved: each round runs every workload on every engine
# configuration whose kernels get both cores (where fuse_parallel_ops forms groups) with and
# without --no-parallel-ops, a fresh process each; prints the median per pair and their ratio.
#   scripts/ab-parallel-ops.sh ROUNDS "workload[:repeat] ..."   (OUT=file, default /tmp/ab-po.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1 workloads=$2
bench=${BENCH:-build/bench/hetgraph-bench}
out=${OUT:-/tmp/ab-po.jsonl}
: > "$out"
cores=$(nproc)
configs=("--engine sequential" "--engine critical-path --executors 1x$cores"
         "--engine shared-queue --executors 1x$cores" "--engine auto")
for r in $(seq "$rounds"); do
  for wr in $workloads; do
    w=${wr%%:*} rep=10
    [ "$wr" != "$w" ] && rep=${wr#*:}
    for c in "${configs[@]}"; do
      for po in "" "--no-parallel-ops"; do
        # shellcheck disable=SC2086
        flock /tmp/hetgraph-build.lock "$bench" --json --workload "$w" $c $po --repeat "$rep" --warmup 2 | tail -1 >> "$out"
      done
    done
  done
done
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    cfg = r["engine"] if r["engine"] in ("sequential", "auto") else f'{r["engine"]} {r["executors"]}'
    by.setdefault((r["workload"], cfg), {}).setdefault(r["parallel_ops"], []).append(r)
print("| workload | engine | nodes on / off | unfused ms | fused ms | fused/unfused |")
print("|---|---|---|---|---|---|")
for (w, cfg), d in by.items():
    on = statistics.median(x["median_s"] for x in d[True]); off = statistics.median(x["median_s"] for x in d[False])
    print(f"| {w} | {cfg} | {d[True][0]['nodes']} / {d[False][0]['nodes']} | {off*1e3:.4g} | {on*1e3:.4g} | {on/off:.3f} |")
PY
