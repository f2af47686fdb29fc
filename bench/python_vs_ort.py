#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A serving loop of small runs from Python with hetgraph against ONNX Runtime's Node.js binding
# (onnxruntime-node: the ONNX Runtime that runs here without Python packages from outside
# Debian) on the same ONNX model (issue 51): each side runs the model RUNS times in a loop in
# its own process, outputs read back each run (hetgraph.onnx's InferenceSession.run, ONNX
# Runtime's await session.run), in interleaved rounds (the order alternates), each under the
# build lock. One JSON line per round and side, then a summary of medians. The model is a
# small CNN built and exported by this script (--export DIR writes it as a model folder:
# model.onnx, meta.json, x.bin), and ONNX Runtime's outputs of the first round are written to
# DIR/ort/ (what examples/python/onnx_vs_ort.py compares with).
#   bench/js/install-peers.sh bench/models                        # onnxruntime-node, once
#   PYTHONPATH=build/python /usr/bin/python3 bench/python_vs_ort.py [--rounds 5] [--runs 10000]
#       [--model DIR] [--ort-threads 1] > OUT.jsonl
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import hetgraph as hg

HERE = os.path.dirname(os.path.abspath(__file__))


def export_small_cnn(folder):
    """conv 3x3 (1 -> 8 channels) + relu, 2x2 max pool, linear 392 -> 10, softmax; x [1,1,14,14]."""
    g = hg.Graph()
    x = g.input("x")
    w = g.variable("conv.weight", (8, 1, 3, 3), hg.Initializer.uniform(-1 / 3, 1 / 3, 11))
    c = g.variable("conv.bias", (8,), hg.Initializer.uniform(-0.1, 0.1, 12))
    h = hg.max_pool2d(hg.relu(hg.conv2d(x, w, c, padding=(1, 1))), kernel=(2, 2))
    W = g.variable("fc.weight", (392, 10), hg.Initializer.uniform(-0.05, 0.05, 13))
    b = g.variable("fc.bias", (10,), hg.Initializer.uniform(-0.05, 0.05, 14))
    probs = hg.softmax(hg.reshape(h, [1, 392]) @ W + b).named("probs")
    os.makedirs(folder, exist_ok=True)
    hg.onnx.export(g, [probs], {"x": (1, 1, 14, 14)}, os.path.join(folder, "model.onnx"),
                   output_names=["probs"])
    xs = np.sin(np.arange(196, dtype=np.float32)).reshape(1, 1, 14, 14)
    xs.tofile(os.path.join(folder, "x.bin"))
    meta = {"model": "small_cnn", "batch": 1, "producer": "bench/python_vs_ort.py --export",
            "inputs": [{"name": "x", "shape": [1, 1, 14, 14], "dtype": "float32"}],
            "outputs": [{"name": "probs", "shape": [1, 10], "dtype": "float32"}]}
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def hetgraph_loop(folder, runs):
    """The child: the loop in Python with hetgraph's InferenceSession; one JSON line."""
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    sess = hg.onnx.load(os.path.join(folder, "model.onnx"))
    feeds = {i["name"]: np.fromfile(os.path.join(folder, i["name"] + ".bin"),
                                    np.float32).reshape(i["shape"]) for i in meta["inputs"]}
    sess.run(None, feeds)  # the first run pays for allocation: not timed, as on the other side
    samples = []
    start = time.perf_counter()
    for _ in range(runs):
        s = time.perf_counter()
        sess.run(None, feeds)
        samples.append(time.perf_counter() - s)
    loop = time.perf_counter() - start
    report = sess.compiled().engine_report()
    chosen = (report["cpu"] or {}).get("chosen") or {}
    print(json.dumps({"runtime": "hetgraph-python", "runs": runs, "loop_s": loop,
                      "median_run_s": statistics.median(samples), "engine": report["engine"],
                      "chosen": {k: chosen.get(k) for k in ("engine", "executors",
                                                            "threads_per_executor",
                                                            "from_cache")},
                      "load_threads": (report["cpu"] or {}).get("load_threads")}))


def child(argv):
    out = subprocess.run(["flock", "/tmp/hetgraph-build.lock"] + argv, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--model", default="", help="a model folder (default: the small CNN, "
                    "exported into a temporary folder)")
    ap.add_argument("--ort-threads", type=int, default=1)
    ap.add_argument("--export", metavar="DIR", help="write the small CNN's model folder and stop")
    ap.add_argument("--child", nargs=2, metavar=("DIR", "RUNS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.export:
        export_small_cnn(a.export)
        return
    if a.child:
        hetgraph_loop(a.child[0], int(a.child[1]))
        return

    folder = a.model or tempfile.mkdtemp()
    if not a.model:
        export_small_cnn(folder)
    python = [sys.executable, os.path.abspath(__file__), "--child", folder, str(a.runs)]
    node = ["node", os.path.join(HERE, "js", "ort_loop.js"), folder, str(a.runs),
            str(a.ort_threads)]
    machine = hg.Platform.cpu().description()  # "cpu: AMD EPYC, 2 cores, code path ..."
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    rows = []
    for r in range(a.rounds):
        order = [("hetgraph", python), ("ort", node)]
        if r % 2:
            order.reverse()
        for side, argv in order:
            if side == "ort" and r == 0:
                argv = argv + [os.path.join(folder, "ort")]
            row = child(argv)
            row.update({"kind": "python-vs-ort-loop", "round": r, "model": folder,
                        "machine": machine, "commit": commit})
            if side == "ort":
                row["intra_threads"] = a.ort_threads
            rows.append(row)
            print(json.dumps(row), flush=True)

    def med(runtime, key):
        return statistics.median(x[key] for x in rows if x["runtime"] == runtime)

    hl, ol = med("hetgraph-python", "loop_s"), med("onnxruntime-node", "loop_s")
    print(json.dumps({"kind": "python-vs-ort-loop-summary", "rounds": a.rounds, "runs": a.runs,
                      "hetgraph_python_loop_s": hl, "onnxruntime_node_loop_s": ol,
                      "ratio": hl / ol,
                      "hetgraph_python_median_run_us": 1e6 * med("hetgraph-python",
                                                                 "median_run_s"),
                      "onnxruntime_node_median_run_us": 1e6 * med("onnxruntime-node",
                                                                  "median_run_s"),
                      "machine": machine,
                      "commit": commit}))


if __name__ == "__main__":
    main()
