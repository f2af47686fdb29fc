// SPDX-License-Identifier: Apache-2.0
// ONNX linear algebra on hetgraph ops: MatMul, Gemm, Einsum and Det.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

// ---- MatMul and Gemm -------------------------------------------------------------------------

Dims batch_of(const Dims& d) {
  return Dims(d.begin(), d.end() - 2);
}
bool all_ones(const Dims& d) {
  return std::all_of(d.begin(), d.end(), [](std::int64_t v) { return v == 1; });
}

// numpy matmul: 1-d operands gain a dim that the result drops; batch dims broadcast. hetgraph's
// matmul takes rank 2 x 2, 3 x 3 (same batch) and 3 x 2; the rest is reshaped onto those.
void matmul_op(Ctx& c) {
  Node a = c.f32(0), b = c.f32(1);
  Dims da = c.shape(a), db = c.shape(b);
  if (da.empty() || db.empty()) c.fail("MatMul of a scalar");
  const bool a1 = da.size() == 1, b1 = db.size() == 1;
  if (a1) a = c.reshape(a, da = {1, da[0]});
  if (b1) b = c.reshape(b, db = {db[0], 1});
  const std::int64_t M = da[da.size() - 2], K = da.back(), N = db.back();
  if (db[db.size() - 2] != K) {
    c.fail("inner dimensions differ: " + dims_str(c.dims(0)) + " x " + dims_str(c.dims(1)));
  }
  Dims ba = batch_of(da), bb = batch_of(db);
  // A batch of ones is no batch: a shared operand.
  if (!ba.empty() && all_ones(ba) && bb.size() >= ba.size()) a = c.reshape(a, {M, K}), ba.clear();
  if (!bb.empty() && all_ones(bb) && ba.size() >= bb.size()) b = c.reshape(b, {K, N}), bb.clear();
  const Dims batch = broadcast(ba, bb, c);
  Node y;
  if (ba.empty() && bb.empty()) {
    y = matmul(a, b);
  } else if (bb.empty()) {  // [..., M, K] x [K, N]: one product over the rows of every batch
    y = matmul(c.reshape(a, {numel(ba) * M, K}), b);
  } else if (ba.empty()) {  // [M, K] x [..., K, N] = ([..., K, N]^T [M, K]^T)^T
    Node bt = c.reshape(b, {numel(bb), K, N});
    y = transpose(matmul(bt, a, true, true));
  } else {
    if (ba != batch)
      a = broadcast_to(c, a, [&] {
        Dims d = batch;
        d.push_back(M), d.push_back(K);
        return d;
      }());
    if (bb != batch)
      b = broadcast_to(c, b, [&] {
        Dims d = batch;
        d.push_back(K), d.push_back(N);
        return d;
      }());
    y = matmul(c.reshape(a, {numel(batch), M, K}), c.reshape(b, {numel(batch), K, N}));
  }
  Dims out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  c.set(0, c.reshape(y, out));
}

// Y = alpha * op(A) op(B) + beta * C
void gemm(Ctx& c) {
  Node a = c.f32(0), b = c.f32(1);
  if (c.rank(0) != 2 || c.rank(1) != 2) {
    c.fail("Gemm takes 2-d A and B, got " + dims_str(c.dims(0)) + " and " + dims_str(c.dims(1)));
  }
  const float alpha = c.attr_f("alpha", 1.0f), beta = c.attr_f("beta", 1.0f);
  Node y = matmul(a, b, c.attr_i("transA", 0) != 0, c.attr_i("transB", 0) != 0);
  if (alpha != 1.0f) y = scale(y, alpha);
  if (c.has(2) && beta != 0.0f) {
    Node bias = c.f32(2);
    if (c.version < 7 && c.attr_i("broadcast", 0) == 0 && c.shape(bias) != c.shape(y)) {
      c.fail("C " + dims_str(c.dims(2)) + " must have the output's shape without broadcast=1");
    }
    if (beta != 1.0f) bias = scale(bias, beta);
    y = add(y, bias);
  }
  c.set(0, y);
}

