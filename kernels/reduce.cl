// Reductions (sum, mean, max over any set of axes, and sum_to for gradients of broadcasts),
// and the broadcast-back kernels of their gradients.
//
// A reduction sees its input through two collapsed 4-d index spaces: kept dims (kd, strides
// ks), whose linear index is the output element, and reduced dims (rd, strides rs), whose
// linear index r runs over the values combined into it. Leading unused dims are 1.
//   reduce_cols_*: one work-item per output element (and part); adjacent work-items read
//                  adjacent addresses when the innermost input dim is kept (coalesced).
//   reduce_rows_*: one work-group per output element (and part) when the innermost dim is
//                  reduced: work-items stride along it together (coalesced), then a tree in
//                  local memory.
//   reduce_parts_*: combines the per-part results when the reduced range was split to give
//                  the device enough parallel work.
// Every decomposition depends only on the shapes and the device's work-group limit, never on
// timing, and the combination order is fixed: results are bitwise reproducible.
#pragma OPENCL FP_CONTRACT OFF

#define MAX_WG 256  // the host never launches reduce_rows_* with more work-items

inline int offset4(int i, const int4 d, const int4 s) {
  const int i3 = i % d.w;
  i /= d.w;
  const int i2 = i % d.z;
  i /= d.z;
  const int i1 = i % d.y;
  const int i0 = i / d.y;
  return i0 * s.x + i1 * s.y + i2 * s.z + i3 * s.w;
}

#define SUM_OP(a, b) ((a) + (b))
#define MAX_OP(a, b) fmax((a), (b))

#define REDUCE(NAME, IDENT, OP)                                                                 \
  kernel void reduce_cols_##NAME(global const float* x, global float* out, const int n_out,     \
                                 const int4 kd, const int4 ks, const int4 rd, const int4 rs,    \
                                 const int R, const int chunk, const float scale) {             \
    const int o = get_global_id(0);                                                             \
    if (o >= n_out) return;                                                                     \
    const int p = get_global_id(1);                                                             \
    const int base = offset4(o, kd, ks);                                                        \
    const int r0 = p * chunk, r1 = min(R, r0 + chunk);                                          \
    float acc = IDENT;                                                                          \
    if (rd.x == 1 && rd.y == 1 && rd.z == 1) {                                                  \
      for (int r = r0; r < r1; ++r) acc = OP(acc, x[base + r * rs.w]);                          \
    } else {                                                                                    \
      for (int r = r0; r < r1; ++r) acc = OP(acc, x[base + offset4(r, rd, rs)]);                \
    }                                                                                           \
    out[p * n_out + o] = acc * scale;                                                           \
  }                                                                                             \
  kernel void reduce_rows_##NAME(global const float* x, global float* out, const int n_out,     \
                                 const int4 kd, const int4 ks, const int4 rd, const int4 rs,    \
                                 const int R, const int chunk, const float scale) {             \
    local float tmp[MAX_WG];                                                                    \
    const int o = get_group_id(0), p = get_group_id(1);                                         \
    const int l = get_local_id(0), L = get_local_size(0);                                       \
    const int base = offset4(o, kd, ks);                                                        \
    const int r0 = p * chunk, r1 = min(R, r0 + chunk);                                          \
    float acc = IDENT;                                                                          \
    if (rd.x == 1 && rd.y == 1 && rd.z == 1) {                                                  \
      for (int r = r0 + l; r < r1; r += L) acc = OP(acc, x[base + r * rs.w]);                   \
    } else {                                                                                    \
      for (int r = r0 + l; r < r1; r += L) acc = OP(acc, x[base + offset4(r, rd, rs)]);         \
    }                                                                                           \
    tmp[l] = acc;                                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    for (int s = L >> 1; s > 0; s >>= 1) {                                                      \
      if (l < s) tmp[l] = OP(tmp[l], tmp[l + s]);                                               \
      barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    }                                                                                           \
    if (l == 0) out[p * n_out + o] = tmp[0] * scale;                                            \
  }                                                                                             \
  kernel void reduce_parts_##NAME(global const float* part, global float* out, const int n_out, \
                                  const int parts, const float scale) {                         \
    const int o = get_global_id(0);                                                             \
    if (o >= n_out) return;                                                                     \
    float acc = IDENT;                                                                          \
    for (int p = 0; p < parts; ++p) acc = OP(acc, part[p * n_out + o]);                         \
    out[o] = acc * scale;                                                                       \
  }

REDUCE(sum, 0.0f, SUM_OP)
REDUCE(max, -INFINITY, MAX_OP)

// reduce_max_grad(g, x, y) over an [outer, n, inner] view: g goes to the first position of
// the maximum along the axis, zeros elsewhere. One work-item per line.
kernel void reduce_max_grad(global const float* g, global const float* x, global const float* y,
                            global float* out, const int lines, const int n, const int inner) {
  const int l = get_global_id(0);
  if (l >= lines) return;
  const int o = l / inner, k = l % inner;
  const float m = y[l], gv = g[l];
  const int base = o * n * inner + k;
  bool found = false;
  for (int j = 0; j < n; ++j) {
    const bool hit = !found && x[base + j * inner] == m;
    out[base + j * inner] = hit ? gv : 0.0f;
    found = found || hit;
  }
}

// expand(g, like): out[o, j, k] = g[o, k] * s (s = 1/n for the gradient of a mean).
kernel void expand_f32(global const float* g, global float* out, const int total, const int n,
                       const int inner, const float s) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int k = i % inner, o = i / (n * inner);
  out[i] = g[o * inner + k] * s;
}
