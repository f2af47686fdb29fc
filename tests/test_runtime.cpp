// SPDX-License-Identifier: Apache-2.0
// Compiled graphs at run time: sync and async runs, mapped inputs, reads and writes,
// variables, determinism, the CPU's code path.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "common/executable.hpp"
#include "cpu/kernel.hpp"
#include "cpu/kernels/winograd.hpp"
#include "cpu/simd/code_path.hpp"
#include "test_util.hpp"

using namespace hetgraph;

namespace {

// A small MLP with a softmax head: enough ops to make determinism and async meaningful.
struct Mlp {
  Graph g;
  Node x, W1, b1, W2, p, loss;
  explicit Mlp(int hidden = 64) {
    x = g.input("x");
    auto y = g.input("y");
    W1 = g.variable("W1", {32, hidden}, Initializer::normal(0, 0.2f, 1));
    b1 = g.variable("b1", {hidden}, Initializer::fill(0.01f));
    W2 = g.variable("W2", {hidden, 10}, Initializer::normal(0, 0.2f, 2));
    auto h = tanh(matmul(x, W1) + b1);
    p = softmax(matmul(h, W2));
    loss = reduce_mean(cross_entropy(p, y));
  }
  InputShapes shapes(int batch) const { return {{"x", {batch, 32}}, {"y", {batch, 10}}}; }
};

std::vector<float> one_hot(int rows, int classes) {
  std::vector<float> v(static_cast<std::size_t>(rows * classes), 0.0f);
  for (int r = 0; r < rows; ++r) v[static_cast<std::size_t>(r * classes + r % classes)] = 1.0f;
  return v;
}

TEST(Runtime, AsyncRunMatchesSyncRun) {
  Mlp m;
  auto cg = GraphCompiler().compile(m.g, m.shapes(256), {m.loss, m.p});
  const auto xv = testing_util::random_vec(256 * 32, 3), yv = one_hot(256, 10);
  cg.run({{"x", xv}, {"y", yv}});
  const auto sync = cg.read(m.p);
  cg.run_async({{"x", xv}, {"y", yv}});
  cg.wait();
  EXPECT_TRUE(testing_util::bitwise_equal(cg.read(m.p), sync));
  // a read while a run is in flight waits for it
  cg.run_async({{"x", xv}, {"y", yv}});
  EXPECT_TRUE(testing_util::bitwise_equal(cg.read(m.p), sync));
  cg.wait();
  // a second run_async waits for the first
  cg.run_async({{"x", xv}, {"y", yv}});
  cg.run_async({{"x", xv}, {"y", yv}});
  cg.wait();
  cg.wait();  // nothing in flight: returns at once
  EXPECT_TRUE(testing_util::bitwise_equal(cg.read(m.p), sync));
}

// Feeds written as braced lists (floats, int32, doubles), vectors of doubles, std::arrays and C
// arrays run as the same values in float and int32 vectors do. (Another element type, such as
// int64, does not compile: Feed's static_assert names the types it takes.)
TEST(Runtime, BracedListsAndDoublesAreFeeds) {
  Graph g;
  auto x = g.input("x"), ids = g.input("ids", DType::i32);
  auto y = gather(x, ids, 0) * 2.0f;
  auto cg = GraphCompiler().compile(g, {{"x", {3}}, {"ids", {2}}}, {y});
  const std::vector<float> want{3.0f, 1.0f};
  cg.run({{"x", {0.5f, 1.5f, -2.0f}}, {"ids", {1, 0}}});
  EXPECT_EQ(cg.read(y), want);
  cg.run({{"x", {0.5, 1.5, -2.0}}, {"ids", {-2, 0}}});
  EXPECT_EQ(cg.read(y), want);
  const std::vector<double> xs{0.5, 1.5, -2.0};
  cg.run({{"x", xs}, {"ids", {1, -3}}});
  EXPECT_EQ(cg.read(y), want);
  // Any contiguous range of those types: std::array, C arrays.
  const std::array<float, 3> xa{0.5f, 1.5f, -2.0f};
  const std::array<std::int32_t, 2> ia{1, 0};
  cg.run({{"x", xa}, {"ids", ia}});
  EXPECT_EQ(cg.read(y), want);
  const double xc[3] = {0.5, 1.5, -2.0};
  const std::int32_t ic[2] = {-2, 0};
  cg.run({{"x", xc}, {"ids", ic}});
  EXPECT_EQ(cg.read(y), want);
  // A list of the other type is a FeedError naming the input.
  EXPECT_THROW(cg.run({{"x", {1, 2, 3}}, {"ids", {1, 0}}}), FeedError);
}

TEST(Runtime, MappedInputsAreNotCopied) {
  Mlp m;
  auto cg = GraphCompiler().compile(m.g, m.shapes(64), {m.loss});
  const auto xv = testing_util::random_vec(64 * 32, 4), yv = one_hot(64, 10);
  cg.run({{"x", xv}, {"y", yv}});
  const float copied_loss = cg.read(m.loss)[0];
  const auto before = detail::executable_of(cg).feed_bytes_copied();
  EXPECT_EQ(before, (64u * 32 + 64 * 10) * 4);

  std::span<float> xb = cg.mapped_input("x"), yb = cg.mapped_input("y");
  ASSERT_EQ(xb.size(), 64u * 32);
  std::copy(xv.begin(), xv.end(), xb.begin());
  std::copy(yv.begin(), yv.end(), yb.begin());
  cg.run({{"x", xb}, {"y", yb}});
  EXPECT_EQ(detail::executable_of(cg).feed_bytes_copied(), before);  // nothing copied
  EXPECT_EQ(cg.read(m.loss)[0], copied_loss);
  // mapped buffers survive runs: run again without rewriting them
  cg.run({{"x", xb}, {"y", yb}});
  EXPECT_EQ(cg.read(m.loss)[0], copied_loss);
}

TEST(Runtime, ReadAndWriteVariablesAndInputs) {
  Mlp m;
  auto cg = GraphCompiler().compile(m.g, m.shapes(8), {m.loss, m.p});
  auto b1 = cg.read(m.b1);
  EXPECT_EQ(b1, std::vector<float>(64, 0.01f));
  std::vector<float> zeros(32 * 64, 0.0f);
  cg.write(m.W1, zeros);
  cg.write("b1", std::vector<float>(64, 0.0f));
  EXPECT_EQ(cg.read("W1"), zeros);
  const auto xv = testing_util::random_vec(8 * 32, 5), yv = one_hot(8, 10);
  cg.run({{"x", xv}, {"y", yv}});
  // hidden layer is tanh(0) = 0, so logits are 0 and the softmax uniform
  for (float v : cg.read(m.p)) EXPECT_FLOAT_EQ(v, 0.1f);
  EXPECT_NEAR(cg.read(m.loss)[0], std::log(10.0f), 1e-6);
  EXPECT_EQ(cg.read(m.x), xv);  // inputs keep their values
}

TEST(Runtime, HundredRerunsAreBitwiseIdentical) {
  for (const auto& pc : testing_util::platforms()) {
    Mlp m(200);
    auto cg = GraphCompiler(pc.make()).compile(m.g, m.shapes(500), {m.loss, m.p});
    const auto xv = testing_util::random_vec(500 * 32, 6), yv = one_hot(500, 10);
    cg.run({{"x", xv}, {"y", yv}});
    const auto first = cg.read(m.p);
    const auto first_loss = cg.read(m.loss);
    for (int i = 0; i < 100; ++i) {
      cg.run({{"x", xv}, {"y", yv}});
      ASSERT_TRUE(testing_util::bitwise_equal(cg.read(m.p), first)) << pc.name << " rerun " << i;
      ASSERT_TRUE(testing_util::bitwise_equal(cg.read(m.loss), first_loss)) << pc.name;
    }
    // and a second compilation of the same graph gives the same bits
    auto cg2 = GraphCompiler(pc.make()).compile(m.g, m.shapes(500), {m.loss, m.p});
    cg2.run({{"x", xv}, {"y", yv}});
    EXPECT_TRUE(testing_util::bitwise_equal(cg2.read(m.p), first)) << pc.name;
  }
}

TEST(Runtime, KernelNamesAreReported) {
  Mlp m;
  auto cg = GraphCompiler().compile(m.g, m.shapes(8), {m.loss});
  auto g2 = m.g.find("W1");
  (void)g2;
  EXPECT_EQ(cg.kernel_name(m.p), "blocked_rows");
  EXPECT_EQ(cg.kernel_name(m.x), "none");
}

TEST(Runtime, CompiledGraphsAreIndependent) {
  Graph g;
  auto c = g.variable("c", {});
  auto step = assign(c, c + 1.0f);
  auto a = GraphCompiler().compile(g, {}, {step});
  auto b = GraphCompiler().compile(g, {}, {step});
  a.run();
  a.run();
  b.run();
  EXPECT_EQ(a.read(c)[0], 2.0f);
  EXPECT_EQ(b.read(c)[0], 1.0f);
  CompiledGraph moved = std::move(a);
  moved.run();
  EXPECT_EQ(moved.read(c)[0], 3.0f);
}

}  // namespace

