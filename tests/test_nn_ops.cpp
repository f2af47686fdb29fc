// SPDX-License-Identifier: Apache-2.0
// Convolution, pooling and embedding on every platform: forward against the double-precision
// reference over strides, paddings (symmetric and not), dilations, odd and 1-sized shapes and
// sizes large enough for blocked layouts and parallel paths; the max-pooling argmax path;
// embedding lookups of any index rank, out-of-range indices and the deterministic scatter-add.
// Gradients are checked in test_autodiff.cpp, shape errors in test_errors.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <tuple>

#include "common/executable.hpp"
#include "cpu/kernel.hpp"
#include "cpu/kernels/winograd.hpp"
#include "hetgraph/autodiff.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using testing_util::In;
using testing_util::PlatformCase;

namespace {

using testing_util::cpu_reference_forced;
#define SKIP_IF_REFERENCE_FORCED() \
  if (cpu_reference_forced()) GTEST_SKIP() << "HETGRAPH_CPU_REFERENCE forces reference kernels"

In rand_in(const std::string& name, Shape s, std::uint32_t seed, float lo = -1.0f,
           float hi = 1.0f) {
  return {name, s, testing_util::random_vec(static_cast<std::size_t>(s.numel()), seed, lo, hi)};
}

class NnOpTest : public ::testing::TestWithParam<PlatformCase> {
 protected:
  bool on_cpu() const { return GetParam().name.rfind("cpu", 0) == 0; }
  // The graph run with the rewrite behind `flag` off ([0]) and on ([1]): each fetch's values,
  // and how many nodes of `kinds` each plan holds.
  struct Switched {
    std::vector<std::vector<float>> out[2];
    int nodes[2] = {0, 0};
  };
  Switched run_switched(const Graph& g, const std::vector<In>& ins,
                        const std::vector<Node>& fetches, bool CompileOptions::Experimental::*flag,
                        const std::vector<detail::OpKind>& kinds) const {
    InputShapes shapes;
    std::vector<FeedItem> feeds;
    for (const In& in : ins) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    Switched r;
    for (const bool on : {false, true}) {
      CompileOptions o;
      o.experimental.*flag = on;
      auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, fetches);
      cg.run(feeds);
      for (const Node& n : fetches) r.out[on].push_back(cg.read(n));
      for (const auto& n : detail::executable_of(cg).plan().nodes)
        r.nodes[on] += static_cast<int>(std::count(kinds.begin(), kinds.end(), n.op));
    }
    return r;
  }
  // The rewrite behind `flag`: no node of `kinds` with it off, `fused` with it on, the
  // fetches the same either way (bitwise for rtol 0, else within rtol), and (`planner`)
  // bitwise with the planner on and off.
  void expect_rewrite(const Graph& g, const std::vector<In>& ins, const std::vector<Node>& fetches,
                      bool CompileOptions::Experimental::*flag,
                      const std::vector<detail::OpKind>& kinds, int fused, double rtol,
                      bool planner = true) const {
    const Switched r = run_switched(g, ins, fetches, flag, kinds);
    EXPECT_EQ(r.nodes[0], 0) << GetParam().name;
    EXPECT_EQ(r.nodes[1], fused) << GetParam().name;
    expect_same(r, rtol);
    if (planner) testing_util::run_checked(GetParam(), g, ins, fetches);
  }
  // Each of `forms` graphs of one input x, build(form, g, x) -> {y, inner}, becomes one `kind`
  // node for y within float rounding (z = y + x fetched), and keeps its nodes with inner
  // fetched (the gelu_nodes rewrites).
  template <class Build>
  void expect_unary_forms(int forms, Build build, detail::OpKind kind, std::uint32_t seed) const {
    for (int form = 0; form < forms; ++form) {
      for (const bool fetch_inner : {false, true}) {
        SCOPED_TRACE("form " + std::to_string(form) + (fetch_inner ? ", inner fetched" : ""));
        Graph g;
        auto x = g.input("x");
        const auto [y, inner] = build(form, g, x);
        std::vector<Node> fetches{add(y, x)};
        if (fetch_inner) fetches.push_back(inner);
        const std::vector<In> ins{rand_in("x", {3, 5, 67}, seed, -6, 6)};
        expect_rewrite(g, ins, fetches, &CompileOptions::Experimental::gelu_nodes, {kind},
                       fetch_inner ? 0 : 1, 2e-6);
      }
    }
  }
  // Each fetch the same with the rewrite off and on: bitwise (rtol 0), or within rtol.
  static void expect_same(const Switched& r, double rtol) {
    for (std::size_t k = 0; k < r.out[0].size(); ++k) {
      ASSERT_EQ(r.out[1][k].size(), r.out[0][k].size());
      for (std::size_t e = 0; e < r.out[0][k].size(); ++e) {
        const float want = r.out[0][k][e];
        if (rtol == 0) {
          ASSERT_EQ(r.out[1][k][e], want) << "fetch " << k << ", element " << e;
        } else {
          ASSERT_NEAR(r.out[1][k][e], want, rtol * (1 + std::fabs(want)))
              << "fetch " << k << ", element " << e;
        }
      }
    }
  }
  void check(const Graph& g, const std::vector<In>& ins, Node out, double rtol, double atol,
             const std::string& what) {
    testing_util::check_against_reference(GetParam(), g, ins, out, rtol, atol, what);
    // A platform kernel that could not be made falls back to the reference, which would pass
    // the comparison above: the op under test must have got a real kernel.
    if (!cpu_reference_forced()) {
      InputShapes shapes;
      for (const In& in : ins) shapes.push_back({in.name, in.shape});
      auto cg = GraphCompiler(GetParam().make()).compile(g, shapes, {out});
      EXPECT_NE(cg.kernel_name(out), "reference") << what << " on " << GetParam().name;
    }
  }
};

struct ConvCase {
  Shape x;  // [N, C, H, W]
  std::int64_t out_channels, kh, kw;
  Conv2dOptions opts;
  bool bias;
};

std::string describe(const ConvCase& c) {
  auto p = [](std::array<int, 2> v) {
    return "(" + std::to_string(v[0]) + "," + std::to_string(v[1]) + ")";
  };
  return "conv2d x" + c.x.str() + " O=" + std::to_string(c.out_channels) + " k" +
         std::to_string(c.kh) + "x" + std::to_string(c.kw) + " s" + p(c.opts.stride) + " p" +
         p(c.opts.padding) + "/" + p(c.opts.padding_end) + " d" + p(c.opts.dilation) +
         (c.bias ? " bias" : "");
}

TEST_P(NnOpTest, Conv2dForward) {
  const ConvCase cases[] = {
      {{1, 1, 1, 1}, 1, 1, 1, {}, false},
      {{2, 3, 5, 5}, 4, 3, 3, {}, true},
      {{2, 3, 7, 6}, 5, 3, 3, {.padding = {1, 1}}, true},
      {{1, 2, 9, 8}, 3, 3, 2, {.stride = {2, 3}, .padding = {1, 0}}, false},
      {{2, 4, 11, 10}, 6, 3, 3, {.padding = {2, 2}, .dilation = {2, 2}}, true},
      {{1, 3, 10, 9}, 2, 3, 3, {.stride = {2, 2}, .padding = {0, 1}, .padding_end = {2, 0}}, true},
      {{3, 5, 6, 6}, 7, 1, 1, {}, true},                    // 1x1
      {{1, 2, 4, 5}, 3, 6, 7, {.padding = {1, 1}}, false},  // kernel = padded input
      {{2, 1, 13, 1}, 2, 5, 1, {.stride = {3, 1}, .dilation = {2, 1}}, true},  // a column
      {{4, 16, 17, 19}, 32, 3, 3, {.padding = {1, 1}}, true},                  // blocked layouts
      {{2, 32, 12, 12}, 16, 5, 5, {.stride = {2, 2}, .padding = {2, 2}}, false},
      {{2, 3, 32, 32}, 16, 7, 7, {.stride = {2, 2}, .padding = {3, 3}}, true},  // a stem
  };
  for (const ConvCase& c : cases) {
    Graph g;
    auto x = g.input("x"), w = g.input("w"), b = g.input("b");
    Node y = c.bias ? conv2d(x, w, b, c.opts) : conv2d(x, w, c.opts);
    const std::int64_t taps = c.x[1] * c.kh * c.kw;
    std::vector<In> ins{rand_in("x", c.x, 1),
                        rand_in("w", {c.out_channels, c.x[1], c.kh, c.kw}, 2)};
    if (c.bias) ins.push_back(rand_in("b", {c.out_channels}, 3));
    check(g, ins, y, 1e-5, 2e-6 * std::sqrt(static_cast<double>(taps)) + 1e-6, describe(c));
  }
}

TEST_P(NnOpTest, Conv2dKernelIsOneDnn) {
  SKIP_IF_REFERENCE_FORCED();
  if (!on_cpu()) GTEST_SKIP() << "oneDNN kernels are the CPU platform's";
  Graph g;
  auto x = g.input("x"), w = g.input("w");
  auto y = conv2d(x, w, {.padding = {1, 1}});
  auto cg = GraphCompiler(GetParam().make())
                .compile(g, {{"x", {2, 16, 8, 8}}, {"w", {16, 16, 3, 3}}}, {y});
  EXPECT_EQ(cg.kernel_name(y), "dnnl_conv");
}

// Conv post-op fusion (fuse_conv_residual, fuse_conv_epilogue): small nets on random data
// give the same results with the passes on and off, on every platform, and the fused node
// runs one kernel (oneDNN's convolution with post-ops on the CPU, conv.cl's fused_conv2d_fwd
// on OpenCL). Off is the oracle: every node by itself.
TEST_P(NnOpTest, ConvPostOpsEqualOnAndOff) {
  struct Net {
    std::string what;
    std::function<Node(Node, Node, Node, Node, Node)> build;  // (x, w1, b1, w2, b2)
    bool fuses;                                               // the output node is fused
  };
  const Conv2dOptions same{.padding = {1, 1}};
  const std::vector<Net> nets = {
      {"relu(conv + b)",
       [&](Node x, Node w, Node b, Node, Node) { return relu(conv2d(x, w, b, same)); }, true},
      {"clip(conv, 0, 6)",
       [&](Node x, Node w, Node, Node, Node) { return clip(conv2d(x, w, same), 0.0f, 6.0f); },
       true},
      {"leaky_relu(conv + b)",
       [&](Node x, Node w, Node b, Node, Node) { return leaky_relu(conv2d(x, w, b, same), 0.1f); },
       true},
      {"sigmoid(conv + b)",
       [&](Node x, Node w, Node b, Node, Node) { return sigmoid(conv2d(x, w, b, same)); }, true},
      // SiLU as ONNX exports it (EfficientNet): one silu node (fuse_silu), then the post-op.
      {"silu(conv + b)",
       [&](Node x, Node w, Node b, Node, Node) {
         Node c = conv2d(x, w, b, same);
         return mul(c, sigmoid(c));
       },
       true},
      {"hard_swish(conv + b)",
       [&](Node x, Node w, Node b, Node, Node) { return hard_swish(conv2d(x, w, b, same)); }, true},
      // ResNet's basic block: relu(conv(relu(conv(x))) + x), the residual on either side.
      {"resnet block",
       [&](Node x, Node w1, Node b1, Node w2, Node b2) {
         return relu(add(conv2d(relu(conv2d(x, w1, b1, same)), w2, b2, same), x));
       },
       true},
      {"resnet block, residual first",
       [&](Node x, Node w1, Node b1, Node w2, Node b2) {
         return relu(add(x, conv2d(relu(conv2d(x, w1, b1, same)), w2, b2, same)));
       },
       true},
      {"residual only",
       [&](Node x, Node w, Node b, Node, Node) { return add(conv2d(x, w, b, same), x); }, true},
      // The residual is the convolution's own (computed) image: the planner must not put the
      // output over it (the kernel still reads it).
      {"residual is the image",
       [&](Node x, Node w, Node b, Node, Node) {
         Node h = relu(x);
         return add(conv2d(h, w, b, same), h);
       },
       true},
      // A reshape between them (ConvPostOpsReachThroughAReshape checks the kernel).
      {"relu(reshape(conv))",
       [&](Node x, Node w, Node b, Node, Node) {
         return relu(reshape(conv2d(x, w, b, same), {2, 16, 72}));
       },
       false},
      // Broadcast adds are no residual: the add runs by itself.
      {"broadcast add",
       [&](Node x, Node w, Node, Node, Node b2) {
         return add(conv2d(x, w, same), reshape(b2, {16, 1, 1}));
       },
       false},
  };
  for (const Net& net : nets) {
    Graph g;
    auto x = g.input("x"), w1 = g.input("w1"), b1 = g.input("b1"), w2 = g.input("w2"),
         b2 = g.input("b2");
    Node y = net.build(x, w1, b1, w2, b2);
    const std::vector<In> ins{rand_in("x", {2, 16, 9, 8}, 31), rand_in("w1", {16, 16, 3, 3}, 32),
                              rand_in("b1", {16}, 33), rand_in("w2", {16, 16, 3, 3}, 34),
                              rand_in("b2", {16}, 35)};
    InputShapes shapes;
    std::vector<FeedItem> feeds;
    for (const In& in : ins) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    std::vector<float> results[2];
    for (bool on : {false, true}) {
      CompileOptions o;
      o.experimental.conv_post_ops = on;
      auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, {y});
      cg.run(feeds);
      results[on] = cg.read(y);
      const bool fused = on && net.fuses;
      const char* kernel = on_cpu() ? "dnnl_conv_post_ops" : "cl_conv_direct_fused";
      if (!cpu_reference_forced() || !on_cpu()) {
        EXPECT_EQ(cg.kernel_name(y) == kernel, fused) << net.what;
      }
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    for (std::size_t i = 0; i < results[0].size(); ++i) {
      ASSERT_NEAR(results[1][i], results[0][i], 1e-5 * (1 + std::fabs(results[0][i])))
          << net.what << " at " << i << " on " << GetParam().name;
    }
    // And against the double-precision reference (fusion on: the default).
    check(g, ins, y, 1e-5, 1e-4, net.what);
  }
}

// A reshape between a convolution and its activation (a 1-d convolution runs as [N, C, 1, W]
// and comes back as [N, C, W]) does not keep them apart: the activation runs in the
// convolution's kernel and the reshape stays a view (its values: ConvPostOpsEqualOnAndOff's
// "relu(reshape(conv))").
TEST_P(NnOpTest, ConvPostOpsReachThroughAReshape) {
  Graph g;
  auto x = g.input("x"), w = g.input("w");
  Node c = conv2d(x, w, {.stride = {1, 2}});
  Node y = relu(reshape(c, {2, 8, 7}));
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", {2, 3, 1, 16}}, {"w", {8, 3, 1, 3}}},
                                                     {y});
  cg.run({{"x", testing_util::random_vec(96, 41)}, {"w", testing_util::random_vec(72, 42)}});
  EXPECT_EQ(cg.shape(y), (Shape{2, 8, 7}));
  const char* kernel = on_cpu() ? "dnnl_conv_post_ops" : "cl_conv_direct_fused";
  if (!cpu_reference_forced() || !on_cpu()) {
    EXPECT_EQ(cg.kernel_name(c), kernel);
  }
}

// Graph statistics (the engines' guideline) count each fused convolution once: the nodes fused
// into it do no work and must not widen the graph (they have no dependencies left).
TEST(NnKernels, FusedConvolutionsCountOnceInGraphStatistics) {
  Graph g;
  auto x = g.input("x"), w = g.input("w");
  Node y = x;
  for (int i = 0; i < 3; ++i) y = relu(conv2d(y, w, {.padding = {1, 1}}));
  auto cg =
      GraphCompiler(Platform::cpu()).compile(g, {{"x", {1, 8, 6, 6}}, {"w", {8, 8, 3, 3}}}, {y});
  const EngineReport r = cg.engine_report();
  EXPECT_EQ(r.heavy_nodes, 3u);
  EXPECT_EQ(r.max_width, 1);
  EXPECT_EQ(r.avg_width, 1);
}

