#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two builds of hetgraph timed side by side (a change that must not move a figure, such as issue
# 47's redesign; the portable build against the native one: scripts/portable-pair.sh): ROUNDS
# rounds, each running every item once per build in alternating order, a fresh process each, a
# tuning cache of the run's own; then per item the median over rounds of the second/first ratio.
# An item is a hetgraph-bench workload with its engine (WORKLOAD@ENGINE) or cnn:MODEL for
# bench/cnn's exported models in CNN_DIR (default build/bench-cnn; hetgraph-run, sequential
# engine, REP repetitions). LABELS names the two builds (default "before after"). LOAD=K runs it
# all beside K CPU-bound busy loops (scripts/busy.sh), to compare the builds on a busy machine;
# give such a run fixed engines: hetgraph-bench waits (up to 300 s a process) for an automatic
# engine to finish its search, which it holds back while other processes take the cores.
# Each run takes LOCK (default the build lock), so builds elsewhere wait between runs; a caller
# that holds the build lock itself for the whole comparison passes another file.
#   scripts/builds-ab.sh FIRST_BUILD SECOND_BUILD OUT.jsonl ROUNDS ITEM...
#   e.g. scripts/builds-ab.sh ../old/build build /tmp/ab.jsonl 5 lstm-small@sequential
set -euo pipefail
first=$1 second=$2 out=$3 rounds=$4
shift 4
read -r la lb <<<"${LABELS:-before after}"
cnn=${CNN_DIR:-build/bench-cnn}
: >"$out"
XDG_CACHE_HOME=$(mktemp -d)
export XDG_CACHE_HOME
lock=${LOCK:-/tmp/hetgraph-build.lock}
. "$(dirname "$0")/busy.sh"
trap stop_busy EXIT
start_busy "${LOAD:-0}"
for r in $(seq "$rounds"); do
  for item in "$@"; do
    order="$la $lb"
    [ $((r % 2)) = 0 ] && order="$lb $la"
    for b in $order; do
      d=$first
      [ "$b" = "$lb" ] && d=$second
      case $item in
        cnn:*)
          m=${item#cnn:}
          line=$(flock "$lock" "$d/tools/hetgraph-run" "$cnn/$m.onnx" \
            --input "$cnn/input-${m##*-}.pb" --engine sequential --repeat "${REP:-30}" \
            --warmup 3 --json 2>/dev/null | tail -1) ;;
        *)
          line=$(flock "$lock" "$d/bench/hetgraph-bench" --json --workload "${item%%@*}" \
            --engine "${item#*@}" --repeat "${REP:-10}" 2>/dev/null | grep '^{' | head -1) ;;
      esac
      echo "{\"round\":$r,\"build\":\"$b\",\"item\":\"$item\",\"r\":$line}" >>"$out"
    done
  done
done
stop_busy
/usr/bin/python3 - "$out" "$la" "$lb" <<'PY'
import json, statistics, sys
out, la, lb = sys.argv[1:4]
d = {}
for l in open(out):
    x = json.loads(l)
    d.setdefault(x["item"], {}).setdefault(x["round"], {})[x["build"]] = x["r"]["median_s"]
for it, rs in d.items():
    rat = [v[lb] / v[la] for v in rs.values() if la in v and lb in v]
    a = statistics.median(v[la] for v in rs.values())
    b = statistics.median(v[lb] for v in rs.values())
    print(f"{it:40s} {la} {a*1e3:9.3f} ms {lb} {b*1e3:9.3f} ms  "
          f"median of ratios {statistics.median(rat):.3f}  ({' '.join(f'{x:.2f}' for x in rat)})")
PY
