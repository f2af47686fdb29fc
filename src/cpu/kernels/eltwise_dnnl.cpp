// SPDX-License-Identifier: Apache-2.0
// sigmoid and tanh through oneDNN's eltwise primitives, placed before the vm:: kernels of
// elementwise.cpp for the sizes where they measured faster. Best of 7 timings of one node's
// kernel on this machine (AMD EPYC, AVX-512), microseconds, oneDNN / vm::, 1 thread and 2:
//
//   elements  sigmoid 1t  sigmoid 2t  tanh 1t     tanh 2t     relu 1t   relu 2t  relu_grad 1t
//   4096      1.81/1.99   1.80/2.00   2.19/3.09   1.95/3.09   0.44/0.21 1.08/0.21  2.3/0.46
//   65536     27.1/34.3   16.8/19.3   33.6/52.8   17.2/25.6   6.9/5.9   4.6/3.7    31/8.9
//   1M        449/568     229/291     523/797     308/482     101/110   54/58      496/203
//   4M        2117/2225   1190/1324   2916/3194   2020/1707
//   8M        4642/4280   3201/2532   6755/6526   5139/5814   4400/4448 2085/1829  7412/6831
//
// So oneDNN takes sigmoid and tanh from 4096 up to 4M elements (1.1-1.6x); beyond, both are
// bound by memory bandwidth and neither wins consistently, and below, the call costs more.
// relu and relu_grad stay on the vm:: loops, which match or beat oneDNN at every size (and
// oneDNN's relu_grad is 2-4x slower). The other gradients (sigmoid_grad, tanh_grad) are
// products on y, which the broadcast loops run at memory speed.
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/dnnl_call.hpp"
#include "cpu/kernel.hpp"

namespace hetgraph::detail::cpu {

namespace {

dnnl::algorithm alg_of(OpKind k) {
  return k == OpKind::Sigmoid ? dnnl::algorithm::eltwise_logistic : dnnl::algorithm::eltwise_tanh;
}

// The sizes where oneDNN measured faster (file comment).
constexpr std::int64_t kMinElements = 4096, kMaxElements = std::int64_t{1} << 22;

const char* reject_eltwise(const KernelArgs& a) {
  for (const TensorType& t : a.in_types) {
    if (t.dtype != DType::f32) return "needs float inputs";
  }
  const std::int64_t n = a.out_shape().numel();
  if (n < kMinElements) return "fewer than 4096 elements: the vm:: loop is faster";
  if (n > kMaxElements) return "above 4M elements: memory-bound, no faster than the vm:: loop";
  return nullptr;
}

dnnl::memory::desc flat(const KernelArgs& a) {
  return plain_md({a.out_shape().numel()}, dnnl::memory::format_tag::x);
}

// y = f(x); in place when the planner put y over x.
std::unique_ptr<CpuKernel> make_eltwise_fwd(const KernelArgs& a) {
  const auto md = flat(a);
  const auto alg = alg_of(a.node.op);
  try {
    TeamVariants<DnnlCall> calls(a.team_sizes, [&](int) {
      const dnnl::eltwise_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, alg, md, 0.0f, 0.0f}, user_scratchpad(),
          dnnl_engine());
      return DnnlCall(dnnl::eltwise_forward(pd), pd.scratchpad_desc(),
                      {{DNNL_ARG_SRC, md, md, a.in[0]}, {DNNL_ARG_DST, md, md, a.out, true}});
    });
    return std::make_unique<DnnlKernel>(std::move(calls));
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace

void register_eltwise_dnnl_kernels(KernelRegistry& r) {
  r.add_first(OpKind::Sigmoid, {"dnnl_eltwise", reject_eltwise, make_eltwise_fwd});
  r.add_first(OpKind::Tanh, {"dnnl_eltwise", reject_eltwise, make_eltwise_fwd});
}

}  // namespace hetgraph::detail::cpu
