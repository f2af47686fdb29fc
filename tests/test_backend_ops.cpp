// SPDX-License-Identifier: Apache-2.0
// Every op kind on every platform (after ggml's test-backend-ops). Each row builds a small graph
// in which its ops appear; the test runs it on every platform present, checks that the compiled
// plan really holds them, and compares with a float64 reference: the reference interpreter's
// value for forward rows, finite differences of it for gradient rows (internal gradient ops),
// or the row's own formula for elementwise ops the interpreter does not know.
//
// Coverage: the rows name every OpKind, and a platform may lack an op only where it says so at
// compile time (the capability query) and kExpectedMissing lists it. Adding an op means adding
// its row here (CONTRIBUTING.md).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <utility>

#include "common/executable.hpp"
#include "hetgraph/autodiff.hpp"
#include "hetgraph/distributed.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using detail::OpKind;
using testing_util::In;
using testing_util::PlatformCase;

namespace {

struct IntIn {
  std::string name;
  Shape shape;
  std::vector<std::int32_t> values;
};

using Builder = std::function<Node(Graph&, const std::vector<Node>& f, const std::vector<Node>& i)>;

struct Row {
  std::vector<OpKind> ops;  // the ops the compiled row must hold (where the platform has them)
  std::string what;
  std::vector<In> inputs;
  std::vector<IntIn> ints;
  Builder build;
  /// Empty: compare the built node's value. Else: gradients of sum(y * r) with respect to
  /// these float inputs (by index), against finite differences.
  std::vector<int> wrt{};
  /// Elementwise rows: y = formula(x) of input 0, in place of the reference interpreter.
  std::function<double(double)> formula{};
  double rtol = 1e-4, atol = 1e-5;
  /// Binary elementwise rows: y = formula(a, b) of inputs 0 and 1, broadcast.
  std::function<double(double, double)> binary_formula{};
};

// Platforms without a kernel for an op, by design (and saying so at compile time): OpenCL runs
// the unfused graph instead of the CPU's fused products and LSTM and GRU chains (a chain's steps in
// one kernel needs its threads to meet between steps: one work-group, a fraction of a device).
// Parallel groups pay where kernels run on host threads: the out-of-order queue already runs
// independent nodes side by side.
const std::set<std::pair<std::string, OpKind>> kExpectedMissing = {
    {"OpenCL", OpKind::FusedMatMul},
    {"OpenCL", OpKind::ParallelGroup},
    {"OpenCL", OpKind::LstmSequence},
    {"OpenCL", OpKind::GruSequence}};

using testing_util::away_from_zero;
using testing_util::distinct;
using testing_util::one_hot;
using testing_util::uniform;

using F = std::vector<Node>;
Builder unary(Node (*f)(Node)) {
  return [f](Graph&, const F& x, const F&) { return f(x[0]); };
}
Builder binary(Node (*f)(Node, Node)) {
  return [f](Graph&, const F& x, const F&) { return f(x[0], x[1]); };
}

// ---- ranks 5 to 8 (Shape::kMaxRank): broadcasts whose dims alternate (nothing collapses),
// transposes that do and do not merge into fewer dims, reductions, slices and gathers.
void high_rank_rows(std::vector<Row>& r) {
  const In h6a = uniform("a", {2, 1, 3, 1, 2, 1}, -1, 1, 90);
  const In h6b = uniform("b", {1, 2, 1, 3, 1, 2}, -1, 1, 91);
  const In h6 = uniform("x", {2, 3, 2, 2, 3, 2}, -1, 1, 92);
  const In h5 = uniform("x", {3, 2, 4, 2, 3}, -1, 1, 93);
  const In h7 = uniform("x", {2, 1, 2, 3, 1, 2, 2}, -1, 1, 94);
  const In h8 = uniform("x", {2, 1, 3, 2, 2, 1, 2, 3}, -1, 1, 95);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const auto t6 = [](Graph&, const F& x, const F&) { return transpose(x[0], {5, 3, 1, 4, 2, 0}); };
  const auto s5 = [](Graph&, const F& x, const F&) {
    return strided_slice(x[0], {-1, 0, 1}, {kMin, kMax, kMax}, {0, 3, 4}, {-1, 2, 1});
  };
  const auto sum7 = [](Graph&, const F& x, const F&) { return reduce_sum(x[0], 3, true); };
  r.push_back({{OpKind::Add}, "rank 6 add, alternating broadcasts", {h6a, h6b}, {}, binary(add)});
  r.push_back({{OpKind::Mul},
               "rank 8 mul",
               {h8, uniform("y", {2, 1, 3, 2, 2, 1, 2, 3}, -1, 1, 96)},
               {},
               binary(mul)});
  r.push_back({{OpKind::Where},
               "rank 5 where",
               {uniform("p", {1, 2, 1, 2, 1}, -1, 1, 97), uniform("q", {2, 1, 2, 1, 3}, -1, 1, 98)},
               {{"c", {2, 1, 1, 1, 3}, {1, 0, 1, 0, 0, 1}}},
               [](Graph&, const F& x, const F& i) { return where(i[0], x[0], x[1]); }});
  r.push_back({{OpKind::Transpose}, "rank 6 transpose", {h6}, {}, t6});
  r.push_back({{OpKind::Transpose},
               "rank 8 transpose that merges to rank 3",
               {h8},
               {},
               [](Graph&, const F& x, const F&) {
                 return transpose(x[0], {0, 1, 5, 6, 7, 2, 3, 4});
               }});
  r.push_back({{OpKind::ReduceSum}, "rank 7 reduce_sum", {h7}, {}, sum7});
  r.push_back(
      {{OpKind::ReduceMax}, "rank 8 reduce_max", {h8}, {}, [](Graph&, const F& x, const F&) {
         return reduce_max(x[0], 6);
       }});
  r.push_back({{OpKind::StridedSlice}, "rank 5 strided_slice", {h5}, {}, s5});
  r.push_back({{OpKind::Concat},
               "rank 5 concat",
               {h5, uniform("c", {3, 2, 1, 2, 3}, -1, 1, 99)},
               {},
               [](Graph&, const F& x, const F&) {
                 return concat({x[0], x[1]}, 2);
               }});
  r.push_back({{OpKind::Softmax}, "rank 5 softmax", {h5}, {}, [](Graph&, const F& x, const F&) {
                 return softmax(x[0], 2);
               }});
  r.push_back({{OpKind::Reshape}, "rank 8 reshape", {h8}, {}, [](Graph&, const F& x, const F&) {
                 return exp(reshape(x[0], {12, -1}));
               }});
  r.push_back({{OpKind::Gather},
               "gather to rank 5",
               {uniform("x", {2, 3, 4}, -1, 1, 100)},
               {{"ids", {2, 2, 2}, {0, 2, -1, 1, 1, 0, 2, -3}}},
               [](Graph&, const F& x, const F& i) { return gather(x[0], i[0], 1); }});
  r.push_back({{OpKind::GatherElements},
               "rank 5 gather_elements, smaller indices",
               {h5},
               {{"i", {2, 2, 3, 1, 2}, {3,  0, 1, 2,  2, 0, 1, 3, 3, 0, 0, 1,
                                        -1, 2, 0, -4, 1, 1, 2, 3, 0, 0, 3, 1}}},
               [](Graph&, const F& x, const F& i) { return gather_elements(x[0], i[0], 2); }});
  const auto grad = [&](std::vector<OpKind> ops, std::string what, std::vector<In> in, Builder b,
                        std::vector<int> wrt) {
    r.push_back({std::move(ops),
                 what + "'",
                 std::move(in),
                 {},
                 std::move(b),
                 std::move(wrt),
                 {},
                 1e-3,
                 1e-4});
  };
  grad({OpKind::SumTo}, "rank 6 broadcast add", {h6a, h6b}, binary(add), {0, 1});
  grad({OpKind::Transpose}, "rank 6 transpose", {h6}, t6, {0});
  grad({OpKind::StridedSliceGrad}, "rank 5 strided_slice", {h5}, s5, {0});
  grad({OpKind::Expand}, "rank 7 reduce_sum", {h7}, sum7, {0});
}

std::vector<Row> rows() {
  std::vector<Row> r;
  const In a = uniform("a", {3, 4}, -1, 1, 1), b = uniform("b", {4}, -1, 1, 2);
  const In img = uniform("x", {1, 2, 5, 5}, -1, 1, 3), img4 = distinct("x", {1, 2, 4, 4}, 4);
  // ---- forward rows: the reference interpreter's value
  r.push_back({{OpKind::Add, OpKind::Input}, "add", {a, b}, {}, binary(add)});
  r.push_back({{OpKind::Sub}, "sub", {a, b}, {}, binary(sub)});
  r.push_back({{OpKind::Mul}, "mul", {a, b}, {}, binary(mul)});
  r.push_back({{OpKind::Div}, "div", {a, away_from_zero("b", {4}, 0.5f, 2, 5)}, {}, binary(div)});
  r.push_back({{OpKind::Axpby},
               "axpby",
               {a, uniform("c", {3, 4}, -1, 1, 6)},
               {},
               [](Graph&, const F& x, const F&) { return axpby(x[0], x[1], 0.5f, -2.0f); }});
  r.push_back({{OpKind::Neg}, "neg", {a}, {}, unary(neg)});
  r.push_back({{OpKind::Scale}, "scale", {a}, {}, [](Graph&, const F& x, const F&) {
                 return scale(x[0], -1.5f);
               }});
  r.push_back({{OpKind::Constant}, "constant", {a}, {}, [](Graph&, const F& x, const F&) {
                 return x[0] + 2.0f;
               }});
  r.push_back({{OpKind::Exp}, "exp", {a}, {}, unary(exp)});
  r.push_back({{OpKind::Log}, "log", {uniform("a", {3, 4}, 0.5f, 3, 7)}, {}, unary(log)});
  r.push_back({{OpKind::Sqrt}, "sqrt", {uniform("a", {3, 4}, 0.5f, 3, 8)}, {}, unary(sqrt)});
  r.push_back({{OpKind::Floor}, "floor", {uniform("a", {3, 4}, -3, 3, 9)}, {}, unary(floor)});
  r.push_back(
      {{OpKind::Relu}, "relu", {away_from_zero("a", {3, 4}, 0.1f, 1, 10)}, {}, unary(relu)});
  r.push_back({{OpKind::Sigmoid}, "sigmoid", {a}, {}, unary(sigmoid)});
  r.push_back({{OpKind::Tanh}, "tanh", {a}, {}, unary(tanh)});
  r.push_back({{OpKind::MatMul},
               "matmul",
               {a, uniform("b", {4, 5}, -1, 1, 11)},
               {},
               [](Graph&, const F& x, const F&) { return matmul(x[0], x[1]); }});
  r.push_back({{OpKind::MatMul},
               "batched matmul^T",
               {uniform("a", {2, 3, 4}, -1, 1, 12), uniform("b", {5, 4}, -1, 1, 13)},
               {},
               [](Graph&, const F& x, const F&) { return matmul(x[0], x[1], false, true); }});
  // With fusion on (the default), the exp folds into the product where the platform can.
  r.push_back({{OpKind::FusedMatMul},
               "exp(matmul)",
               {a, uniform("b", {4, 5}, -1, 1, 14)},
               {},
               [](Graph&, const F& x, const F&) { return exp(matmul(x[0], x[1])); }});
  r.push_back({{OpKind::ReduceSum}, "reduce_sum", {a}, {}, [](Graph&, const F& x, const F&) {
                 return reduce_sum(x[0], 1);
               }});
  r.push_back({{OpKind::ReduceMean}, "reduce_mean", {a}, {}, [](Graph&, const F& x, const F&) {
                 return reduce_mean(x[0], 0, true);
               }});
  r.push_back({{OpKind::ReduceMax}, "reduce_max", {a}, {}, [](Graph&, const F& x, const F&) {
                 return reduce_max(x[0], -1);
               }});
  // Zeros, negatives and an outer axis (lines as columns); all axes is one long chain.
  r.push_back({{OpKind::ReduceProd},
               "reduce_prod",
               {{"p", {2, 3, 4}, {1.5f, -2, 0.5f, 3,     -1, 0, 2,  1.25f, 4, -0.5f, 1,  2,
                                  -3,   1,  2,    0.75f, 1,  1, -2, 0.5f,  2, 1.5f,  -1, 3}}},
               {},
               [](Graph&, const F& x, const F&) { return reduce_prod(x[0], 1); }});
  r.push_back(
      {{OpKind::ReduceProd}, "reduce_prod, all axes", {a}, {}, [](Graph&, const F& x, const F&) {
         return reduce_prod(x[0], kAllAxes, true);
       }});
  // Every mode, along the last axis and an outer one; ints wrap around.
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      const std::string mode =
          std::string(exclusive ? " exclusive" : "") + (reverse ? " reverse" : "");
      r.push_back(
          {{OpKind::CumSum},
           "cumsum" + mode,
           {uniform("c", {2, 3, 4}, -1, 1, 71)},
           {},
           [=](Graph&, const F& x, const F&) { return cumsum(x[0], 1, exclusive, reverse); }});
      r.push_back(
          {{OpKind::CumSum},
           "cumsum int32" + mode,
           {},
           {{"i", {2, 3}, {5, -7, 2147483647, 1, 3, -2147483647 - 1}}},
           [=](Graph&, const F&, const F& i) { return cumsum(i[0], -1, exclusive, reverse); }});
    }
  }
  r.push_back({{OpKind::Softmax}, "softmax", {a}, {}, [](Graph&, const F& x, const F&) {
                 return softmax(x[0]);
               }});
  r.push_back({{OpKind::LogSoftmax}, "log_softmax", {a}, {}, [](Graph&, const F& x, const F&) {
                 return log_softmax(x[0], 0);
               }});
  r.push_back({{OpKind::CrossEntropy},
               "cross_entropy",
               {a, one_hot("y", {3, 4}, 1)},
               {},
               [](Graph&, const F& x, const F&) { return cross_entropy(softmax(x[0]), x[1]); }});
  r.push_back({{OpKind::CrossEntropy},
               "cross_entropy i32",
               {a},
               {{"ids", {3}, {3, 0, 2}}},
               [](Graph&, const F& x, const F& i) { return cross_entropy(softmax(x[0]), i[0]); }});
  r.push_back({{OpKind::Slice}, "slice", {a}, {}, [](Graph&, const F& x, const F&) {
                 return slice(x[0], 1, 1, 3);
               }});
  r.push_back({{OpKind::Concat},
               "concat",
               {a, uniform("c", {2, 4}, -1, 1, 15)},
               {},
               [](Graph&, const F& x, const F&) {
                 return concat({x[0], x[1]}, 0);
               }});
  r.push_back({{OpKind::Transpose},
               "transpose",
               {uniform("a", {2, 3, 4}, -1, 1, 16)},
               {},
               [](Graph&, const F& x, const F&) {
                 return transpose(x[0], {2, 0, 1});
               }});
  r.push_back({{OpKind::Reshape}, "reshape", {a}, {}, [](Graph&, const F& x, const F&) {
                 return exp(reshape(x[0], {2, -1}));
               }});
  r.push_back({{OpKind::Conv2d},
               "conv2d",
               {img, uniform("w", {3, 2, 3, 3}, -1, 1, 17), uniform("c", {3}, -1, 1, 18)},
               {},
               [](Graph&, const F& x, const F&) {
                 return conv2d(x[0], x[1], x[2], {.stride = {2, 1}, .padding = {1, 1}});
               }});
  // With fusion on (the default), the bias, residual and relu run inside the convolution
  // where the platform can (fused_conv2d).
  r.push_back({{OpKind::FusedConv2d},
               "relu(conv2d + b + residual)",
               {img, uniform("w", {2, 2, 3, 3}, -1, 1, 19), uniform("c", {2}, -1, 1, 21)},
               {},
               [](Graph&, const F& x, const F&) {
                 return relu(conv2d(x[0], x[1], x[2], {.padding = {1, 1}}) + x[0]);
               }});
  // LayerNorm as ONNX exports before opset 17 write it: one layer_norm node (fuse_layer_norm).
  r.push_back({{OpKind::LayerNorm},
               "layer norm, decomposed",
               {uniform("x", {3, 2, 20}, -3, 3, 22), uniform("gamma", {20}, -1, 1, 23),
                uniform("beta", {20}, -1, 1, 24)},
               {},
               [](Graph& g, const F& x, const F&) {
                 Node d = sub(x[0], reduce_mean(x[0], -1, true));
                 Node var = reduce_mean(pow(d, g.constant(2.0f)), -1, true);
                 return add(mul(div(d, sqrt(add(var, g.constant(1e-5f)))), x[1]), x[2]);
               }});
  // The attention block with a scale and a broadcast mask: one attention node (fuse_attention).
  r.push_back({{OpKind::Attention},
               "attention, decomposed",
               {uniform("q", {3, 5, 8}, -2, 2, 30), uniform("kt", {3, 8, 6}, -2, 2, 31),
                uniform("v", {3, 6, 4}, -1, 1, 32), uniform("mask", {5, 6}, -3, 0, 33)},
               {},
               [](Graph& g, const F& x, const F&) {
                 Node s = add(div(matmul(x[0], x[1]), g.constant(2.828427f)), x[3]);
                 return matmul(softmax(s, -1), x[2]);
               }});
  // Two LSTM steps as ONNX's LSTM unrolls them (gates i, o, f, c), the first without a
  // previous cell state: lstm_cell and lstm_hidden nodes (fuse_lstm_cells).
  r.push_back({{OpKind::LstmCell, OpKind::LstmHidden},
               "lstm steps, decomposed",
               {uniform("g0", {2, 20}, -3, 3, 25), uniform("g1", {2, 20}, -3, 3, 26)},
               {},
               [](Graph&, const F& x, const F&) {
                 auto q = [](Node g, std::int64_t k) { return slice(g, 1, 5 * k, 5 * (k + 1)); };
                 Node c0 = mul(sigmoid(q(x[0], 0)), tanh(q(x[0], 3)));
                 Node h0 = mul(sigmoid(q(x[0], 1)), tanh(c0));
                 Node c1 =
                     add(mul(sigmoid(q(x[1], 2)), c0), mul(sigmoid(q(x[1], 0)), tanh(q(x[1], 3))));
                 return add(mul(sigmoid(q(x[1], 1)), tanh(c1)), h0);
               }});
  // Three LSTM steps as ONNX's LSTM unrolls them with initial states, each adding its rows of
  // one input projection: one lstm_sequence node (fuse_recurrent_sequences; the CPU's).
  r.push_back({{OpKind::LstmSequence},
               "lstm chain, decomposed",
               {uniform("p", {6, 64}, -2, 2, 27), uniform("r", {64, 16}, -0.3f, 0.3f, 28),
                uniform("h0", {2, 16}, -1, 1, 29), uniform("c0", {2, 16}, -1, 1, 34)},
               {},
               [](Graph&, const F& x, const F&) {
                 Node h = x[2], c = x[3];
                 std::vector<Node> out;
                 for (std::int64_t t = 0; t < 3; ++t) {
                   Node g = add(slice(x[0], 0, 2 * t, 2 * t + 2), matmul(h, x[1], false, true));
                   auto q = [&](std::int64_t k) { return slice(g, 1, 16 * k, 16 * (k + 1)); };
                   c = add(mul(sigmoid(q(2)), c), mul(sigmoid(q(0)), tanh(q(3))));
                   h = mul(sigmoid(q(1)), tanh(c));
                   out.push_back(h);
                 }
                 out.push_back(c);
                 return concat(std::span<const Node>(out), 0);
               }});
  // Three GRU steps with linear_before_reset as ONNX's GRU unrolls them, a recurrent bias, the
  // input projection's rows read backwards (a reverse direction): one gru_sequence node.
  r.push_back({{OpKind::GruSequence},
               "gru chain, decomposed",
               {uniform("p", {6, 48}, -2, 2, 35), uniform("r", {48, 16}, -0.3f, 0.3f, 36),
                uniform("h0", {2, 16}, -1, 1, 37), uniform("rb", {48}, -1, 1, 38)},
               {},
               [](Graph& gr, const F& x, const F&) {
                 Node h = x[2];
                 std::vector<Node> out;
                 for (std::int64_t t = 2; t >= 0; --t) {
                   Node xp = slice(x[0], 0, 2 * t, 2 * t + 2);
                   Node rec = add(matmul(h, x[1], false, true), x[3]);
                   auto q = [](Node v, std::int64_t a, std::int64_t b) {
                     return slice(v, 1, 16 * a, 16 * b);
                   };
                   Node zr = add(q(xp, 0, 2), q(rec, 0, 2));
                   Node z = sigmoid(q(zr, 0, 1)), rg = sigmoid(q(zr, 1, 2));
                   Node n = tanh(add(q(xp, 2, 3), mul(rg, q(rec, 2, 3))));
                   h = add(mul(sub(gr.constant(1.0f), z), n), mul(z, h));
                   out.push_back(h);
                 }
                 return concat(std::span<const Node>(out), 0);
               }});
  // A GRU step with linear_before_reset as ONNX's GRU unrolls it: gru_hidden (fuse_gru_cells).
  r.push_back({{OpKind::GruHidden},
               "gru step, decomposed",
               {uniform("x", {2, 15}, -3, 3, 27), uniform("rc", {2, 15}, -3, 3, 28),
                uniform("h", {2, 5}, -1, 1, 29)},
               {},
               [](Graph& g, const F& x, const F&) {
                 Node zr = add(slice(x[0], 1, 0, 10), slice(x[1], 1, 0, 10));
                 Node z = sigmoid(slice(zr, 1, 0, 5)), r = sigmoid(slice(zr, 1, 5, 10));
                 Node n = tanh(add(slice(x[0], 1, 10, 15), mul(r, slice(x[1], 1, 10, 15))));
                 return add(mul(sub(g.constant(1.0f), z), n), mul(z, x[2]));
               }});
  // An inference BatchNormalization and relu as the importer writes them where it cannot fold
  // the normalisation into a convolution: channel_affine (fuse_channel_affine).
  r.push_back({{OpKind::ChannelAffine},
               "batch norm and relu, decomposed",
               {uniform("x", {2, 3, 4, 5}, -2, 2, 30), uniform("s", {3, 1, 1}, -1, 1, 31),
                uniform("t", {3, 1, 1}, -1, 1, 32)},
               {},
               [](Graph&, const F& x, const F&) { return relu(add(mul(x[0], x[1]), x[2])); }});
  r.push_back({{OpKind::MaxPool2d}, "max_pool2d", {img4}, {}, [](Graph&, const F& x, const F&) {
                 return max_pool2d(x[0]);
               }});
  r.push_back({{OpKind::AvgPool2d}, "avg_pool2d", {img4}, {}, [](Graph&, const F& x, const F&) {
                 return avg_pool2d(x[0], {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}});
               }});
  r.push_back({{OpKind::Embedding},
               "embedding",
               {uniform("t", {6, 3}, -1, 1, 19)},
               {{"ids", {2, 2}, {5, 0, 3, 5}}},
               [](Graph&, const F& x, const F& i) { return embedding(x[0], i[0]); }});
  // Two lookups and a value concatenated along the last axis: one embedding_concat node.
  r.push_back({{OpKind::EmbeddingConcat},
               "embedding_concat",
               {uniform("t", {6, 3}, -1, 1, 19), uniform("x", {2, 2, 4}, -1, 1, 20),
                uniform("u", {4, 2}, -1, 1, 21)},
               {{"ids", {2, 2}, {5, 0, 3, 5}}, {"jds", {2, 2}, {1, 3, 3, 0}}},
               [](Graph&, const F& x, const F& i) {
                 return concat({embedding(x[0], i[0]), x[1], embedding(x[2], i[1])}, -1);
               }});
  // Dropout of 48 elements (about 12 dropped), its mask keyed by a step the graph computes;
  // its gradient is dropout again, checked by differences (the mask is fixed by the step).
  const auto drop = [](Graph& g, const F& x, const F&) {
    return dropout(x[0], g.constant(3.0f) + 4.0f, 0.25f, 11);
  };
  r.push_back({{OpKind::Dropout}, "dropout", {uniform("x", {4, 12}, -1, 1, 22)}, {}, drop});
  r.push_back({{OpKind::Dropout}, "dropout'", {uniform("x", {4, 12}, -1, 1, 22)}, {}, drop, {0}});
  // ---- the ONNX elementwise set
  const In wide = away_from_zero("a", {3, 4}, 0.2f, 2, 27);
  r.push_back({{OpKind::Abs}, "abs", {wide}, {}, unary(abs)});
  r.push_back({{OpKind::Erf}, "erf", {uniform("a", {4, 5}, -4.5f, 4.5f, 28)}, {}, unary(erf)});
  r.push_back({{OpKind::Sin}, "sin", {uniform("a", {4, 5}, -7, 7, 29)}, {}, unary(sin)});
  r.push_back({{OpKind::Cos}, "cos", {uniform("a", {4, 5}, -7, 7, 30)}, {}, unary(cos)});
  r.push_back({{OpKind::Tan}, "tan", {uniform("a", {4, 5}, -1.4f, 1.4f, 31)}, {}, unary(tan)});
  const In unit = uniform("a", {4, 5}, -0.95f, 0.95f, 32);
  r.push_back({{OpKind::Asin}, "asin", {unit}, {}, unary(asin)});
  r.push_back({{OpKind::Acos}, "acos", {unit}, {}, unary(acos)});
  r.push_back({{OpKind::Atanh}, "atanh", {unit}, {}, unary(atanh)});
  r.push_back({{OpKind::Atan}, "atan", {uniform("a", {4, 5}, -20, 20, 33)}, {}, unary(atan)});
  r.push_back({{OpKind::Sinh}, "sinh", {uniform("a", {4, 5}, -5, 5, 34)}, {}, unary(sinh)});
  r.push_back({{OpKind::Cosh}, "cosh", {uniform("a", {4, 5}, -5, 5, 35)}, {}, unary(cosh)});
  r.push_back({{OpKind::Asinh}, "asinh", {uniform("a", {4, 5}, -30, 30, 36)}, {}, unary(asinh)});
  r.push_back({{OpKind::Acosh}, "acosh", {uniform("a", {4, 5}, 1, 30, 37)}, {}, unary(acosh)});
  // Halves go to the even neighbour; 2^23 + 1 and beyond are integers already.
  r.push_back({{OpKind::Round},
               "round",
               {In{"a",
                   {3, 4},
                   {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.7f, -0.2f, -0.0f, 8388609.0f, -1e30f,
                    2.49999f}}},
               {},
               unary(round)});
  // Ties to even (1 + 2^-11, 1 + 3 * 2^-11; 2^-25 and 3 * 2^-25 in float16's subnormals), the
  // largest float16 and the overflow at 65520, float32 subnormals, signs of zero.
  const In narrow{
      "a",
      {4, 4},
      {0.1f, 1.00048828125f, 1.00146484375f, 2.98023224e-8f, 8.94069672e-8f, 65504.0f, 65519.0f,
       65520.0f, -7e4f, 1e-8f, -3.1e-5f, 1e-40f, -0.0f, 123.456f, -3.3e38f, 6.1e-5f}};
  // Exact results: a tolerance below every rounding step the inputs meet (2^-24 for float16's
  // subnormals), so rounding the wrong way fails.
  r.push_back(
      {{OpKind::ToFloat16}, "to_float16", {narrow}, {}, unary(to_float16), {}, {}, 0, 1e-9});
  r.push_back(
      {{OpKind::ToBfloat16}, "to_bfloat16", {narrow}, {}, unary(to_bfloat16), {}, {}, 0, 1e-45});
  r.push_back({{OpKind::LeakyRelu}, "leaky_relu", {wide}, {}, [](Graph&, const F& x, const F&) {
                 return leaky_relu(x[0], 0.1f);
               }});
  r.push_back({{OpKind::Clip}, "clip", {wide}, {}, [](Graph&, const F& x, const F&) {
                 return clip(x[0], -1.0f, 0.5f);
               }});
  r.push_back({{OpKind::Clip}, "clip lo > hi", {wide}, {}, [](Graph&, const F& x, const F&) {
                 return clip(x[0], 1.0f, -1.0f);
               }});
  const In pos = uniform("a", {3, 4}, 0.5f, 2, 29);
  r.push_back({{OpKind::Pow}, "pow", {pos, uniform("b", {4}, -2, 2, 30)}, {}, binary(pow)});
  for (const float e : {2.0f, 1.0f, -1.0f, 3.0f, 1.5f}) {
    r.push_back({{OpKind::Pow},
                 "pow scalar " + std::to_string(e),
                 {wide},
                 {},
                 [e](Graph& g, const F& x, const F&) { return pow(x[0], g.constant(e)); }});
  }
  // Distinct values on two interleaved grids: no ties between a and b either.
  const In da = distinct("a", {3, 4}, 31);
  In db = distinct("b", {4}, 32);
  for (float& v : db.values) v += 0.025f;
  r.push_back({{OpKind::Maximum}, "maximum", {da, db}, {}, binary(maximum)});
  r.push_back({{OpKind::Minimum}, "minimum", {db, da}, {}, binary(minimum)});
  // int32 arithmetic (no wrap here: the reference computes in double; ArithmeticWraps below).
  const IntIn aa{"m", {2, 3}, {16777217, -4, 0, 46340, -46341, 7}}, ab{"n", {3}, {1, -3, 46340}};
  const std::vector<std::pair<OpKind, Node (*)(Node, Node)>> arithmetic = {
      {OpKind::Add, add}, {OpKind::Sub, sub}, {OpKind::Mul, mul}};
  for (const auto& [kind, f] : arithmetic) {
    r.push_back({{kind},
                 std::string(detail::op_name(kind)) + " int32",
                 {},
                 {aa, ab},
                 [f](Graph&, const F&, const F& i) { return f(i[0], i[1]); }});
  }
  // Ints beyond float's 2^24, broadcast both ways.
  const IntIn ma{"m", {2, 1}, {16777217, -4}}, mb{"n", {3}, {16777216, -4, 2147483647}};
  r.push_back({{OpKind::Maximum}, "maximum int32", {}, {ma, mb}, [](Graph&, const F&, const F& i) {
                 return maximum(i[0], i[1]);
               }});
  r.push_back({{OpKind::Minimum}, "minimum int32", {}, {mb, ma}, [](Graph&, const F&, const F& i) {
                 return minimum(i[0], i[1]);
               }});
  // Remainders of every sign combination; int divisors of 0 and -1 (INT32_MIN % -1 would trap)
  // give 0; a float divisor of 0 gives NaN (here only in the float rows' reference).
  const In ra{"a", {2, 4}, {7.5f, -7.5f, 7.5f, -7.5f, 6.0f, -0.25f, 1e6f, 3.0f}};
  const In rb{"b", {4}, {2.0f, 2.0f, -2.0f, -2.0f}};
  r.push_back({{OpKind::Mod}, "mod", {ra, rb}, {}, binary(mod)});
  r.push_back({{OpKind::FMod}, "fmod", {rb, ra}, {}, [](Graph&, const F& x, const F&) {
                 return fmod(x[0], x[1]);
               }});
  const IntIn na{"m", {2, 4}, {7, -7, 7, -7, -2147483647 - 1, 5, 16777217, -16777217}};
  const IntIn nb{"n", {2, 4}, {3, 3, -3, -3, -1, 0, 2, 3}};
  r.push_back({{OpKind::Mod}, "mod int32", {}, {na, nb}, [](Graph&, const F&, const F& i) {
                 return mod(i[0], i[1]);
               }});
  r.push_back({{OpKind::FMod}, "fmod int32", {}, {na, nb}, [](Graph&, const F&, const F& i) {
                 return fmod(i[0], i[1]);
               }});
  r.push_back({{OpKind::Where},
               "where",
               {a, uniform("b", {3, 1}, -1, 1, 33)},
               {{"c", {4}, {1, 0, 0, -3}}},
               [](Graph&, const F& x, const F& i) { return where(i[0], x[0], x[1]); }});
  r.push_back(
      {{OpKind::Where},
       "where int32",
       {},
       {{"c", {2, 1}, {0, 7}}, {"p", {3}, {1, 2, 3}}, {"q", {2, 3}, {-1, -2, -3, -4, -5, -6}}},
       [](Graph&, const F&, const F& i) { return where(i[0], i[1], i[2]); }});
  const float inf = std::numeric_limits<float>::infinity();
  r.push_back(
      {{OpKind::Cast},
       "cast to int32",
       {{"a", {3, 4}, {NAN, inf, -inf, 3e9f, -3e9f, 2.7f, -2.7f, 0.5f, -0.5f, 1e9f, 7, -7}}},
       {},
       [](Graph&, const F& x, const F&) { return cast(x[0], DType::i32); }});
  r.push_back({{OpKind::Cast},
               "cast to float",
               {},
               {{"i", {4}, {16777217, -3, 0, 2147483647}}},
               [](Graph&, const F&, const F& i) { return cast(i[0], DType::f32); }});
  r.push_back({{OpKind::Cast}, "cast float to float", {a}, {}, [](Graph&, const F& x, const F&) {
                 return cast(x[0], DType::f32);
               }});
  // Comparisons: ties, -0 against 0, infinities and NaN (false against everything) in a
  // broadcast; ints that float cannot tell apart (2^24 and 2^24 + 1).
  const In ca{"a", {2, 4}, {1, -0.0f, NAN, inf, -inf, 2, 0.5f, -3}};
  const In cb{"b", {4}, {1, 0, 1, inf}};
  const IntIn ia{"i", {2, 3}, {16777216, 16777217, -5, 0, 7, -2147483647 - 1}};
  const IntIn ib{"j", {3}, {16777217, 16777217, 0}};
  const std::vector<std::pair<OpKind, Node (*)(Node, Node)>> comparisons = {
      {OpKind::Equal, equal},
      {OpKind::Less, less},
      {OpKind::LessEqual, less_equal},
      {OpKind::Greater, greater},
      {OpKind::GreaterEqual, greater_equal}};
  for (const auto& [kind, f] : comparisons) {
    const std::string name(detail::op_name(kind));
    r.push_back({{kind}, name, {ca, cb}, {}, binary(f)});
    r.push_back({{kind}, name + " swapped", {cb, ca}, {}, binary(f)});
    r.push_back({{kind}, name + " int32", {}, {ia, ib}, [f](Graph&, const F&, const F& i) {
                   return f(i[0], i[1]);
                 }});
  }
  const IntIn la{"p", {2, 1}, {0, -3}}, lb{"q", {3}, {7, 0, 1}};
  const std::vector<std::pair<OpKind, Node (*)(Node, Node)>> logic = {
      {OpKind::LogicalAnd, logical_and},
      {OpKind::LogicalOr, logical_or},
      {OpKind::LogicalXor, logical_xor}};
  for (const auto& [kind, f] : logic) {
    r.push_back({{kind},
                 std::string(detail::op_name(kind)),
                 {},
                 {la, lb},
                 [f](Graph&, const F&, const F& i) { return f(i[0], i[1]); }});
  }
  r.push_back({{OpKind::Equal}, "logical_not", {}, {ia}, [](Graph&, const F&, const F& i) {
                 return logical_not(i[0]);
               }});
  // argmax / argmin: values on a grid of 3 so lines tie, a few NaNs (which win; the first one,
  // or the last with last_index), every axis of rank 3 and 4, keepdims, negative axes.
  const auto ties = [](const std::string& name, const Shape& s, std::uint32_t seed, int nans) {
    In in = uniform(name, s, 0, 3, seed);
    for (float& v : in.values) v = std::floor(v);
    for (int k = 0; k < nans; ++k)
      in.values[(static_cast<std::size_t>(k) * 7919 + seed) % in.values.size()] = NAN;
    return in;
  };
  const In t34{"a", {3, 4}, {1, 3, 3, 0, NAN, 2, NAN, 5, -1, -1, -2, -1}};
  for (bool max : {true, false}) {
    const OpKind op = max ? OpKind::ArgMax : OpKind::ArgMin;
    const std::string name = max ? "argmax" : "argmin";
    auto arg = [max](int axis, bool keep = false, bool last = false) {
      return [=](Graph&, const F& x, const F&) {
        return max ? argmax(x[0], axis, keep, last) : argmin(x[0], axis, keep, last);
      };
    };
    r.push_back({{op}, name + " ties and NaN", {t34}, {}, arg(-1)});
    r.push_back({{op}, name + " last_index", {t34}, {}, arg(1, false, true)});
    r.push_back({{op}, name + " axis 0 keepdims", {t34}, {}, arg(0, true)});
    r.push_back({{op}, name + " axis 0 last_index", {t34}, {}, arg(0, true, true)});
    r.push_back({{op}, name + " all axes", {t34}, {}, arg(kAllAxes)});
    r.push_back({{op}, name + " all axes keepdims", {t34}, {}, arg(kAllAxes, true, true)});
    const In t3 = ties("x", {2, 4, 3}, max ? 41 : 42, 2), t4 = ties("x", {2, 3, 4, 5}, 43, 3);
    // Each axis of the rank-4 tensor twice: first ties (axis 0..3), last ties (axis -4..-1).
    for (int axis = -4; axis < 4; ++axis) {
      const std::string ax = " axis " + std::to_string(axis);
      r.push_back({{op}, name + " rank 4" + ax, {t4}, {}, arg(axis, axis % 2 == 0, axis < 0)});
      if (axis >= -1 && axis < 3)
        r.push_back({{op}, name + " rank 3" + ax, {t3}, {}, arg(axis, false, axis < 0)});
    }
    // Long lines: OpenCL's work-group per line (inner 1, n >= 64) and the CPU's long-row pieces.
    r.push_back({{op}, name + " long rows", {ties("x", {3, 200}, 44, 1)}, {}, arg(1)});
    r.push_back(
        {{op}, name + " long rows last", {ties("x", {3, 200}, 45, 0)}, {}, arg(1, true, true)});
    In one_row = uniform("x", {1, 140000}, -1, 1, 46);
    one_row.values[70000] = one_row.values[139990] = max ? 2.0f : -2.0f;
    r.push_back({{op}, name + " one row", {one_row}, {}, arg(1)});
    r.push_back({{op}, name + " one row last", {one_row}, {}, arg(-1, false, true)});
    one_row.values[100] = one_row.values[130000] = NAN;
    r.push_back({{op}, name + " one row NaN", {one_row}, {}, arg(1)});
    r.push_back({{op}, name + " one row NaN last", {one_row}, {}, arg(1, false, true)});
    r.push_back(
        {{op},
         name + " int32",
         {},
         {{"i", {2, 3}, {5, -7, 5, 2147483647, -2147483647 - 1, 2147483647}}},
         [max](Graph&, const F&, const F& i) { return max ? argmax(i[0]) : argmin(i[0], 0); }});
    r.push_back({{op},
                 name + " int32 last",
                 {},
                 {{"i", {2, 3}, {5, -7, 5, 2147483647, -2147483647 - 1, 2147483647}}},
                 [max](Graph&, const F&, const F& i) {
                   return max ? argmax(i[0], 1, false, true) : argmin(i[0], 0, true, true);
                 }});
  }
  // top_k: equal values keep index order; NaN ranks above every number (first when largest,
  // last when smallest); -0 ties with +0. Every axis of rank 3 and 4 (negative ones too), k
  // from 1 to the whole axis, int32 extremes, long and strided lines.
  const In tk{
      "a", {3, 5}, {1, 3, 3, NAN, 3, -0.0f, 0.0f, -INFINITY, INFINITY, NAN, -1, NAN, -1, NAN, -1}};
  const IntIn ik{"i", {2, 4}, {5, -7, 5, 2147483647, -2147483647 - 1, 2147483647, 0, -7}};
  for (bool largest : {true, false}) {
    const std::string name = largest ? "top_k" : "top_k smallest";
    auto topk = [largest](std::int64_t k, int axis) {
      return [=](Graph&, const F& x, const F&) { return top_k_indices(x[0], k, axis, largest); };
    };
    r.push_back({{OpKind::TopK}, name + " ties, NaN, signed zeros", {tk}, {}, topk(3, -1)});
    r.push_back({{OpKind::TopK}, name + " k = dim", {tk}, {}, topk(5, 1)});
    r.push_back({{OpKind::TopK}, name + " k = 1 axis 0", {tk}, {}, topk(1, 0)});
    r.push_back({{OpKind::TopK}, name + " rank 1", {ties("x", {17}, 60, 2)}, {}, topk(6, 0)});
    const In t3 = ties("x", {2, 5, 3}, largest ? 61 : 62, 3), t4 = ties("x", {2, 3, 4, 5}, 63, 4);
    // Each axis of the rank-4 tensor twice: half of it kept (axis 0..3), all of it (-4..-1).
    for (int axis = -4; axis < 4; ++axis) {
      const std::string ax = " axis " + std::to_string(axis);
      const std::int64_t n4 = t4.shape[axis < 0 ? axis + 4 : axis];
      r.push_back({{OpKind::TopK},
                   name + " rank 4" + ax,
                   {t4},
                   {},
                   topk(axis < 0 ? n4 : (n4 + 1) / 2, axis)});
      if (axis >= -1 && axis < 3) {
        const std::int64_t n3 = t3.shape[axis < 0 ? axis + 3 : axis];
        r.push_back({{OpKind::TopK}, name + " rank 3" + ax, {t3}, {}, topk(n3 - 1, axis)});
      }
    }
    r.push_back(
        {{OpKind::TopK}, name + " long rows", {ties("x", {3, 200}, 64, 3)}, {}, topk(10, 1)});
    r.push_back(
        {{OpKind::TopK}, name + " long columns", {ties("x", {200, 3}, 65, 3)}, {}, topk(7, 0)});
    // Lines sorted up and down, in pairs of equal values, of even and odd lengths, 1 and 2:
    // the OpenCL kernel looks outward from each element, right then left, and must reach both
    // ends of the line whichever is farther (sorted lines made its old front-to-back scan
    // quadratic).
    // Lines of 100 with k = 6 take the CPU kernel's heap, which every element of a line sorted
    // the other way enters.
    for (const Shape& s : {Shape{4, 10}, Shape{3, 7}, Shape{2, 1}, Shape{2, 2}, Shape{2, 100}}) {
      In sorted{"x", s, {}};
      for (std::int64_t row = 0; row < s[0]; ++row) {
        for (std::int64_t j = 0; j < s[1]; ++j)
          sorted.values.push_back(static_cast<float>(row % 2 == 0 ? j / 2 : -(j / 2)));
      }
      r.push_back({{OpKind::TopK},
                   name + " sorted lines of " + std::to_string(s[1]),
                   {sorted},
                   {},
                   topk(s[1] == 100 ? 6 : (s[1] + 1) / 2, 1)});
    }
    r.push_back(
        {{OpKind::TopK}, name + " int32", {}, {ik}, [largest](Graph&, const F&, const F& i) {
           return top_k_indices(i[0], 3, -1, largest);
         }});
    r.push_back(
        {{OpKind::TopK}, name + " int32 axis 0", {}, {ik}, [largest](Graph&, const F&, const F& i) {
           return top_k_indices(i[0], 2, 0, largest);
         }});
    // The values are the gathered elements, NaNs among them.
    r.push_back(
        {{OpKind::TopK, OpKind::GatherElements},
         name + " values",
         {t3},
         {},
         [largest](Graph&, const F& x, const F&) { return top_k(x[0], 2, 1, largest).values; }});
    r.push_back(
        {{OpKind::TopK, OpKind::GatherElements},
         name + " int32 values",
         {},
         {ik},
         [largest](Graph&, const F&, const F& i) { return top_k(i[0], 3, 1, largest).values; }});
  }
  const In cube = uniform("x", {2, 4, 3}, -1, 1, 37);
  // Indices with negative values or on axes other than 0 are constants here; fed ones are
  // checked on the host (test_nn_ops.cpp, GatherFedIndices).
  r.push_back({{OpKind::Gather},
               "gather axis 0, 2-d indices",
               {uniform("x", {5, 3}, -1, 1, 38)},
               {{"i", {2, 2}, {4, 1, 0, 3}}},
               [](Graph&, const F& x, const F& i) { return gather(x[0], i[0], 0); }});
  r.push_back({{OpKind::Gather},
               "gather axis 0, negative indices",
               {uniform("x", {5, 3}, -1, 1, 38)},
               {},
               [](Graph& g, const F& x, const F&) {
                 return gather(x[0], g.constant_i32({2, 2}, {4, -1, 0, -5}), 0);
               }});
  r.push_back(
      {{OpKind::Gather},
       "gather axis 1, scalar index",
       {cube},
       {},
       [](Graph& g, const F& x, const F&) { return gather(x[0], g.constant_i32({}, {-2}), 1); }});
  r.push_back(
      {{OpKind::Gather}, "gather last axis", {cube}, {}, [](Graph& g, const F& x, const F&) {
         return gather(x[0], g.constant_i32({5}, {2, 0, -1, 1, 2}), -1);
       }});
  r.push_back({{OpKind::Gather},
               "gather int32",
               {},
               {{"x", {2, 3}, {10, 11, 12, 13, 14, 15}}},
               [](Graph& g, const F&, const F& i) {
                 return gather(i[0], g.constant_i32({2}, {1, -3}), 1);
               }});
  // gather_elements / scatter_elements: one index per element; indices may be smaller than the
  // data on the other axes (ONNX does not broadcast them) and longer along the axis.
  const In mat = uniform("x", {3, 4}, -1, 1, 47);
  r.push_back(
      {{OpKind::GatherElements},
       "gather_elements axis 0, negative indices",
       {mat},
       {},
       [](Graph& g, const F& x, const F&) {
         return gather_elements(x[0], g.constant_i32({2, 4}, {2, -1, 0, -3, 1, 1, -2, 0}), 0);
       }});
  r.push_back(
      {{OpKind::GatherElements},
       "gather_elements last axis, smaller indices",
       {cube},
       {},
       [](Graph& g, const F& x, const F&) {
         return gather_elements(
             x[0], g.constant_i32({1, 3, 5}, {2, 0, -1, 1, 2, 0, 0, 1, -3, 2, 1, 2, 2, 0, -2}), -1);
       }});
  r.push_back({{OpKind::GatherElements},
               "gather_elements axis 1, fed indices",
               {cube},
               {{"i", {2, 2, 3}, {3, 0, 1, 2, 2, 0, 1, 3, 3, 0, 0, 1}}},
               [](Graph&, const F& x, const F& i) { return gather_elements(x[0], i[0], 1); }});
  r.push_back({{OpKind::GatherElements},
               "gather_elements int32",
               {},
               {{"x", {2, 3}, {10, 11, 12, 13, 14, 15}}},
               [](Graph& g, const F&, const F& i) {
                 return gather_elements(i[0], g.constant_i32({2, 2}, {1, -3, 2, 2}), 1);
               }});
  const auto scatter = [](ScatterReduction red, int axis, Shape shape,
                          std::vector<std::int32_t> idx) {
    return [=](Graph& g, const F& x, const F&) {
      return scatter_elements(x[0], g.constant_i32(shape, idx), x[1], axis, red);
    };
  };
  // Repeated indices: the last one in row-major order wins (none), or all combine in order.
  r.push_back({{OpKind::ScatterElements},
               "scatter_elements axis 0, repeated indices",
               {mat, uniform("u", {2, 4}, -1, 1, 48)},
               {},
               scatter(ScatterReduction::none, 0, {2, 4}, {2, -1, 0, 1, 2, 0, -3, 1})});
  r.push_back({{OpKind::ScatterElements},
               "scatter_elements add, last axis, smaller indices",
               {cube, uniform("u", {1, 3, 5}, -1, 1, 49)},
               {},
               scatter(ScatterReduction::add, -1, {1, 3, 5},
                       {2, 0, -1, 1, 2, 0, 0, 1, -3, 2, 1, 2, 2, 0, -2})});
  r.push_back(
      {{OpKind::ScatterElements},
       "scatter_elements mul, axis 1",
       {cube, uniform("u", {2, 2, 3}, 0.5f, 2, 50)},
       {},
       scatter(ScatterReduction::mul, 1, {2, 2, 3}, {3, 0, 1, 3, -4, 0, 1, 3, 3, 0, 0, 1})});
  r.push_back({{OpKind::ScatterElements},
               "scatter_elements int32 add",
               {},
               {{"x", {2, 3}, {10, 11, 2147483647, 13, 14, 15}}, {"u", {2, 2}, {5, 1, -7, 9}}},
               [](Graph& g, const F&, const F& i) {
                 return scatter_elements(i[0], g.constant_i32({2, 2}, {2, -1, 0, 0}), i[1], 1,
                                         ScatterReduction::add);
               }});
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const In block = uniform("x", {4, 5, 6}, -1, 1, 40);
  const auto reversing = [](Graph&, const F& x, const F&) {
    return strided_slice(x[0], {1, -1}, {kMax, kMin}, {0, 2}, {2, -2});
  };
  const auto clamping = [](Graph&, const F& x, const F&) {
    return strided_slice(x[0], {-100, 1}, {100, 4}, {-1, 1}, {3, 1});
  };
  r.push_back({{OpKind::StridedSlice}, "strided_slice reversed", {block}, {}, reversing});
  r.push_back({{OpKind::StridedSlice}, "strided_slice clamped", {block}, {}, clamping});
  r.push_back(
      {{OpKind::StridedSlice},
       "strided_slice int32",
       {},
       {{"x", {2, 3}, {1, 2, 3, 4, 5, 6}}},
       [](Graph&, const F&, const F& i) { return strided_slice(i[0], {2}, {-4}, {1}, {-1}); }});
  // ---- convolutions: groups, depthwise, auto_pad, transposed
  const In img4c = uniform("x", {2, 4, 6, 5}, -1, 1, 41);
  const In wg = uniform("w", {6, 2, 3, 3}, -1, 1, 42), bg = uniform("b", {6}, -1, 1, 43);
  const auto grouped = [](Graph&, const F& x, const F&) {
    return conv2d(x[0], x[1], x[2], {.stride = {2, 1}, .padding = {1, 0}, .groups = 2});
  };
  const In wd = uniform("w", {4, 1, 3, 3}, -1, 1, 44);
  const auto depthwise = [](Graph&, const F& x, const F&) {
    return conv2d(x[0], x[1], {.padding = {2, 2}, .dilation = {2, 2}, .groups = 4});
  };
  r.push_back({{OpKind::Conv2d}, "conv2d grouped", {img4c, wg, bg}, {}, grouped});
  r.push_back({{OpKind::Conv2d}, "conv2d depthwise", {img4c, wd}, {}, depthwise});
  for (const AutoPad ap : {AutoPad::same_upper, AutoPad::same_lower, AutoPad::valid}) {
    r.push_back({{OpKind::Conv2d},
                 "conv2d auto_pad " + std::to_string(static_cast<int>(ap)),
                 {img4c, uniform("w", {3, 4, 2, 3}, -1, 1, 45)},
                 {},
                 [ap](Graph&, const F& x, const F&) {
                   return conv2d(x[0], x[1], {.stride = {2, 2}, .auto_pad = ap});
                 }});
  }
  const In wt = uniform("w", {4, 3, 3, 2}, -1, 1, 46), bt = uniform("b", {6}, -1, 1, 47);
  const auto transposed = [](Graph&, const F& x, const F&) {
    return conv_transpose2d(x[0], x[1], x[2],
                            {.stride = {2, 3},
                             .padding = {1, 0},
                             .padding_end = {0, 1},
                             .dilation = {1, 2},
                             .output_padding = {1, 2},
                             .groups = 2});
  };
  r.push_back({{OpKind::ConvTranspose2d}, "conv_transpose2d", {img4c, wt, bt}, {}, transposed});
  // ---- pooling: ceil_mode, dilation, auto_pad
  const In img7 = distinct("x", {1, 2, 7, 6}, 48);
  const Pool2dOptions ceil3{
      .kernel = {3, 2}, .stride = {2, 2}, .padding = {1, 0}, .ceil_mode = true};
  const Pool2dOptions dil{
      .kernel = {2, 2}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 3}};
  Pool2dOptions ceil_incl = ceil3;
  ceil_incl.count_include_pad = true;
  const Pool2dOptions same{.kernel = {3, 3}, .stride = {2, 2}, .auto_pad = AutoPad::same_lower};
  r.push_back({{OpKind::MaxPool2d},
               "max_pool2d ceil_mode",
               {img7},
               {},
               [ceil3](Graph&, const F& x, const F&) { return max_pool2d(x[0], ceil3); }});
  r.push_back(
      {{OpKind::MaxPool2d}, "max_pool2d dilation", {img7}, {}, [dil](Graph&, const F& x, const F&) {
         return max_pool2d(x[0], dil);
       }});
  r.push_back({{OpKind::MaxPool2d},
               "max_pool2d auto_pad",
               {img7},
               {},
               [same](Graph&, const F& x, const F&) { return max_pool2d(x[0], same); }});
  r.push_back({{OpKind::AvgPool2d},
               "avg_pool2d ceil_mode",
               {img7},
               {},
               [ceil3](Graph&, const F& x, const F&) { return avg_pool2d(x[0], ceil3); }});
  r.push_back({{OpKind::AvgPool2d},
               "avg_pool2d ceil_mode, padding counted",
               {img7},
               {},
               [ceil_incl](Graph&, const F& x, const F&) { return avg_pool2d(x[0], ceil_incl); }});
  r.push_back({{OpKind::AvgPool2d},
               "avg_pool2d auto_pad",
               {img7},
               {},
               [same](Graph&, const F& x, const F&) { return avg_pool2d(x[0], same); }});
  // ---- elementwise rows with their own formula (forward, and the gradient op by differences)
  const auto gelu_f = [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); };
  r.push_back(
      {{OpKind::Gelu}, "gelu", {uniform("a", {3, 4}, -3, 3, 20)}, {}, unary(gelu), {}, gelu_f});
  r.push_back({{OpKind::GeluGrad},
               "gelu'",
               {uniform("a", {3, 4}, -3, 3, 20)},
               {},
               unary(gelu),
               {0},
               gelu_f,
               1e-3,
               1e-4});
  const auto softsign_f = [](double x) { return x / (1.0 + std::fabs(x)); };
  const In ss = uniform("a", {3, 4}, -4, 4, 44);
  r.push_back({{OpKind::Softsign}, "softsign", {ss}, {}, unary(softsign), {}, softsign_f});
  r.push_back({{OpKind::Softsign, OpKind::Abs},
               "softsign'",
               {ss},
               {},
               unary(softsign),
               {0},
               softsign_f,
               1e-3,
               1e-4});
  const auto mish_f = [](double x) {
    return x * std::tanh(std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))));
  };
  // Forward over both sides of the CPU kernel's cut at 20; the gradient where it bends.
  r.push_back(
      {{OpKind::Mish}, "mish", {uniform("a", {4, 5}, -30, 30, 45)}, {}, unary(mish), {}, mish_f});
  // x sigmoid(x) in its gradient is one silu node (fuse_silu).
  r.push_back({{OpKind::Mish, OpKind::Tanh, OpKind::Silu},
               "mish'",
               {uniform("a", {3, 4}, -6, 6, 46)},
               {},
               unary(mish),
               {0},
               mish_f,
               1e-3,
               1e-4});
  const auto silu_f = [](double x) { return x / (1.0 + std::exp(-x)); };
  r.push_back(
      {{OpKind::Silu}, "silu", {uniform("a", {4, 5}, -30, 30, 48)}, {}, unary(silu), {}, silu_f});
  r.push_back({{OpKind::Silu, OpKind::Sigmoid},
               "silu'",
               {uniform("a", {3, 4}, -6, 6, 49)},
               {},
               unary(silu),
               {0},
               silu_f,
               1e-3,
               1e-4});
  const auto gelu_tanh_f = [](double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  // Forward out to where tanh saturates (the OpenCL kernel's cut at 10); the gradient near 0.
  r.push_back({{OpKind::GeluTanh},
               "gelu_tanh",
               {uniform("a", {4, 5}, -12, 12, 51)},
               {},
               unary(gelu_tanh),
               {},
               gelu_tanh_f});
  r.push_back({{OpKind::GeluTanh, OpKind::Tanh},
               "gelu_tanh'",
               {uniform("a", {3, 4}, -4, 4, 52)},
               {},
               unary(gelu_tanh),
               {0},
               gelu_tanh_f,
               1e-3,
               1e-4});
  const auto hard_swish_f = [](double x) { return x * std::min(std::max(x / 6 + 0.5, 0.0), 1.0); };
  // Forward across both bends (-3 and 3); the gradient away from them.
  r.push_back({{OpKind::HardSwish},
               "hard_swish",
               {uniform("a", {4, 5}, -6, 6, 50)},
               {},
               unary(hard_swish),
               {},
               hard_swish_f});
  r.push_back({{OpKind::HardSwish, OpKind::Where, OpKind::Less, OpKind::Greater},
               "hard_swish'",
               {away_from_zero("a", {3, 4}, 0.2f, 2.5f, 51)},
               {},
               unary(hard_swish),
               {0},
               hard_swish_f,
               1e-3,
               1e-4});
  // A learned slope per channel, broadcast over N, H and W; x away from prelu's kink at 0.
  const auto prelu_f = [](double x, double s) { return x < 0 ? s * x : x; };
  const std::vector<In> pr = {away_from_zero("a", {2, 3, 4, 5}, 0.1f, 2, 47),
                              uniform("s", {3, 1, 1}, -0.5, 0.5, 48)};
  r.push_back({{OpKind::PRelu}, "prelu", pr, {}, binary(prelu), {}, {}, 1e-4, 1e-5, prelu_f});
  r.push_back({{OpKind::PRelu, OpKind::Where},
               "prelu'",
               pr,
               {},
               binary(prelu),
               {0, 1},
               {},
               1e-3,
               1e-4,
               prelu_f});
  // ---- collectives on one process (Communicator::self(): each returns its input); the same ops
  // across processes are tested under mpirun in test_distributed
  const distributed::Communicator self;
  const auto identity = [](double x) { return x; };
  using Collective = std::function<Node(Node)>;
  const std::vector<std::pair<OpKind, Collective>> collectives = {
      {OpKind::Allreduce,
       [self](Node x) { return distributed::allreduce(x, self, distributed::ReduceOp::mean); }},
      {OpKind::Broadcast, [self](Node x) { return distributed::broadcast(x, self); }},
      {OpKind::Reduce, [self](Node x) { return distributed::reduce(x, self); }},
      {OpKind::Allgather, [self](Node x) { return distributed::allgather(x, self); }},
      {OpKind::ReduceScatter, [self](Node x) { return distributed::reduce_scatter(x, self); }},
  };
  for (const auto& [op, f] : collectives) {
    const Builder b = [f](Graph&, const F& x, const F&) { return f(x[0]); };
    const std::string what(detail::op_name(op));
    r.push_back({{op}, what, {a}, {}, b, {}, identity});
    r.push_back({{op}, what + "'", {a}, {}, b, {0}, identity});
  }
  // ---- gradient rows: internal ops against finite differences of the reference
  auto grad = [&](std::vector<OpKind> ops, std::string what, std::vector<In> in,
                  std::vector<IntIn> ints, Builder b, std::vector<int> wrt) {
    r.push_back({std::move(ops),
                 what + "'",
                 std::move(in),
                 std::move(ints),
                 std::move(b),
                 std::move(wrt),
                 {},
                 1e-3,
                 1e-4});
  };
  grad({OpKind::ReluGrad, OpKind::GradSeed}, "relu", {away_from_zero("a", {3, 4}, 0.1f, 1, 21)}, {},
       unary(relu), {0});
  grad({OpKind::SigmoidGrad}, "sigmoid", {a}, {}, unary(sigmoid), {0});
  grad({OpKind::TanhGrad}, "tanh", {a}, {}, unary(tanh), {0});
  grad({OpKind::AbsGrad}, "abs", {wide}, {}, unary(abs), {0});
  grad({OpKind::ErfGrad}, "erf", {uniform("a", {3, 4}, -2, 2, 34)}, {}, unary(erf), {0});
  grad({OpKind::Cos}, "sin'", {uniform("a", {3, 4}, -3, 3, 35)}, {}, unary(sin), {0});
  grad({OpKind::Sin}, "cos'", {uniform("a", {3, 4}, -3, 3, 36)}, {}, unary(cos), {0});
  grad({OpKind::Tan}, "tan", {uniform("a", {3, 4}, -1.2f, 1.2f, 37)}, {}, unary(tan), {0});
  const In inner = uniform("a", {3, 4}, -0.8f, 0.8f, 38);
  grad({OpKind::Asin}, "asin", {inner}, {}, unary(asin), {0});
  grad({OpKind::Acos}, "acos", {inner}, {}, unary(acos), {0});
  grad({OpKind::Atanh}, "atanh", {inner}, {}, unary(atanh), {0});
  grad({OpKind::Atan}, "atan", {uniform("a", {3, 4}, -3, 3, 39)}, {}, unary(atan), {0});
  grad({OpKind::Cosh}, "sinh", {uniform("a", {3, 4}, -2, 2, 40)}, {}, unary(sinh), {0});
  grad({OpKind::Sinh}, "cosh", {uniform("a", {3, 4}, -2, 2, 41)}, {}, unary(cosh), {0});
  grad({OpKind::Asinh}, "asinh", {uniform("a", {3, 4}, -3, 3, 42)}, {}, unary(asinh), {0});
  grad({OpKind::Acosh}, "acosh", {uniform("a", {3, 4}, 1.2f, 4, 43)}, {}, unary(acosh), {0});
  grad({OpKind::LeakyReluGrad}, "leaky_relu", {wide}, {},
       [](Graph&, const F& x, const F&) { return leaky_relu(x[0], 0.1f); }, {0});
  grad({OpKind::ClipGrad}, "clip", {wide}, {},
       [](Graph&, const F& x, const F&) { return clip(x[0], -1.0f, 0.5f); }, {0});
  grad({OpKind::Pow, OpKind::XLogY}, "pow", {pos, uniform("b", {4}, -2, 2, 35)}, {}, binary(pow),
       {0, 1});
  grad({OpKind::MaximumGrad}, "maximum", {da, db}, {}, binary(maximum), {0, 1});
  // a / b stays 0.1 or more away from an integer (the remainder's jumps)
  const In ga{"a", {2, 3}, {2.5f, -2.5f, 0.9f, -5.3f, 4.5f, -0.3f}},
      gb{"b", {3}, {1.5f, -2.0f, 0.8f}};
  grad({OpKind::Mod}, "mod", {ga, gb}, {}, binary(mod), {0, 1});
  grad({OpKind::FMod}, "fmod", {ga, gb}, {},
       [](Graph&, const F& x, const F&) { return fmod(x[0], x[1]); }, {0, 1});
  grad({OpKind::MinimumGrad}, "minimum", {db, da}, {}, binary(minimum), {0, 1});
  grad({OpKind::Where}, "where", {a, uniform("b", {3, 1}, -1, 1, 36)}, {{"c", {4}, {1, 0, 0, -3}}},
       [](Graph&, const F& x, const F& i) { return where(i[0], x[0], x[1]); }, {0, 1});
  grad({OpKind::GatherGrad}, "gather, repeated indices", {cube}, {},
       [](Graph& g, const F& x, const F&) {
         return gather(x[0], g.constant_i32({2, 3}, {3, -1, 0, 1, 3, -4}), 1);
       },
       {0});
  grad({OpKind::GatherGrad}, "gather axis 0", {uniform("x", {5, 3}, -1, 1, 39)},
       {{"i", {4}, {4, 1, 0, 4}}},
       [](Graph&, const F& x, const F& i) { return gather(x[0], i[0], 0); }, {0});
  // top_k's values: each kept element gets its value's gradient, the others none (distinct
  // values: no tie flips within the finite differences' step).
  grad({OpKind::TopK, OpKind::GatherElementsGrad}, "top_k values", {distinct("x", {3, 5}, 66)}, {},
       [](Graph&, const F& x, const F&) { return top_k(x[0], 2, -1).values; }, {0});
  grad({OpKind::TopK, OpKind::GatherElementsGrad}, "top_k smallest values axis 0",
       {distinct("x", {4, 3}, 67)}, {},
       [](Graph&, const F& x, const F&) { return top_k(x[0], 3, 0, false).values; }, {0});
  // The scatter-add sums repeated indices (each line in index order).
  grad({OpKind::GatherElementsGrad}, "gather_elements, repeated indices", {cube}, {},
       [](Graph& g, const F& x, const F&) {
         return gather_elements(x[0], g.constant_i32({2, 5, 2}, {3, -1, 0, 1, 3,  -4, 0, 0, 2, 2,
                                                                 1, 1,  0, 3, -1, 3,  2, 2, 2, 0}),
                                1);
       },
       {0});
  grad({OpKind::GatherElementsGrad}, "gather_elements axis 0, smaller indices",
       {uniform("x", {5, 3}, -1, 1, 51)}, {{"i", {3, 2}, {4, 1, 0, 4, 4, 1}}},
       [](Graph&, const F& x, const F& i) { return gather_elements(x[0], i[0], 0); }, {0});
  // none: data keeps the gradient outside the written elements, updates get theirs (distinct
  // indices: a repeated one that loses has no finite-difference gradient to compare with).
  grad({OpKind::ScatterElements, OpKind::GatherElements}, "scatter_elements",
       {mat, uniform("u", {2, 3}, -1, 1, 52)}, {},
       scatter(ScatterReduction::none, 1, {2, 3}, {3, 0, -3, 2, 0, 1}), {0, 1});
  grad({OpKind::GatherElements}, "scatter_elements add, repeated indices",
       {mat, uniform("u", {2, 3}, -1, 1, 53)}, {},
       scatter(ScatterReduction::add, 1, {2, 3}, {3, 0, -1, 2, 2, 2}), {0, 1});
  grad({OpKind::StridedSliceGrad}, "strided_slice reversed", {block}, {}, reversing, {0});
  grad({OpKind::StridedSliceGrad}, "strided_slice clamped", {block}, {}, clamping, {0});
  grad({OpKind::Conv2dGradInput, OpKind::Conv2dGradWeight, OpKind::Conv2dGradBias},
       "conv2d grouped", {img4c, wg, bg}, {}, grouped, {0, 1, 2});
  grad({OpKind::Conv2dGradInput, OpKind::Conv2dGradWeight}, "conv2d depthwise", {img4c, wd}, {},
       depthwise, {0, 1});
  grad({OpKind::Conv2d, OpKind::Conv2dGradWeight, OpKind::Conv2dGradBias}, "conv_transpose2d",
       {img4c, wt, bt}, {}, transposed, {0, 1, 2});
  grad({OpKind::MaxPool2dGrad}, "max_pool2d ceil_mode", {img7}, {},
       [ceil3](Graph&, const F& x, const F&) { return max_pool2d(x[0], ceil3); }, {0});
  grad({OpKind::MaxPool2dGrad}, "max_pool2d dilation", {img7}, {},
       [dil](Graph&, const F& x, const F&) { return max_pool2d(x[0], dil); }, {0});
  grad({OpKind::AvgPool2dGrad}, "avg_pool2d ceil_mode, padding counted", {img7}, {},
       [ceil_incl](Graph&, const F& x, const F&) { return avg_pool2d(x[0], ceil_incl); }, {0});
  grad({OpKind::AvgPool2dGrad}, "avg_pool2d auto_pad", {img7}, {},
       [same](Graph&, const F& x, const F&) { return avg_pool2d(x[0], same); }, {0});
  // No gradient flows through a comparison: x * (x > 0) differentiates as the step.
  grad({OpKind::Greater}, "greater, through a cast", {wide}, {},
       [](Graph& g, const F& x, const F&) {
         return x[0] * cast(greater(x[0], g.constant(0.0f)), DType::f32);
       },
       {0});
  grad({OpKind::Cast}, "cast float to float", {a}, {},
       [](Graph&, const F& x, const F&) { return exp(cast(x[0], DType::f32)); }, {0});
  grad({OpKind::ReduceMaxGrad}, "reduce_max", {distinct("a", {3, 4}, 22)}, {},
       [](Graph&, const F& x, const F&) { return reduce_max(x[0], 1); }, {0});
  // A zero in a line: its own gradient is the product of the others, theirs are zero.
  grad({OpKind::ReduceProdGrad}, "reduce_prod with a zero",
       {{"z", {3, 4}, {0.5f, 0, 1.5f, -2, 1, 2, -0.5f, 1.25f, 3, 0.75f, -1, 2}}}, {},
       [](Graph&, const F& x, const F&) { return reduce_prod(x[0], 1); }, {0});
  grad({OpKind::ReduceProdGrad}, "reduce_prod over axis 0", {a}, {},
       [](Graph&, const F& x, const F&) { return reduce_prod(x[0], 0, true); }, {0});
  grad({OpKind::CumSum}, "cumsum", {a}, {},
       [](Graph&, const F& x, const F&) { return cumsum(x[0], 1); }, {0});
  grad({OpKind::CumSum}, "cumsum exclusive reverse", {a}, {},
       [](Graph&, const F& x, const F&) { return cumsum(x[0], 0, true, true); }, {0});
  grad({OpKind::Expand}, "reduce_mean", {a}, {},
       [](Graph&, const F& x, const F&) { return reduce_mean(x[0], 1); }, {0});
  grad({OpKind::SumTo}, "broadcast add", {a, b}, {}, binary(add), {1});
  grad({OpKind::SoftmaxGrad}, "softmax", {a}, {},
       [](Graph&, const F& x, const F&) { return softmax(x[0], 0); }, {0});
  grad({OpKind::LogSoftmaxGrad}, "log_softmax", {a}, {},
       [](Graph&, const F& x, const F&) { return log_softmax(x[0]); }, {0});
  grad({OpKind::CrossEntropyGrad}, "cross_entropy of sigmoid", {a, one_hot("y", {3, 4}, 1)}, {},
       [](Graph&, const F& x, const F&) { return cross_entropy(sigmoid(x[0]), x[1]); }, {0});
  grad({OpKind::SoftmaxXentGrad}, "cross_entropy of softmax", {a}, {{"ids", {3}, {1, 3, 0}}},
       [](Graph&, const F& x, const F& i) { return cross_entropy(softmax(x[0]), i[0]); }, {0});
  grad({OpKind::SliceGrad}, "slice", {a}, {},
       [](Graph&, const F& x, const F&) { return slice(x[0], 1, 1, 3); }, {0});
  grad({OpKind::SliceGradN}, "two slices", {a}, {},
       [](Graph&, const F& x, const F&) { return slice(x[0], 1, 0, 2) * slice(x[0], 1, 2, 4); },
       {0});
  grad({OpKind::ConcatGrad}, "concat", {a, uniform("c", {3, 2}, -1, 1, 23)}, {},
       [](Graph&, const F& x, const F&) {
         return concat({x[0], x[1]}, 1);
       },
       {0, 1});
  grad({OpKind::ReshapeLike}, "reshape", {a}, {},
       [](Graph&, const F& x, const F&) { return exp(reshape(x[0], {12})); }, {0});
  grad({OpKind::Conv2dGradInput, OpKind::Conv2dGradWeight, OpKind::Conv2dGradBias}, "conv2d",
       {img, uniform("w", {3, 2, 3, 3}, -1, 1, 24), uniform("c", {3}, -1, 1, 25)}, {},
       [](Graph&, const F& x, const F&) {
         return conv2d(x[0], x[1], x[2], {.padding = {1, 1}});
       },
       {0, 1, 2});
  grad({OpKind::MaxPool2dGrad}, "max_pool2d", {img4}, {},
       [](Graph&, const F& x, const F&) { return max_pool2d(x[0]); }, {0});
  grad({OpKind::AvgPool2dGrad}, "avg_pool2d", {img4}, {},
       [](Graph&, const F& x, const F&) {
         return avg_pool2d(x[0], {.kernel = {3, 3}});
       },
       {0});
  grad({OpKind::EmbeddingGrad}, "embedding", {uniform("t", {6, 3}, -1, 1, 26)},
       {{"ids", {4}, {5, 0, 5, 2}}},
       [](Graph&, const F& x, const F& i) { return embedding(x[0], i[0]); }, {0});
  high_rank_rows(r);
  return r;
}

