#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises scripts/onnx-figures.sh's JSON lines: per workload and engine, the median over
rounds of each invocation's median latency, hand-built (hetgraph-bench) next to imported
(hetgraph-run on the exported ONNX model), their ratio and setup times; then the
PyTorch-converted backend-test models. Prints Markdown tables.
    python3 bench/onnx_summary.py bench/results/<date>-onnx.jsonl"""
import collections
import json
import statistics
import sys


def engine_of(d):
    return f"{d['engine']} {d['executors']}"


def main(path):
    lines = [json.loads(l) for l in open(path) if l.strip()]
    pairs = collections.defaultdict(lambda: collections.defaultdict(list))
    for d in lines:
        if d.get("source") in ("hand-built", "imported"):
            pairs[(d["workload"], d.get("engine"))][d["source"]].append(d)
    print("| workload | engine | hand-built median | imported median | imported / hand-built | "
          "setup hand-built | setup imported (import + compile) | same outputs |")
    print("|---|---|---|---|---|---|---|---|")
    for (w, e), by in sorted(pairs.items()):
        if "hand-built" not in by or "imported" not in by:
            continue
        hb = statistics.median(d["median_s"] for d in by["hand-built"])
        im = statistics.median(d["median_s"] for d in by["imported"])
        sh = statistics.median(d["setup_s"] for d in by["hand-built"])
        si = statistics.median(d["setup_s"] for d in by["imported"])
        same = all(abs(a["checksum"] - b["checksum"]) <= 1e-6 * max(1.0, abs(a["checksum"]))
                   for a, b in zip(by["hand-built"], by["imported"]))
        rounds = min(len(by["hand-built"]), len(by["imported"]))
        print(f"| {w} | {e} {by['imported'][0]['executors']} | {hb * 1e3:.3f} ms | {im * 1e3:.3f} ms | "
              f"{im / hb:.3f} | {sh:.3f} s | {si:.3f} s | {'yes' if same else 'NO'} ({rounds} rounds) |")
    conv = [d for d in lines if d.get("source") == "pytorch-converted"]
    if conv:
        print()
        print("| PyTorch-converted model | ONNX nodes | graph nodes | median | min | max | setup |")
        print("|---|---|---|---|---|---|---|")
        for d in sorted(conv, key=lambda d: d["workload"]):
            print(f"| {d['workload']} | {d['onnx_nodes']} | {d['nodes']} | {d['median_s'] * 1e6:.1f} us | "
                  f"{d['min_s'] * 1e6:.1f} us | {d['max_s'] * 1e6:.1f} us | {d['setup_s'] * 1e3:.1f} ms |")


if __name__ == "__main__":
    main(sys.argv[1])