namespace {
TEST(Runtime, MatmulImplementationFollowsTheShapeRule) {
  Graph g;
  auto a = g.input("a"), b = g.input("b"), bt = g.input("bt"), s = g.input("s");
  auto square = matmul(a, b);                      // GEMM driver
  auto transposed_b = matmul(a, bt, false, true);  // brgemm primitive
  auto skinny = matmul(a, s);                      // N = 10: brgemm primitive
  auto cg = GraphCompiler().compile(
      g, {{"a", {64, 100}}, {"b", {100, 200}}, {"bt", {200, 100}}, {"s", {100, 10}}},
      {square, transposed_b, skinny});
  EXPECT_EQ(cg.kernel_name(square), "dnnl_sgemm");
  EXPECT_EQ(cg.kernel_name(transposed_b), "dnnl_matmul");
  EXPECT_EQ(cg.kernel_name(skinny), "dnnl_matmul");
}

// Weights fixed between runs (variables nothing in the graph assigns) that the brgemm
// primitive would take (B transposed) are packed once, shared by the products reading them,
// and repacked after the host writes them; products on the GEMM driver, on inputs, and on a
// variable the graph updates keep their routes. Results match the unpacked kernels' within
// rounding, before and after the write.
TEST(Runtime, FixedWeightsArePackedOnceAndAfterEachHostWrite) {
  Graph g;
  auto a = g.input("a"), bt = g.input("bt");
  auto w = g.variable("w", {40, 64}), wn = g.variable("wn", {64, 200}),
       u = g.variable("u", {40, 64});
  auto y1 = matmul(a, w, false, true);
  auto y2 = sigmoid(matmul(relu(a), w, false, true));  // fused_matmul, the same packed copy
  auto y3 = matmul(a, bt, false, true);                // an input: changes every run
  auto y4 = matmul(a, wn);                             // GEMM driver
  auto y5 = matmul(a, u, false, true);                 // read before the graph updates u
  auto upd = assign(u, scale(u, 0.5f));
  const InputShapes shapes{{"a", {3, 64}}, {"bt", {40, 64}}};
  const std::vector<Node> fetches{y1, y2, y3, y4, y5, upd};
  const auto av = testing_util::random_vec(3 * 64, 21), btv = testing_util::random_vec(40 * 64, 22);
  const auto w1 = testing_util::random_vec(40 * 64, 23), w2 = testing_util::random_vec(40 * 64, 24);
  const auto wnv = testing_util::random_vec(64 * 200, 25);
  auto product = [&](const std::vector<float>& x, const std::vector<float>& m, bool relu_x) {
    std::vector<float> r(3 * 40);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 40; ++j) {
        double t = 0;
        for (int k = 0; k < 64; ++k) {
          const float xv = x[static_cast<std::size_t>(i * 64 + k)];
          t += static_cast<double>(relu_x ? std::max(xv, 0.0f) : xv) *
               m[static_cast<std::size_t>(j * 64 + k)];
        }
        r[static_cast<std::size_t>(i * 40 + j)] = static_cast<float>(t);
      }
    return r;
  };
  auto near = [](const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
  };
  std::vector<float> results[2];
  for (bool packed : {false, true}) {
    SCOPED_TRACE(packed ? "packed" : "plain");
    CompileOptions o;
    o.experimental.packed_weights = packed;
    auto cg = GraphCompiler(Platform::cpu(), o).compile(g, shapes, fetches);
    EXPECT_EQ(cg.kernel_name(y1), packed ? "dnnl_matmul_packed" : "dnnl_matmul");
    EXPECT_EQ(cg.kernel_name(y3), "dnnl_matmul");
    EXPECT_EQ(cg.kernel_name(y4), "dnnl_sgemm");
    EXPECT_EQ(cg.kernel_name(y5), "dnnl_matmul");
    cg.write(wn, wnv);
    for (const auto* wv : {&w1, &w2}) {
      cg.write(w, *wv);
      cg.write(u, *wv);
      cg.run({{"a", av}, {"bt", btv}});
      near(cg.read(y1), product(av, *wv, false));
      std::vector<float> s = product(av, *wv, true);
      for (float& v : s) v = 1.0f / (1.0f + std::exp(-v));
      near(cg.read(y2), s);
      near(cg.read(y3), product(av, btv, false));
      std::vector<float> y4v(3 * 200);  // a [3, 64] x [64, 200]
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 200; ++j) {
          double t = 0;
          for (int k = 0; k < 64; ++k)
            t += static_cast<double>(av[static_cast<std::size_t>(i * 64 + k)]) *
                 wnv[static_cast<std::size_t>(k * 200 + j)];
          y4v[static_cast<std::size_t>(i * 200 + j)] = static_cast<float>(t);
        }
      near(cg.read(y4), y4v);
      near(cg.read(y5), product(av, *wv, false));
      const std::vector<float> y1v = cg.read(y1);
      results[packed].insert(results[packed].end(), y1v.begin(), y1v.end());
    }
    cg.run({{"a", av}, {"bt", btv}});  // u was halved by the last run: y5 reads that
    std::vector<float> half = w2;
    for (float& v : half) v *= 0.5f;
    near(cg.read(y5), product(av, half, false));
  }
  near(results[1], results[0]);
}

