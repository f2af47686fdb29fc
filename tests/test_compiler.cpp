// SPDX-License-Identifier: Apache-2.0
// The compiler passes one by one: pruning, topological order, shape inference, the memory
// plan (sequential and parallel-safe), assign elision.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "common/executable.hpp"
#include "compiler/placement.hpp"
#include "compiler/plan.hpp"
#include "hetgraph/autodiff.hpp"
#include "hetgraph/distributed.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using hetgraph::detail::OpKind;
using hetgraph::detail::Plan;
using hetgraph::detail::PlanOptions;
using hetgraph::detail::ReuseMode;
using hetgraph::detail::Storage;

namespace {

std::shared_ptr<const Plan> plan_with(const Graph& g, const InputShapes& shapes,
                                      const std::vector<Node>& fetches, const PlanOptions& o) {
  std::vector<std::uint32_t> ids;
  for (const Node& n : fetches) ids.push_back(n.id());
  return detail::compile_plan(detail::impl_of(g), shapes, ids, o);
}

std::shared_ptr<const Plan> plan_of(const Graph& g, const InputShapes& shapes,
                                    std::vector<Node> fetches,
                                    ReuseMode mode = ReuseMode::sequential, bool arena = false) {
  PlanOptions o{mode};
  o.arena = arena;
  return plan_with(g, shapes, fetches, o);
}

// Graph::summary and Graph::to_dot describe a graph before it is compiled: counts, every
// variable with its shape, parameters in all; a DOT node per graph node and an edge per input,
// names with quotes escaped.
TEST(GraphPrint, SummaryAndDotDescribeTheGraphBeforeCompiling) {
  Graph g;
  Node x = g.input("x");
  Node w = g.variable("fc.weight", {784, 10});
  Node b = g.variable("fc.bias", {10});
  Node y = softmax(add(matmul(x, w), b), -1).named("say \"hi\"");
  Node z = relu(add(y, g.constant(1.0f)));
  const std::string s = g.summary();
  EXPECT_NE(s.find("graph: 9 nodes (1 input, 2 variables, 1 constant, 5 ops)"), std::string::npos)
      << s;
  EXPECT_NE(s.find("variables: 2, 7850 elements"), std::string::npos) << s;
  EXPECT_NE(s.find("fc.weight  [784, 10]  7840"), std::string::npos) << s;
  EXPECT_NE(s.find("fc.bias  [10]  10"), std::string::npos) << s;
  EXPECT_NE(s.find("ops: add 2, matmul 1, relu 1, softmax 1"), std::string::npos) << s;
  const std::string d = g.to_dot();
  EXPECT_EQ(d.rfind("digraph hetgraph {", 0), 0u) << d;
  EXPECT_NE(d.find("[label=\"fc.weight\\nvariable [784, 10]\""), std::string::npos) << d;
  EXPECT_NE(d.find("say \\\"hi\\\"\\nsoftmax"), std::string::npos) << d;
  EXPECT_NE(d.find("  n" + std::to_string(w.id()) + " -> n"), std::string::npos) << d;
  // An edge per input: matmul 2, add 2, softmax 1, add 2, relu 1.
  std::size_t edges = 0;
  for (std::size_t at = d.find(" -> "); at != std::string::npos; at = d.find(" -> ", at + 1))
    ++edges;
  EXPECT_EQ(edges, 8u) << d;
  EXPECT_EQ(z.op_name(), "relu");
  // The compiled plan's: the product, the bias add and (with fusion) fewer nodes.
  CompiledGraph cg = GraphCompiler(Platform::cpu()).compile(g, {{"x", {2, 784}}}, {z});
  const std::string pd = cg.to_dot();
  EXPECT_EQ(pd.rfind("digraph plan {", 0), 0u) << pd;
  EXPECT_NE(pd.find("fused_matmul [2, 10]"), std::string::npos) << pd;
  EXPECT_NE(pd.find("softmax [2, 10]"), std::string::npos) << pd;
  EXPECT_EQ(pd.find("\\nmatmul "), std::string::npos) << "the product is fused: " << pd;
}

TEST(Prune, KeepsOnlyWhatFetchesNeed) {
  Graph g;
  auto x = g.input("x");
  auto used = relu(x);
  auto unused = exp(x) + 1.0f;
  auto p = plan_of(g, {{"x", {3}}}, {used});
  EXPECT_EQ(p->nodes.size(), 2u);
  EXPECT_TRUE(p->index_of.count(used.id()));
  EXPECT_FALSE(p->index_of.count(unused.id()));
  auto cg = GraphCompiler().compile(g, {{"x", {3}}}, {used});
  EXPECT_THROW(cg.read(unused), GraphError);
}

TEST(Prune, EmptyFetchListTakesEverySink) {
  Graph g;
  auto x = g.input("x");
  auto a = relu(x);
  auto b = exp(x);
  auto p = plan_of(g, {{"x", {3}}}, {});
  EXPECT_EQ(p->fetches.size(), 2u);
  EXPECT_TRUE(p->nodes[p->index_of.at(a.id())].fetched);
  EXPECT_TRUE(p->nodes[p->index_of.at(b.id())].fetched);
}

TEST(TopoOrder, InputsComeBeforeConsumers) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    Graph g;
    std::vector<Node> nodes{g.input("x")};
    for (int i = 0; i < 40; ++i) {
      const Node a = nodes[rng() % nodes.size()], b = nodes[rng() % nodes.size()];
      nodes.push_back(rng() % 2 ? a + b : relu(a));
    }
    auto p = plan_of(g, {{"x", {2}}}, {nodes.back()});
    for (std::size_t i = 0; i < p->nodes.size(); ++i) {
      for (std::uint32_t u : p->nodes[i].inputs) EXPECT_LT(u, i);
    }
  }
}

TEST(TopoOrder, DepthFirstKeepsBranchesTogether) {
  // sum of 8 independent branches: each branch's nodes sit next to their adder.
  Graph g;
  auto x = g.input("x");
  std::vector<Node> level;
  for (int i = 0; i < 8; ++i) level.push_back(exp(x * static_cast<float>(i)));
  while (level.size() > 1) {
    std::vector<Node> next;
    for (std::size_t i = 0; i < level.size(); i += 2) next.push_back(level[i] + level[i + 1]);
    level = next;
  }
  auto p = plan_of(g, {{"x", {1000}}}, {level[0]});
  // With depth-first order only O(log n) values are live at once.
  EXPECT_LE(p->buffers, 2u + 5u);
}

TEST(ShapeInference, ShapesFlowFromInputs) {
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {784, 10});
  auto b = g.variable("b", {10});
  auto logits = matmul(x, W) + b;
  auto s = reduce_sum(logits, 1, true);
  auto t = transpose(reshape(logits, {-1, 5}));
  auto cg = GraphCompiler().compile(g, {{"x", {32, 784}}}, {logits, s, t});
  EXPECT_EQ(cg.shape(logits), (Shape{32, 10}));
  EXPECT_EQ(cg.shape(s), (Shape{32, 1}));
  EXPECT_EQ(cg.shape(t), (Shape{5, 64}));
}

TEST(Simplify, IdentitySumToBecomesAView) {
  Graph g;
  auto a = g.input("a"), b = g.input("b");
  auto s = detail::make_op(OpKind::SumTo, {a * b, a});
  auto p = plan_of(g, {{"a", {4, 3}}, {"b", {4, 3}}}, {s});
  EXPECT_EQ(p->nodes[p->index_of.at(s.id())].storage, Storage::View);
  auto p2 = plan_of(g, {{"a", {1, 3}}, {"b", {4, 3}}}, {s});
  EXPECT_EQ(p2->nodes[p2->index_of.at(s.id())].storage, Storage::Computed);
}

// ---- memory plan ----------------------------------------------------------------------------

TEST(MemoryPlan, ElementwiseChainUsesConstantMemory) {
  auto planned = [](int n) {
    Graph g;
    Node y = g.input("x");
    for (int i = 0; i < n; ++i) y = i % 3 == 0 ? relu(y) : (i % 3 == 1 ? exp(y) : -y);
    auto cg = GraphCompiler().compile(g, {{"x", {1000}}}, {y});
    return std::pair{cg.report().planned_bytes, cg.report().naive_bytes};
  };
  const auto [p10, n10] = planned(10);
  const auto [p100, n100] = planned(100);
  EXPECT_EQ(p10, p100);           // O(1) buffers: input + one in-place chain
  EXPECT_LE(p100, 2 * 4032u);     // two 4000-byte buffers, aligned
  EXPECT_GT(n100, 10 * n10 / 2);  // one buffer per node grows with n
}

