// SPDX-License-Identifier: Apache-2.0
#include "random_dag.hpp"

#include <cstdint>

#include "hetgraph/autodiff.hpp"

namespace testing_util {

using namespace hetgraph;

RandomDag random_dag(std::mt19937& rng, int n, int kind) {
  Graph g;
  std::vector<Node> v{g.input("x"), g.input("y")};
  std::set<std::uint32_t> read;  // nodes some other node reads
  auto use = [&](Node a) {
    read.insert(a.id());
    return a;
  };
  auto pick = [&] { return use(v[rng() % v.size()]); };
  auto unary = [&](Node a) -> Node {
    use(a);
    switch (rng() % 3) {
      case 0:
        return tanh(a);
      case 1:
        return scale(a, 0.5f);
      default:
        return a * 0.9f + 0.1f;
    }
  };
  while (static_cast<int>(v.size()) < n) {
    switch (kind) {
      case 0:  // random fan-in 1-2
        v.push_back(rng() % 2 ? unary(pick()) : tanh(pick() * pick()));
        break;
      case 1:  // chains
        v.push_back(unary(use(v.back())));
        break;
      case 2: {  // fan-out then fan-in
        const Node src = pick();
        std::vector<Node> fan;
        const int w = 2 + static_cast<int>(rng() % 16);
        for (int i = 0; i < w; ++i) fan.push_back(unary(src));
        Node sum = fan[0];
        for (int i = 1; i < w; ++i) sum = sum + fan[static_cast<std::size_t>(i)];
        for (const Node& f : fan) use(f);
        v.insert(v.end(), fan.begin(), fan.end());
        v.push_back(tanh(sum));
        break;
      }
      default: {  // diamonds
        const Node a = pick();
        const Node b = unary(a), c = unary(a);
        v.push_back(use(b));
        v.push_back(use(c));
        v.push_back(b * c);
        break;
      }
    }
  }
  RandomDag dag{std::move(g), {}};
  for (std::size_t i = 0; i < v.size(); ++i) {  // an input nothing reads is kept too
    if (!read.count(v[i].id())) dag.sinks.push_back(v[i]);
  }
  return dag;
}

RandomDag next_random_dag(std::mt19937& rng, int index) {
  const int n =
      index % 10 == 0 ? 1 + static_cast<int>(rng() % 2000) : 1 + static_cast<int>(rng() % 200);
  return random_dag(rng, n, index % 4);
}

const InputShapes& random_dag_shapes() {
  static const InputShapes shapes{{"x", {4}}, {"y", {4}}};
  return shapes;
}

std::vector<FeedItem> random_dag_feeds() {
  static const std::vector<float> xv{0.1f, -0.2f, 0.3f, 0.7f}, yv{0.5f, 0.25f, -0.75f, 0.125f};
  return {{"x", xv}, {"y", yv}};
}

Training random_training(std::mt19937& rng, const Optimizer* optimizer, const DataParallel* dp) {
  Training t;
  auto x = t.g.input("x");
  const int nv = 2 + static_cast<int>(rng() % 4);
  for (int i = 0; i < nv; ++i) {
    t.vars.push_back(
        t.g.variable("v" + std::to_string(i), {4, 4}, Initializer::uniform(-0.5f, 0.5f, 10 + i)));
  }
  std::vector<Node> pool{x};
  pool.insert(pool.end(), t.vars.begin(), t.vars.end());
  const int ops = 4 + static_cast<int>(rng() % 12);
  for (int i = 0; i < ops; ++i) {
    const Node a = pool[rng() % pool.size()], b = pool[rng() % pool.size()];
    switch (rng() % 6) {
      case 0:
        pool.push_back(a + b);
        break;
      case 1:
        pool.push_back(a * b);
        break;
      case 2:
        pool.push_back(tanh(a));
        break;
      case 3:
        pool.push_back(matmul(a, b));
        break;
      case 4:
        pool.push_back(sigmoid(a) - b);
        break;
      default:
        pool.push_back(softmax(a));
        break;
    }
  }
  Node loss = reduce_sum(pool.back() * pool.back());
  for (std::size_t i = pool.size() - 3; i < pool.size() - 1; ++i)
    loss = loss + reduce_mean(pool[i]);
  for (const Node& v : t.vars) loss = loss + reduce_mean(v * v);  // every variable counts
  auto counter = t.g.variable("steps", {1});
  Node step;
  if (optimizer) {
    step = dp ? minimize(loss, t.vars, *optimizer, {}, *dp) : minimize(loss, t.vars, *optimizer);
  } else {
    const float momentum = rng() % 2 ? 0.9f : 0.0f;
    step = dp ? sgd(loss, t.vars, 0.01f, momentum, *dp) : sgd(loss, t.vars, 0.01f, momentum);
  }
  t.vars.push_back(counter);
  t.fetches = {loss, step, assign(counter, counter + 1.0f)};
  return t;
}

Graph random_op_graph(std::mt19937& rng, int n, std::vector<Node>& sinks) {
  Graph g;
  std::vector<Node> v{g.input("x"), g.input("y"),
                      g.variable("w", {4, 4}, Initializer::uniform(-1, 1, 3))};
  const Node rows = g.constant_i32({3}, {2, 0, 3});
  for (int i = 0; i < n; ++i) {
    const Node a = v[rng() % v.size()], b = v[rng() % v.size()];
    const int ax = static_cast<int>(rng() % 2);
    switch (rng() % 21) {
      case 0:
        v.push_back(a * b - tanh(a));
        break;
      case 1:
        v.push_back(sigmoid(a) + relu(b));
        break;
      case 2:
        v.push_back(softmax(a, ax));
        break;
      case 3:
        v.push_back(log_softmax(a) + abs(b));
        break;
      case 4:
        v.push_back(scale(matmul(a, b), 0.5f));
        break;
      case 5:
        v.push_back(matmul(transpose(a), b) * 0.5f);
        break;
      case 6:
        v.push_back(reshape(tanh(reshape(a, {16})), {4, 4}));
        break;
      case 7:
        v.push_back(concat({slice(a, ax, 0, 2), slice(b, ax, 2, 4)}, ax));
        break;
      case 8:
        v.push_back(maximum(a, b) + minimum(a, erf(b)));
        break;
      case 9:
        v.push_back(clip(a, -0.5f, 0.5f) + leaky_relu(a - b, 0.1f));
        break;
      case 10:
        v.push_back(reduce_sum(a, 1, true) * 0.25f + reduce_max(b, 0, true));
        break;
      case 11:
        v.push_back(reduce_mean(a, 0, true) + reduce_mean(b, 1, true));
        break;
      case 12:
        v.push_back(exp(clip(a, -2, 2)) - gelu(b));
        break;
      case 13:
        v.push_back(axpby(a, b, 0.3f, -0.7f));
        break;
      case 14:
        v.push_back(sin(a) * cos(b) + atan(a) * asinh(b) - tan(clip(b, -1, 1)));
        break;
      case 15:
        v.push_back(concat({gather(a, rows, ax), slice(b, ax, 1, 2)}, ax));
        break;
      case 16:
        v.push_back(cast(cast(a * 4.0f, DType::i32), DType::f32) * 0.25f);
        break;
      case 17:  // every second row, and every second column from the back
        v.push_back(strided_slice(concat({a, b}, ax), {ax == 0 ? 0 : 7}, {ax == 0 ? 8 : INT64_MIN},
                                  {ax}, {ax == 0 ? 2 : -2}));
        break;
      case 18:
        v.push_back(where(g.constant_i32({4}, {1, 0, 0, 3}), a, b));
        break;
      case 19: {  // a mask from comparisons of floats and of ints, and logic
        const Node ia = cast(a * 4.0f, DType::i32), ib = cast(b * 4.0f, DType::i32);
        const Node m = logical_or(logical_and(greater(a, b), less_equal(a, g.constant(0.5f))),
                                  logical_xor(equal(ia, ib), logical_not(greater_equal(ia, ib))));
        v.push_back(where(m, a, b * 0.5f) + cast(less(ia, ib), DType::f32));
        break;
      }
      default:
        v.push_back(reshape(slice(concat({a, b}, ax), ax, 1, 5), {4, 4}));
        break;
    }
  }
  for (std::size_t i = v.size(); i-- > 3 && sinks.size() < 4;)
    if (rng() % 3 == 0 || sinks.empty()) sinks.push_back(v[i]);
  return g;
}

}  // namespace testing_util
