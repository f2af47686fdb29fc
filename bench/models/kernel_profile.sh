#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Per-kernel A/B: each model directory run by each hetgraph-run in turn, ROUNDS interleaved
# rounds, with --profile: one JSON line per run with the run's median, its node time per run
# and that time summed by op kind and kernel (how long a model's products take on each route).
#   [REPEAT=N] bench/models/kernel_profile.sh OUT ROUNDS NAME=HETGRAPH_RUN... -- MODEL_DIR...
#   (MODEL_DIR: build/bench-models/<model>-b<batch>, made by bench/models/run.sh; REPEAT runs
#   per process, default 20)
set -euo pipefail
exec "$(dirname "$0")/profile_runs.sh" "$1" "$2" '
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
' "${@:3}"
