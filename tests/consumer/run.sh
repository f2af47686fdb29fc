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
# The installed Python module (where it was built) imports from the prefix and finds the
# prefix's libhetgraph through its run path.
site=$(find "$work/prefix" -name 'hetgraph*.so' -path '*-packages/*' -printf '%h\n' | head -n1)
if [ -n "$site" ]; then
  PYTHONPATH="$site" /usr/bin/python3 - "$work/prefix" <<'PY'
import os, sys
import numpy as np
import hetgraph as hg
prefix = os.path.realpath(sys.argv[1])
assert os.path.realpath(hg.__file__).startswith(prefix), hg.__file__
assert os.path.join(prefix, "lib", "libhetgraph.so.0") in open("/proc/self/maps").read()
g = hg.Graph()
x = g.input("x")
cg = hg.GraphCompiler().compile(g, {"x": (2,)}, [hg.reduce_sum(x)])
cg.run({"x": np.array([1.5, 2.5], np.float32)})
PY
  echo "consumer: the installed Python module imports and runs"
fi
echo "consumer: find_package and pkg-config builds both ran; the installed hetgraph-run runs"
