// Elementwise kernels. Binary ops broadcast through a collapsed stride plan: dims of size 1 in
// the output vanish and neighbouring dims merge when both inputs step through them alike, so
// most broadcasts become one of four contiguous inner loops (full/full, full/scalar,
// scalar/full, scalar/scalar) that the compiler vectorises.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "compiler/geometry.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/vmath.hpp"

namespace hetgraph::detail::cpu {

namespace {

template <class Op>
inline void inner_loop(const Op& op, const float* a, std::int64_t sa, const float* b,
                       std::int64_t sb, float* o, std::int64_t n) {
  if (sa != 0 && sb != 0) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]);
  } else if (sa != 0) {
    const float bv = *b;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) o[i] = op(a[i], bv);
  } else if (sb != 0) {
    const float av = *a;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) o[i] = op(av, b[i]);
  } else {
    const float v = op(*a, *b);
    for (std::int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

template <class Op>
void run_binary(const ExecCtx& ctx, const Op& op, const Bcast& p, const float* a, const float* b,
                float* o) {
  const std::int64_t total = p.rows * p.inner;
  const std::int64_t sai = p.sa[static_cast<std::size_t>(p.rank - 1)];
  const std::int64_t sbi = p.sb[static_cast<std::size_t>(p.rank - 1)];
  parallel_for(ctx, total, kParallelGrain, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t row = begin / p.inner, col = begin % p.inner;
    for (std::int64_t pos = begin; pos < end; ++row, col = 0) {
      std::int64_t oa = 0, ob = 0;
      row_offsets(p, row, oa, ob);
      const std::int64_t n = std::min(p.inner - col, end - pos);
      inner_loop(op, a + oa + col * sai, sai, b + ob + col * sbi, sbi, o + pos, n);
      pos += n;
    }
  });
}

template <class Op>
std::unique_ptr<CpuKernel> make_binary(const KernelArgs& k, Op op) {
  const Bcast p = make_bcast(k.in_shape(0), k.in_shape(1), k.out_shape());
  const float* a = k.in_f(0);
  const float* b = k.in_f(1);
  float* o = k.out_f();
  return make_kernel([=](const ExecCtx& ctx) { run_binary(ctx, op, p, a, b, o); });
}

template <class Op>
std::unique_ptr<CpuKernel> make_unary(const KernelArgs& k, Op op) {
  const float* x = k.in_f(0);
  float* o = k.out_f();
  const std::int64_t n = k.out_shape().numel();
  return make_kernel([=](const ExecCtx& ctx) {
    parallel_for(ctx, n, kParallelGrain / 4, [&](std::int64_t b, std::int64_t e) {
      if constexpr (std::is_invocable_r_v<vm::f16, Op, vm::f16>) {
        vm::map(x + b, o + b, e - b, op);
      } else {
#pragma omp simd
        for (std::int64_t i = b; i < e; ++i) o[i] = op(x[i]);
      }
    });
  });
}

// Functors; `from` reads the op's attributes.
struct AddF {
  static AddF from(const Attrs&) { return {}; }
  float operator()(float a, float b) const { return a + b; }
};
struct SubF {
  static SubF from(const Attrs&) { return {}; }
  float operator()(float a, float b) const { return a - b; }
};
struct MulF {
  static MulF from(const Attrs&) { return {}; }
  float operator()(float a, float b) const { return a * b; }
};
struct DivF {
  static DivF from(const Attrs&) { return {}; }
  float operator()(float a, float b) const { return a / b; }
};
struct AxpbyF {
  float x, y;
  static AxpbyF from(const Attrs& at) { return {at.alpha, at.beta}; }
  float operator()(float a, float b) const { return x * a + y * b; }
};
struct ReluGradF {
  static ReluGradF from(const Attrs&) { return {}; }
  float operator()(float g, float x) const { return x > 0.0f ? g : 0.0f; }
};
struct SigmoidGradF {
  static SigmoidGradF from(const Attrs&) { return {}; }
  float operator()(float g, float y) const { return g * y * (1.0f - y); }
};
struct TanhGradF {
  static TanhGradF from(const Attrs&) { return {}; }
  float operator()(float g, float y) const { return g * (1.0f - y * y); }
};
// gelu'(x) = Phi(x) + x phi(x)
struct GeluGradF {
  static GeluGradF from(const Attrs&) { return {}; }
  float operator()(float g, float x) const {
    const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752f));
    return g * (cdf + x * 0.39894228040143268f * std::exp(-0.5f * x * x));
  }
};

