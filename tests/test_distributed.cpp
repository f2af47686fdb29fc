// SPDX-License-Identifier: Apache-2.0
// Collectives across processes, run under mpirun (CTest starts it with -np 2 and -np 4): every
// collective op on every platform against a float64 reference of what all ranks fed, their
// gradients against their rules, the host-side helpers, data-parallel training against the
// single-process run of the same steps, the overlap of allreduces with the backward pass in a
// trace, and (in an invocation of its own, since it breaks the communicator for good) a run that
// fails on one rank. Every rank runs every test in the same order, as MPI programs do; data is a
// function of the rank, so each rank can compute what every collective must give.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/executable.hpp"
#include "hetgraph/distributed.hpp"
#include "test_util.hpp"

using namespace hetgraph;
namespace dist = hetgraph::distributed;
using testing_util::PlatformCase;

namespace {

const dist::Communicator& comm() {
  static const dist::Communicator c = dist::world();
  return c;
}

// What rank r feeds: deterministic in (r, seed).
std::vector<float> rank_data(int r, std::size_t n, std::uint32_t seed) {
  return testing_util::random_vec(n, seed + 7919u * static_cast<std::uint32_t>(r));
}

// Every rank holds the same bits: rank 0's copy, broadcast, compared bitwise.
bool same_on_every_rank(const std::vector<float>& v) {
  std::vector<float> mine = v;
  comm().broadcast(mine, 0);
  float equal = std::memcmp(mine.data(), v.data(), v.size() * sizeof(float)) == 0 ? 1.0f : 0.0f;
  comm().allreduce(std::span<float>(&equal, 1));
  return equal == static_cast<float>(comm().size());
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i])))
        << what << " at " << i << " on rank " << comm().rank();
  }
}

class Collectives : public ::testing::TestWithParam<PlatformCase> {};

TEST_P(Collectives, EveryOpMatchesTheReference) {
  const int P = comm().size(), r = comm().rank();
  const int root = P - 1;
  constexpr std::size_t n = 12;
  Graph g;
  auto x = g.input("x");
  auto z = g.input("z");
  auto sum = dist::allreduce(x, comm());
  auto mean = dist::allreduce(x, comm(), dist::ReduceOp::mean);
  auto bc = dist::broadcast(x, comm(), root);
  auto red = dist::reduce(x, comm(), root);
  auto gathered = dist::allgather(x, comm());
  auto scattered = dist::reduce_scatter(z, comm());
  // A collective of a computed value, and one whose result feeds more work.
  auto chained = dist::allreduce(dist::allreduce(x * 2.0f, comm()) + 1.0f, comm());
  auto cg = GraphCompiler(GetParam().make())
                .compile(g, {{"x", {3, 4}}, {"z", {2 * P, 3}}},
                         {sum, mean, bc, red, gathered, scattered, chained});
  for (int run = 0; run < 3; ++run) {
    const auto xs = rank_data(r, n, 10 + run);
    const auto zs = rank_data(r, 6 * P, 20 + run);
    cg.run({{"x", xs}, {"z", zs}});
    std::vector<double> s(n, 0), ch(n, 0), gath, scat(6, 0);
    for (int q = 0; q < P; ++q) {
      const auto xq = rank_data(q, n, 10 + run);
      const auto zq = rank_data(q, 6 * P, 20 + run);
      for (std::size_t i = 0; i < n; ++i) {
        s[i] += xq[i];
        ch[i] += 2.0 * xq[i];
      }
      gath.insert(gath.end(), xq.begin(), xq.end());
      for (std::size_t i = 0; i < 6; ++i) scat[i] += zq[static_cast<std::size_t>(r) * 6 + i];
    }
    std::vector<double> m = s, b(n), rd(n, 0.0);
    for (double& v : m) v /= P;
    const auto xroot = rank_data(root, n, 10 + run);
    for (std::size_t i = 0; i < n; ++i) {
      b[i] = xroot[i];
      if (r == root) rd[i] = s[i];
      ch[i] = P * (ch[i] + 1.0);
    }
    const std::string on = " on " + GetParam().name + " run " + std::to_string(run);
    expect_near(cg.read(sum), s, 1e-6, "allreduce sum" + on);
    expect_near(cg.read(mean), m, 1e-6, "allreduce mean" + on);
    expect_near(cg.read(bc), b, 0, "broadcast" + on);
    expect_near(cg.read(red), rd, 1e-6, "reduce" + on);
    expect_near(cg.read(gathered), gath, 0, "allgather" + on);
    expect_near(cg.read(scattered), scat, 1e-6, "reduce_scatter" + on);
    expect_near(cg.read(chained), ch, 1e-6, "allreduce of allreduce" + on);
    // Replicas must never drift apart: every rank gets the same bits.
    EXPECT_TRUE(same_on_every_rank(cg.read(sum))) << on;
    EXPECT_TRUE(same_on_every_rank(cg.read(mean))) << on;
    EXPECT_TRUE(same_on_every_rank(cg.read(chained))) << on;
  }
}

