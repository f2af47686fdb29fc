// SPDX-License-Identifier: Apache-2.0
#include "cpu/tuning_cache.hpp"

#include <hwloc.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <set>
#include <sstream>

#include "util/env.hpp"
#include "cpu/simd/code_path.hpp"
#include "cpu/topology.hpp"
#include "hetgraph/error.hpp"

#ifndef HETGRAPH_VERSION_STRING
#define HETGRAPH_VERSION_STRING "unknown"
#endif

namespace hetgraph::detail::cpu {

namespace fs = std::filesystem;

namespace {

// Bump when what an entry means changes (engine behaviour the tuning depends on, the format).
constexpr int kFormat = 1;

std::string hex64(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// One note per entry and process: a broken entry read by every compile of a test suite would
// otherwise repeat it thousands of times.
void note(const std::string& path, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> told;
  std::lock_guard lk(mu);
  if (!told.insert(path).second) return;
  std::fprintf(stderr, "hetgraph: tuning cache entry %s ignored (%s); the engine searches again\n",
               path.c_str(), why.c_str());
}

// One value and nothing else after it.
template <typename T>
bool read_all(std::istringstream& in, T& out) {
  if (!(in >> out)) return false;
  in >> std::ws;
  return in.eof();
}

// Whitespace-separated values up to the end of the line ("nan" and the like do not parse).
template <typename T>
bool read_list(std::istringstream& in, std::vector<T>& out) {
  for (T x; in >> std::ws, !in.eof();) {
    if (!(in >> x)) return false;
    out.push_back(x);
  }
  return true;
}

}  // namespace

std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

const std::string& TuningCache::machine() {
  static const std::string m = [] {
    const dnnl_version_t* d = dnnl_version();
    const unsigned hw = hwloc_get_api_version();
    std::string s =
        "cpu " + Topology::cpu_model() + "; " + Topology::get().describe() + "; hetgraph " +
        HETGRAPH_VERSION_STRING + " tuning format " + std::to_string(kFormat) + "; onednn " +
        std::to_string(d->major) + "." + std::to_string(d->minor) + "." + std::to_string(d->patch) +
        " " + d->hash + "; hwloc " + std::to_string(hw >> 16) + "." +
        std::to_string((hw >> 8) & 0xff) + "." + std::to_string(hw & 0xff) + "; openmp " +
        std::to_string(_OPENMP) + "; compiler " + __VERSION__ + "; code path " + code_path().name +
        "; onednn isa " + std::to_string(static_cast<unsigned>(dnnl::get_effective_cpu_isa()));
    for (char& c : s) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return s;
  }();
  return m;
}

std::string TuningCache::directory() {
  if (env_choice<PlatformError>("HETGRAPH_TUNING_CACHE", {"", "0", "1"}) == "0") return {};
  if (const std::string x = env_value("XDG_CACHE_HOME"); !x.empty()) return x + "/hetgraph/tuning";
  if (const std::string h = env_value("HOME"); !h.empty()) return h + "/.cache/hetgraph/tuning";
  return {};
}

TuningCache::TuningCache(std::uint64_t graph, std::string options) {
  key_ = "graph " + hex64(graph) + "; " + options + "; " + machine();
  for (char& c : key_) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const std::string dir = directory();
  if (!dir.empty()) path_ = dir + "/" + hex64(fnv1a64(key_.data(), key_.size())) + ".tuning";
}

namespace {

// body + its checksum line, written to a temporary file beside `path` and renamed over it.
bool write_entry(const std::string& path, std::string body) {
  body += "checksum " + hex64(fnv1a64(body.data(), body.size())) + "\n";
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return false;
  // A unique temporary name beside the entry, then an atomic rename over it.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          hex64(reinterpret_cast<std::uintptr_t>(&body));
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!(f << body) || !f.flush()) {
      f.close();
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

// The lines of the entry at `path` before its checksum, when the checksum matches; nullopt
// when there is no file, or (with a note) when it is corrupt.
std::optional<std::vector<std::string>> read_entry(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::string body, line, sum;
  std::vector<std::string> lines;
  while (std::getline(f, line)) {
    if (line.rfind("checksum ", 0) == 0) {
      sum = line.substr(9);
      break;
    }
    body += line + "\n";
    lines.push_back(line);
  }
  if (sum.empty()) return note(path, "corrupt: no checksum"), std::nullopt;
  if (sum != hex64(fnv1a64(body.data(), body.size())))
    return note(path, "corrupt: checksum mismatch"), std::nullopt;
  return lines;
}

}  // namespace

std::optional<TunedChoice> TuningCache::load(std::size_t nodes) const {
  if (!enabled()) return std::nullopt;
  const std::optional<std::vector<std::string>> read = read_entry(path_);
  if (!read) return std::nullopt;  // no entry yet, or corrupt (noted)
  const std::vector<std::string>& lines = *read;
  // Every line is required, once, in this order, and every number must parse: an entry is a
  // hint from an earlier process, trusted only when it is exactly what store() writes.
  TunedChoice c;
  const char* const names[] = {"hetgraph-tuning", "key",       "nodes",
                               "engine",          "executors", "threads",
                               "per_op_threads",  "cost",      "node_threads"};
  std::size_t next = 0;
  for (const std::string& l : lines) {
    const auto sp = l.find(' ');
    const std::string name = l.substr(0, sp),
                      value = sp == std::string::npos ? "" : l.substr(sp + 1);
    if (name == "variant" && next >= std::size(names) - 1) {  // last, where written
      std::istringstream in(value);
      if (!read_all(in, c.variant)) return note(path_, "corrupt: line 'variant'"), std::nullopt;
      next = std::size(names);
      continue;
    }
    if (next >= std::size(names) || name != names[next])
      return note(path_, "corrupt: unexpected line '" + name + "'"), std::nullopt;
    ++next;
    std::istringstream in(value);
    bool ok = true;
    if (name == "hetgraph-tuning") {
      if (value != std::to_string(kFormat))
        return note(path_, "stale: format " + value), std::nullopt;
    } else if (name == "key") {
      if (value != key_)
        return note(path_, "stale: written for another graph or machine"), std::nullopt;
    } else if (name == "nodes") {
      ok = read_all(in, c.nodes);
      if (ok && c.nodes != nodes)
        return note(path_, "stale: " + value + " nodes, the plan has " + std::to_string(nodes)),
               std::nullopt;
    } else if (name == "engine") {
      c.engine = value;
    } else if (name == "executors") {
      ok = read_all(in, c.executors);
    } else if (name == "threads") {
      ok = read_all(in, c.threads);
    } else if (name == "per_op_threads") {
      int v = -1;
      ok = read_all(in, v) && (v == 0 || v == 1);
      c.per_op_threads = v == 1;
    } else if (name == "cost") {
      ok = read_list(in, c.cost_us);
    } else {
      ok = read_list(in, c.node_threads);
    }
    if (!ok) return note(path_, "corrupt: line '" + name + "'"), std::nullopt;
  }
  // node_threads is written only with per-op thread counts.
  if (next < std::size(names) - 1) return note(path_, "corrupt: truncated"), std::nullopt;
  const int cores = Topology::get().allowed();
  std::string bad;
  if (c.engine != "critical-path" && c.engine != "sequential") {
    bad = "corrupt: engine '" + c.engine + "'";
  } else if (c.executors < 1 || c.threads < 1 || c.executors * c.threads > cores) {
    bad = "stale: " + std::to_string(c.executors) + "x" + std::to_string(c.threads) + " on " +
          std::to_string(cores) + " cores";
  } else if (c.cost_us.size() != (c.engine == "critical-path" ? nodes : 0)) {
    bad = "corrupt: " + std::to_string(c.cost_us.size()) + " costs for " + std::to_string(nodes) +
          " nodes";
  } else if (c.node_threads.size() != (c.per_op_threads ? nodes : 0)) {
    bad = "corrupt: per-op thread counts for " + std::to_string(c.node_threads.size()) + " nodes";
  }
  for (double x : c.cost_us) {
    if (bad.empty() && !(std::isfinite(x) && x >= 0))
      bad = "corrupt: a cost of " + std::to_string(x);
  }
  for (int t : c.node_threads) {
    if (bad.empty() && (t < 1 || t > c.threads))
      bad = "corrupt: a node on " + std::to_string(t) + " threads";
  }
  if (!bad.empty()) return note(path_, bad), std::nullopt;
  return c;
}

bool TuningCache::store(const TunedChoice& c) const {
  if (!enabled()) return false;
  std::ostringstream o;
  o << "hetgraph-tuning " << kFormat << "\nkey " << key_ << "\nnodes " << c.nodes << "\nengine "
    << c.engine << "\nexecutors " << c.executors << "\nthreads " << c.threads << "\nper_op_threads "
    << (c.per_op_threads ? 1 : 0) << "\ncost";
  o.precision(9);
  for (double x : c.cost_us) o << ' ' << x;
  o << "\n";
  if (c.per_op_threads) {
    o << "node_threads";
    for (int t : c.node_threads) o << ' ' << t;
    o << "\n";
  }
  if (c.variant != 0) o << "variant " << c.variant << "\n";
  if (!write_entry(path_, o.str())) return false;
  std::error_code ec;
  fs::remove(path_ + ".progress", ec);  // the search is over
  return true;
}

bool TuningCache::store_progress(const SearchProgress& p) const {
  if (!enabled()) return false;
  std::ostringstream o;
  o.precision(9);
  o << "hetgraph-tuning-progress " << kFormat << "\nkey " << key_ << "\nnodes " << p.nodes
    << "\nrounds " << p.rounds << "\nturn " << p.turn << ' ' << p.turn_runs << "\n";
  for (const SearchProgress::Candidate& c : p.candidates) {
    o << "candidate " << c.label << "\nstate " << (c.warm ? 1 : 0) << ' ' << c.turns << ' '
      << (c.dropped ? 1 : 0) << "\ncost";
    for (double x : c.cost_us) o << ' ' << x;
    o << "\ntimes";
    for (double x : c.times) o << ' ' << x;
    o << "\n";
  }
  return write_entry(path_ + ".progress", o.str());
}

std::optional<SearchProgress> TuningCache::load_progress(
    std::size_t nodes, const std::vector<std::string>& labels) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_ + ".progress";
  const std::optional<std::vector<std::string>> lines = read_entry(path);
  if (!lines) return std::nullopt;
  const std::vector<std::string>& l = *lines;
  auto value = [&](std::size_t i, const char* name) -> std::optional<std::string> {
    if (i >= l.size()) return std::nullopt;
    const std::string want = std::string(name) + " ";
    if (l[i].rfind(want, 0) != 0 && l[i] != name) return std::nullopt;
    return l[i].size() > want.size() ? l[i].substr(want.size()) : std::string();
  };
  SearchProgress p;
  const std::size_t want_lines = 5 + 4 * labels.size();
  if (l.size() != want_lines) return note(path, "corrupt: truncated"), std::nullopt;
  if (value(0, "hetgraph-tuning-progress") != std::to_string(kFormat))
    return note(path, "stale: format"), std::nullopt;
  if (value(1, "key") != key_)
    return note(path, "stale: written for another graph or machine"), std::nullopt;
  {
    const auto v = value(2, "nodes");
    std::istringstream in(v.value_or(""));
    if (!v || !read_all(in, p.nodes) || p.nodes != nodes)
      return note(path, "stale: another plan"), std::nullopt;
  }
  {
    const auto v = value(3, "rounds");
    std::istringstream in(v.value_or(""));
    if (!v || !read_all(in, p.rounds) || p.rounds < 0)
      return note(path, "corrupt: line 'rounds'"), std::nullopt;
  }
  {
    const auto v = value(4, "turn");
    std::istringstream in(v.value_or(""));
    if (!v || !(in >> p.turn >> p.turn_runs) || !(in >> std::ws).eof() ||
        p.turn >= labels.size() || p.turn_runs < 0)
      return note(path, "corrupt: line 'turn'"), std::nullopt;
  }
  for (std::size_t k = 0; k < labels.size(); ++k) {
    const std::size_t i = 5 + 4 * k;
    SearchProgress::Candidate c;
    const auto label = value(i, "candidate");
    if (label != labels[k]) return note(path, "stale: other candidates"), std::nullopt;
    c.label = *label;
    const auto st = value(i + 1, "state"), cost = value(i + 2, "cost"),
               times = value(i + 3, "times");
    int warm = -1, dropped = -1;
    std::istringstream s1(st.value_or("")), s2(cost.value_or("")), s3(times.value_or(""));
    if (!st || !(s1 >> warm >> c.turns >> dropped) || !(s1 >> std::ws).eof() ||
        (warm != 0 && warm != 1) || (dropped != 0 && dropped != 1) || c.turns < 0 || !cost ||
        !read_list(s2, c.cost_us) || !times || !read_list(s3, c.times))
      return note(path, "corrupt: candidate " + labels[k]), std::nullopt;
    c.warm = warm == 1;
    c.dropped = dropped == 1;
    const bool parallel = labels[k].rfind("critical-path", 0) == 0;
    bool bad = c.cost_us.size() != (c.warm && parallel ? nodes : 0);
    for (double x : c.cost_us) bad = bad || !(std::isfinite(x) && x >= 0);
    for (double x : c.times) bad = bad || !(std::isfinite(x) && x > 0);
    if (bad) return note(path, "corrupt: candidate " + labels[k]), std::nullopt;
    p.candidates.push_back(std::move(c));
  }
  return p;
}

}  // namespace hetgraph::detail::cpu
