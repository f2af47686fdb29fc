#!/usr/bin/env bash
# Interleaved A/B timing with hetgraph-bench: runs A and B alternately N times (each a fresh
# process, --repeat R) and prints the median of the per-invocation medians and their ratio.
# These VMs are noisy: only ratios measured this way mean much.
#   scripts/ab.sh N "ARGS A" "ARGS B"
set -euo pipefail
n=$1 a=$2 b=$3
bench=${BENCH:-build/bench/hetgraph-bench}
ta=() tb=()
for i in $(seq "$n"); do
  ta+=("$(flock /tmp/hetgraph-build.lock $bench --json $a | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["median_s"])')")
  tb+=("$(flock /tmp/hetgraph-build.lock $bench --json $b | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["median_s"])')")
done
python3 - "${ta[*]}" "${tb[*]}" "$a" "$b" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]; b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"A: {ma:.6f} s  [{sys.argv[3]}]  all: {' '.join(f'{x:.4f}' for x in a)}")
print(f"B: {mb:.6f} s  [{sys.argv[4]}]  all: {' '.join(f'{x:.4f}' for x in b)}")
print(f"B/A = {mb/ma:.3f}")
PY
