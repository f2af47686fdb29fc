// SPDX-License-Identifier: Apache-2.0
// hetgraph: tensor computation graphs built in C++, compiled for a CPU or OpenCL platform.
//
//   #include <hetgraph/hetgraph.hpp>
//   hetgraph::Graph g;
//   auto x = g.input("x");
//   auto y = hetgraph::relu(x * 2.0f);
//   auto cg = hetgraph::GraphCompiler().compile(g, {{"x", {4}}}, {y});
//   cg.run({{"x", std::vector<float>{-1, 0, 1, 2}}});
//   auto v = cg.read(y);   // {0, 0, 2, 4}
#pragma once

#include "hetgraph/autodiff.hpp"
#include "hetgraph/compiler.hpp"
#include "hetgraph/data.hpp"
#include "hetgraph/distributed.hpp"
#include "hetgraph/dynamic.hpp"
#include "hetgraph/error.hpp"
#include "hetgraph/graph.hpp"
#include "hetgraph/layers.hpp"
#include "hetgraph/pipeline.hpp"
#include "hetgraph/tensor.hpp"
#include "hetgraph/timer.hpp"