// assign_layouts: values between convolutions stay in oneDNN's layout on the CPU, and through
// max pooling, channel concat and spatial reductions too. Small nets give the same results with
// the pass on and off (within float rounding: the layouts may pick other kernels), bitwise with
// layouts_through_pool_concat on and off (the max pooling and concat kernels compute the same
// values in either layout), planner on and off bitwise (run_checked), and on the CPU some value
// is kept out of NCHW exactly where every reader takes it so.
TEST_P(NnOpTest, ConvLayoutsEqualOnAndOff) {
  const Conv2dOptions same{.padding = {1, 1}};
  struct Net {
    std::string what;
    // (x, w1, w2, w3, w4): fetches
    std::function<std::vector<Node>(Node, Node, Node, Node, Node)> build;
    int kept;  // values kept out of NCHW on a CPU whose convolutions compute in another layout
    int kept_through;  // the same with the layout passed through pooling, concat and reductions
    // Results bitwise equal with and without the pass-through (reductions sum in another order
    // over channels-last or blocked memory: equal within rounding only).
    bool through_bitwise = true;
  };
  auto inception = [&](Node x, Node w1, Node w2, Node w3, Node w4, bool avg) {
    Node r = relu(conv2d(x, w3));
    Node a = relu(conv2d(r, w2, same));
    Node p = max_pool2d(relu(conv2d(x, w1, same)),
                        {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}});
    Node c = concat({a, p}, 1);
    Node p2 = max_pool2d(c, {.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true});
    std::vector<Node> ys{conv2d(c, w4), conv2d(p2, w4)};
    if (avg) ys.push_back(avg_pool2d(c, {.kernel = {2, 2}}));
    return ys;
  };
  const std::vector<Net> nets = {
      // ResNet: conv -> relu -> conv + residual -> relu, twice; the block output feeds a
      // convolution and a residual.
      {"two resnet blocks",
       [&](Node x, Node w1, Node w2, Node, Node) {
         Node h = relu(conv2d(x, w1, same));
         Node b1 = relu(add(conv2d(relu(conv2d(h, w1, same)), w2, same), h));
         return std::vector<Node>{relu(add(conv2d(relu(conv2d(b1, w1, same)), w2, same), b1))};
       },
       4, 4},
      // Inception: a 1x1 reduction into a 3x3 (kept), beside a branch into pooling and a
      // concat (plain).
      {"inception branches",
       [&](Node x, Node w1, Node w2, Node w3, Node) {
         Node r = relu(conv2d(x, w3));
         Node a = relu(conv2d(r, w2, same));
         Node p = max_pool2d(relu(conv2d(x, w1, same)),
                             {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}});
         return std::vector<Node>{concat({a, p}, 1)};
       },
       1, 1},
      // googlenet's inception: branches (one through a max pooling) concatenated, into a
      // convolution and into a ceil_mode pooling that feeds one; and the same with the concat
      // also read by an average pooling, which takes NCHW only: the concat and its branches
      // are plain then (the 1x1 reduction into the 3x3 is still kept).
      {"inception into convolutions",
       [&](Node x, Node w1, Node w2, Node w3, Node w4) {
         return inception(x, w1, w2, w3, w4, false);
       },
       1, 6},
      {"inception into an average pooling",
       [&](Node x, Node w1, Node w2, Node w3, Node w4) {
         return inception(x, w1, w2, w3, w4, true);
       },
       1, 1},
      // ONNX's GlobalAveragePool before a classifier: two reductions over W then H read the
      // convolution's value in its layout (the first gives that layout, the second one pixel
      // per channel, plain), then Flatten and Gemm.
      {"global average pool into a classifier",
       [&](Node x, Node w1, Node, Node, Node w4) {
         Node h = relu(conv2d(x, w1, same));
         Node gap = reduce_mean(reduce_mean(h, 3, true), 2, true);
         return std::vector<Node>{matmul(reshape(gap, {2, 16}), reshape(w4, {16, 32}))};
       },
       0, 2, false},
      // A pooling whose reader is not a convolution keeps its input plain.
      {"pooling into a graph output",
       [&](Node x, Node w1, Node, Node, Node) {
         Node h = relu(conv2d(x, w1, same));
         return std::vector<Node>{max_pool2d(h, {.kernel = {2, 2}})};
       },
       0, 0},
      // A value a user fetches stays plain even between convolutions.
      {"fetched intermediate",
       [&](Node x, Node w1, Node w2, Node, Node) {
         Node h = relu(conv2d(x, w1, same));
         return std::vector<Node>{h, conv2d(h, w2, same)};
       },
       0, 0},
  };
  for (const Net& net : nets) {
    Graph g;
    auto x = g.input("x"), w1 = g.input("w1"), w2 = g.input("w2"), w3 = g.input("w3"),
         w4 = g.input("w4");
    const std::vector<Node> ys = net.build(x, w1, w2, w3, w4);
    const std::vector<In> ins{rand_in("x", {2, 16, 9, 8}, 51), rand_in("w1", {16, 16, 3, 3}, 52),
                              rand_in("w2", {16, 16, 3, 3}, 53), rand_in("w3", {16, 16, 1, 1}, 54),
                              rand_in("w4", {16, 32, 1, 1}, 55)};
    InputShapes shapes;
    std::vector<FeedItem> feeds;
    for (const In& in : ins) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    // 0: layouts off, 1: on (through pool and concat off), 2: on (the default).
    std::vector<std::vector<float>> results[3];
    for (int on : {0, 1, 2}) {
      CompileOptions o;
      o.experimental.blocked_layouts = on > 0;
      o.experimental.layouts_through_pool_concat = on == 2;
      // Their rounding: WinogradConvolutionsMatchTheDirectOnes,
      // OwnWinogradMatchesTheDirectKernels.
      o.winograd_convs = false;
      o.experimental.own_winograd = false;
      auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, ys);
      cg.run(feeds);
      for (Node y : ys) results[on].push_back(cg.read(y));
      int kept = 0;
      for (const auto& n : detail::executable_of(cg).plan().nodes)
        kept += n.layout != detail::ActivationLayout::nchw;
      const detail::ActivationLayout layout = detail::cpu::conv_activation_layout();
      const bool cpu_layout =
          on_cpu() && !cpu_reference_forced() && layout != detail::ActivationLayout::nchw;
      const bool through = on == 2;
      EXPECT_EQ(kept, on > 0 && cpu_layout ? (through ? net.kept_through : net.kept) : 0)
          << net.what << " (" << on << ") on " << GetParam().name;
    }
    for (std::size_t k = 0; k < ys.size(); ++k) {
      if (net.through_bitwise) {
        EXPECT_EQ(results[2][k], results[1][k]) << net.what << " output " << k;
      }
    }
    for (int on : {1, 2}) {
      for (std::size_t k = 0; k < ys.size(); ++k) {
        for (std::size_t i = 0; i < results[0][k].size(); ++i) {
          ASSERT_NEAR(results[on][k][i], results[0][k][i], 1e-5 * (1 + std::fabs(results[0][k][i])))
              << net.what << " (" << on << ") output " << k << " at " << i << " on "
              << GetParam().name;
        }
      }
    }
    testing_util::run_checked(GetParam(), g, ins, ys);  // planner on and off, bitwise
  }
}

// fuse_layer_norm: LayerNorm as ONNX exports before opset 17 write it (pow or a product for
// the square; a row of 45, not a multiple of 8) becomes one layer_norm node on every platform,
// with the nine nodes' results within float rounding; a fetched intermediate keeps the nine.
TEST_P(NnOpTest, LayerNormNodesEqualTheDecomposedOnes) {
  for (const bool square_by_pow : {true, false}) {
    for (const bool fetch_inner : {false, true}) {
      SCOPED_TRACE(std::string(square_by_pow ? "pow" : "mul") + (fetch_inner ? ", fetched" : ""));
      Graph g;
      auto x = g.input("x"), gamma = g.input("gamma"), beta = g.input("beta");
      Node m = reduce_mean(x, -1, true);
      Node d = sub(x, m);
      Node sq = square_by_pow ? pow(d, g.constant(2.0f)) : mul(d, d);
      Node sd = sqrt(add(reduce_mean(sq, -1, true), g.constant(1e-5f)));
      Node y = add(mul(div(d, sd), gamma), beta);
      Node z = relu(y);
      std::vector<Node> fetches{z};
      if (fetch_inner) fetches.push_back(d);
      const std::vector<In> ins{rand_in("x", {3, 4, 45}, 91), rand_in("gamma", {45}, 92),
                                rand_in("beta", {45}, 93)};
      expect_rewrite(g, ins, fetches, &CompileOptions::Experimental::layer_norm_nodes,
                     {detail::OpKind::LayerNorm}, fetch_inner ? 0 : 1, 2e-5);
    }
  }
}

// gelu_nodes: GELU as exports before opset 20 write it, in three association orders (PyTorch's,
// Hugging Face's, and with a product by 1 / sqrt 2), becomes one gelu node whose values equal
// the five nodes' within float rounding; a fetched erf keeps the five nodes.
TEST_P(NnOpTest, GeluNodesEqualTheDecomposedOnes) {
  auto build = [](int form, Graph& g, Node x) {
    Node e = erf(form == 2 ? mul(x, g.constant(0.70710678f)) : div(x, g.constant(1.41421356f)));
    if (form == 0) return std::pair{mul(mul(x, add(e, g.constant(1.0f))), g.constant(0.5f)), e};
    if (form == 1) return std::pair{mul(mul(x, g.constant(0.5f)), add(g.constant(1.0f), e)), e};
    return std::pair{mul(add(e, g.constant(1.0f)), mul(g.constant(0.5f), x)), e};
  };
  expect_unary_forms(3, build, detail::OpKind::Gelu, 131);
}

// gelu_nodes, the tanh form: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) as GPT-2's
// gelu_new writes it (pow(x, 3)) and as PyTorch exports approximate="tanh" (x (x x), other
// orders) becomes one gelu_tanh node within float rounding; a fetched tanh keeps the nodes.
TEST_P(NnOpTest, GeluTanhNodesEqualTheDecomposedOnes) {
  auto build = [](int form, Graph& g, Node x) {
    auto k = [&](float v) { return g.constant(v); };
    Node cube = form == 0 ? pow(x, k(3.0f)) : form == 1 ? mul(x, mul(x, x)) : mul(mul(x, x), x);
    Node u = form == 1 ? add(mul(k(0.044715f), cube), x) : add(x, mul(cube, k(0.044715f)));
    Node t = tanh(form == 1 ? mul(k(0.7978845608f), u) : mul(u, k(0.7978845608f)));
    Node y =
        form == 1 ? mul(k(0.5f), mul(x, add(k(1.0f), t))) : mul(mul(k(0.5f), x), add(t, k(1.0f)));
    return std::pair{y, t};
  };
  expect_unary_forms(3, build, detail::OpKind::GeluTanh, 151);
}

// attention_nodes: the attention block as exports write it becomes one attention node whose
// values equal the nodes' within float rounding: BERT's (rank 4 through reshapes, a division by
// sqrt(d) that is not a power of two), ViT's (rank 3, the scale on q), GPT-2's (a causal mask
// over [Tq, Tk], a division by a power of two), a broadcast [B, 1, 1, Tk] mask with k
// transposed by the product and a product by a constant, and no scale or mask at all; a
// fetched softmax keeps the nodes.
TEST_P(NnOpTest, AttentionNodesEqualTheDecomposedOnes) {
  for (int form = 0; form < 5; ++form) {
    for (const bool fetch_inner : {false, true}) {
      SCOPED_TRACE("form " + std::to_string(form) + (fetch_inner ? ", softmax fetched" : ""));
      Graph g;
      const bool masked = form == 2 || form == 3;
      auto q = g.input("q"), k = g.input("k"), v = g.input("v");
      Node mask = masked ? g.input("mask") : q;
      auto c = [&](float f) { return g.constant(f); };
      // Rank 4 [2, 3, T, d] as importers write it: the products on [6, T, d] views.
      auto r3 = [](Node x, std::int64_t a, std::int64_t b) { return reshape(x, {6, a, b}); };
      Node s, p, y;
      if (form == 1) {  // ViT: [6, 5, 8] x [6, 8, 7], q scaled
        s = matmul(div(q, c(4.0f)), k);
        p = softmax(s, -1);
        y = matmul(p, v);
      } else if (form == 4) {  // plain
        s = matmul(q, k);
        p = softmax(s, -1);
        y = matmul(p, v);
      } else {
        const bool trans = form == 3;
        Node s4 = reshape(matmul(r3(q, 5, 8), r3(k, trans ? 7 : 8, trans ? 8 : 7), false, trans),
                          {2, 3, 5, 7});
        if (form == 0) s = div(s4, c(2.828427f));
        if (form == 2) s = add(div(s4, c(8.0f)), mask);
        if (form == 3) s = add(mul(c(0.3f), s4), mask);
        p = softmax(s, -1);
        y = reshape(matmul(r3(p, 5, 7), r3(v, 7, 4)), {2, 3, 5, 4});
      }
      std::vector<Node> fetches{add(y, c(1.0f))};
      if (fetch_inner) fetches.push_back(p);
      const bool rank3 = form == 1 || form == 4;
      auto dims = [&](std::int64_t a, std::int64_t b) {
        return rank3 ? Shape{6, a, b} : Shape{2, 3, a, b};
      };
      const Shape mask_shape = form == 3 ? Shape{2, 1, 1, 7} : Shape{5, 7};
      std::vector<In> ins{rand_in("q", dims(5, 8), 171, -2, 2),
                          rand_in("k", form == 3 ? dims(7, 8) : dims(8, 7), 172, -2, 2),
                          rand_in("v", dims(7, 4), 173)};
      if (masked) ins.push_back(rand_in("mask", mask_shape, 174, -3, 0));
      expect_rewrite(g, ins, fetches, &CompileOptions::Experimental::attention_nodes,
                     {detail::OpKind::Attention}, fetch_inner ? 0 : 1, 3e-5);
    }
  }
}

// attention_transposes: the transposes that move the heads axis before T and back around the
// block (BERT's at rank 4 through reshapes, ViT's at rank 3, k both as k^T and as k for a
// product transposing it) fold into the attention node, which then reads the [.., T, H, d]
// values and writes the [.., Tq, H, dv] one: no transpose runs, the values equal the unfolded
// node's within float rounding; a transpose read elsewhere too keeps all four.
TEST_P(NnOpTest, AttentionNodesReadTheHeadsInPlace) {
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE("form " + std::to_string(form));
    const bool rank3 = form == 1, trans = form == 2, shared = form == 3;
    Graph g;
    auto xq = g.input("xq"), xk = g.input("xk"), xv = g.input("xv");
    const std::vector<int> first = rank3 ? std::vector<int>{1, 0, 2} : std::vector<int>{0, 2, 1, 3};
    Node q = transpose(xq, first), v = transpose(xv, first);
    Node k = trans
                 ? transpose(xk, first)
                 : transpose(xk, rank3 ? std::vector<int>{1, 2, 0} : std::vector<int>{0, 2, 3, 1});
    auto r3 = [&](Node x, std::int64_t a, std::int64_t b) {
      return rank3 ? x : reshape(x, {6, a, b});
    };
    Node s = matmul(r3(q, 5, 8), trans ? r3(k, 7, 8) : r3(k, 8, 7), false, trans);
    if (!rank3) s = reshape(s, {2, 3, 5, 7});
    Node p = softmax(div(s, g.constant(2.828427f)), -1);
    Node y = matmul(r3(p, 5, 7), r3(v, 7, 4));
    if (!rank3) y = reshape(y, {2, 3, 5, 4});
    std::vector<Node> fetches{add(transpose(y, first), g.constant(1.0f))};
    if (shared) fetches.push_back(q);
    auto dims = [&](std::int64_t t, std::int64_t c) {
      return rank3 ? Shape{t, 6, c} : Shape{2, t, 3, c};
    };
    const std::vector<In> ins{rand_in("xq", dims(5, 8), 181, -2, 2),
                              rand_in("xk", dims(7, 8), 182, -2, 2),
                              rand_in("xv", dims(7, 4), 183)};
    InputShapes shapes;
    std::vector<FeedItem> feeds;
    for (const In& in : ins) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    std::vector<float> out[2];
    for (const bool on : {false, true}) {
      CompileOptions o;
      o.experimental.attention_transposes = on;
      auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, fetches);
      cg.run(feeds);
      out[on] = cg.read(fetches[0]);
      int transposes = 0, attention = 0;
      for (const auto& n : detail::executable_of(cg).plan().nodes) {
        if (n.storage == detail::Storage::None) continue;
        transposes += n.op == detail::OpKind::Transpose ? 1 : 0;
        attention += n.op == detail::OpKind::Attention ? 1 : 0;
      }
      EXPECT_EQ(attention, 1) << GetParam().name << (on ? ", folded" : "");
      EXPECT_EQ(transposes, on && !shared ? 0 : 4) << GetParam().name << (on ? ", folded" : "");
    }
    ASSERT_EQ(out[1].size(), out[0].size());
    for (std::size_t e = 0; e < out[0].size(); ++e)
      ASSERT_NEAR(out[1][e], out[0][e], 3e-5 * (1 + std::fabs(out[0][e]))) << "element " << e;
  }
}

// channel_affine: an inference BatchNormalization as the importer writes it where it cannot
// fold it into a convolution (mul by a [C, 1, 1] scale, add a [C, 1, 1] shift), with and
// without the relu after it, scale and shift in either operand order and as [1, C, 1, 1],
// becomes one channel_affine node whose values equal the nodes' bitwise; a fetched product
// keeps the nodes.
TEST_P(NnOpTest, ChannelAffineNodesEqualTheDecomposedOnes) {
  for (int form = 0; form < 3; ++form) {
    for (const bool fetch_inner : {false, true}) {
      SCOPED_TRACE("form " + std::to_string(form) + (fetch_inner ? ", product fetched" : ""));
      Graph g;
      auto x = g.input("x"), s = g.input("s"), t = g.input("t");
      Node m = form == 1 ? mul(s, x) : mul(x, s);
      Node a = form == 1 ? add(t, m) : add(m, t);
      Node y = form == 2 ? a : relu(a);
      Node z = add(y, x);
      std::vector<Node> fetches{z};
      if (fetch_inner) fetches.push_back(m);
      const Shape cs = form == 2 ? Shape{1, 6, 1, 1} : Shape{6, 1, 1};
      const std::vector<In> ins{rand_in("x", {2, 6, 5, 7}, 141, -2, 2), rand_in("s", cs, 142),
                                rand_in("t", cs, 143)};
      expect_rewrite(g, ins, fetches, &CompileOptions::Experimental::channel_affine,
                     {detail::OpKind::ChannelAffine}, fetch_inner ? 0 : 1, 0);
    }
  }
}