TEST(MemoryPlan, NonInPlaceChainAlternatesTwoBuffers) {
  Graph g;
  Node y = g.input("x");
  auto W = g.variable("W", {64, 64}, Initializer::uniform(-0.1f, 0.1f, 1));
  for (int i = 0; i < 20; ++i) y = matmul(y, W);
  // x, W, and two buffers that the matmuls alternate between (the last one fetched); packed
  // in an arena (the CPU's), each matmul's value is its own buffer over the same two ranges.
  auto p = plan_of(g, {{"x", {64, 64}}}, {y});
  EXPECT_EQ(p->buffers, 4u);
  auto cg = GraphCompiler().compile(g, {{"x", {64, 64}}}, {y});
  EXPECT_EQ(cg.report().planned_bytes, 4u * 64 * 64 * 4);
}

// Static check that no two values that may be live at once share memory: for every value,
// each later value whose memory (its buffer's range in the arena) meets its own must be
// written after all its readers. In sequential mode "after" is plan order; in DAG mode the
// readers must be ancestors of the writer. Values kept between runs (inputs, variables,
// constants) share memory only with their own buffer; fetched values are not overwritten,
// and a value not marked clobbered is overwritten by no later one.
void check_plan_safe(const Plan& p) {
  const std::size_t n = p.nodes.size();
  std::vector<std::vector<std::uint32_t>> readers(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < p.nodes[i].inputs.size(); ++k) {
      if (p.nodes[i].reads_input(k)) readers[p.nodes[i].inputs[k]].push_back(i);
    }
  }
  // ancestors by dependency edges (small graphs: dense sets)
  std::vector<std::vector<char>> anc(n, std::vector<char>(n, 0));
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t d : p.nodes[i].deps) {
      anc[i][d] = 1;
      for (std::uint32_t k = 0; k < n; ++k) anc[i][k] |= anc[d][k];
    }
  }
  // readers through views
  std::function<void(std::uint32_t, std::vector<std::uint32_t>&)> all_readers =
      [&](std::uint32_t v, std::vector<std::uint32_t>& out) {
        for (std::uint32_t r : readers[v]) {
          if (p.nodes[r].storage == Storage::View) all_readers(r, out);
          out.push_back(r);
        }
      };
  auto meet = [&](std::uint32_t v, std::uint32_t w) {
    const auto bv = static_cast<std::size_t>(p.nodes[v].buffer);
    const auto bw = static_cast<std::size_t>(p.nodes[w].buffer);
    if (bv == bw) {  // an in-place chain (one offset), or the bands of one concat
      const std::size_t a = p.nodes[v].offset, b = p.nodes[w].offset;
      return a < b + std::max<std::size_t>(p.nodes[w].type.bytes(), 4) &&
             b < a + std::max<std::size_t>(p.nodes[v].type.bytes(), 4);
    }
    const std::size_t v0 = p.buffer_offset[bv], w0 = p.buffer_offset[bw];
    return v0 < w0 + p.buffer_bytes[bw] && w0 < v0 + p.buffer_bytes[bv];
  };
  // A member of a parallel group runs at its group's place.
  auto at = [&](std::uint32_t i) {
    return p.nodes[i].group >= 0 ? static_cast<std::uint32_t>(p.nodes[i].group) : i;
  };
  std::vector<char> kept(p.buffer_bytes.size(), 0);
  for (std::uint32_t v = 0; v < n; ++v) {
    const auto& node = p.nodes[v];
    if (node.buffer >= 0 && (node.storage == Storage::Input || node.storage == Storage::Variable ||
                             node.storage == Storage::Constant))
      kept[static_cast<std::size_t>(node.buffer)] = 1;
    if (node.fetched) {
      EXPECT_FALSE(node.clobbered) << node.label << " is fetched";
    }
  }
  for (std::uint32_t v = 0; v < n; ++v) {
    if (p.nodes[v].buffer < 0 || p.nodes[v].storage == Storage::View) continue;
    for (std::uint32_t w = 0; w < n; ++w) {
      if (w == v || p.nodes[w].buffer < 0 || p.nodes[w].storage == Storage::View) continue;
      if (p.nodes[w].buffer == p.nodes[v].buffer || !meet(v, w)) continue;
      EXPECT_FALSE(kept[static_cast<std::size_t>(p.nodes[v].buffer)])
          << p.nodes[w].label << " shares memory with " << p.nodes[v].label
          << ", which is kept between runs";
    }
  }
  for (std::uint32_t v = 0; v < n; ++v) {
    if (p.nodes[v].storage != Storage::Computed) continue;
    std::vector<std::uint32_t> rs;
    all_readers(v, rs);
    bool overwritten = false;
    for (std::uint32_t w = v + 1; w < n; ++w) {
      if (p.nodes[w].storage != Storage::Computed || !meet(v, w)) continue;
      overwritten = true;
      for (std::uint32_t r : rs) {
        if (r == w) continue;  // w reads v and overwrites it in place
        const bool before = p.reuse == ReuseMode::sequential
                                ? at(r) < at(w)
                                : at(r) != at(w) && anc[at(w)][at(r)] != 0;
        EXPECT_TRUE(before) << "buffer " << p.nodes[v].buffer << ": " << p.nodes[w].label
                            << " (buffer " << p.nodes[w].buffer << ") overwrites "
                            << p.nodes[v].label << " before its reader " << p.nodes[r].label
                            << " has surely run";
      }
    }
    if (overwritten) {
      EXPECT_TRUE(p.nodes[v].clobbered) << p.nodes[v].label << " is overwritten, unmarked";
    }
  }
}

// The plan of `fetches` in `mode` packed into an arena (the CPU's), checked safe.
std::shared_ptr<const Plan> arena_plan(const Graph& g, const InputShapes& shapes,
                                       const std::vector<Node>& fetches, PlanOptions o) {
  o.arena = true;
  auto plan = plan_with(g, shapes, fetches, o);
  check_plan_safe(*plan);
  return plan;
}

// Random graphs of mixed ops (broadcasts, reductions, matmuls, views).
Graph random_graph(std::mt19937& rng, std::vector<Node>& sinks) {
  Graph g;
  std::vector<Node> vals{g.input("x"), g.input("y")};
  for (int i = 0; i < 60; ++i) {
    const Node a = vals[rng() % vals.size()], b = vals[rng() % vals.size()];
    switch (rng() % 7) {
      case 0:
        vals.push_back(a + b);
        break;
      case 1:
        vals.push_back(a * b);
        break;
      case 2:
        vals.push_back(tanh(a));
        break;
      case 3:
        vals.push_back(matmul(a, b));
        break;
      case 4:
        vals.push_back(reduce_sum(a, 1, true) + b);
        break;
      case 5:
        vals.push_back(reshape(relu(a), {8, 8}));
        break;
      case 6:
        vals.push_back(softmax(a - b));
        break;
    }
  }
  for (int i = 0; i < 3; ++i)
    sinks.push_back(vals[vals.size() - 1 - static_cast<std::size_t>(i) * 7]);
  return g;
}

TEST(MemoryPlan, RandomGraphsNeverShareLiveMemory) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<Node> sinks;
    Graph g = random_graph(rng, sinks);
    for (ReuseMode mode : {ReuseMode::sequential, ReuseMode::dag}) {
      for (bool arena : {false, true}) {
        auto p = plan_of(g, {{"x", {8, 8}}, {"y", {8, 8}}}, sinks, mode, arena);
        check_plan_safe(*p);
        EXPECT_LE(p->arena_bytes, p->naive_bytes + 2 * 64 * 4);
        if (arena && mode == ReuseMode::sequential) {
          EXPECT_GE(p->arena_bytes, p->live_bytes);
        }
      }
    }
    // and executing them: planner on and off agree bitwise
    testing_util::run_checked(testing_util::platforms()[1], g,
                              {{"x", {8, 8}, testing_util::random_vec(64, 1)},
                               {"y", {8, 8}, testing_util::random_vec(64, 2)}},
                              sinks);
  }
}

// An in-place chain whose last link nobody reads left one expiry entry per link, and each
// put the buffer on the free list: a later node got it while views of its next contents were
// still to be read (four per-step weight gradients came out wrong, planner off was right).
TEST(MemoryPlan, AFreedBufferIsHandedOutOnce) {
  Graph g;
  auto W = g.variable("W", {4, 3}, Initializer::uniform(-1, 1, 1));
  std::vector<testing_util::In> ins;
  Node loss;
  for (int t = 0; t < 4; ++t) {
    const std::string xt = "x" + std::to_string(t), rt = "r" + std::to_string(t);
    auto term = reduce_sum(matmul(g.input(xt), W) * g.input(rt));
    loss = t == 0 ? term : loss + term;
    ins.push_back({xt, {2, 4}, testing_util::random_vec(8, static_cast<std::uint32_t>(t + 1))});
    ins.push_back({rt, {2, 3}, testing_util::random_vec(6, static_cast<std::uint32_t>(t + 9))});
  }
  auto dW = gradients(loss, {W})[0];
  for (const auto& pc : testing_util::platforms()) testing_util::run_checked(pc, g, ins, {dW});
}

