#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The portable build's promise (src/cpu/simd/code_path.hpp): libhetgraph runs on any x86-64-v2
# CPU, so no instruction above that level (AVX and AVX-512: v-prefixed mnemonics; BMI, LZCNT,
# MOVBE of x86-64-v3; not TZCNT, which GCC emits as REP BSF for every CPU) may sit in a function
# that code outside the AVX2 and AVX-512 code paths can call. Allowed: the paths' own functions
# (namespaces isa_v3 and isa_v4), local copies private to a path's object, and weak copies of
# inline functions (std:: templates) that only the paths' objects define: a baseline source that
# called one would define its own copy. Where a baseline object defines one too, the library must
# hold the baseline copy (CMakeLists.txt links the paths' objects last for that): checked here
# against the objects themselves.
#   tests/check_portable.sh LIBRARY OBJECT_DIR...  (the library's targets' object folders)
#   e.g. tests/check_portable.sh build/libhetgraph.so build/CMakeFiles/hetgraph_*.dir
set -euo pipefail
lib=$1
shift
objects=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Global and weak function symbols of the library, with their binding.
nm --defined-only "$lib" | awk '$2 ~ /^[TWiu]$/ {print $3, $2}' | sort -u >"$tmp/global"
# Functions the baseline objects (everything but the paths' generated sources) define.
find "${objects[@]}" -name '*.o' ! -path '*/generated/isa_*' -print0 | xargs -0 nm --defined-only |
  awk '$2 ~ /^[TWiu]$/ {print $3}' | sort -u >"$tmp/baseline"
objdump -d --no-show-raw-insn "$lib" | awk -v globals="$tmp/global" -v baseline="$tmp/baseline" '
  BEGIN {
    while ((getline s < globals) > 0) { split(s, parts, " "); bind[parts[1]] = parts[2] }
    while ((getline s < baseline) > 0) base[s] = 1
  }
  /^[0-9a-f]+ <.*>:$/ { fn = substr($2, 2, length($2) - 3); next }
  /\t(v[a-z0-9]+|shlx|shrx|sarx|rorx|andn|bextr|blsi|blsr|blsmsk|bzhi|pdep|pext|lzcnt|movbe|mulx|k[a-z]+[bwdq]) / {
    if (!(fn in bind) || fn ~ /isa_v[34]/) next
    if ((fn in base) || bind[fn] != "W") bad[fn] = 1; else paths_only[fn] = 1
  }
  END {
    for (f in bad) print "bad", f
    n = 0; for (f in paths_only) n++
    print "weak", n
  }' >"$tmp/result"
if grep -q '^bad ' "$tmp/result"; then
  echo "functions callable from baseline code that use instructions above x86-64-v2:" >&2
  sed -n 's/^bad //p' "$tmp/result" | c++filt | head -20 >&2
  exit 1
fi
n=$(objdump -d --no-show-raw-insn "$lib" | grep -c '%ymm' || true)
echo "ok: no instruction above x86-64-v2 outside the code paths ($n ymm instructions inside them;" \
  "$(sed -n 's/^weak //p' "$tmp/result") weak inline copies only the paths' objects define)"
