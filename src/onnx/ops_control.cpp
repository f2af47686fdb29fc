// SPDX-License-Identifier: Apache-2.0
// ONNX control flow and sequences, resolved at import. Control flow: If, Loop and Scan, unrolled.
// Sequences (SequenceConstruct, SplitToSequence, ... ConcatFromSequence) are lists of values
// known at import, positions into them too. hetgraph graphs are static, so a
// branch is taken, and a loop's iterations are laid out one after the other, when the model is
// imported: If needs its condition known there, Loop its trip count (or a condition its body
// computes from values known there), and Scan the length of its scan inputs, which their shapes
// always give. Each iteration imports the body again with that iteration's values bound to its
// inputs (Ctx::run_body), so shapes, folding and every op handler work in bodies as elsewhere.
#include <algorithm>
#include <cstdint>

#include "onnx/importer.hpp"

namespace hetgraph::onnx::imp {

namespace {

Dims dims_of(const Ctx& c, const Value& v) {
  if (v.seq) c.unsupported("a sequence where a tensor is needed");
  return v.known() ? v.konst->dims : v.view ? v.view->dims : c.shape(v.node);
}

ir::Tensor scalar(int elem, std::int64_t value) {
  ir::Tensor t;
  t.elem = elem;
  t.i = {value};
  return t;
}

// The boolean a known scalar holds ("what" names it for errors).
bool flag(const Ctx& c, const ir::Tensor& t, const std::string& what) {
  if (t.numel() != 1) c.fail(what + " has " + std::to_string(t.numel()) + " elements, not 1");
  return ir::is_integral(t.elem) ? t.i[0] != 0 : t.f[0] != 0.0f;
}

// Element `index` of v along `axis`, that axis removed (a scan input's slice).
Value take(Ctx& c, const Value& v, int axis, std::int64_t index) {
  if (v.known() && !v.initializer) {
    return known_value(host::gather(*v.konst, axis, {index}, {}));
  }
  Dims out = dims_of(c, v);
  out.erase(out.begin() + axis);
  Value r;
  r.elem = v.elem;
  r.node = c.reshape(slice(c.node_of(v), axis, index, index + 1), out);
  return r;
}

// The values of `vs` (one per iteration, all of one shape) stacked along a new `axis`.
Value stack(Ctx& c, const std::vector<Value>& vs, int axis, const std::string& what) {
  if (vs.empty()) {
    c.unsupported(what +
                  " stacks no iteration, so it would be empty; hetgraph tensors have at "
                  "least one element");
  }
  const Dims first = dims_of(c, vs[0]);
  if (axis < 0 || axis > static_cast<int>(first.size())) {
    c.fail(what + ": axis " + std::to_string(axis) + " is out of range for stacking values of " +
           dims_str(first));
  }
  Dims one = first;
  one.insert(one.begin() + axis, 1);
  bool host_all = true;
  for (std::size_t t = 0; t < vs.size(); ++t) {
    const Dims d = dims_of(c, vs[t]);
    if (d != first) {
      c.fail(what + ": iteration " + std::to_string(t) + " gives " + dims_str(d) +
             ", iteration 0 gave " + dims_str(first) + "; stacked values must agree");
    }
    if (vs[t].elem != vs[0].elem) c.fail(what + ": iterations give different element types");
    host_all = host_all && vs[t].known() && !vs[t].initializer;
  }
  if (host_all) {
    std::vector<ir::Tensor> parts;
    parts.reserve(vs.size());
    for (const Value& v : vs) parts.push_back(host::with_dims(*v.konst, one));
    std::vector<const ir::Tensor*> ptrs;
    for (const ir::Tensor& t : parts) ptrs.push_back(&t);
    return known_value(host::concat(ptrs, axis));
  }
  std::vector<Node> parts;
  parts.reserve(vs.size());
  for (const Value& v : vs) parts.push_back(c.reshape(c.node_of(v), one));
  Value r;
  r.elem = vs[0].elem;
  r.node = parts.size() == 1 ? parts[0] : concat(std::span<const Node>(parts), axis);
  c.type(r.node);
  return r;
}

// Input i as a value to bind to a body input.
Value arg(Ctx& c, std::size_t i) {
  return c.in(i);
}

// A loop's whole unrolling checked before it starts against what the import may still add
// (ImportOptions::max_nodes, for the import as a whole: loops nested in loops count too, as
// each node is added).
void check_budget(const Ctx& c, std::int64_t iterations, const ir::Graph& body,
                  const std::string& what) {
  const std::int64_t per = std::max<std::int64_t>(1, static_cast<std::int64_t>(body.nodes.size()));
  const std::int64_t left = c.nodes_left();
  if (iterations > left / per) {
    c.unsupported(what + " of " + std::to_string(iterations) + " iterations, each of " +
                  std::to_string(body.nodes.size()) +
                  " nodes: hetgraph unrolls loops at import, and this import may add " +
                  std::to_string(left) +
                  " more ONNX nodes (ImportOptions::max_nodes; raise it for a model that needs "
                  "more)");
  }
}

void if_op(Ctx& c) {
  const bool cond = flag(c, c.known_tensor(0, "the condition: hetgraph takes a branch at import"),
                         "the condition");
  const ir::Graph& branch = c.attr_g(cond ? "then_branch" : "else_branch");
  const std::vector<Value> outs = c.run_body(branch, {});
  if (outs.size() != c.outputs()) {
    c.fail("the branch taken gives " + std::to_string(outs.size()) + " outputs, the node has " +
           std::to_string(c.outputs()));
  }
  for (std::size_t k = 0; k < outs.size(); ++k) c.set(k, outs[k]);
}

// Loop (1, 11, 13, 16): M (trip count) and cond, both optional, then the carried values; the
// body takes (iteration number, cond, carried...) and gives (cond, carried..., scan outputs...).
void loop(Ctx& c) {
  const ir::Graph& body = c.attr_g("body");
  const std::size_t carried = c.inputs() > 2 ? c.inputs() - 2 : 0;
  if (body.inputs.size() != carried + 2 || body.outputs.size() < carried + 1) {
    c.fail("the body takes " + std::to_string(body.inputs.size()) + " inputs and gives " +
           std::to_string(body.outputs.size()) + " outputs; with " + std::to_string(carried) +
           " carried values it must take " + std::to_string(carried + 2) + " and give at least " +
           std::to_string(carried + 1));
  }
  const std::size_t scans = body.outputs.size() - 1 - carried;
  if (c.outputs() > carried + scans) {
    c.fail("the node has " + std::to_string(c.outputs()) + " outputs, its body gives " +
           std::to_string(carried + scans));
  }
  std::int64_t trip = -1;  // no trip count: the condition alone ends the loop
  if (c.has(0)) {
    const Dims m = c.ints(0, "the trip count: hetgraph unrolls the loop at import");
    if (m.size() != 1) c.fail("the trip count has " + std::to_string(m.size()) + " elements");
    trip = std::max<std::int64_t>(m[0], 0);
    check_budget(c, trip, body, "a loop");
  }
  bool cond = true;
  if (c.has(1)) {
    cond = flag(c, c.known_tensor(1, "the condition: hetgraph unrolls the loop at import"),
                "the condition");
  }
  if (trip < 0 && !c.has(1)) c.fail("neither a trip count nor a condition: the loop never ends");

  std::vector<Value> state;
  for (std::size_t i = 0; i < carried; ++i) state.push_back(arg(c, 2 + i));
  std::vector<std::vector<Value>> scanned(scans);
  for (std::int64_t i = 0; (trip < 0 || i < trip) && cond; ++i) {
    if (trip < 0) check_budget(c, i + 1, body, "a loop ended by its condition");
    std::vector<Value> args;
    args.push_back(known_value(scalar(ir::kInt64, i)));
    args.push_back(known_value(scalar(ir::kBool, 1)));
    args.insert(args.end(), state.begin(), state.end());
    std::vector<Value> outs = c.run_body(body, std::move(args));
    // Without a cond input the body's condition is ignored (ONNX: "for i < M").
    if (c.has(1)) {
      const std::string what = "the condition its body gives in iteration " + std::to_string(i);
      if (!outs[0].known()) {
        c.unsupported(what +
                      " is computed at run time; hetgraph unrolls loops at import, so it "
                      "needs the condition known there");
      }
      cond = flag(c, *outs[0].konst, what);
    }
    for (std::size_t k = 0; k < carried; ++k) state[k] = outs[1 + k];
    for (std::size_t k = 0; k < scans; ++k) scanned[k].push_back(outs[1 + carried + k]);
  }
  for (std::size_t k = 0; k < carried; ++k) c.set(k, state[k]);
  for (std::size_t k = 0; k < scans; ++k) {
    if (!c.wants(carried + k)) continue;
    c.set(carried + k, stack(c, scanned[k], 0, "scan output " + std::to_string(k)));
  }
}

// Scan's per-input or per-output attribute list: `count` values, zeros when absent.
Dims per_value(const Ctx& c, const std::string& name, std::size_t count) {
  const Dims v = c.attr_ints(name, Dims(count, 0));
  if (v.size() != count) {
    c.fail("attribute '" + name + "' has " + std::to_string(v.size()) + " values for " +
           std::to_string(count));
  }
  return v;
}

// One pass of a Scan body over `xs` (sliced along `axes`, in `reverse` order where set) from
// `state`: the final state, and each scan output's values in iteration order.
std::vector<std::vector<Value>> scan_pass(Ctx& c, const ir::Graph& body, std::vector<Value>& state,
                                          const std::vector<Value>& xs, const Dims& axes,
                                          const Dims& reverse, std::int64_t length) {
  const std::size_t scans = body.outputs.size() - state.size();
  std::vector<std::vector<Value>> out(scans);
  for (std::int64_t t = 0; t < length; ++t) {
    std::vector<Value> args = state;
    for (std::size_t j = 0; j < xs.size(); ++j) {
      const std::int64_t at = reverse[j] != 0 ? length - 1 - t : t;
      args.push_back(take(c, xs[j], static_cast<int>(axes[j]), at));
    }
    std::vector<Value> outs = c.run_body(body, std::move(args));
    for (std::size_t k = 0; k < state.size(); ++k) state[k] = outs[k];
    for (std::size_t k = 0; k < scans; ++k) out[k].push_back(outs[state.size() + k]);
  }
  return out;
}

// The scan length: the dim along each scan input's axis, which must agree.
std::int64_t scan_length(Ctx& c, const std::vector<Value>& xs, const Dims& axes) {
  std::int64_t length = -1;
  for (std::size_t j = 0; j < xs.size(); ++j) {
    const Dims d = dims_of(c, xs[j]);
    const std::int64_t n = d[static_cast<std::size_t>(axes[j])];
    if (length >= 0 && n != length) {
      c.fail("scan input " + std::to_string(j) + " has " + std::to_string(n) +
             " elements along its axis, scan input 0 has " + std::to_string(length));
    }
    length = n;
  }
  return length;
}

// A Scan node's layout, checked: its body, how its inputs split into state variables and scan
// inputs, and their values. Scan-8 (`batched`) has sequence_lens first and a batch axis.
struct ScanNode {
  explicit ScanNode(const ir::Graph& g) : body(g) {}

