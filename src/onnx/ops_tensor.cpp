// SPDX-License-Identifier: Apache-2.0
// ONNX layout and data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
// Split, Slice, Gather, Compress, GatherElements, ScatterElements (and Scatter), GatherND,
// ScatterND, Expand, Tile, Pad, the value ops Constant, Shape, Size, Cast, Dropout,
// ArgMax / ArgMin and TopK. Each works on a value known at import (on the host) or on a graph node.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>

#include "compiler/graph_impl.hpp"
#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

// Known and not a trainable initializer: computed on the host now.
bool on_host(const Ctx& c, std::size_t i) {
  return c.known(i) && !c.in(i).initializer;
}

void set_layout(Ctx& c, std::size_t k, std::size_t i, const Dims& out) {
  if (on_host(c, i)) {
    c.set(k, host::with_dims(*c.in(i).konst, out));
  } else if (c.in(i).view || out.size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    c.set(k, view_of(c, i, out));  // through ranks above 4: positions, gathered when needed
  } else {
    c.set(k, c.reshape(c.node(i), out), c.in(i).elem);
  }
}

void reshape_op(Ctx& c) {
  const Dims target = c.version >= 5 ? c.ints(1, "shape") : c.attr_ints("shape");
  const bool allowzero = c.version >= 14 && c.attr_i("allowzero", 0) != 0;
  const Dims in = c.dims(0);
  Dims out = target;
  int infer = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowzero) {
      if (i >= in.size())
        c.fail("shape " + dims_str(target) + " copies dim " + std::to_string(i) + " of " +
               dims_str(in));
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) c.fail("shape " + dims_str(target) + " has two -1 dims");
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      c.fail("shape " + dims_str(target) + " has a negative dim");
    }
  }
  Dims fixed;
  for (std::int64_t v : out) {
    if (v != -1) fixed.push_back(v);
  }
  known = numel(fixed);  // saturating: a damaged shape cannot wrap around to a match
  if (infer >= 0) {
    if (known == 0 || numel(in) % known != 0)
      c.fail("cannot reshape " + dims_str(in) + " to " + dims_str(target));
    out[static_cast<std::size_t>(infer)] = numel(in) / known;
  }
  if (numel(out) != numel(in)) c.fail("cannot reshape " + dims_str(in) + " to " + dims_str(target));
  set_layout(c, 0, 0, out);
}

void flatten(Ctx& c) {
  const Dims d = c.dims(0);
  const auto r = static_cast<std::int64_t>(d.size());
  std::int64_t axis = c.attr_i("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) c.fail("axis " + std::to_string(c.attr_i("axis", 1)) + " out of range");
  const std::int64_t rows = numel(Dims(d.begin(), d.begin() + axis));
  set_layout(c, 0, 0, {rows, numel(d) / std::max<std::int64_t>(rows, 1)});
}

Dims axes_input(Ctx& c, std::size_t input) {
  if (c.version >= 13) return c.has(input) ? c.ints(input, "axes") : Dims{};
  return c.attr_ints("axes");
}

void squeeze(Ctx& c) {
  const Dims d = c.dims(0);
  const Dims axes = axes_input(c, 1);
  std::vector<bool> drop(d.size(), false);
  if (axes.empty()) {
    for (std::size_t i = 0; i < d.size(); ++i) drop[i] = d[i] == 1;
  }
  for (std::int64_t a : axes) {
    const int k = c.axis(a, static_cast<int>(d.size()));
    if (d[static_cast<std::size_t>(k)] != 1)
      c.fail("cannot squeeze dim " + std::to_string(k) + " of " + dims_str(d));
    drop[static_cast<std::size_t>(k)] = true;
  }
  Dims out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (!drop[i]) out.push_back(d[i]);
  }
  set_layout(c, 0, 0, out);
}

void unsqueeze(Ctx& c) {
  const Dims d = c.dims(0);
  const Dims axes = axes_input(c, 1);
  const int r = static_cast<int>(d.size() + axes.size());
  std::vector<bool> ins(static_cast<std::size_t>(r), false);
  for (std::int64_t a : axes) {
    const int k = c.axis(a, r);
    if (ins[static_cast<std::size_t>(k)]) c.fail("axis " + std::to_string(a) + " given twice");
    ins[static_cast<std::size_t>(k)] = true;
  }
  Dims out;
  std::size_t j = 0;
  for (int i = 0; i < r; ++i) out.push_back(ins[static_cast<std::size_t>(i)] ? 1 : d[j++]);
  set_layout(c, 0, 0, out);
}

void transpose_op(Ctx& c) {
  const Dims d = c.dims(0);
  Dims perm = c.attr_ints("perm");
  if (perm.empty()) {
    perm.resize(d.size());
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  if (perm.size() != d.size())
    c.fail("perm " + dims_str(perm) + " does not fit rank " + std::to_string(d.size()));
  std::vector<bool> seen(d.size(), false);
  for (auto& p : perm) {
    p = c.axis(p, static_cast<int>(d.size()));
    if (seen[static_cast<std::size_t>(p)])
      c.fail("perm " + dims_str(perm) + " is not a permutation");
    seen[static_cast<std::size_t>(p)] = true;
  }
  if (on_host(c, 0)) {
    c.set(0, host::transpose(*c.in(0).konst, perm));
    return;
  }
  if (c.in(0).view) {  // a layout chain through ranks above 4: its positions move
    Value r = c.in(0);
    r.view = std::make_shared<const ir::Tensor>(host::transpose(*r.view, perm));
    c.set(0, r);
    return;
  }
  c.set(0, transpose(c.node(0), std::vector<int>(perm.begin(), perm.end())), c.in(0).elem);
}

void concat_op(Ctx& c) {
  const int r = c.rank(0);
  const int axis = c.axis(c.attr_i("axis", c.version < 4 ? 1 : 0), r);
  bool host_all = true;
  for (std::size_t i = 0; i < c.inputs(); ++i) host_all = host_all && on_host(c, i);
  if (host_all) {
    std::vector<const ir::Tensor*> ts;
    for (std::size_t i = 0; i < c.inputs(); ++i) ts.push_back(c.in(i).konst.get());
    for (const ir::Tensor* t : ts) {
      if (t->dims.size() != ts[0]->dims.size()) c.fail("inputs of different ranks");
      if (t->elem != ts[0]->elem) c.fail("inputs of different element types");
      for (std::size_t d = 0; d < t->dims.size(); ++d) {
        if (static_cast<int>(d) != axis && t->dims[d] != ts[0]->dims[d])
          c.fail("inputs differ outside the axis");
      }
    }
    c.set(0, host::concat(ts, axis));
    return;
  }
  std::vector<Node> parts;
  for (std::size_t i = 0; i < c.inputs(); ++i) {
    if (numel(c.dims(i)) == 0) continue;  // empty inputs add nothing
    parts.push_back(c.node(i));
  }
  c.set(0, parts.size() == 1 ? parts[0] : concat(std::span<const Node>(parts), axis), c.in(0).elem);
}

// Output pieces of one axis, at [begin, begin + size).
void split_into(Ctx& c, int axis, const Dims& sizes) {
  const Dims d = c.dims(0);
  std::int64_t at = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::int64_t s = sizes[k];
    if (c.wants(k)) {
      if (s == 0) {
        Dims piece = d;
        piece[static_cast<std::size_t>(axis)] = 0;
        c.set(k, host::empty(c.in(0).elem, std::move(piece)));
      } else if (on_host(c, 0)) {
        Dims start(d.size(), 0), step(d.size(), 1), count = d;
        start[static_cast<std::size_t>(axis)] = at;
        count[static_cast<std::size_t>(axis)] = s;
        c.set(k, host::slice(*c.in(0).konst, start, step, count));
      } else {
        Node x = c.node(0);
        c.set(k, s == d[static_cast<std::size_t>(axis)] ? x : slice(x, axis, at, at + s),
              c.in(0).elem);
      }
    }
    at += s;
  }
}