// lstm_cells: three LSTM steps as ONNX's LSTM unrolls them (gates i, o, f, c; no previous
// cell state at the first step) become an lstm_cell and an lstm_hidden node each; a step whose
// input gate is fetched keeps its nodes. The states equal the fourteen nodes' bitwise where
// those run the code path's sigmoid and tanh (small gates), and within float rounding where
// the CPU gives gates of 4096 elements or more to oneDNN's (the bench's LSTM, [16, 256]).
TEST_P(NnOpTest, LstmCellsEqualTheDecomposedNodes) {
  struct Case {
    std::int64_t B, H;
    bool bitwise;
  };
  // Batch 1 too: there every gate, product and sum has one value per channel, as a
  // normalisation's scale and shift have (fuse_channel_affine must leave them).
  for (const Case& sz : {Case{3, 37, true}, Case{1, 37, true}, Case{16, 256, !on_cpu()}}) {
    for (const bool fetch_gate : {false, true}) {
      SCOPED_TRACE(std::to_string(sz.B) + "x" + std::to_string(sz.H) +
                   (fetch_gate ? ", step 1's input gate fetched" : ""));
      Graph g;
      auto r = g.input("r");
      std::vector<In> ins{rand_in("r", {sz.H, 4 * sz.H}, 101, -0.1f, 0.1f)};
      std::vector<Node> fetches;
      Node h, c, fetched_gate;
      for (std::int64_t t = 0; t < 3; ++t) {
        const std::string name = "x" + std::to_string(t);
        Node x = g.input(name);
        ins.push_back(rand_in(name, {sz.B, 4 * sz.H}, 102 + static_cast<std::uint32_t>(t), -4, 4));
        Node gates = t == 0 ? x : add(x, matmul(h, r));
        auto quarter = [&](std::int64_t q) { return slice(gates, 1, q * sz.H, (q + 1) * sz.H); };
        Node i = sigmoid(quarter(0)), o = sigmoid(quarter(1)), f = sigmoid(quarter(2)),
             cc = tanh(quarter(3));
        if (fetch_gate && t == 1) fetched_gate = i;
        c = t == 0 ? mul(i, cc) : add(mul(f, c), mul(i, cc));
        h = mul(o, tanh(c));
        fetches.push_back(h);
      }
      fetches.push_back(c);
      if (fetch_gate) fetches.push_back(fetched_gate);
      // A cell and a hidden node a step.
      expect_rewrite(g, ins, fetches, &CompileOptions::Experimental::lstm_cells,
                     {detail::OpKind::LstmCell, detail::OpKind::LstmHidden}, fetch_gate ? 4 : 6,
                     sz.bitwise ? 0 : 2e-6, sz.bitwise);
    }
  }
}

// A recurrent direction as ONNX's LSTM or GRU (linear_before_reset, with a recurrent bias)
// unrolls it (importer: src/onnx/ops_rnn.cpp): one input projection P [T * B, gH] for every
// step, step t adding its rows (the last rows first in a reverse direction) to the recurrent
// product h_prev R^T (R [gH, H]), then the cells. Fetched: every h (through a concat, as the
// importer's Y) and an LSTM's last c.
struct Chain {
  Graph g;
  std::vector<In> ins;
  std::vector<Node> fetches;
};
Chain recurrent_chain(bool lstm, std::int64_t T, std::int64_t B, std::int64_t H, bool reverse) {
  Chain l;
  const std::int64_t G = (lstm ? 4 : 3) * H;
  Node p = l.g.input("p"), r = l.g.input("r"), h = l.g.input("h0");
  Node c = lstm ? l.g.input("c0") : l.g.input("rb");
  l.ins = {rand_in("p", {T * B, G}, 121, -2, 2), rand_in("r", {G, H}, 122, -0.2f, 0.2f),
           rand_in("h0", {B, H}, 123), lstm ? rand_in("c0", {B, H}, 124) : rand_in("rb", {G}, 125)};
  const Node rb = c;
  std::vector<Node> hs;
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = reverse ? T - 1 - s : s;
    Node x = slice(p, 0, t * B, (t + 1) * B);
    auto band = [&](Node v, std::int64_t a, std::int64_t b) { return slice(v, 1, a * H, b * H); };
    if (lstm) {
      Node gates = add(x, matmul(h, r, false, true));
      c = add(mul(sigmoid(band(gates, 2, 3)), c),
              mul(sigmoid(band(gates, 0, 1)), tanh(band(gates, 3, 4))));
      h = mul(sigmoid(band(gates, 1, 2)), tanh(c));
    } else {
      Node rec = add(matmul(h, r, false, true), rb);
      Node zr = add(band(x, 0, 2), band(rec, 0, 2));
      Node z = sigmoid(slice(zr, 1, 0, H)), rg = sigmoid(slice(zr, 1, H, 2 * H));
      Node n = tanh(add(band(x, 2, 3), mul(rg, band(rec, 2, 3))));
      h = add(mul(sub(l.g.constant(1.0f), z), n), mul(z, h));
    }
    hs.push_back(reshape(h, {1, B, H}));
  }
  l.fetches = {concat(std::span<const Node>(hs), 0)};
  if (lstm) l.fetches.push_back(c);
  return l;
}

// recurrent_sequences: the chain's steps become one lstm_sequence or gru_sequence node on the
// CPU (its kernel: every step in one parallel region), forwards and backwards, for hidden
// sizes of one and of several panels and batches of 1 to 5 (the product's row blocks and their
// remainders); the states equal the chain of cells' within float rounding (the product sums in
// another order than oneDNN's). OpenCL has no kernel for them and keeps the chain.
TEST_P(NnOpTest, RecurrentSequencesEqualTheChainOfCells) {
  struct Case {
    std::int64_t T, B, H;
    bool reverse;
  };
  for (const bool lstm : {true, false}) {
    for (const Case& k : {Case{5, 1, 32, false}, Case{4, 5, 16, true}, Case{3, 3, 80, false},
                          Case{6, 2, 48, true}}) {
      SCOPED_TRACE(std::string(lstm ? "LSTM, " : "GRU, ") + std::to_string(k.T) + " steps of " +
                   std::to_string(k.B) + "x" + std::to_string(k.H) +
                   (k.reverse ? ", reverse" : ""));
      const Chain l = recurrent_chain(lstm, k.T, k.B, k.H, k.reverse);
      expect_rewrite(l.g, l.ins, l.fetches, &CompileOptions::Experimental::recurrent_sequences,
                     {lstm ? detail::OpKind::LstmSequence : detail::OpKind::GruSequence},
                     on_cpu() ? 1 : 0, 2e-5);
    }
  }
}

// The sequences' kernel gives the same bits for every team size (each column's sum runs over
// R's row in order, whichever thread takes it), on every CPU engine; the forward chain's
// concat of every h is a view of the sequence's rows (no concat runs); a hidden size that is
// not a whole number of panels keeps the chain of cells.
TEST(RecurrentSequences, SameBitsForEveryTeamSize) {
  for (const bool lstm : {true, false}) {
    SCOPED_TRACE(lstm ? "LSTM" : "GRU");
    const detail::OpKind kind = lstm ? detail::OpKind::LstmSequence : detail::OpKind::GruSequence;
    const Chain l = recurrent_chain(lstm, 7, 4, 64, false);
    InputShapes shapes;
    std::vector<FeedItem> feeds;
    for (const In& in : l.ins) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    std::vector<std::vector<float>> first;
    for (const CpuOptions& o :
         {CpuOptions{.engine = CpuEngine::sequential, .threads = 1},
          CpuOptions{.engine = CpuEngine::sequential, .threads = 2},
          CpuOptions{.engine = CpuEngine::sequential, .threads = 3},
          CpuOptions{
              .engine = CpuEngine::critical_path, .executors = 2, .threads_per_executor = 2}}) {
      auto cg = GraphCompiler(Platform::cpu(o)).compile(l.g, shapes, l.fetches);
      const detail::Executable& e = detail::executable_of(cg);
      int sequences = 0;
      for (std::uint32_t i = 0; i < e.plan().nodes.size(); ++i) {
        EXPECT_FALSE(e.plan().nodes[i].op == detail::OpKind::Concat && e.plan().nodes[i].has_work())
            << "the concat of every h copies";
        if (e.plan().nodes[i].op != kind || e.plan().nodes[i].fused_into >= 0) continue;
        ++sequences;
        if (!cpu_reference_forced()) {
          EXPECT_EQ(e.kernel_name(i), "team_panels");
        }
      }
      EXPECT_EQ(sequences, 1);
      cg.run(feeds);
      std::vector<std::vector<float>> got;
      for (const Node& n : l.fetches) got.push_back(cg.read(n));
      if (first.empty()) {
        first = got;
        continue;
      }
      for (std::size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], first[k]) << "fetch " << k;
    }
    const Chain odd = recurrent_chain(lstm, 3, 2, 20, false);
    InputShapes odd_shapes;
    for (const In& in : odd.ins) odd_shapes.push_back({in.name, in.shape});
    auto cg = GraphCompiler(Platform::cpu()).compile(odd.g, odd_shapes, odd.fetches);
    for (const auto& n : detail::executable_of(cg).plan().nodes) {
      EXPECT_NE(n.op, kind) << "H = 20 is not a whole number of panels";
    }
  }
}

// gru_cells: three GRU steps with linear_before_reset as ONNX's GRU unrolls them (X the input
// projection of a step, Rc the recurrent one, gates z, r, h) become one gru_hidden node each; a
// step whose update gate is fetched keeps its nodes. As for the LSTM: bitwise where the nodes
// run the same sigmoid and tanh, within float rounding where the CPU gives oneDNN the gates.
TEST_P(NnOpTest, GruCellsEqualTheDecomposedNodes) {
  struct Case {
    std::int64_t B, H;
    bool bitwise;
  };
  for (const Case& sz : {Case{3, 37, true}, Case{1, 37, true}, Case{16, 256, !on_cpu()}}) {
    for (const bool fetch_gate : {false, true}) {
      SCOPED_TRACE(std::to_string(sz.B) + "x" + std::to_string(sz.H) +
                   (fetch_gate ? ", step 1's update gate fetched" : ""));
      const std::int64_t H = sz.H;
      Graph g;
      auto r = g.input("r"), h0 = g.input("h0");
      std::vector<In> ins{rand_in("r", {H, 3 * H}, 111, -0.1f, 0.1f),
                          rand_in("h0", {sz.B, H}, 112)};
      std::vector<Node> fetches;
      Node h = h0, fetched_gate;
      for (std::int64_t t = 0; t < 3; ++t) {
        const std::string name = "x" + std::to_string(t);
        Node x = g.input(name);
        ins.push_back(rand_in(name, {sz.B, 3 * H}, 113 + static_cast<std::uint32_t>(t), -3, 3));
        Node rec = matmul(h, r);
        Node zr = add(slice(x, 1, 0, 2 * H), slice(rec, 1, 0, 2 * H));
        Node z = sigmoid(slice(zr, 1, 0, H)), rg = sigmoid(slice(zr, 1, H, 2 * H));
        Node n = tanh(add(slice(x, 1, 2 * H, 3 * H), mul(rg, slice(rec, 1, 2 * H, 3 * H))));
        if (fetch_gate && t == 1) fetched_gate = z;
        h = add(mul(sub(g.constant(1.0f), z), n), mul(z, h));
        fetches.push_back(h);
      }
      if (fetch_gate) fetches.push_back(fetched_gate);
      expect_rewrite(g, ins, fetches, &CompileOptions::Experimental::gru_cells,
                     {detail::OpKind::GruHidden}, fetch_gate ? 2 : 3, sz.bitwise ? 0 : 2e-6,
                     sz.bitwise);
    }
  }
}

// grouped_conv_layouts: an inverted residual block (1x1 expansion, depthwise 3x3, 1x1
// projection plus the block's input) and a grouped 3x3 convolution (4 channels per group) keep
// the CPU's layout through the grouped layers where oneDNN has a fast kernel for them in it
// (the same predicate the platform asks), so no value around them is reordered to NCHW; the
// results equal those with the option off within float rounding (other kernels), and bitwise
// with the planner on and off.
TEST_P(NnOpTest, GroupedConvolutionsKeepTheLayout) {
  Graph g;
  auto x = g.input("x"), we = g.input("we"), wd = g.input("wd"), wp = g.input("wp"),
       wg = g.input("wg"), wf = g.input("wf"), bd = g.input("bd");
  Node h1 = clip(conv2d(x, we), 0.0f, 6.0f);
  Node h2 = clip(conv2d(h1, wd, bd, {.padding = {1, 1}, .groups = 32}), 0.0f, 6.0f);
  Node y1 = add(conv2d(h2, wp), x);
  Node h3 = relu(conv2d(y1, wg, {.padding = {1, 1}, .groups = 4}));
  Node y = conv2d(h3, wf, {.stride = {2, 2}});
  // A grouped layer whose image is kept and whose result is fetched (plain): oneDNN computes
  // both in the layout and the result is reordered out.
  Node z = relu(conv2d(y1, wg, {.padding = {1, 1}, .groups = 4}));
  const std::vector<Node> ys{y, z};
  const std::vector<In> ins{rand_in("x", {2, 16, 9, 8}, 81),  rand_in("we", {32, 16, 1, 1}, 82),
                            rand_in("wd", {32, 1, 3, 3}, 83), rand_in("wp", {16, 32, 1, 1}, 84),
                            rand_in("wg", {16, 4, 3, 3}, 85), rand_in("wf", {16, 16, 1, 1}, 86),
                            rand_in("bd", {32}, 87)};
  InputShapes shapes;
  std::vector<FeedItem> feeds;
  for (const In& in : ins) {
    shapes.push_back({in.name, in.shape});
    feeds.push_back({in.name, in.values});
  }
  std::vector<std::vector<float>> out[2];
  for (bool grouped : {false, true}) {
    CompileOptions o;
    o.experimental.grouped_conv_layouts = grouped;
    o.winograd_convs = false;
    o.experimental.own_winograd = false;
    const Platform platform = GetParam().make();
    auto cg = GraphCompiler(platform, o).compile(g, shapes, ys);
    cg.run(feeds);
    for (Node v : ys) out[grouped].push_back(cg.read(v));
    const detail::Plan& plan = detail::executable_of(cg).plan();
    const detail::ActivationLayout layout = detail::cpu::conv_activation_layout();
    const bool cpu_layout =
        on_cpu() && !cpu_reference_forced() && layout != detail::ActivationLayout::nchw;
    // Values kept: h1 and h2 where the depthwise layer takes the layout, y1 and h3 where the
    // grouped ones do (their other neighbours are convolutions of one group; z is fetched).
    int kept = 0;
    bool takes[2] = {false, false};  // depthwise, 4 channels per group
    for (const auto& n : plan.nodes) {
      kept += n.layout != detail::ActivationLayout::nchw;
      const bool conv = n.op == detail::OpKind::Conv2d || n.op == detail::OpKind::FusedConv2d;
      const std::int64_t groups = conv ? detail::window2d(n.attrs).groups : 1;
      if (cpu_layout && grouped && n.fused_into < 0 && groups > 1)
        takes[groups == 4] =
            detail::backend_of(platform).grouped_conv_takes_layout(plan, n, layout);
    }
    const int expected = 2 * takes[0] + 2 * takes[1];
    EXPECT_EQ(kept, expected) << "grouped " << grouped << " on " << GetParam().name;
    if (cpu_layout && grouped) {
      EXPECT_GT(expected, 0) << "oneDNN takes no grouped layer in " << static_cast<int>(layout);
    }
  }
  for (std::size_t k = 0; k < ys.size(); ++k) {
    for (std::size_t i = 0; i < out[0][k].size(); ++i) {
      ASSERT_NEAR(out[1][k][i], out[0][k][i], 1e-5 * (1 + std::fabs(out[0][k][i])))
          << "output " << k << " at " << i;
    }
  }
  testing_util::run_checked(GetParam(), g, ins, ys);  // planner on and off, bitwise
}

