#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Replayed vs real times from scripts/replay-validate.sh's JSON lines: a markdown table (the one
in bench/README.md, "replay"), one row per workload, a column per engine configuration, each
cell replay/real - 1; cells off by more than 10% are marked. Several lines of one workload,
configuration and side count as their median where each is one sample (--repeat 1, or marked
"sample": what REPLAY_INTERLEAVE=1 writes); otherwise the last line counts (a re-run
supersedes).

    bench/replay_table.py bench/results/2026-11-23-replay-validate.jsonl
    bench/replay_table.py --self FILE   # REPLAY_SELF=1: real vs real, each round's second
                                        # real sample against its first
    bench/replay_table.py --except threadpool,wide-deep-infer-1 FILE   # also: the count and
                                        # median error of the other workloads
"""
import json
import statistics
import sys
from collections import OrderedDict


def main(path, self_spread=False, excepted=()):
    real, replay = {}, {}
    order = OrderedDict()
    seen = {}  # real samples of a key so far: with --self the odd ones (second of a round) are B
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key = (r["workload"], r["engine"] + " " + r["executors"])
        side = replay if "replay" in r else real
        if self_spread:
            if "replay" in r:
                continue
            n = seen[key] = seen.get(key, 0) + 1
            side = real if n % 2 == 1 else replay
        if r.get("repeat") == 1 or r.get("sample"):
            side.setdefault(key, []).append(r["median_s"])
        else:
            side[key] = [r["median_s"]]
        order.setdefault(r["workload"], OrderedDict())[key[1]] = True
    real = {k: statistics.median(v) for k, v in real.items()}
    replay = {k: statistics.median(v) for k, v in replay.items()}
    configs = OrderedDict()
    for w in order.values():
        for c in w:
            configs[c] = True
    configs = list(configs)
    print("| workload | " + " | ".join(configs) + " |")
    print("|---|" + "---|" * len(configs))
    inside = total = 0
    worst = []
    rest = []  # errors of the workloads not excepted
    for w in order:
        cells = []
        for c in configs:
            k = (w, c)
            if k in real and k in replay:
                d = replay[k] / real[k] - 1
                total += 1
                ok = abs(d) <= 0.10
                if w not in excepted:
                    rest.append(d)
                inside += ok
                if not ok:
                    worst.append((abs(d), w, c, real[k], replay[k]))
                cells.append(("%+.1f%%" % (100 * d)) + ("" if ok else " **x**"))
            else:
                cells.append("")
        print("| %s | %s |" % (w, " | ".join(cells)))
    print()
    if self_spread:
        print("(--self: real vs real, each round's second real sample against its first;")
        print("'replay' below is the second.)")
    print("%d of %d pairs within 10%%." % (inside, total))
    if excepted and rest:
        print("Without %s: %d of %d within 10%%, median error %+.1f%%." % (
            ", ".join(excepted), sum(abs(d) <= 0.10 for d in rest), len(rest),
            100 * statistics.median(rest)))
    for d, w, c, a, b in sorted(worst, reverse=True):
        print("- %s %s: real %.4g s, replay %.4g s (%+.0f%%)" % (w, c, a, b, 100 * (b / a - 1)))


if __name__ == "__main__":
    argv = sys.argv[1:]
    excepted = ()
    if "--except" in argv:
        i = argv.index("--except")
        excepted = tuple(argv[i + 1].split(","))
        del argv[i:i + 2]
    args = [a for a in argv if a != "--self"]
    main(args[0] if args else "bench/results/replay-validate.jsonl", "--self" in argv, excepted)
