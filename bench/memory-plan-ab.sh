#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 18, memory planner: arena, live peak, peak RSS and latency of hetgraph-run on the CNN
# files bench/cnn/run.sh exports (build/bench-cnn), for two builds interleaved round by round.
#   bench/memory-plan-ab.sh OUT.jsonl ROUNDS NAME=BIN [NAME=BIN ...]
# BIN is a hetgraph-run whose libhetgraph.so.0 lies beside it (a copied build) or in its
# build. Every run is a fresh process under /usr/bin/time -v (peak RSS) and under flock
# /tmp/hetgraph-build.lock. One JSON line per run: hetgraph-run --json's line plus variant,
# round and peak_rss_kib. Engines: HG_ENGINES (default sequential,critical-path,auto);
# batches: HG_BATCHES (default "1 32").
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 rounds=$2
shift 2
engines=${HG_ENGINES:-sequential,critical-path,auto}
tmp=$(mktemp)
for r in $(seq 1 "$rounds"); do
  for m in googlenet resnet18; do
    for b in ${HG_BATCHES:-1 32}; do
      if [ "$b" = 1 ]; then reps=(--repeat 20 --warmup 3); else reps=(--repeat 4 --warmup 1); fi
      for e in ${engines//,/ }; do
        for v in "$@"; do
          name=${v%%=*} bin=${v#*=}
          line=$(LD_LIBRARY_PATH=$(dirname "$bin") flock /tmp/hetgraph-build.lock \
            /usr/bin/time -v -o "$tmp" "$bin" "build/bench-cnn/$m-b$b.onnx" \
            --input "build/bench-cnn/input-b$b.pb" --engine "$e" "${reps[@]}" --json | tail -1)
          rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp")
          echo "${line%\}},\"variant\":\"$name\",\"round\":$r,\"batch\":$b,\"peak_rss_kib\":$rss}" >> "$out"
        done
      done
    done
  done
done
rm -f "$tmp"
