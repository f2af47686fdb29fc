#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Where `make test`'s time goes: clones HEAD into DIR, then runs the Makefile's test steps one
# by one (the lint, Release build and tests, ASan+UBSan, TSan, fuzz), printing each step's wall seconds
# (a test step includes make's check that its build is current, a few seconds);
# every compile goes through a launcher that logs its seconds to DIR/compile-<preset>.log.
# Each step holds the build lock while it runs; time spent waiting for it is not counted.
# No ccache: the figures are a clean CI machine's. Takes the build lock for each step.
#   scripts/ci-phases.sh DIR
set -euo pipefail
dir=$1
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
mkdir -p "$dir"
git clone -q "$repo" "$dir/src"
cat >"$dir/timecc.sh" <<'EOF'
#!/usr/bin/env bash
s=$(date +%s.%N)
"$@" && rc=0 || rc=$?
out="" prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; done
echo "$(echo "$(date +%s.%N) - $s" | bc) $out" >>"$TIMECC_LOG"
exit $rc
EOF
chmod +x "$dir/timecc.sh"
cd "$dir/src"
unset CCACHE_BASEDIR
export CMAKE_CXX_COMPILER_LAUNCHER=$dir/timecc.sh CMAKE_C_COMPILER_LAUNCHER=$dir/timecc.sh
lock=/tmp/hetgraph-build.lock
step() {  # step NAME COMMAND...: its seconds once it holds the lock (waits for it not counted)
  local name=$1
  shift
  flock "$lock" bash -c 's=$(date +%s); "$@" >"$0" 2>&1; rc=$?; echo $(($(date +%s) - s)) >"$0.seconds"; exit $rc' \
    "$dir/$name.log" "$@"
  echo "$name $(cat "$dir/$name.log.seconds")"
}
# The Makefile's own targets, so that the steps cannot drift from `make test`'s (each test-*
# target finds its build done and only runs ctest).
export TIMECC_LOG=$dir/compile-release.log
step lint make lint
step release-build make build
step release-tests make test-release
export TIMECC_LOG=$dir/compile-asan.log
step asan-build make build-asan
step asan-tests make test-asan
export TIMECC_LOG=$dir/compile-tsan.log
step tsan-build make build-tsan
step tsan-tests make test-tsan
unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_C_COMPILER_LAUNCHER
step fuzz-build make fuzz-build
step fuzz-tests make test-fuzz
for p in release asan tsan; do
  awk -v p="$p" '{ s += $1 } END { printf "%s compile seconds, summed: %.0f\n", p, s }' \
    "$dir/compile-$p.log"
done
