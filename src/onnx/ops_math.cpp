// ONNX math ops on hetgraph ops: elementwise arithmetic and activations, MatMul, Gemm, Einsum,
// DFT / STFT, window functions and MelWeightMatrix, reductions, Softmax / LogSoftmax, Det, the
// quantization ops (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul), and the optimizer steps and Gradient of ai.onnx.preview.training.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string>

#include "hetgraph/autodiff.hpp"
#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

// Before opset 7, binary ops broadcast only when asked (broadcast=1), and then B lines up with
// A's dims from `axis` on (by default at A's end).
Node legacy_rhs(Ctx& c, Node a, Node b) {
  if (c.version >= 7) return b;
  const Dims da = c.shape(a), db = c.shape(b);
  if (c.attr_i("broadcast", 0) == 0) {
    if (da != db)
      c.fail("shapes " + dims_str(da) + " and " + dims_str(db) + " differ (broadcast=0)");
    return b;
  }
  const auto ra = static_cast<std::int64_t>(da.size()), rb = static_cast<std::int64_t>(db.size());
  std::int64_t axis = c.attr_i("axis", ra - rb);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra)
    c.fail("broadcast axis " + std::to_string(axis) + " out of range");
  Dims aligned(static_cast<std::size_t>(ra - axis), 1);
  std::copy(db.begin(), db.end(), aligned.begin());
  return c.reshape(b, aligned);
}

template <Node (*F)(Node, Node)>
void binary(Ctx& c) {
  Node a = c.f32(0);
  Node b = legacy_rhs(c, a, c.f32(1));
  c.set(0, F(a, b));
}

// Add, Sub, Mul: floats, or ints of one type computed in int32 (whose multiply wraps, as
// unsigned words do): int64 results wrap at 32 bits (the README says so); 8- and 16-bit ones
// are wrapped to their width.
template <Node (*F)(Node, Node)>
void arithmetic(Ctx& c) {
  const int elem = c.elem(0);
  if (!ir::is_integral(elem) || elem == ir::kBool) return binary<F>(c);
  if (elem != ir::kInt32 && elem != ir::kInt64 && !narrow_int(elem)) {
    c.unsupported(std::string("arithmetic on ") + ir::elem_name(elem) +
                  ": hetgraph holds integers in int32, which cannot hold every " +
                  ir::elem_name(elem));
  }
  if (c.elem(1) != elem) c.fail("A and B differ in element type");
  Node a = c.node(0);
  Node r = F(a, legacy_rhs(c, a, c.node(1)));
  c.set(0, narrow_int(elem) ? wrap_to(c, r, elem) : r, elem);
}

// Div: floats, or 8-bit ints (truncated toward zero, as ONNX's integer division): their
// quotients are exact enough in float32 to truncate; wider ones would not be.
void div_op(Ctx& c) {
  const int elem = c.elem(0);
  if (elem != ir::kUint8 && elem != ir::kInt8) return binary<div>(c);
  if (c.elem(1) != elem) c.fail("A and B differ in element type");
  const Node q = div(cast(c.node(0), DType::f32), cast(c.node(1), DType::f32));
  c.set(0, wrap_to(c, cast(q, DType::i32), elem), elem);  // (int8 -128 / -1 wraps)
}

void reciprocal(Ctx& c) {
  c.set(0, div(c.constant(1.0f), c.f32(0)));
}

void ceil_op(Ctx& c) {  // ceil(x) = -floor(-x), exactly
  c.set(0, neg(hetgraph::floor(neg(c.f32(0)))));
}

void softplus(Ctx& c) {  // log(exp(x) + 1), ONNX's definition as written
  c.set(0, log(add(exp(c.f32(0)), c.constant(1.0f))));
}

void leaky_relu_op(Ctx& c) {
  c.set(0, leaky_relu(c.f32(0), c.attr_f("alpha", 0.01f)));
}

// x >= 0 ? x : slope * x, with slope broadcast (per channel, usually).
void prelu(Ctx& c) {
  Node x = c.f32(0);
  Node slope = c.f32(1);
  const Dims dx = c.shape(x), ds = c.shape(slope);
  if (c.version < 7 && numel(ds) > 1 && dx.size() >= 2 && ds.size() == 1) {
    // PRelu-6 and before: one slope per channel (dim 1).
    Dims to{ds[0]};
    for (std::size_t i = 2; i < dx.size(); ++i) to.push_back(1);
    slope = c.reshape(slope, to);
  }
  c.set(0, add(relu(x), mul(slope, minimum(x, c.constant(0.0f)))));
}

// x > 0 ? x : alpha * (exp(x) - 1); the exp sees only x <= 0 (no overflow for large x).
Node elu_of(Ctx& c, Node x, float alpha) {
  return add(relu(x), scale(sub(exp(minimum(x, c.constant(0.0f))), c.constant(1.0f)), alpha));
}
void elu(Ctx& c) {
  c.set(0, elu_of(c, c.f32(0), c.attr_f("alpha", 1.0f)));
}
void selu(Ctx& c) {
  c.set(0, scale(elu_of(c, c.f32(0), c.attr_f("alpha", 1.67326319217681884765625f)),
                 c.attr_f("gamma", 1.05070102214813232421875f)));
}
void hard_sigmoid(Ctx& c) {  // max(0, min(1, alpha * x + beta))
  Node x = c.f32(0);
  c.set(0, clip(add(scale(x, c.attr_f("alpha", 0.2f)), c.constant(c.attr_f("beta", 0.5f))), 0.0f,
                1.0f));
}
void hard_swish(Ctx& c) {  // x * hard_sigmoid(x) with alpha 1/6, beta 1/2
  Node x = c.f32(0);
  c.set(0, mul(x, clip(add(scale(x, 1.0f / 6.0f), c.constant(0.5f)), 0.0f, 1.0f)));
}

// Mod: floats (fmod = 1, C's fmod; fmod = 0, which ONNX allows for ints only, as numpy's mod)
// or integers of one type. A remainder is smaller than its divisor, so 8- and 16-bit ints
// computed in int32 give their own type's result.
void mod_op(Ctx& c) {
  const bool f = c.attr_i("fmod", 0) != 0;
  const int elem = c.elem(0);
  if (!ir::is_integral(elem) || elem == ir::kBool) {
    c.set(0, f ? fmod(c.f32(0), c.f32(1)) : mod(c.f32(0), c.f32(1)));
    return;
  }
  if (c.elem(1) != elem) c.fail("A and B differ in element type");
  c.set(0, f ? fmod(c.node(0), c.node(1)) : mod(c.node(0), c.node(1)), elem);
}

// CumSum: the axis must be known at import (a 0-d or one-element tensor). Ints are held in
// int32 (int64 too: sums beyond int32 wrap around there, as for Add).
void cumsum_op(Ctx& c) {
  const Dims axis = c.ints(1, "axis");
  if (axis.size() != 1) c.fail("axis must hold one value, got " + std::to_string(axis.size()));
  const int a = c.axis(axis[0], c.rank(0));
  const bool exclusive = c.attr_i("exclusive", 0) != 0, reverse = c.attr_i("reverse", 0) != 0;
  const int elem = c.elem(0);
  if (!ir::is_integral(elem) || elem == ir::kBool) {
    c.set(0, cumsum(c.f32(0), a, exclusive, reverse));
    return;
  }
  if (elem != ir::kInt32 && elem != ir::kInt64 && !narrow_int(elem)) {
    c.unsupported(std::string("CumSum of ") + ir::elem_name(elem) +
                  ": hetgraph holds integers in int32, which cannot hold every " +
                  ir::elem_name(elem));
  }
  // Sums wrap in int32 as unsigned words do, so narrow ones wrap to their width after.
  const Node r = cumsum(c.node(0), a, exclusive, reverse);
  c.set(0, narrow_int(elem) ? wrap_to(c, r, elem) : r, elem);
}

