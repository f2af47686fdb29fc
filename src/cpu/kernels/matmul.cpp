// SPDX-License-Identifier: Apache-2.0
// Matmul and fused matmul kernels.
//
// A Product computes op(A) op(B) into a destination given at run time, by one of three
// oneDNN routes chosen by fixed shape rules (never timed at compile time, so results stay
// bitwise reproducible). Measured on this machine's shapes with 1 and 2 threads:
//  - the GEMM driver (dnnl_sgemm) is 5-28% faster than the brgemm matmul primitive for rank-2
//    products with B not transposed and N > 32 (200x100x200, the LSTM gate GEMMs, M = 1);
//  - brgemm is up to 3x faster with B transposed (the driver does not parallelise 'T' here)
//    and 30% faster for skinny N (MNIST's 500x784x10);
//  - C = A^T B with a skinny C (784x500x10, MNIST's weight gradient) runs at half speed in
//    brgemm, but its transpose C^T = B^T A at full speed: compute that and transpose.
// The primitive (2.6 API: desc -> primitive_desc) is created once at compile time; transposes
// are strides, batches a leading dim (a rank-2 operand is broadcast over the batch); oneDNN
// caches identical primitives, so thousands of same-shape nodes share one implementation.
//
// A Linear layer (bias only) with fixed weights takes a fourth route where oneDNN has its brgemm
// matmul: B packed once, the bias added by the primitive (reject_packed_bias).
//
// fused_matmul (from the fusion pass) runs the product into the executor's scratch and applies
// the epilogue and the accumulation in one vector pass while it is in cache; a plain
// accumulation goes through the GEMM driver with beta = 1, in place. (oneDNN 2.6's brgemm
// post-ops were measured slower than that: a log post-op added 30 us to a 64 us product, a
// sum 77 us, both together 730 us.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "compiler/geometry.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "cpu/simd/code_path.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

using Geom = MatmulGeom;

Geom geom(const KernelArgs& a) {
  return matmul_geom(a.in_shape(0), a.in_shape(1), a.node.attrs.trans_a, a.node.attrs.trans_b);
}

// ---- products -------------------------------------------------------------------------------

class Product {
 public:
  virtual ~Product() = default;
  /// C = op(A) op(B) (+ C when accumulate and supported). ctx.scratch is the product's own.
  virtual void run(const ExecCtx& ctx, float* c) = 0;
  virtual std::size_t scratch_bytes() const { return 0; }
};

// A logical [rows, cols] operand (batched: [b, rows, cols]) stored row-major either as is or,
// when transposed, as [cols, rows].
memory::desc operand(std::int64_t b, bool batched, std::int64_t rows, std::int64_t cols,
                     bool transposed, bool any_batched) {
  const memory::dim rs = transposed ? 1 : cols, cs = transposed ? rows : 1;
  if (!any_batched) return memory::desc({rows, cols}, dt::f32, memory::dims{rs, cs});
  // A broadcast operand is a batch of 1. Its batch stride addresses nothing, but it must be
  // the dense one: with 0, a transposed operand reads as layout bca, which oneDNN 2.6 runs
  // with its reference matmul only (400x slower on [1, 3136, 256] x [256, 64]^T).
  const memory::dim bs = rows * cols;
  return memory::desc({batched ? b : 1, rows, cols}, dt::f32, memory::dims{bs, rs, cs});
}

// The user's layouts of a product's operands, and its primitive (B in the layout oneDNN picks
// when `packed`; plus a bias row when `bias`, rank 2 only).
struct MatmulDescs {
  memory::desc a, b, c, bias;
};
MatmulDescs matmul_descs(const Geom& g) {
  const bool any = g.a_batched || g.b_batched;
  return {operand(g.batch, g.a_batched, g.m, g.k, g.ta, any),
          operand(g.batch, g.b_batched, g.k, g.n, g.tb, any),
          any ? memory::desc({g.batch, g.m, g.n}, dt::f32, tag::abc)
              : memory::desc({g.m, g.n}, dt::f32, tag::ab),
          memory::desc({1, g.n}, dt::f32, tag::ab)};
}
dnnl::matmul::primitive_desc matmul_pd(const Geom& g, bool packed, bool bias) {
  const MatmulDescs d = matmul_descs(g);
  const memory::desc w = packed ? memory::desc({g.k, g.n}, dt::f32, tag::any) : d.b;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return {bias ? dnnl::matmul::desc(d.a, w, d.bias, d.c) : dnnl::matmul::desc(d.a, w, d.c), attr,
          dnnl_engine()};
}

