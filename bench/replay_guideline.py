#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Table of scripts/replay-guideline.sh's results: per workload and virtual core count, the
best configuration of the sweep (critical-path E x C/E and the sequential engine; median over
rounds of each run's median) and three guideline rules' picks, each as the sweep's time for
that configuration over the best's:
  - floor of the paper's avg_width down to a divisor of C (main before 2026-11-27's change),
  - the heavy nodes' cost-weighted width to the nearest divisor (the untagged "guideline"
    lines: the first version of that change, not merged),
  - work / span over every node to the nearest divisor (lines tagged "build":"all-work"),
  - the least modelled makespan over the divisors (lines tagged "build":"model": main since
    2026-11-28).
  python3 bench/replay_guideline.py RESULTS.jsonl...   (the lines of every file, together)"""
import json
import statistics
import sys
from collections import defaultdict


def floor_rule(avg_width, cores):
    e = max(1, min(avg_width, cores))
    while cores % e:
        e -= 1
    return f"{e}x{cores // e}"


def main(paths):
    times = defaultdict(list)  # (workload, cores, config) -> medians
    picks = defaultdict(dict)  # (workload, cores) -> {rule: (executors, avg_width, work_width)}
    for line in (l for path in paths for l in open(path)):
        d = json.loads(line)
        key = (d["workload"], d["replay"]["cores"])
        if d["config"] == "guideline":
            picks[key][d.get("build", "heavy-work")] = (d["executors"], d["avg_width"],
                                                        d["work_width"])
        else:
            times[key + (d["config"],)].append(d["median_s"])
    print("| workload | cores | best (ms) | floor of avg_width | heavy work | all work (work_width) "
          "| modelled makespan |")
    print("|---|---:|---|---|---|---|---|")
    for key in sorted(picks):
        w, c = key
        sweep = {cfg: statistics.median(v) for (kw, kc, cfg), v in times.items() if (kw, kc) == key}
        best = min(sweep, key=sweep.get)
        ratio = lambda cfg: f"{cfg} {sweep[cfg] / sweep[best]:.2f}x" if cfg in sweep else f"{cfg} ?"
        p = picks[key]
        avg = next(iter(p.values()))[1]
        heavy = ratio(p["heavy-work"][0]) if "heavy-work" in p else ""
        allw = f"{ratio(p['all-work'][0])} ({p['all-work'][2]})" if "all-work" in p else ""
        model = ratio(p["model"][0]) if "model" in p else ""
        print(f"| {w} | {c} | {best} {sweep[best] * 1e3:.3f} | {ratio(floor_rule(avg, c))} | "
              f"{heavy} | {allw} | {model} |")


if __name__ == "__main__":
    main(sys.argv[1:])