void thresholded_relu(Ctx& c) {  // x where x > alpha, else 0
  Node x = c.f32(0);
  c.set(0, where(greater(x, c.constant(c.attr_f("alpha", 1.0f))), x, c.constant(0.0f)));
}
void shrink(Ctx& c) {  // x + bias below -lambd, x - bias above lambd, 0 between
  Node x = c.f32(0);
  const float lambd = c.attr_f("lambd", 0.5f), bias = c.attr_f("bias", 0.0f);
  c.set(0, where(less(x, c.constant(-lambd)), x + bias,
                 where(greater(x, c.constant(lambd)), x - bias, c.constant(0.0f))));
}

// IsInf, IsNaN, Sign: bools (int32 0 / 1) from comparisons; no kernels of their own.
void is_inf(Ctx& c) {
  Node x = c.f32(0);
  const bool pos = c.attr_i("detect_positive", 1) != 0, neg = c.attr_i("detect_negative", 1) != 0;
  const Node p = equal(x, c.constant(INFINITY)), m = equal(x, c.constant(-INFINITY));
  // Neither: no element is reported; x < x is false everywhere (NaN too).
  c.set(0, pos && neg ? logical_or(p, m) : pos ? p : neg ? m : less(x, x), ir::kBool);
}
void is_nan(Ctx& c) {  // only a NaN differs from itself
  Node x = c.f32(0);
  c.set(0, logical_not(equal(x, x)), ir::kBool);
}
// -1, 0 or 1 (NaN stays NaN, as numpy's sign); integers as integers.
void sign_op(Ctx& c) {
  const int elem = c.elem(0);
  if (ir::is_integral(elem) && elem != ir::kBool) {
    Node x = c.node(0);
    const Node zero = c.graph().constant_i32(Shape{}, {0});
    c.set(0, sub(greater(x, zero), less(x, zero)), elem);
    return;
  }
  Node x = c.f32(0);
  const Node zero = c.constant(0.0f);
  const Node s = sub(cast(greater(x, zero), DType::f32), cast(less(x, zero), DType::f32));
  c.set(0, where(equal(x, x), s, x));
}

// Clip of integers (opset 12+), in the int32 they are held as: the result lies between the
// bounds and within x's own type, so nothing wraps.
void int_clip(Ctx& c) {
  if (c.version < 12) c.unsupported("Clip of integers before opset 12");
  Node y = c.node(0);
  for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
    if (!c.has(i)) continue;
    if (c.elem(i) != c.elem(0)) c.fail("the bound's type differs from the input's");
    Node bound;
    if (c.known(i)) {
      const Dims v = c.ints(i, i == 1 ? "min" : "max");
      if (v.size() != 1) c.fail("Clip bounds must be scalars");
      // A bound beyond int32 clips none of the values held: left out.
      if (v[0] < INT32_MIN || v[0] > INT32_MAX) {
        if ((i == 1) == (v[0] < INT32_MIN)) continue;
        c.unsupported("a bound of " + std::to_string(v[0]) + " beyond int32");
      }
      bound = c.graph().constant_i32(Shape{}, {static_cast<std::int32_t>(v[0])});
    } else {
      bound = c.reshape(c.node(i), {});
    }
    y = i == 1 ? maximum(y, bound) : minimum(y, bound);
  }
  c.set(0, y, c.elem(0));
}

void clip_op(Ctx& c) {
  if (c.elem(0) != ir::kFloat && ir::is_integral(c.elem(0)) && c.elem(0) != ir::kBool) {
    int_clip(c);
    return;
  }
  Node x = c.f32(0);
  float lo = -INFINITY, hi = INFINITY;
  if (c.version < 11) {
    lo = c.attr_f("min", -INFINITY);
    hi = c.attr_f("max", INFINITY);
  }
  // Bounds known at import are attributes of one clip; bounds computed at run time compose.
  Node y = x;
  bool runtime = false;
  for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
    if (!c.has(i)) continue;
    if (c.known(i)) {
      const std::vector<float> v = c.floats(i, i == 1 ? "min" : "max");
      if (v.size() != 1) c.fail("Clip bounds must be scalars");
      (i == 1 ? lo : hi) = v[0];
    } else {
      runtime = true;
    }
  }
  if (!runtime) {
    c.set(0, clip(x, lo, hi));
    return;
  }
  if (c.has(1)) y = c.known(1) ? maximum(y, c.constant(lo)) : maximum(y, c.f32(1));
  if (c.has(2)) y = c.known(2) ? minimum(y, c.constant(hi)) : minimum(y, c.f32(2));
  c.set(0, y);
}

void pow_op(Ctx& c) {
  Node a = c.f32(0);
  Node b;
  if (!ir::held_as_float(c.elem(1)) && c.known(1)) {  // an integer exponent known now
    b = c.constant(c.dims(1), c.floats(1, "exponent"));
  } else if (!ir::held_as_float(c.elem(1))) {
    b = cast(c.node(1), DType::f32);
  } else {
    b = c.f32(1);
  }
  c.set(0, pow(a, legacy_rhs(c, a, b)));
}

// Max / Min of any number of inputs, broadcasting: floats, or integers (held as int32).
template <Node (*F)(Node, Node)>
void extremum(Ctx& c) {
  if (c.inputs() == 1) return c.alias(0, 0);
  const int elem = c.elem(0);
  const bool ints = ir::is_integral(elem) && elem != ir::kBool;
  auto in = [&](std::size_t i) {
    if (ints && c.elem(i) != elem) c.fail("inputs 0 and " + std::to_string(i) + " differ in type");
    return ints ? c.node(i) : c.f32(i);
  };
  Node acc = in(0);
  for (std::size_t i = 1; i < c.inputs(); ++i) acc = F(acc, in(i));
  c.set(0, acc, elem);
}

void where_op(Ctx& c) {
  if (!ir::is_integral(c.elem(0))) c.fail("the condition must be bool");
  const int elem = c.elem(1);
  if (elem != c.elem(2)) c.fail("X and Y differ in element type");
  Node x = c.node(1), y = c.node(2);
  c.set(0, where(c.node(0), x, y), elem);
}

// Equal, Less, ...: float against float, or integers (held as int32) against integers; the
// result is bool, held as int32 0 / 1.
template <Node (*F)(Node, Node)>
void comparison(Ctx& c) {
  const int ea = c.elem(0), eb = c.elem(1);
  const bool ints = ir::is_integral(ea) && ir::is_integral(eb);
  if (!ints && (!ir::held_as_float(ea) || !ir::held_as_float(eb))) {
    c.unsupported(std::string("comparing ") + ir::elem_name(ea) + " with " + ir::elem_name(eb) +
                  "; hetgraph compares floats with floats or integers with integers");
  }
  Node a = ints ? c.node(0) : c.f32(0);
  Node b = legacy_rhs(c, a, ints ? c.node(1) : c.f32(1));
  c.set(0, F(a, b), ir::kBool);
}

// And, Or, Xor of bools (int32 0 / 1 here).
template <Node (*F)(Node, Node)>
void logic(Ctx& c) {
  for (std::size_t i : {std::size_t{0}, std::size_t{1}}) {
    if (c.elem(i) != ir::kBool) c.fail("input " + std::to_string(i) + " must be bool");
  }
  Node a = c.node(0);
  c.set(0, F(a, legacy_rhs(c, a, c.node(1))), ir::kBool);
}

void not_op(Ctx& c) {
  if (c.elem(0) != ir::kBool) c.fail("the input must be bool");
  c.set(0, logical_not(c.node(0)), ir::kBool);
}

void identity(Ctx& c) {
  c.alias(0, 0);
}

