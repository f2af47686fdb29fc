// The object that carries the test files' precompiled header (tests/CMakeLists.txt).
