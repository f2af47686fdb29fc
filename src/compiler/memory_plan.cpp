// Liveness-based memory planning, and the assign elision it builds on.
//
// elide_assigns marks each node that is the new value of a variable and can be computed in
// place over it (SGD's W - lr*dW writes straight into W; its assign then does nothing).
// plan_memory, walking the plan in order, gives each computed node, by preference:
//   1. its variable, where elide_assigns said so;
//   2. the buffer of an input it may overwrite (elementwise ops), when it is that input's
//      last reader;
//   3. a free buffer, best fit by size (grown when none is big enough);
//   4. a new buffer.
// A buffer is free once every reader of its current contents has run. "Has run" depends on
// the engine: in plan order for the sequential engine; for parallel engines the readers must
// be ancestors of the new writer in the dependency graph, so no schedule can overlap them.
// Inputs, variables, constants and fetched nodes are never reused.
#include <algorithm>
#include <map>
#include <queue>

#include "compiler/plan.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail {

namespace {

constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Dag mode, reusing a free buffer: a proof by search that its users all precede the node, of
// kProofSteps / n steps (between 64 and 4096) so that the whole plan's proofs stay bounded (a
// million candidates times 4096 steps is minutes); else (users at least kOrderDistance
// earlier in plan order, at most kMaxOrderEdges of them, the buffer at least
// kMinOrderedBytes) ordering edges from them to the node. The edges cost the scheduler an
// atomic each (7% on threadpool-dag's 60,000 tiny nodes), so small buffers get none.
constexpr std::size_t kProofSteps = std::size_t{1} << 24;
constexpr std::size_t kLongProof = 4096, kShortProof = 64;
constexpr std::size_t kMinOrderedBytes = std::size_t{4} << 10;
constexpr std::uint32_t kOrderDistance = 256;
constexpr std::size_t kMaxOrderEdges = 16;

/// Reachability queries "do all of R run before v?" in the dependency DAG, by a bounded
/// backwards search from v that never descends below the earliest node of R in plan order.
class Reach {
 public:
  explicit Reach(const Plan& p) : p_(p), mark_(p.nodes.size(), 0), target_(p.nodes.size(), 0) {}

  bool all_before(std::span<const std::uint32_t> rs, std::uint32_t v,
                  std::size_t budget = kBudget) {
    if (rs.empty()) return true;
    ++gen_;
    std::uint32_t lo = v, targets = 0;
    for (std::uint32_t r : rs) {
      if (r >= v) return false;  // plan order is topological: a later node cannot precede v
      if (target_[r] != gen_) {
        target_[r] = gen_;
        ++targets;
      }
      lo = std::min(lo, r);
    }
    stack_.assign(1, v);
    mark_[v] = gen_;
    while (!stack_.empty()) {
      const std::uint32_t u = stack_.back();
      stack_.pop_back();
      for (std::uint32_t d : p_.nodes[u].deps) {
        if (d < lo || mark_[d] == gen_) continue;
        mark_[d] = gen_;
        if (target_[d] == gen_ && --targets == 0) return true;
        if (--budget == 0) return false;  // too far to prove: assume they may overlap
        stack_.push_back(d);
      }
    }
    return false;
  }

 private:
  static constexpr std::size_t kBudget = 4096;
  const Plan& p_;
  std::vector<std::uint32_t> mark_, target_, stack_;
  std::uint32_t gen_ = 0;
};

struct Buffer {
  std::size_t bytes = 0;
  bool pinned = false;
  bool listed = false;                 // in the free list (at most once)
  std::uint32_t last_read = 0;         // latest plan index reading the current contents
  std::vector<std::uint32_t> users;    // readers of the current contents and their writer
  std::vector<std::uint32_t> writers;  // nodes that wrote it, in plan order
};

/// Data readers of each node (views count as readers of what they view).
std::vector<std::vector<std::uint32_t>> data_readers(const Plan& p) {
  const std::size_t n = p.nodes.size();
  std::vector<std::vector<std::uint32_t>> readers(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const std::uint32_t u = node.inputs[k];
      if (node.reads_input(k) && (readers[u].empty() || readers[u].back() != i)) {
        readers[u].push_back(i);
      }
    }
  }
  return readers;
}

}  // namespace

