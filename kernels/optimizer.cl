// SPDX-License-Identifier: Apache-2.0
// optimizer_update: one step of one variable under its rule, reading the gradient and the state
// and writing the new variable and state in place (the CPU kernel's arithmetic, in float; see
// src/cpu/kernels/optimizer.cpp). The learning rate and the step count come from buffers, so
// a schedule changes them without rebuilding anything. kind: 0 sgd, 1 momentum, 2 nesterov,
// 3 adam, 4 adamw, 5 rmsprop, 6 adagrad (OptimizerRule::Kind). Unused state buffers are bound
// to the variable and never touched. Adam's bias corrections 1 - beta^t come from
// exp2(t log2 beta) with the logarithms from the host: every work-item computes them, and pow
// costs PoCL many times more (it made Adam's step 1.5x sgd's on mnist).
kernel void optimizer_update(global float* p, global const float* grad, global const float* lr_in,
                             global const float* step_in, global float* s0, global float* s1,
                             const int n, const int kind, const float mu, const float dampening,
                             const float b1, const float b2, const float log2_b1,
                             const float log2_b2, const float alpha, const float eps,
                             const float wd) {
  const float lr = lr_in[0];
  float bc1 = 1.0f, bc2_sqrt = 1.0f;
  if (kind == 3 || kind == 4) {
    const float t = step_in[0] + 1.0f;
    bc1 = 1.0f - exp2(t * log2_b1);
    bc2_sqrt = sqrt(1.0f - exp2(t * log2_b2));
  }
  FOR_EACH(i, n) {
    float x = p[i];
    float g = grad[i];
    if (kind == 0) {
      g += wd * x;
      p[i] = x - lr * g;
    } else if (kind == 1 || kind == 2) {
      g += wd * x;
      const float u = mu * s0[i] + (1.0f - dampening) * g;
      s0[i] = u;
      p[i] = x - lr * (kind == 2 ? g + mu * u : u);
    } else if (kind == 3 || kind == 4) {
      if (kind == 4)
        x *= 1.0f - lr * wd;
      else
        g += wd * x;
      const float m = b1 * s0[i] + (1.0f - b1) * g;
      const float v = b2 * s1[i] + (1.0f - b2) * g * g;
      s0[i] = m;
      s1[i] = v;
      p[i] = x - (lr / bc1) * m / (sqrt(v) / bc2_sqrt + eps);
    } else {
      g += wd * x;
      const float s = kind == 5 ? alpha * s0[i] + (1.0f - alpha) * g * g : s0[i] + g * g;
      s0[i] = s;
      p[i] = x - lr * g / (sqrt(s) + eps);
    }
  }
}

// sparse_optimizer_update (fuse_sparse_update) for sgd (adagrad 0) and adagrad (1) without
// weight decay: only the looked-up rows of p (and of the sum s0) change. Each row's gradient is
// the sum, in lookup order from zero, of its lookups' rows of g (what the dense scatter-add
// gives it), owned by its first lookup as in embedding_grad; then optimizer_update's
// expressions for that row (g + 0 * x included), so the dense step's bits. An index outside
// the table is recorded in the status slot, never written through. Lookup j's gradient row
// starts at g[j * gs + goff] (its own rows, or a band of the concat gradient: GradientBand).
kernel void sparse_optimizer_update(global float* p, global const float* g, global const int* ids,
                                    global const float* lr_in, global float* s0, const int count,
                                    const int rows, const int dim, const int gs, const int goff,
                                    const int adagrad, const float eps, global int* err,
                                    const int slot) {
  const float lr = lr_in[0];
  FOR_EACH(e, count * dim) {
    const int i = (int)e / dim, d = (int)e % dim;
    const int r = ids[i];
    if (r < 0 || r >= rows) {
      if (d == 0) atomic_min(err + slot, i);
      continue;
    }
    if (!owns_row(ids, i)) continue;
    const float sum = row_grad_sum(g, ids, i, count, gs, goff, d);
    const int k = r * dim + d;
    const float x = p[k];
    const float gd = sum + 0.0f * x;
    if (adagrad == 0) {
      p[k] = x - lr * gd;
    } else {
      const float s = s0[k] + gd * gd;
      s0[k] = s;
      p[k] = x - lr * gd / (sqrt(s) + eps);
    }
  }
}
