#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs, only when missing, the Debian packages one of hetgraph's targets needs:
#   scripts/install-deps.sh [run|python|test|bench] [--list]
#   run    build and run the library, its examples and tools (`make run`, `make build`)
#   python + the Python module's build (`make install`): Python's headers, pybind11, NumPy
#   test   + what the test suite needs (`make test`): GoogleTest, the ONNX backend test data,
#          python3 (the documentation's snippets), the Python module's build and tests
#          (pybind11, NumPy, pytest), clang for the fuzz targets and the lint
#   bench  + what the benchmark charts need (`make bench`): matplotlib. The peer harnesses
#          (bench/models, bench/cnn: PyTorch, ONNX Runtime) install their own on top of this.
# Each group includes the ones above it (test includes python). --list prints the group's packages and installs nothing.
# It says what it will install before it does; idempotent and quiet when everything is present;
# one `apt-get update` at most.
set -euo pipefail

group=run
list=0
for a in "$@"; do
  case "$a" in
    run | python | test | bench) group=$a ;;
    --bench) group=bench ;;   # the flag of earlier versions
    --list) list=1 ;;
    -h | --help) sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown argument '$a' (run, python, test, bench, --list)" >&2; exit 2 ;;
  esac
done

run_packages=(
  g++ cmake make pkg-config
  libdnnl-dev            # oneDNN 2.6: matmul, conv, pooling, eltwise
  libhwloc-dev           # topology and thread pinning
  libpapi-dev            # PAPI real-time clock and counters
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo   # OpenCL loader, headers, CPU device
  libclblast-dev         # OpenCL GEMM
  zlib1g-dev             # gzip'd IDX files, checkpoint checksums (CRC-32)
  libonnx-dev libprotobuf-dev   # ONNX import/export: ONNX 1.12's protobuf classes, checker
  libopenmpi-dev openmpi-bin   # MPI for data-parallel training (libhetgraph_mpi, mpirun)
  dataset-fashion-mnist  # the default MNIST-format data set
)
python_packages=(
  python3 python3-dev pybind11-dev python3-numpy   # the Python module (python/)
)
test_packages=(
  libgtest-dev           # GoogleTest
  libonnx-testdata       # the ONNX backend test suite (conformance test)
  python3-pytest         # the Python module's tests; python3 runs the documentation's snippets
  python3-pip python3-venv python3-setuptools python3-wheel   # `pip install .` (its test)
  mawk                   # awk: tests/bench_replay_calibrated.cmake compares floats with it
  clang-14 libclang-rt-14-dev libomp-14-dev   # fuzz targets (libFuzzer), fuzz/
  clang-tidy-14 clang-format-14   # make lint (scripts/lint.sh)
)
# Plotting pulls in NumPy, Pillow and fonts (a third of a fresh machine's install time): only
# for the charts.
bench_packages=(python3-matplotlib)

packages=("${run_packages[@]}")
if [ "$group" != run ]; then packages+=("${python_packages[@]}"); fi
if [ "$group" = test ] || [ "$group" = bench ]; then packages+=("${test_packages[@]}"); fi
if [ "$group" = bench ]; then packages+=("${bench_packages[@]}"); fi

if [ $list -eq 1 ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps ($group): installing ${#missing[@]} Debian packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
  echo "install-deps: through sudo (apt-get update, apt-get install)" >&2
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps ($group): done" >&2
