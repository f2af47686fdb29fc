#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The other half of scripts/device-run.sh, on this machine: replays every configuration the lent
# machine ran for real, at its core count, from the profile it recorded there, and prints the
# comparison (bench/replay_table.py: replay / real - 1 per workload and configuration) and
# the real sweep's verdict on the guideline and auto (bench/replay_guideline.py's question,
# answered by real runs).
#   scripts/device-replay.sh DIR [OUT]
# DIR holds device-run.sh's real.jsonl and profiles.tar; OUT (default DIR/validate.jsonl) gets
# the real lines and their replays, as bench/replay_table.py reads them.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
out=${2:-$dir/validate.jsonl}
bench=${BENCH:-build/bench/hetgraph-bench}
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
prof=$(mktemp -d)
tar -C "$prof" -xf "$dir/profiles.tar"
grep '^{' "$dir/real.jsonl" >"$out"
# One replay per (workload, config) of the first round: the real line's own arguments.
$py - "$dir/real.jsonl" <<'PY' | while read -r w config cores args; do
import json, sys
seen = set()
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["workload"], r["config"])
    if key in seen:
        continue
    seen.add(key)
    c = r["config"]
    if c == "sequential":
        args = "--engine sequential"
    elif c == "guideline":
        args = "--engine critical-path"
    elif c == "auto":
        args = "--engine auto"
    elif c.startswith("sq-"):
        args = "--engine shared-queue --executors " + c[3:]
    else:
        args = "--engine critical-path --executors " + c
    n = "--repeat %d --warmup 3" % r["repeat"]
    print(r["workload"], c, r["cores"], args + " " + n)
PY
  [ -f "$prof/$w.json" ] || { echo "no profile for $w: skipped" >&2; continue; }
  # shellcheck disable=SC2086
  flock /tmp/hetgraph-build.lock "$bench" --json --workload "$w" $args --replay-cores "$cores" \
    --replay-profile "$prof/$w.json" | sed "s/^{/{\"config\":\"$config\",/" >>"$out"
done
rm -rf "$prof"
$py bench/replay_table.py "$out"
$py - "$dir/real.jsonl" <<'PY'
import json, statistics, sys
from collections import defaultdict
t = defaultdict(list)
pick = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    t[(r["workload"], r["config"])].append(r["median_s"])
    if r["config"] in ("guideline", "auto"):
        pick[(r["workload"], r["config"])] = r["executors"]
print()
print("| workload | best real (ms) | guideline | auto |")
print("|---|---|---|---|")
for w in dict.fromkeys(k[0] for k in t):
    fixed = {c: statistics.median(v) for (kw, c), v in t.items()
             if kw == w and c not in ("guideline", "auto")}
    best = min(fixed, key=fixed.get)
    cell = lambda c: (f"{pick.get((w, c), '?')} {statistics.median(t[(w, c)]) / fixed[best]:.2f}x"
                      if (w, c) in t else "")
    print(f"| {w} | {best} {fixed[best] * 1e3:.3f} | {cell('guideline')} | {cell('auto')} |")
PY
