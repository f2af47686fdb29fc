// SPDX-License-Identifier: Apache-2.0
// fuse_collectives: allgathers on one communicator and of one element type become one allgather
// of their inputs, flattened and concatenated (up to kFusionBytes of each rank's input): one
// collective, so one latency, instead of many (Horovod's tensor fusion, done here at compile
// time, when the shapes are known). Data parallelism makes such groups: each embedding table's
// rows and indices are allgathered (26 tables in wide & deep: 52 collectives a step).
//
// The fused result is [P, L]: rank r's row holds every member's input in member order. Member
// k's columns [off_k, off_k + n_k) are [P, n_k], rank-major: exactly member k's allgather,
// which becomes a view of that slice in its own shape. Every platform runs reshape, concat,
// slice and allgather.
#include <algorithm>

#include "compiler/comm.hpp"
#include "compiler/plan.hpp"

namespace hetgraph::detail {

namespace {

constexpr std::size_t kFusionBytes = std::size_t{4} << 20;

// Types a node a pass made, from its inputs' types.
void retype(Plan& p, std::uint32_t i) {
  std::vector<TensorType> in;
  for (std::uint32_t u : p.nodes[i].inputs) in.push_back(p.nodes[u].type);
  PlanNode& n = p.nodes[i];
  n.type = op_def(n.op).infer({p, i, n.op, n.attrs, n.declared, in});
}

std::uint32_t add_typed(Plan& p, OpKind op, std::vector<std::uint32_t> in, Attrs at = {}) {
  const std::uint32_t i = p.add_node(op, std::move(in), std::move(at));
  retype(p, i);
  return i;
}

Attrs reshape_to(std::vector<std::int64_t> dims) {
  Attrs at;
  at.set(ReshapeTarget{std::move(dims)});
  return at;
}

bool fusible(const PlanNode& n) {
  return n.op == OpKind::Allgather && n.storage == Storage::Computed && !n.fetched &&
         n.fused_into < 0;
}

}  // namespace

void fuse_collectives(Plan& p) {
  // Groups in plan order of their first member (the same on every rank).
  struct Group {
    std::shared_ptr<Comm> comm;  // copies: adding nodes moves the plan's nodes
    DType dtype;
    std::vector<std::uint32_t> members;
  };
  std::vector<Group> groups;
  const std::size_t n = p.nodes.size();
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    if (!fusible(node)) continue;
    const Collective& c = node.attrs.get<Collective>();
    const DType dt = node.type.dtype;
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.comm == c.comm && x.dtype == dt; });
    if (g == groups.end()) {
      groups.push_back({c.comm, dt, {i}});
    } else {
      g->members.push_back(i);
    }
  }
  bool changed = false;
  for (const Group& g : groups) {
    // Buckets of up to kFusionBytes of each rank's input, in plan order.
    std::vector<std::vector<std::uint32_t>> buckets;
    std::size_t bytes = 0;
    for (std::uint32_t m : g.members) {
      const std::size_t b = p.nodes[p.nodes[m].inputs[0]].type.bytes();
      if (buckets.empty() || (bytes > 0 && bytes + b > kFusionBytes)) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(m);
      bytes += b;
    }
    const Attrs spec = p.nodes[g.members.front()].attrs;
    const std::int64_t ranks = g.comm->size();
    for (const auto& bucket : buckets) {
      if (bucket.size() < 2) continue;
      std::vector<std::uint32_t> flat;
      std::int64_t total = 0;
      for (std::uint32_t m : bucket) {
        flat.push_back(add_typed(p, OpKind::Reshape, {p.nodes[m].inputs[0]}, reshape_to({-1})));
        total += p.nodes[flat.back()].type.shape.numel();
      }
      Attrs cat;
      cat.axis = 0;
      const std::uint32_t joined = add_typed(p, OpKind::Concat, flat, cat);
      const std::uint32_t gathered = add_typed(p, OpKind::Allgather, {joined}, spec);
      p.nodes[gathered].name = "fused allgather of " + std::to_string(bucket.size());
      p.nodes[gathered].label = "'" + p.nodes[gathered].name + "' " + p.nodes[gathered].label;
      const std::uint32_t blocks =
          add_typed(p, OpKind::Reshape, {gathered}, reshape_to({ranks, total}));
      std::int64_t off = 0;
      for (std::uint32_t m : bucket) {
        const std::int64_t len = p.nodes[p.nodes[m].inputs[0]].type.shape.numel();
        Attrs sl;
        sl.axis = 1;
        sl.set(SliceRange{off, off + len});
        const std::uint32_t part = add_typed(p, OpKind::Slice, {blocks}, sl);
        off += len;
        // The member becomes a view of its part, in its own shape.
        PlanNode& node = p.nodes[m];
        const Shape s = node.type.shape;
        node.op = OpKind::Reshape;
        node.attrs = reshape_to(std::vector<std::int64_t>(s.dims().begin(), s.dims().end()));
        node.inputs = {part};
        node.storage = Storage::View;
      }
      changed = true;
    }
  }
  if (changed) prune_and_sort(p);
}

}  // namespace hetgraph::detail