// Sum and Mean of any number of inputs, broadcasting.
void sum_op(Ctx& c) {
  Node acc = c.f32(0);
  for (std::size_t i = 1; i < c.inputs(); ++i) acc = add(acc, c.f32(i));
  if (c.n.op == "Mean" && c.inputs() > 1)
    acc = div(acc, c.constant(static_cast<float>(c.inputs())));
  if (c.inputs() == 1) {
    c.alias(0, 0);
    return;
  }
  c.set(0, acc);
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

void einsum(Ctx& c) {
  std::string eq;
  for (char ch : c.attr_s("equation", "")) {
    if (ch != ' ') eq += ch;
  }
  const auto arrow = eq.find("->");
  std::vector<std::string> terms;
  {
    const std::string lhs = eq.substr(0, arrow);
    std::size_t from = 0;
    for (std::size_t at; (at = lhs.find(',', from)) != std::string::npos; from = at + 1)
      terms.push_back(lhs.substr(from, at - from));
    terms.push_back(lhs.substr(from));
  }
  if (terms.size() != c.inputs()) {
    c.fail("equation '" + eq + "' has " + std::to_string(terms.size()) + " terms for " +
           std::to_string(c.inputs()) + " inputs");
  }
  // The dims "..." covers in each term, and in all (the longest).
  std::vector<std::size_t> ell_of(terms.size(), 0);
  std::size_t ell = 0;
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
  std::map<char, std::int64_t> size;
  std::vector<EinsumOperand> ops;
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
  std::string out;
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
  // Whether a letter is needed outside operands `a` and `b` (the output, or another operand).
  const auto needed = [&](char ch, std::size_t a, std::size_t b) {
    if (out.find(ch) != std::string::npos) return true;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      if (k != a && k != b && ops[k].letters.find(ch) != std::string::npos) return true;
    }
    return false;
  };
  const auto dims_of = [&](const std::string& letters) {
    Dims d;
    for (char ch : letters) d.push_back(size[ch]);
    return d;
  };
  const auto product = [&](const std::string& letters) { return numel(dims_of(letters)); };
  // Letters only one operand names and nothing needs: summed out, last axis first.
  for (std::size_t i = 0; i < ops.size(); ++i) {
    EinsumOperand& o = ops[i];
    for (std::size_t a = o.letters.size(); a-- > 0;) {
      if (!needed(o.letters[a], i, i)) {
        o.v = reduce_sum(o.v, static_cast<int>(a));
        o.letters.erase(a, 1);
      }
    }
  }
  while (ops.size() > 1) {
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
  c.set(0, permute_to(ops[0].v, ops[0].letters, out));
}

// ---- DFT and STFT ------------------------------------------------------------------------------
// A discrete Fourier transform is a product with a constant matrix: rows the n_in input samples
// (real, or real and imaginary), columns the K output bins (real and imaginary), each entry a
// cos or sin of 2 pi (k n mod N) / N worked out in double. O(n^2), which a matmul does well at
// the frame lengths audio front-ends use.

/// The [n_in * parts, K * 2] matrix of an N-point DFT (1/N-scaled inverse), `parts` 1 for real
/// input and 2 for complex. Input samples past N (a shorter dft_length) count for nothing;
/// missing ones (a longer) are zeros.
Node dft_matrix(Ctx& c, std::int64_t n_in, std::int64_t parts, std::int64_t N, std::int64_t K,
                bool inverse) {
  std::vector<float> m = c.host<float>(n_in * parts * K * 2);
  const double scale = inverse ? 1.0 / static_cast<double>(N) : 1.0, sign = inverse ? 1.0 : -1.0;
  const double pi2 = 2.0 * 3.14159265358979323846;
  for (std::int64_t n = 0; n < std::min(n_in, N); ++n) {
    for (std::int64_t k = 0; k < K; ++k) {
      const double t = pi2 * static_cast<double>((k * n) % N) / static_cast<double>(N);
      const double cs = std::cos(t) * scale, sn = std::sin(t) * scale * sign;
      // (xr + i xi)(cos t + i sign sin t): re = xr cos - xi sign sin, im = xr sign sin + xi cos
      const auto at = [&](std::int64_t part, std::int64_t out) {
        return static_cast<std::size_t>(((n * parts + part) * K + k) * 2 + out);
      };
      m[at(0, 0)] = static_cast<float>(cs);
      m[at(0, 1)] = static_cast<float>(sn);
      if (parts == 2) {
        m[at(1, 0)] = static_cast<float>(-sn);
        m[at(1, 1)] = static_cast<float>(cs);
      }
    }
  }
  return c.constant({n_in * parts, K * 2}, std::move(m));
}

/// One value of an input that must be known at import, at least `least`.
std::int64_t known_scalar(Ctx& c, std::size_t i, const char* what, std::int64_t least) {
  const Dims v = c.ints(i, what);
  if (v.size() != 1 || v[0] < least) {
    c.fail(std::string(what) + " must be one integer of at least " + std::to_string(least) +
           ", got " + dims_str(v));
  }
  return v[0];
}

// DFT (opset 17): along `axis` of [batch, ..., 1 or 2]; dft_length (known at import) pads with
// zeros or truncates; onesided keeps the first N / 2 + 1 bins of a real input's transform.
void dft(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  const int r = static_cast<int>(d.size());
  if (r < 3 || (d.back() != 1 && d.back() != 2))
    c.fail("the input " + dims_str(d) + " must be [batch, signal..., 1 or 2]");
  const std::int64_t a = c.attr_i("axis", 1), at = a < 0 ? a + r : a;
  if (at < 1 || at > r - 2)  // not the batch, not the real / imaginary parts
    c.fail("axis " + std::to_string(a) + " is not a signal axis of " + dims_str(d));
  const int axis = static_cast<int>(at);
  const bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
  const std::int64_t parts = d.back(), n_in = d[static_cast<std::size_t>(axis)];
  if (onesided && (parts == 2 || inverse))
    c.fail("onesided applies to the forward transform of a real input");
  const std::int64_t N = c.has(1) ? known_scalar(c, 1, "dft_length", 1) : n_in;
  const std::int64_t K = onesided ? N / 2 + 1 : N;
  // The signal axis moved next to the last: [rest..., n, parts] -> [rest..., K, 2].
  std::vector<int> perm;
  Dims rest;
  for (int k = 0; k < r - 1; ++k) {
    if (k != axis) perm.push_back(k), rest.push_back(d[static_cast<std::size_t>(k)]);
  }
  perm.push_back(axis);
  perm.push_back(r - 1);
  Node flat = c.reshape(transpose(x, perm), {numel(rest), n_in * parts});
  Node y = matmul(flat, dft_matrix(c, n_in, parts, N, K, inverse));
  Dims yd = rest;
  yd.push_back(K);
  yd.push_back(2);
  std::vector<int> back(static_cast<std::size_t>(r));  // the inverse permutation
  for (int k = 0; k < r; ++k) back[static_cast<std::size_t>(perm[static_cast<std::size_t>(k)])] = k;
  c.set(0, transpose(c.reshape(y, yd), back));
}

// STFT (opset 17): frames of frame_length samples every frame_step (both known at import; the
// length may come from the window), each multiplied by the window (if given) and transformed:
// [batch, frames, bins, 2]. Frames are one gather of constant positions.
void stft(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  if (d.size() != 3 || (d[2] != 1 && d[2] != 2))
    c.fail("the signal " + dims_str(d) + " must be [batch, length, 1 or 2]");
  const std::int64_t step = known_scalar(c, 1, "frame_step", 1), parts = d[2];
  const bool window = c.has(2);
  std::int64_t L = window ? numel(c.dims(2)) : 0;
  if (window && c.dims(2).size() != 1) c.fail("the window must be 1-d, got " + dims_str(c.dims(2)));
  if (c.has(3)) {
    const std::int64_t f = known_scalar(c, 3, "frame_length", 1);
    if (window && f != L)
      c.fail("frame_length " + std::to_string(f) + " differs from the window's " +
             std::to_string(L));
    L = f;
  }
  if (L < 1) c.fail("neither a window nor a frame_length says how long a frame is");
  if (L > d[1]) c.fail("frames of " + std::to_string(L) + " do not fit the signal " + dims_str(d));
  const bool onesided = c.attr_i("onesided", 1) != 0;
  if (onesided && parts == 2) c.fail("onesided applies to a real signal");
  const std::int64_t frames = (d[1] - L) / step + 1, K = onesided ? L / 2 + 1 : L;
  std::vector<std::int32_t> at = c.host<std::int32_t>(frames * L);
  for (std::int64_t f = 0; f < frames; ++f)
    for (std::int64_t n = 0; n < L; ++n)
      at[static_cast<std::size_t>(f * L + n)] = static_cast<std::int32_t>(f * step + n);
  Node fr = gather(x, c.graph().constant_i32(Shape{frames * L}, std::move(at)), 1);
  if (window) fr = mul(c.reshape(fr, {d[0], frames, L, parts}), c.reshape(c.f32(2), {L, 1}));
  Node y = matmul(c.reshape(fr, {d[0] * frames, L * parts}), dft_matrix(c, L, parts, L, K, false));
  c.set(0, c.reshape(y, {d[0], frames, K, 2}));
}

// ---- Window functions and MelWeightMatrix (opset 17) ------------------------------------------
// Constants of sizes known at import, computed in double as ONNX's reference does: the spectral
// front-end of an audio model is STFT(signal, window) times a mel matrix.

/// A float (or, with output_datatype int32 / int64, truncated integer) tensor known at import.
void set_known(Ctx& c, Dims dims, const std::vector<double>& v) {
  const auto elem = static_cast<int>(c.attr_i("output_datatype", ir::kFloat));
  ir::Tensor t;
  t.elem = elem;
  t.dims = std::move(dims);
  if (ir::held_as_float(elem)) {
    for (double x : v) t.f.push_back(ir::round_to_elem(static_cast<float>(x), elem));
  } else if (elem == ir::kInt32 || elem == ir::kInt64) {
    for (double x : v) t.i.push_back(static_cast<std::int64_t>(x));
  } else {
    c.unsupported(std::string("output_datatype ") + ir::elem_name(elem));
  }
  c.set(0, std::move(t));
}

// HannWindow, HammingWindow, BlackmanWindow: w[n] for n < size, periodic (over size, the
// default) or symmetric (over size - 1).
void window_op(Ctx& c) {
  const std::int64_t size = known_scalar(c, 0, "size", 1);
  c.host_check(size);
  const double N = static_cast<double>(c.attr_i("periodic", 1) != 0 ? size : size - 1);
  const double pi2 = 2.0 * 3.14159265358979323846;
  std::vector<double> w(static_cast<std::size_t>(size));
  for (std::int64_t n = 0; n < size; ++n) {
    const double t = N > 0 ? pi2 * static_cast<double>(n) / N : 0.0;
    double v = 0;
    if (c.n.op == "HannWindow") {
      v = std::pow(std::sin(t / 2), 2);
    } else if (c.n.op == "HammingWindow") {
      v = 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * std::cos(t);
    } else {
      v = 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2 * t);
    }
    w[static_cast<std::size_t>(n)] = v;
  }
  set_known(c, {size}, w);
}

// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangles between num_mel_bins + 2 points
// evenly spaced on the mel scale from lower_edge_hertz to upper_edge_hertz, each mapped to a
// spectrogram bin (floor((dft_length + 1) f / sample_rate)).
void mel_weight_matrix(Ctx& c) {
  const std::int64_t mels = known_scalar(c, 0, "num_mel_bins", 1),
                     dft_length = known_scalar(c, 1, "dft_length", 1),
                     rate = known_scalar(c, 2, "sample_rate", 1);
  const std::vector<float> lo = c.floats(3, "lower_edge_hertz"),
                           hi = c.floats(4, "upper_edge_hertz");
  if (lo.size() != 1 || hi.size() != 1 || !(lo[0] >= 0) || !(hi[0] > lo[0]))
    c.fail("the edges must be one number each, 0 <= lower < upper");
  const std::int64_t bins = dft_length / 2 + 1;
  c.host_check(bins * mels);
  const auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = mel(lo[0]), step = (mel(hi[0]) - low) / static_cast<double>(mels + 2);
  std::vector<std::int64_t> point(static_cast<std::size_t>(mels + 2));
  for (std::size_t k = 0; k < point.size(); ++k) {
    const double hz =
        700.0 * (std::pow(10.0, (static_cast<double>(k) * step + low) / 2595.0) - 1.0);
    point[k] = static_cast<std::int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
    // (the last point bounds a range; the others are bins written to)
    if (point[k] < 0 || point[k] >= bins + (k + 1 == point.size() ? 1 : 0))
      c.fail("upper_edge_hertz lies above the spectrogram's bins (the Nyquist frequency)");
  }
  std::vector<double> m(static_cast<std::size_t>(bins * mels), 0.0);
  const auto at = [&](std::int64_t j, std::int64_t i) {
    return static_cast<std::size_t>(j * mels + i);
  };
  for (std::int64_t i = 0; i < mels; ++i) {
    const std::int64_t left = point[static_cast<std::size_t>(i)],
                       centre = point[static_cast<std::size_t>(i + 1)],
                       right = point[static_cast<std::size_t>(i + 2)];
    if (centre == left) {
      m[at(centre, i)] = 1;
    } else {
      for (std::int64_t j = left; j <= centre; ++j)
        m[at(j, i)] = static_cast<double>(j - left) / static_cast<double>(centre - left);
    }
    for (std::int64_t j = centre; j < right; ++j)
      m[at(j, i)] = static_cast<double>(right - j) / static_cast<double>(right - centre);
  }
  set_known(c, {bins, mels}, m);
}

// ---- Optimizer steps (ai.onnx.preview.training, version 1) ------------------------------------
// Adagrad, Momentum and Adam update n tensors at once: inputs R (learning rate), T (the step
// count), then n of each of X, G and the optimizer's state; outputs the new X, then the new
// state, in the same groups. Elementwise, as ONNX's definitions write them.

struct OptimizerStep {
  Node R, T;              // T as float
  std::size_t n = 0;      // tensors updated
  std::size_t state = 0;  // state tensors per X
};

OptimizerStep optimizer_inputs(Ctx& c, std::size_t state) {
  const std::size_t groups = 2 + state;  // X, G and the state
  if (c.inputs() < 2 + groups || (c.inputs() - 2) % groups != 0 ||
      c.outputs() != (c.inputs() - 2) / groups * (1 + state)) {
    c.fail(std::to_string(c.inputs()) + " inputs and " + std::to_string(c.outputs()) +
           " outputs do not make groups of X, G and " + std::to_string(state) + " state tensors");
  }
  OptimizerStep s{c.f32(0), cast(c.node(1), DType::f32), (c.inputs() - 2) / groups, state};
  if (numel(c.shape(s.R)) != 1 || numel(c.shape(s.T)) != 1) c.fail("R and T must be scalars");
  s.R = c.reshape(s.R, {});
  s.T = c.reshape(s.T, {});
  for (std::size_t k = 0; k < s.n; ++k) {
    for (std::size_t g = 1; g < groups; ++g) {
      if (c.dims(2 + g * s.n + k) != c.dims(2 + k))
        c.fail("input " + std::to_string(2 + g * s.n + k) + " is not shaped as its X " +
               dims_str(c.dims(2 + k)));
    }
  }
  return s;
}

/// norm_coefficient * X + G, for tensor k.
Node regularized_gradient(Ctx& c, const OptimizerStep& s, std::size_t k) {
  const float norm = c.attr_f("norm_coefficient", 0.0f);
  Node g = c.f32(2 + s.n + k);
  return norm == 0.0f ? g : add(mul(c.f32(2 + k), c.constant(norm)), g);
}

void adagrad(Ctx& c) {
  const OptimizerStep s = optimizer_inputs(c, 1);
  const float decay = c.attr_f("decay_factor", 0.0f), eps = c.attr_f("epsilon", 1e-6f);
  Node r = div(s.R, add(mul(s.T, c.constant(decay)), c.constant(1.0f)));
  for (std::size_t k = 0; k < s.n; ++k) {
    Node g = regularized_gradient(c, s, k);
    Node h = add(c.f32(2 + 2 * s.n + k), mul(g, g));
    c.set(k, sub(c.f32(2 + k), div(mul(r, g), add(sqrt(h), c.constant(eps)))));
    c.set(s.n + k, h);
  }
}

