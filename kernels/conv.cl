// SPDX-License-Identifier: Apache-2.0
// Convolution and pooling over NCHW images, and their gradients: direct loops, one work-item
// per output element, every sum in a fixed order (gathers, never scattered atomics), so results
// do not depend on the grid. Windows skip the taps that fall in the padding; max pooling's
// argmax is the first NaN of a window, else its first maximum in row-major order (as the CPU
// kernels'), and its gradient recomputes it from x.

// Image geometry shared by all kernels: input [N, C, H, W], output [N, O, OH, OW] (O = C for
// pooling), window KH x KW with strides, top/left and bottom/right padding, dilations, and
// G channel groups (weights [O, C / G, KH, KW]).
typedef struct {
  int N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, include_pad, PB, PR, G;
} Geom;

#define GEOM_ARGS                                                                            \
  const int N, const int C, const int H, const int W, const int O, const int OH, const int OW, \
      const int KH, const int KW, const int SH, const int SW, const int PT, const int PL,      \
      const int DH, const int DW, const int include_pad, const int PB, const int PR, const int G
#define GEOM {N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, include_pad, PB, PR, G}

// ---- convolution -----------------------------------------------------------------------------

// y[n, o, oy, ox] = b[o] + sum over the channels c of o's group, ky, kx of
// x[n, c, iy, ix] w[o, c % (C / G), ky, kx]
kernel void conv2d_fwd(global const float* x, global const float* w, global const float* b,
                       global float* y, const int has_bias, GEOM_ARGS) {
  const Geom g = GEOM;
  const int CG = g.C / g.G, OG = g.O / g.G;
  FOR_EACH(i, g.N * g.O * g.OH * g.OW) {
    const int ox = (int)i % g.OW, oy = (int)i / g.OW % g.OH;
    const int o = (int)i / (g.OW * g.OH) % g.O, n = (int)i / (g.OW * g.OH * g.O);
    const int c0 = o / OG * CG;
    float s = 0.0f;
    for (int cl = 0; cl < CG; ++cl) {
      global const float* xc = x + (n * g.C + c0 + cl) * g.H * g.W;
      global const float* wc = w + (o * CG + cl) * g.KH * g.KW;
      for (int ky = 0; ky < g.KH; ++ky) {
        const int iy = oy * g.SH - g.PT + ky * g.DH;
        if (iy < 0 || iy >= g.H) continue;
        for (int kx = 0; kx < g.KW; ++kx) {
          const int ix = ox * g.SW - g.PL + kx * g.DW;
          if (ix >= 0 && ix < g.W) s += xc[iy * g.W + ix] * wc[ky * g.KW + kx];
        }
      }
    }
    y[i] = has_bias ? s + b[o] : s;
  }
}

// fused_conv2d: conv2d_fwd's sum, plus the bias, plus a same-shape residual r (which y may be:
// each work-item reads its element before writing it), then an activation as
// kernels/elementwise.cl computes it: 0 none, 1 relu, 2 leaky_relu (alpha), 3 clip (alpha,
// beta), 4 sigmoid, 5 silu, 6 hard_swish. One pass over y instead of one per op.
kernel void fused_conv2d_fwd(global const float* x, global const float* w, global const float* b,
                             global const float* r, global float* y, const int has_bias,
                             const int has_residual, const int act, const float alpha,
                             const float beta, GEOM_ARGS) {
  const Geom g = GEOM;
  const int CG = g.C / g.G, OG = g.O / g.G;
  FOR_EACH(i, g.N * g.O * g.OH * g.OW) {
    const int ox = (int)i % g.OW, oy = (int)i / g.OW % g.OH;
    const int o = (int)i / (g.OW * g.OH) % g.O, n = (int)i / (g.OW * g.OH * g.O);
    const int c0 = o / OG * CG;
    float s = 0.0f;
    for (int cl = 0; cl < CG; ++cl) {
      global const float* xc = x + (n * g.C + c0 + cl) * g.H * g.W;
      global const float* wc = w + (o * CG + cl) * g.KH * g.KW;
      for (int ky = 0; ky < g.KH; ++ky) {
        const int iy = oy * g.SH - g.PT + ky * g.DH;
        if (iy < 0 || iy >= g.H) continue;
        for (int kx = 0; kx < g.KW; ++kx) {
          const int ix = ox * g.SW - g.PL + kx * g.DW;
          if (ix >= 0 && ix < g.W) s += xc[iy * g.W + ix] * wc[ky * g.KW + kx];
        }
      }
    }
    float v = has_bias ? s + b[o] : s;
    if (has_residual) v += r[i];
    if (act == 1) v = v <= 0.0f ? 0.0f : v;
    else if (act == 2) v = v > 0.0f ? v : alpha * v;
    else if (act == 3) v = (v < alpha ? alpha : v) > beta ? beta : (v < alpha ? alpha : v);
    else if (act == 4) v = 1.0f / (1.0f + exp(-v));
    else if (act == 5) v = v * (1.0f / (1.0f + exp(-v)));
    else if (act == 6) v = v * fmin(fmax((1.0f / 6.0f) * v + 0.5f, 0.0f), 1.0f);
    y[i] = v;
  }
}