// ---- Einsum ------------------------------------------------------------------------------------
// Einsum (opset 12) as sums, transposes and batched products. Letters of one operand that no
// other operand and not the output name are summed out first; then the operands are contracted
// two at a time, each pair viewed as [batch, left, summed] x [batch, summed, right] (one
// matmul); the last is transposed into the output's order. "..." stands for the same dims in
// every term (right-aligned); without "->" the output is "..." then the letters named once, in
// alphabetical order. A letter repeated in one term (a diagonal) and dims that broadcast (1
// against n) are UnsupportedErrors.

struct EinsumOperand {
  Node v;
  std::string letters;  // one per axis; '0', '1', ... stand for the dims "..." covers
};

/// `term` with "..." replaced by the last `count` of the `ell` characters standing for its dims.
std::string expand_ellipsis(Ctx& c, const std::string& term, std::size_t count, std::size_t ell) {
  const auto dots = term.find("...");
  if (dots == std::string::npos) return term;
  if (term.find('.', dots + 3) != std::string::npos || term.find('.') != dots)
    c.fail("term '" + term + "' has more than one '...'");
  std::string mid;
  for (std::size_t k = ell - count; k < ell; ++k) mid += static_cast<char>('0' + k);
  return term.substr(0, dots) + mid + term.substr(dots + 3);
}

/// x (axes named by `have`) transposed into the order of `want` (the same letters).
Node permute_to(Node x, const std::string& have, const std::string& want) {
  std::vector<int> perm;
  for (char ch : want) perm.push_back(static_cast<int>(have.find(ch)));
  for (std::size_t k = 0; k < perm.size(); ++k) {
    if (perm[k] != static_cast<int>(k)) return transpose(x, perm);
  }
  return x;
}

// One Einsum node, step by step: the steps share the parsed terms, each letter's size and the
// operands as they are contracted, so they are members of this struct, run in order by einsum().
struct Einsum {
  explicit Einsum(Ctx& ctx) : c(ctx) {}

  Ctx& c;
  std::string eq;  // the equation without spaces
  std::size_t arrow = std::string::npos;
  std::vector<std::string> terms;     // the inputs' terms, as written
  std::vector<std::size_t> ell_of;    // the dims "..." covers in each term
  std::size_t ell = 0;                // ... and in all (the longest)
  std::map<char, std::int64_t> size;  // each letter's dim
  std::vector<EinsumOperand> ops;
  std::string out;  // the output's letters

  // The equation without spaces, and its input terms (before "->"), one per input.
  void split_terms() {
    for (char ch : c.attr_s("equation", "")) {
      if (ch != ' ') eq += ch;
    }
    arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::size_t from = 0;
    for (std::size_t at; (at = lhs.find(',', from)) != std::string::npos; from = at + 1)
      terms.push_back(lhs.substr(from, at - from));
    terms.push_back(lhs.substr(from));
    if (terms.size() != c.inputs()) {
      c.fail("equation '" + eq + "' has " + std::to_string(terms.size()) + " terms for " +
             std::to_string(c.inputs()) + " inputs");
    }
  }

  // The dims "..." covers in each term (its input's rank less its letters), and in all; a term
  // that names other than letters, or does not fit its input's rank, fails.
  void measure_ellipsis() {
    ell_of.assign(terms.size(), 0);
    for (std::size_t i = 0; i < terms.size(); ++i) {
      std::size_t letters = 0;
      for (char ch : terms[i]) {
        if (std::isalpha(static_cast<unsigned char>(ch))) {
          ++letters;
        } else if (ch != '.') {
          c.fail("equation '" + eq + "': '" + std::string(1, ch) + "' is not a letter");
        }
      }
      const auto rank = static_cast<std::size_t>(c.rank(static_cast<int>(i)));
      const bool dots = terms[i].find('.') != std::string::npos;
      if (dots ? letters > rank : letters != rank) {
        c.fail("term '" + terms[i] + "' does not fit input " + std::to_string(i) + " " +
               dims_str(c.dims(i)));
      }
      ell_of[i] = dots ? rank - letters : 0;
      ell = std::max(ell, ell_of[i]);
    }
  }