// L_r = sum(op(x_r) * R_r) on each rank; the gradient of the total loss sum_r L_r with respect to
// x_r is what each rank's gradient node computes (through the collective gradient ops).
TEST_P(Collectives, GradientsFollowTheirRules) {
  const int P = comm().size(), r = comm().rank();
  const int root = P > 1 ? 1 : 0;
  constexpr std::size_t n = 6;  // x is [2, 3]
  struct Case {
    std::string what;
    std::function<Node(Node)> op;
    Shape out;
  };
  const std::vector<Case> cases = {
      {"allreduce sum", [&](Node x) { return dist::allreduce(x, comm()); }, {2, 3}},
      {"allreduce mean",
       [&](Node x) { return dist::allreduce(x, comm(), dist::ReduceOp::mean); },
       {2, 3}},
      {"broadcast", [&](Node x) { return dist::broadcast(x, comm(), root); }, {2, 3}},
      {"reduce", [&](Node x) { return dist::reduce(x, comm(), root); }, {2, 3}},
      {"allgather", [&](Node x) { return dist::allgather(x, comm()); }, {2 * P, 3}},
      {"reduce_scatter", [&](Node x) { return dist::reduce_scatter(x, comm()); }, {2, 3}},
  };
  for (const Case& c : cases) {
    const bool scatter = c.what == "reduce_scatter";
    const Shape xs = scatter ? Shape{2 * P, 3} : Shape{2, 3};
    const std::size_t nx = static_cast<std::size_t>(xs.numel());
    const std::size_t ny = static_cast<std::size_t>(c.out.numel());
    Graph g;
    auto x = g.input("x");
    auto R = g.input("R");
    auto loss = reduce_sum(c.op(x) * R);
    auto dx = gradients(loss, {x})[0];
    auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", xs}, {"R", c.out}}, {dx});
    cg.run({{"x", rank_data(r, nx, 30)}, {"R", rank_data(r, ny, 40)}});
    // R of every rank, and their sum.
    std::vector<std::vector<float>> Rs;
    std::vector<double> Rsum(ny, 0);
    for (int q = 0; q < P; ++q) {
      Rs.push_back(rank_data(q, ny, 40));
      for (std::size_t i = 0; i < ny; ++i) Rsum[i] += Rs.back()[i];
    }
    std::vector<double> want(nx, 0);
    for (std::size_t i = 0; i < nx; ++i) {
      if (c.what == "allreduce sum") want[i] = Rsum[i];
      if (c.what == "allreduce mean") want[i] = Rsum[i] / P;
      if (c.what == "broadcast") want[i] = r == root ? Rsum[i] : 0.0;
      if (c.what == "reduce") want[i] = Rs[static_cast<std::size_t>(root)][i];
      if (c.what == "allgather") want[i] = Rsum[static_cast<std::size_t>(r) * n + i];
      if (scatter) want[i] = Rs[i / n][i % n];
    }
    expect_near(cg.read(dx), want, 1e-6, "d/dx of " + c.what + " on " + GetParam().name);
  }
}

