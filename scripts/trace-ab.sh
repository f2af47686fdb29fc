#!/usr/bin/env bash
# Kernel-time A/B from traces: an earlier build (DIR holding a copy of its hetgraph-bench and
# libhetgraph.so.0) against this one, alternating processes, sequential engine, per-op kernel
# totals per run (bench/trace_op_times.py) appended to OUT as JSON lines labelled
# "before|after WORKLOAD round R".
#   mkdir /tmp/before && cp build/bench/hetgraph-bench build/libhetgraph.so.0 /tmp/before  # first
#   [ROUNDS=4] scripts/trace-ab.sh OUT /tmp/before WORKLOAD...
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 before=$2
shift 2
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
t=$(mktemp)
for i in $(seq 1 "${ROUNDS:-4}"); do
  for v in before after; do
    for w in "$@"; do
      if [ $v = before ]; then
        LD_LIBRARY_PATH=$before flock /tmp/hetgraph-build.lock "$before/hetgraph-bench" --workload "$w" \
          --engine sequential --repeat 3 --warmup 2 --trace "$t" >/dev/null
      else
        flock /tmp/hetgraph-build.lock build/bench/hetgraph-bench --workload "$w" --engine sequential \
          --repeat 3 --warmup 2 --trace "$t" >/dev/null
      fi
      $py bench/trace_op_times.py "$t" "$v $w round $i" | tail -3 >>"$out"
    done
  done
done
rm -f "$t"