void elide_assigns(Plan& p, ReuseMode mode) {
  if (mode == ReuseMode::none) return;
  const std::size_t n = p.nodes.size();
  const auto readers = data_readers(p);
  Reach reach(p);
  // Each value with the assign that writes it; a value assigned to two variables is considered
  // for the later assign (plan order) only.
  std::vector<std::int64_t> assign_of(n, -1);
  for (std::uint32_t a = 0; a < n; ++a) {
    if (p.nodes[a].op == OpKind::Assign) assign_of[p.nodes[a].inputs[1]] = a;
  }
  // Values in reverse plan order: a value's readers are decided before it.
  for (std::uint32_t i = static_cast<std::uint32_t>(n); i-- > 0;) {
    if (assign_of[i] < 0) continue;
    PlanNode& assign = p.nodes[static_cast<std::size_t>(assign_of[i])];
    const std::uint32_t var = assign.inputs[0];
    PlanNode& node = p.nodes[i];
    if (node.storage != Storage::Computed || p.nodes[var].type != node.type) continue;
    const OpDef& def = op_def(node.op);
    // After the commit point only kernels that cannot fail run: an index input must be fed
    // (checked before the run) or checkable by a check_indices before the commit point
    // (commit_writes adds it): bounded by a dim 0.
    if (def.index.input >= 0 && def.index.bound_dim != 0) {
      std::uint32_t b = node.inputs[static_cast<std::size_t>(def.index.input)];
      while (p.nodes[b].storage == Storage::View) b = p.nodes[b].inputs[0];
      if (p.nodes[b].storage != Storage::Input) continue;
    }
    bool over_var = false;
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      over_var = over_var || (def.inplace_input(k) && node.inputs[k] == var);
    }
    if (!over_var) continue;
    // Its own readers (besides the assign) must write variables too.
    const bool only_writers =
        std::all_of(readers[i].begin(), readers[i].end(), [&](std::uint32_t r) {
          return r == static_cast<std::uint32_t>(assign_of[i]) || p.nodes[r].into_variable >= 0;
        });
    if (!only_writers) continue;
    // Everything that reads the variable's value, directly or through views, must have run
    // before the node overwrites it.
    std::vector<std::uint32_t> others, stack{var};
    while (!stack.empty()) {
      const std::uint32_t v = stack.back();
      stack.pop_back();
      if (v != i) others.push_back(v);
      for (std::uint32_t r : readers[v]) {
        if (p.nodes[r].storage == Storage::View) {
          stack.push_back(r);
        } else if (r != i) {
          others.push_back(r);
        }
      }
    }
    const bool done =
        mode == ReuseMode::sequential
            ? std::all_of(others.begin(), others.end(), [&](std::uint32_t u) { return u < i; })
            : reach.all_before(others, i);
    if (!done) continue;
    node.into_variable = var;
    assign.elided = true;
  }
}