// Winograd convolutions (CompileOptions::winograd_convs, off by default): a resnet's 3x3
// stride-1 layers of 64 channels run oneDNN's Winograd kernels on nChw16c activations on the
// CPU, with the direct kernels' results within Winograd's rounding; a graph with a channel
// concat, or one whose 3x3 layers carry less than half of the convolution work, keeps the
// direct kernels.
TEST_P(NnOpTest, WinogradConvolutionsMatchTheDirectOnes) {
  const Conv2dOptions same{.padding = {1, 1}};
  Graph g;
  auto x = g.input("x"), w1 = g.input("w1"), w2 = g.input("w2"), b = g.input("b");
  Node h = relu(conv2d(x, w1, b, same));
  Node b1 = relu(add(conv2d(relu(conv2d(h, w1, same)), w2, same), h));
  Node y = relu(add(conv2d(relu(conv2d(b1, w1, b, same)), w2, same), b1));
  const std::vector<In> ins{rand_in("x", {2, 64, 10, 9}, 71), rand_in("w1", {64, 64, 3, 3}, 72),
                            rand_in("w2", {64, 64, 3, 3}, 73), rand_in("b", {64}, 74)};
  InputShapes shapes;
  std::vector<FeedItem> feeds;
  for (const In& in : ins) {
    shapes.push_back({in.name, in.shape});
    feeds.push_back({in.name, in.values});
  }
  // oneDNN 2.6 has Winograd kernels with AVX-512 only: elsewhere the option does nothing.
  const bool cpu = on_cpu() && !cpu_reference_forced() && detail::cpu::winograd_available();
  std::vector<float> out[2];
  for (int wino : {0, 1}) {
    CompileOptions o;
    o.winograd_convs = wino == 1;
    auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, {y});
    cg.run(feeds);
    out[wino] = cg.read(y);
    const auto& ex = detail::executable_of(cg);
    int winograd = 0;
    for (std::uint32_t i = 0; i < ex.plan().nodes.size(); ++i)
      winograd += ex.kernel_name(i).starts_with("dnnl_conv_winograd");
    EXPECT_EQ(ex.plan().winograd, wino == 1 && cpu) << GetParam().name;
    // The first convolution reads x and the last gives y, both plain (fed, fetched); the
    // three between are Winograd's.
    EXPECT_EQ(winograd, wino == 1 && cpu ? 3 : 0) << GetParam().name;
  }
  // Issue 18's measure against ONNX Runtime: max |a - b| / max |b|.
  double diff = 0.0, top = 0.0;
  for (std::size_t i = 0; i < out[0].size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(out[1][i] - out[0][i])));
    top = std::max(top, static_cast<double>(std::fabs(out[0][i])));
  }
  EXPECT_LT(diff / top, 1e-4) << GetParam().name << " " << diff << " / " << top;
  // Where a concat joins channels, or a 5x5 layer carries most of the work: no Winograd.
  for (int variant : {0, 1}) {
    Graph g2;
    auto x2 = g2.input("x"), w3 = g2.input("w1"), w5 = g2.input("w2");
    Node a = relu(conv2d(x2, w3, same));
    Node c = variant == 0 ? concat({relu(conv2d(a, w3, same)), a}, 1)
                          : conv2d(relu(conv2d(a, w3, same)), w5, {.padding = {2, 2}});
    CompileOptions o;
    o.winograd_convs = true;
    auto cg =
        GraphCompiler(GetParam().make(), o)
            .compile(g2, {{"x", {1, 64, 8, 8}}, {"w1", {64, 64, 3, 3}}, {"w2", {64, 64, 5, 5}}},
                     {c});
    EXPECT_FALSE(detail::executable_of(cg).plan().winograd) << variant;
  }
}

// hetgraph's own Winograd kernels (CompileOptions::Experimental::own_winograd, on by default; built
// for AVX2 CPUs without AVX-512): the 3x3 stride-1 convolutions between blocked values take them: a
// plain one, one with bias + residual + relu, one with leaky_relu, and an unpadded one with clip
// whose result ends in partial tiles, all within rounding of oneDNN's direct kernels. 9x7 and 9x9
// images take F(2x2, 3x3) (9x9 at batch 1 with two panels of 16 output channels: two threads
// split them); 30x31 ones F(4x4, 3x3) (partial 4x4 tiles too: 28x29 unpadded). A batch with fewer
// than 16 output tiles keeps the direct kernels; weights the host writes between runs are
// transformed again; thread counts 1 and 2 give the same bits (blocks of tiles on one thread,
// tiles then channels split on two where each has at most one block).
// Conv2dOptions::exact keeps a convolution off every Winograd kernel (their transforms round;
// ONNX's integer convolutions need exact sums): the same resnet layers that take Winograd
// with winograd_convs run the direct kernels, and integer data gives integer sums bitwise.
TEST_P(NnOpTest, ExactConvolutionsTakeNoWinogradKernel) {
  // oneDNN's Winograd (AVX-512) or ours: the platform's own predicate, not the ISA.
  const bool cpu = on_cpu() && !cpu_reference_forced() && detail::cpu::any_winograd_kernel();
  for (const bool exact : {false, true}) {
    const Conv2dOptions same{.padding = {1, 1}, .exact = exact};
    Graph g;
    auto x = g.input("x"), w = g.input("w");
    // The middle one runs on nChw16c between the plain first and last (as in the test above).
    Node y = conv2d(relu(conv2d(relu(conv2d(x, w, same)), w, same)), w, same);
    // Values 0 / 1 and -1 / 0 / 1: every sum an integer below 144^3 < 2^24, so exact.
    std::vector<float> xv(2 * 16 * 12 * 12), wv(16 * 16 * 9);
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i * 7 % 11 % 2);
    for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(i * 5 % 7 % 3) - 1;
    CompileOptions o;
    o.winograd_convs = true;
    auto cg = GraphCompiler(GetParam().make(), o)
                  .compile(g, {{"x", {2, 16, 12, 12}}, {"w", {16, 16, 3, 3}}}, {y});
    cg.run({{"x", xv}, {"w", wv}});
    const auto& ex = detail::executable_of(cg);
    int winograd = 0;
    for (std::uint32_t i = 0; i < ex.plan().nodes.size(); ++i)
      winograd += ex.kernel_name(i).find("winograd") != std::string::npos;
    EXPECT_EQ(winograd > 0, !exact && cpu) << GetParam().name;
    if (exact) {
      for (float v : cg.read(y)) ASSERT_EQ(v, std::nearbyint(v)) << GetParam().name;
    }
  }
}

TEST_P(NnOpTest, OwnWinogradMatchesTheDirectKernels) {
  const Conv2dOptions same{.padding = {1, 1}};
  std::int64_t ch = 16;  // the middle convolutions' channels, per case
  std::vector<float> w2a, w2b;
  auto build = [&](Graph& g, const std::vector<float>& w2v) {
    auto x = g.input("x"), w1 = g.input("w1"), w3 = g.input("w3"), b = g.input("b"),
         w4 = g.input("w4");
    auto w2 = g.variable("w2", {ch, ch, 3, 3}, Initializer::values(w2v));
    Node h = relu(conv2d(x, w1, b, same));
    Node c1 = conv2d(h, w2, same);
    Node c2 = relu(add(conv2d(c1, w3, b, same), h));
    Node c3 = leaky_relu(conv2d(c2, w2, b, same), 0.1f);
    Node c4 = clip(conv2d(c3, w3), -0.5f, 0.5f);
    return std::make_pair(conv2d(c4, w4), w2);
  };
  const bool built = on_cpu() && !cpu_reference_forced() && detail::cpu::own_winograd_available() &&
                     detail::cpu::conv_activation_layout() != detail::ActivationLayout::nchw;
  struct Case {
    std::int64_t batch, h, w, ch;
    const char* kernel;  // of the four middle convolutions (none: the direct one) ...
    std::int64_t tiles;  // ... where the code path asks no more tiles of its size than the
                         // fewest of the four (the last is unpadded)
  };
  // Batch 4 at 30x31 gives each of two threads at least two blocks of 48 tiles. The AVX-512
  // path asks 192 tiles: the cases below that have the direct kernels there.
  for (Case c : {Case{3, 9, 7, 16, "winograd_f2x3", 36}, Case{8, 13, 13, 16, "winograd_f2x3", 288},
                 Case{1, 9, 9, 32, "winograd_f2x3", 16}, Case{1, 60, 62, 16, "winograd_f4x3", 225},
                 Case{4, 30, 31, 16, "winograd_f4x3", 224}, Case{1, 7, 5, 16, "", 12}}) {
    if (c.tiles < detail::cpu::own_winograd_min_tiles()) c.kernel = "";
    // The larger cases give Winograd's threads blocks to share; with the reference kernels
    // forced there is no Winograd, and they took 40 s of the ASan phase's direct loops. The
    // small cases still check the reference kernels and the weight write.
    if (cpu_reference_forced() && c.batch * c.h * c.w > 600) continue;
    const std::int64_t batch = c.batch;
    ch = c.ch;
    // Weights of about 1 / sqrt(fan-in) keep values near 1 from layer to layer, so the clip cuts
    // where Winograd's relative rounding stays small against its range.
    const float r = 0.15f * std::sqrt(16.0f / static_cast<float>(ch));
    w2a = testing_util::random_vec(static_cast<std::size_t>(ch * ch * 9), 82, -r, r);
    w2b = testing_util::random_vec(static_cast<std::size_t>(ch * ch * 9), 87, -r, r);
    const std::vector<In> ins{rand_in("x", {batch, ch, c.h, c.w}, 81),
                              rand_in("w1", {ch, ch, 3, 3}, 83, -r, r),
                              rand_in("w3", {ch, ch, 3, 3}, 84, -r, r), rand_in("b", {ch}, 85),
                              rand_in("w4", {8, ch, 1, 1}, 86)};
    InputShapes shapes;
    std::vector<FeedItem> feeds;
    for (const In& in : ins) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    // 0: direct kernels; 1: Winograd with w2a; 2: Winograd after writing w2b; 3: compiled with w2b.
    std::vector<float> out[4];
    for (int on : {0, 1}) {
      Graph g;
      auto [y, w2] = build(g, w2a);
      CompileOptions o;
      o.experimental.own_winograd = on == 1;
      auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, {y});
      cg.run(feeds);
      out[on] = cg.read(y);
      const auto& ex = detail::executable_of(cg);
      int winograd = 0, own = 0;
      for (std::uint32_t i = 0; i < ex.plan().nodes.size(); ++i) {
        winograd += *c.kernel != '\0' && ex.kernel_name(i) == c.kernel;
        own += ex.kernel_name(i).starts_with("winograd_");
      }
      EXPECT_EQ(winograd, on == 1 && built && *c.kernel ? 4 : 0) << GetParam().name << c.h;
      EXPECT_EQ(own, winograd) << GetParam().name << c.h;
      if (on == 1) {
        cg.write(w2, w2b);
        cg.run(feeds);
        cg.run(feeds);  // the second run reuses the first's transformed weights
        out[2] = cg.read(y);
      }
    }
    Graph g;
    auto [y, w2] = build(g, w2b);
    auto cg = GraphCompiler(GetParam().make()).compile(g, shapes, {y});
    cg.run(feeds);
    out[3] = cg.read(y);
    EXPECT_TRUE(testing_util::bitwise_equal(out[2], out[3])) << GetParam().name;
    EXPECT_FALSE(testing_util::bitwise_equal(out[1], out[2])) << GetParam().name;
    double diff = 0.0, top = 0.0;
    for (std::size_t i = 0; i < out[0].size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(out[1][i] - out[0][i])));
      top = std::max(top, static_cast<double>(std::fabs(out[0][i])));
    }
    // F(4x4)'s rounding is the larger (its transforms multiply by up to 8 and divide by 24).
    EXPECT_LT(diff / top, 2e-5) << GetParam().name << " " << diff << " / " << top;
    // One thread or two: the same bits (every tile's sums run in one order).
    if (GetParam().name == "cpu_seq_1t") {
      std::vector<float> by_threads[2];
      for (int t : {1, 2}) {
        Graph g2;
        auto [y2, w22] = build(g2, w2a);
        auto cg2 = GraphCompiler(Platform::cpu({.engine = CpuEngine::sequential, .threads = t}))
                       .compile(g2, shapes, {y2});
        cg2.run(feeds);
        by_threads[t - 1] = cg2.read(y2);
      }
      EXPECT_TRUE(testing_util::bitwise_equal(by_threads[0], by_threads[1]));
      EXPECT_TRUE(testing_util::bitwise_equal(by_threads[0], out[1]));
    }
  }
}

// Max pooling between convolutions runs channels-last, or in blocks of channels, on a CPU whose
// convolutions do (nan_max_channels): a NaN goes through it as through the NCHW kernel (a window
// holding one gives NaN). 1x1 identity convolutions around it pass x on exactly (a NaN spreads over
// its pixel's channels, with the sign the convolution's reorders give it: NaNs compare as NaNs).
// The kernel runs a row without NaN handling first and redoes it when an input row holds a NaN:
// NaNs in the first, middle and last row of a 3-row window, with stride 2 and with googlenet's
// stride 1.
TEST_P(NnOpTest, ChannelsLastMaxPoolKeepsNaN) {
  const Pool2dOptions pools[] = {{.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true},
                                 {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}};
  for (const Pool2dOptions& po : pools) {
    for (int nan_row : {0, 3, 5, 6}) {
      SCOPED_TRACE("stride " + std::to_string(po.stride[0]) + ", NaN in row " +
                   std::to_string(nan_row));
      Graph g;
      auto x = g.input("x"), w = g.input("w");
      Node p = max_pool2d(conv2d(x, w), po);
      Node y = conv2d(p, w);
      std::vector<float> xs = testing_util::random_vec(2 * 8 * 7 * 7, 61), ws(64, 0.0f);
      for (int c = 0; c < 8; ++c) ws[static_cast<std::size_t>(c * 9)] = 1.0f;
      // image 0, channel 0, (nan_row, 4)
      xs[static_cast<std::size_t>(nan_row * 7 + 4)] = std::numeric_limits<float>::quiet_NaN();
      const InputShapes shapes{{"x", {2, 8, 7, 7}}, {"w", {8, 8, 1, 1}}};
      std::vector<float> out[2];
      for (bool through : {false, true}) {
        CompileOptions o;
        o.experimental.layouts_through_pool_concat = through;
        auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, {y});
        cg.run({{"x", xs}, {"w", ws}});
        out[through] = cg.read(y);
        if (through && on_cpu() && !cpu_reference_forced() &&
            detail::cpu::conv_activation_layout() != detail::ActivationLayout::nchw) {
          EXPECT_EQ(cg.kernel_name(p), "nan_max_channels");
        }
      }
      int nans = 0;
      for (std::size_t i = 0; i < out[0].size(); ++i) {
        nans += std::isnan(out[0][i]);
        if (std::isnan(out[0][i]))
          ASSERT_TRUE(std::isnan(out[1][i])) << i;
        else
          ASSERT_EQ(std::memcmp(&out[0][i], &out[1][i], sizeof(float)), 0) << i;
      }
      // Stride 2 (3x3 outputs): the windows holding (3, 4) are two, in each of image 0's
      // channels. Stride 1 (7x7 outputs): 3x3 windows, 2x3 at the first and last row.
      if (po.stride[0] == 2 && nan_row == 3) {
        EXPECT_EQ(nans, 2 * 8);
      }
      if (po.stride[0] == 1) {
        EXPECT_EQ(nans, (nan_row == 0 || nan_row == 6 ? 6 : 9) * 8);
      }
    }
  }
}

// An inception block at batch 1 (three convolutions of one image joined along channels, then
// pooled and convolved): with concat_in_place each convolution writes its band of the concat's
// blocked buffer and the concat runs no kernel on the CPU (every engine: the parallel ones may
// run the branches at once) where the convolutions' layout is blocked; results bitwise equal
// to the copying plan's everywhere.
TEST_P(NnOpTest, ConcatInPlaceTakesBlockedBranches) {
  Graph g;
  auto x = g.input("x"), w1 = g.input("w1"), w2 = g.input("w2"), w3 = g.input("w3"),
       w4 = g.input("w4");
  Node cat = concat({relu(conv2d(x, w1)), relu(conv2d(x, w2)), conv2d(x, w3)}, 1);
  Node y = conv2d(max_pool2d(cat, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}), w4);
  // Branches of 16 and 32 channels: whole blocks at 8 (AVX2) and at 16 (AVX-512), where a
  // band of 8 channels would be half a block and keep the copy.
  const InputShapes shapes{{"x", {1, 16, 7, 7}},
                           {"w1", {16, 16, 1, 1}},
                           {"w2", {32, 16, 1, 1}},
                           {"w3", {16, 16, 1, 1}},
                           {"w4", {8, 64, 1, 1}}};
  std::vector<float> out[2];
  for (bool in_place : {false, true}) {
    CompileOptions o;
    o.experimental.concat_in_place = in_place;
    auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, {y});
    cg.run({{"x", testing_util::random_vec(16 * 49, 81)},
            {"w1", testing_util::random_vec(16 * 16, 82)},
            {"w2", testing_util::random_vec(32 * 16, 83)},
            {"w3", testing_util::random_vec(16 * 16, 84)},
            {"w4", testing_util::random_vec(8 * 64, 85)}});
    out[in_place] = cg.read(y);
    if (in_place && on_cpu()) {
      // In the convolutions' layout, the one oneDNN prefers here: nChw8c or nChw16c (each
      // branch a contiguous band) on some CPUs, channels-last on others (Zen 4), where the
      // branches interleave pixel by pixel and the concat keeps its copy.
      const auto layout = detail::cpu::conv_activation_layout();
      if (layout == detail::ActivationLayout::nhwc)
        EXPECT_NE(cg.kernel_name(cat), "none");
      else
        EXPECT_EQ(cg.kernel_name(cat), "none");
      if (!cpu_reference_forced()) {
        const detail::Plan& plan = detail::executable_of(cg).plan();
        EXPECT_EQ(plan.nodes[plan.index(cat, "test")].layout, layout);
      }
    } else {
      EXPECT_NE(cg.kernel_name(cat), "none");
    }
  }
  EXPECT_TRUE(testing_util::bitwise_equal(out[0], out[1])) << GetParam().name;
}

