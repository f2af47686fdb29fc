// SPDX-License-Identifier: Apache-2.0
// ONNX elementwise math on hetgraph ops: arithmetic (floats, and integers held as int32) and
// activations, Clip, Pow, Max / Min / Sum / Mean of many inputs, comparisons, logic, Where,
// Mod, CumSum, IsInf / IsNaN / Sign, OneHot, BitShift and TfIdfVectorizer. The other math families
// have files of their own: ops_reduce.cpp (reductions, Softmax, the losses), ops_linalg.cpp
// (MatMul, Gemm, Einsum, Det), ops_signal.cpp (DFT, STFT, windows), ops_quant.cpp (quantization)
// and ops_training.cpp (ai.onnx.preview.training).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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
// unsigned words do): int64 results wrap at 32 bits (docs/onnx.md says so); 8- and 16-bit ones
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

// x >= 0 ? x : slope * x, with slope broadcast (per channel, usually): PRelu before schema 9
// (from 9 on, the prelu op's row imports it as one node).
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

// x^y for an integer base and exponent, as numpy and ONNX Runtime give it in the base's type:
// by repeated squaring in int32 (exact wherever the result fits int32; beyond, products wrap
// as int32 ones do, as hetgraph's int64 arithmetic does). The exponent's bits come from
// integer remainders (bit k: y mod 2^(k+1) >= 2^k), as many as a known y needs, 31 otherwise.
// A negative exponent gives 1 / x^-y truncated: 1 for x = 1, +-1 for x = -1, 0 otherwise
// (x = 0 too, where ONNX Runtime casts an infinity).
Node int_pow(Ctx& c, Node x, Node y) {
  Graph& g = c.graph();
  auto k32 = [&](std::int64_t v) {
    return g.constant_i32(Shape{}, {static_cast<std::int32_t>(v)});
  };
  int bits = 31;
  if (c.known(1)) {
    std::int64_t top = 0;
    for (std::int64_t v : c.ints(1, "exponent")) top = std::max(top, v);
    bits = std::max(1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(top))));
    bits = std::min(bits, 31);
  }
  Node result = k32(1), square = x;
  for (int k = 0; k < bits; ++k) {
    const Node bit =
        k < 30 ? greater_equal(mod(y, k32(std::int64_t{2} << k)), k32(std::int64_t{1} << k))
               : greater_equal(y, k32(std::int64_t{1} << 30));
    result = where(bit, mul(result, square), result);
    if (k + 1 < bits) square = mul(square, square);
  }
  const Node odd = equal(mod(y, k32(2)), k32(1));
  const Node inverse = where(equal(x, k32(1)), k32(1),
                             where(equal(x, k32(-1)), where(odd, k32(-1), k32(1)), k32(0)));
  return where(less(y, k32(0)), inverse, result);
}

