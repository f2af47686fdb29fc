# SPDX-License-Identifier: Apache-2.0
"""The network, data and optimizer of examples/fashion_cnn in PyTorch: one JSON line per epoch.

  /usr/bin/python3 bench/fashion_cnn/torch_train.py --threads 2 --epochs 2

The same IDX files (Debian's dataset-fashion-mnist), images scaled to [0, 1] once up front,
batches of 100 in a shuffled order per epoch, conv 3x3 16 + relu + max pool 2, conv 3x3 32 +
relu + max pool 2, dense 1568x128 + relu + dropout (--dropout, 0.25 as the example), dense 128x10, softmax cross-entropy, Adam (lr 1e-3,
PyTorch's defaults, which hetgraph's Optimizer::adam follows). epoch_s times the training
loop alone (as the example does); test accuracy is computed after it, untimed.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

# The IDX reader of the softmax example's numpy reference.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from mnist_reference import find, read_idx  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dropout", type=float, default=0.25)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    def load(stem, kind):
        return read_idx(find(a.data, stem, kind))
    xtr = torch.from_numpy(load("train-images", "idx3-ubyte").astype(np.float32) / 255.0)
    ytr = torch.from_numpy(load("train-labels", "idx1-ubyte").astype(np.int64))
    xte = torch.from_numpy(load("t10k-images", "idx3-ubyte").astype(np.float32) / 255.0)
    yte = torch.from_numpy(load("t10k-labels", "idx1-ubyte").astype(np.int64))
    xtr, xte = xtr.reshape(-1, 1, 28, 28), xte.reshape(-1, 1, 28, 28)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
        *([nn.Dropout(a.dropout)] if a.dropout > 0 else []), nn.Linear(128, 10))
    for m in model:
        if isinstance(m, (nn.Conv2d, nn.Linear)):  # He-normal and zero bias, as the example
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    steps = xtr.shape[0] // a.batch
    g = torch.Generator().manual_seed(a.seed)
    for epoch in range(1, a.epochs + 1):
        perm = torch.randperm(xtr.shape[0], generator=g)
        t0 = time.perf_counter()
        model.train()
        total = 0.0
        for k in range(steps):
            ids = perm[k * a.batch:(k + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xtr[ids]), ytr[ids])
            loss.backward()
            opt.step()
            total += loss.item()
        epoch_s = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            acc = sum((model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item()
                      for i in range(0, xte.shape[0], 500)) / xte.shape[0]
        print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "threads": a.threads,
                          "dropout": a.dropout, "epoch": epoch, "batch": a.batch, "mean_loss": round(total / steps, 6),
                          "test_accuracy": acc, "epoch_s": round(epoch_s, 4)}), flush=True)


if __name__ == "__main__":
    main()
