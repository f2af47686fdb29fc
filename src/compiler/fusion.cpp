// SPDX-License-Identifier: Apache-2.0
// Fusion passes, after shape inference. Each asks the platform's capabilities before it
// rewrites: a fused node is made only where the platform has a kernel for it.
//
// fuse_matmul_epilogue: a matmul whose value has exactly one reader that is a unary
// elementwise op (OpDef::epilogue) takes that op as an epilogue. fuse_matmul_accumulate: a
// matmul (or fused matmul) whose single reader adds a same-shape value to it accumulates into
// that value. The reader becomes a fused_matmul node; the matmul (and any identity view between
// them) is marked fused and does no work. Saves a pass over the product each time:
// par-matmul's log and first adds, the LSTM's sums of per-step weight gradients.
//
// fuse_sparse_update: an embedding gradient whose only reader is its table's plain SGD step,
// assign(v, axpby(v, dv, 1, beta)), folds into that step as embedding_update(v, g, indices):
// the looked-up rows get v + beta * (their summed gradient), the others stay as they are,
// which is what the dense step computes for them (v + beta * 0). It saves zeroing a dense
// table-sized gradient and a pass over the whole table per step: wide & deep's tables hold
// millions of rows' worth.
//
// fuse_embedding_concat (issue 12, parallel-op fusion): a concat along the last axis whose
// pieces include at least two embedding lookups read by nothing else becomes one
// embedding_concat node that gathers every table's rows straight into its band of the concat's
// buffer and copies the other pieces beside them. Wide & deep's 26 lookups and their concat
// are one node instead of 27, and the rows are written once instead of twice. It is always a
// win, so no cost test gates it: the fused kernel does a subset of the unfused work (the same
// row copies, minus the concat's pass over every row) in one dispatch instead of N + 1. The
// gradient is the unfused graph's: the pass runs after autodiff, and the lookups' gradients
// read the indices and the concat gradient, never the lookups' values. In training, the same
// pass lets each table's sparse step (embedding_update, sparse_optimizer_update: made by
// fuse_sparse_update before it) read its band of the concat gradient in place of the
// concat_grad node that copied the band out (GradientBand): 26 copies fewer per step.
//
// fuse_layer_norm (issue 48): LayerNorm as exports before opset 17 write it, nine nodes (two
// means over the last axis, sub, pow, add eps, sqrt, div, mul gamma, add beta), becomes one
// layer_norm node: one kernel reading each row twice and writing it once, instead of nine
// passes over the activation. BERT, ViT, GPT-2 and ConvNeXt have one or two per block. After
// autodiff, as the others: a training graph's gradients read the decomposed ops' values, so
// they stay there (the pattern's values must have no other reader).
//
// fuse_channel_affine (issue 48): an inference BatchNormalization the importer could not fold
// into a convolution (mul by a per-channel scale, add a per-channel shift) and the relu after
// it, three passes over the value (DenseNet normalises every layer's whole concatenated input
// so), become one channel_affine node.
//
// fuse_gelu (issue 48): GELU as exports before opset 20 write it (div by sqrt 2, erf, add 1,
// two products: five passes over an MLP's widest activation) becomes one gelu node; its tanh
// form (GPT-2's: a cube, three products, two sums, tanh: eight) one gelu_tanh node.
//
// fuse_lstm_cells (issue 48): an LSTM step's elementwise tail, as the importer unrolls ONNX's
// LSTM (four slices of the gate pre-activations, three sigmoids, two tanhs, three products and
// a sum: fourteen nodes over [B, H] per step, a third of an LSTM classifier's node time at
// batch 16), becomes two nodes: lstm_cell (the new cell state) and lstm_hidden (the new
// hidden state), each one pass over the gates. fuse_gru_cells does the same for a GRU step
// with linear_before_reset (PyTorch's export: seven slices, two sigmoids, a tanh, three sums,
// three products and 1 - z, seventeen nodes) -> gru_hidden. After autodiff, as the others.
//
// fuse_recurrent_sequences (issue 48), after fuse_lstm_cells and fuse_gru_cells: a chain of
// such steps, each reading its rows of one input projection P and its recurrent product
// h_prev R^T (the importer's unrolled LSTM or GRU direction), becomes one lstm_sequence or
// gru_sequence node, where the platform has a kernel for it (the CPU's runs every step in one
// parallel region, each thread on its own hidden units and rows of R). An LSTM classifier at
// batch 1 ran three nodes a step, the product's 1 MB of R spread over the team at each: per
// step a fork and join, two cell nodes and the engine's dispatch around a product of about
// 5 us.
//
// fuse_attention (issue 48): the attention block, matmul(softmax(scale(q kt) + mask), v) as
// exports write it (BERT's, ViT's with the scale on q, GPT-2's with a causal mask; reshapes
// merging a rank-4 product's leading dims around each product), becomes one attention node:
// per block of query rows the scores stay in cache, where five nodes passed over every
// [Tq, Tk] score matrix four times. With `transposes`, the four transposes that move the heads
// axis before T and back (q, k, v in, the result out) fold into it too: the node reads the
// projections' [.., T, H, d] values with a row stride of H * d and writes the [.., Tq, H, dv]
// value the output projection reads, where four copies ran. After autodiff, as the others.
//
// fuse_conv_residual and fuse_conv_epilogue (issue 18): what a CNN does after each
// convolution runs inside it as oneDNN post-ops. A convolution whose only reader adds a
// same-shape value (ResNet's residual) takes it as a sum post-op (fused_conv2d, in place over
// that value where the planner can); a convolution (fused or not, without an op yet) whose
// only reader is relu, clip, leaky_relu, sigmoid, silu or hard_swish takes that op as an eltwise
// post-op. The
// bias is always the convolution's own (oneDNN adds it in the same pass). Each saves a read
// and a write of the activation per node: the unfused graph passes over every conv output
// once more for its relu, and ResNet's over every block's output twice more.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "compiler/plan.hpp"

namespace hetgraph::detail {

namespace {

// Points a sparse table step (sparse_optimizer_update: its OptimizerRule; embedding_update: its
// EmbeddingStep) at column `band` of its gradient input.
void set_band(Attrs& a, std::int64_t band) {
  if (auto* r = std::get_if<OptimizerRule>(&a.payload)) {
    r->band = band;
    return;
  }
  EmbeddingStep e = a.get<EmbeddingStep>();
  e.band = band;
  a.set(e);
}

struct Fuser {
  Plan& p;
  const Capabilities* caps;
  bool heads_through = true;           // fuse_attention: fold the transposes around the block
  std::vector<int> readers;            // data readers per node
  std::vector<std::int64_t> assigned;  // per node: the variable it is the new value of, or -1

  Fuser(Plan& plan, const Capabilities* c)
      : p(plan), caps(c), readers(plan.nodes.size(), 0), assigned(plan.nodes.size(), -1) {
    for (const PlanNode& n : p.nodes) {
      if (n.op == OpKind::Assign) assigned[n.inputs[1]] = n.inputs[0];
      for (std::size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.reads_input(k)) ++readers[n.inputs[k]];
      }
    }
  }

  // A product that may be folded into its only reader.
  bool product(std::uint32_t m) const {
    const PlanNode& n = p.nodes[m];
    return (n.op == OpKind::MatMul || n.op == OpKind::FusedMatMul) &&
           n.storage == Storage::Computed && !n.fetched && readers[m] == 1 &&
           n.type.dtype == DType::f32;
  }
  static bool has_epilogue(const PlanNode& n) {
    return n.op == OpKind::FusedMatMul && n.attrs.get<MatmulEpilogue>().has_op;
  }
  static bool accumulates(const PlanNode& n) {
    return n.op == OpKind::FusedMatMul && n.attrs.get<MatmulEpilogue>().accumulate;
  }

  void kill(std::uint32_t dead, std::uint32_t into) {
    PlanNode& d = p.nodes[dead];
    d.storage = Storage::None;
    d.inputs.clear();
    d.fused_into = into;
  }

  // Node `at` rewritten as `op` with these attributes and inputs, absorbing node `absorbed`,
  // if the platform runs it. On a heterogeneous platform both must have been placed on the
  // same device (which then must run the fused node).
  bool rewrite(std::uint32_t at, OpKind op, Attrs attrs, std::vector<std::uint32_t> inputs,
               std::uint32_t absorbed) {
    if (p.nodes[absorbed].device != p.nodes[at].device) return false;
    PlanNode n = p.nodes[at];
    n.op = op;
    n.attrs = std::move(attrs);
    n.inputs = std::move(inputs);
    if (caps != nullptr && !caps->unsupported(p, n).empty()) return false;
    p.nodes[at] = std::move(n);
    return true;
  }