// Feeding inputs is not a write of weights: packed copies of fixed weights (a convolution's,
// a product's) stay as they are across runs fed through run(feeds), and are reordered again
// only after the host writes a variable. (Every feed used to count as a host write: a CNN
// run through run(feeds) reordered all its weights at every run, 4-5x the time of a
// mobilenet_v3_small at batch 1.)
TEST(Runtime, FeedsDoNotRepackFixedWeights) {
  Graph g;
  auto x = g.input("x"), a = g.input("a");
  auto w = g.variable("w", {8, 4, 3, 3}), m = g.variable("m", {16, 32});
  auto y = conv2d(x, w, Conv2dOptions{.padding = {1, 1}});
  auto z = matmul(a, m, false, true);
  const auto xv = testing_util::random_vec(2 * 4 * 10 * 10, 51);
  const auto av = testing_util::random_vec(3 * 32, 52), mv = testing_util::random_vec(16 * 32, 53);
  auto cg =
      GraphCompiler(Platform::cpu()).compile(g, {{"x", {2, 4, 10, 10}}, {"a", {3, 32}}}, {y, z});
  cg.run({{"x", xv}, {"a", av}});  // the first run packs
  const std::vector<float> y0 = cg.read(y);
  const std::uint64_t packed = detail::cpu::fixed_weight_reorders();
  for (int r = 0; r < 3; ++r) cg.run({{"x", xv}, {"a", av}});
  EXPECT_EQ(detail::cpu::fixed_weight_reorders(), packed);
  EXPECT_EQ(cg.read(y), y0);
  cg.write(m, mv);  // a host write: the next run packs again
  cg.run({{"x", xv}, {"a", av}});
  EXPECT_GT(detail::cpu::fixed_weight_reorders(), packed);
}

