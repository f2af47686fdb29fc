# SPDX-License-Identifier: Apache-2.0
# Thin wrapper over CMake. Every target installs what is missing, configures and builds first.
#   make run    MNIST softmax training (10 epochs, CPU) on the default data set
#   make test   the whole test suite: Release build, then AddressSanitizer+UBSan, then the
#               engine tests under ThreadSanitizer
#   make bench  the benchmark suite, JSON lines into bench/results/
#   make install  the library, headers, hetgraph-run and the Python module into PREFIX
#               (default /usr/local: Debian's python3 then imports hetgraph from anywhere)
#   make lint   clang-format on the changed lines, clang-tidy (.clang-tidy) on the changed
#               sources, against LINT_BASE (default: the commit before HEAD); `make test` runs it
#   make fuzz   every fuzz target for FUZZ_SECONDS each (default 600); `make test` runs each
#               for 15 s (fuzz/CMakeLists.txt says how to add one)
#   make soak   SOAK_RUNS random-DAG runs (default 100000) across the CPU engines, each
#               compared bitwise with the sequential engine; not part of `make test`
#   make soak-concurrent  the same from SOAK_WORKERS processes (3) of SOAK_THREADS threads (2)
#               at once, SOAK_CONCURRENT_RUNS runs (300000), while they save and load checkpoints
#               and each is killed inside a save ~SOAK_KILL_SECONDS (5) after it starts: runs,
#               mismatches, crashes, hangs, lost checkpoints
#   make soak-ranks  SOAK_RANK_ROUNDS (50) rounds of data-parallel training under mpirun -np 2-4
#               with one rank killed or stopped at a random step: hangs, crashes, rounds where
#               no error names the rank, time from the fault to the error
.PHONY: deps configure build run install lint test test-release build-asan test-asan build-tsan test-tsan test-fuzz \
        fuzz fuzz-build \
        soak soak-concurrent soak-ranks bench clean

FUZZ_SECONDS ?= 600
SOAK_RUNS ?= 100000
SOAK_CONCURRENT_RUNS ?= 300000
SOAK_WORKERS ?= 3
SOAK_THREADS ?= 2
SOAK_KILL_SECONDS ?= 5
SOAK_RANK_ROUNDS ?= 50

# What install-deps.sh installs: the run group for building and running; targets that test or
# benchmark ask for their group, which their prerequisites inherit (one install per make).
DEPS_GROUP = run
test lint test-release build-asan test-asan build-tsan test-tsan test-fuzz fuzz fuzz-build \
  soak soak-concurrent soak-ranks: DEPS_GROUP = test
bench: DEPS_GROUP = bench
install: DEPS_GROUP = python
PREFIX ?= /usr/local

deps:
	@scripts/install-deps.sh $(DEPS_GROUP)

configure: deps
	@cmake --preset release >/dev/null

build: configure
	@cmake --build --preset release

# Only what the example needs (the library and mnist_softmax): about half the whole build.
run: configure
	@cmake --build --preset release --target mnist_softmax
	./build/examples/mnist_softmax

install: build
	cmake --install build --prefix $(PREFIX)

test-release: build
	ctest --preset release

# It links the Release tree's test objects (cmake/ReuseObjects.cmake): that tree is built first.
build-asan: build
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan

test-asan: build-asan
	ctest --preset asan

# ThreadSanitizer: the library and the engine, tuning and input-pipeline tests only (what is threaded;
# the engine's stress test runs as shards, test_engine_stress_N).
TSAN_TESTS = test_engine test_tuning test_pipeline
space := $(subst x, ,x)

build-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan --target $(TSAN_TESTS)

test-tsan: build-tsan
	ctest --preset tsan -R "^($(subst $(space),|,$(TSAN_TESTS)))(_stress_[0-9]+)?$$"

# libFuzzer targets (clang, ASan+UBSan) in a project of their own: only the parsers' sources.
fuzz-build: deps
	@cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build-fuzz -j 2

test-fuzz: fuzz-build
	ctest --test-dir build-fuzz -j 2 --output-on-failure

fuzz: fuzz-build
	HETGRAPH_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --test-dir build-fuzz -j 2 --output-on-failure \
	  --timeout $$(( $(FUZZ_SECONDS) + 300 ))

# Only needs the compilation database, which configuring writes; seconds, so it runs first.
lint: configure
	@scripts/lint.sh $(LINT_BASE)

test: lint test-release test-asan test-tsan test-fuzz

soak: build
	@cmake --build --preset release --target hetgraph-soak
	./build/tests/hetgraph-soak --runs $(SOAK_RUNS)

soak-concurrent: build
	@cmake --build --preset release --target hetgraph-soak
	./build/tests/hetgraph-soak --runs $(SOAK_CONCURRENT_RUNS) --workers $(SOAK_WORKERS) \
	  --threads-per-worker $(SOAK_THREADS) --checkpoints --kill-seconds $(SOAK_KILL_SECONDS)

soak-ranks: build
	@cmake --build --preset release --target hetgraph-soak
	./build/tests/hetgraph-soak --rank-rounds $(SOAK_RANK_ROUNDS)

bench: build
	scripts/run-bench.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz
