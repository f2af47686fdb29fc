#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Exports the issue-18 CNNs to ONNX with random weights from a fixed seed (nothing committed).

    /usr/bin/python3 bench/cnn/export_models.py [OUT_DIR]     # default build/bench-cnn

For each model (torchvision googlenet without aux logits, resnet18) and batch (1, 32) it writes
  <model>-b<batch>.onnx        torch.onnx.export of the model in eval mode (BatchNorm inference)
  <model>.pt                   the state dict, so the PyTorch timing child runs the same weights
  input-b<batch>.pb            the input as an ONNX TensorProto (hetgraph-run --input)
  input-b<batch>.bin           the same floats raw, little-endian (the ONNX Runtime child)
Debian's python3-torch 1.13.1 and python3-torchvision 0.14.1; the same seed gives the same files.
"""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torchvision

SEED = 18
BATCHES = (1, 32)


def models():
    """Each model built from the same seed: torchvision's own random initialisation."""
    torch.manual_seed(SEED)
    g = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
    torch.manual_seed(SEED)
    r = torchvision.models.resnet18(weights=None)
    return {"googlenet": g, "resnet18": r}


def randomise_batch_norm(m, gen):
    """Fresh BatchNorm layers are an identity (mean 0, var 1, scale 1, shift 0): give them
    running statistics and affine parameters so folding them is exercised for real."""
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            c = mod.num_features
            with torch.no_grad():
                mod.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                mod.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                mod.weight.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                mod.bias.copy_(torch.randn(c, generator=gen) * 0.1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/bench-cnn"
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(SEED)
    for b in BATCHES:
        x = torch.rand(b, 3, 224, 224, generator=gen) * 2 - 1
        arr = x.numpy().astype(np.float32)
        t = onnx.numpy_helper.from_array(arr, "x")
        with open(os.path.join(out, f"input-b{b}.pb"), "wb") as f:
            f.write(t.SerializeToString())
        arr.tofile(os.path.join(out, f"input-b{b}.bin"))
    for name, m in models().items():
        randomise_batch_norm(m, gen)
        m.eval()
        torch.save(m.state_dict(), os.path.join(out, f"{name}.pt"))
        for b in BATCHES:
            path = os.path.join(out, f"{name}-b{b}.onnx")
            x = torch.zeros(b, 3, 224, 224)
            with torch.no_grad():
                torch.onnx.export(m, x, path, input_names=["x"], output_names=["y"],
                                  opset_version=13, do_constant_folding=True)
            onnx.checker.check_model(onnx.load(path))
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