// The reference kernels of max pooling and concat take channels-last and blocked values too
// (their test oracle): on a plan with such nodes, each one's fast and reference kernels agree
// bitwise.
TEST(NnKernels, ChannelsLastPoolAndConcatMatchTheirReferences) {
  if (cpu_reference_forced() ||
      detail::cpu::conv_activation_layout() == detail::ActivationLayout::nchw)
    GTEST_SKIP() << "convolutions here compute in NCHW";
  Graph g;
  auto x = g.input("x"), w = g.input("w"), w2 = g.input("w2");
  Node a = relu(conv2d(x, w)), b = conv2d(x, w);
  Node c = concat({a, max_pool2d(b, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}})}, 1);
  Node y = conv2d(max_pool2d(c, {.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true}), w2);
  auto cg =
      GraphCompiler(Platform::cpu())
          .compile(g, {{"x", {2, 16, 9, 7}}, {"w", {16, 16, 1, 1}}, {"w2", {4, 32, 1, 1}}}, {y});
  const detail::Plan& plan = detail::executable_of(cg).plan();
  int checked = 0;
  for (std::uint32_t i = 0; i < plan.nodes.size(); ++i) {
    const detail::PlanNode& n = plan.nodes[i];
    if (n.layout == detail::ActivationLayout::nchw ||
        (n.op != detail::OpKind::MaxPool2d && n.op != detail::OpKind::Concat))
      continue;
    std::vector<std::vector<float>> ins;
    detail::cpu::KernelArgs args{plan, i, n, {}, {}, nullptr, n.type, 1, {1}, nullptr, nullptr};
    for (std::uint32_t in : n.inputs) {
      const detail::TensorType& t = plan.nodes[in].type;
      ins.push_back(testing_util::random_vec(static_cast<std::size_t>(t.shape.numel()), 70 + i));
      args.in.push_back(ins.back().data());
      args.in_types.push_back(t);
    }
    std::vector<float> out[2];
    for (bool ref : {false, true}) {
      out[ref].assign(static_cast<std::size_t>(n.type.shape.numel()), 0.0f);
      args.out = out[ref].data();
      std::string_view chosen;
      auto k = detail::cpu::kernel_registry().create(args, n.op, n.label, ref, chosen);
      std::vector<std::byte> scratch(k->scratch_bytes());
      k->run({1, 0, scratch.data(), scratch.size()});
    }
    EXPECT_EQ(out[0], out[1]) << n.label;
    ++checked;
  }
  EXPECT_EQ(checked, 3);  // both poolings and the concat
}

// Max pooling and channel concat in every layout assign_layouts may give them, whatever this
// CPU's convolutions pick (AVX-512 machines take nhwc, AVX2 ones nChw8c, none here both): the
// same node with its layout set to nhwc, nChw8c and nChw16c, fed the plain inputs laid out so,
// gives the plain kernel's result laid out so, bitwise, with its fast and reference kernels.
// Position of plain [n, c, h, w] in a value of shape s laid out as l.
std::int64_t layout_at(const Shape& s, detail::ActivationLayout l, std::int64_t n, std::int64_t c,
                       std::int64_t h, std::int64_t w) {
  const std::int64_t C = s[1], H = s[2], W = s[3];
  const int b = detail::channel_block(l);
  if (b == 0) return ((n * C + c) * H + h) * W + w;
  if (b == 1) return ((n * H + h) * W + w) * C + c;
  return (((n * (C / b) + c / b) * H + h) * W + w) * b + c % b;
}
// A 4-d value of shape s laid out as `from`, laid out as `to`.
std::vector<float> relayout(const std::vector<float>& v, const Shape& s,
                            detail::ActivationLayout from, detail::ActivationLayout to) {
  std::vector<float> out(v.size());
  for (std::int64_t n = 0; n < s[0]; ++n)
    for (std::int64_t c = 0; c < s[1]; ++c)
      for (std::int64_t h = 0; h < s[2]; ++h)
        for (std::int64_t w = 0; w < s[3]; ++w)
          out[static_cast<std::size_t>(layout_at(s, to, n, c, h, w))] =
              v[static_cast<std::size_t>(layout_at(s, from, n, c, h, w))];
  return out;
}

// Runs the kernel the registry picks for `args` (node `n`, in its layout), fast or reference,
// on `threads` threads; its result laid out plain again.
std::vector<float> run_in_layout(detail::cpu::KernelArgs& args, const detail::PlanNode& n, bool ref,
                                 int threads, std::string_view& chosen) {
  std::vector<float> out(static_cast<std::size_t>(n.type.shape.numel()), 0.0f);
  args.out = out.data();
  auto k = detail::cpu::kernel_registry().create(args, n.op, n.label, ref, chosen);
  std::vector<std::byte> scratch(k->scratch_bytes());
  k->run({threads, 0, scratch.data(), scratch.size()});
  return relayout(out, n.type.shape, n.layout, detail::ActivationLayout::nchw);
}

TEST(NnKernels, PoolAndConcatInEveryLayoutMatchPlain) {
  using detail::ActivationLayout;
  Graph g;
  auto a = g.input("a"), b = g.input("b"), t = g.input("t");
  Node c = concat({a, max_pool2d(b, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}})}, 1);
  Node y = max_pool2d(c, {.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true});
  // windows of up to 18 image rows: more than the channels-last kernel folds in one pass (16)
  Node tall = max_pool2d(t, {.kernel = {18, 3}, .stride = {1, 2}, .padding = {1, 1}});
  CompileOptions co;
  co.experimental.blocked_layouts = false;  // the plan's nodes plain: each layout is set here
  auto cg = GraphCompiler(Platform::cpu(), co)
                .compile(g, {{"a", {2, 16, 9, 7}}, {"b", {2, 32, 9, 7}}, {"t", {1, 16, 20, 9}}},
                         {y, tall});
  const detail::Plan& plan = detail::executable_of(cg).plan();
  int checked = 0;
  for (std::uint32_t i = 0; i < plan.nodes.size(); ++i) {
    if (plan.nodes[i].op != detail::OpKind::MaxPool2d && plan.nodes[i].op != detail::OpKind::Concat)
      continue;
    std::vector<std::vector<float>> plain_in;
    for (std::uint32_t in : plan.nodes[i].inputs)
      plain_in.push_back(testing_util::random_vec(
          static_cast<std::size_t>(plan.nodes[in].type.shape.numel()), 90 + i));
    // The plain kernel's result first, then each layout's, both kernels.
    std::vector<float> plain_out;
    for (const ActivationLayout l : {ActivationLayout::nchw, ActivationLayout::nhwc,
                                     ActivationLayout::nChw8c, ActivationLayout::nChw16c}) {
      detail::PlanNode n = plan.nodes[i];
      n.layout = l;
      std::vector<std::vector<float>> ins;
      detail::cpu::KernelArgs args{plan, i, n, {}, {}, nullptr, n.type, 1, {1}, nullptr, nullptr};
      for (std::size_t k = 0; k < n.inputs.size(); ++k) {
        const detail::TensorType& t = plan.nodes[n.inputs[k]].type;
        ins.push_back(relayout(plain_in[k], t.shape, ActivationLayout::nchw, l));
        args.in.push_back(ins.back().data());
        args.in_types.push_back(t);
      }
      for (bool ref : {false, true}) {
        std::string_view chosen;
        const std::vector<float> out = run_in_layout(args, n, ref, 1, chosen);
        if (l == ActivationLayout::nchw && !ref) plain_out = out;
        EXPECT_EQ(out, plain_out) << n.label << " layout " << static_cast<int>(l) << " ref " << ref
                                  << " kernel " << chosen;
        if (n.op == detail::OpKind::MaxPool2d && !ref) {
          EXPECT_EQ(chosen, l == ActivationLayout::nchw ? "nan_max_rows" : "nan_max_channels");
        }
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4);  // the three poolings and the concat
}

// A convolution keeps weights no node writes in oneDNN's layout across runs (conv.cpp,
// FixedWeights): weights the host writes between runs must still be the ones used, and a
// fused convolution (post-ops) the same.
TEST_P(NnOpTest, ConvWeightsWrittenBetweenRunsAreUsed) {
  for (bool fused : {false, true}) {
    Graph g;
    auto x = g.input("x");
    const std::vector<float> w0 = testing_util::random_vec(16 * 16 * 9, 41),
                             w1 = testing_util::random_vec(16 * 16 * 9, 42);
    auto w = g.variable("w", {16, 16, 3, 3}, Initializer::values(w0));
    auto b = g.variable("b", {16}, Initializer::values(testing_util::random_vec(16, 43)));
    Node c = conv2d(x, w, b, {.padding = {1, 1}});
    Node y = fused ? relu(c) : c;
    const In xin = rand_in("x", {2, 16, 6, 7}, 44);
    auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", xin.shape}}, {y});
    std::vector<float> got[2];
    for (int k = 0; k < 2; ++k) {
      cg.write(w, k == 0 ? w0 : w1);
      cg.run({{"x", xin.values}});
      cg.run({{"x", xin.values}});  // a second run reuses what the first prepared
      got[k] = cg.read(y);
    }
    // The same graph with w1 from the start.
    Graph g2;
    auto x2 = g2.input("x");
    auto wv = g2.variable("w", {16, 16, 3, 3}, Initializer::values(w1));
    auto b2 = g2.variable("b", {16}, Initializer::values(testing_util::random_vec(16, 43)));
    Node c2 = conv2d(x2, wv, b2, {.padding = {1, 1}});
    Node y2 = fused ? relu(c2) : c2;
    auto cg2 = GraphCompiler(GetParam().make()).compile(g2, {{"x", xin.shape}}, {y2});
    cg2.run({{"x", xin.values}});
    EXPECT_TRUE(testing_util::bitwise_equal(got[1], cg2.read(y2))) << (fused ? "fused" : "plain");
    EXPECT_FALSE(testing_util::bitwise_equal(got[0], got[1])) << (fused ? "fused" : "plain");
  }
}

struct PoolCase {
  Shape x;
  Pool2dOptions opts;
};

TEST_P(NnOpTest, PoolingForward) {
  const PoolCase cases[] = {
      {{1, 1, 2, 2}, {}},
      {{2, 3, 8, 8}, {}},
      {{2, 3, 9, 7}, {}},  // odd sizes: the last row / column is dropped
      {{1, 2, 7, 7}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {{2, 2, 6, 9}, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}},
      {{1, 3, 8, 10}, {.kernel = {2, 3}, .stride = {1, 2}}},
      {{1, 2, 7, 8},
       {.kernel = {3, 2}, .stride = {2, 2}, .padding = {0, 1}, .padding_end = {2, 0}}},
      {{1, 1, 5, 5}, {.kernel = {5, 5}}},
      {{1, 1, 1, 6}, {.kernel = {1, 3}, .stride = {1, 1}}},
      {{4, 16, 32, 32}, {}},  // parallel paths
      {{2, 24, 15, 15}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      // Stride 4 (its own tap loads): M5's windows of 4 with a partial last vector of outputs,
      // and overlapping windows with padding.
      {{2, 3, 1, 203}, {.kernel = {1, 4}, .stride = {1, 4}}},
      {{1, 2, 5, 150}, {.kernel = {3, 5}, .stride = {2, 4}, .padding = {1, 2}}},
  };
  for (const PoolCase& c : cases) {
    for (int kind = 0; kind < 3; ++kind) {
      Pool2dOptions o = c.opts;
      o.count_include_pad = kind == 2;
      Graph g;
      auto x = g.input("x");
      Node y = kind == 0 ? max_pool2d(x, o) : avg_pool2d(x, o);
      check(g, {rand_in("x", c.x, 4, -3, 3)}, y, 1e-6, 1e-6,
            std::string(kind == 0   ? "max_pool2d"
                        : kind == 1 ? "avg_pool2d"
                                    : "avg_pool2d(incl)") +
                " " + c.x.str() + " k" + std::to_string(o.kernel[0]) + "x" +
                std::to_string(o.kernel[1]) + " s" + std::to_string(o.stride[0]) + "," +
                std::to_string(o.stride[1]) + " p" + std::to_string(o.padding[0]) + "," +
                std::to_string(o.padding[1]));
    }
  }
}

// Average pooling, forward and gradient, over planes wider than a vector (a partial last
// vector), strides 1-3 and 10, end padding, ceil_mode windows, global pools and both divisors:
// both ways of the CPU's avg_rows kernels through a plane (rows of outputs, window by window).
// avg_rows takes every node where oneDNN has no jit pooling of plain NCHW (AVX2), and on every
// CPU the ceil_mode windows past the padding with count_include_pad, which oneDNN divides
// differently.
TEST_P(NnOpTest, AveragePoolingForwardAndGradient) {
  const PoolCase cases[] = {
      {{2, 3, 9, 37}, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}},
      {{1, 2, 12, 70}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {{1, 2, 11, 41}, {.kernel = {2, 4}, .stride = {3, 3}, .padding = {1, 2}}},
      {{2, 2, 8, 19},
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 0}, .padding_end = {0, 1}}},
      {{1, 3, 10, 33}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}},
      {{1, 1, 7, 7}, {.kernel = {7, 7}}},    // a global pool
      {{2, 3, 6, 20}, {.kernel = {6, 20}}},  // one wider than a vector
      {{1, 2, 9, 30}, {.kernel = {3, 11}, .stride = {2, 10}, .padding = {1, 2}}},
  };
  for (const PoolCase& c : cases) {
    for (bool incl : {false, true}) {
      Pool2dOptions o = c.opts;
      o.count_include_pad = incl;
      Graph g;
      auto x = g.input("x"), r = g.input("r");
      auto y = avg_pool2d(x, o);
      auto dx = gradients(reduce_sum(y * r), {x})[0];
      const std::string what = "avg_pool2d" + std::string(incl ? "(incl) " : " ") + c.x.str() +
                               " k" + std::to_string(o.kernel[0]) + "x" +
                               std::to_string(o.kernel[1]) + " s" + std::to_string(o.stride[0]) +
                               (o.ceil_mode ? " ceil" : "");
      InputShapes shapes{{"x", c.x}};
      const Shape ys = GraphCompiler(GetParam().make()).compile(g, shapes, {y}).shape(y);
      const std::vector<In> ins{rand_in("x", c.x, 4, -3, 3), rand_in("r", ys, 5, -2, 2)};
      check(g, ins, y, 1e-6, 1e-6, what);
      // The gradient is the forward's adjoint: <dx, v> = <r, pool(v)> for every v, with the
      // pooling of v from the reference.
      const std::vector<float> got = testing_util::run_checked(GetParam(), g, ins, {dx})[0];
      for (std::uint32_t seed : {6u, 7u}) {
        const In v = rand_in("x", c.x, seed, -1, 1);
        const ref::Array pv =
            ref::evaluate(g, std::vector<Node>{y}, {{"x", testing_util::to_ref(c.x, v.values)}})[0];
        double lhs = 0, rhs = 0, scale = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          lhs += static_cast<double>(got[i]) * v.values[i];
          scale += std::abs(static_cast<double>(got[i]) * v.values[i]);
        }
        for (std::size_t i = 0; i < pv.size(); ++i) rhs += ins[1].values[i] * pv.v[i];
        EXPECT_NEAR(lhs, rhs, 1e-6 * scale + 1e-9) << what << " gradient on " << GetParam().name;
      }
      if (!on_cpu() || cpu_reference_forced()) continue;
      auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", c.x}, {"r", ys}}, {y, dx});
      const bool ours = incl && o.ceil_mode;  // oneDNN's divisor differs
      const std::string fwd = cg.kernel_name(y), bwd = cg.kernel_name(dx);
      EXPECT_TRUE(fwd == "avg_rows" || (!ours && fwd == "dnnl_pool")) << what << ": " << fwd;
      EXPECT_TRUE(bwd == "avg_rows_bwd" || (!ours && bwd == "dnnl_pool_bwd"))
          << what << ": " << bwd;
    }
  }
}

// A window of equal values sends its whole gradient to its first element (row-major), on the
// argmax path as in the reference; a padded window never picks the padding.
TEST_P(NnOpTest, MaxPoolGradientGoesToTheFirstMaximum) {
  Graph g;
  auto x = g.input("x");
  auto y = max_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}, .padding = {1, 1}});
  auto dx = gradients(reduce_sum(y * 2.0f), {x})[0];
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", {1, 1, 4, 4}}}, {y, dx});
  // All -1 except a tie of two 5s in the window covering rows 1-2, columns 1-2.
  std::vector<float> v(16, -1.0f);
  v[1 * 4 + 2] = 5.0f;
  v[2 * 4 + 1] = 5.0f;
  cg.run({{"x", v}});
  const auto d = cg.read(dx);
  std::vector<float> want(16, 0.0f);
  // windows (with padding 1): rows {-1,0},{1,2},{3,4}; columns alike. Each window's first
  // in-image maximum gets 2.
  want[0] = 2;          // rows -1..0, cols -1..0: only (0,0)
  want[1] = 2;          // rows -1..0, cols 1..2: (0,1) first of the -1s
  want[3] = 2;          // rows -1..0, cols 3..4: (0,3)
  want[4] = 2;          // rows 1..2, cols -1..0: (1,0)
  want[1 * 4 + 2] = 2;  // rows 1..2, cols 1..2: the first 5
  want[1 * 4 + 3] = 2;  // rows 1..2, cols 3..4: (1,3)
  want[3 * 4 + 0] = 2;  // rows 3..4, cols -1..0
  want[3 * 4 + 1] = 2;  // rows 3..4, cols 1..2
  want[3 * 4 + 3] = 2;  // rows 3..4, cols 3..4
  EXPECT_EQ(d, want);
  EXPECT_EQ(cg.read(y)[4], 5.0f);
}

