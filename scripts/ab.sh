#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Interleaved A/B timing with hetgraph-bench: runs A and B alternately N times (each a fresh
# process, --repeat R) and prints the median of the per-invocation medians and their ratio.
# These VMs are noisy: only ratios measured this way mean much.
#   scripts/ab.sh N "ARGS A" "ARGS B"
set -euo pipefail
n=$1 a=$2 b=$3
bench=${BENCH:-build/bench/hetgraph-bench}
ta=() tb=()
# The bench's output is read once it has exited: a python3 started beside it in a pipe (0.4 s of
# CPU through pyenv's shim) takes one of the two cores while it times, and a parallel region
# whose second thread waits for that core stalls for a time slice (8 ms a region measured).
median_of() {
  local out
  # shellcheck disable=SC2086
  out=$(flock /tmp/hetgraph-build.lock $bench --json $1)
  python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["median_s"])' <<<"$out"
}
for i in $(seq "$n"); do
  ta+=("$(median_of "$a")")
  tb+=("$(median_of "$b")")
done
python3 - "${ta[*]}" "${tb[*]}" "$a" "$b" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]; b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"A: {ma:.6f} s  [{sys.argv[3]}]  all: {' '.join(f'{x:.4f}' for x in a)}")
print(f"B: {mb:.6f} s  [{sys.argv[4]}]  all: {' '.join(f'{x:.4f}' for x in b)}")
print(f"B/A = {mb/ma:.3f}")
PY
