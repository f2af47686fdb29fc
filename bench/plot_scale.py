#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Graph-scale curves from hetgraph-scale JSON lines (issue 15).

usage: bench/plot_scale.py RESULTS.jsonl [--out bench/charts]

Draws scale.png: compile time and run time per node over the number of graph nodes, per
kind (random DAG, unrolled LSTM) and engine, log-log, with an n log n line through each
curve's first point for reference; prints a markdown table of the figures.
"""
import argparse
import json
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out", default="bench/charts")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.results) if l.strip().startswith("{")]
    series = {}
    for r in rows:
        series.setdefault((r["kind"], r["engine"]), []).append(r)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    print("| graph | engine | graph nodes | compile s | compile us/node | slowest pass | "
          "compiled B/node | run ns/node |")
    print("|---|---|---:|---:|---:|---|---:|---:|")
    for (kind, engine), rs in sorted(series.items()):
        rs.sort(key=lambda r: r["graph_nodes"])
        n = [r["graph_nodes"] for r in rs]
        c = [r["compile_s"] for r in rs]
        label = f"{kind}, {engine}"
        ax1.loglog(n, c, "o-", label=label)
        ref = [c[0] * (x * math.log(x)) / (n[0] * math.log(n[0])) for x in n]
        ax1.loglog(n, ref, ":", color=ax1.lines[-1].get_color(), linewidth=0.8)
        ax2.semilogx(n, [r["run_ns_per_node"] for r in rs], "o-", label=label)
        for r in rs:
            slow = max(r["passes"].items(), key=lambda kv: kv[1])
            print(f"| {kind} | {engine} | {r['graph_nodes']} | {r['compile_s']:.3g} | "
                  f"{r['compile_s'] * 1e6 / r['graph_nodes']:.2f} | {slow[0]} {slow[1]:.2g} s | "
                  f"{r['compiled_bytes_per_node']:.0f} | {r['run_ns_per_node']:.0f} |")
    ax1.set_xlabel("graph nodes")
    ax1.set_ylabel("compile s (dotted: n log n)")
    ax1.set_title("Compile time")
    ax1.legend(fontsize=7)
    ax2.set_xlabel("graph nodes")
    ax2.set_ylabel("ns per plan node per run")
    ax2.set_title("Run time per node (scheduler throughput)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(a.out, exist_ok=True)
    fig.savefig(os.path.join(a.out, "scale.png"), dpi=110)


if __name__ == "__main__":
    main()
