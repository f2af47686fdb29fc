// SPDX-License-Identifier: Apache-2.0
// Softmax, log-softmax, cross-entropy and their gradients, dropout, layer_norm, the LSTM
// and GRU cells' tails and channel_affine. Rows along the last axis
// take a contiguous vectorised path; other axes a strided one.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "compiler/dropout_mask.hpp"
#include "compiler/geometry.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/simd/code_path.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {

// Calls f(offset, stride) for every line along the axis: a line is n elements `stride` apart.
template <class F>
void for_lines(const ExecCtx& ctx, const AxisGeom& g, F&& f) {
  parallel_for(ctx, g.outer * g.inner, std::max<std::int64_t>(1, kParallelGrain / (4 * g.n)),
               [&](std::int64_t b, std::int64_t e) {
                 for (std::int64_t l = b; l < e; ++l) {
                   const std::int64_t o = l / g.inner, i = l % g.inner;
                   f(o * g.n * g.inner + i, g.inner);
                 }
               });
}

std::unique_ptr<CpuKernel> make_softmax(const KernelArgs& k) {
  const float* x = k.in_f(0);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.in_shape(0), k.node.attrs.axis);
  const bool log_sm = k.node.op == OpKind::LogSoftmax;
  const CodePath& path = code_path();
  return make_kernel([=, &path](const ExecCtx& ctx) {
    if (g.inner == 1) {
      parallel_for(ctx, g.outer, std::max<std::int64_t>(1, kParallelGrain / (4 * g.n)),
                   [&](std::int64_t b, std::int64_t e) {
                     path.softmax_rows(x + b * g.n, out + b * g.n, e - b, g.n, log_sm);
                   });
      return;
    }
    for_lines(ctx, g, [&](std::int64_t off, std::int64_t s) {
      path.softmax_line(x + off, out + off, g.n, s, log_sm);
    });
  });
}

// softmax_grad(g, y): y * (g - sum(g*y));  log_softmax_grad(g, y): g - exp(y) * sum(g).
std::unique_ptr<CpuKernel> make_softmax_grad(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  const float* y = k.in_f(1);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.in_shape(1), k.node.attrs.axis);
  const bool log_sm = k.node.op == OpKind::LogSoftmaxGrad;
  const CodePath& path = code_path();
  return make_kernel([=, &path](const ExecCtx& ctx) {
    for_lines(ctx, g, [&](std::int64_t off, std::int64_t s) {
      float dot = 0.0f;
      for (std::int64_t j = 0; j < g.n; ++j) {
        const std::int64_t i = off + j * s;
        dot += log_sm ? gr[i] : gr[i] * y[i];
      }
      if (log_sm) return path.log_softmax_grad_line(gr + off, y + off, out + off, g.n, s, dot);
      for (std::int64_t j = 0; j < g.n; ++j) {
        const std::int64_t i = off + j * s;
        out[i] = y[i] * (gr[i] - dot);
      }
    });
  });
}

// Validates int32 class ids before any parallel work (errors cannot leave an OpenMP region).
void check_labels(const std::string& label, const std::int32_t* labels, std::int64_t rows,
                  std::int64_t classes) {
  for (std::int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0 || labels[r] >= classes) {
      throw FeedError("node " + label + ": class id " + std::to_string(labels[r]) + " at row " +
                      std::to_string(r) + " is outside [0, " + std::to_string(classes) + ")");
    }
  }
}

struct XentGeom {
  std::int64_t rows, classes;
  bool int_labels;
};
XentGeom xent_geom(const TensorType& p, const TensorType& labels) {
  const std::int64_t c = p.shape.dim(-1);
  return {p.shape.numel() / c, c, labels.dtype == DType::i32};
}

std::unique_ptr<CpuKernel> make_xent(const KernelArgs& k) {
  const float* p = k.in_f(0);
  const void* labels = k.in[1];
  float* out = k.out_f();
  const XentGeom x = xent_geom(k.in_types[0], k.in_types[1]);
  const CodePath& path = code_path();
  return make_kernel([=, &path, label = k.node.index_label()](const ExecCtx& ctx) {
    if (x.int_labels) {
      const auto* ids = static_cast<const std::int32_t*>(labels);
      check_labels(label, ids, x.rows, x.classes);
      for (std::int64_t r = 0; r < x.rows; ++r)
        out[r] = std::max(p[r * x.classes + ids[r]], FLT_MIN);
      path.map(VecFn::neg_log, 1.0f, out, nullptr, out, x.rows);
      return;
    }
    const auto* y = static_cast<const float*>(labels);
    parallel_for(ctx, x.rows, std::max<std::int64_t>(1, kParallelGrain / (8 * x.classes)),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t r = b; r < e; ++r) {
                     const float* pr = p + r * x.classes;
                     out[r] = -path.xlogy_sum(y + r * x.classes, pr, x.classes);
                   }
                 });
  });
}

