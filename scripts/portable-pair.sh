#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A quick paired A/B of the portable build (build/) against the native one (build-native/, see
# scripts/portable-ab.sh): scripts/builds-ab.sh with those two builds, so per item the median
# over rounds of the portable/native ratio. An item is a hetgraph-bench workload with its engine
# (WORKLOAD@ENGINE) or cnn:MODEL for bench/cnn's exported models (hetgraph-run, REP repetitions).
#   scripts/portable-pair.sh OUT.jsonl ROUNDS ITEM...
#   e.g. scripts/portable-pair.sh /tmp/p.jsonl 5 maxpool-32x64x56x56-k3-s2-p1@sequential cnn:resnet18-b1
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 rounds=$2
shift 2
LABELS="native portable" exec scripts/builds-ab.sh build-native build "$out" "$rounds" "$@"