// Whether oneDNN runs the product with its brgemm kernel (the packed-bias route's condition).
bool brgemm(const dnnl::matmul::primitive_desc& pd) {
  return std::string_view(pd.impl_info_str()).starts_with("brg");
}

class DnnlProduct final : public Product {
 public:
  /// One primitive per team size in `teams` (TeamVariants: oneDNN fixes its threads when it
  /// makes one). `packed` (not null: B fixed between runs, rank 2, not batched): B kept in the
  /// layout oneDNN picks for it (one copy shared by every product reading it), repacked when
  /// `packed` (the host's writes) moves.
  /// `bias` (not null; packed only): one value per column of C, added by the primitive itself
  /// (not a post-op). `brgemm_only`: throw unless oneDNN's brgemm kernel runs it.
  DnnlProduct(const Geom& g, const void* A, const void* B, const std::vector<int>& teams,
              const std::atomic<std::uint64_t>* packed = nullptr, const float* bias = nullptr,
              bool brgemm_only = false)
      : variants_(teams, [&](int) {
          const bool pack = packed && !(g.a_batched || g.b_batched);
          return make(g, A, B, pack ? packed : nullptr, pack ? bias : nullptr, brgemm_only);
        }) {}

  void run(const ExecCtx& ctx, float* c) override {
    Variant& v = variants_.pick(ctx.nthreads);
    if (v.packed) v.packed->refresh();
    set(v, DNNL_ARG_DST, c);
    if (v.scratch.get_size() > 0) set(v, DNNL_ARG_SCRATCHPAD, ctx.scratch);
    v.prim.execute(dnnl_stream(), v.args);
  }
  std::size_t scratch_bytes() const override {
    std::size_t most = 0;
    for (const auto& [t, v] : variants_.all()) most = std::max(most, v.scratch.get_size());
    return most;
  }

 private:
  struct Variant {
    dnnl::matmul prim;
    memory::desc scratch;
    std::unordered_map<int, memory> args;
    std::shared_ptr<FixedWeights> packed;
  };
  static Variant make(const Geom& g, const void* A, const void* B,
                      const std::atomic<std::uint64_t>* packed, const float* bias,
                      bool brgemm_only) {
    auto& eng = dnnl_engine();
    const MatmulDescs d = matmul_descs(g);
    const auto pd = matmul_pd(g, packed != nullptr, bias != nullptr);
    if (brgemm_only && !brgemm(pd))
      throw dnnl::error(dnnl_unimplemented, "not oneDNN's brgemm matmul here");
    const memory::desc &a_md = d.a, &b_md = d.b, &c_md = d.c;
    // oneDNN's own reference loop is hundreds of times slower than its gemm routes: a layout
    // it gets for one is our bug (see operand()), so the route is not taken (the registry
    // says so under HETGRAPH_LOG_KERNELS, and tests see kernel_name "reference").
    if (std::string_view(pd.impl_info_str()).starts_with("ref"))
      throw dnnl::error(dnnl_unimplemented, "oneDNN has only its reference matmul here");
    Variant v;
    v.prim = dnnl::matmul(pd);
    v.scratch = pd.scratchpad_desc();
    v.args.insert({DNNL_ARG_SRC, memory(a_md, eng, const_cast<void*>(A))});
    const void* weights = B;
    if (packed && pd.weights_desc() != b_md) {
      v.packed = shared_fixed_weights(b_md, pd.weights_desc(), B, packed);
      weights = v.packed->data();
    }
    v.args.insert({DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), eng, const_cast<void*>(weights))});
    if (bias) v.args.insert({DNNL_ARG_BIAS, memory(d.bias, eng, const_cast<float*>(bias))});
    v.args.insert({DNNL_ARG_DST, memory(c_md, eng, DNNL_MEMORY_NONE)});
    if (v.scratch.get_size() > 0)
      v.args.insert({DNNL_ARG_SCRATCHPAD, memory(v.scratch, eng, DNNL_MEMORY_NONE)});
    return v;
  }
  static void set(Variant& v, int arg, void* p) {
    memory& m = v.args.at(arg);
    if (m.get_data_handle() != p) m.set_data_handle(p);
  }
  TeamVariants<Variant> variants_;
};