void momentum(Ctx& c) {
  const OptimizerStep s = optimizer_inputs(c, 1);
  const float alpha = c.attr_f("alpha", 0.0f), beta = c.attr_f("beta", 0.0f);
  const std::string mode = c.attr_s("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    c.fail("mode '" + mode + "' is neither standard nor nesterov");
  // beta from the second step on; the first takes the gradient whole
  Node b = where(greater(s.T, c.constant(0.0f)), c.constant(beta), c.constant(1.0f));
  for (std::size_t k = 0; k < s.n; ++k) {
    Node g = regularized_gradient(c, s, k);
    Node v = add(mul(c.f32(2 + 2 * s.n + k), c.constant(alpha)), mul(b, g));
    Node step = mode == "standard" ? v : add(g, mul(v, c.constant(alpha)));
    c.set(k, sub(c.f32(2 + k), mul(s.R, step)));
    c.set(s.n + k, v);
  }
}

// Gradient: d(y)/d(x) for each x of xs, by hetgraph's reverse-mode autodiff; a y of more than
// one element is summed first (its gradient seeded with ones). The inputs are the xs'
// values, which must be the xs themselves: feeding other values would mean differentiating a
// copy of the graph at them.
void gradient(Ctx& c) {
  const ir::Attr* xs = c.has_attr("xs") ? &c.n.attrs.at("xs") : nullptr;
  if (xs == nullptr || xs->kind != ir::Attr::kStrings || xs->strings.empty())
    c.fail("attribute 'xs' must name the tensors to differentiate by");
  if (c.has_attr("zs")) c.unsupported("the attribute 'zs'");
  const std::string y_name = c.attr_s("y", "");
  if (y_name.empty()) c.fail("attribute 'y' must name the tensor to differentiate");
  if (c.inputs() != xs->strings.size() || c.outputs() != xs->strings.size())
    c.fail("it has " + std::to_string(c.inputs()) + " inputs and " + std::to_string(c.outputs()) +
           " outputs for " + std::to_string(xs->strings.size()) + " xs");
  std::vector<Node> wrt;
  for (std::size_t i = 0; i < c.inputs(); ++i) {
    if (c.n.inputs[i] != xs->strings[i]) {
      c.unsupported("input " + std::to_string(i) + " ('" + c.n.inputs[i] + "') is not x '" +
                    xs->strings[i] + "' itself");
    }
    if (c.in(i).known() && !c.in(i).initializer)
      c.unsupported("x '" + xs->strings[i] + "' is a constant: nothing to differentiate by");
    wrt.push_back(c.f32(i));
  }
  Node y = c.node_named(y_name);
  if (c.type(y).dtype != DType::f32) c.fail("y '" + y_name + "' is not float");
  if (numel(c.shape(y)) != 1) y = reduce_sum(y);
  std::vector<Node> g;
  try {
    g = gradients(c.reshape(y, {}), std::span<const Node>(wrt));
  } catch (const GraphError& e) {
    c.unsupported(std::string("differentiating y '") + y_name + "': " + e.what());
  }
  for (std::size_t i = 0; i < g.size(); ++i) c.set(i, g[i]);
}

void adam(Ctx& c) {
  const OptimizerStep s = optimizer_inputs(c, 2);
  const float alpha = c.attr_f("alpha", 0.9f), beta = c.attr_f("beta", 0.999f),
              eps = c.attr_f("epsilon", 1e-6f), post = c.attr_f("norm_coefficient_post", 0.0f);
  // From the second step on, R * sqrt(1 - beta^T) / (1 - alpha^T) (bias correction); at T = 0
  // R (the corrected form divides 0 by 0 there, and where() does not take it).
  const auto power = [&](float base) { return exp(mul(s.T, c.constant(std::log(base)))); };
  Node one = c.constant(1.0f);
  Node corrected = div(mul(s.R, sqrt(sub(one, power(beta)))), sub(one, power(alpha)));
  Node r = where(greater(s.T, c.constant(0.0f)), corrected, s.R);
  for (std::size_t k = 0; k < s.n; ++k) {
    Node g = regularized_gradient(c, s, k);
    Node v = add(mul(c.f32(2 + 2 * s.n + k), c.constant(alpha)), mul(g, c.constant(1.0f - alpha)));
    Node h =
        add(mul(c.f32(2 + 3 * s.n + k), c.constant(beta)), mul(mul(g, g), c.constant(1.0f - beta)));
    Node x = sub(c.f32(2 + k), mul(r, div(v, add(sqrt(h), c.constant(eps)))));
    c.set(k, post == 0.0f ? x : mul(x, c.constant(1.0f - post)));
    c.set(s.n + k, v);
    c.set(2 * s.n + k, h);
  }
}

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

// ---- reductions ----------------------------------------------------------------------------

/// Reduces x over `axes` (empty: all) with `op`, one axis at a time (keeping dims, then
/// dropping them at once unless keepdims).
Node reduce_axes(Ctx& c, Node x, Dims axes, bool keep, Node (*op)(Node, int, bool)) {
  const Dims d = c.shape(x);
  const int r = static_cast<int>(d.size());
  std::vector<bool> red(d.size(), axes.empty());
  for (std::int64_t a : axes) red[static_cast<std::size_t>(c.axis(a, r))] = true;
  Node y = x;
  if (r == 0) return y;
  if (std::all_of(red.begin(), red.end(), [](bool v) { return v; })) {
    y = op(x, kAllAxes, true);
  } else {
    for (int a = r - 1; a >= 0; --a) {
      if (red[static_cast<std::size_t>(a)]) y = op(y, a, true);
    }
  }
  Dims out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (!red[i])
      out.push_back(d[i]);
    else if (keep)
      out.push_back(1);
  }
  return c.reshape(y, out);
}

Dims reduce_axes_of(Ctx& c, bool& noop) {
  noop = false;
  Dims axes = c.attr_ints("axes");
  if (c.has(1)) axes = c.ints(1, "axes");
  if (axes.empty() && c.attr_i("noop_with_empty_axes", 0) != 0) noop = true;
  return axes;
}

// min over axes = -max of -x: exact (negation is), NaN included.
Node reduce_min_of(Node x, int axis, bool keepdims) {
  return neg(reduce_max(neg(x), axis, keepdims));
}

template <Node (*Op)(Node, int, bool)>
void reduce(Ctx& c) {
  bool noop = false;
  const Dims axes = reduce_axes_of(c, noop);
  if (noop) return c.alias(0, 0);
  const bool keep = c.attr_i("keepdims", 1) != 0;
  Node x = c.f32(0);
  const std::string& op = c.n.op;
  if (op == "ReduceSumSquare" || op == "ReduceL2") x = mul(x, x);
  if (op == "ReduceL1") x = abs(x);
  if (op == "ReduceLogSumExp") {
    // log(sum(exp(x - m))) + m with m the maximum, so large x do not overflow exp (ONNX's
    // reference does not shift; ONNX Runtime and torch.logsumexp do). An infinite m (a line of
    // -inf, or one holding +inf) shifts by 0 instead, which gives -inf or inf as it should.
    Node m = reduce_axes(c, x, axes, true, reduce_max);
    m = where(equal(abs(m), c.constant(INFINITY)), c.constant(0.0f), m);
    const Node s = reduce_axes(c, exp(sub(x, m)), axes, keep, reduce_sum);
    c.set(0, add(log(s), keep ? m : c.reshape(m, c.shape(s))));
    return;
  }
  Node y = reduce_axes(c, x, axes, keep, Op);
  if (op == "ReduceL2") y = sqrt(y);
  if (op == "ReduceLogSum") y = log(y);
  c.set(0, y);
}

