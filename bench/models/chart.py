#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The model bench's chart: each model's latency against ONNX Runtime's best (1.0 = as fast),
hetgraph's variants and PyTorch, at batch 1 and at the serving batch, from run.js's summary lines.

    /usr/bin/python3 bench/models/chart.py RESULTS.jsonl [OUT.png]   # default bench/charts/models.png

It prints the same figures as a Markdown table (bench/README.md's) and the totals.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def markdown(summaries, variants, totals):
    ms = lambda x: f"{1e3 * x['median_s']:.2f}" if x and x.get("median_s") else "failed"
    print("| model | family | batch | ONNX Runtime best, ms | PyTorch, ms | "
          + " | ".join(f"{v}, ms | {v} / ORT" for v in variants) + " |")
    print("|---|---|---|---|---|" + "---|---|" * len(variants))
    for s in summaries:
        cells = []
        for v in variants:
            h = s["hetgraph"].get(v, {})
            r = h.get("ratio_vs_ort")
            cells += [ms(h), (f"{r:.2f}x" if r else "-") + ("" if h.get("correct") else " (wrong)")]
        print(f"| {s['model']} | {s['family']} | {s['batch']} | {ms(s['ort_best'])} "
              f"({s['ort_best']['config']}) | {ms(s['pytorch_best'])} | " + " | ".join(cells) + " |")
    for t in totals:
        for v in variants:
            x = t[v]
            print(f"batch {t['batch']}, {v}: {x['ran_correctly']} of {t['models']} correct, geometric "
                  f"mean {x['geomean_ratio_vs_ort']:.2f}x ONNX Runtime, worst {x['worst']} "
                  f"{x['worst_ratio']:.2f}x, {x['slower_than_ort']} slower than it; PyTorch "
                  f"{t.get('pytorch_geomean_ratio_vs_ort', float('nan')):.2f}x")


def main():
    src = sys.argv[1]
    png = sys.argv[2] if len(sys.argv) > 2 else "bench/charts/models.png"
    with open(src) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    summaries = [r for r in rows if r.get("kind") == "model-summary" and r.get("ort_best")]
    variants = list(dict.fromkeys(v for s in summaries for v in s["hetgraph"]))  # run.js's order
    fig, axes = plt.subplots(1, 2, figsize=(15, 7))
    for ax, serving in zip(axes, (False, True)):
        group = [s for s in summaries if s["serving"] == serving]
        names = [f"{s['model']} b{s['batch']}" for s in group]
        series = [(v, [s["hetgraph"].get(v, {}).get("ratio_vs_ort") for s in group]) for v in variants]
        series.append(("PyTorch", [s.get("pytorch_ratio_vs_ort") for s in group]))
        width = 0.8 / len(series)
        for k, (label, vals) in enumerate(series):
            xs = [i + k * width for i, v in enumerate(vals) if v]
            ax.barh(xs, [v for v in vals if v], height=width, label=label)
            for i, (s, v) in enumerate(zip(group, vals)):
                if k < len(variants) and not s["hetgraph"].get(label, {}).get("correct", False):
                    ax.text(0.05, i + k * width, "failed" if not v else "wrong", va="center", fontsize=7)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks([i + 0.4 - width / 2 for i in range(len(group))])
        ax.set_yticklabels(names, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("latency / ONNX Runtime's best (log; below 1 is faster)")
        ax.set_title("batch 1" if not serving else "serving batch")
        ax.invert_yaxis()
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Model bench: {summaries[0]['cpu']}, {summaries[0]['rounds']} interleaved rounds, medians")
    fig.tight_layout()
    markdown(summaries, variants, [r for r in rows if r.get("kind") == "models-total"])
    fig.savefig(png, dpi=100)
    print(f"chart: {png}")


if __name__ == "__main__":
    main()