// ---- running a row ---------------------------------------------------------------------------

struct Built {
  Graph g;
  std::vector<Node> f, i;
  Node y;
};

Built build(const Row& row) {
  Built b;
  for (const In& in : row.inputs) b.f.push_back(b.g.input(in.name));
  for (const IntIn& in : row.ints) b.i.push_back(b.g.input(in.name, DType::i32));
  b.y = row.build(b.g, b.f, b.i);
  return b;
}

ref::Values values_of(const Row& row) {
  ref::Values v;
  for (const In& in : row.inputs) v[in.name] = testing_util::to_ref(in.shape, in.values);
  for (const IntIn& in : row.ints)
    v[in.name] = ref::Array(in.shape, std::vector<double>(in.values.begin(), in.values.end()));
  return v;
}

// y of the row in double: the formula applied to input 0, or the reference interpreter.
ref::Array reference_y(const Row& row, const Built& b, const ref::Values& v) {
  if (row.formula) {
    ref::Array x = v.at(row.inputs[0].name);
    for (double& e : x.v) e = row.formula(e);
    return x;
  }
  if (row.binary_formula)
    return ref::broadcast_binary(v.at(row.inputs[0].name), v.at(row.inputs[1].name),
                                 row.binary_formula);
  return ref::evaluate(b.g, std::span<const Node>(&b.y, 1), v)[0];
}