// Many independent collectives: ranks ready them in different orders (two executors), and each
// must still meet its own partner (one channel per node).
TEST_P(Collectives, IndependentCollectivesMeetTheirPartners) {
  const int P = comm().size(), r = comm().rank();
  constexpr int kNodes = 24;
  Graph g;
  auto x = g.input("x");
  std::vector<Node> outs;
  for (int k = 0; k < kNodes; ++k) {
    // Different amounts of work before each collective, different per rank: the order in
    // which they become ready varies.
    Node v = x * static_cast<float>(k + 1);
    for (int j = 0; j < (k * 7 + r * 5) % 6; ++j) v = tanh(v);
    outs.push_back(dist::allreduce(v, comm()));
  }
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"x", {64}}}, outs);
  const auto xs = rank_data(r, 64, 50);
  for (int run = 0; run < 3; ++run) {
    cg.run({{"x", xs}});
    for (int k = 0; k < kNodes; ++k) {
      std::vector<double> want(64, 0);
      for (int q = 0; q < P; ++q) {
        const auto xq = rank_data(q, 64, 50);
        for (std::size_t i = 0; i < 64; ++i) {
          float v = xq[i] * static_cast<float>(k + 1);
          for (int j = 0; j < (k * 7 + q * 5) % 6; ++j) v = std::tanh(v);
          want[i] += v;
        }
      }
      expect_near(cg.read(outs[static_cast<std::size_t>(k)]), want, 1e-5,
                  "allreduce " + std::to_string(k) + " on " + GetParam().name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, Collectives, ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

TEST(HostCollectives, AllreduceBroadcastBarrierAndVariables) {
  const int P = comm().size(), r = comm().rank();
  std::vector<float> v = {static_cast<float>(r), 1.0f, 2.0f * static_cast<float>(r)};
  comm().allreduce(v);
  EXPECT_EQ(v[0], static_cast<float>(P * (P - 1) / 2));
  EXPECT_EQ(v[1], static_cast<float>(P));
  std::vector<float> m = {static_cast<float>(r)};
  comm().allreduce(m, dist::ReduceOp::mean);
  EXPECT_FLOAT_EQ(m[0], static_cast<float>(P - 1) / 2.0f);
  std::vector<float> b = {static_cast<float>(r) + 0.5f};
  comm().broadcast(b, P - 1);
  EXPECT_EQ(b[0], static_cast<float>(P - 1) + 0.5f);
  comm().barrier();
  EXPECT_NE(comm().name().find("rank " + std::to_string(r)), std::string::npos) << comm().name();
  EXPECT_EQ(comm().local_size(), P) << "every rank of the test runs on this machine";
  EXPECT_EQ(dist::Communicator::self().local_size(), 1);

  // Variables initialised differently per rank end up as rank 0's.
  Graph g;
  auto W = g.variable("W", {4, 3}, Initializer::uniform(-1, 1, 100 + static_cast<unsigned>(r)));
  auto c = g.variable("c", {5}, Initializer::fill(static_cast<float>(r)));
  auto out = reduce_sum(W) + reduce_sum(c);
  auto cg = GraphCompiler().compile(g, {}, {out});
  dist::broadcast_variables(cg, comm());
  Graph g0;
  auto W0 = g0.variable("W", {4, 3}, Initializer::uniform(-1, 1, 100));
  auto cg0 = GraphCompiler().compile(g0, {}, {W0});
  EXPECT_TRUE(testing_util::bitwise_equal(cg.read(W), cg0.read(W0)));
  EXPECT_EQ(cg.read(c), std::vector<float>(5, 0.0f));
}

TEST(HostCollectives, BadRootsAreGraphErrors) {
  Graph g;
  auto x = g.input("x");
  EXPECT_THROW(dist::broadcast(x, comm(), comm().size()), GraphError);
  EXPECT_THROW(dist::reduce(x, comm(), -1), GraphError);
  std::vector<float> v(3);
  EXPECT_THROW(comm().broadcast(v, comm().size()), GraphError);
}

// ---- data-parallel training ------------------------------------------------------------------

// A two-layer classifier on a fixed synthetic set: several gradients, so several buckets.
struct Mlp {
  Graph g;
  Node x, y, W1, b1, W2, b2, loss, step;
};

constexpr std::int64_t kFeatures = 16, kHidden = 24, kClasses = 5, kGlobalBatch = 32,
                       kExamples = 256;

std::vector<float> features() {
  return testing_util::random_vec(kExamples * kFeatures, 77);
}
std::vector<std::int32_t> labels() {
  std::vector<std::int32_t> l(kExamples);
  const auto f = features();
  for (std::int64_t i = 0; i < kExamples; ++i) {
    float s = 0;
    for (std::int64_t k = 0; k < kFeatures; ++k)
      s += f[static_cast<std::size_t>(i * kFeatures + k)] * static_cast<float>(k % 3);
    l[static_cast<std::size_t>(i)] =
        static_cast<std::int32_t>(std::abs(static_cast<int>(s * 3))) % kClasses;
  }
  return l;
}

// With `opt`, minimize with that rule; else sgd with momentum 0.9.
std::unique_ptr<Mlp> mlp(const DataParallel* dp, const Optimizer* opt = nullptr) {
  auto m = std::make_unique<Mlp>();
  Graph& g = m->g;
  m->x = g.input("x");
  m->y = g.input("y", DType::i32);
  m->W1 = g.variable("W1", {kFeatures, kHidden}, Initializer::uniform(-0.5f, 0.5f, 1));
  m->b1 = g.variable("b1", {kHidden});
  m->W2 = g.variable("W2", {kHidden, kClasses}, Initializer::uniform(-0.5f, 0.5f, 2));
  m->b2 = g.variable("b2", {kClasses});
  auto h = tanh(matmul(m->x, m->W1) + m->b1);
  m->loss = reduce_mean(cross_entropy(softmax(matmul(h, m->W2) + m->b2), m->y));
  const std::vector<Node> vars = {m->W1, m->b1, m->W2, m->b2};
  if (opt) {
    m->step = dp ? minimize(m->loss, vars, *opt, {}, *dp) : minimize(m->loss, vars, *opt);
  } else {
    m->step = dp ? sgd(m->loss, vars, 0.2f, 0.9f, *dp) : sgd(m->loss, vars, 0.2f, 0.9f);
  }
  return m;
}

// Trains `steps` steps over the set in order; each rank takes its share of every global batch
// (rows [rank * B / P, (rank + 1) * B / P) of it). Returns the final variables, concatenated.
std::vector<float> train(const PlatformCase& pc, const DataParallel* dp, int steps,
                         const Optimizer* opt = nullptr) {
  auto m = mlp(dp, opt);
  const int P = dp ? dp->comm.size() : 1, r = dp ? dp->comm.rank() : 0;
  const std::int64_t B = kGlobalBatch / P;
  auto cg = GraphCompiler(pc.make()).compile(m->g, {{"x", {B, kFeatures}}, {"y", {B}}},
                                             {m->loss, m->step});
  if (dp) dist::broadcast_variables(cg, dp->comm);
  const auto f = features();
  const auto l = labels();
  for (int s = 0; s < steps; ++s) {
    const std::int64_t first = (s * kGlobalBatch) % kExamples + r * B;
    std::vector<float> xb(f.begin() + first * kFeatures, f.begin() + (first + B) * kFeatures);
    std::vector<std::int32_t> yb(l.begin() + first, l.begin() + first + B);
    cg.run({{"x", xb}, {"y", yb}});
  }
  std::vector<float> out;
  for (Node v : {m->W1, m->b1, m->W2, m->b2}) {
    const auto x = cg.read(v);
    out.insert(out.end(), x.begin(), x.end());
  }
  return out;
}

class DataParallelTraining : public ::testing::TestWithParam<PlatformCase> {};

// The replicas' variables `a` are the single process's to float rounding, and bitwise equal on
// every rank.
void expect_single_process_steps(const std::vector<float>& a, const std::vector<float>& single,
                                 const std::string& platform) {
  ASSERT_EQ(a.size(), single.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - single[i]) / (1e-3 + std::abs(single[i])));
  EXPECT_LT(worst, 1e-4) << "data parallel vs single process on " << platform;
  EXPECT_TRUE(same_on_every_rank(a)) << "replicas drifted apart on " << platform;
}

// The same steps as one process on the whole batch: equal within float tolerance, not bitwise
// (the single process sums each gradient over the 32 rows in one product; data parallelism sums
// P partial products of 32/P rows, then adds them: float addition is not associative). Replicas
// are bitwise equal to each other, and a second run gives the same bits.
TEST_P(DataParallelTraining, MatchesTheSingleProcessRun) {
  constexpr int kSteps = 24;
  const auto single = train(GetParam(), nullptr, kSteps);
  for (std::size_t bucket : {std::size_t{1}, std::size_t{4} << 20}) {
    SCOPED_TRACE("bucket_bytes " + std::to_string(bucket));
    const DataParallel dp{comm(), bucket};
    const auto a = train(GetParam(), &dp, kSteps);
    expect_single_process_steps(a, single, GetParam().name);
    const auto b = train(GetParam(), &dp, kSteps);
    EXPECT_TRUE(testing_util::bitwise_equal(a, b)) << "not reproducible on " << GetParam().name;
  }
}

// Every optimizer rule (weight decay, clipping on some): the gradients averaged, each replica
// takes the step one process takes on the whole batch, with the same state.
TEST_P(DataParallelTraining, EveryOptimizerMatchesTheSingleProcessRun) {
  constexpr int kSteps = 12;
  const char* rules[] = {"momentum", "nesterov", "adam", "adamw", "rmsprop", "adagrad"};
  for (const char* rule : rules) {
    Optimizer opt = Optimizer::named(rule, 0.02f, rule == std::string("adamw") ? 0.01f : 0.0f);
    if (rule == std::string("adam")) opt.clip_norm = 0.5f;
    SCOPED_TRACE(rule);
    const auto single = train(GetParam(), nullptr, kSteps, &opt);
    const DataParallel dp{comm(), std::size_t{1} << 10};
    const auto a = train(GetParam(), &dp, kSteps, &opt);
    expect_single_process_steps(a, single, GetParam().name);
  }
}

INSTANTIATE_TEST_SUITE_P(CpuEngines, DataParallelTraining,
                         ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

// An embedding table's gradient travels sparse: rows and indices allgathered (int32 indices
// across ranks), the update fused into a sparse one; the three tables' allgathers are fused
// into one of rows and one of indices; training matches the single process, and the unfused
// plan gives the same bits.
TEST_P(DataParallelTraining, EmbeddingTablesTravelSparse) {
  constexpr std::int64_t kBatch = 16, kSteps = 8;
  const std::int64_t rows[] = {50, 30, 20}, dims[] = {8, 4, 6};
  const int P = comm().size(), r = comm().rank();
  struct Model {
    Graph g;
    Node loss, step;
    std::vector<Node> vars;
  };
  auto build = [&](Model& m, const DataParallel* dp) {
    std::vector<Node> features;
    for (int t = 0; t < 3; ++t) {
      m.vars.push_back(
          m.g.variable("T" + std::to_string(t), {rows[t], dims[t]},
                       Initializer::uniform(-0.5f, 0.5f, 8 + static_cast<unsigned>(t))));
      features.push_back(
          embedding(m.vars.back(), m.g.input("ids" + std::to_string(t), DType::i32)));
    }
    m.vars.push_back(m.g.variable("W", {18, 5}, Initializer::uniform(-0.5f, 0.5f, 9)));
    auto logits = matmul(tanh(concat(features, 1)), m.vars.back());
    m.loss = reduce_mean(cross_entropy(softmax(logits), m.g.input("y", DType::i32)));
    m.step = dp ? sgd(m.loss, m.vars, 0.5f, 0.0f, *dp) : sgd(m.loss, m.vars, 0.5f);
  };
  auto label = [](std::int64_t i, int t) {
    return static_cast<std::int32_t>((i * (13 + t) + i / 7) % 20);
  };
  auto train_it = [&](const DataParallel* dp, bool fuse) {
    Model m;
    build(m, dp);
    const std::int64_t B = dp ? kBatch / P : kBatch;
    InputShapes shapes = {{"y", {B}}};
    for (int t = 0; t < 3; ++t) shapes.push_back({"ids" + std::to_string(t), {B}});
    auto cg =
        GraphCompiler(GetParam().make(), {.fuse = fuse}).compile(m.g, shapes, {m.loss, m.step});
    if (dp && fuse) {
      const auto& plan = detail::executable_of(cg).plan();
      int allgathers = 0;
      bool sparse = false, table_allreduce = false;
      for (const auto& node : plan.nodes) {
        allgathers += node.op == detail::OpKind::Allgather;
        sparse |= node.op == detail::OpKind::EmbeddingUpdate;
        table_allreduce |= node.op == detail::OpKind::Allreduce && node.type.shape.numel() >= 120;
      }
      EXPECT_EQ(allgathers, 2) << "rows and indices of the three tables, fused";
      EXPECT_TRUE(sparse) << "the tables' updates are sparse";
      EXPECT_FALSE(table_allreduce) << "a table-sized allreduce";
    }
    for (std::int64_t s = 0; s < kSteps; ++s) {
      const std::int64_t first = s * kBatch + (dp ? r * B : 0);
      std::vector<std::vector<std::int32_t>> ids(3), y(1);
      std::vector<FeedItem> feeds;
      for (std::int64_t i = first; i < first + B; ++i) {
        for (int t = 0; t < 3; ++t)
          ids[static_cast<std::size_t>(t)].push_back(label(i, t) %
                                                     static_cast<std::int32_t>(rows[t]));
        y[0].push_back(static_cast<std::int32_t>(i % 5));
      }
      const std::string names[] = {"ids0", "ids1", "ids2"};
      for (int t = 0; t < 3; ++t) feeds.push_back({names[t], ids[static_cast<std::size_t>(t)]});
      feeds.push_back({"y", y[0]});
      cg.run(feeds);
    }
    std::vector<float> out;
    for (Node v : m.vars) {
      const auto x = cg.read(v);
      out.insert(out.end(), x.begin(), x.end());
    }
    return out;
  };
  const auto single = train_it(nullptr, true);
  const DataParallel dp{comm()};
  const auto a = train_it(&dp, true);
  ASSERT_EQ(a.size(), single.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], single[i], 1e-5 * (1 + std::abs(single[i])))
        << "at " << i << " on " << GetParam().name;
  EXPECT_TRUE(same_on_every_rank(a)) << GetParam().name;
  EXPECT_TRUE(testing_util::bitwise_equal(a, train_it(&dp, false)))
      << "fused and unfused allgathers differ on " << GetParam().name;
}

TEST(Collectives, Int32BroadcastAndAllgather) {
  const int P = comm().size(), r = comm().rank();
  Graph g;
  auto ids = g.input("ids", DType::i32);
  auto bc = dist::broadcast(ids, comm(), P - 1);
  auto ag = dist::allgather(ids, comm());
  auto cg = GraphCompiler().compile(g, {{"ids", {3}}}, {bc, ag});
  cg.run({{"ids", std::vector<std::int32_t>{r, 10 * r, -r}}});
  EXPECT_EQ(cg.read_i32(bc), (std::vector<std::int32_t>{P - 1, 10 * (P - 1), 1 - P}));
  std::vector<std::int32_t> want;
  for (int q = 0; q < P; ++q) want.insert(want.end(), {q, 10 * q, -q});
  EXPECT_EQ(cg.read_i32(ag), want);
}

// The first bucket's allreduce (the last layer's gradient) is in flight while the executor
// computes the earlier layers' gradients: in the trace its span on the communication track
// overlaps node spans on the executor's.
TEST(DataParallelTrace, AllreducesOverlapTheBackwardPass) {
  struct Ev {
    std::string name;
    int tid;
    double ts, dur;
  };
  for (const CpuEngine engine : {CpuEngine::sequential, CpuEngine::critical_path}) {
    Graph g;
    auto x = g.input("x");
    Node h = x;
    std::vector<Node> vars;
    for (int l = 0; l < 3; ++l) {
      vars.push_back(g.variable("W" + std::to_string(l), {256, 256},
                                Initializer::uniform(-0.05f, 0.05f, 3 + static_cast<unsigned>(l))));
      h = tanh(matmul(h, vars.back()));
    }
    auto loss = reduce_mean(h * h);
    auto step = sgd(loss, vars, 0.01f, 0.0f, DataParallel{comm(), 1});  // a bucket per gradient
    auto cg = GraphCompiler(Platform::cpu({.engine = engine, .executors = 1}))
                  .compile(g, {{"x", {256, 256}}}, {loss, step});
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("hetgraph_dp_trace_" + std::to_string(comm().rank()) + ".json"))
                                 .string();
    const auto xs = rank_data(comm().rank(), 256 * 256, 60);
    cg.run({{"x", xs}});  // warm
    cg.start_trace(path);
    for (int i = 0; i < 3; ++i) cg.run({{"x", xs}});
    cg.stop_trace();
    std::ifstream in(path);
    const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::filesystem::remove(path);
    // The communication track is named, and holds the buckets' allreduces.
    const std::regex lane("\"tid\":(\\d+),\"args\":\\{\"name\":\"communication\"");
    std::smatch lm;
    ASSERT_TRUE(std::regex_search(json, lm, lane)) << json.substr(0, 2000);
    const int comm_tid = std::stoi(lm[1]);
    const std::regex event(
        "\"name\":\"([^\"]*)\",\"cat\":\"[^\"]*\",\"ph\":\"X\",\"ts\":([0-9.]+),\"dur\":([0-9.]+),"
        "\"pid\":\\d+,\"tid\":(\\d+)");
    std::vector<Ev> comms, compute;
    for (auto it = std::sregex_iterator(json.begin(), json.end(), event);
         it != std::sregex_iterator(); ++it) {
      Ev e{(*it)[1], std::stoi((*it)[4]), std::stod((*it)[2]), std::stod((*it)[3])};
      (e.tid == comm_tid ? comms : compute).push_back(e);
    }
    ASSERT_EQ(comms.size(), 9u) << "3 buckets x 3 runs on the communication track";
    int overlapped = 0;
    for (const Ev& c : comms) {
      if (c.name.find("grad bucket") == std::string::npos) continue;
      for (const Ev& e : compute) {
        if (e.ts < c.ts + c.dur && c.ts < e.ts + e.dur) {
          ++overlapped;
          break;
        }
      }
    }
    if (overlapped == 0 && std::getenv("HETGRAPH_TEST_DUMP"))
      std::fprintf(stderr, "%s\n", json.c_str());
    EXPECT_GT(overlapped, 0) << "no allreduce overlapped a compute node (engine "
                             << engine_name(engine) << ")";
  }
}

// Run by CTest with HETGRAPH_MPI_HEARTBEAT_TIMEOUT=soon: world() refuses it, naming it.
TEST(WorldErrors, BadSettingsAreNamed) {
  if (std::getenv("HETGRAPH_MPI_HEARTBEAT_TIMEOUT") == std::string_view("soon")) {
    try {
      dist::world();
      ADD_FAILURE() << "world() took HETGRAPH_MPI_HEARTBEAT_TIMEOUT=soon";
    } catch (const CommunicationError& e) {
      EXPECT_NE(std::string(e.what()).find("HETGRAPH_MPI_HEARTBEAT_TIMEOUT='soon'"),
                std::string::npos)
          << e.what();
    }
    return;
  }
  // Later calls return the first communicator: their options are not read again.
  EXPECT_EQ(dist::world({.heartbeat_timeout_s = -1}), comm());
}

// ---- rank agreement -------------------------------------------------------------------------

// Ranks that agree pass the up-front check, and train as before.
TEST(Agreement, AgreeingRanksPassAndTrainAsBefore) {
  const dist::Agreed plan[] = {{"epochs", 3}, {"batches per epoch", 8}, {"optimizer", "sgd"}};
  dist::check_agreement(comm(), plan);
  dist::check_agreement(comm(), {});
  const auto pc = testing_util::platforms().front();
  const auto single = train(pc, nullptr, 8);
  const DataParallel dp{comm()};
  expect_single_process_steps(train(pc, &dp, 8), single, pc.name);
}

// ---- ranks out of step (an invocation of their own: without the check they would hang) -----

// Expects `f` to throw a CommunicationError on this rank within a few seconds (not at the
// collective deadline) whose message holds every one of `want`.
template <class F>
void expect_out_of_step(F&& f, const std::vector<std::string>& want) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    f();
    ADD_FAILURE() << "no error on rank " << comm().rank();
  } catch (const CommunicationError& e) {
    const std::string msg = e.what();
    if (comm().rank() == 0) std::fprintf(stderr, "rank 0: %s\n", msg.c_str());
    for (const std::string& w : want) EXPECT_NE(msg.find(w), std::string::npos) << msg;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0) << "the error took " << s << " s on rank " << comm().rank();
}

