// Reverse-mode automatic differentiation inside the graph, and optimizers built from it.
//
//   auto loss = reduce_mean(cross_entropy(softmax(matmul(x, W) + b), y));
//   std::vector<Node> grads = hetgraph::gradients(loss, {W, b});   // nodes of the same graph
//   Node step = hetgraph::sgd(loss, {W, b}, 0.1f);                 // W -= 0.1 * dW, b -= 0.1 * db
//   auto cg = GraphCompiler().compile(g, shapes, {loss, step});    // one run = one training step
//
// Gradients are ordinary nodes: they are compiled, planned and run like any other. The loss
// must be a scalar (one element); that is checked when the graph is compiled.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "hetgraph/graph.hpp"

namespace hetgraph {

/// d(loss)/d(w) for each w in `wrt`, in order. Throws GraphError when a w does not influence
/// the loss or a path to it goes through an op that cannot be differentiated.
std::vector<Node> gradients(Node loss, std::span<const Node> wrt);
std::vector<Node> gradients(Node loss, std::initializer_list<Node> wrt);

/// One step of stochastic gradient descent as a group of assigns: v <- v - lr * dv, or with
/// momentum m: u <- m * u + dv, v <- v - lr * u (u a zero-initialised variable named
/// "<v>/velocity"). Variables stay in the compiled graph's memory between runs.
Node sgd(Node loss, std::span<const Node> variables, float learning_rate, float momentum = 0.0f);
Node sgd(Node loss, std::initializer_list<Node> variables, float learning_rate,
         float momentum = 0.0f);

}  // namespace hetgraph
