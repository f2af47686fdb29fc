#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Interleaved A/B of bench/feed_loop.cpp built against two libhetgraph builds (see its header).
# Usage: bench/feed_loop_ab.sh OLD_BIN NEW_BIN ROUNDS RUNS MODEL_DIR... > RESULTS.jsonl
set -euo pipefail
old=$1 new=$2 rounds=$3 runs=$4; shift 4
cold=$(mktemp -d) cnew=$(mktemp -d)
for r in $(seq 0 $((rounds - 1))); do
  for m in "$@"; do
    for v in before after; do
      bin=$old; c=$cold; [ $v = after ] && bin=$new && c=$cnew
      line=$(XDG_CACHE_HOME=$c flock /tmp/hetgraph-build.lock $bin "$m" "$runs")
      echo "{\"kind\":\"feed-loop\",\"round\":$r,\"variant\":\"$v\",${line#\{}"
    done
  done
done
rm -rf "$cold" "$cnew"
