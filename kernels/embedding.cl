// SPDX-License-Identifier: Apache-2.0
// Embedding lookup (gather rows of a table by int32 indices) and its gradient, a scatter-add of
// the incoming rows into a zero table. The scatter-add needs no atomics (see embedding_grad):
// each row's sum has the CPU's order, for any grid. An index outside the table is never read
// or written through: it is recorded (the lowest position) in the run's status slot, which
// the host turns into a FeedError, and the lookup's output row is zeros.

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

// embedding_concat: one lookup piece of the concat, its rows gathered into the band
// [offset, offset + dim) of the output's rows of `width`. A bad index: as embedding_fwd.
kernel void embedding_band(global const float* table, global const int* ids, global float* out,
                           const int count, const int rows, const int dim, const int width,
                           const int offset, global int* err, const int slot) {
  FOR_EACH(e, count * dim) {
    const int i = (int)e / dim, d = (int)e % dim;
    const int r = ids[i];
    float v = 0.0f;
    if (r < 0 || r >= rows) {
      if (d == 0) atomic_min(err + slot, i);
    } else {
      v = table[r * dim + d];
    }
    out[i * width + offset + d] = v;
  }
}

// embedding_concat: one value piece [count, dim] copied into its band of the output.
kernel void value_band(global const float* x, global float* out, const int count, const int dim,
                       const int width, const int offset) {
  FOR_EACH(e, count * dim) {
    const int i = (int)e / dim, d = (int)e % dim;
    out[i * width + offset + d] = x[e];
  }
}

// out[r, :] += sum over the lookups i with ids[i] == r, in order, of g[i, :], into a table the
// host zeroed first. The first lookup of each row owns the row: it adds every later lookup of
// the same row in order, so no two work-items write one row and the order is the CPU's.
kernel void embedding_grad(global const float* g, global const int* ids, global float* out,
                           const int count, const int rows, const int dim, global int* err,
                           const int slot) {
  FOR_EACH(i, count) {
    const int r = ids[i];
    if (r < 0 || r >= rows) {
      atomic_min(err + slot, (int)i);
      continue;
    }
    if (!owns_row(ids, (int)i)) continue;
    global float* o = out + r * dim;
    for (int j = (int)i; j < count; ++j) {
      if (ids[j] != r) continue;
      global const float* gj = g + j * dim;
      for (int d = 0; d < dim; ++d) o[d] += gj[d];
    }
  }
}

// embedding_update (fuse_sparse_update, plain SGD): out[r, :] = v[r, :] + beta * (the sum over
// the lookups i with ids[i] == r, in order from zero, of g[i, :]) for every looked-up row r;
// the other rows are v's (out is v's buffer, or a copy of it made first). The first lookup of
// a row owns it, as in embedding_grad: the dense step's expressions and order, so its bits.
// Each work-item scans the lookups before it (quadratic in the lookups per step, which are a
// batch's worth, not the table's rows). Lookup j's gradient row starts at g[j * gs + goff] (gs =
// dim, goff = 0, or a band of the concat gradient: GradientBand).
kernel void embedding_update(global const float* v, global const float* g, global const int* ids,
                             global float* out, const int count, const int rows, const int dim,
                             const int gs, const int goff, const float beta, global int* err,
                             const int slot) {
  FOR_EACH(e, count * dim) {
    const int i = (int)e / dim, d = (int)e % dim;
    const int r = ids[i];
    if (r < 0 || r >= rows) {
      if (d == 0) atomic_min(err + slot, i);
      continue;
    }
    if (!owns_row(ids, i)) continue;
    const float sum = row_grad_sum(g, ids, i, count, gs, goff, d);
    out[r * dim + d] = v[r * dim + d] + beta * sum;
  }
}

// check_indices: records the lowest position of an index outside [0, rows) in the status slot
// (commit_writes checks computed indices this way before any variable is written).
kernel void check_indices(global const int* ids, global float* out, const int count,
                          const int rows, global int* err, const int slot) {
  FOR_EACH(i, count) {
    const int r = ids[i];
    if (r < 0 || r >= rows) atomic_min(err + slot, (int)i);
  }
  if (get_global_id(0) == 0) out[0] = 0.0f;
}

// ---- gather (ONNX Gather): x as [outer, n, inner], `count` indices in [-n, n) ----------------
// An index outside is recorded (the lowest position) in the run's status slot, never read
// through; its output elements are zeros.

// out[o, k, i] = x[o, wrap(ids[k]), i], as 32-bit words (float or int32 data)
kernel void gather_fwd(global const uint* x, global const int* ids, global uint* out,
                       const int total, const int count, const int n, const int inner,
                       global int* err, const int slot) {
  FOR_EACH(e, total) {
    const int i = (int)e % inner, r = (int)e / inner;
    const int k = r % count, o = r / count;
    const int j = ids[k];
    if (j < -n || j >= n) {
      atomic_min(err + slot, k);
      out[e] = 0;
    } else {
      out[e] = x[(o * n + (j < 0 ? j + n : j)) * inner + i];
    }
  }
}

