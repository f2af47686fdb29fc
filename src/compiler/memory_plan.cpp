// SPDX-License-Identifier: Apache-2.0
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
// A value concat_in_place gave a band of a concat goes to that concat's buffer instead, at its
// band's offset: the buffer is made at the first such value in plan order and lives until the
// last reader of the concat or of any of its inputs. Its users are all the bands and their
// readers, so in dag mode (bands written by branches that may run at once, into disjoint
// bytes) reuse proofs and lifetimes cover every band.
// A buffer is free once every reader of its current contents has run. "Has run" depends on
// the engine: in plan order for the sequential engine; for parallel engines the readers must
// be ancestors of the new writer in the dependency graph, so no schedule can overlap them.
// Inputs, variables, constants and fetched nodes are never reused.
//
// Laying buffers out: platforms that allocate each buffer (OpenCL) get them as they are. An
// arena (the CPU) is packed instead (pack_arena below): step 3 is skipped, so a buffer is an
// in-place chain with one lifetime, and each gets an offset where no buffer whose lifetime
// meets its own lies: the arena comes near the peak of bytes live at once, where buffers laid
// end to end (each the size of its largest contents) took 2-2.4x that on googlenet.
#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

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
// Dag plans of at most this many nodes try in-place chains alone as well (plan_memory).
constexpr std::size_t kChainTrialNodes = std::size_t{1} << 16;

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

/// Where each node's memory accesses happen, as plan positions: its own, except for members of
/// a parallel group, which run inside the group's kernel: from the group to its last member
/// (members follow their group in plan order).
struct Spans {
  std::vector<std::uint32_t> lo, hi;
};
Spans access_spans(const Plan& p) {
  const std::size_t n = p.nodes.size();
  Spans s;
  s.lo.resize(n);
  s.hi.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) s.lo[i] = s.hi[i] = i;
  for (std::uint32_t g = 0; g < n; ++g) {
    const std::vector<std::uint32_t>& ms = p.nodes[g].members;
    if (ms.empty()) continue;
    std::uint32_t last = g;
    for (std::uint32_t m : ms) last = std::max(last, m);
    for (std::uint32_t m : ms) {
      s.lo[m] = std::min(s.lo[m], g);
      s.hi[m] = last;
    }
    s.hi[g] = last;
  }
  return s;
}

/// Dag mode: the barriers of the plan, positions c that every node with work before c must
/// finish before (it is an ancestor of c) and every node with work after c waits for (a
/// descendant of c). Two lifetimes separated by a barrier are ordered in every schedule: a
/// CNN has one at each concat or residual add that all branches meet in. Linear: c is a
/// candidate when no dependency edge jumps over it; between consecutive candidates a forward
/// (backward) sweep finds whether every node with work descends from (reaches) them.
std::vector<char> barriers(const Plan& p, const Spans& spans) {
  const std::size_t n = p.nodes.size();
  std::vector<char> is(n, 0);
  if (n == 0) return is;
  auto works = [&](std::uint32_t i) { return p.nodes[i].has_work() || p.nodes[i].group >= 0; };
  // Nodes that never run and depend only on such nodes (inputs, constants, variables and
  // views of them) order nothing: their edges are left out, or a weight read by every layer
  // would leave no barrier.
  std::vector<char> fixed(n, 0);
  for (std::uint32_t v = 0; v < n; ++v) {
    fixed[v] = !works(v) && std::all_of(p.nodes[v].deps.begin(), p.nodes[v].deps.end(),
                                        [&](std::uint32_t d) { return fixed[d] != 0; });
  }
  std::vector<std::int64_t> cross(n + 1, 0);
  for (std::uint32_t v = 0; v < n; ++v) {
    if (fixed[v]) ++cross[v], --cross[v + 1];  // not a barrier itself
    for (std::uint32_t d : p.nodes[v].deps) {
      if (!fixed[d] && d + 1 < v) {
        ++cross[d + 1];
        --cross[v];
      }
    }
    // Inside a parallel group's span nothing is a barrier (its members run at the group).
    if (spans.hi[v] > spans.lo[v]) {
      ++cross[spans.lo[v] + 1];
      --cross[spans.hi[v] + 1];
    }
  }
  std::vector<std::uint32_t> cand;
  std::int64_t c = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    c += cross[i];
    if (c == 0) cand.push_back(i);
  }
  // Forward: every node with work after candidate k descends from it.
  std::vector<char> good(n, 0), after_ok(cand.size() + 1, 1);
  for (std::size_t k = cand.size(); k-- > 0;) {
    const std::uint32_t from = cand[k];
    const std::uint32_t to = k + 1 < cand.size() ? cand[k + 1] : static_cast<std::uint32_t>(n);
    bool ok = true;
    for (std::uint32_t v = from + 1; v < n && v <= to; ++v) {
      bool g = false;
      for (std::uint32_t d : p.nodes[v].deps)
        g = g || d == from || (d > from && good[d] && !fixed[d]);
      good[v] = g;
      if (!g && (works(v) || v == to)) ok = false;
    }
    after_ok[k] = ok && after_ok[k + 1];
  }
  // Backward: every node with work before candidate k reaches it.
  std::fill(good.begin(), good.end(), 0);
  bool before_ok = true;
  for (std::size_t k = 0; k < cand.size(); ++k) {
    const std::uint32_t to = cand[k];
    const std::int64_t from = k > 0 ? cand[k - 1] : -1;
    bool ok = true;
    for (std::int64_t u = static_cast<std::int64_t>(to) - 1; u >= std::max<std::int64_t>(from, 0);
         --u) {
      bool g = false;
      for (std::uint32_t s : p.nodes[static_cast<std::size_t>(u)].succs)
        g = g || s == to || (s < to && good[s]);
      if (fixed[static_cast<std::size_t>(u)]) g = false;
      good[static_cast<std::size_t>(u)] = g;
      if (!g && (works(static_cast<std::uint32_t>(u)) || u == from)) ok = false;
    }
    before_ok = before_ok && ok;
    if (before_ok && after_ok[k]) is[to] = 1;
  }
  return is;
}

