#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-op time of each run in a hetgraph trace (--trace FILE of hetgraph-run or hetgraph-bench):
one JSON line per run with the summed kernel time of every op kind, in ms.
  python3 bench/trace_op_times.py TRACE.json [LABEL]"""
import json
import sys
from collections import defaultdict


def main(path, label):
    runs = defaultdict(lambda: defaultdict(float))
    for e in json.load(open(path))["traceEvents"]:
        if e.get("ph") == "X" and "run" in e.get("args", {}):
            runs[e["args"]["run"]][e["cat"]] += e["dur"] / 1e3
    for run, ops in sorted(runs.items()):
        print(json.dumps({"label": label, "run": run, "total_ms": round(sum(ops.values()), 3),
                          "ms": {k: round(v, 3) for k, v in sorted(ops.items(), key=lambda x: -x[1])}}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
