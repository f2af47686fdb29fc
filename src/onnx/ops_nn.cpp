// SPDX-License-Identifier: Apache-2.0
// ONNX image and normalisation ops: Conv (grouped, dilated; an inference BatchNormalization after
// it folded in), ConvTranspose, MaxPool (and its Indices) / AveragePool (ceil_mode), MaxUnpool,
// GlobalAveragePool / GlobalMaxPool, BatchNormalization (inference and training mode),
// InstanceNormalization, LRN, Resize / Upsample, RoiAlign, ConvInteger / QLinearConv. 1-d images
// run as 2-d ones of height 1.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

/// Geometry of a sliding window over the spatial dims (1 or 2 of them).
struct Window {
  Dims kernel, stride, dilation, pad_begin, pad_end;
};

Window window(Ctx& c, const Dims& in, const Dims& kernel) {
  const std::size_t n = in.size();
  Window w;
  w.kernel = kernel;
  w.stride = c.attr_ints("strides", Dims(n, 1));
  w.dilation = c.attr_ints("dilations", Dims(n, 1));
  const Dims pads = c.attr_ints("pads", Dims(2 * n, 0));
  if (w.stride.size() != n || w.dilation.size() != n || pads.size() != 2 * n) {
    c.fail("strides, dilations and pads must give " + std::to_string(n) + " spatial dims");
  }
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
  w.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end());
  const std::string autopad = c.attr_s("auto_pad", "NOTSET");
  if (autopad == "VALID") {
    std::fill(w.pad_begin.begin(), w.pad_begin.end(), 0);
    std::fill(w.pad_end.begin(), w.pad_end.end(), 0);
  } else if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t out = (in[i] + w.stride[i] - 1) / w.stride[i];
      const std::int64_t extent = (kernel[i] - 1) * w.dilation[i] + 1;
      const std::int64_t total =
          std::max<std::int64_t>(0, (out - 1) * w.stride[i] + extent - in[i]);
      const std::int64_t small = total / 2, big = total - small;
      w.pad_begin[i] = autopad == "SAME_UPPER" ? small : big;
      w.pad_end[i] = autopad == "SAME_UPPER" ? big : small;
    }
  } else if (autopad != "NOTSET" && !autopad.empty()) {
    c.fail("auto_pad '" + autopad + "' is not an ONNX value");
  }
  return w;
}

/// [N, C, W] as [N, C, 1, W]; images of rank 4 as they are. Others are unsupported.
Node as_image(Ctx& c, Node x) {
  const Dims d = c.shape(x);
  if (d.size() == 3) return c.reshape(x, {d[0], d[1], 1, d[2]});
  if (d.size() != 4) {
    c.unsupported(std::to_string(static_cast<int>(d.size()) - 2) + "-d images " + dims_str(d) +
                  " (hetgraph convolves and pools 1-d, 2-d and 3-d images)");
  }
  return x;
}

/// A window over a 1-d image gets height 1.
std::array<int, 2> pair(const Dims& v, std::int64_t one) {
  if (v.size() == 1) return {static_cast<int>(one), static_cast<int>(v[0])};
  return {static_cast<int>(v[0]), static_cast<int>(v[1])};
}

Dims spatial(const Dims& d) {
  return Dims(d.begin() + 2, d.end());
}

/// conv2d's options for a window of 1 or 2 spatial dims.
Conv2dOptions conv_options(const Window& w, std::int64_t groups) {
  Conv2dOptions o;
  o.stride = pair(w.stride, 1);
  o.dilation = pair(w.dilation, 1);
  o.padding = pair(w.pad_begin, 0);
  o.padding_end = pair(w.pad_end, 0);
  o.groups = static_cast<int>(groups);
  return o;
}

// ---- 3-d images (NCDHW) -----------------------------------------------------------------
// hetgraph's kernels convolve and pool 2-d images; a 3-d one [N, C, D, H, W] runs as 2-d work
// over its depth slices, combined along the depth axis by ordinary nodes (which differentiate
// and run on every platform): the window's depth taps are strided slices of the (padded) depth
// axis, each a 2-d convolution or pooling of all its slices at once.

/// x padded along `axis` (the depth axis, 2, by default) with `before` and `after` slices of
/// `value`.
Node pad_depth(Ctx& c, Node x, std::int64_t before, std::int64_t after, float value, int axis = 2) {
  if (before == 0 && after == 0) return x;
  const Dims d = c.shape(x);
  std::vector<Node> parts;
  const auto slab = [&](std::int64_t n) {
    Dims s = d;
    s[static_cast<std::size_t>(axis)] = n;
    return c.graph().constant(Shape(std::span<const std::int64_t>(s)),
                              std::vector<float>(static_cast<std::size_t>(numel(s)), value));
  };
  if (before > 0) parts.push_back(slab(before));
  parts.push_back(x);
  if (after > 0) parts.push_back(slab(after));
  return concat(parts, axis);
}

/// The depth slices that window tap `tap` reads for every output depth: [N, C, out, ...].
Node depth_tap(Node x, std::int64_t tap, std::int64_t dilation, std::int64_t stride,
               std::int64_t out) {
  const std::int64_t first = tap * dilation;
  return strided_slice(x, {first}, {first + (out - 1) * stride + 1}, {2}, {stride});
}

/// Output depth of a window over `in` slices (padding included).
std::int64_t depth_out(const Window& w, std::int64_t in) {
  const std::int64_t extent = (w.kernel[0] - 1) * w.dilation[0] + 1;
  return (in + w.pad_begin[0] + w.pad_end[0] - extent) / w.stride[0] + 1;
}

/// The height-width part of a 3-d window, as a 2-d one.
Window plane_window(const Window& w) {
  const auto tail = [](const Dims& v) { return Dims(v.begin() + 1, v.end()); };
  return {tail(w.kernel), tail(w.stride), tail(w.dilation), tail(w.pad_begin), tail(w.pad_end)};
}

/// Conv of a 3-d image: per depth tap i, the 2-d convolution of the slices it reads, all output
/// depths as one batch ([N * OD, C, H, W]) with the weights' slice i, summed over the taps.
Node conv3d(Ctx& c, Node x, Node weights, const std::optional<Node>& bias, const Window& w,
            std::int64_t group) {
  const Dims dx = c.shape(x), dw = c.shape(weights);
  const std::int64_t N = dx[0], C = dx[1], O = dw[0];
  const std::int64_t od = depth_out(w, dx[2]);
  if (od < 1) c.fail("the window " + dims_str(w.kernel) + " is deeper than the padded input");
  Node xp = pad_depth(c, x, w.pad_begin[0], w.pad_end[0], 0.0f);
  const Conv2dOptions o = conv_options(plane_window(w), group);
  Node sum;
  for (std::int64_t i = 0; i < w.kernel[0]; ++i) {
    Node slices = transpose(depth_tap(xp, i, w.dilation[0], w.stride[0], od), {0, 2, 1, 3, 4});
    Node batch = c.reshape(slices, {N * od, C, dx[3], dx[4]});
    Node wi = c.reshape(slice(weights, 2, i, i + 1), {O, dw[1], dw[3], dw[4]});
    Node y = i == 0 && bias ? conv2d(batch, wi, *bias, o) : conv2d(batch, wi, o);
    sum = i == 0 ? y : add(sum, y);
  }
  const Dims dy = c.shape(sum);
  return transpose(c.reshape(sum, {N, od, O, dy[2], dy[3]}), {0, 2, 1, 3, 4});
}

/// MaxPool / AveragePool of a 3-d image: the 2-d pooling of every depth slice ([N, C * D, H,
/// W]), then the maximum, or the mean, over the window's depth taps. An average over the image
/// only (count_include_pad 0) divides by the taps in the image: every slice of one output has
/// the same height-width count.
Node pool3d(Ctx& c, Node x, const Window& w, bool is_max, bool include_pad) {
  const Dims dx = c.shape(x);
  const std::int64_t N = dx[0], C = dx[1], D = dx[2];
  Pool2dOptions o;
  const Window p = plane_window(w);
  o.kernel = pair(p.kernel, 1);
  o.stride = pair(p.stride, 1);
  o.padding = pair(p.pad_begin, 0);
  o.padding_end = pair(p.pad_end, 0);
  o.dilation = pair(p.dilation, 1);
  o.count_include_pad = include_pad;
  Node planes = c.reshape(x, {N, C * D, dx[3], dx[4]});
  Node pooled = is_max ? max_pool2d(planes, o) : avg_pool2d(planes, o);
  const Dims dp = c.shape(pooled);
  Node slices = c.reshape(pooled, {N, C, D, dp[2], dp[3]});
  const std::int64_t od = depth_out(w, D);
  if (od < 1) c.fail("the window " + dims_str(w.kernel) + " is deeper than the padded input");
  const float pad = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
  Node xp = pad_depth(c, slices, w.pad_begin[0], w.pad_end[0], pad);
  Node acc;
  for (std::int64_t i = 0; i < w.kernel[0]; ++i) {
    Node tap = depth_tap(xp, i, w.dilation[0], w.stride[0], od);
    acc = i == 0 ? tap : is_max ? maximum(acc, tap) : add(acc, tap);
  }
  if (is_max) return acc;
  std::vector<float> inv = c.host<float>(od);
  for (std::int64_t z = 0; z < od; ++z) {
    std::int64_t taps = 0;
    for (std::int64_t i = 0; i < w.kernel[0]; ++i) {
      const std::int64_t at = z * w.stride[0] + i * w.dilation[0] - w.pad_begin[0];
      taps += include_pad || (at >= 0 && at < D) ? 1 : 0;
    }
    inv[static_cast<std::size_t>(z)] = 1.0f / static_cast<float>(taps);
  }
  return mul(acc, c.graph().constant(Shape{1, 1, od, 1, 1}, std::move(inv)));
}