// dx[n, c, iy, ix] = b[c] + sum over the (o of c's group, ky, kx) whose tap lands on (iy, ix)
// of g w. With a bias this is conv_transpose2d (g: its input).
kernel void conv2d_bwd_data(global const float* gy, global const float* w, global const float* b,
                            global float* dx, const int has_bias, GEOM_ARGS) {
  const Geom g = GEOM;
  const int CG = g.C / g.G, OG = g.O / g.G;
  FOR_EACH(i, g.N * g.C * g.H * g.W) {
    const int ix = (int)i % g.W, iy = (int)i / g.W % g.H;
    const int c = (int)i / (g.W * g.H) % g.C, n = (int)i / (g.W * g.H * g.C);
    const int o0 = c / CG * OG;
    float s = 0.0f;
    for (int o = o0; o < o0 + OG; ++o) {
      global const float* go = gy + (n * g.O + o) * g.OH * g.OW;
      global const float* wo = w + (o * CG + c % CG) * g.KH * g.KW;
      for (int ky = 0; ky < g.KH; ++ky) {
        const int ty = iy + g.PT - ky * g.DH;  // = oy * SH
        if (ty < 0 || ty % g.SH != 0 || ty / g.SH >= g.OH) continue;
        for (int kx = 0; kx < g.KW; ++kx) {
          const int tx = ix + g.PL - kx * g.DW;
          if (tx < 0 || tx % g.SW != 0 || tx / g.SW >= g.OW) continue;
          s += go[(ty / g.SH) * g.OW + tx / g.SW] * wo[ky * g.KW + kx];
        }
      }
    }
    dx[i] = has_bias ? s + b[c] : s;
  }
}

// dw[o, cl, ky, kx] = sum over n, oy, ox of g[n, o, oy, ox] x[n, c, iy, ix], c the cl-th
// channel of o's group
kernel void conv2d_bwd_weights(global const float* gy, global const float* x, global float* dw,
                               GEOM_ARGS) {
  const Geom g = GEOM;
  const int CG = g.C / g.G, OG = g.O / g.G;
  FOR_EACH(i, g.O * CG * g.KH * g.KW) {
    const int kx = (int)i % g.KW, ky = (int)i / g.KW % g.KH;
    const int cl = (int)i / (g.KW * g.KH) % CG, o = (int)i / (g.KW * g.KH * CG);
    const int c = o / OG * CG + cl;
    float s = 0.0f;
    for (int n = 0; n < g.N; ++n) {
      global const float* go = gy + (n * g.O + o) * g.OH * g.OW;
      global const float* xc = x + (n * g.C + c) * g.H * g.W;
      for (int oy = 0; oy < g.OH; ++oy) {
        const int iy = oy * g.SH - g.PT + ky * g.DH;
        if (iy < 0 || iy >= g.H) continue;
        for (int ox = 0; ox < g.OW; ++ox) {
          const int ix = ox * g.SW - g.PL + kx * g.DW;
          if (ix >= 0 && ix < g.W) s += go[oy * g.OW + ox] * xc[iy * g.W + ix];
        }
      }
    }
    dw[i] = s;
  }
}

// db[o] = sum over n and pixels of g[n, o, :, :]
kernel void conv2d_bias_grad(global const float* gy, global float* db, const int N, const int O,
                             const int HW) {
  FOR_EACH(o, O) {
    float s = 0.0f;
    for (int n = 0; n < N; ++n) {
      global const float* p = gy + (n * O + (int)o) * HW;
      for (int j = 0; j < HW; ++j) s += p[j];
    }
    db[o] = s;
  }
}

