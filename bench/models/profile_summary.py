#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Where hetgraph's time goes over the whole model bench: from a `run.js --profile` results file,
each op kind's share of every model's node time, averaged over the models (each model weighs the
same, however long it runs), with the models where it is largest; then each model's top nodes.

    /usr/bin/python3 bench/models/profile_summary.py RESULTS.jsonl [--top 3]
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--top", type=int, default=3, help="nodes shown per model")
    a = ap.parse_args()
    with open(a.results) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    runs = [r for r in lines if r.get("kind") == "model-run" and r.get("profile")]
    for serving in (False, True):
        group = [r for r in runs if (r["batch"] != 1) == serving]
        if not group:
            continue
        share = collections.defaultdict(float)
        where = collections.defaultdict(list)
        for r in group:
            for o in r["profile"]["ops"]:
                share[o["op"]] += o["share"] / len(group)
                where[o["op"]].append((o["share"], f"{r['model']} b{r['batch']}"))
        print(f"{'serving batch' if serving else 'batch 1'}: {len(group)} models, op kinds by mean share")
        print(f"  {'op kind':24s} {'mean share':>10s}  largest in")
        for op, s in sorted(share.items(), key=lambda kv: -kv[1]):
            if s < 0.005:
                continue
            big = sorted(where[op], reverse=True)[:3]
            print(f"  {op:24s} {100 * s:9.1f}%  " + ", ".join(f"{m} {100 * x:.0f}%" for x, m in big))
        print()
        for r in group:
            p = r["profile"]
            print(f"  {r['model']} b{r['batch']}: {1e3 * p['node_s_per_run']:.2f} ms of node time per run")
            for n in p["top"][:a.top]:
                shapes = " ".join(str(s) for s in n["input_shapes"][:3])
                print(f"    {100 * n['share']:5.1f}%  {n['op']:18s} {n['kernel']:22s} {shapes} -> {n['shape']}")
        print()


if __name__ == "__main__":
    main()
