#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Greedy generation with a GPT-2-style decoder and a key/value cache, token by token, from one
# compiled graph: the model folder of bench/generation/export_gpt2.py (model.onnx, meta.json)
# runs one token per run, and its cache inputs (past_k0, past_v0, ...) are state
# (hetgraph.onnx.load(..., state={input: output})): each run's present_* become the next run's
# past_* where the platform keeps them (an OpenCL device's memory on OpenCL), nothing is
# recompiled, and only the logits come back to the host for the argmax. The cache has a fixed
# capacity (prompt + new tokens) and the model masks the positions not yet written, so every
# token runs the same shapes. Prints the tokens per second and the time to the first new token,
# and checks the tokens against PyTorch's (meta.json's "generated"): exit status 1 if they
# differ.
#   PYTHONPATH=build/python python3 examples/python/generate_gpt2.py DIR [--platform cpu|opencl]
#       [--json]
import argparse
import json
import os
import sys
import time

import numpy as np

import hetgraph as hg


def main():
    ap = argparse.ArgumentParser(description="greedy generation with a key/value cache")
    ap.add_argument("folder")
    ap.add_argument("--platform", choices=["cpu", "opencl"], default="cpu")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with open(os.path.join(a.folder, "meta.json")) as f:
        meta = json.load(f)

    platform = hg.Platform.opencl() if a.platform == "opencl" else hg.Platform.cpu()
    t0 = time.perf_counter()
    sess = hg.onnx.load(os.path.join(a.folder, "model.onnx"), platform=platform,
                        state=meta["state"])
    setup_s = time.perf_counter() - t0

    prompt, n_new = meta["prompt"], meta["new_tokens"]
    ids, position = np.zeros((1, 1), np.int32), np.zeros(1, np.int32)
    generated, logits = [], None
    start = time.perf_counter()
    first_token_s = None
    for t in range(len(prompt) + n_new - 1):
        if t < len(prompt):
            ids[0, 0] = prompt[t]
        else:
            ids[0, 0] = generated[-1]
        position[0] = t
        (logits,) = sess.run(["logits"], {"ids": ids, "position": position})
        if t >= len(prompt) - 1:
            generated.append(int(logits[0, -1].argmax()))
            if first_token_s is None:
                first_token_s = time.perf_counter() - start  # the prompt, then one token
    total_s = time.perf_counter() - start
    decode_s = total_s - first_token_s
    same = generated == meta["generated"]
    result = {"runtime": "hetgraph", "platform": platform.description(),
              "engine": sess.compiled().engine_report()["engine"], "setup_s": setup_s,
              "prompt": len(prompt), "new_tokens": len(generated),
              "first_token_s": first_token_s, "total_s": total_s,
              "tokens_per_s": (len(generated) - 1) / decode_s,
              "same_as_pytorch": same}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"{len(generated)} tokens: {(len(generated) - 1) / decode_s:.1f} tokens/s after the "
              f"first ({1e3 * first_token_s:.1f} ms for the prompt and the first token; "
              f"compile {setup_s:.2f} s) on {platform.description()}")
        print("the same tokens as PyTorch" if same else "DIFFERENT tokens from PyTorch")
    if not same:
        first = next(i for i, (x, y) in enumerate(zip(generated, meta["generated"])) if x != y)
        print(f"first difference at new token {first}: {generated[first]} against "
              f"{meta['generated'][first]}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
