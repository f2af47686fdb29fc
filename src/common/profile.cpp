// SPDX-License-Identifier: Apache-2.0
#include "common/profile.hpp"

#include <algorithm>
#include <cstdio>

#include "common/trace.hpp"

namespace hetgraph {
using namespace detail;

// ---- collecting ----------------------------------------------------------------------------

void ProfileCollector::add(const Executable& exe, std::uint32_t node, int /*lane*/,
                           std::int64_t start_ns, std::int64_t end_ns, std::int64_t /*run*/) {
  const auto [it, fresh] = index_.try_emplace({&exe, node}, entries_.size());
  if (fresh) {
    // Names, kernel and shapes once per node: the events of later runs only add time.
    const PlanNode& n = exe.plan().nodes[node];
    Entry e;
    e.node.name = event_name(n);
    e.node.op = std::string(op_name(n.op));
    e.node.kernel = exe.kernel_name(node);
    e.node.shape = n.type.shape;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.reads_input(k)) e.node.input_shapes.push_back(exe.plan().nodes[n.inputs[k]].type.shape);
    }
    entries_.push_back(std::move(e));
  }
  Entry& e = entries_[it->second];
  ++e.node.calls;
  e.ns += std::max<std::int64_t>(0, end_ns - start_ns);
}

Profile ProfileCollector::result() const {
  Profile p;
  p.runs = runs_;
  std::int64_t total_ns = 0;
  for (const Entry& e : entries_) total_ns += e.ns;
  p.node_s = static_cast<double>(total_ns) * 1e-9;
  const double share = total_ns > 0 ? 1.0 / static_cast<double>(total_ns) : 0.0;
  std::map<std::string, Profile::Op> ops;
  for (const Entry& e : entries_) {
    Profile::Node n = e.node;
    n.total_s = static_cast<double>(e.ns) * 1e-9;
    n.mean_s = n.calls > 0 ? n.total_s / static_cast<double>(n.calls) : 0.0;
    n.share = static_cast<double>(e.ns) * share;
    Profile::Op& op = ops[n.op];
    op.op = n.op;
    ++op.nodes;
    op.calls += n.calls;
    op.total_s += n.total_s;
    op.share += n.share;
    p.nodes.push_back(std::move(n));
  }
  for (auto& [name, op] : ops) p.ops.push_back(std::move(op));
  // Largest first; ties in a fixed order (by name) so that reports compare.
  std::stable_sort(p.ops.begin(), p.ops.end(), [](const Profile::Op& a, const Profile::Op& b) {
    return a.total_s > b.total_s;
  });
  std::stable_sort(p.nodes.begin(), p.nodes.end(),
                   [](const Profile::Node& a, const Profile::Node& b) {
                     return a.total_s > b.total_s || (a.total_s == b.total_s && a.name < b.name);
                   });
  return p;
}

