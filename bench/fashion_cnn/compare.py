# SPDX-License-Identifier: Apache-2.0
"""examples/fashion_cnn against the same network in PyTorch (torch_train.py), interleaved.

  bench/fashion_cnn/run.sh [--rounds 2] [--epochs 2] [--out bench/results/fashion_cnn_vs_pytorch.jsonl]

Each round runs every configuration once, in turn (hetgraph with 2 and 1 threads, PyTorch
with 1 and 2 threads, on Debian's default reference BLAS and on OpenBLAS), each under the build
lock so no build overlaps a timing. Debian's python3-torch is built with BLAS_INFO=generic: its
dense layers call whatever libblas.so.3 resolves to (netlib's reference BLAS by default); its
convolutions run in oneDNN 2.6.3 either way. OpenBLAS (libopenblas0-openmp, which run.sh
installs) is given to the PyTorch process alone through LD_LIBRARY_PATH. Every epoch is
one JSON line (round, config, epoch_s, accuracy); the table gives each configuration's median
epoch time over all rounds and epochs and the ratio to PyTorch's best.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

LOCK = ["flock", "/tmp/hetgraph-build.lock"]


def configs(epochs):
    ex = "build/examples/fashion_cnn"
    torch = ["/usr/bin/python3", "bench/fashion_cnn/torch_train.py"]
    e = ["--epochs", str(epochs)]
    ob = ["env", "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp"]
    return [
        ("hetgraph-2t", [ex, "--json", "--threads", "2"] + e),
        ("hetgraph-1t+pipeline", [ex, "--json", "--threads", "1", "--pipeline", "on"] + e),
        ("pytorch-1t", torch + ["--threads", "1"] + e),
        ("pytorch-2t", torch + ["--threads", "2"] + e),
        ("pytorch-openblas-1t", ob + torch + ["--threads", "1"] + e),
        ("pytorch-openblas-2t", ob + torch + ["--threads", "2"] + e),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--out", default=time.strftime(
        "bench/results/%Y-%m-%d-issue16-fashion-cnn-vs-pytorch.jsonl"))
    ap.add_argument("--note", default="2-core machine; other engineers' builds queued on the "
                    "same lock between runs")
    a = ap.parse_args()
    times = {}
    with open(a.out, "a") as out:
        for r in range(1, a.rounds + 1):
            for name, cmd in configs(a.epochs):
                res = subprocess.run(LOCK + cmd, capture_output=True, text=True)
                if res.returncode != 0:
                    sys.exit(f"{name} failed:\n{res.stderr}")
                for line in res.stdout.splitlines():
                    if not line.startswith("{"):
                        continue
                    j = json.loads(line)
                    rec = {"bench": "fashion_cnn_vs_pytorch", "round": r, "config": name,
                           "epoch": j["epoch"], "epoch_s": j["epoch_s"],
                           "test_accuracy": j["test_accuracy"], "mean_loss": j["mean_loss"],
                           "command": " ".join(cmd), "note": a.note,
                           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    times.setdefault(name, []).append(j["epoch_s"])
                print(f"round {r} {name}: {times[name][-a.epochs:]}", file=sys.stderr)
    best = min(statistics.median(v) for k, v in times.items() if k.startswith("pytorch"))
    print("| configuration | median s/epoch | vs PyTorch best |")
    print("|---|---|---|")
    for name, v in times.items():
        m = statistics.median(v)
        print(f"| {name} | {m:.2f} | {m / best:.2f}x |")


if __name__ == "__main__":
    main()