struct Expected {
  std::vector<Node> fetches;
  std::vector<ref::Array> want;
  std::vector<In> extra;  // the random weights r of a gradient row
};

Expected expected(const Row& row, Built& b) {
  Expected e;
  ref::Values v = values_of(row);
  const ref::Array y = reference_y(row, b, v);
  if (row.wrt.empty()) {
    e.fetches = {b.y};
    e.want = {y};
    return e;
  }
  // loss = sum(y * r): its gradient with respect to x is what the row's gradient ops compute.
  const In r = uniform("r", y.shape, -1, 1, 99);
  e.extra = {r};
  const Node loss = reduce_sum(b.y * b.g.input("r"));
  std::vector<Node> wrt;
  for (int k : row.wrt) wrt.push_back(b.f[static_cast<std::size_t>(k)]);
  e.fetches = gradients(loss, wrt);
  auto loss_at = [&](const ref::Values& vals) {
    const ref::Array yy = reference_y(row, b, vals);
    double s = 0;
    for (std::size_t j = 0; j < yy.size(); ++j) s += yy.v[j] * r.values[j];
    return s;
  };
  for (int k : row.wrt) {
    const std::string& name = row.inputs[static_cast<std::size_t>(k)].name;
    ref::Array g(row.inputs[static_cast<std::size_t>(k)].shape);
    for (std::size_t j = 0; j < g.size(); ++j) {
      constexpr double h = 1e-6;
      ref::Values up = v, down = v;
      up[name].v[j] += h;
      down[name].v[j] -= h;
      g.v[j] = (loss_at(up) - loss_at(down)) / (2 * h);
    }
    e.want.push_back(g);
  }
  return e;
}