// The argmax path (a max pooling that a gradient reads) over planes wider than a vector, with
// ties and NaNs: the forward values and where each output's gradient goes, against the rule
// worked out here window by window (the first in-image tap, then a tap that beats the maximum
// or is the first NaN; row-major). Whole vectors of outputs and a partial last one, windows up
// to and wider than the CPU kernel's hoisted column table (8).
TEST_P(NnOpTest, MaxPoolArgmaxesOverWidePlanes) {
  const PoolCase cases[] = {
      {{2, 3, 9, 37}, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}},
      {{1, 2, 12, 70}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {{1, 2, 8, 40}, {.kernel = {2, 2}, .stride = {2, 2}}},
      {{1, 1, 6, 16}, {}},
      {{1, 2, 9, 30}, {.kernel = {3, 11}, .stride = {2, 10}, .padding = {1, 2}}},
  };
  for (const PoolCase& c : cases) {
    const Pool2dOptions& o = c.opts;
    Graph g;
    auto x = g.input("x"), r = g.input("r");
    auto y = max_pool2d(x, o);
    auto dx = gradients(reduce_sum(y * r), {x})[0];
    const Shape ys = GraphCompiler(GetParam().make()).compile(g, {{"x", c.x}}, {y}).shape(y);
    // Values on a grid of halves (ties in most windows) and a NaN every 53 elements.
    std::vector<float> xv =
        testing_util::random_vec(static_cast<std::size_t>(c.x.numel()), 8, 0, 4);
    for (std::size_t i = 0; i < xv.size(); ++i)
      xv[i] = i % 53 == 7 ? std::numeric_limits<float>::quiet_NaN() : std::floor(xv[i]) * 0.5f;
    const std::vector<float> rv =
        testing_util::random_vec(static_cast<std::size_t>(ys.numel()), 9, -2, 2);
    const std::int64_t planes = c.x[0] * c.x[1], H = c.x[2], W = c.x[3], OH = ys[2], OW = ys[3];
    const int sy = o.stride[0] ? o.stride[0] : o.kernel[0],
              sx = o.stride[1] ? o.stride[1] : o.kernel[1];
    std::vector<float> want_y(static_cast<std::size_t>(ys.numel())), want_dx(xv.size(), 0.0f);
    for (std::int64_t p = 0; p < planes; ++p)
      for (std::int64_t oy = 0; oy < OH; ++oy)
        for (std::int64_t ox = 0; ox < OW; ++ox) {
          std::int64_t at = -1;
          for (int ky = 0; ky < o.kernel[0]; ++ky)
            for (int kx = 0; kx < o.kernel[1]; ++kx) {
              const std::int64_t iy = oy * sy - o.padding[0] + ky, ix = ox * sx - o.padding[1] + kx;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              const std::int64_t i = (p * H + iy) * W + ix;
              const float v = xv[static_cast<std::size_t>(i)];
              const float m = at < 0 ? 0.0f : xv[static_cast<std::size_t>(at)];
              if (at < 0 || v > m || (std::isnan(v) && !std::isnan(m))) at = i;
            }
          ASSERT_GE(at, 0);
          const std::size_t out = static_cast<std::size_t>((p * OH + oy) * OW + ox);
          want_y[out] = xv[static_cast<std::size_t>(at)];
          want_dx[static_cast<std::size_t>(at)] += rv[out];
        }
    const std::string what = "max_pool2d " + c.x.str() + " k" + std::to_string(o.kernel[0]) + "x" +
                             std::to_string(o.kernel[1]) + " s" + std::to_string(sx);
    auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", c.x}, {"r", ys}}, {y, dx});
    cg.run({{"x", xv}, {"r", rv}});
    const std::vector<float> got_y = cg.read(y), got_dx = cg.read(dx);
    ASSERT_EQ(got_y.size(), want_y.size()) << what;
    for (std::size_t i = 0; i < want_y.size(); ++i) {
      if (std::isnan(want_y[i])) {
        EXPECT_TRUE(std::isnan(got_y[i])) << what << " y[" << i << "] on " << GetParam().name;
      } else {
        EXPECT_EQ(got_y[i], want_y[i]) << what << " y[" << i << "] on " << GetParam().name;
      }
    }
    for (std::size_t i = 0; i < want_dx.size(); ++i)
      EXPECT_NEAR(got_dx[i], want_dx[i], 1e-5) << what << " dx[" << i << "] on " << GetParam().name;
    if (on_cpu() && !cpu_reference_forced()) {
      EXPECT_EQ(cg.kernel_name(y), "nan_max_rows") << what;
    }
  }
}

// Every node of a training step gets its oneDNN or parallel kernel (a failed creation would
// silently fall back to the reference, which the numeric tests cannot tell apart).
TEST(NnKernels, TrainingStepKernels) {
  SKIP_IF_REFERENCE_FORCED();
  Graph g;
  auto x = g.input("x"), ids = g.input("ids", DType::i32);
  auto W = g.variable("W", {8, 3, 3, 3}, Initializer::normal(0, 0.1f, 1));
  auto b = g.variable("b", {8});
  auto E = g.variable("E", {50, 8}, Initializer::normal(0, 0.1f, 2));
  auto c = conv2d(x, W, b, {.stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 1}});
  auto m = max_pool2d(c);
  auto a = avg_pool2d(c, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
  auto e = embedding(E, ids);
  auto loss = reduce_sum(m) + reduce_sum(a) + reduce_sum(e);
  auto gr = gradients(loss, {W, b, E, x});
  auto cg = GraphCompiler().compile(g, {{"x", {2, 3, 12, 12}}, {"ids", {5}}},
                                    {gr[0], gr[1], gr[2], gr[3]});
  EXPECT_EQ(cg.kernel_name(gr[0]), "dnnl_conv_bwd_weights");
  EXPECT_EQ(cg.kernel_name(gr[1]), "channel_sums");
  EXPECT_EQ(cg.kernel_name(gr[2]), "row_scatter_add");
  // dx sums the two pooling gradients, each through the conv's input gradient
  auto grads = gradients(reduce_sum(conv2d(x, W, {.padding = {1, 1}})), {x});
  auto cg2 = GraphCompiler().compile(g, {{"x", {2, 3, 12, 12}}}, {grads[0]});
  EXPECT_EQ(cg2.kernel_name(grads[0]), "dnnl_conv_bwd_data");
  EXPECT_EQ(cg.kernel_name(c), "dnnl_conv");
  EXPECT_EQ(cg.kernel_name(e), "row_copies");
}

// Max pooling is not oneDNN's (it drops NaN): the forward keeps the argmaxes for the backward.
TEST(NnKernels, MaxPoolBackwardUsesTheForwardArgmaxes) {
  SKIP_IF_REFERENCE_FORCED();
  Graph g;
  auto x = g.input("x");
  auto y = max_pool2d(x);
  auto dx = gradients(reduce_sum(y), {x})[0];
  auto cg = GraphCompiler().compile(g, {{"x", {2, 3, 8, 8}}}, {dx});
  EXPECT_EQ(cg.kernel_name(y), "nan_max_rows");
  EXPECT_EQ(cg.kernel_name(dx), "argmax_scatter");
  // avg pooling needs no argmaxes
  Graph g2;
  auto x2 = g2.input("x");
  auto y2 = avg_pool2d(x2);
  auto dx2 = gradients(reduce_sum(y2), {x2})[0];
  auto cg2 = GraphCompiler().compile(g2, {{"x", {2, 3, 8, 8}}}, {dx2});
  EXPECT_NE(cg2.kernel_name(dx2), "argmax_scatter");
}

// ---- sigmoid and tanh through oneDNN (from 4096 elements) -------------------------------------

TEST_P(NnOpTest, SigmoidAndTanhThroughOneDnn) {
  for (std::int64_t n : {4096, 5001, 70001}) {
    for (bool in_place : {false, true}) {
      for (bool tanh_op : {false, true}) {
        Graph g;
        auto x = g.input("x");
        Node in = in_place ? x * 2.0f : x;  // the planner puts y over x * 2
        Node y = tanh_op ? tanh(in) : sigmoid(in);
        check(g, {rand_in("x", {n}, 6, -12, 12)}, y, 1e-6, 1e-7,
              std::string(tanh_op ? "tanh" : "sigmoid") + " of " + std::to_string(n) +
                  (in_place ? " in place" : ""));
        if (!cpu_reference_forced() && on_cpu()) {
          auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", {n}}}, {y});
          EXPECT_EQ(cg.kernel_name(y), "dnnl_eltwise");
        }
      }
    }
  }
  // saturation and special values
  Graph g;
  auto x = g.input("x");
  auto s = sigmoid(x), t = tanh(x);
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", {4096}}}, {s, t});
  std::vector<float> v(4096, 0.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float edges[] = {-200.0f, -88.0f, 0.0f, 88.0f, 200.0f, inf, -inf, 1e-30f, -1e-30f};
  std::copy(std::begin(edges), std::end(edges), v.begin());
  cg.run({{"x", v}});
  const auto sv = cg.read(s), tv = cg.read(t);
  for (std::size_t i = 0; i < std::size(edges); ++i) {
    const double e = edges[i];
    EXPECT_NEAR(sv[i], 1.0 / (1.0 + std::exp(-e)), 1e-7) << "sigmoid(" << e << ")";
    EXPECT_NEAR(tv[i], std::tanh(e), 1e-7) << "tanh(" << e << ")";
  }
  EXPECT_EQ(sv[6], 0.0f);
  EXPECT_EQ(sv[5], 1.0f);
  EXPECT_EQ(tv[5], 1.0f);
  EXPECT_EQ(tv[6], -1.0f);
  EXPECT_EQ(tv[2], 0.0f);
}

// ---- floor (the phased LSTM's floor-mod) -------------------------------------------------------

TEST_P(NnOpTest, FloorAndItsGradient) {
  Graph g;
  auto x = g.input("x");
  In xin = rand_in("x", {1000}, 7, -50, 50);
  const float specials[] = {-2.0f, -1.5f, -0.5f, -0.0f, 0.0f, 0.5f, 1.0f, 1.5f, 3e9f, -3e9f};
  std::copy(std::begin(specials), std::end(specials), xin.values.begin());
  check(g, {xin}, floor(x), 0, 0, "floor");
  // frac(x) = x - floor(x) differentiates like x: floor passes no gradient on.
  auto w = g.input("w");
  auto loss = reduce_sum((x - floor(x)) * w);
  auto dx = gradients(loss, {x})[0];
  const In win = rand_in("w", {1000}, 8);
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", {1000}}, {"w", {1000}}}, {dx});
  cg.run({{"x", xin.values}, {"w", win.values}});
  EXPECT_EQ(cg.read(dx), win.values);
  // a variable reached only through floor gets no gradient at all
  Graph g2;
  auto v = g2.variable("v", {3});
  EXPECT_THROW(gradients(reduce_sum(floor(v)), {v}), GraphError);
}

// ---- embedding ------------------------------------------------------------------------------

TEST_P(NnOpTest, EmbeddingLookupAnyIndexRank) {
  struct Case {
    Shape table, idx;
  };
  for (const Case& c : {Case{{10, 4}, {}}, Case{{10, 4}, {7}}, Case{{5, 3}, {4, 6}},
                        Case{{100, 16}, {2, 3, 4}}, Case{{1, 1}, {3}}, Case{{3000, 64}, {512}}}) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(c.idx.numel()));
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<std::int32_t>((i * 7 + 3) % static_cast<std::size_t>(c.table[0]));
    Graph g;
    auto t = g.input("t");
    auto y = embedding(t, g.constant_i32(c.idx, ids));
    check(g, {rand_in("t", c.table, 5)}, y, 0, 0,
          "embedding " + c.table.str() + " by " + c.idx.str());
  }
}

TEST_P(NnOpTest, EmbeddingFedIndicesAndMappedBuffers) {
  Graph g;
  auto t = g.variable("t", {6, 2}, Initializer::uniform(-1, 1, 3));
  auto ids = g.input("ids", DType::i32);
  auto y = embedding(t, ids);
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"ids", {2, 2}}}, {y, t});
  const auto table = cg.read(t);
  auto buf = cg.mapped_input_i32("ids");
  const std::int32_t v[4] = {5, 0, 0, 3};
  std::copy(v, v + 4, buf.begin());
  cg.run({{"ids", buf}});
  const auto out = cg.read(y);
  ASSERT_EQ(out.size(), 8u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[static_cast<std::size_t>(2 * i)], table[static_cast<std::size_t>(2 * v[i])]);
    EXPECT_EQ(out[static_cast<std::size_t>(2 * i + 1)],
              table[static_cast<std::size_t>(2 * v[i] + 1)]);
  }
}

// An index outside the table is a FeedError naming the node, raised before any parallel work,
// in the forward and in the backward; the compiled graph stays usable.
TEST_P(NnOpTest, EmbeddingIndexOutOfRangeIsAFeedError) {
  Graph g;
  auto t = g.variable("t", {100, 8}, Initializer::uniform(-1, 1, 1));
  auto ids = g.input("ids", DType::i32);
  auto y = embedding(t, ids).named("lookup");
  auto loss = reduce_sum(y);
  auto dt = gradients(loss, {t})[0];
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"ids", {4, 64}}}, {loss, dt});
  std::vector<std::int32_t> v(256, 1);
  for (std::int32_t bad : {100, -1, 1 << 30}) {
    v[77] = bad;
    try {
      cg.run({{"ids", v}});
      ADD_FAILURE() << "no error for index " << bad;
    } catch (const FeedError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'lookup'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("position 77"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[0, 100)"), std::string::npos) << msg;
    }
  }
  v[77] = 99;
  cg.run({{"ids", v}});
  EXPECT_FLOAT_EQ(cg.read(dt)[99 * 8], 1.0f);
  EXPECT_FLOAT_EQ(cg.read(dt)[1 * 8], 255.0f);
}

// Wide & deep in small: lookups in tables of different widths, their indices sliced out of one
// id matrix (computed indices) or fed as they are, concatenated with a dense value in the
// middle, into a product and a loss. fuse_embedding_concat makes the lookups and the concat one
// embedding_concat node; the forward value and every variable after SGD steps are the unfused
// plan's, bitwise, and grouped_embeddings = false keeps one node per lookup.
struct WideDeepSmall {
  static constexpr std::int64_t kBatch = 24, kTables = 5, kDense = 3;
  Graph g;
  std::vector<Node> vars;
  Node h, loss, step, adagrad;
  InputShapes shapes{
      {"ids", {kBatch, kTables}}, {"fed", {kBatch}}, {"dense", {kBatch, kDense}}, {"y", {kBatch}}};
  WideDeepSmall() {
    auto ids = g.input("ids", DType::i32);
    auto fed = g.input("fed", DType::i32);
    auto dense = g.input("dense");
    auto y = g.input("y", DType::i32);
    std::vector<Node> pieces;
    std::int64_t width = kDense + 4;
    for (std::int64_t t = 0; t < kTables; ++t) {
      vars.push_back(g.variable("t" + std::to_string(t), {rows(t), 2 + 3 * t},
                                Initializer::uniform(-1, 1, 40 + static_cast<std::uint64_t>(t))));
      pieces.push_back(embedding(vars.back(), reshape(slice(ids, 1, t, t + 1), {kBatch})));
      width += 2 + 3 * t;
      if (t == 2) pieces.push_back(dense);
    }
    vars.push_back(g.variable("tf", {9, 4}, Initializer::uniform(-1, 1, 49)));
    pieces.push_back(embedding(vars.back(), fed).named("fed lookup"));
    h = concat(std::span<const Node>(pieces), 1).named("features");
    vars.push_back(g.variable("W", {width, 2}, Initializer::uniform(-1, 1, 50)));
    loss = reduce_mean(cross_entropy(softmax(matmul(h, vars.back())), y));
    step = sgd(loss, vars, 0.5f);
    adagrad = minimize(loss, vars, Optimizer::adagrad(0.2f));
  }
  static std::int64_t rows(std::int64_t t) { return 20 + 7 * t; }
  // Feeds for step k: ids repeat rows (duplicate lookups sum their gradients).
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> ints(std::uint32_t k) const {
    std::vector<std::int32_t> ids(kBatch * kTables), fed(kBatch), y(kBatch);
    for (std::int64_t b = 0; b < kBatch; ++b) {
      for (std::int64_t t = 0; t < kTables; ++t)
        ids[static_cast<std::size_t>(b * kTables + t)] =
            static_cast<std::int32_t>((b * 7 + t * 3 + k) % (rows(t) / 2));
      fed[static_cast<std::size_t>(b)] = static_cast<std::int32_t>((b + k) % 9);
      y[static_cast<std::size_t>(b)] = static_cast<std::int32_t>((b + k) % 2);
    }
    return {{"ids", ids}, {"fed", fed}, {"y", y}};
  }
  void run(CompiledGraph& cg, std::uint32_t k) const {
    auto iv = ints(k);
    auto dense = testing_util::random_vec(kBatch * kDense, 70 + k);
    cg.run({{"ids", iv[0].second}, {"fed", iv[1].second}, {"y", iv[2].second}, {"dense", dense}});
  }
};

int live_nodes(const CompiledGraph& cg, detail::OpKind op) {
  int n = 0;
  for (const auto& node : detail::executable_of(cg).plan().nodes)
    n += node.op == op && node.fused_into < 0 && node.has_work();
  return n;
}

