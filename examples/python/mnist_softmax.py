#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# examples/mnist_softmax (the C++ program) from Python: softmax regression on Fashion-MNIST,
# x[B, 784] @ W + b, mean cross-entropy, SGD, batches in file order written straight into the
# graph's mapped input buffer; then the test-set accuracy, counted in the graph. The same
# defaults and the same math as the C++ example: the same accuracy (0.8272 on Debian's data).
#   PYTHONPATH=build/python python3 examples/python/mnist_softmax.py [--data DIR] [--epochs 10]
#       [--batch 500] [--lr 0.1] [--engine auto|sequential|critical-path|shared-queue]
#       [--threads N] [--json]
import argparse
import json
import sys
import time

import numpy as np

import hetgraph as hg


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--engine", default="auto",
                    choices=["auto", "sequential", "critical-path", "shared-queue"])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    t0 = time.perf_counter()
    mnist = hg.data.load_mnist(a.data)
    pixels = mnist.train.rows * mnist.train.cols
    load_s = time.perf_counter() - t0

    g = hg.Graph()
    x, y = g.input("x"), g.input("y", hg.DType.i32)
    W = g.variable("W", (pixels, mnist.classes))
    b = g.variable("b", (mnist.classes,))
    logits = x @ W + b
    loss = hg.reduce_mean(hg.cross_entropy(hg.softmax(logits), y))
    hits = hg.reduce_sum(hg.cast(hg.equal(hg.argmax(logits, 1), y), hg.DType.f32))
    step = hg.sgd(loss, [W, b], a.lr)

    platform = hg.Platform.cpu(engine=a.engine, threads=a.threads)
    t0 = time.perf_counter()
    train = hg.GraphCompiler(platform).compile(g, {"x": (a.batch, pixels), "y": (a.batch,)},
                                               [loss, step])
    setup_s = time.perf_counter() - t0
    xb = train.mapped_input("x")  # the graph's buffer: images are written into it, not copied
    labels = mnist.train.labels
    steps = mnist.train.count // a.batch
    t0 = time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        loss_sum = 0.0
        for s in range(steps):
            mnist.train.images(s * a.batch, a.batch, xb)
            train.run({"x": xb, "y": labels[s * a.batch:(s + 1) * a.batch]})
            loss_sum += float(train.read(loss))
        final_loss = loss_sum / steps
        print(f"epoch {epoch:2d}/{a.epochs}  mean loss {final_loss:.6f}  "
              f"elapsed {time.perf_counter() - t0:.3f} s", file=sys.stderr)
    train_s = time.perf_counter() - t0

    test = hg.GraphCompiler(platform).compile(
        g, {"x": (mnist.test.count, pixels), "y": (mnist.test.count,)}, [hits])
    test.write("W", train.read("W"))
    test.write("b", train.read("b"))
    tx = test.mapped_input("x")
    mnist.test.images(0, mnist.test.count, tx)
    test.run({"x": tx, "y": mnist.test.labels})
    accuracy = float(test.read(hits)) / mnist.test.count
    result = {"platform": platform.description(), "epochs": a.epochs, "batch": a.batch,
              "lr": a.lr, "load_s": load_s, "setup_s": setup_s, "train_s": train_s,
              "final_loss": round(final_loss, 8), "test_accuracy": accuracy}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"test accuracy {accuracy:.4f}, final loss {final_loss:.6f}, "
              f"training {train_s:.3f} s on {platform.description()}")


if __name__ == "__main__":
    main()
