// SPDX-License-Identifier: Apache-2.0
// Shapes and element types.
//
//   hetgraph::Shape s{500, 784};
//   s.rank();    // 2
//   s.numel();   // 392000
//   s.str();     // "[500, 784]"
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace hetgraph {

/// Element types. Tensors are float32; int32 is for class labels and embedding indices.
enum class DType : std::uint8_t { f32, i32 };

std::string_view dtype_name(DType t);

/// A tensor shape of rank 0 (scalar) to 8, row-major (NCHW for images).
class Shape {
 public:
  static constexpr int kMaxRank = 8;
  /// The most elements a tensor may hold: its bytes (4 per element) fit in a signed 64-bit
  /// size. A shape with more is a ShapeError when it is made.
  static constexpr std::int64_t kMaxElements = std::int64_t{1} << 61;

  Shape() = default;  // rank 0: a scalar
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::span<const std::int64_t> dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t dim(int i) const;  // negative i counts from the back; throws ShapeError
  std::span<const std::int64_t> dims() const {
    return {dims_.data(), static_cast<std::size_t>(rank_)};
  }
  std::int64_t numel() const;
  std::string str() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.rank_ == b.rank_ && a.dims_ == b.dims_;
  }

 private:
  std::array<std::int64_t, kMaxRank> dims_{};  // unused trailing entries stay 0
  int rank_ = 0;
};

}  // namespace hetgraph