/// A buffer to place in the arena: its size and lifetime (closed, in plan positions).
struct Item {
  std::size_t bytes = 0;
  std::uint32_t lo = 0, hi = 0;
};

/// Greedy by size (TFLite's GreedyBySize): largest first, each at the lowest offset of the
/// smallest gap that fits among those already placed whose lifetimes meet its own. Quadratic
/// in the worst case: for plans of at most kGreedyItems buffers.
constexpr std::size_t kGreedyItems = 4096;
std::size_t greedy_by_size(const std::vector<Item>& items, std::vector<std::size_t>& offset) {
  std::vector<std::uint32_t> order(items.size());
  for (std::uint32_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return items[a].bytes > items[b].bytes;
  });
  std::vector<std::uint32_t> placed;  // by offset
  std::size_t total = 0;
  for (std::uint32_t k : order) {
    const Item& x = items[k];
    std::size_t prev_end = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (std::uint32_t q : placed) {
      const Item& y = items[q];
      if (y.hi < x.lo || x.hi < y.lo) continue;
      if (offset[q] >= prev_end + x.bytes && offset[q] - prev_end < best_gap) {
        best_gap = offset[q] - prev_end;
        best = prev_end;
      }
      prev_end = std::max(prev_end, offset[q] + y.bytes);
    }
    offset[k] = best != SIZE_MAX ? best : prev_end;
    total = std::max(total, offset[k] + x.bytes);
    auto at = std::upper_bound(placed.begin(), placed.end(), offset[k],
                               [&](std::size_t o, std::uint32_t q) { return o < offset[q]; });
    placed.insert(at, k);
  }
  return total;
}

/// Best fit in plan order, as an allocator would: a buffer's range is freed after its last
/// use and the smallest free range that fits is taken (free neighbours merge; the arena's
/// top grows when none fits). n log n, for plans of any size.
std::size_t best_fit_in_order(const std::vector<Item>& items, std::vector<std::size_t>& offset) {
  std::vector<std::uint32_t> order(items.size());
  for (std::uint32_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return items[a].lo < items[b].lo; });
  std::map<std::size_t, std::size_t> free_at;             // offset -> bytes
  std::set<std::pair<std::size_t, std::size_t>> by_size;  // (bytes, offset)
  using Live = std::pair<std::uint32_t, std::uint32_t>;   // (hi, item)
  std::priority_queue<Live, std::vector<Live>, std::greater<>> live;
  std::size_t top = 0;
  auto release = [&](std::size_t at, std::size_t bytes) {
    auto next = free_at.lower_bound(at);
    if (next != free_at.end() && next->first == at + bytes) {
      bytes += next->second;
      by_size.erase({next->second, next->first});
      next = free_at.erase(next);
    }
    if (next != free_at.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        at = prev->first;
        bytes += prev->second;
        by_size.erase({prev->second, prev->first});
        free_at.erase(prev);
      }
    }
    if (at + bytes == top) {  // back to the top
      top = at;
      return;
    }
    free_at[at] = bytes;
    by_size.insert({bytes, at});
  };
  std::size_t total = 0;
  for (std::uint32_t k : order) {
    const Item& x = items[k];
    while (!live.empty() && live.top().first < x.lo) {
      const std::uint32_t q = live.top().second;
      live.pop();
      release(offset[q], items[q].bytes);
    }
    auto fit = by_size.lower_bound({x.bytes, 0});
    if (fit != by_size.end()) {
      const auto [bytes, at] = *fit;
      by_size.erase(fit);
      free_at.erase(at);
      offset[k] = at;
      if (bytes > x.bytes) {
        free_at[at + x.bytes] = bytes - x.bytes;
        by_size.insert({bytes - x.bytes, at + x.bytes});
      }
    } else {
      offset[k] = top;
      top += x.bytes;
    }
    total = std::max(total, top);
    live.push({x.hi, k});
  }
  return total;
}

/// For each item, whether another item placed over part of its range starts after its
/// lifetime ends (it overwrites the item's last contents within a run): a sweep over the
/// items by offset with a segment tree of "latest start" over address ranges.
std::vector<char> overwritten_later(const std::vector<Item>& items,
                                    const std::vector<std::size_t>& offset) {
  std::vector<std::size_t> xs;
  for (std::size_t k = 0; k < items.size(); ++k) {
    xs.push_back(offset[k]);
    xs.push_back(offset[k] + items[k].bytes);
  }
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  const std::size_t m = xs.size();
  std::vector<char> out(items.size(), 0);
  if (m < 2) return out;
  // Range "at least v" updates, range max queries (tag: applied to the whole node).
  std::vector<std::int64_t> mx(4 * m, -1), tag(4 * m, -1);
  auto update = [&](auto&& self, std::size_t node, std::size_t l, std::size_t r, std::size_t a,
                    std::size_t b, std::int64_t v) -> void {
    if (b <= l || r <= a) return;
    mx[node] = std::max(mx[node], v);
    if (a <= l && r <= b) {
      tag[node] = std::max(tag[node], v);
      return;
    }
    const std::size_t mid = (l + r) / 2;
    self(self, 2 * node, l, mid, a, b, v);
    self(self, 2 * node + 1, mid, r, a, b, v);
  };
  auto query = [&](auto&& self, std::size_t node, std::size_t l, std::size_t r, std::size_t a,
                   std::size_t b) -> std::int64_t {
    if (b <= l || r <= a) return -1;
    if (a <= l && r <= b) return mx[node];
    const std::size_t mid = (l + r) / 2;
    return std::max(
        {tag[node], self(self, 2 * node, l, mid, a, b), self(self, 2 * node + 1, mid, r, a, b)});
  };
  auto idx = [&](std::size_t x) {
    return static_cast<std::size_t>(std::lower_bound(xs.begin(), xs.end(), x) - xs.begin());
  };
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (items[k].bytes == 0) continue;
    update(update, 1, 0, m - 1, idx(offset[k]), idx(offset[k] + items[k].bytes), items[k].lo);
  }
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (items[k].bytes == 0) continue;
    out[k] = query(query, 1, 0, m - 1, idx(offset[k]), idx(offset[k] + items[k].bytes)) >
             static_cast<std::int64_t>(items[k].hi);
  }
  return out;
}

