#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Engines side by side, interleaved: each round runs every configuration of each workload once
# (a fresh process each), so a noisy interval hits all of them alike; prints the median per
# configuration over the rounds and auto's ratio to the others. JSON lines go to $OUT.
#   scripts/ab-engines.sh ROUNDS REPEAT "workload ..."     (OUT=file, default /tmp/ab-engines.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1 repeat=$2 workloads=$3
bench=${BENCH:-build/bench/hetgraph-bench}
out=${OUT:-/tmp/ab-engines.jsonl}
: > "$out"
cores=$(nproc)
configs=("--engine sequential")
for e in $(seq 1 "$cores"); do
  [ $((cores % e)) -eq 0 ] || continue
  for eng in critical-path shared-queue; do configs+=("--engine $eng --executors ${e}x$((cores / e))"); done
done
configs+=("--engine auto")
for r in $(seq "$rounds"); do
  for w in $workloads; do
    for c in "${configs[@]}"; do
      # shellcheck disable=SC2086
      flock /tmp/hetgraph-build.lock "$bench" --json --workload "$w" $c --repeat "$repeat" --warmup 2 | tail -1 >> "$out"
    done
  done
done
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    key = r["engine"] if r["engine"] in ("sequential", "auto") else f'{r["engine"]} {r["executors"]}'
    by.setdefault(r["workload"], {}).setdefault(key, []).append(r)
for w, cfg in by.items():
    med = {k: statistics.median(x["median_s"] for x in v) for k, v in cfg.items()}
    # what auto's own search kept in each round (sequential or a critical-path configuration)
    picks = sorted({(lambda t: t["engine"] + " " + t["executors"])(min(x["search"], key=lambda t: t["median_s"]))
                    for x in cfg.get("auto", []) if x.get("search")})
    best_fixed = min((v, k) for k, v in med.items() if k != "auto")
    line = " ".join(f"{k}={v*1e3:.4g}ms" for k, v in med.items())
    a = med.get("auto")
    print(f"{w}: {line}")
    if a:
        seq = med["sequential"]
        cp = min(v for k, v in med.items() if k.startswith("critical-path"))
        sq = min(v for k, v in med.items() if k.startswith("shared-queue"))
        print(f"  auto/best={a/best_fixed[0]:.3f} (best {best_fixed[1]})  auto/seq={a/seq:.3f}  auto/SQ-best={a/sq:.3f}  CP-best/SQ-best={cp/sq:.3f}  auto picks {picks}")
PY
