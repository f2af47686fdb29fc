#include "workloads.hpp"

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <regex>

namespace bench {

using namespace hetgraph;

namespace {

std::vector<float> random_data(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// One matmul node, M x K times K x N.
Case matmul_node(std::int64_t m, std::int64_t k, std::int64_t n) {
  Case c;
  auto a = c.graph.input("a"), b = c.graph.input("b");
  auto y = matmul(a, b);
  c.shapes = {{"a", {m, k}}, {"b", {k, n}}};
  c.fetches = {y};
  c.checksum = {y};
  c.inputs["a"] = random_data(static_cast<std::size_t>(m * k), 1);
  c.inputs["b"] = random_data(static_cast<std::size_t>(k * n), 2);
  c.runs_per_sample = static_cast<int>(std::max<std::int64_t>(1, 20'000'000 / (2 * m * n * k)));
  c.stats["gflop"] = 2.0 * static_cast<double>(m * n * k) * 1e-9;
  return c;
}

// The same product through dnnl_sgemm: the speed a matmul node should match.
Case raw_sgemm(std::int64_t m, std::int64_t k, std::int64_t n) {
  Case c = matmul_node(m, k, n);
  auto a = std::make_shared<std::vector<float>>(c.inputs["a"]);
  auto b = std::make_shared<std::vector<float>>(c.inputs["b"]);
  auto out = std::make_shared<std::vector<float>>(static_cast<std::size_t>(m * n));
  c.raw = [=] {
    dnnl_sgemm('N', 'N', m, n, k, 1.0f, a->data(), k, b->data(), n, 0.0f, out->data(), n);
  };
  c.raw_checksum = [out] {
    double s = 0;
    for (float v : *out) s += v;
    return s;
  };
  return c;
}

bool parse_mkn(const std::string& s, const std::string& prefix, std::int64_t& m, std::int64_t& k,
               std::int64_t& n) {
  std::smatch mt;
  const std::regex re(prefix + "-([0-9]+)x([0-9]+)x([0-9]+)");
  if (!std::regex_match(s, mt, re)) return false;
  m = std::stoll(mt[1]);
  k = std::stoll(mt[2]);
  n = std::stoll(mt[3]);
  return true;
}

}  // namespace

std::optional<Workload> find_workload(const std::string& name) {
  std::int64_t m = 0, k = 0, n = 0;
  if (parse_mkn(name, "matmul", m, k, n)) {
    return Workload{name, "one matmul node", [=] { return matmul_node(m, k, n); }};
  }
  if (parse_mkn(name, "sgemm", m, k, n)) {
    return Workload{name, "raw dnnl_sgemm of the same shape", [=] { return raw_sgemm(m, k, n); }};
  }
  return std::nullopt;
}

std::vector<std::string> workload_names() {
  return {"matmul-MxKxN", "sgemm-MxKxN"};
}

}  // namespace bench