TEST(MemoryPlan, ParallelSafeModeNeedsAncestry) {
  // Two independent branches: in sequential mode the second may reuse the first's freed
  // buffer; in DAG mode it may not (the branches could run at the same time).
  Graph g;
  auto x = g.input("x");
  auto a1 = exp(x), a2 = reduce_sum(a1, 0);
  auto b1 = tanh(x), b2 = reduce_sum(b1, 0);
  auto seq = plan_of(g, {{"x", {100, 4}}}, {a2, b2}, ReuseMode::sequential);
  auto dag = plan_of(g, {{"x", {100, 4}}}, {a2, b2}, ReuseMode::dag);
  const auto& s = *seq;
  const auto& d = *dag;
  EXPECT_EQ(s.nodes[s.index_of.at(a1.id())].buffer, s.nodes[s.index_of.at(b1.id())].buffer);
  EXPECT_NE(d.nodes[d.index_of.at(a1.id())].buffer, d.nodes[d.index_of.at(b1.id())].buffer);
  check_plan_safe(s);
  check_plan_safe(d);
}

TEST(MemoryPlan, FarReuseAddsOrderingEdgesThatKeepThePlanSafe) {
  // A layered random DAG too wide for the bounded reuse proof: buffers whose users lie far
  // back in plan order are reused through ordering edges; the plan stays safe, and every
  // engine computes the host's values. The sequential engine's two threads also turn on
  // parallel-op fusion: its groups' members must run at their group's place in the memory
  // plan (a node planned between two members once overwrote a member's output).
  Graph g;
  std::mt19937 rng(11);
  auto x = g.input("x");
  // 64 KiB values: buffers under 4 KiB are not worth an ordering edge.
  std::vector<float> xv(16384);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.001f * static_cast<float>(i % 1000) - 0.7f;
  std::vector<Node> prev(300, x);
  std::vector<std::vector<float>> host(300, xv);
  for (int layer = 0; layer < 10; ++layer) {
    std::vector<Node> cur;
    std::vector<std::vector<float>> next;
    for (int i = 0; i < 300; ++i) {
      const std::size_t a = rng() % prev.size();
      std::vector<float> v = host[a];
      if (rng() % 2) {
        cur.push_back(prev[a] * 0.5f);
        for (float& e : v) e *= 0.5f;
      } else {
        const std::size_t b = rng() % prev.size();
        cur.push_back(prev[a] + prev[b]);
        for (std::size_t k = 0; k < v.size(); ++k) v[k] += host[b][k];
      }
      next.push_back(std::move(v));
    }
    prev = std::move(cur);
    host = std::move(next);
  }
  const InputShapes shapes{{"x", {16384}}};
  auto dag = plan_of(g, shapes, prev, ReuseMode::dag);
  EXPECT_GT(dag->ordering_edges, 0u);
  check_plan_safe(*dag);
  for (const CpuOptions& o :
       {CpuOptions{.engine = CpuEngine::sequential, .threads = 2},
        CpuOptions{.engine = CpuEngine::critical_path, .executors = 2, .threads_per_executor = 1},
        CpuOptions{.engine = CpuEngine::shared_queue, .executors = 2, .threads_per_executor = 1}}) {
    auto cg = GraphCompiler(Platform::cpu(o)).compile(g, shapes, prev);
    for (int r = 0; r < 3; ++r) {
      cg.run({{"x", xv}});
      for (std::size_t i = 0; i < prev.size(); ++i) {
        ASSERT_EQ(cg.read(prev[i]), host[i])
            << "output " << i << ", run " << r << ", engine " << static_cast<int>(o.engine);
      }
    }
  }
}

// Two values of 64 KiB live together, then four of 32 KiB: buffers laid end to end took
// 2 x 64 + 2 x 32 KiB (the 32 KiB values get the freed 64 KiB buffers, then two new ones);
// packed, the arena is the peak of live bytes (the four reuse the two's range).
Graph phases_graph(std::vector<Node>& out) {
  Graph g;
  auto x = g.input("x");  // [128, 128]
  auto a = exp(x), b = tanh(x);
  auto m = matmul(a, b);  // a, b, m live: 3 x 64 KiB
  auto w = g.constant({128, 64}, std::vector<float>(128 * 64, 0.01f));
  std::vector<Node> q;
  for (int k = 0; k < 4; ++k) q.push_back(matmul(m * static_cast<float>(k + 1), w));
  out = {concat({q[0] + q[1], q[2] - q[3]}, 1)};
  return g;
}

TEST(MemoryPlan, PackedArenaIsThePeakOfLiveBytes) {
  std::vector<Node> out;
  Graph g = phases_graph(out);
  const InputShapes shapes{{"x", {128, 128}}};
  auto laid = plan_of(g, shapes, out, ReuseMode::sequential, false);
  auto packed = plan_of(g, shapes, out, ReuseMode::sequential, true);
  check_plan_safe(*laid);
  check_plan_safe(*packed);
  EXPECT_EQ(laid->live_bytes, packed->live_bytes);
  EXPECT_EQ(packed->arena_bytes, packed->live_bytes);
  EXPECT_GT(laid->arena_bytes, packed->arena_bytes);
  // Dag mode: the four branches may run at once and no barrier parts them: no better than
  // step 3's proven reuse laid end to end, and never worse.
  auto dag = plan_of(g, shapes, out, ReuseMode::dag, true);
  check_plan_safe(*dag);
  const std::size_t dag_laid = plan_of(g, shapes, out, ReuseMode::dag, false)->arena_bytes;
  EXPECT_LE(dag->arena_bytes, dag_laid);
  // Results bitwise equal with the planner on and off, on every engine.
  const auto xv = testing_util::random_vec(128 * 128, 5);
  auto off = GraphCompiler(Platform::cpu(), {.plan_memory = false}).compile(g, shapes, out);
  off.run({{"x", xv}});
  const std::vector<float> want = off.read(out[0]);
  for (const CpuOptions& o :
       {CpuOptions{.engine = CpuEngine::sequential},
        CpuOptions{.engine = CpuEngine::critical_path, .executors = 2, .threads_per_executor = 1},
        CpuOptions{.engine = CpuEngine::shared_queue, .executors = 2, .threads_per_executor = 1}}) {
    auto cg = GraphCompiler(Platform::cpu(o)).compile(g, shapes, out);
    EXPECT_LE(cg.planned_bytes(),
              o.engine == CpuEngine::sequential ? laid->arena_bytes - 1 : dag_laid);
    for (int r = 0; r < 2; ++r) {
      cg.run({{"x", xv}});
      EXPECT_EQ(cg.read(out[0]), want) << "engine " << static_cast<int>(o.engine);
    }
  }
}

// Inception-like blocks (four branches meeting in a concat): in dag mode branches of one block
// may run at once and never share memory, but blocks are ordered by their concats, so a later
// block reuses an earlier one's memory; the plan stays safe on a random layout of branches.
TEST(MemoryPlan, DagModePacksAcrossBarriersOnly) {
  Graph g;
  std::mt19937 rng(7);
  Node y = g.input("x");  // [16, 64]
  for (int block = 0; block < 6; ++block) {
    std::vector<Node> branches;
    for (int br = 0; br < 4; ++br) {
      Node v = y;
      const int depth = 1 + static_cast<int>(rng() % 3);
      for (int d = 0; d < depth; ++d) v = d % 2 ? tanh(v) * 0.5f : exp(v * 0.1f);
      branches.push_back(v);
    }
    y = reduce_sum(reshape(concat(branches, 1), {16, 4, 64}), 1);
  }
  const InputShapes shapes{{"x", {16, 64}}};
  auto laid = plan_of(g, shapes, {y}, ReuseMode::dag, false);
  auto packed = plan_of(g, shapes, {y}, ReuseMode::dag, true);
  check_plan_safe(*packed);
  EXPECT_LT(packed->arena_bytes, laid->arena_bytes);
  // Bitwise equal with the planner on and off on every platform (the parallel engines run
  // a block's branches at once).
  for (const auto& pc : testing_util::platforms()) {
    testing_util::run_checked(pc, g, {{"x", {16, 64}, testing_util::random_vec(16 * 64, 3)}}, {y});
  }
}