  // The operands with "..." expanded, and each letter's size: one size per letter, as
  // diagonals and broadcasting are not supported.
  void bind_operands() {
    for (std::size_t i = 0; i < terms.size(); ++i) {
      EinsumOperand o{c.f32(i), expand_ellipsis(c, terms[i], ell_of[i], ell)};
      const Dims d = c.dims(i);
      for (std::size_t a = 0; a < o.letters.size(); ++a) {
        const char ch = o.letters[a];
        if (o.letters.find(ch) != a)
          c.unsupported("term '" + terms[i] + "' repeats a letter (a diagonal)");
        const auto [it, fresh] = size.emplace(ch, d[a]);
        if (!fresh && it->second != d[a]) {
          c.unsupported("dims that broadcast or differ: " + std::to_string(it->second) + " and " +
                        std::to_string(d[a]) + " for the same letter or '...' dim of '" + eq + "'");
        }
      }
      ops.push_back(std::move(o));
    }
  }

  // The output's letters: after "->", or else "..." then the letters named once, in
  // alphabetical order. Each must name an input dim, once.
  void output_letters() {
    if (arrow != std::string::npos) {
      const std::string rhs = eq.substr(arrow + 2);
      for (char ch : rhs) {
        if (!std::isalpha(static_cast<unsigned char>(ch)) && ch != '.')
          c.fail("equation '" + eq + "': '" + std::string(1, ch) + "' is not a letter");
      }
      out = expand_ellipsis(c, rhs, ell, ell);
    } else {
      for (std::size_t k = 0; k < ell; ++k) out += static_cast<char>('0' + k);
      std::map<char, int> count;
      for (const EinsumOperand& o : ops)
        for (char ch : o.letters) count[ch] += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
      for (const auto& [ch, n] : count) {
        if (n == 1) out += ch;
      }
    }
    for (std::size_t a = 0; a < out.size(); ++a) {
      if (size.count(out[a]) == 0 || out.find(out[a]) != a)
        c.fail("equation '" + eq + "': output letter '" + std::string(1, out[a]) +
               "' is repeated or names no input dim");
    }
    if (out.size() > static_cast<std::size_t>(Shape::kMaxRank))
      c.unsupported("an output of rank " + std::to_string(out.size()));
  }

  // Whether a letter is needed outside operands `a` and `b` (the output, or another operand).
  bool needed(char ch, std::size_t a, std::size_t b) const {
    if (out.find(ch) != std::string::npos) return true;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      if (k != a && k != b && ops[k].letters.find(ch) != std::string::npos) return true;
    }
    return false;
  }

  // The dims `letters` name, and their element count (bind_operands sized every letter).
  Dims dims_of(const std::string& letters) {
    Dims d;
    for (char ch : letters) d.push_back(size[ch]);
    return d;
  }
  std::int64_t product(const std::string& letters) { return numel(dims_of(letters)); }

  // Letters only one operand names and nothing needs: summed out, last axis first, so that
  // the contractions carry no axis they do not need.
  void sum_lonely_letters() {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EinsumOperand& o = ops[i];
      for (std::size_t a = o.letters.size(); a-- > 0;) {
        if (!needed(o.letters[a], i, i)) {
          o.v = reduce_sum(o.v, static_cast<int>(a));
          o.letters.erase(a, 1);
        }
      }
    }
  }

  // Replaces the first two operands by their product, one matmul of [batch, left, summed] x
  // [batch, summed, right]: letters both name are batch if needed later, else summed.
  void contract_first_two() {
    const EinsumOperand& A = ops[0];
    const EinsumOperand& B = ops[1];
    std::string batch, left, summed, right;
    for (char ch : A.letters) {
      const bool in_b = B.letters.find(ch) != std::string::npos;
      (in_b ? (needed(ch, 0, 1) ? batch : summed) : left) += ch;
    }
    for (char ch : B.letters) {
      if (A.letters.find(ch) == std::string::npos) right += ch;
    }
    const std::int64_t nb = product(batch), nl = product(left), ns = product(summed),
                       nr = product(right);
    Node a = permute_to(A.v, A.letters, batch + left + summed);
    Node b = permute_to(B.v, B.letters, batch + summed + right);
    Node y = nb == 1 ? matmul(c.reshape(a, {nl, ns}), c.reshape(b, {ns, nr}))
                     : matmul(c.reshape(a, {nb, nl, ns}), c.reshape(b, {nb, ns, nr}));
    const std::string letters = batch + left + right;
    if (letters.size() > static_cast<std::size_t>(Shape::kMaxRank))
      c.unsupported("an intermediate product of rank " + std::to_string(letters.size()));
    EinsumOperand r{c.reshape(y, dims_of(letters)), letters};
    ops.erase(ops.begin(), ops.begin() + 2);
    ops.insert(ops.begin(), std::move(r));
  }
};

