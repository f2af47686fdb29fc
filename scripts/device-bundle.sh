#!/usr/bin/env bash
# Packs what scripts/device-run.sh needs on a machine that has none of our Debian packages (the
# lent 16-core GPU machine runs another distribution and cannot reach a package archive): the
# benchmark and test binaries of a portable build, libhetgraph, and every shared library they
# load except the C library itself, into .device/bundle.tar.gz (ignored by git).
#   cmake -S . -B build-x86v3 -DHETGRAPH_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
#         -DCMAKE_C_FLAGS=-march=x86-64-v3
#   cmake --build build-x86v3 -j2 --target hetgraph-bench hetgraph-run test_opencl test_engine test_replay
#   scripts/device-bundle.sh build-x86v3
# -march=x86-64-v3 (AVX2, FMA): this VM is AMD Zen 3 and the lent machine may be Intel, where
# -march=native's AMD-only instructions would fault. oneDNN still picks its ISA at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-x86v3}
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