// cross_entropy_grad(g, p, y): -g * y / p.   softmax_xent_grad(g, p, y): g * (p * sum(y) - y).
std::unique_ptr<CpuKernel> make_xent_grad(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  const float* p = k.in_f(1);
  const void* labels = k.in[2];
  float* out = k.out_f();
  const XentGeom x = xent_geom(k.in_types[1], k.in_types[2]);
  const bool fused = k.node.op == OpKind::SoftmaxXentGrad;
  return make_kernel([=, label = k.node.index_label()](const ExecCtx& ctx) {
    if (x.int_labels)
      check_labels(label, static_cast<const std::int32_t*>(labels), x.rows, x.classes);
    parallel_for(ctx, x.rows, std::max<std::int64_t>(1, kParallelGrain / (4 * x.classes)),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t r = b; r < e; ++r) {
                     const float* pr = p + r * x.classes;
                     float* o = out + r * x.classes;
                     const float g = gr[r];
                     if (x.int_labels) {
                       const std::int32_t id = static_cast<const std::int32_t*>(labels)[r];
                       for (std::int64_t c = 0; c < x.classes; ++c) {
                         const float hot = c == id ? 1.0f : 0.0f;
                         o[c] = fused ? g * (pr[c] - hot) : -g * hot / std::max(pr[c], FLT_MIN);
                       }
                       continue;
                     }
                     const float* yr = static_cast<const float*>(labels) + r * x.classes;
                     if (fused) {
                       float sy = 0.0f;
                       for (std::int64_t c = 0; c < x.classes; ++c) sy += yr[c];
#pragma omp simd
                       for (std::int64_t c = 0; c < x.classes; ++c) o[c] = g * (pr[c] * sy - yr[c]);
                     } else {
#pragma omp simd
                       for (std::int64_t c = 0; c < x.classes; ++c)
                         o[c] = -g * yr[c] / std::max(pr[c], FLT_MIN);
                     }
                   }
                 });
  });
}

// ---- references: one line at a time, double accumulation, no vector tricks ----------------

// Calls f(index of element j of the line) for the lines of an [outer, n, inner] view.
template <class F>
void each_line(const AxisGeom& g, F&& f) {
  for (std::int64_t o = 0; o < g.outer; ++o) {
    for (std::int64_t i = 0; i < g.inner; ++i) {
      f([&, base = o * g.n * g.inner + i](std::int64_t j) { return base + j * g.inner; });
    }
  }
}

std::unique_ptr<CpuKernel> make_softmax_ref(const KernelArgs& k) {
  const float* x = k.in_f(0);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.in_shape(0), k.node.attrs.axis);
  const bool log_sm = k.node.op == OpKind::LogSoftmax;
  return make_kernel([=](const ExecCtx&) {
    each_line(g, [&](auto at) {
      double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
      for (std::int64_t j = 0; j < g.n; ++j) m = std::max(m, static_cast<double>(x[at(j)]));
      for (std::int64_t j = 0; j < g.n; ++j) sum += std::exp(x[at(j)] - m);
      for (std::int64_t j = 0; j < g.n; ++j) {
        const double v = x[at(j)] - m;
        out[at(j)] = static_cast<float>(log_sm ? v - std::log(sum) : std::exp(v) / sum);
      }
    });
  });
}

std::unique_ptr<CpuKernel> make_softmax_grad_ref(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  const float* y = k.in_f(1);
  float* out = k.out_f();
  const AxisGeom g = axis_geom(k.in_shape(1), k.node.attrs.axis);
  const bool log_sm = k.node.op == OpKind::LogSoftmaxGrad;
  return make_kernel([=](const ExecCtx&) {
    each_line(g, [&](auto at) {
      double dot = 0.0;
      for (std::int64_t j = 0; j < g.n; ++j)
        dot += log_sm ? gr[at(j)] : static_cast<double>(gr[at(j)]) * y[at(j)];
      for (std::int64_t j = 0; j < g.n; ++j) {
        const double gv = gr[at(j)], yv = y[at(j)];
        out[at(j)] = static_cast<float>(log_sm ? gv - std::exp(yv) * dot : yv * (gv - dot));
      }
    });
  });
}

std::unique_ptr<CpuKernel> make_xent_ref(const KernelArgs& k) {
  const float* p = k.in_f(0);
  const void* labels = k.in[1];
  float* out = k.out_f();
  const XentGeom x = xent_geom(k.in_types[0], k.in_types[1]);
  return make_kernel([=, label = k.node.label](const ExecCtx&) {
    const auto* ids = static_cast<const std::int32_t*>(labels);
    const auto* y = static_cast<const float*>(labels);
    if (x.int_labels) check_labels(label, ids, x.rows, x.classes);
    for (std::int64_t r = 0; r < x.rows; ++r) {
      double s = 0.0;
      for (std::int64_t c = 0; c < x.classes; ++c) {
        const double yv = x.int_labels ? (c == ids[r] ? 1.0 : 0.0) : y[r * x.classes + c];
        if (yv != 0.0) s += yv * std::log(std::max(p[r * x.classes + c], FLT_MIN));
      }
      out[r] = static_cast<float>(-s);
    }
  });
}

