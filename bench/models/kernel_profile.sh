#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Per-kernel A/B: each model directory run by each hetgraph-run in turn, ROUNDS interleaved
# rounds, with --profile: one JSON line per run with the run's median, its node time per run
# and that time summed by op kind and kernel (how long a model's products take on each route).
#   [REPEAT=N] bench/models/kernel_profile.sh OUT ROUNDS NAME=HETGRAPH_RUN... -- MODEL_DIR...
#   (MODEL_DIR: build/bench-models/<model>-b<batch>, made by bench/models/run.sh; REPEAT runs
#   per process, default 20)
set -euo pipefail
out=$1 rounds=$2
shift 2
variants=()
while [ "$1" != "--" ]; do variants+=("$1"); shift; done
shift
for round in $(seq 0 $((rounds - 1))); do
  for dir in "$@"; do
    inputs=()
    for f in "$dir"/*.pb; do inputs+=(--input "$(basename "$f" .pb)=$f"); done
    for v in "${variants[@]}"; do
      name=${v%%=*} bin=${v#*=}
      LD_LIBRARY_PATH=$(dirname "$bin") "$bin" "$dir/model.onnx" "${inputs[@]}" \
        --repeat "${REPEAT:-20}" --json --profile 2>/dev/null |
        /usr/bin/python3 -c '
import collections, json, sys
d = json.load(sys.stdin)
by = collections.defaultdict(float)
for n in d["profile"]["nodes"]:
    by[n["op"] + "/" + n["kernel"]] += n["mean_s"]
print(json.dumps({"kind": "kernel-profile", "model": sys.argv[1], "variant": sys.argv[2],
                  "round": int(sys.argv[3]), "median_s": d["median_s"],
                  "node_s": d["profile"]["node_s"] / d["profile"]["runs"],
                  "kernels_s": dict(sorted(by.items())),
                  "engine": d["engine"], "executors": d["executors"], "code_path": d["code_path"]}))
' "$(basename "$dir")" "$name" "$round" >>"$out"
    done
  done
done
