// SPDX-License-Identifier: Apache-2.0
// The beginning of the program every documentation fragment is the middle of: the names the
// fragments of README.md, docs/ and the public headers' examples use without declaring them
// (a graph `g` with `x`, `W`, `b`, `loss`, `step`; a compiled graph `cg`; `feeds`, `shapes`,
// ...). scripts/doc_snippets.py makes each fragment a function in namespace snippet_context,
// after this header, and the build compiles and links them: a fragment that calls what does not
// exist, or calls it wrongly, fails the build. Fragments are never run, so the objects whose
// construction needs a run (a compiled graph, a communicator) are references nothing binds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <hetgraph/cli.hpp>
#include <hetgraph/distributed.hpp>
#include <hetgraph/dynamic.hpp>
#include <hetgraph/hetgraph.hpp>
#include <hetgraph/layers.hpp>
#include <hetgraph/onnx.hpp>
#include <hetgraph/pipeline.hpp>
#include <hetgraph/timer.hpp>
#include <hetgraph/tool.hpp>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace snippet_context {
using namespace hetgraph;

template <class T>
T& not_built() {
  throw std::logic_error("snippet context: documentation fragments are compiled, never run");
}

inline Graph g;
inline Node x = g.input("x");
inline Node y = g.input("y", DType::i32);
inline Node W = g.variable("W", {784, 10});
inline Node b = g.variable("b", {10});
inline Node w = g.variable("w", {16, 3, 3, 3});
inline Node probs = softmax(matmul(x, W) + b);
inline Node loss = reduce_mean(cross_entropy(probs, y));
inline Node step = sgd(loss, {W, b}, 0.1f);
inline std::vector<Node> params = {W, b};
inline std::vector<Node> fetches = {loss, step};
inline InputShapes shapes = {{"x", {500, 784}}, {"y", {500}}};
inline std::vector<FeedItem> feeds;
inline CompiledGraph& cg = not_built<CompiledGraph>();
inline CompiledGraph& trained = not_built<CompiledGraph>();
inline CompiledGraph& resumed = not_built<CompiledGraph>();
inline distributed::Communicator& comm = not_built<distributed::Communicator>();
inline data::Mnist& mnist = not_built<data::Mnist>();

inline std::vector<float> xs, images, image, batch17, batch64;
inline std::vector<std::int32_t> ids, labels;
inline std::string dir = "/usr/share/datasets/fashion-mnist";
inline int epochs = 10, steps = 100, r = 0, n = 1;

struct Args {
  int epochs = 10;
  double lr = 0.1;
};
inline int train(const Args&) {
  return 0;
}
inline void train() {}
inline void fill_batch(std::span<float>) {}
inline void prepare_next_batch() {}
}  // namespace snippet_context