class SgemmProduct final : public Product {
 public:
  SgemmProduct(const Geom& g, const float* A, const float* B, float beta)
      : g_(g), a_(A), b_(B), beta_(beta) {}
  void run(const ExecCtx&, float* c) override {
    const dnnl_status_t st = dnnl_sgemm(g_.ta ? 'T' : 'N', 'N', g_.m, g_.n, g_.k, 1.0f, a_,
                                        g_.ta ? g_.m : g_.k, b_, g_.n, beta_, c, g_.n);
    if (st != dnnl_success)
      throw PlatformError("dnnl_sgemm failed with status " + std::to_string(st));
  }

 private:
  Geom g_;
  const float* a_;
  const float* b_;
  float beta_;
};

// C = A^T B computed as C^T = B^T A into a buffer, then transposed.
class TransposedProduct final : public Product {
 public:
  TransposedProduct(const Geom& g, const void* A, const void* B, const std::vector<int>& teams)
      : m_(g.m), n_(g.n) {
    ct_.resize(static_cast<std::size_t>(m_ * n_));
    Geom t;
    t.m = g.n;
    t.n = g.m;
    t.k = g.k;
    t.ta = true;  // B stored [K, N], read as B^T
    inner_ = std::make_unique<DnnlProduct>(t, B, A, teams);
  }
  void run(const ExecCtx& ctx, float* c) override {
    inner_->run(ctx, ct_.data());
    for (std::int64_t i = 0; i < m_; ++i) {
      for (std::int64_t j = 0; j < n_; ++j)
        c[i * n_ + j] = ct_[static_cast<std::size_t>(j * m_ + i)];
    }
  }
  std::size_t scratch_bytes() const override { return inner_->scratch_bytes(); }

 private:
  std::int64_t m_, n_;
  std::vector<float> ct_;
  std::unique_ptr<DnnlProduct> inner_;
};

// The shape rules (see the file comment).
const char* reject_sgemm(const Geom& g) {
  if (g.a_batched || g.b_batched) return "batched: the matmul primitive takes batches";
  if (g.tb) return "B transposed: brgemm is faster";
  if (g.n <= 32) return "N <= 32: brgemm is faster for skinny products";
  return nullptr;
}
const char* reject_transposed(const Geom& g) {
  if (g.a_batched || g.b_batched) return "batched";
  if (!g.ta || g.tb) return "only for A transposed, B not";
  if (g.n > 32 || g.m < 4 * g.n) return "only for skinny results (N <= 32, M >= 4N)";
  return nullptr;
}

