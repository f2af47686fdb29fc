// SPDX-License-Identifier: Apache-2.0
#include "cpu/replay.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "compiler/plan.hpp"
#include "cpu/engine.hpp"
#include "cpu/tuning_cache.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

namespace {

// ---- a small strict JSON reader (the profile format only needs objects, arrays, strings and
// numbers; true/false/null are accepted and ignored) -------------------------------------------

struct Json {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  double num = 0;
  std::string str;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;

  const Json* get(std::string_view key) const {
    for (const auto& [k, v] : fields) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

class JsonReader {
 public:
  JsonReader(std::string_view text, const std::string& file) : s_(text), file_(file) {}

  Json document() {
    Json v = value(0);
    skip();
    if (i_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    // Line of the error, for a hand-edited file.
    const auto line =
        1 + std::count(s_.begin(), s_.begin() + static_cast<std::ptrdiff_t>(i_), '\n');
    throw DataError("replay profile " + file_ + ": line " + std::to_string(line) + ": " + what);
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  void expect(char c) {
    skip();
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  Json value(int depth) {
    if (depth > 32) fail("nested too deeply");
    skip();
    if (i_ >= s_.size()) fail("unexpected end of file");
    const char c = s_[i_];
    Json v;
    if (c == '{') {
      v.kind = Json::object;
      ++i_;
      skip();
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return v;
      }
      for (;;) {
        skip();
        std::string key = string_text();
        expect(':');
        v.fields.emplace_back(std::move(key), value(depth + 1));
        skip();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = Json::array;
      ++i_;
      skip();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        v.items.push_back(value(depth + 1));
        skip();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = Json::string;
      v.str = string_text();
      return v;
    }
    for (const char* word : {"true", "false", "null"}) {
      const std::string_view w(word);
      if (s_.substr(i_, w.size()) == w) {
        i_ += w.size();
        v.kind = w == "null" ? Json::null : Json::boolean;
        return v;
      }
    }
    const std::size_t b = i_;
    while (i_ < s_.size() && std::string_view("+-.0123456789eE").find(s_[i_]) != std::string::npos)
      ++i_;
    if (b == i_) fail(std::string("unexpected character '") + c + "'");
    const std::string num(s_.substr(b, i_ - b));
    char* end = nullptr;
    v.kind = Json::number;
    v.num = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size()) fail("malformed number '" + num + "'");
    return v;
  }
  std::string string_text() {
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) break;
        c = s_[i_++];
        if (c == 'n')
          c = '\n';
        else if (c == 't')
          c = '\t';
        else if (c == 'u') {  // labels are ASCII: \u00XX only
          if (i_ + 4 > s_.size()) fail("truncated \\u escape");
          c = static_cast<char>(std::stoi(std::string(s_.substr(i_, 4)), nullptr, 16) & 0xFF);
          i_ += 4;
        } else if (c != '"' && c != '\\' && c != '/') {
          fail("unknown escape");
        }
      }
      out += c;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }

  std::string_view s_;
  const std::string& file_;
  std::size_t i_ = 0;
};

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

// ---- profiles -------------------------------------------------------------------------------

void save_profile(const ReplayProfile& p, const std::string& path) {
  std::ostringstream o;
  o.precision(9);
  o << "{\"format\": \"hetgraph-replay-profile\", \"version\": 1, \"workload\": "
    << quoted(p.workload) << ", \"machine\": " << quoted(p.machine) << ", \"cores\": " << p.cores
    << ", \"team_sizes\": [";
  for (std::size_t i = 0; i < p.team_sizes.size(); ++i) o << (i ? ", " : "") << p.team_sizes[i];
  o << "],\n \"nodes\": [";
  for (std::size_t k = 0; k < p.nodes.size(); ++k) {
    const auto& n = p.nodes[k];
    o << (k ? ",\n  " : "\n  ") << "{\"label\": " << quoted(n.label) << ", \"op\": " << quoted(n.op)
      << ", \"us\": [";
    for (std::size_t i = 0; i < n.us.size(); ++i) o << (i ? ", " : "") << n.us[i];
    o << "]}";
  }
  o << "],\n \"corun\": {";
  bool first = true;
  for (const auto& [op, f] : p.corun) {
    o << (first ? "" : ", ") << quoted(op) << ": " << f;
    first = false;
  }
  o << "}}\n";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << o.str();
  f.close();
  if (!f) throw DataError("replay profile " + path + ": cannot write the file");
}

ReplayProfile load_profile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw DataError("replay profile " + path + ": cannot open the file");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const Json doc = JsonReader(text, path).document();
  auto bad = [&](const std::string& what) {
    return DataError("replay profile " + path + ": " + what);
  };
  if (doc.kind != Json::object) throw bad("not a JSON object");
  const Json* format = doc.get("format");
  if (!format || format->kind != Json::string || format->str != "hetgraph-replay-profile")
    throw bad("\"format\" is not \"hetgraph-replay-profile\"");
  const Json* version = doc.get("version");
  if (!version || version->kind != Json::number || version->num != 1)
    throw bad("\"version\" is not 1 (the only version this build reads)");
  ReplayProfile p;
  p.source = path;
  if (const Json* w = doc.get("workload"); w && w->kind == Json::string) p.workload = w->str;
  if (const Json* m = doc.get("machine"); m && m->kind == Json::string) p.machine = m->str;
  const Json* cores = doc.get("cores");
  if (!cores || cores->kind != Json::number || cores->num < 1 || cores->num > 4096 ||
      cores->num != std::floor(cores->num))
    throw bad("\"cores\" is not a whole number in [1, 4096]");
  p.cores = static_cast<int>(cores->num);
  const Json* teams = doc.get("team_sizes");
  if (!teams || teams->kind != Json::array || teams->items.empty())
    throw bad("\"team_sizes\" is not a non-empty array");
  p.team_sizes.clear();
  for (const Json& t : teams->items) {
    if (t.kind != Json::number || t.num < 1 || t.num > 4096 || t.num != std::floor(t.num))
      throw bad("\"team_sizes\" holds something other than a whole number in [1, 4096]");
    const int v = static_cast<int>(t.num);
    if (!p.team_sizes.empty() && v <= p.team_sizes.back())
      throw bad("\"team_sizes\" do not ascend");
    p.team_sizes.push_back(v);
  }
  if (p.team_sizes.front() != 1) throw bad("\"team_sizes\" must start at 1");
  const Json* nodes = doc.get("nodes");
  if (!nodes || nodes->kind != Json::array) throw bad("\"nodes\" is not an array");
  for (std::size_t k = 0; k < nodes->items.size(); ++k) {
    const Json& n = nodes->items[k];
    const std::string where = "node " + std::to_string(k);
    if (n.kind != Json::object) throw bad(where + " is not an object");
    const Json* label = n.get("label");
    const Json* op = n.get("op");
    const Json* us = n.get("us");
    if (!label || label->kind != Json::string) throw bad(where + ": no \"label\" string");
    if (!op || op->kind != Json::string) throw bad(where + " (" + label->str + "): no \"op\"");
    if (!us || us->kind != Json::array || us->items.size() != p.team_sizes.size())
      throw bad(where + " (" + label->str + "): \"us\" needs one time per team size (" +
                std::to_string(p.team_sizes.size()) + ")");
    ReplayProfile::Node node{label->str, op->str, {}};
    for (const Json& t : us->items) {
      if (t.kind != Json::number || !std::isfinite(t.num) || t.num < 0)
        throw bad(where + " (" + label->str + "): a time that is not a number >= 0");
      node.us.push_back(t.num);
    }
    p.nodes.push_back(std::move(node));
  }
  if (const Json* corun = doc.get("corun")) {
    if (corun->kind != Json::object) throw bad("\"corun\" is not an object");
    for (const auto& [op, f] : corun->fields) {
      if (f.kind != Json::number || !(f.num >= 1) || !std::isfinite(f.num))
        throw bad("\"corun\" of " + op + " is not a number >= 1");
      p.corun[op] = f.num;
    }
  }
  return p;
}

// ---- the model ------------------------------------------------------------------------------

double amdahl_serial_fraction(double t1, double tT, int T) {
  if (T <= 1 || !(t1 > 0)) return 1.0;
  // tT / t1 = s + (1 - s) / T  =>  s = (tT / t1 - 1 / T) / (1 - 1 / T)
  const double inv = 1.0 / T;
  return std::clamp((tT / t1 - inv) / (1 - inv), 0.0, 1.0);
}

ReplayModel::ReplayModel(ReplayProfile profile, int cores, double time_scale)
    : profile_(std::move(profile)), cores_(cores), time_scale_(time_scale) {
  if (cores_ < 1 || cores_ > 64)
    throw PlatformError("replay: virtual cores must be in [1, 64], not " + std::to_string(cores_));
  if (!(time_scale_ >= 1) || !std::isfinite(time_scale_))
    throw PlatformError("replay: time scale must be >= 1");
  if (profile_.team_sizes.empty() || profile_.team_sizes.front() != 1)
    throw DataError("replay profile " + profile_.source + ": team sizes must start at 1");
  std::string key;
  for (std::size_t k = 0; k < profile_.nodes.size(); ++k) {
    const auto& n = profile_.nodes[k];
    if (n.us.size() != profile_.team_sizes.size())
      throw DataError("replay profile " + profile_.source + ": node " + n.label +
                      " has no time per team size");
    by_label_.emplace(n.label, k);
    key += n.label + ":";
    for (double u : n.us) key += std::to_string(u) + ",";
  }
  for (const auto& [op, f] : profile_.corun) key += op + "=" + std::to_string(f) + ";";
  fingerprint_ = fnv1a64(key.data(), key.size());
  // Per op kind, Amdahl fitted on the kind's summed times at 1 thread and at the largest team
  // size: the big instances, whose scaling matters, weigh most, and tiny ones (which do not
  // split: parallel_for's grain) cannot swing it.
  const std::size_t last = profile_.team_sizes.size() - 1;
  std::map<std::string, std::pair<double, double>> sums;
  for (const auto& n : profile_.nodes) {
    if (n.op == op_name(OpKind::ParallelGroup)) continue;  // measured, not fitted
    auto& [a, b] = sums[n.op];
    a += n.us.front();
    b += n.us[last];
  }
  for (const auto& [op, s] : sums)
    serial_[op] = amdahl_serial_fraction(s.first, s.second, profile_.team_sizes[last]);
}

double ReplayModel::serial_fraction(std::string_view op) const {
  const auto it = serial_.find(std::string(op));
  return it == serial_.end() ? 1.0 : it->second;
}

double ReplayModel::corun(std::string_view op) const {
  const auto it = profile_.corun.find(std::string(op));
  return it == profile_.corun.end() ? 1.0 : it->second;
}

double ReplayModel::node_us(std::size_t k, int threads) const {
  const auto& n = profile_.nodes[k];
  const auto& teams = profile_.team_sizes;
  std::size_t i = 0;
  while (i + 1 < teams.size() && teams[i + 1] <= threads) ++i;
  if (teams[i] == threads) return n.us[i];
  const double s = serial_fraction(n.op);
  // From the measured point (teams[i], us[i]) along the kind's curve.
  return n.us[i] * (s + (1 - s) / threads) / (s + (1 - s) / teams[i]);
}

std::size_t ReplayModel::find(const Plan& p, std::uint32_t node) const {
  const PlanNode& n = p.nodes[node];
  const auto it = by_label_.find(n.label);
  if (it == by_label_.end())
    throw DataError("replay profile " + profile_.source + ": no time for node " + n.label + " (" +
                    std::string(op_name(n.op)) +
                    "): the profile was taken of another graph or compile options");
  return it->second;
}

double ReplayModel::members_us(const Plan& p, std::uint32_t node, int threads) const {
  // GroupKernel: members one thread each, schedule(dynamic, 1) over min(T, members) threads,
  // side by side (each slowed by its kind's corun factor when there are 2+ lanes).
  const auto& members = p.nodes[node].members;
  const std::size_t lanes = std::max<std::size_t>(
      1, std::min<std::size_t>(static_cast<std::size_t>(threads), members.size()));
  std::vector<double> free(lanes, 0.0);
  for (std::uint32_t m : members) {
    auto it = std::min_element(free.begin(), free.end());
    const std::size_t k = find(p, m);
    *it += node_us(k, 1) * (lanes > 1 ? corun(profile_.nodes[k].op) : 1.0);
  }
  return *std::max_element(free.begin(), free.end());
}

bool ReplayModel::measured_group(const PlanNode& n, int threads, int& at, double& us) const {
  const auto it = by_label_.find(n.label);
  if (it == by_label_.end() || profile_.nodes[it->second].op != op_name(OpKind::ParallelGroup))
    return false;
  // The largest profiled team size <= threads, of 2 or more (a group is made for teams).
  const auto& teams = profile_.team_sizes;
  for (std::size_t i = teams.size(); i-- > 1;) {
    if (teams[i] <= threads) {
      at = teams[i];
      us = profile_.nodes[it->second].us[i];
      return true;
    }
  }
  return false;
}

std::vector<double> ReplayModel::plan_us(const Plan& p, int threads) const {
  std::vector<double> us(p.nodes.size(), 0.0);
  // Groups: their members' model, times what the profile measured of the group itself (the
  // GroupKernel's OpenMP region, members' contention) at the nearest team size; groups the
  // profile has not seen get the ratio of those it has.
  double measured = 0, modelled = 0;
  std::vector<double> ratio(p.nodes.size(), 0.0);
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    int at = 0;
    double m = 0;
    if (n.op != OpKind::ParallelGroup || n.group >= 0 || !measured_group(n, threads, at, m))
      continue;
    const double model = members_us(p, i, at);
    if (model <= 0) continue;
    ratio[i] = m / model;
    measured += m;
    modelled += model;
  }
  const double others = modelled > 0 ? measured / modelled : 1.0;
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    if (!n.has_work() || n.group >= 0) continue;
    if (n.op == OpKind::ParallelGroup) {
      us[i] = members_us(p, i, threads) * (ratio[i] > 0 ? ratio[i] : others);
    } else {
      us[i] = node_us(find(p, i), threads);
    }
  }
  return us;
}

