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
