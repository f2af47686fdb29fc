#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 48's model bench, everything in one command (bench/README.md, "Models nobody tuned"):
#   bench/models/run.sh [run.js flags: --rounds 3 --models a,b --label NAME ...]
# Bench-only dependencies, installed here and not by `make test` (python3-torch,
# python3-torchvision and python3-onnx are ~1 GiB with their dependencies; onnxruntime-node goes
# into bench/models/node_modules, not committed). onnxruntime-node's install script would fetch
# CUDA binaries from GitHub: --ignore-scripts keeps the CPU library its npm tarball carries.
# libopenblas0-pthread: without it Debian's torch multiplies matrices with the reference BLAS
# on one thread (ViT-B/16 at batch 1: 8.5 s instead of 0.41 s).
# Then the chart: /usr/bin/python3 bench/models/chart.py RESULTS.jsonl bench/charts/models.png
set -euo pipefail
cd "$(dirname "$0")/../.."
bench/js/install-peers.sh bench/models python3-torch python3-torchvision python3-onnx python3-matplotlib libopenblas0-pthread
# The export keeps complete folders: a second run only writes what is missing.
flock /tmp/hetgraph-build.lock /usr/bin/python3 bench/models/export_models.py build/bench-models
flock /tmp/hetgraph-build.lock cmake --build build -j2 --target hetgraph-run >/dev/null
exec node bench/models/run.js "$@"