// Unary functors: Fast uses vm::, Ref uses libm (the reference the fast ones are tested by).
struct NegF {
  static NegF from(const Attrs&) { return {}; }
  float operator()(float x) const { return -x; }
};
struct ScaleF {
  float s;
  static ScaleF from(const Attrs& at) { return {at.alpha}; }
  float operator()(float x) const { return s * x; }
};
struct SqrtF {
  static SqrtF from(const Attrs&) { return {}; }
  float operator()(float x) const { return __builtin_sqrtf(x); }
};
struct FloorF {
  static FloorF from(const Attrs&) { return {}; }
  float operator()(float x) const { return __builtin_floorf(x); }
};
struct ReluF {
  static ReluF from(const Attrs&) { return {}; }
  float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
// x Phi(x) with libm's erf, in float (the reference works in double)
struct GeluF {
  static GeluF from(const Attrs&) { return {}; }
  float operator()(float x) const { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
};
struct RefGeluF {
  static RefGeluF from(const Attrs&) { return {}; }
  float operator()(float x) const {
    const double v = x;
    return static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
  }
};
// Transcendental functors work on 16-lane vectors (see vmath.hpp).
struct ExpF {
  static ExpF from(const Attrs&) { return {}; }
  vm::f16 operator()(vm::f16 x) const { return vm::exp(x); }
};
struct LogF {
  static LogF from(const Attrs&) { return {}; }
  vm::f16 operator()(vm::f16 x) const { return vm::log(x); }
};
struct SigmoidF {
  static SigmoidF from(const Attrs&) { return {}; }
  vm::f16 operator()(vm::f16 x) const { return vm::sigmoid(x); }
};
struct TanhF {
  static TanhF from(const Attrs&) { return {}; }
  vm::f16 operator()(vm::f16 x) const { return vm::tanh(x); }
};
struct RefExpF {
  static RefExpF from(const Attrs&) { return {}; }
  float operator()(float x) const { return std::exp(x); }
};
struct RefLogF {
  static RefLogF from(const Attrs&) { return {}; }
  float operator()(float x) const { return std::log(x); }
};
struct RefSigmoidF {
  static RefSigmoidF from(const Attrs&) { return {}; }
  float operator()(float x) const { return 1.0f / (1.0f + std::exp(-x)); }
};
struct RefTanhF {
  static RefTanhF from(const Attrs&) { return {}; }
  float operator()(float x) const { return std::tanh(x); }
};

const char* need_f32(const KernelArgs& k) {
  for (const TensorType& t : k.in_types) {
    if (t.dtype != DType::f32) return "needs float inputs";
  }
  return nullptr;
}

// Reference binary op: per-element index arithmetic, no collapsing, no vector loops.
template <class Op>
std::unique_ptr<CpuKernel> make_reference_binary(const KernelArgs& k, Op op) {
  const Shape a = k.in_shape(0), b = k.in_shape(1), out = k.out_shape();
  const float* pa = k.in_f(0);
  const float* pb = k.in_f(1);
  float* o = k.out_f();
  return make_kernel([=](const ExecCtx&) {
    const int r = out.rank();
    for (std::int64_t flat = 0; flat < out.numel(); ++flat) {
      std::int64_t rem = flat, ia = 0, ib = 0, ma = 1, mb = 1;
      for (int d = r - 1; d >= 0; --d) {
        const std::int64_t i = rem % out[d];
        rem /= out[d];
        const int da = a.rank() - r + d, db = b.rank() - r + d;
        if (da >= 0) {
          ia += (a[da] == 1 ? 0 : i) * ma;
          ma *= a[da];
        }
        if (db >= 0) {
          ib += (b[db] == 1 ? 0 : i) * mb;
          mb *= b[db];
        }
      }
      o[flat] = op(pa[ia], pb[ib]);
    }
  });
}

template <class Op>
std::unique_ptr<CpuKernel> make_reference_unary(const KernelArgs& k, Op op) {
  const float* x = k.in_f(0);
  float* o = k.out_f();
  const std::int64_t n = k.out_shape().numel();
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t i = 0; i < n; ++i) o[i] = op(x[i]);
  });
}

template <class Op>
std::unique_ptr<CpuKernel> binary_fast(const KernelArgs& k) {
  return make_binary(k, Op::from(k.node.attrs));
}
template <class Op>
std::unique_ptr<CpuKernel> binary_ref(const KernelArgs& k) {
  return make_reference_binary(k, Op::from(k.node.attrs));
}
template <class Op>
std::unique_ptr<CpuKernel> unary_fast(const KernelArgs& k) {
  return make_unary(k, Op::from(k.node.attrs));
}
template <class Op>
std::unique_ptr<CpuKernel> unary_ref(const KernelArgs& k) {
  return make_reference_unary(k, Op::from(k.node.attrs));
}

template <class Op>
void binary(KernelRegistry& r, OpKind kind) {
  r.add(kind, {"broadcast_simd", need_f32, binary_fast<Op>});
  r.add(kind, {"reference", need_f32, binary_ref<Op>, true});
}
template <class Fast, class Ref>
void unary(KernelRegistry& r, OpKind kind) {
  r.add(kind, {"simd", need_f32, unary_fast<Fast>});
  r.add(kind, {"reference", need_f32, unary_ref<Ref>, true});
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& t) {
  binary<AddF>(t, OpKind::Add);
  binary<SubF>(t, OpKind::Sub);
  binary<MulF>(t, OpKind::Mul);
  binary<DivF>(t, OpKind::Div);
  binary<AxpbyF>(t, OpKind::Axpby);
  binary<ReluGradF>(t, OpKind::ReluGrad);
  binary<SigmoidGradF>(t, OpKind::SigmoidGrad);
  binary<TanhGradF>(t, OpKind::TanhGrad);
  binary<GeluGradF>(t, OpKind::GeluGrad);
  unary<NegF, NegF>(t, OpKind::Neg);
  unary<ScaleF, ScaleF>(t, OpKind::Scale);
  unary<SqrtF, SqrtF>(t, OpKind::Sqrt);
  unary<FloorF, FloorF>(t, OpKind::Floor);
  unary<ReluF, ReluF>(t, OpKind::Relu);
  unary<ExpF, RefExpF>(t, OpKind::Exp);
  unary<LogF, RefLogF>(t, OpKind::Log);
  unary<SigmoidF, RefSigmoidF>(t, OpKind::Sigmoid);
  unary<TanhF, RefTanhF>(t, OpKind::Tanh);
  unary<GeluF, RefGeluF>(t, OpKind::Gelu);
}

}  // namespace hetgraph::detail::cpu
