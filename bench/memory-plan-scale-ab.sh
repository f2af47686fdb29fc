#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 18, memory planner: compile time of million-node graphs (hetgraph-scale), two builds
# interleaved round by round, each run under flock /tmp/hetgraph-build.lock.
#   bench/memory-plan-scale-ab.sh OUT.jsonl ROUNDS NAME=HETGRAPH-SCALE [NAME=...]
set -euo pipefail
out=$1 rounds=$2
shift 2
for r in $(seq 1 "$rounds"); do
  for k in random lstm; do
    for e in sequential critical-path; do
      for v in "$@"; do
        name=${v%%=*} bin=${v#*=}
        flock /tmp/hetgraph-build.lock "$bin" --kind "$k" --engine "$e" --nodes 1000000 --runs 1 |
          sed "s/}\$/,\"variant\":\"$name\",\"round\":$r}/" >> "$out"
      done
    done
  done
done
