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

#include "common/env.hpp"
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

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
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
    std::string s = "cpu " + cpu_model() + "; " + Topology::get().describe() + "; hetgraph " +
                    HETGRAPH_VERSION_STRING + " tuning format " + std::to_string(kFormat) +
                    "; onednn " + std::to_string(d->major) + "." + std::to_string(d->minor) + "." +
                    std::to_string(d->patch) + " " + d->hash + "; hwloc " +
                    std::to_string(hw >> 16) + "." + std::to_string((hw >> 8) & 0xff) + "." +
                    std::to_string(hw & 0xff) + "; openmp " + std::to_string(_OPENMP) +
                    "; compiler " + __VERSION__;
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

std::optional<TunedChoice> TuningCache::load(std::size_t nodes) const {
  if (!enabled()) return std::nullopt;
  std::ifstream f(path_);
  if (!f) return std::nullopt;  // no entry yet
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
  if (sum.empty()) return note(path_, "corrupt: no checksum"), std::nullopt;
  if (sum != hex64(fnv1a64(body.data(), body.size())))
    return note(path_, "corrupt: checksum mismatch"), std::nullopt;
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
  std::string body = o.str();
  body += "checksum " + hex64(fnv1a64(body.data(), body.size())) + "\n";
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  if (ec) return false;
  // A unique temporary name beside the entry, then an atomic rename over it.
  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid()) + "." +
                          hex64(reinterpret_cast<std::uintptr_t>(&body));
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!(f << body) || !f.flush()) {
      f.close();
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, path_, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace hetgraph::detail::cpu
