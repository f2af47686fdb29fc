#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every engine and symmetric executor configuration on the given workloads, one JSON line
# each (appended to $OUT when set), then a table: the exhaustive best per workload and how
# the auto engine and the guideline's configuration compare with it.
#   scripts/engine-matrix.sh "mnist-softmax lstm-small" [extra bench args]
set -euo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/hetgraph-bench
workloads=$1; shift || true
cores=$(nproc)
configs=()
for e in $(seq 1 "$cores"); do [ $((cores % e)) -eq 0 ] && configs+=("${e}x$((cores / e))"); done
tmp=$(mktemp)
for w in $workloads; do
  flock /tmp/hetgraph-build.lock $bench --json --workload "$w" --engine sequential "$@" >>"$tmp"
  for c in "${configs[@]}"; do
    for e in critical-path shared-queue; do
      flock /tmp/hetgraph-build.lock $bench --json --workload "$w" --engine "$e" --executors "$c" "$@" >>"$tmp"
    done
  done
  flock /tmp/hetgraph-build.lock $bench --json --workload "$w" --engine auto "$@" >>"$tmp"
done
[ -n "${OUT:-}" ] && cat "$tmp" >>"$OUT"
python3 - "$tmp" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows: by.setdefault(r["workload"], []).append(r)
for w, rs in by.items():
    g = rs[0]
    print(f"{w}: nodes {g['nodes']}, heavy {g['heavy_nodes']}, max width {g['max_width']}, avg width {g['avg_width']}, guideline {g['guideline_executors']} executors")
    fixed = [r for r in rs if r["engine"] != "auto"]
    best = min(fixed, key=lambda r: r["median_s"])
    for r in rs:
        mark = " <- best" if r is best else ""
        extra = f"  (search: {', '.join(t['executors'] + ' ' + format(t['median_s'], '.4g') for t in r.get('search', []))})" if r["engine"] == "auto" else ""
        print(f"   {r['engine']:14s} {r['executors']:5s} {r['median_s']*1e3:10.3f} ms  x{r['median_s']/best['median_s']:.3f}{mark}{extra}")
PY
rm -f "$tmp"
