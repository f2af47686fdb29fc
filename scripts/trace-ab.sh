#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kernel-time A/B from traces: an earlier build's library against this build, alternating
# processes, sequential engine, per-op kernel totals per run (bench/trace_op_times.py) appended to
# OUT as JSON lines labelled "before|after CASE round R".
# DIR holds the earlier libhetgraph.so.0, and its hetgraph-bench / hetgraph-run where they
# differ; without them this build's binaries run on the earlier library (right while the change
# is inside the library and no header moved).
# A CASE is a hetgraph-bench workload, or MODEL.onnx:INPUT.pb for hetgraph-run.
#   mkdir /tmp/before && cp build/libhetgraph.so.0 /tmp/before    # before the change
#   [ROUNDS=4] scripts/trace-ab.sh OUT /tmp/before CASE...
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 before=$2
shift 2
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
t=$(mktemp)
for i in $(seq 1 "${ROUNDS:-4}"); do
  for v in before after; do
    for w in "$@"; do
      lib=; bench=build/bench/hetgraph-bench run=build/tools/hetgraph-run
      if [ $v = before ]; then
        lib=$before
        [ -x "$before/hetgraph-bench" ] && bench=$before/hetgraph-bench
        [ -x "$before/hetgraph-run" ] && run=$before/hetgraph-run
      fi
      if [[ $w == *.onnx:* ]]; then
        cmd=("$run" "${w%%:*}" --input "${w#*:}" --repeat 3 --warmup 1)
        name=$(basename "${w%%:*}" .onnx)
      else
        cmd=("$bench" --workload "$w" --repeat 3 --warmup 2)
        name=$w
      fi
      LD_LIBRARY_PATH=$lib flock /tmp/hetgraph-build.lock "${cmd[@]}" --engine sequential \
        --trace "$t" >/dev/null
      $py bench/trace_op_times.py "$t" "$v $name round $i" | tail -3 >>"$out"
    done
  done
done
rm -f "$t"
