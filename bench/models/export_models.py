#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Exports the model bench (zoo.py) to ONNX, with the inputs and the exporter's own outputs.

    /usr/bin/python3 bench/models/export_models.py [OUT_DIR] [--models a,b] [--force]

OUT_DIR (default build/bench-models) gets, per model and batch (1 and the model's serving
batch), a folder <model>-b<batch>/ with
  model.onnx          torch.onnx.export in eval mode, opset 14, fixed shapes
  <input>.pb          each input as an ONNX TensorProto (hetgraph-run --input NAME=FILE)
  <input>.bin         the same values raw, little-endian (the ONNX Runtime child)
  expected<i>.bin     PyTorch's output i (float32, raw): the reference every contender is
                      checked against
  meta.json           inputs and outputs (names, shapes, types), family, PyTorch's latency
and OUT_DIR/manifest.json lists them all. A folder that is complete is kept unless --force:
the same seed gives the same files. Nothing here is committed (the weights are megabytes).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
import onnx.numpy_helper
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

OPSET = 14


def flat(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def torch_latency(m, args, budget_s=1.0):
    """Median of a few timed forwards: how many repetitions the harness gives the model."""
    with torch.no_grad():
        m(*args)
        t, s = [], time.perf_counter()
        while len(t) < 3 or (time.perf_counter() - s < budget_s and len(t) < 20):
            t0 = time.perf_counter()
            m(*args)
            t.append(time.perf_counter() - t0)
    return sorted(t)[len(t) // 2]


def export(name, batch, folder):
    spec = zoo.MODELS[name]
    m = zoo.build(name)
    gen = torch.Generator().manual_seed(zoo.SEED + 100 + batch)
    inputs = spec.inputs(batch, gen)
    args = tuple(inputs.values())
    with torch.no_grad():
        outs = [o.detach().float().numpy() for o in flat(m(*args))]
    out_names = ["y"] if len(outs) == 1 else (
        ["logits"] + [f"present_{kv}{i}" for i in range((len(outs) - 1) // 2) for kv in "kv"])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    # With gradients on: under no_grad, torch 1.13's nn.MultiheadAttention (ViT) takes its fused
    # fast path, which has no ONNX export.
    torch.onnx.export(m, args, path, input_names=list(inputs), output_names=out_names,
                      opset_version=OPSET, do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))
    meta = {"model": name, "batch": batch, "family": spec.family, "opset": OPSET,
            "inputs": [], "outputs": []}
    for k, v in inputs.items():
        a = v.numpy()
        with open(os.path.join(folder, f"{k}.pb"), "wb") as f:
            f.write(onnx.numpy_helper.from_array(a, k).SerializeToString())
        a.tofile(os.path.join(folder, f"{k}.bin"))
        meta["inputs"].append({"name": k, "shape": list(a.shape), "dtype": str(a.dtype)})
    for i, (k, a) in enumerate(zip(out_names, outs)):
        a.astype(np.float32).tofile(os.path.join(folder, f"expected{i}.bin"))
        meta["outputs"].append({"name": k, "shape": list(a.shape), "dtype": "float32"})
    torch.set_num_threads(os.cpu_count())
    meta["torch_latency_s"] = torch_latency(m, args)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def main():
    ap = argparse.ArgumentParser(description="Exports the model bench to ONNX.")
    ap.add_argument("out", nargs="?", default="build/bench-models")
    ap.add_argument("--models", default=",".join(zoo.MODELS))
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    manifest = []
    for name in a.models.split(","):
        if name not in zoo.MODELS:
            sys.exit(f"export_models.py: unknown model '{name}' (zoo.py has {', '.join(zoo.MODELS)})")
        for batch in (1, zoo.MODELS[name].serving_batch):
            folder = os.path.join(a.out, f"{name}-b{batch}")
            meta_path = os.path.join(folder, "meta.json")
            if os.path.exists(meta_path) and not a.force:
                with open(meta_path) as f:
                    meta = json.load(f)
            else:
                t = time.time()
                meta = export(name, batch, folder)
                print(f"wrote {folder} ({time.time() - t:.1f} s; PyTorch "
                      f"{meta['torch_latency_s'] * 1e3:.2f} ms)", flush=True)
            meta["dir"] = os.path.abspath(folder)
            manifest.append(meta)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{len(manifest)} model files in {a.out}/manifest.json")


if __name__ == "__main__":
    main()
