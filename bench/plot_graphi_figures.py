#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 12's charts and table from scripts/graphi-figures.sh output (medians over rounds):
  bench/charts/op-scalability.png  Graphi Fig. 2 style: each heavy op kind's speedup on 2..C
                                   threads over 1 (per-op hill climbs, critical-path 1xC)
  bench/charts/pinning.png         Graphi Fig. 3 style: pinned vs unpinned executor teams
  stdout                           markdown tables: the two figures' numbers, and parallel-op
                                   fusion on/off and per-op thread counts on/off per workload
  /usr/bin/python3 bench/plot_graphi_figures.py bench/results/<date>-issue12-figures.jsonl"""
import collections
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
outdir = sys.argv[2] if len(sys.argv) > 2 else "bench/charts"
med = statistics.median

# ---- Figure 2: op scalability ----------------------------------------------------------------
# (workload, op) -> threads -> [us per run of the kind's largest instances]
curves = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    if r["figure"] != "scalability":
        continue
    for k in r.get("op_threads", []):
        for t, us in k["curve"]:
            curves[(r["workload"], k["op"])][t].append(us)
# Kinds that matter: at least 100 us per run on one thread.
kinds = [(w, op) for (w, op), c in curves.items() if 1 in c and med(c[1]) >= 100 and len(c) > 1]
kinds.sort()
print("### Op scalability (per-op hill climbs, critical-path 1xC, median over rounds)\n")
print("| workload | op kind | 1 thread (us/run) | threads | time | speedup |")
print("|---|---|---|---|---|---|")
labels, speed = [], []
for w, op in kinds:
    c = curves[(w, op)]
    t1 = med(c[1])
    for t in sorted(c):
        if t == 1:
            continue
        s = t1 / med(c[t])
        print(f"| {w} | {op} | {t1:.0f} | {t} | {med(c[t]):.0f} | {s:.2f} |")
        labels.append(f"{w}\n{op}")
        speed.append(s)
if speed:
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(speed)), 4))
    ax.bar(range(len(speed)), speed, color="#4477aa")
    ax.axhline(1, color="k", lw=0.8)
    ax.axhline(2, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(speed)))
    ax.set_xticklabels(labels, rotation=90, fontsize=7)
    ax.set_ylabel("speedup, 2 threads over 1")
    ax.set_title("Op scalability (kinds >= 100 us/run), 2-core VM")
    fig.tight_layout()
    fig.savefig(f"{outdir}/op-scalability.png", dpi=120)

# ---- Figure 3: pinning -------------------------------------------------------------------------
pin = collections.defaultdict(list)
for r in rows:
    if r["figure"] == "pin":
        pin[(r["workload"], r["executors"], r["pin"])].append(r["median_s"])
cases = sorted({(w, e) for (w, e, _) in pin})
print("\n### Pinned vs unpinned teams (critical-path, median over rounds of each run's median)\n")
print("| workload | executors | pinned (ms) | unpinned (ms) | unpinned / pinned |")
print("|---|---|---|---|---|")
ratios = []
for w, e in cases:
    a, b = med(pin[(w, e, True)]), med(pin[(w, e, False)])
    ratios.append(b / a)
    print(f"| {w} | {e} | {a * 1e3:.3f} | {b * 1e3:.3f} | {b / a:.3f} |")
if cases:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(range(len(cases)), ratios, color=["#228833" if x >= 1 else "#ee6677" for x in ratios])
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{w}\n{e}" for w, e in cases], rotation=60, fontsize=7)
    ax.set_ylabel("unpinned / pinned time")
    ax.set_title("Pinned executor teams (hwloc) vs unpinned, 2-core VM")
    fig.tight_layout()
    fig.savefig(f"{outdir}/pinning.png", dpi=120)

# ---- switches ------------------------------------------------------------------------------------
sw = collections.defaultdict(list)
order = []
for r in rows:
    if r["figure"] != "switches":
        continue
    if r["workload"] not in order:
        order.append(r["workload"])
    if r["engine"] == "sequential":
        key = "fused" if r["parallel_ops"] else "unfused"
    else:
        key = "per-op" if r.get("per_op_threads") else "plain"
    sw[(r["workload"], key)].append(r["median_s"])
print("\n### Parallel-op fusion and per-op thread counts (ms, median over rounds)\n")
print("| workload | sequential, groups | no groups | no groups / groups | CP 1xC | per-op threads "
      "| per-op / plain |")
print("|---|---|---|---|---|---|---|")
for w in order:
    f, u = med(sw[(w, "fused")]), med(sw[(w, "unfused")])
    p, q = med(sw[(w, "plain")]), med(sw[(w, "per-op")])
    print(f"| {w} | {f * 1e3:.3f} | {u * 1e3:.3f} | {u / f:.2f} | {p * 1e3:.3f} | {q * 1e3:.3f} "
          f"| {q / p:.2f} |")
