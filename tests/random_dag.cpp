#include "random_dag.hpp"

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

Training random_training(std::mt19937& rng) {
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
  auto step = sgd(loss, t.vars, 0.01f, rng() % 2 ? 0.9f : 0.0f);
  t.vars.push_back(counter);
  t.fetches = {loss, step, assign(counter, counter + 1.0f)};
  return t;
}

}  // namespace testing_util
