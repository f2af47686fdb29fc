#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A GPT-2-style decoder for token-by-token generation (issue 49), exported from torch.nn with
# random weights: 6 pre-LayerNorm blocks, d 512, 8 heads, tanh GELU, tied output projection,
# vocabulary 8000. One ONNX model runs one token: inputs `ids` [1, 1] and `position` [1]
# (int64) and the key/value cache `past_k{i}`, `past_v{i}` [1, 8, CAPACITY, 64] per layer;
# outputs `logits` [1, 1, 8000] and the cache with this token's keys and values written at
# `position`, `present_k{i}`, `present_v{i}`. The cache has a fixed capacity (prompt + new
# tokens) and the attention masks the positions after `position`: every token runs the same
# shapes, so a runtime compiles the model once and feeds each present back as the next past
# (hetgraph: ImportOptions::state, which keeps it where the platform runs).
#
# It writes DIR/model.onnx and DIR/meta.json: the shapes, the prompt and PyTorch's greedy
# continuation of it (the tokens a runtime must give), and the time PyTorch took. Before
# that it checks the cached model against a plain causal forward pass of the whole sequence.
#   /usr/bin/python3 bench/generation/export_gpt2.py DIR [--new-tokens 128] [--prompt 8]
#       (Debian's python3-torch)
import argparse
import json
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D, HEADS, LAYERS = 8000, 512, 8, 6


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.f1, self.f2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def heads(self, t):  # [B, T, D] -> [B, heads, T, D / heads]
        return t.view(t.shape[0], t.shape[1], HEADS, D // HEADS).transpose(1, 2)

    def mlp(self, x):
        return x + self.f2(gelu_tanh(self.f1(self.ln2(x))))

    def attend(self, x, q, k, v, mask):
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // HEADS) + mask, dim=-1) @ v
        return x + self.proj(a.transpose(1, 2).reshape(x.shape))

    def step(self, x, write, mask, past_k, past_v):
        q, k, v = (self.heads(t) for t in self.qkv(self.ln1(x)).split(D, dim=-1))
        k = torch.where(write, k, past_k)  # this token's keys and values at its position
        v = torch.where(write, v, past_v)
        return self.mlp(self.attend(x, q, k, v, mask)), k, v

    def full(self, x, mask):
        q, k, v = (self.heads(t) for t in self.qkv(self.ln1(x)).split(D, dim=-1))
        return self.mlp(self.attend(x, q, k, v, mask))


class Decoder(nn.Module):
    def __init__(self, capacity):
        super().__init__()
        self.capacity = capacity
        self.tok, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(capacity, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)

    def forward(self, ids, position, *cache):
        x = self.tok(ids) + self.pos(position).unsqueeze(0)  # [1, 1, D]
        slots = torch.arange(self.capacity)
        write = (slots == position).view(1, 1, self.capacity, 1)
        # -1e4 after the position (float32: a Python float in torch.where exports as double)
        mask = ((slots > position).float() * -1e4).view(1, 1, 1, self.capacity)
        presents = []
        for i, b in enumerate(self.blocks):
            x, k, v = b.step(x, write, mask, cache[2 * i], cache[2 * i + 1])
            presents += [k, v]
        return (F.linear(self.ln(x), self.tok.weight), *presents)

    def full(self, ids):  # the whole sequence at once, causally: the check of the cached path
        n = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(n)).unsqueeze(0)
        mask = torch.triu(torch.full((n, n), -1e4), diagonal=1).view(1, 1, n, n)
        for b in self.blocks:
            x = b.full(x, mask)
        return F.linear(self.ln(x), self.tok.weight)


def empty_cache(capacity):
    return [torch.zeros(1, HEADS, capacity, D // HEADS) for _ in range(2 * LAYERS)]


def greedy(model, prompt, new_tokens):
    cache, out, logits = empty_cache(model.capacity), [], None
    for t, token in enumerate(prompt + [None] * new_tokens):
        if token is None:  # generating: the argmax of the last logits
            token = int(logits[0, -1].argmax())
            out.append(token)
            if len(out) == new_tokens:
                break
        logits, *cache = model(torch.tensor([[token]]), torch.tensor([t]), *cache)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--prompt", type=int, default=8, help="prompt length (random tokens)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    capacity = a.prompt + a.new_tokens
    model = Decoder(capacity).eval()
    with torch.no_grad():
        for m in model.modules():  # GPT-2's initialisation: N(0, 0.02), embeddings included
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.normal_(0, 0.02)
                if getattr(m, "bias", None) is not None:
                    m.bias.normal_(0, 0.02)
        prompt = torch.randint(0, VOCAB, (a.prompt,)).tolist()
        start = time.perf_counter()
        generated = greedy(model, prompt, a.new_tokens)
        torch_s = time.perf_counter() - start
        # The cached, fixed-capacity path against the whole sequence at once.
        seq = torch.tensor([prompt + generated[:-1]])
        full = model.full(seq)[0]
        cache, steps = empty_cache(capacity), []
        for t, token in enumerate(seq[0].tolist()):
            logits, *cache = model(torch.tensor([[token]]), torch.tensor([t]), *cache)
            steps.append(logits[0, 0])
        diff = float((torch.stack(steps) - full).abs().max())
        assert diff < 1e-4, f"cached path differs from the full forward pass by {diff}"
        assert full.argmax(-1)[a.prompt - 1:].tolist() == generated

        os.makedirs(a.folder, exist_ok=True)
        names = [f"past_{kv}{i}" for i in range(LAYERS) for kv in "kv"]
        outputs = [f"present_{kv}{i}" for i in range(LAYERS) for kv in "kv"]
        torch.onnx.export(model, (torch.tensor([[prompt[0]]]), torch.tensor([0]),
                                  *empty_cache(capacity)),
                          os.path.join(a.folder, "model.onnx"),
                          input_names=["ids", "position"] + names,
                          output_names=["logits"] + outputs, opset_version=14,
                          do_constant_folding=True)
    meta = {"model": "gpt2-static-cache", "layers": LAYERS, "d": D, "heads": HEADS,
            "vocab": VOCAB, "capacity": capacity, "prompt": prompt,
            "new_tokens": a.new_tokens, "generated": generated,
            "state": {n: o for n, o in zip(names, outputs)},
            "cache_shape": [1, HEADS, capacity, D // HEADS],
            "torch": torch.__version__, "torch_generate_s": torch_s,
            "torch_threads": torch.get_num_threads(), "check_max_abs_diff": diff}
    with open(os.path.join(a.folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(json.dumps({k: meta[k] for k in ("capacity", "new_tokens", "torch_generate_s",
                                           "check_max_abs_diff")}))


if __name__ == "__main__":
    main()
