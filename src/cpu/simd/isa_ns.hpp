// SPDX-License-Identifier: Apache-2.0
// The namespace of one code path. A source compiled once per x86-64 level (CMakeLists.txt:
// HETGRAPH_ISA = 2, 3 or 4 with -march=x86-64-v2, -v3 or -v4; 0 for the one -march=native path
// of HETGRAPH_NATIVE builds) puts its code in HETGRAPH_ISA_NS, so that no two copies share a
// symbol and the linker never takes one level's function for another's.
#pragma once

#if !defined(HETGRAPH_ISA)
#error "a code path's source: CMakeLists.txt compiles it once per level with HETGRAPH_ISA set"
#elif HETGRAPH_ISA == 2
#define HETGRAPH_ISA_NS isa_v2
#elif HETGRAPH_ISA == 3
#define HETGRAPH_ISA_NS isa_v3
#elif HETGRAPH_ISA == 4
#define HETGRAPH_ISA_NS isa_v4
#else
#define HETGRAPH_ISA_NS isa_native
#endif

// hetgraph's own Winograd kernels are written for AVX2 with FMA (8 lanes); the AVX-512 path
// runs them too, with its own tile threshold (winograd.cpp).
#if defined(__AVX2__) && defined(__FMA__)
#define HETGRAPH_OWN_WINOGRAD 1
#else
#define HETGRAPH_OWN_WINOGRAD 0
#endif