void split(Ctx& c) {
  const Dims d = c.dims(0);
  const int axis = c.axis(c.attr_i("axis", 0), static_cast<int>(d.size()));
  const std::int64_t total = d[static_cast<std::size_t>(axis)];
  Dims sizes = c.version >= 13 ? (c.has(1) ? c.ints(1, "split") : Dims{}) : c.attr_ints("split");
  if (c.version < 13 && c.has(1)) sizes = c.ints(1, "split");  // Split-2 took it as input 1
  if (sizes.empty()) {
    const auto n = static_cast<std::int64_t>(c.outputs());
    if (total % n != 0)
      c.fail("cannot split " + std::to_string(total) + " into " + std::to_string(n) +
             " equal parts");
    sizes.assign(static_cast<std::size_t>(n), total / n);
  }
  if (std::any_of(sizes.begin(), sizes.end(), [&](std::int64_t s) { return s < 0 || s > total; })) {
    c.fail("split sizes " + dims_str(sizes) + " out of range");
  }
  if (sizes.size() != c.outputs() ||
      std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != total) {
    c.fail("split sizes " + dims_str(sizes) + " do not cover dim " + std::to_string(axis) + " of " +
           dims_str(d));
  }
  split_into(c, axis, sizes);
}

void slice_op(Ctx& c) {
  const Dims d = c.dims(0);
  const int r = static_cast<int>(d.size());
  Dims starts, ends, axes, steps;
  if (c.version < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  } else {
    starts = c.ints(1, "starts");
    ends = c.ints(2, "ends");
    if (c.has(3)) axes = c.ints(3, "axes");
    if (c.has(4)) steps = c.ints(4, "steps");
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    c.fail("starts, ends, axes and steps differ in length");
  }
  Dims start(d.size(), 0), step(d.size(), 1), count = d;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const auto a = static_cast<std::size_t>(c.axis(axes[k], r));
    const std::int64_t dim = d[a];
    if (steps[k] == 0) c.fail("slice step 0");
    // A step beyond the dim takes one element either way (and cannot overflow below).
    const std::int64_t st = std::clamp<std::int64_t>(steps[k], -dim - 1, dim + 1);
    std::int64_t b = starts[k], e = ends[k];
    if (dim == 0) {
      count[a] = 0;
      continue;
    }
    // Clamped first: starts and ends may be INT64_MIN / INT64_MAX ("to the end").
    b = std::clamp<std::int64_t>(b, -dim - 1, dim + 1);
    e = std::clamp<std::int64_t>(e, -dim - 1, dim + 1);
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      b = std::clamp<std::int64_t>(b, 0, dim);
      e = std::clamp<std::int64_t>(e, 0, dim);
    } else {
      b = std::clamp<std::int64_t>(b, 0, dim - 1);
      e = std::clamp<std::int64_t>(e, -1, dim - 1);
    }
    start[a] = b;
    step[a] = st;
    count[a] = std::max<std::int64_t>(0, st > 0 ? (e - b + st - 1) / st : (b - e - st - 1) / -st);
  }
  if (on_host(c, 0)) {  // an empty one too: shape computations slice empty dim lists
    c.set(0, host::slice(*c.in(0).konst, start, step, count));
    return;
  }
  if (numel(count) == 0) {
    c.set(0, host::empty(c.in(0).elem, count));
    return;
  }
  Node x = c.node(0);
  int sliced = 0, axis = 0;
  bool unit_steps = true;
  for (std::size_t a = 0; a < d.size(); ++a) {
    if (count[a] == d[a] && step[a] == 1) continue;
    ++sliced;
    axis = static_cast<int>(a);
    unit_steps = unit_steps && step[a] == 1;
  }
  if (sliced == 0) {
    c.alias(0, 0);
  } else if (sliced == 1 && unit_steps) {  // one band of one axis: the plain slice
    c.set(0, slice(x, axis, start[axis], start[axis] + count[axis]), c.in(0).elem);
  } else {  // steps, several axes: one strided copy, ONNX's own starts / ends / steps
    c.set(0, strided_slice(x, starts, ends, axes, steps), c.in(0).elem);
  }
}

