#!/usr/bin/env bash
# Runs the benchmark suite and appends JSON lines to bench/results/<date>.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/hetgraph-bench
mkdir -p bench/results
out=bench/results/$(date +%Y-%m-%d).jsonl
run() { "$bench" --json "$@" | tee -a "$out"; }

# A matmul node against a raw dnnl_sgemm of the same shape (issue: within 5%).
run --workload matmul-200x100x200,sgemm-200x100x200,matmul-1000x1000x1000,sgemm-1000x1000x1000 --repeat 15
echo "results appended to $out"
