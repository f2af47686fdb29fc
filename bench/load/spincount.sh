#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How long OpenMP workers should spin: mnist_softmax (2 epochs) with GOMP_SPINCOUNT 0, 1000,
# 10000 and 100000, ROUNDS interleaved rounds, beside K busy loops. One JSON line per run.
#   bench/load/spincount.sh K ROUNDS > bench/results/<date>-gomp-spincount-k<K>.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
k=$1 rounds=$2 pids=()
for _ in $(seq 1 "$k"); do timeout 600 sh -c 'while :; do :; done' & pids+=($!); done
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
sleep 1
for i in $(seq 1 "$rounds"); do
  for s in 0 1000 10000 100000; do
    r=$(GOMP_SPINCOUNT=$s build/examples/mnist_softmax --epochs 2 --json 2>/dev/null | grep '^{')
    echo "{\"k\":$k,\"spin\":$s,\"round\":$i,\"train_s\":$(echo "$r" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['train_s'])")}"
  done
done
