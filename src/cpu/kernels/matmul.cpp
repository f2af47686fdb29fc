// Matmul through oneDNN: its GEMM driver or its matmul primitive (2.6 API: desc ->
// primitive_desc) created once at compile time, by the shape rule at reject_sgemm. For the
// primitive, transposes are expressed as strides, batches as a leading dim (a rank-2
// operand is broadcast over the batch). oneDNN caches identical primitives, so thousands of
// same-shape nodes share one implementation. The scratchpad comes from the executor.
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/dnnl_util.hpp"
#include "cpu/kernel.hpp"
#include "cpu/parallel.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Geom {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  bool a_batched = false, b_batched = false;
  bool ta = false, tb = false;
};

Geom geom(const KernelArgs& a) {
  Geom g;
  const Shape& sa = a.in_shape(0);
  const Shape& sb = a.in_shape(1);
  g.ta = a.node.attrs.trans_a;
  g.tb = a.node.attrs.trans_b;
  g.a_batched = sa.rank() == 3;
  g.b_batched = sb.rank() == 3;
  g.batch = g.a_batched ? sa[0] : (g.b_batched ? sb[0] : 1);
  g.m = g.ta ? sa.dim(-1) : sa.dim(-2);
  g.k = g.ta ? sa.dim(-2) : sa.dim(-1);
  g.n = g.tb ? sb.dim(-2) : sb.dim(-1);
  return g;
}

// A logical [rows, cols] operand (batched: [b, rows, cols]) stored row-major either as is or,
// when transposed, as [cols, rows].
memory::desc operand(std::int64_t b, bool batched, std::int64_t rows, std::int64_t cols,
                     bool transposed, bool any_batched) {
  const memory::dim rs = transposed ? 1 : cols, cs = transposed ? rows : 1;
  if (!any_batched) return memory::desc({rows, cols}, dt::f32, memory::dims{rs, cs});
  const memory::dim bs = batched ? rows * cols : 0;
  return memory::desc({batched ? b : 1, rows, cols}, dt::f32, memory::dims{bs, rs, cs});
}

class DnnlMatmul final : public CpuKernel {
 public:
  explicit DnnlMatmul(const KernelArgs& a) : DnnlMatmul(geom(a), a.in[0], a.in[1], a.out) {}

  // C = op(A) op(B) for the geometry g, on memory A, B, C.
  DnnlMatmul(const Geom& g, const void* A, const void* B, void* C) {
    const bool any = g.a_batched || g.b_batched;
    auto& eng = dnnl_engine();
    const memory::desc a_md = operand(g.batch, g.a_batched, g.m, g.k, g.ta, any);
    const memory::desc b_md = operand(g.batch, g.b_batched, g.k, g.n, g.tb, any);
    const memory::desc c_md = any ? memory::desc({g.batch, g.m, g.n}, dt::f32, tag::abc)
                                  : memory::desc({g.m, g.n}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, eng);
    prim_ = dnnl::matmul(pd);
    scratch_md_ = pd.scratchpad_desc();
    args_.insert({DNNL_ARG_SRC, memory(a_md, eng, const_cast<void*>(A))});
    args_.insert({DNNL_ARG_WEIGHTS, memory(b_md, eng, const_cast<void*>(B))});
    args_.insert({DNNL_ARG_DST, memory(c_md, eng, C)});
    if (scratch_md_.get_size() > 0) {
      args_.insert({DNNL_ARG_SCRATCHPAD, memory(scratch_md_, eng, DNNL_MEMORY_NONE)});
    }
  }

  void run(const ExecCtx& ctx) override {
    if (scratch_md_.get_size() > 0) {
      auto& s = args_.at(DNNL_ARG_SCRATCHPAD);
      if (s.get_data_handle() != ctx.scratch) s.set_data_handle(ctx.scratch);
    }
    prim_.execute(dnnl_stream(), args_);
  }

  std::size_t scratch_bytes() const override { return scratch_md_.get_size(); }

 private:
  dnnl::matmul prim_;
  memory::desc scratch_md_;
  std::unordered_map<int, memory> args_;
};

std::unique_ptr<CpuKernel> make_dnnl(const KernelArgs& a) {
  try {
    return std::make_unique<DnnlMatmul>(a);
  } catch (const dnnl::error&) {
    return nullptr;  // shape oneDNN does not take: the next implementation gets it
  }
}