const detail::Plan& plan_of(const CompiledGraph& cg) {
  return detail::executable_of(cg).plan();
}

bool holds(const detail::Plan& p, OpKind op) {
  return std::any_of(p.nodes.begin(), p.nodes.end(),
                     [&](const detail::PlanNode& n) { return n.op == op && n.fused_into < 0; });
}

std::string platform_name(const Platform& p) {
  return p.name() == "cpu" ? "CPU" : "OpenCL";
}

class BackendOps : public ::testing::TestWithParam<PlatformCase> {};

// A fetched value as floats, whichever element type it holds (cast and where rows give int32).
std::vector<float> read_as_float(const CompiledGraph& cg, const Node& n) {
  const detail::Plan& p = plan_of(cg);
  if (p.nodes[p.index(n, "read")].type.dtype != DType::i32) return cg.read(n);
  std::vector<float> got;
  for (std::int32_t v : cg.read_i32(n)) got.push_back(static_cast<float>(v));
  return got;
}

TEST_P(BackendOps, EveryRowMatchesTheReference) {
  const Platform platform = GetParam().make();
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.what);
    Built b = build(row);
    const Expected e = expected(row, b);
    InputShapes shapes;
    std::vector<FeedItem> feeds;
    std::vector<In> floats = row.inputs;
    floats.insert(floats.end(), e.extra.begin(), e.extra.end());
    for (const In& in : floats) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    for (const IntIn& in : row.ints) {
      shapes.push_back({in.name, in.shape});
      feeds.push_back({in.name, in.values});
    }
    auto cg = GraphCompiler(platform).compile(b.g, shapes, e.fetches);
    for (OpKind op : row.ops) {
      if (kExpectedMissing.count({platform_name(platform), op})) continue;
      EXPECT_TRUE(holds(plan_of(cg), op))
          << "the compiled row holds no " << detail::op_name(op) << " on " << GetParam().name;
    }
    cg.run(std::span<const FeedItem>(feeds));
    for (std::size_t k = 0; k < e.fetches.size(); ++k) {
      testing_util::expect_close(read_as_float(cg, e.fetches[k]), e.want[k], row.rtol, row.atol,
                                 row.what + " on " + GetParam().name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPlatforms, BackendOps, ::testing::ValuesIn(testing_util::platforms()),
                         [](const auto& info) { return info.param.name; });

// An SGD step on an embedding table: variables, assigns, groups and the fused sparse update,
// against the reference step v - lr * dL/dv.
TEST_P(BackendOps, SparseSgdStepMatchesTheReference) {
  Graph g;
  auto T = g.variable("T", {6, 3}, Initializer::uniform(-1, 1, 7));
  auto ids = g.input("ids", DType::i32);
  auto r = g.input("r");
  auto loss = reduce_sum(embedding(T, ids) * r);
  auto step = sgd(loss, {T}, 0.5f);
  const std::vector<std::int32_t> idv{4, 1, 4, 0};
  const auto rv = testing_util::random_vec(12, 5);
  const Platform platform = GetParam().make();
  auto cg = GraphCompiler(platform).compile(g, {{"ids", {4}}, {"r", {4, 3}}}, {loss, step});
  const std::vector<float> t0 = cg.read(T);
  for (OpKind op : {OpKind::Variable, OpKind::Assign, OpKind::Group, OpKind::EmbeddingUpdate}) {
    if (kExpectedMissing.count({platform_name(platform), op})) continue;
    // The fused update writes the table itself: the assign is gone then.
    if (op == OpKind::Assign && holds(plan_of(cg), OpKind::EmbeddingUpdate)) continue;
    EXPECT_TRUE(holds(plan_of(cg), op)) << detail::op_name(op) << " on " << GetParam().name;
  }
  cg.run({{"ids", idv}, {"r", rv}});
  ref::Array want = testing_util::to_ref({6, 3}, t0);
  for (std::size_t k = 0; k < idv.size(); ++k)
    for (std::size_t d = 0; d < 3; ++d)
      want.v[static_cast<std::size_t>(idv[k]) * 3 + d] -= 0.5 * rv[k * 3 + d];
  testing_util::expect_close(cg.read(T), want, 1e-6, 1e-6, "sgd step on " + GetParam().name);
}

// optimizer_update (one fused kernel per variable writing it and its state): two Adam steps on
// every platform against the rule in float64 (test_optimizers checks every rule, the ONNX
// training-op tests and checkpoint resumption).
TEST_P(BackendOps, OptimizerUpdateMatchesTheReference) {
  Graph g;
  const auto w0 = testing_util::random_vec(6, 8);
  auto W = g.variable("W", {2, 3}, Initializer::values(w0));
  auto dW = g.input("dW");
  auto step =
      apply_gradients(std::vector<Node>{W}, std::vector<Node>{dW}, Optimizer::adamw(0.05f, 0.1f));
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"dW", {2, 3}}}, {step});
  EXPECT_TRUE(holds(plan_of(cg), OpKind::OptimizerUpdate)) << GetParam().name;
  std::vector<double> w(w0.begin(), w0.end()), m(6, 0.0), v(6, 0.0);
  for (int t = 1; t <= 2; ++t) {
    const auto gv = testing_util::random_vec(6, 20 + static_cast<std::uint32_t>(t));
    cg.run({{"dW", gv}});
    for (std::size_t i = 0; i < 6; ++i) {
      w[i] *= 1 - 0.05 * 0.1;
      m[i] = 0.9 * m[i] + 0.1 * gv[i];
      v[i] = 0.999 * v[i] + 0.001 * double(gv[i]) * gv[i];
      w[i] -= 0.05 * (m[i] / (1 - std::pow(0.9, t))) /
              (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
    }
  }
  testing_util::expect_close(cg.read(W), ref::Array({2, 3}, w), 1e-5, 1e-6,
                             "adamw on " + GetParam().name);
}

