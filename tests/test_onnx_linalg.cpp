// SPDX-License-Identifier: Apache-2.0
// ONNX import of the linear algebra ops (src/onnx/ops_linalg.cpp): Einsum and Det against
// references in double.
#include <map>
#include <random>
#include <utility>

#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// A reference einsum over explicit letters ("ij,jk->ik"; no "..."): every assignment of the
// letters, in double.
std::vector<float> reference_einsum(const std::string& eq,
                                    const std::vector<std::vector<std::int64_t>>& dims,
                                    const std::vector<std::vector<float>>& in) {
  const auto arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  for (std::size_t from = 0, at;; from = at + 1) {
    at = lhs.find(',', from);
    terms.push_back(lhs.substr(from, at == std::string::npos ? at : at - from));
    if (at == std::string::npos) break;
  }
  std::map<char, std::int64_t> size;
  for (std::size_t t = 0; t < terms.size(); ++t)
    for (std::size_t a = 0; a < terms[t].size(); ++a) size[terms[t][a]] = dims[t][a];
  std::string all;
  for (const auto& [ch, n] : size) all += ch;
  std::int64_t out_n = 1;
  for (char ch : out) out_n *= size[ch];
  std::vector<double> acc(static_cast<std::size_t>(out_n), 0.0);
  std::map<char, std::int64_t> at;
  const auto flat = [&](const std::string& letters) {
    std::int64_t f = 0;
    for (char ch : letters) f = f * size[ch] + at[ch];
    return static_cast<std::size_t>(f);
  };
  std::function<void(std::size_t)> walk = [&](std::size_t k) {
    if (k == all.size()) {
      double p = 1;
      for (std::size_t t = 0; t < terms.size(); ++t) p *= in[t][flat(terms[t])];
      acc[flat(out)] += p;
      return;
    }
    for (at[all[k]] = 0; at[all[k]] < size[all[k]]; ++at[all[k]]) walk(k + 1);
  };
  walk(0);
  return std::vector<float>(acc.begin(), acc.end());
}

