// Embedding lookup (gather rows of a table by int32 indices) and its gradient, a scatter-add of
// the incoming rows into a zero table. The scatter-add needs no atomics: a work-item owns a
// table row, zeroes it and scans every lookup in order, adding the ones that name its row, so
// each row's sum has the same order as on the CPU and for any grid. An index outside the
// table is never read or written through: it is recorded (the lowest position) in the run's
// status slot, which the host turns into a FeedError, and its output row is zeros.
#pragma OPENCL FP_CONTRACT OFF

// Launch geometry: a fixed grid per device, striding through the work (see elementwise.cl).
#define FOR_EACH(i, n) for (uint i = get_global_id(0); i < (uint)(n); i += get_global_size(0))

// out[i, d] = table[ids[i], d] for i < count, d < dim
kernel void embedding_fwd(global const float* table, global const int* ids, global float* out,
                          const int count, const int rows, const int dim, global int* err,
                          const int slot) {
  FOR_EACH(e, count * dim) {
    const int i = (int)e / dim, d = (int)e % dim;
    const int r = ids[i];
    if (r < 0 || r >= rows) {
      if (d == 0) atomic_min(err + slot, i);
      out[e] = 0.0f;
    } else {
      out[e] = table[r * dim + d];
    }
  }
}

// out[r, :] = sum over the lookups i with ids[i] == r, in order, of g[i, :]
kernel void embedding_grad(global const float* g, global const int* ids, global float* out,
                           const int count, const int rows, const int dim, global int* err,
                           const int slot) {
  if (get_global_id(0) == 0) {
    for (int i = 0; i < count; ++i) {
      if (ids[i] < 0 || ids[i] >= rows) {
        atomic_min(err + slot, i);
        break;
      }
    }
  }
  FOR_EACH(r, rows) {
    global float* o = out + (int)r * dim;
    for (int d = 0; d < dim; ++d) o[d] = 0.0f;
    for (int i = 0; i < count; ++i) {
      if (ids[i] != (int)r) continue;
      global const float* gi = g + i * dim;
      for (int d = 0; d < dim; ++d) o[d] += gi[d];
    }
  }
}