  void epilogues() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed || !op_def(n.op).epilogue) continue;
      const std::uint32_t m = n.inputs[0];
      const PlanNode& mm = p.nodes[m];
      if (!product(m) || has_epilogue(mm) || accumulates(mm) || mm.type != n.type) continue;
      Attrs a = mm.attrs;
      const float alpha =
          n.op == OpKind::Scale ? n.attrs.get_or_default<ScaleFactor>().factor : 1.0f;
      MatmulEpilogue e;
      e.has_op = true;
      e.op = n.op;
      e.alpha = alpha;
      a.set(e);
      if (rewrite(i, OpKind::FusedMatMul, std::move(a), {mm.inputs[0], mm.inputs[1]}, m))
        kill(m, i);
    }
  }

  // `biases`: also add(product, bias) with one bias value per column, through a reshape of
  // the product too (PlanOptions::matmul_bias).
  void accumulations(bool biases) {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed || n.op != OpKind::Add) continue;
      for (int side : {1, 0}) {
        std::uint32_t q = n.inputs[static_cast<std::size_t>(side)];
        const std::uint32_t other = n.inputs[static_cast<std::size_t>(1 - side)];
        const Shape& out = n.type.shape;
        // A bias: one value per column of the sum, the product's last dim (biases).
        const bool bias = biases && out.rank() >= 2 && p.nodes[other].type.dtype == DType::f32 &&
                          p.nodes[other].type.shape == Shape{out.dim(-1)};
        std::int64_t view = -1;
        if (p.nodes[q].storage == Storage::View && readers[q] == 1 &&
            (p.nodes[q].type == p.nodes[p.nodes[q].inputs[0]].type ||
             (bias && p.nodes[q].op == OpKind::Reshape &&
              p.nodes[p.nodes[q].inputs[0]].type.shape.dim(-1) == out.dim(-1)))) {
          view = q;
          q = p.nodes[q].inputs[0];
        }
        if (q == other || !product(q) || accumulates(p.nodes[q])) continue;
        if (!bias && (p.nodes[q].type != n.type || p.nodes[other].type != n.type)) continue;
        if (bias && (p.nodes[q].type.shape.numel() != out.numel() ||
                     p.nodes[q].type.shape.dim(-1) != out.dim(-1)))
          continue;
        const PlanNode& mm = p.nodes[q];
        // A fused product keeps its operands, transposes, alpha and epilogue.
        Attrs a = mm.attrs;
        MatmulEpilogue e =
            mm.op == OpKind::FusedMatMul ? mm.attrs.get<MatmulEpilogue>() : MatmulEpilogue{};
        e.accumulate = true;
        e.bias = bias;
        if (mm.type.shape != out) e.view.assign(out.dims().begin(), out.dims().end());
        a.set(e);
        if (!rewrite(i, OpKind::FusedMatMul, std::move(a), {mm.inputs[0], mm.inputs[1], other}, q))
          continue;
        kill(q, i);
        if (view >= 0) kill(static_cast<std::uint32_t>(view), i);
        break;
      }
    }
  }

  // A convolution whose value may be folded into its only reader: plain, or fused without an
  // elementwise op yet (the op comes last in the epilogue).
  bool convolution(std::uint32_t c) const {
    const PlanNode& n = p.nodes[c];
    const bool plain = n.op == OpKind::Conv2d ||
                       (n.op == OpKind::FusedConv2d && !n.attrs.get<ConvEpilogue>().has_op);
    return plain && n.storage == Storage::Computed && !n.fetched && readers[c] == 1 &&
           n.type.dtype == DType::f32;
  }
  // The epilogue a convolution already has: none for a plain conv2d (its bias is input 2).
  ConvEpilogue epilogue_of(const PlanNode& c) const {
    if (c.op == OpKind::FusedConv2d) return c.attrs.get<ConvEpilogue>();
    ConvEpilogue e;
    e.window = c.attrs.get<Window2d>();
    e.bias = c.inputs.size() == 3;
    return e;
  }

  // add(conv, r) or add(r, conv), same shapes -> fused_conv2d(x, w[, b], r) at the add.
  void conv_residuals() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed || n.op != OpKind::Add) continue;
      for (int side : {0, 1}) {
        const std::uint32_t q = n.inputs[static_cast<std::size_t>(side)];
        const std::uint32_t other = n.inputs[static_cast<std::size_t>(1 - side)];
        if (q == other || !convolution(q)) continue;
        const PlanNode& c = p.nodes[q];
        if (c.type != n.type || p.nodes[other].type != n.type) continue;  // no broadcasts
        ConvEpilogue e = epilogue_of(c);
        if (e.accumulate) continue;
        e.accumulate = true;
        Attrs a;
        a.set(e);
        std::vector<std::uint32_t> in = c.inputs;
        in.push_back(other);
        if (!rewrite(i, OpKind::FusedConv2d, std::move(a), std::move(in), q)) continue;
        kill(q, i);
        break;
      }
    }
  }

  // mul(x, sigmoid(x)) or mul(sigmoid(x), x) -> silu(x) at the mul.
  void silus() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed || n.op != OpKind::Mul || n.type.dtype != DType::f32)
        continue;
      for (int side : {0, 1}) {
        const std::uint32_t s = n.inputs[static_cast<std::size_t>(side)];
        const std::uint32_t x = n.inputs[static_cast<std::size_t>(1 - side)];
        const PlanNode& sig = p.nodes[s];
        if (sig.op != OpKind::Sigmoid || sig.inputs[0] != x || sig.storage != Storage::Computed ||
            sig.fetched || readers[s] != 1 || sig.type != n.type || p.nodes[x].type != n.type)
          continue;
        if (!rewrite(i, OpKind::Silu, Attrs{}, {x}, s)) continue;
        kill(s, i);
        break;
      }
    }
  }

  // A scalar constant's value; NaN for anything else.
  float scalar(std::uint32_t c) const {
    const PlanNode& n = p.nodes[c];
    if (n.storage != Storage::Constant || !n.f32_values || n.f32_values->size() != 1)
      return std::numeric_limits<float>::quiet_NaN();
    return (*n.f32_values)[0];
  }
  // A value the layer-norm pattern absorbs: computed, float, read `uses` times, only by the
  // pattern (the caller checks the readers), not fetched, not a variable's new value.
  bool absorbable(std::uint32_t i, OpKind op, int uses) const {
    const PlanNode& n = p.nodes[i];
    return n.op == op && n.storage == Storage::Computed && !n.fetched && readers[i] == uses &&
           n.type.dtype == DType::f32 && assigned[i] < 0;
  }
  // reduce_mean over the last axis, keeping it.
  bool last_axis_mean(std::uint32_t i, int uses) const {
    if (!absorbable(i, OpKind::ReduceMean, uses)) return false;
    const PlanNode& n = p.nodes[i];
    const int rank = n.type.shape.rank();
    return n.attrs.keepdims && rank >= 1 && (n.attrs.axis == -1 || n.attrs.axis == rank - 1);
  }

  // add(mul(div(d, sqrt(add(reduce_mean(pow(d, 2) or mul(d, d)), eps))), gamma), beta) with
  // d = sub(x, reduce_mean(x)), both means over the last axis: LayerNorm as opset-14 exports
  // write it (PyTorch's nn.LayerNorm) -> layer_norm(x, gamma, beta) at the last add.
  void layer_norms() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& y = p.nodes[i];
      if (y.storage != Storage::Computed || y.op != OpKind::Add || y.type.dtype != DType::f32 ||
          y.type.shape.rank() < 1)
        continue;
      const Shape row{y.type.shape.dim(-1)};
      for (int side : {0, 1}) {
        const std::uint32_t o = y.inputs[static_cast<std::size_t>(side)];
        const std::uint32_t beta = y.inputs[static_cast<std::size_t>(1 - side)];
        if (!absorbable(o, OpKind::Mul, 1) || p.nodes[beta].type.shape != row) continue;
        for (int side2 : {0, 1}) {
          const std::uint32_t q = p.nodes[o].inputs[static_cast<std::size_t>(side2)];
          const std::uint32_t gamma = p.nodes[o].inputs[static_cast<std::size_t>(1 - side2)];
          if (!absorbable(q, OpKind::Div, 1) || p.nodes[gamma].type.shape != row) continue;
          if (layer_norm_at(i, o, q, gamma, beta)) break;
        }
        if (p.nodes[i].op == OpKind::LayerNorm) break;
      }
    }
  }
  // The rest of the pattern below the division q = d / s; rewrites node i when it matches.
  bool layer_norm_at(std::uint32_t i, std::uint32_t o, std::uint32_t q, std::uint32_t gamma,
                     std::uint32_t beta) {
    const std::uint32_t d = p.nodes[q].inputs[0], s = p.nodes[q].inputs[1];
    if (!absorbable(s, OpKind::Sqrt, 1)) return false;
    const std::uint32_t e = p.nodes[s].inputs[0];
    if (!absorbable(e, OpKind::Add, 1)) return false;
    std::uint32_t v = p.nodes[e].inputs[0];
    float eps = scalar(p.nodes[e].inputs[1]);
    if (std::isnan(eps)) {
      v = p.nodes[e].inputs[1];
      eps = scalar(p.nodes[e].inputs[0]);
    }
    if (std::isnan(eps) || !(eps >= 0.0f) || !last_axis_mean(v, 1)) return false;
    const std::uint32_t sq = p.nodes[v].inputs[0];
    const PlanNode& sqn = p.nodes[sq];
    int d_uses = 0;
    if (absorbable(sq, OpKind::Pow, 1) && sqn.inputs[0] == d && scalar(sqn.inputs[1]) == 2.0f) {
      d_uses = 2;  // pow and the division
    } else if (absorbable(sq, OpKind::Mul, 1) && sqn.inputs[0] == d && sqn.inputs[1] == d) {
      d_uses = 3;  // mul reads it twice
    } else {
      return false;
    }
    if (!absorbable(d, OpKind::Sub, d_uses)) return false;
    const std::uint32_t x = p.nodes[d].inputs[0], m = p.nodes[d].inputs[1];
    if (!last_axis_mean(m, 1) || p.nodes[m].inputs[0] != x) return false;
    if (p.nodes[x].type != p.nodes[i].type) return false;
    const std::uint32_t absorbed[] = {o, q, s, e, v, sq, d, m};
    for (std::uint32_t k : absorbed) {
      if (p.nodes[k].device != p.nodes[i].device) return false;
    }
    Attrs a;
    a.set(LayerNormEps{eps});
    if (!rewrite(i, OpKind::LayerNorm, std::move(a), {x, gamma, beta}, o)) return false;
    for (std::uint32_t k : absorbed) kill(k, i);
    return true;
  }

  // slice(src, last axis, [k * H, k * H + width)) of a float [B, n] value, read once: src, k.
  bool band(std::uint32_t s, std::int64_t H, std::int64_t width, std::uint32_t& src,
            std::int8_t& k) const {
    if (!absorbable(s, OpKind::Slice, 1)) return false;
    const PlanNode& sn = p.nodes[s];
    const TensorType& st = p.nodes[sn.inputs[0]].type;
    if (st.dtype != DType::f32 || st.shape.rank() != 2 ||
        (sn.attrs.axis != 1 && sn.attrs.axis != -1))
      return false;
    const SliceRange r = sn.attrs.get<SliceRange>();
    if (r.begin < 0 || r.begin % H != 0 || r.end - r.begin != width || r.end > st.shape.dim(1))
      return false;
    src = sn.inputs[0];
    k = static_cast<std::int8_t>(r.begin / H);
    return true;
  }
  // act(slice(G, last axis, [k * H, (k + 1) * H))) with act sigmoid or tanh, both read once,
  // G float [B, 4H]: gate k of G. `g` is the G the other gates found (kNoNode: none yet).
  static constexpr std::uint32_t kNoNode = ~0u;
  bool lstm_gate(std::uint32_t act, OpKind want, std::int64_t H, std::uint32_t& g,
                 std::int8_t& k) const {
    std::uint32_t src = kNoNode;
    if (!absorbable(act, want, 1) || !band(p.nodes[act].inputs[0], H, H, src, k)) return false;
    if (p.nodes[src].type.shape.dim(1) != 4 * H || (g != kNoNode && g != src)) return false;
    g = src;
    return true;
  }
  // mul(sigmoid(gate i), tanh(gate g)), either order, at node m (whose own readers the caller
  // checks): the gates' activations and slices go to `absorbed`.
  bool lstm_input_term(std::uint32_t m, std::int64_t H, std::uint32_t& g, LstmGates& k,
                       std::vector<std::uint32_t>& absorbed) const {
    const PlanNode& n = p.nodes[m];
    if (n.op != OpKind::Mul) return false;
    for (int side : {0, 1}) {
      std::uint32_t gg = g;
      const std::uint32_t a = n.inputs[static_cast<std::size_t>(side)],
                          b = n.inputs[static_cast<std::size_t>(1 - side)];
      if (a == b || !lstm_gate(a, OpKind::Sigmoid, H, gg, k.i) ||
          !lstm_gate(b, OpKind::Tanh, H, gg, k.g))
        continue;
      g = gg;
      for (std::uint32_t act : {a, b})
        absorbed.insert(absorbed.end(), {act, p.nodes[act].inputs[0]});
      return true;
    }
    return false;
  }

  // An LSTM step's tail as the ONNX importer (and a hand-written cell) spells it: c = add(
  // mul(sigmoid(f), c_prev), mul(sigmoid(i), tanh(g))) (or mul(sigmoid(i), tanh(g)) without
  // a previous state), h = mul(sigmoid(o), tanh(c)), the gates four quarters of one G [B, 4H]:
  // c becomes lstm_cell(G[, c_prev]) and h lstm_hidden(G, c). c keeps its readers (the next
  // step, the outputs); every other value must be read by the pattern alone.
  void lstm_cells() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& h = p.nodes[i];
      if (h.storage != Storage::Computed || h.op != OpKind::Mul || h.type.dtype != DType::f32 ||
          h.type.shape.rank() != 2)
        continue;
      const std::int64_t H = h.type.shape.dim(1);
      for (int side : {0, 1}) {
        const std::uint32_t so = h.inputs[static_cast<std::size_t>(side)],
                            tc = h.inputs[static_cast<std::size_t>(1 - side)];
        std::uint32_t g = kNoNode;
        LstmGates k;
        if (so == tc || !absorbable(tc, OpKind::Tanh, 1) ||
            !lstm_gate(so, OpKind::Sigmoid, H, g, k.o))
          continue;
        if (lstm_cell_at(p.nodes[tc].inputs[0], g, H, k) && lstm_hidden_at(i, so, tc, g, k)) break;
      }
    }
  }
  // c at G's gates (k.o found by the caller): lstm_cell(G[, c_prev]) when it matches.
  bool lstm_cell_at(std::uint32_t c, std::uint32_t g, std::int64_t H, LstmGates& k) {
    const PlanNode& cn = p.nodes[c];
    if (cn.storage != Storage::Computed || cn.type.dtype != DType::f32 ||
        cn.type.shape != Shape{p.nodes[g].type.shape.dim(0), H})
      return false;
    std::vector<std::uint32_t> absorbed, inputs{g};
    if (cn.op == OpKind::Mul) {
      if (!lstm_input_term(c, H, g, k, absorbed)) return false;
    } else if (cn.op == OpKind::Add) {
      bool found = false;
      for (int side : {0, 1}) {
        const std::uint32_t fm = cn.inputs[static_cast<std::size_t>(side)],
                            im = cn.inputs[static_cast<std::size_t>(1 - side)];
        if (fm == im || !absorbable(fm, OpKind::Mul, 1) || !absorbable(im, OpKind::Mul, 1))
          continue;
        std::vector<std::uint32_t> ab{fm, im};
        LstmGates kk = k;
        std::uint32_t gg = g;
        if (!lstm_input_term(im, H, gg, kk, ab)) continue;
        const PlanNode& f = p.nodes[fm];
        for (int fs : {0, 1}) {
          const std::uint32_t sf = f.inputs[static_cast<std::size_t>(fs)],
                              cp = f.inputs[static_cast<std::size_t>(1 - fs)];
          if (sf == cp || p.nodes[cp].type != cn.type ||
              !lstm_gate(sf, OpKind::Sigmoid, H, gg, kk.f))
            continue;
          ab.insert(ab.end(), {sf, p.nodes[sf].inputs[0]});
          inputs.push_back(cp);
          found = true;
          break;
        }
        if (!found) continue;
        absorbed = std::move(ab);
        k = kk;
        break;
      }
      if (!found) return false;
    } else {
      return false;
    }
    for (std::uint32_t a : absorbed) {
      if (p.nodes[a].device != cn.device) return false;
    }
    Attrs a;
    a.set(k);
    if (!rewrite(c, OpKind::LstmCell, std::move(a), std::move(inputs), c)) return false;
    for (std::uint32_t d : absorbed) kill(d, c);
    return true;
  }
  bool lstm_hidden_at(std::uint32_t h, std::uint32_t so, std::uint32_t tc, std::uint32_t g,
                      const LstmGates& k) {
    const std::uint32_t slice_o = p.nodes[so].inputs[0], c = p.nodes[tc].inputs[0];
    if (p.nodes[slice_o].device != p.nodes[h].device || p.nodes[tc].device != p.nodes[h].device)
      return false;
    Attrs a;
    a.set(k);
    if (!rewrite(h, OpKind::LstmHidden, std::move(a), {g, c}, so)) return false;
    for (std::uint32_t d : {so, slice_o, tc}) kill(d, h);
    return true;
  }

  // One step of a recurrent direction after fuse_lstm_cells and fuse_gru_cells, as the
  // importer unrolls ONNX's LSTM and GRU: X rows [x_row, x_row + B) of an input projection P (a
  // slice along axis 0) and the recurrent product h_prev R^T with R [gH, H], read by nothing
  // else; then for the LSTM G = add(X, product) (either order), c = lstm_cell(G, c_prev),
  // h = lstm_hidden(G, c), G read by the cells alone; for the GRU h = gru_hidden(X, product
  // (+ Rb, a bias [3H]), h_prev).
  struct SeqStep {
    bool lstm = false;
    std::uint32_t h = kNoNode, c = kNoNode, c_prev = kNoNode, g = kNoNode, rc = kNoNode;
    std::uint32_t m = kNoNode, x = kNoNode, p = kNoNode, r = kNoNode, rb = kNoNode;
    std::uint32_t h_prev = kNoNode;
    std::int64_t x_row = 0;
  };
  // X as a slice of rows of a projection [rows, width] (width the gates' columns).
  bool projection_rows(std::uint32_t xi, const TensorType& want, SeqStep& s) const {
    const PlanNode& x = p.nodes[xi];
    if (x.op != OpKind::Slice || x.fetched || readers[xi] != 1 || x.type != want ||
        (x.storage != Storage::Computed && x.storage != Storage::View) ||
        (x.attrs.axis != 0 && x.attrs.axis != -2))
      return false;
    const TensorType& pt = p.nodes[x.inputs[0]].type;
    const SliceRange r = x.attrs.get_or_default<SliceRange>();
    if (pt.shape.rank() != 2 || pt.shape.dim(1) != want.shape.dim(1) || r.begin < 0 ||
        r.end != r.begin + want.shape.dim(0))
      return false;
    s.x = xi, s.p = x.inputs[0], s.x_row = r.begin;
    return true;
  }
  // m = matmul(h_prev, R, transposed R [gH, H]), read once.
  bool recurrent_product(std::uint32_t m, std::int64_t gates, std::int64_t H, SeqStep& s) const {
    const PlanNode& mn = p.nodes[m];
    if (!absorbable(m, OpKind::MatMul, 1) || mn.attrs.trans_a || !mn.attrs.trans_b ||
        p.nodes[mn.inputs[1]].type.shape != Shape{gates * H, H})
      return false;
    s.m = m, s.h_prev = mn.inputs[0], s.r = mn.inputs[1];
    return true;
  }
  bool lstm_step_at(std::uint32_t hi, SeqStep& s) const {
    const PlanNode& h = p.nodes[hi];
    if (h.op != OpKind::LstmHidden || h.storage != Storage::Computed || assigned[hi] >= 0)
      return false;
    s.lstm = true, s.h = hi, s.g = h.inputs[0], s.c = h.inputs[1];
    const PlanNode& c = p.nodes[s.c];
    if (c.op != OpKind::LstmCell || c.storage != Storage::Computed || c.inputs.size() != 2 ||
        c.inputs[0] != s.g || assigned[s.c] >= 0 ||
        !(c.attrs.get<LstmGates>() == h.attrs.get<LstmGates>()) || !absorbable(s.g, OpKind::Add, 2))
      return false;
    s.c_prev = c.inputs[1];
    const PlanNode& g = p.nodes[s.g];
    const std::int64_t H = h.type.shape.dim(1);
    for (int side : {0, 1}) {
      SeqStep t = s;
      if (g.inputs[0] != g.inputs[1] &&
          recurrent_product(g.inputs[static_cast<std::size_t>(side)], 4, H, t) &&
          projection_rows(g.inputs[static_cast<std::size_t>(1 - side)], g.type, t) &&
          p.nodes[t.h_prev].type == h.type && p.nodes[s.c_prev].type == h.type) {
        s = t;
        return same_device(s);
      }
    }
    return false;
  }
  bool gru_step_at(std::uint32_t hi, SeqStep& s) const {
    const PlanNode& h = p.nodes[hi];
    if (h.op != OpKind::GruHidden || h.storage != Storage::Computed || assigned[hi] >= 0)
      return false;
    s.h = hi, s.rc = h.inputs[1];
    const std::int64_t H = h.type.shape.dim(1);
    const TensorType& xt = p.nodes[h.inputs[0]].type;
    if (!projection_rows(h.inputs[0], xt, s) || p.nodes[s.rc].type != xt) return false;
    if (!recurrent_product(s.rc, 3, H, s)) {
      const PlanNode& a = p.nodes[s.rc];
      if (!absorbable(s.rc, OpKind::Add, 1)) return false;
      bool found = false;
      for (int side : {0, 1}) {
        const std::uint32_t m = a.inputs[static_cast<std::size_t>(side)],
                            b = a.inputs[static_cast<std::size_t>(1 - side)];
        if (m != b && p.nodes[b].type == TensorType{Shape{3 * H}, DType::f32} &&
            p.nodes[m].type == xt && recurrent_product(m, 3, H, s)) {
          s.rb = b;
          found = true;
          break;
        }
      }
      if (!found) return false;
    }
    if (s.h_prev != h.inputs[2] || p.nodes[s.h_prev].type != h.type) return false;
    return same_device(s);
  }
  bool same_device(const SeqStep& s) const {
    for (std::uint32_t n : {s.c, s.g, s.rc, s.m, s.x}) {
      if (n != kNoNode && p.nodes[n].device != p.nodes[s.h].device) return false;
    }
    return true;
  }
  // Chains of steps, each reading the h (and c) of the one before, the same R, P (and Rb) and
  // the next rows of P (the rows before, in a reverse direction) -> one lstm_sequence or
  // gru_sequence node: every h becomes a slice of its value (its readers keep reading it), an
  // LSTM's last c too; the products, sums and the other cells do no work. A c between steps
  // must be read by nothing else (nor fetched).
  void recurrent_sequences() {
    std::vector<SeqStep> steps;
    std::vector<std::int64_t> step_of(p.nodes.size(), -1);
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      SeqStep s;
      if (lstm_step_at(i, s) || gru_step_at(i, (s = SeqStep{}))) {
        step_of[i] = static_cast<std::int64_t>(steps.size());
        steps.push_back(s);
      }
    }
    std::vector<std::int64_t> next(steps.size(), -1), prev(steps.size(), -1);
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const SeqStep& s = steps[k];
      const std::int64_t j = step_of[s.h_prev];
      if (j < 0) continue;
      const SeqStep& q = steps[static_cast<std::size_t>(j)];
      const std::int64_t B = p.nodes[s.h].type.shape.dim(0);
      if (q.lstm != s.lstm || q.r != s.r || q.p != s.p || q.rb != s.rb ||
          std::abs(s.x_row - q.x_row) != B || next[static_cast<std::size_t>(j)] >= 0 ||
          (s.lstm && (q.c != s.c_prev || readers[q.c] != 2 || p.nodes[q.c].fetched)))
        continue;
      next[static_cast<std::size_t>(j)] = static_cast<std::int64_t>(k);
      prev[k] = j;
    }
    for (std::size_t k = 0; k < steps.size(); ++k) {
      if (prev[k] >= 0 || next[k] < 0) continue;
      std::vector<std::size_t> chain{k};
      const bool reverse = steps[static_cast<std::size_t>(next[k])].x_row < steps[k].x_row;
      for (std::int64_t n = next[k]; n >= 0; n = next[static_cast<std::size_t>(n)]) {
        if ((steps[static_cast<std::size_t>(n)].x_row < steps[chain.back()].x_row) != reverse)
          break;
        chain.push_back(static_cast<std::size_t>(n));
      }
      if (chain.size() >= 2) sequence(chain, steps, reverse);
    }
  }
  void sequence(const std::vector<std::size_t>& chain, const std::vector<SeqStep>& steps,
                bool reverse) {
    const SeqStep& first = steps[chain.front()];
    const SeqStep& last = steps[chain.back()];
    const PlanNode& h = p.nodes[first.h];
    const std::int64_t B = h.type.shape.dim(0), H = h.type.shape.dim(1);
    const auto T = static_cast<std::int64_t>(chain.size());
    SequenceSpec spec;
    if (first.lstm) {
      spec.lstm = h.attrs.get<LstmGates>();
    } else {
      spec.gru = h.attrs.get<GruGates>();
    }
    spec.steps = T;
    spec.first_row = first.x_row;
    spec.reverse = reverse;
    spec.bias = first.rb != kNoNode;
    // At a node after every input of the chain and before its first h: the LSTM's first cell
    // (after G and c0); for the GRU the later of the first step's X and product.
    const std::uint32_t at =
        first.lstm ? first.c : std::max(first.x, first.rb != kNoNode ? first.rc : first.m);
    PlanNode n = p.nodes[at];
    n.op = first.lstm ? OpKind::LstmSequence : OpKind::GruSequence;
    n.attrs = Attrs{};
    n.attrs.set(spec);
    n.inputs = {first.p, first.r, first.h_prev};
    if (first.lstm) n.inputs.push_back(first.c_prev);
    if (spec.bias) n.inputs.push_back(first.rb);
    n.type = {Shape{(T + (first.lstm ? 1 : 0)) * B, H}, DType::f32};
    n.storage = Storage::Computed;
    n.fused_into = -1;
    if (caps != nullptr && !caps->unsupported(p, n).empty()) return;
    // A new value: the user name and graph id of the node it replaces are not its.
    if (n.gid != kNoGid) p.index_of.set(n.gid, GidIndex::kNone);
    n.gid = kNoGid;
    n.name.clear();
    n.label = std::string(op_name(n.op)) + " (" + std::to_string(T) + " steps from " +
              p.nodes[first.h].label + ")";
    p.nodes[at] = std::move(n);
    // An h or the last c keeps its value, so its name and graph id.
    auto slice_of = [&](std::uint32_t i, std::int64_t row) {
      PlanNode& v = p.nodes[i];
      v.op = OpKind::Slice;
      v.attrs = Attrs{};
      v.attrs.axis = 0;
      v.attrs.set(SliceRange{row * B, (row + 1) * B});
      v.inputs = {at};
      v.storage = Storage::Computed;  // slice_views makes it a view
    };
    for (std::size_t t = 0; t < chain.size(); ++t) {
      const SeqStep& s = steps[chain[t]];
      for (std::uint32_t d : {s.g, s.rc, s.m, s.x}) {
        if (d != kNoNode && d != at) kill(d, at);
      }
      if (s.lstm && s.c != at && s.c != last.c) kill(s.c, at);
      slice_of(s.h, static_cast<std::int64_t>(t));
    }
    if (first.lstm) slice_of(last.c, T);
    if (!reverse) concat_as_view(chain, steps, at);
  }
  // The importer's Y of a forward direction, concat(reshape(h_t) for every t in order) along
  // axis 0, is the sequence's first T * B rows: the first reshape becomes that slice and the
  // concat a reshape of it, where a concat copied each step's rows.
  void concat_as_view(const std::vector<std::size_t>& chain, const std::vector<SeqStep>& steps,
                      std::uint32_t at) {
    const std::uint32_t h0 = steps[chain.front()].h;
    for (std::uint32_t ci = 0; ci < p.nodes.size(); ++ci) {
      const PlanNode& cn = p.nodes[ci];
      if (cn.op != OpKind::Concat || cn.storage != Storage::Computed || cn.attrs.axis != 0 ||
          cn.inputs.size() != chain.size() || p.nodes[cn.inputs[0]].inputs.empty() ||
          p.nodes[cn.inputs[0]].inputs[0] != h0)
        continue;
      bool whole = true;
      for (std::size_t t = 0; t < chain.size() && whole; ++t) {
        const std::uint32_t r = cn.inputs[t];
        const PlanNode& rn = p.nodes[r];
        whole = rn.op == OpKind::Reshape && readers[r] == 1 && !rn.fetched && assigned[r] < 0 &&
                rn.inputs[0] == steps[chain[t]].h && rn.device == cn.device;
      }
      if (!whole) return;
      const std::uint32_t first = cn.inputs[0];
      const std::vector<std::uint32_t> rest(cn.inputs.begin() + 1, cn.inputs.end());
      const std::int64_t rows =
          static_cast<std::int64_t>(chain.size()) * p.nodes[h0].type.shape.dim(0);
      PlanNode& f = p.nodes[first];
      if (f.gid != kNoGid) p.index_of.set(f.gid, GidIndex::kNone);  // a new value
      f.gid = kNoGid;
      f.name.clear();
      f.op = OpKind::Slice;
      f.attrs = Attrs{};
      f.attrs.axis = 0;
      f.attrs.set(SliceRange{0, rows});
      f.inputs = {at};
      f.storage = Storage::Computed;  // slice_views makes it a view
      f.type = {Shape{rows, p.nodes[h0].type.shape.dim(1)}, DType::f32};
      PlanNode& c = p.nodes[ci];
      const Shape shape = c.type.shape;
      c.op = OpKind::Reshape;
      c.attrs = Attrs{};
      c.attrs.set(
          ReshapeTarget{std::vector<std::int64_t>(shape.dims().begin(), shape.dims().end())});
      c.inputs = {first};
      c.storage = Storage::View;
      for (std::uint32_t r : rest) kill(r, ci);
      return;
    }
  }

  // GELU as exports before opset 20 write it (PyTorch's nn.GELU and F.gelu, BERT's, ViT's and
  // ConvNeXt's MLPs): y = x * 0.5 * (1 + erf(x / sqrt 2)), the three factors' products in any
  // association and order, the division possibly a product by 1 / sqrt 2 -> gelu(x) at y.
  void gelus() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& y = p.nodes[i];
      if (y.storage != Storage::Computed || y.op != OpKind::Mul || y.type.dtype != DType::f32)
        continue;
      for (int side : {0, 1}) {
        const std::uint32_t inner = y.inputs[static_cast<std::size_t>(side)],
                            third = y.inputs[static_cast<std::size_t>(1 - side)];
        if (inner != third && absorbable(inner, OpKind::Mul, 1) && gelu_at(i, inner, third)) break;
      }
    }
  }
  // 1 + erf(x / sqrt 2) (either order) at node s, read once: x, or kNoNode.
  std::uint32_t gelu_erf_term(std::uint32_t s, std::vector<std::uint32_t>& absorbed) const {
    if (!absorbable(s, OpKind::Add, 1)) return kNoNode;
    for (int side : {0, 1}) {
      const std::uint32_t e = p.nodes[s].inputs[static_cast<std::size_t>(side)];
      if (scalar(p.nodes[s].inputs[static_cast<std::size_t>(1 - side)]) != 1.0f ||
          !absorbable(e, OpKind::Erf, 1))
        continue;
      const std::uint32_t t = p.nodes[e].inputs[0];
      const PlanNode& tn = p.nodes[t];
      const bool div = absorbable(t, OpKind::Div, 1), mul = absorbable(t, OpKind::Mul, 1);
      if (!div && !mul) continue;
      for (int ts : {0, 1}) {
        if (div && ts == 1) break;  // x / sqrt 2 only
        const float c = scalar(tn.inputs[static_cast<std::size_t>(1 - ts)]);
        const float want = div ? 1.41421356237f : 0.707106781187f;
        if (!(std::fabs(c - want) <= 1e-6f)) continue;
        absorbed.insert(absorbed.end(), {s, e, t});
        return tn.inputs[static_cast<std::size_t>(ts)];
      }
    }
    return kNoNode;
  }
  // The tanh form (GPT-2's gelu_new, PyTorch's approximate="tanh"): 1 + tanh(c (x + k x^3))
  // at node s, each sum and product in either order, c = sqrt(2 / pi), k = 0.044715, x^3 as
  // pow(x, 3), x (x x) or (x x) x, read once: x, or kNoNode.
  std::uint32_t gelu_tanh_term(std::uint32_t s, std::vector<std::uint32_t>& absorbed) const {
    auto near = [](float v, float want) { return std::fabs(v - want) <= 1e-6f; };
    // The product of node m's inputs with a scalar near `want`: the other input, or kNoNode.
    auto times = [&](std::uint32_t m, float want) {
      if (!absorbable(m, OpKind::Mul, 1)) return kNoNode;
      const PlanNode& mn = p.nodes[m];
      for (int side : {0, 1}) {
        if (near(scalar(mn.inputs[static_cast<std::size_t>(1 - side)]), want))
          return mn.inputs[static_cast<std::size_t>(side)];
      }
      return kNoNode;
    };
    // x^3 at node q: x, or kNoNode.
    auto cube = [&](std::uint32_t q, std::vector<std::uint32_t>& got) {
      const PlanNode& qn = p.nodes[q];
      if (absorbable(q, OpKind::Pow, 1) && scalar(qn.inputs[1]) == 3.0f) {
        got.push_back(q);
        return qn.inputs[0];
      }
      if (!absorbable(q, OpKind::Mul, 1)) return kNoNode;
      for (int side : {0, 1}) {
        const std::uint32_t sq = qn.inputs[static_cast<std::size_t>(side)],
                            x = qn.inputs[static_cast<std::size_t>(1 - side)];
        if (absorbable(sq, OpKind::Mul, 1) && p.nodes[sq].inputs[0] == x &&
            p.nodes[sq].inputs[1] == x) {
          got.insert(got.end(), {q, sq});
          return x;
        }
      }
      return kNoNode;
    };
    if (!absorbable(s, OpKind::Add, 1)) return kNoNode;
    for (int side : {0, 1}) {
      const std::uint32_t th = p.nodes[s].inputs[static_cast<std::size_t>(side)];
      if (scalar(p.nodes[s].inputs[static_cast<std::size_t>(1 - side)]) != 1.0f ||
          !absorbable(th, OpKind::Tanh, 1))
        continue;
      const std::uint32_t scaled = p.nodes[th].inputs[0];
      const std::uint32_t u = times(scaled, 0.7978845608f);
      if (u == kNoNode || !absorbable(u, OpKind::Add, 1)) continue;
      for (int us : {0, 1}) {
        const std::uint32_t x = p.nodes[u].inputs[static_cast<std::size_t>(us)],
                            kx3 = p.nodes[u].inputs[static_cast<std::size_t>(1 - us)];
        const std::uint32_t x3 = times(kx3, 0.044715f);
        std::vector<std::uint32_t> got{s, th, scaled, u, kx3};
        if (x3 == kNoNode || cube(x3, got) != x) continue;
        absorbed.insert(absorbed.end(), got.begin(), got.end());
        return x;
      }
    }
    return kNoNode;
  }
  // y = mul(inner, third): {inner's two factors, third} = {x, 0.5, 1 + erf(x / sqrt 2)} (gelu)
  // or {x, 0.5, 1 + tanh(c (x + k x^3))} (gelu_tanh).
  bool gelu_at(std::uint32_t y, std::uint32_t inner, std::uint32_t third) {
    const std::uint32_t a = p.nodes[inner].inputs[0], b = p.nodes[inner].inputs[1];
    const std::uint32_t factors[3] = {a, b, third};
    for (int half = 0; half < 3; ++half) {  // which factor is 0.5
      if (scalar(factors[half]) != 0.5f) continue;
      for (int term = 0; term < 3; ++term) {  // which is 1 + erf(x / sqrt 2)
        if (term == half) continue;
        const std::uint32_t x = factors[3 - half - term];
        std::vector<std::uint32_t> absorbed{inner};
        OpKind op = OpKind::Gelu;
        if (gelu_erf_term(factors[term], absorbed) != x) {
          absorbed.resize(1);
          op = OpKind::GeluTanh;
          if (gelu_tanh_term(factors[term], absorbed) != x) continue;
        }
        if (p.nodes[x].type != p.nodes[y].type) continue;
        for (std::uint32_t d : absorbed) {
          if (p.nodes[d].device != p.nodes[y].device) return false;
        }
        if (!rewrite(y, op, Attrs{}, {x}, inner)) return false;
        for (std::uint32_t d : absorbed) kill(d, y);
        return true;
      }
    }
    return false;
  }

  // One value per channel of a [N, C, ...] value, [C, 1, ...] or [1, C, 1, ...], float, and a
  // parameter (a constant, variable or input), as a normalisation's scale and shift are: a
  // value computed in the run is another op's operand (at batch 1 an LSTM step's products
  // and sums have one value per channel too, and belong to fuse_lstm_cells).
  bool per_channel(std::uint32_t v, const Shape& x) const {
    const Shape& s = p.nodes[v].type.shape;
    const Storage st = p.nodes[v].storage;
    if (st != Storage::Constant && st != Storage::Variable && st != Storage::Input) return false;
    if (p.nodes[v].type.dtype != DType::f32 || s.numel() != x.dim(1) || s.rank() > x.rank())
      return false;
    // Aligned to x's trailing axes (broadcasting): every axis but x's axis 1 has size 1.
    const int lead = x.rank() - s.rank();
    for (int a = 0; a < s.rank(); ++a) {
      if (a + lead != 1 && s[a] != 1) return false;
    }
    return s.rank() + 1 >= x.rank();  // reaches axis 1
  }
  // add(mul(x, s), t) (operands in either order), s and t per channel of x, the product read
  // once: x, s, t; kNoNode for x where it does not match.
  std::array<std::uint32_t, 3> affine(std::uint32_t y) const {
    const PlanNode& n = p.nodes[y];
    if (n.op != OpKind::Add || n.type.dtype != DType::f32 || n.type.shape.rank() < 2)
      return {kNoNode, 0, 0};
    for (int side : {0, 1}) {
      const std::uint32_t m = n.inputs[static_cast<std::size_t>(side)],
                          t = n.inputs[static_cast<std::size_t>(1 - side)];
      if (!absorbable(m, OpKind::Mul, 1) || !per_channel(t, n.type.shape)) continue;
      for (int ms : {0, 1}) {
        const std::uint32_t x = p.nodes[m].inputs[static_cast<std::size_t>(ms)],
                            sc = p.nodes[m].inputs[static_cast<std::size_t>(1 - ms)];
        if (p.nodes[x].type == n.type && per_channel(sc, n.type.shape) &&
            p.nodes[m].device == n.device)
          return {x, sc, t};
      }
    }
    return {kNoNode, 0, 0};
  }
  // relu(add(mul(x, s), t)) -> channel_affine(x, s, t) with relu at the relu, then the
  // remaining add(mul(x, s), t) -> channel_affine(x, s, t) at the add.
  void channel_affines() {
    for (int with_relu : {1, 0}) {
      for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
        const PlanNode& n = p.nodes[i];
        if (n.storage != Storage::Computed) continue;
        std::uint32_t y = i;
        if (with_relu != 0) {
          if (n.op != OpKind::Relu || !absorbable(n.inputs[0], OpKind::Add, 1) ||
              p.nodes[n.inputs[0]].device != n.device)
            continue;
          y = n.inputs[0];
        }
        const auto [x, s, t] = affine(y);
        if (x == kNoNode) continue;
        const std::uint32_t m =
            p.nodes[y].inputs[0] != t ? p.nodes[y].inputs[0] : p.nodes[y].inputs[1];
        Attrs a;
        a.set(ChannelAffineAct{with_relu != 0});
        if (!rewrite(i, OpKind::ChannelAffine, std::move(a), {x, s, t}, m)) continue;
        kill(m, i);
        if (y != i) kill(y, i);
      }
    }
  }

  // A GRU step with linear_before_reset as the importer unrolls it (PyTorch's export), X the
  // step's input projection and Rc its recurrent one, [B, 3H]:
  //   zr = add(slice(X, [0, 2H)), slice(Rc, [0, 2H))), z = sigmoid(slice(zr, z's third)),
  //   r = sigmoid(slice(zr, r's third)), n = tanh(add(slice(X, h), mul(r, slice(Rc, h)))),
  //   y = add(mul(sub(1, z), n), mul(z, h_prev))
  // (operands of adds and products in either order) -> gru_hidden(X, Rc, h_prev) at y, where
  // every value but X, Rc and h_prev is read by the pattern alone.
  void gru_cells() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& y = p.nodes[i];
      if (y.storage != Storage::Computed || y.op != OpKind::Add || y.type.dtype != DType::f32 ||
          y.type.shape.rank() != 2)
        continue;
      for (int side : {0, 1}) {
        const std::uint32_t m1 = y.inputs[static_cast<std::size_t>(side)],
                            m2 = y.inputs[static_cast<std::size_t>(1 - side)];
        if (m1 != m2 && absorbable(m1, OpKind::Mul, 1) && absorbable(m2, OpKind::Mul, 1) &&
            gru_at(i, m1, m2))
          break;
      }
    }
  }
  // y = add(m1, m2): m2 = mul(z, h_prev), m1 = mul(sub(1, z), n).
  bool gru_at(std::uint32_t y, std::uint32_t m1, std::uint32_t m2) {
    for (int zs : {0, 1}) {
      const std::uint32_t z = p.nodes[m2].inputs[static_cast<std::size_t>(zs)],
                          hp = p.nodes[m2].inputs[static_cast<std::size_t>(1 - zs)];
      if (z == hp || !absorbable(z, OpKind::Sigmoid, 2) || p.nodes[hp].type != p.nodes[y].type)
        continue;
      for (int ss : {0, 1}) {
        const std::uint32_t s = p.nodes[m1].inputs[static_cast<std::size_t>(ss)],
                            n = p.nodes[m1].inputs[static_cast<std::size_t>(1 - ss)];
        if (absorbable(s, OpKind::Sub, 1) && p.nodes[s].inputs[1] == z &&
            scalar(p.nodes[s].inputs[0]) == 1.0f && absorbable(n, OpKind::Tanh, 1) &&
            gru_new_gate(y, {m1, m2, s, n}, z, hp, n))
          return true;
      }
    }
    return false;
  }
  // n = tanh(add(slice(X, h), mul(r, slice(Rc, h)))), then z's and r's sums.
  bool gru_new_gate(std::uint32_t y, std::vector<std::uint32_t> absorbed, std::uint32_t z,
                    std::uint32_t hp, std::uint32_t n) {
    const std::int64_t H = p.nodes[y].type.shape.dim(1);
    const std::uint32_t t = p.nodes[n].inputs[0];
    if (!absorbable(t, OpKind::Add, 1)) return false;
    for (int ts : {0, 1}) {
      const std::uint32_t xh = p.nodes[t].inputs[static_cast<std::size_t>(ts)],
                          rm = p.nodes[t].inputs[static_cast<std::size_t>(1 - ts)];
      GruGates k;
      std::uint32_t X = kNoNode;
      if (!band(xh, H, H, X, k.h) || !absorbable(rm, OpKind::Mul, 1)) continue;
      for (int rs : {0, 1}) {
        const std::uint32_t r = p.nodes[rm].inputs[static_cast<std::size_t>(rs)],
                            rch = p.nodes[rm].inputs[static_cast<std::size_t>(1 - rs)];
        std::uint32_t Rc = kNoNode, zr = kNoNode, zr2 = kNoNode;
        std::int8_t kh = -1;
        if (!absorbable(r, OpKind::Sigmoid, 1) || !band(rch, H, H, Rc, kh) || kh != k.h ||
            Rc == X || p.nodes[X].type != p.nodes[Rc].type ||
            p.nodes[X].type.shape != Shape{p.nodes[y].type.shape.dim(0), 3 * H})
          continue;
        if (!band(p.nodes[z].inputs[0], H, H, zr, k.z) ||
            !band(p.nodes[r].inputs[0], H, H, zr2, k.r) || zr != zr2 ||
            !absorbable(zr, OpKind::Add, 2))
          continue;
        // zr = add(slice(X, [0, 2H)), slice(Rc, [0, 2H))), either order.
        const std::uint32_t a = p.nodes[zr].inputs[0], b = p.nodes[zr].inputs[1];
        std::uint32_t sa = kNoNode, sb = kNoNode;
        std::int8_t ka = -1, kb = -1;
        if (a == b || !band(a, H, 2 * H, sa, ka) || !band(b, H, 2 * H, sb, kb) || ka != 0 ||
            kb != 0 || !((sa == X && sb == Rc) || (sa == Rc && sb == X)))
          continue;
        absorbed.insert(absorbed.end(), {t, xh, rm, r, rch, z, p.nodes[z].inputs[0],
                                         p.nodes[r].inputs[0], zr, a, b});
        for (std::uint32_t d : absorbed) {
          if (p.nodes[d].device != p.nodes[y].device) return false;
        }
        Attrs at;
        at.set(k);
        if (!rewrite(y, OpKind::GruHidden, std::move(at), {X, Rc, hp}, y)) return false;
        for (std::uint32_t d : absorbed) kill(d, y);
        return true;
      }
    }
    return false;
  }

  // A reshape of node v read by the pattern alone that keeps the last two dims (the leading
  // ones merged or split, as importers do around a rank-4 product): the reshaped value, the
  // view going to `absorbed`; v itself where it is no such view.
  std::uint32_t through_view(std::uint32_t v, std::vector<std::uint32_t>& absorbed) const {
    const PlanNode& n = p.nodes[v];
    if (n.op != OpKind::Reshape || n.storage != Storage::View || n.fetched || readers[v] != 1 ||
        assigned[v] >= 0)
      return v;
    const Shape &to = n.type.shape, &from = p.nodes[n.inputs[0]].type.shape;
    if (to.rank() < 2 || from.rank() < 2 || to.dim(-1) != from.dim(-1) ||
        to.dim(-2) != from.dim(-2))
      return v;
    absorbed.push_back(v);
    return n.inputs[0];
  }
  // div(x, c), mul(x, c) or mul(c, x) with c a finite non-zero scalar constant, or scale(x),
  // read once: x, the factor going to `s`; kNoNode for anything else.
  std::uint32_t scaled(std::uint32_t y, AttentionSpec& s) const {
    const PlanNode& n = p.nodes[y];
    if (absorbable(y, OpKind::Scale, 1)) {
      s.scale = n.attrs.get_or_default<ScaleFactor>().factor;
      return n.inputs[0];
    }
    const bool div = absorbable(y, OpKind::Div, 1);
    if (!div && !absorbable(y, OpKind::Mul, 1)) return kNoNode;
    for (int side : {0, 1}) {
      if (div && side == 1) break;
      const std::uint32_t x = n.inputs[static_cast<std::size_t>(side)];
      const float c = scalar(n.inputs[static_cast<std::size_t>(1 - side)]);
      if (!std::isfinite(c) || c == 0.0f || p.nodes[x].type != n.type) continue;
      // A division by a power of two is the product by its inverse, bitwise, and a product
      // runs several times faster (exports divide by sqrt(64) = 8).
      int e = 0;
      const bool pow2 = std::fabs(std::frexp(c, &e)) == 0.5f && std::isnormal(1.0f / c);
      s.scale = div && pow2 ? 1.0f / c : c;
      s.divide = div && !pow2;
      return x;
    }
    return kNoNode;
  }
  // Whether value m, float, broadcasts to `scores` (rank 2 to 4) without growing it.
  bool mask_fits(std::uint32_t m, const Shape& scores) const {
    const Shape& ms = p.nodes[m].type.shape;
    if (p.nodes[m].type.dtype != DType::f32 || scores.rank() < 2 || scores.rank() > 4 ||
        ms.rank() > scores.rank())
      return false;
    for (int a = 0; a < ms.rank(); ++a) {
      if (ms[a] != 1 && ms[a] != scores[a + scores.rank() - ms.rank()]) return false;
    }
    return true;
  }

  // Node t's permutation, spelled out (empty swaps the last two axes).
  std::vector<std::int64_t> perm_of(std::uint32_t t) const {
    std::vector<std::int64_t> perm = p.nodes[t].attrs.get<Permutation>().perm;
    if (perm.empty()) {
      const int r = p.nodes[t].type.shape.rank();
      for (int a = 0; a < r; ++a) perm.push_back(a);
      if (r >= 2)
        std::swap(perm[static_cast<std::size_t>(r - 2)], perm[static_cast<std::size_t>(r - 1)]);
    }
    return perm;
  }
  // Value v as a transpose of X [.., T, H, c] (through a view merging leading dims), read by
  // the pattern alone, with permutation want4 (rank 4) or want3 (rank 3): X, the transpose and
  // the view going to `absorbed`; kNoNode otherwise.
  std::uint32_t untransposed(std::uint32_t v, const std::vector<std::int64_t>& want4,
                             const std::vector<std::int64_t>& want3,
                             std::vector<std::uint32_t>& absorbed) const {
    std::vector<std::uint32_t> got;
    const std::uint32_t t = through_view(v, got);
    if (!absorbable(t, OpKind::Transpose, 1)) return kNoNode;
    const int r = p.nodes[t].type.shape.rank();
    const std::vector<std::int64_t> perm = perm_of(t);
    if (!(r == 4 && perm == want4) && !(r == 3 && perm == want3)) return kNoNode;
    got.push_back(t);
    absorbed.insert(absorbed.end(), got.begin(), got.end());
    return p.nodes[t].inputs[0];
  }
  // The node reading v, where v has exactly one reader; kNoNode otherwise.
  std::uint32_t only_reader(std::uint32_t v) const {
    if (readers[v] != 1) return kNoNode;
    for (std::uint32_t j = 0; j < p.nodes.size(); ++j) {
      const PlanNode& n = p.nodes[j];
      for (std::size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.inputs[k] == v && n.reads_input(k)) return j;
      }
    }
    return kNoNode;
  }
  struct Folded {
    std::uint32_t at = kNoNode;  // the output transpose the node replaces
    std::uint32_t q = 0, k = 0, v = 0;
    std::int64_t heads = 0;
  };
  // The transposes that move the heads axis before T around the block at node i (q, k, v in,
  // the result out: BERT's, ViT's and GPT-2's four per layer), where all four are there and
  // read by the block alone: the block reads the projections' [.., T, H, d] values as they
  // are and writes the [.., Tq, H, dv] value the output projection reads. `absorbed` gets
  // the transposes and their views.
  Folded fold_heads(std::uint32_t i, std::uint32_t q, std::uint32_t kt, bool trans_k,
                    std::uint32_t v, std::vector<std::uint32_t>& absorbed) const {
    const std::vector<std::int64_t> first4{0, 2, 1, 3}, first3{1, 0, 2};
    std::vector<std::uint32_t> got;
    Folded f;
    f.q = untransposed(q, first4, first3, got);
    f.k = trans_k ? untransposed(kt, first4, first3, got)
                  : untransposed(kt, {0, 2, 3, 1}, {1, 2, 0}, got);
    f.v = untransposed(v, first4, first3, got);
    const PlanNode& root = p.nodes[i];
    if (f.q == kNoNode || f.k == kNoNode || f.v == kNoNode || root.fetched || assigned[i] >= 0)
      return {};
    std::uint32_t w = only_reader(i);
    if (w != kNoNode && through_view(w, got) != w) {
      w = only_reader(w);
    }
    if (w == kNoNode || p.nodes[w].op != OpKind::Transpose ||
        p.nodes[w].storage != Storage::Computed || p.nodes[w].type.dtype != DType::f32)
      return {};
    const Shape &out = p.nodes[w].type.shape, &qs = p.nodes[f.q].type.shape,
                &ks = p.nodes[f.k].type.shape, &vs = p.nodes[f.v].type.shape;
    const int r = out.rank();
    const std::vector<std::int64_t> perm = perm_of(w);
    if (!(r == 4 && perm == first4) && !(r == 3 && perm == first3)) return {};
    if (qs.rank() != r || ks.rank() != r || vs.rank() != r) return {};
    const std::int64_t h = out.dim(-2);
    for (int a = 0; a + 3 < r; ++a) {
      if (qs[a] != out[a] || ks[a] != out[a] || vs[a] != out[a]) return {};
    }
    if (qs.dim(-2) != h || ks.dim(-2) != h || vs.dim(-2) != h || qs.dim(-3) != out.dim(-3) ||
        ks.dim(-3) != vs.dim(-3) || ks.dim(-1) != qs.dim(-1) || vs.dim(-1) != out.dim(-1))
      return {};
    absorbed.insert(absorbed.end(), got.begin(), got.end());
    absorbed.push_back(i);
    f.at = w;
    f.heads = h;
    return f;
  }

  // matmul(softmax(add(scale(matmul(q, kt)), mask)), v), the softmax over the last axis, the
  // scale (div or mul by a scalar constant, or scale) and the mask optional, the scale possibly
  // on q instead (scale(q) kt), reshapes merging leading dims around either product: the
  // attention block as BERT's, ViT's and GPT-2's exports write it -> attention(q, kt, v[, mask])
  // at the second product.
  void attentions() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed || n.op != OpKind::MatMul || n.type.dtype != DType::f32 ||
          n.attrs.trans_a || n.attrs.trans_b)
        continue;
      std::vector<std::uint32_t> absorbed;
      const std::uint32_t sm = through_view(n.inputs[0], absorbed);
      if (!absorbable(sm, OpKind::Softmax, 1)) continue;
      const int rank = p.nodes[sm].type.shape.rank();
      if (p.nodes[sm].attrs.axis != -1 && p.nodes[sm].attrs.axis != rank - 1) continue;
      absorbed.push_back(sm);
      const std::uint32_t x = p.nodes[sm].inputs[0];
      if (!absorbable(x, OpKind::Add, 1)) {
        attention_at(i, x, kNoNode, absorbed);
        continue;
      }
      absorbed.push_back(x);
      for (int side : {0, 1}) {
        const std::uint32_t a = p.nodes[x].inputs[static_cast<std::size_t>(side)],
                            m = p.nodes[x].inputs[static_cast<std::size_t>(1 - side)];
        if (a != m && p.nodes[a].type == p.nodes[x].type && mask_fits(m, p.nodes[x].type.shape) &&
            attention_at(i, a, m, absorbed))
          break;
      }
    }
  }
  // The rest below the softmax (or its mask's add), at scores s: rewrites node i on a match.
  bool attention_at(std::uint32_t i, std::uint32_t s, std::uint32_t mask,
                    std::vector<std::uint32_t> absorbed) {
    AttentionSpec spec;
    if (mask != kNoNode) {
      const auto dims = p.nodes[s].type.shape.dims();
      spec.mask_dims.assign(dims.begin(), dims.end());
    }
    std::uint32_t x = scaled(s, spec);
    if (x != kNoNode) {
      absorbed.push_back(s);
    } else {
      x = s;
    }
    x = through_view(x, absorbed);
    if (!absorbable(x, OpKind::MatMul, 1) || p.nodes[x].attrs.trans_a) return false;
    absorbed.push_back(x);
    const PlanNode& mm = p.nodes[x];
    std::uint32_t q = mm.inputs[0];
    const std::uint32_t kt = mm.inputs[1], v = p.nodes[i].inputs[1];
    spec.trans_k = mm.attrs.trans_b;
    if (spec.scale == 1.0f && !spec.divide) {
      const std::uint32_t qq = scaled(q, spec);
      if (qq != kNoNode) {
        absorbed.push_back(q);
        q = qq;
        spec.scale_q = true;
      }
    }
    // One rank and the same leading dims for q, kt and v (no broadcast product).
    const Shape &qs = p.nodes[q].type.shape, &ks = p.nodes[kt].type.shape,
                &vs = p.nodes[v].type.shape;
    if (qs.rank() < 2 || ks.rank() != qs.rank() || vs.rank() != qs.rank()) return false;
    for (int a = 0; a + 2 < qs.rank(); ++a) {
      if (ks[a] != qs[a] || vs[a] != qs[a]) return false;
    }
    const Shape& out = p.nodes[i].type.shape;
    if (out.rank() != qs.rank() ||
        out.numel() != qs.numel() / std::max<std::int64_t>(1, qs.dim(-1)) * vs.dim(-1))
      return false;
    std::vector<std::uint32_t> inputs{q, kt, v};
    std::uint32_t at = i;
    if (heads_through) {
      const Folded f = fold_heads(i, q, kt, spec.trans_k, v, absorbed);
      if (f.at != kNoNode) {
        at = f.at;
        inputs = {f.q, f.k, f.v};
        spec.heads = f.heads;
        spec.trans_k = false;
      }
    }
    for (std::uint32_t d : absorbed) {
      if (p.nodes[d].device != p.nodes[at].device) return false;
    }
    if (mask != kNoNode) inputs.push_back(mask);
    Attrs a;
    a.set(std::move(spec));
    if (!rewrite(at, OpKind::Attention, std::move(a), std::move(inputs), x)) return false;
    for (std::uint32_t d : absorbed) kill(d, at);
    return true;
  }

  // relu / clip / leaky_relu / sigmoid / silu / hard_swish of a convolution -> fused_conv2d at
  // the op.
  void conv_epilogues() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed) continue;
      if (n.op != OpKind::Relu && n.op != OpKind::Clip && n.op != OpKind::LeakyRelu &&
          n.op != OpKind::Sigmoid && n.op != OpKind::Silu && n.op != OpKind::HardSwish) {
        continue;
      }
      std::uint32_t q = n.inputs[0];
      // A reshape read by the op alone may sit between them (a 1-d convolution's [N, C, 1, W]
      // viewed as [N, C, W]): the op, elementwise, commutes with it.
      const std::uint32_t view = q;
      const bool through = p.nodes[q].op == OpKind::Reshape && readers[q] == 1 &&
                           !p.nodes[q].fetched && p.nodes[q].storage == Storage::View;
      if (through) q = p.nodes[q].inputs[0];
      if (!convolution(q) || p.nodes[q].type.dtype != n.type.dtype ||
          (!through && p.nodes[q].type != n.type)) {
        continue;
      }
      const PlanNode& c = p.nodes[q];
      ConvEpilogue e = epilogue_of(c);
      e.has_op = true;
      e.op = n.op;
      if (n.op == OpKind::LeakyRelu) e.leaky = n.attrs.get_or_default<LeakySlope>();
      if (n.op == OpKind::Clip) e.clip = n.attrs.get_or_default<ClipRange>();
      Attrs a = n.attrs;
      a.set(e);
      if (!through) {
        if (rewrite(i, OpKind::FusedConv2d, std::move(a), c.inputs, q)) kill(q, i);
        continue;
      }
      // The convolution takes the op where it is; the op's node becomes the reshape of it.
      if (p.nodes[view].device != n.device) continue;
      const std::vector<std::uint32_t> conv_inputs = c.inputs;
      if (!rewrite(q, OpKind::FusedConv2d, std::move(a), conv_inputs, q)) continue;
      PlanNode r = p.nodes[i];
      r.op = OpKind::Reshape;
      r.attrs = p.nodes[view].attrs;
      r.inputs = {q};
      r.storage = Storage::View;
      p.nodes[i] = std::move(r);
      kill(view, i);
    }
  }

  // optimizer_update(v, embedding_grad(g, indices, _), lr[, sum]) of sgd or adagrad without
  // weight decay -> sparse_optimizer_update(v, g, indices, lr[, sum]) at i. A row no lookup
  // touched gets a zero gradient, which leaves it (and its sum) as it is under these rules
  // (adagrad: as long as eps > 0; 0 / 0 is NaN otherwise), so only looked-up rows need work.
  void sparse_optimizer_updates() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.op != OpKind::OptimizerUpdate) continue;
      const OptimizerRule& r = n.attrs.get<OptimizerRule>();
      const bool exact =
          r.weight_decay == 0.0f && (r.kind == OptimizerRule::Kind::sgd ||
                                     (r.kind == OptimizerRule::Kind::adagrad && r.eps > 0.0f));
      if (!exact) continue;
      const std::uint32_t e = n.inputs[1];
      const PlanNode& eg = p.nodes[e];
      if (eg.op != OpKind::EmbeddingGrad || eg.storage != Storage::Computed || eg.fetched ||
          readers[e] != 1 || eg.type != p.nodes[n.inputs[0]].type) {
        continue;
      }
      std::vector<std::uint32_t> in{n.inputs[0], eg.inputs[0], eg.inputs[1], n.inputs[2]};
      for (int s = 0; s < r.states(); ++s)
        in.push_back(n.inputs[static_cast<std::size_t>(r.first_state() + s)]);
      if (rewrite(i, OpKind::SparseOptimizerUpdate, n.attrs, std::move(in), e)) kill(e, i);
    }
  }

  // concat(..., embedding(t, ids), ..., x, ...) along the last axis -> embedding_concat(...,
  // t, ids, ..., x, ...) at i, the lookups (read by the concat alone) absorbed.
  void embedding_concats() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed || n.op != OpKind::Concat || n.type.dtype != DType::f32)
        continue;
      const int rank = n.type.shape.rank();
      if (rank < 1 || (n.attrs.axis != rank - 1 && n.attrs.axis != -1)) continue;
      LookupPieces lp;
      std::vector<std::uint32_t> in, absorbed;
      for (std::uint32_t q : n.inputs) {
        const PlanNode& e = p.nodes[q];
        const bool lookup = e.op == OpKind::Embedding && e.storage == Storage::Computed &&
                            !e.fetched && readers[q] == 1 && e.device == n.device &&
                            e.type.shape.rank() == rank;
        lp.lookup.push_back(lookup ? 1 : 0);
        if (lookup) {
          in.insert(in.end(), {e.inputs[0], e.inputs[1]});
          absorbed.push_back(q);
        } else {
          in.push_back(q);
        }
      }
      if (absorbed.size() < 2) continue;
      PlanNode f = n;
      f.op = OpKind::EmbeddingConcat;
      f.attrs = Attrs{};
      f.attrs.set(std::move(lp));
      f.inputs = std::move(in);
      if (caps != nullptr && !caps->unsupported(p, f).empty()) continue;
      p.nodes[i] = std::move(f);
      for (std::uint32_t q : absorbed) kill(q, i);
    }
  }

  // A sparse table step reading concat_grad(G, x0..xn-1) of piece k along the last axis (read by
  // it alone) reads G itself, from the column where piece k starts.
  void gradient_bands() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if ((n.op != OpKind::EmbeddingUpdate && n.op != OpKind::SparseOptimizerUpdate) ||
          n.fused_into >= 0 || n.inputs.size() < 2 || gradient_band_begin(n.attrs) != 0) {
        continue;
      }
      const std::uint32_t q = n.inputs[1];
      const PlanNode& cg = p.nodes[q];
      if (cg.op != OpKind::ConcatGrad || cg.storage != Storage::Computed || cg.fetched ||
          readers[q] != 1 || cg.device != n.device) {
        continue;
      }
      const int rank = p.nodes[cg.inputs[0]].type.shape.rank();
      if (rank < 1 || (cg.attrs.axis != rank - 1 && cg.attrs.axis != -1)) continue;
      std::int64_t begin = 0;
      const std::int64_t piece = cg.attrs.get_or_default<PieceIndex>().piece;
      for (std::int64_t k = 0; k < piece; ++k)
        begin += p.nodes[cg.inputs[static_cast<std::size_t>(k) + 1]].type.shape.dim(-1);
      PlanNode f = n;
      f.inputs[1] = cg.inputs[0];
      set_band(f.attrs, begin);
      if (caps != nullptr && !caps->unsupported(p, f).empty()) continue;
      p.nodes[i] = std::move(f);
      kill(q, i);
    }
  }

  // assign(v, axpby(v, embedding_grad(g, indices, _), 1, beta)) -> embedding_update at i.
  void sparse_updates() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed || n.op != OpKind::Axpby) continue;
      const AxpbyCoeffs& k = n.attrs.get_or_default<AxpbyCoeffs>();
      if (k.a != 1.0f || assigned[i] < 0 || n.inputs[0] != assigned[i]) continue;
      const std::uint32_t v = n.inputs[0], e = n.inputs[1];
      const PlanNode& eg = p.nodes[e];
      if (eg.op != OpKind::EmbeddingGrad || eg.storage != Storage::Computed || eg.fetched ||
          readers[e] != 1 || eg.type != n.type || p.nodes[v].type != n.type) {
        continue;
      }
      Attrs a = n.attrs;
      a.set(EmbeddingStep{.scale = k.b});
      if (rewrite(i, OpKind::EmbeddingUpdate, std::move(a), {v, eg.inputs[0], eg.inputs[1]}, e))
        kill(e, i);
    }
  }
};

}  // namespace