// ---- Conv ----------------------------------------------------------------------------------

/// ConvTranspose of a 3-d image: per depth tap i, the 2-d transposed convolution of every
/// input slice ([N * D, C, H, W]) with the weights' slice i; input slice d lands at output
/// depth d * stride + i * dilation (the slices spread `stride` apart with zeros between, then
/// shifted), the taps summed, and the padding cropped from the full depth.
Node conv_transpose3d(Ctx& c, Node x, Node weights, const std::optional<Node>& bias,
                      const Dims& stride, const Dims& dilation, const Dims& begin, const Dims& end,
                      const Dims& out_pad, std::int64_t group) {
  const Dims dx = c.shape(x), dw = c.shape(weights);
  const std::int64_t N = dx[0], C = dx[1], D = dx[2], s = stride[0], dl = dilation[0];
  const std::int64_t full = s * (D - 1) + (dw[2] - 1) * dl + 1 + out_pad[0];
  const std::int64_t od = full - begin[0] - end[0];
  if (od < 1) c.fail("the padding leaves no output depth");
  ConvTranspose2dOptions o;
  o.stride = pair(Dims(stride.begin() + 1, stride.end()), 1);
  o.dilation = pair(Dims(dilation.begin() + 1, dilation.end()), 1);
  o.padding = pair(Dims(begin.begin() + 1, begin.end()), 0);
  o.padding_end = pair(Dims(end.begin() + 1, end.end()), 0);
  o.output_padding = pair(Dims(out_pad.begin() + 1, out_pad.end()), 0);
  o.groups = static_cast<int>(group);
  Node slices = c.reshape(transpose(x, {0, 2, 1, 3, 4}), {N * D, C, dx[3], dx[4]});
  Node sum;
  Dims plane;
  for (std::int64_t i = 0; i < dw[2]; ++i) {
    Node wi = c.reshape(slice(weights, 2, i, i + 1), {dw[0], dw[1], dw[3], dw[4]});
    Node y = conv_transpose2d(slices, wi, o);  // [N * D, O, OH, OW]
    const Dims dy = c.shape(y);
    plane = {dy[1], dy[2], dy[3]};
    const std::int64_t per = dy[1] * dy[2] * dy[3];
    Node spread = c.reshape(y, {N, D, 1, per});
    if (s > 1) {
      spread = c.reshape(pad_depth(c, spread, 0, s - 1, 0.0f), {N, D * s, per});
      spread = slice(spread, 1, 0, (D - 1) * s + 1);
    } else {
      spread = c.reshape(spread, {N, D, per});
    }
    const std::int64_t first = i * dl;
    spread = pad_depth(c, spread, first, full - first - ((D - 1) * s + 1), 0.0f, 1);
    sum = i == 0 ? spread : add(sum, spread);
  }
  Node y = slice(sum, 1, begin[0], begin[0] + od);  // [N, OD, O * OH * OW]
  y = transpose(c.reshape(y, {N, od, plane[0], plane[1], plane[2]}), {0, 2, 1, 3, 4});
  if (bias) y = add(y, c.reshape(*bias, {1, plane[0], 1, 1, 1}));
  return y;
}

/// Batch-norm parameters, all known at import: y = x * s + t per channel.
bool bn_affine(Ctx& bn, std::vector<float>& s, std::vector<float>& t) {
  for (std::size_t i = 1; i <= 4; ++i) {
    if (!bn.known(i)) return false;
  }
  const std::vector<float> scale = bn.floats(1, "scale"), bias = bn.floats(2, "B"),
                           mean = bn.floats(3, "mean"), var = bn.floats(4, "var");
  const float eps = bn.attr_f("epsilon", 1e-5f);
  if (scale.size() != bias.size() || mean.size() != scale.size() || var.size() != scale.size()) {
    bn.fail("scale, B, mean and var differ in length");
  }
  s.resize(scale.size());
  t.resize(scale.size());
  for (std::size_t k = 0; k < scale.size(); ++k) {
    s[k] = static_cast<float>(scale[k] / std::sqrt(static_cast<double>(var[k]) + eps));
    t[k] = bias[k] - mean[k] * s[k];
  }
  return true;
}

bool bn_inference(const Ctx& bn) {
  if (bn.version >= 14 && bn.attr_i("training_mode", 0) != 0) return false;
  if (bn.version < 7 && bn.has_attr("is_test") && bn.attr_i("is_test", 0) == 0) return false;
  if (bn.version < 9 && bn.attr_i("spatial", 1) == 0) return false;
  for (std::size_t k = 1; k < bn.outputs(); ++k) {
    if (bn.wants(k)) return false;
  }
  return true;
}

// A convolution's image dx and weights dw agree (rank, group, kernel_shape): its kernel.
Dims conv_kernel(Ctx& c, const Dims& dx, const Dims& dw, std::int64_t group) {
  if (dx.size() != dw.size())
    c.fail("input " + dims_str(dx) + " and weights " + dims_str(dw) + " differ in rank");
  if (dx.size() < 3) c.fail("input " + dims_str(dx) + " is not an image [N, C, ...]");
  if (group < 1 || dx[1] % group != 0 || dw[0] % group != 0)
    c.fail("group " + std::to_string(group) + " does not divide the input's " +
           std::to_string(dx[1]) + " channels and the weights' " + std::to_string(dw[0]));
  const Dims kernel = c.attr_ints("kernel_shape", spatial(dw));
  if (kernel != spatial(dw))
    c.fail("kernel_shape " + dims_str(kernel) + " differs from the weights " + dims_str(dw));
  // A window with no taps has no convolution (and ConvInteger's chunks divide by its taps).
  for (std::int64_t k : kernel) {
    if (k < 1) c.fail("weights " + dims_str(dw) + " have a kernel dimension below 1");
  }
  return kernel;
}

void conv(Ctx& c) {
  Node x = c.f32(0);
  const Dims dx = c.shape(x), dw = c.dims(1);
  const std::int64_t group = c.attr_i("group", 1);
  const Dims kernel = conv_kernel(c, dx, dw, group);
  if (dx.size() == 5) {
    std::optional<Node> bias;
    if (c.has(2)) bias = c.f32(2);
    c.set(0, conv3d(c, x, c.f32(1), bias, window(c, spatial(dx), kernel), group));
    return;
  }
  Node xi = as_image(c, x);
  const Window w = window(c, spatial(dx), kernel);
  const Conv2dOptions o = conv_options(w, group);
  const std::int64_t O = dw[0];
  const Dims dw4 = dw.size() == 3 ? Dims{dw[0], dw[1], 1, dw[2]} : dw;

  // An inference BatchNormalization right after, with everything known: fold it into the
  // weights and bias (one convolution instead of a convolution and two elementwise passes).
  Node weights, bias;
  bool has_bias = c.has(2);
  const ir::Node* next = c.sole_consumer(0);
  if (next && c.options().fold_batch_norm && next->op == "BatchNormalization" && c.known(1) &&
      (!c.has(2) || c.known(2)) && next->inputs[0] == c.n.outputs[0]) {
    Ctx bn(c.im, *next);
    std::vector<float> s, t;
    bool affine = false;
    try {
      affine = bn_inference(bn) && bn_affine(bn, s, t);
    } catch (const ShapeError&) {
      affine = false;  // its parameters come later in the model: the batch norm runs by itself
    }
    if (affine && static_cast<std::int64_t>(s.size()) == O) {
      std::vector<float> wv = c.floats(1, "W");
      const std::size_t per = wv.size() / static_cast<std::size_t>(O);
      for (std::size_t k = 0; k < wv.size(); ++k) wv[k] *= s[k / per];
      std::vector<float> bv = c.has(2) ? c.floats(2, "B") : c.host<float>(O);
      for (std::size_t k = 0; k < bv.size(); ++k) bv[k] = bv[k] * s[k] + t[k];
      weights = c.variable(c.n.inputs[1] + "/bn_folded", dw4, std::move(wv));
      bias = c.variable((c.has(2) ? c.n.inputs[2] : c.n.outputs[0] + "/bias") + "/bn_folded", {O},
                        std::move(bv));
      has_bias = true;
      c.absorb(*next);
    }
  }
  if (!weights.valid()) {
    weights = c.reshape(c.f32(1), dw4);
    if (has_bias) bias = c.f32(2);
  }
  Node y = has_bias ? conv2d(xi, weights, bias, o) : conv2d(xi, weights, o);
  if (dx.size() == 3)
    y = c.reshape(y, [&] {
      Dims d = c.shape(y);
      return Dims{d[0], d[1], d[3]};
    }());
  c.set(0, y);
}

// ---- ConvTranspose -----------------------------------------------------------------------

