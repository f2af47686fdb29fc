// SPDX-License-Identifier: Apache-2.0
// Convolution and pooling over NCHW images, and their gradients. The public builders live
// here too, next to the ops they record. conv2d differentiates into three internal ops (input,
// weight and bias gradients) so platforms run each with their best kernel; max pooling's
// gradient reads the forward node itself, so a platform whose forward kernel keeps the argmax
// (oneDNN's workspace) can use it, and one that does not can recompute it from x and y.
#include <limits>
#include <string>

#include "compiler/geometry.hpp"
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"

namespace hetgraph {

namespace {

using detail::Window2d;

std::array<std::int64_t, 2> wide(std::array<int, 2> v) {
  return {v[0], v[1]};
}
// -1 asks for the same padding after as before.
std::array<std::int64_t, 2> end_pad(std::array<int, 2> begin, std::array<int, 2> end) {
  return {end[0] == -1 ? begin[0] : end[0], end[1] == -1 ? begin[1] : end[1]};
}

detail::AutoPadMode auto_pad_mode(AutoPad a) {
  switch (a) {
    case AutoPad::same_upper:
      return detail::AutoPadMode::same_upper;
    case AutoPad::same_lower:
      return detail::AutoPadMode::same_lower;
    case AutoPad::valid:
      return detail::AutoPadMode::valid;
    default:
      return detail::AutoPadMode::none;
  }
}

// The window fields conv2d and conv_transpose2d share.
template <class Options>
Window2d conv_window(const Options& o) {
  Window2d w;
  w.stride = wide(o.stride);
  w.pad_begin = wide(o.padding);
  w.pad_end = end_pad(o.padding, o.padding_end);
  w.dilation = wide(o.dilation);
  w.groups = o.groups;
  return w;
}

detail::Attrs window_attrs(const Window2d& w) {
  detail::Attrs at;
  at.set(w);
  return at;
}

detail::Attrs conv_attrs(const Conv2dOptions& o) {
  Window2d w = conv_window(o);
  w.auto_pad = auto_pad_mode(o.auto_pad);
  w.exact = o.exact;
  return window_attrs(w);
}

detail::Attrs conv_transpose_attrs(const ConvTranspose2dOptions& o) {
  Window2d w = conv_window(o);
  w.output_padding = wide(o.output_padding);
  return window_attrs(w);
}

detail::Attrs pool_attrs(const Pool2dOptions& o) {
  Window2d w;
  w.kernel = wide(o.kernel);
  w.stride = {o.stride[0] == 0 ? o.kernel[0] : o.stride[0],
              o.stride[1] == 0 ? o.kernel[1] : o.stride[1]};
  w.pad_begin = wide(o.padding);
  w.pad_end = end_pad(o.padding, o.padding_end);
  w.dilation = wide(o.dilation);
  w.count_include_pad = o.count_include_pad;
  w.ceil_mode = o.ceil_mode;
  w.auto_pad = auto_pad_mode(o.auto_pad);
  return window_attrs(w);
}

}  // namespace

Node conv2d(Node x, Node weights, Conv2dOptions options) {
  return detail::make_op(detail::OpKind::Conv2d, {x, weights}, conv_attrs(options));
}
Node conv2d(Node x, Node weights, Node bias, Conv2dOptions options) {
  return detail::make_op(detail::OpKind::Conv2d, {x, weights, bias}, conv_attrs(options));
}
Node conv_transpose2d(Node x, Node weights, ConvTranspose2dOptions options) {
  return detail::make_op(detail::OpKind::ConvTranspose2d, {x, weights},
                         conv_transpose_attrs(options));
}
Node conv_transpose2d(Node x, Node weights, Node bias, ConvTranspose2dOptions options) {
  return detail::make_op(detail::OpKind::ConvTranspose2d, {x, weights, bias},
                         conv_transpose_attrs(options));
}
Node max_pool2d(Node x, Pool2dOptions options) {
  return detail::make_op(detail::OpKind::MaxPool2d, {x}, pool_attrs(options));
}
Node avg_pool2d(Node x, Pool2dOptions options) {
  return detail::make_op(detail::OpKind::AvgPool2d, {x}, pool_attrs(options));
}

namespace detail {

namespace {

std::string pair(const std::array<std::int64_t, 2>& v) {
  return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
}

void need_image(const InferCtx& c, const TensorType& t, const std::string& what) {
  if (t.dtype != DType::f32)
    c.fail(what + " must be float, got " + std::string(dtype_name(t.dtype)));
  if (t.shape.rank() != 4) {
    c.fail(what + " must be an NCHW image of rank 4, got " + t.shape.str());
  }
}

const Window2d& window_of(const InferCtx& c) {
  if (!c.attrs.has<Window2d>() && !c.attrs.has<ConvEpilogue>())
    c.fail("window attributes are missing");
  return window2d(c.attrs);
}

// Window sizes, strides, paddings and dilations, and image sizes, fit in 31 bits: the
// kernels of every platform index with int.
constexpr std::int64_t kMaxWindow = std::numeric_limits<std::int32_t>::max();

void check_window(const InferCtx& c, const Window2d& w, bool pooling) {
  for (const auto* v :
       {&w.kernel, &w.stride, &w.pad_begin, &w.pad_end, &w.dilation, &w.output_padding}) {
    if ((*v)[0] > kMaxWindow || (*v)[1] > kMaxWindow) {
      c.fail("window parameter " + pair(*v) + " exceeds 2^31-1");
    }
  }
  for (std::size_t d = 0; d < 2; ++d) {
    if (pooling && w.kernel[d] < 1) c.fail("pooling kernel must be >= 1, got " + pair(w.kernel));
  }
  for (std::size_t d = 0; d < 2; ++d) {
    if (w.stride[d] < 1) c.fail("stride must be >= 1, got " + pair(w.stride));
    if (w.dilation[d] < 1) c.fail("dilation must be >= 1, got " + pair(w.dilation));
    if (w.pad_begin[d] < 0 || w.pad_end[d] < 0) {
      c.fail("padding must be >= 0, got " + pair(w.pad_begin) + " before and " + pair(w.pad_end) +
             " after");
    }
    if (pooling && (w.pad_begin[d] >= w.kernel[d] || w.pad_end[d] >= w.kernel[d])) {
      c.fail("padding " + pair(w.pad_begin) + " before and " + pair(w.pad_end) +
             " after must be smaller than the pooling kernel " + pair(w.kernel) +
             " (a window would hold only padding)");
    }
  }
  if (w.auto_pad != AutoPadMode::none && (w.pad_begin != std::array<std::int64_t, 2>{0, 0} ||
                                          w.pad_end != std::array<std::int64_t, 2>{0, 0})) {
    c.fail("padding " + pair(w.pad_begin) + " before and " + pair(w.pad_end) +
           " after was given with auto_pad: give one or the other");
  }
  if (w.groups < 1 || w.groups > kMaxWindow) {
    c.fail("groups must be >= 1, got " + std::to_string(w.groups));
  }
  if (pooling && w.groups != 1) c.fail("pooling takes no groups");
  if (!pooling && w.ceil_mode) c.fail("ceil_mode is for pooling");
  if (c.op == OpKind::AvgPool2d && w.dilation != std::array<std::int64_t, 2>{1, 1}) {
    c.fail("avg_pool2d takes no dilation (ONNX AveragePool gained it only in opset 19), got " +
           pair(w.dilation));
  }
}

// Every window of a pooling holds an image element: none may lie in the padding alone (or,
// with ceil_mode, past it: ONNX 1.12's shape rule keeps such a last window, PyTorch drops it).
void check_windows_hold_the_image(const InferCtx& c, const ImageGeom& g) {
  const std::int64_t in[2] = {g.h, g.w}, out[2] = {g.oh, g.ow};
  for (std::size_t d = 0; d < 2; ++d) {
    const Window2d& w = g.win;
    for (std::int64_t o = 0; o < out[d]; ++o) {
      const std::int64_t start = o * w.stride[d] - w.pad_begin[d];
      if (start >= 0 && start < in[d]) continue;
      bool inside = false;
      for (std::int64_t k = 0; k < w.kernel[d] && !inside; ++k) {
        const std::int64_t at = start + k * w.dilation[d];
        inside = at >= 0 && at < in[d];
      }
      if (!inside) {
        c.fail(std::string("window ") + std::to_string(o) +
               (d == 0 ? " of the rows" : " of the columns") + " holds only padding (kernel " +
               pair(w.kernel) + ", stride " + pair(w.stride) + ", padding " + pair(w.pad_begin) +
               " before and " + pair(w.pad_end) + " after" +
               (w.dilation != std::array<std::int64_t, 2>{1, 1} ? ", dilation " + pair(w.dilation)
                                                                : "") +
               (w.ceil_mode ? ", ceil_mode" : "") + ")");
      }
    }
  }
}

// Checks that the window fits the padded image; returns [n, oc, oh, ow].
Shape window_out(const InferCtx& c, const ImageGeom& g) {
  const std::int64_t in[2] = {g.h, g.w};
  for (int d = 0; d < 2; ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (g.win.kernel[i] > kMaxWindow || in[d] > kMaxWindow) {
      c.fail("image or kernel size " + std::to_string(std::max(g.win.kernel[i], in[d])) +
             " exceeds 2^31-1");
    }
    const std::int64_t padded = in[d] + g.win.pad_begin[i] + g.win.pad_end[i];
    if (g.win.extent(d) > padded) {
      c.fail(std::string("the kernel spans ") + std::to_string(g.win.extent(d)) +
             (d == 0 ? " rows" : " columns") + (g.win.dilation[i] > 1 ? " (with dilation)" : "") +
             ", more than the padded input's " + std::to_string(padded) + " (" +
             std::to_string(in[d]) + " + padding " + std::to_string(g.win.pad_begin[i]) + " + " +
             std::to_string(g.win.pad_end[i]) + ")");
    }
  }
  if (g.oh > kMaxWindow || g.ow > kMaxWindow) {
    c.fail("the output image would be " + std::to_string(g.oh) + " x " + std::to_string(g.ow) +
           ", more than 2^31-1 rows or columns");
  }
  return Shape{g.n, g.oc, g.oh, g.ow};
}

// The weights [O, C / groups, KH, KW] of a convolution of x (C channels) in `groups` groups.
void check_grouped_weights(const InferCtx& c, const TensorType& x, const TensorType& w,
                           const std::string& what) {
  if (w.dtype != DType::f32 || w.shape.rank() != 4) {
    c.fail(what + " weights must be float [out_channels, in_channels / groups, KH, KW], got " +
           w.shape.str() + " " + std::string(dtype_name(w.dtype)));
  }
  const std::int64_t groups = window_of(c).groups;
  if (groups < 1) c.fail("groups must be >= 1, got " + std::to_string(groups));
  if (x.shape[1] % groups != 0 || w.shape[0] % groups != 0) {
    c.fail(std::to_string(groups) + " groups must divide the input's " +
           std::to_string(x.shape[1]) + " channels and the weights' " + std::to_string(w.shape[0]) +
           " output channels");
  }
  if (w.shape[1] * groups != x.shape[1]) {
    c.fail("channel mismatch: the input " + x.shape.str() + " has " + std::to_string(x.shape[1]) +
           " channels, the weights " + w.shape.str() + " expect " +
           std::to_string(w.shape[1] * groups) +
           (groups > 1 ? " (" + std::to_string(w.shape[1]) + " per group, " +
                             std::to_string(groups) + " groups)"
                       : std::string()));
  }
}

// conv2d(x, w[, b]) checked from its three types; returns the output shape.
Shape conv_out(const InferCtx& c, const TensorType& x, const TensorType& w, const TensorType* b) {
  need_image(c, x, "conv2d input");
  check_grouped_weights(c, x, w, "conv2d");
  if (b != nullptr && (b->dtype != DType::f32 || b->shape != Shape{w.shape[0]})) {
    c.fail("conv2d bias must be float [" + std::to_string(w.shape[0]) +
           "] (one per output channel), got " + b->shape.str());
  }
  check_window(c, window_of(c), false);  // before any division by a stride
  return window_out(c, conv_geom(x.shape, w.shape, c.attrs));
}

// conv_transpose2d(x [N, C, H, W], w [C, O / groups, KH, KW][, b [O]]): [N, O, OH, OW].
Shape conv_transpose_out(const InferCtx& c, const TensorType& x, const TensorType& w,
                         const TensorType* b) {
  need_image(c, x, "conv_transpose2d input");
  if (w.dtype != DType::f32 || w.shape.rank() != 4) {
    c.fail(
        "conv_transpose2d weights must be float [in_channels, out_channels / groups, KH, KW], "
        "got " +
        w.shape.str() + " " + std::string(dtype_name(w.dtype)));
  }
  const Window2d& win = window_of(c);
  check_window(c, win, false);
  if (win.auto_pad != AutoPadMode::none) {
    c.fail(
        "conv_transpose2d takes explicit padding (ONNX's auto_pad there does not depend on "
        "the input size: the importer turns it into pads)");
  }
  if (w.shape[0] != x.shape[1]) {
    c.fail("channel mismatch: the input " + x.shape.str() + " has " + std::to_string(x.shape[1]) +
           " channels, the weights " + w.shape.str() + " expect " + std::to_string(w.shape[0]));
  }
  if (x.shape[1] % win.groups != 0) {
    c.fail(std::to_string(win.groups) + " groups must divide the input's " +
           std::to_string(x.shape[1]) + " channels");
  }
  const std::int64_t out_c = w.shape[1] * win.groups;
  if (b != nullptr && (b->dtype != DType::f32 || b->shape != Shape{out_c})) {
    c.fail("conv_transpose2d bias must be float [" + std::to_string(out_c) +
           "] (one per output channel), got " + b->shape.str());
  }
  for (std::size_t d = 0; d < 2; ++d) {
    if (win.output_padding[d] < 0 || win.output_padding[d] >= win.stride[d]) {
      c.fail("output_padding " + pair(win.output_padding) +
             " must be >= 0 and smaller than the "
             "stride " +
             pair(win.stride));
    }
  }
  const auto out = detail::conv_transpose_out(x.shape, w.shape, win);
  if (out[0] < 1 || out[1] < 1 || out[0] > kMaxWindow || out[1] > kMaxWindow) {
    c.fail("the output image would be " + std::to_string(out[0]) + " x " + std::to_string(out[1]) +
           " (stride * (in - 1) + output_padding + kernel extent - "
           "padding)");
  }
  return Shape{x.shape[0], out_c, out[0], out[1]};
}

Shape pool_out(const InferCtx& c, const TensorType& x) {
  need_image(c, x, std::string(op_name(c.op)) + " input");
  check_window(c, window_of(c), true);
  const ImageGeom g = pool_geom(x.shape, c.attrs);
  const Shape out = window_out(c, g);
  check_windows_hold_the_image(c, g);
  return out;
}

void need_grad_shape(const InferCtx& c, const TensorType& g, const Shape& want) {
  if (g.dtype != DType::f32 || g.shape != want) {
    c.fail("the incoming gradient must have the forward output's shape " + want.str() + ", got " +
           g.shape.str());
  }
}

TensorType infer_conv(const InferCtx& c) {
  if (c.in.size() < 2 || c.in.size() > 3) {
    c.fail("conv2d takes an input, weights and an optional bias, got " +
           std::to_string(c.in.size()) + " inputs");
  }
  return {conv_out(c, c.in[0], c.in[1], c.in.size() == 3 ? &c.in[2] : nullptr), DType::f32};
}
// fused_conv2d(x, w[, b][, r]): what the inputs are, its ConvEpilogue says; r has the
// convolution's output type.
TensorType infer_fused_conv(const InferCtx& c) {
  const ConvEpilogue& e = c.attrs.get<ConvEpilogue>();
  if (e.has_op && e.op != OpKind::Relu && e.op != OpKind::LeakyRelu && e.op != OpKind::Clip &&
      e.op != OpKind::Sigmoid && e.op != OpKind::Silu && e.op != OpKind::HardSwish) {
    c.fail(
        "fused_conv2d takes relu, leaky_relu, clip, sigmoid, silu or hard_swish as its op, got " +
        std::string(op_name(e.op)));
  }
  const std::size_t want = 2 + (e.bias ? 1 : 0) + (e.accumulate ? 1 : 0);
  if (c.in.size() != want) {
    c.fail("fused_conv2d takes " + std::to_string(want) + " inputs for its epilogue, got " +
           std::to_string(c.in.size()));
  }
  const TensorType t{conv_out(c, c.in[0], c.in[1], e.bias ? &c.in[2] : nullptr), DType::f32};
  if (e.accumulate && c.in.back() != t) {
    c.fail("fused_conv2d: the accumulated input " + c.in.back().shape.str() +
           " must have the convolution's shape " + t.shape.str());
  }
  return t;
}
TensorType infer_conv_transpose(const InferCtx& c) {
  if (c.in.size() < 2 || c.in.size() > 3) {
    c.fail("conv_transpose2d takes an input, weights and an optional bias, got " +
           std::to_string(c.in.size()) + " inputs");
  }
  return {conv_transpose_out(c, c.in[0], c.in[1], c.in.size() == 3 ? &c.in[2] : nullptr),
          DType::f32};
}
TensorType infer_conv_grad_input(const InferCtx& c) {  // (g, w, x)
  need_grad_shape(c, c.in[0], conv_out(c, c.in[2], c.in[1], nullptr));
  return c.in[2];
}
TensorType infer_conv_grad_weight(const InferCtx& c) {  // (g, x, w)
  need_grad_shape(c, c.in[0], conv_out(c, c.in[1], c.in[2], nullptr));
  return c.in[2];
}
TensorType infer_conv_grad_bias(const InferCtx& c) {  // (g)
  need_image(c, c.in[0], "conv2d output gradient");
  return {Shape{c.in[0].shape[1]}, DType::f32};
}
TensorType infer_pool(const InferCtx& c) {
  return {pool_out(c, c.in[0]), DType::f32};
}
TensorType infer_max_pool_grad(const InferCtx& c) {  // (g, x, y)
  const Shape out = pool_out(c, c.in[1]);
  need_grad_shape(c, c.in[0], out);
  if (c.in[2].shape != out) c.fail("max_pool2d output must have shape " + out.str());
  return c.in[1];
}
TensorType infer_avg_pool_grad(const InferCtx& c) {  // (g, x)
  need_grad_shape(c, c.in[0], pool_out(c, c.in[1]));
  return c.in[1];
}

void grad_conv(const GradCtx& c) {
  const Attrs& at = c.attrs;
  const Node x = c.in[0], w = c.in[1], g = c.grad;
  c.add(x, make_op(OpKind::Conv2dGradInput, {g, w, x}, at));
  c.add(w, make_op(OpKind::Conv2dGradWeight, {g, x, w}, at));
  if (c.in.size() == 3) c.add(c.in[2], make_op(OpKind::Conv2dGradBias, {g}, at));
}
// conv_transpose2d(x, w) is the input gradient of conv2d(., w) with the same window: its
// gradient with respect to x is that conv2d of g, and with respect to w the conv2d weight
// gradient with the roles of image and output gradient swapped.
void grad_conv_transpose(const GradCtx& c) {
  const Attrs& at = c.attrs;
  const Node x = c.in[0], w = c.in[1], g = c.grad;
  c.add(x, make_op(OpKind::Conv2d, {g, w}, at));
  c.add(w, make_op(OpKind::Conv2dGradWeight, {x, g, w}, at));
  if (c.in.size() == 3) c.add(c.in[2], make_op(OpKind::Conv2dGradBias, {g}, at));
}
void grad_max_pool(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::MaxPool2dGrad, {c.grad, c.in[0], c.node}, c.attrs));
}
void grad_avg_pool(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::AvgPool2dGrad, {c.grad, c.in[0]}, c.attrs));
}

