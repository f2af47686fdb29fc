#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 12, grouped embeddings: fused vs unfused wide & deep, interleaved A/B rounds (each
# invocation a fresh process; each pair under the build lock, as the machine is shared).
#   bench/embedding-groups-ab.sh ROUNDS OUT.jsonl
# A: defaults. B: --no-grouped-embeddings (one node per lookup and the concat). On OpenCL,
# wide-deep-train also runs C: --no-fuse (dense table gradients and SGD: what main ran there
# before it had an embedding_update kernel).
set -euo pipefail
rounds=$1 out=$2
bench=${BENCH:-build/bench/hetgraph-bench}
run() {  # label, then the arguments
  local label=$1
  shift
  local line
  line=$($bench --json "$@" | tail -1)
  printf '%s\n' "${line/#\{/\{\"variant\":\"$label\",\"cmd\":\"hetgraph-bench --json $*\",}" >>"$out"
}
for r in $(seq "$rounds"); do
  for w in wide-deep-infer-64 wide-deep-train; do
    for e in sequential shared-queue critical-path auto; do
      flock /tmp/hetgraph-build.lock bash -c "$(declare -f run); bench=$bench out=$out; \
        run fused --workload $w --engine $e --repeat 30; \
        run unfused --workload $w --engine $e --repeat 30 --no-grouped-embeddings"
    done
    reps=30
    [[ $w == wide-deep-train ]] && reps=10
    flock /tmp/hetgraph-build.lock bash -c "$(declare -f run); bench=$bench out=$out; \
      run fused --workload $w --platform opencl --repeat $reps; \
      run unfused --workload $w --platform opencl --repeat $reps --no-grouped-embeddings"
    if [[ $w == wide-deep-train ]]; then
      flock /tmp/hetgraph-build.lock bash -c "$(declare -f run); bench=$bench out=$out; \
        run nofuse --workload $w --platform opencl --repeat $reps --no-fuse"
    fi
  done
  echo "round $r done" >&2
done