// sparse_optimizer_update (fuse_sparse_update, where the platform has it): SGD and Adagrad steps
// on an embedding table touch only the looked-up rows and give the dense steps' tables and
// sums bitwise (the dense ones from the same graph compiled without fusion), repeated rows
// summed in lookup order.
TEST_P(BackendOps, SparseOptimizerStepsEqualTheDenseOnes) {
  const Platform platform = GetParam().make();
  for (const Optimizer& o : {Optimizer::sgd(0.3f), Optimizer::adagrad(0.2f)}) {
    SCOPED_TRACE(o.name());
    Graph g;
    auto T = g.variable("T", {7, 3}, Initializer::uniform(-1, 1, 9));
    auto ids = g.input("ids", DType::i32);
    auto r = g.input("r");
    auto train = minimize(reduce_sum(embedding(T, ids) * r), {T}, o);
    const InputShapes shapes{{"ids", {5}}, {"r", {5, 3}}};
    auto sparse = GraphCompiler(platform).compile(g, shapes, {train});
    auto dense = GraphCompiler(platform, {.fuse = false}).compile(g, shapes, {train});
    if (!kExpectedMissing.count({platform_name(platform), OpKind::SparseOptimizerUpdate})) {
      EXPECT_TRUE(holds(plan_of(sparse), OpKind::SparseOptimizerUpdate)) << GetParam().name;
    }
    EXPECT_FALSE(holds(plan_of(dense), OpKind::SparseOptimizerUpdate));
    for (int step = 0; step < 3; ++step) {
      const std::vector<std::int32_t> idv{4, 1, 4, 0, static_cast<std::int32_t>(step)};
      const auto rv = testing_util::random_vec(15, 70 + static_cast<std::uint32_t>(step));
      sparse.run({{"ids", idv}, {"r", rv}});
      dense.run({{"ids", idv}, {"r", rv}});
    }
    EXPECT_TRUE(testing_util::bitwise_equal(sparse.read(T), dense.read(T)));
    if (o.rule == Optimizer::Rule::adagrad) {
      EXPECT_TRUE(testing_util::bitwise_equal(sparse.read("T/sum"), dense.read("T/sum")));
    }
    // A bad index: a FeedError, and the table as it was.
    const std::vector<float> before = sparse.read(T);
    try {
      sparse.run({{"ids", std::vector<std::int32_t>{4, 7, 0, 0, 1}},
                  {"r", testing_util::random_vec(15, 90)}});
      ADD_FAILURE() << "no error for index 7 of a 7-row table";
    } catch (const FeedError& e) {
      EXPECT_NE(std::string(e.what()).find("index 7 at position 1"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(testing_util::bitwise_equal(sparse.read(T), before));
  }
}

// check_indices (commit_writes puts one before the commit point for a writer with computed
// indices): passes good indices, and a bad one is a FeedError naming it.
TEST_P(BackendOps, CheckIndicesRejectsIndicesOutsideTheBound) {
  Graph g;
  auto ids = g.input("ids", DType::i32);
  auto like = g.input("like");
  auto picked = slice(ids, 0, 1, 4);  // computed: checked on the device or in the kernel
  auto c2 = detail::make_op(OpKind::CheckIndices, {picked, like}).named("check");
  auto cg = GraphCompiler(GetParam().make()).compile(g, {{"ids", {4}}, {"like", {5, 2}}}, {c2});
  const std::vector<float> lv(10, 0.0f);
  cg.run({{"ids", std::vector<std::int32_t>{9, 0, 4, 2}}, {"like", lv}});  // 9 is not picked
  EXPECT_EQ(cg.read(c2), std::vector<float>{0.0f});
  try {
    cg.run({{"ids", std::vector<std::int32_t>{0, 1, 5, 2}}, {"like", lv}});
    ADD_FAILURE() << "no error";
  } catch (const FeedError& e) {
    EXPECT_NE(std::string(e.what()).find("index 5 at position 1"), std::string::npos) << e.what();
  }
}

// int32 add, sub and mul wrap around (two's complement) on every platform, broadcasting and
// in place alike.
TEST_P(BackendOps, IntArithmeticWrapsAround) {
  Graph g;
  auto a = g.input("a", DType::i32), b = g.input("b", DType::i32), one = g.input("one", DType::i32);
  auto sum = add(a, b), diff = sub(a, b), prod = mul(a, b), up = add(a, one);
  auto cg = GraphCompiler(GetParam().make())
                .compile(g, {{"a", {4}}, {"b", {4}}, {"one", {}}}, {sum, diff, prod, up});
  const std::int32_t lo = std::numeric_limits<std::int32_t>::min(),
                     hi = std::numeric_limits<std::int32_t>::max();
  cg.run({{"a", std::vector<std::int32_t>{hi, lo, 65536, 46341}},
          {"b", std::vector<std::int32_t>{1, 1, 65536, 46341}},
          {"one", std::vector<std::int32_t>{1}}});
  EXPECT_EQ(cg.read_i32(sum), (std::vector<std::int32_t>{lo, lo + 1, 131072, 92682}));
  EXPECT_EQ(cg.read_i32(diff), (std::vector<std::int32_t>{hi - 1, hi, 0, 0}));
  // 46341^2 = 2^31 + 4633: wraps to -2^31 + 4633
  EXPECT_EQ(cg.read_i32(prod), (std::vector<std::int32_t>{hi, lo, 0, lo + 4633}));
  EXPECT_EQ(cg.read_i32(up), (std::vector<std::int32_t>{lo, lo + 1, 65537, 46342}));
}

// fuse_silu: x * sigmoid(x), either order, becomes one silu node (its sigmoid gone) with the
// values of the two nodes it replaces (bitwise on the CPU: the same vector sigmoid, then the
// product), and not where the sigmoid has another reader (here: it is fetched too).
TEST_P(BackendOps, SiluNodesEqualTheSigmoidAndProduct) {
  Graph g;
  auto x = g.input("x"), z = g.input("z");
  auto y1 = mul(x, sigmoid(x)), y2 = mul(sigmoid(x), x), s = sigmoid(z), y3 = mul(z, s);
  const std::vector<float> xv = testing_util::random_vec(1000, 52, -12, 12),
                           zv = testing_util::random_vec(37, 53, -5, 5);
  std::vector<float> out[2][3];
  for (const bool on : {false, true}) {
    CompileOptions o;
    o.experimental.silu_nodes = on;
    auto cg = GraphCompiler(GetParam().make(), o)
                  .compile(g, {{"x", {10, 100}}, {"z", {37}}}, {y1, y2, y3, s});
    const detail::Plan& p = plan_of(cg);
    const auto count = [&](OpKind k) {
      return std::count_if(p.nodes.begin(), p.nodes.end(), [&](const detail::PlanNode& n) {
        return n.op == k && n.storage != detail::Storage::None;
      });
    };
    EXPECT_EQ(count(OpKind::Silu), on ? 2 : 0);
    EXPECT_EQ(count(OpKind::Sigmoid), on ? 1 : 3);
    cg.run({{"x", xv}, {"z", zv}});
    out[on][0] = cg.read(y1), out[on][1] = cg.read(y2), out[on][2] = cg.read(y3);
  }
  for (int k = 0; k < 3; ++k) {
    if (GetParam().name.rfind("cpu", 0) == 0 && !testing_util::cpu_reference_forced()) {
      EXPECT_EQ(out[1][k], out[0][k]) << "output " << k;
    } else {
      testing_util::expect_close(
          out[1][k], testing_util::to_ref({static_cast<std::int64_t>(out[0][k].size())}, out[0][k]),
          1e-6, 1e-6, "silu");
    }
  }
}

// argmax / argmin give the same positions for any team size: long rows split into pieces,
// many rows split across threads, columns in chunks; values tie often and hold NaNs.
TEST(BackendOpsThreads, ArgMaxIsTheSameForEveryTeamSize) {
  Graph g;
  auto x = g.input("x"), row = g.input("row");
  std::vector<Node> outs;
  for (bool last : {false, true}) {
    for (int axis : {0, 1, kAllAxes}) {
      outs.push_back(argmax(x, axis, false, last));
      outs.push_back(argmin(x, axis, false, last));
    }
    outs.push_back(argmax(row, -1, false, last));
    outs.push_back(argmin(row, -1, false, last));
  }
  In xv = uniform("x", {300, 700}, 0, 50, 51), rv = uniform("row", {1, 300000}, 0, 50, 52);
  for (In* in : {&xv, &rv}) {
    for (float& v : in->values) v = std::floor(v);
    for (std::size_t k = 0; k < 5; ++k) in->values[(k * 104729) % in->values.size()] = NAN;
  }
  const InputShapes shapes{{"x", xv.shape}, {"row", rv.shape}};
  std::vector<std::vector<std::int32_t>> first;
  for (int threads : {1, 2, 3, 4}) {
    SCOPED_TRACE(threads);
    auto cg = GraphCompiler(Platform::cpu({.engine = CpuEngine::sequential, .threads = threads}))
                  .compile(g, shapes, outs);
    cg.run({{"x", xv.values}, {"row", rv.values}});
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (threads == 1)
        first.push_back(cg.read_i32(outs[k]));
      else
        EXPECT_EQ(cg.read_i32(outs[k]), first[k]) << "output " << k;
    }
  }
}

// top_k gives the same positions for any team size and on every platform: many lines split
// across threads, rows and columns, k from 1 to the whole axis; values tie often, hold NaNs.
TEST(BackendOpsThreads, TopKIsTheSameForEveryTeamSizeAndPlatform) {
  Graph g;
  auto x = g.input("x"), narrow = g.input("narrow");
  std::vector<Node> outs;
  for (bool largest : {true, false}) {
    for (std::int64_t k : {1, 37, 300}) outs.push_back(top_k_indices(x, k, 0, largest));
    for (std::int64_t k : {1, 50, 700}) outs.push_back(top_k_indices(x, k, 1, largest));
    outs.push_back(top_k_indices(narrow, 3, -1, largest));
  }
  In xv = uniform("x", {300, 700}, 0, 50, 57), nv = uniform("narrow", {20000, 8}, 0, 4, 58);
  for (In* in : {&xv, &nv}) {
    for (float& v : in->values) v = std::floor(v);
    for (std::size_t k = 0; k < 40; ++k) in->values[(k * 104729) % in->values.size()] = NAN;
  }
  const InputShapes shapes{{"x", xv.shape}, {"narrow", nv.shape}};
  std::vector<std::vector<std::int32_t>> first;
  auto check = [&](const Platform& p) {
    auto cg = GraphCompiler(p).compile(g, shapes, outs);
    cg.run({{"x", xv.values}, {"narrow", nv.values}});
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (first.size() < outs.size())
        first.push_back(cg.read_i32(outs[k]));
      else
        EXPECT_EQ(cg.read_i32(outs[k]), first[k]) << "output " << k;
    }
  };
  for (int threads : {1, 2, 3, 4}) {
    SCOPED_TRACE(threads);
    check(Platform::cpu({.engine = CpuEngine::sequential, .threads = threads}));
  }
  for (const PlatformCase& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    check(pc.make());
  }
}

// gather_elements' gradient (a scatter-add) is bitwise the same for any team size, along the
// first and the last axis, with many repeated indices per element.
TEST(BackendOpsThreads, GatherElementsGradientIsTheSameForEveryTeamSize) {
  Graph g;
  auto x = g.input("x"), rows = g.input("rows"), i0 = g.input("i0", DType::i32),
       i1 = g.input("i1", DType::i32), r0 = g.input("r0"), r1 = g.input("r1");
  auto loss =
      reduce_sum(gather_elements(x, i1, 1) * r1) + reduce_sum(gather_elements(rows, i0, 0) * r0);
  const std::vector<Node> outs = gradients(loss, {x, rows});
  std::vector<std::int32_t> i0v(2000 * 64), i1v(64 * 2000);
  for (std::size_t k = 0; k < i0v.size(); ++k) {
    i0v[k] = static_cast<std::int32_t>((k * 7919) % 50) - 25;  // 50 rows: many repeats
    i1v[k] = static_cast<std::int32_t>((k * 104729) % 600);
  }
  const In xv = uniform("x", {64, 600}, -1, 1, 53), rowv = uniform("rows", {50, 64}, -1, 1, 54);
  const In r0v = uniform("r0", {2000, 64}, -1, 1, 55), r1v = uniform("r1", {64, 2000}, -1, 1, 56);
  const InputShapes shapes{{"x", xv.shape},    {"rows", rowv.shape}, {"i0", {2000, 64}},
                           {"i1", {64, 2000}}, {"r0", r0v.shape},    {"r1", r1v.shape}};
  std::vector<std::vector<float>> first;
  for (int threads : {1, 2, 3, 4}) {
    SCOPED_TRACE(threads);
    auto cg = GraphCompiler(Platform::cpu({.engine = CpuEngine::sequential, .threads = threads}))
                  .compile(g, shapes, outs);
    cg.run({{"x", xv.values},
            {"rows", rowv.values},
            {"i0", i0v},
            {"i1", i1v},
            {"r0", r0v.values},
            {"r1", r1v.values}});
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (threads == 1)
        first.push_back(cg.read(outs[k]));
      else
        EXPECT_TRUE(testing_util::bitwise_equal(cg.read(outs[k]), first[k])) << "output " << k;
    }
  }
}