void pow_op(Ctx& c) {
  const int ex = c.elem(0);
  if (ir::is_integral(ex) && ex != ir::kBool) {  // an integer base: the result has its type
    const int ey = c.elem(1);
    Node r = ir::is_integral(ey) && ey != ir::kBool
                 ? int_pow(c, c.node(0), c.node(1))
                 : cast(pow(cast(c.node(0), DType::f32), c.f32(1)), DType::i32);  // truncated
    c.set(0, narrow_int(ex) ? wrap_to(c, r, ex) : r, ex);
    return;
  }
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

// BitShift of uint8 and uint16 (held as int32). Left: x times 2^min(y, width) in int32 (it
// fits; the product wraps as unsigned words do) wrapped to the width; right: floor(x / 2^y),
// exact in float32 for these widths. uint32 and uint64 shifts would not be exact so.
void bit_shift(Ctx& c) {
  const std::string dir = c.attr_s("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") c.fail("direction '" + dir + "' is neither LEFT nor RIGHT");
  const int elem = c.elem(0);
  if (c.elem(1) != elem) c.fail("X and Y differ in element type");
  if (elem != ir::kUint8 && elem != ir::kUint16) {
    c.unsupported(std::string("shifts of ") + ir::elem_name(elem) +
                  ": hetgraph shifts uint8 and uint16 only (exact in its int32 and float32)");
  }
  const Node x = c.node(0), y = cast(c.node(1), DType::f32);
  const float width = elem == ir::kUint8 ? 8.0f : 16.0f;
  if (dir == "LEFT") {
    const Node factor = cast(pow(c.constant(2.0f), minimum(y, c.constant(width))), DType::i32);
    c.set(0, wrap_to(c, mul(x, factor), elem), elem);
  } else {
    const Node q = div(cast(x, DType::f32), pow(c.constant(2.0f), y));
    c.set(0, cast(hetgraph::floor(q), DType::i32), elem);
  }
}

// TfIdfVectorizer's pool, checked: section k of pool_int64s (from ngram_counts[k] to the next
// start) holds (k + 1)-grams; ngram_indexes gives each n-gram's output column, weights its
// weight (1 when absent).
struct NgramPool {
  Dims starts, columns, ids;
  std::vector<float> weights;
  std::int64_t grams = 0, outs = 0;
  std::int64_t end(std::size_t k) const {
    return k + 1 < starts.size() ? starts[k + 1] : static_cast<std::int64_t>(ids.size());
  }
};
NgramPool ngram_pool(Ctx& c) {
  NgramPool p{c.attr_ints("ngram_counts"), c.attr_ints("ngram_indexes"), c.attr_ints("pool_int64s"),
              c.attr_floats("weights")};
  for (std::size_t k = 0; k < p.starts.size(); ++k) {
    const auto n = static_cast<std::int64_t>(k + 1);
    if (p.starts[k] < 0 || p.end(k) < p.starts[k] ||
        p.end(k) > static_cast<std::int64_t>(p.ids.size()) || (p.end(k) - p.starts[k]) % n != 0) {
      c.fail("ngram_counts " + dims_str(p.starts) + " do not split a pool of " +
             std::to_string(p.ids.size()) + " ids into n-grams");
    }
    p.grams += (p.end(k) - p.starts[k]) / n;
  }
  const std::string grams = std::to_string(p.grams) + " n-grams";
  if (static_cast<std::int64_t>(p.columns.size()) != p.grams)
    c.fail("ngram_indexes has " + std::to_string(p.columns.size()) + " entries for " + grams);
  if (p.weights.empty()) p.weights.assign(static_cast<std::size_t>(p.grams), 1.0f);
  if (static_cast<std::int64_t>(p.weights.size()) != p.grams)
    c.fail("weights has " + std::to_string(p.weights.size()) + " entries for " + grams);
  for (std::int64_t o : p.columns) {
    if (o < 0 || o >= kMaxImportElements) c.fail("ngram_indexes holds " + std::to_string(o));
    p.outs = std::max(p.outs, o + 1);
  }
  for (std::int64_t id : p.ids) {
    if (id < INT32_MIN || id > INT32_MAX)
      c.unsupported("pool id " + std::to_string(id) + " outside int32 (ids are held as int32)");
  }
  return p;
}

// TfIdfVectorizer over integer ids, [C] or [N, C]: each n-gram of the pool (lengths
// min_gram_length to max_gram_length; n-grams of 2 or more tokens also with 1 to
// max_skip_count items skipped between their tokens) is counted per row, as the comparisons of
// n shifted slices of X with the pool's tokens (one [N, positions, n-grams] block per length
// and skip), and-ed and summed. Then the mode (TF: the counts; IDF: the weight where counted;
// TFIDF: count times weight), each n-gram into the output column ngram_indexes names.
void tfidf_vectorizer(Ctx& c) {
  const int elem = c.elem(0);
  if (c.has_attr("pool_strings") || !ir::is_integral(elem) || elem == ir::kBool)
    c.unsupported("string n-grams (hetgraph holds no strings)");
  const Dims dx = c.dims(0);
  if (dx.size() != 1 && dx.size() != 2) c.fail("X must be [C] or [N, C], not " + dims_str(dx));
  const std::int64_t rows = dx.size() == 2 ? dx[0] : 1, len = dx.back();
  const std::int64_t min_n = c.attr_i("min_gram_length", 0), max_n = c.attr_i("max_gram_length", 0),
                     max_skip = c.attr_i("max_skip_count", 0);
  const std::string mode = c.attr_s("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    c.fail("mode '" + mode + "' is none of TF, IDF, TFIDF");
  if (min_n < 1 || max_n < min_n || max_skip < 0)
    c.fail("gram lengths " + std::to_string(min_n) + " to " + std::to_string(max_n) +
           " and max_skip_count " + std::to_string(max_skip) + " do not make n-grams");
  const NgramPool p = ngram_pool(c);
  Graph& g = c.graph();
  const Node x = c.reshape(c.node(0), {rows, len});
  std::vector<Node> counts;  // [rows, n-grams of the section], section by section
  for (std::size_t k = 0; k < p.starts.size(); ++k) {
    const auto n = static_cast<std::int64_t>(k + 1);
    const std::int64_t count = (p.end(k) - p.starts[k]) / n;
    if (count == 0) continue;
    Node total;
    for (std::int64_t skip = 0; n >= min_n && n <= max_n && skip <= (n == 1 ? 0 : max_skip);
         ++skip) {
      const std::int64_t step = skip + 1, at = len - (n - 1) * step;  // start positions
      if (at < 1) break;
      Node hit;  // [rows, at, count]: where all n tokens match
      for (std::int64_t t = 0; t < n; ++t) {
        std::vector<std::int32_t> ids = c.host<std::int32_t>(count);
        for (std::int64_t j = 0; j < count; ++j)
          ids[static_cast<std::size_t>(j)] =
              static_cast<std::int32_t>(p.ids[static_cast<std::size_t>(p.starts[k] + j * n + t)]);
        const Node tokens = c.reshape(slice(x, 1, t * step, t * step + at), {rows, at, 1});
        const Node same = equal(tokens, g.constant_i32(Shape{1, 1, count}, std::move(ids)));
        hit = t == 0 ? same : logical_and(hit, same);
      }
      const Node found = reduce_sum(cast(hit, DType::f32), 1);
      total = total.valid() ? add(total, found) : found;
    }
    counts.push_back(total.valid() ? total
                                   : c.constant({rows, count}, c.host<float>(rows * count)));
  }
  if (counts.empty()) c.fail("the pool holds no n-grams");
  Node v = counts.size() == 1 ? counts[0] : concat(std::span<const Node>(counts), 1);
  const Node w = c.constant({1, p.grams}, p.weights);
  if (mode == "IDF") v = mul(cast(greater(v, c.constant(0.0f)), DType::f32), w);
  if (mode == "TFIDF") v = mul(v, w);
  // Output column o is the n-gram ngram_indexes puts there, or 0: one gather from v with a
  // zero column after it (work and constants in the columns, not columns x n-grams). Two
  // n-grams sharing a column add up: a product with a 0/1 matrix then.
  std::vector<std::int32_t> from = c.host<std::int32_t>(p.outs, static_cast<std::int32_t>(p.grams));
  bool shared = false;
  for (std::int64_t i = 0; i < p.grams; ++i) {
    auto& f = from[static_cast<std::size_t>(p.columns[static_cast<std::size_t>(i)])];
    shared = shared || f != p.grams;
    f = static_cast<std::int32_t>(i);
  }
  Node y;
  if (!shared) {
    const Node padded = concat({v, c.constant({rows, 1}, c.host<float>(rows))}, 1);
    y = gather(padded, g.constant_i32(Shape{p.outs}, std::move(from)), 1);
  } else {
    std::vector<float> to_column = c.host<float>(p.grams * p.outs);
    for (std::int64_t i = 0; i < p.grams; ++i)
      to_column[static_cast<std::size_t>(i * p.outs + p.columns[static_cast<std::size_t>(i)])] = 1;
    y = matmul(v, c.constant({p.grams, p.outs}, std::move(to_column)));
  }
  c.set(0, dx.size() == 1 ? c.reshape(y, {p.outs}) : y, ir::kFloat);
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
  h.push_back({"PRelu", 1, 8, prelu});
  h.push_back({"Elu", 1, 6, elu});
  h.push_back({"Selu", 1, 6, selu});
  h.push_back({"HardSigmoid", 1, 6, hard_sigmoid});
  h.push_back({"Clip", 1, 13, clip_op});
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
  h.push_back({"CumSum", 11, 14, cumsum_op});
  h.push_back({"OneHot", 9, 11, one_hot});
  h.push_back({"TfIdfVectorizer", 9, 9, tfidf_vectorizer});
  h.push_back({"BitShift", 11, 11, bit_shift});
}

}  // namespace hetgraph::onnx::imp