void plan_memory(Plan& p, ReuseMode mode) {
  p.reuse = mode;
  const std::size_t n = p.nodes.size();
  // Direct data readers of each node (views count as readers; their own readers are added to
  // the buffer when the view is reached, which is before any of them).
  const auto readers = data_readers(p);

  std::vector<Buffer> bufs;
  std::multimap<std::size_t, std::int32_t> free_by_size;
  using Expiry = std::pair<std::uint32_t, std::int32_t>;  // (last_read, buffer)
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<>> expiring;
  Reach reach(p);
  const std::size_t proof_steps =
      std::clamp(kProofSteps / std::max<std::size_t>(n, 1), kShortProof, kLongProof);

  auto occupy = [&](std::int32_t b, std::uint32_t i) {
    Buffer& B = bufs[static_cast<std::size_t>(b)];
    if (B.listed) throw Error("internal: the memory planner reused a buffer still listed free");
    B.bytes = std::max(B.bytes, p.nodes[i].type.bytes());
    B.users = readers[i];
    B.users.push_back(i);
    B.last_read = i;
    for (std::uint32_t r : readers[i]) B.last_read = std::max(B.last_read, r);
    B.writers.push_back(i);
    if (p.nodes[i].fetched) B.pinned = true;
    p.nodes[i].buffer = b;
    if (!B.pinned) expiring.push({B.last_read, b});
  };
  auto new_buffer = [&](std::uint32_t i, bool pinned) {
    bufs.push_back({});
    bufs.back().pinned = pinned;
    occupy(static_cast<std::int32_t>(bufs.size() - 1), i);
  };
  // Every user of buffer b other than node i has run before i.
  auto others_done = [&](std::int32_t b, std::uint32_t i) {
    const Buffer& B = bufs[static_cast<std::size_t>(b)];
    std::vector<std::uint32_t> others;
    for (std::uint32_t u : B.users) {
      if (u != i) others.push_back(u);
    }
    if (mode == ReuseMode::sequential) {
      return std::all_of(others.begin(), others.end(), [&](std::uint32_t u) { return u < i; });
    }
    return reach.all_before(others, i);
  };

  for (std::uint32_t i = 0; i < n; ++i) {
    PlanNode& node = p.nodes[i];
    // Release buffers whose readers are all earlier in plan order. Members of a parallel
    // group run together, at their group's place: nothing is released between them (one
    // member's last read is not over while another member runs).
    while (node.group < 0 && !expiring.empty() && expiring.top().first < i) {
      const auto [when, b] = expiring.top();
      expiring.pop();
      Buffer& B = bufs[static_cast<std::size_t>(b)];
      // A buffer can have several expiry entries for the same last read (an in-place chain
      // ending in a node nobody reads pushes one per link): list it once, or a second copy
      // would hand it out again while its next contents are live.
      if (!B.pinned && !B.listed && B.last_read == when) {
        free_by_size.insert({B.bytes, b});
        B.listed = true;
      }
    }
    switch (node.storage) {
      case Storage::None:
        continue;
      case Storage::Input:
      case Storage::Variable:
      case Storage::Constant:
        new_buffer(i, true);
        continue;
      case Storage::View: {
        const std::int32_t b = p.nodes[node.inputs[0]].buffer;
        Buffer& B = bufs[static_cast<std::size_t>(b)];
        node.buffer = b;
        for (std::uint32_t r : readers[i]) {
          B.users.push_back(r);
          if (r > B.last_read) {
            B.last_read = r;
            if (!B.pinned) expiring.push({r, b});
          }
        }
        if (node.fetched) B.pinned = true;
        continue;
      }
      case Storage::Computed:
        break;
    }
    if (mode == ReuseMode::none) {
      new_buffer(i, false);
      continue;
    }
    const OpDef& def = op_def(node.op);
    bool placed = false;
    // 1. Straight into the variable this node is the new value of (elide_assigns).
    if (node.into_variable >= 0) {
      const std::int32_t b = p.nodes[static_cast<std::size_t>(node.into_variable)].buffer;
      occupy(b, i);
      bufs[static_cast<std::size_t>(b)].pinned = true;
      node.in_place = true;
      placed = true;
    }
    // 2. Over an input whose last reader this is (not for members of a parallel group: the
    // input may be another member's too, read at the same time).
    for (std::size_t k = 0; k < node.inputs.size() && !placed && node.group < 0; ++k) {
      if (!def.inplace_input(k)) continue;
      const PlanNode& u = p.nodes[node.inputs[k]];
      if (u.buffer < 0 || u.type != node.type) continue;
      const std::int32_t b = u.buffer;
      if (bufs[static_cast<std::size_t>(b)].pinned || !others_done(b, i)) continue;
      occupy(b, i);
      node.in_place = true;
      placed = true;
    }
    // 3. A free buffer: the smallest that fits, else the largest (grown). For parallel
    // engines a candidate must also be provably finished with, so try a few.
    if (!placed && !free_by_size.empty()) {
      const std::size_t need = node.type.bytes();
      std::vector<std::multimap<std::size_t, std::int32_t>::iterator> candidates;
      for (auto it = free_by_size.lower_bound(need);
           it != free_by_size.end() && candidates.size() < 4; ++it) {
        candidates.push_back(it);
      }
      for (auto it = free_by_size.lower_bound(need);
           it != free_by_size.begin() && candidates.size() < 8;) {
        --it;
        candidates.push_back(it);
      }
      for (auto it : candidates) {
        const std::int32_t b = it->second;
        if (mode == ReuseMode::dag) {
          const std::vector<std::uint32_t>& users = bufs[static_cast<std::size_t>(b)].users;
          if (!reach.all_before(users, i, proof_steps)) {
            // Not provably finished with, but long ago in plan order: order its users before
            // this node instead of proving it (a search per candidate would cost a million-
            // node graph minutes). Such users finished long before in any schedule.
            // A group member runs at its group's place, which the engines wait on.
            const std::uint32_t at = node.group >= 0 ? static_cast<std::uint32_t>(node.group) : i;
            const bool far = bufs[static_cast<std::size_t>(b)].bytes >= kMinOrderedBytes &&
                             users.size() <= kMaxOrderEdges &&
                             std::all_of(users.begin(), users.end(),
                                         [&](std::uint32_t u) { return u + kOrderDistance <= at; });
            if (!far) continue;
            PlanNode& waiter = p.nodes[at];
            for (std::uint32_t u : users) {
              if (std::find(waiter.deps.begin(), waiter.deps.end(), u) != waiter.deps.end()) {
                continue;
              }
              waiter.deps.push_back(u);
              p.nodes[u].succs.push_back(at);
              ++p.ordering_edges;
            }
          }
        }
        free_by_size.erase(it);
        bufs[static_cast<std::size_t>(b)].listed = false;
        occupy(b, i);
        placed = true;
        break;
      }
    }
    // 4. A new buffer.
    if (!placed) new_buffer(i, false);
  }

  // Lay the buffers out in one arena and mark values a later writer overwrites.
  std::vector<std::size_t> offset(bufs.size(), 0);
  std::size_t total = 0;
  for (std::size_t b = 0; b < bufs.size(); ++b) {
    offset[b] = total;
    total += align_up(std::max<std::size_t>(bufs[b].bytes, 4));
  }
  p.arena_bytes = total;
  p.buffers = bufs.size();
  p.buffer_offset = offset;
  p.buffer_bytes.resize(bufs.size());
  for (std::size_t b = 0; b < bufs.size(); ++b)
    p.buffer_bytes[b] = align_up(std::max<std::size_t>(bufs[b].bytes, 4));
  p.naive_bytes = 0;
  p.in_place = 0;
  for (PlanNode& node : p.nodes) {
    if (node.buffer < 0) continue;
    node.offset = offset[static_cast<std::size_t>(node.buffer)];
    if (node.storage != Storage::View)
      p.naive_bytes += align_up(std::max<std::size_t>(node.type.bytes(), 4));
    if (node.in_place) ++p.in_place;
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    PlanNode& node = p.nodes[i];
    if (node.storage == Storage::Computed) {
      node.clobbered = bufs[static_cast<std::size_t>(node.buffer)].writers.back() != i;
    } else if (node.storage == Storage::View) {
      node.clobbered = p.nodes[node.inputs[0]].clobbered;
    }
  }
}

}  // namespace hetgraph::detail
