// SPDX-License-Identifier: Apache-2.0
// Convolutions, transposed convolutions and pooling of random geometry on every platform:
// kernel sizes, strides, dilations, asymmetric padding, groups (depthwise too), ceil_mode and
// count_include_pad drawn at random, sizes down to 1. test_nn_ops and test_autodiff check
// chosen cases; these draw the combinations nobody chose.
//  - Gradients of one op: the compiled gradients of sum(op(x, w, b) * R) against the sums the
//    op's definition gives, written here as loops over the same windows as the forward pass.
//  - Chains of 2-4 ops (conv, relu, bias, residual add, pools, conv_transpose) forward against
//    the double-precision reference: between ops the CPU keeps blocked layouts, fuses post-ops
//    and takes Winograd's kernels where the geometry allows, which one op alone never shows.
// A drawn pooling with a window of padding alone (ceil_mode's last window past the image, or
// dilated taps that skip it) must be refused with a ShapeError at compile time.
#include <algorithm>
#include <cmath>
#include <random>

#include "common/executable.hpp"
#include "cpu/kernel.hpp"
#include "cpu/kernels/winograd.hpp"
#include "hetgraph/autodiff.hpp"
#include "hetgraph/onnx.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using testing_util::cpu_reference_forced;
using testing_util::In;
using testing_util::PlatformCase;

namespace {

using I = std::int64_t;
using Pair = std::array<int, 2>;

// One op's geometry. `kind`: conv2d, conv_transpose2d, max_pool2d, avg_pool2d.
enum class Kind { conv, conv_t, max_pool, avg_pool };

struct Geo {
  Kind kind = Kind::conv;
  I N = 1, C = 1, H = 1, W = 1;
  I O = 1, KH = 1, KW = 1, G = 1;  // O: output channels (pools: C)
  Pair s{1, 1}, pb{0, 0}, pe{0, 0}, d{1, 1}, op{0, 0};
  bool bias = false, ceil = false, include_pad = false;

  I span(int a) const { return (a == 0 ? KH - 1 : KW - 1) * d[a] + 1; }
  I in(int a) const { return a == 0 ? H : W; }
  // Output rows (a = 0) or columns (a = 1); < 1 when the geometry has none.
  I out(int a) const {
    if (kind == Kind::conv_t) return s[a] * (in(a)-1) + op[a] + span(a) - pb[a] - pe[a];
    const I num = in(a) + pb[a] + pe[a] - span(a);
    if (num < 0) return 0;
    return (ceil ? (num + s[a] - 1) / s[a] : num / s[a]) + 1;
  }
  // A pooling window without an image element: one of ceil_mode past the end padding, or one
  // whose dilated taps skip the image. hetgraph refuses these.
  bool refused() const {
    if (!pool()) return false;
    for (int a : {0, 1})
      for (I o = 0; o < out(a); ++o) {
        bool inside = false;
        for (I k = 0; k < (a == 0 ? KH : KW); ++k) {
          const I at = o * s[a] - pb[a] + k * d[a];
          inside = inside || (at >= 0 && at < in(a));
        }
        if (!inside) return true;
      }
    return false;
  }
  Shape x_shape() const { return {N, C, H, W}; }
  Shape w_shape() const {
    return kind == Kind::conv ? Shape{O, C / G, KH, KW} : Shape{C, O / G, KH, KW};
  }
  Shape y_shape() const { return {N, O, out(0), out(1)}; }
  bool pool() const { return kind == Kind::max_pool || kind == Kind::avg_pool; }