/// ONNX ConvTranspose: weights [C, M / group, k...]. output_shape and auto_pad become pads
/// (and, where the asked-for output is larger than the stride pattern gives, output padding).
void conv_transpose(Ctx& c) {
  Node x = c.f32(0);
  const Dims dx = c.shape(x), dw = c.dims(1);
  if (dx.size() != dw.size())
    c.fail("input " + dims_str(dx) + " and weights " + dims_str(dw) + " differ in rank");
  if (dx.size() < 3) c.fail("input " + dims_str(dx) + " is not an image [N, C, ...]");
  const std::size_t n = dx.size() - 2;
  const std::int64_t group = c.attr_i("group", 1);
  if (group < 1 || dx[1] % group != 0 || dw[0] != dx[1])
    c.fail("group " + std::to_string(group) + " and weights " + dims_str(dw) + " do not fit " +
           std::to_string(dx[1]) + " input channels");
  const Dims kernel = c.attr_ints("kernel_shape", spatial(dw));
  if (kernel != spatial(dw))
    c.fail("kernel_shape " + dims_str(kernel) + " differs from the weights " + dims_str(dw));
  const Dims stride = c.attr_ints("strides", Dims(n, 1));
  const Dims dilation = c.attr_ints("dilations", Dims(n, 1));
  Dims out_pad = c.attr_ints("output_padding", Dims(n, 0));
  const Dims pads = c.attr_ints("pads", Dims(2 * n, 0));
  const Dims out_shape = c.attr_ints("output_shape", {});
  if (stride.size() != n || dilation.size() != n || out_pad.size() != n || pads.size() != 2 * n ||
      (!out_shape.empty() && out_shape.size() != n)) {
    c.fail("strides, dilations, output_padding, pads and output_shape must give " +
           std::to_string(n) + " spatial dims");
  }
  Dims begin(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
  Dims end(pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end());
  const std::string autopad = c.attr_s("auto_pad", "NOTSET");
  if (autopad != "NOTSET" && !autopad.empty() && autopad != "VALID" && autopad != "SAME_UPPER" &&
      autopad != "SAME_LOWER") {
    c.fail("auto_pad '" + autopad + "' is not an ONNX value");
  }
  const bool same = autopad == "SAME_UPPER" || autopad == "SAME_LOWER";
  if (!out_shape.empty() || same || autopad == "VALID") {
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t in = dx[i + 2];
      const std::int64_t natural =
          stride[i] * (in - 1) + out_pad[i] + (kernel[i] - 1) * dilation[i] + 1;
      const std::int64_t want = !out_shape.empty() ? out_shape[i] : same ? in * stride[i] : natural;
      const std::int64_t total = natural - want;
      if (total < 0) {  // more rows than the pattern fills: zeros (plus bias) at the end
        begin[i] = end[i] = 0;
        out_pad[i] -= total;
      } else {  // ONNX: the odd one at the end, except for SAME_LOWER
        const std::int64_t small = total / 2, big = total - small;
        begin[i] = autopad == "SAME_LOWER" ? big : small;
        end[i] = autopad == "SAME_LOWER" ? small : big;
      }
    }
  }
  if (dx.size() == 5) {
    std::optional<Node> bias;
    if (c.has(2)) bias = c.f32(2);
    c.set(0, conv_transpose3d(c, x, c.f32(1), bias, stride, dilation, begin, end, out_pad, group));
    return;
  }
  Node xi = as_image(c, x);
  ConvTranspose2dOptions o;
  o.stride = pair(stride, 1);
  o.dilation = pair(dilation, 1);
  o.padding = pair(begin, 0);
  o.padding_end = pair(end, 0);
  o.output_padding = pair(out_pad, 0);
  o.groups = static_cast<int>(group);
  const Dims dw4 = dw.size() == 3 ? Dims{dw[0], dw[1], 1, dw[2]} : dw;
  Node weights = c.reshape(c.f32(1), dw4);
  Node y = c.has(2) ? conv_transpose2d(xi, weights, c.f32(2), o) : conv_transpose2d(xi, weights, o);
  if (dx.size() == 3)
    y = c.reshape(y, [&] {
      Dims d = c.shape(y);
      return Dims{d[0], d[1], d[3]};
    }());
  c.set(0, y);
}

// ---- pooling -------------------------------------------------------------------------------

/// MaxPool's Indices output for y = max_pool2d(xi): the flat position in x of each window's
/// maximum, x being [N, C, H, W] row-major (with storage_order 1 the image's (h, w) counts
/// column-major: h + w H), the first in window order, the first NaN winning as in hetgraph's max
/// pooling itself (so Y and Indices agree). Each window tap is a gather of x's planes at constant
/// positions and an argmax over the taps picks one. A tap in the padding reads the window's
/// first image element instead: only that element's own tap can tie with it ahead of it, so the
/// position reported is always an image element's.
Node max_pool_indices(Ctx& c, Node xi, Node y, const Window& w) {
  const Dims dx = c.shape(xi), dy = c.shape(y);
  const std::int64_t nc = dx[0] * dx[1], H = dx[2], W = dx[3], OH = dy[2], OW = dy[3];
  if (nc * H * W > INT32_MAX) c.unsupported("indices of an input of more than 2^31 elements");
  const std::array<int, 2> k = pair(w.kernel, 1), s = pair(w.stride, 1), d = pair(w.dilation, 1),
                           p = pair(w.pad_begin, 0);
  const bool column_major = c.attr_i("storage_order", 0) != 0;
  const std::int64_t taps = static_cast<std::int64_t>(k[0]) * k[1], outs = OH * OW;
  std::vector<std::int32_t> reads = c.host<std::int32_t>(outs * taps), positions = reads;
  for (std::int64_t oh = 0; oh < OH; ++oh) {
    for (std::int64_t ow = 0; ow < OW; ++ow) {
      const std::size_t at = static_cast<std::size_t>((oh * OW + ow) * taps);
      std::int64_t first = -1;  // the window's first image element
      for (std::int64_t t = 0; t < taps; ++t) {
        const std::int64_t h = oh * s[0] - p[0] + (t / k[1]) * d[0],
                           x = ow * s[1] - p[1] + (t % k[1]) * d[1];
        if (h >= 0 && h < H && x >= 0 && x < W) {
          reads[at + static_cast<std::size_t>(t)] = static_cast<std::int32_t>(h * W + x);
          positions[at + static_cast<std::size_t>(t)] =
              static_cast<std::int32_t>(column_major ? h + x * H : h * W + x);
          if (first < 0) first = t;
        } else {
          reads[at + static_cast<std::size_t>(t)] = -1;
        }
      }
      if (first < 0) c.fail("a pooling window lies wholly in the padding");
      for (std::int64_t t = 0; t < taps; ++t) {
        if (reads[at + static_cast<std::size_t>(t)] < 0) {
          reads[at + static_cast<std::size_t>(t)] = reads[at + static_cast<std::size_t>(first)];
          positions[at + static_cast<std::size_t>(t)] =
              positions[at + static_cast<std::size_t>(first)];
        }
      }
    }
  }
  Graph& g = c.graph();
  Node tapped =
      gather(c.reshape(xi, {nc, H * W}), g.constant_i32(Shape{outs * taps}, std::move(reads)), 1);
  Node best = argmax(c.reshape(tapped, {nc, outs, taps}), 2, true);  // [NC, outs, 1]
  std::vector<std::int32_t> row = c.host<std::int32_t>(outs);
  for (std::size_t o = 0; o < row.size(); ++o) row[o] = static_cast<std::int32_t>(o) * taps;
  Node tap = add(best, g.constant_i32(Shape{1, outs, 1}, std::move(row)));
  Node at = gather(g.constant_i32(Shape{outs * taps}, std::move(positions)), tap, 0);
  std::vector<std::int32_t> plane = c.host<std::int32_t>(nc);
  for (std::size_t q = 0; q < plane.size(); ++q)
    plane[q] = static_cast<std::int32_t>(static_cast<std::int64_t>(q) * H * W);
  return c.reshape(add(at, g.constant_i32(Shape{nc, 1, 1}, std::move(plane))), dy);
}

// Whether a 2-d pooling takes the op's own ceil_mode: ONNX's ceil_mode (opset 10 on) as
// PyTorch and ONNX Runtime round output sizes up; where that adds a last window starting past
// the input, the window is dropped and w's end padding grown instead.
bool pool_ceil_mode(Ctx& c, const Dims& dx, const Dims& kernel, bool include_pad, Window& w) {
  if (c.version < 10 || c.attr_i("ceil_mode", 0) == 0) return false;
  // Without a dropped window this is the op's own ceil_mode; with one, more end padding gives
  // the same result when padding counts for nothing (max, or an average over the image
  // elements only).
  const Dims in = spatial(dx);
  Dims extra(kernel.size(), 0);
  bool dropped = false;
  for (std::size_t i = 0; i < kernel.size(); ++i) {
    const std::int64_t extent = (kernel[i] - 1) * w.dilation[i] + 1;
    const std::int64_t span = in[i] + w.pad_begin[i] + w.pad_end[i] - extent;
    std::int64_t out = (span + w.stride[i] - 1) / w.stride[i] + 1;
    if ((out - 1) * w.stride[i] >= in[i] + w.pad_begin[i]) {
      --out;
      dropped = true;
    }
    extra[i] = std::max<std::int64_t>(
        0, (out - 1) * w.stride[i] + extent - (in[i] + w.pad_begin[i] + w.pad_end[i]));
  }
  if (!dropped) return true;
  if (include_pad) c.unsupported("ceil_mode with count_include_pad and a dropped last window");
  for (std::size_t i = 0; i < kernel.size(); ++i) w.pad_end[i] += extra[i];
  return false;
}