// dx[o, wrap(ids[k]), i] += g[o, k, i] into a zero dx: the first lookup of each row owns it and
// adds every later lookup of the same row in order (the CPU's order, no atomics).
kernel void gather_grad(global const float* g, global const int* ids, global float* out,
                        const int total, const int count, const int n, const int inner,
                        global int* err, const int slot) {
  FOR_EACH(e, total) {  // total = outer * count * inner
    const int i = (int)e % inner, r = (int)e / inner;
    const int k = r % count, o = r / count;
    const int j = ids[k];
    if (j < -n || j >= n) {
      atomic_min(err + slot, k);
      continue;
    }
    const int row = j < 0 ? j + n : j;
    bool first = true;
    for (int q = 0; q < k && first; ++q) first = (ids[q] < 0 ? ids[q] + n : ids[q]) != row;
    if (!first) continue;
    float s = 0.0f;
    for (int q = k; q < count; ++q) {
      if ((ids[q] < 0 ? ids[q] + n : ids[q]) == row) s += g[(o * count + q) * inner + i];
    }
    out[(o * n + row) * inner + i] = s;
  }
}

// ---- gather_elements / scatter_elements: the data (dims xd) and the indices (dims id) right-
// aligned into 8 dims, one index per element, in [-n, n) for the data's size n along `axis`.
// Each work-item computes one element from the indices of its line in index order (the CPU's
// order, no atomics); an index outside is recorded (the lowest position) in the run's status
// slot and never read through.

// Component a of v.
inline int dim8(const int8 v, int a) {
  const int d[8] = DIMS8(v);
  return d[a];
}

// The data offset that index position p reaches with index j (in range).
inline int elements_offset(int p, int j, int8 xd8, int8 id8, int axis) {
  const int xd[8] = DIMS8(xd8), id[8] = DIMS8(id8);
  int off = 0, stride = 1;
  for (int d = 7; d >= 0; --d) {
    const int c = d == axis ? (j < 0 ? j + xd[d] : j) : p % id[d];
    p /= id[d];
    off += c * stride;
    stride *= xd[d];
  }
  return off;
}

// The line of data element e: the indices' offset of its first index (-1 when no indices
// reach e's line), its position along the axis, and the indices' stride along the axis.
inline int elements_line(int e, int8 xd8, int8 id8, int axis, int* pos, int* step) {
  const int xd[8] = DIMS8(xd8), id[8] = DIMS8(id8);
  int off = 0, stride = 1;
  bool reached = true;
  for (int d = 7; d >= 0; --d) {
    const int c = e % xd[d];
    e /= xd[d];
    if (d == axis) {
      *pos = c;
      *step = stride;
    } else {
      reached = reached && c < id[d];
      off += c * stride;
    }
    stride *= id[d];
  }
  return reached ? off : -1;
}

// out[p] = x[p with p[axis] = ids[p]], as 32-bit words (float or int32 data)
kernel void gather_elements_fwd(global const uint* x, global const int* ids, global uint* out,
                                const int count, const int8 xd, const int8 id, const int axis,
                                global int* err, const int slot) {
  const int n = dim8(xd, axis);
  FOR_EACH(p, count) {
    const int j = ids[p];
    if (j < -n || j >= n) {
      atomic_min(err + slot, (int)p);
      out[p] = 0;
    } else {
      out[p] = x[elements_offset((int)p, j, xd, id, axis)];
    }
  }
}

// dx[e] = the sum, in index order from zero, of g over the indices of e's line that reach e.
kernel void gather_elements_grad(global const float* g, global const int* ids, global float* out,
                                 const int total, const int8 xd, const int8 id, const int axis,
                                 global int* err, const int slot) {
  const int n = dim8(xd, axis);
  const int m = dim8(id, axis);
  FOR_EACH(e, total) {
    int pos = 0, step = 1;
    const int base = elements_line((int)e, xd, id, axis, &pos, &step);
    float s = 0.0f;
    for (int k = 0; base >= 0 && k < m; ++k) {
      const int q = base + k * step, j = ids[q];
      if (j < -n || j >= n) {
        atomic_min(err + slot, q);
      } else if ((j < 0 ? j + n : j) == pos) {
        s += g[q];
      }
    }
    out[e] = s;
  }
}

// out[e] = data[e] with the updates of the indices of e's line that reach e applied in index
// order: red 0 replaces (the last one wins), 1 adds, 2 multiplies. out may be data's buffer.
#define SCATTER_ELEMENTS(NAME, T)                                                               \
  kernel void NAME(global const T* data, global const int* ids, global const T* upd,            \
                   global T* out, const int total, const int8 xd, const int8 id, const int axis, \
                   const int red, global int* err, const int slot) {                            \
    const int n = dim8(xd, axis);                                                               \
    const int m = dim8(id, axis);                                                               \
    FOR_EACH(e, total) {                                                                        \
      int pos = 0, step = 1;                                                                    \
      const int base = elements_line((int)e, xd, id, axis, &pos, &step);                        \
      T v = data[e];                                                                            \
      for (int k = 0; base >= 0 && k < m; ++k) {                                                \
        const int q = base + k * step, j = ids[q];                                              \
        if (j < -n || j >= n) {                                                                 \
          atomic_min(err + slot, q);                                                            \
        } else if ((j < 0 ? j + n : j) == pos) {                                                \
          v = red == 0 ? upd[q] : red == 1 ? v + upd[q] : v * upd[q];                           \
        }                                                                                       \
      }                                                                                         \
      out[e] = v;                                                                               \
    }                                                                                           \
  }
SCATTER_ELEMENTS(scatter_elements_f32, float)
SCATTER_ELEMENTS(scatter_elements_i32, uint)  // int32 add and mul wrap around
