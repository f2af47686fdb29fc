# SPDX-License-Identifier: Apache-2.0
# Sourced: K CPU-bound background processes for a measurement under load (shell busy loops,
# each bounded by `timeout`, so an interrupted run leaves none behind for long).
#   start_busy K [SECONDS]   (default 1200 s each)     stop_busy
busy=()
start_busy() {
  for _ in $(seq 1 "$1"); do
    timeout "${2:-1200}" sh -c 'while :; do :; done' &
    busy+=($!)
  done
}
stop_busy() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${busy[@]}"; do wait "$p" 2>/dev/null || true; done
  busy=()
}
