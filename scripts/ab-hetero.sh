#!/usr/bin/env bash
# A heterogeneous platform (the CPU + the default OpenCL device, automatic placement) against
# each device alone, interleaved: each round runs every workload once on each platform (one
# fresh process per platform and round), so a noisy interval hits all three alike. Prints the
# median per platform over the rounds, hetero / best single device, and for the pingpong-N
# workloads the cost of one crossing. JSON lines go to $OUT.
#   scripts/ab-hetero.sh ROUNDS REPEAT "workload ..."    (OUT=file, default /tmp/ab-hetero.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1 repeat=$2 workloads=$3
bench=${BENCH:-build/bench/hetgraph-bench}
out=${OUT:-/tmp/ab-hetero.jsonl}
: > "$out"
list=$(echo "$workloads" | tr -s ' ' ',')
for r in $(seq "$rounds"); do
  for p in cpu opencl hetero; do
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
        if w.startswith("pingpong-"):
            # Half the negations run on each device; the rest of the split's time is its
            # crossings (transfers + their synchronisation).
            x = h[0]
            per = (med["hetero"] - 0.5 * med["cpu"] - 0.5 * med["opencl"]) / x["transfers"]
            mb = x["bytes"] / 2**20
            print(f"  {x['transfers']} crossings of {x['bytes']} B: {per*1e6:.1f} us each"
                  + (f", {per*1e3/mb:.3f} ms per MB" if mb >= 0.25 else ""))
PY