void fuse_matmul_epilogue(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).epilogues();
}
void fuse_matmul_accumulate(Plan& p, const Capabilities* caps, bool biases) {
  Fuser(p, caps).accumulations(biases);
}
void fuse_conv_residual(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).conv_residuals();
}
void fuse_conv_epilogue(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).conv_epilogues();
}
void fuse_silu(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).silus();
}
void fuse_layer_norm(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).layer_norms();
}
void fuse_channel_affine(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).channel_affines();
}
void fuse_gelu(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).gelus();
}
void fuse_lstm_cells(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).lstm_cells();
}
void fuse_recurrent_sequences(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).recurrent_sequences();
}
void fuse_gru_cells(Plan& p, const Capabilities* caps) {
  Fuser(p, caps).gru_cells();
}
void fuse_attention(Plan& p, const Capabilities* caps, bool transposes) {
  Fuser f(p, caps);
  f.heads_through = transposes;
  f.attentions();
}
void fuse_embedding_concat(Plan& p, const Capabilities* caps) {
  Fuser f(p, caps);
  f.embedding_concats();
  f.gradient_bands();
}
void fuse_sparse_update(Plan& p, const Capabilities* caps) {
  Fuser f(p, caps);
  f.sparse_updates();
  f.sparse_optimizer_updates();
}

}  // namespace hetgraph::detail
