#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 18's CNN comparison, everything in one command (bench/README.md, "CNN inference"):
#   bench/cnn/run.sh [run.js flags: --rounds 3 --label NAME ...]
# Bench-only dependencies, installed here and not by `make test` (python3-torch and
# python3-torchvision are ~1 GiB with their dependencies; onnxruntime-node goes into
# bench/cnn/node_modules, not committed). onnxruntime-node's install script would fetch CUDA
# binaries from GitHub: --ignore-scripts keeps the CPU library its npm tarball carries.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench/js/install-peers.sh bench/cnn python3-torch python3-torchvision python3-onnx
for f in googlenet-b1 googlenet-b32 resnet18-b1 resnet18-b32; do
  [ -f build/bench-cnn/$f.onnx ] || { /usr/bin/python3 bench/cnn/export_models.py build/bench-cnn; break; }
done
flock /tmp/hetgraph-build.lock cmake --build build -j2 --target hetgraph-run >/dev/null
exec node bench/cnn/run.js "$@"
