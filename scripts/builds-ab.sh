#!/usr/bin/env bash
# Two builds of hetgraph timed side by side (a change that must not move a figure, such as issue
# 47's redesign): ROUNDS rounds, each running every hetgraph-bench item once per build in
# alternating order, a fresh process each, an empty tuning cache; then per item the median over
# rounds of the after/before ratio. An item is WORKLOAD@ENGINE.
#   scripts/builds-ab.sh BEFORE_BUILD AFTER_BUILD OUT.jsonl ROUNDS ITEM...
#   e.g. scripts/builds-ab.sh ../old/build build /tmp/ab.jsonl 5 lstm-small@sequential
set -euo pipefail
before=$1 after=$2 out=$3 rounds=$4
shift 4
: >"$out"
XDG_CACHE_HOME=$(mktemp -d)
export XDG_CACHE_HOME
for r in $(seq "$rounds"); do
  for item in "$@"; do
    order="before after"
    [ $((r % 2)) = 0 ] && order="after before"
    for b in $order; do
      d=$before
      [ "$b" = after ] && d=$after
      line=$(flock /tmp/hetgraph-build.lock "$d/bench/hetgraph-bench" --json --workload "${item%%@*}" \
        --engine "${item#*@}" --repeat "${REP:-10}" 2>/dev/null | grep '^{' | head -1)
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
    rat = [v["after"] / v["before"] for v in rs.values() if "after" in v and "before" in v]
    a = statistics.median(v["after"] for v in rs.values())
    b = statistics.median(v["before"] for v in rs.values())
    print(f"{it:40s} before {b*1e3:9.3f} ms after {a*1e3:9.3f} ms  "
          f"median of ratios {statistics.median(rat):.3f}  ({' '.join(f'{x:.2f}' for x in rat)})")
PY
