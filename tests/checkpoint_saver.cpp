// SPDX-License-Identifier: Apache-2.0
// Test helper for test_checkpoint's crash test: saves checkpoints of a graph with a large
// variable over and over, each with every value set to the generation number k, and says
// "saving k" before and "saved k" after each save on stdout. The test kills it mid-save.
//   checkpoint_saver PATH ELEMENTS
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hetgraph/hetgraph.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: checkpoint_saver PATH ELEMENTS\n");
    return 2;
  }
  using namespace hetgraph;
  const std::string path = argv[1];
  const std::int64_t n = std::atoll(argv[2]);
  Graph g;
  auto W = g.variable("W", {n});
  auto b = g.variable("b", {3});
  auto y = reduce_sum(W) + reduce_sum(b);
  CompiledGraph cg = GraphCompiler(Platform::cpu({.threads = 1})).compile(g, {}, {y});
  std::vector<float> w(static_cast<std::size_t>(n)), bv(3);
  for (int k = 1;; ++k) {
    std::fill(w.begin(), w.end(), static_cast<float>(k));
    std::fill(bv.begin(), bv.end(), static_cast<float>(k));
    cg.write(W, w);
    cg.write(b, bv);
    std::printf("saving %d\n", k);
    std::fflush(stdout);
    cg.save(path);
    std::printf("saved %d\n", k);
    std::fflush(stdout);
  }
}
