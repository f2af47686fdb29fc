#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Independent reference for examples/mnist_softmax: the same math in numpy (float64).

x @ W + b, softmax, mean cross-entropy over the batch, plain SGD, zero init, batches in file
order, no shuffling. Prints the mean loss of the last epoch and the test accuracy, to compare
with `build/examples/mnist_softmax --json` (accuracy must agree within 0.3 points).

usage: scripts/mnist_reference.py [--data DIR] [--epochs 10] [--batch 500] [--lr 0.1]
"""
import argparse, gzip, json, os, struct
import numpy as np

def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw[4 + 4 * ndim:], dtype=np.uint8).reshape(dims)

def find(d, stem, kind):
    for sep in ("-", "."):
        for ext in ("", ".gz"):
            p = os.path.join(d, f"{stem}{sep}{kind}{ext}")
            if os.path.exists(p):
                return p
    raise SystemExit(f"missing {stem} in {d}")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--lr", type=float, default=0.1)
    a = ap.parse_args()
    xtr = read_idx(find(a.data, "train-images", "idx3-ubyte")).reshape(-1, 784) / 255.0
    ytr = read_idx(find(a.data, "train-labels", "idx1-ubyte")).astype(np.int64)
    xte = read_idx(find(a.data, "t10k-images", "idx3-ubyte")).reshape(-1, 784) / 255.0
    yte = read_idx(find(a.data, "t10k-labels", "idx1-ubyte")).astype(np.int64)
    W = np.zeros((784, 10)); b = np.zeros(10)
    B = a.batch; steps = len(xtr) // B
    for epoch in range(a.epochs):
        total = 0.0
        for s in range(steps):
            x = xtr[s * B:(s + 1) * B]; y = ytr[s * B:(s + 1) * B]
            z = x @ W + b
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z); p /= p.sum(axis=1, keepdims=True)
            total += -np.log(p[np.arange(B), y]).mean()
            d = p; d[np.arange(B), y] -= 1.0; d /= B        # d loss / d logits
            W -= a.lr * (x.T @ d); b -= a.lr * d.sum(axis=0)
        last = total / steps
    acc = float(((xte @ W + b).argmax(axis=1) == yte).mean())
    print(json.dumps({"final_loss": last, "test_accuracy": acc}))

if __name__ == "__main__":
    main()
