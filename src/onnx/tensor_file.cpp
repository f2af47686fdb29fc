// SPDX-License-Identifier: Apache-2.0
// TensorProto files (the ONNX backend tests' input_N.pb and output_N.pb) as TensorData.
#include <climits>

#include "hetgraph/onnx.hpp"
#include "onnx/ir.hpp"
#include "util/atomic_file.hpp"

namespace hetgraph::onnx {

TensorData parse_tensor(std::span<const std::byte> bytes, const std::string& what) {
  const ir::Tensor t = ir::parse_tensor(bytes.data(), bytes.size(), what);
  TensorData out;
  out.name = t.name;
  out.onnx_type = ir::elem_name(t.elem);
  if (t.dims.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    throw DataError(what + ": tensor '" + t.name + "' has rank " + std::to_string(t.dims.size()) +
                    "; hetgraph tensors have rank 0 to " + std::to_string(Shape::kMaxRank));
  }
  out.shape = Shape(std::span<const std::int64_t>(t.dims));
  if (ir::held_as_float(t.elem)) {  // float16, bfloat16 and double values are floats
    out.dtype = DType::f32;
    out.f32 = t.f;
  } else if (ir::is_integral(t.elem)) {
    out.dtype = DType::i32;
    out.i32.reserve(t.i.size());
    for (std::int64_t v : t.i) {
      if (v < INT32_MIN || v > INT32_MAX || (t.elem == ir::kUint64 && v < 0)) {
        // (a uint64 above 2^63 reads as a negative int64)
        throw DataError(what + ": tensor '" + t.name + "' holds " +
                        (v < 0 && t.elem == ir::kUint64
                             ? std::to_string(static_cast<std::uint64_t>(v))
                             : std::to_string(v)) +
                        ", outside int32 (hetgraph holds integers as int32)");
      }
      out.i32.push_back(static_cast<std::int32_t>(v));
    }
  } else {
    throw DataError(what + ": tensor '" + t.name + "' has element type " + out.onnx_type +
                    "; hetgraph holds float32 and int32 tensors");
  }
  return out;
}

TensorData read_tensor(const std::string& path) {
  // A regular file only (a FIFO would block, /dev/zero never end), and no larger than
  // protobuf parses.
  const std::string bytes = ir::read_regular_file(path, "the tensor file", INT_MAX);
  return parse_tensor(std::as_bytes(std::span<const char>(bytes)), path);
}

void write_tensor(const std::string& path, const TensorData& t) {
  ir::Tensor out;
  out.name = t.name;
  out.dims.assign(t.shape.dims().begin(), t.shape.dims().end());
  const auto n = static_cast<std::size_t>(t.shape.numel());
  if (t.dtype == DType::f32) {
    if (t.f32.size() != n)
      throw DataError(path + ": " + std::to_string(t.f32.size()) + " values for shape " +
                      t.shape.str());
    // float16 and bfloat16 as the file's type (their values rounded to it), others as float
    out.elem = t.onnx_type == "float16"    ? ir::kFloat16
               : t.onnx_type == "bfloat16" ? ir::kBfloat16
               : t.onnx_type == "double"   ? ir::kDouble
                                           : ir::kFloat;
    out.f = t.f32;
  } else {
    if (t.i32.size() != n)
      throw DataError(path + ": " + std::to_string(t.i32.size()) + " values for shape " +
                      t.shape.str());
    // The file's integer type where it has one (what parse_tensor read), int64 otherwise.
    out.elem = ir::kInt64;
    for (const int e : {ir::kInt32, ir::kBool, ir::kInt8, ir::kUint8, ir::kInt16, ir::kUint16,
                        ir::kUint32, ir::kUint64}) {
      if (t.onnx_type == ir::elem_name(e)) out.elem = e;
    }
    out.i.assign(t.i32.begin(), t.i32.end());
  }
  const std::string bytes = ir::serialize_tensor(out);
  detail::write_file_atomically(path, [&](const auto& put) { put(bytes.data(), bytes.size()); });
}

}  // namespace hetgraph::onnx
