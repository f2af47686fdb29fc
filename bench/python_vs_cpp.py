#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The MNIST softmax example from Python (examples/python/mnist_softmax.py) against the C++ one
# (build/examples/mnist_softmax), each a fresh process, alternating, ROUNDS rounds: training
# time (train_s), test accuracy and final loss of each; one JSON line per run and a summary with
# the medians and their ratio (issue 51's target: Python within 10% of C++).
#   PYTHONPATH=build/python /usr/bin/python3 bench/python_vs_cpp.py [--rounds 5] > OUT.jsonl
# --check: exit 1 unless every run gave the same test accuracy and final loss (to 1e-7): the
# test suite's check that the two programs compute the same training.
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--args", default="", help="more flags for both programs, e.g. '--epochs 2'")
    ap.add_argument("--cpp", default="build/examples/mnist_softmax")
    ap.add_argument("--python", default=os.path.join(os.path.dirname(__file__), "..", "examples",
                                                     "python", "mnist_softmax.py"))
    a = ap.parse_args()
    rows = []
    for r in range(a.rounds):
        order = ["cpp", "python"] if r % 2 == 0 else ["python", "cpp"]
        for who in order:
            cmd = [a.cpp, "--json"] if who == "cpp" else [sys.executable, a.python, "--json"]
            cmd += a.args.split()
            res = run(cmd)
            row = {"kind": "mnist-python-vs-cpp", "round": r, "program": who,
                   "train_s": res["train_s"], "test_accuracy": res["test_accuracy"],
                   "final_loss": res["final_loss"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    med = {w: statistics.median(r["train_s"] for r in rows if r["program"] == w)
           for w in ("cpp", "python")}
    print(json.dumps({"kind": "mnist-python-vs-cpp-summary", "rounds": a.rounds,
                      "cpp_train_s": med["cpp"], "python_train_s": med["python"],
                      "ratio": med["python"] / med["cpp"],
                      "accuracies": sorted({r["test_accuracy"] for r in rows})}))
    if a.check:
        losses = [r["final_loss"] for r in rows]
        same = len({r["test_accuracy"] for r in rows}) == 1 and max(losses) - min(losses) <= 1e-7
        if not same:
            print("python_vs_cpp: the programs disagree (accuracy or final loss)", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
