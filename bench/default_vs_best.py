#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 12 part 4's table from scripts/default-vs-best.sh output: per workload, the default
configuration's mean time per run in a fresh process (every run from the first included): the
first process (empty tuning cache), the second, and one that finds a choice in the cache; each
against the best fixed configuration's, medians over the rounds; and the first process over its
first 10 runs alone.
  python3 bench/default_vs_best.py bench/results/<date>-default-vs-best.jsonl"""
import collections
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.defaultdict(lambda: collections.defaultdict(list))
first10 = collections.defaultdict(lambda: collections.defaultdict(list))
runs = {}
chosen = collections.defaultdict(collections.Counter)
order = []
for r in rows:
    w = r["workload"]
    if w not in order:
        order.append(w)
    runs[w] = r["cold_runs"]
    by[w][r["config"]].append(r["mean_s"])
    first10[w][r["config"]].append(r["first10_mean_s"])
    if r["config"] == "default-cached" and "chosen" in r:
        c = r["chosen"]
        chosen[w][f'{c["engine"]} {c["executors"]}'] += 1

def ms(x):
    return f"{x * 1e3:.3f} ms"

print("| workload | runs | best fixed (mean/run) | default: 1st process | ratio | 2nd | ratio "
      "| cached | ratio | auto chose | cached within 10% | 1st process, first 10 runs: ratio |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
worst = 0.0
for w in order:
    med = {c: statistics.median(v) for c, v in by[w].items()}
    fixed = {c: t for c, t in med.items() if not c.startswith("default")}
    best = min(fixed, key=fixed.get)
    cold, second, warm = med["default-cold"], med["default-2nd"], med["default-cached"]
    rc, r2, rw = cold / fixed[best], second / fixed[best], warm / fixed[best]
    worst = max(worst, rw)
    pick = ", ".join(f"{k} ({n})" for k, n in chosen[w].most_common())
    ok = "yes" if rw <= 1.10 else "no"
    f10 = {c: statistics.median(v) for c, v in first10[w].items()}
    best10 = min(t for c, t in f10.items() if not c.startswith("default"))
    print(f"| {w} | {runs[w]} | {best} {ms(fixed[best])} | {ms(cold)} | {rc:.3f} | {ms(second)} "
          f"| {r2:.3f} | {ms(warm)} | {rw:.3f} | {pick} | {ok} | {f10['default-cold'] / best10:.3f} |")
print(f"\nworst ratio (cached): {worst:.3f}")