// On every platform and engine: the fetches bitwise equal with the memory-plan switch `flag`
// (CompileOptions::Experimental) off and on, and with the planner on and off.
void expect_same_with_switch_off(const Graph& g, const InputShapes& shapes,
                                 const std::vector<testing_util::In>& feeds,
                                 const std::vector<Node>& fetches,
                                 bool CompileOptions::Experimental::*flag) {
  std::vector<FeedItem> items;
  for (const auto& f : feeds) items.push_back({f.name, f.values});
  for (const auto& pc : testing_util::platforms()) {
    std::vector<std::vector<float>> got[2];
    for (bool on : {false, true}) {
      CompileOptions co;
      co.experimental.*flag = on;
      auto cg = GraphCompiler(pc.make(), co).compile(g, shapes, fetches);
      cg.run(items);
      for (Node n : fetches) got[on].push_back(cg.read(n));
    }
    for (std::size_t k = 0; k < fetches.size(); ++k) {
      EXPECT_TRUE(testing_util::bitwise_equal(got[0][k], got[1][k])) << pc.name << " fetch " << k;
    }
    testing_util::run_checked(pc, g, feeds, fetches);
  }
}

// concat_in_place: at batch 1 (nothing outside the concat axis) a concat's inputs are computed
// straight into its bands and the concat becomes a view of them. An input read again after
// the concat keeps its band until then, and the concat's reader may write over it in place.
// Not: an input another concat took, one read twice by the concat, and a concat with something
// outside its axis (batch 2). Results bitwise equal with the pass on and off.
TEST(MemoryPlan, ConcatInPlaceComputesInputsIntoTheirBands) {
  Graph g;
  auto x = g.input("x"), z = g.input("z");  // [1, 4, 3, 5], [2, 4, 3, 5]
  Node a = tanh(x), b = exp(x * 0.5f), c = relu(x - 0.25f);
  Node cat = concat({a, b, c}, 1);             // bands of 60 floats: 240 bytes each
  Node y = tanh(cat) + 1.0f;                   // in place over the concat is fine
  Node later = reduce_sum(b * 2.0f, 1, true);  // b read after the concat
  Node again = concat({b, exp(x)}, 1);         // b is the first concat's
  Node twice = concat({exp(x * 2.0f), relu(x)}, 1);
  Node twice_in = concat({twice * 2.0f, twice + 1.0f}, 1);
  Node dup_src = sqrt(x * x);
  Node dup = concat({dup_src, dup_src}, 1);  // one node read twice: copied
  Node batch2 = concat({tanh(z), relu(z)}, 1);
  Node y2 = reduce_sum(again, 1) + reduce_sum(dup, 1) + reduce_sum(twice_in, 1);
  Node y3 = batch2 * 3.0f;
  const std::vector<Node> fetches{y, later, y2, y3};
  const InputShapes shapes{{"x", {1, 4, 3, 5}}, {"z", {2, 4, 3, 5}}};
  // Dag mode (parallel engines): the same bands, and a safe plan.
  auto dag_plan = arena_plan(g, shapes, fetches, PlanOptions{ReuseMode::dag});
  EXPECT_EQ(dag_plan->nodes[dag_plan->index(cat, "test")].storage, Storage::View);
  EXPECT_EQ(dag_plan->nodes[dag_plan->index(twice_in, "test")].storage, Storage::View);
  auto plan = arena_plan(g, shapes, fetches, PlanOptions{ReuseMode::sequential});
  EXPECT_GE(plan->arena_bytes, plan->live_bytes);
  const Plan& p = *plan;
  auto at = [&](Node n) { return p.nodes[p.index(n, "test")]; };
  EXPECT_EQ(at(cat).storage, Storage::View);
  const std::int64_t ci = p.index(cat, "test");
  std::size_t off = 0;
  for (Node in : {a, b, c}) {
    EXPECT_EQ(at(in).in_concat, ci);
    EXPECT_EQ(at(in).sub_offset, off);
    EXPECT_EQ(at(in).offset, at(cat).offset + off);
    off += 240;
  }
  EXPECT_EQ(at(again).storage, Storage::Computed);  // b was taken
  EXPECT_EQ(at(twice).storage, Storage::View);
  EXPECT_EQ(at(twice_in).storage, Storage::View);
  EXPECT_EQ(at(dup).storage, Storage::Computed);
  EXPECT_EQ(at(batch2).storage, Storage::Computed);
  PlanOptions o{ReuseMode::sequential};
  o.concat_in_place = false;
  auto off_plan = arena_plan(g, shapes, fetches, o);
  EXPECT_EQ(off_plan->nodes[off_plan->index(cat, "test")].storage, Storage::Computed);
  EXPECT_LT(p.naive_bytes, off_plan->naive_bytes);  // the concats' copies are gone
  const std::vector<testing_util::In> feeds{{"x", {1, 4, 3, 5}, testing_util::random_vec(60, 11)},
                                            {"z", {2, 4, 3, 5}, testing_util::random_vec(120, 12)}};
  expect_same_with_switch_off(g, shapes, feeds, fetches,
                              &CompileOptions::Experimental::concat_in_place);
}

// concat_in_place, DenseNet's block: each layer concatenates every feature so far, so each
// concat's inputs begin the block's last concat's. The last one takes the bands and the others
// become views of the start of its buffer (no copies at all); a fetched one keeps its copy, and
// at batch 2 (something outside the axis) every concat copies. Bitwise equal with the pass on
// and off, on every platform and engine.
TEST(MemoryPlan, ConcatsThatBeginALaterOneAreViewsOfItsBuffer) {
  for (const std::int64_t batch : {1, 2}) {
    for (const bool fetch_middle : {false, true}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + (fetch_middle ? ", a concat fetched" : ""));
      Graph g;
      auto x = g.input("x");  // [batch, 4, 3, 5]
      std::vector<Node> feats{tanh(x)}, cats;
      for (int k = 0; k < 4; ++k) {
        Node cat = concat(feats, 1);
        cats.push_back(cat);
        // A layer: reads the whole concat (BN and ReLU), makes a new channel.
        Node h = relu(cat * (0.5f + 0.1f * static_cast<float>(k)) - 0.2f);
        feats.push_back(tanh(reduce_sum(h, 1, true)));
      }
      Node last = concat(feats, 1);  // [batch, 8, 3, 5]
      Node y = last * 2.0f + 1.0f;
      std::vector<Node> fetches{y};
      if (fetch_middle) fetches.push_back(cats[2]);
      const InputShapes shapes{{"x", {batch, 4, 3, 5}}};
      for (const ReuseMode mode : {ReuseMode::sequential, ReuseMode::dag}) {
        auto plan = arena_plan(g, shapes, fetches, PlanOptions{mode});
        const Plan& p = *plan;
        auto at = [&](Node n) { return p.nodes[p.index(n, "test")]; };
        EXPECT_EQ(at(last).storage, batch == 1 ? Storage::View : Storage::Computed);
        for (std::size_t k = 1; k < cats.size(); ++k) {  // cats[0] has one input
          const bool view = batch == 1 && !(fetch_middle && k == 2);
          EXPECT_EQ(at(cats[k]).storage, view ? Storage::View : Storage::Computed) << k;
          if (view) {
            EXPECT_EQ(at(cats[k]).offset, at(last).offset) << k;
          }
        }
      }
      const std::vector<testing_util::In> feeds{
          {"x",
           {batch, 4, 3, 5},
           testing_util::random_vec(static_cast<std::size_t>(batch) * 60, 21)}};
      expect_same_with_switch_off(g, shapes, feeds, fetches,
                                  &CompileOptions::Experimental::concat_in_place);
    }
  }
}