void pool(Ctx& c) {
  const bool is_max = c.n.op == "MaxPool";
  // int8 and uint8 (MaxPool-12) are exact in float32: pooled as floats, cast back.
  const int elem = c.elem(0);
  const bool ints = is_max && (elem == ir::kInt8 || elem == ir::kUint8);
  Node x = ints ? cast(c.node(0), DType::f32) : c.f32(0);
  const auto result = [&](Node v) {
    if (ints)
      c.set(0, cast(v, DType::i32), elem);
    else
      c.set(0, v);
  };
  const Dims dx = c.shape(x);
  const Dims kernel = c.attr_ints("kernel_shape");
  if (kernel.size() != dx.size() - 2)
    c.fail("kernel_shape " + dims_str(kernel) + " does not fit " + dims_str(dx));
  Window w = window(c, spatial(dx), kernel);
  if (!is_max) {
    for (std::int64_t d : w.dilation) {  // AveragePool has dilations from opset 19 only
      if (d != 1) c.unsupported("dilated average pooling (dilations " + dims_str(w.dilation) + ")");
    }
  }
  const bool include_pad = !is_max && c.attr_i("count_include_pad", 0) != 0;
  if (dx.size() == 5) {
    if (c.version >= 10 && c.attr_i("ceil_mode", 0) != 0) c.unsupported("ceil_mode on 3-d images");
    if (is_max && c.wants(1)) c.unsupported("the Indices output on 3-d images");
    for (std::size_t i = 0; i < kernel.size(); ++i) {
      if (w.pad_begin[i] >= kernel[i] || w.pad_end[i] >= kernel[i]) {
        c.unsupported("pooling padding " + dims_str(w.pad_begin) + " / " + dims_str(w.pad_end) +
                      " not smaller than the kernel " + dims_str(kernel));
      }
    }
    result(pool3d(c, x, w, is_max, include_pad));
    return;
  }
  Node xi = as_image(c, x);
  const bool ceil_mode = pool_ceil_mode(c, dx, kernel, include_pad, w);
  Pool2dOptions o;
  o.kernel = pair(kernel, 1);
  o.stride = pair(w.stride, 1);
  o.padding = pair(w.pad_begin, 0);
  o.padding_end = pair(w.pad_end, 0);
  o.dilation = pair(w.dilation, 1);
  o.count_include_pad = include_pad;
  o.ceil_mode = ceil_mode;
  for (std::size_t i = 0; i < kernel.size(); ++i) {
    if (w.pad_begin[i] >= kernel[i] || w.pad_end[i] >= kernel[i]) {
      c.unsupported("pooling padding " + dims_str(w.pad_begin) + " / " + dims_str(w.pad_end) +
                    " not smaller than the kernel " + dims_str(kernel));
    }
  }
  Node y = is_max ? max_pool2d(xi, o) : avg_pool2d(xi, o);
  // Back to [N, C, W] for a 1-d image.
  const auto out_shape = [&](Node v) {
    if (dx.size() != 3) return v;
    const Dims d = c.shape(v);
    return c.reshape(v, {d[0], d[1], d[3]});
  };
  if (is_max && c.wants(1)) c.set(1, out_shape(max_pool_indices(c, xi, y, w)), ir::kInt64);
  result(out_shape(y));
}

/// MaxUnpool (opset 9 and 11): x's values scattered into zeros of the unpooled shape,
/// (in - 1) stride + kernel - pads per spatial dim, at the flat positions MaxPool's Indices gave
/// (the last of repeated positions wins). A larger output_shape input (known at import) pads that
/// with zeros at the end of each spatial dim: positions keep their (h, w), as ONNX's test of it
/// holds. Positions outside the unpooled shape are a FeedError naming the node's indices.
void max_unpool(Ctx& c) {
  Node x = c.f32(0);
  const Dims dx = c.shape(x);
  if (dx.size() < 3) c.fail("input " + dims_str(dx) + " has no spatial dims");
  if (!ir::is_integral(c.elem(1)) || c.dims(1) != dx)
    c.fail("the indices must be integers shaped as the input " + dims_str(dx));
  const Dims kernel = c.attr_ints("kernel_shape");
  if (kernel.size() != dx.size() - 2)
    c.fail("kernel_shape " + dims_str(kernel) + " does not fit " + dims_str(dx));
  const Window w = window(c, spatial(dx), kernel);
  Dims unpooled{dx[0], dx[1]};
  for (std::size_t i = 0; i < kernel.size(); ++i) {
    unpooled.push_back((dx[i + 2] - 1) * w.stride[i] + kernel[i] - w.pad_begin[i] - w.pad_end[i]);
    if (unpooled.back() < 1) c.fail("the unpooled shape " + dims_str(unpooled) + " is empty");
  }
  const std::int64_t total = numel(unpooled), count = numel(dx);
  if (total > INT32_MAX) c.unsupported("an output of more than 2^31 elements");
  Node ids = c.reshape(c.node(1), {1, count});
  // The check's zero added to the values keeps it ahead of the scatter; scatter_elements would
  // take a negative position from the back.
  Node values = add(c.reshape(x, {1, count}), index_check(c, ids, total, "indices"));
  Node zeros = c.constant({1, total}, c.host<float>(total));
  Node y = c.reshape(scatter_elements(zeros, ids, values, 1), unpooled);
  if (c.has(2)) {
    const Dims given = c.ints(2, "output_shape");
    bool fits = given.size() == unpooled.size() && given[0] == dx[0] && given[1] == dx[1];
    for (std::size_t a = 2; fits && a < given.size(); ++a) fits = given[a] >= unpooled[a];
    if (!fits) {
      c.fail("output_shape " + dims_str(given) + " is not the unpooled shape " +
             dims_str(unpooled) + " or larger");
    }
    for (std::size_t a = 2; a < given.size(); ++a) {
      if (given[a] == unpooled[a]) continue;
      Dims zd = c.shape(y);
      zd[a] = given[a] - unpooled[a];
      Node pad = c.constant(zd, c.host<float>(numel(zd)));
      y = concat({y, pad}, static_cast<int>(a));
    }
  }
  c.set(0, y);
}

void global_pool(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  if (d.size() < 3) c.fail("input " + dims_str(d) + " has no spatial dims");
  const bool is_max = c.n.op == "GlobalMaxPool";
  // An image's mean as one window over it: one pass (oneDNN's pooling where the value is
  // blocked or channels-last) where a mean per axis read the image, then wrote and read its
  // rows: MobileNetV3's squeeze-excite blocks spent 17% of their run in those means.
  if (!is_max && d.size() == 4 && d[2] <= INT_MAX && d[3] <= INT_MAX) {
    Pool2dOptions o;
    o.kernel = {static_cast<int>(d[2]), static_cast<int>(d[3])};
    c.set(0, avg_pool2d(x, o));
    return;
  }
  Node y = x;
  for (int a = static_cast<int>(d.size()) - 1; a >= 2; --a)
    y = is_max ? reduce_max(y, a, true) : reduce_mean(y, a, true);
  c.set(0, y);
}

// ---- normalisation ---------------------------------------------------------------------------

/// A per-channel vector [C] shaped to broadcast over [N, C, spatial...].
Node per_channel(Ctx& c, Node v, std::size_t rank) {
  const Dims d = c.shape(v);
  Dims to{numel(d)};
  for (std::size_t i = 2; i < rank; ++i) to.push_back(1);
  return c.reshape(v, to);
}

/// The mean over every axis but the channels (1), kept as [1, C, 1, ...]: one axis at a time,
/// each a mean of equal-sized parts, so the whole is their mean.
Node channel_mean(Node v, std::size_t rank) {
  for (int a = static_cast<int>(rank) - 1; a >= 0; --a) {
    if (a != 1) v = reduce_mean(v, a, true);
  }
  return v;
}

/// BatchNormalization in training mode (opset 14 and 15): normalised by the batch's own
/// statistics per channel (the variance of the population, as ONNX's reference), and the
/// running statistics moved towards them:
///   running = input_running * momentum + batch * (1 - momentum).
/// Gradients reach x, scale and bias through the batch statistics, as in a training step.
void batch_norm_training(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  if (d.size() < 2) c.fail("input " + dims_str(d) + " has no channel dim");
  const float eps = c.attr_f("epsilon", 1e-5f), momentum = c.attr_f("momentum", 0.9f);
  Node mean = channel_mean(x, d.size());
  Node centred = sub(x, mean);
  Node var = channel_mean(mul(centred, centred), d.size());
  Node scale = per_channel(c, c.f32(1), d.size()), b = per_channel(c, c.f32(2), d.size());
  c.set(0, add(mul(div(centred, sqrt(add(var, c.constant(eps)))), scale), b));
  const Dims cd{d[1]};
  for (std::size_t k = 1; k <= 2; ++k) {
    if (!c.wants(k)) continue;
    Node running = c.f32(k + 2);
    if (c.shape(running) != cd)
      c.fail("input " + std::to_string(k + 2) + " " + dims_str(c.shape(running)) + " is not [" +
             std::to_string(d[1]) + "], the channels");
    Node batch = c.reshape(k == 1 ? mean : var, cd);
    c.set(k, add(mul(running, c.constant(momentum)), mul(batch, c.constant(1.0f - momentum))));
  }
}

void batch_norm(Ctx& c) {
  if (c.version >= 14 && c.attr_i("training_mode", 0) != 0) return batch_norm_training(c);
  if (!bn_inference(c)) c.unsupported("batch normalization in training mode");
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  if (d.size() < 2) c.fail("input " + dims_str(d) + " has no channel dim");
  std::vector<float> s, t;
  if (bn_affine(c, s, t)) {
    Dims cd{d[1]};
    for (std::size_t i = 2; i < d.size(); ++i) cd.push_back(1);
    if (static_cast<std::int64_t>(s.size()) != d[1])
      c.fail("parameters do not match " + std::to_string(d[1]) + " channels");
    c.set(0, add(mul(x, c.constant(cd, std::move(s))), c.constant(cd, std::move(t))));
    return;
  }
  const float eps = c.attr_f("epsilon", 1e-5f);
  Node scale = per_channel(c, c.f32(1), d.size()), b = per_channel(c, c.f32(2), d.size());
  Node mean = per_channel(c, c.f32(3), d.size()), var = per_channel(c, c.f32(4), d.size());
  Node y = div(sub(x, mean), sqrt(add(var, c.constant(eps))));
  c.set(0, add(mul(y, scale), b));
}

