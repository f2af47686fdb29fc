// SPDX-License-Identifier: Apache-2.0
// The object that carries the test files' precompiled header (tests/CMakeLists.txt).
