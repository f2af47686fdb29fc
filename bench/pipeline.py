# SPDX-License-Identifier: Apache-2.0
"""The input pipeline's overlap: step time with and without it (bench/README.md, "Input pipeline").

  python3 bench/pipeline.py [--rounds 3] [--out bench/results/DATE-issue16-pipeline.jsonl]

Interleaved: each round runs examples/mnist_softmax (10 epochs, 1200 steps of 500 images) and
examples/fashion_cnn (1 epoch, 600 steps of 100) with 1 and 2 compute threads, each with
--pipeline on (batch k + 1 converted by the loader's thread while step k runs) and off
(converted between the steps with the graph's threads), every run a fresh process under the
build lock. One JSON line per run; the table gives the median ms per step.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

LOCK = ["flock", "/tmp/hetgraph-build.lock"]


def step_ms(prog, out):
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if prog == "mnist_softmax":
        j = lines[-1]
        return 1e3 * j["train_s"] / (1200 * j["epochs"] / 10), j["test_accuracy"]
    return 1e3 * sum(l["epoch_s"] for l in lines) / (600 * len(lines)), lines[-1]["test_accuracy"]


def overlap(trace_path):
    """Per fill on the loader's lane (tid 1000): the fraction of it during a run of the graph."""
    with open(trace_path) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    spans = {}
    for n in (e for e in ev if e["tid"] != 1000):
        s, e = n["ts"], n["ts"] + n["dur"]
        a = spans.get(n["args"]["run"], (s, e))
        spans[n["args"]["run"]] = (min(a[0], s), max(a[1], e))
    fills = [e for e in ev if e["tid"] == 1000]
    frac = [sum(max(0.0, min(f["ts"] + f["dur"], e) - max(f["ts"], s)) for s, e in spans.values())
            / f["dur"] for f in fills if f["dur"] > 0]
    return {"fills": len(fills), "runs": len(spans),
            "fill_us_mean": round(statistics.mean(f["dur"] for f in fills), 2),
            "run_us_mean": round(statistics.mean(e - s for s, e in spans.values()), 2),
            "fill_fraction_under_a_run": round(statistics.mean(frac), 4),
            "fills_overlapping_a_run": sum(x > 0 for x in frac)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=time.strftime("bench/results/%Y-%m-%d-issue16-pipeline.jsonl"))
    ap.add_argument("--trace", default=time.strftime("bench/results/%Y-%m-%d-issue16-pipeline-trace.json"))
    a = ap.parse_args()
    # The overlap, shown in a trace (open it in Perfetto): 20 steps of the CNN, 1 compute thread.
    cmd = ["build/examples/fashion_cnn", "--train", "2000", "--test", "500", "--epochs", "1",
           "--threads", "1", "--pipeline", "on", "--trace", a.trace]
    subprocess.run(LOCK + cmd, check=True, capture_output=True)
    ov = {"bench": "input_pipeline_trace", "command": " ".join(cmd), **overlap(a.trace)}
    print(json.dumps(ov), file=sys.stderr)
    runs = {}
    with open(a.out, "a") as out:
        out.write(json.dumps(ov) + "\n")
        for r in range(1, a.rounds + 1):
            for prog, extra in (("mnist_softmax", []), ("fashion_cnn", ["--epochs", "1"])):
                for threads in (1, 2):
                    for pipe in ("on", "off"):
                        cmd = [f"build/examples/{prog}", "--json", "--threads", str(threads),
                               "--pipeline", pipe] + extra
                        res = subprocess.run(LOCK + cmd, capture_output=True, text=True)
                        if res.returncode != 0:
                            sys.exit(f"{' '.join(cmd)} failed:\n{res.stderr}")
                        ms, acc = step_ms(prog, res.stdout)
                        key = (prog, threads, pipe)
                        runs.setdefault(key, []).append(ms)
                        out.write(json.dumps({
                            "bench": "input_pipeline", "round": r, "example": prog,
                            "threads": threads, "pipeline": pipe, "step_ms": round(ms, 5),
                            "test_accuracy": acc, "command": " ".join(cmd),
                            "note": "2-core machine; other engineers' builds queued on the lock",
                            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
                        out.flush()
    print("| example | compute threads | ms/step, pipeline off | ms/step, pipeline on | on/off |")
    print("|---|---|---|---|---|")
    for prog in ("mnist_softmax", "fashion_cnn"):
        for threads in (1, 2):
            off = statistics.median(runs[(prog, threads, "off")])
            on = statistics.median(runs[(prog, threads, "on")])
            print(f"| {prog} | {threads} | {off:.3f} | {on:.3f} | {on / off:.2f} |")


if __name__ == "__main__":
    main()
