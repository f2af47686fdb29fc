#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Peak RSS (and latency) of hetgraph-run builds on the CNN models run.sh exports, one JSON line
# per process, builds interleaved (bench/history.md, "Batch 1: the weights moved"):
#   bench/cnn/peak_rss.sh OUT ROUNDS NAME=HETGRAPH_RUN [NAME=HETGRAPH_RUN ...]
# A HETGRAPH_RUN is an executable taking hetgraph-run's arguments (a wrapper may set
# LD_LIBRARY_PATH for an earlier build). Peak RSS is /usr/bin/time's maximum resident set size.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1 rounds=$2
shift 2
t=$(mktemp) j=$(mktemp)
trap 'rm -f "$t" "$j"' EXIT
for r in $(seq 1 "$rounds"); do
  for model in googlenet resnet18; do
    for batch in 1 32; do
      for build in "$@"; do
        name=${build%%=*} bin=${build#*=}
        flock /tmp/hetgraph-build.lock /usr/bin/time -f '%M' -o "$t" "$bin" \
          "build/bench-cnn/$model-b$batch.onnx" --input "build/bench-cnn/input-b$batch.pb" \
          --repeat 5 --warmup 1 --json >"$j"
        /usr/bin/python3 - "$name" "$model" "$batch" "$r" "$t" "$j" >>"$out" <<'EOF'
import json, sys
name, model, batch, rnd, t, j = sys.argv[1:]
run = json.load(open(j))
print(json.dumps({"kind": "peak-rss", "build": name, "model": model, "batch": int(batch),
                  "round": int(rnd), "peak_rss_mib": int(open(t).read().split()[-1]) / 1024,
                  "median_s": run["median_s"], "setup_s": run["setup_s"]}))
EOF
      done
    done
  done
done
