#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The benchmark suite (make bench): every workload on every engine and symmetric executor
# configuration, at sizes that fit in about 15 minutes on a 2-core machine. JSON lines go to
# bench/results/<date>.jsonl (appended), then bench/plot.py draws the charts.
#   scripts/run-bench.sh [--quick]       --quick: fewer repetitions, smaller sizes
# Bigger sizes (lstm-large, par-matmul-16384, ...) stay runnable by name with hetgraph-bench.
set -uo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/hetgraph-bench
mkdir -p bench/results
out=bench/results/$(date +%Y-%m-%d).jsonl
quick=0
[ "${1:-}" = "--quick" ] && quick=1
rep() { [ $quick = 1 ] && echo 3 || echo "$1"; }
opencl=0
$bench --json --workload matmul-8x8x8 --platform opencl --repeat 1 --warmup 0 >/dev/null 2>&1 && opencl=1

run() {  # every line also to stdout
  flock /tmp/hetgraph-build.lock "$bench" --json "$@" | tee -a "$out"
}
cores=$(nproc)
configs=()
for e in $(seq 1 "$cores"); do [ $((cores % e)) -eq 0 ] && configs+=("${e}x$((cores / e))"); done
matrix() {  # workload, repeat, extra args: sequential, both parallel engines x configs, auto
  local w=$1 r=$2; shift 2
  run --workload "$w" --engine sequential --repeat "$r" "$@"
  for c in "${configs[@]}"; do
    for e in critical-path shared-queue; do run --workload "$w" --engine "$e" --executors "$c" --repeat "$r" "$@"; done
  done
  run --workload "$w" --engine auto --repeat "$r" "$@"
}

echo "writing $out" >&2
# Kernels against the raw library calls of the same shapes.
run --workload matmul-200x100x200,sgemm-200x100x200,matmul-1000x1000x1000,sgemm-1000x1000x1000 --repeat "$(rep 15)"
# Convolution and pooling nodes against raw oneDNN on the same shapes (pathnet and inception
# layers); three interleaved rounds, plot.py takes the median.
pairs=(conv-64x16x32x32-16x3x3-p1 conv-32x64x32x32-64x3x3-p1 conv-32x192x28x28-64x1x1
       conv-32x32x28x28-64x5x5-p2 maxpool-64x16x32x32-k2 maxpool-32x64x56x56-k3-s2-p1
       avgpool-32x64x56x56-k3-s1-p1)
for round in 1 2 3; do
  [ $quick = 1 ] && [ $round -gt 1 ] && continue
  for p in "${pairs[@]}"; do run --workload "$p,dnnl-$p" --repeat "$(rep 15)"; done
done
# Engines: the issue-5 workloads.
matrix mnist-softmax "$(rep 10)"
for n in 512 1024 2048 4096 8192; do
  [ $quick = 1 ] && [ $n -gt 1024 ] && continue
  matrix "par-matmul-$n" "$(rep 5)" --warmup 1
done
matrix lstm-small "$(rep 10)"
[ $quick = 0 ] && matrix lstm-medium 3 --warmup 1
for w in threadpool threadpool-dag; do
  for inl in 2 0; do
    run --workload "$w" --engine sequential --repeat "$(rep 20)" --inline-below-us "$inl"
    for e in critical-path shared-queue; do run --workload "$w" --engine "$e" --executors "${cores}x1" --repeat "$(rep 20)" --inline-below-us "$inl"; done
  done
done
# The workload zoo (issue 6), where this build has it.
for w in phased-lstm-small pathnet-small pathnet-medium inception-small wide-deep-infer-1 wide-deep-infer-64 wide-deep-train threadpool-10k; do
  if $bench --json --workload "$w" --repeat 1 --warmup 0 >/dev/null 2>&1; then matrix "$w" "$(rep 10)" --warmup 2; fi
done
for w in kernel-vector-add kernel-matmul kernel-reduce-mean-axis0 kernel-reduce-mean-axis1; do
  if $bench --json --workload "$w" --repeat 1 --warmup 0 >/dev/null 2>&1; then
    run --workload "$w" --repeat "$(rep 5)" --warmup 1
    run --workload "$w" --repeat "$(rep 5)" --warmup 1 --no-mapped
    [ $opencl = 1 ] && run --workload "$w" --platform opencl --repeat "$(rep 5)" --warmup 1
    [ $opencl = 1 ] && run --workload "$w" --platform opencl --repeat "$(rep 5)" --warmup 1 --no-mapped
  fi
done
if [ $opencl = 1 ]; then
  run --workload mnist-softmax --platform opencl --repeat "$(rep 5)"
  run --workload par-matmul-1024 --platform opencl --repeat "$(rep 3)" --warmup 1
fi
echo "results appended to $out" >&2
# Debian's python3 has python3-matplotlib; a python3 earlier on PATH (pyenv) may not.
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
$py bench/plot.py "$out" || echo "plot.py failed (matplotlib missing?)" >&2
