#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Per-node A/B of the recurrent models: each model directory run by each hetgraph-run in turn,
# ROUNDS interleaved rounds, with --profile: one JSON line per run with the run's median and the
# node time per run of its recurrent part (the per-step products, cells and sequence nodes, not
# the input projections over every step) and of everything else.
#   bench/models/recurrent_profile.sh OUT ROUNDS NAME=HETGRAPH_RUN... -- MODEL_DIR...
#   (MODEL_DIR: build/bench-models/<model>-b<batch>, made by bench/models/run.sh)
set -euo pipefail
REPEAT=${REPEAT:-100} exec "$(dirname "$0")/profile_runs.sh" "$1" "$2" '
import json, sys
d = json.load(sys.stdin)
model, variant, rnd = sys.argv[1], sys.argv[2], int(sys.argv[3])
batch = int(model.rsplit("-b", 1)[1])
cells = {"lstm_cell", "lstm_hidden", "gru_hidden", "lstm_sequence", "gru_sequence"}
rec = other = 0.0
for n in d["profile"]["nodes"]:
    step_product = n["op"] == "fused_matmul" and n["input_shapes"][0][0] == batch
    if n["op"] in cells or step_product: rec += n["mean_s"]
    else: other += n["mean_s"]
print(json.dumps({"kind": "recurrent-profile", "model": model, "variant": variant, "round": rnd,
                  "median_s": d["median_s"], "recurrent_s": rec, "other_s": other,
                  "engine": d["engine"], "executors": d["executors"], "code_path": d["code_path"]}))
' "${@:3}"
