#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The peer harnesses' own dependencies (bench/cnn/run.sh, bench/models/run.sh), never `make
# test`'s: Debian packages that are missing, then onnxruntime-node from npm into DIR/node_modules.
# onnxruntime-node's install script would fetch CUDA binaries from GitHub: --ignore-scripts keeps
# the CPU library its npm tarball carries.
#   bench/js/install-peers.sh DIR PACKAGE...
set -euo pipefail
dir=$1
shift
need=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v npm >/dev/null || { echo "install-peers.sh: needs node and npm (Node.js 18 or later)" >&2; exit 1; }
[ -d "$dir/node_modules/onnxruntime-node" ] ||
  (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts >/dev/null)