std::unique_ptr<CpuKernel> make_xent_grad_ref(const KernelArgs& k) {
  const float* gr = k.in_f(0);
  const float* p = k.in_f(1);
  const void* labels = k.in[2];
  float* out = k.out_f();
  const XentGeom x = xent_geom(k.in_types[1], k.in_types[2]);
  const bool fused = k.node.op == OpKind::SoftmaxXentGrad;
  return make_kernel([=, label = k.node.label](const ExecCtx&) {
    const auto* ids = static_cast<const std::int32_t*>(labels);
    const auto* y = static_cast<const float*>(labels);
    if (x.int_labels) check_labels(label, ids, x.rows, x.classes);
    for (std::int64_t r = 0; r < x.rows; ++r) {
      auto yv = [&](std::int64_t c) -> double {
        return x.int_labels ? (c == ids[r] ? 1.0 : 0.0) : y[r * x.classes + c];
      };
      double sy = 0.0;
      for (std::int64_t c = 0; c < x.classes; ++c) sy += yv(c);
      for (std::int64_t c = 0; c < x.classes; ++c) {
        const double pv = p[r * x.classes + c], yc = yv(c), g = gr[r];
        out[r * x.classes + c] = static_cast<float>(
            fused ? g * (pv * sy - yc) : -g * yc / std::max(pv, static_cast<double>(FLT_MIN)));
      }
    }
  });
}

// dropout: x * (draw >= threshold ? scale : 0), element by element (compiler/dropout_mask.hpp).
// The step is read when the kernel runs: it changes between runs.
struct DropoutArgs {
  const float* x;
  const float* step;
  float* out;
  std::int64_t n;
  DropoutMask mask;
  explicit DropoutArgs(const KernelArgs& k)
      : x(k.in_f(0)),
        step(k.in_f(1)),
        out(k.out_f()),
        n(k.out_shape().numel()),
        mask(k.node.attrs.get<DropoutMask>()) {}
};

std::unique_ptr<CpuKernel> make_dropout(const KernelArgs& k) {
  const DropoutArgs d(k);
  const std::uint32_t thr = dropout::threshold(d.mask.p);
  const float sc = dropout::scale(d.mask.p);
  return make_kernel([d, thr, sc](const ExecCtx& ctx) {
    const std::uint64_t key = dropout::key(d.mask.seed, *d.step);
    parallel_for(ctx, d.n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const bool keep = dropout::draw(key, static_cast<std::uint64_t>(i)) >= thr;
        d.out[i] = d.x[i] * (keep ? sc : 0.0f);
      }
    });
  });
}

// One thread, the mask drawn in a pass of its own and applied in a second.
std::unique_ptr<CpuKernel> make_dropout_ref(const KernelArgs& k) {
  return make_kernel([d = DropoutArgs(k)](const ExecCtx&) {
    const std::uint64_t key = dropout::key(d.mask.seed, *d.step);
    std::vector<char> kept(static_cast<std::size_t>(d.n));
    for (std::int64_t i = 0; i < d.n; ++i)
      kept[static_cast<std::size_t>(i)] =
          dropout::draw(key, static_cast<std::uint64_t>(i)) >= dropout::threshold(d.mask.p);
    for (std::int64_t i = 0; i < d.n; ++i)
      d.out[i] = d.x[i] * (kept[static_cast<std::size_t>(i)] ? dropout::scale(d.mask.p) : 0.0f);
  });
}

// Sum of f(j) for j < n in 8 running sums (j mod 8; the compiler vectorises them), added
// pairwise: a fixed order per row, whatever thread takes it.
template <class F>
float sum8(std::int64_t n, F&& f) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int u = 0; u < 8; ++u) acc[u] += f(j + u);
  }
  for (; j < n; ++j) acc[j % 8] += f(j);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// layer_norm(x, gamma, beta) over x's last axis (fuse_layer_norm), row by row: the mean, the