// slice_views: a slice whose range is one run of its input's memory at a 64-byte boundary
// (rows 2-4 of [8, 16] floats: 128 bytes in) reads that memory where it lies; one across the
// rows (columns), one at an odd offset (20 bytes) and a fetched one copy. A reader that may
// write over its input does so over a view only as the viewed buffer's last reader, and then at
// the view's range (an LSTM step's product onto its rows of the input projection); elsewhere it
// writes a buffer of its own. The input is then kept until the view's readers are done,
// whatever writes in place after it. Bitwise equal with the pass on and off, on every platform
// and engine.
TEST(MemoryPlan, ContiguousSlicesAreViewsOfTheirInput) {
  Graph g;
  auto x = g.input("x"), w = g.input("w");  // [8, 16], [8, 5]
  Node y = tanh(x), v = exp(w * 0.5f);
  Node rows = slice(y, 0, 2, 5);   // 3 rows from byte 128: a view
  Node cols = slice(y, 1, 4, 12);  // across the rows: copied
  Node odd = slice(v, 0, 1, 3);    // from byte 20: copied
  Node kept = slice(y, 0, 0, 4);   // fetched: copied
  Node over = slice(y, 0, 4, 8);   // a view; relu may not write over y (read later)
  Node after = relu(y) * 3.0f;     // may write over y in place only after the views' readers
  Node z = exp(x);
  Node last = slice(z, 0, 4, 8);  // a view whose reader is z's last: in place, bytes 256-511
  Node relu_over = relu(over), relu_of_last = relu(last), relu_last = relu_of_last + 1.0f;
  Node r1 = reduce_sum(rows, 0, true), r2 = reduce_sum(cols, 1, true),
       r3 = reduce_sum(odd + 1.0f, 0, true), r4 = reduce_sum(after, 0, true),
       r5 = reduce_sum(relu_over, 1, true), r6 = reduce_sum(relu_last, 1, true);
  const std::vector<Node> fetches{r1, r2, r3, r4, r5, r6, kept};
  const InputShapes shapes{{"x", {8, 16}}, {"w", {8, 5}}};
  for (const ReuseMode mode : {ReuseMode::sequential, ReuseMode::dag}) {
    auto plan = arena_plan(g, shapes, fetches, PlanOptions{mode});
    const Plan& p = *plan;
    auto at = [&](Node n) { return p.nodes[p.index(n, "test")]; };
    EXPECT_EQ(at(rows).storage, Storage::View);
    EXPECT_EQ(at(rows).offset, at(y).offset + 128);
    EXPECT_EQ(at(cols).storage, Storage::Computed);
    EXPECT_EQ(at(odd).storage, Storage::Computed);
    EXPECT_EQ(at(kept).storage, Storage::Computed);
    EXPECT_EQ(at(over).storage, Storage::View);
    EXPECT_FALSE(at(relu_over).in_place);
    EXPECT_EQ(at(last).storage, Storage::View);
    EXPECT_TRUE(at(relu_of_last).in_place);
    EXPECT_EQ(at(relu_of_last).offset, at(z).offset + 256);
    PlanOptions o{mode};
    o.slice_views = false;
    auto off = arena_plan(g, shapes, fetches, o);
    EXPECT_EQ(off->nodes[off->index(rows, "test")].storage, Storage::Computed);
  }
  const std::vector<testing_util::In> feeds{{"x", {8, 16}, testing_util::random_vec(128, 31)},
                                            {"w", {8, 5}, testing_util::random_vec(40, 32)}};
  expect_same_with_switch_off(g, shapes, feeds, fetches,
                              &CompileOptions::Experimental::slice_views);
}

TEST(MemoryPlan, ReportsPlannedAndNaiveBytes) {
  Graph g;
  Node y = g.input("x");
  for (int i = 0; i < 10; ++i) y = relu(y) + 1.0f;
  auto on = GraphCompiler().compile(g, {{"x", {256}}}, {y});
  auto off = GraphCompiler(Platform::cpu(), {.plan_memory = false}).compile(g, {{"x", {256}}}, {y});
  EXPECT_LT(on.planned_bytes(), on.naive_bytes());
  EXPECT_EQ(off.planned_bytes(), off.naive_bytes());
  EXPECT_EQ(on.naive_bytes(), off.naive_bytes());
  EXPECT_GT(on.report().in_place, 0u);
}

TEST(MemoryPlan, UnfetchedIntermediatesAreReadableUnlessClobbered) {
  Graph g;
  auto x = g.input("x");
  auto a = exp(x);
  auto b = -a;  // in place over a: a is gone after the run
  auto c = b * 2.0f;
  auto cg = GraphCompiler().compile(g, {{"x", {4}}}, {c});
  cg.run({{"x", std::vector<float>{0, 0, 0, 0}}});
  EXPECT_THROW(cg.read(a), GraphError);
  auto off = GraphCompiler(Platform::cpu(), {.plan_memory = false}).compile(g, {{"x", {4}}}, {c});
  off.run({{"x", std::vector<float>{0, 0, 0, 0}}});
  EXPECT_EQ(off.read(a), (std::vector<float>{1, 1, 1, 1}));
}

// ---- assign ---------------------------------------------------------------------------------

// y reads the old W; the update W - x/2 is the assign's value (y does not depend on it).
struct WeightUpdate {
  Graph g;
  Node x = g.input("x");
  Node W = g.variable("W", {3}, Initializer::fill(1.0f));
  Node y = W * x;
  Node value = axpby(W, x, 1.0f, -0.5f);
  Node step = assign(W, value);
};

// Two steps on `platform`: y sees the old W each time, W the update.
void expect_old_then_new_weight(WeightUpdate& u, Platform platform) {
  auto cg = GraphCompiler(std::move(platform)).compile(u.g, {{"x", {3}}}, {u.y, u.step});
  const std::vector<float> xv{2, 4, 6};
  cg.run({{"x", xv}});
  EXPECT_EQ(cg.read(u.y), (std::vector<float>{2, 4, 6}));    // old W
  EXPECT_EQ(cg.read(u.W), (std::vector<float>{0, -1, -2}));  // new W
  cg.run({{"x", xv}});
  EXPECT_EQ(cg.read(u.y), (std::vector<float>{0, -4, -12}));
  EXPECT_EQ(cg.read(u.W), (std::vector<float>{-1, -3, -5}));
}

TEST(Assign, UpdateInPlaceIsElided) {
  WeightUpdate u;
  auto p = plan_of(u.g, {{"x", {3}}}, {u.y, u.step});
  EXPECT_TRUE(p->nodes[p->index_of.at(u.step.id())].elided);
  expect_old_then_new_weight(u, Platform::cpu());
}

// The parallel engines' plan (dag reuse): y is on a branch the update does not depend on. The
// update still runs in place over W, ordered after y by an edge, instead of into a buffer of
// its own and a copy (wide-deep-train's 2 MB weight update on 2x1).
TEST(Assign, UpdateInPlaceIsElidedInDagPlansWithAnOrderingEdge) {
  WeightUpdate u;
  auto p = plan_of(u.g, {{"x", {3}}}, {u.y, u.step}, ReuseMode::dag);
  EXPECT_TRUE(p->nodes[p->index_of.at(u.step.id())].elided);
  const auto& deps = p->nodes[p->index_of.at(u.value.id())].deps;
  EXPECT_NE(std::find(deps.begin(), deps.end(), p->index_of.at(u.y.id())), deps.end());
  for (auto engine : {CpuEngine::critical_path, CpuEngine::shared_queue}) {
    CpuOptions o;
    o.engine = engine;
    o.executors = 2;
    o.threads_per_executor = 1;
    expect_old_then_new_weight(u, Platform::cpu(o));
  }
}

TEST(Assign, CopyRunsAfterEveryReader) {
  Graph g;
  auto x = g.input("x");
  auto v = g.variable("v", {2, 2}, Initializer::fill(1.0f));
  auto later_reader = reduce_sum(v * 3.0f);
  auto step = assign(v, matmul(v, x));  // matmul cannot write over v: a copying assign
  auto p = plan_of(g, {{"x", {2, 2}}}, {later_reader, step});
  const auto& a = p->nodes[p->index_of.at(step.id())];
  EXPECT_FALSE(a.elided);
  auto cg = GraphCompiler().compile(g, {{"x", {2, 2}}}, {later_reader, step});
  cg.run({{"x", std::vector<float>{2, 0, 0, 2}}});
  EXPECT_EQ(cg.read(later_reader), (std::vector<float>{12}));
  EXPECT_EQ(cg.read(v), (std::vector<float>{2, 2, 2, 2}));
  cg.run({{"x", std::vector<float>{2, 0, 0, 2}}});
  EXPECT_EQ(cg.read(later_reader), (std::vector<float>{24}));
  EXPECT_EQ(cg.read(v), (std::vector<float>{4, 4, 4, 4}));
}

TEST(Assign, CounterPersistsAcrossRuns) {
  Graph g;
  auto c = g.variable("c", {}, Initializer::zeros());
  auto step = assign(c, c + 1.0f);
  auto cg = GraphCompiler().compile(g, {}, {step});
  for (int i = 0; i < 5; ++i) cg.run();
  EXPECT_EQ(cg.read(c), (std::vector<float>{5}));
}

TEST(Variables, InitialisersAreDeterministic) {
  Graph g;
  auto u = g.variable("u", {1000}, Initializer::uniform(-2.0f, 3.0f, 9));
  auto n = g.variable("n", {1001}, Initializer::normal(1.0f, 2.0f, 9));
  auto f = g.variable("f", {3}, Initializer::fill(7.0f));
  auto cg1 = GraphCompiler().compile(g, {}, {u, n, f});
  auto cg2 = GraphCompiler().compile(g, {}, {u, n, f});
  const auto uv = cg1.read(u), nv = cg1.read(n);
  EXPECT_EQ(uv, cg2.read(u));
  EXPECT_EQ(nv, cg2.read(n));
  EXPECT_EQ(cg1.read(f), (std::vector<float>{7, 7, 7}));
  EXPECT_GE(*std::min_element(uv.begin(), uv.end()), -2.0f);
  EXPECT_LE(*std::max_element(uv.begin(), uv.end()), 3.0f);
  double mean = 0;
  for (float v : nv) mean += v;
  mean /= static_cast<double>(nv.size());
  EXPECT_NEAR(mean, 1.0, 0.2);
}