/// The product route for a geometry (nullptr when oneDNN takes none), and its name; `packed`
/// (not null): B is fixed between runs and kept packed (reject_packed took it).
std::unique_ptr<Product> make_product(const Geom& g, const void* A, const void* B,
                                      const std::vector<int>& teams, std::string_view& name,
                                      const std::atomic<std::uint64_t>* packed = nullptr) {
  if (packed != nullptr) {
    try {
      name = "dnnl_matmul_packed";
      return std::make_unique<DnnlProduct>(g, A, B, teams, packed);
    } catch (const dnnl::error&) {
      return nullptr;
    }
  }
  if (reject_sgemm(g) == nullptr) {
    name = "dnnl_sgemm";
    return std::make_unique<SgemmProduct>(g, static_cast<const float*>(A),
                                          static_cast<const float*>(B), 0.0f);
  }
  try {
    if (reject_transposed(g) == nullptr) {
      name = "dnnl_matmul_transposed";
      return std::make_unique<TransposedProduct>(g, A, B, teams);
    }
    name = "dnnl_matmul";
    return std::make_unique<DnnlProduct>(g, A, B, teams);
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// B fixed between runs (Plan::packed_weights), where the route above would be oneDNN's
// brgemm matmul primitive: given B plain, it copies B into its blocked layout at every call;
// packed once, an LSTM step's [1, 256] x [1024, 256]^T takes 4.9 us instead of 22.0 us and a
// classifier's [1, 1280] x [1000, 1280]^T 65 us instead of 126 us (2 threads, alone). Where
// the GEMM driver (dnnl_sgemm) takes B as it is, a product without a bias keeps the driver:
// packed, it was no faster in whole models (on an Intel Xeon, BERT's [128, 256] x [256, 1024]
// 5-10% slower, GPT-2's one-token products 15%; on the Zen 4 the GPT-2 prompt's logits,
// [64, 256] x [256, 8000], slower in two interleaved rounds of three: bench/README.md, "A
// Linear layer as one packed product"). With a bias, see reject_packed_bias.
const char* reject_packed(const KernelArgs& a) {
  if (!a.plan.packed_weights) return "packed weights are off (CompileOptions)";
  const Geom g = geom(a);
  if (g.a_batched || g.b_batched) return "batched";
  if (reject_sgemm(g) == nullptr) return "the GEMM driver takes B as it is (dnnl_sgemm)";
  if (a.host_writes == nullptr || !fixed_between_runs(a.plan, a.node.inputs[1]))
    return "B may change within a run";
  return nullptr;
}

// ---- matmul ---------------------------------------------------------------------------------

class ProductKernel final : public CpuKernel {
 public:
  ProductKernel(std::unique_ptr<Product> p, float* c) : p_(std::move(p)), c_(c) {}
  void run(const ExecCtx& ctx) override { p_->run(ctx, c_); }
  std::size_t scratch_bytes() const override { return p_->scratch_bytes(); }

 private:
  std::unique_ptr<Product> p_;
  float* c_;
};

// One implementation entry per route, so kernel_name() and HETGRAPH_LOG_KERNELS say which.
template <int Route>
const char* reject_route(const KernelArgs& a) {
  const Geom g = geom(a);
  if constexpr (Route == 0) return reject_sgemm(g);
  if constexpr (Route == 1) return reject_transposed(g);
  return nullptr;
}
template <bool Packed>
std::unique_ptr<CpuKernel> make_matmul(const KernelArgs& a) {
  std::string_view name;
  auto p =
      make_product(geom(a), a.in[0], a.in[1], a.team_sizes, name, Packed ? a.host_writes : nullptr);
  return p ? std::make_unique<ProductKernel>(std::move(p), a.out_f()) : nullptr;
}

// Reference: triple loop with double accumulation, then an optional epilogue and sum.
double apply_epilogue(OpKind epi, float alpha, double s) {
  switch (epi) {
    case OpKind::Exp:
      return std::exp(s);
    case OpKind::Log:
      return std::log(s);
    case OpKind::Sqrt:
      return std::sqrt(s);
    case OpKind::Relu:
      return s <= 0 ? 0 : s;  // NaN stays NaN
    case OpKind::Sigmoid:
      return 1 / (1 + std::exp(-s));
    case OpKind::Tanh:
      return std::tanh(s);
    case OpKind::Scale:
      return s * alpha;
    case OpKind::Neg:
      return -s;
    default:
      return s;
  }
}

std::unique_ptr<CpuKernel> reference(const KernelArgs& a, OpKind epi, float alpha, const float* X,
                                     bool bias = false) {
  const Geom g = geom(a);
  const float* A = a.in_f(0);
  const float* B = a.in_f(1);
  float* C = a.out_f();
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t b = 0; b < g.batch; ++b) {
      const float* Ab = A + (g.a_batched ? b * g.m * g.k : 0);
      const float* Bb = B + (g.b_batched ? b * g.k * g.n : 0);
      for (std::int64_t i = 0; i < g.m; ++i) {
        for (std::int64_t j = 0; j < g.n; ++j) {
          double s = 0.0;
          for (std::int64_t p = 0; p < g.k; ++p) {
            const float av = g.ta ? Ab[p * g.m + i] : Ab[i * g.k + p];
            const float bv = g.tb ? Bb[j * g.k + p] : Bb[p * g.n + j];
            s += static_cast<double>(av) * bv;
          }
          const std::int64_t o = b * g.m * g.n + i * g.n + j;
          s = apply_epilogue(epi, alpha, s);
          C[o] = static_cast<float>(X ? s + X[bias ? j : o] : s);
        }
      }
    }
  });
}
std::unique_ptr<CpuKernel> make_reference(const KernelArgs& a) {
  return reference(a, OpKind::Count_, 1, nullptr);
}

