# Thin wrapper over CMake. Every target installs what is missing, configures and builds first.
#   make run    MNIST softmax training (10 epochs, CPU) on the default data set
#   make test   the whole test suite: Release build, then AddressSanitizer+UBSan, then the
#               engine tests under ThreadSanitizer
#   make bench  the benchmark suite, JSON lines into bench/results/
.PHONY: deps configure build run test test-release test-asan test-tsan bench clean

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake --preset release >/dev/null

build: configure
	@cmake --build --preset release

run: build
	./build/examples/mnist_softmax

test-release: build
	ctest --preset release

test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan
	ctest --preset asan

# ThreadSanitizer: the library and the engine tests only (the engines are what is threaded).
test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan --target test_engine
	ctest --preset tsan -R test_engine

test: test-release test-asan test-tsan

bench: build
	scripts/run-bench.sh

clean:
	rm -rf build build-asan build-tsan
