// SPDX-License-Identifier: Apache-2.0
// Reductions (sum, mean, max over any set of axes, and sum_to for gradients of broadcasts),
// the broadcast-back kernels of their gradients, argmax / argmin and top_k.
//
// A reduction sees its input through two collapsed index spaces of up to 8 dims: kept dims
// (kd, strides ks), whose linear index is the output element, and reduced dims (rd, strides
// rs), whose linear index r runs over the values combined into it. Leading unused dims are 1.
// The range of r may be split into `parts` chunks, giving n_out * parts tasks (task t: output
// t % n_out, part t / n_out) whose results reduce_parts_* combines.
//   reduce_cols_*: a work-item per task; adjacent work-items read adjacent addresses when the
//                  innermost input dim is kept (coalesced).
//   reduce_rows_*: a work-group per task when the innermost dim is reduced: its work-items
//                  stride along it together (coalesced), then combine in a tree in local memory.
//   reduce_parts_*: combines the parts of each output in order.
// Every decomposition depends only on the shapes and the device, never on timing, and the
// combination order is fixed: results are bitwise reproducible.

#define MAX_WG 256  // the host never launches reduce_rows_* with larger work-groups

#define SUM_OP(a, b) ((a) + (b))
// NaN-propagating (fmax would drop a NaN): a reduced line holding a NaN gives NaN.
#define MAX_OP(a, b) ((b) > (a) || isnan(b) ? (b) : (a))

// clang-format off
#define REDUCE(NAME, IDENT, OP)                                                                   \
  kernel void reduce_cols_##NAME(global const float* x, global float* out, const int n_out,      \
                                 const int8 kd, const int8 ks, const int8 rd, const int8 rs,     \
                                 const int R, const int chunk, const int parts,                  \
                                 const float scale) {                                            \
    const bool single = rd.s0 * rd.s1 * rd.s2 * rd.s3 * rd.s4 * rd.s5 * rd.s6 == 1;            \
    FOR_EACH(t, n_out * parts) {                                                                 \
      const int o = (int)t % n_out, p = (int)t / n_out;                                          \
      const int base = offset8(o, kd, ks);                                                       \
      const int r0 = p * chunk, r1 = min(R, r0 + chunk);                                         \
      float acc = IDENT;                                                                         \
      if (single) {                                                                              \
        for (int r = r0; r < r1; ++r) acc = OP(acc, x[base + r * rs.s7]);                         \
      } else {                                                                                   \
        for (int r = r0; r < r1; ++r) acc = OP(acc, x[base + offset8(r, rd, rs)]);               \
      }                                                                                          \
      out[t] = acc * scale;                                                                      \
    }                                                                                            \
  }                                                                                              \
  kernel void reduce_rows_##NAME(global const float* x, global float* out, const int n_out,      \
                                 const int8 kd, const int8 ks, const int8 rd, const int8 rs,     \
                                 const int R, const int chunk, const int parts,                  \
                                 const float scale) {                                            \
    local float tmp[MAX_WG];                                                                     \
    const int l = get_local_id(0), L = get_local_size(0);                                        \
    const bool single = rd.s0 * rd.s1 * rd.s2 * rd.s3 * rd.s4 * rd.s5 * rd.s6 == 1;            \
    FOR_EACH_GROUP(t, n_out * parts) {                                                           \
      const int o = (int)t % n_out, p = (int)t / n_out;                                          \
      const int base = offset8(o, kd, ks);                                                       \
      const int r0 = p * chunk, r1 = min(R, r0 + chunk);                                         \
      float acc = IDENT;                                                                         \
      if (single) {                                                                              \
        for (int r = r0 + l; r < r1; r += L) acc = OP(acc, x[base + r * rs.s7]);                  \
      } else {                                                                                   \
        for (int r = r0 + l; r < r1; r += L) acc = OP(acc, x[base + offset8(r, rd, rs)]);        \
      }                                                                                          \
      tmp[l] = acc;                                                                              \
      barrier(CLK_LOCAL_MEM_FENCE);                                                              \
      for (int s = L >> 1; s > 0; s >>= 1) {                                                     \
        if (l < s) tmp[l] = OP(tmp[l], tmp[l + s]);                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                            \
      }                                                                                          \
      if (l == 0) out[t] = tmp[0] * scale;                                                       \
      barrier(CLK_LOCAL_MEM_FENCE); /* tmp is reused by the next task */                         \
    }                                                                                            \
  }                                                                                              \
  kernel void reduce_parts_##NAME(global const float* part, global float* out, const int n_out,  \
                                  const int parts, const float scale) {                          \
    FOR_EACH(o, n_out) {                                                                         \
      float acc = IDENT;                                                                         \
      for (int p = 0; p < parts; ++p) acc = OP(acc, part[p * n_out + (int)o]);                   \
      out[o] = acc * scale;                                                                      \
    }                                                                                            \
  }
// clang-format on

