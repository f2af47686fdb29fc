#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `pip install .` as docs/python.md gives it, from Debian's packages alone (--no-index: a
# step that would fetch anything fails instead): into a fresh venv that sees Debian's NumPy,
# taking the built tree BUILD_DIR (setup.py's HETGRAPH_BUILD_DIR) instead of building anew. The
# installed module must import from the venv (not the build tree), find its libraries in
# hetgraph.libs, and run a graph; then pip uninstall must remove it.
#   scripts/test-pip-install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
scratch=$(mktemp -d /tmp/hetgraph-pip.XXXXXX)
trap 'rm -rf "$scratch" "$src/hetgraph.egg-info"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$scratch/venv"
# A copy of the tree, so that setuptools' build/ and egg-info stay out of the checkout.
git -C "$src" ls-files -z --cached --others --exclude-standard |
  (cd "$src" && xargs -0 cp --parents -t "$scratch/" 2>/dev/null || true)
HETGRAPH_BUILD_DIR="$build" "$scratch/venv/bin/pip" install -q --no-build-isolation --no-index \
  --no-cache-dir "$scratch"
cd "$scratch"
env -u PYTHONPATH "$scratch/venv/bin/python" - <<'PY'
import os, sys
import numpy as np
import hetgraph as hg
where = os.path.realpath(hg.__file__)
assert where.startswith(os.path.realpath(sys.prefix)), f"imported {where}, not the venv's"
libs = os.path.join(os.path.dirname(where), "hetgraph.libs")
assert sorted(os.listdir(libs)) == ["libhetgraph.so.0", "libhetgraph_omp_env.so.0"], libs
maps = open("/proc/self/maps").read()
assert os.path.join(libs, "libhetgraph.so.0") in maps, "libhetgraph not loaded from hetgraph.libs"
g = hg.Graph()
x = g.input("x")
y = hg.reduce_sum(x * 2.0)
cg = hg.GraphCompiler().compile(g, {"x": (3,)}, [y])
cg.run({"x": np.array([1, 2, 3], np.float32)})
assert float(cg.read(y)) == 12.0
print("pip install: hetgraph imported from", where)
PY
"$scratch/venv/bin/pip" uninstall -q -y hetgraph
if env -u PYTHONPATH "$scratch/venv/bin/python" -c "import hetgraph" 2>/dev/null; then
  echo "test-pip-install: hetgraph still imports after pip uninstall" >&2
  exit 1
fi
echo "pip uninstall: removed"