// Every row on a heterogeneous platform (the CPU and an OpenCL device) with its ops' inputs
// produced on the other device: fed inputs on one device and every op on the other, both ways,
// then each node on the device its graph id's parity names (most values cross). Results must
// match the reference as closely as on one device.
TEST(BackendOpsHetero, EveryRowWithItsInputsOnTheOtherDevice) {
  if (!testing_util::opencl_required() && !Platform::opencl_available()) GTEST_SKIP();
  const Platform cl = Platform::opencl();
  const Device gpu = cl.devices().front();
  const Platform both = Platform::heterogeneous({Platform::cpu(), cl});
  const Device devices[2] = {Device::cpu(), gpu};
  for (const Row& row : rows()) {
    // Collectives are refused on a heterogeneous platform (CollectivesAreRefused below).
    if (detail::op_def(row.ops.front()).communication) continue;
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(row.what + " variant " + std::to_string(variant));
      Built b = build(row);
      const Expected e = expected(row, b);
      for (std::uint32_t id = 0; id < b.g.size(); ++id) {
        const Node n = b.g.node(id);
        const bool fed = n.op_name() == "input";
        const int d = variant == 2 ? static_cast<int>(id % 2) : (fed == (variant == 0) ? 0 : 1);
        n.on(devices[d]);
      }
      InputShapes shapes;
      std::vector<FeedItem> feeds;
      std::vector<In> floats = row.inputs;
      floats.insert(floats.end(), e.extra.begin(), e.extra.end());
      for (const In& in : floats) {
        shapes.push_back({in.name, in.shape});
        feeds.push_back({in.name, in.values});
      }
      for (const IntIn& in : row.ints) {
        shapes.push_back({in.name, in.shape});
        feeds.push_back({in.name, in.values});
      }
      auto cg = GraphCompiler(both).compile(b.g, shapes, e.fetches);
      // (By parity a row may happen to keep each value on its device: views follow theirs.)
      if (variant < 2) {
        EXPECT_TRUE(holds(plan_of(cg), OpKind::Transfer));
      }
      cg.run(std::span<const FeedItem>(feeds));
      for (std::size_t k = 0; k < e.fetches.size(); ++k) {
        testing_util::expect_close(read_as_float(cg, e.fetches[k]), e.want[k], row.rtol, row.atol,
                                   row.what + " across devices");
      }
    }
  }
}