// ---- softmax -------------------------------------------------------------------------------

template <Node (*Op)(Node, int)>
void softmax_op(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  const int r = static_cast<int>(d.size());
  if (c.version >= 13) {
    c.set(0, Op(x, c.axis(c.attr_i("axis", -1), r)));
    return;
  }
  // Before opset 13 the input is seen as 2-d: [dims before axis, dims from axis on].
  const int axis = c.axis(c.attr_i("axis", 1), std::max(r, 1));
  const std::int64_t rows = numel(Dims(d.begin(), d.begin() + axis));
  Node y = Op(c.reshape(x, {rows, numel(d) / rows}), -1);
  c.set(0, c.reshape(y, d));
}

// 1 at the first largest element along the axis (a NaN, if the line holds one, as argmax), 0
// elsewhere. Before opset 13 the input is seen as 2-d, as Softmax's.
void hardmax(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  const int r = static_cast<int>(d.size());
  auto one_hot_max = [&](Node v, int rank, int axis, std::int64_t n) {
    return cast(equal(argmax(v, axis, true), iota_along(c, rank, axis, n)), DType::f32);
  };
  if (c.version >= 13) {
    const int axis = c.axis(c.attr_i("axis", -1), r);
    c.set(0, one_hot_max(x, r, axis, d[static_cast<std::size_t>(axis)]));
    return;
  }
  const int axis = c.axis(c.attr_i("axis", 1), std::max(r, 1));
  const std::int64_t rows = numel(Dims(d.begin(), d.begin() + axis));
  const std::int64_t cols = numel(d) / rows;
  c.set(0, c.reshape(one_hot_max(c.reshape(x, {rows, cols}), 2, 1, cols), d));
}

// OneHot(indices, depth, values): values[1] where an index names the position along the new
// axis (a negative index counts from depth, as ONNX allows from -depth on), values[0]
// elsewhere, also for indices outside [-depth, depth). Integer indices compare as integers,
// float ones as floats (1.5 names no position).
void one_hot(Ctx& c) {
  const std::vector<float> dv = c.floats(1, "depth");
  if (dv.size() != 1 || !(dv[0] >= 1) || dv[0] > static_cast<float>(1 << 30))
    c.fail("depth must be one number of at least 1");
  const auto depth = static_cast<std::int64_t>(dv[0]);
  const int r = c.rank(0) + 1;
  if (r > Shape::kMaxRank) c.unsupported("a one-hot of rank " + std::to_string(r));
  const int axis = c.axis(c.attr_i("axis", -1), r);
  const int ei = c.elem(0);
  Node idx = ir::is_integral(ei) && ei != ir::kBool ? c.node(0) : c.f32(0);
  Dims grown = c.dims(0);
  grown.insert(grown.begin() + axis, 1);
  idx = c.reshape(idx, grown);
  Node pos = iota_along(c, r, axis, depth), neg = iota_along(c, r, axis, depth, depth);
  if (c.type(idx).dtype == DType::f32) {
    pos = cast(pos, DType::f32);
    neg = cast(neg, DType::f32);
  }
  const Node hit = logical_or(equal(idx, pos), equal(idx, neg));
  if (numel(c.dims(2)) != 2) c.fail("values must hold two elements (off, on)");
  const int ev = c.elem(2);
  Node values = ir::is_integral(ev) && ev != ir::kBool ? c.node(2) : c.f32(2);
  values = c.reshape(values, {2});
  c.set(0, where(hit, slice(values, 0, 1, 2), slice(values, 0, 0, 1)), ev);
}

// NegativeLogLikelihoodLoss of log-probabilities x [N, C, d...] and class ids t [N, d...]:
// -x[n, t, d...] * weight[t], 0 where t is ignore_index; reduced by none, sum or mean (the sum
// over the summed weights). The pick is a one-hot compare of t with the classes, through where,
// so that a -inf among the classes not picked stays out, and the gradient reaches x where it was
// picked. A target outside [0, C) that is not ignore_index is a FeedError at run time (ONNX
// leaves it undefined; PyTorch raises), not a loss of 0.
Node nll_loss_of(Ctx& c, Node x, std::size_t target, std::size_t weight) {
  const Dims dx = c.shape(x);
  const int r = static_cast<int>(dx.size());
  if (r < 2) c.fail("the input must have a class axis: [N, C, ...], got " + dims_str(dx));
  Dims dt = c.dims(target), want = dx;
  want.erase(want.begin() + 1);
  if (dt != want) c.fail("the target must be " + dims_str(want) + ", got " + dims_str(dt));
  if (!ir::is_integral(c.elem(target)) || c.elem(target) == ir::kBool)
    c.fail("the target must hold integer class ids");
  const std::int64_t classes = dx[1];
  Dims grown = dt;
  grown.insert(grown.begin() + 1, 1);
  const Node t = c.reshape(c.node(target), grown);
  const Node picks = equal(t, iota_along(c, r, 1, classes));  // [N, C, d...]
  const Node zero = c.constant(0.0f);
  const Node picked = reduce_sum(where(picks, x, zero), 1);  // x[n, t, d...]
  // The weight of each position: weight[t] (or 1 for a class id in range), 0 where ignored.
  Node w;
  if (c.has(weight)) {
    if (c.dims(weight) != Dims{classes})
      c.fail("the weight must be [" + std::to_string(classes) + "]");
    Dims wd(static_cast<std::size_t>(r), 1);
    wd[1] = classes;
    w = reduce_sum(where(picks, c.reshape(c.f32(weight), wd), zero), 1);
  } else {
    w = reduce_sum(cast(picks, DType::f32), 1);
  }
  Node ids = c.node(target);  // the class ids to check: ignored ones as 0
  if (c.has_attr("ignore_index")) {
    const std::int64_t ii = c.attr_i("ignore_index", 0);
    if (ii >= INT32_MIN && ii <= INT32_MAX) {
      const Node ignored = c.graph().constant_i32(Shape{}, {static_cast<std::int32_t>(ii)});
      const Node is_ignored = equal(ids, ignored);
      // A class id out of range picked nothing already; the check below refuses it.
      if (ii >= 0 && ii < classes) w = where(is_ignored, zero, w);
      ids = where(is_ignored, c.graph().constant_i32(Shape{}, {0}), ids);
    }  // else no int32 target equals it
  }
  // The check's zero added to the weights keeps it in the graph and ahead of the loss.
  w = add(w, index_check(c, ids, classes, "class ids"));
  const Node loss = neg(mul(picked, w));
  const std::string reduction = c.attr_s("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return reduce_sum(loss);
  if (reduction == "mean") return div(reduce_sum(loss), reduce_sum(w));
  c.fail("reduction must be none, sum or mean, got '" + reduction + "'");
}

void nll_loss(Ctx& c) {
  c.set(0, nll_loss_of(c, c.f32(0), 1, 2));
}

// SoftmaxCrossEntropyLoss: NegativeLogLikelihoodLoss of log_softmax over the class axis; the
// optional second output is that log_softmax.
void softmax_cross_entropy_loss(Ctx& c) {
  Node scores = c.f32(0);
  if (c.rank(0) < 2) c.fail("the scores must have a class axis: [N, C, ...]");
  const Node logp = log_softmax(scores, 1);
  c.set(0, nll_loss_of(c, logp, 1, 2));
  if (c.wants(1)) c.set(1, logp);
}

}  // namespace

// ---- quantization: uint8 / int8 values held as int32 ------------------------------------------

// The range of a quantized element type (uint8 unless the zero point says int8).
std::pair<float, float> quantized_range(Ctx& c, int elem) {
  if (elem == ir::kUint8) return {0.0f, 255.0f};
  if (elem == ir::kInt8) return {-128.0f, 127.0f};
  c.unsupported(std::string("quantizing to ") + ir::elem_name(elem) +
                " (hetgraph quantizes to uint8 and int8)");
}