// Einsum (opset 12): products, batched products, traces of a product, sums, transposes, three
// operands, "..." and the implicit output, against the reference on every platform and after
// export and import back; a diagonal and broadcasting dims are UnsupportedErrors, a term that
// does not fit its input a ShapeError.
TEST(OnnxImport, EinsumContractsPairwise) {
  struct Case {
    std::string eq, ref;  // ref: the same with "..." and the output spelled out
    std::vector<std::vector<std::int64_t>> dims;
  };
  const std::vector<Case> cases{
      {"ij,jk->ik", "ij,jk->ik", {{2, 3}, {3, 4}}},
      {"bij,bjk->bik", "bij,bjk->bik", {{2, 2, 3}, {2, 3, 2}}},
      {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 2, 4}}},
      {"i,i->", "i,i->", {{5}, {5}}},
      {"ij->ji", "ij->ji", {{2, 3}}},
      {"ijk->", "ijk->", {{2, 3, 2}}},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 2}, {2, 4}}},
      {"ij,jk", "ij,jk->ik", {{3, 2}, {2, 2}}},
      {"...ij,...jk->...ik", "aij,ajk->aik", {{2, 2, 3}, {2, 3, 2}}},
      {"b i, b j -> b i j", "bi,bj->bij", {{2, 3}, {2, 2}}},
      {"ik,jk->", "ik,jk->", {{2, 3}, {4, 3}}},
  };
  std::uint32_t seed = 40;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.eq);
    Builder b(12);
    std::vector<std::string> names;
    std::vector<std::vector<float>> values;
    for (std::size_t i = 0; i < k.dims.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      std::vector<Dim> d(k.dims[i].begin(), k.dims[i].end());
      b.input(names.back(), d);
      std::int64_t n = 1;
      for (std::int64_t v : k.dims[i]) n *= v;
      std::vector<float> v(static_cast<std::size_t>(n));
      for (float& f : v) f = static_cast<float>(++seed % 7) * 0.5f - 1.5f;
      values.push_back(std::move(v));
    }
    const std::vector<float> want = reference_einsum(k.ref, k.dims, values);
    std::vector<std::int64_t> out_dims;
    const std::string out = k.ref.substr(k.ref.find("->") + 2);
    for (char ch : out) {
      for (std::size_t t = 0; t < k.dims.size(); ++t) {
        const std::string term = k.ref.substr(0, k.ref.find("->"));
        std::size_t start = 0;
        for (std::size_t u = 0; u < t; ++u) start = term.find(',', start) + 1;
        const std::size_t pos = term.find(ch, start);
        const std::size_t end = term.find(',', start);
        if (pos != std::string::npos && (end == std::string::npos || pos < end)) {
          out_dims.push_back(k.dims[t][pos - start]);
          break;
        }
      }
    }
    b.output("y", std::vector<Dim>(out_dims.begin(), out_dims.end()));
    Builder::attr(b.node("Einsum", names, {"y"}), "equation", k.eq);
    ho::Model m = b.import();
    ho::Model back = round_trip(m);
    for (const auto& pc : testing_util::platforms()) {
      SCOPED_TRACE(pc.name);
      for (ho::Model* model : {&m, &back}) {
        CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
        std::vector<FeedItem> feeds;
        for (std::size_t i = 0; i < names.size(); ++i) feeds.push_back({names[i], values[i]});
        cg.run(feeds);
        const std::vector<float> got = cg.read(model->outputs[0]);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t e = 0; e < got.size(); ++e) EXPECT_NEAR(got[e], want[e], 1e-5) << e;
      }
    }
  }
  const auto refused = [](const std::string& eq, std::vector<std::vector<Dim>> dims) {
    Builder b(12);
    std::vector<std::string> names;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      b.input(names.back(), dims[i]);
    }
    b.output("y", {});
    Builder::attr(b.node("Einsum", names, {"y"}), "equation", eq);
    return [b]() mutable { b.import(); };
  };
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>(refused("ii->i", {{3, 3}})), "diagonal");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>(refused("ij,ij->", {{3, 1}, {3, 4}})),
                  "broadcast");
  EXPECT_CONTAINS(error_of<ShapeError>(refused("ijk,jk->", {{3, 4}, {4, 2}})), "does not fit");
}

// Det of a [2, 3, 4, 4] batch: random matrices, one needing a row swap first (a zero at [0, 0]),
// one singular (two equal rows: 0); against a determinant by cofactors in double.
TEST(OnnxImport, DetPivotsAndFindsSingularMatrices) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(6 * 16);
  for (auto& v : x) v = u(rng);
  x[16] = 0.0f;  // matrix 1: pivot first
  for (int j = 0; j < 4; ++j) x[2 * 16 + 3 * 4 + j] = x[2 * 16 + 1 * 4 + j];  // matrix 2: singular
  std::function<double(const std::vector<double>&, int)> cofactor =
      [&](const std::vector<double>& m, int n) -> double {
    if (n == 1) return m[0];
    double r = 0;
    for (int j = 0; j < n; ++j) {
      std::vector<double> minor;
      for (int i = 1; i < n; ++i)
        for (int k = 0; k < n; ++k)
          if (k != j) minor.push_back(m[static_cast<std::size_t>(i * n + k)]);
      r += (j % 2 ? -1 : 1) * m[static_cast<std::size_t>(j)] * cofactor(minor, n - 1);
    }
    return r;
  };
  std::vector<double> want;
  for (int b = 0; b < 6; ++b)
    want.push_back(cofactor(std::vector<double>(x.begin() + b * 16, x.begin() + b * 16 + 16), 4));
  Builder bd(11);
  bd.input("x", {2, 3, 4, 4}).output("d", {2, 3});
  bd.node("Det", {"x"}, {"d"});
  const ho::Model m = bd.import();
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
    cg.run({{"x", x}});
    const auto got = cg.read(m.outputs[0]);
    ASSERT_EQ(got.size(), 6u);
    for (std::size_t k = 0; k < 6; ++k)
      EXPECT_NEAR(got[k], want[k], 1e-4 * (1 + std::abs(want[k]))) << k;
    EXPECT_EQ(got[2], 0.0f);  // exactly: the elimination leaves a zero row
  }
}

}  // namespace
