// SPDX-License-Identifier: Apache-2.0
// Prepended to every other kernel family (opencl/program_cache.cpp, kernel_source), which then
// restarts line numbering so build logs point into the family's own file.
//
// No contraction into fma: results stay as close as possible to the CPU kernels'.
#pragma OPENCL FP_CONTRACT OFF

// Launch geometry: every kernel runs on a fixed grid per device (the launch size does not
// depend on the tensor) and strides through its work. Besides suiting GPUs, this avoids a
// PoCL 3.1 bug: its cache of compiled work-group functions mixes up two variants of a kernel
// specialised for different grid sizes when both run at once (an assertion aborts). The
// counters are unsigned so that i + stride cannot overflow for n < 2^31.
#define FOR_EACH(i, n) for (uint i = get_global_id(0); i < (uint)(n); i += get_global_size(0))
#define FOR_EACH_GROUP(t, n) for (uint t = get_group_id(0); t < (uint)(n); t += get_num_groups(0))

// Index geometries of rank up to 8 (compiler/geometry.hpp): dims d and element strides s
// right-aligned into an int8, leading dims 1. DIMS8 spreads one into an array for runtime
// indexing. offset8 is the offset of flat (row-major) index i, innermost dim first; once the
// index is used up the leading dims add nothing, so a rank-2 plan pays for two dims only.
#define DIMS8(v) {v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7}
inline int offset8(int i, const int8 d, const int8 s) {
  const int dd[8] = DIMS8(d), ss[8] = DIMS8(s);
  int o = 0;
  for (int k = 7; k >= 0 && i > 0; --k) {
    o += (i % dd[k]) * ss[k];
    i /= dd[k];
  }
  return o;
}
// The same index's offsets in two and in three operands (broadcast plans).
inline int2 offset8x2(int i, const int8 d, const int8 sa, const int8 sb) {
  const int dd[8] = DIMS8(d), a[8] = DIMS8(sa), b[8] = DIMS8(sb);
  int2 o = (int2)(0, 0);
  for (int k = 7; k >= 0 && i > 0; --k) {
    const int c = i % dd[k];
    o += (int2)(c * a[k], c * b[k]);
    i /= dd[k];
  }
  return o;
}
inline int3 offset8x3(int i, const int8 d, const int8 sa, const int8 sb, const int8 sc) {
  const int dd[8] = DIMS8(d), a[8] = DIMS8(sa), b[8] = DIMS8(sb), e[8] = DIMS8(sc);
  int3 o = (int3)(0, 0, 0);
  for (int k = 7; k >= 0 && i > 0; --k) {
    const int c = i % dd[k];
    o += (int3)(c * a[k], c * b[k], c * e[k]);
    i /= dd[k];
  }
  return o;
}

// Sparse row updates (embedding.cl, optimizer.cl). Lookup i owns row ids[i] when no earlier
// lookup has it, so no two work-items write one row. The owner sums the row's gradients in
// lookup order from zero (the dense scatter-add's order, so its bits); lookup j's gradient row
// starts at g[j * gs + goff]. Quadratic in the lookups per step (a batch's worth).
inline bool owns_row(global const int* ids, const int i) {
  const int r = ids[i];
  for (int j = 0; j < i; ++j) {
    if (ids[j] == r) return false;
  }
  return true;
}
inline float row_grad_sum(global const float* g, global const int* ids, const int i,
                          const int count, const int gs, const int goff, const int d) {
  const int r = ids[i];
  float sum = 0.0f;
  for (int j = i; j < count; ++j) {
    if (ids[j] == r) sum += g[j * gs + goff + d];
  }
  return sum;
}