// A compiled graph keeps no reference to a variable's initial values once its memory holds
// them: the graph's copy is then the only one (an imported model's weights are not held twice
// when the caller lets the graph go). The values are still what is read, by node and by name,
// after the graph itself is gone; read_i32 by name too.
TEST(Variables, CompiledGraphDropsInitialValuesOnceInitialised) {
  const Initializer init = Initializer::values({1, 2, 3});
  std::optional<Graph> g(std::in_place);
  auto w = g->variable("w", {3}, init);
  auto k = g->constant_i32({2}, {4, 5});
  auto y = add(w, w).named("y");
  auto cg = GraphCompiler().compile(*g, {}, {y, w, k.named("k")});
  EXPECT_EQ(init.data.use_count(), 2);  // `init` here and the graph's
  g.reset();
  EXPECT_EQ(init.data.use_count(), 1);
  cg.run();
  EXPECT_EQ(cg.read("w"), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(cg.read("y"), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(cg.read_i32("k"), (std::vector<std::int32_t>{4, 5}));
}

// compile(std::move(graph)) takes the variables' values: the compiled graph frees them once
// its memory holds them, even while the graph lives on (its nodes still name what to read). The
// results are the same as a copying compile's; the graph cannot be compiled again, and a
// variable it did not compile keeps its values.
TEST(Variables, CompilingAMovedGraphTakesTheValues) {
  for (const testing_util::PlatformCase& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    Graph g;
    auto x = g.input("x");
    auto init = std::make_optional(Initializer::values(testing_util::random_vec(12, 3)));
    const std::weak_ptr<const std::vector<float>> values = init->data;
    auto w = g.variable("w", {4, 3}, *init);
    init.reset();
    auto other = g.variable("other", {2}, Initializer::values({5, 6}));
    auto y = relu(matmul(x, w)).named("y");
    const InputShapes shapes{{"x", {2, 4}}};
    const std::vector<float> xv = testing_util::random_vec(8, 4);
    auto copied = GraphCompiler(pc.make()).compile(g, shapes, {y, w});
    EXPECT_FALSE(values.expired());
    auto moved = GraphCompiler(pc.make()).compile(std::move(g), shapes, {y, w});
    EXPECT_TRUE(values.expired());
    copied.run({{"x", xv}});
    moved.run({{"x", xv}});
    EXPECT_TRUE(testing_util::bitwise_equal(moved.read(y), copied.read(y)));
    EXPECT_EQ(moved.read(w), copied.read(w));
    try {
      (void)GraphCompiler(pc.make()).compile(g, shapes, {y});
      ADD_FAILURE() << "expected GraphError";
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("no values"), std::string::npos) << e.what();
    }
    EXPECT_EQ(GraphCompiler(pc.make()).compile(g, {}, {other}).read(other),
              (std::vector<float>{5, 6}));
  }
}

// A compile(std::move(graph)) that fails gives the graph its values back: here the CPU arena is
// larger than the machine's memory (a PlatformError before anything is allocated).
TEST(Variables, AFailedCompileOfAMovedGraphKeepsTheValues) {
  Graph g;
  auto x = g.input("x");
  auto w = g.variable("w", {4, 3}, Initializer::values(testing_util::random_vec(12, 5)));
  auto y = matmul(x, w).named("y");
  EXPECT_THROW(
      (void)GraphCompiler(Platform::cpu()).compile(std::move(g), {{"x", {1ll << 34, 4}}}, {y}),
      PlatformError);
  auto cg = GraphCompiler(Platform::cpu()).compile(g, {{"x", {1, 4}}}, {y, w});
  EXPECT_EQ(cg.read(w), testing_util::random_vec(12, 5));
}

}  // namespace

