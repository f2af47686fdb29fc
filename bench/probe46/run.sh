#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Issue 46's second probe. Builds probe46.cpp against a release build (BUILD, default
# ../../build), runs every case in its own process under a time limit, then the hetgraph-run
# cases. Prints one block per case: its output and how the process ended.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-$root/build}
out=${OUT:-/tmp/probe46}
mkdir -p "$out"
g++ -std=c++20 -O1 -DONNX_NAMESPACE=onnx -DONNX_ML=1 -I"$root/include" -I"$root/src" \
  "$here/probe46.cpp" -o "$out/probe46" -L"$build" -Wl,-rpath,"$build" -lhetgraph -lonnx \
  -lonnx_proto -lprotobuf || exit 1
n=$("$out/probe46" list | wc -l)
for ((k = 0; k < n; k++)); do
  timeout 60 "$out/probe46" "$k" > "$out/case.txt" 2>&1
  st=$?
  cat "$out/case.txt" | cut -c1-600
  echo "  -> exit $st"
done
run="$build/tools/hetgraph-run"
m="$out/models"
rm -rf "$m"; "$out/probe46" models "$m"
tool() {
  echo "tool: $1"; shift
  timeout 30 "$run" "$@" 2>&1 | tail -4 | cut -c1-600
  echo "  -> exit ${PIPESTATUS[0]}"
}
tool "--input that is a folder" "$m/relu.onnx" --input "x=$m" --repeat 1 --warmup 0
tool "--input of the wrong shape" "$m/relu.onnx" --input "x=$m/three_floats.pb" --repeat 1 --warmup 0
tool "--trace that is a folder" "$m/relu.onnx" --trace "$m" --repeat 1 --warmup 0
rm -rf "$out/o1"
tool "--output-dir: two outputs, one file name" "$m/collide.onnx" --output-dir "$out/o1" --repeat 1 --warmup 0
ls "$out/o1"
rm -rf "$out/o2"
tool "--output-dir: outputs named .. and ." "$m/dots.onnx" --output-dir "$out/o2" --repeat 1 --warmup 0
ls -a "$out/o2"
tool "--input int64 beyond int32" "$m/int64.onnx" --input "i=$m/big_int64.pb" --repeat 1 --warmup 0
tool "--input one file twice (by position and by name)" "$m/relu.onnx" --input "$m/three_floats.pb" --input "x=$m/three_floats.pb"
tool "--repeat 0" "$m/relu.onnx" --repeat 0
tool "a loop over the node budget" "$m/loop.onnx" --repeat 1 --warmup 0
tool "--output-dir is the model's folder and an output is named like the model" "$m/relu.onnx" --output-dir "$m" --repeat 1 --warmup 0
tool "--trace is the model file itself" "$m/relu.onnx" --trace "$m/relu.onnx" --repeat 1 --warmup 0
ls -la "$m/relu.onnx"
mknod "$m/null.dev" c 1 3 && ln -s "$m/null.dev" "$m/dev.link"
tool "--trace through a link to a device (a private copy of /dev/null)" "$m/relu.onnx" --trace "$m/dev.link" --repeat 1 --warmup 0
ls -la "$m/null.dev" "$m/dev.link"
mkfifo "$m/trace.fifo"
tool "--trace to a FIFO nobody reads" "$m/relu.onnx" --trace "$m/trace.fifo" --repeat 1 --warmup 0
ls -la "$m/trace.fifo"
