#!/usr/bin/env bash
# A quick paired A/B of the portable build (build/) against the native one (build-native/, see
# scripts/portable-ab.sh): ROUNDS rounds, each running every item once per build in alternating
# order, a fresh process each, sequential engine; then per item the median over rounds of the
# portable/native ratio. An item is a hetgraph-bench workload with its engine (WORKLOAD@ENGINE)
# or cnn:MODEL for bench/cnn's exported models (hetgraph-run, REP repetitions).
#   scripts/portable-pair.sh OUT.jsonl ROUNDS ITEM...
#   e.g. scripts/portable-pair.sh /tmp/p.jsonl 5 maxpool-32x64x56x56-k3-s2-p1@sequential cnn:resnet18-b1
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 rounds=$2
shift 2
: >"$out"
XDG_CACHE_HOME=$(mktemp -d)
export XDG_CACHE_HOME
for r in $(seq "$rounds"); do
  for item in "$@"; do
    order="portable native"
    [ $((r % 2)) = 0 ] && order="native portable"
    for b in $order; do
      d=build
      [ "$b" = native ] && d=build-native
      case $item in
        cnn:*)
          m=${item#cnn:}
          line=$(flock /tmp/hetgraph-build.lock "$d/tools/hetgraph-run" "build/bench-cnn/$m.onnx" \
            --input "build/bench-cnn/input-${m##*-}.pb" --engine sequential --repeat "${REP:-30}" \
            --warmup 3 --json 2>/dev/null | tail -1) ;;
        *)
          line=$(flock /tmp/hetgraph-build.lock "$d/bench/hetgraph-bench" --json --workload "${item%%@*}" \
            --engine "${item#*@}" --repeat "${REP:-10}" 2>/dev/null | grep '^{' | head -1) ;;
      esac
      echo "{\"round\":$r,\"build\":\"$b\",\"item\":\"$item\",\"r\":$line}" >>"$out"
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
d = {}
for l in open(sys.argv[1]):
    x = json.loads(l)
    d.setdefault(x["item"], {}).setdefault(x["round"], {})[x["build"]] = x["r"]["median_s"]
for it, rs in d.items():
    rat = [v["portable"] / v["native"] for v in rs.values() if "portable" in v and "native" in v]
    p = statistics.median(v["portable"] for v in rs.values())
    n = statistics.median(v["native"] for v in rs.values())
    print(f"{it:45s} portable {p*1e3:9.3f} ms native {n*1e3:9.3f} ms  "
          f"median of ratios {statistics.median(rat):.3f}  ({' '.join(f'{x:.2f}' for x in rat)})")
PY