// ---- fused_matmul: epilogue(op(A) op(B)) [+ X] ----------------------------------------------

struct Fused {
  OpKind epilogue = OpKind::Count_;  // Count_: none
  float alpha = 1.0f;
  bool accumulate = false;
  bool bias = false;  // the accumulated input is one value per column (MatmulEpilogue::bias)
};
Fused fused(const KernelArgs& a) {
  Fused f;
  const MatmulEpilogue& e = a.node.attrs.get<MatmulEpilogue>();
  if (e.has_op) f.epilogue = e.op;
  f.alpha = e.alpha;
  f.accumulate = e.accumulate;
  f.bias = e.bias;
  return f;
}

// out = epilogue(p) (+ x), vectorised (the code path's kernels); out may be x.
void epilogue_pass(const Fused& f, const float* p, const float* x, float* out, std::int64_t n) {
  VecFn fn = VecFn::identity;
  switch (f.epilogue) {
    case OpKind::Exp:
      fn = VecFn::exp;
      break;
    case OpKind::Log:
      fn = VecFn::log;
      break;
    case OpKind::Sigmoid:
      fn = VecFn::sigmoid;
      break;
    case OpKind::Tanh:
      fn = VecFn::tanh;
      break;
    case OpKind::Relu:
      fn = VecFn::relu;
      break;
    case OpKind::Scale:
      fn = VecFn::scale;
      break;
    case OpKind::Neg:
      fn = VecFn::neg;
      break;
    case OpKind::Sqrt:
      for (std::int64_t i = 0; i < n; ++i) out[i] = __builtin_sqrtf(p[i]) + (x ? x[i] : 0.0f);
      return;
    default:
      break;
  }
  code_path().map(fn, f.alpha, p, x, out, n);
}

// The product into the executor's scratch (in cache), then one pass: out = epi(P) (+ X).
class EpilogueKernel final : public CpuKernel {
 public:
  EpilogueKernel(const KernelArgs& a, std::unique_ptr<Product> p)
      : p_(std::move(p)),
        f_(fused(a)),
        x_(f_.accumulate ? a.in_f(2) : nullptr),
        out_(a.out_f()),
        n_(geom(a).c_elems()),
        cols_(geom(a).n),
        product_bytes_((static_cast<std::size_t>(n_) * 4 + 63) / 64 * 64) {}

  void run(const ExecCtx& ctx) override {
    auto* prod = static_cast<float*>(ctx.scratch);
    ExecCtx inner = ctx;
    inner.scratch = static_cast<std::byte*>(ctx.scratch) + product_bytes_;
    inner.scratch_bytes = ctx.scratch_bytes - product_bytes_;
    p_->run(inner, prod);
    if (f_.bias) {  // a row of the product at a time, each plus the bias row
      parallel_for(ctx, n_ / cols_, std::max<std::int64_t>(1, kParallelGrain / cols_),
                   [&](std::int64_t b, std::int64_t e) {
                     for (std::int64_t r = b; r < e; ++r)
                       epilogue_pass(f_, prod + r * cols_, x_, out_ + r * cols_, cols_);
                   });
      return;
    }
    parallel_for(ctx, n_, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      epilogue_pass(f_, prod + b, x_ ? x_ + b : nullptr, out_ + b, e - b);
    });
  }
  std::size_t scratch_bytes() const override { return product_bytes_ + p_->scratch_bytes(); }

 private:
  std::unique_ptr<Product> p_;
  Fused f_;
  const float* x_;
  float* out_;
  std::int64_t n_, cols_;
  std::size_t product_bytes_;
};

template <bool Packed>
std::unique_ptr<CpuKernel> make_fused(const KernelArgs& a) {
  std::string_view name;
  auto p =
      make_product(geom(a), a.in[0], a.in[1], a.team_sizes, name, Packed ? a.host_writes : nullptr);
  return p ? std::make_unique<EpilogueKernel>(a, std::move(p)) : nullptr;
}