// Bias adds after products (a Linear layer's: one value per column) run in the product's
// kernel on the CPU: straight after a 2-d product (Gemm), through the reshape back from an
// imported 3-d MatMul's 2-d product, and with B transposed (the product, then one pass);
// results equal the separate add's within rounding on every platform.
TEST(Runtime, MatmulBiasAddsRunInTheProduct) {
  Graph g;
  auto a = g.input("a"), w = g.input("w"), wt = g.input("wt"), b = g.input("b");
  // 48 columns: the GEMM driver's route (skinnier products take brgemm's).
  auto y2 = add(matmul(reshape(a, {10, 16}), w), b);
  auto y3 = add(reshape(matmul(reshape(a, {10, 16}), w), {2, 5, 48}), b);
  auto yt = add(b, matmul(reshape(a, {10, 16}), wt, false, true));
  const std::vector<Node> ys{y2, y3, yt};
  const InputShapes shapes{{"a", {2, 5, 16}}, {"w", {16, 48}}, {"wt", {48, 16}}, {"b", {48}}};
  const auto av = testing_util::random_vec(160, 41), wv = testing_util::random_vec(16 * 48, 42),
             wtv = testing_util::random_vec(48 * 16, 43), bv = testing_util::random_vec(48, 44);
  const std::vector<FeedItem> feeds{{"a", av}, {"w", wv}, {"wt", wtv}, {"b", bv}};
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    std::vector<std::vector<float>> out[2];
    for (const bool fused : {false, true}) {
      CompileOptions o;
      o.experimental.matmul_bias = fused;
      auto cg = GraphCompiler(pc.make(), o).compile(g, shapes, ys);
      cg.run(feeds);
      for (Node y : ys) out[fused].push_back(cg.read(y));
      if (pc.name.rfind("cpu", 0) == 0 && !testing_util::cpu_reference_forced()) {
        int adds = 0;
        for (const auto& n : detail::executable_of(cg).plan().nodes)
          adds += n.op == detail::OpKind::Add && n.fused_into < 0 &&
                  n.storage == detail::Storage::Computed;
        EXPECT_EQ(adds, fused ? 0 : 3);
        if (fused) {
          EXPECT_EQ(cg.kernel_name(y2), "dnnl_sgemm_accumulate");
          EXPECT_EQ(cg.kernel_name(y3), "dnnl_sgemm_accumulate");
          EXPECT_EQ(cg.kernel_name(yt), "product_then_epilogue");
        }
      }
    }
    for (std::size_t k = 0; k < ys.size(); ++k) {
      ASSERT_EQ(out[1][k].size(), out[0][k].size());
      for (std::size_t i = 0; i < out[0][k].size(); ++i)
        ASSERT_NEAR(out[1][k][i], out[0][k][i], 1e-5 * (1 + std::fabs(out[0][k][i])))
            << "output " << k << " at " << i;
    }
  }
}

