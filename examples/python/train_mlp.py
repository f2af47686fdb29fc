#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A short training loop from Python: a two-layer perceptron on Fashion-MNIST with Adam, a
# learning rate that warms up then follows a cosine (computed in the graph from the step
# count), batches in a shuffled order gathered straight into the graph's input buffers, a
# checkpoint per epoch, and the test accuracy from an inference graph that shares the
# training graph's weights (a VariableStore: nothing is copied between them).
#   PYTHONPATH=build/python python3 examples/python/train_mlp.py [--data DIR] [--epochs 3]
#       [--batch 100] [--hidden 128] [--lr 2e-3] [--seed 1] [--checkpoint PATH] [--json]
import argparse
import json
import sys
import time

import numpy as np

import hetgraph as hg


def main():
    ap = argparse.ArgumentParser(description="two-layer perceptron on Fashion-MNIST")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    mnist = hg.data.load_mnist(a.data)
    pixels = mnist.train.rows * mnist.train.cols

    g = hg.Graph()
    x, y = g.input("x"), g.input("y", hg.DType.i32)
    bound1, bound2 = 1 / np.sqrt(pixels), 1 / np.sqrt(a.hidden)  # PyTorch's Linear init
    W1 = g.variable("W1", (pixels, a.hidden), hg.Initializer.uniform(-bound1, bound1, a.seed))
    b1 = g.variable("b1", (a.hidden,))
    W2 = g.variable("W2", (a.hidden, mnist.classes),
                    hg.Initializer.uniform(-bound2, bound2, a.seed + 1))
    b2 = g.variable("b2", (mnist.classes,))
    logits = hg.relu(x @ W1 + b1) @ W2 + b2
    loss = hg.reduce_mean(hg.cross_entropy(hg.softmax(logits), y))
    hits = hg.reduce_sum(hg.cast(hg.equal(hg.argmax(logits, 1), y), hg.DType.f32))

    order = hg.data.BatchOrder(mnist.train.count, a.batch, seed=a.seed)
    steps = order.batches() * a.epochs
    step = hg.step_counter(g)
    lr = hg.linear_warmup(step, hg.cosine_decay(step, a.lr, steps), steps // 20)
    update = hg.minimize(loss, [W1, b1, W2, b2], hg.Optimizer.adam(a.lr),
                         learning_rate=lr, step=step)

    weights = hg.VariableStore()
    compiler = hg.GraphCompiler(hg.Platform.cpu(), variables=weights)
    train = compiler.compile(g, {"x": (a.batch, pixels), "y": (a.batch,)}, [loss, update])
    test = compiler.compile(g, {"x": (mnist.test.count, pixels), "y": (mnist.test.count,)},
                            [hits])
    xb, yb = train.mapped_input("x"), train.mapped_input("y")

    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        order.start_epoch(epoch)
        total = 0.0
        for k in range(order.batches()):
            mnist.train.gather(order.batch(k), xb, yb)  # into the graph's own buffers
            train.run({"x": xb, "y": yb})
            total += float(train.read(loss))
        if a.checkpoint:
            train.save(a.checkpoint)
        print(f"epoch {epoch + 1}/{a.epochs}  mean loss {total / order.batches():.5f}  "
              f"lr {float(train.read(lr)):.2e}  {time.perf_counter() - t0:.2f} s",
              file=sys.stderr)
    train_s = time.perf_counter() - t0

    tx = test.mapped_input("x")
    mnist.test.images(0, mnist.test.count, tx)
    test.run({"x": tx, "y": mnist.test.labels})  # the trained weights: the store's
    accuracy = float(test.read(hits)) / mnist.test.count
    result = {"epochs": a.epochs, "batch": a.batch, "hidden": a.hidden, "steps": steps,
              "train_s": round(train_s, 4), "final_loss": round(total / order.batches(), 6),
              "test_accuracy": accuracy}
    print(json.dumps(result) if a.json else
          f"test accuracy {accuracy:.4f} after {steps} steps, {train_s:.2f} s")


if __name__ == "__main__":
    main()
