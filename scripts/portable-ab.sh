#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The portable build against the native one (issue 45: within 5% on the CNN bench and make
# bench's workloads), interleaved in the same rounds. Builds build-native (HETGRAPH_NATIVE=ON,
# library, hetgraph-bench and hetgraph-run only) beside the default build/, then:
#   1. make bench's workloads (scripts/run-bench.sh's list, one size each) with hetgraph-bench,
#      sequential and auto engines, through scripts/engine-ab.sh: each round runs every
#      (workload, engine, build) once, a fresh process each;
#   2. bench/cnn/run.sh's googlenet and resnet18 at batch 1 and 32 with hetgraph-run (auto),
#      both builds in each round (ONNX Runtime runs too: every output is checked against it).
#   scripts/portable-ab.sh [ROUNDS [LABEL]]   (default 5 rounds; results in
#     bench/results/<date>-portable[-LABEL]-bench.jsonl and <date>-cnn-portable[-LABEL].jsonl,
#     then bench/portable_summary.py's paired ratios); CNN=0 skips step 2
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
label=portable${2:+-$2}
date=$(date +%Y-%m-%d)
for d in build build-native; do
  native=OFF; [ "$d" = build-native ] && native=ON
  [ -f "$d/CMakeCache.txt" ] || cmake -S . -B "$d" -DCMAKE_BUILD_TYPE=Release \
    -DHETGRAPH_NATIVE=$native -DHETGRAPH_BUILD_TESTS=OFF -DHETGRAPH_BUILD_EXAMPLES=OFF >/dev/null
  flock /tmp/hetgraph-build.lock cmake --build "$d" -j2 --target hetgraph-bench hetgraph-run >/dev/null
done
# A fresh tuning cache: the automatic engine searches in the first round of each build alike.
XDG_CACHE_HOME=$(mktemp -d)
export XDG_CACHE_HOME
workloads=matmul-200x100x200,matmul-1000x1000x1000,conv-64x16x32x32-16x3x3-p1,conv-32x64x32x32-64x3x3-p1
workloads+=,conv-32x192x28x28-64x1x1,maxpool-32x64x56x56-k3-s2-p1,avgpool-32x64x56x56-k3-s1-p1
workloads+=,mnist-softmax,par-matmul-1024,lstm-small,threadpool,pathnet-small,inception-small
workloads+=,wide-deep-infer-64,wide-deep-train,kernel-vector-add,kernel-reduce-mean-axis0
OUT=bench/results/$date-$label-bench.jsonl scripts/engine-ab.sh "$rounds" "$workloads" \
  portable=build/bench/hetgraph-bench native=build-native/bench/hetgraph-bench \
  -- "--engine sequential" "--engine auto"
cnn=bench/results/$date-cnn-$label.jsonl
if [ "${CNN:-1}" != 0 ]; then
  bench/cnn/run.sh --rounds "$rounds" --label "$label" --engines auto --contenders hetgraph \
    --hetgraph portable=build/tools/hetgraph-run,native=build-native/tools/hetgraph-run
else
  cnn=
fi
# shellcheck disable=SC2086
/usr/bin/python3 bench/portable_summary.py bench/results/$date-$label-bench.jsonl $cnn