/// The peak of bytes live at once in plan order, the least arena a plan run in that order can
/// have: buffers kept between runs (inputs, variables, constants, fetched values) always;
/// every other value from its node to its last reader (through views), or until a node
/// overwrites it in place.
std::size_t live_peak(const Plan& p, const std::vector<std::vector<std::uint32_t>>& readers,
                      const Spans& spans, const std::vector<char>& held) {
  const std::size_t n = p.nodes.size();
  std::vector<std::uint32_t> last(n, 0);
  for (std::uint32_t i = static_cast<std::uint32_t>(n); i-- > 0;) {
    last[i] = spans.hi[i];
    for (std::uint32_t r : readers[i]) {
      last[i] = std::max(last[i], p.nodes[r].storage == Storage::View ? last[r] : spans.hi[r]);
    }
  }
  std::vector<std::int64_t> delta(n + 1, 0);
  std::vector<std::int64_t> current(held.size(), -1);  // each buffer's latest value
  std::size_t kept = 0;
  for (std::size_t b = 0; b < held.size(); ++b) {
    if (held[b]) kept += p.buffer_bytes[b];
  }
  auto close = [&](std::uint32_t v, std::uint32_t end) {
    const std::int64_t bytes =
        static_cast<std::int64_t>(align_up(std::max<std::size_t>(p.nodes[v].type.bytes(), 4)));
    delta[spans.lo[v]] += bytes;
    delta[std::max(end, spans.lo[v]) + 1] -= bytes;
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    if (node.buffer < 0 || node.storage != Storage::Computed) continue;
    const auto b = static_cast<std::size_t>(node.buffer);
    if (held[b]) continue;
    if (node.in_concat >= 0) {  // a band: live beside its fellows, to its concat's last reader
      close(i, last[i]);
      continue;
    }
    if (current[b] >= 0) {
      const auto prev = static_cast<std::uint32_t>(current[b]);
      close(prev, std::min(last[prev], i - 1));
    }
    current[b] = i;
  }
  for (std::size_t b = 0; b < held.size(); ++b) {
    if (current[b] >= 0) {
      const auto v = static_cast<std::uint32_t>(current[b]);
      // A fetched value is read after the run.
      close(v, p.nodes[v].fetched ? static_cast<std::uint32_t>(n - 1) : last[v]);
    }
  }
  std::int64_t live = 0, peak = 0;
  for (std::size_t i = 0; i < n; ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return kept + static_cast<std::size_t>(peak);
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
    // In plan order that holds where they all come first. The parallel engines (dag) need it
    // as dependencies too: an ordering edge from each reader the node does not already depend
    // on. Edges that follow plan order cannot close a cycle, and they cost nothing on one
    // device: the node writes a variable, so it runs after the commit point, which waits for
    // every reader anyway (commit_writes); a copying assign costs a pass over the variable.
    if (!std::all_of(others.begin(), others.end(), [&](std::uint32_t u) { return u < i; }))
      continue;
    if (mode == ReuseMode::dag) {
      for (std::uint32_t u : others) {
        if (!p.nodes[u].has_work() || reach.all_before(std::span(&u, 1), i)) continue;
        node.deps.push_back(u);
        p.nodes[u].succs.push_back(i);
      }
    }
    node.into_variable = var;
    assign.elided = true;
  }
}

namespace {

// A concat concat_in_place may consider: computed, not fetched, not a group member, not a
// variable's new value, at least two inputs.
bool concat_candidate(const PlanNode& n) {
  return n.op == OpKind::Concat && n.storage == Storage::Computed && !n.fetched && n.group < 0 &&
         n.into_variable < 0 && n.inputs.size() >= 2;
}

// For each candidate concat, the latest concat whose inputs begin with all of its own, in the
// same order, along the same axis of values of the same type but for that axis and in the same
// layout (DenseNet: each layer concatenates every earlier feature, each concat the start of the
// block's last one); -1 where none does.
std::vector<std::int64_t> prefix_owners(const Plan& p) {
  std::vector<std::int64_t> owner(p.nodes.size(), -1);
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> by_first;
  for (std::uint32_t c = 0; c < p.nodes.size(); ++c) {
    if (concat_candidate(p.nodes[c])) by_first[p.nodes[c].inputs[0]].push_back(c);
  }
  for (const auto& [first, group] : by_first) {
    for (std::uint32_t c : group) {
      const PlanNode& n = p.nodes[c];
      const int rank = static_cast<int>(n.type.shape.rank());
      const int axis = n.attrs.axis < 0 ? n.attrs.axis + rank : n.attrs.axis;
      std::size_t best = n.inputs.size();
      for (std::uint32_t f : group) {
        const PlanNode& m = p.nodes[f];
        if (f <= c || m.inputs.size() <= best || m.type.dtype != n.type.dtype ||
            m.layout != n.layout || m.type.shape.rank() != rank ||
            (m.attrs.axis < 0 ? m.attrs.axis + rank : m.attrs.axis) != axis ||
            !std::equal(n.inputs.begin(), n.inputs.end(), m.inputs.begin()))
          continue;
        best = m.inputs.size();
        owner[c] = f;
      }
    }
  }
  return owner;
}

}  // namespace

