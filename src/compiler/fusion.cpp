// Fusion. After shape inference, a matmul whose value has exactly one reader that is a
// unary elementwise op takes that op as an epilogue; a matmul (or fused matmul) whose single
// reader adds a same-shape value to it accumulates into that value. The reader becomes a
// fused_matmul node; the matmul (and any identity view between them) is marked fused and
// does no work. Saves a pass over the product each time: par-matmul's log and first adds,
// the LSTM's sums of per-step weight gradients.
//
// An embedding gradient whose only reader is its table's plain SGD step, assign(v, axpby(v,
// dv, 1, beta)), folds into that step as embedding_update(v, g, indices): the looked-up rows
// get v + beta * (their summed gradient), the others stay as they are, which is what the dense
// step computes for them (v + beta * 0). It saves zeroing a dense table-sized gradient and a
// pass over the whole table per step: wide & deep's tables hold millions of rows' worth.
#include <algorithm>

#include "compiler/plan.hpp"

namespace hetgraph::detail {

namespace {

bool epilogue_op(OpKind k) {
  switch (k) {
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Sqrt:
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Scale:
    case OpKind::Neg:
      return true;
    default:
      return false;
  }
}

struct Fuser {
  Plan& p;
  std::vector<int> readers;  // data readers per node

  std::vector<std::int64_t> assigned;  // per node: the variable it is the new value of, or -1

  explicit Fuser(Plan& plan)
      : p(plan), readers(plan.nodes.size(), 0), assigned(plan.nodes.size(), -1) {
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
  static std::int64_t epilogue_of(const PlanNode& n) {
    return n.op == OpKind::FusedMatMul ? n.attrs.ints[0] : -1;
  }
  static bool accumulates(const PlanNode& n) {
    return n.op == OpKind::FusedMatMul && n.attrs.ints[1] != 0;
  }

  void kill(std::uint32_t dead, std::uint32_t into) {
    PlanNode& d = p.nodes[dead];
    d.storage = Storage::None;
    d.inputs.clear();
    d.fused_into = into;
  }

  // Turns node `at` into fused_matmul(m's operands[, x]) with m's transposes and epilogue.
  void rewrite(std::uint32_t at, std::uint32_t m, std::int64_t epilogue, float alpha,
               std::int64_t x) {
    PlanNode& n = p.nodes[at];
    const PlanNode& mm = p.nodes[m];
    Attrs a = mm.attrs;
    const bool acc = x >= 0;
    a.ints = {epilogue, acc ? 1 : 0};
    a.alpha = alpha;
    std::vector<std::uint32_t> in{mm.inputs[0], mm.inputs[1]};
    if (acc) in.push_back(static_cast<std::uint32_t>(x));
    n.op = OpKind::FusedMatMul;
    n.attrs = std::move(a);
    n.inputs = std::move(in);
  }

  // assign(v, axpby(v, embedding_grad(g, indices, _), 1, beta)) -> embedding_update at i.
  void sparse_update(std::uint32_t i) {
    PlanNode& n = p.nodes[i];
    if (n.attrs.alpha != 1.0f || assigned[i] < 0 || n.inputs[0] != assigned[i]) return;
    const std::uint32_t v = n.inputs[0], e = n.inputs[1];
    const PlanNode& eg = p.nodes[e];
    if (eg.op != OpKind::EmbeddingGrad || eg.storage != Storage::Computed || eg.fetched ||
        readers[e] != 1 || eg.type != n.type || p.nodes[v].type != n.type) {
      return;
    }
    n.op = OpKind::EmbeddingUpdate;
    n.inputs = {v, eg.inputs[0], eg.inputs[1]};
    kill(e, i);
  }

  void run() {
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      PlanNode& n = p.nodes[i];
      if (n.storage != Storage::Computed) continue;
      if (n.op == OpKind::Axpby) {
        sparse_update(i);
        continue;
      }
      if (epilogue_op(n.op)) {
        const std::uint32_t m = n.inputs[0];
        if (product(m) && epilogue_of(p.nodes[m]) < 0 && !accumulates(p.nodes[m]) &&
            p.nodes[m].type == n.type) {
          const float alpha = n.op == OpKind::Scale ? n.attrs.alpha : 1.0f;
          rewrite(i, m, static_cast<std::int64_t>(n.op), alpha, -1);
          kill(m, i);
        }
        continue;
      }
      if (n.op != OpKind::Add) continue;
      for (int side : {1, 0}) {
        std::uint32_t q = n.inputs[static_cast<std::size_t>(side)];
        const std::uint32_t other = n.inputs[static_cast<std::size_t>(1 - side)];
        std::int64_t view = -1;
        if (p.nodes[q].storage == Storage::View && readers[q] == 1 &&
            p.nodes[q].type == p.nodes[p.nodes[q].inputs[0]].type) {
          view = q;
          q = p.nodes[q].inputs[0];
        }
        if (q == other || !product(q) || accumulates(p.nodes[q])) continue;
        if (p.nodes[q].type != n.type || p.nodes[other].type != n.type) continue;  // no broadcasts
        const PlanNode& mm = p.nodes[q];
        const std::int64_t epi = epilogue_of(mm);
        const float alpha = mm.op == OpKind::FusedMatMul ? mm.attrs.alpha : 1.0f;
        if (mm.op == OpKind::FusedMatMul) {
          // keep its operands, transposes and epilogue
          const std::vector<std::uint32_t> ops{mm.inputs[0], mm.inputs[1]};
          PlanNode& t = p.nodes[i];
          t.op = OpKind::FusedMatMul;
          t.attrs = mm.attrs;
          t.attrs.ints = {epi, 1};
          t.attrs.alpha = alpha;
          t.inputs = {ops[0], ops[1], other};
        } else {
          rewrite(i, q, -1, 1.0f, other);
        }
        kill(q, i);
        if (view >= 0) kill(static_cast<std::uint32_t>(view), i);
        break;
      }
    }
  }
};

}  // namespace

void fuse(Plan& p) {
  Fuser(p).run();
}

}  // namespace hetgraph::detail