// variance about it, then y = (x - mean) / sqrt(var + eps) * gamma + beta, the decomposed ops'
// order. Three passes over a row in cache instead of the nine nodes' passes over the whole
// value. y may be x: each element is read before it is written.
struct LayerNormRows {
  const float* x;
  const float* gamma;
  const float* beta;
  float* y;
  std::int64_t rows, n;
  float eps;
  void run(std::int64_t r0, std::int64_t r1) const {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      const float mean = sum8(n, [&](std::int64_t j) { return xr[j]; }) / static_cast<float>(n);
      const float q = sum8(n, [&](std::int64_t j) {
        const float d = xr[j] - mean;
        return d * d;
      });
      const float sd = std::sqrt(q / static_cast<float>(n) + eps);
      for (std::int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - mean) / sd * gamma[j] + beta[j];
    }
  }
};
LayerNormRows layer_norm_rows(const KernelArgs& k) {
  const std::int64_t n = k.in_shape(0).dim(-1);
  return {k.in_f(0),
          k.in_f(1),
          k.in_f(2),
          k.out_f(),
          k.in_shape(0).numel() / n,
          n,
          k.node.attrs.get<LayerNormEps>().eps};
}
std::unique_ptr<CpuKernel> make_layer_norm(const KernelArgs& k) {
  return make_kernel([l = layer_norm_rows(k)](const ExecCtx& ctx) {
    parallel_for(ctx, l.rows, std::max<std::int64_t>(1, kParallelGrain / (4 * l.n)),
                 [&](std::int64_t b, std::int64_t e) { l.run(b, e); });
  });
}
// Reference: every step in double.
std::unique_ptr<CpuKernel> make_layer_norm_ref(const KernelArgs& k) {
  return make_kernel([l = layer_norm_rows(k)](const ExecCtx&) {
    for (std::int64_t r = 0; r < l.rows; ++r) {
      const float* xr = l.x + r * l.n;
      double s = 0.0, q = 0.0;
      for (std::int64_t j = 0; j < l.n; ++j) s += xr[j];
      const double mean = s / static_cast<double>(l.n);
      for (std::int64_t j = 0; j < l.n; ++j) q += (xr[j] - mean) * (xr[j] - mean);
      const double sd = std::sqrt(q / static_cast<double>(l.n) + l.eps);
      for (std::int64_t j = 0; j < l.n; ++j)
        l.y[r * l.n + j] = static_cast<float>((xr[j] - mean) / sd * l.gamma[j] + l.beta[j]);
    }
  });
}

