#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The layer check (cmake/CheckLayers.cmake) must catch an upward include: a copy of the layer
# table over empty layer folders passes, then fails once the core layer includes a cpu header,
# naming the file, the include and the layers; a table that differs from the layers the build
# declares fails; and with the layers' include roots an upward include does not even compile.
# Usage: check_layers.sh CMAKE SOURCE_DIR BUILD_DIR CXX
set -u
cmake=$1 src=$2 build=$3 cxx=$4
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

# The table against the build's declarations: one use dropped from the declared cpu row.
sed 's/^| cpu | src\/cpu | util, core, runtime |$/| cpu | src\/cpu | util, core |/' "$build/layers.txt" >"$root/declared.txt"
if cmp -s "$build/layers.txt" "$root/declared.txt"; then
  echo "FAIL: $build/layers.txt has no cpu row to change"
  exit 1
fi
rm "$root/src/compiler/upward.hpp"
out=$("$cmake" -DROOT="$root" -DDECLARED="$root/declared.txt" -P "$src/cmake/CheckLayers.cmake" 2>&1) && {
  echo "FAIL: a table that differs from the build's layers passed"
  exit 1
}
if ! grep -q "layer cpu: CMakeLists.txt lets it use" <<<"$out"; then
  echo "FAIL: the difference is not named:"
  echo "$out"
  exit 1
fi

# The compiler, with the include roots the layers' targets use (and the generated op rows:
# cmake/GenerateOps.cmake).
compile() {  # compile LAYER HEADER: does `#include "HEADER"` compile in that layer?
  echo "#include \"$2\"" | "$cxx" -std=c++20 -fsyntax-only -I "$src/include" \
    -I "$build/include" -I "$build/generated" -I "$build/layers/$1" -x c++ - 2>"$root/cc.log"
}
if ! compile cpu compiler/plan.hpp; then
  echo "FAIL: cpu -> core did not compile:"
  cat "$root/cc.log"
  exit 1
fi
if compile core cpu/engine.hpp; then
  echo "FAIL: core -> cpu compiled with the core layer's include root"
  exit 1
fi
if ! grep -q "cpu/engine.hpp: No such file" "$root/cc.log"; then
  echo "FAIL: core -> cpu failed for another reason:"
  cat "$root/cc.log"
  exit 1
fi
echo "ok: the upward include was refused by the check and by the compiler"
