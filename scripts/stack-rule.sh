#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stack_shared_products' rule, measured: shared-matmul-MxKxN (30 products x_i W, summed) with
# every group stacked (HETGRAPH_STACK_RATIO=0) against none (--no-stacked-products),
# alternated in fresh processes, sequential engine. JSON lines with "stack_ratio" added.
#   scripts/stack-rule.sh ROUNDS OUT
set -euo pipefail
rounds=$1 OUT_FILE=$2
bench=${BENCH:-build/bench/hetgraph-bench}
# Tagged with sed once the bench has exited: no python3 beside it while it times (scripts/ab.sh).
one() {  # ratio label, then bench arguments
  local label=$1 out
  shift
  out=$(flock /tmp/hetgraph-build.lock "$@" | tail -1)
  sed "s/^{/{\"stack_ratio\":\"$label\",/" <<<"$out" >>"$OUT_FILE"
}
for r in $(seq "$rounds"); do
  for kn in 128x512 512x2048 1024x4096; do
    for m in 1 4 16 64; do
      w=shared-matmul-${m}x${kn}
      HETGRAPH_STACK_RATIO=0 one 0 $bench --workload "$w" --engine sequential --repeat 10 \
        --warmup 2 --json
      one off $bench --workload "$w" --engine sequential --repeat 10 --warmup 2 --json \
        --no-stacked-products
    done
  done
done