// ONNX Einsum: the steps above in order; the contractions go left to right, two at a time.
void einsum(Ctx& c) {
  Einsum e{c};
  e.split_terms();
  e.measure_ellipsis();
  e.bind_operands();
  e.output_letters();
  e.sum_lonely_letters();
  while (e.ops.size() > 1) e.contract_first_two();
  c.set(0, permute_to(e.ops[0].v, e.ops[0].letters, e.out));
}

// ---- Det --------------------------------------------------------------------------------------
// Det: Gaussian elimination with partial pivoting, its n steps laid out in the graph over the
// batch of matrices at once: each step takes the largest remaining entry of its column as the
// pivot (argmax), swaps its row up (gather_elements of a permutation), multiplies the
// determinant by it (negated for a swap) and clears the column below it. A zero pivot (a
// singular matrix) gives 0.
void det(Ctx& c) {
  const Dims d = c.dims(0);
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2])
    c.fail("Det needs square matrices in the last two dims, got " + dims_str(d));
  const std::int64_t n = d.back();
  if (n > 256) c.unsupported("Det of matrices larger than 256 x 256 (unrolled at import)");
  const Dims batch(d.begin(), d.end() - 2);
  const std::int64_t b = numel(batch);
  Node a = c.reshape(c.f32(0), {b, n, n});
  Node det = c.constant({b, 1, 1}, c.host<float>(b, 1.0f));
  Graph& g = c.graph();
  const Node rows = iota_along(c, 3, 1, n);  // [1, n, 1] int32
  std::vector<float> rows_f = c.host<float>(n);
  for (std::int64_t i = 0; i < n; ++i) rows_f[static_cast<std::size_t>(i)] = static_cast<float>(i);
  const Node rowsf = c.constant({1, n, 1}, std::move(rows_f));
  const Node zero = c.constant(0.0f), one = c.constant(1.0f);
  for (std::int64_t k = 0; k < n; ++k) {
    const Node kf = c.constant(static_cast<float>(k));
    const Node ki = g.constant_i32(Shape{}, {static_cast<std::int32_t>(k)});
    // Rows above k are done: -1 keeps them from being chosen.
    const Node col = slice(a, 2, k, k + 1);  // [B, n, 1]
    const Node candidates = where(less(rowsf, kf), c.constant(-1.0f), abs(col));
    const Node p = argmax(candidates, 1, true);                                    // [B, 1, 1]
    const Node perm = where(equal(rows, ki), p, where(equal(rows, p), ki, rows));  // [B, n, 1]
    a = gather_elements(a, broadcast_to(c, perm, {b, n, n}), 1);
    const Node swapped = logical_not(equal(p, ki));
    const Node pivot = slice(slice(a, 1, k, k + 1), 2, k, k + 1);  // [B, 1, 1]
    det = mul(det, mul(pivot, where(swapped, c.constant(-1.0f), one)));
    if (k + 1 == n) break;
    const Node colk = slice(a, 2, k, k + 1), rowk = slice(a, 1, k, k + 1);
    const Node below = cast(greater(rowsf, kf), DType::f32);  // [1, n, 1]
    const Node factor = mul(where(equal(pivot, zero), zero, div(colk, pivot)), below);
    a = sub(a, mul(factor, rowk));
  }
  c.set(0, c.reshape(det, batch));
}

}  // namespace

void register_linalg_ops(std::vector<Handler>& h) {
  h.push_back({"Det", 11, 11, det});
  h.push_back({"MatMul", 1, 13, matmul_op});
  h.push_back({"Einsum", 12, 12, einsum});
  h.push_back({"Gemm", 1, 13, gemm});
}

}  // namespace hetgraph::onnx::imp
