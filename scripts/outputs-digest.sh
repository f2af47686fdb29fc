#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Digests of one build's outputs, for a bitwise before/after comparison (issue 47: a redesign
# that must change no output):
#   scripts/outputs-digest.sh BUILD_DIR OUT_FILE    then: diff BEFORE AFTER
# (1) hetgraph-bench's checksums (sum of every output, %.17g) on the workloads, sequential
#     engine, one run; (2) sha256 of every output hetgraph-run writes for the ONNX backend node
#     tests' models with their test_data_set_0 inputs (sequential engine).
set -u
b=$1 out=$2
tmp=$(mktemp -d)
: >"$out"
for w in mnist-softmax lstm-small lstm-infer-small phased-lstm-small pathnet-small inception-small \
         wide-deep-infer-1 wide-deep-train par-matmul-4 conv-2x16x32x32-32x3x3-p1 \
         maxpool-2x16x32x32-k3-s2 top-k-8x1000-10; do
  line=$("$b/bench/hetgraph-bench" --workload "$w" --engine sequential --repeat 1 --warmup 0 --json 2>&1 |
         grep -o '"checksum":[^,]*' | head -1)
  echo "bench $w $line" >>"$out"
done
for d in /usr/share/libonnx-testdata/data/node/*/; do
  [ -d "$d/test_data_set_0" ] || continue
  name=$(basename "$d")
  args=()
  for f in "$d"/test_data_set_0/input_*.pb; do [ -f "$f" ] && args+=(--input "$f"); done
  rm -rf "$tmp/o"
  if timeout 60 "$b/tools/hetgraph-run" "$d/model.onnx" "${args[@]}" --engine sequential --repeat 1 \
       --warmup 0 --output-dir "$tmp/o" >/dev/null 2>&1; then
    echo "onnx $name $(cat "$tmp"/o/*.pb 2>/dev/null | sha256sum | cut -c1-16)" >>"$out"
  else
    echo "onnx $name failed" >>"$out"
  fi
done
rm -rf "$tmp"