TEST(BackendOpsHetero, CollectivesAreRefusedNamingTheNode) {
  if (!testing_util::opencl_required() && !Platform::opencl_available()) GTEST_SKIP();
  Graph g;
  auto x = g.input("x");
  auto s = distributed::allreduce(relu(x), distributed::Communicator{}).named("sum");
  const Platform both = Platform::heterogeneous({Platform::cpu(), Platform::opencl()});
  try {
    GraphCompiler(both).compile(g, {{"x", {4}}}, {s});
    ADD_FAILURE() << "no error";
  } catch (const PlatformError& e) {
    EXPECT_NE(std::string(e.what()).find("sum"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("heterogeneous"), std::string::npos) << e.what();
  }
}

TEST(BackendOpsCoverage, RowsNameEveryOpKind) {
  // Variables, assigns, groups and sparse updates: SparseSgdStepMatchesTheReference; the check
  // op: CheckIndicesRejectsIndicesOutsideTheBound; optimizer updates:
  // OptimizerUpdateMatchesTheReference; parallel groups: test_compiler's ParallelOps
  // (they form only for nodes big enough to pay, on CPU teams of two threads); transfers exist
  // only in heterogeneous plans: BackendOpsHetero moves every row's values across devices.
  std::set<OpKind> seen{
      OpKind::Variable,        OpKind::Assign,          OpKind::Group,
      OpKind::EmbeddingUpdate, OpKind::CheckIndices,    OpKind::ParallelGroup,
      OpKind::Transfer,        OpKind::OptimizerUpdate, OpKind::SparseOptimizerUpdate};
  for (const Row& row : rows()) seen.insert(row.ops.begin(), row.ops.end());
  std::string missing;
  for (int i = 0; i < detail::kNumOps; ++i) {
    if (!seen.count(static_cast<OpKind>(i))) {
      missing += " " + std::string(detail::op_name(static_cast<OpKind>(i)));
    }
  }
  EXPECT_TRUE(missing.empty()) << "ops without a row in test_backend_ops:" << missing;
}

// An elementwise op is its row plus a kernel line per platform and its test rows: each one
// missing fails here, naming the file to add it to (the rows' own runs fail too, less directly).
TEST(BackendOpsCoverage, ElementwiseOpsHaveKernelsOnEveryPlatformAndForwardRows) {
  const std::vector<Row> all = rows();
  for (int i = 0; i < detail::kNumOps; ++i) {
    const auto op = static_cast<OpKind>(i);
    const detail::OpDef& d = detail::op_def(op);
    const bool unary = d.elementwise == detail::Elementwise::unary;
    if (!unary && d.elementwise != detail::Elementwise::binary) continue;
    SCOPED_TRACE(std::string(d.name));
    bool cpu_seen = false;  // the CPU's kernels are the same for every engine: one is enough
    for (const PlatformCase& pc : testing_util::platforms()) {
      const bool cl = pc.name.find("opencl") != std::string::npos;
      if (!cl && std::exchange(cpu_seen, true)) continue;
      Graph g;
      std::vector<Node> ins{g.input("a")};
      InputShapes shapes{{"a", {2, 3}}};
      if (!unary) {
        ins.push_back(g.input("b"));
        shapes.push_back({"b", {2, 3}});
      }
      try {
        GraphCompiler(pc.make()).compile(g, shapes, {detail::make_op(op, ins)});
      } catch (const PlatformError& e) {
        ADD_FAILURE() << pc.name << " has no kernel for it: add "
                      << (cl ? (unary ? "a UNARY(" + std::string(d.name) + "_f32, ...)"
                                      : "a BINARY(" + std::string(d.name) + ", ...)") +
                                   " line to kernels/elementwise.cl"
                             : std::string("its functors to src/cpu/kernels/elementwise.cpp"))
                      << " (" << e.what() << ")";
      }
    }
    // A unary op's own value is a forward row (a gradient row alone would leave the
    // forward kernel compared only through finite differences).
    if (!unary) continue;  // binary ops: RowsNameEveryOpKind
    EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const Row& r) {
      return r.wrt.empty() && std::find(r.ops.begin(), r.ops.end(), op) != r.ops.end();
    })) << "no forward row in rows() (tests/test_backend_ops.cpp)";
  }
}

