# SPDX-License-Identifier: Apache-2.0
"""Medians of bench/load/run.sh results: training seconds per K, case and build, the ratios the
issue asks for, and the many-models throughput ratio; --chart PNG draws the training medians.

  /usr/bin/python3 bench/load/summary.py bench/results/2026-12-02-load-*.jsonl [--chart bench/charts/load.png]
"""
import collections
import json
import statistics
import sys


def chart(med, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ks = sorted({k for k, _, _ in med})
    series = [(b, c) for b, c in sorted({(b, c) for _, b, c in med})]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(series)
    for i, (b, c) in enumerate(series):
        xs = [k + (i - len(series) / 2 + 0.5) * width for k in ks]
        ax.bar(xs, [med.get((k, b, c), 0) for k in ks], width, label=f"{b} {c}")
    ax.set_xticks(ks)
    ax.set_xticklabels([f"K = {k} busy processes" for k in ks])
    ax.set_ylabel("MNIST softmax, 2 epochs: training seconds (median)")
    ax.set_yscale("log")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"chart: {png}")


def main():
    args = sys.argv[1:]
    png = None
    if "--chart" in args:
        i = args.index("--chart")
        png = args[i + 1]
        del args[i:i + 2]
    rows = []
    for path in args:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                # The program's own fields come after the harness's: pairs keep the harness's.
                rows.append(dict(json.JSONDecoder(object_pairs_hook=lambda p: dict(reversed(p))).decode(line)))
    train = collections.defaultdict(list)
    many = collections.defaultdict(list)
    for r in rows:
        if r["case"] == "many-models":
            # Files from before the in-turns reference have no concurrent_over_turns.
            many[(r["k"], r["build"])].append(
                (r["concurrent_over_sequential"], r.get("concurrent_over_turns")))
        else:
            train[(r["k"], r["build"], r["case"])].append(r["train_s"])
    med = {key: statistics.median(v) for key, v in train.items()}
    builds = sorted({b for _, b, _ in med if b != "pytorch"})
    for k in sorted({k for k, _, _ in med}):
        print(f"K = {k}")
        for (kk, b, c), m in sorted(med.items()):
            if kk == k:
                v = sorted(train[(kk, b, c)])
                print(f"  {b:8s} {c:10s} median {m:8.3f} s   ({', '.join(f'{x:.3f}' for x in v)})")
        for b in builds:
            d, t1 = med.get((k, b, "default")), med.get((k, b, "threads1"))
            best = min(x for x in (d, t1) if x is not None)
            line = f"  {b}: default / best of its own configurations {d / best:.2f}x"
            torch = [med[key] for key in med if key[0] == k and key[1] == "pytorch"]
            pd = med.get((k, "pytorch", "default"))
            if pd:
                line += f"; PyTorch default / {b} default {pd / d:.1f}x"
            if torch:
                line += f"; PyTorch best / {b} default {min(torch) / d:.1f}x"
            print(line)
        for b in builds:
            if (k, b) in many:
                for i, ref in enumerate(("sequential (in a row)", "in turns")):
                    v = sorted(x[i] for x in many[(k, b)] if x[i] is not None)
                    if v:
                        print(f"  {b}: many-models concurrent / {ref} throughput median "
                              f"{statistics.median(v):.2f} ({', '.join(f'{x:.2f}' for x in v)})")
    if png:
        chart(med, png)


if __name__ == "__main__":
    main()
