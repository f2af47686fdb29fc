#!/usr/bin/env bash
# The layer check (cmake/CheckLayers.cmake) must catch an upward include: a copy of the layer
# table over empty layer folders passes, then fails once the core layer includes a cpu header,
# naming the file, the include and the layers. Usage: check_layers.sh CMAKE SOURCE_DIR
set -u
cmake=$1 src=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/docs" "$root/cmake"
cp "$src/docs/ARCHITECTURE.md" "$root/docs/"
for d in $(sed -n '/^## Layers$/,/^## /p' "$src/docs/ARCHITECTURE.md" |
           sed -nE 's/^\| [a-z]+ \| ([a-z/]+) \|.*/\1/p' | grep -v '^folder$'); do
  mkdir -p "$root/$d"
done
echo '#include "compiler/plan.hpp"' >"$root/src/cpu/ok.cpp"
if ! "$cmake" -DROOT="$root" -P "$src/cmake/CheckLayers.cmake"; then
  echo "FAIL: an allowed include (cpu -> core) was refused"
  exit 1
fi
echo '#include "cpu/engine.hpp"' >"$root/src/compiler/upward.hpp"
out=$("$cmake" -DROOT="$root" -P "$src/cmake/CheckLayers.cmake" 2>&1) && {
  echo "FAIL: an upward include (core -> cpu) passed the check"
  exit 1
}
if ! grep -q 'src/compiler/upward.hpp: #include "cpu/engine.hpp": layer core (src/compiler) may not use layer cpu' <<<"$out"; then
  echo "FAIL: the error does not name the file, the include and the layers:"
  echo "$out"
  exit 1
fi
echo "ok: the upward include was refused"
