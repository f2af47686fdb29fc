#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Replay figures (issue 15) from scripts/replay-figures.sh's JSON lines: simulated runs of the
real engines on 16, 32 and 64 virtual cores (hetgraph-bench --replay-cores).

usage: bench/plot_replay.py RESULTS.jsonl [--profiles DIR] [--out bench/charts]

Draws, all labelled "replay":
  replay-speedup.png    Graphi Figures 5/6 style: per workload, the speedup over one thread
                        (the profile's summed 1-thread times) of critical-path and
                        shared-queue at every configuration E x T, and of the sequential
                        engine on all cores (1xC).
  replay-guideline.png  the guideline paper's Figure 18 style: per workload and core count,
                        the graph-width guideline's configuration (critical-path), the
                        automatic engine's choice, the framework default (sequential 1xC),
                        each relative to the exhaustive best of the sweep.
and prints the markdown tables of bench/README.md ("replay"): speedups, the scheduler
overhead per kernel (Graphi's Table 2 style), and guideline / auto vs best.
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def serial_s(profiles, workload):
    try:
        d = json.load(open(os.path.join(profiles, workload + ".json")))
    except OSError:
        return None
    return sum(n["us"][0] for n in d["nodes"]) * 1e-6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--profiles", default=os.environ.get("REPLAY_PROFILES",
                                                         "/tmp/hetgraph-replay-profiles"))
    ap.add_argument("--out", default="bench/charts")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.results) if l.strip().startswith("{")]
    rows = [r for r in rows if "replay" in r]
    # last line wins for each (workload, cores, engine, executors)
    runs = {}
    for r in rows:
        runs[(r["workload"], r["replay"]["cores"], r["engine"], r["executors"])] = r
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    cores = sorted({r["replay"]["cores"] for r in rows})
    serial = {w: serial_s(a.profiles, w) for w in workloads}

    # ---- speedups (Graphi Fig. 5/6) ----
    ncol = 3
    nrow = (len(workloads) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 3.6 * nrow), squeeze=False)
    print("### Speedup over one thread (replay)\n")
    print("| workload | cores | sequential 1xC | best critical-path | best shared-queue | auto |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, w in enumerate(workloads):
        ax = axes[i // ncol][i % ncol]
        base = serial[w]
        xt, labels, x = [], [], 0
        for c in cores:
            cfgs = sorted({k[3] for k in runs if k[0] == w and k[1] == c and
                           k[2] in ("critical-path", "shared-queue")},
                          key=lambda s: int(s.split("x")[0]))
            if not cfgs or base is None:
                continue
            xs = list(range(x, x + len(cfgs)))
            for engine, mk in (("critical-path", "o-"), ("shared-queue", "s--")):
                ys = [base / runs[(w, c, engine, e)]["median_s"] if (w, c, engine, e) in runs
                      else float("nan") for e in cfgs]
                ax.plot(xs, ys, mk, color="C0" if engine == "critical-path" else "C1",
                        label=engine if c == cores[0] else None)
            seq = runs.get((w, c, "sequential", f"1x{c}"))
            if seq:
                ax.hlines(base / seq["median_s"], xs[0] - 0.3, xs[-1] + 0.3, colors="C2",
                          label="sequential 1xC" if c == cores[0] else None)
            xt += xs
            labels += cfgs
            best = {}
            for engine in ("critical-path", "shared-queue"):
                t = [runs[(w, c, engine, e)]["median_s"] for e in cfgs if (w, c, engine, e) in runs]
                best[engine] = min(t) if t else None
            au = next((r for k, r in runs.items() if k[0] == w and k[1] == c and k[2] == "auto"),
                      None)
            fmt = lambda t: "%.1f" % (base / t) if t else ""  # noqa: E731
            print("| %s | %d | %s | %s | %s | %s |" % (
                w, c, fmt(seq["median_s"] if seq else None), fmt(best["critical-path"]),
                fmt(best["shared-queue"]),
                (fmt(au["median_s"]) + " (" + au["executors"] + ")") if au else ""))
            x += len(cfgs) + 1
        ax.set_xticks(xt)
        ax.set_xticklabels(labels, rotation=90, fontsize=7)
        ax.set_title(f"{w} (replay)", fontsize=10)
        ax.set_ylabel("speedup over 1 thread")
        ax.grid(alpha=0.3)
        if i == 0:
            ax.legend(fontsize=7)
    for j in range(len(workloads), nrow * ncol):
        axes[j // ncol][j % ncol].axis("off")
    fig.suptitle("REPLAY (simulated on a 2-core machine): speedup per configuration E x T at "
                 + ", ".join(map(str, cores)) + " virtual cores", fontsize=11)
    fig.tight_layout()
    os.makedirs(a.out, exist_ok=True)
    fig.savefig(os.path.join(a.out, "replay-speedup.png"), dpi=110)

    # ---- scheduler overhead per kernel (Graphi Table 2) ----
    print("\n### Scheduler overhead: makespan above the modelled bound, per kernel (us, replay)\n")
    print("| workload | cores | critical-path (best config) | shared-queue (best config) |")
    print("|---|---:|---:|---:|")
    for w in workloads:
        for c in cores:
            cells = []
            for engine in ("critical-path", "shared-queue"):
                rs = [r for k, r in runs.items() if k[0] == w and k[1] == c and k[2] == engine]
                if not rs:
                    cells.append("")
                    continue
                r = min(rs, key=lambda r: r["median_s"])
                cells.append("%.2f (%s, util %.0f%%)" % (r["replay"]["overhead_per_kernel_us"],
                                                        r["executors"],
                                                        100 * r["replay"]["utilisation"]))
            print("| %s | %d | %s |" % (w, c, " | ".join(cells)))

    # ---- guideline vs exhaustive vs default (guideline paper Fig. 18) ----
    print("\n### Guideline, auto and framework default vs the exhaustive best (replay)\n")
    print("| workload | cores | best | guideline | auto | default 1xC |")
    print("|---|---:|---|---|---|---|")
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(workloads) * len(cores)), 4.2))
    names, g_y, a_y, d_y = [], [], [], []
    for w in workloads:
        for c in cores:
            rs = [r for k, r in runs.items() if k[0] == w and k[1] == c and k[2] != "auto"]
            if not rs:
                continue
            best = min(rs, key=lambda r: r["median_s"])
            ge = best["guideline_executors"]
            g = runs.get((w, c, "critical-path", f"{ge}x{c // ge}"))
            au = next((r for k, r in runs.items() if k[0] == w and k[1] == c and k[2] == "auto"),
                      None)
            d = runs.get((w, c, "sequential", f"1x{c}"))
            rel = lambda r: r["median_s"] / best["median_s"] if r else float("nan")  # noqa: E731
            names.append(f"{w}\n{c}")
            g_y.append(rel(g))
            a_y.append(rel(au))
            d_y.append(rel(d))
            cell = lambda r, what: "%s %.2fx" % (what, rel(r)) if r else ""  # noqa: E731
            print("| %s | %d | %s %s | %s | %s | %s |" % (
                w, c, best["engine"], best["executors"], cell(g, f"{ge}x{c // ge}"),
                cell(au, au["executors"] if au else ""), cell(d, "")))
    xs = range(len(names))
    wd = 0.27
    ax.bar([x - wd for x in xs], g_y, wd, label="guideline (critical-path)")
    ax.bar(list(xs), a_y, wd, label="auto")
    ax.bar([x + wd for x in xs], d_y, wd, label="framework default (sequential 1xC)")
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, fontsize=6, rotation=90)
    ax.set_ylabel("makespan / exhaustive best")
    ax.set_yscale("log")
    ax.set_title("REPLAY (simulated): guideline, auto and default vs exhaustive best, per "
                 "workload and virtual cores", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "replay-guideline.png"), dpi=110)


if __name__ == "__main__":
    main()
