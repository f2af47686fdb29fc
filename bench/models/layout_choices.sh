#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Usage: bench/models/layout_choices.sh > RESULTS.jsonl (after run.sh exported the models). One
# line per model whose compile ran the layout search: what it chose and what each layout took.
cd "$(dirname "$0")/../.."
export XDG_CACHE_HOME=$(mktemp -d /tmp/xdg-choice.XXXX)
for d in build/bench-models/*/; do m=$(basename $d)
  in=$(/usr/bin/python3 -c "import json;print(' '.join('--input %s=$d%s.pb'%(i['name'],i['name']) for i in json.load(open('$d/meta.json'))['inputs']))")
  build/tools/hetgraph-run $d/model.onnx $in --repeat 3 --json 2>/dev/null | /usr/bin/python3 -c "
import json,sys
d=json.loads(sys.stdin.read())
if d.get('layout_seconds') or d.get('conv_layout','nchw')!='nchw':
  print(json.dumps({'kind':'layout-choice','commit':'$(git rev-parse --short HEAD)','machine':'AMD EPYC (Zen 4), AVX-512, 2 cores','model':'$m','conv_layout':d['conv_layout'],'layout_seconds':d['layout_seconds'],'setup_s':d['setup_s']}))"
done
rm -rf $XDG_CACHE_HOME