// Every convolution variant does the forward's multiply-adds: 2 * N*O*OH*OW * C/G*KH*KW,
// from the image (input xi) and weights (input wi) shapes.
Cost conv_flops(const ImageGeom& g, Cost base) {
  base.flops = 2.0 * static_cast<double>(g.n * g.oc * g.oh * g.ow) *
               static_cast<double>(g.c_per_group() * g.win.kernel[0] * g.win.kernel[1]);
  return base;
}
template <int xi, int wi>
Cost conv_cost(std::span<const TensorType> in, const TensorType&, const Attrs& at, Cost base) {
  return conv_flops(conv_geom(in[xi].shape, in[wi].shape, at), base);
}
Cost conv_transpose_cost(std::span<const TensorType> in, const TensorType&, const Attrs& at,
                         Cost base) {
  return conv_flops(conv_transpose_geom(in[0].shape, in[1].shape, at), base);
}

}  // namespace

void register_conv_ops(std::vector<OpDef>& t) {
  // Pooling reads each input element about once per window it is in.
  t.push_back({.kind = OpKind::Conv2d,
               .name = "conv2d",
               .arity = -1,
               .infer = infer_conv,
               .grad = grad_conv,
               .heavy = true,
               .cost = conv_cost<0, 1>});
  // Made after autodiff: no gradient. May write over its residual (the last input; index 2
  // or 3 with a bias, whose type never matches the output's).
  t.push_back({.kind = OpKind::FusedConv2d,
               .name = "fused_conv2d",
               .arity = -1,
               .inplace = 0b1100u,
               .infer = infer_fused_conv,
               .heavy = true,
               .cost = conv_cost<0, 1>});
  t.push_back({.kind = OpKind::Conv2dGradInput,  // (g, w, x)
               .name = "conv2d_grad_input",
               .arity = 3,
               .shape_only = 0b100u,
               .infer = infer_conv_grad_input,
               .heavy = true,
               .cost = conv_cost<2, 1>});
  t.push_back({.kind = OpKind::Conv2dGradWeight,  // (g, x, w)
               .name = "conv2d_grad_weight",
               .arity = 3,
               .shape_only = 0b100u,
               .infer = infer_conv_grad_weight,
               .heavy = true,
               .cost = conv_cost<1, 2>});
  t.push_back({.kind = OpKind::Conv2dGradBias,
               .name = "conv2d_grad_bias",
               .arity = 1,
               .infer = infer_conv_grad_bias});
  t.push_back({.kind = OpKind::ConvTranspose2d,
               .name = "conv_transpose2d",
               .arity = -1,
               .infer = infer_conv_transpose,
               .grad = grad_conv_transpose,
               .heavy = true,
               .cost = conv_transpose_cost});
  t.push_back({.kind = OpKind::MaxPool2d,
               .name = "max_pool2d",
               .arity = 1,
               .infer = infer_pool,
               .grad = grad_max_pool,
               .flops_per_elem = 9});
  t.push_back({.kind = OpKind::MaxPool2dGrad,
               .name = "max_pool2d_grad",
               .arity = 3,
               .infer = infer_max_pool_grad,
               .flops_per_elem = 2});
  t.push_back({.kind = OpKind::AvgPool2d,
               .name = "avg_pool2d",
               .arity = 1,
               .infer = infer_pool,
               .grad = grad_avg_pool,
               .flops_per_elem = 9});
  t.push_back({.kind = OpKind::AvgPool2dGrad,
               .name = "avg_pool2d_grad",
               .arity = 2,
               .shape_only = 0b10u,
               .infer = infer_avg_pool_grad,
               .flops_per_elem = 2});
}

}  // namespace detail
}  // namespace hetgraph
