#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs what scripts/device-run.sh needs on a machine that has none of our Debian packages (the
# lent 16-core GPU machine runs another distribution and cannot reach a package archive): the
# benchmark and test binaries of a portable build, libhetgraph, and every shared library they
# load except the C library itself, into .device/bundle.tar.gz (ignored by git).
#   cmake --build build -j2 --target hetgraph-bench hetgraph-run test_opencl test_engine test_replay
#   scripts/device-bundle.sh build
# The default build is portable (x86-64-v2, with its own kernels' AVX2 and AVX-512 code paths
# chosen at run time, as oneDNN chooses its own), so it runs on the lent machine whether that is
# Intel or AMD; a HETGRAPH_NATIVE build would fault there on this VM's AMD-only instructions.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build}
grep -qx '/.device/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.device/ >>.git/info/exclude; }
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/lib" .device
bins=("$b/bench/hetgraph-bench" "$b/tools/hetgraph-run" "$b/tests/test_opencl" "$b/tests/test_engine"
  "$b/tests/test_replay")
cp "${bins[@]}" "$stage/bin/"
# glibc's own libraries stay behind: the other machine's loader must match its libc.
for f in "${bins[@]}"; do ldd "$f"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' | while read -r l; do
    cp -L "$l" "$stage/lib/"
  done
tar -C "$stage" -czf .device/bundle.tar.gz bin lib
rm -rf "$stage"
ls -la .device/bundle.tar.gz