/// LRN across channels: y = x / (bias + alpha / size * square_sum)^beta, square_sum over the
/// `size` channels around c (floor((size - 1) / 2) before, ceil after). The sum is an average
/// pooling of x^2 seen as [N, 1, C, spatial] with a (size, 1) window whose padding counts.
void lrn(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  if (d.size() < 3) c.fail("input " + dims_str(d) + " has no spatial dims");
  const std::int64_t size = c.attr_i("size", 0);
  if (size < 1) c.fail("size must be >= 1, got " + std::to_string(size));
  const float alpha = c.attr_f("alpha", 1e-4f), beta = c.attr_f("beta", 0.75f),
              bias = c.attr_f("bias", 1.0f);
  std::int64_t rest = 1;
  for (std::size_t i = 2; i < d.size(); ++i) rest *= d[i];
  Pool2dOptions o;
  o.kernel = {static_cast<int>(size), 1};
  o.stride = {1, 1};
  o.padding = {static_cast<int>((size - 1) / 2), 0};
  o.padding_end = {static_cast<int>(size / 2), 0};
  o.count_include_pad = true;
  Node mean_sq = avg_pool2d(c.reshape(mul(x, x), {d[0], 1, d[1], rest}), o);
  Node scale = pow(mean_sq * alpha + bias, c.constant(beta));
  c.set(0, div(x, c.reshape(scale, d)));
}

void instance_norm(Ctx& c) {
  Node x = c.f32(0);
  const Dims d = c.shape(x);
  if (d.size() < 3) c.fail("input " + dims_str(d) + " has no spatial dims");
  const float eps = c.attr_f("epsilon", 1e-5f);
  Node mean = x;
  for (int a = static_cast<int>(d.size()) - 1; a >= 2; --a) mean = reduce_mean(mean, a, true);
  Node centred = sub(x, mean);
  Node var = mul(centred, centred);
  for (int a = static_cast<int>(d.size()) - 1; a >= 2; --a) var = reduce_mean(var, a, true);
  Node y = div(centred, sqrt(add(var, c.constant(eps))));
  c.set(0, add(mul(y, per_channel(c, c.f32(1), d.size())), per_channel(c, c.f32(2), d.size())));
}

// ---- Resize / Upsample --------------------------------------------------------------------
// Separable: each axis whose size or sampling changes is one gather per tap of constant index
// arrays, weighted by constant coefficients and summed; the taps, coefficients and edge
// handling are those of ONNX's reference implementation (neighbours of the source coordinate
// preferring the lower ones, edge padding, so indices clamp), computed here in double.

struct ResizeAttrs {
  std::string mode = "nearest", transform = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  float extrapolation = 0.0f;
};

// The taps of one axis: per output position, tap t reads idx[t][o] with weight w[t][o]; out[o]
// is set when tf_crop_and_resize maps o outside the input (it takes the extrapolation value).
struct AxisTaps {
  std::vector<std::vector<std::int32_t>> idx;
  std::vector<std::vector<float>> w;
  std::vector<std::int32_t> out;
  bool identity = true, any_out = false;
};

AxisTaps axis_taps(const ResizeAttrs& r, std::int64_t len, std::int64_t out_len, double scale,
                   double roi_start, double roi_end) {
  const std::string& tf = r.transform;
  const double out_width = scale * static_cast<double>(len);  // the reference's, unrounded
  const std::size_t taps = r.mode == "cubic" ? 4 : r.mode == "linear" ? 2 : 1;
  AxisTaps a;
  a.idx.assign(taps, std::vector<std::int32_t>(static_cast<std::size_t>(out_len)));
  a.w.assign(taps, std::vector<float>(static_cast<std::size_t>(out_len)));
  a.out.assign(static_cast<std::size_t>(out_len), 0);
  const auto last = static_cast<double>(len - 1);
  for (std::int64_t o = 0; o < out_len; ++o) {
    const auto od = static_cast<double>(o);
    const auto u = static_cast<std::size_t>(o);
    double x;
    if (tf == "align_corners") {
      x = out_width == 1 ? 0 : od * last / (out_width - 1);
    } else if (tf == "asymmetric") {
      x = od / scale;
    } else if (tf == "tf_half_pixel_for_nn") {
      x = (od + 0.5) / scale;
    } else if (tf == "pytorch_half_pixel") {
      x = out_width == 1 ? -0.5 : (od + 0.5) / scale - 0.5;
    } else if (tf == "tf_crop_and_resize") {
      x = out_width == 1 ? (roi_end - roi_start) * last / 2
                         : od * (roi_end - roi_start) * last / (out_width - 1);
      x += roi_start * last;
      if (x < 0 || x > last) {
        a.out[u] = 1;
        a.any_out = true;
        a.identity = false;
        continue;
      }
    } else {  // half_pixel
      x = (od + 0.5) / scale - 0.5;
    }
    const bool whole = x == std::floor(x);
    const double ratio = whole ? 1.0 : x - std::floor(x);  // in (0, 1]: the lower tap first
    const auto base =
        static_cast<std::int64_t>(std::ceil(x)) - static_cast<std::int64_t>(taps / 2 + (taps == 1));
    std::vector<double> cf;
    if (r.mode == "cubic") {
      const double A = r.cubic_a, p = ratio + 1, q = 1 - ratio, qq = q + 1;
      cf = {((A * p - 5 * A) * p + 8 * A) * p - 4 * A,
            ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1, ((A + 2) * q - (A + 3)) * q * q + 1,
            ((A * qq - 5 * A) * qq + 8 * A) * qq - 4 * A};
    } else if (r.mode == "linear") {
      cf = {1 - ratio, ratio};
    }
    if (taps == 1) {  // nearest: between ceil(x) - 1 and ceil(x), by the rounding mode
      const std::string& nm = r.nearest;
      const bool upper = whole                       ? true
                         : nm == "round_prefer_ceil" ? ratio >= 0.5
                         : nm == "floor"             ? false
                         : nm == "ceil"              ? true
                                                     : ratio > 0.5;
      const std::int64_t i = std::clamp<std::int64_t>(base + (upper ? 1 : 0), 0, len - 1);
      a.idx[0][u] = static_cast<std::int32_t>(i);
      a.w[0][u] = 1.0f;
      a.identity = a.identity && i == o;
      continue;
    }
    if (r.exclude_outside) {
      double sum = 0;
      for (std::size_t t = 0; t < taps; ++t) {
        const std::int64_t i = base + static_cast<std::int64_t>(t);
        if (i < 0 || i >= len) cf[t] = 0;
        sum += cf[t];
      }
      for (double& v : cf) v /= sum;
    }
    for (std::size_t t = 0; t < taps; ++t) {
      const std::int64_t i =
          std::clamp<std::int64_t>(base + static_cast<std::int64_t>(t), 0, len - 1);
      a.idx[t][u] = static_cast<std::int32_t>(i);
      a.w[t][u] = static_cast<float>(cf[t]);
      a.identity = a.identity && (cf[t] == 0 || (cf[t] == 1 && i == o));
    }
  }
  a.identity = a.identity && out_len == len;
  return a;
}

// ---- GridSample ----------------------------------------------------------------------------
// out[n, c, p] = sum over taps of w * x[n, c, iy * W + ix], as PyTorch's grid_sample (whose
// outputs ONNX's tests hold): per output pixel p, the grid's (x, y) in [-1, 1] is mapped onto
// the input, and each interpolation tap is one gather_elements of x viewed as [N, C, H * W]
// with int32 positions computed from the grid at run time, weighed and summed. No kernel of its
// own: gradients reach x (through gather_elements) and the grid (through the weights).

struct GridTap {
  Node at;  // the tap's coordinate, integral-valued float [N, 1, P]
  Node w;   // its weight [N, 1, P]
};

/// A grid coordinate mapped onto an axis of `size` pixels (grid_sampler_unnormalize).
Node grid_unnormalize(Node g, std::int64_t size, bool align) {
  const auto s = static_cast<float>(size);
  return align ? ((g + 1.0f) / 2.0f) * (s - 1.0f) : ((g + 1.0f) * s - 1.0f) / 2.0f;
}

/// Border and reflection padding of a coordinate (compute_coordinates): clipped into
/// [0, size - 1], reflected first for reflection.
Node grid_pad(Ctx& c, Node x, std::int64_t size, bool align, const std::string& padding) {
  const auto hi = static_cast<float>(size - 1);
  if (padding == "zeros") return x;
  if (padding == "reflection") {
    const float twice_lo = align ? 0.0f : -1.0f, twice_hi = align ? 2.0f * hi : 2.0f * hi + 1.0f;
    if (twice_lo == twice_hi) return broadcast_to(c, c.constant(0.0f), c.shape(x));
    const float lo = twice_lo / 2, span = (twice_hi - twice_lo) / 2;
    const Node in = abs(x - lo);
    const Node extra = fmod(in, span);
    const Node even = equal(fmod(floor(in / span), 2.0f), c.constant(0.0f));
    x = where(even, extra + lo, (span - extra) + lo);
  }
  return clip(x, 0.0f, hi);
}

