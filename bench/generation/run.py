#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Token-by-token generation (issue 49): hetgraph from Python (examples/python/generate_gpt2.py)
# against ONNX Runtime's Node.js binding (ort_generate.js) at its 1 and 2 intra-op threads, on
# the GPT-2-style decoder of export_gpt2.py (exported first when the folder has no model), in
# interleaved rounds (the order rotates), each run a fresh process under the build lock; the
# OpenCL platform once with --opencl (PoCL on these cores is slow). One JSON line per run, then
# a summary of medians: tokens per second after the first token, the time to the first token
# (the prompt, then one token), and whether every run gave PyTorch's tokens.
#   bench/js/install-peers.sh bench/models                       # onnxruntime-node, once
#   PYTHONPATH=build/python /usr/bin/python3 bench/generation/run.py [--rounds 3]
#       [--model DIR] [--opencl] > OUT.jsonl
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def child(argv):
    out = subprocess.run(["flock", "/tmp/hetgraph-build.lock"] + argv, capture_output=True,
                         text=True, env=os.environ)
    if out.returncode != 0 and not out.stdout.strip():
        sys.exit(f"{' '.join(argv)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default="/tmp/hetgraph-gpt2")
    ap.add_argument("--opencl", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.model, "model.onnx")):
        subprocess.run([sys.executable, os.path.join(HERE, "export_gpt2.py"), a.model],
                       check=True, stdout=sys.stderr)
    example = [sys.executable, os.path.join(ROOT, "examples", "python", "generate_gpt2.py"),
               a.model, "--json"]
    ort = ["node", os.path.join(HERE, "ort_generate.js"), a.model]
    contenders = [("hetgraph-cpu", example), ("ort-1", ort + ["1"]), ("ort-2", ort + ["2"])]
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with open(os.path.join(a.model, "meta.json")) as f:
        meta = json.load(f)
    model = {k: meta[k] for k in ("layers", "d", "heads", "vocab", "capacity")}
    rows = []
    for r in range(a.rounds):
        order = contenders[r % 3:] + contenders[:r % 3]
        if a.opencl and r == 0:
            order = order + [("hetgraph-opencl", example + ["--platform", "opencl"])]
        for name, argv in order:
            row = child(argv)
            row.update({"kind": "generation", "contender": name, "round": r, "model": model,
                        "torch_generate_s": meta["torch_generate_s"], "commit": commit})
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {"kind": "generation-summary", "rounds": a.rounds, "model": model,
               "new_tokens": meta["new_tokens"], "prompt": len(meta["prompt"]),
               "all_same_as_pytorch": all(x["same_as_pytorch"] for x in rows),
               "machine": next(x["platform"] for x in rows if x["contender"] == "hetgraph-cpu"),
               "commit": commit}
    for name, _ in contenders + [("hetgraph-opencl", None)]:
        mine = [x for x in rows if x["contender"] == name]
        if mine:
            summary[name] = {k: statistics.median(x[k] for x in mine)
                             for k in ("tokens_per_s", "first_token_s", "setup_s")}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