// A Linear layer (a bias, nothing else after the product) whose B is fixed between runs, where
// oneDNN runs the product with its brgemm kernel: B packed once and the bias added by the
// primitive as it writes C, in place of the GEMM driver (which packs B at every call) after a
// copy of the bias into C, or of a product in scratch and a bias pass. On the 2-core Zen 4,
// product and bias, both routes alternating (median ms, brgemm / driver): [197, 768] x
// [768, 3072] 4.11 / 6.98 (ViT-B/16's MLP), [197, 3072] x [3072, 768] 4.04 / 4.35, [128, 256] x
// [256, 1024] 0.34 / 0.47 (BERT's), [1, 768] x [768, 3072] 0.049 / 0.099 (a GPT-2 token's); of
// 50 shapes (M 1-512, K and N 256-3072) none slower. Where oneDNN has no brgemm matmul (below
// AVX-512) its gemm:jit primitive ran these up to 3.6x slower than the driver: the candidate
// declines there, and the routes below run as before.
const char* reject_packed_bias(const KernelArgs& a) {
  if (!a.plan.packed_weights) return "packed weights are off (CompileOptions)";
  const Fused f = fused(a);
  if (!f.accumulate || !f.bias || f.epilogue != OpKind::Count_) return "not a product plus a bias";
  const Geom g = geom(a);
  if (g.a_batched || g.b_batched) return "batched";
  if (a.host_writes == nullptr || !fixed_between_runs(a.plan, a.node.inputs[1]))
    return "B may change within a run";
  if (a.in[2] == a.out) return "the result lies over the bias";
  return nullptr;
}
std::unique_ptr<CpuKernel> make_packed_bias(const KernelArgs& a) {
  try {
    auto p = std::make_unique<DnnlProduct>(geom(a), a.in[0], a.in[1], a.team_sizes, a.host_writes,
                                           a.in_f(2), true);
    return std::make_unique<ProductKernel>(std::move(p), a.out_f());
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// Plain accumulation through the GEMM driver, beta = 1: C = A B + C in place (X is copied
// into C first when the planner could not put C over X).
const char* reject_sgemm_accumulate(const KernelArgs& a) {
  const Fused f = fused(a);
  if (f.epilogue != OpKind::Count_) return "has an epilogue";
  if (!f.accumulate) return "nothing to accumulate";
  return reject_sgemm(geom(a));
}

// A bias (MatmulEpilogue::bias) is copied into every row of C first: the product then adds
// itself to the bias where it writes, instead of a pass over a product parked in scratch.
std::unique_ptr<CpuKernel> make_sgemm_accumulate(const KernelArgs& a) {
  const Geom g = geom(a);
  auto p = std::make_shared<SgemmProduct>(g, a.in_f(0), a.in_f(1), 1.0f);
  const float* x = a.in_f(2);
  float* c = a.out_f();
  const std::size_t bytes = a.out_type.bytes();
  const bool bias = fused(a).bias;
  const std::int64_t rows = g.c_elems() / g.n, cols = g.n;
  return make_kernel([=](const ExecCtx& ctx) {
    if (bias) {
      parallel_for(ctx, rows, std::max<std::int64_t>(1, kParallelGrain / cols),
                   [&](std::int64_t b, std::int64_t e) {
                     for (std::int64_t r = b; r < e; ++r)
                       std::memcpy(c + r * cols, x, static_cast<std::size_t>(cols) * 4);
                   });
    } else if (x != c) {
      std::memcpy(c, x, bytes);
    }
    p->run(ctx, c);
  });
}

std::unique_ptr<CpuKernel> make_fused_reference(const KernelArgs& a) {
  const Fused f = fused(a);
  return reference(a, f.epilogue, f.alpha, f.accumulate ? a.in_f(2) : nullptr, f.bias);
}

// ---- attention (fuse_attention) -------------------------------------------------------------

// attention(q, kt, v[, mask]): per product and block of query rows, the scores [rows, tk] =
// q kt into the thread's scratch, scaled, masked and exponentiated in place (less the row's
// max), times v into the result, each result row then divided by its exponentials' sum. A block's
// scores stay in cache, where the nodes it replaces passed over every product's [tq, tk] scores
// four times (the product, the scale, the mask, the softmax) and read them once more for the second
// product. Each block's products run one-threaded (dnnl_sgemm inside the team's parallel region),
// so a block's values do not depend on the team.
struct AttentionRun {
  const float *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  float* y = nullptr;
  AttentionGeom g;
  AttentionSpec s;
  static constexpr std::int64_t kMaxBlock = 256;
  std::int64_t block = 1, blocks = 1;  // query rows per block (at most kMaxBlock); per product
  std::int64_t per_thread = 0;         // scratch floats per thread: scores (and scaled q)

  std::int64_t items() const { return g.batch * blocks; }
  static void sgemm(char tb, std::int64_t m, std::int64_t n, std::int64_t kk, const float* a,
                    std::int64_t lda, const float* b, std::int64_t ldb, float* c,
                    std::int64_t ldc) {
    const dnnl_status_t st = dnnl_sgemm('N', tb, m, n, kk, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    if (st != dnnl_success)
      throw PlatformError("attention: dnnl_sgemm failed with status " + std::to_string(st));
  }
  void run(std::int64_t item, float* scratch) const {
    const std::int64_t b = item / blocks, r0 = item % blocks * block;
    const std::int64_t rows = std::min(block, g.tq - r0);
    const float* qb = q + g.q_at(b) + r0 * g.q_ld;
    std::int64_t q_ld = g.q_ld;
    float* sc = scratch;
    if (s.scale_q) {
      float* qs = scratch + block * g.tk;
      for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < g.d; ++j) {
          const float x = qb[i * q_ld + j];
          qs[i * g.d + j] = s.divide ? x / s.scale : x * s.scale;
        }
      }
      qb = qs;
      q_ld = g.d;
    }
    sgemm(g.k_trans ? 'T' : 'N', rows, g.tk, g.d, qb, q_ld, k + g.k_at(b), g.k_ld, sc, g.tk);
    ScoreRows how;
    how.scale = s.scale;
    how.scaled = !s.scale_q && (s.divide || s.scale != 1.0f);
    how.divide = s.divide;
    if (mask != nullptr) {
      how.mask = mask + g.mask_offset(b) + r0 * g.msq;
      how.mask_row = g.msq;
      how.mask_col = g.msk;
    }
    float inv[kMaxBlock];
    const CodePath& path = code_path();
    path.exp_rows(sc, rows, g.tk, how, inv);
    float* yb = y + g.y_at(b) + r0 * g.y_ld;
    sgemm('N', rows, g.dv, g.tk, sc, g.tk, v + g.v_at(b), g.v_ld, yb, g.y_ld);
    // The softmax's division, on the [rows, dv] result instead of the [rows, tk] scores.
    for (std::int64_t i = 0; i < rows; ++i)
      path.map(VecFn::scale, inv[i], yb + i * g.y_ld, nullptr, yb + i * g.y_ld, g.dv);
  }
};

AttentionRun attention_run(const KernelArgs& a) {
  AttentionRun r;
  r.s = a.node.attrs.get<AttentionSpec>();
  const bool masked = a.in.size() == 4;
  r.g = attention_geom(a.in_shape(0), a.in_shape(1), a.in_shape(2),
                       masked ? &a.in_shape(3) : nullptr, r.s);
  r.q = a.in_f(0);
  r.k = a.in_f(1);
  r.v = a.in_f(2);
  r.mask = masked ? a.in_f(3) : nullptr;
  r.y = a.out_f();
  // Scores of a block within 64 KiB (L2's share), 1 to 64 rows.
  r.block = std::clamp<std::int64_t>(65536 / std::max<std::int64_t>(1, r.g.tk), 1,
                                     AttentionRun::kMaxBlock);
  r.block = std::min(r.block, std::max<std::int64_t>(1, r.g.tq));
  r.blocks = (r.g.tq + r.block - 1) / r.block;
  const std::int64_t floats = r.block * r.g.tk + (r.s.scale_q ? r.block * r.g.d : 0);
  r.per_thread = (floats + 15) / 16 * 16;  // 64-byte aligned per thread
  return r;
}

class AttentionKernel final : public CpuKernel {
 public:
  explicit AttentionKernel(const KernelArgs& a) : r_(attention_run(a)) {
    for (int t : a.team_sizes) threads_ = std::max(threads_, t);
    threads_ = std::max(threads_, a.max_threads);
  }
  void run(const ExecCtx& ctx) override {
    if (r_.g.tq == 0 || r_.g.dv == 0) return;
    auto* scratch = static_cast<float*>(ctx.scratch);
    parallel_for_indexed(ctx, r_.items(), 1, [&](std::int64_t t, std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) r_.run(i, scratch + t * r_.per_thread);
    });
  }
  std::size_t scratch_bytes() const override {
    return static_cast<std::size_t>(threads_) * static_cast<std::size_t>(r_.per_thread) * 4;
  }

 private:
  AttentionRun r_;
  int threads_ = 1;
};