TEST_P(NnOpTest, GroupedEmbeddingsAreTheUnfusedPlanBitwise) {
  WideDeepSmall m;
  auto forward = [&](CompileOptions o) {
    auto cg = GraphCompiler(GetParam().make(), o).compile(m.g, m.shapes, {m.h});
    m.run(cg, 0);
    return std::tuple{cg.read(m.h), live_nodes(cg, detail::OpKind::EmbeddingConcat),
                      live_nodes(cg, detail::OpKind::Embedding)};
  };
  const auto [fused, n_grouped, n_lookups] = forward({});
  const auto [plain, n_grouped_off, n_lookups_off] =
      forward({.experimental = {.grouped_embeddings = false}});
  EXPECT_EQ(n_grouped, 1);
  EXPECT_EQ(n_lookups, 0);
  EXPECT_EQ(n_grouped_off, 0);
  EXPECT_EQ(n_lookups_off, 6);
  EXPECT_TRUE(testing_util::bitwise_equal(fused, plain));

  // Three steps of SGD (embedding_update) and of Adagrad (sparse_optimizer_update): the
  // tables' steps read their bands of the concat's gradient, or concat_grad's copies of them.
  for (const Node& step : {m.step, m.adagrad}) {
    auto train = [&](CompileOptions o) {
      auto cg = GraphCompiler(GetParam().make(), o).compile(m.g, m.shapes, {m.loss, step});
      std::vector<std::vector<float>> out;
      for (std::uint32_t k = 0; k < 3; ++k) {
        m.run(cg, k);
        out.push_back(cg.read(m.loss));
      }
      for (const Node& v : m.vars) out.push_back(cg.read(v));
      EXPECT_EQ(live_nodes(cg, detail::OpKind::EmbeddingConcat),
                o.experimental.grouped_embeddings ? 1 : 0);
      // Each table's step reads its band (the input dense needs no gradient).
      EXPECT_EQ(live_nodes(cg, detail::OpKind::ConcatGrad),
                o.experimental.grouped_embeddings ? 0 : 6);
      return out;
    };
    const auto a = train({}), b = train({.experimental = {.grouped_embeddings = false}});
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(testing_util::bitwise_equal(a[i], b[i])) << "value " << i;
    EXPECT_NE(a[0], a[2]);  // the steps did change the model
  }
}

// The pass takes only lookups the concat alone reads (one also summed stays a node of its
// own, and is copied in as a value), only along the last axis, and only two or more.
TEST_P(NnOpTest, GroupedEmbeddingsTakeOnlyLookupsTheConcatAloneReads) {
  Graph g;
  auto ids = g.input("ids", DType::i32);
  std::vector<Node> e;
  for (std::int64_t t = 0; t < 3; ++t)
    e.push_back(
        embedding(g.variable("t" + std::to_string(t), {8, 2 + t},
                             Initializer::uniform(-1, 1, 60 + static_cast<std::uint64_t>(t))),
                  ids));
  auto last = concat({e[0], e[1], e[2]}, -1);  // e[0] is read twice: not absorbed
  auto shared = reduce_sum(e[0]);
  auto rows = concat({e[1], e[1]}, 0);  // along the first axis: not fused
  const std::vector<std::int32_t> iv{7, 0, 3, 3, 5, 1};
  auto count = [&](CompileOptions o, std::vector<Node> fetch, detail::OpKind op) {
    auto cg = GraphCompiler(GetParam().make(), o).compile(g, {{"ids", {6}}}, fetch);
    cg.run({{"ids", iv}});
    std::vector<float> out;
    for (const Node& f : fetch) {
      auto v = cg.read(f);
      out.insert(out.end(), v.begin(), v.end());
    }
    return std::pair{live_nodes(cg, op), out};
  };
  const auto [grouped, a] = count({}, {last, shared}, detail::OpKind::EmbeddingConcat);
  const auto [lookups, a2] = count({}, {last, shared}, detail::OpKind::Embedding);
  const auto [off, b] = count({.experimental = {.grouped_embeddings = false}}, {last, shared},
                              detail::OpKind::EmbeddingConcat);
  EXPECT_EQ(grouped, 1);
  EXPECT_EQ(lookups, 1);  // e[0]
  EXPECT_EQ(off, 0);
  EXPECT_TRUE(testing_util::bitwise_equal(a, b));
  EXPECT_EQ(count({}, {rows}, detail::OpKind::EmbeddingConcat).first, 0);
  auto one = concat({e[2], g.input("x")}, 1);
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"ids", {6}}, {"x", {6, 4}}}, {one});
  EXPECT_EQ(live_nodes(cg, detail::OpKind::EmbeddingConcat), 0);  // one lookup: nothing to group
}

// A bad index of any lookup in an embedding_concat, computed (sliced out of the ids) or fed,
// is a FeedError naming the node (in training, a parallel engine may meet the sparse update's
// check first), the position and the table's rows; the compiled graph stays usable, and a
// training step changes no variable.
TEST_P(NnOpTest, GroupedEmbeddingIndexOutOfRangeIsAFeedError) {
  WideDeepSmall m;
  auto infer = GraphCompiler(GetParam().make()).compile(m.g, m.shapes, {m.h});
  auto train = GraphCompiler(GetParam().make()).compile(m.g, m.shapes, {m.loss, m.step});
  ASSERT_EQ(live_nodes(infer, detail::OpKind::EmbeddingConcat), 1);
  ASSERT_EQ(live_nodes(train, detail::OpKind::EmbeddingConcat), 1);
  const std::vector<float> before = train.read(m.vars[3]);
  auto iv = m.ints(0);
  const auto dense = testing_util::random_vec(WideDeepSmall::kBatch * WideDeepSmall::kDense, 9);
  struct Bad {
    int feed;  // 0: ids (table 3, computed indices), 1: fed
    std::size_t at;
    std::int32_t value;
    std::string pos, range;
  };
  for (CompiledGraph* cg : {&infer, &train}) {
    for (const Bad& bad :
         {Bad{0, 5 * 5 + 3, 41, "position 5", "[0, 41)"},
          Bad{0, 7 * 5 + 3, -2, "position 7", "[0, 41)"}, Bad{1, 11, 9, "position 11", "[0, 9)"}}) {
      auto v = iv;
      v[static_cast<std::size_t>(bad.feed)].second[bad.at] = bad.value;
      try {
        cg->run({{"ids", v[0].second}, {"fed", v[1].second}, {"y", v[2].second}, {"dense", dense}});
        ADD_FAILURE() << "no error for index " << bad.value;
      } catch (const FeedError& e) {
        const std::string msg = e.what();
        if (cg == &infer) {
          EXPECT_NE(msg.find("'features'"), std::string::npos) << msg;
        }
        EXPECT_NE(msg.find(bad.pos), std::string::npos) << msg;
        EXPECT_NE(msg.find(bad.range), std::string::npos) << msg;
      }
    }
  }
  EXPECT_TRUE(testing_util::bitwise_equal(train.read(m.vars[3]), before));
  m.run(infer, 0);
  m.run(train, 0);
  EXPECT_FALSE(testing_util::bitwise_equal(train.read(m.vars[3]), before));
}

// ONNX Gather: an index outside [-n, n) for the gathered axis is a FeedError naming the node,
// the value and its position, checked before it is read (CPU: by the kernel; OpenCL: in the
// device's status slot); -n..-1 count from the back. The graph stays usable. The indices are
// computed in the graph here; GatherFedIndices covers fed ones.
TEST_P(NnOpTest, GatherIndexOutOfRangeIsAFeedError) {
  Graph g;
  auto x = g.variable("x", {3, 5, 2}, Initializer::uniform(-1, 1, 1));
  auto ids = g.input("ids", DType::i32);
  auto f = g.input("f");
  auto copied = gather(x, where(ids, ids, ids), 1).named("copied");  // ids, computed
  auto cast_ids = gather(x, cast(f, DType::i32), -2).named("cast_ids");
  auto loss = reduce_sum(copied) + reduce_sum(cast_ids);
  auto dx = gradients(loss, {x})[0];
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"ids", {40}}, {"f", {2, 20}}}, {dx});
  std::vector<std::int32_t> v(40, -5);
  std::vector<float> fv(40, 4.0f);
  for (const auto& [bad, node] :
       {std::pair{5, "'copied'"}, {-6, "'copied'"}, {7, "'cast_ids'"}, {-9, "'cast_ids'"}}) {
    const bool first = node == std::string("'copied'");
    v[17] = first ? bad : -5;
    fv[17] = first ? 4.0f : static_cast<float>(bad);
    try {
      cg.run({{"ids", v}, {"f", fv}});
      ADD_FAILURE() << "no error for index " << bad;
    } catch (const FeedError& e) {
      const std::string msg = e.what();
      // The gather or its gradient, which reads the same indices: on a parallel engine either
      // may meet the bad index first.
      EXPECT_TRUE(msg.find(node) != std::string::npos ||
                  msg.find("(gather_grad)") != std::string::npos)
          << msg;
      EXPECT_NE(msg.find("position 17"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[-5, 5)"), std::string::npos) << msg;
    }
  }
  v[17] = -1;
  fv[17] = 4.0f;
  cg.run({{"ids", v}, {"f", fv}});
  // every index is row 0 (-5) except position 17 (-1, row 4); f gives row 4 throughout
  const auto d = cg.read(dx);
  EXPECT_FLOAT_EQ(d[0], 39.0f);
  EXPECT_FLOAT_EQ(d[4 * 2], 41.0f);
}

// Fed gather indices are checked on the host before the run, against OpDef::index, by
// src/common/executable.cpp: the bound is the node's axis (IndexInput::axis_dim) and values lie
// in [-n, n) (IndexInput::wraps).
TEST_P(NnOpTest, GatherFedIndices) {
  Graph g;
  auto x = g.variable("x", {3, 5, 2}, Initializer::uniform(-1, 1, 1));
  auto ids = g.input("ids", DType::i32);
  auto y = gather(x, ids, 1).named("fed");
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"ids", {4}}}, {y});
  cg.run({{"ids", std::vector<std::int32_t>{4, -1, -5, 0}}});  // valid: no error
  EXPECT_EQ(cg.read(y)[2], cg.read(x)[4 * 2]);                 // y[0, 1, 0] = x[0, -1 = 4, 0]
  for (std::int32_t bad : {5, -6}) {
    try {
      cg.run({{"ids", std::vector<std::int32_t>{0, 0, bad, 0}}});
      ADD_FAILURE() << "no error for " << bad;
    } catch (const FeedError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'fed'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("position 2"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[-5, 5)"), std::string::npos) << msg;
    }
  }
}

// The scatter-add of many repeated rows: against the reference sums, and bitwise equal for
// every team size and engine (no atomics, no order that depends on the threads).
TEST(NnKernels, EmbeddingScatterAddIsDeterministic) {
  Graph g;
  auto t = g.variable("t", {300, 24});
  auto ids = g.input("ids", DType::i32);
  auto w = g.input("w");
  auto loss = reduce_sum(embedding(t, ids) * w);
  auto dt = gradients(loss, {t})[0];
  std::vector<std::int32_t> v(5000);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<std::int32_t>((i * i * 31 + 7) % 37);
  const auto wv = testing_util::random_vec(5000 * 24, 9);
  std::vector<float> first;
  for (const auto& pc : testing_util::platforms()) {
    auto cg = GraphCompiler(pc.make()).compile(g, {{"ids", {5000}}, {"w", {5000, 24}}}, {dt});
    cg.run({{"ids", v}, {"w", wv}});
    const auto d = cg.read(dt);
    if (first.empty()) {
      first = d;
      std::vector<double> want(300 * 24, 0.0);
      for (std::size_t i = 0; i < v.size(); ++i)
        for (std::size_t k = 0; k < 24; ++k)
          want[static_cast<std::size_t>(v[i]) * 24 + k] += wv[i * 24 + k];
      testing_util::expect_close(d, ref::Array(Shape{300, 24}, want), 1e-5, 1e-4, "scatter-add");
    } else {
      EXPECT_TRUE(testing_util::bitwise_equal(d, first)) << pc.name;
    }
  }
}

// Plain SGD on an embedding table is fused into a sparse step (embedding_update): only the
// looked-up rows change, by what the dense step gives them. With momentum the dense path stays.
TEST(NnKernels, EmbeddingSgdStepIsSparse) {
  SKIP_IF_REFERENCE_FORCED();
  Graph g;
  auto t = g.variable("t", {40, 6}, Initializer::uniform(-1, 1, 3));
  auto m = g.variable("m", {40, 6}, Initializer::uniform(-1, 1, 4));
  auto ids = g.input("ids", DType::i32);
  auto w = g.input("w");
  auto loss = reduce_sum(embedding(t, ids) * w);
  auto step = sgd(loss, {t}, 0.25f);
  auto mloss = reduce_sum(embedding(m, ids) * w);
  auto mstep = sgd(mloss, {m}, 0.25f, 0.5f);
  // Repeated rows, in no order; rows 0-2 and 30-39 are never looked up.
  const std::vector<std::int32_t> iv{5, 17, 5, 29, 3, 17, 17, 8, 29, 5, 12, 3};
  const InputShapes shapes{{"ids", {12}}, {"w", {12, 6}}};
  auto train = [&](const PlatformCase& pc, CompileOptions o, Node var, Node st) {
    auto cg = GraphCompiler(pc.make(), o).compile(g, shapes, {st});
    std::vector<float> initial = cg.read(var);
    for (std::uint32_t k = 0; k < 3; ++k)
      cg.run({{"ids", iv}, {"w", testing_util::random_vec(72, 20 + k)}});
    int updates = 0;
    for (const auto& n : detail::executable_of(cg).plan().nodes)
      updates += n.op == detail::OpKind::EmbeddingUpdate && n.fused_into < 0;
    return std::tuple{initial, cg.read(var), updates};
  };
  std::vector<float> first;
  for (const auto& pc : testing_util::platforms()) {
    const bool cpu = pc.name.rfind("cpu", 0) == 0;
    const auto [init, fused, n_fused] = train(pc, {}, t, step);
    const auto [init2, dense, n_dense] = train(pc, {.fuse = false}, t, step);
    const auto [init3, unplanned, n_unplanned] = train(pc, {.plan_memory = false}, t, step);
    EXPECT_EQ(n_fused, 1) << pc.name;
    EXPECT_EQ(n_dense, 0) << pc.name;
    // OpenCL's sparse step has the dense step's expressions (no contraction): its bits.
    if (!cpu) {
      EXPECT_TRUE(testing_util::bitwise_equal(fused, dense)) << pc.name;
    }
    testing_util::expect_close(
        fused, ref::Array(Shape{40, 6}, std::vector<double>(dense.begin(), dense.end())), 1e-6,
        1e-6, "fused vs dense SGD step on " + pc.name);
    EXPECT_TRUE(testing_util::bitwise_equal(fused, unplanned)) << pc.name;  // out-of-place path
    for (std::size_t r = 0; r < 40; ++r) {
      const bool looked_up =
          std::find(iv.begin(), iv.end(), static_cast<std::int32_t>(r)) != iv.end();
      for (std::size_t d = 0; d < 6; ++d) {
        const std::size_t i = r * 6 + d;
        if (looked_up) {
          EXPECT_NE(fused[i], init[i]) << pc.name << " row " << r;
        } else {
          EXPECT_EQ(fused[i], init[i]) << pc.name << " row " << r;
        }
      }
    }
    if (cpu) {
      if (first.empty()) first = fused;
      EXPECT_TRUE(testing_util::bitwise_equal(fused, first)) << pc.name;
    }
    EXPECT_EQ(std::get<2>(train(pc, {}, m, mstep)), 0) << "momentum keeps the dense step";
  }
}

// An out-of-range index in a fused sparse step, fed or computed (sliced out of a wider input),
// is a FeedError naming the value; the table is left as it was, on every platform.
TEST(NnKernels, EmbeddingSgdStepChecksIndices) {
  SKIP_IF_REFERENCE_FORCED();
  Graph g;
  auto t = g.variable("t", {10, 4}, Initializer::uniform(-1, 1, 5));
  auto ids = g.input("ids", DType::i32);
  auto wide = g.input("wide", DType::i32);
  auto step = sgd(reduce_sum(embedding(t, ids)) + reduce_sum(embedding(t, slice(wide, 0, 1, 3))),
                  {t}, 0.5f);
  for (const auto& pc : testing_util::platforms()) {
    auto cg = GraphCompiler(pc.make()).compile(g, {{"ids", {3}}, {"wide", {4}}}, {step});
    const auto before = cg.read(t);
    for (int computed = 0; computed < 2; ++computed) {
      std::vector<std::int32_t> a{1, 10, 2}, b{0, 3, 4, 5};
      if (computed != 0) std::swap(a[1], b[2]);  // 10 at position 1 of the slice
      try {
        cg.run({{"ids", a}, {"wide", b}});
        ADD_FAILURE() << "no error for index 10 of a 10-row table on " << pc.name;
      } catch (const FeedError& e) {
        EXPECT_NE(std::string(e.what()).find("index 10"), std::string::npos) << e.what();
      }
      EXPECT_TRUE(testing_util::bitwise_equal(cg.read(t), before)) << pc.name;
    }
  }
}