// Rank 0 plans three epochs, the others two: every rank fails at once, naming the value and
// each rank's; the communicator stays usable (the ranks agreed to stop).
TEST(OutOfStep, DifferentEpochsFailAtOnceOnEveryRank) {
  const int P = comm().size(), r = comm().rank();
  const dist::Agreed plan[] = {
      {"epochs", r == 0 ? 3 : 2}, {"batches per epoch", 8}, {"optimizer", "sgd"}};
  std::string others = P == 2 ? "'2' on rank 1" : "'2' on ranks 1, 2";
  expect_out_of_step([&] { dist::check_agreement(comm(), plan); },
                     {"check_agreement: ranks disagree on epochs", "'3' on rank 0", others});
  // Different values checked: named too.
  const dist::Agreed one[] = {{r == 0 ? "epochs" : "batches", 1}};
  expect_out_of_step(
      [&] { dist::check_agreement(comm(), one); },
      {"ranks are out of step, at different checks", "'epochs' on rank 0", "'batches' on rank"});
  comm().barrier();
  const dist::Agreed same[] = {{"epochs", 2}};
  dist::check_agreement(comm(), same);
}

// Rank 0 compiles one collective more than the others: its compile, which opens a channel per
// collective, meets the others' broadcast_variables instead of waiting in MPI_Comm_idup.
TEST(OutOfStep, AnExtraCollectiveFailsAtOnce) {
  Graph g;
  auto x = g.input("x");
  Node y = dist::allreduce(x, comm());
  if (comm().rank() == 0) y = dist::allreduce(y * 2.0f, comm());
  expect_out_of_step(
      [&] {
        auto cg = GraphCompiler().compile(g, {{"x", {4}}}, {y});
        dist::broadcast_variables(cg, comm());
      },
      {"ranks are out of step, at different checks", "'compiling a collective' on rank 0",
       "'the graph's variables, the graph's inputs, the graph's collectives' on rank"});
}

