#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One lease of the lent 16-core GPU machine, in one command (issue 15's 16-core check, and the
# OpenCL platform on a real GPU). Unpacks .device/bundle.tar.gz (scripts/device-bundle.sh) and
# writes everything to OUT:
#   info.txt       the machine: CPU model, cores, ISA flags, GPU, OpenCL devices
#   opencl.txt     test_opencl on the GPU, then OpenCL and hetero benchmark lines (also in
#                  opencl.jsonl)
#   profiles.tar   --record-profile of each workload at team sizes 1, 2, 4, 8, 16 (the replay
#                  model's measured curves, for `--replay-profile`)
#   real.jsonl     real runs at 16 cores: sequential, critical-path on every E x 16/E, the
#                  guideline's pick, shared-queue 16x1, auto; tagged "round" and "config"
#   log.txt        stderr of everything
# Work stops starting new steps at DEADLINE seconds (default 420) so the call ends inside its
# limit (a step started before it ends within 90 s); steps run in order of importance, and
# every file is complete after each step.
#   OUT=/tmp/o DEADLINE=420 [GPU=0] scripts/device-run.sh [WORKLOAD...]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?OUT must name the output folder}
deadline=${DEADLINE:-420}
start=$(date +%s)
left() { echo $((deadline - ($(date +%s) - start))); }
d=/tmp/hetgraph-device
rm -rf "$d" && mkdir -p "$d" && tar -C "$d" -xzf .device/bundle.tar.gz
export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bench=$d/bin/hetgraph-bench
log=$out/log.txt
exec 2>>"$log"

{
  date -u
  uname -a
  nproc
  lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA|L[123]'
  grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_tile' /proc/cpuinfo | sort | uniq -c
  free -g
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null
} >"$out/info.txt" 2>&1

# OpenCL through the ICD loader we carry: point it at NVIDIA's implementation when the image
# has no vendors file of its own.
icd=$(ls /etc/OpenCL/vendors/*.icd 2>/dev/null | head -1)
if [ -z "$icd" ]; then
  lib=$(find /usr/local/nvidia /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib -maxdepth 2 \
    -name 'libnvidia-opencl.so*' 2>/dev/null | head -1)
  if [ -n "$lib" ]; then
    mkdir -p "$d/icd" && echo "$lib" >"$d/icd/nvidia.icd"
    export OCL_ICD_VENDORS=$d/icd
  fi
fi
echo "opencl icd: ${icd:-${OCL_ICD_VENDORS:-none}} ${lib:-}" >>"$out/info.txt"

workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(mnist-softmax lstm-small phased-lstm-small par-matmul-1024
  wide-deep-train pathnet-medium inception-small lstm-medium par-matmul-512 pathnet-small
  wide-deep-infer-64 par-matmul-2048 threadpool-dag wide-deep-infer-1 threadpool threadpool-10k)
cores=$(nproc)

# 1. The GPU, capped at about 75 s: correctness first, then figures.
gpu_start=$(date +%s)
gpu_ok() { [ $(($(date +%s) - gpu_start)) -lt 75 ]; }
if [ "${GPU:-1}" = 1 ] && [ -n "${OCL_ICD_VENDORS:-}${icd}" ]; then
  {
    timeout 40 "$d/bin/test_opencl" --gtest_brief=1 2>&1 | tail -40
    echo "test_opencl rc=${PIPESTATUS[0]}"
  } >"$out/opencl.txt"
  for w in mnist-softmax par-matmul-1024 lstm-small; do
    for e in out-of-order in-order; do
      gpu_ok && timeout 15 "$bench" --json --workload "$w" --platform opencl --engine "$e" --repeat 5 \
        --warmup 3 >>"$out/opencl.jsonl"
    done
    gpu_ok && timeout 15 "$bench" --json --workload "$w" --engine sequential --repeat 5 --warmup 3 \
      >>"$out/opencl.jsonl"
  done
  for w in par-matmul-1024 wide-deep-train; do
    gpu_ok && timeout 15 "$bench" --json --workload "$w" --platform hetero --devices cpu,opencl \
      --placement auto --repeat 5 --warmup 3 >>"$out/opencl.jsonl"
  done
  cat "$out/opencl.jsonl" >>"$out/opencl.txt" 2>/dev/null
fi

# 2. Per workload: the profile, then every configuration once; a second round if time is left.
one() {  # round, config label, args...
  local r=$1 label=$2
  shift 2
  [ "$(left)" -gt 5 ] || return 0
  timeout 60 "$bench" --json "$@" | sed "s/^{/{\"round\":$r,\"config\":\"$label\",\"cores\":$cores,/" \
    >>"$out/real.jsonl"
}
configs() {  # round, workload
  local r=$1 w=$2 n=(--repeat 5 --warmup 3)
  case $w in lstm-medium | inception-small | pathnet-medium | par-matmul-2048) n=(--repeat 3 --warmup 3) ;; esac
  one "$r" sequential --workload "$w" "${n[@]}" --engine sequential
  one "$r" guideline --workload "$w" "${n[@]}" --engine critical-path
  for e in 1 2 4 8 16; do
    [ $((cores % e)) -eq 0 ] && [ "$e" -le "$cores" ] || continue
    one "$r" "${e}x$((cores / e))" --workload "$w" "${n[@]}" --engine critical-path --executors "${e}x$((cores / e))"
  done
  one "$r" "sq-${cores}x1" --workload "$w" "${n[@]}" --engine shared-queue --executors "${cores}x1"
  [ "$r" = 1 ] && one "$r" auto --workload "$w" "${n[@]}" --engine auto
}
for w in "${workloads[@]}"; do
  [ "$(left)" -gt 10 ] || { echo "deadline: stopped before $w" >&2; break; }
  [ "$(left)" -gt 60 ] && timeout 90 "$bench" --workload "$w" --record-profile "$d/$w.json" &&
    tar -C "$d" -rf "$out/profiles.tar" "$w.json"
  configs 1 "$w"
  echo "$w done at $(($(date +%s) - start)) s" >&2
done
for w in "${workloads[@]}"; do
  [ "$(left)" -gt 30 ] || break
  configs 2 "$w"
  echo "$w round 2 done at $(($(date +%s) - start)) s" >&2
done
echo "finished at $(($(date +%s) - start)) s" >&2
tail -5 "$log"