// ---- the report ----------------------------------------------------------------------------

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// `s` in a column of `width`: padded, or cut with "..." where longer.
std::string cell(const std::string& s, std::size_t width) {
  if (s.size() > width) return s.substr(0, width - 3) + "...";
  return s + std::string(width - s.size(), ' ');
}
std::string right(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

// The widest of a column's entries and its heading, up to `cap`.
template <typename Rows, typename Get>
std::size_t width_of(const Rows& rows, std::size_t count, const std::string& heading, Get get,
                     std::size_t cap) {
  std::size_t w = heading.size();
  for (std::size_t i = 0; i < count && i < rows.size(); ++i) w = std::max(w, get(rows[i]).size());
  return std::min(w, cap);
}

// A concat of dozens of inputs would fill lines: the first few, then how many more.
std::string shapes_text(const Profile::Node& n) {
  constexpr std::size_t kShown = 4;
  const std::vector<Shape>& in = n.input_shapes;
  const std::size_t shown = in.size() > kShown ? kShown - 1 : in.size();
  std::string s;
  for (std::size_t k = 0; k < shown; ++k) s += in[k].str() + " ";
  if (shown < in.size()) s += "+" + std::to_string(in.size() - shown) + " more ";
  return s + "-> " + n.shape.str();
}

std::string percent(double share) {
  return fmt("%.1f%%", 100.0 * share);
}

std::string ops_table(const Profile& p) {
  const double per_run = 1e3 / static_cast<double>(std::max<std::int64_t>(1, p.runs));
  const std::size_t w = width_of(
      p.ops, p.ops.size(), "op kind", [](const Profile::Op& o) { return o.op; }, 40);
  std::string out = cell("op kind", w) + "  nodes     calls    ms/run   share\n";
  for (const Profile::Op& o : p.ops) {
    out += cell(o.op, w) + right(std::to_string(o.nodes), 7) + right(std::to_string(o.calls), 10) +
           right(fmt("%.4f", o.total_s * per_run), 10) + right(percent(o.share), 8) + "\n";
  }
  return out;
}

std::string nodes_table(const Profile& p, std::size_t top) {
  const auto name = [](const Profile::Node& n) { return n.name; };
  const auto op = [](const Profile::Node& n) { return n.op; };
  const auto kernel = [](const Profile::Node& n) { return n.kernel; };
  const std::string heading =
      "top " + std::to_string(top) + " of " + std::to_string(p.nodes.size()) + " nodes";
  const std::size_t wn = width_of(p.nodes, top, heading, name, 40),
                    wo = width_of(p.nodes, top, "op", op, 24),
                    wk = width_of(p.nodes, top, "kernel", kernel, 32);
  std::string out = cell(heading, wn) + "  " + cell("op", wo) + "  " + cell("kernel", wk) +
                    "   ms/call   share  shapes (inputs -> output)\n";
  for (std::size_t i = 0; i < top && i < p.nodes.size(); ++i) {
    const Profile::Node& n = p.nodes[i];
    out += cell(n.name, wn) + "  " + cell(n.op, wo) + "  " + cell(n.kernel, wk) +
           right(fmt("%.4f", n.mean_s * 1e3), 10) + right(percent(n.share), 8) + "  " +
           shapes_text(n) + "\n";
  }
  return out;
}

void json_shape(std::string& out, const Shape& s) {
  out += '[';
  for (int d = 0; d < s.rank(); ++d) out += (d ? "," : "") + std::to_string(s[d]);
  out += ']';
}

}  // namespace

std::string Profile::table(int top) const {
  if (runs == 0) return "profile   no runs profiled\n";
  const double per_run = 1e3 * node_s / static_cast<double>(runs);
  std::string out =
      "profile   " + std::to_string(runs) + " runs, " + fmt("%.4f", per_run) +
      " ms of node time per run\n"
      "          (every node's time summed: parallel engines overlap nodes, so shares "
      "are of this sum, not of wall time)\n";
  out += ops_table(*this);
  if (top > 0) out += nodes_table(*this, std::min(nodes.size(), static_cast<std::size_t>(top)));
  return out;
}

std::string Profile::json() const {
  const auto num = [](double v) { return fmt("%.9g", v); };
  std::string out =
      "{\"runs\":" + std::to_string(runs) + ",\"node_s\":" + num(node_s) + ",\"ops\":[";
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    out += std::string(i ? "," : "") + "{\"op\":\"" + json_escape(o.op) +
           "\",\"nodes\":" + std::to_string(o.nodes) + ",\"calls\":" + std::to_string(o.calls) +
           ",\"total_s\":" + num(o.total_s) + ",\"share\":" + num(o.share) + "}";
  }
  out += "],\"nodes\":[";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    out += std::string(i ? "," : "") + "{\"name\":\"" + json_escape(n.name) + "\",\"op\":\"" +
           json_escape(n.op) + "\",\"kernel\":\"" + json_escape(n.kernel) + "\",\"shape\":";
    json_shape(out, n.shape);
    out += ",\"input_shapes\":[";
    for (std::size_t k = 0; k < n.input_shapes.size(); ++k) {
      if (k) out += ',';
      json_shape(out, n.input_shapes[k]);
    }
    out += "],\"calls\":" + std::to_string(n.calls) + ",\"total_s\":" + num(n.total_s) +
           ",\"mean_s\":" + num(n.mean_s) + ",\"share\":" + num(n.share) + "}";
  }
  return out + "]}";
}

}  // namespace hetgraph
