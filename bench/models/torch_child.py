#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One PyTorch timing run in its own process (eager, no_grad, eval) on one exported model
folder: the module and weights from zoo.py (the ones export_models.py exported), the folder's
inputs, `threads` intra-op threads; `warmup` untimed runs, then timed runs until `budget`
seconds or `max` runs (3 at least). Prints one JSON line.
    /usr/bin/python3 torch_child.py MODEL_DIR THREADS WARMUP BUDGET_S MAX"""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402


def main():
    d, threads, warmup, budget, most = sys.argv[1:6]
    torch.set_num_threads(int(threads))
    torch.set_num_interop_threads(1)
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    m = zoo.build(meta["model"])
    args = [torch.from_numpy(np.fromfile(os.path.join(d, f"{i['name']}.bin"), dtype=i["dtype"])
                             .reshape(i["shape"])) for i in meta["inputs"]]
    samples = []
    with torch.no_grad():
        for _ in range(int(warmup)):
            m(*args)
        start = time.perf_counter()
        while len(samples) < 3 or (len(samples) < int(most) and
                                   time.perf_counter() - start < float(budget)):
            t0 = time.perf_counter()
            m(*args)
            samples.append(time.perf_counter() - t0)
    samples.sort()
    n = len(samples)
    med = samples[n // 2] if n % 2 else 0.5 * (samples[n // 2 - 1] + samples[n // 2])
    print(json.dumps({"median_s": med, "min_s": samples[0], "max_s": samples[-1], "runs": n,
                      "torch_version": torch.__version__}))


if __name__ == "__main__":
    main()