// lstm_cell / lstm_hidden (fuse_lstm_cells), row by row in blocks that stay in L1: the code
// path's sigmoid and tanh into blocks on the stack (the same vector kernels as the sigmoid and
// tanh nodes they replace), then the products and the sum as those nodes compute them, so the
// states equal the decomposed graph's bitwise. The state may be the output (in place): each
// element is read before it is written.
struct LstmRows {
  const float* g;      // [B, 4H]
  const float* state;  // lstm_cell: c_prev or null; lstm_hidden: c
  float* out;
  std::int64_t rows, H;
  LstmGates k;
  bool hidden;
  const float* gate(std::int64_t r, int q, std::int64_t j) const { return g + (4 * r + q) * H + j; }
  // Acts: VecActs or RefActs, the sigmoid and tanh over blocks. Units [j0, j1) of each row
  // (lstm_sequence's threads take their own).
  template <class Acts>
  void run(std::int64_t r0, std::int64_t r1, const Acts& acts, std::int64_t j0 = 0,
           std::int64_t j1 = -1) const {
    constexpr std::int64_t kBlock = 256;
    alignas(64) float a[kBlock], b[kBlock], f[kBlock];
    if (j1 < 0) j1 = H;
    for (std::int64_t r = r0; r < r1; ++r) {
      for (std::int64_t j = j0; j < j1; j += kBlock) {
        const std::int64_t m = std::min(kBlock, j1 - j);
        const float* s = state == nullptr ? nullptr : state + r * H + j;
        float* o = out + r * H + j;
        if (hidden) {
          acts.sig(gate(r, k.o, j), a, m);
          acts.tanh_of(s, b, m);
          for (std::int64_t e = 0; e < m; ++e) o[e] = a[e] * b[e];
          continue;
        }
        acts.sig(gate(r, k.i, j), a, m);
        acts.tanh_of(gate(r, k.g, j), b, m);
        if (s == nullptr) {
          for (std::int64_t e = 0; e < m; ++e) o[e] = a[e] * b[e];
          continue;
        }
        acts.sig(gate(r, k.f, j), f, m);
        for (std::int64_t e = 0; e < m; ++e) {
          const float kept = f[e] * s[e], added = a[e] * b[e];
          o[e] = kept + added;
        }
      }
    }
  }
};
LstmRows lstm_rows(const KernelArgs& k) {
  const std::int64_t H = k.out_shape().dim(1);
  return {k.in_f(0),
          k.in.size() > 1 ? k.in_f(1) : nullptr,
          k.out_f(),
          k.out_shape().dim(0),
          H,
          k.node.attrs.get<LstmGates>(),
          k.node.op == OpKind::LstmHidden};
}
// gru_hidden (fuse_gru_cells), as lstm_cell: blocks of the gates' sums through the code path's
// sigmoid and tanh, then the blend, each step an operation of the nodes it replaces. h may be
// h_prev (in place).
struct GruRows {
  const float* x;   // [B, 3H]
  const float* rc;  // [B, 3H]
  const float* prev;
  float* out;
  std::int64_t rows, H;
  GruGates k;
  // Acts: VecActs or RefActs, the sigmoid and tanh over blocks. Units [j0, j1) of each row
  // (gru_sequence's threads take their own).
  template <class Acts>
  void run(std::int64_t r0, std::int64_t r1, const Acts& acts, std::int64_t j0 = 0,
           std::int64_t j1 = -1) const {
    constexpr std::int64_t kBlock = 256;
    alignas(64) float z[kBlock], r[kBlock], n[kBlock];
    if (j1 < 0) j1 = H;
    for (std::int64_t row = r0; row < r1; ++row) {
      const float* xr = x + 3 * row * H;
      const float* rr = rc + 3 * row * H;
      for (std::int64_t j = j0; j < j1; j += kBlock) {
        const std::int64_t m = std::min(kBlock, j1 - j);
        const float *xz = xr + k.z * H + j, *rz = rr + k.z * H + j;
        const float *xq = xr + k.r * H + j, *rq = rr + k.r * H + j;
        const float *xh = xr + k.h * H + j, *rh = rr + k.h * H + j;
        for (std::int64_t e = 0; e < m; ++e) z[e] = xz[e] + rz[e];
        for (std::int64_t e = 0; e < m; ++e) r[e] = xq[e] + rq[e];
        acts.sig(z, z, m);
        acts.sig(r, r, m);
        for (std::int64_t e = 0; e < m; ++e) {
          const float gated = r[e] * rh[e];
          n[e] = xh[e] + gated;
        }
        acts.tanh_of(n, n, m);
        const float* hp = prev + row * H + j;
        float* o = out + row * H + j;
        for (std::int64_t e = 0; e < m; ++e) {
          const float fresh = (1.0f - z[e]) * n[e], kept = z[e] * hp[e];
          o[e] = fresh + kept;
        }
      }
    }
  }
};
GruRows gru_rows(const KernelArgs& k) {
  return {k.in_f(0),
          k.in_f(1),
          k.in_f(2),
          k.out_f(),
          k.out_shape().dim(0),
          k.out_shape().dim(1),
          k.node.attrs.get<GruGates>()};
}
// The code path's (or the reference's) sigmoid and tanh over m floats, for the cells' rows.
struct VecActs {
  const CodePath& path;
  void sig(const float* x, float* o, std::int64_t m) const {
    path.map(VecFn::sigmoid, 1.0f, x, nullptr, o, m);
  }
  void tanh_of(const float* x, float* o, std::int64_t m) const {
    path.map(VecFn::tanh, 1.0f, x, nullptr, o, m);
  }
};
// The reference sigmoid and tanh kernels' formulas (elementwise.cpp's RefSigmoidF, RefTanhF).
struct RefActs {
  void sig(const float* x, float* o, std::int64_t m) const {
    for (std::int64_t e = 0; e < m; ++e) o[e] = 1.0f / (1.0f + std::exp(-x[e]));
  }
  void tanh_of(const float* x, float* o, std::int64_t m) const {
    for (std::int64_t e = 0; e < m; ++e) o[e] = std::tanh(x[e]);
  }
};
// lstm_sequence and gru_sequence (fuse_recurrent_sequences): every step of a recurrent
// direction in one parallel region. Thread t owns hidden units [u0, u1) (whole panels of
// kPanelWidth) and the rows of R that make their gates, packed for CodePath::panel_product:
// each step it computes those gates' columns of the recurrent product (plus the step's rows of
// P for the LSTM, plus Rb for the GRU), then their cells (LstmRows, GruRows on its units: the
// cell nodes' arithmetic), then meets the others at a barrier before the next step reads the
// whole new h. Its part of R (a quarter of a megabyte for an LSTM's H = 256 on two threads)
// stays in its core's cache across steps, where a product node per step spread R over the team
// anew and the cells ran as more nodes. An LSTM's c is kept in the output's last B rows as it
// goes. A column's sum runs over R's row in order, so results are the same for any team size.
class SequenceKernel final : public CpuKernel {
 public:
  explicit SequenceKernel(const KernelArgs& k)
      : lstm_(k.node.op == OpKind::LstmSequence),
        p_(k.in_f(0)),
        r_(k.in_f(1)),
        h0_(k.in_f(2)),
        c0_(lstm_ ? k.in_f(3) : nullptr),
        rb_(!lstm_ && k.in.size() > 3 ? k.in_f(3) : nullptr),
        out_(k.out_f()),
        spec_(k.node.attrs.get<SequenceSpec>()),
        B_(k.in_shape(2).dim(0)),
        H_(k.in_shape(2).dim(1)),
        G_(k.in_shape(1).dim(0)),
        fixed_(k.host_writes != nullptr && fixed_between_runs(k.plan, k.node.inputs[1])),
        host_writes_(k.host_writes),
        panels_(static_cast<std::size_t>(G_ * H_)),
        g_(static_cast<std::size_t>(B_ * G_)) {}

