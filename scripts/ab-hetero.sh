#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A heterogeneous platform (the CPU + the default OpenCL device, automatic placement) against
# each device alone, interleaved: each round runs every workload once on each platform (one
# fresh process per platform and round), so a noisy interval hits all three alike. Prints the
# median per platform over the rounds, hetero / best single device, and from pingpong-N and
# pingpong-blocks-N the cost of one crossing. JSON lines go to $OUT.
#   scripts/ab-hetero.sh ROUNDS REPEAT "workload ..."    (OUT=file, default /tmp/ab-hetero.jsonl;
#                                                         PLATFORMS="hetero" runs only that one)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1 repeat=$2 workloads=$3
bench=${BENCH:-build/bench/hetgraph-bench}
out=${OUT:-/tmp/ab-hetero.jsonl}
platforms=${PLATFORMS:-cpu opencl hetero}
: > "$out"
list=$(echo "$workloads" | tr -s ' ' ',')
for r in $(seq "$rounds"); do
  for p in $platforms; do
    flock /tmp/hetgraph-build.lock "$bench" --json --workload "$list" --platform "$p" \
      --repeat "$repeat" --warmup 2 | grep '^{' >> "$out"
  done
done
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
$py - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    by.setdefault(r["workload"], {}).setdefault(r["platform"], []).append(r)
for w, cfg in by.items():
    med = {k: statistics.median(x["median_s"] for x in v) for k, v in cfg.items()}
    line = " ".join(f"{k}={v*1e3:.4g}ms" for k, v in med.items())
    h = cfg.get("hetero", [])
    where = sorted({x.get("nodes_on", "") for x in h})
    print(f"{w}: {line}  hetero nodes on {where}")
    if "hetero" in med and "cpu" in med and "opencl" in med:
        best = min(("cpu", med["cpu"]), ("opencl", med["opencl"]), key=lambda t: t[1])
        print(f"  hetero/best single ({best[0]}) = {med['hetero']/best[1]:.3f}")
# One crossing: pingpong-N (8 crossings) against pingpong-blocks-N (2), the same work on each
# device (per MB where N is 256 Ki floats or more).
meds = {w: statistics.median(x["median_s"] for x in cfg["hetero"]) for w, cfg in by.items() if "hetero" in cfg}
for w in by:
    if not w.startswith("pingpong-") or w.startswith("pingpong-blocks-"): continue
    b = w.replace("pingpong-", "pingpong-blocks-")
    if w not in meds or b not in meds: continue
    x = by[w]["hetero"][0]
    per = (meds[w] - meds[b]) / (x["crossings"] - 2)
    mb = x["bytes"] / 2**20
    print(f"crossing of {x['bytes']:.0f} B: {per*1e6:.1f} us"
          + (f" = {per*1e3/mb:.3f} ms per MB" if mb >= 0.25 else ""))
PY
