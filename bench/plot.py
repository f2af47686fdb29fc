#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Charts from hetgraph-bench JSON lines (make bench writes them to bench/results/).

usage: bench/plot.py RESULTS.jsonl [more.jsonl ...] [--out bench/charts]

For each (workload, platform, engine, executors, mapped) the time is the median over every
line in the files (one per interleaved round); the other fields are the last line's. Draws:
  engines-<workload>.png   engines and executor configurations side by side, relative to
                           the fastest (like the Graphi paper's Figures 5-6);
  par-matmul.png           time over the number of branches, per engine configuration;
  kernels.png              kernel workloads split into setup / copy / compute per platform,
                           mapped and not (like the baseline report's Figures 2-5);
  node-vs-raw.png          matmul, convolution and pooling nodes over the raw library call of
                           the same shape (median over every round in the files).
and writes summary.md next to the charts: the tables bench/README.md quotes.
"""
import argparse
import json
import os
import re
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    """One row per configuration (the last line, its time the median over every line of that
    configuration: interleaved rounds, see scripts/ab-engines.sh), and every line."""
    rows, lines, times = {}, [], {}
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                # auto's pick may differ between rounds: one configuration all the same
                ex = None if r.get("engine") == "auto" else r.get("executors")
                key = (r["workload"], r.get("platform"), r.get("engine"), ex,
                       r.get("mapped", True), r.get("fused", True), r.get("inline_below_us"))
                rows[key] = r
                times.setdefault(key, []).append(r["median_s"])
                lines.append(r)
    for key, r in rows.items():
        r["median_s"] = statistics.median(times[key])
        r["rounds"] = len(times[key])
    return list(rows.values()), lines


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


RAW_PREFIXES = ("dnnl-", "sgemm-")


def raw_pairs(lines):
    """(node workload, node median, raw median) for each node with a raw twin, medians over
    every line of that workload."""
    med = {}
    for r in lines:
        med.setdefault(r["workload"], []).append(r["median_s"])
    med = {w: statistics.median(v) for w, v in med.items()}
    pairs = []
    for w, t in sorted(med.items()):
        if w.startswith(RAW_PREFIXES) or w.startswith("dnnl-conv-blocked"):
            continue
        twin = "sgemm-" + w[7:] if w.startswith("matmul-") else "dnnl-" + w
        if twin in med:
            pairs.append((w, t, med[twin], med.get("dnnl-conv-blocked-" + w[5:])))
    return pairs


def node_vs_raw_chart(lines, out):
    pairs = raw_pairs(lines)
    if not pairs:
        return None
    fig, ax = plt.subplots(figsize=(max(6, len(pairs) * 0.9), 3.6))
    bars = ax.bar([w for w, *_ in pairs], [t / raw for _, t, raw, _ in pairs], color="#dd8452")
    for b, (_, t, raw, _) in zip(bars, pairs):
        ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{t*1e3:.3g}/{raw*1e3:.3g} ms",
                ha="center", va="bottom", fontsize=6)
    ax.axhline(1.0, color="black", linewidth=0.5)
    ax.axhline(1.1, color="red", linewidth=0.5, linestyle="--")
    ax.set_ylabel("node time / raw library time")
    ax.set_title("hetgraph nodes vs raw oneDNN (dnnl_sgemm, primitives on NCHW data)", fontsize=9)
    plt.xticks(rotation=30, ha="right", fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, "node-vs-raw.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def ms(x):
    return f"{x*1e3:.3g}"


def summary(rows, lines, out):
    """Markdown tables: engines per workload (with auto's pick against the exhaustive search
    and the guideline), node vs raw, kernel split."""
    md = ["| workload | nodes / heavy / width max, avg | sequential ms | critical-path best ms "
          "| shared-queue best ms | auto ms (pick) | exhaustive best | guideline executors "
          "| auto vs seq | auto vs SQ best |", "|" + "---|" * 10]
    by = {}
    for r in rows:
        if r.get("platform") == "cpu" and "inline_below_us" not in r:
            by.setdefault(r["workload"], []).append(r)
    for w, rs in sorted(by.items()):
        if w.startswith(("kernel-", "matmul-", "conv-", "maxpool-", "avgpool-")):
            continue
        pick = {e: [r for r in rs if r["engine"] == e] for e in
                ("sequential", "critical-path", "shared-queue", "auto")}
        if not pick["sequential"] or not pick["auto"]:
            continue
        best = {e: min(v, key=lambda r: r["median_s"]) if v else None for e, v in pick.items()}
        seq, auto = best["sequential"], best["auto"]
        cp, sq = best["critical-path"], best["shared-queue"]
        fixed = [r for r in rs if r["engine"] in ("critical-path", "shared-queue")]
        ex = min(fixed, key=lambda r: r["median_s"]) if fixed else seq
        md.append(
            f"| {w} | {seq.get('nodes')} / {seq.get('heavy_nodes')} / {seq.get('max_width')}, "
            f"{seq.get('avg_width')} | {ms(seq['median_s'])} | "
            f"{ms(cp['median_s']) + ' (' + cp['executors'] + ')' if cp else '-'} | "
            f"{ms(sq['median_s']) + ' (' + sq['executors'] + ')' if sq else '-'} | "
            f"{ms(auto['median_s'])} ({auto['executors']}) | {ex['engine']} {ex['executors']} | "
            f"{auto.get('guideline_executors')} | {seq['median_s'] / auto['median_s']:.2f}x | "
            f"{(sq['median_s'] / auto['median_s']) if sq else float('nan'):.2f}x |")
    md += ["", "| node | node ms | raw ms | node / raw | raw on blocked layouts ms |", "|---|---|---|---|---|"]
    for w, t, raw, blocked in raw_pairs(lines):
        md.append(f"| {w} | {ms(t)} | {ms(raw)} | {t / raw:.3f} | {ms(blocked) if blocked else '-'} |")
    md += ["", "| kernel workload | platform | memory | setup ms | copy ms | compute ms |",
           "|---|---|---|---|---|---|"]
    for r in sorted((r for r in rows if r["workload"].startswith("kernel-")),
                    key=lambda r: (r["workload"], r.get("platform"), not r.get("mapped", True))):
        md.append(f"| {r['workload']} | {r.get('platform')} | "
                  f"{'mapped' if r.get('mapped', True) else 'copied'} | {ms(r.get('setup_s', 0))} | "
                  f"{ms(r.get('copy_s', 0))} | {ms(r.get('compute_s', r['median_s']))} |")
    path = os.path.join(out, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(md) + "\n")
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "charts"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows, lines = load(a.results)
    made = []
    by = {}
    for r in rows:
        by.setdefault(r["workload"], []).append(r)
    for w, rs in sorted(by.items()):
        if not w.startswith(("par-matmul-", "kernel-", "matmul-", "sgemm-", "conv-", "dnnl-",
                             "maxpool-", "avgpool-")):
            made.append(engines_chart(w, rs, a.out))
    made.append(par_matmul_chart(rows, a.out))
    made.append(kernels_chart(rows, a.out))
    made.append(node_vs_raw_chart(lines, a.out))
    made.append(summary(rows, lines, a.out))
    for m in made:
        if m:
            print(m)


if __name__ == "__main__":
    main()