// Gather along `axis`: an embedding lookup with that axis moved to the front.
void gather(Ctx& c) {
  const Dims d = c.dims(0);
  const int r = static_cast<int>(d.size());
  const int axis = c.axis(c.attr_i("axis", 0), r);
  const auto a = static_cast<std::size_t>(axis);
  if (!ir::is_integral(c.in(1).elem)) c.fail("indices must be integers");
  const Dims idims = c.dims(1);
  if (c.known(1)) {
    Dims idx = c.in(1).konst->i;
    for (auto& v : idx) {
      if (v < -d[a] || v >= d[a])
        c.fail("index " + std::to_string(v) + " is out of range for dim " + std::to_string(axis) +
               " of " + dims_str(d));
      if (v < 0) v += d[a];
    }
    if (on_host(c, 0)) {
      c.set(0, host::gather(*c.in(0).konst, axis, idx, idims));
      return;
    }
    if (idims.empty()) {  // one index: a slice that drops the axis
      Dims out = d;
      out.erase(out.begin() + axis);
      Node x = c.node(0);
      c.set(0, c.reshape(d[a] == 1 ? x : slice(x, axis, idx[0], idx[0] + 1), out), c.in(0).elem);
      return;
    }
  }
  Node x = c.node(0);
  const std::size_t out_rank = d.size() - 1 + idims.size();
  if (out_rank > static_cast<std::size_t>(Shape::kMaxRank)) {
    c.unsupported("a gather result of rank " + std::to_string(out_rank));
  }
  if (c.known(1)) {
    Dims idx = c.in(1).konst->i;
    for (auto& v : idx) v = v < 0 ? v + d[a] : v;  // range-checked above
    Node indices = c.graph().constant_i32(Shape(std::span<const std::int64_t>(idims)),
                                          std::vector<std::int32_t>(idx.begin(), idx.end()));
    // Rows of a float table by known, non-negative indices: an embedding lookup (its SGD
    // step on the table is the sparse one, for fine-tuning).
    if (axis == 0 && d.size() == 2 && ir::held_as_float(c.in(0).elem)) {
      c.set(0, embedding(x, indices));
      return;
    }
    c.set(0, gather(x, indices, axis), c.in(0).elem);
    return;
  }
  // Indices computed at run time may be negative (from the back, as ONNX allows): gather
  // wraps them.
  c.set(0, gather(x, c.node(1), axis), c.in(0).elem);
}

// Compress: the slices of `axis` (of the flattened input when there is no axis) where the
// condition is true, a gather of their positions. The condition decides the output's shape, so
// it must be known at import.
void compress(Ctx& c) {
  const Dims cond = c.ints(1, "the condition, which decides the output's shape");
  Dims d = c.dims(0);
  const bool flat = !c.has_attr("axis");
  const int axis = flat ? 0 : c.axis(c.attr_i("axis", 0), static_cast<int>(d.size()));
  if (flat) d = {numel(d)};
  const std::int64_t n = d[static_cast<std::size_t>(axis)];
  if (static_cast<std::int64_t>(cond.size()) > n) {
    c.fail("the condition has " + std::to_string(cond.size()) + " values for " + std::to_string(n) +
           " slices");
  }
  std::vector<std::int32_t> keep;
  for (std::size_t i = 0; i < cond.size(); ++i) {
    if (cond[i] != 0) keep.push_back(static_cast<std::int32_t>(i));
  }
  if (keep.empty())
    c.unsupported("the condition keeps nothing; hetgraph tensors have at least one element");
  if (on_host(c, 0)) {
    c.set(0, host::gather(host::with_dims(*c.in(0).konst, d), axis, Dims(keep.begin(), keep.end()),
                          {static_cast<std::int64_t>(keep.size())}));
    return;
  }
  Node x = c.reshape(c.node(0), d);
  const auto count = static_cast<std::int64_t>(keep.size());
  c.set(0, gather(x, c.graph().constant_i32(Shape{count}, std::move(keep)), axis), c.in(0).elem);
}

// The indices of GatherElements / ScatterElements (int64 ones are held as int32): known ones
// are checked against the axis' size now, computed ones by the kernels at run time.
Node element_indices(Ctx& c, int axis) {
  if (!ir::is_integral(c.elem(1))) c.fail("indices must be integers");
  if (c.rank(1) != c.rank(0)) {
    c.fail("indices " + dims_str(c.dims(1)) + " must have the data's rank (data " +
           dims_str(c.dims(0)) + ")");
  }
  if (c.known(1)) {
    const std::int64_t n = c.dims(0)[static_cast<std::size_t>(axis)];
    for (std::int64_t v : c.in(1).konst->i) {
      if (v < -n || v >= n)
        c.fail("index " + std::to_string(v) + " is out of range for dim " + std::to_string(axis) +
               " of " + dims_str(c.dims(0)));
    }
  }
  return c.node(1);
}

int element_axis(Ctx& c) {
  const int r = c.rank(0);
  if (r == 0) c.fail("the data is a scalar: there is no axis to index along");
  if (r > Shape::kMaxRank) c.unsupported("data of rank " + std::to_string(r));
  return c.axis(c.attr_i("axis", 0), r);
}

// GatherElements: one index per output element, along `axis`.
void gather_elements_op(Ctx& c) {
  const int axis = element_axis(c);
  Node idx = element_indices(c, axis);
  c.set(0, gather_elements(c.node(0), idx, axis), c.in(0).elem);
}

// ReverseSequence (opset 10): each batch entry's first sequence_lens[b] steps along the time
// axis reversed, the rest left. A gather_elements along the time axis at positions
// t < len ? len - 1 - t : t, computed from the lengths at run time. The lengths pass a
// check_indices against [0, steps] first: a FeedError naming this node's sequence_lens.
void reverse_sequence(Ctx& c) {
  const Dims d = c.dims(0);
  const int rank = static_cast<int>(d.size());
  if (rank < 2) c.fail("the input must have rank 2 or more, got " + dims_str(d));
  const std::int64_t time = c.attr_i("time_axis", 0), batch = c.attr_i("batch_axis", 1);
  if (!((time == 0 && batch == 1) || (time == 1 && batch == 0))) {
    c.fail("time_axis " + std::to_string(time) + " and batch_axis " + std::to_string(batch) +
           ": they must be 0 and 1, or 1 and 0");
  }
  if (!ir::is_integral(c.elem(1))) c.fail("sequence_lens must be integers");
  const auto t = static_cast<std::size_t>(time), b = static_cast<std::size_t>(batch);
  if (c.dims(1) != Dims{d[b]}) {
    c.fail("sequence_lens " + dims_str(c.dims(1)) + " must have one length per batch entry (" +
           std::to_string(d[b]) + ")");
  }
  Dims along_batch(d.size(), 1);
  along_batch[b] = d[b];
  Node step = iota_along(c, rank, static_cast<int>(time), d[t]);
  // The check's zero added to the lengths keeps it ahead of their use.
  Node checked =
      add(c.node(1), cast(index_check(c, c.node(1), d[t] + 1, "sequence_lens"), DType::i32));
  Node len = c.reshape(checked, along_batch);
  Node one = c.graph().constant_i32(Shape{}, {1});
  Node from = where(less(step, len), sub(sub(len, one), step), step);
  Node y = gather_elements(c.node(0), broadcast_to(c, from, d), static_cast<int>(time));
  c.label(y, "steps");
  c.set(0, y, c.in(0).elem);
}

/// The reduction attribute of ScatterElements and ScatterND (opset 16 on; Scatter, opset 9-10,
/// has none): none, add or mul, else an UnsupportedError.
ScatterReduction scatter_reduction(Ctx& c) {
  const std::string r = c.version >= 16 ? c.attr_s("reduction", "none") : "none";
  if (r == "add") return ScatterReduction::add;
  if (r == "mul") return ScatterReduction::mul;
  if (r != "none") c.unsupported("reduction '" + r + "' (none, add and mul are supported)");
  return ScatterReduction::none;
}