// A Linear layer whose weights are fixed between runs (a variable), B stored either way, runs
// as one oneDNN brgemm primitive with B packed and the bias added as it writes, where oneDNN
// has that kernel on this CPU (the predicate the kernel list asks); results equal the separate
// add's within rounding on every platform, and follow host writes of the weights and the bias.
TEST(Runtime, LinearLayersWithFixedWeightsRunPackedWithTheirBias) {
  Graph g;
  auto a = g.input("a");
  auto w = g.variable("w", {16, 48}), wt = g.variable("wt", {48, 16}), b = g.variable("b", {48});
  auto y = add(matmul(a, w), b);
  auto yt = add(b, matmul(a, wt, false, true));
  const std::vector<Node> ys{y, yt};
  const auto av = testing_util::random_vec(10 * 16, 61);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    std::vector<float> out[2][2];
    for (const bool fused : {false, true}) {
      CompileOptions o;
      o.experimental.matmul_bias = fused;
      auto cg = GraphCompiler(pc.make(), o).compile(g, {{"a", {10, 16}}}, ys);
      if (fused && pc.name.rfind("cpu", 0) == 0 && !testing_util::cpu_reference_forced()) {
        const bool packed = detail::cpu::packed_bias_matmul(10, 16, 48, false);
        EXPECT_EQ(packed, detail::cpu::packed_bias_matmul(10, 16, 48, true));
        EXPECT_EQ(cg.kernel_name(y), packed ? "dnnl_matmul_packed_bias" : "dnnl_sgemm_accumulate");
        EXPECT_EQ(cg.kernel_name(yt), packed ? "dnnl_matmul_packed_bias" : "packed_then_epilogue");
      }
      for (int r = 0; r < 2; ++r) {  // new weights and bias before each run
        cg.write(w, testing_util::random_vec(16 * 48, 62 + r));
        cg.write(wt, testing_util::random_vec(48 * 16, 64 + r));
        cg.write(b, testing_util::random_vec(48, 66 + r));
        cg.run({{"a", av}});
        if (r == 0) continue;
        for (int k = 0; k < 2; ++k) out[fused][k] = cg.read(ys[static_cast<std::size_t>(k)]);
      }
    }
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(out[1][k].size(), 10u * 48u);
      ASSERT_EQ(out[1][k].size(), out[0][k].size());
      for (std::size_t i = 0; i < out[0][k].size(); ++i)
        ASSERT_NEAR(out[1][k][i], out[0][k][i], 1e-5 * (1 + std::fabs(out[0][k][i])))
            << "output " << k << " at " << i;
    }
  }
}