// A small CNN trains: conv + relu + max pool + avg pool + linear, SGD; two compiles of the
// same graph on the same platform give bitwise equal losses.
TEST_P(NnOpTest, SmallConvNetTrainsDeterministically) {
  auto train = [&]() {
    Graph g;
    auto x = g.input("x"), y = g.input("y", DType::i32);
    auto W1 = g.variable("W1", {8, 3, 3, 3}, Initializer::normal(0, 0.3f, 1));
    auto b1 = g.variable("b1", {8});
    auto W2 = g.variable("W2", {8 * 2 * 2, 4}, Initializer::normal(0, 0.3f, 2));
    auto h = max_pool2d(relu(conv2d(x, W1, b1, {.padding = {1, 1}})));           // [16, 8, 4, 4]
    h = avg_pool2d(h, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});  // [16, 8, 2, 2]
    auto logits = matmul(reshape(h, {16, -1}), W2);
    auto loss = reduce_mean(cross_entropy(softmax(logits), y));
    auto step = sgd(loss, {W1, b1, W2}, 0.1f);
    auto cg = GraphCompiler(GetParam().make())
                  .compile(g, {{"x", {16, 3, 8, 8}}, {"y", {16}}}, {loss, step});
    std::vector<float> xv(16 * 3 * 8 * 8);
    std::vector<std::int32_t> yv(16);
    std::mt19937 rng(3);
    std::normal_distribution<float> noise(0, 0.5f);
    for (int i = 0; i < 16; ++i) {
      yv[static_cast<std::size_t>(i)] = i % 4;
      for (int c = 0; c < 3; ++c)
        for (int p = 0; p < 64; ++p) {
          // class k lights up quadrant k of channel 0
          const int quad = (p / 8 >= 4) * 2 + (p % 8 >= 4);
          xv[static_cast<std::size_t>((i * 3 + c) * 64 + p)] =
              (c == 0 && quad == i % 4 ? 1.5f : 0.0f) + noise(rng);
        }
    }
    std::vector<float> losses;
    for (int it = 0; it < 40; ++it) {
      cg.run({{"x", xv}, {"y", yv}});
      losses.push_back(cg.read(loss)[0]);
    }
    return losses;
  };
  const auto a = train(), b = train();
  EXPECT_TRUE(testing_util::bitwise_equal(a, b));
  EXPECT_LT(a.back(), 0.3f * a.front());
}

// Gradient rules that emit several nodes read their node's attributes after the first make_op
// has grown the graph's node vector: they must have copied them first (a reference dangles
// once the vector reallocates). Graphs of every size up to a few reallocations make sure one
// of them does so in the middle of each rule (AddressSanitizer reports the stale reads; conv's
// attributes would also arrive empty).
TEST(NnKernels, GradientRulesSurviveGraphGrowth) {
  for (int pad = 0; pad < 70; ++pad) {
    Graph g;
    for (int i = 0; i < pad; ++i) g.constant(static_cast<float>(i));
    auto x = g.input("x"), a = g.input("a"), b = g.input("b");
    auto W = g.variable("W", {2, 1, 3, 3}, Initializer::fill(0.5f));
    auto cat = concat({a, b, a, b}, 1);                               // [1, 8]
    auto mix = axpby(a, b, 2.0f, -3.0f);                              // [1, 2]
    auto conv = conv2d(x, W, {.stride = {2, 1}, .padding = {1, 0}});  // [1, 2, 2, 2]
    auto loss = reduce_sum(cat) + reduce_sum(mix) + reduce_sum(conv);
    auto gr = gradients(loss, {a, b, W});
    auto cg = GraphCompiler().compile(g, {{"x", {1, 1, 3, 4}}, {"a", {1, 2}}, {"b", {1, 2}}}, gr);
    cg.run({{"x", std::vector<float>(12, 1.0f)},
            {"a", std::vector<float>{1, 2}},
            {"b", std::vector<float>{3, 4}}});
    EXPECT_EQ(cg.read(gr[0]), (std::vector<float>{4, 4})) << pad;    // 2 from concat + 2
    EXPECT_EQ(cg.read(gr[1]), (std::vector<float>{-1, -1})) << pad;  // 2 from concat - 3
    // dW[o, 0, ky, kx]: the taps in the image over the 2x2 outputs (rows -1..1 and 1..3)
    EXPECT_EQ(cg.read(gr[2]),
              (std::vector<float>{2, 2, 2, 4, 4, 4, 2, 2, 2, 2, 2, 2, 4, 4, 4, 2, 2, 2}))
        << pad;
  }
}

// The same training steps (convolution, both poolings, an embedding, SGD) on the CPU and on
// OpenCL: the losses agree to float rounding step after step.
TEST(NnKernels, CpuAndOpenClAgree) {
  if (!Platform::opencl_available() && !testing_util::opencl_required()) {
    GTEST_SKIP() << "no OpenCL device";
  }
  auto train = [](const Platform& platform) {
    Graph g;
    auto x = g.input("x"), ids = g.input("ids", DType::i32), y = g.input("y", DType::i32);
    auto W = g.variable("W", {6, 2, 3, 3}, Initializer::normal(0, 0.3f, 4));
    auto b = g.variable("b", {6});
    auto E = g.variable("E", {20, 4}, Initializer::normal(0, 0.3f, 5));
    auto V = g.variable("V", {6 * 2 * 2 + 4, 3}, Initializer::normal(0, 0.3f, 6));
    auto h = relu(conv2d(x, W, b, {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 2}}));
    h = avg_pool2d(max_pool2d(h, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}),
                   {.kernel = {2, 2}, .stride = {2, 1}, .count_include_pad = true});  // [8,6,2,2]
    auto feats = concat({reshape(h, {8, 24}), embedding(E, ids)}, 1);
    auto loss = reduce_mean(cross_entropy(softmax(matmul(feats, V)), y));
    auto step = sgd(loss, {W, b, E, V}, 0.2f);
    auto cg = GraphCompiler(platform).compile(g, {{"x", {8, 2, 8, 7}}, {"ids", {8}}, {"y", {8}}},
                                              {loss, step});
    const auto xv = testing_util::random_vec(8 * 2 * 8 * 7, 11);
    const std::vector<std::int32_t> iv{3, 19, 0, 3, 7, 7, 12, 3}, yv{0, 1, 2, 0, 1, 2, 0, 1};
    std::vector<float> losses;
    for (int i = 0; i < 12; ++i) {
      cg.run({{"x", xv}, {"ids", iv}, {"y", yv}});
      losses.push_back(cg.read(loss)[0]);
    }
    return losses;
  };
  const auto cpu = train(Platform::cpu({.engine = CpuEngine::sequential, .threads = 1}));
  const auto cl = train(Platform::opencl());
  ASSERT_EQ(cpu.size(), cl.size());
  for (std::size_t i = 0; i < cpu.size(); ++i)
    EXPECT_NEAR(cl[i], cpu[i], 1e-5 * std::abs(cpu[i]) + 1e-6) << "step " << i;
  EXPECT_LT(cpu.back(), cpu.front());
}

// stack_shared_products: eight steps' x_t @ W at batch 1 (with a tanh epilogue, fused before
// the pass) become one product of the stacked x_t, sliced back out. The values a user fetches
// (a member, the loss, W's gradient after the backward products that read the members) match
// the unstacked plan's within rounding (one GEMM of 8 rows against 8 of one row), and
// stacked_products = false keeps one product per step.
int stacked_products(const CompiledGraph& cg) {
  int n = 0;
  for (const auto& node : detail::executable_of(cg).plan().nodes)
    n += node.has_work() && node.label.starts_with("stacked product of ");
  return n;
}

void expect_near_rel(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  ASSERT_EQ(a.size(), b.size());
  double scale = 0, diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  EXPECT_LE(diff, rel * scale) << "max |a - b| " << diff << " against max |b| " << scale;
}

TEST_P(NnOpTest, StackedProductsAreTheUnstackedOnes) {
  Graph g;
  auto W = g.variable("W", {128, 512}, Initializer::uniform(-0.1f, 0.1f, 61));
  std::vector<Node> ys;
  InputShapes shapes;
  for (int t = 0; t < 8; ++t) {
    const std::string name = "x" + std::to_string(t);
    ys.push_back(tanh(matmul(g.input(name), W)));
    shapes.push_back({name, {1, 128}});
  }
  Node s = ys[0];
  for (std::size_t t = 1; t < ys.size(); ++t) s = s + ys[t] * static_cast<float>(t + 1);
  auto loss = reduce_mean(s * s);
  auto dW = gradients(loss, {W})[0];
  auto run = [&](CompileOptions o) {
    auto cg = GraphCompiler(GetParam().make(), o).compile(g, shapes, {ys[3], loss, dW});
    std::vector<std::vector<float>> xs;
    std::vector<FeedItem> feeds;
    for (std::uint32_t t = 0; t < 8; ++t) xs.push_back(testing_util::random_vec(128, 80 + t));
    for (std::uint32_t t = 0; t < 8; ++t) feeds.push_back({shapes[t].first, xs[t]});
    cg.run(feeds);
    return std::tuple{
        std::vector<std::vector<float>>{cg.read(ys[3]), cg.read(loss), cg.read(dW)},
        stacked_products(cg),
        live_nodes(cg, detail::OpKind::MatMul) + live_nodes(cg, detail::OpKind::FusedMatMul)};
  };
  const auto [on, n_on, products_on] = run({});
  const auto [off, n_off, products_off] = run({.experimental = {.stacked_products = false}});
  EXPECT_EQ(n_on, 1);
  EXPECT_EQ(n_off, 0);
  EXPECT_EQ(products_off - products_on, 7);  // eight forward products -> one
  for (std::size_t i = 0; i < on.size(); ++i) expect_near_rel(on[i], off[i], 1e-5);
  EXPECT_GT(std::abs(on[2][5]), 0.0f);
}

// What the pass leaves alone: products of many rows (W is not 64x their own data), chained
// products (each depends on the last), three products only, and products of different
// right operands.
TEST_P(NnOpTest, StackedProductsTakeOnlyIndependentFewRowProductsOfOneOperand) {
  auto count = [&](const Graph& g, const InputShapes& shapes, const std::vector<Node>& fetches) {
    auto cg = GraphCompiler(GetParam().make()).compile(g, shapes, fetches);
    return stacked_products(cg);
  };
  auto case_of = [&](std::int64_t rows, int steps, bool chained, bool two_weights) {
    Graph g;
    auto W = g.variable("W", {256, 256}, Initializer::uniform(-0.1f, 0.1f, 62));
    auto V = g.variable("V", {256, 256}, Initializer::uniform(-0.1f, 0.1f, 63));
    InputShapes shapes;
    std::vector<Node> out;
    Node h;
    if (chained) {
      h = g.input("h");
      shapes.push_back({"h", {rows, 256}});
    }
    for (int t = 0; t < steps; ++t) {
      const std::string name = "x" + std::to_string(t);
      const Node x = chained ? h : g.input(name);
      if (!chained) shapes.push_back({name, {rows, 256}});
      out.push_back(matmul(x, two_weights && t % 2 ? V : W));
      if (chained) h = out.back();
    }
    return count(g, shapes, out);
  };
  EXPECT_EQ(case_of(1, 8, false, false), 1);   // the positive control
  EXPECT_EQ(case_of(64, 8, false, false), 0);  // 64 rows: 65,536 < 64 * 64 * 512
  EXPECT_EQ(case_of(1, 8, true, false), 0);    // a chain
  EXPECT_EQ(case_of(1, 3, false, false), 0);   // three products
  EXPECT_EQ(case_of(1, 6, false, true), 0);    // three of W, three of V
  EXPECT_EQ(case_of(1, 8, false, true), 2);    // four of each
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, NnOpTest, ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

}  // namespace

// DenseNet's pattern: a concat of convolutions normalised (an inference batch norm that cannot
// fold: mul, add, relu -> channel_affine), a convolution, an average pooling between blocks.
// The channel_affine and the pooling pass the convolutions' layout through (no reorders around
// them) where the platform says its kernels take it, the same predicate the CPU's kernels ask;
// an average pooling whose divisor oneDNN computes otherwise (count_include_pad with a
// ceil_mode window past the padding) stays plain. Results match the all-plain plan's within
// rounding (the convolutions' layouts differ; channel_affine's arithmetic is the same).
TEST(NnKernels, NormalisationAndAveragePoolingKeepTheConvolutionLayout) {
  using detail::ActivationLayout;
  if (cpu_reference_forced() || detail::cpu::conv_activation_layout() == ActivationLayout::nchw)
    GTEST_SKIP() << "convolutions here compute in NCHW";
  Graph g;
  auto x = g.input("x"), w0 = g.input("w0"), w1 = g.input("w1"), w2 = g.input("w2"),
       w3 = g.input("w3");
  auto s = g.constant({32, 1, 1}, testing_util::random_vec(32, 81));
  auto t = g.constant({32, 1, 1}, testing_util::random_vec(32, 82));
  Node c0 = conv2d(x, w0), c1 = conv2d(c0, w1, Conv2dOptions{.padding = {1, 1}});
  Node a = relu(add(mul(concat({c0, c1}, 1), s), t));
  Node c2 = conv2d(a, w2);
  Node p = avg_pool2d(c2, {.kernel = {2, 2}});
  Node q = avg_pool2d(conv2d(a, w2), {.kernel = {3, 3},
                                      .stride = {2, 2},
                                      .padding = {1, 1},
                                      .count_include_pad = true,
                                      .ceil_mode = true});
  Node y = conv2d(p, w3), z = conv2d(q, w3);
  const InputShapes shapes{{"x", {2, 8, 10, 10}},
                           {"w0", {16, 8, 1, 1}},
                           {"w1", {16, 16, 3, 3}},
                           {"w2", {16, 32, 1, 1}},
                           {"w3", {16, 16, 1, 1}}};
  std::vector<std::vector<float>> values;
  std::vector<FeedItem> feeds;
  for (const auto& [name, shape] : shapes)
    values.push_back(testing_util::random_vec(static_cast<std::size_t>(shape.numel()), 83));
  for (std::size_t i = 0; i < shapes.size(); ++i) feeds.push_back({shapes[i].first, values[i]});
  std::vector<float> out[2][2];
  for (const bool blocked : {false, true}) {
    CompileOptions o;
    o.experimental.blocked_layouts = blocked;
    auto cg = GraphCompiler(Platform::cpu(), o).compile(g, shapes, {y, z});
    cg.run(feeds);
    out[blocked][0] = cg.read(y);
    out[blocked][1] = cg.read(z);
    if (!blocked) continue;
    const detail::Plan& plan = detail::executable_of(cg).plan();
    const detail::PlanNode& pn = plan.nodes[plan.index(p, "test")];
    const ActivationLayout l = plan.nodes[plan.index(c2, "test")].layout;
    ASSERT_NE(l, ActivationLayout::nchw);
    EXPECT_EQ(plan.nodes[plan.index(a, "test")].layout, l);
    EXPECT_EQ(cg.kernel_name(a), "channels_last");
    if (detail::cpu::passes_layout(plan, pn, l)) {
      EXPECT_EQ(pn.layout, l);
      EXPECT_EQ(cg.kernel_name(p), "dnnl_pool_blocked");
    } else {
      EXPECT_EQ(pn.layout, ActivationLayout::nchw);
    }
    EXPECT_EQ(plan.nodes[plan.index(q, "test")].layout, ActivationLayout::nchw);
    EXPECT_NE(cg.kernel_name(q), "dnnl_pool_blocked");
  }
  // channel_affine's kernel in every layout (the search may give any), relu or not, fed the
  // plain input laid out so: the plain kernel's result laid out so, bitwise.
  CompileOptions plain;
  plain.experimental.blocked_layouts = false;
  auto cg = GraphCompiler(Platform::cpu(), plain).compile(g, shapes, {y, z});
  const detail::Plan& plan = detail::executable_of(cg).plan();
  const std::uint32_t i = plan.index(a, "test");
  const Shape& xs = plan.nodes[plan.nodes[i].inputs[0]].type.shape;
  const auto xv = testing_util::random_vec(static_cast<std::size_t>(xs.numel()), 84);
  for (const bool with_relu : {true, false}) {
    std::vector<float> plain_out;
    for (const ActivationLayout l : {ActivationLayout::nchw, ActivationLayout::nhwc,
                                     ActivationLayout::nChw8c, ActivationLayout::nChw16c}) {
      detail::PlanNode n = plan.nodes[i];
      n.layout = l;
      n.attrs.set(detail::ChannelAffineAct{with_relu});
      detail::Plan copy = plan;  // the kernel asks its input's layout of the plan
      copy.nodes[n.inputs[0]].layout = l;
      const std::vector<float> in = relayout(xv, xs, ActivationLayout::nchw, l);
      const auto sv = testing_util::random_vec(32, 85), tv = testing_util::random_vec(32, 86);
      detail::cpu::KernelArgs args{copy, i, n, {}, {}, nullptr, n.type, 2, {2}, nullptr, nullptr};
      args.in = {in.data(), sv.data(), tv.data()};
      for (std::uint32_t u : n.inputs) args.in_types.push_back(plan.nodes[u].type);
      std::string_view chosen;
      const std::vector<float> out = run_in_layout(args, n, false, 2, chosen);
      if (l == ActivationLayout::nchw) plain_out = out;
      EXPECT_EQ(chosen, l == ActivationLayout::nchw ? "planes" : "channels_last");
      EXPECT_EQ(out, plain_out) << "layout " << static_cast<int>(l) << " relu " << with_relu;
    }
  }
  for (int k : {0, 1}) {
    ASSERT_EQ(out[0][k].size(), out[1][k].size());
    for (std::size_t i = 0; i < out[0][k].size(); ++i)
      ASSERT_NEAR(out[1][k][i], out[0][k][i], 1e-4f * (1.0f + std::fabs(out[0][k][i])))
          << k << " " << i;
  }
}
