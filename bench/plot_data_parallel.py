#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Data-parallel scaling: measured 1, 2 and 4 ranks, and a model for 8-64 machines.

    python3 bench/plot_data_parallel.py bench/results/<date>-data-parallel.jsonl

Reads the JSON lines of bench/data-parallel.sh, writes bench/charts/data-parallel-scaling.png
and prints the markdown tables of bench/README.md.

The model (labelled as such everywhere it appears) predicts a step on P machines from:
  - T_comp(P): the measured step of one rank on 1/P of the global batch, alone on one core
    (--simulate-ranks P): what each machine computes;
  - the step's collectives, measured from its plan (bench/data_parallel.cpp): each allreduce's
    buffer n and each allgather's result N (constant in P: the global batch's rows);
  - a network of bandwidth B (10 and 100 Gb/s) and per-message latency a: half the measured
    time of a 1-float allreduce between 2 ranks over TCP loopback through hetgraph's
    communication thread (so a includes the thread hand-offs);
  - Rabenseifner's costs: allreduce 2 log2(P) a + 2 (P-1)/P n / B, allgather
    log2(P) a + (P-1)/P N / B, one after another on the link;
  - overlap: communication hides behind at most the fraction w of the compute that ran after a
    step's first collective started, measured with 2 ranks.
  T(P) = T_comp(P) + max(0, C(P) - w T_comp(P)); speedup T(1) / T(P) at the same global batch.
