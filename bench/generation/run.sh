#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The generation bench in one command (docs/onnx.md, "State"): its own dependencies first
# (Debian's python3-torch for the export, onnxruntime-node into bench/models/node_modules; not
# `make test`'s), the Python module built, then bench/generation/run.py with these flags:
#   bench/generation/run.sh [--rounds 5] [--opencl] > OUT.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
bench/js/install-peers.sh bench/models python3-torch >&2
flock /tmp/hetgraph-build.lock cmake --build build -j2 --target hetgraph_python >&2
PYTHONPATH=build/python exec /usr/bin/python3 bench/generation/run.py "$@"
