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

detail::Attrs conv_attrs(const Conv2dOptions& o) {
  Window2d w;
  w.stride = wide(o.stride);
  w.pad_begin = wide(o.padding);
  w.pad_end = end_pad(o.padding, o.padding_end);
  w.dilation = wide(o.dilation);
  detail::Attrs at;
  at.set(w);
  return at;
}

detail::Attrs pool_attrs(const Pool2dOptions& o) {
  Window2d w;
  w.kernel = wide(o.kernel);
  w.stride = {o.stride[0] == 0 ? o.kernel[0] : o.stride[0],
              o.stride[1] == 0 ? o.kernel[1] : o.stride[1]};
  w.pad_begin = wide(o.padding);
  w.pad_end = end_pad(o.padding, o.padding_end);
  w.count_include_pad = o.count_include_pad;
  detail::Attrs at;
  at.set(w);
  return at;
}

}  // namespace

Node conv2d(Node x, Node weights, Conv2dOptions options) {
  return detail::make_op(detail::OpKind::Conv2d, {x, weights}, conv_attrs(options));
}
Node conv2d(Node x, Node weights, Node bias, Conv2dOptions options) {
  return detail::make_op(detail::OpKind::Conv2d, {x, weights, bias}, conv_attrs(options));
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
  if (!c.attrs.has<Window2d>()) c.fail("window attributes are missing");
  return c.attrs.get<Window2d>();
}

// Window sizes, strides, paddings and dilations, and image sizes, fit in 31 bits: the
// kernels of every platform index with int.
constexpr std::int64_t kMaxWindow = std::numeric_limits<std::int32_t>::max();

void check_window(const InferCtx& c, const Window2d& w, bool pooling) {
  for (const auto* v : {&w.kernel, &w.stride, &w.pad_begin, &w.pad_end, &w.dilation}) {
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

// conv2d(x, w[, b]) checked from its three types; returns the output shape.
Shape conv_out(const InferCtx& c, const TensorType& x, const TensorType& w, const TensorType* b) {
  need_image(c, x, "conv2d input");
  if (w.dtype != DType::f32 || w.shape.rank() != 4) {
    c.fail("conv2d weights must be float [out_channels, in_channels, KH, KW], got " +
           w.shape.str() + " " + std::string(dtype_name(w.dtype)));
  }
  if (w.shape[1] != x.shape[1]) {
    c.fail("channel mismatch: the input " + x.shape.str() + " has " + std::to_string(x.shape[1]) +
           " channels, the weights " + w.shape.str() + " expect " + std::to_string(w.shape[1]));
  }
  if (b != nullptr && (b->dtype != DType::f32 || b->shape != Shape{w.shape[0]})) {
    c.fail("conv2d bias must be float [" + std::to_string(w.shape[0]) +
           "] (one per output channel), got " + b->shape.str());
  }
  check_window(c, window_of(c), false);  // before any division by a stride
  return window_out(c, conv_geom(x.shape, w.shape, c.attrs));
}

Shape pool_out(const InferCtx& c, const TensorType& x) {
  need_image(c, x, std::string(op_name(c.op)) + " input");
  check_window(c, window_of(c), true);
  return window_out(c, pool_geom(x.shape, c.attrs));
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
void grad_max_pool(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::MaxPool2dGrad, {c.grad, c.in[0], c.node}, c.attrs));
}
void grad_avg_pool(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::AvgPool2dGrad, {c.grad, c.in[0]}, c.attrs));
}

// Every convolution variant does the forward's multiply-adds: 2 * N*O*OH*OW * C*KH*KW, from
// the image (input xi) and weights (input wi) shapes.
template <int xi, int wi>
Cost conv_cost(std::span<const TensorType> in, const TensorType&, const Attrs& at, Cost base) {
  const ImageGeom g = conv_geom(in[xi].shape, in[wi].shape, at);
  base.flops = 2.0 * static_cast<double>(g.n * g.oc * g.oh * g.ow) *
               static_cast<double>(g.c * g.win.kernel[0] * g.win.kernel[1]);
  return base;
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