std::unique_ptr<CpuKernel> make_attention(const KernelArgs& a) {
  return std::make_unique<AttentionKernel>(a);
}

// Reference: every step in double, one row of scores at a time.
std::unique_ptr<CpuKernel> make_attention_reference(const KernelArgs& a) {
  return make_kernel([r = attention_run(a)](const ExecCtx&) {
    const AttentionGeom& g = r.g;
    std::vector<double> sc(static_cast<std::size_t>(g.tk));
    for (std::int64_t b = 0; b < g.batch; ++b) {
      for (std::int64_t i = 0; i < g.tq; ++i) {
        const float* qr = r.q + g.q_at(b) + i * g.q_ld;
        const float* kb = r.k + g.k_at(b);
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < g.tk; ++j) {
          double s = 0.0;
          for (std::int64_t p = 0; p < g.d; ++p) {
            const float kv = g.k_trans ? kb[j * g.k_ld + p] : kb[p * g.k_ld + j];
            s += static_cast<double>(qr[p]) * kv;
          }
          s = r.s.divide ? s / r.s.scale : s * r.s.scale;
          if (r.mask) s += r.mask[g.mask_offset(b) + i * g.msq + j * g.msk];
          sc[static_cast<std::size_t>(j)] = s;
          mx = std::max(mx, s);
        }
        double sum = 0.0;
        for (double& s : sc) sum += (s = std::exp(s - mx));
        for (std::int64_t c = 0; c < g.dv; ++c) {
          double o = 0.0;
          for (std::int64_t j = 0; j < g.tk; ++j)
            o += sc[static_cast<std::size_t>(j)] * r.v[g.v_at(b) + j * g.v_ld + c];
          r.y[g.y_at(b) + i * g.y_ld + c] = static_cast<float>(o / sum);
        }
      }
    }
  });
}

}  // namespace

