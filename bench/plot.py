#!/usr/bin/env python3
"""Charts from hetgraph-bench JSON lines (make bench writes them to bench/results/).

usage: bench/plot.py RESULTS.jsonl [more.jsonl ...] [--out bench/charts]

For each (workload, platform, engine, executors, mapped) the last line wins. Draws:
  engines-<workload>.png   engines and executor configurations side by side, relative to
                           the fastest (like the Graphi paper's Figures 5-6);
  par-matmul.png           time over the number of branches, per engine configuration;
  kernels.png              kernel workloads split into setup / copy / compute per platform,
                           mapped and not (like the baseline report's Figures 2-5).
"""
import argparse
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    rows = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                key = (r["workload"], r.get("platform"), r.get("engine"), r.get("executors"),
                       r.get("mapped", True), r.get("fused", True), r.get("inline_below_us"))
                rows[key] = r
    return list(rows.values())


def label(r):
    if r.get("platform") == "raw":
        return "raw library"
    if r.get("platform") != "cpu":
        return r.get("platform")
    return f"{r['engine']} {r['executors']}"


def engines_chart(workload, rs, out):
    rs = [r for r in rs if r.get("platform") == "cpu" and "inline_below_us" not in r]
    if len(rs) < 2:
        return None
    rs.sort(key=lambda r: (r["engine"] != "sequential", r["engine"] == "auto", r["engine"], r["executors"]))
    best = min(r["median_s"] for r in rs)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    colors = {"sequential": "#888888", "shared-queue": "#4c72b0", "critical-path": "#dd8452", "auto": "#55a868"}
    bars = ax.bar([label(r) for r in rs], [r["median_s"] / best for r in rs],
                  color=[colors.get(r["engine"], "#999999") for r in rs])
    for b, r in zip(bars, rs):
        ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{r['median_s']*1e3:.3g} ms",
                ha="center", va="bottom", fontsize=7)
    g = rs[0]
    ax.set_title(f"{workload}: nodes {g.get('nodes')}, heavy {g.get('heavy_nodes')}, "
                 f"width max {g.get('max_width')} avg {g.get('avg_width')}", fontsize=9)
    ax.set_ylabel("time relative to fastest")
    ax.axhline(1.0, color="black", linewidth=0.5)
    plt.xticks(rotation=30, ha="right", fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, f"engines-{workload}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def par_matmul_chart(rows, out):
    pts = {}
    for r in rows:
        m = re.fullmatch(r"par-matmul-(\d+)", r["workload"])
        if m and r.get("platform") == "cpu":
            pts.setdefault(label(r), []).append((int(m.group(1)), r["median_s"]))
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, p in sorted(pts.items()):
        p.sort()
        ax.plot([x for x, _ in p], [y for _, y in p], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("branches (200x100 @ 100x200, log, tree sum)")
    ax.set_ylabel("seconds per run")
    ax.set_title("par-matmul-N", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, "par-matmul.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def kernels_chart(rows, out):
    rs = [r for r in rows if r["workload"].startswith("kernel-")]
    if not rs:
        return None
    rs.sort(key=lambda r: (r["workload"], r.get("platform"), not r.get("mapped", True)))
    names = [f"{r['workload'][7:]}\n{r.get('platform')}{'' if r.get('mapped', True) else ' copy'}" for r in rs]
    setup = [r.get("setup_s", 0) for r in rs]
    copy = [r.get("copy_s", 0) for r in rs]
    compute = [r.get("compute_s", r["median_s"]) for r in rs]
    fig, ax = plt.subplots(figsize=(max(6, len(rs) * 0.7), 3.8))
    ax.bar(names, setup, label="setup")
    ax.bar(names, copy, bottom=setup, label="copy")
    ax.bar(names, compute, bottom=[a + b for a, b in zip(setup, copy)], label="compute")
    ax.set_yscale("log")
    ax.set_ylabel("seconds")
    ax.set_title("kernel workloads: setup / copy / compute", fontsize=9)
    ax.legend(fontsize=7)
    plt.xticks(fontsize=6)
    fig.tight_layout()
    path = os.path.join(out, "kernels.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "charts"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = load(a.results)
    made = []
    by = {}
    for r in rows:
        by.setdefault(r["workload"], []).append(r)
    for w, rs in sorted(by.items()):
        if not w.startswith(("par-matmul-", "kernel-", "matmul-", "sgemm-")):
            made.append(engines_chart(w, rs, a.out))
    made.append(par_matmul_chart(rows, a.out))
    made.append(kernels_chart(rows, a.out))
    for m in made:
        if m:
            print(m)


if __name__ == "__main__":
    main()
