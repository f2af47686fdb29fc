#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs one fuzz target for a bounded time: run.sh BINARY NAME SECONDS BUILD_DIR SEED_CORPUS
# [FLAG...]. HETGRAPH_FUZZ_SECONDS overrides SECONDS (make fuzz). New inputs go to
# BUILD_DIR/corpus/NAME (the committed seeds stay as they are), crashes to
# BUILD_DIR/artifacts/NAME-*. FLAGs (a target's own -timeout, -rss_limit_mb) come after the
# defaults, so they win.
set -euo pipefail
bin=$1 name=$2 seconds=${HETGRAPH_FUZZ_SECONDS:-$3} build=$4 seeds=$5
shift 5
mkdir -p "$build/corpus/$name" "$build/artifacts"
exec "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" "$@" "$build/corpus/$name" \
  "$seeds"