// A batch times a shared matrix (either side, either transposed, batches of 1 and 4) runs on
// a oneDNN gemm route. Its shared operand once had batch stride 0, a layout oneDNN 2.6 runs
// only with its reference loop (400-900x slower): such a route is refused, so this fails as
// "reference".
TEST(Runtime, BatchedProductsWithASharedOperandTakeAFastRoute) {
  for (const std::int64_t batch : {1, 4}) {
    for (const bool shared_b : {true, false}) {
      for (const bool transposed : {false, true}) {
        SCOPED_TRACE(std::to_string(batch) + (shared_b ? " shared B" : " shared A") +
                     (transposed ? " transposed" : ""));
        Graph g;
        auto a = g.input("a"), b = g.input("b");
        auto y = shared_b ? matmul(a, b, false, transposed) : matmul(a, b, transposed, false);
        const Shape batched{batch, 48, 64}, shared = transposed ? Shape{40, 64} : Shape{64, 40};
        const Shape shared_a = transposed ? Shape{64, 48} : Shape{48, 64};
        auto cg = GraphCompiler().compile(
            g,
            {{"a", shared_b ? batched : shared_a}, {"b", shared_b ? shared : Shape{batch, 64, 40}}},
            {y});
        EXPECT_EQ(cg.kernel_name(y), "dnnl_matmul");
      }
    }
  }
}
// ---- variable initialisation and memory ----------------------------------------------------