  void run(const ExecCtx& ctx) override {
    pack();
    const CodePath& path = code_path();
    const std::int64_t B = B_, H = H_, G = G_, nb = H / kPanelWidth, T = spec_.steps;
    float* c = lstm_ ? out_ + T * B * H : nullptr;  // the running cell state
    if (lstm_) std::memcpy(c, c0_, static_cast<std::size_t>(B * H) * sizeof(float));
    const int nt = static_cast<int>(std::clamp<std::int64_t>(ctx.nthreads, 1, nb));
    auto steps = [&](std::int64_t t, std::int64_t n) {
      const std::int64_t u0 = nb * t / n * kPanelWidth, u1 = nb * (t + 1) / n * kPanelWidth;
      const VecActs acts{path};
      for (std::int64_t s = 0; s < T; ++s) {
        const float* hp = s == 0 ? h0_ : out_ + (s - 1) * B * H;
        const float* x = p_ + (spec_.first_row + (spec_.reverse ? -s : s) * B) * G;
        for (std::int64_t q = 0; q < G / H; ++q) {
          // The LSTM adds the step's rows of P, the GRU its bias (one row for every row).
          const float* add = lstm_ ? x + q * H + u0 : rb_ ? rb_ + q * H + u0 : nullptr;
          path.panel_product(hp, H, B, H, panels_.data() + (q * H + u0) * H, u1 - u0, add,
                             lstm_ ? G : 0, g_.data() + q * H + u0, G);
        }
        float* h = out_ + s * B * H;
        if (lstm_) {
          LstmRows{g_.data(), c, c, B, H, spec_.lstm, false}.run(0, B, acts, u0, u1);
          LstmRows{g_.data(), c, h, B, H, spec_.lstm, true}.run(0, B, acts, u0, u1);
        } else {
          GruRows{x, g_.data(), hp, h, B, H, spec_.gru}.run(0, B, acts, u0, u1);
        }
        if (n > 1) {
#pragma omp barrier
        }
      }
    };
    if (nt == 1) {
      steps(0, 1);
      return;
    }
#pragma omp parallel num_threads(nt)
    steps(omp_get_thread_num(), omp_get_num_threads());
  }

 private:
  // R [gH, H] into panels of kPanelWidth of its rows (the product's columns), each [H,
  // kPanelWidth]: at the first run and after each host write where R is fixed between runs,
  // else every run.
  void pack() {
    if (fixed_ && packed_ && seen_ == host_writes_->load(std::memory_order_acquire)) return;
    if (fixed_) seen_ = host_writes_->load(std::memory_order_acquire);
    const std::int64_t H = H_;
    for (std::int64_t n = 0; n < G_; ++n) {
      float* panel = panels_.data() + (n / kPanelWidth) * H * kPanelWidth + n % kPanelWidth;
      for (std::int64_t k = 0; k < H; ++k) panel[k * kPanelWidth] = r_[n * H + k];
    }
    packed_ = true;
  }

  bool lstm_;
  const float *p_, *r_, *h0_, *c0_, *rb_;
  float* out_;
  SequenceSpec spec_;
  std::int64_t B_, H_, G_;
  bool fixed_;
  const std::atomic<std::uint64_t>* host_writes_;
  bool packed_ = false;
  std::uint64_t seen_ = 0;
  std::vector<float> panels_, g_;
};

// A hidden size of whole panels: the threads split the units by panels.
const char* reject_sequence(const KernelArgs& a) {
  if (a.in_shape(2).dim(1) % kPanelWidth != 0)
    return "the hidden size is not a multiple of 16 (whole panels)";
  return nullptr;
}
std::unique_ptr<CpuKernel> make_sequence(const KernelArgs& k) {
  return std::make_unique<SequenceKernel>(k);
}
// Reference: each step's product with double sums (as the reference matmul's), rounded, plus
// the step's rows of P (LSTM) or Rb (GRU), then the reference cells.
std::unique_ptr<CpuKernel> make_sequence_ref(const KernelArgs& k) {
  const bool lstm = k.node.op == OpKind::LstmSequence;
  return make_kernel([lstm, p = k.in_f(0), r = k.in_f(1), h0 = k.in_f(2),
                      c0 = lstm ? k.in_f(3) : nullptr,
                      rb = !lstm && k.in.size() > 3 ? k.in_f(3) : nullptr, out = k.out_f(),
                      s = k.node.attrs.get<SequenceSpec>(), B = k.in_shape(2).dim(0),
                      H = k.in_shape(2).dim(1), G = k.in_shape(1).dim(0)](const ExecCtx&) {
    std::vector<float> g(static_cast<std::size_t>(B * G));
    float* c = lstm ? out + s.steps * B * H : nullptr;
    if (lstm) std::memcpy(c, c0, static_cast<std::size_t>(B * H) * sizeof(float));
    for (std::int64_t t = 0; t < s.steps; ++t) {
      const float* hp = t == 0 ? h0 : out + (t - 1) * B * H;
      const float* x = p + (s.first_row + (s.reverse ? -t : t) * B) * G;
      for (std::int64_t b = 0; b < B; ++b) {
        for (std::int64_t n = 0; n < G; ++n) {
          double sum = 0;
          for (std::int64_t i = 0; i < H; ++i)
            sum += static_cast<double>(hp[b * H + i]) * r[n * H + i];
          const float add = lstm ? x[b * G + n] : rb ? rb[n] : 0.0f;
          g[static_cast<std::size_t>(b * G + n)] = add + static_cast<float>(sum);
        }
      }
      float* h = out + t * B * H;
      if (lstm) {
        LstmRows{g.data(), c, c, B, H, s.lstm, false}.run(0, B, RefActs{});
        LstmRows{g.data(), c, h, B, H, s.lstm, true}.run(0, B, RefActs{});
      } else {
        GruRows{x, g.data(), hp, h, B, H, s.gru}.run(0, B, RefActs{});
      }
    }
  });
}