// Input i (a scale or zero point, as float) shaped to broadcast against x: a scalar as it is,
// a 1-D tensor per slice of x's `axis` (opset 13's per-axis quantization).
// The axis input i (a scale or zero point) runs along: -1 for a scalar.
int quantization_axis(Ctx& c, std::size_t i, int rank_x) {
  const Dims d = c.dims(i);
  if (numel(d) == 1) return -1;
  const int axis = c.axis(c.attr_i("axis", 1), rank_x);
  if (d.size() != 1 || d[0] != c.dims(0)[static_cast<std::size_t>(axis)]) {
    c.fail("input " + std::to_string(i) + " " + dims_str(d) +
           " is neither a scalar nor one value " + "per slice of axis " + std::to_string(axis) +
           " of " + dims_str(c.dims(0)));
  }
  return axis;
}

Node quantization_param(Ctx& c, std::size_t i, int rank_x) {
  Node v = ir::held_as_float(c.elem(i)) ? c.node(i) : cast(c.node(i), DType::f32);
  const Dims d = c.dims(i);
  const int axis = quantization_axis(c, i, rank_x);
  if (axis < 0) return c.reshape(v, {});
  Dims shape(static_cast<std::size_t>(rank_x), 1);
  shape[static_cast<std::size_t>(axis)] = d[0];
  return c.reshape(v, shape);
}

// saturate(round(x / scale) + zero_point), as the int32 words of the quantized values.
Node quantize(Node x, Node scale, Node zero_point, std::pair<float, float> range) {
  return cast(clip(add(hetgraph::round(div(x, scale)), zero_point), range.first, range.second),
              DType::i32);
}

// Integer products exact in float32: a and b hold ints of magnitude at most 255 (8-bit values
// less their zero points), so a product is below 2^16 and a sum of 256 of them below 2^24,
// which float32 holds exactly in any order of summation. Longer sums are cut into such chunks,
// each product converted to int32 and added there.
Node exact_int_matmul(Ctx& c, Node a, Node b, const std::vector<float>* b_host) {
  const Dims da = c.shape(a), db = c.shape(b);
  if (db.size() != 2) b_host = nullptr;
  if (da.size() < 2 || db.size() < 2 || da.size() > 3 || db.size() > 3 ||
      (da.size() == 2 && db.size() == 3))
    c.unsupported("an integer product of " + dims_str(da) + " and " + dims_str(db));
  const std::int64_t k = da.back();
  constexpr std::int64_t kChunk = 256;
  const Node af = cast(a, DType::f32), bf = b_host ? Node() : cast(b, DType::f32);
  const int ka = static_cast<int>(da.size()) - 1, kb = static_cast<int>(db.size()) - 2;
  Node acc;
  for (std::int64_t k0 = 0; k0 < k; k0 += kChunk) {
    const std::int64_t k1 = std::min(k, k0 + kChunk);
    const Node as = k1 - k0 == k ? af : slice(af, ka, k0, k1);
    Node bs;
    if (b_host != nullptr) {  // rows k0..k1 of b [k, n]
      const std::int64_t n = db[1];
      bs = c.constant({k1 - k0, n},
                      std::vector<float>(b_host->begin() + k0 * n, b_host->begin() + k1 * n));
    } else {
      bs = k1 - k0 == k ? bf : slice(bf, kb, k0, k1);
    }
    const Node part = cast(matmul(as, bs), DType::i32);
    acc = acc.valid() ? add(acc, part) : part;
  }
  c.type(acc);
  return acc;
}

std::vector<float> known_less_zero_point(Ctx& c, std::size_t i, std::size_t zp, std::int64_t inner,
                                         std::int64_t count) {
  if (!c.known(i) || (c.has(zp) && !c.known(zp))) return {};
  const ir::Tensor& t = c.known_tensor(i, "the weights");
  const Dims z = c.has(zp) ? c.ints(zp, "a zero point") : Dims{0};
  if (static_cast<std::int64_t>(z.size()) != (z.size() == 1 ? 1 : count))
    c.fail("input " + std::to_string(zp) + " holds " + std::to_string(z.size()) +
           " zero points for " + std::to_string(count));
  std::vector<float> v(t.i.size());
  for (std::size_t k = 0; k < v.size(); ++k) {
    const auto at = z.size() == 1 ? 0 : (static_cast<std::int64_t>(k) / inner) % count;
    v[k] = static_cast<float>(t.i[k] - z[static_cast<std::size_t>(at)]);
  }
  return v;
}

// saturate(round(x * scale) + zero point), as `elem`'s int32 words.
Node requantize(Ctx& c, Node x, Node scale, Node zp, int elem) {
  const auto range = quantized_range(c, elem);
  if (c.type(zp).dtype != DType::f32) zp = cast(zp, DType::f32);
  return cast(clip(add(hetgraph::round(mul(x, scale)), zp), range.first, range.second), DType::i32);
}

namespace {

void quantize_linear(Ctx& c) {
  Node x = c.f32(0);
  const int rank = c.rank(0);
  const int elem = c.has(2) ? c.elem(2) : ir::kUint8;
  const auto range = quantized_range(c, elem);
  const Node zp = c.has(2) ? quantization_param(c, 2, rank) : c.constant(0.0f);
  c.set(0, quantize(x, quantization_param(c, 1, rank), zp, range), elem);
}

void dequantize_linear(Ctx& c) {
  const int elem = c.elem(0);
  if (elem != ir::kUint8 && elem != ir::kInt8 && elem != ir::kInt32) {
    c.unsupported(std::string("dequantizing ") + ir::elem_name(elem));
  }
  const int rank = c.rank(0);
  // Known at import (a QDQ model's weights): the floats are made there, in the same float32
  // steps as at run time, so the convolution or product after them has constant weights.
  if (c.known(0) && c.known(1) && (!c.has(2) || c.known(2))) {
    const Dims dx = c.dims(0);
    const int axis =
        std::max(quantization_axis(c, 1, rank), c.has(2) ? quantization_axis(c, 2, rank) : -1);
    std::int64_t inner = 1, along = 1;
    if (axis >= 0) {
      along = dx[static_cast<std::size_t>(axis)];
      for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < dx.size(); ++d) inner *= dx[d];
    }
    c.host_check(numel(dx));
    ir::Tensor r;
    r.elem = ir::kFloat;
    r.dims = dx;
    r.f = known_less_zero_point(c, 0, 2, inner, along);
    const std::vector<float> scale = c.floats(1, "x_scale");
    for (std::size_t k = 0; k < r.f.size(); ++k) {
      const auto a = static_cast<std::size_t>((static_cast<std::int64_t>(k) / inner) % along);
      r.f[k] *= scale[scale.size() == 1 ? 0 : a];
    }
    c.set(0, std::move(r));
    return;
  }
  Node x = cast(c.node(0), DType::f32);
  if (c.has(2)) x = sub(x, quantization_param(c, 2, rank));
  c.set(0, mul(x, quantization_param(c, 1, rank)));
}

// DynamicQuantizeLinear: uint8 with the scale and zero point that map [min(x, 0), max(x, 0)]
// onto [0, 255].
void dynamic_quantize_linear(Ctx& c) {
  Node x = c.f32(0);
  const Node zero = c.constant(0.0f);
  const Node lo = minimum(reduce_min_of(x, kAllAxes, false), zero);
  const Node hi = maximum(reduce_max(x, kAllAxes, false), zero);
  const Node scale = div(sub(hi, lo), c.constant(255.0f));
  // ONNX: the zero point saturated, then rounded.
  const Node zp = hetgraph::round(clip(sub(zero, div(lo, scale)), 0.0f, 255.0f));
  c.set(0, quantize(x, scale, zp, {0.0f, 255.0f}), ir::kUint8);
  c.set(1, scale);
  c.set(2, cast(zp, DType::i32), ir::kUint8);
}

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

