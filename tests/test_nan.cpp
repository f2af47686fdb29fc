// SPDX-License-Identifier: Apache-2.0
// NaN semantics on every op and platform (issue 11, class 9). hetgraph propagates NaN as PyTorch
// and ONNX do: a comparison never drops one. maximum/minimum, clip, relu, the max/min
// reductions and max pooling give NaN where an input (a window, a reduced line) holds one;
// gradients follow the forward's choice, so the element a NaN came from gets the gradient
// (at the first NaN of a line or window), and abs, whose derivative has no branch to follow
// at a NaN, gives NaN there. A cast to int32 has no NaN: it gives 0.
//
// Inputs are long enough for the vectorised CPU paths and their tails, with NaNs at several
// positions; each row's expectation comes from a scalar rule written here.
#include <cmath>
#include <functional>

#include "hetgraph/autodiff.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using testing_util::In;
using testing_util::PlatformCase;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
using F = std::vector<Node>;
using Builder = std::function<Node(Graph&, const F&)>;

struct NanRow {
  std::string what;
  std::vector<In> inputs;
  Builder build;
  std::vector<float> want;
};

// n values in [-1.5, 1.5] (steps of 0.5, so ties occur), NaN at every `every`-th position from
// `first`.
std::vector<float> with_nans(std::size_t n, std::size_t first, std::size_t every) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = i >= first && (i - first) % every == 0
               ? kNaN
               : 0.5f * static_cast<float>(static_cast<int>(i * 7 % 11) - 5) * 0.3f;
  }
  return v;
}

std::vector<float> map1(const std::vector<float>& x, const std::function<float(float)>& f) {
  std::vector<float> y;
  for (float v : x) y.push_back(f(v));
  return y;
}
std::vector<float> map2(const std::vector<float>& a, const std::vector<float>& b,
                        const std::function<float(float, float)>& f) {
  std::vector<float> y;
  for (std::size_t i = 0; i < a.size(); ++i) y.push_back(f(a[i], b[i]));
  return y;
}

Node grad_of(Node y, Node x) {
  return gradients(reduce_sum(y), {x})[0];
}

// ---- expectations for reductions and pooling: a line's or window's maximum is its first NaN
// if it has one; the gradient goes to that element (else to the first maximum).

// [outer, n, inner] view of reducing x over one axis: out[o, i] and the winner's index j.
struct Line {
  std::int64_t outer, n, inner;
};
std::int64_t winner(const std::vector<float>& x, const Line& l, std::int64_t o, std::int64_t i,
                    bool is_max) {
  std::int64_t best = -1;
  for (std::int64_t j = 0; j < l.n; ++j) {
    const float v = x[static_cast<std::size_t>((o * l.n + j) * l.inner + i)];
    if (std::isnan(v)) return j;
    if (best < 0) {
      best = j;
      continue;
    }
    const float b = x[static_cast<std::size_t>((o * l.n + best) * l.inner + i)];
    if (is_max ? v > b : v < b) best = j;
  }
  return best;
}
std::vector<float> reduce_want(const std::vector<float>& x, const Line& l, bool is_max) {
  std::vector<float> y;
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t i = 0; i < l.inner; ++i)
      y.push_back(
          x[static_cast<std::size_t>((o * l.n + winner(x, l, o, i, is_max)) * l.inner + i)]);
  return y;
}
std::vector<float> reduce_grad_want(const std::vector<float>& x, const Line& l, bool is_max) {
  std::vector<float> d(x.size(), 0.0f);
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t i = 0; i < l.inner; ++i)
      d[static_cast<std::size_t>((o * l.n + winner(x, l, o, i, is_max)) * l.inner + i)] = 1.0f;
  return d;
}

// Max pooling of planes [P, H, W] with a square window k, stride s, padding p on every side;
// f(window's winning position, output position) for each output.
void pool_windows(const std::vector<float>& x, std::int64_t P, std::int64_t H, std::int64_t W,
                  std::int64_t k, std::int64_t s, std::int64_t p,
                  const std::function<void(std::int64_t, std::int64_t)>& f) {
  const std::int64_t OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
  for (std::int64_t q = 0; q < P; ++q)
    for (std::int64_t oy = 0; oy < OH; ++oy)
      for (std::int64_t ox = 0; ox < OW; ++ox) {
        std::int64_t best = -1;
        for (std::int64_t ky = 0; ky < k; ++ky)
          for (std::int64_t kx = 0; kx < k; ++kx) {
            const std::int64_t iy = oy * s - p + ky, ix = ox * s - p + kx;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            const std::int64_t at = (q * H + iy) * W + ix;
            const float v = x[static_cast<std::size_t>(at)];
            if (best >= 0 && std::isnan(x[static_cast<std::size_t>(best)])) continue;
            if (best < 0 || std::isnan(v) || v > x[static_cast<std::size_t>(best)]) best = at;
          }
        f(best, (q * OH + oy) * OW + ox);
      }
}