"""
import json
import math
import os
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NETWORKS = [("10 Gb/s", 10e9 / 8), ("100 Gb/s", 100e9 / 8)]
MACHINES = [1, 2, 4, 8, 16, 32, 64]
WORKLOADS = ["mnist-softmax", "lstm-medium", "wide-deep-train"]


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def median_of(rows, key):
    return statistics.median(r[key] for r in rows)


def model(sim, measured2, alpha, bandwidth, p):
    t_comp = sim[p]["step_s"]
    if p == 1:
        return t_comp, 0.0
    log = math.log2(p)
    comm = 0.0
    for n in measured2["allreduce_bytes"]:
        comm += 2 * log * alpha + 2 * (p - 1) / p * n / bandwidth
    for n in measured2["allgather_bytes"]:
        comm += log * alpha + (p - 1) / p * n / bandwidth
    hidden = min(comm, measured2["window"] * t_comp)
    return t_comp + comm - hidden, comm


def main():
    path = sys.argv[1]
    rows = load(path)
    latency = {r["btl"]: r for r in rows if r.get("bench") == "mpi-latency"}
    alpha = latency["tcp,self"]["allreduce_1float_s"] / 2
    runs = defaultdict(list)  # (workload, ranks) -> measured rows
    sims = defaultdict(dict)  # workload -> P -> row
    for r in rows:
        if r.get("bench") != "data-parallel":
            continue
        if r["simulated"]:
            sims[r["workload"]][r["ranks"]] = r
        else:
            runs[(r["workload"], r["ranks"])].append(r)

    print(f"MPI through hetgraph's communication thread, 2 ranks: 1-float allreduce "
          f"{latency['default']['allreduce_1float_s'] * 1e6:.1f} us (shared memory), "
          f"{latency['tcp,self']['allreduce_1float_s'] * 1e6:.1f} us (TCP loopback); "
          f"16 MiB allreduce {latency['default']['bus_GBps_16MiB']:.2f} GB/s (shared memory), "
          f"{latency['tcp,self']['bus_GBps_16MiB']:.2f} GB/s (TCP). Model latency a = "
          f"{alpha * 1e6:.1f} us per message.\n")
    print("| workload | ranks | step ms | speedup | compute ms | collectives in flight ms | "
          "hidden | collectives | payload bytes/step | sent per rank bytes/step |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    measured = {}
    for w in WORKLOADS:
        for p in (1, 2, 4):
            rs = runs.get((w, p))
            if not rs:
                continue
            step = median_of(rs, "step_s")
            measured[(w, p)] = step
            base = measured.get((w, 1), step)
            print(f"| {w} | {p} | {step * 1e3:.3f} | {base / step:.2f}x | "
                  f"{median_of(rs, 'compute_s') * 1e3:.3f} | {median_of(rs, 'comm_s') * 1e3:.3f} | "
                  f"{median_of(rs, 'hidden_fraction') * 100:.0f}% | {rs[0]['collectives']} | "
                  f"{rs[0]['payload_bytes']:,.0f} | {rs[0]['wire_bytes_per_rank']:,.0f} |")

    print("\nModel (not measured): one rank per machine, one core each.\n")
    print("| workload | machines | compute ms (measured, 1/P batch) | "
          + " | ".join(f"step ms, {n} (speedup)" for n, _ in NETWORKS) + " |")
    print("|---|---|---|" + "---|" * len(NETWORKS))
    fig, axes = plt.subplots(2, len(WORKLOADS), figsize=(15, 8.5))
    for col, w in enumerate(WORKLOADS):
        sim = sims[w]
        two = runs[(w, 2)]
        m2 = {"allreduce_bytes": two[0]["allreduce_bytes"],
              "allgather_bytes": two[0]["allgather_bytes"],
              "window": median_of(two, "overlap_window")}
        t1 = sim[1]["step_s"]
        curves = {}
        for name, bw in NETWORKS:
            curves[name] = [model(sim, m2, alpha, bw, p)[0] for p in MACHINES]
        for i, p in enumerate(MACHINES):
            if p < 8:
                continue
            cells = " | ".join(f"{curves[n][i] * 1e3:.3f} ({t1 / curves[n][i]:.1f}x)"
                               for n, _ in NETWORKS)
            print(f"| {w} | {p} | {sim[p]['step_s'] * 1e3:.3f} | {cells} |")
        ax_t, ax_s = axes[0][col], axes[1][col]
        for (name, _), style in zip(NETWORKS, ["--", ":"]):
            ax_t.plot(MACHINES, [t * 1e3 for t in curves[name]], style, marker=".",
                      label=f"model, {name}")
            ax_s.plot(MACHINES, [t1 / t for t in curves[name]], style, marker=".",
                      label=f"model, {name}")
        ax_t.plot(MACHINES, [sim[p]["step_s"] * 1e3 for p in MACHINES], "-", color="grey",
                  alpha=0.6, label="model: compute only (no network)")
        ax_s.plot(MACHINES, [t1 / sim[p]["step_s"] for p in MACHINES], "-", color="grey",
                  alpha=0.6, label="model: compute only (no network)")
        mp = [p for p in (1, 2, 4) if (w, p) in measured]
        ax_t.plot(mp, [measured[(w, p)] * 1e3 for p in mp], "o-", color="black",
                  label="measured, this 2-core VM\n(4 ranks oversubscribed)")
        ax_s.plot(mp, [measured[(w, 1)] / measured[(w, p)] for p in mp], "o-", color="black",
                  label="measured, this 2-core VM\n(4 ranks oversubscribed)")
        for ax in (ax_t, ax_s):
            ax.set_xscale("log", base=2)
            ax.set_xticks(MACHINES, [str(p) for p in MACHINES])
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("ranks / machines")
        ax_t.set_yscale("log")
        ax_t.set_title(f"{w}: step time (global batch {two[0]['global_batch']:.0f})")
        ax_t.set_ylabel("ms per step")
        ax_s.set_title(f"{w}: speedup over 1 rank")
        ax_s.set_ylabel("x")
        if col == 0:
            ax_t.legend(fontsize=8)
    fig.suptitle("Data-parallel training: measured 1-4 ranks; 8-64 machines are a MODEL "
                 f"(per-message latency {alpha * 1e6:.0f} us, Rabenseifner costs, overlap as "
                 "measured)", fontsize=11)
    fig.tight_layout()
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "charts",
                       "data-parallel-scaling.png")
    fig.savefig(out, dpi=110)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
