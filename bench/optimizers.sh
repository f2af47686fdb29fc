#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# MNIST softmax (Fashion-MNIST, batch 500, 10 epochs) trained with each optimizer through
# examples/mnist_softmax --json, the rules interleaved round by round (these VMs are noisy: only
# interleaved medians mean much), each run under the build lock. Appends one JSON line per run,
# with the command that produced it, to OUT, and prints per rule the median time per epoch,
# its ratio to sgd and the test accuracy.
#   bench/optimizers.sh ROUNDS OUT.jsonl [PLATFORM]
set -euo pipefail
rounds=$1 out=$2 platform=${3:-cpu}
example=${EXAMPLE:-build/examples/mnist_softmax}
rules=("sgd --lr 0.1" "momentum --lr 0.05" "nesterov --lr 0.05" "adam --lr 0.001"
       "adamw --lr 0.001 --weight-decay 0.01" "rmsprop --lr 0.001" "adagrad --lr 0.05")
for r in $(seq "$rounds"); do
  for rule in "${rules[@]}"; do
    cmd="$example --json --platform $platform --optimizer $rule"
    line=$(flock /tmp/hetgraph-build.lock $cmd 2>/dev/null | tail -1)
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["command"]=sys.argv[2]; d["round"]=int(sys.argv[3]); print(json.dumps(d))' \
      "$line" "$cmd" "$r" >>"$out"
  done
done
python3 - "$out" "$platform" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [r for r in runs if r["platform"].startswith(sys.argv[2])]
by = {}
for r in runs:
    by.setdefault(r["optimizer"], []).append(r)
base = statistics.median(r["train_s"] / r["epochs"] for r in by["sgd"])
print(f"{'optimizer':10} {'epoch s (median)':>17} {'x sgd':>6} {'compute s':>10} {'accuracy':>9} runs")
for name, rs in by.items():
    e = statistics.median(r["train_s"] / r["epochs"] for r in rs)
    c = statistics.median(r["compute_s"] for r in rs)
    print(f"{name:10} {e:17.5f} {e / base:6.2f} {c:10.4f} {rs[0]['test_accuracy']:9.4f} {len(rs)}")
PY