std::vector<NanRow> rows() {
  std::vector<NanRow> r;
  constexpr std::size_t n = 45;  // 2 vectors of 16 and a tail
  const std::vector<float> x = with_nans(n, 3, 7), y = with_nans(n, 5, 4);
  const Shape s{n};
  const In X{"x", s, x}, Y{"y", s, y};
  auto unary = [&](std::string what, Node (*op)(Node), std::function<float(float)> f) {
    r.push_back({what, {X}, [op](Graph&, const F& v) { return op(v[0]); }, map1(x, f)});
  };
  auto binary = [&](std::string what, Node (*op)(Node, Node),
                    std::function<float(float, float)> f) {
    r.push_back({what, {X, Y}, [op](Graph&, const F& v) { return op(v[0], v[1]); }, map2(x, y, f)});
  };
  const auto takes_a_max = [](float a, float b) { return a >= b || std::isnan(a); };
  const auto takes_a_min = [](float a, float b) { return a <= b || std::isnan(a); };
  binary("maximum", maximum, [&](float a, float b) { return takes_a_max(a, b) ? a : b; });
  binary("minimum", minimum, [&](float a, float b) { return takes_a_min(a, b) ? a : b; });
  unary("abs", abs, [](float v) { return std::fabs(v); });
  unary("erf", erf, [](float v) { return std::erf(v); });
  r.push_back({"leaky_relu",
               {X},
               [](Graph&, const F& v) { return leaky_relu(v[0], 0.1f); },
               map1(x, [](float v) { return v > 0 ? v : 0.1f * v; })});
  r.push_back(
      {"clip",
       {X},
       [](Graph&, const F& v) { return clip(v[0], -0.5f, 0.5f); },
       map1(x, [](float v) { return std::isnan(v) ? v : std::min(std::max(v, -0.5f), 0.5f); })});
  r.push_back({"pow(x, 2)",
               {X},
               [](Graph& g, const F& v) { return pow(v[0], g.constant(2.0f)); },
               map1(x, [](float v) { return v * v; })});
  r.push_back({"pow(x, 0)",  // IEEE: NaN^0 = 1
               {X},
               [](Graph& g, const F& v) { return pow(v[0], g.constant(0.0f)); },
               map1(x, [](float) { return 1.0f; })});
  r.push_back({"cast to int32 (NaN: 0)",
               {X},
               [](Graph&, const F& v) { return cast(cast(v[0] * 10.0f, DType::i32), DType::f32); },
               map1(x, [](float v) { return std::isnan(v) ? 0.0f : std::trunc(v * 10.0f); })});
  // ---- gradients (of sum(y): the incoming gradient is 1)
  r.push_back({"maximum' a",
               {X, Y},
               [](Graph&, const F& v) { return grad_of(maximum(v[0], v[1]), v[0]); },
               map2(x, y, [&](float a, float b) { return takes_a_max(a, b) ? 1.0f : 0.0f; })});
  r.push_back({"maximum' b",
               {X, Y},
               [](Graph&, const F& v) { return grad_of(maximum(v[0], v[1]), v[1]); },
               map2(x, y, [&](float a, float b) { return takes_a_max(a, b) ? 0.0f : 1.0f; })});
  r.push_back({"minimum' a",
               {X, Y},
               [](Graph&, const F& v) { return grad_of(minimum(v[0], v[1]), v[0]); },
               map2(x, y, [&](float a, float b) { return takes_a_min(a, b) ? 1.0f : 0.0f; })});
  r.push_back({"clip'",
               {X},
               [](Graph&, const F& v) { return grad_of(clip(v[0], -0.5f, 0.5f), v[0]); },
               map1(x, [](float v) { return v < -0.5f || v > 0.5f ? 0.0f : 1.0f; })});
  r.push_back({"leaky_relu'",
               {X},
               [](Graph&, const F& v) { return grad_of(leaky_relu(v[0], 0.1f), v[0]); },
               map1(x, [](float v) { return v <= 0 ? 0.1f : 1.0f; })});
  r.push_back({"abs'",
               {X},
               [](Graph&, const F& v) { return grad_of(abs(v[0]), v[0]); },
               map1(x, [](float v) { return v > 0 ? 1.0f : (v < 0 ? -1.0f : v * 0.0f); })});
  // ---- existing ops (the finding: relu, reduce_max and max pooling dropped NaN)
  unary("relu", relu, [](float v) { return std::isnan(v) ? v : std::max(v, 0.0f); });
  r.push_back({"relu'",
               {X},
               [](Graph&, const F& v) { return grad_of(relu(v[0]), v[0]); },
               map1(x, [](float v) { return v <= 0 ? 0.0f : 1.0f; })});
  // reductions: rows of 45 (contiguous), columns (strided), everything
  const std::vector<float> m = with_nans(5 * 45, 50, 37);  // rows 0 and 5 hold no NaN
  const In M{"m", {5, 45}, m};
  for (const bool is_max : {true}) {
    auto red = [is_max](Node v, int axis) {
      return is_max ? reduce_max(v, axis) : reduce_max(v, axis);
    };
    const std::string name = is_max ? "reduce_max" : "reduce_min";
    r.push_back({name + " rows",
                 {M},
                 [red](Graph&, const F& v) { return red(v[0], 1); },
                 reduce_want(m, {5, 45, 1}, is_max)});
    r.push_back({name + " columns",
                 {M},
                 [red](Graph&, const F& v) { return red(v[0], 0); },
                 reduce_want(m, {1, 5, 45}, is_max)});
    r.push_back(
        {name + " all", {M}, [red](Graph&, const F& v) { return red(v[0], kAllAxes); }, {kNaN}});
    r.push_back({name + "' rows",
                 {M},
                 [red](Graph&, const F& v) { return grad_of(red(v[0], 1), v[0]); },
                 reduce_grad_want(m, {5, 45, 1}, is_max)});
    r.push_back({name + "' columns",
                 {M},
                 [red](Graph&, const F& v) { return grad_of(red(v[0], 0), v[0]); },
                 reduce_grad_want(m, {1, 5, 45}, is_max)});
  }
  // max pooling over planes [2, 2, 7, 7] with NaNs in some windows, in first and later places
  std::vector<float> img = with_nans(2 * 2 * 7 * 7, 9, 23);
  const In I{"img", {2, 2, 7, 7}, img};
  for (const auto& [k, st, pd] : {std::array<std::int64_t, 3>{2, 2, 0}, {3, 1, 1}}) {
    std::vector<float> want, dx(img.size(), 0.0f);
    pool_windows(img, 4, 7, 7, k, st, pd, [&](std::int64_t at, std::int64_t) {
      want.push_back(img[static_cast<std::size_t>(at)]);
      dx[static_cast<std::size_t>(at)] += 1.0f;
    });
    const Pool2dOptions o{.kernel = {static_cast<int>(k), static_cast<int>(k)},
                          .stride = {static_cast<int>(st), static_cast<int>(st)},
                          .padding = {static_cast<int>(pd), static_cast<int>(pd)}};
    const std::string what = "max_pool2d k" + std::to_string(k) + " s" + std::to_string(st);
    r.push_back({what, {I}, [o](Graph&, const F& v) { return max_pool2d(v[0], o); }, want});
    r.push_back({what + "'",
                 {I},
                 [o](Graph&, const F& v) { return grad_of(max_pool2d(v[0], o), v[0]); },
                 dx});
  }
  // sigmoid and tanh from 4096 elements go through oneDNN on the CPU; a relu after a matmul
  // folds into the product's epilogue.
  const std::vector<float> big = with_nans(5000, 100, 301);
  const In B{"big", {5000}, big};
  r.push_back({"sigmoid (oneDNN sizes)",
               {B},
               [](Graph&, const F& v) { return sigmoid(v[0]); },
               map1(big, [](float v) { return 1.0f / (1.0f + std::exp(-v)); })});
  r.push_back({"tanh (oneDNN sizes)",
               {B},
               [](Graph&, const F& v) { return tanh(v[0]); },
               map1(big, [](float v) { return std::tanh(v); })});
  const std::vector<float> a = with_nans(4 * 8, 9, 100), w = with_nans(8 * 5, 100, 1);
  std::vector<float> prod;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      double acc = 0;
      for (int q = 0; q < 8; ++q) acc += static_cast<double>(a[i * 8 + q]) * w[q * 5 + j];
      prod.push_back(std::isnan(acc) ? kNaN : static_cast<float>(std::max(acc, 0.0)));
    }
  r.push_back({"relu(matmul)",
               {{"a", {4, 8}, a}, {"w", {8, 5}, w}},
               [](Graph&, const F& v) { return relu(matmul(v[0], v[1])); },
               prod});
  return r;
}

bool same_or_close(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return std::fabs(got - want) <= 1e-5f + 1e-5f * std::fabs(want);
}

class NanSemantics : public ::testing::TestWithParam<PlatformCase> {};

TEST_P(NanSemantics, EveryRow) {
  for (const NanRow& row : rows()) {
    SCOPED_TRACE(row.what);
    Graph g;
    F in;
    for (const In& i : row.inputs) in.push_back(g.input(i.name));
    const Node out = row.build(g, in);
    const auto got = testing_util::run_checked(GetParam(), g, row.inputs, {out})[0];
    ASSERT_EQ(got.size(), row.want.size());
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!same_or_close(got[i], row.want[i]) && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << row.what << " on " << GetParam().name << ": " << bad
                       << " elements differ; first at " << first << ": got " << got[first]
                       << ", want " << row.want[first];
  }
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, NanSemantics, ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