// ScatterElements (and the older Scatter): reduction from opset 16 (none, add or mul; max and
// min came with opset 18).
void scatter_elements_op(Ctx& c) {
  const int axis = element_axis(c);
  Node idx = element_indices(c, axis);
  if (c.elem(2) != c.elem(0)) c.fail("updates must have the data's element type");
  const ScatterReduction red = scatter_reduction(c);
  c.set(0, scatter_elements(c.node(0), idx, c.node(2), axis, red), c.in(0).elem);
}

// ---- GatherND and ScatterND, composed of gather and scatter_elements
//
// An index tuple (i_0, ..., i_{m-1}) of GatherND / ScatterND picks one row of data seen as
// [rows, rest...]: rows = B * N, where B spans the batch dims and N the m indexed dims after
// them. Its row is batch * N + sum_j norm(i_j) * stride_j. Each component must lie in
// [-dim_j, dim_j) on its own: an out-of-range one could otherwise add up to another valid row
// and read or write the wrong element silently.
struct NdIndex {
  Dims data, idx;
  int b = 0, m = 0;
  std::int64_t batch = 1;   // B: the batch dims' elements
  std::int64_t tuples = 1;  // K: index tuples per batch
  std::int64_t rows = 1;    // N: rows per batch, the indexed dims' elements
  Dims rest;                // data's dims after the indexed ones
  Dims strides;             // rows a step of each component moves by
};

NdIndex nd_index(Ctx& c, std::int64_t batch_dims) {
  NdIndex g;
  g.data = c.dims(0);
  g.idx = c.dims(1);
  if (!ir::is_integral(c.elem(1))) c.fail("indices must be integers");
  const auto r = static_cast<std::int64_t>(g.data.size());
  const auto q = static_cast<std::int64_t>(g.idx.size());
  if (q < 1) c.fail("indices must have rank 1 or more, got a scalar");
  if (batch_dims < 0 || batch_dims >= std::min(r, q)) {
    c.fail("batch_dims " + std::to_string(batch_dims) + " must be at least 0 and below the ranks " +
           "of data " + dims_str(g.data) + " and indices " + dims_str(g.idx));
  }
  g.b = static_cast<int>(batch_dims);
  const std::int64_t m = g.idx.back();
  if (m < 1 || m > r - g.b) {
    c.fail("the indices " + dims_str(g.idx) + " hold tuples of " + std::to_string(m) +
           " components; data " + dims_str(g.data) + " takes 1 to " + std::to_string(r - g.b) +
           (g.b ? " after its " + std::to_string(g.b) + " batch dims" : ""));
  }
  g.m = static_cast<int>(m);
  const auto b = static_cast<std::size_t>(g.b);
  for (std::size_t i = 0; i < b; ++i) {
    if (g.idx[i] != g.data[i])
      c.fail("the batch dims of the indices " + dims_str(g.idx) + " differ from data's " +
             dims_str(g.data));
  }
  // (Counts of whole prefixes, which numel saturates, before any product of them.)
  if (numel(g.data) == 0) c.unsupported("empty data " + dims_str(g.data));
  if (numel(Dims(g.idx.begin(), g.idx.end() - 1)) == 0)
    c.unsupported("no index tuples: the result would be empty");
  if (numel(Dims(g.data.begin(), g.data.begin() + g.b + g.m)) > INT32_MAX)
    c.unsupported("data " + dims_str(g.data) + " has more than 2^31 rows to index");
  g.batch = numel(Dims(g.data.begin(), g.data.begin() + g.b));
  g.rows = numel(Dims(g.data.begin() + g.b, g.data.begin() + g.b + g.m));
  g.tuples = numel(Dims(g.idx.begin() + g.b, g.idx.end() - 1));
  g.rest.assign(g.data.begin() + g.b + g.m, g.data.end());
  g.strides.assign(static_cast<std::size_t>(g.m), 1);
  for (std::size_t j = static_cast<std::size_t>(g.m) - 1; j > 0; --j)
    g.strides[j - 1] = g.strides[j] * g.data[b + j];
  return g;
}

// Known indices: checked now (the error names the tuple and the component) and turned into
// rows.
std::vector<std::int32_t> known_nd_rows(Ctx& c, const NdIndex& g) {
  const std::vector<std::int64_t>& v = c.in(1).konst->i;
  std::vector<std::int32_t> rows = c.host<std::int32_t>(g.batch * g.tuples);
  for (std::size_t t = 0; t < rows.size(); ++t) {
    std::int64_t row = static_cast<std::int64_t>(t) / g.tuples * g.rows;
    for (std::size_t j = 0; j < static_cast<std::size_t>(g.m); ++j) {
      std::int64_t i = v[t * static_cast<std::size_t>(g.m) + j];
      const std::int64_t dim = g.data[static_cast<std::size_t>(g.b) + j];
      if (i < -dim || i >= dim) {
        c.fail("index " + std::to_string(i) + " (component " + std::to_string(j) +
               " of index tuple " + std::to_string(t) + ") is out of range for dim " +
               std::to_string(static_cast<std::size_t>(g.b) + j) + " of data " + dims_str(g.data));
      }
      row += (i < 0 ? i + dim : i) * g.strides[j];
    }
    rows[t] = static_cast<std::int32_t>(row);
  }
  return rows;
}