bool packed_bias_matmul(std::int64_t m, std::int64_t k, std::int64_t n, bool trans_b) {
  Geom g;
  g.m = m;
  g.k = k;
  g.n = n;
  g.tb = trans_b;
  try {
    return brgemm(matmul_pd(g, true, true));
  } catch (const dnnl::error&) {
    return false;
  }
}

void register_matmul_kernels(KernelRegistry& r) {
  r.add(OpKind::MatMul, {"dnnl_matmul_packed", reject_packed, make_matmul<true>});
  r.add(OpKind::MatMul, {"dnnl_sgemm", reject_route<0>, make_matmul<false>});
  r.add(OpKind::MatMul, {"dnnl_matmul_transposed", reject_route<1>, make_matmul<false>});
  r.add(OpKind::MatMul, {"dnnl_matmul", nullptr, make_matmul<false>});
  r.add(OpKind::MatMul, {"reference", nullptr, make_reference, true});
  r.add(OpKind::FusedMatMul, {"dnnl_matmul_packed_bias", reject_packed_bias, make_packed_bias});
  r.add(OpKind::FusedMatMul, {"packed_then_epilogue", reject_packed, make_fused<true>});
  r.add(OpKind::FusedMatMul,
        {"dnnl_sgemm_accumulate", reject_sgemm_accumulate, make_sgemm_accumulate});
  r.add(OpKind::FusedMatMul, {"product_then_epilogue", nullptr, make_fused<false>});
  r.add(OpKind::FusedMatMul, {"reference", nullptr, make_fused_reference, true});
  r.add(OpKind::Attention, {"blocked_rows", nullptr, make_attention});
  r.add(OpKind::Attention, {"reference", nullptr, make_attention_reference, true});
}

}  // namespace hetgraph::detail::cpu