// The byte offset of a contiguous slice's range in its input's memory, where the slice may be
// a view of it (slice_views); -1 where it may not.
std::int64_t slice_view_offset(const Plan& p, const PlanNode& n) {
  if (n.op != OpKind::Slice || n.storage == Storage::None) return -1;
  const PlanNode& x = p.nodes[n.inputs[0]];
  const Shape& s = x.type.shape;
  const int rank = static_cast<int>(s.rank());
  const int axis = n.attrs.axis < 0 ? n.attrs.axis + rank : n.attrs.axis;
  if (axis < 0 || axis >= rank || x.layout != ActivationLayout::nchw ||
      n.layout != ActivationLayout::nchw)
    return -1;
  std::int64_t outer = 1, inner = 4;  // every dtype is 4 bytes (TensorType::bytes)
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < rank; ++d) inner *= s[d];
  if (outer != 1) return -1;  // the range is not one run of memory
  // The begin as shape inference normalised it: the output's extent ends at the range's end.
  const SliceRange r = n.attrs.get_or_default<SliceRange>();
  std::int64_t begin = r.begin < 0 ? r.begin + s[axis] : r.begin;
  begin = std::clamp<std::int64_t>(begin, 0, s[axis]);
  if (begin + n.type.shape[axis] > s[axis]) return -1;
  return begin * inner;
}

void slice_views(Plan& p) {
  // A reader that may overwrite its input in place (an LSTM step's product accumulating onto
  // its rows of the input projection) does so over a view only where it is the viewed buffer's
  // last reader (BufferPlanner::over_input), at the view's range; elsewhere it writes a buffer
  // of its own, reading the view instead of the slice's copy.
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    PlanNode& n = p.nodes[i];
    if (n.op != OpKind::Slice || n.storage != Storage::Computed || n.fetched || n.group >= 0 ||
        n.into_variable >= 0 || n.in_concat >= 0)
      continue;
    const PlanNode& x = p.nodes[n.inputs[0]];
    if (x.storage != Storage::Computed && x.storage != Storage::View) continue;
    const std::int64_t off = slice_view_offset(p, n);
    // Kernels may vectorise on aligned rows: views start where a buffer could.
    if (off < 0 || off % static_cast<std::int64_t>(kAlign) != 0) continue;
    n.storage = Storage::View;
  }
}

void concat_in_place(Plan& p) {
  std::vector<char> taken(p.nodes.size(), 0);
  // Concats whose inputs begin a later concat's wait: the later one takes the bands first, and
  // each of them then is a view of the start of its buffer (below), where nothing is outside
  // the axis (a prefix of the bands is then the start of the buffer).
  const std::vector<std::int64_t> owner = prefix_owners(p);
  auto try_in_place = [&](std::uint32_t c) {
    PlanNode& node = p.nodes[c];
    const Shape& s = node.type.shape;
    const int rank = static_cast<int>(s.rank());
    const int axis = node.attrs.axis < 0 ? node.attrs.axis + rank : node.attrs.axis;
    if (axis < 0 || axis >= rank) return;
    // The extent outside the bands, in memory order (the CPU concat kernel's outer count): the
    // dims before the axis; channels-last puts N, H and W there; blocks of channels put N.
    const int block = channel_block(node.layout);
    std::int64_t outer = 1;
    if (block == 0) {
      for (int d = 0; d < axis; ++d) outer *= s[d];
    } else if (rank == 4 && axis == 1) {
      outer = block == 1 ? s[0] * s[2] * s[3] : s[0];
    } else {
      return;
    }
    if (outer != 1) return;
    std::vector<std::pair<std::uint32_t, std::size_t>> bands;
    std::size_t at = 0;
    bool ok = true;
    for (std::uint32_t u : node.inputs) {
      const PlanNode& in = p.nodes[u];
      // Computed here by a kernel of its own that writes it whole (not into a variable, not a
      // group member), once, in the concat's layout.
      ok = !taken[u] && in.storage == Storage::Computed && in.has_work() && !in.fetched &&
           in.group < 0 && in.op != OpKind::ParallelGroup && in.into_variable < 0 &&
           in.fused_into < 0 && op_def(in.op).writes_input < 0 && in.layout == node.layout &&
           in.type.dtype == node.type.dtype && in.type.bytes() > 0 &&
           (block <= 1 || in.type.shape[1] % block == 0);
      if (!ok) break;
      taken[u] = 1;
      bands.push_back({u, at});
      at += in.type.bytes();
    }
    if (!ok || at != node.type.bytes()) {
      for (const auto& [u, off] : bands) taken[u] = 0;
      return;
    }
    for (const auto& [u, off] : bands) {
      p.nodes[u].in_concat = c;
      p.nodes[u].sub_offset = off;
    }
    node.storage = Storage::View;
  };
  for (std::uint32_t c = 0; c < p.nodes.size(); ++c) {
    if (concat_candidate(p.nodes[c]) && owner[c] < 0) try_in_place(c);
  }
  for (std::uint32_t c = 0; c < p.nodes.size(); ++c) {
    if (owner[c] < 0 || !concat_candidate(p.nodes[c])) continue;
    PlanNode& node = p.nodes[c];
    const auto f = static_cast<std::uint32_t>(owner[c]);
    const bool prefix_of_view =
        p.nodes[f].storage == Storage::View &&
        std::all_of(node.inputs.begin(), node.inputs.end(), [&](std::uint32_t u) {
          return p.nodes[u].in_concat == static_cast<std::int64_t>(f);
        });
    // The owner's bands start at its buffer's start, so the inputs' bands are this concat's
    // value there: a view of the first input's buffer (BufferPlanner::share_viewed) that keeps
    // it until its own readers are done. Else the concat stands on its own, as any other.
    if (prefix_of_view && p.nodes[node.inputs[0]].sub_offset == 0) {
      node.storage = Storage::View;
    } else {
      try_in_place(c);
    }
  }
}

