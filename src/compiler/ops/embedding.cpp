// SPDX-License-Identifier: Apache-2.0
// Embedding lookup (gather rows of a table by int32 indices) and its gradient, a scatter-add
// of the incoming rows into a zero table; and its generalisation, ONNX Gather (any axis, any
// index rank, negative indices from the back); ONNX GatherElements and ScatterElements (one
// index per element, indices of the data's rank). The public builders live here, next to the
// ops.
#include "compiler/geometry.hpp"
#include "compiler/graph_impl.hpp"
#include "compiler/ops.hpp"
#include "compiler/ops/builders.hpp"

namespace hetgraph {

Node embedding(Node table, Node indices) {
  return detail::make_op(detail::OpKind::Embedding, {table, indices});
}
Node gather(Node x, Node indices, int axis) {
  detail::Attrs at;
  at.axis = axis;
  return detail::make_op(detail::OpKind::Gather, {x, indices}, at);
}
Node gather_elements(Node x, Node indices, int axis) {
  detail::Attrs at;
  at.axis = axis;
  return detail::make_op(detail::OpKind::GatherElements, {x, indices}, at);
}
Node scatter_elements(Node data, Node indices, Node updates, int axis, ScatterReduction reduction) {
  detail::Attrs at;
  at.axis = axis;
  at.set(detail::ScatterMode{reduction});
  return detail::make_op(detail::OpKind::ScatterElements, {data, indices, updates}, at);
}

namespace detail {

namespace {

// The result shape: the indices' shape with the table's row width appended.
Shape gathered_shape(const InferCtx& c, const TensorType& table, const TensorType& idx) {
  if (table.dtype != DType::f32 || table.shape.rank() != 2) {
    c.fail("the embedding table must be float [rows, dim], got " + table.shape.str() + " " +
           std::string(dtype_name(table.dtype)));
  }
  if (idx.dtype != DType::i32) {
    c.fail("embedding indices must be int32, got " + std::string(dtype_name(idx.dtype)) + " " +
           idx.shape.str());
  }
  if (idx.shape.rank() >= Shape::kMaxRank) {
    c.fail("embedding indices " + idx.shape.str() + " have rank " +
           std::to_string(idx.shape.rank()) + "; the result would exceed rank " +
           std::to_string(Shape::kMaxRank));
  }
  std::vector<std::int64_t> d(idx.shape.dims().begin(), idx.shape.dims().end());
  d.push_back(table.shape[1]);
  return Shape(std::span<const std::int64_t>(d));
}

TensorType infer_embedding(const InferCtx& c) {
  return {gathered_shape(c, c.in[0], c.in[1]), DType::f32};
}

// (g, indices, table): g has the lookup's shape; the result the table's.
TensorType infer_embedding_grad(const InferCtx& c) {
  const Shape want = gathered_shape(c, c.in[2], c.in[1]);
  if (c.in[0].dtype != DType::f32 || c.in[0].shape != want) {
    c.fail("the incoming gradient must have the lookup's shape " + want.str() + ", got " +
           c.in[0].shape.str());
  }
  return c.in[2];
}

// embedding_update(v, g, indices) with EmbeddingStep scale: v + scale * embedding_grad(g,
// indices, v). Made by the fusion pass from an SGD step; its type is the table's.
TensorType infer_embedding_update(const InferCtx& c) {
  const Shape want = gathered_shape(c, c.in[0], c.in[2]);
  const std::int64_t band = gradient_band_begin(c.attrs);
  if (c.in[1].dtype != DType::f32 || !GradientBand::fits(c.in[1].shape, want, band)) {
    c.fail("embedding_update: the incoming gradient must have the lookup's shape " + want.str() +
           " (or hold it from column " + std::to_string(band) + "), got " + c.in[1].shape.str());
  }
  return c.in[0];
}

// embedding_concat(pieces...) with LookupPieces: each lookup piece (table, indices) gives
// [indices..., dim], each value piece its own shape; all have one rank and agree on every dim
// but the last, along which they are concatenated (the concat this node replaced).
TensorType infer_embedding_concat(const InferCtx& c) {
  const LookupPieces& lp = c.attrs.get<LookupPieces>();
  std::vector<Shape> parts;
  std::size_t k = 0;
  for (std::uint8_t l : lp.lookup) {
    if (k + (l != 0 ? 2 : 1) > c.in.size()) c.fail("embedding_concat: fewer inputs than pieces");
    if (l != 0) {
      parts.push_back(gathered_shape(c, c.in[k], c.in[k + 1]));
      k += 2;
    } else {
      if (c.in[k].dtype != DType::f32) c.fail("embedding_concat: value pieces must be float");
      parts.push_back(c.in[k].shape);
      k += 1;
    }
  }
  if (k != c.in.size() || parts.empty()) c.fail("embedding_concat: inputs and pieces differ");
  std::vector<std::int64_t> d(parts[0].dims().begin(), parts[0].dims().end());
  if (d.empty()) c.fail("embedding_concat: pieces must have rank >= 1");
  d.back() = 0;
  for (const Shape& s : parts) {
    bool same = s.rank() == static_cast<int>(d.size());
    for (std::size_t i = 0; same && i + 1 < d.size(); ++i) same = s[static_cast<int>(i)] == d[i];
    if (!same) {
      c.fail("embedding_concat: piece " + s.str() + " does not match " + parts[0].str() +
             " but for the last dim");
    }
    d.back() += s.dim(-1);
  }
  return {Shape(std::span<const std::int64_t>(d)), DType::f32};
}

// Reads only the looked-up rows of each table: one load and one store per output element.
Cost lookups_cost(std::span<const TensorType> in, const TensorType&, const Attrs& at, Cost base) {
  for (const auto& lk : at.get<LookupPieces>().lookups())
    base.bytes -= static_cast<double>(in[lk.first].bytes());
  return base;
}

// gather(x, idx) along axis a: x.shape[:a] + idx.shape + x.shape[a+1:].
Shape gather_shape(const InferCtx& c, const TensorType& x, const TensorType& idx) {
  if (x.shape.rank() == 0) c.fail("gather needs data of rank >= 1, got a scalar");
  const int a = c.norm_axis(c.attrs.axis, x.shape.rank());
  if (idx.dtype != DType::i32) {
    c.fail("gather indices must be int32, got " + std::string(dtype_name(idx.dtype)) + " " +
           idx.shape.str());
  }
  std::vector<std::int64_t> d(x.shape.dims().begin(), x.shape.dims().begin() + a);
  d.insert(d.end(), idx.shape.dims().begin(), idx.shape.dims().end());
  d.insert(d.end(), x.shape.dims().begin() + a + 1, x.shape.dims().end());
  if (d.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    c.fail("gathering " + x.shape.str() + " along axis " + std::to_string(a) + " by indices " +
           idx.shape.str() + " gives rank " + std::to_string(d.size()) + "; tensors have rank " +
           std::to_string(Shape::kMaxRank) + " at most");
  }
  return Shape(std::span<const std::int64_t>(d));
}

TensorType infer_gather(const InferCtx& c) {
  return {gather_shape(c, c.in[0], c.in[1]), c.in[0].dtype};
}

// (g, indices, x): g has the gather's shape; the result x's.
TensorType infer_gather_grad(const InferCtx& c) {
  if (c.in[2].dtype != DType::f32) c.fail("gather's gradient needs float data");
  const Shape want = gather_shape(c, c.in[2], c.in[1]);
  if (c.in[0].dtype != DType::f32 || c.in[0].shape != want) {
    c.fail("the incoming gradient must have the gather's shape " + want.str() + ", got " +
           c.in[0].shape.str());
  }
  return c.in[2];
}

// gather_elements(x, idx) and scatter_elements(x, idx, ...) along the node's axis: idx int32
// of x's rank, no larger than x on any other axis (ONNX does not broadcast them).
void check_elements(const InferCtx& c, const TensorType& x, const TensorType& idx,
                    std::string_view op) {
  if (x.dtype != DType::f32 && x.dtype != DType::i32) {
    c.fail(std::string(op) + " needs float or int32 data, got " + std::string(dtype_name(x.dtype)));
  }
  if (x.shape.rank() == 0) c.fail(std::string(op) + " needs data of rank >= 1, got a scalar");
  const int a = c.norm_axis(c.attrs.axis, x.shape.rank());
  if (idx.dtype != DType::i32) {
    c.fail(std::string(op) + " indices must be int32, got " + std::string(dtype_name(idx.dtype)) +
           " " + idx.shape.str());
  }
  if (idx.shape.rank() != x.shape.rank()) {
    c.fail(std::string(op) + " indices " + idx.shape.str() + " must have the data's rank " +
           std::to_string(x.shape.rank()) + " (data " + x.shape.str() + ")");
  }
  for (int d = 0; d < x.shape.rank(); ++d) {
    if (d != a && idx.shape[d] > x.shape[d]) {
      c.fail(std::string(op) + " indices " + idx.shape.str() + " are larger than the data " +
             x.shape.str() + " on axis " + std::to_string(d) + " (only axis " + std::to_string(a) +
             " may differ freely)");
    }
  }
}

TensorType infer_gather_elements(const InferCtx& c) {
  check_elements(c, c.in[0], c.in[1], "gather_elements");
  return {c.in[1].shape, c.in[0].dtype};
}

// (g, indices, x): g has the indices' shape; the result x's.
TensorType infer_gather_elements_grad(const InferCtx& c) {
  if (c.in[2].dtype != DType::f32) c.fail("gather_elements' gradient needs float data");
  check_elements(c, c.in[2], c.in[1], "gather_elements");
  if (c.in[0].dtype != DType::f32 || c.in[0].shape != c.in[1].shape) {
    c.fail("the incoming gradient must have the indices' shape " + c.in[1].shape.str() + ", got " +
           c.in[0].shape.str());
  }
  return c.in[2];
}

// (data, indices, updates): updates have the indices' shape and the data's type.
TensorType infer_scatter_elements(const InferCtx& c) {
  check_elements(c, c.in[0], c.in[1], "scatter_elements");
  if (c.in[2].shape != c.in[1].shape || c.in[2].dtype != c.in[0].dtype) {
    c.fail("scatter_elements updates must have the indices' shape " + c.in[1].shape.str() +
           " and the data's type " + std::string(dtype_name(c.in[0].dtype)) + ", got " +
           c.in[2].shape.str() + " " + std::string(dtype_name(c.in[2].dtype)));
  }
  (void)c.attrs.get<ScatterMode>();
  return c.in[0];
}

void grad_gather_elements(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::GatherElementsGrad, {c.grad, c.in[1], c.in[0]}, c.attrs));
}

// Each update receives the gradient of the element it lands on (a gather); data keeps the
// gradient where it survives: everywhere with add, outside the written elements with none
// (the gradient with zeros scattered over them). A product's factors depend on the other
// updates landing on the same element: mul is not differentiated.
void grad_scatter_elements(const GradCtx& c) {
  const ScatterReduction mode = c.attrs.get<ScatterMode>().reduction;
  if (mode == ScatterReduction::mul) {
    c.not_differentiable(0, "scatter_elements with reduction mul is not differentiable");
    c.not_differentiable(2, "scatter_elements with reduction mul is not differentiable");
    return;
  }
  Attrs at;
  at.axis = c.attrs.axis;
  c.add(c.in[2], make_op(OpKind::GatherElements, {c.grad, c.in[1]}, at));
  if (mode == ScatterReduction::add) {
    c.add(c.in[0], c.grad);
    return;
  }
  const Node zeros =
      expand(scalar_constant(*detail::graph_of(c.node), 0.0f), c.in[2], kAllAxes, false, false);
  c.add(c.in[0], make_op(OpKind::ScatterElements, {c.grad, c.in[1], zeros}, c.attrs));
}

// The indices are int32 data: like every int, they carry no gradient.
void grad_gather(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::GatherGrad, {c.grad, c.in[1], c.in[0]}, c.attrs));
}

