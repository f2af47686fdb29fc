#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A rank lost in the middle of training must end the job within a bounded time, with an error
# that names it, never a hang. Usage: distributed_lost_rank.sh MPIRUN TEST_DISTRIBUTED MODE
#   kill-recovery  kill -9 rank 1 under `mpirun --enable-recovery` (mpirun lets the survivors
#                  run): rank 0's heartbeat check must name rank 1
#   stop           SIGSTOP rank 1 (a hang mpirun cannot see): the same, then mpirun ends the job
#   kill           kill -9 rank 1 under plain mpirun: mpirun ends the job and names the rank
set -u
mpirun=$1 prog=$2 mode=$3
limit=30  # seconds from the kill to the end of the job; the heartbeat timeout below is 3
dir=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

flags=(--allow-run-as-root --oversubscribe -np 2)
[ "$mode" = kill-recovery ] && flags+=(--enable-recovery)
HETGRAPH_TEST_PID_DIR=$dir HETGRAPH_MPI_HEARTBEAT_TIMEOUT=3 \
  timeout $((limit + 60)) "$mpirun" "${flags[@]}" "$prog" --gtest_brief=1 \
  --gtest_filter=Failure.LostRankIsNamed >"$dir/out" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  [ -s "$dir/rank1.pid" ] && break
  sleep 0.1
done
if [ ! -s "$dir/rank1.pid" ]; then
  echo "FAIL: rank 1 never started training"
  kill "$job" 2>/dev/null
  cat "$dir/out"
  exit 1
fi
pid=$(cat "$dir/rank1.pid")
sleep 0.5
t0=$(date +%s%N)
case $mode in
  stop) kill -STOP "$pid" ;;
  *) kill -9 "$pid" ;;
esac
wait "$job"
rc=$?
elapsed=$((($(date +%s%N) - t0) / 1000000))
cat "$dir/out"
echo "mpirun exit status $rc, ${elapsed} ms after rank 1 was lost"

fail() {
  echo "FAIL: $*"
  exit 1
}
[ "$rc" -eq 124 ] && fail "the job hung (killed by timeout)"
[ "$elapsed" -le $((limit * 1000)) ] || fail "the job took longer than ${limit} s to end"
case $mode in
  kill)
    [ "$rc" -ne 0 ] || fail "mpirun reported success"
    grep -q "rank 1 .*exited on signal 9" "$dir/out" || fail "mpirun did not name rank 1"
    ;;
  *)
    grep -q "^rank 0: .*rank 1 stopped responding" "$dir/out" ||
      fail "rank 0 did not fail with an error naming rank 1"
    grep -q "FAILED" "$dir/out" && fail "a test failed"
    ;;
esac
echo "PASS"
