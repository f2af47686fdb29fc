#!/usr/bin/env bash
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
need=()
for p in python3-torch python3-torchvision python3-onnx python3-matplotlib libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v npm >/dev/null || { echo "run.sh: needs node and npm (Node.js 18 or later)" >&2; exit 1; }
[ -d bench/models/node_modules/onnxruntime-node ] ||
  (cd bench/models && npm install --no-audit --no-fund --ignore-scripts >/dev/null)
# The export keeps complete folders: a second run only writes what is missing.
flock /tmp/hetgraph-build.lock /usr/bin/python3 bench/models/export_models.py build/bench-models
flock /tmp/hetgraph-build.lock cmake --build build -j2 --target hetgraph-run >/dev/null
exec node bench/models/run.js "$@"