namespace {

// Every reader of a variable's old value runs before the assign that overwrites it, in every
// engine (the sequential one runs in plan order, so the order itself must respect this).
TEST(Assign, SimultaneousUpdatesReadOldValuesOnEveryPlatform) {
  for (const auto& pc : testing_util::platforms()) {
    Graph g;
    auto c = g.variable("c", {}, Initializer::fill(1.0f));
    auto d = g.variable("d", {}, Initializer::fill(2.0f));
    auto step = group({assign(c, d * 2.0f + 1.0f), assign(d, d + c)});
    auto cg = GraphCompiler(pc.make()).compile(g, {}, {step});
    cg.run();
    EXPECT_EQ(cg.read(c)[0], 5.0f) << pc.name;
    EXPECT_EQ(cg.read(d)[0], 3.0f) << pc.name;
    cg.run();
    EXPECT_EQ(cg.read(c)[0], 7.0f) << pc.name;
    EXPECT_EQ(cg.read(d)[0], 8.0f) << pc.name;
  }
}

TEST(Assign, UnorderableAssignsAreAGraphError) {
  Graph g;
  auto a = g.variable("a", {2}, Initializer::fill(1.0f));
  auto b = g.variable("b", {2}, Initializer::fill(2.0f));
  auto swap = group({assign(a, b).named("a<-b"), assign(b, a).named("b<-a")});
  try {
    GraphCompiler().compile(g, {}, {swap});
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'a<-b'"), std::string::npos) << m;
    EXPECT_NE(m.find("'b<-a'"), std::string::npos) << m;
  }
  // computing the new values into fresh nodes first makes it orderable
  Graph g2;
  auto p = g2.variable("p", {2}, Initializer::fill(1.0f));
  auto q = g2.variable("q", {2}, Initializer::fill(2.0f));
  auto ok = group({assign(p, q + 0.0f), assign(q, p + 0.0f)});
  for (const auto& pc : testing_util::platforms()) {
    auto cg = GraphCompiler(pc.make()).compile(g2, {}, {ok});
    cg.run();
    EXPECT_EQ(cg.read(p), (std::vector<float>{2, 2})) << pc.name;
    EXPECT_EQ(cg.read(q), (std::vector<float>{1, 1})) << pc.name;
  }
}

// ---- named passes --------------------------------------------------------------------------

// docs/ARCHITECTURE.md's pass table is the documented order: its rows (name, file) against
// passes(), and each pass's function defined in the file the row names.
TEST(Passes, RunInTheOrderOfTheArchitectureDocument) {
  std::ifstream doc(HETGRAPH_SOURCE_DIR "/docs/ARCHITECTURE.md");
  ASSERT_TRUE(doc) << "cannot read docs/ARCHITECTURE.md";
  // The switches the table names (`fuse`, `experimental.conv_post_ops`) are CompileOptions
  // fields: the ones before its Experimental struct, and that struct's.
  std::ifstream header(HETGRAPH_SOURCE_DIR "/include/hetgraph/compiler.hpp");
  const std::string api{std::istreambuf_iterator<char>(header), {}};
  const std::size_t options = api.find("\nstruct CompileOptions {");
  const std::size_t experimental = api.find("struct Experimental {", options);
  const std::size_t options_end = api.find("\n};", options);
  ASSERT_TRUE(options != std::string::npos && experimental < options_end) << "no CompileOptions";
  const std::string user = api.substr(options, experimental - options);
  const std::string lab = api.substr(experimental, options_end - experimental);
  std::vector<std::string> documented;
  std::string line;
  bool in_passes = false;
  while (std::getline(doc, line)) {
    if (line.starts_with("## ")) in_passes = line == "## Passes";
    if (!in_passes || !line.starts_with("| ") || line.starts_with("| pass ") ||
        line.starts_with("|---"))
      continue;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');)
      cells.push_back(cell.substr(cell.find_first_not_of(' '),
                                  cell.find_last_not_of(' ') - cell.find_first_not_of(' ') + 1));
    ASSERT_GE(cells.size(), 3u) << line;
    documented.push_back(cells[0]);
    std::ifstream source(std::string(HETGRAPH_SOURCE_DIR "/") + cells[1]);
    ASSERT_TRUE(source) << cells[0] << ": no file " << cells[1];
    const std::string text{std::istreambuf_iterator<char>(source), {}};
    EXPECT_NE(text.find("void " + cells[0] + "("), std::string::npos)
        << "pass " << cells[0] << " is not defined in " << cells[1];
    for (std::size_t at = cells[2].find('`'); at != std::string::npos;
         at = cells[2].find('`', at + 1)) {
      const std::size_t close = cells[2].find('`', at + 1);
      ASSERT_NE(close, std::string::npos) << line;
      std::string name = cells[2].substr(at + 1, close - at - 1);
      at = close;
      if (name == "placer") continue;  // set by the heterogeneous platform (PlanOptions)
      const bool in_lab = name.starts_with("experimental.");
      if (in_lab) name = name.substr(std::string("experimental.").size());
      EXPECT_NE((in_lab ? lab : user).find(" bool " + name + " = "), std::string::npos)
          << "pass " << cells[0] << ": `" << name << "` is not a CompileOptions"
          << (in_lab ? "::Experimental" : "") << " field";
    }
  }
  std::vector<std::string> names;
  for (const detail::Pass& p : detail::passes()) names.emplace_back(p.name);
  EXPECT_EQ(names, documented) << "docs/ARCHITECTURE.md's pass table and passes() differ";
}

std::size_t count_op(const Plan& p, OpKind op) {
  return static_cast<std::size_t>(
      std::count_if(p.nodes.begin(), p.nodes.end(), [&](const auto& n) { return n.op == op; }));
}

// Allgathers of one communicator and type become one (float and int32 apart), each member a
// view of its slice of the fused result; the values are the unfused ones.
// Winograd is the platform's say (Backend::winograd_layout): the compiler takes the layout it is
// given and asks for channels in whole blocks of it. A platform whose Winograd kernels took
// nChw8c gets them for 8-channel convolutions, one in nChw16c does not, and without a Winograd
// layout (nchw) the plan keeps the platform's convolution layout.
TEST(Passes, WinogradLayoutComesFromThePlatform) {
  const Conv2dOptions same{.padding = {1, 1}};
  Graph g;
  auto x = g.input("x"), w = g.input("w");
  // Convolutions read each other's values directly (no fusion here: a relu between two would
  // be a reader that needs plain memory).
  Node y = conv2d(conv2d(conv2d(x, w, same), w, same), w, same);
  const InputShapes shapes{{"x", {1, 8, 6, 6}}, {"w", {8, 8, 3, 3}}};
  auto plan = [&](detail::ActivationLayout winograd) {
    PlanOptions o{ReuseMode::sequential};
    o.conv_layout = detail::ActivationLayout::nhwc;
    o.winograd_layout = winograd;
    return plan_with(g, shapes, {y}, o);
  };
  using detail::ActivationLayout;
  auto eights = plan(ActivationLayout::nChw8c);
  EXPECT_TRUE(eights->winograd);
  EXPECT_EQ(eights->winograd_layout, ActivationLayout::nChw8c);
  int blocked = 0;
  for (const auto& n : eights->nodes) blocked += n.layout == ActivationLayout::nChw8c;
  EXPECT_GT(blocked, 0) << "the Winograd layout replaced the platform's";
  auto sixteens = plan(ActivationLayout::nChw16c);  // 8 channels: not whole blocks of 16
  EXPECT_FALSE(sixteens->winograd);
  auto none = plan(ActivationLayout::nchw);
  EXPECT_FALSE(none->winograd);
  for (const auto& n : none->nodes) EXPECT_NE(n.layout, ActivationLayout::nChw8c);
}

TEST(Passes, FuseCollectivesJoinsAllgathers) {
  const distributed::Communicator self;
  Graph g;
  auto a = g.input("a"), b = g.input("b"), c = g.input("c");
  auto ids = g.input("ids", DType::i32);
  // Fetched collectives stay as they are: these are read through a node after each.
  std::vector<Node> outs = {distributed::allgather(tanh(a), self) + 0.0f,
                            distributed::allgather(b * 2.0f, self) + 0.0f,
                            distributed::allgather(c + 1.0f, self) + 0.0f,
                            reshape(distributed::allgather(ids, self), {-1})};
  const std::vector<float> av = testing_util::random_vec(6, 1), bv = testing_util::random_vec(8, 2),
                           cv = testing_util::random_vec(3, 3);
  const std::vector<std::int32_t> iv = {4, 1, 3};
  std::vector<std::vector<float>> got[2];
  for (bool fuse : {false, true}) {
    auto cg = GraphCompiler(Platform::cpu(), {.fuse = fuse})
                  .compile(g, {{"a", {2, 3}}, {"b", {8}}, {"c", {3, 1}}, {"ids", {3}}}, outs);
    EXPECT_EQ(count_op(detail::executable_of(cg).plan(), OpKind::Allgather), fuse ? 2u : 4u);
    cg.run({{"a", av}, {"b", bv}, {"c", cv}, {"ids", iv}});
    for (std::size_t k = 0; k < 3; ++k) got[fuse].push_back(cg.read(outs[k]));
    EXPECT_EQ(cg.read_i32(outs[3]), iv);
    EXPECT_EQ(cg.shape(outs[0]), (Shape{2, 3}));
  }
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_TRUE(testing_util::bitwise_equal(got[0][k], got[1][k]));
  EXPECT_EQ(got[1][1][3], bv[3] * 2.0f);
}

TEST(RegroupGradients, SliceGradientsOfOneTensorArePlacedTogether) {
  Graph g;
  auto x = g.input("x");
  auto loss = reduce_sum(slice(x, 1, 0, 2) * slice(x, 1, 2, 4) + slice(x, 1, 4, 5));
  auto dx = gradients(loss, {x})[0];
  auto p = plan_of(g, {{"x", {3, 5}}}, {dx});
  EXPECT_EQ(count_op(*p, OpKind::SliceGradN), 1u);
  EXPECT_EQ(count_op(*p, OpKind::SliceGrad), 0u);
  // the user's gradient node is the total
  const std::vector<float> xv = testing_util::random_vec(15, 3);
  auto cg = GraphCompiler().compile(g, {{"x", {3, 5}}}, {dx});
  cg.run({{"x", xv}});
  const auto got = cg.read(dx);
  for (int r = 0; r < 3; ++r) {
    const float* row = xv.data() + r * 5;
    // the last slice is broadcast over two columns: it gets both rows' ones
    const std::vector<float> want{row[2], row[3], row[0], row[1], 2.0f};
    for (int c = 0; c < 5; ++c) EXPECT_FLOAT_EQ(got[static_cast<std::size_t>(r * 5 + c)], want[c]);
  }
}

TEST(RegroupGradients, PerStepWeightGradientsBecomeProductsOverConcatenatedSteps) {
  // sum_t x_t W r_t: dW = sum_t x_t^T r_t, 10 steps -> products over 8 and 2 steps.
  Graph g;
  auto W = g.variable("W", {4, 3}, Initializer::uniform(-1, 1, 1));
  std::vector<Node> terms;
  InputShapes shapes;
  std::vector<std::vector<float>> xs, rs;
  std::vector<FeedItem> feeds;
  for (int t = 0; t < 10; ++t) {
    auto x = g.input("x" + std::to_string(t)), r = g.input("r" + std::to_string(t));
    terms.push_back(reduce_sum(matmul(x, W) * r));
    shapes.push_back({"x" + std::to_string(t), {2, 4}});
    shapes.push_back({"r" + std::to_string(t), {2, 3}});
    xs.push_back(testing_util::random_vec(8, static_cast<std::uint32_t>(10 + t)));
    rs.push_back(testing_util::random_vec(6, static_cast<std::uint32_t>(30 + t)));
  }
  Node loss = terms[0];
  for (int t = 1; t < 10; ++t) loss = loss + terms[static_cast<std::size_t>(t)];
  auto dW = gradients(loss, {W})[0];
  auto p = plan_of(g, shapes, {dW});
  EXPECT_EQ(count_op(*p, OpKind::Concat), 4u);  // A and G of each chunk
  std::size_t products = 0;
  for (const auto& n : p->nodes) products += n.op == OpKind::MatMul && n.attrs.trans_a;
  EXPECT_EQ(products, 2u);
  for (int t = 0; t < 10; ++t) {
    feeds.push_back(
        {shapes[static_cast<std::size_t>(2 * t)].first, xs[static_cast<std::size_t>(t)]});
    feeds.push_back(
        {shapes[static_cast<std::size_t>(2 * t + 1)].first, rs[static_cast<std::size_t>(t)]});
  }
  auto cg = GraphCompiler().compile(g, shapes, {dW});
  cg.run(std::span<const FeedItem>(feeds));
  const auto got = cg.read(dW);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      double want = 0;
      for (std::size_t t = 0; t < 10; ++t)
        for (int b = 0; b < 2; ++b)
          want += double(xs[t][static_cast<std::size_t>(b * 4 + i)]) *
                  rs[t][static_cast<std::size_t>(b * 3 + j)];
      EXPECT_NEAR(got[static_cast<std::size_t>(i * 3 + j)], want, 1e-5);
    }
  }
}