namespace {

/// Padded size of a buffer of `bytes`: at least 4 bytes, a multiple of kAlign.
std::size_t padded(std::size_t bytes) {
  return align_up(std::max<std::size_t>(bytes, 4));
}

/// The better of the two layouts of `items` (greedy by size is the better one on CNNs; best
/// fit in order bounds the work on plans of a million buffers): offsets in `at`, size returned.
std::size_t pack_items(const std::vector<Item>& items, std::vector<std::size_t>& at) {
  at.assign(items.size(), 0);
  std::vector<std::size_t> at2(items.size(), 0);
  std::size_t packed = best_fit_in_order(items, at);
  if (items.size() <= kGreedyItems) {
    const std::size_t greedy = greedy_by_size(items, at2);
    if (greedy <= packed) {
      packed = greedy;
      at.swap(at2);
    }
  }
  return packed;
}

/// plan_memory's state and steps (the comment at the top of this file): buffers assigned to
/// the plan's values in plan order (assign), laid out (lay_out), written into the plan
/// (record). run() picks which assignments to try.
class BufferPlanner {
 public:
  BufferPlanner(Plan& p, ReuseMode mode, bool arena)
      : p_(p),
        mode_(mode),
        pack_(arena && mode != ReuseMode::none),
        n_(p.nodes.size()),
        readers_(data_readers(p)),
        reach_(p),
        proof_steps_(
            std::clamp(kProofSteps / std::max<std::size_t>(n_, 1), kShortProof, kLongProof)),
        spans_(access_spans(p)) {}

  void run();

 private:
  using Expiry = std::pair<std::uint32_t, std::int32_t>;  // (last_read, buffer)

  void chains_or_reuse();
  // Assigning buffers to values.
  void assign(bool reuse_free);
  void reset_assignment();
  void release_expired(std::uint32_t i);
  void share_viewed(std::uint32_t i);
  void place_computed(std::uint32_t i, bool reuse_free);
  bool into_variable(std::uint32_t i);
  bool over_input(std::uint32_t i);
  bool reuse_free_buffer(std::uint32_t i);
  bool finished_with(std::int32_t b, std::uint32_t i);
  void occupy(std::int32_t b, std::uint32_t i);
  void new_buffer(std::uint32_t i, bool pinned);
  void join_concat(std::uint32_t i);
  bool others_done(std::int32_t b, std::uint32_t i);
  void take_back_edges();
  // Laying them out.
  void lay_out();
  void pack_arena();
  void lifetimes(std::vector<std::uint32_t>& lo, std::vector<std::uint32_t>& hi) const;
  void widen_to_barriers(std::vector<std::uint32_t>& lo, std::vector<std::uint32_t>& hi) const;
  // The result, into the plan.
  void record();
  void mark_clobbered();

  Plan& p_;
  const ReuseMode mode_;
  const bool pack_;  // lay the buffers out in one packed arena
  const std::size_t n_;
  // Direct data readers of each node (views count as readers; their own readers are added to
  // the buffer when the view is reached, which is before any of them).
  const std::vector<std::vector<std::uint32_t>> readers_;
  Reach reach_;
  const std::size_t proof_steps_;
  const Spans spans_;