REDUCE(sum, 0.0f, SUM_OP)
REDUCE(max, -INFINITY, MAX_OP)

// reduce_max_grad(g, x, y) over an [outer, n, inner] view: g goes to the first position of
// the maximum along the axis (its first NaN if the maximum is NaN), zeros elsewhere. A
// work-item per line.
kernel void reduce_max_grad(global const float* g, global const float* x, global const float* y,
                            global float* out, const int lines, const int n, const int inner) {
  FOR_EACH(l, lines) {
    const int o = (int)l / inner, k = (int)l % inner;
    const float m = y[l], gv = g[l];
    const int base = o * n * inner + k;
    bool found = false;
    for (int j = 0; j < n; ++j) {
      const float v = x[base + j * inner];
      const bool hit = !found && (v == m || (isnan(v) && isnan(m)));
      out[base + j * inner] = hit ? gv : 0.0f;
      found = found || hit;
    }
  }
}

// reduce_prod over an [outer, n, inner] view: a work-item per line, multiplied in line order
// in float, as the CPU kernel does (the same results).
kernel void reduce_prod_f32(global const float* x, global float* out, const int lines, const int n,
                            const int inner) {
  FOR_EACH(l, lines) {
    const int base = ((int)l / inner) * n * inner + (int)l % inner;
    float acc = 1.0f;
    for (int j = 0; j < n; ++j) acc *= x[base + j * inner];
    out[l] = acc;
  }
}

// reduce_prod_grad(g, x): element j of a line gets (prefix before j * suffix after j) * g, no
// division (zeros are exact); the CPU kernel's order of operations.
kernel void reduce_prod_grad(global const float* g, global const float* x, global float* out,
                             const int lines, const int n, const int inner) {
  FOR_EACH(l, lines) {
    const int base = ((int)l / inner) * n * inner + (int)l % inner;
    float run = 1.0f;
    for (int j = 0; j < n; ++j) {
      out[base + j * inner] = run;
      run *= x[base + j * inner];
    }
    run = 1.0f;
    const float gv = g[l];
    for (int j = n - 1; j >= 0; --j) {
      const int i = base + j * inner;
      out[i] = out[i] * run * gv;
      run *= x[i];
    }
  }
}

// cumsum over an [outer, n, inner] view: a work-item per line, in line order (forward or from the
// back), as the CPU kernel; ints add as uint, wrapping around.
#define CUMSUM(NAME, T, ACC)                                                                     \
  kernel void NAME(global const T* x, global T* out, const int lines, const int n,               \
                   const int inner, const int exclusive, const int reverse) {                   \
    FOR_EACH(l, lines) {                                                                         \
      const int base = ((int)l / inner) * n * inner + (int)l % inner;                           \
      ACC run = 0;                                                                               \
      for (int s = 0; s < n; ++s) {                                                              \
        const int i = base + (reverse ? n - 1 - s : s) * inner;                                  \
        const ACC v = (ACC)x[i];                                                                 \
        if (exclusive) out[i] = (T)run;                                                          \
        run += v;                                                                                \
        if (!exclusive) out[i] = (T)run;                                                         \
      }                                                                                          \
    }                                                                                            \
  }
CUMSUM(cumsum_f32, float, float)
CUMSUM(cumsum_i32, int, uint)

// expand(g, like): out[o, j, k] = g[o, k] * s (s = 1/n for the gradient of a mean).
kernel void expand_f32(global const float* g, global float* out, const int total, const int n,
                       const int inner, const float s) {
  FOR_EACH(i, total) {
    const int k = (int)i % inner, o = (int)i / (n * inner);
    out[i] = g[o * inner + k] * s;
  }
}

// argmax / argmin over an [outer, n, inner] view: the int position along n of each line's
// extreme. NaN beats every number (PyTorch's and ONNX Runtime's rule, for both); equal values,
// and NaNs among themselves, go to the first position, or the last when `last`. That is a
// total order on (value, position), so the tree of arg_rows_* picks what a scan in order picks.
//   arg_cols_*: a work-item per line (adjacent work-items read adjacent addresses when
//               inner > 1).
//   arg_rows_*: a work-group per line of a long contiguous axis (inner == 1): its work-items
//               stride along it together, then combine in a tree in local memory.
#define IS_NAN(v) ((v) != (v))  // ints never are
#define ABOVE(a, b) ((a) > (b))
#define BELOW(a, b) ((a) < (b))
// Whether v at position j wins over b at position i.
#define ARG_WINS(CMP, v, j, b, i, last)                  \
  ((IS_NAN(v) && !IS_NAN(b)) || (!IS_NAN(b) && CMP(v, b)) || \
   (((v) == (b) || (IS_NAN(v) && IS_NAN(b))) && ((last) ? (j) > (i) : (j) < (i))))