// Each tuple's row, int32 [B * K, width] (the row repeated `width` times, as
// scatter_elements' indices want). Computed indices: each component goes through a gather from
// the constant [0, stride_j, 2 stride_j, ...] of dim_j entries, which checks it against
// [-dim_j, dim_j) at run time (a FeedError naming that gather) and wraps a negative one.
Node nd_rows(Ctx& c, const NdIndex& g, std::int64_t width) {
  const std::int64_t p = g.batch * g.tuples;
  if (c.known(1)) {
    const std::vector<std::int32_t> rows = known_nd_rows(c, g);
    c.host_check(p * width);
    std::vector<std::int32_t> wide;
    wide.reserve(static_cast<std::size_t>(p * width));
    for (std::int32_t r : rows) wide.insert(wide.end(), static_cast<std::size_t>(width), r);
    return c.graph().constant_i32(Shape{p, width}, std::move(wide));
  }
  const Node idx = c.reshape(c.node(1), {p, g.m});
  Node rows;
  for (int j = 0; j < g.m; ++j) {
    const std::int64_t dim = g.data[static_cast<std::size_t>(g.b + j)];
    std::vector<std::int32_t> table = c.host<std::int32_t>(dim);
    for (std::int64_t k = 0; k < dim; ++k)
      table[static_cast<std::size_t>(k)] =
          static_cast<std::int32_t>(k * g.strides[static_cast<std::size_t>(j)]);
    const Node comp = g.m == 1 ? idx : slice(idx, 1, j, j + 1);
    const Node row = gather(c.graph().constant_i32(Shape{dim}, std::move(table)), comp, 0);
    c.label(row, "indices[..., " + std::to_string(j) + "]");
    rows = j == 0 ? row : add(rows, row);
  }
  if (g.b > 0) {  // the tuple's batch: its first row
    std::vector<std::int32_t> first = c.host<std::int32_t>(p);
    for (std::int64_t t = 0; t < p; ++t)
      first[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(t / g.tuples * g.rows);
    rows = add(rows, c.graph().constant_i32(Shape{p, 1}, std::move(first)));
  }
  return width == 1 ? rows : broadcast_to(c, rows, {p, width});
}

// GatherND (batch_dims from opset 12): rows of data seen as [B * N, rest...], one per index
// tuple, by a gather of their numbers.
void gather_nd(Ctx& c) {
  const NdIndex g = nd_index(c, c.version >= 12 ? c.attr_i("batch_dims", 0) : 0);
  Dims out(g.idx.begin(), g.idx.end() - 1);
  out.insert(out.end(), g.rest.begin(), g.rest.end());
  Dims table{g.batch * g.rows};
  table.insert(table.end(), g.rest.begin(), g.rest.end());
  const std::int64_t p = g.batch * g.tuples;
  if (on_host(c, 0) && c.known(1)) {
    const std::vector<std::int32_t> rows = known_nd_rows(c, g);
    const ir::Tensor t = host::with_dims(*c.in(0).konst, table);
    c.set(0, host::with_dims(host::gather(t, 0, Dims(rows.begin(), rows.end()), {p}), out));
    return;
  }
  if (out.size() > static_cast<std::size_t>(Shape::kMaxRank))
    c.unsupported("a result of rank " + std::to_string(out.size()) + " " + dims_str(out));
  const Node x = c.reshape(c.node(0), table);
  const Node rows = c.reshape(nd_rows(c, g, 1), {p});
  c.set(0, c.reshape(gather(x, rows, 0), out), c.in(0).elem);
}

// ScatterND (reduction from opset 16: none, add or mul): data seen as [N, rest] and each
// tuple's update row scattered along axis 0 (scatter_elements with the row number repeated
// across the row). Tuples naming one row apply in their order: with none the last one wins
// (ONNX leaves that undefined).
void scatter_nd(Ctx& c) {
  const NdIndex g = nd_index(c, 0);
  Dims want(g.idx.begin(), g.idx.end() - 1);
  want.insert(want.end(), g.rest.begin(), g.rest.end());
  if (c.dims(2) != want) {
    c.fail("updates " + dims_str(c.dims(2)) + " must be " + dims_str(want) + " (indices " +
           dims_str(g.idx) + ", data " + dims_str(g.data) + ")");
  }
  if (c.elem(2) != c.elem(0)) c.fail("updates must have the data's element type");
  const ScatterReduction red = scatter_reduction(c);
  const std::int64_t width = numel(g.rest);
  const Node x = c.reshape(c.node(0), {g.rows, width});
  const Node idx = nd_rows(c, g, width);
  const Node u = c.reshape(c.node(2), {g.tuples, width});
  c.set(0, c.reshape(scatter_elements(x, idx, u, 0, red), g.data), c.in(0).elem);
}

void expand(Ctx& c) {
  const Dims out = broadcast(c.dims(0), c.ints(1, "shape"), c);
  if (on_host(c, 0)) {
    c.set(0, host::broadcast_to(*c.in(0).konst, out));
    return;
  }
  c.set(0, broadcast_to(c, c.node(0), out), c.in(0).elem);
}

void tile(Ctx& c) {
  const Dims d = c.dims(0);
  const Dims reps = c.ints(1, "repeats");
  if (reps.size() != d.size())
    c.fail("repeats " + dims_str(reps) + " do not fit rank " + std::to_string(d.size()));
  if (std::any_of(reps.begin(), reps.end(), [](std::int64_t r) { return r < 0; }))
    c.fail("repeats " + dims_str(reps) + " must not be negative");
  if (std::find(reps.begin(), reps.end(), 0) != reps.end()) {
    Dims out = d;
    for (std::size_t a = 0; a < d.size(); ++a) out[a] *= reps[a];
    c.set(0, host::empty(c.in(0).elem, std::move(out)));
    return;
  }
  if (on_host(c, 0)) {
    ir::Tensor t = *c.in(0).konst;
    for (std::size_t a = 0; a < d.size(); ++a) {
      std::vector<const ir::Tensor*> parts(static_cast<std::size_t>(reps[a]), &t);
      if (reps[a] != 1) t = host::concat(parts, static_cast<int>(a));
    }
    c.set(0, std::move(t));
    return;
  }
  Node x = c.node(0);
  for (std::size_t a = 0; a < d.size(); ++a) {
    if (reps[a] == 1) continue;
    std::vector<Node> parts(static_cast<std::size_t>(reps[a]), x);
    x = concat(std::span<const Node>(parts), static_cast<int>(a));
  }
  c.set(0, x, c.in(0).elem);
}

// Pad, with pads known at import: constant (any value), edge and reflect, axis by axis as
// concatenations of x with constant blocks, repeated edge slices or reversed strided slices;
// negative pads crop first.
void pad(Ctx& c) {
  const Dims d = c.dims(0);
  const std::size_t r = d.size();
  Dims pads;
  float value = 0.0f;
  std::int64_t int_value = 0;  // an integer tensor's (exact, where a float would round)
  if (c.version < 11) {
    pads = c.attr_ints("pads");
    value = c.attr_f("value", 0.0f);
    int_value = static_cast<std::int64_t>(value);
  } else {
    pads = c.ints(1, "pads");
    if (c.has(2)) {
      const ir::Tensor& v = c.known_tensor(2, "constant_value");
      if (ir::is_integral(v.elem) && !v.i.empty()) {
        int_value = v.i[0];
        value = static_cast<float>(v.i[0]);
      } else if (!v.f.empty()) {
        value = v.f[0];
        int_value = static_cast<std::int64_t>(v.f[0]);
      }
    }
  }
  const std::string mode = c.attr_s("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    c.fail("mode '" + mode + "' is not an ONNX value");
  if (pads.size() != 2 * r)
    c.fail(std::to_string(pads.size()) + " pads for an input of rank " + std::to_string(r));
  // Padding moves data: int32 (and int64, held as int32) tensors pad as float ones do.
  const int elem = c.elem(0);
  const bool ints = elem == ir::kInt32 || elem == ir::kInt64;
  Node x = ints ? c.node(0) : c.f32(0);
  for (std::size_t a = 0; a < r; ++a) {
    const std::int64_t b = pads[a], e = pads[a + r];
    const int ax = static_cast<int>(a);
    Dims cur = c.shape(x);
    if (b < 0 || e < 0) {  // crop
      const std::int64_t lo = std::max<std::int64_t>(0, -b);
      const std::int64_t hi = cur[a] - std::max<std::int64_t>(0, -e);
      if (hi <= lo)
        c.unsupported("pads " + dims_str(pads) + " leave axis " + std::to_string(a) + " empty");
      x = slice(x, ax, lo, hi);
      cur = c.shape(x);
    }
    const std::int64_t n = cur[a];
    auto block = [&](std::int64_t p, bool before) {
      if (mode == "constant") {
        Dims bd = cur;
        bd[a] = p;
        if (ints) {
          return c.graph().constant_i32(
              Shape(std::span<const std::int64_t>(bd)),
              c.host<std::int32_t>(numel(bd), static_cast<std::int32_t>(int_value)));
        }
        return c.constant(bd, c.host<float>(numel(bd), value));
      }
      if (mode == "edge") {
        Node edge = before ? slice(x, ax, 0, 1) : slice(x, ax, n - 1, n);
        return p == 1 ? edge : concat(std::vector<Node>(static_cast<std::size_t>(p), edge), ax);
      }
      if (p > n - 1) {
        c.unsupported("reflect padding of " + std::to_string(p) + " on axis " + std::to_string(a) +
                      " of size " + std::to_string(n) + " (at most the size - 1)");
      }
      // before: x[p], x[p-1], ..., x[1]; after: x[n-2], ..., x[n-1-p]
      const std::int64_t start = before ? p : n - 2, end = before ? 0 : n - 2 - p;
      return strided_slice(x, {start}, {end < 0 ? INT64_MIN : end}, {static_cast<std::int64_t>(a)},
                           {-1});
    };
    std::vector<Node> parts;
    if (b > 0) parts.push_back(block(b, true));
    parts.push_back(x);
    if (e > 0) parts.push_back(block(e, false));
    if (parts.size() > 1) x = concat(parts, ax);
  }
  c.set(0, x, elem);
}

// Inference Dropout is the identity; so is one in training mode whose ratio is known to be 0
// (torchvision's Swin exports those). In training mode with a ratio, hetgraph's dropout op:
// elements kept with probability 1 - ratio and scaled by 1 / (1 - ratio), the mask drawn from
// the node's seed (its attribute, or one from its output's name: the same graph gives the
// same masks) and the model's dropout step, which every run advances. The mask output is the
// same draw over ones.
void dropout(Ctx& c) {
  if (c.version >= 12 && c.has(2)) {
    const ir::Tensor& t = c.known_tensor(2, "training_mode");
    if (!t.i.empty() && t.i[0] != 0) {
      float ratio = 0.5f;  // ONNX's default
      if (c.has(1)) {
        const std::vector<float> r = c.floats(1, "ratio");
        if (!r.empty()) ratio = r[0];
      }
      if (!(ratio >= 0.0f && ratio < 1.0f))
        c.fail("ratio " + std::to_string(ratio) + " is outside [0, 1)");
      if (ratio != 0.0f) {
        const std::uint64_t seed = c.has_attr("seed")
                                       ? static_cast<std::uint64_t>(c.attr_i("seed", 0))
                                       : std::hash<std::string>{}(c.n.outputs[0]);
        const Node step = c.dropout_step();
        c.set(0, hetgraph::dropout(c.f32(0), step, ratio, seed));
        if (c.wants(1)) {
          const Dims d = c.dims(0);
          const Node ones = c.constant(d, c.host<float>(numel(d), 1.0f));
          c.set(1, greater(hetgraph::dropout(ones, step, ratio, seed), c.constant(0.0f)),
                ir::kBool);
        }
        return;
      }
    }
  }
  c.alias(0, 0);
  if (c.wants(1)) {  // the mask of an inference dropout keeps everything
    ir::Tensor mask;
    mask.elem = c.version >= 10 ? ir::kBool : c.in(0).elem;
    mask.dims = c.dims(0);
    c.host_check(numel(mask.dims));
    if (ir::is_integral(mask.elem))
      mask.i.assign(static_cast<std::size_t>(numel(mask.dims)), 1);
    else
      mask.f.assign(static_cast<std::size_t>(numel(mask.dims)), 1.0f);
    c.set(1, std::move(mask));
  }
}

void constant(Ctx& c) {
  ir::Tensor t;
  if (const ir::Tensor* v = c.attr_t("value")) {
    t = *v;
  } else if (c.has_attr("value_float")) {
    t.elem = ir::kFloat;
    t.f = {c.attr_f("value_float", 0)};
  } else if (c.has_attr("value_floats")) {
    t.elem = ir::kFloat;
    t.f = c.attr_floats("value_floats");
    t.dims = {static_cast<std::int64_t>(t.f.size())};
  } else if (c.has_attr("value_int")) {
    t.elem = ir::kInt64;
    t.i = {c.attr_i("value_int", 0)};
  } else if (c.has_attr("value_ints")) {
    t = host::scalar_ints(c.attr_ints("value_ints"));
  } else {
    c.unsupported("constants other than tensors, floats and ints (strings, sparse tensors)");
  }
  if (!ir::is_integral(t.elem) && !ir::held_as_float(t.elem)) {
    c.unsupported(std::string("constants of element type ") + ir::elem_name(t.elem));
  }
  c.set(0, std::move(t));
}

void shape_op(Ctx& c) {
  const Dims d = c.dims(0);
  const auto r = static_cast<std::int64_t>(d.size());
  std::int64_t b = c.attr_i("start", 0), e = c.attr_i("end", r);
  if (b < 0) b += r;
  if (e < 0) e += r;
  b = std::clamp<std::int64_t>(b, 0, r);
  e = std::clamp<std::int64_t>(e, b, r);
  c.set(0, host::scalar_ints(Dims(d.begin() + b, d.begin() + e)));
}

void size_op(Ctx& c) {
  ir::Tensor t;
  t.elem = ir::kInt64;
  t.i = {numel(c.dims(0))};
  c.set(0, std::move(t));
}

// Cast at run time: within the integers hetgraph holds as int32 (int32, int64) nothing
// changes, nor from float16 or bfloat16 to float (their values are floats).
void cast(Ctx& c) {
  const int to = c.n.op == "Cast" ? static_cast<int>(c.attr_i("to", ir::kFloat)) : c.in(1).elem;
  const int from = c.in(0).elem;
  // Integers are held as int32 (a bool as 0 / 1, narrow ones within their range).
  const auto held = [](int e) {
    return e == ir::kInt32 || e == ir::kInt64 || e == ir::kBool || narrow_int(e);
  };
  const bool from_float = ir::held_as_float(from);
  if (to == from || ((to == ir::kInt32 || to == ir::kInt64) && held(from)) ||
      (to == ir::kFloat && from_float)) {
    Node x = c.node(0);
    c.set(0, x, to);
    return;
  }
  // float <-> the integers held as int32; to float16 or bfloat16, rounded to their values.
  if ((ir::held_as_float(to) && (held(from) || from_float)) ||
      ((to == ir::kInt32 || to == ir::kInt64) && from_float)) {
    Node x = from_float ? c.node(0) : cast(c.node(0), DType::f32);
    if (to == ir::kFloat16) x = to_float16(x);
    if (to == ir::kBfloat16) x = to_bfloat16(x);
    if (!ir::held_as_float(to)) x = cast(x, DType::i32);
    c.set(0, x, to);
    return;
  }
  // To 8- and 16-bit ints: floats truncated toward zero, then every integer wrapped to the
  // width. ONNX leaves floats outside the type undefined; this is what numpy's astype and ONNX
  // Runtime give on x86 for floats within int32.
  if (narrow_int(to) && (held(from) || from_float)) {
    Node x = from_float ? cast(c.node(0), DType::i32) : c.node(0);
    c.set(0, wrap_to(c, x, to), to);
    return;
  }
  // To bool: x != 0, as the 0 / 1 that bools are held as (a NaN is true, as in ONNX).
  // (hetgraph's exporter writes Where's condition as such a cast from int32.)
  if (to == ir::kBool && ir::is_integral(from)) {
    Node x = c.node(0);
    c.set(0, logical_or(x, x), to);
    return;
  }
  if (to == ir::kBool && from_float) {
    c.set(0, logical_not(equal(c.node(0), c.constant(0.0f))), to);
    return;
  }
  c.unsupported(std::string("casting ") + ir::elem_name(from) + " to " + ir::elem_name(to) +
                " at run time");
}

// ArgMax / ArgMin: int64 positions in ONNX, held as int32 (as every int64 here). Ties go to
// the first position, or the last with select_last_index (opset 12 on); NaN wins (argmax).
/// Input 0 of ArgMax, ArgMin or TopK: float, int32 or int64 (held as int32), else an
/// UnsupportedError saying `what` it would be.
void need_float_or_int(Ctx& c, const std::string& what) {
  const int elem = c.elem(0);
  if (!ir::held_as_float(elem) && elem != ir::kInt32 && elem != ir::kInt64) {
    c.unsupported(what + " of " + ir::elem_name(elem) +
                  " (float, float16, bfloat16, int32 and int64 are supported)");
  }
}

void arg_extreme(Ctx& c) {
  need_float_or_int(c, "positions in a tensor");
  const int r = c.rank(0);
  if (r == 0) c.fail("the input is a scalar: there is no axis to take positions along");
  const int axis = c.axis(c.attr_i("axis", 0), r);
  const bool keep = c.attr_i("keepdims", 1) != 0;
  const bool last = c.version >= 12 && c.attr_i("select_last_index", 0) != 0;
  Node x = c.node(0);
  c.set(0, c.n.op == "ArgMax" ? argmax(x, axis, keep, last) : argmin(x, axis, keep, last),
        ir::kInt64);
}

// TopK: k from the attribute (opset 1) or the int64 input K (10 on), which must be known at
// import; largest and sorted from opset 11. Results are always sorted (sorted = 0 leaves the
// order open). Values are a gather of the input at the indices, which are int64 in ONNX and
// int32 here, as ArgMax's.
void top_k_op(Ctx& c) {
  need_float_or_int(c, "TopK");
  const Dims d = c.dims(0);
  if (d.empty()) c.fail("the input is a scalar: there is no axis to take the top k along");
  const int axis = c.axis(c.attr_i("axis", -1), static_cast<int>(d.size()));
  std::int64_t k = 0;
  if (c.version < 10) {
    if (!c.has_attr("k")) c.fail("attribute k is missing");
    k = c.attr_i("k", 0);
  } else {
    const Dims kv = c.ints(1, "K");
    if (kv.size() != 1) c.fail("K must hold one number, it holds " + std::to_string(kv.size()));
    k = kv[0];
  }
  const std::int64_t n = d[static_cast<std::size_t>(axis)];
  if (k < 1 || k > n) {
    c.fail("K = " + std::to_string(k) + " is outside [1, " + std::to_string(n) +
           "], the size of axis " + std::to_string(axis) + " of " + dims_str(d));
  }
  const bool largest = c.version < 11 || c.attr_i("largest", 1) != 0;
  const Node x = c.node(0);
  const Node indices = top_k_indices(x, k, axis, largest);
  if (c.wants(0)) c.set(0, gather_elements(x, indices, axis), c.elem(0));
  if (c.wants(1)) c.set(1, indices, ir::kInt64);
}

// 1 where column - row of the last two dims is on the kept side of k, a constant of x's last
// two dims (the leading ones broadcast): Trilu keeps x there and writes 0 elsewhere.
Node diagonal_mask(Ctx& c, int rank, std::int64_t rows, std::int64_t cols, std::int64_t k,
                   bool upper) {
  Dims d(static_cast<std::size_t>(rank), 1);
  d[d.size() - 2] = rows;
  d[d.size() - 1] = cols;
  std::vector<std::int32_t> m = c.host<std::int32_t>(rows * cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      m[static_cast<std::size_t>(i * cols + j)] = upper ? j - i >= k : j - i <= k;
  return c.graph().constant_i32(Shape(std::span<const std::int64_t>(d)), std::move(m));
}

void trilu(Ctx& c) {
  const Dims d = c.dims(0);
  if (d.size() < 2) c.fail("the input must have rank 2 or more, got " + dims_str(d));
  std::int64_t k = 0;
  if (c.has(1)) {
    const Dims kv = c.ints(1, "k");
    if (kv.size() != 1) c.fail("k must be one number");
    k = kv[0];
  }
  const std::int64_t rows = d[d.size() - 2], cols = d[d.size() - 1];
  k = std::clamp<std::int64_t>(k, -rows, cols);  // beyond: every element kept or none
  const int elem = c.elem(0);
  const bool ints = ir::is_integral(elem);
  Node x = ints ? c.node(0) : c.f32(0);
  const Node zero = ints ? c.graph().constant_i32(Shape{}, {0}) : c.constant(0.0f);
  const bool upper = c.attr_i("upper", 1) != 0;
  c.set(0, where(diagonal_mask(c, static_cast<int>(d.size()), rows, cols, k, upper), x, zero),
        elem);
}

// Ones on the diagonal shifted by k, zeros elsewhere, in the shape of a 2-d input: a constant.
void eye_like(Ctx& c) {
  const Dims d = c.dims(0);
  if (d.size() != 2) c.fail("the input must be 2-d, got " + dims_str(d));
  const int elem = static_cast<int>(c.attr_i("dtype", c.elem(0)));
  if (!ir::held_as_float(elem) && !ir::is_integral(elem))
    c.unsupported(std::string("EyeLike of ") + ir::elem_name(elem));
  const std::int64_t k = c.attr_i("k", 0);
  std::vector<std::int32_t> v = c.host<std::int32_t>(d[0] * d[1]);
  for (std::int64_t i = 0; i < d[0]; ++i)
    if (i + k >= 0 && i + k < d[1]) v[static_cast<std::size_t>(i * d[1] + i + k)] = 1;
  if (ir::held_as_float(elem)) {
    c.set(0, c.constant(d, std::vector<float>(v.begin(), v.end())), elem);
  } else {
    c.set(0, c.graph().constant_i32(Shape(std::span<const std::int64_t>(d)), std::move(v)), elem);
  }
}

// DepthToSpace / SpaceToDepth of [N, C, H, W]: a fixed permutation of each sample's elements,
// so one gather of constant positions over the flattened sample (ONNX defines them through a
// rank-6 transpose, which hetgraph tensors cannot hold).
void depth_space(Ctx& c) {
  const Dims d = c.dims(0);
  if (d.size() != 4) c.fail("the input must be [N, C, H, W], got " + dims_str(d));
  const std::int64_t bs = c.attr_i("blocksize", 0);
  if (bs < 1) c.fail("blocksize must be at least 1");
  const bool to_space = c.n.op == "DepthToSpace";
  const bool crd = to_space && c.attr_s("mode", "DCR") == "CRD";
  const std::int64_t C = d[1], H = d[2], W = d[3];
  Dims out;
  if (to_space) {
    if (C % (bs * bs) != 0)
      c.fail("the channels " + std::to_string(C) + " are not a multiple of blocksize^2");
    out = {d[0], C / (bs * bs), H * bs, W * bs};
  } else {
    if (H % bs != 0 || W % bs != 0)
      c.fail("the height and width " + dims_str({H, W}) + " are not multiples of blocksize");
    out = {d[0], C * bs * bs, H / bs, W / bs};
  }
  const std::int64_t oc = out[1], oh = out[2], ow = out[3];
  if (C * H * W > INT32_MAX) c.unsupported("a sample of more than 2^31 elements");
  std::vector<std::int32_t> pos = c.host<std::int32_t>(oc * oh * ow);
  for (std::int64_t ch = 0; ch < oc; ++ch)
    for (std::int64_t h = 0; h < oh; ++h)
      for (std::int64_t w = 0; w < ow; ++w) {
        std::int64_t src;  // the input element (channel, row, column) this output one takes
        if (to_space) {
          const std::int64_t i = h % bs, j = w % bs;
          const std::int64_t ic = crd ? ch * bs * bs + i * bs + j : (i * bs + j) * oc + ch;
          src = (ic * H + h / bs) * W + w / bs;
        } else {
          const std::int64_t b = ch / C, ic = ch % C, i = b / bs, j = b % bs;
          src = (ic * H + h * bs + i) * W + w * bs + j;
        }
        pos[static_cast<std::size_t>((ch * oh + h) * ow + w)] = static_cast<std::int32_t>(src);
      }
  const int elem = c.elem(0);
  Node x = ir::is_integral(elem) ? c.node(0) : c.f32(0);
  const Node flat = c.reshape(x, {d[0], C * H * W});
  const Node g = gather(flat, c.graph().constant_i32(Shape{oc * oh * ow}, std::move(pos)), 1);
  c.set(0, c.reshape(g, out), elem);
}

}  // namespace

void register_tensor_ops(std::vector<Handler>& h) {
  h.push_back({"Reshape", 1, 14, reshape_op});
  h.push_back({"Flatten", 1, 13, flatten});
  h.push_back({"Squeeze", 1, 13, squeeze});
  h.push_back({"Unsqueeze", 1, 13, unsqueeze});
  h.push_back({"Transpose", 1, 13, transpose_op});
  h.push_back({"Concat", 1, 13, concat_op});
  h.push_back({"Split", 1, 13, split});
  h.push_back({"Slice", 1, 13, slice_op});
  h.push_back({"Gather", 1, 13, gather});
  h.push_back({"Compress", 9, 11, compress});
  h.push_back({"GatherElements", 11, 13, gather_elements_op});
  h.push_back({"ReverseSequence", 10, 10, reverse_sequence});
  h.push_back({"ScatterElements", 11, 16, scatter_elements_op});
  h.push_back({"Scatter", 9, 10, scatter_elements_op});  // deprecated: ScatterElements-11's alias
  h.push_back({"GatherND", 11, 13, gather_nd});
  h.push_back({"ScatterND", 11, 16, scatter_nd});
  h.push_back({"Expand", 8, 13, expand});
  h.push_back({"Tile", 6, 13, tile});
  h.push_back({"Dropout", 1, 13, dropout});
  h.push_back({"Pad", 2, 13, pad});
  h.push_back({"Constant", 1, 13, constant});
  h.push_back({"Shape", 1, 15, shape_op});
  h.push_back({"Size", 1, 13, size_op});
  h.push_back({"Cast", 6, 13, cast});
  h.push_back({"ArgMax", 1, 13, arg_extreme});
  h.push_back({"ArgMin", 1, 13, arg_extreme});
  h.push_back({"TopK", 1, 11, top_k_op});
  h.push_back({"CastLike", 15, 15, cast});
  h.push_back({"Trilu", 14, 14, trilu});
  h.push_back({"EyeLike", 9, 9, eye_like});
  h.push_back({"DepthToSpace", 1, 13, depth_space});
  h.push_back({"SpaceToDepth", 1, 13, depth_space});
}

}  // namespace hetgraph::onnx::imp