/// PyTorch's cubic convolution weights (A = -0.75) of the four taps around t in [0, 1).
std::array<Node, 4> cubic_weights(Node t) {
  constexpr float a = -0.75f;
  auto near = [](Node x) { return ((x * (a + 2) - (a + 3)) * x) * x + 1.0f; };
  auto far = [](Node x) { return ((x * a - 5 * a) * x + 8 * a) * x - 4 * a; };
  const Node u = 1.0f - t;
  return {far(t + 1.0f), near(t), near(u), far(u + 1.0f)};
}

/// The taps of one axis: nearest (round half to even), bilinear (floor and floor + 1), or
/// bicubic (floor - 1 .. floor + 2, each padded on its own, as PyTorch does).
std::vector<GridTap> grid_taps(Ctx& c, Node g, std::int64_t size, bool align,
                               const std::string& mode, const std::string& padding) {
  const Node x = grid_unnormalize(g, size, align);
  if (mode == "bicubic") {
    const Node x0 = floor(x);
    const std::array<Node, 4> w = cubic_weights(x - x0);
    std::vector<GridTap> taps;
    for (int k = 0; k < 4; ++k)
      taps.push_back({grid_pad(c, x0 + static_cast<float>(k - 1), size, align, padding), w[k]});
    return taps;
  }
  const Node p = grid_pad(c, x, size, align, padding);
  if (mode == "nearest") return {{round(p), c.constant(1.0f)}};
  const Node x0 = floor(p), x1 = x0 + 1.0f;
  return {{x0, x1 - p}, {x1, p - x0}};
}

