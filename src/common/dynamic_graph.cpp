// SPDX-License-Identifier: Apache-2.0
// DynamicGraph: a plan per set of named-dim sizes in an LRU cache, with one variable state
// carried between plans (include/hetgraph/dynamic.hpp says why this design).
#include <algorithm>
#include <map>
#include <optional>

#include "common/executable.hpp"
#include "common/variable_store.hpp"
#include "hetgraph/dynamic.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

namespace {

std::string dims_str(const std::vector<Dim>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i > 0) s += ", ";
    s += d[i].named() ? d[i].name() : std::to_string(d[i].size());
  }
  return s + "]";
}

}  // namespace

struct DynamicGraph::State {
  struct Plan {
    std::vector<std::int64_t> key;  // the named dims' sizes, in `names` order
    CompiledGraph cg;
    std::uint64_t version = 0;  // the variable state it holds
    bool writes = false;        // whether its runs write variables
  };
  Build build;
  std::optional<VariableStore> store;  // the plans' variables, where they share them
  DynamicShapes shapes;
  DynamicOptions options;
  std::vector<std::string> names;        // every named dim, sorted
  std::vector<std::vector<int>> dim_of;  // per input and dim: its index in names, or -1
  std::list<Plan> plans;                 // most recently run first
  std::map<std::vector<std::int64_t>, std::list<Plan>::iterator> by_key;
  Plan* last = nullptr;       // the plan of the last run
  std::uint64_t version = 0;  // of the newest variable state; `holder` has it
  Plan* holder = nullptr;     // null while every plan holds the compiled-in values
  std::size_t compiles = 0;
  DimSizes dims;

  std::vector<std::int64_t> resolve(std::span<const FeedItem> feeds, const DimSizes& given) const;
  Plan& plan_for(const std::vector<std::int64_t>& key);
  void sync(Plan& p);
  Plan& latest();
};

// Named dims from `given`, then from feed sizes: an input whose named dims are all known but
// one gives that one (repeated until nothing changes, so one input's dim can unlock another's).
// Index tables, no maps: this runs before every run.
std::vector<std::int64_t> DynamicGraph::State::resolve(std::span<const FeedItem> feeds,
                                                       const DimSizes& given) const {
  constexpr int kFromDims = -1, kUnset = -2;
  std::vector<std::int64_t> size(names.size(), 0);
  std::vector<int> from(names.size(), kUnset);  // the input that gave each, or kFromDims
  for (const auto& [name, v] : given) {
    const auto it = std::lower_bound(names.begin(), names.end(), name);
    if (it == names.end() || *it != name)
      throw FeedError("dims: '" + name + "' is not a named dim of any input");
    if (v < 1) throw FeedError("dims: '" + name + "' = " + std::to_string(v) + " is not positive");
    const auto i = static_cast<std::size_t>(it - names.begin());
    size[i] = v;
    from[i] = kFromDims;
  }
  std::vector<std::int64_t> count(shapes.size(), -1);  // each input's fed element count
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    for (const FeedItem& f : feeds) {
      if (f.name == shapes[k].first) count[k] = static_cast<std::int64_t>(f.value.count());
    }
  }
  auto source = [&](std::size_t i) {
    return from[i] == kFromDims ? std::string("dims")
                                : "input '" + shapes[static_cast<std::size_t>(from[i])].first + "'";
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      if (count[k] < 0) continue;
      const auto& [input, dims] = shapes[k];
      std::int64_t known = 1;
      int open = -1, unknown = 0, repeats = 0;
      for (std::size_t a = 0; a < dims.size(); ++a) {
        const int i = dim_of[k][a];
        if (i < 0) {
          known *= dims[a].size();
        } else if (from[static_cast<std::size_t>(i)] != kUnset) {
          known *= size[static_cast<std::size_t>(i)];
        } else if (i == open) {
          ++repeats;
        } else {
          open = i;
          ++unknown;
          repeats = 1;
        }
      }
      const std::int64_t n = count[k];
      if (unknown == 0) {
        if (n != known) {
          std::string why;  // the sizes this input's named dims took, and from where
          for (std::size_t a = 0; a < dims.size(); ++a) {
            const int i = dim_of[k][a];
            if (i >= 0 && why.find(" " + dims[a].name() + " = ") == std::string::npos)
              why += " " + dims[a].name() + " = " +
                     std::to_string(size[static_cast<std::size_t>(i)]) + " (from " +
                     source(static_cast<std::size_t>(i)) + ")";
          }
          throw FeedError("input '" + input + "' " + dims_str(dims) + " has " + std::to_string(n) +
                          " values, where" + why + " need " + std::to_string(known));
        }
        continue;
      }
      if (unknown > 1 || repeats > 1) continue;  // another input or `dims` may give them
      const auto i = static_cast<std::size_t>(open);
      if (n % known != 0 || n / known < 1)
        throw FeedError("input '" + input + "' " + dims_str(dims) + " has " + std::to_string(n) +
                        " values: no size of '" + names[i] + "' gives that");
      size[i] = n / known;
      from[i] = static_cast<int>(k);
      progress = true;
    }
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (from[i] == kUnset)
      throw FeedError("the size of dim '" + names[i] +
                      "' is not given: feed an input that has it as its only unknown dim, or "
                      "pass it in dims");
  }
  return size;
}

