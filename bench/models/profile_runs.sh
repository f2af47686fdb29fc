#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The loop behind recurrent_profile.sh and kernel_profile.sh: each model directory run by each
# hetgraph-run in turn, ROUNDS interleaved rounds, REPEAT runs a process (default 20) with
# --json --profile; SUMMARY (Python) reads that JSON on stdin, with argv model, variant,
# round, and prints the run's line, which goes to OUT.
#   REPEAT=N bench/models/profile_runs.sh OUT ROUNDS SUMMARY NAME=HETGRAPH_RUN... -- MODEL_DIR...
set -euo pipefail
out=$1 rounds=$2 summary=$3
shift 3
variants=()
while [ "$1" != "--" ]; do variants+=("$1"); shift; done
shift
for round in $(seq 0 $((rounds - 1))); do
  for dir in "$@"; do
    inputs=()
    for f in "$dir"/*.pb; do inputs+=(--input "$(basename "$f" .pb)=$f"); done
    for v in "${variants[@]}"; do
      name=${v%%=*} bin=${v#*=}
      LD_LIBRARY_PATH=$(dirname "$bin") "$bin" "$dir/model.onnx" "${inputs[@]}" \
        --repeat "${REPEAT:-20}" --json --profile 2>/dev/null |
        /usr/bin/python3 -c "$summary" "$(basename "$dir")" "$name" "$round" >>"$out"
    done
  done
done
