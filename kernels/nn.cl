// SPDX-License-Identifier: Apache-2.0
// Softmax, log-softmax, cross-entropy and their gradients; dropout; layer_norm; the LSTM
// and GRU cells' tails.
//
// A "line" is the n values along the op's axis, `inner` apart, of an [outer, n, inner] view.
//   *_lines: a work-item per line (short lines, or inner > 1 where adjacent work-items read
//            adjacent addresses);
//   *_rows:  a work-group per contiguous line (inner == 1, long lines): work-items stride
//            along it together and combine through local memory in a fixed tree order.
// Outputs may alias inputs (in-place): every work-item writes only elements it has read
// itself, after the reductions that need them.

#define MAX_WG 256  // the host never launches *_rows with more work-items

// Tree reductions over the work-group; the trailing barrier lets `t` be reused at once.
inline float wg_sum(local float* t, float v) {
  const int l = get_local_id(0), L = get_local_size(0);
  t[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L >> 1; s > 0; s >>= 1) {
    if (l < s) t[l] += t[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = t[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

inline float wg_max(local float* t, float v) {
  const int l = get_local_id(0), L = get_local_size(0);
  t[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L >> 1; s > 0; s >>= 1) {
    if (l < s) t[l] = fmax(t[l], t[l + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = t[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// ---- layer_norm (fuse_layer_norm) -------------------------------------------------------------

kernel void layer_norm_lines(global const float* x, global const float* gamma,
                             global const float* beta, global float* y, const int rows,
                             const int n, const float eps) {
  FOR_EACH(r, rows) {
    const long base = (long)r * n;
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += x[base + j];
    const float mean = s / n;
    float q = 0.0f;
    for (int j = 0; j < n; ++j) {
      const float d = x[base + j] - mean;
      q += d * d;
    }
    const float sd = sqrt(q / n + eps);
    for (int j = 0; j < n; ++j) y[base + j] = (x[base + j] - mean) / sd * gamma[j] + beta[j];
  }
}

// ---- lstm_cell, lstm_hidden, gru_hidden (fuse_lstm_cells, fuse_gru_cells) ----------------------
// A work-item per state element; the sigmoid and tanh of elementwise.cl's sigmoid_f32 and
// tanh_f32, so the states equal the decomposed nodes' bitwise. g is [rows, 4h]; gate q of row r
// is g[(4r + q)h, ...]. The state may be the output (in place).

inline float cell_sigmoid(float v) { return 1.0f / (1.0f + exp(-v)); }
inline float cell_tanh(float v) { return fabs(v) >= 10.0f ? copysign(1.0f, v) : tanh(v); }

// c = sigmoid(f) * c_prev + sigmoid(i) * tanh(g); without c_prev (has_prev 0) sigmoid(i) *
// tanh(g).
kernel void lstm_cell(global const float* g, global const float* c_prev, global float* c,
                      const int rows, const int h, const int gi, const int gf, const int gg,
                      const int has_prev) {
  FOR_EACH(e, rows * h) {
    const long base = (long)(e / h) * 4 * h, j = e % h;
    const float added = cell_sigmoid(g[base + gi * h + j]) * cell_tanh(g[base + gg * h + j]);
    if (has_prev) {
      const float kept = cell_sigmoid(g[base + gf * h + j]) * c_prev[e];
      c[e] = kept + added;
    } else {
      c[e] = added;
    }
  }
}

// hidden = sigmoid(o) * tanh(c)
kernel void lstm_hidden(global const float* g, global const float* c, global float* hidden,
                        const int rows, const int h, const int go) {
  FOR_EACH(e, rows * h) {
    const long base = (long)(e / h) * 4 * h, j = e % h;
    hidden[e] = cell_sigmoid(g[base + go * h + j]) * cell_tanh(c[e]);
  }
}

// gru_hidden: z = sigmoid(x_z + rc_z), r = sigmoid(x_r + rc_r), n = tanh(x_h + r * rc_h),
// h = (1 - z) * n + z * h_prev; x and rc are [rows, 3h]. h may be h_prev (in place).
kernel void gru_hidden(global const float* x, global const float* rc, global const float* prev,
                       global float* out, const int rows, const int h, const int gz,
                       const int gr, const int gh) {
  FOR_EACH(e, rows * h) {
    const long base = (long)(e / h) * 3 * h, j = e % h;
    const float z = cell_sigmoid(x[base + gz * h + j] + rc[base + gz * h + j]);
    const float r = cell_sigmoid(x[base + gr * h + j] + rc[base + gr * h + j]);
    const float gated = r * rc[base + gh * h + j];
    const float n = cell_tanh(x[base + gh * h + j] + gated);
    const float fresh = (1.0f - z) * n, kept = z * prev[e];
    out[e] = fresh + kept;
  }
}

// ---- channel_affine (fuse_channel_affine) ---------------------------------------------------------
// x * s[c] + t[c] over plain [N, C, size] memory, then relu (NaN stays NaN, -0 becomes +0)
// where relu is 1; y may be x.
kernel void channel_affine(global const float* x, global const float* s, global const float* t,
                           global float* y, const int n, const int channels, const int size,
                           const int relu) {
  FOR_EACH(e, n) {
    const int c = (int)((e / (uint)size) % (uint)channels);
    const float scaled = x[e] * s[c], v = scaled + t[c];
    y[e] = relu && v <= 0.0f ? 0.0f : v;
  }
}

// ---- attention (fuse_attention) --------------------------------------------------------------

// softmax(scale(q k^T) + mask) v, a work-item per query row: the row's largest score, then
// the exponentials' sum and their weighted sum of v's rows straight into the result row, then
// the division; each score is recomputed from q and k in both passes (no row-sized scratch).
// flags: 1 divide by scale (else multiply), 2 scale q before the product (else the scores),
// 4 k stored [tk, d] (else k^T [d, tk]), 8 a mask (its strides: ms0 and ms1 over the two
// leading dims, lead1 the inner one's size, msq and msk over the query and key axes). Product
// b's operands start where AttentionGeom::at says (heads > 0: interleaved heads), their rows
// q_ld, k_ld, v_ld and y_ld apart.
inline long attention_at(const long b, const long rows, const long cols, const int heads) {
  if (heads == 0) return b * rows * cols;
  return ((b / heads) * rows * heads + b % heads) * cols;
}

inline float attention_score(global const float* qr, global const float* kb, const int j,
                             const int d, const int k_ld, const float scale, const int flags) {
  float s = 0.0f;
  for (int p = 0; p < d; ++p) {
    float qv = qr[p];
    if (flags & 2) qv = (flags & 1) ? qv / scale : qv * scale;
    s += qv * ((flags & 4) ? kb[(long)j * k_ld + p] : kb[(long)p * k_ld + j]);
  }
  if (!(flags & 2)) s = (flags & 1) ? s / scale : s * scale;
  return s;
}

kernel void attention_rows(global const float* q, global const float* k, global const float* v,
                           global const float* mask, global float* y, const int rows,
                           const int tq, const int tk, const int d, const int dv,
                           const float scale, const int flags, const int heads, const int q_ld,
                           const int k_ld, const int v_ld, const int y_ld, const int lead1,
                           const int ms0, const int ms1, const int msq, const int msk) {
  FOR_EACH(r, rows) {
    const long b = r / tq, i = r % tq;
    global const float* qr = q + attention_at(b, tq, d, heads) + i * q_ld;
    global const float* kb =
        k + ((flags & 4) ? attention_at(b, tk, d, heads) : attention_at(b, d, tk, heads));
    global const float* vb = v + attention_at(b, tk, dv, heads);
    global const float* mr = mask + (b / lead1) * ms0 + (b % lead1) * ms1 + i * msq;
    global float* yr = y + attention_at(b, tq, dv, heads) + i * y_ld;
    float mx = -INFINITY;
    for (int j = 0; j < tk; ++j) {
      float s = attention_score(qr, kb, j, d, k_ld, scale, flags);
      if (flags & 8) s += mr[(long)j * msk];
      mx = fmax(mx, s);
    }
    for (int c = 0; c < dv; ++c) yr[c] = 0.0f;
    float sum = 0.0f;
    for (int j = 0; j < tk; ++j) {
      float s = attention_score(qr, kb, j, d, k_ld, scale, flags);
      if (flags & 8) s += mr[(long)j * msk];
      const float e = exp(s - mx);
      sum += e;
      for (int c = 0; c < dv; ++c) yr[c] += e * vb[(long)j * v_ld + c];
    }
    for (int c = 0; c < dv; ++c) yr[c] /= sum;
  }
}

// ---- softmax / log_softmax -------------------------------------------------------------------

kernel void softmax_lines(global const float* x, global float* y, const int lines, const int n,
                          const int inner, const int log_out) {
  FOR_EACH(l, lines) {
    const int base = ((int)l / inner) * n * inner + (int)l % inner;
    float m = -INFINITY;
    for (int j = 0; j < n; ++j) m = fmax(m, x[base + j * inner]);
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += exp(x[base + j * inner] - m);
    if (log_out) {
      const float lse = m + log(s);
      for (int j = 0; j < n; ++j) y[base + j * inner] = x[base + j * inner] - lse;
    } else {
      const float inv = 1.0f / s;
      for (int j = 0; j < n; ++j) y[base + j * inner] = exp(x[base + j * inner] - m) * inv;
    }
  }
}

kernel void softmax_rows(global const float* x, global float* y, const int rows, const int n,
                         const int log_out) {
  local float tmp[MAX_WG];
  const int l = get_local_id(0), L = get_local_size(0);
  FOR_EACH_GROUP(row, rows) {
    global const float* xr = x + row * n;
    global float* yr = y + row * n;
    float m = -INFINITY;
    for (int j = l; j < n; j += L) m = fmax(m, xr[j]);
    m = wg_max(tmp, m);
    float s = 0.0f;
    for (int j = l; j < n; j += L) s += exp(xr[j] - m);
    s = wg_sum(tmp, s);
    if (log_out) {
      const float lse = m + log(s);
      for (int j = l; j < n; j += L) yr[j] = xr[j] - lse;
    } else {
      const float inv = 1.0f / s;
      for (int j = l; j < n; j += L) yr[j] = exp(xr[j] - m) * inv;
    }
  }
}

// softmax_grad(g, y) = y * (g - sum(g * y));  log_softmax_grad(g, y) = g - exp(y) * sum(g).
kernel void softmax_grad_lines(global const float* g, global const float* y, global float* out,
                               const int lines, const int n, const int inner, const int log_out) {
  FOR_EACH(l, lines) {
    const int base = ((int)l / inner) * n * inner + (int)l % inner;
    float dot = 0.0f;
    for (int j = 0; j < n; ++j) {
      const int i = base + j * inner;
      dot += log_out ? g[i] : g[i] * y[i];
    }
    for (int j = 0; j < n; ++j) {
      const int i = base + j * inner;
      const float gv = g[i], yv = y[i];
      out[i] = log_out ? gv - exp(yv) * dot : yv * (gv - dot);
    }
  }
}

kernel void softmax_grad_rows(global const float* g, global const float* y, global float* out,
                              const int rows, const int n, const int log_out) {
  local float tmp[MAX_WG];
  const int l = get_local_id(0), L = get_local_size(0);
  FOR_EACH_GROUP(row, rows) {
    const int base = row * n;
    float dot = 0.0f;
    for (int j = l; j < n; j += L) dot += log_out ? g[base + j] : g[base + j] * y[base + j];
    dot = wg_sum(tmp, dot);
    for (int j = l; j < n; j += L) {
      const float gv = g[base + j], yv = y[base + j];
      out[base + j] = log_out ? gv - exp(yv) * dot : yv * (gv - dot);
    }
  }
}

// ---- cross-entropy ---------------------------------------------------------------------------
// Probabilities are clamped to FLT_MIN before the log, as on the CPU, so a zero probability
// gives a large finite loss instead of infinity.

// Float labels (one-hot or soft) of the probabilities' shape: out[r] = -sum_c y log p.
kernel void xent_lines(global const float* p, global const float* y, global float* out,
                       const int rows, const int classes) {
  FOR_EACH(r, rows) {
    const int base = (int)r * classes;
    float s = 0.0f;
    for (int c = 0; c < classes; ++c) s += y[base + c] * log(fmax(p[base + c], FLT_MIN));
    out[r] = -s;
  }
}

kernel void xent_rows(global const float* p, global const float* y, global float* out,
                      const int rows, const int classes) {
  local float tmp[MAX_WG];
  const int l = get_local_id(0), L = get_local_size(0);
  FOR_EACH_GROUP(r, rows) {
    const int base = (int)r * classes;
    float s = 0.0f;
    for (int c = l; c < classes; c += L) s += y[base + c] * log(fmax(p[base + c], FLT_MIN));
    s = wg_sum(tmp, s);
    if (l == 0) out[r] = -s;
  }
}

// int32 class ids, one per row. An id outside [0, classes) records the smallest such row in
// err[slot] (the host reports it after the run) and yields NaN instead of reading out of bounds.
kernel void xent_ids(global const float* p, global const int* ids, global float* out,
                     const int rows, const int classes, global int* err, const int slot) {
  FOR_EACH(r, rows) {
    const int id = ids[r];
    if (id < 0 || id >= classes) {
      atomic_min(err + slot, (int)r);
      out[r] = NAN;
    } else {
      out[r] = -log(fmax(p[(int)r * classes + id], FLT_MIN));
    }
  }
}

// cross_entropy_grad(g, p, y) = -g * y / p;  softmax_xent_grad(g, p, y) = g * (p * sum(y) - y),
// the gradient with respect to the logits of softmax + cross-entropy (fused != 0).
kernel void xent_grad(global const float* g, global const float* p, global const float* y,
                      global float* out, const int rows, const int classes, const int fused) {
  FOR_EACH(r, rows) {
    const int base = (int)r * classes;
    const float gv = g[r];
    if (fused) {
      float sy = 0.0f;
      for (int c = 0; c < classes; ++c) sy += y[base + c];
      for (int c = 0; c < classes; ++c) {
        const float pv = p[base + c], yv = y[base + c];
        out[base + c] = gv * (pv * sy - yv);
      }
    } else {
      for (int c = 0; c < classes; ++c) {
        const float pv = p[base + c], yv = y[base + c];
        out[base + c] = -gv * yv / fmax(pv, FLT_MIN);
      }
    }
  }
}

kernel void xent_grad_ids(global const float* g, global const float* p, global const int* ids,
                          global float* out, const int rows, const int classes, const int fused,
                          global int* err, const int slot) {
  FOR_EACH(r, rows) {
    const int base = (int)r * classes;
    const float gv = g[r];
    const int id = ids[r];
    if (id < 0 || id >= classes) atomic_min(err + slot, (int)r);
    for (int c = 0; c < classes; ++c) {
      const float hot = c == id ? 1.0f : 0.0f;
      const float pv = p[base + c];
      out[base + c] = fused ? gv * (pv - hot) : -gv * hot / fmax(pv, FLT_MIN);
    }
  }
}

// Dropout: src/compiler/dropout_mask.hpp defines the mask; these are its steps in OpenCL C.
ulong dropout_mix(ulong z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
  return z ^ (z >> 31);
}

kernel void dropout(global const float* x, global const float* step, global float* y,
                    const int n, const ulong seed, const uint threshold, const float scale) {
  const ulong key = dropout_mix(dropout_mix(seed) + (ulong)as_uint(step[0]));
  FOR_EACH(i, n) {
    const uint draw = (uint)(dropout_mix(key + ((ulong)i + 1UL) * 0x9E3779B97F4A7C15UL) >> 40);
    y[i] = x[i] * (draw >= threshold ? scale : 0.0f);
  }
}