TEST(TypedAttributes, ReadingAnotherKindIsAnInternalError) {
  detail::Attrs at;
  at.set(detail::Window2d{});
  EXPECT_TRUE(at.has<detail::Window2d>());
  try {
    (void)at.get<detail::Permutation>();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("permutation"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2-d window"), std::string::npos) << e.what();
  }
  detail::Attrs none;
  EXPECT_THROW((void)none.get<detail::SliceRanges>(), Error);
}

// cost_signature keys persisted placement calibration: the attributes that were loose scalars
// (alpha, beta, begin, end) before they became payloads print as they did then.
TEST(TypedAttributes, CostSignaturesKeepTheTextOfTheFormerScalars) {
  using detail::OpKind;
  detail::Plan p;
  const std::uint32_t x = p.add_node(OpKind::Input, {});
  p.nodes[x].type = {Shape{2, 3}, DType::f32};
  const std::string io = " " + p.nodes[x].type.shape.str() + " -> " + p.nodes[x].type.shape.str();
  auto sig = [&](OpKind op, const auto& payload, int axis = 0) {
    detail::Attrs at;
    at.axis = axis;
    at.set(payload);
    const std::uint32_t n = p.add_node(op, {x}, at);
    p.nodes[n].type = p.nodes[x].type;
    return detail::cost_signature(p, p.nodes[n]).substr(detail::op_name(op).size());
  };
  const std::string flags = " x0 k0 t00 m0 ";
  EXPECT_EQ(sig(OpKind::Relu, std::monostate{}), io + " a1 b0" + flags + "0:0 nothing");
  EXPECT_EQ(sig(OpKind::Scale, detail::ScaleFactor{0.5f}), io + " a0.5 b0" + flags + "0:0 nothing");
  EXPECT_EQ(sig(OpKind::Axpby, detail::AxpbyCoeffs{2, -3}), io + " a2 b-3" + flags + "0:0 nothing");
  EXPECT_EQ(sig(OpKind::LeakyRelu, detail::LeakySlope{0.2f}),
            io + " a0.2 b0" + flags + "0:0 nothing");
  EXPECT_EQ(sig(OpKind::Clip, detail::ClipRange{-1, 6}), io + " a-1 b6" + flags + "0:0 nothing");
  EXPECT_EQ(sig(OpKind::Slice, detail::SliceRange{1, -1}, 1),
            io + " a1 b0 x1 k0 t00 m0 1:-1 nothing");
  EXPECT_EQ(sig(OpKind::ConcatGrad, detail::PieceIndex{2}), io + " a1 b0" + flags + "2:0 nothing");
  EXPECT_EQ(sig(OpKind::MaximumGrad, detail::InputChoice{1}),
            io + " a1 b0" + flags + "1:0 nothing");
  EXPECT_EQ(sig(OpKind::EmbeddingUpdate, detail::EmbeddingStep{.scale = -0.25f, .band = 4}),
            io + " a1 b-0.25" + flags + "4:0 nothing");
  EXPECT_EQ(sig(OpKind::SparseOptimizerUpdate, detail::OptimizerRule{.band = 3}),
            io + " a1 b0" + flags + "3:0 optimizer rule");
  detail::MatmulEpilogue scaled;
  scaled.has_op = true;
  scaled.op = OpKind::Scale;
  scaled.alpha = 0.125f;
  EXPECT_EQ(sig(OpKind::FusedMatMul, scaled), io + " a0.125 b0" + flags + "0:0 matmul epilogue");
  detail::ConvEpilogue clip;
  clip.has_op = true, clip.op = OpKind::Clip, clip.clip = {0, 6};
  EXPECT_EQ(sig(OpKind::FusedConv2d, clip), io + " a0 b6" + flags + "0:0 convolution epilogue");
  detail::ConvEpilogue leaky;
  leaky.has_op = true, leaky.op = OpKind::LeakyRelu, leaky.leaky = {0.1f};
  EXPECT_EQ(sig(OpKind::FusedConv2d, leaky), io + " a0.1 b0" + flags + "0:0 convolution epilogue");
  detail::ConvEpilogue relu;
  relu.has_op = true, relu.op = OpKind::Relu;
  EXPECT_EQ(sig(OpKind::FusedConv2d, relu), io + " a1 b0" + flags + "0:0 convolution epilogue");
}

// HETGRAPH_DUMP_PLAN=after:<pass> prints the plan after that pass only: checked in a child
// process (the variable is read once per process).
TEST(DumpPlan, Child) {
  if (std::getenv("HETGRAPH_DUMP_CHILD") == nullptr)
    GTEST_SKIP() << "runs from DumpPlan.AfterAPass";
  Graph g;
  auto x = g.input("x");
  auto loss = reduce_sum(slice(x, 1, 0, 2) * slice(x, 1, 2, 4));
  auto dx = gradients(loss, {x})[0];
  GraphCompiler().compile(g, {{"x", {3, 4}}}, {dx});
}

TEST(DumpPlan, AfterAPass) {
  const std::string cmd =
      "HETGRAPH_DUMP_CHILD=1 HETGRAPH_DUMP_PLAN=after:build,regroup_gradients "
      "/proc/" +
      std::to_string(getpid()) + "/exe --gtest_filter=DumpPlan.Child 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  EXPECT_EQ(pclose(f), 0) << out;
  const auto before = out.find("after build:"), after = out.find("after regroup_gradients:");
  ASSERT_NE(before, std::string::npos) << out;
  ASSERT_NE(after, std::string::npos) << out;
  EXPECT_EQ(out.find("after plan_memory"), std::string::npos) << out;
  // slice gradients before the pass, one slice_grad_n after
  EXPECT_NE(out.substr(before, after - before).find("(slice_grad)"), std::string::npos) << out;
  EXPECT_NE(out.substr(after).find("slice_grad_n"), std::string::npos) << out;
}

// ---- parallel-op fusion ----------------------------------------------------------------

// Eight independent products of one input: a group where a kernel gets two threads, none
// where it gets one or the switch is off; the results agree either way.
TEST(ParallelOps, IndependentSmallNodesRunAsOneGroupWhereKernelsHaveThreads) {
  Graph g;
  auto x = g.input("x");
  std::vector<Node> outs;
  for (int i = 0; i < 8; ++i) {
    auto w = g.variable("w" + std::to_string(i), {96, 96}, Initializer::uniform(-1, 1, 1 + i));
    outs.push_back(tanh(matmul(x, w)));
  }
  const auto xv = testing_util::random_vec(96 * 96, 3);
  auto groups = [](const CompiledGraph& cg) {
    std::size_t members = 0;
    for (const auto& n : detail::executable_of(cg).plan().nodes)
      if (n.op == OpKind::ParallelGroup) members += n.members.size();
    return members;
  };
  // Each product is fetched on its own (a sum would fold them into one chain of accumulating
  // products): eight independent products with a tanh epilogue.
  const InputShapes shapes{{"x", {96, 96}}};
  const CpuOptions seq2{.engine = CpuEngine::sequential, .threads = 2};
  auto two = GraphCompiler(Platform::cpu(seq2)).compile(g, shapes, outs);
  auto one = GraphCompiler(Platform::cpu({.engine = CpuEngine::sequential, .threads = 1}))
                 .compile(g, shapes, outs);
  auto off = GraphCompiler(Platform::cpu(seq2), {.experimental = {.parallel_ops = false}})
                 .compile(g, shapes, outs);
  // The automatic engine forms none: one plan serves all its candidates, and on its one-thread
  // teams a group would run its members one after another.
  auto automatic = GraphCompiler(Platform::cpu({.threads = 2})).compile(g, shapes, outs);
  auto cp = GraphCompiler(Platform::cpu({.engine = CpuEngine::critical_path,
                                         .executors = 1,
                                         .threads_per_executor = 2}))
                .compile(g, shapes, outs);
  EXPECT_EQ(groups(two), 8u);
  EXPECT_EQ(groups(one), 0u);
  EXPECT_EQ(groups(off), 0u);
  EXPECT_EQ(groups(cp), 8u);
  EXPECT_EQ(groups(automatic), 0u);
  std::vector<std::vector<std::vector<float>>> got;
  for (CompiledGraph* cg : {&two, &one, &off, &cp, &automatic}) {
    cg->run({{"x", xv}});
    got.emplace_back();
    for (const Node& o : outs) got.back().push_back(cg->read(o));
  }
  for (std::size_t k = 1; k < got.size(); ++k) {
    for (std::size_t i = 0; i < outs.size(); ++i) {
      testing_util::expect_close(got[k][i], testing_util::to_ref({96, 96}, got[0][i]), 1e-5, 1e-5,
                                 "grouped vs not");
    }
  }
  // A group's results do not depend on the team size that runs it.
  auto again = GraphCompiler(Platform::cpu(seq2)).compile(g, shapes, outs);
  again.run({{"x", xv}});
  for (std::size_t i = 0; i < outs.size(); ++i)
    EXPECT_TRUE(testing_util::bitwise_equal(again.read(outs[i]), got[0][i]));
  // A member's kernel failing fails the run, like any kernel: nothing is left half done.
  EXPECT_NE(detail::executable_of(two)
                .kernel_name(detail::executable_of(two).plan().index(outs[3], "t"))
                .find("parallel group"),
            std::string::npos);
}

}  // namespace