DynamicGraph::State::Plan& DynamicGraph::State::latest() {
  return holder != nullptr ? *holder : *last;
}

// Copies every variable from the plan with the newest state into `p`.
void DynamicGraph::State::sync(Plan& p) {
  if (p.version == version || store) return;  // plans sharing a store hold one state already
  detail::Executable& from = holder->cg.live("run");
  detail::Executable& to = p.cg.live("run");
  const detail::Plan& fp = from.plan();
  const detail::Plan& tp = to.plan();
  std::vector<char> buf;
  for (std::uint32_t v : tp.variables) {
    const detail::PlanNode& n = tp.nodes[v];
    const std::uint32_t src = fp.named(n.name, "run");
    const auto count = static_cast<std::size_t>(n.type.shape.numel());
    buf.resize(count * 4);
    from.read(src, buf.data(), count, n.type.dtype, "run");
    to.write(v, buf.data(), count, n.type.dtype, "run");
  }
  p.version = version;
}

DynamicGraph::State::Plan& DynamicGraph::State::plan_for(const std::vector<std::int64_t>& key) {
  if (auto it = by_key.find(key); it != by_key.end()) {
    plans.splice(plans.begin(), plans, it->second);  // most recently run first
    return plans.front();
  }
  InputShapes concrete;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    std::vector<std::int64_t> d;
    for (std::size_t a = 0; a < shapes[k].second.size(); ++a) {
      const int i = dim_of[k][a];
      d.push_back(i >= 0 ? key[static_cast<std::size_t>(i)] : shapes[k].second[a].size());
    }
    concrete.push_back({shapes[k].first, Shape(std::span<const std::int64_t>(d))});
  }
  Plan p{key, build(concrete)};
  ++compiles;
  const detail::Plan& plan = p.cg.live("run").plan();
  p.writes = std::any_of(plan.nodes.begin(), plan.nodes.end(),
                         [](const detail::PlanNode& n) { return n.writes_variable(); });
  plans.push_front(std::move(p));
  by_key[key] = plans.begin();
  if (holder != nullptr) sync(plans.front());  // before the holder can be evicted
  while (plans.size() > options.max_plans) {
    if (&plans.back() == holder) holder = &plans.front();  // it holds the newest state now
    if (&plans.back() == last) last = nullptr;
    by_key.erase(plans.back().key);
    plans.pop_back();
  }
  return plans.front();
}

DynamicGraph::DynamicGraph(GraphCompiler compiler, Graph graph, DynamicShapes shapes,
                           std::vector<Node> fetches, DynamicOptions options)
    : DynamicGraph(Build(), std::move(shapes), options) {
  s_->build = [c = detail::sharing_variables(std::move(compiler), s_->store), g = std::move(graph),
               f = std::move(fetches)](const InputShapes& s) {
    return c.compile(g, s, std::span<const Node>(f));
  };
}

DynamicGraph::DynamicGraph(Build build, DynamicShapes shapes, VariableStore variables,
                           DynamicOptions options)
    : DynamicGraph(std::move(build), std::move(shapes), options) {
  s_->store = std::move(variables);
}

