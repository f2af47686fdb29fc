#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Interleaved before/after of CPU engine configurations on a few workloads: each round runs
# every (build, configuration) pair once, each a fresh hetgraph-bench process, under one hold
# of the build lock; the summary is the median over rounds of each run's median.
#   scripts/engine-ab.sh ROUNDS WORKLOADS NAME=PATH-TO-hetgraph-bench... -- "CONFIG" ...
#   e.g. scripts/engine-ab.sh 3 lstm-small,lstm-medium old=a/hetgraph-bench new=b/hetgraph-bench \
#          -- "--engine critical-path --executors 2x1" "--engine sequential"
#   (OUT=file, default /tmp/engine-ab.jsonl; REPEAT, default 5)
# A configuration a build does not know (an older one) is skipped for it.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1 workloads=$2
shift 2
builds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do builds+=("$1"); shift; done
shift || true
configs=("$@")
out=${OUT:-/tmp/engine-ab.jsonl}
repeat=${REPEAT:-5}
: > "$out"
round() {
  for w in ${workloads//,/ }; do
    for c in "${configs[@]}"; do
      for b in "${builds[@]}"; do
        # shellcheck disable=SC2086
        "${b#*=}" --json --workload "$w" $c --repeat "$repeat" 2>/dev/null | grep '^{' |
          sed "s/^{/{\"build\":\"${b%%=*}\",\"config\":\"$c\",/" >> "$out" || true
      done
    done
  done
}
for r in $(seq "$rounds"); do
  flock /tmp/hetgraph-build.lock bash -c "$(declare -p workloads configs builds out repeat); $(declare -f round); round"
done
python3 - "$out" <<'PY'
import json, statistics, sys
by = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    by.setdefault((r["workload"], r["config"], r["build"]), []).append(r["median_s"])
for (w, c, b), v in sorted(by.items()):
    print(f"{w:14s} {c:55s} {b:14s} {statistics.median(v)*1e3:10.3f} ms  (rounds {len(v)}: {' '.join(f'{x*1e3:.2f}' for x in v)})")
PY