  // One assignment.
  std::vector<Buffer> bufs_;
  std::multimap<std::size_t, std::int32_t> free_by_size_;
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<>> expiring_;
  // concat_in_place: each concat's buffer, made for its first input in plan order.
  std::vector<std::int32_t> concat_buffer_;
  // Ordering edges the assignment added (waiters, in the order their edges were added), to
  // take back if the assignment is not kept.
  std::vector<std::uint32_t> edges_;
  // Its layout: buffers held between runs, offsets, and those a later buffer overwrites.
  std::vector<char> held_;
  std::vector<std::size_t> offset_;
  std::vector<char> overwritten_;
  std::size_t total_ = 0;
};

void BufferPlanner::run() {
  if (!pack_ || mode_ == ReuseMode::sequential) {
    // Sequential arenas: in-place chains only, packed (their lifetimes are exact intervals).
    assign(!pack_);
    lay_out();
  } else if (n_ > kChainTrialNodes) {
    // Large dag plans: only step 3's proven reuse, packed (two assignments cost a million-node
    // LSTM step 1.7x the planning time, 5.6 s, for no smaller arena).
    assign(true);
    lay_out();
  } else {
    chains_or_reuse();
  }
  record();
}

// Dag mode: lifetimes widen to barriers, so buffers that step 3 reuses by proof (or by
// ordering edges) can pack better on plans whose branches run long between barriers
// (resnet18), in-place chains alone where barriers are close (googlenet): the smaller.
void BufferPlanner::chains_or_reuse() {
  assign(false);
  lay_out();
  std::vector<Buffer> chains = std::move(bufs_);
  std::vector<std::pair<std::int32_t, bool>> chained(n_);
  for (std::uint32_t i = 0; i < n_; ++i) chained[i] = {p_.nodes[i].buffer, p_.nodes[i].in_place};
  const std::size_t chains_total = total_;
  assign(true);
  lay_out();
  if (total_ >= chains_total) {
    take_back_edges();
    bufs_ = std::move(chains);
    for (std::uint32_t i = 0; i < n_; ++i)
      std::tie(p_.nodes[i].buffer, p_.nodes[i].in_place) = chained[i];
    lay_out();
  }
}

// One assignment of buffers to the plan's values; `reuse_free`: step 3 too.
void BufferPlanner::assign(bool reuse_free) {
  reset_assignment();
  for (std::uint32_t i = 0; i < n_; ++i) {
    release_expired(i);
    switch (p_.nodes[i].storage) {
      case Storage::None:
        continue;
      case Storage::Input:
      case Storage::Variable:
      case Storage::Constant:
        new_buffer(i, true);
        continue;
      case Storage::View:
        share_viewed(i);
        continue;
      case Storage::Computed:
        break;
    }
    place_computed(i, reuse_free);
  }
}

void BufferPlanner::reset_assignment() {
  bufs_.clear();
  free_by_size_.clear();
  expiring_ = {};
  edges_.clear();
  for (PlanNode& node : p_.nodes) {
    node.buffer = -1;
    node.in_place = false;
  }
  concat_buffer_.assign(n_, -1);
}

// Release buffers whose readers are all earlier in plan order than node i. Members of a
// parallel group run together, at their group's place: nothing is released between them (one
// member's last read is not over while another member runs).
void BufferPlanner::release_expired(std::uint32_t i) {
  while (p_.nodes[i].group < 0 && !expiring_.empty() && expiring_.top().first < i) {
    const auto [when, b] = expiring_.top();
    expiring_.pop();
    Buffer& B = bufs_[static_cast<std::size_t>(b)];
    // A buffer can have several expiry entries for the same last read (an in-place chain
    // ending in a node nobody reads pushes one per link): list it once, or a second copy
    // would hand it out again while its next contents are live.
    if (!B.pinned && !B.listed && B.last_read == when) {
      free_by_size_.insert({B.bytes, b});
      B.listed = true;
    }
  }
}

// A view shares what it views: its readers become the buffer's.
void BufferPlanner::share_viewed(std::uint32_t i) {
  PlanNode& node = p_.nodes[i];
  const std::int32_t b = p_.nodes[node.inputs[0]].buffer;
  Buffer& B = bufs_[static_cast<std::size_t>(b)];
  node.buffer = b;
  node.sub_offset = p_.nodes[node.inputs[0]].sub_offset;
  if (node.op == OpKind::Slice)  // a contiguous range of its input (slice_views)
    node.sub_offset += static_cast<std::size_t>(slice_view_offset(p_, node));
  for (std::uint32_t r : readers_[i]) {
    B.users.push_back(r);
    if (r > B.last_read) {
      B.last_read = r;
      if (!B.pinned) expiring_.push({r, b});
    }
  }
  if (node.fetched) B.pinned = true;
}

// A computed value: its concat's band, else the first of steps 1-4 that takes it.
void BufferPlanner::place_computed(std::uint32_t i, bool reuse_free) {
  if (p_.nodes[i].in_concat >= 0) {
    join_concat(i);
    return;
  }
  if (mode_ == ReuseMode::none) {
    new_buffer(i, false);
    return;
  }
  if (into_variable(i) || over_input(i) || (reuse_free && reuse_free_buffer(i))) return;
  new_buffer(i, false);  // 4. A new buffer.
}

// 1. Straight into the variable this node is the new value of (elide_assigns).
bool BufferPlanner::into_variable(std::uint32_t i) {
  PlanNode& node = p_.nodes[i];
  if (node.into_variable < 0) return false;
  const std::int32_t b = p_.nodes[static_cast<std::size_t>(node.into_variable)].buffer;
  occupy(b, i);
  bufs_[static_cast<std::size_t>(b)].pinned = true;
  node.in_place = true;
  return true;
}

// 2. Over an input whose last reader this is (not for members of a parallel group: the input
// may be another member's too, read at the same time).
bool BufferPlanner::over_input(std::uint32_t i) {
  PlanNode& node = p_.nodes[i];
  if (node.group >= 0) return false;
  const OpDef& def = op_def(node.op);
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    if (!def.inplace_input(k)) continue;
    // Not over a value the node also reads where it may not write (fused_conv2d's residual
    // that is its own image too): the kernel would read what it has overwritten.
    bool read_elsewhere = false;
    for (std::size_t j = 0; j < node.inputs.size(); ++j) {
      read_elsewhere = read_elsewhere || (j != k && node.inputs[j] == node.inputs[k] &&
                                          !def.inplace_input(j) && node.reads_input(j));
    }
    if (read_elsewhere) continue;
    const PlanNode& u = p_.nodes[node.inputs[k]];
    if (u.buffer < 0 || u.type != node.type || u.layout != node.layout) continue;
    const std::int32_t b = u.buffer;
    if (bufs_[static_cast<std::size_t>(b)].pinned || !others_done(b, i)) continue;
    occupy(b, i);
    node.sub_offset = u.sub_offset;  // a view's range (slice_views): the same memory
    node.in_place = true;
    return true;
  }
  return false;
}