// The last rank builds a wider hidden layer: broadcast_variables, where every data-parallel job
// starts, refuses at once on every rank, naming the variable's shape on each, instead of
// exchanging mismatched buffers.
TEST(OutOfStep, DifferentGraphsFailInBroadcastVariables) {
  const int P = comm().size(), r = comm().rank();
  const std::int64_t hidden = r == P - 1 ? 25 : 24;
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {8, hidden}, Initializer::uniform(-0.5f, 0.5f, 3));
  auto loss = reduce_mean(tanh(matmul(x, W)));
  auto step = sgd(loss, {W}, 0.1f, 0.0f, DataParallel{comm()});
  auto cg = GraphCompiler().compile(g, {{"x", {4, 8}}}, {loss, step});
  expect_out_of_step(
      [&] { dist::broadcast_variables(cg, comm()); },
      {"broadcast_variables: ranks disagree on the graph's variables", "'W f32 [8, 24]'",
       "'W f32 [8, 25]' on rank " + std::to_string(P - 1), "the graph's collectives"});
  // A different share of the batch per rank: the inputs differ.
  Graph g2;
  auto x2 = g2.input("x");
  auto W2 = g2.variable("W", {8, 4});
  auto loss2 = reduce_mean(tanh(matmul(x2, W2)));
  auto step2 = sgd(loss2, {W2}, 0.1f, 0.0f, DataParallel{comm()});
  const std::int64_t rows = r == 0 ? 5 : 4;
  auto cg2 = GraphCompiler().compile(g2, {{"x", {rows, 8}}}, {loss2, step2});
  expect_out_of_step([&] { dist::broadcast_variables(cg2, comm()); },
                     {"the graph's inputs", "'x f32 [5, 8]' on rank 0"});
}