// C = A^T B with a skinny C (N <= 32 columns, many rows): brgemm runs such products at half
// speed (784x500x10: 82 us on 2 threads) but their transpose C^T = B^T A at full speed (44 us;
// MNIST's weight gradient). So compute C^T into a buffer and transpose it (a few us).
class TransposedProduct final : public CpuKernel {
 public:
  explicit TransposedProduct(const KernelArgs& a) {
    const Geom g = geom(a);
    m_ = g.m;
    n_ = g.n;
    ct_.resize(static_cast<std::size_t>(m_ * n_));
    Geom t;
    t.m = g.n;
    t.n = g.m;
    t.k = g.k;
    t.ta = true;  // B stored [K, N], read as B^T
    t.tb = false;
    inner_ = std::make_unique<DnnlMatmul>(t, a.in[1], a.in[0], ct_.data());
    out_ = a.out_f();
  }
  void run(const ExecCtx& ctx) override {
    inner_->run(ctx);
    for (std::int64_t i = 0; i < m_; ++i) {
      for (std::int64_t j = 0; j < n_; ++j)
        out_[i * n_ + j] = ct_[static_cast<std::size_t>(j * m_ + i)];
    }
  }
  std::size_t scratch_bytes() const override { return inner_->scratch_bytes(); }

 private:
  std::int64_t m_ = 0, n_ = 0;
  std::vector<float> ct_;
  std::unique_ptr<DnnlMatmul> inner_;
  float* out_ = nullptr;
};

const char* reject_transposed(const KernelArgs& a) {
  const Geom g = geom(a);
  if (g.a_batched || g.b_batched) return "batched";
  if (!g.ta || g.tb) return "only for A transposed, B not";
  if (g.n > 32 || g.m < 4 * g.n) return "only for skinny results (N <= 32, M >= 4N)";
  return nullptr;
}

std::unique_ptr<CpuKernel> make_transposed(const KernelArgs& a) {
  try {
    return std::make_unique<TransposedProduct>(a);
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// oneDNN's GEMM driver (dnnl_sgemm, row-major). Measured against the brgemm matmul primitive
// on this machine's shapes (1 and 2 threads): the GEMM driver is 5-28% faster for rank-2
// products with B not transposed and N > 32 (200x100x200, LSTM gate GEMMs, M = 1), while
// brgemm is up to 3x faster with B transposed (the driver does not parallelise 'T' here) and
// 30% faster for skinny N (MNIST's 500x784x10). The choice is a fixed rule on shapes, never
// timed at compile time, so results stay bitwise reproducible.
const char* reject_sgemm(const KernelArgs& a) {
  const Geom g = geom(a);
  if (g.a_batched || g.b_batched) return "batched: the matmul primitive takes batches";
  if (g.tb) return "B transposed: brgemm is faster";
  if (g.n <= 32) return "N <= 32: brgemm is faster for skinny products";
  return nullptr;
}

std::unique_ptr<CpuKernel> make_sgemm(const KernelArgs& a) {
  const Geom g = geom(a);
  const float* A = a.in_f(0);
  const float* B = a.in_f(1);
  float* C = a.out_f();
  const char ta = g.ta ? 'T' : 'N';
  const dnnl_dim_t lda = g.ta ? g.m : g.k;
  return make_kernel([=](const ExecCtx&) {
    const dnnl_status_t st = dnnl_sgemm(ta, 'N', g.m, g.n, g.k, 1.0f, A, lda, B, g.n, 0.0f, C, g.n);
    if (st != dnnl_success)
      throw PlatformError("dnnl_sgemm failed with status " + std::to_string(st));
  });
}

// Reference: triple loop with double accumulation.
std::unique_ptr<CpuKernel> make_reference(const KernelArgs& a) {
  const Geom g = geom(a);
  const float* A = a.in_f(0);
  const float* B = a.in_f(1);
  float* C = a.out_f();
  return make_kernel([=](const ExecCtx&) {
    for (std::int64_t b = 0; b < g.batch; ++b) {
      const float* Ab = A + (g.a_batched ? b * g.m * g.k : 0);
      const float* Bb = B + (g.b_batched ? b * g.k * g.n : 0);
      float* Cb = C + b * g.m * g.n;
      for (std::int64_t i = 0; i < g.m; ++i) {
        for (std::int64_t j = 0; j < g.n; ++j) {
          double s = 0.0;
          for (std::int64_t p = 0; p < g.k; ++p) {
            const float av = g.ta ? Ab[p * g.m + i] : Ab[i * g.k + p];
            const float bv = g.tb ? Bb[j * g.k + p] : Bb[p * g.n + j];
            s += static_cast<double>(av) * bv;
          }
          Cb[i * g.n + j] = static_cast<float>(s);
        }
      }
    }
  });
}

}  // namespace

void register_matmul_kernels(KernelTable& t) {
  auto& list = t[static_cast<std::size_t>(OpKind::MatMul)];
  list.push_back({"dnnl_sgemm", reject_sgemm, make_sgemm});
  list.push_back({"dnnl_matmul_transposed", reject_transposed, make_transposed});
  list.push_back({"dnnl_matmul", nullptr, make_dnnl});
  list.push_back({"reference", nullptr, make_reference});
}

}  // namespace hetgraph::detail::cpu
