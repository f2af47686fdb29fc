// Geometry of the 2-D sliding-window ops (conv2d, max/avg pooling and their gradients) as
// stored in Attrs::ints, and the image dimensions derived from it. Shape inference, every
// platform's kernels and the tests' reference read it through here.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "compiler/ops.hpp"

namespace hetgraph::detail {

struct Window2d {
  std::array<std::int64_t, 2> kernel{1, 1};     // pooling (conv2d takes it from the weights)
  std::array<std::int64_t, 2> stride{1, 1};     // (h, w)
  std::array<std::int64_t, 2> pad_begin{0, 0};  // top, left
  std::array<std::int64_t, 2> pad_end{0, 0};    // bottom, right
  std::array<std::int64_t, 2> dilation{1, 1};   // conv2d: 1 is a dense kernel
  bool count_include_pad = false;               // avg pooling: divide by the whole window

  static constexpr std::size_t kInts = 11;

  std::vector<std::int64_t> encode() const {
    return {kernel[0],
            kernel[1],
            stride[0],
            stride[1],
            pad_begin[0],
            pad_begin[1],
            pad_end[0],
            pad_end[1],
            dilation[0],
            dilation[1],
            count_include_pad ? 1 : 0};
  }
  static Window2d decode(const Attrs& a) {
    Window2d w;
    const auto& v = a.ints;
    if (v.size() != kInts) return w;  // not a window op: shape inference rejects it
    w.kernel = {v[0], v[1]};
    w.stride = {v[2], v[3]};
    w.pad_begin = {v[4], v[5]};
    w.pad_end = {v[6], v[7]};
    w.dilation = {v[8], v[9]};
    w.count_include_pad = v[10] != 0;
    return w;
  }
  /// Input rows/columns one window spans along dim d (0: height, 1: width).
  std::int64_t extent(int d) const {
    const auto i = static_cast<std::size_t>(d);
    return (kernel[i] - 1) * dilation[i] + 1;
  }
  /// Output size along dim d for an input of size `in` (at least 1 once shapes are checked).
  std::int64_t out_size(int d, std::int64_t in) const {
    const auto i = static_cast<std::size_t>(d);
    return (in + pad_begin[i] + pad_end[i] - extent(d)) / stride[i] + 1;
  }
};

/// One node's image dimensions: input [n, c, h, w], output [n, oc, oh, ow]; for conv2d the
/// kernel is [oc, c, win.kernel[0], win.kernel[1]].
struct ImageGeom {
  std::int64_t n = 1, c = 1, h = 1, w = 1, oc = 1, oh = 1, ow = 1;
  Window2d win;
};

/// Geometry of a convolution of x [N, C, H, W] with weights [O, C, KH, KW].
inline ImageGeom conv_geom(const Shape& x, const Shape& wt, const Attrs& a) {
  ImageGeom g;
  g.win = Window2d::decode(a);
  g.win.kernel = {wt[2], wt[3]};
  g.n = x[0];
  g.c = x[1];
  g.h = x[2];
  g.w = x[3];
  g.oc = wt[0];
  g.oh = g.win.out_size(0, g.h);
  g.ow = g.win.out_size(1, g.w);
  return g;
}

/// Geometry of a pooling of x [N, C, H, W].
inline ImageGeom pool_geom(const Shape& x, const Attrs& a) {
  ImageGeom g;
  g.win = Window2d::decode(a);
  g.n = x[0];
  g.c = g.oc = x[1];
  g.h = x[2];
  g.w = x[3];
  g.oh = g.win.out_size(0, g.h);
  g.ow = g.win.out_size(1, g.w);
  return g;
}

}  // namespace hetgraph::detail