// 3. A free buffer: the smallest that fits, else the largest (grown). For parallel engines a
// candidate must also be provably finished with, so try a few.
bool BufferPlanner::reuse_free_buffer(std::uint32_t i) {
  if (free_by_size_.empty()) return false;
  const std::size_t need = p_.nodes[i].type.bytes();
  std::vector<std::multimap<std::size_t, std::int32_t>::iterator> candidates;
  for (auto it = free_by_size_.lower_bound(need);
       it != free_by_size_.end() && candidates.size() < 4; ++it) {
    candidates.push_back(it);
  }
  for (auto it = free_by_size_.lower_bound(need);
       it != free_by_size_.begin() && candidates.size() < 8;) {
    --it;
    candidates.push_back(it);
  }
  for (auto it : candidates) {
    const std::int32_t b = it->second;
    if (mode_ == ReuseMode::dag && !finished_with(b, i)) continue;
    free_by_size_.erase(it);
    bufs_[static_cast<std::size_t>(b)].listed = false;
    occupy(b, i);
    return true;
  }
  return false;
}

// Dag mode: whether every user of free buffer b runs before node i in any schedule, proven,
// or made so by ordering edges (recorded in edges_).
bool BufferPlanner::finished_with(std::int32_t b, std::uint32_t i) {
  const std::vector<std::uint32_t>& users = bufs_[static_cast<std::size_t>(b)].users;
  if (reach_.all_before(users, i, proof_steps_)) return true;
  // Not provably finished with, but long ago in plan order: order its users before this node
  // instead of proving it (a search per candidate would cost a million-node graph minutes).
  // Such users finished long before in any schedule. A group member runs at its group's
  // place, which the engines wait on.
  const PlanNode& node = p_.nodes[i];
  const std::uint32_t at = node.group >= 0 ? static_cast<std::uint32_t>(node.group) : i;
  const bool far = bufs_[static_cast<std::size_t>(b)].bytes >= kMinOrderedBytes &&
                   users.size() <= kMaxOrderEdges &&
                   std::all_of(users.begin(), users.end(),
                               [&](std::uint32_t u) { return u + kOrderDistance <= at; });
  if (!far) return false;
  PlanNode& waiter = p_.nodes[at];
  for (std::uint32_t u : users) {
    if (std::find(waiter.deps.begin(), waiter.deps.end(), u) != waiter.deps.end()) continue;
    waiter.deps.push_back(u);
    p_.nodes[u].succs.push_back(at);
    edges_.push_back(at);
    ++p_.ordering_edges;
  }
  return true;
}

void BufferPlanner::occupy(std::int32_t b, std::uint32_t i) {
  Buffer& B = bufs_[static_cast<std::size_t>(b)];
  if (B.listed) throw InternalError("the memory planner reused a buffer still listed free");
  B.bytes = std::max(B.bytes, p_.nodes[i].type.bytes());
  B.users = readers_[i];
  B.users.push_back(i);
  B.last_read = i;
  for (std::uint32_t r : readers_[i]) B.last_read = std::max(B.last_read, r);
  B.writers.push_back(i);
  if (p_.nodes[i].fetched) B.pinned = true;
  p_.nodes[i].buffer = b;
  if (!B.pinned) expiring_.push({B.last_read, b});
}

void BufferPlanner::new_buffer(std::uint32_t i, bool pinned) {
  bufs_.push_back({});
  bufs_.back().pinned = pinned;
  occupy(static_cast<std::int32_t>(bufs_.size() - 1), i);
}

// concat_in_place: node i's value into its concat's buffer (made for the concat's first input
// in plan order), beside what the concat's other inputs put there.
void BufferPlanner::join_concat(std::uint32_t i) {
  const auto c = static_cast<std::size_t>(p_.nodes[i].in_concat);
  if (concat_buffer_[c] < 0) {
    bufs_.push_back({});
    concat_buffer_[c] = static_cast<std::int32_t>(bufs_.size() - 1);
  }
  const std::int32_t b = concat_buffer_[c];
  Buffer& B = bufs_[static_cast<std::size_t>(b)];
  B.bytes = std::max(B.bytes, p_.nodes[c].type.bytes());
  B.users.insert(B.users.end(), readers_[i].begin(), readers_[i].end());
  B.users.push_back(i);
  B.last_read = std::max(B.last_read, i);
  for (std::uint32_t r : readers_[i]) B.last_read = std::max(B.last_read, r);
  B.writers.push_back(i);
  p_.nodes[i].buffer = b;
  expiring_.push({B.last_read, b});
}

// Every user of buffer b other than node i has run before i.
bool BufferPlanner::others_done(std::int32_t b, std::uint32_t i) {
  const Buffer& B = bufs_[static_cast<std::size_t>(b)];
  std::vector<std::uint32_t> others;
  for (std::uint32_t u : B.users) {
    if (u != i) others.push_back(u);
  }
  if (mode_ == ReuseMode::sequential) {
    return std::all_of(others.begin(), others.end(), [&](std::uint32_t u) { return u < i; });
  }
  return reach_.all_before(others, i);
}

void BufferPlanner::take_back_edges() {
  for (std::size_t k = edges_.size(); k-- > 0;) {
    PlanNode& waiter = p_.nodes[edges_[k]];
    p_.nodes[waiter.deps.back()].succs.pop_back();
    waiter.deps.pop_back();
    --p_.ordering_edges;
  }
  edges_.clear();
}