// A cell's kernel: rows of `Rows` (LstmRows, GruRows) with the code path's activations, or
// (Reference) the reference's on one thread.
template <class Rows, bool Reference>
std::unique_ptr<CpuKernel> make_cell(const Rows& rows) {
  if constexpr (Reference) {
    return make_kernel([l = rows](const ExecCtx&) { l.run(0, l.rows, RefActs{}); });
  } else {
    return make_kernel([l = rows, acts = VecActs{code_path()}](const ExecCtx& ctx) {
      parallel_for(ctx, l.rows, std::max<std::int64_t>(1, kParallelGrain / (8 * l.H)),
                   [&](std::int64_t b, std::int64_t e) { l.run(b, e, acts); });
    });
  }
}
std::unique_ptr<CpuKernel> make_lstm(const KernelArgs& k) {
  return make_cell<LstmRows, false>(lstm_rows(k));
}
std::unique_ptr<CpuKernel> make_lstm_ref(const KernelArgs& k) {
  return make_cell<LstmRows, true>(lstm_rows(k));
}
std::unique_ptr<CpuKernel> make_gru(const KernelArgs& k) {
  return make_cell<GruRows, false>(gru_rows(k));
}
std::unique_ptr<CpuKernel> make_gru_ref(const KernelArgs& k) {
  return make_cell<GruRows, true>(gru_rows(k));
}

