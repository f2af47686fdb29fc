#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs, only when missing, every Debian package hetgraph builds, tests or runs with;
# with --bench also what the benchmark charts need (matplotlib: `make bench`, bench/*.py).
# Idempotent and quiet when everything is present; one `apt-get update` at most.
set -euo pipefail

packages=(
  g++ cmake make pkg-config
  libdnnl-dev            # oneDNN 2.6: matmul, conv, pooling, eltwise
  libhwloc-dev           # topology and thread pinning
  libpapi-dev            # PAPI real-time clock and counters
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo   # OpenCL loader, headers, CPU device
  libclblast-dev         # OpenCL GEMM
  libgtest-dev           # GoogleTest
  zlib1g-dev             # gzip'd IDX files, checkpoint checksums (CRC-32)
  libonnx-dev libprotobuf-dev   # ONNX import/export: ONNX 1.12's protobuf classes, checker
  libonnx-testdata       # the ONNX backend test suite (conformance test)
  libopenmpi-dev openmpi-bin   # MPI for data-parallel training (libhetgraph_mpi, mpirun tests)
  dataset-fashion-mnist  # the default MNIST-format data set
  python3                # scripts/mnist_reference.py and the bench/ harnesses
  mawk                   # awk: tests/bench_replay_calibrated.cmake compares floats with it
  clang-14 libclang-rt-14-dev libomp-14-dev   # fuzz targets (libFuzzer), fuzz/
  clang-tidy-14 clang-format-14   # make lint (scripts/lint.sh)
)

# Plotting pulls in NumPy, Pillow and fonts (a third of a fresh machine's install time): only
# for the charts.
[ "${1:-}" = --bench ] && packages+=(python3-matplotlib)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
