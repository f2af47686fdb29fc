#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Training and serving on a busy machine (issue 45): K CPU-bound background processes (K = 0,
# 1, 2 by default; shell busy loops, started and stopped here, each bounded by `timeout`), and
# under each, in interleaved rounds:
#   default      examples/mnist_softmax with its defaults (2 epochs); PyTorch: the same training
#                (bench/load/torch_softmax.py) with its default threads
#   threads1     the same with --threads 1; PyTorch: torch.set_num_threads(1)
#   threadsN     PyTorch with torch.set_num_threads(N), N the cores (its default may be fewer:
#                Debian's build starts with one thread on some machines)
#   many-models  hetgraph-many-models: 4 graphs run one after another vs. 4 threads at once
# One JSON line per measurement into OUT (default bench/results/<date>-load.jsonl), with the
# machine, K and the commit. PyTorch rows are skipped (with a note) where torch is not installed
# (Debian's python3-torch). --builds "LABEL=DIR ..." runs the hetgraph cases of several builds
# (an older commit's build beside this one: before and after), interleaved in each round.
#   bench/load/run.sh [--rounds 3] [--ks "0 1 2"] [--epochs 2] [--builds "hetgraph=build"] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3 ks="0 1 2" epochs=2 builds="hetgraph=build" out=bench/results/$(date +%Y-%m-%d)-load.jsonl
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --ks) ks=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --builds) builds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for b in $builds; do
  dir=${b#*=}
  [ -x "$dir/examples/mnist_softmax" ] && [ -x "$dir/bench/hetgraph-many-models" ] ||
    { echo "run.sh: build $dir/examples/mnist_softmax and $dir/bench/hetgraph-many-models first" >&2; exit 2; }
done
torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || { torch=0; echo "run.sh: no PyTorch (python3-torch): its rows are skipped" >&2; }
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include CMakeLists.txt || echo "+dirty")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
isa=$(grep -q avx512f /proc/cpuinfo && echo avx512 || (grep -q avx2 /proc/cpuinfo && echo avx2 || echo other))
mkdir -p "$(dirname "$out")"

. scripts/busy.sh

emit() {  # emit K CASE ROUND BUILD JSON-FIELDS
  echo "{\"bench\":\"load\",\"k\":$1,\"case\":\"$2\",\"round\":$3,\"build\":\"$4\",\"cpu\":\"$cpu\",\"isa\":\"$isa\",\"cores\":$(nproc),\"commit\":\"$commit\",$5}" | tee -a "$out"
}
# The seconds a command's JSON line reports in `field`, with the wall time around it as well.
timed() {  # timed FIELD COMMAND... -> "FIELD":x,"wall_s":y
  local field=$1 s e line
  shift
  s=$(date +%s.%N)
  line=$("$@" 2>/dev/null | grep '^{' | tail -n1)
  e=$(date +%s.%N)
  local v
  v=$(printf '%s' "$line" | python3 -c "import json,sys; print(json.load(sys.stdin)['$field'])")
  echo "\"$field\":$v,\"wall_s\":$(python3 -c "print(round($e - $s, 6))")"
}

# Each build's tuning cache starts empty and is its own (the same version would share one).
cache_root=$(mktemp -d)
trap 'stop_busy; rm -rf "$cache_root"' EXIT

for k in $ks; do
  start_busy "$k"
  sleep 1
  for r in $(seq 1 "$rounds"); do
    for b in $builds; do
      label=${b%%=*} dir=${b#*=}
      export XDG_CACHE_HOME=$cache_root/$label
      emit "$k" default "$r" "$label" "$(timed train_s "$dir/examples/mnist_softmax" --epochs "$epochs" --json)"
      emit "$k" threads1 "$r" "$label" "$(timed train_s "$dir/examples/mnist_softmax" --epochs "$epochs" --threads 1 --json)"
    done
    if [ "$torch" = 1 ]; then
      emit "$k" default "$r" pytorch "$(timed train_s /usr/bin/python3 bench/load/torch_softmax.py --epochs "$epochs")"
      emit "$k" threads1 "$r" pytorch "$(timed train_s /usr/bin/python3 bench/load/torch_softmax.py --epochs "$epochs" --threads 1)"
      emit "$k" "threads$(nproc)" "$r" pytorch "$(timed train_s /usr/bin/python3 bench/load/torch_softmax.py --epochs "$epochs" --threads "$(nproc)")"
    fi
    for b in $builds; do
      label=${b%%=*} dir=${b#*=}
      export XDG_CACHE_HOME=$cache_root/$label
      line=$("$dir/bench/hetgraph-many-models" --rounds 1 --runs 20 2>/dev/null | tail -n1)
      line=${line#\{}
      emit "$k" many-models "$r" "$label" "${line%\}}"
    done
  done
  stop_busy
done
echo "run.sh: $out" >&2