void grad_embedding(const GradCtx& c) {
  c.add(c.in[0], make_op(OpKind::EmbeddingGrad, {c.grad, c.in[1], c.in[0]}));
  c.not_differentiable(1, "indices of embedding are int32 data, not differentiable");
}

// check_indices(indices, like): made by commit_writes before the commit point for a writer
// whose indices are computed, so that a bad one fails the run before any variable changes.
// Its one-element output is never read.
TensorType infer_check_indices(const InferCtx& c) {
  if (c.in[0].dtype != DType::i32) c.fail("check_indices: indices must be int32");
  if (c.in[1].shape.rank() == 0) c.fail("check_indices: the bound needs a dim 0");
  return {Shape{1}, DType::f32};
}

// A lookup reads only the rows it gathers, not its whole table: about one load and one store
// per output element, plus the indices.
Cost lookup_cost(std::span<const TensorType> in, const TensorType&, const Attrs&, Cost base) {
  base.bytes -= static_cast<double>(in[0].bytes());
  return base;
}

// Reads the indices once.
Cost check_cost(std::span<const TensorType> in, const TensorType&, const Attrs&, Cost base) {
  base.flops = static_cast<double>(in[0].shape.numel());
  return base;
}

}  // namespace

// NOLINTNEXTLINE(readability-function-size): a table: one row per op
void register_embedding_ops(std::vector<OpDef>& t) {
  // Indices pick rows of the table: each must lie in [0, rows).
  t.push_back({.kind = OpKind::Embedding,
               .name = "embedding",
               .arity = 2,
               .infer = infer_embedding,
               .grad = grad_embedding,
               .heavy = true,
               .flops_per_elem = 0.5f,
               .cost = lookup_cost,
               .index = {.input = 1, .bound_input = 0, .bound_dim = 0, .what = "index"}});
  t.push_back({.kind = OpKind::EmbeddingGrad,
               .name = "embedding_grad",
               .arity = 3,
               .shape_only = 0b100u,
               .infer = infer_embedding_grad,
               .heavy = true,
               .flops_per_elem = 0.5f,
               .index = {.input = 1, .bound_input = 2, .bound_dim = 0, .what = "index"}});
  // Gather indices lie in [-n, n) for the gathered axis' size n.
  constexpr IndexInput kGatherIdx{
      .input = 1, .bound_input = 0, .what = "index", .axis_dim = true, .wraps = true};
  constexpr IndexInput kGatherGradIdx{
      .input = 1, .bound_input = 2, .what = "index", .axis_dim = true, .wraps = true};
  t.push_back({.kind = OpKind::Gather,
               .name = "gather",
               .arity = 2,
               .infer = infer_gather,
               .grad = grad_gather,
               .heavy = true,
               .flops_per_elem = 0.5f,
               .cost = lookup_cost,
               .index = kGatherIdx,
               .onnx = {"Gather", OnnxForm::Attr::axis}});
  t.push_back({.kind = OpKind::GatherGrad,
               .name = "gather_grad",
               .arity = 3,
               .shape_only = 0b100u,
               .infer = infer_gather_grad,
               .heavy = true,
               .flops_per_elem = 0.5f,
               .index = kGatherGradIdx});
  // gather_elements and scatter_elements: one index per element, in [-n, n) for the size n
  // of the data's axis.
  constexpr IndexInput kElementsGradIdx{
      .input = 1, .bound_input = 2, .what = "index", .axis_dim = true, .wraps = true};
  t.push_back({.kind = OpKind::GatherElements,
               .name = "gather_elements",
               .arity = 2,
               .infer = infer_gather_elements,
               .grad = grad_gather_elements,
               .heavy = true,
               .flops_per_elem = 0.5f,
               .cost = lookup_cost,
               .index = kGatherIdx,
               .onnx = {"GatherElements", OnnxForm::Attr::axis}});
  t.push_back({.kind = OpKind::GatherElementsGrad,
               .name = "gather_elements_grad",
               .arity = 3,
               .shape_only = 0b100u,
               .infer = infer_gather_elements_grad,
               .heavy = true,
               .flops_per_elem = 0.5f,
               .index = kElementsGradIdx});
  // A copy of the data with the updates applied: it may take the data's buffer.
  t.push_back({.kind = OpKind::ScatterElements,
               .name = "scatter_elements",
               .arity = 3,
               .inplace = 0b1u,
               .infer = infer_scatter_elements,
               .grad = grad_scatter_elements,
               .flops_per_elem = 0.5f,
               .index = kGatherIdx});
  t.push_back({.kind = OpKind::CheckIndices,
               .name = "check_indices",
               .arity = 2,
               .shape_only = 0b10u,
               .infer = infer_check_indices,
               .flops_per_elem = 0.0f,
               .cost = check_cost,
               .index = {.input = 0, .bound_input = 1, .bound_dim = 0, .what = "index"}});
  // Its indices (one input per lookup piece, LookupPieces::lookups) are checked by the kernels
  // and, where fed, before the run (lookup_index_inputs): IndexInput names one input only.
  t.push_back({.kind = OpKind::EmbeddingConcat,
               .name = "embedding_concat",
               .arity = -1,
               .infer = infer_embedding_concat,
               .heavy = true,
               .flops_per_elem = 0.5f,
               .cost = lookups_cost,
               .index = {.what = "index"}});
  t.push_back({.kind = OpKind::EmbeddingUpdate,
               .name = "embedding_update",
               .arity = 3,
               .inplace = 0b1u,
               .infer = infer_embedding_update,
               .flops_per_elem = 0.0f,
               .index = {.input = 2, .bound_input = 0, .bound_dim = 0, .what = "index"}});
}

}  // namespace detail
}  // namespace hetgraph