// ---- failure (an invocation of its own: the communicator stays broken afterwards) -----------

// A kernel fails on the last rank (a computed embedding index out of range): its run fails with
// that error, and every other rank's allreduce fails with a CommunicationError naming that rank and
// its error, instead of waiting for it.
TEST(Failure, RunThatThrowsIsNamedOnEveryRank) {
  const int P = comm().size(), r = comm().rank();
  ASSERT_GE(P, 2);
  Graph g;
  auto T = g.variable("T", {4, 3}, Initializer::fill(1.0f));
  auto ids = g.input("ids", DType::i32);
  // Computed indices (a slice): checked by the kernel during the run, not with the feed.
  auto y = dist::allreduce(reduce_sum(embedding(T, slice(ids, 0, 0, 2))), comm());
  // A variable written from the collective: a failed run must leave it as it was.
  auto acc = g.variable("acc", {1});
  auto step = assign(acc, acc + reshape(y, {1}));
  auto cg = GraphCompiler().compile(g, {{"ids", {3}}}, {y, step});
  cg.run({{"ids", std::vector<std::int32_t>{0, 1, 0}}});
  EXPECT_EQ(cg.read(y)[0], 6.0f * static_cast<float>(P));
  EXPECT_EQ(cg.read(acc)[0], 6.0f * static_cast<float>(P));
  const bool bad = r == P - 1;
  try {
    cg.run({{"ids", std::vector<std::int32_t>{0, bad ? 99 : 1, 0}}});
    ADD_FAILURE() << "the run succeeded on rank " << r;
  } catch (const FeedError& e) {
    EXPECT_TRUE(bad) << e.what();
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
  } catch (const CommunicationError& e) {
    EXPECT_FALSE(bad) << e.what();
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank " + std::to_string(P - 1) + " failed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index 99"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allreduce"), std::string::npos) << msg;
  }
  EXPECT_EQ(cg.read(acc)[0], 6.0f * static_cast<float>(P)) << "the failed run wrote a variable";
  // Broken for good: later collectives fail at once, on every rank.
  EXPECT_THROW(cg.run({{"ids", std::vector<std::int32_t>{0, 1, 0}}}), CommunicationError);
}

