#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Runs an ONNX model from Python with hetgraph and compares its outputs with ONNX Runtime's,
# read from files (no ONNX Runtime needed here). A model folder as bench/models and
# bench/python_vs_ort.py write them: model.onnx, meta.json (inputs and outputs: names, shapes,
# types), <input>.bin (raw little-endian values), and ort/<i>.bin, ONNX Runtime's output i
# (float32). The folder examples/python/data/small_cnn is one (its ort/ from onnxruntime-node).
# Exit status 1 when an output differs by more than the tolerance.
#   PYTHONPATH=build/python python3 examples/python/onnx_vs_ort.py [DIR] [--platform cpu|opencl]
#       [--rtol 1e-4] [--atol 1e-6]
import argparse
import json
import os
import sys

import numpy as np

import hetgraph as hg

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description="hetgraph against ONNX Runtime's output files")
    ap.add_argument("folder", nargs="?", default=os.path.join(HERE, "data", "small_cnn"))
    ap.add_argument("--platform", choices=["cpu", "opencl"], default="cpu")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-6)
    a = ap.parse_args()

    with open(os.path.join(a.folder, "meta.json")) as f:
        meta = json.load(f)
    feeds = {}
    for i in meta["inputs"]:
        values = np.fromfile(os.path.join(a.folder, i["name"] + ".bin"), np.dtype(i["dtype"]))
        if values.dtype == np.int64:  # hetgraph's integer tensors are int32
            values = values.astype(np.int32)
        feeds[i["name"]] = values.reshape(i["shape"])
    platform = hg.Platform.opencl() if a.platform == "opencl" else hg.Platform.cpu()
    sess = hg.onnx.load(os.path.join(a.folder, "model.onnx"),
                        {i["name"]: i["shape"] for i in meta["inputs"]}, platform)
    outputs = sess.run([o["name"] for o in meta["outputs"]], feeds)
    ok = True
    for k, (o, got) in enumerate(zip(meta["outputs"], outputs)):
        want = np.fromfile(os.path.join(a.folder, "ort", f"{k}.bin"), np.float32)
        want = want.reshape(got.shape)
        diff = float(np.max(np.abs(got.astype(np.float32) - want))) if want.size else 0.0
        close = np.allclose(got, want, rtol=a.rtol, atol=a.atol)
        ok &= bool(close)
        print(f"{o['name']} {list(got.shape)}: max |hetgraph - onnxruntime| = {diff:.3g} "
              f"({'within' if close else 'OUTSIDE'} rtol {a.rtol:g}, atol {a.atol:g}) "
              f"on {platform.description()}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
