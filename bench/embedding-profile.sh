#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 12, grouped embeddings: where wide & deep spends its time. Traces 20 runs per case
# (sequential CPU engine, 1x2, and OpenCL) and writes one JSON line per case: the summed
# node time per run by op (parallel groups by their members' op), and the share of the
# embedding work (lookups, slices of the ids, concat and their gradients and table updates).
#   bench/embedding-profile.sh OUT.jsonl
set -euo pipefail
out=$1
bench=${BENCH:-build/bench/hetgraph-bench}
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
for w in wide-deep-infer-64 wide-deep-train; do
  for args in "--engine sequential" "--engine sequential --no-grouped-embeddings" \
              "--platform opencl" "--platform opencl --no-fuse"; do
    reps=20
    [[ $w == wide-deep-train && $args == *opencl* ]] && reps=5
    cmd="hetgraph-bench --workload $w $args --repeat $reps --trace FILE"
    flock /tmp/hetgraph-build.lock $bench --workload $w $args --repeat $reps --trace "$trace" >/dev/null
    python3 - "$trace" "$w" "$cmd" >>"$out" <<'PY'
import collections, json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d["traceEvents"] if e.get("ph") == "X"]
runs = len({e["args"].get("run", 0) for e in ev})
by = collections.defaultdict(float)
for e in ev:
    op = e["args"]["op"]
    if op == "parallel_group":  # "parallel group of 26 slice (...)": its members' op
        op = "group of " + e["name"].split()[4]
    by[op] += e["dur"] / runs
embed = ("embedding", "slice", "concat", "embedding_concat", "concat_grad", "embedding_grad",
         "embedding_update", "check_indices", "group of embedding", "group of slice")
total = sum(by.values())
share = sum(v for k, v in by.items() if k in embed)
print(json.dumps({"workload": sys.argv[2], "cmd": sys.argv[3], "runs": runs,
                  "note": "2-core VM, other engineers' builds queued on the same lock",
                  "summed_node_us_per_run": round(total, 1),
                  "embedding_work_us": round(share, 1),
                  "embedding_share": round(share / total, 3) if total else None,
                  "by_op_us": {k: round(v, 1) for k, v in sorted(by.items(), key=lambda x: -x[1])}}))
PY
  done
done