void grid_sample(Ctx& c) {
  const Dims dx = c.dims(0), dg = c.dims(1);
  if (dx.size() != 4)
    c.unsupported("input of rank " + std::to_string(dx.size()) + " (rank 4 only)");
  if (dg.size() != 4 || dg[0] != dx[0] || dg[3] != 2) {
    c.fail("the grid must be [N, H_out, W_out, 2] with N = " + std::to_string(dx[0]) + ", got " +
           dims_str(dg));
  }
  const std::string mode = c.attr_s("mode", "bilinear"),
                    padding = c.attr_s("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    c.fail("mode must be bilinear, nearest or bicubic, got '" + mode + "'");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    c.fail("padding_mode must be zeros, border or reflection, got '" + padding + "'");
  const bool align = c.attr_i("align_corners", 0) != 0;
  const std::int64_t n = dx[0], ch = dx[1], h = dx[2], w = dx[3], p = dg[1] * dg[2];
  if (h * w > INT32_MAX) c.unsupported("an input of more than 2^31 pixels per channel");
  const Node x = c.reshape(c.f32(0), {n, ch, h * w});
  const Node grid = c.f32(1);
  const Node gx = c.reshape(slice(grid, 3, 0, 1), {n, 1, p});
  const Node gy = c.reshape(slice(grid, 3, 1, 2), {n, 1, p});
  const std::vector<GridTap> tx = grid_taps(c, gx, w, align, mode, padding);
  const std::vector<GridTap> ty = grid_taps(c, gy, h, align, mode, padding);
  const Node zero = c.constant(0.0f);
  auto inside = [&](Node at, std::int64_t size) {
    return logical_and(greater_equal(at, zero),
                       less_equal(at, c.constant(static_cast<float>(size - 1))));
  };
  Node out;
  for (const GridTap& y : ty) {
    for (const GridTap& xt : tx) {
      // Taps outside the input read 0 (zeros padding; the others are inside already): their
      // weight is 0 and their position any valid one.
      const Node ok = logical_and(inside(xt.at, w), inside(y.at, h));
      const Node pos = cast(where(ok, y.at * static_cast<float>(w) + xt.at, zero), DType::i32);
      const Node v = gather_elements(x, broadcast_to(c, pos, {n, ch, p}), 2);
      const Node term = v * where(ok, xt.w * y.w, zero);
      out = out.valid() ? out + term : term;
    }
  }
  c.set(0, c.reshape(out, {n, ch, dg[1], dg[2]}));
}

// Resize's attributes. Upsample and Resize-10 have none of Resize-11's: they resize
// asymmetric, rounding nearest down. The mode is checked here, before any input is read.
ResizeAttrs resize_attrs(Ctx& c, bool legacy) {
  ResizeAttrs r;
  r.mode = c.attr_s("mode", "nearest");
  if (legacy) {
    r.transform = "asymmetric";
    r.nearest = "floor";
  } else {
    r.transform = c.attr_s("coordinate_transformation_mode", "half_pixel");
    r.nearest = c.attr_s("nearest_mode", "round_prefer_floor");
    r.cubic_a = c.attr_f("cubic_coeff_a", -0.75f);
    r.exclude_outside = c.attr_i("exclude_outside", 0) != 0;
    r.extrapolation = c.attr_f("extrapolation_value", 0.0f);
  }
  if (r.mode != "nearest" && r.mode != "linear" && r.mode != "cubic")
    c.unsupported("mode '" + r.mode + "'");
  return r;
}

// Resize's geometry per axis: the scale, the output dim and the roi (rank starts, then rank
// ends, in the input's normalized coordinates).
struct ResizeGeometry {
  std::vector<double> scales;
  Dims out;
  std::vector<double> roi;
  bool sized = false;  // the output dims came from `sizes` (scales then follow from them)
};

// Whether optional input i is given and not empty (models pass an empty tensor for "absent").
bool resize_given(const Ctx& c, std::size_t i) {
  return c.has(i) && numel(c.dims(i)) > 0;
}

// The scales (Upsample-7's attribute, or the scales input) or the sizes input, which wins and
// sets the scales. Inputs: Upsample-9 / Resize-10 (X, scales); Resize-11+ (X, roi, scales,
// sizes).
void resize_scales(Ctx& c, const Dims& in, bool legacy, ResizeGeometry& g) {
  const auto rank = in.size();
  const std::size_t si = legacy ? 1 : 2;
  g.scales.assign(rank, 1.0);
  g.out = in;
  if (c.n.op == "Upsample" && c.version < 9) {
    const std::vector<float> f = c.attr_floats("scales");
    g.scales.assign(f.begin(), f.end());
  } else if (resize_given(c, si)) {
    const std::vector<float> f = c.floats(si, "scales");
    g.scales.assign(f.begin(), f.end());
  }
  g.sized = !legacy && resize_given(c, 3);
  if (g.sized) {
    g.out = c.ints(3, "sizes");
    if (g.out.size() != rank) c.fail("sizes must give " + std::to_string(rank) + " dims");
    for (std::size_t d = 0; d < rank; ++d)
      g.scales[d] = static_cast<double>(g.out[d]) / static_cast<double>(in[d]);
  } else if (g.scales.size() != rank) {
    c.fail("scales must give " + std::to_string(rank) + " dims, or sizes must be given");
  }
}

// The roi input (Resize-11+), [0, 1] on every axis when absent; only tf_crop_and_resize uses it.
void resize_roi(Ctx& c, std::size_t rank, bool legacy, ResizeGeometry& g) {
  g.roi.assign(2 * rank, 0.0);
  for (std::size_t d = 0; d < rank; ++d) g.roi[rank + d] = 1.0;
  if (!legacy && resize_given(c, 1)) {
    const std::vector<float> f = c.floats(1, "roi");
    if (f.size() != 2 * rank) c.fail("roi must give " + std::to_string(2 * rank) + " numbers");
    g.roi.assign(f.begin(), f.end());
    for (double v : g.roi)
      if (!std::isfinite(v)) c.fail("roi must be finite numbers");
  }
}

// Checks the scales and, unless sizes gave them, computes the output dims from them (floor of
// in * roi extent * scale, as ONNX's reference does); dims are checked before they are used.
void resize_out_dims(Ctx& c, const ResizeAttrs& r, const Dims& in, ResizeGeometry& g) {
  const auto rank = in.size();
  for (std::size_t d = 0; d < rank; ++d) {
    if (!(g.scales[d] > 0) || !std::isfinite(g.scales[d]))
      c.fail("scales must be positive and finite");
    if (!g.sized) {
      const double extent = r.transform == "tf_crop_and_resize" ? g.roi[rank + d] - g.roi[d] : 1.0;
      const double o = std::floor(static_cast<double>(in[d]) * extent * g.scales[d]);
      g.out[d] = o < 1 ? 0 : o > (1 << 30) ? std::int64_t{1} << 31 : static_cast<std::int64_t>(o);
    }
    if (g.out[d] > (1 << 30)) c.unsupported("an output dim of " + std::to_string(g.out[d]));
    if (g.out[d] < 1)
      c.unsupported("an output dim of " + std::to_string(g.out[d]) + " (empty tensors)");
  }
}

// Resizes x along axis d with its taps: each tap a gather of x along d, weighed (when there is
// more than one) and summed; outputs outside the roi take the extrapolation value.
Node resize_axis(Ctx& c, const ResizeAttrs& r, Node x, const AxisTaps& a, std::size_t d,
                 std::size_t rank, std::int64_t out_d, bool ints) {
  const int axis = static_cast<int>(d);
  Dims along(rank, 1);
  along[d] = out_d;
  Node sum;
  for (std::size_t t = 0; t < a.idx.size(); ++t) {
    Node g = gather(x, c.graph().constant_i32(Shape{out_d}, a.idx[t]), axis);
    if (a.idx.size() > 1) g = mul(g, c.constant(along, a.w[t]));
    sum = t == 0 ? g : add(sum, g);
  }
  if (a.any_out) {
    const Node ext =
        ints ? c.graph().constant_i32(Shape{}, {static_cast<std::int32_t>(r.extrapolation)})
             : c.constant(r.extrapolation);
    sum =
        where(c.graph().constant_i32(Shape(std::span<const std::int64_t>(along)), a.out), ext, sum);
  }
  return sum;
}

// ONNX Resize and Upsample: separable, one axis at a time, each axis a sum of gathers with
// weights computed at import. Integers resize by nearest only (no weights to apply).
void resize(Ctx& c) {
  const Dims in = c.dims(0);
  const auto rank = in.size();
  const bool legacy = c.n.op == "Upsample" || c.version < 11;  // asymmetric, floor
  const ResizeAttrs r = resize_attrs(c, legacy);
  ResizeGeometry g;
  resize_scales(c, in, legacy, g);
  resize_roi(c, rank, legacy, g);
  resize_out_dims(c, r, in, g);
  const int elem = c.elem(0);
  const bool ints = ir::is_integral(elem);
  if (ints && r.mode != "nearest") c.unsupported(r.mode + " resizing of integers");
  Node x = ints ? c.node(0) : c.f32(0);
  for (std::size_t d = 0; d < rank; ++d) {
    c.host_check(g.out[d] * 4);  // (at most 4 taps)
    const AxisTaps a = axis_taps(r, in[d], g.out[d], g.scales[d], g.roi[d], g.roi[rank + d]);
    if (a.identity) continue;
    x = resize_axis(c, r, x, a, d, rank, g.out[d], ints);
  }
  c.set(0, x, elem);
}

// RoiAlign (avg): each roi's bins sample a gh x gw grid of bilinear points and average them.
// Bilinear weights factor into a row part and a column part, and so does the average, so a
// roi's output is Ay (oh x H) . X[batch] . Ax^T (W x ow): two batched products, with Ay and Ax
// built at run time from the roi's coordinates (sample positions, ONNX's clamping rules, one-hot
// rows of the two neighbours). The grid size must be known at import: sampling_ratio, or rois
// known there (the adaptive grid is ceil(roi size / bins)).
// The interpolation matrix of one axis: [R, bins, size], rows of the bins' averaged weights.
Node roi_axis_weights(Ctx& c, Node start, Node bin, std::int64_t bins, std::int64_t grid,
                      std::int64_t size) {
  const std::int64_t samples = bins * grid;
  std::vector<float> at = c.host<float>(samples);
  for (std::int64_t p = 0; p < bins; ++p) {
    for (std::int64_t k = 0; k < grid; ++k) {
      at[static_cast<std::size_t>(p * grid + k)] =
          static_cast<float>(p) + (static_cast<float>(k) + 0.5f) / static_cast<float>(grid);
    }
  }
  // start + p * bin + (k + 0.5) * bin / grid, as ONNX's reference adds them.
  const Node pos = add(start, mul(bin, c.constant({1, samples}, std::move(at))));  // [R, S]
  const auto fsize = static_cast<float>(size);
  const Node inside = mul(cast(greater_equal(pos, c.constant(-1.0f)), DType::f32),
                          cast(less_equal(pos, c.constant(fsize)), DType::f32));
  const Node clamped = minimum(maximum(pos, c.constant(0.0f)), c.constant(fsize - 1.0f));
  const Node low = hetgraph::floor(clamped);
  const Node frac = sub(clamped, low);
  const Node high = minimum(add(low, c.constant(1.0f)), c.constant(fsize - 1.0f));
  const Node scale = mul(inside, c.constant(1.0f / static_cast<float>(grid)));
  const Node w_low = mul(sub(c.constant(1.0f), frac), scale), w_high = mul(frac, scale);
  // One-hot rows over the axis: [R, S, 1] against 0..size-1.
  std::vector<float> iota = c.host<float>(size);
  for (std::int64_t k = 0; k < size; ++k) iota[static_cast<std::size_t>(k)] = static_cast<float>(k);
  const Node positions = c.constant({1, 1, size}, std::move(iota));
  const Dims r = c.shape(pos);
  const auto col = [&](Node v) { return c.reshape(v, {r[0], samples, 1}); };
  const Node w = add(mul(cast(equal(col(low), positions), DType::f32), col(w_low)),
                     mul(cast(equal(col(high), positions), DType::f32), col(w_high)));
  // The grid's samples of a bin summed: [R, bins, grid, size] -> [R, bins, size].
  return reduce_sum(c.reshape(w, {r[0], bins, grid, size}), 2);
}

void roi_align(Ctx& c) {
  const Dims xd = c.dims(0), rd = c.dims(1), bd = c.dims(2);
  if (xd.size() != 4) c.fail("X must be [N, C, H, W], it is " + dims_str(xd));
  if (rd.size() != 2 || rd[1] != 4) c.fail("rois must be [num_rois, 4], it is " + dims_str(rd));
  if (bd != Dims{rd[0]})
    c.fail("batch_indices " + dims_str(bd) + " must hold one index per roi (" +
           std::to_string(rd[0]) + ")");
  if (c.attr_s("mode", "avg") != "avg") c.unsupported("mode '" + c.attr_s("mode", "avg") + "'");
  const std::int64_t oh = c.attr_i("output_height", 1), ow = c.attr_i("output_width", 1);
  const std::int64_t ratio = c.attr_i("sampling_ratio", 0);
  if (oh < 1 || ow < 1 || ratio < 0) c.fail("output sizes must be positive, sampling_ratio >= 0");
  const float scale = c.attr_f("spatial_scale", 1.0f);
  const bool half_pixel =
      c.version >= 16 && c.attr_s("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const std::int64_t rois = rd[0], channels = xd[1], h = xd[2], w = xd[3];
  const float offset = half_pixel ? 0.5f : 0.0f;
  // Grid sizes: sampling_ratio, or from known rois (each the same: the graph is one shape).
  std::int64_t gh = ratio, gw = ratio;
  if (ratio == 0) {
    const std::vector<float> v = c.floats(1, "rois: with sampling_ratio 0 the grid follows them");
    for (std::int64_t r = 0; r < rois; ++r) {
      const auto at = [&](int k) { return v[static_cast<std::size_t>(r * 4 + k)] * scale; };
      float rh = at(3) - at(1), rw = at(2) - at(0);
      if (!half_pixel) rh = std::max(rh, 1.0f), rw = std::max(rw, 1.0f);
      const auto gy = static_cast<std::int64_t>(std::ceil(rh / static_cast<float>(oh)));
      const auto gx = static_cast<std::int64_t>(std::ceil(rw / static_cast<float>(ow)));
      if (r > 0 && (gy != gh || gx != gw))
        c.unsupported("rois whose adaptive sampling grids differ (give sampling_ratio)");
      gh = gy, gw = gx;
    }
    gh = std::max<std::int64_t>(gh, 1), gw = std::max<std::int64_t>(gw, 1);
  }
  const Node boxes = mul(c.f32(1), c.constant(scale));
  const auto coord = [&](int k) {  // [R, 1]
    return sub(slice(boxes, 1, k, k + 1), c.constant(offset));
  };
  const Node x0 = coord(0), y0 = coord(1), x1 = coord(2), y1 = coord(3);
  Node rh = sub(y1, y0), rw = sub(x1, x0);
  if (!half_pixel) rh = maximum(rh, c.constant(1.0f)), rw = maximum(rw, c.constant(1.0f));
  const Node bin_h = mul(rh, c.constant(1.0f / static_cast<float>(oh)));
  const Node bin_w = mul(rw, c.constant(1.0f / static_cast<float>(ow)));
  const Node ay = roi_axis_weights(c, y0, bin_h, oh, gh, h);  // [R, oh, H]
  const Node ax = roi_axis_weights(c, x0, bin_w, ow, gw, w);  // [R, ow, W]
  // X of each roi's image, its batch index checked first: [R, C, H, W].
  const Node ids =
      add(c.node(2), cast(index_check(c, c.node(2), xd[0], "batch_indices"), DType::i32));
  const Node xs = gather(c.f32(0), ids, 0);
  const Node cols = matmul(c.reshape(xs, {rois, channels * h, w}), ax, false, true);  // [R, CH, ow]
  const Node rows = transpose(c.reshape(cols, {rois, channels, h, ow}), {0, 2, 1, 3});
  const Node out = matmul(ay, c.reshape(rows, {rois, h, channels * ow}));  // [R, oh, C ow]
  const Node y = transpose(c.reshape(out, {rois, oh, channels, ow}), {0, 2, 1, 3});
  c.set(0, y);
}

// ---- ConvInteger / QLinearConv: exact integer convolutions --------------------------------

// x [N, C, H, W] and w [OC, C / groups, kh, kw], int32 values of magnitude up to 255 (the
// zero points taken off): their convolution in int32, exactly, as patches (one gather of
// constant positions, the padding reading an appended zero) times the weights
// (exact_int_matmul). For what exact_int_conv below cannot cut into exact float convolutions:
// kernels of more than 256 taps, and groups wider than one chunk.
Node exact_int_conv_patches(Ctx& c, Node x, Node w, const Window& win, std::int64_t groups) {
  const Dims dx = c.shape(x), dw = c.shape(w);
  const std::int64_t n = dx[0], ch = dx[1], H = dx[2], W = dx[3], oc = dw[0];
  const std::array<int, 2> k = pair(win.kernel, 1), s = pair(win.stride, 1),
                           d = pair(win.dilation, 1), pb = pair(win.pad_begin, 0),
                           pe = pair(win.pad_end, 0);
  const std::int64_t oh = (H + pb[0] + pe[0] - (std::int64_t{k[0]} - 1) * d[0] - 1) / s[0] + 1;
  const std::int64_t ow = (W + pb[1] + pe[1] - (std::int64_t{k[1]} - 1) * d[1] - 1) / s[1] + 1;
  if (oh < 1 || ow < 1) c.fail("the output would be empty");
  if (groups < 1 || ch % groups != 0 || oc % groups != 0 || dw[1] * groups != ch)
    c.fail("group " + std::to_string(groups) + " does not divide " + dims_str(dx) + " and " +
           dims_str(dw));
  const std::int64_t taps = std::int64_t{k[0]} * k[1], outs = oh * ow;
  std::vector<std::int32_t> reads = c.host<std::int32_t>(outs * taps);
  for (std::int64_t y = 0; y < oh; ++y) {
    for (std::int64_t xo = 0; xo < ow; ++xo) {
      for (std::int64_t t = 0; t < taps; ++t) {
        const std::int64_t h = y * s[0] - pb[0] + (t / k[1]) * d[0],
                           x2 = xo * s[1] - pb[1] + (t % k[1]) * d[1];
        const bool in = h >= 0 && h < H && x2 >= 0 && x2 < W;
        reads[static_cast<std::size_t>((y * ow + xo) * taps + t)] =
            static_cast<std::int32_t>(in ? h * W + x2 : H * W);
      }
    }
  }
  Graph& g = c.graph();
  const Node planes = concat({c.reshape(x, {n * ch, H * W}),
                              g.constant_i32(Shape{n * ch, 1}, c.host<std::int32_t>(n * ch))},
                             1);
  const Node tapped = gather(planes, g.constant_i32(Shape{outs * taps}, std::move(reads)), 1);
  const Node patches = c.reshape(transpose(c.reshape(tapped, {n, ch, outs, taps}), {0, 2, 1, 3}),
                                 {n, outs, ch * taps});
  const std::int64_t cg = ch / groups, og = oc / groups;
  std::vector<Node> parts;
  for (std::int64_t gi = 0; gi < groups; ++gi) {
    const Node p = groups == 1 ? patches : slice(patches, 2, gi * cg * taps, (gi + 1) * cg * taps);
    const Node wg = groups == 1 ? w : slice(w, 0, gi * og, (gi + 1) * og);
    parts.push_back(exact_int_matmul(c, p, transpose(c.reshape(wg, {og, cg * taps}), {1, 0})));
  }
  const Node all = parts.size() == 1 ? parts[0] : concat(std::span<const Node>(parts), 2);
  return c.reshape(transpose(all, {0, 2, 1}), {n, oc, oh, ow});
}

// x conv w of int32 images and weights of magnitude up to 255 (zero points taken off), exactly:
// float convolutions (no Winograd: Conv2dOptions::exact) of chunks of the input channels with
// at most 256 taps per output, whose sums stay below 2^24 (255^2 * 256), so float32 holds
// every partial sum in any order; each chunk's result converted to int32 and added there. A
// kernel of more than 256 taps takes the gather of patches above. `w_host`, when given, holds
// w's values (known at import): each chunk's weights are then a constant, not per-run work.
Node exact_int_conv(Ctx& c, Node x, Node w, const Window& win, std::int64_t groups,
                    const std::vector<float>* w_host) {
  const Dims dx = c.shape(x), dw = c.shape(w);
  const std::int64_t taps = dw[2] * dw[3], per_group = dx[1] / groups;
  const std::int64_t chunk = 256 / taps;  // input channels of one exact float convolution
  if (chunk < 1 || (groups > 1 && per_group > chunk))
    return exact_int_conv_patches(c, x, w, win, groups);
  Conv2dOptions o = conv_options(win, groups);
  o.exact = true;
  const Node xf = cast(x, DType::f32), wf = w_host ? Node() : cast(w, DType::f32);
  Node acc;
  for (std::int64_t c0 = 0; c0 < per_group; c0 += chunk) {  // one pass when groups > 1
    const std::int64_t c1 = std::min(per_group, c0 + chunk);
    const bool all = c1 - c0 == per_group;
    Node wc;
    if (w_host != nullptr) {  // w[:, c0:c1] on the host
      std::vector<float> v;
      v.reserve(static_cast<std::size_t>(dw[0] * (c1 - c0) * taps));
      for (std::int64_t o2 = 0; o2 < dw[0]; ++o2) {
        const auto from = w_host->begin() + (o2 * per_group + c0) * taps;
        v.insert(v.end(), from, from + (c1 - c0) * taps);
      }
      wc = c.constant({dw[0], c1 - c0, dw[2], dw[3]}, std::move(v));
    } else {
      wc = all ? wf : slice(wf, 1, c0, c1);
    }
    const Node part = cast(conv2d(all ? xf : slice(xf, 1, c0, c1), wc, o), DType::i32);
    acc = acc.valid() ? add(acc, part) : part;
  }
  c.type(acc);
  return acc;
}

// Input i (a zero point or scale of W) per output channel: a scalar, or [OC] as [1, OC, 1, 1]
// (`out` true) or [OC, 1, 1, 1] (against W).
Node per_output_channel(Ctx& c, Node v, std::size_t i, std::int64_t oc, bool out) {
  const Dims d = c.dims(i);
  if (numel(d) == 1) return c.reshape(v, {});
  if (d != Dims{oc})
    c.fail("input " + std::to_string(i) + " " + dims_str(d) +
           " is neither a "
           "scalar nor one value per output channel (" +
           std::to_string(oc) + ")");
  return c.reshape(v, out ? Dims{1, oc, 1, 1} : Dims{oc, 1, 1, 1});
}

// ConvInteger (x, w, x_zero_point, w_zero_point) and QLinearConv (x, x_scale, x_zero_point, w,
// w_scale, w_zero_point, y_scale, y_zero_point, B): 8-bit images and weights.
void conv_integer(Ctx& c) {
  const bool qlinear = c.n.op == "QLinearConv";
  const std::size_t xi = 0, wi = qlinear ? 3 : 1, xz = 2, wz = qlinear ? 5 : 3;
  for (std::size_t i : {xi, wi}) {
    if (c.elem(i) != ir::kUint8 && c.elem(i) != ir::kInt8)
      c.unsupported("input " + std::to_string(i) + " of type " + ir::elem_name(c.elem(i)));
  }
  const Dims dx = c.dims(xi), dw = c.dims(wi);
  const std::int64_t group = c.attr_i("group", 1);
  const Dims kernel = conv_kernel(c, dx, dw, group);
  const bool one_d = dx.size() == 3;
  Node x = as_image(c, c.node(xi)), w = as_image(c, c.node(wi));
  const std::int64_t oc = dw[0];
  if (c.has(xz)) {
    if (numel(c.dims(xz)) != 1) c.unsupported("a zero point of x per channel");
    x = sub(x, c.reshape(c.node(xz), {}));
  }
  if (c.has(wz)) w = sub(w, per_output_channel(c, c.node(wz), wz, oc, false));
  // W and its zero point known at import (a model's weights): W less it, as floats, on the host.
  const std::vector<float> w_host = known_less_zero_point(c, wi, wz, numel(dw) / oc, oc);
  const Window win = window(c, spatial(dx), kernel);
  Node acc = exact_int_conv(c, x, w, win, group, w_host.empty() ? nullptr : &w_host);
  if (!qlinear) {
    if (one_d) acc = c.reshape(acc, {c.shape(acc)[0], oc, c.shape(acc)[3]});
    c.set(0, acc, ir::kInt32);
    return;
  }
  if (c.has(8)) acc = add(acc, per_output_channel(c, c.node(8), 8, oc, true));  // int32 bias
  if (numel(c.dims(1)) != 1 || numel(c.dims(6)) != 1 || numel(c.dims(7)) != 1)
    c.unsupported("x or y scales or zero points per channel");
  const Node w_scale = per_output_channel(c, c.node(4), 4, oc, true);
  const Node scale = div(mul(c.reshape(c.node(1), {}), w_scale), c.reshape(c.node(6), {}));
  const int elem = c.elem(7);
  Node y = requantize(c, cast(acc, DType::f32), scale, quantization_param(c, 7, 0), elem);
  if (one_d) y = c.reshape(y, {c.shape(y)[0], oc, c.shape(y)[3]});
  c.set(0, y, elem);
}

}  // namespace

void register_nn_ops(std::vector<Handler>& h) {
  h.push_back({"ConvInteger", 10, 10, conv_integer});
  h.push_back({"QLinearConv", 10, 10, conv_integer});
  h.push_back({"RoiAlign", 10, 16, roi_align});
  h.push_back({"Conv", 1, 11, conv});
  h.push_back({"ConvTranspose", 1, 11, conv_transpose});
  h.push_back({"MaxPool", 1, 12, pool});
  h.push_back({"MaxUnpool", 9, 11, max_unpool});
  h.push_back({"AveragePool", 1, 11, pool});
  h.push_back({"GlobalAveragePool", 1, 1, global_pool});
  h.push_back({"GlobalMaxPool", 1, 1, global_pool});
  h.push_back({"BatchNormalization", 1, 15, batch_norm});
  h.push_back({"InstanceNormalization", 1, 6, instance_norm});
  h.push_back({"LRN", 1, 13, lrn});
  h.push_back({"Resize", 10, 13, resize});
  h.push_back({"GridSample", 16, 16, grid_sample});
  h.push_back({"Upsample", 7, 9, resize});
}

}  // namespace hetgraph::onnx::imp