// Driven by tests/distributed_lost_rank.sh, which kills (or stops) rank 1 from outside while
// every rank trains: rank 0 must fail with an error naming rank 1 within the heartbeat timeout
// instead of waiting forever. Rank 1 writes its pid where the script looks for it.
TEST(Failure, LostRankIsNamed) {
  const char* dir = std::getenv("HETGRAPH_TEST_PID_DIR");
  if (dir == nullptr) GTEST_SKIP() << "run by tests/distributed_lost_rank.sh";
  const int r = comm().rank();
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {64, 64}, Initializer::uniform(-0.1f, 0.1f, 5));
  auto loss = reduce_mean(tanh(matmul(x, W)));
  auto step = sgd(loss, {W}, 0.1f, 0.0f, DataParallel{comm()});
  auto cg = GraphCompiler().compile(g, {{"x", {64, 64}}}, {loss, step});
  const auto xs = rank_data(r, 64 * 64, 70);
  cg.run({{"x", xs}});
  if (r == 1) {
    std::ofstream(std::string(dir) + "/rank1.pid") << getpid() << '\n';
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (;;) {
      cg.run({{"x", xs}});
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(90)) {
        FAIL() << "rank " << r << " still training after 90 s";
      }
    }
  } catch (const CommunicationError& e) {
    std::fprintf(stderr, "rank %d: %s\n", r, e.what());
    if (r != 1) {
      EXPECT_NE(std::string(e.what()).find("rank 1 "), std::string::npos) << e.what();
    }
  }
}

}  // namespace