std::vector<double> ReplayModel::plan_busy_us(const Plan& p, int threads) const {
  std::vector<double> busy = plan_us(p, threads);
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    if (busy[i] == 0) continue;
    if (n.op == OpKind::ParallelGroup) {
      busy[i] = 0;
      for (std::uint32_t m : n.members) busy[i] += node_us(find(p, m), 1);
    } else {
      busy[i] *= threads;  // the team is held for the whole kernel
    }
  }
  return busy;
}

// ---- waiting --------------------------------------------------------------------------------

namespace {

std::int64_t mono_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

void sleep_until(std::int64_t deadline) {
  timespec ts{static_cast<time_t>(deadline / 1'000'000'000),
              static_cast<long>(deadline % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

void precise_timers() {
  // The default 50 us timer slack would dominate short waits; per thread.
  thread_local bool set = [] { return prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0; }();
  (void)set;
}

// The median oversleep of an absolute-deadline sleep on this machine (a VM: ~15-20 us), found
// once per process.
std::int64_t oversleep_ns() {
  static const std::int64_t v = [] {
    precise_timers();
    std::vector<std::int64_t> over;
    for (int i = 0; i < 41; ++i) {
      const std::int64_t d = mono_ns() + 100'000;
      sleep_until(d);
      over.push_back(mono_ns() - d);
    }
    std::nth_element(over.begin(), over.begin() + 20, over.end());
    return std::max<std::int64_t>(0, over[20]);
  }();
  return v;
}

// Not inlined: the loop measured below must be the very loop the waits run (two copies of it
// ran at different speeds in the sanitizer build, one twice the other).
[[gnu::noinline]] void spin(std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) asm volatile("" ::: "memory");
}

// Iterations of spin()'s loop per nanosecond, measured once per process: the fastest of five
// runs of a million (a run the scheduler interrupts only looks slower).
double spins_per_ns() {
  static const double v = [] {
    constexpr std::int64_t n = 1 << 20;
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    for (int r = 0; r < 5; ++r) {
      const std::int64_t t0 = mono_ns();
      spin(n);
      best = std::min(best, mono_ns() - t0);
    }
    return static_cast<double>(n) / static_cast<double>(std::max<std::int64_t>(best, 1));
  }();
  return v;
}

void spin_ns(std::int64_t ns) {
  spin(std::llround(static_cast<double>(ns) * spins_per_ns()));
}

}  // namespace

std::int64_t clock_read_ns() {
  static const std::int64_t v = [] {
    std::vector<std::int64_t> gap;
    for (int i = 0; i < 1001; ++i) {
      const std::int64_t a = now_ns();
      gap.push_back(now_ns() - a);
    }
    std::nth_element(gap.begin(), gap.begin() + 500, gap.end());
    return std::max<std::int64_t>(0, gap[500]);
  }();
  return v;
}

namespace {

// A wait of a microsecond or more: sleep, or yield when shorter than a sleep's overshoot.
void wait_long(std::int64_t ns) {
  const std::int64_t deadline = mono_ns() + ns;
  precise_timers();
  const std::int64_t early = oversleep_ns();
  if (ns > early) {
    sleep_until(deadline - early);
    return;
  }
  // Shorter than a sleep's own overshoot: give the core away until the deadline.
  while (mono_ns() < deadline) sched_yield();
}

}  // namespace

void replay_wait(std::int64_t ns) {
  if (ns >= 1000) {
    wait_long(ns);
    return;
  }
  // Below a microsecond a counted loop: a sched_yield costs about that itself, and each clock
  // read about 30 ns, so nanosecond kernels (the thread-pool workloads) would replay several
  // times too long watching the clock. Waits of a few nanoseconds are pooled per thread and
  // spun once 250 ns have gathered: a loop that short mispredicts its exit, which cost about
  // as much again as the waits (threadpool-dag's replay, 2026-11-28); a kernel's wait then
  // ends up to 250 ns after it, on the same thread. No branch on a wait of zero either: half
  // of threadpool-dag's kernels are, in no order a predictor learns.
  [[gnu::tls_model("initial-exec")]] thread_local std::int64_t pooled = 0;  // no call to reach it
  pooled += std::max<std::int64_t>(ns, 0);
  if (pooled < 250) return;
  spin_ns(pooled);
  pooled = 0;
}

class ReplayKernel final : public CpuKernel {
 public:
  ReplayKernel(const ReplayKernels& set, std::uint32_t k, std::atomic<int>& running, double corun)
      : set_(&set), running_(&running), corun_(corun), k_(k) {}
  void run(const ExecCtx& ctx) override {
    const std::int64_t ns = set_->wait_ns(k_, ctx.nthreads);
    if (ns < 1000) {
      // Nanosecond kernels (the thread-pool workloads) stay out of the co-run count: two
      // executors' increments of one shared counter would cost more than such a kernel.
      replay_wait(ns);
      return;
    }
    // Beside another kernel: slowed as the profile measured (contention is not extrapolated
    // beyond what this machine's cores showed: see bench/README.md, "replay").
    const bool beside = running_->fetch_add(1, std::memory_order_relaxed) > 0;
    replay_wait(beside ? static_cast<std::int64_t>(static_cast<double>(ns) * corun_) : ns);
    running_->fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  const ReplayKernels* set_;
  std::atomic<int>* running_;
  double corun_;
  std::uint32_t k_;
};

ReplayKernels::ReplayKernels(const ReplayModel& m, const Plan& p,
                             const std::vector<std::uint32_t>& nodes, std::vector<double> corun)
    : n_(nodes.size()), max_threads_(m.cores()) {
  ns_.assign((static_cast<std::size_t>(max_threads_) + 1) * n_, 0);  // row 0 unused
  for (int t = 1; t <= max_threads_; ++t) {
    const std::vector<double> us = m.plan_us(p, t);
    for (std::size_t k = 0; k < n_; ++k) {
      ns_[static_cast<std::size_t>(t) * n_ + k] =
          static_cast<std::int64_t>(std::llround(us[nodes[k]] * m.time_scale() * 1e3));
    }
  }
  kernels_.reserve(n_);
  for (std::size_t k = 0; k < n_; ++k)
    kernels_.emplace_back(*this, static_cast<std::uint32_t>(k), m.running(), corun[k]);
}

ReplayKernels::~ReplayKernels() = default;

CpuKernel& ReplayKernels::operator[](std::size_t k) {
  return kernels_[k];
}

}  // namespace hetgraph::detail::cpu
