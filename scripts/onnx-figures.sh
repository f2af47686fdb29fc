#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ONNX figures (issue 17): the LSTM and wide & deep inference workloads exported to ONNX
# by hetgraph-bench --export-onnx and run by hetgraph-run, next to the same graphs built by
# hand and run by hetgraph-bench, in interleaved rounds (one invocation of each per round, so
# a noisy moment of the machine falls on both); then hetgraph-run on every PyTorch-converted
# model of the ONNX backend tests that hetgraph runs, from the tests' own input files.
# JSON lines (each with "source" and "round") go to bench/results/<date>-onnx.jsonl; the
# summary table is printed at the end (bench/onnx_summary.py).
#   scripts/onnx-figures.sh [ROUNDS=5] [REPEAT=50]
# Each run takes /tmp/hetgraph-build.lock by itself; to hold it once for the whole script:
#   flock /tmp/hetgraph-build.lock env ONNX_FIGURES_LOCK= scripts/onnx-figures.sh 3 30
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5} repeat=${2:-50}
bench=build/bench/hetgraph-bench run=build/tools/hetgraph-run
models=build/onnx-figures
lock=${ONNX_FIGURES_LOCK-flock /tmp/hetgraph-build.lock}
out=bench/results/$(date +%Y-%m-%d)-onnx.jsonl
mkdir -p bench/results "$models"
workloads=(lstm-infer-small lstm-infer-medium wide-deep-infer-1 wide-deep-infer-64)
engines=("--engine sequential" "--engine critical-path --executors 2x1" "--engine auto")

# Each timed command's output is held until it exits (`held`), then tagged: a python3 in the
# pipe beside it would take one of the two cores while it times (see scripts/ab.sh).
held() { local out; out=$("$@"); printf '%s\n' "$out"; }
tag() {  # adds "source" and "round" to a JSON line
  python3 -c 'import json,sys; d=json.loads(sys.stdin.read().splitlines()[-1]); d.update(source=sys.argv[1], round=int(sys.argv[2])); print(json.dumps(d))' "$1" "$2"
}
inputs_of() {  # --input flags for a workload's exported inputs
  local w=$1 f
  for f in "$models/$w"/*.pb; do printf ' --input %s=%s' "$(basename "$f" .pb)" "$f"; done
}

$lock "$bench" --workload "$(IFS=,; echo "${workloads[*]}")" --export-onnx "$models" >&2
echo "writing $out" >&2
for r in $(seq "$rounds"); do
  for w in "${workloads[@]}"; do
    rep=$repeat
    [ "$w" = lstm-infer-medium ] && rep=$((repeat / 5 > 3 ? repeat / 5 : 3))
    for e in "${engines[@]}"; do
      # shellcheck disable=SC2086
      held $lock "$bench" --json --workload "$w" $e --repeat "$rep" | tag hand-built "$r" | tee -a "$out"
      # shellcheck disable=SC2086
      held $lock "$run" "$models/$w.onnx" $(inputs_of "$w") $e --repeat "$rep" --json |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d["workload"]=sys.argv[1]; print(json.dumps(d))' "$w" |
        tag imported "$r" | tee -a "$out"
    done
  done
done

# The PyTorch-converted backend tests that pass (tests/onnx_conformance/expected.txt).
data=/usr/share/libonnx-testdata/data/pytorch-converted
for t in $(awk '$1 ~ /^pytorch-converted\// && $2 == "pass" {sub("pytorch-converted/", "", $1); print $1}' tests/onnx_conformance/expected.txt); do
  flags=""
  for f in "$data/$t"/test_data_set_0/input_*.pb; do flags="$flags --input $f"; done
  # shellcheck disable=SC2086
  held $lock "$run" "$data/$t/model.onnx" $flags --repeat "$repeat" --json |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d["workload"]=sys.argv[1]; print(json.dumps(d))' "$t" |
    tag pytorch-converted 1 | tee -a "$out"
done
python3 bench/onnx_summary.py "$out"
