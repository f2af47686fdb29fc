#!/usr/bin/env bash
# Where `make test`'s time goes: clones HEAD into DIR, then runs the Makefile's test steps one
# by one (Release build and tests, ASan+UBSan, TSan, fuzz), printing each step's wall seconds;
# every compile goes through a launcher that logs its seconds to DIR/compile-<preset>.log.
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
step() {  # step NAME COMMAND...
  local name=$1 s
  shift
  s=$(date +%s)
  flock "$lock" "$@" >"$dir/$name.log" 2>&1
  echo "$name $(($(date +%s) - s))"
}
export TIMECC_LOG=$dir/compile-release.log
step release-build make build
step release-tests ctest --preset release
export TIMECC_LOG=$dir/compile-asan.log
cmake --preset asan >/dev/null
step asan-build cmake --build --preset asan
step asan-tests ctest --preset asan
export TIMECC_LOG=$dir/compile-tsan.log
cmake --preset tsan >/dev/null
step tsan-build cmake --build --preset tsan --target test_engine test_tuning test_pipeline
step tsan-tests ctest --preset tsan -R "^(test_engine|test_tuning|test_pipeline)$"
unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_C_COMPILER_LAUNCHER
step fuzz-build make fuzz-build
step fuzz-tests ctest --test-dir build-fuzz -j 2
for p in release asan tsan; do
  awk -v p="$p" '{ s += $1 } END { printf "%s compile seconds, summed: %.0f\n", p, s }' \
    "$dir/compile-$p.log"
done
