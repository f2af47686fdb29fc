#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the built library into a scratch prefix, then builds the README quickstart against
# it twice: with find_package(hetgraph) and with pkg-config. Both programs must run.
set -euo pipefail
build_dir=$1 source=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$(dirname "$0")" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DQUICKSTART_SOURCE="$source" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
libdir=$(find "$work/prefix" -name hetgraph.pc -printf '%h\n' | head -n1)
export PKG_CONFIG_PATH="$libdir"
g++ "$source" -o "$work/consumer_pc" $(pkg-config --cflags --libs hetgraph) -Wl,-rpath,"$(pkg-config --variable=libdir hetgraph)"
"$work/consumer_pc"
# Installed programs find the installed libraries from any prefix (their run path is relative).
env -u LD_LIBRARY_PATH "$work/prefix/bin/hetgraph-run" --help >/dev/null
echo "consumer: find_package and pkg-config builds both ran; the installed hetgraph-run runs"
