#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises bench/memory-plan-ab.sh's JSON lines: per model, batch and engine, each variant's
arena (planned_bytes), live peak, median peak RSS and median latency over the rounds, and the
new/base ratios.   bench/memory_plan_summary.py RESULTS.jsonl [BASE NEW]"""
import json
import statistics
import sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base, new = (sys.argv[2], sys.argv[3]) if len(sys.argv) > 3 else ("base", "new")
groups = defaultdict(lambda: defaultdict(list))
for r in rows:
    key = (r["model"].split("/")[-1].replace(".onnx", ""), r["engine"])
    groups[key][r["variant"]].append(r)
live = {}
for r in rows:
    if r.get("live_bytes"):
        live[(r["model"], r["engine"])] = r["live_bytes"]
print(f"{'case':<16} {'engine':<14} {'live MiB':>8} {'arena MiB':>17} {'peak RSS MiB':>17}"
      f" {'median ms':>19} {'rounds':>6} checksums")
for (model, engine), v in sorted(groups.items()):
    b, n = v.get(base, []), v.get(new, [])
    if not b or not n:
        continue
    med = lambda rs, f: statistics.median(f(r) for r in rs)
    lv = live.get((b[0]["model"], engine), 0) / 2**20
    ab, an = b[0]["planned_bytes"] / 2**20, n[0]["planned_bytes"] / 2**20
    rb, rn = med(b, lambda r: r["peak_rss_kib"]) / 1024, med(n, lambda r: r["peak_rss_kib"]) / 1024
    tb, tn = med(b, lambda r: r["median_s"]) * 1e3, med(n, lambda r: r["median_s"]) * 1e3
    same = all(r["checksum"] == b[0]["checksum"] for r in b + n)
    print(f"{model:<16} {engine:<14} {lv:8.1f} {ab:7.1f} -> {an:6.1f} {rb:7.1f} -> {rn:6.1f}"
          f" {tb:8.2f} -> {tn:7.2f} {len(n):6d} {'equal' if same else 'DIFFER'}"
          f"  (arena x{an / ab:.2f}, rss x{rn / rb:.2f}, time x{tn / tb:.3f})")
