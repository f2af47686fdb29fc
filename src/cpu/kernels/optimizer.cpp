// SPDX-License-Identifier: Apache-2.0
// optimizer_update on the CPU: one pass over the variable that reads its gradient and state and
// writes the new variable and state in place (PyTorch's definitions of each rule; see
// include/hetgraph/autodiff.hpp). The learning rate and the step count are read at run time from
// their scalar inputs, so a schedule changes them without recompiling. The fast kernel works in
// float and splits the elements among the team (each element on its own: the split does not
// change the result); the reference works in double.
//
// Compiled once per code path (src/cpu/simd/code_path.hpp): the loops vectorise at its width.
#include <cmath>
#include <type_traits>

#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/simd/code_path.hpp"

namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS {

namespace {

using Kind = OptimizerRule::Kind;

// The per-run scalars of an update.
template <class T>
struct Scalars {
  T lr = 0, bc1 = 1, bc2_sqrt = 1;  // bias corrections (Adam): 1 - beta1^t, sqrt(1 - beta2^t)
};

template <class T>
Scalars<T> scalars(const OptimizerRule& r, const float* lr, const float* step) {
  Scalars<T> s;
  s.lr = static_cast<T>(*lr);
  if (r.uses_step()) {
    const double t = static_cast<double>(*step) + 1.0;  // this step's number, from 1
    s.bc1 = static_cast<T>(1.0 - std::pow(static_cast<double>(r.beta1), t));
    s.bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(static_cast<double>(r.beta2), t)));
  }
  return s;
}

// Adam and AdamW over [b, e): one branch-free loop over restrict pointers, so it vectorises
// (AdamW shrinks x by 1 - lr wd and adds nothing to g; Adam the reverse: x * 1 and g + 0 x are
// exact).
template <class T>
void adam_range(bool decoupled, const OptimizerRule& r, const Scalars<T>& sc, float* __restrict p,
                const float* __restrict grad, float* __restrict m_, float* __restrict v_,
                std::int64_t b, std::int64_t e) {
  const T one = 1, lr = sc.lr, wd = static_cast<T>(r.weight_decay);
  const T b1 = static_cast<T>(r.beta1), b2 = static_cast<T>(r.beta2), eps = static_cast<T>(r.eps);
  const T step = lr / sc.bc1, bc2 = sc.bc2_sqrt;
  const T shrink = decoupled ? one - lr * wd : one, coupled = decoupled ? T(0) : wd;
#pragma omp simd
  for (std::int64_t i = b; i < e; ++i) {
    const T x = static_cast<T>(p[i]) * shrink;
    const T g = static_cast<T>(grad[i]) + coupled * static_cast<T>(p[i]);
    const T m = b1 * static_cast<T>(m_[i]) + (one - b1) * g;
    const T v = b2 * static_cast<T>(v_[i]) + (one - b2) * g * g;
    m_[i] = static_cast<float>(m);
    v_[i] = static_cast<float>(v);
    p[i] = static_cast<float>(x - step * m / (std::sqrt(v) / bc2 + eps));
  }
}

// Elements [b, e) of one step, in T arithmetic. s0, s1: the states (null where the rule has
// fewer).
template <class T>
void update_range(const OptimizerRule& r, const Scalars<T>& sc, float* p, const float* grad,
                  float* s0, float* s1, std::int64_t b, std::int64_t e) {
  const T lr = sc.lr, wd = static_cast<T>(r.weight_decay), one = 1;
  const T mu = static_cast<T>(r.momentum), damp = one - static_cast<T>(r.dampening);
  const T alpha = static_cast<T>(r.alpha), eps = static_cast<T>(r.eps);
  switch (r.kind) {
    case Kind::sgd:
      for (std::int64_t i = b; i < e; ++i) {
        const T g = static_cast<T>(grad[i]) + wd * static_cast<T>(p[i]);
        p[i] = static_cast<float>(static_cast<T>(p[i]) - lr * g);
      }
      return;
    case Kind::momentum:
    case Kind::nesterov: {
      const bool nesterov = r.kind == Kind::nesterov;
      for (std::int64_t i = b; i < e; ++i) {
        const T g = static_cast<T>(grad[i]) + wd * static_cast<T>(p[i]);
        const T u = mu * static_cast<T>(s0[i]) + damp * g;
        s0[i] = static_cast<float>(u);
        const T d = nesterov ? g + mu * u : u;
        p[i] = static_cast<float>(static_cast<T>(p[i]) - lr * d);
      }
      return;
    }
    case Kind::adam:
    case Kind::adamw:
      adam_range<T>(r.kind == Kind::adamw, r, sc, p, grad, s0, s1, b, e);
      return;
    case Kind::rmsprop:
    case Kind::adagrad: {
      const bool rms = r.kind == Kind::rmsprop;
      for (std::int64_t i = b; i < e; ++i) {
        const T g = static_cast<T>(grad[i]) + wd * static_cast<T>(p[i]);
        const T s = rms ? alpha * static_cast<T>(s0[i]) + (one - alpha) * g * g
                        : static_cast<T>(s0[i]) + g * g;
        s0[i] = static_cast<float>(s);
        p[i] = static_cast<float>(static_cast<T>(p[i]) - lr * g / (std::sqrt(s) + eps));
      }
      return;
    }
  }
}

// The variable (args.out), the states (inputs from first_state()) are written in place: they
// are variables, which the commit point orders after every read of their old values.
template <class T>
std::unique_ptr<CpuKernel> make_update(const KernelArgs& k) {
  const OptimizerRule r = k.node.attrs.get<OptimizerRule>();
  float* p = k.out_f();
  const float* grad = k.in_f(1);
  const float* lr = k.in_f(2);
  const float* step = r.uses_step() ? k.in_f(3) : nullptr;
  auto state = [&](int s) {
    return s < r.states()
               ? const_cast<float*>(k.in_f(static_cast<std::size_t>(r.first_state() + s)))
               : nullptr;
  };
  float* s0 = state(0);
  float* s1 = state(1);
  const std::int64_t n = k.out_shape().numel();
  constexpr bool reference = std::is_same_v<T, double>;
  return make_kernel([=](const ExecCtx& ctx) {
    const Scalars<T> sc = scalars<T>(r, lr, step);
    if (reference) {
      update_range<T>(r, sc, p, grad, s0, s1, 0, n);
      return;
    }
    parallel_for(ctx, n, kParallelGrain / 4, [&](std::int64_t b, std::int64_t e) {
      update_range<T>(r, sc, p, grad, s0, s1, b, e);
    });
  });
}

}  // namespace

void register_optimizer_kernels(KernelRegistry& r) {
  r.add(OpKind::OptimizerUpdate, {"fused_update", nullptr, make_update<float>});
  r.add(OpKind::OptimizerUpdate, {"reference", nullptr, make_update<double>, true});
}

}  // namespace hetgraph::detail::cpu::HETGRAPH_ISA_NS