// MatMulInteger: (A - a_zero_point) . (B - b_zero_point) in int32, zero points per tensor or
// per row of A / column of B.
void matmul_integer(Ctx& c) {
  for (std::size_t i : {std::size_t{0}, std::size_t{1}}) {
    if (c.elem(i) != ir::kUint8 && c.elem(i) != ir::kInt8)
      c.unsupported(std::string("input ") + std::to_string(i) + " of type " +
                    ir::elem_name(c.elem(i)));
  }
  Node a = c.node(0), b = c.node(1);
  if (c.has(2))
    a = sub(a, c.dims(2).size() == 1 && numel(c.dims(2)) > 1
                   ? c.reshape(c.node(2), {c.dims(2)[0], 1})
                   : c.reshape(c.node(2), {}));
  if (c.has(3)) b = sub(b, numel(c.dims(3)) == 1 ? c.reshape(c.node(3), {}) : c.node(3));
  const Dims db = c.dims(1);  // (a rank other than 2 is exact_int_matmul's to refuse or batch)
  const std::vector<float> b_host =
      db.size() == 2 ? known_less_zero_point(c, 1, 3, 1, db[1]) : std::vector<float>{};
  c.set(0, exact_int_matmul(c, a, b, b_host.empty() ? nullptr : &b_host), ir::kInt32);
}

// Input i of QLinearMatMul (a scale or zero point): a scalar, or one value per row of a
// ([rows, 1], `rows` of them) or per column of b ([cols]); int32 or float as it is held.
Node per_row_or_column(Ctx& c, std::size_t i, std::int64_t count, bool rows) {
  const Dims d = c.dims(i);
  if (numel(d) == 1) return c.reshape(c.node(i), {});
  if (d != Dims{count}) {
    c.fail("input " + std::to_string(i) + " " + dims_str(d) +
           " is neither a scalar nor one value per " + (rows ? "row (" : "column (") +
           std::to_string(count) + ")");
  }
  return rows ? c.reshape(c.node(i), {count, 1}) : c.node(i);
}

// QLinearMatMul: the integer product of the inputs less their zero points, rescaled by
// a_scale b_scale / y_scale and quantized with y_zero_point. a's and y's scales and zero points
// may be per row, b's per column.
void qlinear_matmul(Ctx& c) {
  const Dims da = c.dims(0), db = c.dims(3);
  if (da.size() < 2 || db.size() < 2)
    c.unsupported("a vector operand " + dims_str(da.size() < 2 ? da : db) +
                  " (hetgraph takes matrices or batches of them)");
  const std::int64_t rows = da[da.size() - 2], cols = db.back();
  const Node a = sub(c.node(0), per_row_or_column(c, 2, rows, true));
  const Node b = sub(c.node(3), per_row_or_column(c, 5, cols, false));
  const std::vector<float> b_host = known_less_zero_point(c, 3, 5, 1, cols);
  const Node acc = cast(exact_int_matmul(c, a, b, b_host.empty() ? nullptr : &b_host), DType::f32);
  const Node scale =
      div(mul(per_row_or_column(c, 1, rows, true), per_row_or_column(c, 4, cols, false)),
          per_row_or_column(c, 6, rows, true));
  const int elem = c.elem(7);
  c.set(0, requantize(c, acc, scale, per_row_or_column(c, 7, rows, true), elem), elem);
}

}  // namespace

void register_math_ops(std::vector<Handler>& h) {
  h.push_back({"Add", 1, 14, arithmetic<add>});
  h.push_back({"Sub", 1, 14, arithmetic<sub>});
  h.push_back({"Mul", 1, 14, arithmetic<mul>});
  h.push_back({"Div", 1, 14, div_op});
  h.push_back({"Sum", 1, 13, sum_op});
  h.push_back({"Mean", 1, 13, sum_op});
  h.push_back({"Ceil", 1, 13, ceil_op});
  h.push_back({"Reciprocal", 1, 13, reciprocal});
  h.push_back({"Softplus", 1, 17, softplus});
  h.push_back({"Identity", 1, 16, identity});
  h.push_back({"ThresholdedRelu", 10, 10, thresholded_relu});
  h.push_back({"Shrink", 9, 9, shrink});
  h.push_back({"IsInf", 10, 10, is_inf});
  h.push_back({"IsNaN", 9, 13, is_nan});
  h.push_back({"Sign", 9, 13, sign_op});
  h.push_back({"Mod", 10, 13, mod_op});
  h.push_back({"LeakyRelu", 1, 16, leaky_relu_op});
  h.push_back({"PRelu", 1, 16, prelu});
  h.push_back({"Elu", 1, 6, elu});
  h.push_back({"Selu", 1, 6, selu});
  h.push_back({"HardSigmoid", 1, 6, hard_sigmoid});
  h.push_back({"HardSwish", 14, 14, hard_swish});
  h.push_back({"Clip", 1, 13, clip_op});
  h.push_back({"QuantizeLinear", 10, 13, quantize_linear});
  h.push_back({"DequantizeLinear", 10, 13, dequantize_linear});
  h.push_back({"DynamicQuantizeLinear", 11, 11, dynamic_quantize_linear});
  h.push_back({"MatMulInteger", 10, 10, matmul_integer});
  h.push_back({"Det", 11, 11, det});
  h.push_back({"QLinearMatMul", 10, 10, qlinear_matmul});
  h.push_back({"Pow", 1, 15, pow_op});
  h.push_back({"Max", 1, 13, extremum<maximum>});
  h.push_back({"Min", 1, 13, extremum<minimum>});
  h.push_back({"Where", 9, 16, where_op});
  h.push_back({"Equal", 1, 13, comparison<equal>});
  h.push_back({"Less", 1, 13, comparison<less>});
  h.push_back({"LessOrEqual", 12, 16, comparison<less_equal>});
  h.push_back({"Greater", 1, 13, comparison<greater>});
  h.push_back({"GreaterOrEqual", 12, 16, comparison<greater_equal>});
  h.push_back({"And", 1, 7, logic<logical_and>});
  h.push_back({"Or", 1, 7, logic<logical_or>});
  h.push_back({"Xor", 1, 7, logic<logical_xor>});
  h.push_back({"Not", 1, 1, not_op});
  h.push_back({"ReduceMin", 1, 13, reduce<reduce_min_of>});
  h.push_back({"MatMul", 1, 13, matmul_op});
  h.push_back({"Einsum", 12, 12, einsum});
  h.push_back({"DFT", 17, 17, dft});
  h.push_back({"STFT", 17, 17, stft});
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    h.push_back({w, 17, 17, window_op});
  h.push_back({"MelWeightMatrix", 17, 17, mel_weight_matrix});
  h.push_back({"Adagrad", 1, 1, adagrad, "ai.onnx.preview.training"});
  h.push_back({"Momentum", 1, 1, momentum, "ai.onnx.preview.training"});
  h.push_back({"Adam", 1, 1, adam, "ai.onnx.preview.training"});
  h.push_back({"Gradient", 1, 1, gradient, "ai.onnx.preview.training"});
  h.push_back({"Gemm", 1, 13, gemm});
  h.push_back({"ReduceSum", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceMean", 1, 13, reduce<reduce_mean>});
  h.push_back({"ReduceMax", 1, 13, reduce<reduce_max>});
  h.push_back({"ReduceSumSquare", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceL1", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceL2", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceLogSum", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceLogSumExp", 1, 13, reduce<reduce_sum>});
  h.push_back({"ReduceProd", 1, 13, reduce<reduce_prod>});
  h.push_back({"CumSum", 11, 14, cumsum_op});
  h.push_back({"Softmax", 1, 13, softmax_op<softmax>});
  h.push_back({"LogSoftmax", 1, 13, softmax_op<log_softmax>});
  h.push_back({"Hardmax", 1, 13, hardmax});
  h.push_back({"OneHot", 9, 11, one_hot});
  h.push_back({"NegativeLogLikelihoodLoss", 12, 13, nll_loss});
  h.push_back({"SoftmaxCrossEntropyLoss", 12, 13, softmax_cross_entropy_loss});
}

}  // namespace hetgraph::onnx::imp
