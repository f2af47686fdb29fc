#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The portable build against the native one (scripts/portable-ab.sh): for each workload or
model, the median over rounds of the portable/native ratio of the two builds' medians measured
in the same round (paired, so a slow minute of this noisy VM hits both), and the geometric mean
of those ratios.

    /usr/bin/python3 bench/portable_summary.py BENCH.jsonl [CNN.jsonl]
"""
import json
import math
import statistics
import sys


def paired(rows):
    """rows: (key, round, build, seconds) -> {key: [portable/native per round]}"""
    by = {}
    for key, rnd, build, s in rows:
        by.setdefault(key, {}).setdefault(rnd, {})[build] = s
    out = {}
    for key, rounds in by.items():
        out[key] = [r["portable"] / r["native"] for r in rounds.values()
                    if "portable" in r and "native" in r]
    return out


def bench_rows(path):
    # engine-ab.sh runs every (workload, config, build) once per round, in order: the n-th line
    # of a (workload, config, build) is round n.
    seen = {}
    for line in open(path):
        r = json.loads(line)
        key = (r["workload"], r["config"])
        n = seen[(key, r["build"])] = seen.get((key, r["build"]), -1) + 1
        yield key, n, r["build"], r["median_s"]


def cnn_rows(path):
    for line in open(path):
        r = json.loads(line)
        if r.get("who") != "hetgraph" or "/" not in r["config"]:
            continue
        build, engine = r["config"].split("/", 1)
        yield (f"{r['model']} b{r['batch']}", engine), r["round"], build, r["median_s"]


def main():
    rows = list(bench_rows(sys.argv[1]))
    if len(sys.argv) > 2:
        rows += list(cnn_rows(sys.argv[2]))
    ratios = paired(rows)
    meds = []
    for (name, config), v in sorted(ratios.items()):
        if not v:
            continue
        m = statistics.median(v)
        meds.append(m)
        print(f"{name:36s} {config:20s} portable/native {m:.3f}  "
              f"(rounds: {' '.join(f'{x:.2f}' for x in v)})")
    geo = math.exp(sum(math.log(m) for m in meds) / len(meds))
    print(f"geometric mean over {len(meds)}: {geo:.3f}; within 5%: "
          f"{sum(1 for m in meds if m <= 1.05)} of {len(meds)}")


if __name__ == "__main__":
    main()
