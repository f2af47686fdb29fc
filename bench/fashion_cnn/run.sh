#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# examples/fashion_cnn against the same network, data and optimizer in PyTorch, interleaved
# (bench/README.md, "Fashion-MNIST CNN training against PyTorch"):
#   bench/fashion_cnn/run.sh [--rounds 2] [--epochs 2] [--out FILE]
# Bench-only dependencies, installed here and not by `make test`: Debian's python3-torch (1.13)
# and libopenblas0-openmp. Installing OpenBLAS makes it the system's libblas.so.3 /
# liblapack.so.3 (Debian alternatives); the previous choice is put back, and compare.py hands
# OpenBLAS to its PyTorch runs alone (LD_LIBRARY_PATH).
set -euo pipefail
cd "$(dirname "$0")/../.."
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
installed python3-torch ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
if ! installed libopenblas0-openmp; then
  alts=(libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu)
  before=()
  # One level: the registered alternative (readlink -f would give the file behind it).
  for a in "${alts[@]}"; do before+=("$(readlink "/etc/alternatives/$a")"); done
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libopenblas0-openmp >/dev/null
  for i in "${!alts[@]}"; do update-alternatives --set "${alts[$i]}" "${before[$i]}" >/dev/null; done
fi
flock /tmp/hetgraph-build.lock cmake --build build -j2 --target fashion_cnn >/dev/null
exec /usr/bin/python3 bench/fashion_cnn/compare.py "$@"