  const ir::Graph& body;
  bool batched = false;
  std::size_t first = 0;  // the first state input (1 after Scan-8's sequence_lens)
  std::size_t ms = 0;     // scan inputs
  std::size_t n = 0;      // state variables
  std::size_t k_out = 0;  // scan outputs
  std::vector<Value> state, xs;
};

// The node's layout: the counts (num_scan_inputs, the body's inputs and outputs, the node's
// outputs) checked first, then the state and scan input values taken.
ScanNode scan_node(Ctx& c) {
  ScanNode s(c.attr_g("body"));
  s.batched = c.version < 9;  // Scan-8: a batch axis first, and sequence_lens
  s.first = s.batched ? 1 : 0;
  const std::int64_t m = c.attr_i("num_scan_inputs", -1);
  if (m < 1 || static_cast<std::size_t>(m) > c.inputs() - s.first) {
    c.fail("num_scan_inputs is " + std::to_string(m) + " for " +
           std::to_string(c.inputs() - s.first) + " inputs");
  }
  s.ms = static_cast<std::size_t>(m);
  s.n = c.inputs() - s.first - s.ms;
  if (s.body.inputs.size() != s.n + s.ms || s.body.outputs.size() < s.n) {
    c.fail("the body takes " + std::to_string(s.body.inputs.size()) + " inputs and gives " +
           std::to_string(s.body.outputs.size()) + " outputs, for " + std::to_string(s.n) +
           " state variables and " + std::to_string(s.ms) + " scan inputs");
  }
  s.k_out = s.body.outputs.size() - s.n;
  if (c.outputs() > s.n + s.k_out) {
    c.fail("the node has " + std::to_string(c.outputs()) + " outputs, its body gives " +
           std::to_string(s.n + s.k_out));
  }
  for (std::size_t i = 0; i < s.n; ++i) s.state.push_back(arg(c, s.first + i));
  for (std::size_t j = 0; j < s.ms; ++j) s.xs.push_back(arg(c, s.first + s.n + j));
  return s;
}

// Scan-9 and later: one pass over the scan inputs along their own axes and directions; each
// scan output is stacked along its axis, reversed first where its direction says so.
void scan_axes(Ctx& c, ScanNode& s) {
  const Dims in_axes = per_value(c, "scan_input_axes", s.ms);
  const Dims dirs = per_value(c, "scan_input_directions", s.ms);
  const Dims out_axes = per_value(c, "scan_output_axes", s.k_out);
  const Dims out_dirs = per_value(c, "scan_output_directions", s.k_out);
  Dims axes;
  for (std::size_t j = 0; j < s.ms; ++j)
    axes.push_back(c.axis(in_axes[j], c.rank(s.first + s.n + j)));
  const std::int64_t length = scan_length(c, s.xs, axes);
  check_budget(c, length, s.body, "a scan");
  std::vector<std::vector<Value>> outs = scan_pass(c, s.body, s.state, s.xs, axes, dirs, length);
  for (std::size_t i = 0; i < s.n; ++i) c.set(i, s.state[i]);
  for (std::size_t k = 0; k < s.k_out; ++k) {
    if (!c.wants(s.n + k)) continue;
    if (out_dirs[k] != 0) std::reverse(outs[k].begin(), outs[k].end());
    // (No iteration: stack() refuses the empty output.)
    const int r = outs[k].empty() ? 1 : static_cast<int>(dims_of(c, outs[k][0]).size()) + 1;
    c.set(s.n + k, stack(c, outs[k], c.axis(out_axes[k], r), "scan output " + std::to_string(k)));
  }
}

// Scan-8's batch size: every state and scan input must lead with the same batch axis, and the
// scan inputs have a sequence axis after it.
std::int64_t scan8_batch(Ctx& c, const ScanNode& s) {
  std::int64_t batch = -1;
  for (std::size_t i = s.first; i < c.inputs(); ++i) {
    const Dims d = c.dims(i);
    if (d.empty() || (batch >= 0 && d[0] != batch)) {
      c.fail("input " + std::to_string(i) + " " + dims_str(d) +
             " lacks the batch axis the other inputs have");
    }
    if (i >= s.first + s.n && d.size() < 2) {
      c.fail("scan input " + std::to_string(i) + " " + dims_str(d) + " lacks the sequence axis");
    }
    batch = d[0];
  }
  return batch;
}

// Scan-8's sequence length, from the first scan input. The scan is unrolled at import, so
// sequence_lens, when given, must be known and cover whole sequences.
std::int64_t scan8_length(Ctx& c, const ScanNode& s) {
  const std::int64_t length = c.dims(s.first + s.n)[1];
  if (c.has(0)) {
    for (std::int64_t l : c.ints(0, "sequence_lens: hetgraph unrolls the scan at import")) {
      if (l != length) {
        c.unsupported("sequence_lens holds " + std::to_string(l) + " for sequences of " +
                      std::to_string(length) + ": hetgraph scans whole sequences only");
      }
    }
  }
  return length;
}

// Scan-8: states [batch, ...], scan inputs [batch, sequence, ...]; the body runs per batch
// entry, and the outputs stack the entries again.
void scan8(Ctx& c, ScanNode& s) {
  const Dims dirs = per_value(c, "directions", s.ms);
  const std::int64_t batch = scan8_batch(c, s);
  const std::int64_t length = scan8_length(c, s);
  check_budget(c, batch * length, s.body, "a scan");
  std::vector<std::vector<Value>> finals(s.n), scanned(s.k_out);
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<Value> st, x;
    for (const Value& v : s.state) st.push_back(take(c, v, 0, b));
    for (const Value& v : s.xs) x.push_back(take(c, v, 0, b));
    std::vector<std::vector<Value>> outs = scan_pass(c, s.body, st, x, Dims(s.ms, 0), dirs, length);
    for (std::size_t i = 0; i < s.n; ++i) finals[i].push_back(st[i]);
    for (std::size_t k = 0; k < s.k_out; ++k)
      scanned[k].push_back(stack(c, outs[k], 0, "scan output " + std::to_string(k)));
  }
  for (std::size_t i = 0; i < s.n; ++i) {
    if (c.wants(i)) c.set(i, stack(c, finals[i], 0, "state " + std::to_string(i)));
  }
  for (std::size_t k = 0; k < s.k_out; ++k) {
    if (c.wants(s.n + k))
      c.set(s.n + k, stack(c, scanned[k], 0, "scan output " + std::to_string(k)));
  }
}

// ONNX Scan, unrolled at import: the node's layout checked, then Scan-9's or Scan-8's form.
void scan(Ctx& c) {
  ScanNode s = scan_node(c);
  if (s.batched)
    scan8(c, s);
  else
    scan_axes(c, s);
}

// ---- sequences: lists known at import ------------------------------------------------------

Value sequence(std::vector<Value> items, int elem) {
  Value v;
  v.elem = elem;
  v.seq = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

const std::vector<Value>& items_of(Ctx& c, std::size_t i) {
  const Value& v = c.in(i);
  if (!v.seq) c.fail("input " + std::to_string(i) + " ('" + c.n.inputs[i] + "') is not a sequence");
  return *v.seq;
}

// Position input i into a sequence of n (negative from the back; n itself where inserting).
std::size_t position(Ctx& c, std::size_t i, std::size_t n, bool inserting) {
  const Dims p = c.ints(i, "the position");
  if (p.size() != 1) c.fail("the position has " + std::to_string(p.size()) + " elements");
  const auto len = static_cast<std::int64_t>(n);
  const std::int64_t at = p[0] < 0 ? p[0] + len : p[0];
  if (at < 0 || at > len || (at == len && !inserting)) {
    c.fail("position " + std::to_string(p[0]) + " is outside a sequence of " + std::to_string(n));
  }
  return static_cast<std::size_t>(at);
}

void sequence_empty(Ctx& c) {
  c.set(0, sequence({}, static_cast<int>(c.attr_i("dtype", ir::kFloat))));
}

void sequence_construct(Ctx& c) {
  std::vector<Value> items;
  for (std::size_t i = 0; i < c.inputs(); ++i) {
    (void)c.dims(i);  // a tensor
    if (c.elem(i) != c.elem(0)) c.fail("the tensors differ in element type");
    items.push_back(c.in(i));
  }
  c.set(0, sequence(std::move(items), c.elem(0)));
}

void sequence_insert(Ctx& c) {
  std::vector<Value> items = items_of(c, 0);
  (void)c.dims(1);
  if (!items.empty() && c.elem(1) != c.in(0).elem)
    c.fail("the tensor's type differs from the sequence's");
  const std::size_t at = c.has(2) ? position(c, 2, items.size(), true) : items.size();
  items.insert(items.begin() + static_cast<std::ptrdiff_t>(at), c.in(1));
  c.set(0, sequence(std::move(items), c.elem(1)));
}

void sequence_erase(Ctx& c) {
  std::vector<Value> items = items_of(c, 0);
  if (items.empty()) c.fail("erasing from an empty sequence");
  const std::size_t at = c.has(1) ? position(c, 1, items.size(), false) : items.size() - 1;
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(at));
  c.set(0, sequence(std::move(items), c.in(0).elem));
}

void sequence_at(Ctx& c) {
  const std::vector<Value>& items = items_of(c, 0);
  c.set(0, items[position(c, 1, items.size(), false)]);
}

void sequence_length(Ctx& c) {
  c.set(0, scalar(ir::kInt64, static_cast<std::int64_t>(items_of(c, 0).size())));
}

// ConcatFromSequence: the tensors concatenated along axis, or stacked along a new one.
void concat_from_sequence(Ctx& c) {
  const std::vector<Value>& items = items_of(c, 0);
  if (items.empty()) c.unsupported("concatenating an empty sequence (the result would be empty)");
  const bool new_axis = c.attr_i("new_axis", 0) != 0;
  const int rank = static_cast<int>(dims_of(c, items[0]).size());
  const int axis = c.axis(c.attr_i("axis", 0), rank + (new_axis ? 1 : 0));
  if (new_axis) {
    c.set(0, stack(c, items, axis, "the sequence"));
    return;
  }
  const Dims first = dims_of(c, items[0]);
  bool host_all = true;
  std::vector<Node> parts;
  for (const Value& v : items) {
    const Dims d = dims_of(c, v);
    for (std::size_t k = 0; k < d.size(); ++k) {
      if (d.size() != first.size() || (static_cast<int>(k) != axis && d[k] != first[k]))
        c.fail("the tensors " + dims_str(first) + " and " + dims_str(d) + " do not concatenate");
    }
    host_all = host_all && v.known() && !v.initializer;
  }
  if (host_all) {
    std::vector<const ir::Tensor*> ts;
    for (const Value& v : items) ts.push_back(v.konst.get());
    c.set(0, host::concat(ts, axis));
    return;
  }
  for (const Value& v : items) parts.push_back(c.node_of(v));
  c.set(0, parts.size() == 1 ? parts[0] : concat(std::span<const Node>(parts), axis),
        items[0].elem);
}

// SplitToSequence: pieces along axis, of the sizes `split` gives (one size: equal pieces, the
// last shorter), or single elements (keepdims 0 drops the axis).
void split_to_sequence(Ctx& c) {
  const Dims d = c.dims(0);
  const int axis = c.axis(c.attr_i("axis", 0), static_cast<int>(d.size()));
  const std::int64_t len = d[static_cast<std::size_t>(axis)];
  Dims sizes;
  bool keep = true;
  if (c.has(1)) {
    const Dims s = c.ints(1, "split");
    if (c.dims(1).empty()) {  // one size: equal pieces, the last one shorter
      if (s[0] < 1) c.fail("split " + std::to_string(s[0]) + " is not positive");
      for (std::int64_t b = 0; b < len; b += s[0]) sizes.push_back(std::min(s[0], len - b));
    } else {
      sizes = s;
      std::int64_t total = 0;
      for (std::int64_t v : s) {
        if (v < 1) c.unsupported("a piece of " + std::to_string(v) + " (an empty tensor)");
        total += v;
      }
      if (total != len)
        c.fail("split " + dims_str(s) + " does not add up to " + std::to_string(len));
    }
  } else {
    sizes.assign(static_cast<std::size_t>(len), 1);
    keep = c.attr_i("keepdims", 1) != 0;
  }
  std::vector<Value> items;
  std::int64_t begin = 0;
  const Value& x = c.in(0);
  for (std::int64_t n : sizes) {
    if (!keep) {
      items.push_back(take(c, x, axis, begin));
    } else if (x.known() && !x.initializer) {
      Dims start(d.size(), 0), step(d.size(), 1), count = d;
      start[static_cast<std::size_t>(axis)] = begin;
      count[static_cast<std::size_t>(axis)] = n;
      items.push_back(known_value(host::slice(*x.konst, start, step, count)));
    } else {
      Value v;
      v.elem = x.elem;
      v.node = n == len ? c.node(0) : slice(c.node(0), axis, begin, begin + n);
      items.push_back(v);
    }
    begin += n;
  }
  c.set(0, sequence(std::move(items), x.elem));
}

}  // namespace

void register_control_ops(std::vector<Handler>& h) {
  h.push_back({"If", 1, 16, if_op});
  h.push_back({"Loop", 1, 16, loop});
  h.push_back({"Scan", 8, 16, scan});
  h.push_back({"SequenceEmpty", 11, 11, sequence_empty});
  h.push_back({"SequenceConstruct", 11, 11, sequence_construct});
  h.push_back({"SequenceInsert", 11, 11, sequence_insert});
  h.push_back({"SequenceErase", 11, 11, sequence_erase});
  h.push_back({"SequenceAt", 11, 11, sequence_at});
  h.push_back({"SequenceLength", 11, 11, sequence_length});
  h.push_back({"ConcatFromSequence", 11, 11, concat_from_sequence});
  h.push_back({"SplitToSequence", 11, 11, split_to_sequence});
}

}  // namespace hetgraph::onnx::imp