// The initialisers as they were first written (one vector for the whole variable): what the
// chunked writer must reproduce bit for bit.
std::vector<float> reference_initial_values(const Initializer& in, std::size_t n) {
  auto splitmix64 = [](std::uint64_t& s) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto unit = [&](std::uint64_t& s) {
    return (static_cast<double>(splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  };
  std::vector<float> v(n, 0.0f);
  std::uint64_t s = in.seed;
  switch (in.kind) {
    case Initializer::Kind::zeros:
      break;
    case Initializer::Kind::fill:
      std::fill(v.begin(), v.end(), in.a);
      break;
    case Initializer::Kind::uniform:
      for (float& x : v) x = static_cast<float>(in.a + (in.b - in.a) * unit(s));
      break;
    case Initializer::Kind::values:
      v = *in.data;
      break;
    case Initializer::Kind::normal:
      for (std::size_t i = 0; i < n; i += 2) {
        const double r = std::sqrt(-2.0 * std::log(unit(s))), t = 6.283185307179586 * unit(s);
        v[i] = static_cast<float>(in.a + in.b * r * std::cos(t));
        if (i + 1 < n) v[i + 1] = static_cast<float>(in.a + in.b * r * std::sin(t));
      }
      break;
  }
  return v;
}

TEST(Variables, InitialValuesAreTheSameBitsOnEveryPlatform) {
  // Odd sizes over several of the writer's chunks (normal values come in pairs).
  const std::int64_t big = 3 * (1 << 20) + 12345;
  const struct {
    Initializer init;
    std::int64_t n;
  } cases[] = {
      {Initializer::uniform(-0.5f, 0.25f, 7), big},
      {Initializer::normal(0.1f, 2.0f, 9), big},
      {Initializer::normal(0, 1, 3), 1},
      {Initializer::fill(0.375f), big},
      {Initializer::zeros(), big},
      {Initializer::values(testing_util::random_vec(static_cast<std::size_t>(big), 5)), big}};
  for (const auto& pc : testing_util::platforms()) {
    if (pc.name == "cpu_seq_2t" || pc.name == "cpu_shared_queue_2x1") continue;
    Graph g;
    std::vector<Node> vars;
    for (const auto& c : cases)
      vars.push_back(g.variable("v" + std::to_string(vars.size()), {c.n}, c.init));
    auto cg = GraphCompiler(pc.make()).compile(g, {}, vars);
    for (std::size_t i = 0; i < vars.size(); ++i) {
      const auto want =
          reference_initial_values(cases[i].init, static_cast<std::size_t>(cases[i].n));
      EXPECT_TRUE(testing_util::bitwise_equal(cg.read(vars[i]), want))
          << pc.name << " variable " << i;
    }
  }
}

// Initialising a variable costs its own memory, not a second full-size copy (before: a
// 256 MiB variable peaked at 512 MiB more).
TEST(Variables, InitialisingAVariableNeedsNoFullSizeCopy) {
  const std::int64_t n = 64 << 20;  // 256 MiB
  const long mib = 1024;
  for (const auto& pc : testing_util::platforms()) {
    if (pc.name != "cpu_seq_1t" && pc.name != "opencl") continue;
    Graph g;
    auto W = g.variable("W", {n}, Initializer::uniform(-1, 1, 5));
    testing_util::reset_peak_rss();
    const long before = testing_util::peak_rss_kib();
    auto cg = GraphCompiler(pc.make()).compile(g, {}, {W});
    EXPECT_LT(testing_util::peak_rss_kib() - before, 256 * mib * 3 / 2) << pc.name << " KiB";
  }
}

// A variable larger than the machine is a PlatformError naming it and its size, never
// std::bad_alloc or the OOM killer.
TEST(Variables, MoreThanTheMachineHoldsIsAPlatformError) {
  for (const auto& pc : testing_util::platforms()) {
    if (pc.name != "cpu_seq_1t" && pc.name != "cpu_critical_path_2x1") continue;
    for (std::int64_t n : {std::int64_t{1} << 40, std::int64_t{1} << 33}) {
      Graph g;
      auto W = g.variable("huge_W", {n}, Initializer::uniform(-1, 1, 5));
      auto y = reduce_sum(W);
      std::string msg;
      try {
        GraphCompiler(pc.make()).compile(g, {}, {y});
        msg = "(no error)";
      } catch (const PlatformError& e) {
        msg = e.what();
      } catch (const std::exception& e) {
        msg = std::string("not a PlatformError: ") + e.what();
      }
      EXPECT_NE(msg.find("huge_W"), std::string::npos) << pc.name << ": " << msg;
      EXPECT_NE(msg.find(std::to_string(n * 4)), std::string::npos) << pc.name << ": " << msg;
      EXPECT_NE(msg.find("available"), std::string::npos) << pc.name << ": " << msg;
    }
  }
}

// ---- the code path of the own vector kernels (src/cpu/simd/code_path.hpp) ---------------------

// The highest level the CPU and HETGRAPH_MAX_CPU_ISA allow, worked out here from the CPU's
// feature bits: what the dispatch must have chosen (ctest runs this once more with the cap).
TEST(CodePath, IsTheHighestLevelTheCpuAndTheCapAllow) {
  const detail::cpu::CodePath& p = detail::cpu::code_path();
  if (std::string(p.level) == "native") GTEST_SKIP() << "a HETGRAPH_NATIVE build has one path";
  __builtin_cpu_init();
  const int cpu = __builtin_cpu_supports("x86-64-v4")   ? 4
                  : __builtin_cpu_supports("x86-64-v3") ? 3
                                                        : 2;
  const char* cap = std::getenv("HETGRAPH_MAX_CPU_ISA");
  const int level = std::min(
      {cpu, detail::cpu::code_path_cap(cap ? cap : ""), detail::cpu::code_path_top()});
  EXPECT_EQ(std::string(p.level), "x86-64-v" + std::to_string(level)) << p.name;
  EXPECT_EQ(p.lanes, level == 4 ? 16 : level == 3 ? 8 : 4) << p.name;
  EXPECT_EQ(detail::cpu::own_winograd_available(), level >= 3) << p.name;
  EXPECT_EQ(detail::cpu::own_winograd_min_tiles(), level == 4   ? 192
                                                   : level == 3 ? 16
                                                                : 0)
      << p.name;
}

TEST(CodePath, TheCapTakesEveryNameAndRefusesOthers) {
  using detail::cpu::code_path_cap;
  EXPECT_EQ(code_path_cap(""), 4);
  EXPECT_EQ(code_path_cap("x86-64-v4"), 4);
  EXPECT_EQ(code_path_cap("AVX512"), 4);
  EXPECT_EQ(code_path_cap("x86-64-v3"), 3);
  EXPECT_EQ(code_path_cap("avx2"), 3);
  EXPECT_EQ(code_path_cap("X86-64-V2"), 2);
  EXPECT_EQ(code_path_cap("sse41"), 2);
  for (const char* bad : {"avx3", "x86-64-v5", " avx2", "2"}) {
    std::string msg;
    try {
      code_path_cap(bad);
    } catch (const PlatformError& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("HETGRAPH_MAX_CPU_ISA=\"" + std::string(bad) + "\""), std::string::npos)
        << bad << ": " << msg;
  }
}

TEST(CodePath, TheEngineReportNamesIt) {
  Mlp m;
  auto cg = GraphCompiler().compile(m.g, m.shapes(8), {m.p});
  const EngineReport r = cg.engine_report();
  ASSERT_TRUE(r.cpu);
  EXPECT_EQ(r.cpu->code_path, detail::cpu::code_path().name);
  EXPECT_FALSE(r.cpu->code_path.empty());
}

// A scalar call is the vector code on one element: the same bits at every position of every
// length (full vectors and the padded tail), and close to libm's.
TEST(CodePath, ScalarAndVectorMathGiveTheSameBits) {
  const detail::cpu::CodePath& p = detail::cpu::code_path();
  std::vector<float> x = testing_util::random_vec(64, 5, -20.0f, 20.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special{0.0f, -0.0f, 1e-40f, 88.0f, 89.0f, -87.0f, -104.0f, inf, -inf,
                                   std::numeric_limits<float>::quiet_NaN(), 1.0f, 0.5f};
  std::copy(special.begin(), special.end(), x.begin() + 3);
  for (int n = 1; n <= 3 * p.lanes + 1; ++n) {
    std::vector<float> e(static_cast<std::size_t>(n)), l(static_cast<std::size_t>(n));
    p.map(detail::cpu::VecFn::exp, 1.0f, x.data(), nullptr, e.data(), n);
    p.map(detail::cpu::VecFn::log, 1.0f, x.data(), nullptr, l.data(), n);
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      EXPECT_TRUE(testing_util::bitwise_equal({e[k]}, {detail::cpu::vec_exp(x[k])})) << x[k];
      EXPECT_TRUE(testing_util::bitwise_equal({l[k]}, {detail::cpu::vec_log(x[k])})) << x[k];
      if (std::isfinite(x[k]) && std::abs(x[k]) < 80.0f) {
        EXPECT_NEAR(e[k], std::exp(x[k]), 2e-7f * std::exp(x[k])) << x[k];
      }
      if (x[k] > 1e-30f && std::isfinite(x[k])) {
        EXPECT_NEAR(l[k], std::log(x[k]), 2e-7f * std::max(1.0f, std::abs(std::log(x[k])))) << x[k];
      }
    }
  }
}

}  // namespace

namespace {
// now_s() times runs of a microsecond and less (hetgraph-run, tool::time_runs). A clock read as
// seconds since 1970 in a double steps by 2^-22 s (0.24 us): every difference of two readings
// is a multiple of that. One that keeps the nanoseconds gives differences that are not.
TEST(Timer, NowKeepsNanoseconds) {
  constexpr double kEpochStep = 0x1p-22;
  int finer = 0;
  for (int i = 0; i < 2000; ++i) {
    const double a = hetgraph::now_s(), b = hetgraph::now_s();
    if (b > a && std::fmod(b - a, kEpochStep) != 0.0) ++finer;
  }
  EXPECT_GT(finer, 0) << "every step between two readings is a multiple of 2^-22 s";
}
}  // namespace
