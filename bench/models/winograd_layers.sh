#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Per-layer times of hetgraph's own Winograd kernels against the direct ones: the data behind
# the code path's tile threshold (src/cpu/kernels/winograd.cpp, kMinTiles). Each model folder
# runs under hetgraph-run --profile twice per round, interleaved: with the direct kernels
# (--no-own-winograd) and with the Winograd kernels wherever they can run
# (HETGRAPH_WINOGRAD_MIN_TILES=0), both in the platform's own layout (--no-layout-search).
# One JSON line per Winograd layer (medians over the rounds) goes to OUT.
#
#   bench/models/winograd_layers.sh OUT.jsonl ROUNDS MODEL_DIR...
#   bench/models/winograd_layers.sh /tmp/w.jsonl 3 build/bench-models/{resnet18,googlenet}-b{1,8}
set -euo pipefail
out=$1 rounds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bin=${HETGRAPH_RUN:-$here/../../build/tools/hetgraph-run}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
lock=/tmp/hetgraph-build.lock  # no build or other timing beside these runs
for dir in "$@"; do
  name=$(basename "$dir")
  inputs=()
  for i in $(/usr/bin/python3 -c 'import json,sys; print(" ".join(i["name"] for i in json.load(open(sys.argv[1]))["inputs"]))' "$dir/meta.json"); do
    inputs+=(--input "$i=$dir/$i.pb")
  done
  for r in $(seq 1 "$rounds"); do
    flock "$lock" "$bin" "$dir/model.onnx" "${inputs[@]}" --repeat 20 --no-layout-search \
      --no-own-winograd --profile --json >"$scratch/$name-direct-$r.json" 2>/dev/null
    HETGRAPH_WINOGRAD_MIN_TILES=0 flock "$lock" "$bin" "$dir/model.onnx" "${inputs[@]}" \
      --repeat 20 --no-layout-search --profile --json >"$scratch/$name-winograd-$r.json" 2>/dev/null
  done
done
/usr/bin/python3 - "$scratch" "$out" "$rounds" "$(git -C "$here" rev-parse --short HEAD)" "$@" <<'EOF'
import json, os, statistics, sys
scratch, out, rounds, commit, dirs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), '')
with open(out, 'a') as f:
    for d in dirs:
        name = os.path.basename(d.rstrip('/'))
        runs = {k: [json.load(open(f'{scratch}/{name}-{k}-{r}.json')) for r in range(1, rounds + 1)]
                for k in ('direct', 'winograd')}
        def times(k):
            t = {}
            for run in runs[k]:
                for n in run['profile']['nodes']:
                    t.setdefault(n['name'], []).append(n)
            return t
        direct, wino = times('direct'), times('winograd')
        for node, ns in wino.items():
            kernel = ns[0]['kernel']
            if not kernel.startswith('winograd_') or node not in direct:
                continue
            m = 4 if kernel == 'winograd_f4x3' else 2
            n, oc, oh, ow = ns[0]['shape']
            tiles = n * ((oh + m - 1) // m) * ((ow + m - 1) // m)
            d = statistics.median(x['mean_s'] for x in direct[node]) * 1e3
            w = statistics.median(x['mean_s'] for x in ns) * 1e3
            f.write(json.dumps({'kind': 'winograd-layer', 'commit': commit, 'cpu': cpu,
                                'code_path': runs['winograd'][0].get('code_path'), 'model': name,
                                'node': node, 'kernel': kernel, 'tiles': tiles,
                                'input_shapes': ns[0]['input_shapes'], 'shape': ns[0]['shape'],
                                'direct_kernel': direct[node][0]['kernel'], 'direct_ms': d,
                                'winograd_ms': w, 'ratio': w / d, 'rounds': rounds}) + '\n')
EOF
echo "wrote $out"