// channel_affine (fuse_channel_affine) over plain [N, C, spatial] memory, a plane (one image's
// channel) at a time: x * s + t, then relu as the relu node computes it (NaN stays NaN, -0
// becomes +0), each step rounded as the nodes round it, so the values equal theirs bitwise.
// y may be x.
struct AffinePlanes {
  const float* x;
  const float* s;
  const float* t;
  float* y;
  std::int64_t planes, channels, size;
  bool relu;
  void run(std::int64_t p0, std::int64_t p1) const {
    for (std::int64_t q = p0; q < p1; ++q) {
      const float a = s[q % channels], b = t[q % channels];
      const float* xp = x + q * size;
      float* yp = y + q * size;
      if (relu) {
#pragma omp simd
        for (std::int64_t i = 0; i < size; ++i) {
          const float scaled = xp[i] * a, v = scaled + b;
          yp[i] = v <= 0.0f ? 0.0f : v;
        }
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < size; ++i) {
          const float scaled = xp[i] * a;
          yp[i] = scaled + b;
        }
      }
    }
  }
};
const char* reject_channel_affine(const KernelArgs& k) {
  if (k.node.layout != ActivationLayout::nchw) return "plain layout only";
  return nullptr;
}
AffinePlanes affine_planes(const KernelArgs& k) {
  const Shape& x = k.in_shape(0);
  const std::int64_t c = x.dim(1);
  const std::int64_t planes = x.dim(0) * c;
  return {k.in_f(0),
          k.in_f(1),
          k.in_f(2),
          k.out_f(),
          planes,
          c,
          planes == 0 ? 0 : x.numel() / planes,
          k.node.attrs.get<ChannelAffineAct>().relu};
}
std::unique_ptr<CpuKernel> make_channel_affine(const KernelArgs& k) {
  return make_kernel([l = affine_planes(k)](const ExecCtx& ctx) {
    parallel_for(ctx, l.planes,
                 std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, l.size)),
                 [&](std::int64_t b, std::int64_t e) { l.run(b, e); });
  });
}
// channel_affine over a value assign_layouts keeps channels-last or in blocks of B channels
// ([N, C/B, H, W, B]; channels-last: B = C): N * C/B images of H * W pixels of B channels, a
// pixel's B channels contiguous. The same arithmetic as AffinePlanes, so the same values.
struct AffineBlocks {
  const float* x;
  const float* s;
  const float* t;
  float* y;
  std::int64_t images, groups, pixels, block;
  bool relu;
  void run(std::int64_t i0, std::int64_t i1) const {
    // A pixel's channels in one unrolled step where there are 8 or 16 (the blocked layouts).
    if (block == 16) return relu ? images_of<16, true>(i0, i1) : images_of<16, false>(i0, i1);
    if (block == 8) return relu ? images_of<8, true>(i0, i1) : images_of<8, false>(i0, i1);
    return relu ? images_of<0, true>(i0, i1) : images_of<0, false>(i0, i1);
  }
  template <int B, bool Relu>
  void images_of(std::int64_t i0, std::int64_t i1) const {
    const std::int64_t n = B > 0 ? B : block;
    for (std::int64_t q = i0; q < i1; ++q) {
      const float* a = s + (q % groups) * n;
      const float* b = t + (q % groups) * n;
      const float* xp = x + q * pixels * n;
      float* yp = y + q * pixels * n;
      for (std::int64_t px = 0; px < pixels; ++px, xp += n, yp += n) {
#pragma omp simd
        for (std::int64_t g = 0; g < n; ++g) {
          const float scaled = xp[g] * a[g], v = scaled + b[g];
          yp[g] = Relu && v <= 0.0f ? 0.0f : v;
        }
      }
    }
  }
};
const char* reject_plain_affine(const KernelArgs& k) {
  const ActivationLayout l = k.node.layout;
  if (l == ActivationLayout::nchw || k.plan.nodes[k.node.inputs[0]].layout != l)
    return "a plain value";
  return nullptr;
}
std::unique_ptr<CpuKernel> make_channel_affine_blocks(const KernelArgs& k) {
  const Shape& x = k.in_shape(0);
  const std::int64_t c = x.dim(1);
  const std::int64_t block = k.node.layout == ActivationLayout::nhwc
                                 ? c
                                 : static_cast<std::int64_t>(channel_block(k.node.layout));
  const std::int64_t images = x.dim(0) * (c / block);
  const AffineBlocks l{k.in_f(0),           k.in_f(1), k.in_f(2),
                       k.out_f(),           images,    c / block,
                       x.dim(2) * x.dim(3), block,     k.node.attrs.get<ChannelAffineAct>().relu};
  return make_kernel([l](const ExecCtx& ctx) {
    parallel_for(
        ctx, l.images,
        std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, l.pixels * l.block)),
        [&](std::int64_t b, std::int64_t e) { l.run(b, e); });
  });
}
std::unique_ptr<CpuKernel> make_channel_affine_ref(const KernelArgs& k) {
  return make_kernel([l = affine_planes(k)](const ExecCtx&) { l.run(0, l.planes); });
}

}  // namespace

void register_nn_kernels(KernelRegistry& r) {
  auto add = [&](OpKind op, std::string_view name, auto make, auto make_ref) {
    r.add(op, {name, nullptr, make});
    r.add(op, {"reference", nullptr, make_ref, true});
  };
  add(OpKind::Softmax, "blocked_rows", make_softmax, make_softmax_ref);
  add(OpKind::LogSoftmax, "blocked_rows", make_softmax, make_softmax_ref);
  add(OpKind::SoftmaxGrad, "lines", make_softmax_grad, make_softmax_grad_ref);
  add(OpKind::LogSoftmaxGrad, "lines", make_softmax_grad, make_softmax_grad_ref);
  add(OpKind::CrossEntropy, "rows_simd", make_xent, make_xent_ref);
  add(OpKind::CrossEntropyGrad, "rows_simd", make_xent_grad, make_xent_grad_ref);
  add(OpKind::SoftmaxXentGrad, "rows_simd", make_xent_grad, make_xent_grad_ref);
  add(OpKind::Dropout, "hash", make_dropout, make_dropout_ref);
  add(OpKind::LayerNorm, "rows", make_layer_norm, make_layer_norm_ref);
  add(OpKind::LstmCell, "rows", make_lstm, make_lstm_ref);
  add(OpKind::LstmHidden, "rows", make_lstm, make_lstm_ref);
  for (OpKind op : {OpKind::LstmSequence, OpKind::GruSequence}) {
    r.add(op, {"team_panels", reject_sequence, make_sequence});
    r.add(op, {"reference", reject_sequence, make_sequence_ref, true});
  }
  add(OpKind::GruHidden, "rows", make_gru, make_gru_ref);
  r.add(OpKind::ChannelAffine, {"channels_last", reject_plain_affine, make_channel_affine_blocks});
  r.add(OpKind::ChannelAffine, {"planes", reject_channel_affine, make_channel_affine});
  r.add(OpKind::ChannelAffine, {"reference", reject_channel_affine, make_channel_affine_ref, true});
}

}  // namespace hetgraph::detail::cpu
