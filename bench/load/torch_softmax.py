# SPDX-License-Identifier: Apache-2.0
"""examples/mnist_softmax in PyTorch: the same IDX files, x[B,784] @ W[784,10] + b, softmax
cross-entropy, plain SGD (lr 0.1, batch 500, W and b from zero, batches in file order). One JSON
line with train_s (the training loop alone, as the example times it).

  /usr/bin/python3 bench/load/torch_softmax.py [--threads N] [--epochs 2]

--threads 0 (the default) leaves PyTorch's own default (one thread per core); N calls
torch.set_num_threads(N).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from mnist_reference import find, read_idx  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--lr", type=float, default=0.1)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    x = torch.from_numpy(read_idx(find(a.data, "train-images", "idx3-ubyte")).astype(np.float32) / 255.0)
    y = torch.from_numpy(read_idx(find(a.data, "train-labels", "idx1-ubyte")).astype(np.int64))
    x = x.reshape(-1, 784)
    W = torch.zeros(784, 10, requires_grad=True)
    b = torch.zeros(10, requires_grad=True)
    steps = x.shape[0] // a.batch
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        for s in range(steps):
            xb, yb = x[s * a.batch:(s + 1) * a.batch], y[s * a.batch:(s + 1) * a.batch]
            loss = torch.nn.functional.cross_entropy(xb @ W + b, yb)
            W.grad = None
            b.grad = None
            loss.backward()
            with torch.no_grad():
                W -= a.lr * W.grad
                b -= a.lr * b.grad
    train_s = time.perf_counter() - t0
    print(json.dumps({"runtime": "pytorch", "version": torch.__version__,
                      "threads": torch.get_num_threads(), "epochs": a.epochs,
                      "train_s": train_s, "final_loss": float(loss)}))


if __name__ == "__main__":
    main()