// Lay the buffers out and mark values a later writer overwrites. Buffers holding inputs,
// variables or constants are held between runs; a fetched value from its node to the end of
// the run (the host reads it after), when earlier values may have used its memory.
void BufferPlanner::lay_out() {
  held_.assign(bufs_.size(), 0);
  for (const PlanNode& node : p_.nodes) {
    if (node.buffer >= 0 && (node.storage == Storage::Input || node.storage == Storage::Variable ||
                             node.storage == Storage::Constant))
      held_[static_cast<std::size_t>(node.buffer)] = 1;
  }
  offset_.assign(bufs_.size(), 0);
  overwritten_.assign(bufs_.size(), 0);
  total_ = 0;
  if (pack_) {
    pack_arena();
    return;
  }
  for (std::size_t b = 0; b < bufs_.size(); ++b) {
    offset_[b] = total_;
    total_ += padded(bufs_[b].bytes);
  }
}

// Held buffers first, end to end; then the others packed by lifetime.
void BufferPlanner::pack_arena() {
  std::vector<std::uint32_t> lo(bufs_.size(), UINT32_MAX), hi(bufs_.size(), 0);
  lifetimes(lo, hi);
  if (mode_ == ReuseMode::dag && n_ > 0) widen_to_barriers(lo, hi);
  std::vector<std::uint32_t> loose;
  for (std::size_t b = 0; b < bufs_.size(); ++b) {
    if (held_[b]) {
      offset_[b] = total_;
      total_ += padded(bufs_[b].bytes);
    } else {
      loose.push_back(static_cast<std::uint32_t>(b));
    }
  }
  std::vector<Item> items(loose.size());
  for (std::size_t k = 0; k < loose.size(); ++k) {
    const std::size_t b = loose[k];
    items[k] = {padded(bufs_[b].bytes), lo[b], hi[b]};
  }
  std::vector<std::size_t> at;
  const std::size_t packed = pack_items(items, at);
  const std::vector<char> later = overwritten_later(items, at);
  for (std::size_t k = 0; k < loose.size(); ++k) {
    offset_[loose[k]] = total_ + at[k];
    overwritten_[loose[k]] = later[k];
  }
  total_ += packed;
}

// Each buffer's lifetime: from its first writer to its last user (a fetched value's: to the
// end of the run).
void BufferPlanner::lifetimes(std::vector<std::uint32_t>& lo,
                              std::vector<std::uint32_t>& hi) const {
  for (std::uint32_t i = 0; i < n_; ++i) {
    const PlanNode& node = p_.nodes[i];
    if (node.buffer < 0) continue;
    const auto b = static_cast<std::size_t>(node.buffer);
    if (node.storage != Storage::View) {
      lo[b] = std::min(lo[b], spans_.lo[i]);
      hi[b] = std::max(hi[b], spans_.hi[i]);
    }
    for (std::uint32_t r : readers_[i]) hi[b] = std::max(hi[b], spans_.hi[r]);
    if (node.fetched) hi[b] = static_cast<std::uint32_t>(n_ - 1);
  }
}

// Dag mode: each lifetime widened to the barriers around it, so that buffers sharing memory
// are ordered by dependencies in every schedule.
void BufferPlanner::widen_to_barriers(std::vector<std::uint32_t>& lo,
                                      std::vector<std::uint32_t>& hi) const {
  const std::vector<char> is = barriers(p_, spans_);
  std::vector<std::uint32_t> before(n_), after(n_);
  std::uint32_t last = 0;
  for (std::uint32_t i = 0; i < n_; ++i) before[i] = last = is[i] ? i : last;
  last = static_cast<std::uint32_t>(n_ - 1);
  for (std::uint32_t i = static_cast<std::uint32_t>(n_); i-- > 0;)
    after[i] = last = is[i] ? i : last;
  for (std::size_t b = 0; b < bufs_.size(); ++b) {
    if (held_[b] || lo[b] > hi[b]) continue;
    lo[b] = before[lo[b]];
    hi[b] = after[hi[b]];
  }
}

void BufferPlanner::record() {
  p_.arena_bytes = total_;
  p_.buffers = bufs_.size();
  p_.buffer_offset = offset_;
  p_.buffer_bytes.resize(bufs_.size());
  for (std::size_t b = 0; b < bufs_.size(); ++b) p_.buffer_bytes[b] = padded(bufs_[b].bytes);
  p_.naive_bytes = 0;
  p_.in_place = 0;
  for (PlanNode& node : p_.nodes) {
    if (node.buffer < 0) continue;
    node.offset = offset_[static_cast<std::size_t>(node.buffer)] + node.sub_offset;
    if (node.storage != Storage::View) p_.naive_bytes += padded(node.type.bytes());
    if (node.in_place) ++p_.in_place;
  }
  mark_clobbered();
  p_.live_bytes = live_peak(p_, readers_, spans_, held_);
}

// PlanNode::clobbered: a later writer of its buffer, or a buffer packed over it later.
void BufferPlanner::mark_clobbered() {
  for (std::uint32_t i = 0; i < n_; ++i) {
    PlanNode& node = p_.nodes[i];
    if (node.storage == Storage::Computed) {
      const auto b = static_cast<std::size_t>(node.buffer);
      // A band of a concat outlives its fellow bands' writes; not a later writer's.
      const std::uint32_t last = bufs_[b].writers.back();
      const bool band_after = node.in_concat >= 0 && p_.nodes[last].in_concat == node.in_concat;
      node.clobbered = (last != i && !band_after) || overwritten_[b];
    } else if (node.storage == Storage::View) {
      node.clobbered = p_.nodes[node.inputs[0]].clobbered;
    }
  }
}

}  // namespace

void plan_memory(Plan& p, ReuseMode mode, bool arena) {
  p.reuse = mode;
  BufferPlanner(p, mode, arena).run();
}

}  // namespace hetgraph::detail
