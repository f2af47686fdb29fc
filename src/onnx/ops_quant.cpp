// SPDX-License-Identifier: Apache-2.0
// ONNX quantization on hetgraph ops, uint8 / int8 values held as int32: QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger and QLinearMatMul, and the helpers the
// quantized convolutions of ops_nn.cpp share (importer.hpp, "quantization").
#include <algorithm>
#include <string>
#include <utility>

#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

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

void register_quant_ops(std::vector<Handler>& h) {
  h.push_back({"QuantizeLinear", 10, 13, quantize_linear});
  h.push_back({"DequantizeLinear", 10, 13, dequantize_linear});
  h.push_back({"DynamicQuantizeLinear", 11, 11, dynamic_quantize_linear});
  h.push_back({"MatMulInteger", 10, 10, matmul_integer});
  h.push_back({"QLinearMatMul", 10, 10, qlinear_matmul});
}

}  // namespace hetgraph::onnx::imp
