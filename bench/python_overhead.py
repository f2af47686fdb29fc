#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The Python module's per-run overhead (issue 51): a tiny graph (relu(x * 2 + b), x [1, 16]) run
# from Python and from C++ (hetgraph-run on the same graph exported to ONNX, which times each
# run), in interleaved rounds; one JSON line per round and a summary. Same engine both sides
# (sequential, 1 thread), so the difference is the call: the dict of feeds, the array views,
# releasing the GIL, and the read back into a new array.
#   PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--rounds 5] [--runs 10000]
#       [--hetgraph-run build/tools/hetgraph-run] > OUT.jsonl
import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time

import numpy as np

import hetgraph as hg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--hetgraph-run", default="build/tools/hetgraph-run")
    a = ap.parse_args()

    g = hg.Graph()
    x = g.input("x")
    b = g.variable("b", (1, 16), hg.Initializer.uniform(-1, 1, 1))
    y = hg.relu(x * 2.0 + b).named("y")
    folder = tempfile.mkdtemp()
    model = os.path.join(folder, "tiny.onnx")
    hg.onnx.export(g, [y], {"x": (1, 16)}, model, output_names=["y"])
    cg = hg.GraphCompiler(hg.Platform.cpu(engine="sequential", threads=1)).compile(
        g, {"x": (1, 16)}, [y])
    xs = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    feeds = {"x": xs}

    def python_round():
        for _ in range(100):  # warm-up
            cg.run(feeds)
        per = []
        for _ in range(10):  # 10 batches of runs/10: the median batch's time per run
            t0 = time.perf_counter()
            for _ in range(a.runs // 10):
                cg.run(feeds)
            per.append((time.perf_counter() - t0) / (a.runs // 10))
        run_s = statistics.median(per)
        t0 = time.perf_counter()
        for _ in range(a.runs // 10):
            cg.run(feeds)
            cg.read(y)
        return run_s, (time.perf_counter() - t0) / (a.runs // 10)

    def cpp_round():
        out = subprocess.run([a.hetgraph_run, model, "--engine", "sequential", "--threads", "1",
                              "--repeat", str(a.runs), "--warmup", "100", "--json"],
                             capture_output=True, text=True, check=True).stdout
        line = json.loads(out.strip().splitlines()[-1])
        return line["median_s"]

    rows = []
    for r in range(a.rounds):
        first_python = r % 2 == 0
        if first_python:
            py_run, py_run_read = python_round()
            cpp = cpp_round()
        else:
            cpp = cpp_round()
            py_run, py_run_read = python_round()
        row = {"kind": "python-overhead", "round": r, "runs": a.runs,
               "python_run_us": py_run * 1e6, "python_run_read_us": py_run_read * 1e6,
               "cpp_run_us": cpp * 1e6, "overhead_us": (py_run - cpp) * 1e6,
               "machine": platform.processor() or platform.machine()}
        rows.append(row)
        print(json.dumps(row), flush=True)
    med = lambda k: statistics.median(r[k] for r in rows)
    print(json.dumps({"kind": "python-overhead-summary", "rounds": a.rounds, "runs": a.runs,
                      "python_run_us": med("python_run_us"),
                      "python_run_read_us": med("python_run_read_us"),
                      "cpp_run_us": med("cpp_run_us"), "overhead_us": med("overhead_us"),
                      "platform": hg.Platform.cpu().description()}))


if __name__ == "__main__":
    main()
