#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hetgraph's lint: clang-format on the changed lines and clang-tidy (.clang-tidy's checks) on the
# changed C++ sources, against BASE (default: the commit before HEAD, so `make test` lints the
# change on top; uncommitted changes count too). --all: clang-tidy on every source instead
# (minutes; clang-format is then not run, as the older code predates .clang-format).
# clang-tidy reads the build's compilation database without the precompiled header's flags
# (GCC's .gch is not clang's). Exit 1 with the findings when there are any.
#   scripts/lint.sh [--all | BASE] [BUILD_DIR]   (BUILD_DIR default: build)
set -euo pipefail
cd "$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)"
mode=change base=""
if [ "${1:-}" = --all ]; then
  mode=all
  shift
elif [ $# -gt 0 ] && [ "${1:-}" != "" ]; then
  base=$1
  shift
fi
build=${1:-build}
if [ $mode = change ] && [ -z "$base" ]; then
  base=$(git rev-parse -q --verify HEAD~1 || true)
  [ -n "$base" ] || { echo "lint: no commit before HEAD to compare with: nothing to lint"; exit 0; }
fi
[ -f "$build/compile_commands.json" ] || { echo "lint: $build/compile_commands.json is missing (configure first)" >&2; exit 2; }

if [ $mode = all ]; then
  mapfile -t files < <(git ls-files 'src/*.cpp' 'tools/*.cpp' 'examples/*.cpp' 'bench/*.cpp' 'tests/*.cpp')
else
  mapfile -t files < <(git diff --name-only --diff-filter=d "$base" -- '*.cpp' '*.hpp')
fi
[ ${#files[@]} -gt 0 ] || { echo "lint: no C++ file changed since ${base:-?}"; exit 0; }

failed=0
if [ $mode = change ]; then
  # Only the lines the change touched: older code predates .clang-format.
  out=$(git clang-format-14 --diff --extensions cpp,hpp "$base" -- "${files[@]}" 2>&1 || true)
  if [ -n "$out" ] && ! grep -qE "^(no modified files to format|clang-format did not modify any files)$" <<<"$out"; then
    echo "lint: clang-format would change these lines (git clang-format-14 $base fixes them):"
    echo "$out"
    failed=1
  fi
fi

db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
python3 - "$build/compile_commands.json" "$db/compile_commands.json" <<'PY'
import json, re, sys
entries = json.load(open(sys.argv[1]))
for e in entries:
    e["command"] = re.sub(r" -include \S+cmake_pch\.hxx| -Winvalid-pch", "", e["command"])
json.dump(entries, open(sys.argv[2], "w"))
PY
known=$(python3 -c 'import json,sys; print("\n".join(e["file"] for e in json.load(open(sys.argv[1]))))' "$db/compile_commands.json")
tidied=0
for f in "${files[@]}"; do
  [[ $f == *.cpp ]] || continue
  grep -qxF "$PWD/$f" <<<"$known" || continue  # not compiled by this build (fuzz/, Taskflow's)
  tidied=$((tidied + 1))
  out=$(clang-tidy-14 -p "$db" --quiet "$f" 2>/dev/null || true)
  # clang 14 lacks a few C++20 features GCC 12 has (lambdas capturing structured bindings):
  # a file it cannot parse is named, not failed.
  if grep -q "\[clang-diagnostic-error\]" <<<"$out"; then
    echo "lint: note: clang-tidy 14 cannot parse $f (a C++20 feature clang 14 lacks); not checked"
    continue
  fi
  if grep -qE "(warning|error):" <<<"$out"; then
    echo "$out"
    failed=1
  fi
done
echo "lint: ${#files[@]} changed file(s), clang-tidy on $tidied"
exit $failed