// ---- pooling ---------------------------------------------------------------------------------

// The first in-image NaN of window (oy, ox) of plane xp, else its first maximum, as a flat
// position (max pooling propagates NaN, as PyTorch and ONNX do).
inline int window_argmax(global const float* xp, const Geom g, const int oy, const int ox) {
  int best = -1;
  float m = 0.0f;
  for (int ky = 0; ky < g.KH; ++ky) {
    const int iy = oy * g.SH - g.PT + ky * g.DH;
    if (iy < 0 || iy >= g.H) continue;
    for (int kx = 0; kx < g.KW; ++kx) {
      const int ix = ox * g.SW - g.PL + kx * g.DW;
      if (ix < 0 || ix >= g.W) continue;
      const float v = xp[iy * g.W + ix];
      if (best < 0 || v > m || (isnan(v) && !isnan(m))) {
        m = v;
        best = iy * g.W + ix;
      }
    }
  }
  return best;
}

// Elements of window (oy, ox) inside the image, or with include_pad inside the padded image
// (ceil_mode's last window may reach past the end padding; that part never counts).
inline float window_divisor(const Geom g, const int oy, const int ox) {
  const int ty = oy * g.SH - g.PT, tx = ox * g.SW - g.PL;
  if (g.include_pad)
    return (float)((min(ty + g.KH, g.H + g.PB) - ty) * (min(tx + g.KW, g.W + g.PR) - tx));
  const int y0 = max(ty, 0), y1 = min(ty + g.KH, g.H);
  const int x0 = max(tx, 0), x1 = min(tx + g.KW, g.W);
  return (float)((y1 - y0) * (x1 - x0));
}

kernel void pool_fwd(global const float* x, global float* y, const int is_max, GEOM_ARGS) {
  const Geom g = GEOM;
  FOR_EACH(i, g.N * g.C * g.OH * g.OW) {
    const int ox = (int)i % g.OW, oy = (int)i / g.OW % g.OH, plane = (int)i / (g.OW * g.OH);
    global const float* xp = x + plane * g.H * g.W;
    if (is_max) {
      y[i] = xp[window_argmax(xp, g, oy, ox)];
      continue;
    }
    float s = 0.0f;
    for (int ky = 0; ky < g.KH; ++ky) {
      const int iy = oy * g.SH - g.PT + ky;
      if (iy < 0 || iy >= g.H) continue;
      for (int kx = 0; kx < g.KW; ++kx) {
        const int ix = ox * g.SW - g.PL + kx;
        if (ix >= 0 && ix < g.W) s += xp[iy * g.W + ix];
      }
    }
    y[i] = s / window_divisor(g, oy, ox);
  }
}

// dx[n, c, iy, ix] = sum over the windows holding (iy, ix) of their share of g: all of it where
// (iy, ix) is the window's argmax (max), g / divisor (avg). x is read only for max pooling.
// The windows are found tap by tap, as conv2d_bwd_data does (dilated windows have gaps).
kernel void pool_bwd(global const float* gy, global const float* x, global float* dx,
                     const int is_max, GEOM_ARGS) {
  const Geom g = GEOM;
  FOR_EACH(i, g.N * g.C * g.H * g.W) {
    const int ix = (int)i % g.W, iy = (int)i / g.W % g.H, plane = (int)i / (g.W * g.H);
    global const float* gp = gy + plane * g.OH * g.OW;
    global const float* xp = x + plane * g.H * g.W;
    float s = 0.0f;
    for (int ky = 0; ky < g.KH; ++ky) {
      const int ty = iy + g.PT - ky * g.DH;  // = oy * SH
      if (ty < 0 || ty % g.SH != 0 || ty / g.SH >= g.OH) continue;
      const int oy = ty / g.SH;
      for (int kx = 0; kx < g.KW; ++kx) {
        const int tx = ix + g.PL - kx * g.DW;
        if (tx < 0 || tx % g.SW != 0 || tx / g.SW >= g.OW) continue;
        const int ox = tx / g.SW;
        if (is_max) {
          if (window_argmax(xp, g, oy, ox) == iy * g.W + ix) s += gp[oy * g.OW + ox];
        } else {
          s += gp[oy * g.OW + ox] / window_divisor(g, oy, ox);
        }
      }
    }
    dx[i] = s;
  }
}
