#!/usr/bin/env python3
"""Issue 12 part 4's table from scripts/default-vs-best.sh output: per workload, the default
configuration's mean time per run in a fresh process (every run from the first included; empty
and filled tuning cache) against the best fixed configuration's, medians over the rounds; and
the same over the first 10 runs alone.
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
    if r["config"].startswith("default") and "chosen" in r:
        c = r["chosen"]
        chosen[w][f'{c["engine"]} {c["executors"]}'] += 1

def ms(x):
    return f"{x * 1e3:.3f} ms"

print("| workload | runs | best fixed (mean/run) | default, empty cache | ratio | default, cached "
      "| ratio | auto chose | within 10% | first 10 runs: empty cache / best |")
print("|---|---|---|---|---|---|---|---|---|---|")
worst = 0.0
for w in order:
    med = {c: statistics.median(v) for c, v in by[w].items()}
    fixed = {c: t for c, t in med.items() if not c.startswith("default")}
    best = min(fixed, key=fixed.get)
    cold, warm = med.get("default-cold"), med.get("default-warm")
    rc, rw = cold / fixed[best], warm / fixed[best]
    worst = max(worst, rc)
    pick = ", ".join(f"{k} ({n})" for k, n in chosen[w].most_common())
    ok = "yes" if rc <= 1.10 and rw <= 1.10 else "no"
    f10 = {c: statistics.median(v) for c, v in first10[w].items()}
    best10 = min(t for c, t in f10.items() if not c.startswith("default"))
    print(f"| {w} | {runs[w]} | {best} {ms(fixed[best])} | {ms(cold)} | {rc:.3f} | {ms(warm)} "
          f"| {rw:.3f} | {pick} | {ok} | {f10['default-cold'] / best10:.3f} |")
print(f"\nworst ratio (empty cache): {worst:.3f}")