DynamicGraph::DynamicGraph(Build build, DynamicShapes shapes, DynamicOptions options)
    : s_(std::make_unique<State>()) {
  if (options.max_plans < 1) throw UsageError("DynamicOptions::max_plans must be at least 1");
  for (const auto& [input, dims] : shapes) {
    for (const Dim& d : dims) {
      if (d.named()) {
        s_->names.push_back(d.name());
      } else if (d.size() < 1) {
        throw ShapeError("input '" + input + "' " + dims_str(dims) + ": a fixed dim of " +
                         std::to_string(d.size()) + " (sizes are positive; name a dim to vary it)");
      }
    }
  }
  std::sort(s_->names.begin(), s_->names.end());
  s_->names.erase(std::unique(s_->names.begin(), s_->names.end()), s_->names.end());
  for (const auto& [input, dims] : shapes) {
    std::vector<int> idx;
    for (const Dim& d : dims) {
      idx.push_back(d.named() ? static_cast<int>(
                                    std::lower_bound(s_->names.begin(), s_->names.end(), d.name()) -
                                    s_->names.begin())
                              : -1);
    }
    s_->dim_of.push_back(std::move(idx));
  }
  s_->build = std::move(build);
  s_->shapes = std::move(shapes);
  s_->options = options;
}

DynamicGraph::DynamicGraph(DynamicGraph&&) noexcept = default;
DynamicGraph& DynamicGraph::operator=(DynamicGraph&&) noexcept = default;
DynamicGraph::~DynamicGraph() = default;

void DynamicGraph::run(std::initializer_list<FeedItem> feeds, const DimSizes& dims) {
  run(std::span<const FeedItem>(feeds.begin(), feeds.size()), dims);
}

void DynamicGraph::run(std::span<const FeedItem> feeds, const DimSizes& dims) {
  State& s = *s_;
  const std::vector<std::int64_t> key = s.resolve(feeds, dims);
  State::Plan& p = s.plan_for(key);
  if (s.holder != nullptr) s.sync(p);
  s.last = &p;
  if (s.dims.size() != key.size() ||
      !std::equal(key.begin(), key.end(), s.dims.begin(),
                  [](std::int64_t v, const auto& d) { return v == d.second; })) {
    s.dims.clear();
    for (std::size_t i = 0; i < key.size(); ++i) s.dims.push_back({s.names[i], key[i]});
  }
  p.cg.run(feeds);  // a run that throws leaves variables unchanged (Executable::execute)
  if (p.writes) {
    p.version = ++s.version;
    s.holder = &p;
  }
}

const CompiledGraph& DynamicGraph::last_run() const {
  if (s_->last == nullptr) throw UsageError("DynamicGraph: nothing has run yet");
  return s_->last->cg;
}
CompiledGraph& DynamicGraph::current() {
  last_run();  // the check
  return s_->last->cg;
}

std::vector<float> DynamicGraph::read(Node n) const {
  return last_run().read(n);
}
std::vector<float> DynamicGraph::read(std::string_view name) const {
  return last_run().read(name);
}
std::vector<std::int32_t> DynamicGraph::read_i32(Node n) const {
  return last_run().read_i32(n);
}
std::vector<std::int32_t> DynamicGraph::read_i32(std::string_view name) const {
  return last_run().read_i32(name);
}
Shape DynamicGraph::shape(Node n) const {
  return last_run().shape(n);
}
Shape DynamicGraph::shape(std::string_view name) const {
  return last_run().shape(name);
}
const DimSizes& DynamicGraph::dims() const {
  return s_->dims;
}

// Writes and loads go to the plan with the newest state, which then becomes the holder: every
// other plan is brought up to date before it next runs. (save and load are in
// src/onnx/checkpoint.cpp, with CompiledGraph's.)
CompiledGraph& DynamicGraph::state_plan(std::string_view what) {
  if (s_->last == nullptr)
    throw UsageError("DynamicGraph: " + std::string(what) + " before the first run");
  return s_->latest().cg;
}
void DynamicGraph::state_written() {
  State::Plan& p = s_->latest();
  p.version = ++s_->version;
  s_->holder = &p;
}
void DynamicGraph::write(std::string_view name, std::span<const float> data) {
  state_plan("write").write(name, data);
  state_written();
}

std::size_t DynamicGraph::plans() const {
  return s_->plans.size();
}
std::size_t DynamicGraph::compiles() const {
  return s_->compiles;
}
std::size_t DynamicGraph::planned_bytes() const {
  std::size_t b = 0;
  for (const State::Plan& p : s_->plans) {
    b += p.cg.planned_bytes();
    if (!s_->store) continue;
    const detail::Plan& plan = p.cg.live("planned_bytes").plan();
    for (std::uint32_t v : plan.variables) {
      const std::int32_t buf = plan.nodes[v].buffer;
      if (buf >= 0) b -= std::min(b, plan.buffer_bytes[static_cast<std::size_t>(buf)]);
    }
  }
  return s_->store ? b + s_->store->bytes() : b;
}

}  // namespace hetgraph
