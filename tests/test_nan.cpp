// NaN semantics on every op and platform (issue 11, class 9). hetgraph propagates NaN as PyTorch
// and ONNX do: a comparison never drops one. maximum/minimum, clip, relu, the max/min
// reductions and max pooling give NaN where an input (a window, a reduced line) holds one;
// gradients follow the forward's choice, so the element a NaN came from gets the gradient
// (at the first NaN of a line or window), and abs, whose derivative has no branch to follow
// at a NaN, gives NaN there.
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
