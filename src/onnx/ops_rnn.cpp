// SPDX-License-Identifier: Apache-2.0
// ONNX recurrent ops (LSTM, GRU, RNN) unrolled into cells of hetgraph ops.
//
// The input projection of every time step is one product ([seq * batch, I] x W^T); each step
// then adds only its recurrent product. Directions of a bidirectional op are independent
// chains, which the parallel engines run side by side.
#include <algorithm>

#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

/// One activation of the op's `activations` list, with its alpha / beta where it takes them.
struct Activation {
  std::string name;
  float alpha = 0, beta = 0;
};

Node apply(Ctx& c, const Activation& a, Node x) {
  if (a.name == "Sigmoid") return sigmoid(x);
  if (a.name == "Tanh") return tanh(x);
  if (a.name == "Relu") return relu(x);
  if (a.name == "Affine") return add(scale(x, a.alpha), c.constant(a.beta));
  if (a.name == "ScaledTanh") return scale(tanh(scale(x, a.beta)), a.alpha);
  if (a.name == "Softplus") return log(add(exp(x), c.constant(1.0f)));
  c.unsupported("recurrent activation " + a.name);
}

std::vector<Activation> activations(Ctx& c, const std::vector<std::string>& defaults, int dirs) {
  const ir::Attr* a = nullptr;
  if (auto it = c.n.attrs.find("activations"); it != c.n.attrs.end()) a = &it->second;
  std::vector<std::string> names;
  if (a) {
    names = a->strings;
  } else {
    for (int d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  if (names.size() != defaults.size() * static_cast<std::size_t>(dirs)) {
    c.fail("activations lists " + std::to_string(names.size()) + " functions, " +
           std::to_string(defaults.size() * static_cast<std::size_t>(dirs)) + " expected");
  }
  const std::vector<float> alphas = c.attr_floats("activation_alpha"),
                           betas = c.attr_floats("activation_beta");
  std::size_t ia = 0, ib = 0;
  std::vector<Activation> out;
  for (const std::string& n : names) {
    Activation act{n};
    if (n == "Affine" || n == "ScaledTanh") {
      act.alpha = ia < alphas.size() ? alphas[ia++] : 1.0f;
      act.beta = ib < betas.size() ? betas[ib++] : 0.0f;
    }
    out.push_back(act);
  }
  return out;
}

/// The shared part of LSTM, GRU and RNN: inputs, per-direction weights, outputs.
class Recurrent {
 public:
  Recurrent(Ctx& c, int gates) : c(c), gates(gates) {
    const std::string dir = c.attr_s("direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
      c.fail("direction '" + dir + "'");
    reverse = dir == "reverse";
    dirs = dir == "bidirectional" ? 2 : 1;
    layout = c.version >= 14 ? static_cast<int>(c.attr_i("layout", 0)) : 0;
    if (c.has_attr("clip")) c.unsupported("clipped recurrent cells (clip)");
    x = c.f32(0);
    Dims dx = c.shape(x);
    if (dx.size() != 3) c.fail("X must be 3-d, got " + dims_str(dx));
    if (layout == 1) {
      x = transpose(x, {1, 0, 2});
      dx = {dx[1], dx[0], dx[2]};
    }
    seq = dx[0], batch = dx[1], in = dx[2];
    H = c.attr_i("hidden_size", 0);
    const Dims dw = c.dims(1);
    if (H <= 0 && dw.size() == 3) H = dw[1] / gates;
    if (H <= 0 || H > (1 << 24)) c.fail("hidden_size " + std::to_string(H));
    if (dw != Dims{dirs, gates * H, in})
      c.fail("W " + dims_str(dw) + " does not fit " + std::to_string(dirs) +
             " directions, hidden size " + std::to_string(H));
    if (c.dims(2) != Dims{dirs, gates * H, H})
      c.fail("R " + dims_str(c.dims(2)) + " does not fit hidden size " + std::to_string(H));
    if (c.has(4)) {
      const Dims lens = c.ints(4, "sequence_lens");
      for (std::int64_t l : lens) {
        if (l != seq) c.unsupported("sequences of different lengths (sequence_lens)");
      }
    }
    x2 = c.reshape(x, {seq * batch, in});
  }

  /// Input `input` ([dirs] + per) without its direction dim, for direction d.
  Node dir_slice(std::size_t input, int d) {
    static const char* const kNames[] = {"X",         "W",         "R", "B", "sequence_lens",
                                         "initial_h", "initial_c", "P"};
    Dims per;
    switch (input) {
      case 1:
        per = {gates * H, in};
        break;
      case 2:
        per = {gates * H, H};
        break;
      case 3:
        per = {2 * gates * H};
        break;
      case 5:
      case 6:
        per = {batch, H};
        break;
      case 7:
        per = {3 * H};
        break;
      default:
        c.fail("internal: no direction slice of input " + std::to_string(input));
    }
    Node v = c.f32(input);
    const Dims dv = c.shape(v);
    Dims want{dirs};
    want.insert(want.end(), per.begin(), per.end());
    if (dv != want)
      c.fail(std::string(kNames[input]) + " is " + dims_str(dv) + ", expected " + dims_str(want));
    if (dirs > 1) v = slice(v, 0, d, d + 1);
    Dims rest(dv.begin() + 1, dv.end());
    return c.reshape(v, rest);
  }

  /// X W^T (+ Wb + Rb, the first gates * H of both), one product for every step: [seq*batch,
  /// gates*H].
  Node projection(int d, bool add_rb_all) {
    Node p = matmul(x2, dir_slice(1, d), false, true);
    if (c.has(3)) {
      Node b = dir_slice(3, d);  // [2 * gates * H]
      Node wb = slice(b, 0, 0, gates * H);
      Node rb = slice(b, 0, gates * H, 2 * gates * H);
      p = add(p, add_rb_all ? add(wb, rb) : wb);
    }
    return p;
  }
  Node step_rows(Node proj, std::int64_t t) {
    return seq == 1 ? proj : slice(proj, 0, t * batch, (t + 1) * batch);
  }
  /// initial_h / initial_c of direction d as [batch, H]; invalid when not given (zeros).
  Node initial(std::size_t input, int d) {
    if (!c.has(input)) return Node();
    if (layout == 0) return dir_slice(input, d);
    Node v = c.f32(input);  // [batch, dirs, H]
    if (c.shape(v) != Dims{batch, dirs, H})
      c.fail("initial state " + dims_str(c.shape(v)) + ", expected " + dims_str({batch, dirs, H}));
    if (dirs > 1) v = slice(v, 1, d, d + 1);
    return c.reshape(v, {batch, H});
  }
  std::vector<std::int64_t> order(int d) const {  // time steps in processing order
    std::vector<std::int64_t> t(static_cast<std::size_t>(seq));
    for (std::int64_t k = 0; k < seq; ++k) t[static_cast<std::size_t>(k)] = k;
    if (reverse || d == 1) std::reverse(t.begin(), t.end());
    return t;
  }

  /// Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]) from hidden[d][t].
  void outputs(const std::vector<std::vector<Node>>& hidden, const std::vector<Node>& last_h,
               const std::vector<Node>& last_c) {
    if (c.wants(0)) {
      std::vector<Node> steps;
      for (std::int64_t t = 0; t < seq; ++t) {
        std::vector<Node> per_dir;
        for (int d = 0; d < dirs; ++d)
          per_dir.push_back(c.reshape(
              hidden[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)], {1, 1, batch, H}));
        steps.push_back(per_dir.size() == 1 ? per_dir[0]
                                            : concat(std::span<const Node>(per_dir), 1));
      }
      Node y = steps.size() == 1 ? steps[0] : concat(std::span<const Node>(steps), 0);
      if (layout == 1) y = transpose(y, {2, 0, 1, 3});
      c.set(0, y);
    }
    auto stack = [&](const std::vector<Node>& v) {
      std::vector<Node> parts;
      for (const Node& n : v) parts.push_back(c.reshape(n, {1, batch, H}));
      Node s = parts.size() == 1 ? parts[0] : concat(std::span<const Node>(parts), 0);
      return layout == 1 ? transpose(s, {1, 0, 2}) : s;
    };
    if (c.wants(1)) c.set(1, stack(last_h));
    if (c.wants(2) && !last_c.empty()) c.set(2, stack(last_c));
  }

  Ctx& c;
  int gates;
  bool reverse = false;
  std::int64_t dirs = 1;
  int layout = 0;
  Node x, x2;
  std::int64_t seq = 0, batch = 0, in = 0, H = 0;
};

Node gate(Node v, std::int64_t k, std::int64_t H) {
  return slice(v, 1, k * H, (k + 1) * H);
}

void lstm(Ctx& c) {
  Recurrent r(c, 4);
  const std::int64_t H = r.H;
  const auto acts = activations(c, {"Sigmoid", "Tanh", "Tanh"}, static_cast<int>(r.dirs));
  const bool couple = c.attr_i("input_forget", 0) != 0;
  std::vector<std::vector<Node>> hidden(static_cast<std::size_t>(r.dirs),
                                        std::vector<Node>(static_cast<std::size_t>(r.seq)));
  std::vector<Node> last_h, last_c;
  for (int d = 0; d < r.dirs; ++d) {
    const Activation& f = acts[static_cast<std::size_t>(3 * d)];
    const Activation& g = acts[static_cast<std::size_t>(3 * d + 1)];
    const Activation& h = acts[static_cast<std::size_t>(3 * d + 2)];
    Node proj = r.projection(d, true);
    Node R = r.dir_slice(2, d);
    Node Pi, Po, Pf;
    if (c.has(7)) {
      Node P = r.dir_slice(7, d);
      Pi = slice(P, 0, 0, H), Po = slice(P, 0, H, 2 * H), Pf = slice(P, 0, 2 * H, 3 * H);
    }
    Node Hs = r.initial(5, d), Cs = r.initial(6, d);
    for (std::int64_t t : r.order(d)) {
      Node gates = r.step_rows(proj, t);
      if (Hs.valid()) gates = add(gates, matmul(Hs, R, false, true));
      Node ip = gate(gates, 0, H), op = gate(gates, 1, H), fp = gate(gates, 2, H),
           cp = gate(gates, 3, H);
      if (Pi.valid() && Cs.valid()) {
        ip = add(ip, mul(Pi, Cs));
        fp = add(fp, mul(Pf, Cs));
      }
      Node i = apply(c, f, ip);
      Node fg = couple ? sub(c.constant(1.0f), i) : apply(c, f, fp);
      Node cc = apply(c, g, cp);
      Node C = Cs.valid() ? add(mul(fg, Cs), mul(i, cc)) : mul(i, cc);
      if (Po.valid()) op = add(op, mul(Po, C));
      Node o = apply(c, f, op);
      Hs = mul(o, apply(c, h, C));
      Cs = C;
      hidden[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)] = Hs;
    }
    last_h.push_back(Hs);
    last_c.push_back(Cs);
  }
  r.outputs(hidden, last_h, last_c);
}

void gru(Ctx& c) {
  Recurrent r(c, 3);
  const std::int64_t H = r.H;
  const auto acts = activations(c, {"Sigmoid", "Tanh"}, static_cast<int>(r.dirs));
  const bool linear_before_reset = c.attr_i("linear_before_reset", 0) != 0;
  std::vector<std::vector<Node>> hidden(static_cast<std::size_t>(r.dirs),
                                        std::vector<Node>(static_cast<std::size_t>(r.seq)));
  std::vector<Node> last_h;
  for (int d = 0; d < r.dirs; ++d) {
    const Activation& f = acts[static_cast<std::size_t>(2 * d)];
    const Activation& g = acts[static_cast<std::size_t>(2 * d + 1)];
    Node proj = r.projection(d, false);  // X W^T + Wb
    Node R = r.dir_slice(2, d);
    Node Rzr, Rh;
    if (!linear_before_reset) Rzr = slice(R, 0, 0, 2 * H), Rh = slice(R, 0, 2 * H, 3 * H);
    Node Rbzr, Rbh, Rb;
    if (c.has(3)) {
      Node b = r.dir_slice(3, d);
      Rbzr = slice(b, 0, 3 * H, 5 * H);
      Rbh = slice(b, 0, 5 * H, 6 * H);
      Rb = slice(b, 0, 3 * H, 6 * H);
    }
    Node Hs = r.initial(5, d);
    if (!Hs.valid()) Hs = c.constant({r.batch, H}, c.host<float>(r.batch * H));
    for (std::int64_t t : r.order(d)) {
      Node xp = r.step_rows(proj, t);
      if (linear_before_reset) {
        // One recurrent product for the three gates, on R itself: a model's R is fixed
        // between runs, so the CPU keeps it packed for the product (slices of it would be
        // computed each run, and packed at every call).
        Node rec = matmul(Hs, R, false, true);  // [batch, 3H]
        if (Rb.valid()) rec = add(rec, Rb);
        Node zr = add(slice(xp, 1, 0, 2 * H), slice(rec, 1, 0, 2 * H));
        Node z = apply(c, f, gate(zr, 0, H)), rg = apply(c, f, gate(zr, 1, H));
        Node hh = apply(c, g, add(gate(xp, 2, H), mul(rg, gate(rec, 2, H))));
        Hs = add(mul(sub(c.constant(1.0f), z), hh), mul(z, Hs));
        hidden[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)] = Hs;
        continue;
      }
      Node zr = add(slice(xp, 1, 0, 2 * H), matmul(Hs, Rzr, false, true));
      if (Rbzr.valid()) zr = add(zr, Rbzr);
      Node z = apply(c, f, gate(zr, 0, H)), rg = apply(c, f, gate(zr, 1, H));
      Node hp = add(gate(xp, 2, H), matmul(mul(rg, Hs), Rh, false, true));
      if (Rbh.valid()) hp = add(hp, Rbh);
      Node hh = apply(c, g, hp);
      Hs = add(mul(sub(c.constant(1.0f), z), hh), mul(z, Hs));
      hidden[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)] = Hs;
    }
    last_h.push_back(Hs);
  }
  r.outputs(hidden, last_h, {});
}

void rnn(Ctx& c) {
  Recurrent r(c, 1);
  const auto acts = activations(c, {"Tanh"}, static_cast<int>(r.dirs));
  std::vector<std::vector<Node>> hidden(static_cast<std::size_t>(r.dirs),
                                        std::vector<Node>(static_cast<std::size_t>(r.seq)));
  std::vector<Node> last_h;
  for (int d = 0; d < r.dirs; ++d) {
    Node proj = r.projection(d, true);
    Node R = r.dir_slice(2, d);
    Node Hs = r.initial(5, d);
    for (std::int64_t t : r.order(d)) {
      Node pre = r.step_rows(proj, t);
      if (Hs.valid()) pre = add(pre, matmul(Hs, R, false, true));
      Hs = apply(c, acts[static_cast<std::size_t>(d)], pre);
      hidden[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)] = Hs;
    }
    last_h.push_back(Hs);
  }
  r.outputs(hidden, last_h, {});
}

}  // namespace

void register_rnn_ops(std::vector<Handler>& h) {
  h.push_back({"LSTM", 7, 14, lstm});
  h.push_back({"GRU", 7, 14, gru});
  h.push_back({"RNN", 7, 14, rnn});
}

}  // namespace hetgraph::onnx::imp