  std::string str() const {
    auto p = [](Pair v) { return "(" + std::to_string(v[0]) + "," + std::to_string(v[1]) + ")"; };
    const char* names[] = {"conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d"};
    std::string r = std::string(names[static_cast<int>(kind)]) + " x" + x_shape().str();
    if (!pool()) r += " w" + w_shape().str() + " groups " + std::to_string(G);
    if (pool()) r += " k(" + std::to_string(KH) + "," + std::to_string(KW) + ")";
    r += " s" + p(s) + " pads" + p(pb) + "/" + p(pe) + " d" + p(d);
    if (kind == Kind::conv_t) r += " output_padding" + p(op);
    if (bias) r += " bias";
    if (ceil) r += " ceil_mode";
    if (include_pad) r += " count_include_pad";
    return r;
  }

  Node build(Node x, Node w, Node b) const {
    switch (kind) {
      case Kind::conv: {
        const Conv2dOptions o{.stride = s,
                              .padding = pb,
                              .padding_end = pe,
                              .dilation = d,
                              .groups = static_cast<int>(G)};
        return bias ? conv2d(x, w, b, o) : conv2d(x, w, o);
      }
      case Kind::conv_t: {
        const ConvTranspose2dOptions o{.stride = s,
                                       .padding = pb,
                                       .padding_end = pe,
                                       .dilation = d,
                                       .output_padding = op,
                                       .groups = static_cast<int>(G)};
        return bias ? conv_transpose2d(x, w, b, o) : conv_transpose2d(x, w, o);
      }
      case Kind::max_pool:
      case Kind::avg_pool: {
        const Pool2dOptions o{.kernel = {static_cast<int>(KH), static_cast<int>(KW)},
                              .stride = s,
                              .padding = pb,
                              .padding_end = pe,
                              .count_include_pad = include_pad,
                              .ceil_mode = ceil,
                              .dilation = d};
        return kind == Kind::max_pool ? max_pool2d(x, o) : avg_pool2d(x, o);
      }
    }
    return x;
  }
};

int pick(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// A random geometry of `kind` on C input channels (0: drawn), with at least one output element
// and nothing larger than a test of milliseconds needs. Pools get padding below the kernel.
Geo random_geo(std::mt19937& rng, Kind kind, I C = 0, I H = 0, I W = 0) {
  Geo g;
  g.kind = kind;
  g.N = pick(rng, 1, 3);
  for (;;) {
    if (g.pool()) {
      g.C = C ? C : pick(rng, 1, 4);
      g.G = 1;
      g.O = g.C;
    } else if (C) {
      g.C = C;
      std::vector<I> divisors;
      for (I k = 1; k <= C; ++k)
        if (C % k == 0) divisors.push_back(k);
      g.G = divisors[static_cast<std::size_t>(pick(rng, 0, static_cast<int>(divisors.size()) - 1))];
      g.O = g.G * pick(rng, 1, std::max<int>(1, static_cast<int>(8 / g.G)));
    } else {
      g.G = pick(rng, 0, 3) == 0 ? pick(rng, 2, 4) : 1;
      g.C = g.G * pick(rng, 1, 4);
      g.O = g.G * pick(rng, 1, 4);
      if (pick(rng, 0, 5) == 0) g.G = g.C, g.O = g.C * pick(rng, 1, 2);  // depthwise
    }
    const bool dilate = kind != Kind::avg_pool && pick(rng, 0, 2) == 0;
    for (int a : {0, 1}) {
      (a == 0 ? g.KH : g.KW) = pick(rng, 1, kind == Kind::conv_t ? 4 : 5);
      g.s[a] = pick(rng, 1, 3);
      g.d[a] = dilate ? pick(rng, 1, 3) : 1;
      const int k = static_cast<int>(a == 0 ? g.KH : g.KW);
      const int limit = g.pool() ? k - 1 : static_cast<int>(g.span(a)) - 1;
      g.pb[a] = pick(rng, 0, limit);
      g.pe[a] = pick(rng, 0, 2) == 0 ? g.pb[a] : pick(rng, 0, limit);
      if (kind == Kind::conv_t) g.op[a] = pick(rng, 0, g.s[a] - 1);
    }
    g.H = H ? H : pick(rng, 1, 11);
    g.W = W ? W : pick(rng, 1, 11);
    g.bias = !g.pool() && pick(rng, 0, 1) == 1;
    g.ceil = g.pool() && pick(rng, 0, 2) == 0;
    g.include_pad = kind == Kind::avg_pool && pick(rng, 0, 1) == 1;
    if (g.out(0) >= 1 && g.out(1) >= 1) return g;
  }
}

// d sum(op(x, w, b) * R) / d(x, w, b), from the op's definition (R the output's weights).
struct Grads {
  ref::Array dx, dw, db;
};
Grads reference_grads(const Geo& g, const ref::Array& x, const ref::Array& w, const ref::Array& R) {
  Grads r{ref::Array(g.x_shape()), ref::Array(g.pool() ? Shape{1} : g.w_shape()),
          ref::Array(Shape{g.O})};
  const I OH = g.out(0), OW = g.out(1);
  auto X = [&](I n, I c, I y, I xx) {
    return static_cast<std::size_t>(((n * g.C + c) * g.H + y) * g.W + xx);
  };
  auto Y = [&](I n, I o, I y, I xx) {
    return static_cast<std::size_t>(((n * g.O + o) * OH + y) * OW + xx);
  };
  const I CG = g.C / g.G, OG = g.O / g.G;
  if (g.kind == Kind::conv) {
    for (I n = 0; n < g.N; ++n)
      for (I o = 0; o < g.O; ++o)
        for (I oy = 0; oy < OH; ++oy)
          for (I ox = 0; ox < OW; ++ox) {
            const double rr = R.v[Y(n, o, oy, ox)];
            r.db.v[static_cast<std::size_t>(o)] += rr;
            for (I cl = 0; cl < CG; ++cl)
              for (I ky = 0; ky < g.KH; ++ky)
                for (I kx = 0; kx < g.KW; ++kx) {
                  const I c = o / OG * CG + cl;
                  const I y = oy * g.s[0] - g.pb[0] + ky * g.d[0];
                  const I xx = ox * g.s[1] - g.pb[1] + kx * g.d[1];
                  if (y < 0 || y >= g.H || xx < 0 || xx >= g.W) continue;
                  const auto wi = static_cast<std::size_t>(((o * CG + cl) * g.KH + ky) * g.KW + kx);
                  r.dx.v[X(n, c, y, xx)] += rr * w.v[wi];
                  r.dw.v[wi] += rr * x.v[X(n, c, y, xx)];
                }
          }
  } else if (g.kind == Kind::conv_t) {
    // The forward pass scatters x[n, c, iy, ix] * w[c, ol, ky, kx] to output (iy * s - pad +
    // k * d) of channel o = c / CG * OG + ol.
    for (I n = 0; n < g.N; ++n)
      for (I o = 0; o < g.O; ++o)
        for (I i = 0; i < OH * OW; ++i)
          r.db.v[static_cast<std::size_t>(o)] += R.v[Y(n, o, i / OW, i % OW)];
    for (I n = 0; n < g.N; ++n)
      for (I c = 0; c < g.C; ++c)
        for (I iy = 0; iy < g.H; ++iy)
          for (I ix = 0; ix < g.W; ++ix)
            for (I ol = 0; ol < OG; ++ol)
              for (I ky = 0; ky < g.KH; ++ky)
                for (I kx = 0; kx < g.KW; ++kx) {
                  const I o = c / CG * OG + ol;
                  const I y = iy * g.s[0] - g.pb[0] + ky * g.d[0];
                  const I xx = ix * g.s[1] - g.pb[1] + kx * g.d[1];
                  if (y < 0 || y >= OH || xx < 0 || xx >= OW) continue;
                  const auto wi = static_cast<std::size_t>(((c * OG + ol) * g.KH + ky) * g.KW + kx);
                  const double rr = R.v[Y(n, o, y, xx)];
                  r.dx.v[X(n, c, iy, ix)] += rr * w.v[wi];
                  r.dw.v[wi] += rr * x.v[X(n, c, iy, ix)];
                }
  } else {
    // Max: the window's first largest tap takes R; average: every tap in the image takes
    // R / count, count the taps in the image or (count_include_pad) those inside the padded
    // image.
    for (I n = 0; n < g.N; ++n)
      for (I c = 0; c < g.C; ++c)
        for (I oy = 0; oy < OH; ++oy)
          for (I ox = 0; ox < OW; ++ox) {
            std::vector<std::size_t> taps;
            I padded = 0;
            for (I ky = 0; ky < g.KH; ++ky)
              for (I kx = 0; kx < g.KW; ++kx) {
                const I y = oy * g.s[0] - g.pb[0] + ky * g.d[0];
                const I xx = ox * g.s[1] - g.pb[1] + kx * g.d[1];
                if (y < g.H + g.pe[0] && xx < g.W + g.pe[1]) ++padded;
                if (y >= 0 && y < g.H && xx >= 0 && xx < g.W) taps.push_back(X(n, c, y, xx));
              }
            const double rr = R.v[Y(n, c, oy, ox)];
            if (g.kind == Kind::max_pool) {
              std::size_t best = taps[0];
              for (std::size_t t : taps)
                if (x.v[t] > x.v[best]) best = t;
              r.dx.v[best] += rr;
            } else {
              const double count =
                  static_cast<double>(g.include_pad ? padded : static_cast<I>(taps.size()));
              for (std::size_t t : taps) r.dx.v[t] += rr / count;
            }
          }
  }
  return r;
}

std::vector<float> distinct_values(std::size_t n, std::uint32_t seed) {
  // Max pooling's gradient needs one largest tap per window: distinct values 1/64 apart.
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = -1.0f + static_cast<float>(i) / 64.0f;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

class RandomWindows : public ::testing::TestWithParam<PlatformCase> {};

// Forward and gradients of one op of random geometry against the definition.
TEST_P(RandomWindows, OneOpAndItsGradientsMatchTheDefinition) {
  std::mt19937 rng(2026);
  const Kind kinds[] = {Kind::conv, Kind::conv_t, Kind::max_pool, Kind::avg_pool};
  int refused = 0;
  for (int t = 0; t < 120; ++t) {
    const Geo geo = random_geo(rng, kinds[t % 4]);
    SCOPED_TRACE(geo.str() + " (case " + std::to_string(t) + ")");
    Graph g;
    Node x = g.input("x"), w = g.input("w"), b = g.input("b");
    InputShapes shapes{{"x", geo.x_shape()}};
    if (!geo.pool()) shapes.push_back({"w", geo.w_shape()});
    if (geo.bias) shapes.push_back({"b", {geo.O}});
    if (geo.refused()) {
      ++refused;
      EXPECT_THROW(GraphCompiler(GetParam().make()).compile(g, shapes, {geo.build(x, w, b)}),
                   ShapeError);
      continue;
    }
    const Node y = geo.build(x, w, b);
    const Shape ys = geo.y_shape();
    const auto rv = testing_util::random_vec(static_cast<std::size_t>(ys.numel()), 7 + t);
    const Node loss = reduce_sum(y * g.constant(ys, rv));
    std::vector<Node> wrt{x};
    if (!geo.pool()) wrt.push_back(w);
    if (geo.bias) wrt.push_back(b);
    const auto grads = gradients(loss, wrt);
    std::vector<Node> fetches{y};
    fetches.insert(fetches.end(), grads.begin(), grads.end());

    const auto xs = static_cast<std::size_t>(geo.x_shape().numel());
    std::vector<In> ins{{"x", geo.x_shape(),
                         geo.kind == Kind::max_pool ? distinct_values(xs, 100 + t)
                                                    : testing_util::random_vec(xs, 100 + t)}};
    if (!geo.pool())
      ins.push_back(
          {"w", geo.w_shape(),
           testing_util::random_vec(static_cast<std::size_t>(geo.w_shape().numel()), 200 + t)});
    if (geo.bias)
      ins.push_back(
          {"b", {geo.O}, testing_util::random_vec(static_cast<std::size_t>(geo.O), 300 + t)});
    const auto got = testing_util::run_checked(GetParam(), g, ins, fetches);

    ref::Values vals;
    for (const In& in : ins) vals[in.name] = testing_util::to_ref(in.shape, in.values);
    const ref::Array want = ref::evaluate(g, std::vector<Node>{y}, vals)[0];
    ASSERT_EQ(want.shape, ys);
    // Float sums of at most a few hundred products of values in [-1, 1].
    testing_util::expect_close(got[0], want, 1e-4, 2e-5, "forward");
    const Grads r = reference_grads(geo, vals.at("x"), geo.pool() ? ref::Array() : vals.at("w"),
                                    testing_util::to_ref(ys, rv));
    testing_util::expect_close(got[1], r.dx, 1e-4, 5e-5, "d/dx");
    if (!geo.pool()) testing_util::expect_close(got[2], r.dw, 1e-4, 5e-5, "d/dw");
    if (geo.bias) testing_util::expect_close(got[3], r.db, 1e-4, 5e-5, "d/db");
  }
  // The draw holds refused geometries, and mostly accepted ones.
  EXPECT_GT(refused, 0);
  EXPECT_LT(refused, 20);
}

// A chain of 2-4 ops over one image x: conv2d, conv_transpose2d, max and average pooling of
// random geometry, each perhaps with a residual add and relu. `wino`: 3x3 stride-1
// convolutions of 16 or 32 channels back to back, with residuals as in a residual block.
// `constants`: weights and biases are constants of the graph, else inputs.
struct Chain {
  Graph g;
  Node out;
  std::vector<In> ins;
  std::vector<Node> in_nodes;  // the input of each of `ins`
  std::string what;
};
Chain random_chain(std::mt19937& rng, int t, bool wino, bool constants) {
  Chain ch;
  Graph& g = ch.g;
  std::vector<In>& ins = ch.ins;
  std::string& what = ch.what;
  Node v = g.input("x"), prev = v;
  I N = pick(rng, 1, 2), C = wino ? 16 * pick(rng, 1, 2) : pick(rng, 1, 6);
  I H = pick(rng, wino ? 8 : 1, 14), W = pick(rng, wino ? 8 : 1, 14);
  const Shape x_shape{N, C, H, W};
  ins = {
      {"x", x_shape, testing_util::random_vec(static_cast<std::size_t>(x_shape.numel()), 500 + t)}};
  ch.in_nodes = {v};
  what = "x" + x_shape.str();
  Shape prev_shape;
  const int ops = pick(rng, wino ? 3 : 2, 4);
  for (int k = 0; k < ops; ++k) {
    const int r = pick(rng, 0, 9);
    Geo geo;
    if (wino && (r < 8 || k == 1)) {
      geo.kind = Kind::conv;
      geo.N = N, geo.C = C, geo.H = H, geo.W = W, geo.O = C, geo.G = 1;
      geo.KH = geo.KW = 3;
      geo.pb = geo.pe = {1, 1};
      geo.bias = pick(rng, 0, 1) == 1;
    } else {
      const Kind kinds[] = {Kind::conv,   Kind::conv,     Kind::conv,
                            Kind::conv_t, Kind::max_pool, Kind::avg_pool};
      geo = random_geo(rng, kinds[pick(rng, 0, 5)], C, H, W);
      geo.N = N;
      if (geo.refused()) continue;
    }
    const std::string id = std::to_string(k);
    // Weights fed, or constants of the graph (an ONNX model's initializers, which the CPU
    // may reorder once at compile time).
    auto weight = [&](const std::string& name, const Shape& shape, std::vector<float> values) {
      if (constants) return g.constant(shape, std::move(values));
      ins.push_back({name, shape, std::move(values)});
      return ch.in_nodes.emplace_back(g.input(name));
    };
    Node w, b;
    if (!geo.pool()) {
      w = weight("w" + id, geo.w_shape(),
                 testing_util::random_vec(static_cast<std::size_t>(geo.w_shape().numel()),
                                          600 + 10 * t + k, -0.5f, 0.5f));
    }
    if (geo.bias) {
      b = weight("b" + id, {geo.O},
                 testing_util::random_vec(static_cast<std::size_t>(geo.O), 700 + 10 * t + k));
    }
    Node y = geo.build(v, w, b);
    what += " -> " + geo.str();
    // Post-ops the CPU fuses into a convolution: a residual of the same shape (the value
    // before this op's input, as in a residual block, or the input itself), relu.
    const bool same = geo.y_shape() == Shape{N, C, H, W};
    if (same && prev_shape == Shape{N, C, H, W} && pick(rng, 0, 1) == 1) {
      y = y + prev;
      what += " + residual of op " + std::to_string(k - 1) + "'s input";
    } else if (same && pick(rng, 0, 2) == 0) {
      y = y + v;
      what += " + residual";
    }
    if (pick(rng, 0, 1) == 1) {
      y = relu(y);
      what += " -> relu";
    }
    prev = v;
    prev_shape = Shape{N, C, H, W};
    v = y;
    C = geo.O, H = geo.out(0), W = geo.out(1);
  }
  ch.out = v;
  return ch;
}

// Chains of 2-4 ops over one image forward against the reference. Every third chain is 3x3
// stride-1 convolutions of 16 or 32 channels back to back (with residuals as in a residual
// block), compiled with winograd_convs: the CPU takes oneDNN's Winograd kernels for them on
// AVX-512 and its own on AVX2 (test_nn_ops checks these kernels on chosen cases).
TEST_P(RandomWindows, ChainsMatchTheReference) {
  std::mt19937 rng(77);
  const bool cpu = GetParam().name.starts_with("cpu") && !cpu_reference_forced();
  int winograd = 0;  // CPU kernels of Winograd's
  for (int t = 0; t < 60; ++t) {
    const bool wino = t % 3 == 0;
    Chain ch = random_chain(rng, t, wino, t % 2 == 1);
    const Graph& g = ch.g;
    const Node v = ch.out;
    const std::vector<In>& ins = ch.ins;
    const std::string& what = ch.what;
    SCOPED_TRACE(what + " (chain " + std::to_string(t) + ")");
    // Four layers of Winograd's rounding: the error scales with the largest value.
    CompileOptions options;
    options.winograd_convs = wino;  // oneDNN's Winograd where it has them (AVX-512)
    const auto got = testing_util::run_checked(GetParam(), g, ins, {v}, options);
    ref::Values vals;
    for (const In& in : ins) vals[in.name] = testing_util::to_ref(in.shape, in.values);
    const ref::Array want = ref::evaluate(g, std::vector<Node>{v}, vals)[0];
    double top = 1.0;
    for (double e : want.v) top = std::max(top, std::abs(e));
    testing_util::expect_close(got[0], want, 1e-4, 2e-5 * top, "chain on " + GetParam().name);
    if (wino && cpu) {
      InputShapes shapes;
      for (const In& in : ins) shapes.push_back({in.name, in.shape});
      auto cg = GraphCompiler(GetParam().make(), options).compile(g, shapes, {v});
      const auto& ex = detail::executable_of(cg);
      for (std::uint32_t i = 0; i < ex.plan().nodes.size(); ++i)
        winograd += ex.kernel_name(i).find("winograd") != std::string::npos;
    }
  }
  // The Winograd chains reach those kernels where the build has them.
  if (cpu && detail::cpu::any_winograd_kernel()) {
    EXPECT_GT(winograd, 5);
  }
}

// Gradients through chains (blocked layouts, fused post-ops, the max-pool argmax and the
// backward kernels between them) with respect to the image and every weight, against double
// finite differences of the reference along a random direction per input: the loss
// sum(chain * R) is piecewise linear, so the differences are exact where no relu or max
// switches between the two points.
TEST_P(RandomWindows, ChainGradientsMatchFiniteDifferences) {
  std::mt19937 rng(79);
  for (int t = 0; t < 40; ++t) {
    Chain ch = random_chain(rng, t, t % 3 == 0, false);
    SCOPED_TRACE(ch.what + " (chain " + std::to_string(t) + ")");
    Graph& g = ch.g;
    const ref::Array out = [&] {
      ref::Values vals;
      for (const In& in : ch.ins) vals[in.name] = testing_util::to_ref(in.shape, in.values);
      return ref::evaluate(g, std::vector<Node>{ch.out}, vals)[0];
    }();
    const Node loss =
        reduce_sum(ch.out * g.constant(out.shape, testing_util::random_vec(out.size(), 900 + t)));
    const auto grads = gradients(loss, ch.in_nodes);
    const auto got = testing_util::run_checked(GetParam(), g, ch.ins, grads);
    for (std::size_t i = 0; i < ch.ins.size(); ++i) {
      const In& in = ch.ins[i];
      const auto dir = testing_util::random_vec(in.values.size(), 1000 + 7 * t + i);
      double along = 0.0, scale = 0.0;  // <gradient, dir> and its terms' sizes
      for (std::size_t k = 0; k < dir.size(); ++k) {
        along += static_cast<double>(got[i][k]) * dir[k];
        scale += std::abs(static_cast<double>(got[i][k]) * dir[k]);
      }
      // Small: in deep chains of large values a step of 1e-4 crossed relu kinks (14 of 600
      // chains missed, on every platform alike); double keeps the difference exact enough.
      const double eps = 1e-7;
      double at[2];
      for (int side = 0; side < 2; ++side) {
        ref::Values vals;
        for (const In& v : ch.ins) vals[v.name] = testing_util::to_ref(v.shape, v.values);
        for (std::size_t k = 0; k < dir.size(); ++k)
          vals[in.name].v[k] += (side == 0 ? eps : -eps) * dir[k];
        at[side] = ref::evaluate(g, std::vector<Node>{loss}, vals)[0].v[0];
      }
      const double fd = (at[0] - at[1]) / (2 * eps);
      EXPECT_NEAR(along, fd, 1e-3 * scale + 1e-5)
          << "d/d" << in.name << " along a random direction";
    }
  }
}

// The chains exported to ONNX and imported back run as the graphs themselves on the CPU:
// every attribute of the windows (pads at either end, dilations, groups, output_padding,
// ceil_mode, count_include_pad) survives the trip.
TEST(RandomWindowsOnnx, ChainsRoundTrip) {
  namespace ho = hetgraph::onnx;
  std::mt19937 rng(78);
  for (int t = 0; t < 60; ++t) {
    Chain ch = random_chain(rng, t, t % 3 == 0, t % 2 == 1);
    SCOPED_TRACE(ch.what + " (chain " + std::to_string(t) + ")");
    InputShapes shapes;
    std::vector<FeedItem> feeds;
    for (const In& in : ch.ins) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    CompiledGraph a = GraphCompiler().compile(ch.g, shapes, {ch.out});
    a.run(feeds);
    const std::string bytes = ho::export_bytes(ch.g, std::vector<Node>{ch.out}, shapes);
    const ho::Model m = ho::import_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())));
    CompiledGraph b = m.compile();
    b.run(feeds);
    ASSERT_EQ(m.outputs.size(), 1u);
    EXPECT_TRUE(testing_util::bitwise_equal(a.read(ch.out), b.read(m.outputs[0])));
  }
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, RandomWindows,
                         ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
