#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One PyTorch timing run in its own process (eager, no_grad, eval): the model from the state
dict export_models.py wrote, the same input, `threads` intra-op threads.
    /usr/bin/python3 torch_child.py DIR MODEL BATCH THREADS REPEAT WARMUP"""
import json
import os
import sys
import time

import numpy as np
import torch
import torchvision


def main():
    d, name, batch, threads, repeat, warmup = sys.argv[1:7]
    batch, threads, repeat, warmup = int(batch), int(threads), int(repeat), int(warmup)
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    if name == "googlenet":
        m = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=False)
    else:
        m = getattr(torchvision.models, name)(weights=None)
    m.load_state_dict(torch.load(os.path.join(d, f"{name}.pt")))
    m.eval()
    x = torch.from_numpy(np.fromfile(os.path.join(d, f"input-b{batch}.bin"), dtype=np.float32))
    x = x.reshape(batch, 3, 224, 224)
    samples = []
    with torch.no_grad():
        for _ in range(warmup):
            m(x)
        for _ in range(repeat):
            t0 = time.perf_counter()
            m(x)
            samples.append(time.perf_counter() - t0)
    samples.sort()
    n = len(samples)
    med = samples[n // 2] if n % 2 else 0.5 * (samples[n // 2 - 1] + samples[n // 2])
    print(json.dumps({"median_s": med, "min_s": samples[0], "max_s": samples[-1],
                      "torch_version": torch.__version__}))


if __name__ == "__main__":
    main()
