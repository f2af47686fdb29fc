#!/usr/bin/env bash
# The portable build's promise (src/cpu/simd/code_path.hpp): libhetgraph runs on any x86-64-v2
# CPU, so no instruction above that level (AVX and AVX-512: v-prefixed mnemonics; BMI, LZCNT,
# MOVBE of x86-64-v3; not TZCNT, which GCC emits as REP BSF for every CPU) may sit in a function
# that code outside the AVX2 and AVX-512 code paths can call: only in the paths' own functions
# (namespaces isa_v3 and isa_v4) and in local copies (clones, inline functions) private to a
# path's object files. A global function that a path's object and a baseline one both emit must
# be the baseline copy: CMakeLists.txt links the paths' objects last for that.
#   tests/check_portable.sh build/libhetgraph.so
set -euo pipefail
lib=$1
# Global and weak function symbols: code outside the paths may call them.
nm --defined-only "$lib" | awk '$2 ~ /^[TWiu]$/ {print $3}' | sort -u >"${TMPDIR:-/tmp}/global.$$"
trap 'rm -f "${TMPDIR:-/tmp}/global.$$"' EXIT
above=$(objdump -d --no-show-raw-insn "$lib" | awk -v globals="${TMPDIR:-/tmp}/global.$$" '
  BEGIN { while ((getline s < globals) > 0) global[s] = 1 }
  /^[0-9a-f]+ <.*>:$/ { fn = substr($2, 2, length($2) - 3); next }
  /\t(v[a-z0-9]+|shlx|shrx|sarx|rorx|andn|bextr|blsi|blsr|blsmsk|bzhi|pdep|pext|lzcnt|movbe|mulx|k[a-z]+[bwdq]) / {
    if ((fn in global) && fn !~ /isa_v[34]/) bad[fn]++
  }
  END { for (f in bad) print f }')
if [ -n "$above" ]; then
  echo "functions callable from baseline code that use instructions above x86-64-v2:" >&2
  echo "$above" | c++filt | head -20 >&2
  exit 1
fi
n=$(objdump -d --no-show-raw-insn "$lib" | grep -c '%ymm' || true)
echo "ok: no instruction above x86-64-v2 outside the code paths ($n ymm instructions inside them)"