// The recurrent sequences' shape rules (compiler-made nodes, built here by hand): steps that
// run past the projection's rows, R of another hidden size and a GRU bias of the wrong length
// are ShapeErrors naming the node, the op and what is wrong.
TEST(BackendOpsShapes, RecurrentSequencesCheckTheirInputs) {
  struct Case {
    OpKind op;
    Shape p, r, h0, last;  // last: c0 (LSTM) or Rb (GRU)
    std::int64_t steps;
    std::string want;
  };
  const std::vector<Case> cases{
      {OpKind::LstmSequence, {6, 64}, {64, 16}, {2, 16}, {2, 16}, 4, "do not fit P [6, 64]"},
      {OpKind::LstmSequence, {6, 64}, {64, 8}, {2, 16}, {2, 16}, 3, "R must be float [4H, H]"},
      {OpKind::LstmSequence, {6, 64}, {64, 16}, {2, 16}, {3, 16}, 3, "initial states must be"},
      {OpKind::GruSequence, {6, 48}, {48, 16}, {2, 16}, {32}, 3, "Rb must be float [48]"},
      {OpKind::GruSequence, {6, 64}, {48, 16}, {2, 16}, {48}, 3, "P must be float [rows, 48]"}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.want);
    Graph g;
    detail::SequenceSpec spec;
    spec.steps = k.steps;
    spec.bias = k.op == OpKind::GruSequence;
    detail::Attrs at;
    at.set(spec);
    Node n = detail::make_op(k.op, {g.input("p"), g.input("r"), g.input("h0"), g.input("last")}, at)
                 .named("seq");
    try {
      GraphCompiler(Platform::cpu())
          .compile(g, {{"p", k.p}, {"r", k.r}, {"h0", k.h0}, {"last", k.last}}, {n});
      ADD_FAILURE() << "compiled";
    } catch (const ShapeError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'seq'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string(detail::op_name(k.op))), std::string::npos) << msg;
      EXPECT_NE(msg.find(k.want), std::string::npos) << msg;
    }
  }
}

// A platform without a kernel for a node says so when the graph is compiled, naming the node
// and the op, before anything is allocated.
TEST(BackendOpsCoverage, MissingKernelsAreCompileTimeErrors) {
  for (const PlatformCase& pc : testing_util::platforms()) {
    const Platform platform = pc.make();
    for (const auto& [plat, op] : kExpectedMissing) {
      if (plat != platform_name(platform)) continue;
      Graph g;
      auto a = g.input("a");
      auto bb = g.input("b");
      auto ids = g.input("ids", DType::i32);
      detail::Attrs at;
      Node n;
      if (op == OpKind::FusedMatMul) {
        at.set(detail::MatmulEpilogue{});
        n = detail::make_op(op, {a, bb}, at).named("fused");
      } else if (op == OpKind::SparseOptimizerUpdate) {
        at.set(detail::OptimizerRule{});
        n = detail::make_op(op, {g.variable("v", {4, 4}), bb, ids, g.constant(0.1f)}, at)
                .named("fused");
      } else if (op == OpKind::LstmSequence) {  // P [4, 4H], R [4H, H], h0 and c0 [4, H]: H 1
        detail::SequenceSpec spec;
        spec.steps = 1;
        at.set(spec);
        n = detail::make_op(op, {a, slice(bb, 1, 0, 1), slice(a, 1, 0, 1), slice(a, 1, 1, 2)}, at)
                .named("fused");
      } else if (op == OpKind::GruSequence) {  // P [4, 3H], R [3H, H], h0 [4, H]: H 1
        detail::SequenceSpec spec;
        spec.steps = 1;
        at.set(spec);
        n = detail::make_op(
                op, {slice(a, 1, 0, 3), slice(slice(bb, 1, 0, 1), 0, 0, 3), slice(a, 1, 0, 1)}, at)
                .named("fused");
      } else {
        n = detail::make_op(op, {a, bb, ids}, at).named("fused");
      }
      try {
        GraphCompiler(platform).compile(g, {{"a", {4, 4}}, {"b", {4, 4}}, {"ids", {4}}}, {n});
        ADD_FAILURE() << pc.name << " compiled a node it has no kernel for";
      } catch (const PlatformError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'fused'"), std::string::npos) << msg;
        EXPECT_NE(msg.find(std::string(detail::op_name(op))), std::string::npos) << msg;
      }
    }
  }
}

}  // namespace