// clang-format off
#define ARG_EXTREME(NAME, T, CMP)                                                                 \
  kernel void arg_cols_##NAME(global const T* x, global int* out, const int lines, const int n,  \
                              const int inner, const int last) {                                 \
    FOR_EACH(l, lines) {                                                                         \
      const int o = (int)l / inner, k = (int)l % inner;                                          \
      const int base = o * n * inner + k;                                                        \
      T b = x[base];                                                                             \
      int bi = 0;                                                                                \
      for (int j = 1; j < n; ++j) {                                                              \
        const T v = x[base + j * inner];                                                         \
        if (ARG_WINS(CMP, v, j, b, bi, last)) {                                                  \
          b = v;                                                                                 \
          bi = j;                                                                                \
        }                                                                                        \
      }                                                                                          \
      out[l] = bi;                                                                               \
    }                                                                                            \
  }                                                                                              \
  kernel void arg_rows_##NAME(global const T* x, global int* out, const int lines, const int n,  \
                              const int last) {                                                  \
    local T tv[MAX_WG];                                                                          \
    local int ti[MAX_WG];                                                                        \
    const int l = get_local_id(0), L = get_local_size(0);                                        \
    FOR_EACH_GROUP(t, lines) {                                                                   \
      global const T* row = x + (int)t * n;                                                      \
      T b = row[0]; /* position 0 seeds every work-item: a duplicate never wins a tie */         \
      int bi = 0;                                                                                \
      for (int r = l; r < n; r += L) {                                                           \
        const T v = row[r];                                                                      \
        if (ARG_WINS(CMP, v, r, b, bi, last)) {                                                  \
          b = v;                                                                                 \
          bi = r;                                                                                \
        }                                                                                        \
      }                                                                                          \
      tv[l] = b;                                                                                 \
      ti[l] = bi;                                                                                \
      barrier(CLK_LOCAL_MEM_FENCE);                                                              \
      for (int s = L >> 1; s > 0; s >>= 1) {                                                     \
        if (l < s) {                                                                             \
          const T v = tv[l + s], w = tv[l];                                                      \
          const int j = ti[l + s], i = ti[l];                                                    \
          if (ARG_WINS(CMP, v, j, w, i, last)) {                                                 \
            tv[l] = v;                                                                           \
            ti[l] = j;                                                                           \
          }                                                                                      \
        }                                                                                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                            \
      }                                                                                          \
      if (l == 0) out[t] = ti[0];                                                                \
      barrier(CLK_LOCAL_MEM_FENCE); /* tv and ti are reused by the next line */                  \
    }                                                                                            \
  }
// clang-format on

ARG_EXTREME(argmax_f32, float, ABOVE)
ARG_EXTREME(argmin_f32, float, BELOW)
ARG_EXTREME(argmax_i32, int, ABOVE)
ARG_EXTREME(argmin_i32, int, BELOW)

// top_k over an [outer, n, inner] view: a work-item per element counts the elements of its line
// that rank before it (larger, or smaller with !largest; NaN above every number; an equal one
// at a lower position). Ranks are distinct, so rank r < k writes its position to out[r] and no
// two work-items write one place: the CPU's order, bitwise. The count stops at k (an element
// that will not be kept). It looks outward from its own position, one step right then one
// left: on a sorted line the elements ahead of one lie on one side of it, next to it, where a
// scan from the front reached them only after the rest (n^2 / 2 compares a line: 3.8 s for 8
// lines of 32768, k = 10, on PoCL). Neighbouring work-items read neighbouring elements.
// TOP_K_STEP: whether the element at `at` (a position lower than v's when `lower`) ranks
// before v, added to rank.
#define TOP_K_STEP(T, at, lower)                                                                 \
  {                                                                                              \
    const T w = line[(at) * inner];                                                              \
    rank += (largest ? (IS_NAN(w) && !IS_NAN(v)) || ABOVE(w, v)                                  \
                     : (IS_NAN(v) && !IS_NAN(w)) || BELOW(w, v)) ||                              \
            ((lower) && ((w) == (v) || (IS_NAN(w) && IS_NAN(v))));                               \
  }
#define TOP_K(NAME, T)                                                                           \
  kernel void top_k_##NAME(global const T* x, global int* out, const int total, const int n,     \
                           const int inner, const int k, const int largest) {                    \
    FOR_EACH(e, total) {                                                                         \
      const int q = (int)e % inner, j = ((int)e / inner) % n, o = (int)e / inner / n;            \
      global const T* line = x + o * n * inner + q;                                              \
      const T v = line[j * inner];                                                               \
      int rank = 0;                                                                              \
      const int reach = max(j, n - 1 - j);                                                       \
      for (int d = 1; d <= reach && rank < k; ++d) {                                             \
        if (j + d < n) TOP_K_STEP(T, j + d, false)                                               \
        if (j >= d) TOP_K_STEP(T, j - d, true)                                                   \
      }                                                                                          \
      if (rank < k) out[(o * k + rank) * inner + q] = j;                                         \
    }                                                                                            \
  }

TOP_K(f32, float)
TOP_K(i32, int)
