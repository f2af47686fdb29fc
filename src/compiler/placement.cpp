// SPDX-License-Identifier: Apache-2.0
// Placement (HEFT), transfers at device boundaries and the split into per-device parts; see
// placement.hpp for the passes and their order.
//
// HEFT (Topcuoglu, Hariri and Wu 2002): every task (a node with a kernel) gets an upward rank,
// its mean cost over the devices that can run it plus the largest (mean transfer + rank) over
// its successors; tasks are taken by decreasing rank (a topological order) and each goes to
// the device where it would finish first, inserted into the earliest idle gap of that device's
// timeline after its inputs arrive. Devices that share the host's cores (an OpenCL CPU device)
// share the host's timeline: they can never run beside the CPU, so only a node's own speed can
// make them worth a transfer. Sources are not tasks: a pinned input or variable is available
// at time 0 where it lives and costs a transfer elsewhere; unpinned ones are free in a first
// round, which decides where they live, and cost their transfers in the second.
#include "compiler/placement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "hetgraph/error.hpp"

namespace hetgraph::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Rates of a device whose figures are missing (0): never divides by zero, and only a given
// figure makes a device look fast.
constexpr double kFallbackRate = 1.0;
constexpr double kHostCopyGBps = 10.0;  // host memcpy when the platform has no CPU member

double rate(double v) {
  return v > 0 ? v : kFallbackRate;
}

std::uint32_t base_of(const Plan& p, std::uint32_t v) {
  while (p.nodes[v].storage == Storage::View) v = p.nodes[v].inputs[0];
  return v;
}

bool is_source(const PlanNode& n) {
  return n.storage == Storage::Input || n.storage == Storage::Variable ||
         n.storage == Storage::Constant;
}
// A node with a kernel of its own, placed by scheduling (assigns follow their variable).
bool is_task(const PlanNode& n) {
  return n.storage == Storage::Computed;
}

std::string fmt_us(double us) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g us", us);
  return b;
}

/// A device's busy intervals; insertion finds the earliest gap that fits.
class Timeline {
 public:
  double earliest(double ready, double w) const {
    auto it = std::lower_bound(slots_.begin(), slots_.end(), ready,
                               [](const Slot& s, double t) { return s.end <= t; });
    double t = ready;
    for (; it != slots_.end(); ++it) {
      if (it->start >= t + w) break;
      t = std::max(t, it->end);
    }
    return t;
  }
  void insert(double start, double end) {
    if (slots_.empty() || slots_.back().start <= start) {
      slots_.push_back({start, end});
      return;
    }
    auto it = std::lower_bound(slots_.begin(), slots_.end(), start,
                               [](const Slot& s, double t) { return s.start < t; });
    slots_.insert(it, {start, end});
  }

 private:
  struct Slot {
    double start, end;
  };
  std::vector<Slot> slots_;
};

struct Schedule {
  std::vector<int> device;          // per node; -1: not placed (groups)
  std::vector<double> start, end;   // per node
  std::vector<std::string> reason;  // per node
  std::vector<double> runner_up;    // tasks: the best finish on another device (kInf: none)
  std::vector<int> runner_up_device;
  double makespan = 0;
};

class Placement {
 public:
  Placement(const Plan& p, const PlacementRequest& r)
      : p_(p), r_(r), n_(p.nodes.size()), d_(r.devices.size()) {
    host_ = -1;
    for (std::size_t d = 0; d < d_; ++d) {
      if (r_.devices[d].host) host_ = static_cast<int>(d);
    }
    timeline_.resize(d_);
    for (std::size_t d = 0; d < d_; ++d) {
      timeline_[d] =
          r_.devices[d].costs.shares_host_cores && host_ >= 0 ? host_ : static_cast<int>(d);
    }
    resolve_pins();
    find_capabilities();
    collect_reads();
    costs();
    ranks();
  }

  /// Runs the requested mode and writes the result into the plan.
  void apply(Plan& p) {
    using Mode = HeteroOptions::Placement;
    auto summary = std::make_shared<PlacementSummary>();
    for (const DeviceModel& m : r_.devices) summary->device_names.push_back(m.name);
    Schedule chosen;
    if (!r_.estimates) {
      chosen = settle([&](std::uint32_t i) { return first_capable(i); });
      summary->decision = r_.mode == Mode::first
                              ? "first member with a kernel for each node (no cost figures)"
                              : "every node with a kernel is pinned";
      for (std::uint32_t i = 0; i < n_; ++i) {
        if (!is_task(p_.nodes[i]) || pinned_[i] >= 0) continue;
        chosen.reason[i] = first_capable(i) == 0
                               ? "first member"
                               : "capability: " + incapable_text(i, first_capable(i));
      }
    } else if (r_.mode == Mode::first) {
      chosen = settle([&](std::uint32_t i) { return first_capable(i); });
      summary->decision = "first member with a kernel for each node";
      for (std::uint32_t i = 0; i < n_; ++i) {
        if (!is_task(p_.nodes[i]) || pinned_[i] >= 0) continue;
        chosen.reason[i] = first_capable(i) == 0
                               ? "first member"
                               : "capability: " + incapable_text(i, first_capable(i));
      }
      summary->estimated_us = summary->split_us = chosen.makespan;
    } else {
      Schedule heft = settle(-1);
      summary->split_us = heft.makespan;
      chosen = std::move(heft);
      summary->decision = "HEFT: estimated " + fmt_us(chosen.makespan);
      if (d_ > 1) {
        int best = -1;
        Schedule best_s;
        for (std::size_t d = 0; d < d_; ++d) {
          if (!runs_everything(d)) continue;
          Schedule s = settle(static_cast<int>(d));
          summary->single_device_us.push_back({r_.devices[d].name, s.makespan});
          if (best < 0 || s.makespan < best_s.makespan) {
            best = static_cast<int>(d);
            best_s = std::move(s);
          }
        }
        const bool automatic = r_.mode == Mode::automatic;
        if (!automatic) {
          // HEFT as it comes; the single devices' estimates are for the report.
        } else if (best >= 0 && chosen.makespan >= best_s.makespan * (1.0 - r_.min_split_gain)) {
          summary->decision = "single device " + r_.devices[static_cast<std::size_t>(best)].name +
                              ": estimated " + fmt_us(best_s.makespan) + " alone, " +
                              fmt_us(chosen.makespan) + " split (a split must gain " +
                              std::to_string(static_cast<int>(r_.min_split_gain * 100 + 0.5)) +
                              "%)";
          for (std::uint32_t i = 0; i < n_; ++i) {
            if (is_task(p_.nodes[i]) && pinned_[i] < 0) best_s.reason[i] = "single device";
          }
          chosen = std::move(best_s);
        } else if (best >= 0) {
          summary->decision =
              "HEFT split: estimated " + fmt_us(chosen.makespan) + ", the best single device " +
              r_.devices[static_cast<std::size_t>(best)].name + " " + fmt_us(best_s.makespan);
        } else {
          summary->decision = "HEFT split: no device can run every node (estimated " +
                              fmt_us(chosen.makespan) + ")";
        }
      }
      summary->estimated_us = chosen.makespan;
    }
    if (r_.estimates && summary->estimated_us == 0) summary->estimated_us = chosen.makespan;
    for (std::uint32_t i = 0; i < n_; ++i) {
      PlanNode& n = p.nodes[i];
      n.device = chosen.device[i];
      n.placed_by = chosen.reason[i];
      n.est_start_us = chosen.start[i];
      n.est_end_us = chosen.end[i];
    }
    p.placement = std::move(summary);
  }

 private:
  // ---- inputs to scheduling --------------------------------------------------------------

  std::string devices_text() const {
    std::string s;
    for (const DeviceModel& m : r_.devices) s += (s.empty() ? "" : ", ") + m.name;
    return s;
  }

  void resolve_pins() {
    pinned_.assign(n_, -1);
    for (std::uint32_t i = 0; i < n_; ++i) {
      const PlanNode& n = p_.nodes[i];
      if (!n.pin) continue;
      int found = -1;
      for (std::size_t d = 0; d < d_; ++d) {
        if (r_.devices[d].id == *n.pin) found = static_cast<int>(d);
      }
      // Views and groups follow their inputs, but a pin to no device is a mistake all the same.
      if (found >= 0 && (n.storage == Storage::View || n.op == OpKind::Group)) continue;
      if (found < 0) {
        throw PlatformError("node " + n.label + " is pinned to " + n.pin->str() +
                            ", which is not a device of this heterogeneous platform (its "
                            "devices: " +
                            devices_text() + ")");
      }
      pinned_[i] = found;
    }
  }

  void find_capabilities() {
    capable_.assign(n_ * d_, 0);
    why_.assign(n_ * d_, {});
    for (std::uint32_t i = 0; i < n_; ++i) {
      const PlanNode& n = p_.nodes[i];
      if (!is_task(n)) continue;
      bool any = false;
      for (std::size_t d = 0; d < d_; ++d) {
        const Capabilities* c = r_.devices[d].caps;
        std::string why = c != nullptr ? c->unsupported(p_, n) : std::string();
        capable_[i * d_ + d] = why.empty();
        any = any || why.empty();
        why_[i * d_ + d] = std::move(why);
      }
      if (pinned_[i] >= 0 && !capable_[i * d_ + static_cast<std::size_t>(pinned_[i])]) {
        const DeviceModel& m = r_.devices[static_cast<std::size_t>(pinned_[i])];
        throw PlatformError(
            "node " + n.label + " is pinned to " + m.name +
            ", which has no kernel for it: " + why_[i * d_ + static_cast<std::size_t>(pinned_[i])]);
      }
      if (!any) {
        std::string all;
        for (std::size_t d = 0; d < d_; ++d)
          all += (d ? "; " : "") + r_.devices[d].name + ": " + why_[i * d_ + d];
        throw PlatformError("node " + n.label +
                            " cannot run on any device of the heterogeneous platform (" + all +
                            ")");
      }
    }
  }

  // Reads of each task: (producer, bytes), the producer a task or a source (views looked
  // through); and the tasks reading each node.
  void collect_reads() {
    reads_.assign(n_, {});
    readers_.assign(n_, {});
    for (std::uint32_t i = 0; i < n_; ++i) {
      const PlanNode& n = p_.nodes[i];
      if (!is_task(n)) continue;
      for (std::size_t k = 0; k < n.inputs.size(); ++k) {
        if (!n.reads_input(k)) continue;
        const std::uint32_t b = base_of(p_, n.inputs[k]);
        const PlanNode& bn = p_.nodes[b];
        if (!is_task(bn) && !is_source(bn)) continue;
        reads_[i].push_back({b, p_.nodes[n.inputs[k]].type.bytes()});
        readers_[b].push_back(i);
      }
    }
  }

  void costs() {
    cost_.assign(n_ * d_, kInf);
    for (std::uint32_t i = 0; i < n_; ++i) {
      const PlanNode& n = p_.nodes[i];
      if (!is_task(n)) continue;
      for (std::size_t d = 0; d < d_; ++d) {
        if (!capable_[i * d_ + d]) continue;
        std::optional<double> m;
        if (r_.measured) m = r_.measured(d, p_, n);
        cost_[i * d_ + d] = m ? *m : node_cost_us(p_, n, r_.devices[d].costs);
      }
    }
  }

  double transfer(std::size_t bytes, std::size_t a, std::size_t b) const {
    return transfer_cost_us(bytes, a, b, r_.devices);
  }
  // Mean transfer over ordered pairs of distinct devices (HEFT's average communication).
  double mean_transfer(std::size_t bytes) const {
    if (d_ < 2) return 0;
    double s = 0;
    for (std::size_t a = 0; a < d_; ++a)
      for (std::size_t b = 0; b < d_; ++b)
        if (a != b) s += transfer(bytes, a, b);
    return s / static_cast<double>(d_ * (d_ - 1));
  }

  void ranks() {
    rank_.assign(n_, 0);
    for (std::uint32_t i = static_cast<std::uint32_t>(n_); i-- > 0;) {
      if (!is_task(p_.nodes[i])) continue;
      double sum = 0;
      int k = 0;
      for (std::size_t d = 0; d < d_; ++d) {
        if (cost_[i * d_ + d] < kInf) {
          sum += cost_[i * d_ + d];
          ++k;
        }
      }
      // A tiny floor keeps ranks strictly decreasing along edges: the order is topological.
      const double w = std::max(sum / std::max(k, 1), 1e-6);
      double best = 0;
      for (std::uint32_t j : readers_[i]) {
        // readers_ lists a reader once per read: the largest matters, duplicates are harmless.
        std::size_t bytes = 0;
        for (const auto& [u, b] : reads_[j])
          if (u == i) bytes = std::max(bytes, b);
        best = std::max(best, mean_transfer(bytes) + rank_[j]);
      }
      rank_[i] = w + best;
    }
    order_.clear();
    for (std::uint32_t i = 0; i < n_; ++i)
      if (is_task(p_.nodes[i])) order_.push_back(i);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return rank_[a] > rank_[b]; });
  }

  // ---- scheduling ----------------------------------------------------------------------

  int first_capable(std::uint32_t i) const {
    if (pinned_[i] >= 0) return pinned_[i];
    for (std::size_t d = 0; d < d_; ++d)
      if (capable_[i * d_ + d]) return static_cast<int>(d);
    return 0;
  }
  bool runs_everything(std::size_t d) const {
    for (std::uint32_t i = 0; i < n_; ++i) {
      if (is_task(p_.nodes[i]) && pinned_[i] < 0 && !capable_[i * d_ + d]) return false;
    }
    return true;
  }
  // Why the members before `chosen` do not run node i ("opencl:0:0 (...): no OpenCL kernel...").
  std::string incapable_text(std::uint32_t i, int chosen) const {
    std::string s;
    for (std::size_t d = 0; d < static_cast<std::size_t>(chosen); ++d)
      s += (s.empty() ? "" : "; ") + r_.devices[d].name + ": " + why_[i * d_ + d];
    return s;
  }

  /// List scheduling in rank order. `choose(i)` names a device (fixed placements) or -1 for
  /// HEFT's choice among the allowed ones. `home` gives where each source lives (-1: free).
  template <class Choose>
  Schedule schedule(Choose choose, const std::vector<int>& home) const {
    Schedule s;
    s.device.assign(n_, -1);
    s.start.assign(n_, 0);
    s.end.assign(n_, 0);
    s.reason.assign(n_, {});
    s.runner_up.assign(n_, kInf);
    s.runner_up_device.assign(n_, -1);
    std::vector<Timeline> lines(d_);
    auto ready_on = [&](std::uint32_t i, std::size_t d) {
      double t = 0;
      for (const auto& [u, bytes] : reads_[i]) {
        int at = is_task(p_.nodes[u]) ? s.device[u] : home[u];
        const double avail = is_task(p_.nodes[u]) ? s.end[u] : 0.0;
        if (at < 0 || static_cast<std::size_t>(at) == d) {
          t = std::max(t, avail);
        } else {
          t = std::max(t, avail + transfer(bytes, static_cast<std::size_t>(at), d));
        }
      }
      return t;
    };
    for (std::uint32_t i : order_) {
      const int fixed = pinned_[i] >= 0 ? pinned_[i] : choose(i);
      double best = kInf, second = kInf, best_start = 0;
      int best_d = -1, second_d = -1;
      for (std::size_t d = 0; d < d_; ++d) {
        if (fixed >= 0 && static_cast<std::size_t>(fixed) != d) continue;
        const double w = cost_[i * d_ + d];
        if (!(w < kInf)) continue;
        const double st = lines[static_cast<std::size_t>(timeline_[d])].earliest(ready_on(i, d), w);
        const double fin = st + w;
        if (fin < best) {
          second = best;
          second_d = best_d;
          best = fin;
          best_start = st;
          best_d = static_cast<int>(d);
        } else if (fin < second) {
          second = fin;
          second_d = static_cast<int>(d);
        }
      }
      if (best_d < 0) throw InternalError("placement found no device for " + p_.nodes[i].label);
      s.device[i] = best_d;
      s.start[i] = best_start;
      s.end[i] = best;
      s.runner_up[i] = second;
      s.runner_up_device[i] = second_d;
      lines[static_cast<std::size_t>(timeline_[static_cast<std::size_t>(best_d)])].insert(
          best_start, best);
      s.makespan = std::max(s.makespan, best);
    }
    return s;
  }

  /// Where the nodes that are not tasks go, given the tasks' devices; fills `home` for
  /// sources (what the next round of scheduling charges transfers from).
  void derive_homes(Schedule& s, std::vector<int>& home) const {
    home.assign(n_, -1);
    const Writers w = variable_writers();
    // Inputs and constants first: a variable updated from one of them follows it. Optimizer
    // state last: it follows its variable.
    for (int round = 0; round < 3; ++round) {
      for (std::uint32_t i = 0; i < n_; ++i) {
        const PlanNode& n = p_.nodes[i];
        if (!is_source(n)) continue;
        const int want = n.storage != Storage::Variable ? 0 : w.state_of[i] < 0 ? 1 : 2;
        if (want != round) continue;
        std::string why;
        int d = written_home(s, home, w, i, why);
        if (d < 0) d = read_home(s, i, why);
        s.device[i] = d;
        s.reason[i] = why;
        home[i] = d;
      }
    }
    follow_inputs(s);
  }

  /// The node that writes each variable: an assign, or an optimizer update (its variable and
  /// its state, which has to live where the update runs: one kernel writes them all).
  struct Writers {
    std::vector<std::int64_t> writer_of, state_of;
  };
  Writers variable_writers() const {
    Writers w{std::vector<std::int64_t>(n_, -1), std::vector<std::int64_t>(n_, -1)};
    for (std::uint32_t i = 0; i < n_; ++i) {
      const PlanNode& n = p_.nodes[i];
      if (n.op == OpKind::Assign || n.op == OpKind::OptimizerUpdate) w.writer_of[n.inputs[0]] = i;
      if (n.op != OpKind::OptimizerUpdate) continue;
      for (std::uint32_t u : n.written_inputs())
        if (u != n.inputs[0]) w.state_of[u] = n.inputs[0];
    }
    return w;
  }

  /// Source i's device from what writes it or a pin (optimizer state: its variable's; a pin;
  /// a variable: where its update runs), and why; -1 when none of them decides.
  int written_home(const Schedule& s, const std::vector<int>& home, const Writers& w,
                   std::uint32_t i, std::string& why) const {
    const PlanNode& n = p_.nodes[i];
    int d = -1;
    if (w.state_of[i] >= 0) {
      d = home[static_cast<std::size_t>(w.state_of[i])];
      if (pinned_[i] >= 0 && pinned_[i] != d) {
        throw PlatformError("optimizer state " + n.label + " is pinned to " +
                            r_.devices[static_cast<std::size_t>(pinned_[i])].name +
                            ", but its variable " +
                            p_.nodes[static_cast<std::size_t>(w.state_of[i])].label + " lives on " +
                            r_.devices[static_cast<std::size_t>(d)].name +
                            ": one optimizer update writes both, on one device");
      }
      why = "optimizer state: with its variable";
    } else if (pinned_[i] >= 0) {
      d = pinned_[i];
      why = "pinned";
    } else if (n.storage == Storage::Variable && w.writer_of[i] >= 0) {
      const PlanNode& a = p_.nodes[static_cast<std::size_t>(w.writer_of[i])];
      const std::uint32_t v = base_of(p_, a.inputs[1]);
      if (a.pin) {
        for (std::size_t k = 0; k < d_; ++k)
          if (r_.devices[k].id == *a.pin) d = static_cast<int>(k);
        why = a.op == OpKind::Assign ? "its assign is pinned there"
                                     : "its optimizer update is pinned there";
      } else if (is_task(p_.nodes[v]) && s.device[v] >= 0) {
        d = s.device[v];
        why = "variable: its update runs there";
      } else if (home[v] >= 0) {
        d = home[v];
        why = "variable: assigned from a value that lives there";
      }
    }
    return d;
  }

  /// Source i's device from the devices of the tasks that read it, and why.
  int read_home(const Schedule& s, std::uint32_t i, std::string& why) const {
    const PlanNode& n = p_.nodes[i];
    const int fallback = host_ >= 0 ? host_ : 0;
    std::vector<int> devs;
    for (std::uint32_t r : readers_[i]) {
      const int d = s.device[r];
      if (d >= 0 && std::find(devs.begin(), devs.end(), d) == devs.end()) devs.push_back(d);
    }
    if (n.storage == Storage::Constant) {
      why = "constant: copied to every device that reads it";
      return devs.empty() ? fallback : devs.front();
    }
    if (devs.size() == 1) {
      why = std::string(n.storage == Storage::Input ? "input" : "variable") + ": read there";
      return devs.front();
    }
    if (devs.empty()) {
      why = "read by no kernel";
      return fallback;
    }
    if (n.storage == Storage::Variable) {
      // The device that reads it most.
      std::vector<int> count(d_, 0);
      for (std::uint32_t r : readers_[i]) ++count[static_cast<std::size_t>(s.device[r])];
      why = "variable: read most there (sent to the other readers each run)";
      return static_cast<int>(std::max_element(count.begin(), count.end()) - count.begin());
    }
    why = "input: read on several devices (sent from here)";
    return host_ >= 0 ? host_ : devs.front();
  }

  /// Views, assigns and optimizer updates go with what they view or write; groups get the
  /// time their inputs are done.
  void follow_inputs(Schedule& s) const {
    for (std::uint32_t i = 0; i < n_; ++i) {
      const PlanNode& n = p_.nodes[i];
      if (n.storage == Storage::View) {
        s.device[i] = s.device[n.inputs[0]];
        s.reason[i] = "view: with its input";
        s.start[i] = s.end[i] = s.end[n.inputs[0]];
      } else if (n.op == OpKind::Assign || n.op == OpKind::OptimizerUpdate) {
        s.device[i] = s.device[n.inputs[0]];
        s.reason[i] = n.op == OpKind::Assign ? "assign: with its variable"
                                             : "optimizer update: with its variable";
        const std::uint32_t v = n.inputs[1];
        s.start[i] = s.end[i] = std::max(s.end[v], s.start[v]);
      } else if (n.op == OpKind::Group) {
        double t = 0;
        for (std::uint32_t u : n.inputs) t = std::max(t, s.end[u]);
        s.start[i] = s.end[i] = t;
      }
    }
  }

  /// Two rounds: sources free but for pins, then where the first round put them.
  template <class Choose>
  Schedule settle_with(Choose choose) const {
    std::vector<int> home(n_, -1);
    for (std::uint32_t i = 0; i < n_; ++i)
      if (is_source(p_.nodes[i])) home[i] = pinned_[i];
    Schedule s = schedule(choose, home);
    derive_homes(s, home);
    s = schedule(choose, home);
    derive_homes(s, home);
    return s;
  }
  /// HEFT (fixed < 0) or every unpinned task on `fixed` where it can run (else its first
  /// capable device).
  Schedule settle(int fixed) const {
    Schedule s = settle_with([&](std::uint32_t i) {
      if (fixed < 0) return -1;
      return capable_[i * d_ + static_cast<std::size_t>(fixed)] ? fixed : first_capable(i);
    });
    explain(s, fixed < 0);
    return s;
  }
  template <class Choose>
  Schedule settle(Choose choose) const {
    Schedule s = settle_with(choose);
    explain(s, false);
    return s;
  }

  void explain(Schedule& s, bool heft) const {
    for (std::uint32_t i = 0; i < n_; ++i) {
      if (!is_task(p_.nodes[i])) continue;
      if (pinned_[i] >= 0) {
        s.reason[i] = "pinned";
        continue;
      }
      const auto d = static_cast<std::size_t>(s.device[i]);
      int able = 0;
      for (std::size_t k = 0; k < d_; ++k) able += capable_[i * d_ + k];
      if (able == 1 && d_ > 1) {
        std::string others;
        for (std::size_t k = 0; k < d_; ++k) {
          if (!capable_[i * d_ + k])
            others += (others.empty() ? "" : "; ") + r_.devices[k].name + ": " + why_[i * d_ + k];
        }
        s.reason[i] = "capability: only " + r_.devices[d].name + " has a kernel (" + others + ")";
      } else if (heft) {
        s.reason[i] = "cost: finishes at " + fmt_us(s.end[i]) + " here";
        if (s.runner_up_device[i] >= 0) {
          s.reason[i] += ", at " + fmt_us(s.runner_up[i]) + " on " +
                         r_.devices[static_cast<std::size_t>(s.runner_up_device[i])].name;
        }
      }
    }
  }

  const Plan& p_;
  const PlacementRequest& r_;
  std::size_t n_, d_;
  int host_ = -1;
  std::vector<int> timeline_;  // per device: the timeline it runs on
  std::vector<int> pinned_;
  std::vector<char> capable_;     // [node * devices + device]
  std::vector<std::string> why_;  // [node * devices + device]: why not
  std::vector<double> cost_;      // [node * devices + device], kInf where it cannot run
  std::vector<std::vector<std::pair<std::uint32_t, std::size_t>>> reads_;
  std::vector<std::vector<std::uint32_t>> readers_;
  std::vector<double> rank_;
  std::vector<std::uint32_t> order_;  // tasks by decreasing rank
};

}  // namespace

// ---- costs -----------------------------------------------------------------------------------

double node_cost_us(const Plan& p, const PlanNode& n, const DeviceCosts& c) {
  std::vector<TensorType> in;
  in.reserve(n.inputs.size());
  for (std::uint32_t u : n.inputs) in.push_back(p.nodes[u].type);
  const Cost k = op_cost(n.op, in, n.type, n.attrs);
  return c.node_us +
         std::max(k.flops / (rate(c.gflops) * 1e3), k.bytes / (rate(c.gbytes_per_s) * 1e3));
}

double transfer_cost_us(std::size_t bytes, std::size_t from, std::size_t to,
                        const std::vector<DeviceModel>& devices) {
  if (from == to) return 0;
  double host_gbps = kHostCopyGBps;
  for (const DeviceModel& m : devices) {
    if (m.host && m.costs.gbytes_per_s > 0) host_gbps = m.costs.gbytes_per_s;
  }
  const double b = static_cast<double>(bytes);
  // A host copy moves each byte twice (read and write): the streaming rate counts both.
  const double host_copy = 2 * b / (host_gbps * 1e3);
  const DeviceModel& f = devices[from];
  const DeviceModel& t = devices[to];
  const double out =
      f.host ? host_copy : f.costs.transfer_us + b / (rate(f.costs.from_device_gbytes_per_s) * 1e3);
  const double in =
      t.host ? host_copy : t.costs.transfer_us + b / (rate(t.costs.to_device_gbytes_per_s) * 1e3);
  return out + in;
}

namespace {

// What cost_signature has always printed of a node's attributes, from the payloads that now
// hold what were loose scalars (alpha, beta, begin, end): calibration tables persist the
// signature, so its text must not change. Such payloads print as the "nothing" they were.
struct SignatureScalars {
  float alpha = 1.0f, beta = 0.0f;
  std::int64_t begin = 0, end = 0;
  std::string payload;
};
SignatureScalars signature_scalars(const Attrs& a) {
  SignatureScalars s{.payload = a.payload_name()};
  const bool was_scalars = a.has<SliceRange>() || a.has<PieceIndex>() || a.has<InputChoice>() ||
                           a.has<EmbeddingStep>() || a.has<ScaleFactor>() || a.has<AxpbyCoeffs>() ||
                           a.has<LeakySlope>() || a.has<ClipRange>();
  if (was_scalars) s.payload = "nothing";
  if (const auto* r = std::get_if<SliceRange>(&a.payload)) {
    s.begin = r->begin;
    s.end = r->end;
  } else if (const auto* p = std::get_if<PieceIndex>(&a.payload)) {
    s.begin = p->piece;
  } else if (const auto* i = std::get_if<InputChoice>(&a.payload)) {
    s.begin = i->input;
  } else if (const auto* e = std::get_if<EmbeddingStep>(&a.payload)) {
    s.beta = e->scale;  // alpha: the SGD step's 1
    s.begin = e->band;
  } else if (const auto* m = std::get_if<MatmulEpilogue>(&a.payload)) {
    s.alpha = m->alpha;
  } else if (const auto* c = std::get_if<ConvEpilogue>(&a.payload)) {
    const std::array<float, 2> ab = conv_op_params(*c);
    s.alpha = ab[0];
    s.beta = ab[1];
  } else if (const auto* o = std::get_if<OptimizerRule>(&a.payload)) {
    s.begin = o->band;
  } else {
    const std::array<float, 2> ab = elementwise_params(a);  // {1, 0} for other payloads
    s.alpha = ab[0];
    s.beta = ab[1];
  }
  return s;
}

}  // namespace

std::string cost_signature(const Plan& p, const PlanNode& n) {
  std::string s(op_name(n.op));
  for (std::uint32_t u : n.inputs) s += " " + p.nodes[u].type.shape.str();
  s += " -> " + n.type.shape.str();
  const Attrs& a = n.attrs;
  char b[96];
  const SignatureScalars v = signature_scalars(a);
  std::snprintf(b, sizeof b, " a%g b%g x%d k%d t%d%d m%d %lld:%lld", v.alpha, v.beta, a.axis,
                a.keepdims, a.trans_a, a.trans_b, a.mean, static_cast<long long>(v.begin),
                static_cast<long long>(v.end));
  return s + b + " " + v.payload;
}

// ---- place_devices ---------------------------------------------------------------------------

void place_devices(Plan& p, const PlacementRequest& r) {
  if (r.devices.empty()) throw InternalError("placement without devices");
  Placement(p, r).apply(p);
}

// ---- insert_transfers ------------------------------------------------------------------------

namespace {

// Constants (and views of them) are copied to each device that reads them, never sent.
bool replicable(const Plan& p, std::uint32_t v) {
  return p.nodes[base_of(p, v)].storage == Storage::Constant;
}

}  // namespace

void insert_transfers(Plan& p, const Placer& placer) {
  const std::size_t n0 = p.nodes.size();
  // Remote reads per value: (reader, input) pairs by reading device.
  std::vector<std::map<int, std::vector<std::pair<std::uint32_t, std::size_t>>>> remote(n0);
  for (std::uint32_t c = 0; c < n0; ++c) {
    const PlanNode& n = p.nodes[c];
    if (n.op == OpKind::Group || n.device < 0) continue;  // groups order, they do not read
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      if (!n.reads_input(k)) continue;
      const std::uint32_t u = n.inputs[k];
      if (p.nodes[u].device == n.device || replicable(p, u)) continue;
      if (p.nodes[u].storage == Storage::None) continue;  // no data (an assign)
      remote[u][n.device].push_back({c, k});
    }
  }
  auto summary =
      std::make_shared<PlacementSummary>(p.placement ? *p.placement : PlacementSummary{});
  std::vector<double> key(n0);
  for (std::uint32_t i = 0; i < n0; ++i) key[i] = p.nodes[i].est_start_us;
  std::uint32_t links = 0;
  for (std::uint32_t u = 0; u < n0; ++u) {
    if (remote[u].empty()) continue;
    const PlanNode value = p.nodes[u];  // copied: add_node may move the nodes
    const std::uint32_t s = p.add_node(OpKind::Transfer, {u});
    {
      PlanNode& send = p.nodes[s];
      Attrs at;
      at.set(TransferLink{.role = TransferLink::Role::send,
                          .link = links,
                          .bytes = value.type.bytes(),
                          .from = value.device,
                          .to = -1,
                          .endpoint = nullptr});
      send.attrs = std::move(at);
      send.type = send.declared = {Shape{1}, DType::f32};
      send.device = value.device;
      send.label = "'send " + value.label + "'";
      send.placed_by = "transfer: with its value";
      send.est_start_us = send.est_end_us = value.est_end_us;
      key.push_back(value.est_end_us);
    }
    for (const auto& [dev, readers] : remote[u]) {
      const std::uint32_t rv = p.add_node(OpKind::Transfer, {s});
      PlanNode& recv = p.nodes[rv];
      Attrs at;
      at.set(TransferLink{.role = TransferLink::Role::recv,
                          .link = links,
                          .bytes = value.type.bytes(),
                          .from = value.device,
                          .to = dev,
                          .endpoint = nullptr});
      recv.attrs = std::move(at);
      recv.type = recv.declared = value.type;
      recv.device = dev;
      recv.label =
          "'recv " + value.label + " on " + placer.device_name(static_cast<std::size_t>(dev)) + "'";
      recv.placed_by = "transfer: with its readers";
      // Its readers were scheduled after its arrival.
      double arrive = kInf;
      for (const auto& [c, k] : readers) arrive = std::min(arrive, key[c]);
      arrive = std::max(arrive, value.est_end_us);
      recv.est_start_us = recv.est_end_us = arrive;
      key.push_back(arrive);
      for (const auto& [c, k] : readers) p.nodes[c].inputs[k] = rv;
      ++summary->transfers;
      summary->transfer_bytes += value.type.bytes();
    }
    ++links;
  }
  p.placement = std::move(summary);
  link_dependencies(p);
  // The schedule's order: each device's part runs in it (plan order is a part's order).
  std::vector<std::uint32_t> order(p.nodes.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return key[a] < key[b]; });
  reorder(p, order);
  order_by_dependencies(p);  // where equal or estimated times disagree with an edge
}

// ---- split_devices ---------------------------------------------------------------------------

namespace {

/// For each recv on the host, the host's sends it may wait for: those it depends on through
/// other devices, and those that an earlier command of such a device waits for. A device may
/// run its commands in order (its GEMM queue is in-order, and so is every queue of a device
/// without out-of-order queues), so each of a device's nodes counts as waiting for the one
/// before it there (plan order: its part keeps it). A CPU engine must not start the recv before
/// those sends: the thread it blocks may be the one they need (a parallel engine's executor, or
/// the thread that runs a readied recv inline), and the run would hang.
std::vector<std::vector<std::uint32_t>> host_sends_before(const Plan& p, int host) {
  std::vector<std::uint32_t> sends;
  std::vector<std::int32_t> bit(p.nodes.size(), -1);
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    if (n.op == OpKind::Transfer && n.device == host &&
        n.attrs.get<TransferLink>().role == TransferLink::Role::send) {
      bit[i] = static_cast<std::int32_t>(sends.size());
      sends.push_back(i);
    }
  }
  std::vector<std::vector<std::uint32_t>> out(p.nodes.size());
  if (sends.empty()) return out;
  const std::size_t words = (sends.size() + 63) / 64;
  std::vector<std::uint64_t> anc(p.nodes.size() * words, 0);
  std::map<std::int32_t, std::uint32_t> last_on;        // another device's latest node so far
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {  // plan order is topological
    std::uint64_t* a = &anc[i * words];
    const PlanNode& n = p.nodes[i];
    const auto before = [&](std::uint32_t d) {
      const std::uint64_t* b = &anc[d * words];
      for (std::size_t w = 0; w < words; ++w) a[w] |= b[w];
      if (bit[d] >= 0) a[static_cast<std::size_t>(bit[d]) / 64] |= 1ull << (bit[d] % 64);
    };
    for (std::uint32_t d : n.deps) before(d);
    if (n.device >= 0 && n.device != host) {
      const auto [it, first] = last_on.try_emplace(n.device, i);
      if (!first) {
        before(it->second);
        it->second = i;
      }
    }
    if (n.op != OpKind::Transfer || n.device != host ||
        n.attrs.get<TransferLink>().role != TransferLink::Role::recv) {
      continue;
    }
    for (std::size_t w = 0; w < words; ++w) {
      for (std::uint64_t m = a[w]; m != 0; m &= m - 1) {
        out[i].push_back(sends[w * 64 + static_cast<std::size_t>(__builtin_ctzll(m))]);
      }
    }
  }
  return out;
}

/// For each device, the replicable nodes (constants and their views) it needs a copy of: those
/// its own nodes or its copies read.
std::vector<std::vector<char>> replicas(const Plan& p, std::size_t devices) {
  const std::size_t n = p.nodes.size();
  std::vector<std::vector<char>> copy_on(devices, std::vector<char>(n, 0));
  for (std::uint32_t i = static_cast<std::uint32_t>(n); i-- > 0;) {
    const PlanNode& node = p.nodes[i];
    for (std::size_t d = 0; d < devices; ++d) {
      const bool here = node.device == static_cast<std::int32_t>(d) || copy_on[d][i];
      if (!here || node.op == OpKind::Group) continue;
      for (std::size_t k = 0; k < node.inputs.size(); ++k) {
        const std::uint32_t u = node.inputs[k];
        if (replicable(p, u) && p.nodes[u].device != static_cast<std::int32_t>(d))
          copy_on[d][u] = 1;
      }
    }
  }
  return copy_on;
}

/// One device's part of a placed plan, self-contained: its nodes in plan order (its sends and
/// recvs among them), copies of the constants it reads, its groups over its members there;
/// its dependencies linked, the host's recvs after the sends they may wait for.
class PartBuilder {
 public:
  PartBuilder(const Plan& p, std::int32_t dev, const std::vector<char>& replica)
      : p_(p),
        dev_(dev),
        replica_(replica),
        part_(std::make_shared<Plan>()),
        local_(p.nodes.size(), -1) {
    part_->graph_id = p.graph_id;
    part_->stands_for = p.stands_for;
    part_->stand_ins = p.stand_ins;
    part_->graph_size = p.graph_size;
    part_->next_label = p.next_label;
    part_->index_of.reset(part_->graph_size);
  }

  /// The part; null where the device got no node.
  std::shared_ptr<Plan> build(const std::vector<std::vector<std::uint32_t>>& recv_after);

 private:
  bool copy_group(const PlanNode& node, PlanNode& copy) const;
  PlanNode copy_here(const PlanNode& node);
  void add_shape_stand_in(std::uint32_t u);
  void add(std::uint32_t i, PlanNode copy);
  void wait_for_host_sends(const std::vector<std::vector<std::uint32_t>>& recv_after);

  const Plan& p_;
  const std::int32_t dev_;
  const std::vector<char>& replica_;  // replicas()'s for this device
  std::shared_ptr<Plan> part_;
  std::vector<std::int64_t> local_;       // plan index -> part index, or -1
  std::vector<std::uint32_t> global_of_;  // part index -> plan index
};

std::shared_ptr<Plan> PartBuilder::build(
    const std::vector<std::vector<std::uint32_t>>& recv_after) {
  for (std::uint32_t i = 0; i < p_.nodes.size(); ++i) {
    const PlanNode& node = p_.nodes[i];
    if (node.fused_into >= 0) continue;  // folded into another node: nothing of its own
    PlanNode copy;
    if (node.op == OpKind::Group) {
      if (!copy_group(node, copy)) continue;
    } else if (node.device == dev_ || replica_[i]) {
      copy = copy_here(node);
    } else {
      continue;
    }
    add(i, std::move(copy));
  }
  if (part_->nodes.empty()) return nullptr;
  link_dependencies(*part_);
  wait_for_host_sends(recv_after);
  order_by_dependencies(*part_);
  return std::move(part_);
}

// A group per device over its members there (only ordering: nothing crosses); none where it
// has no member there.
bool PartBuilder::copy_group(const PlanNode& node, PlanNode& copy) const {
  std::vector<std::uint32_t> members;
  for (std::uint32_t u : node.inputs)
    if (local_[u] >= 0) members.push_back(static_cast<std::uint32_t>(local_[u]));
  if (members.empty()) return false;
  copy = node;
  copy.inputs = std::move(members);
  return true;
}

// A node of this device, or a copy of a replicable one, with its inputs in the part.
PlanNode PartBuilder::copy_here(const PlanNode& node) {
  PlanNode copy = node;
  const bool recv = node.op == OpKind::Transfer &&
                    node.attrs.get<TransferLink>().role == TransferLink::Role::recv;
  if (recv) {
    copy.inputs.clear();  // its value comes from another device
  } else {
    for (std::size_t k = 0; k < copy.inputs.size(); ++k) {
      const std::uint32_t u = copy.inputs[k];
      if (local_[u] < 0 && node.reads_input(k))
        throw InternalError(node.label + " reads a value of another device");
      if (local_[u] < 0) add_shape_stand_in(u);
      copy.inputs[k] = static_cast<std::uint32_t>(local_[u]);
    }
  }
  if (node.device != dev_) copy.fetched = false;  // a copy: reads go to its home
  return copy;
}

// An input that only lends its shape (grad_seed's loss, sum_to's target): a stand-in without
// data or work, never a transfer.
void PartBuilder::add_shape_stand_in(std::uint32_t u) {
  PlanNode shape_only;
  shape_only.gid = kNoGid;
  shape_only.op = OpKind::Group;
  shape_only.storage = Storage::None;
  shape_only.type = shape_only.declared = p_.nodes[u].type;
  shape_only.label = p_.nodes[u].label + " (its shape)";
  shape_only.device = dev_;
  local_[u] = static_cast<std::int64_t>(part_->nodes.size());
  part_->nodes.push_back(std::move(shape_only));
  global_of_.push_back(u);
}

// Node i's copy into the part, without the whole plan's dependencies and decisions.
void PartBuilder::add(std::uint32_t i, PlanNode copy) {
  copy.device = dev_;
  copy.into_variable = -1;
  copy.deps.clear();
  copy.succs.clear();
  copy.local = -1;
  const auto li = static_cast<std::uint32_t>(part_->nodes.size());
  local_[i] = li;
  if (copy.gid != kNoGid && p_.nodes[i].device == dev_) part_->index_of.set(copy.gid, li);
  if (copy.storage == Storage::Input) part_->inputs.push_back(li);
  if (copy.storage == Storage::Variable) part_->variables.push_back(li);
  if (copy.fetched) part_->fetches.push_back(li);
  part_->nodes.push_back(std::move(copy));
  global_of_.push_back(i);
}

// The host's recvs depend on the host's sends they may wait for (host_sends_before).
void PartBuilder::wait_for_host_sends(const std::vector<std::vector<std::uint32_t>>& recv_after) {
  for (std::uint32_t li = 0; li < part_->nodes.size(); ++li) {
    for (std::uint32_t s : recv_after[global_of_[li]]) {
      const std::int64_t ls = local_[s];
      if (ls < 0) continue;
      part_->nodes[li].deps.push_back(static_cast<std::uint32_t>(ls));
      part_->nodes[static_cast<std::size_t>(ls)].succs.push_back(li);
    }
  }
}

/// The host part's commit point waits for a commit gate, which waits for the other devices'
/// work before their commit points (and for what the commit point waited for).
void add_commit_gate(Plan& part, std::size_t d) {
  std::int64_t commit = -1;
  for (std::uint32_t li = 0; li < part.nodes.size(); ++li)
    if (part.nodes[li].commit) commit = li;
  if (commit < 0) return;
  const std::uint32_t g = part.add_node(OpKind::Transfer, {});
  PlanNode& gate = part.nodes[g];
  Attrs at;
  at.set(TransferLink{.role = TransferLink::Role::commit, .endpoint = nullptr});
  gate.attrs = std::move(at);
  gate.type = gate.declared = {Shape{1}, DType::f32};
  gate.device = static_cast<std::int32_t>(d);
  gate.label = "'commit gate (the other devices' work before their commit points)'";
  gate.placed_by = "commit gate";
  PlanNode& c = part.nodes[static_cast<std::size_t>(commit)];
  gate.deps = c.deps;
  for (std::uint32_t u : gate.deps) part.nodes[u].succs.push_back(g);
  c.deps.push_back(g);
  gate.succs.push_back(static_cast<std::uint32_t>(commit));
  order_by_dependencies(part);
}

/// Device d's part gets its own passes, as on that device alone: elision, parallel groups,
/// commit point (with the commit gate where `gate`), memory.
void plan_part(Plan& part, std::size_t d, const Placer& placer, ReuseMode reuse, bool parallel_ops,
               bool gate) {
  const ReuseMode mode = reuse == ReuseMode::none ? ReuseMode::none : placer.reuse_mode(d);
  if (mode != ReuseMode::none) elide_assigns(part, mode);
  // Parallel groups exactly as the device alone would form them (its threads and kernels);
  // transfers are never members (not on the pass's list of thread-safe kernels).
  if (parallel_ops && placer.kernel_threads(d) > 1) {
    PlanOptions po;
    po.reuse = mode;
    po.parallel_ops = true;
    po.kernel_threads = placer.kernel_threads(d);
    po.capabilities = placer.capabilities(d);
    fuse_parallel_ops(part, po);
  }
  commit_writes(part);
  if (gate) add_commit_gate(part, d);
  plan_memory(part, mode, placer.packs_arena(d));
}

/// Each part planned (plan_part; the host's gets the commit gate where other devices have
/// parts too); the plan's memory figures are their sums.
void plan_parts(Plan& p, const Placer& placer, int host, ReuseMode reuse, bool parallel_ops) {
  std::size_t used = 0;
  for (const auto& part : p.parts) used += part != nullptr;
  p.arena_bytes = p.live_bytes = p.naive_bytes = p.buffers = p.in_place = 0;
  for (std::size_t d = 0; d < p.parts.size(); ++d) {
    if (!p.parts[d]) continue;
    Plan& part = *p.parts[d];
    const bool gate = static_cast<int>(d) == host && used > 1;
    plan_part(part, d, placer, reuse, parallel_ops, gate);
    p.arena_bytes += part.arena_bytes;
    p.live_bytes += part.live_bytes;
    p.naive_bytes += part.naive_bytes;
    p.buffers += part.buffers;
    p.in_place += part.in_place;
  }
}

/// Sets PlanNode::local of the plan's nodes on device d, matched by gid, or for nodes passes
/// made, by label within the part; returns the plan index of each part index (-1: none).
std::vector<std::int64_t> match_part_nodes(Plan& p, const Plan& part, std::size_t d) {
  std::map<std::string, std::uint32_t> by_label;
  for (std::uint32_t li = 0; li < part.nodes.size(); ++li) by_label[part.nodes[li].label] = li;
  std::vector<std::int64_t> global_of_local(part.nodes.size(), -1);
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    PlanNode& node = p.nodes[i];
    if (node.device != static_cast<std::int32_t>(d) || node.op == OpKind::Group ||
        node.fused_into >= 0) {
      continue;
    }
    std::int64_t li = -1;
    if (node.gid != kNoGid) {
      li = part.index_of.find(node.gid);
    } else {
      auto it = by_label.find(node.label);
      if (it != by_label.end()) li = it->second;
    }
    if (li < 0) throw InternalError("split_devices lost " + node.label);
    node.local = static_cast<std::int32_t>(li);
    global_of_local[static_cast<std::size_t>(li)] = i;
  }
  return global_of_local;
}

/// The plan's nodes on device d learn their part's decisions (readable values, elided
/// assigns, nodes computed straight into their variables).
void learn_part_decisions(Plan& p, std::size_t d) {
  const Plan& part = *p.parts[d];
  const std::vector<std::int64_t> global_of_local = match_part_nodes(p, part, d);
  for (PlanNode& node : p.nodes) {
    if (node.device != static_cast<std::int32_t>(d) || node.local < 0) continue;
    const PlanNode& l = part.nodes[static_cast<std::size_t>(node.local)];
    node.buffer = l.buffer;
    node.offset = l.offset;
    node.clobbered = l.clobbered;
    node.in_place = l.in_place;
    node.elided = l.elided;
    node.into_variable =
        l.into_variable >= 0 ? global_of_local[static_cast<std::size_t>(l.into_variable)] : -1;
  }
}

}  // namespace

void split_devices(Plan& p, const Placer& placer, ReuseMode reuse, bool parallel_ops) {
  // Before the parts: a device's part may not hold the user's op reading the indices its
  // gradients and checks read, and their errors must name it.
  name_index_readers(p);
  const std::size_t devices = placer.device_count();
  const int host = placer.host_device();
  const std::vector<std::vector<char>> replica = replicas(p, devices);
  // Whatever the host's engine and memory plan: the sequential engine meets these edges in
  // its order anyway, and a parallel one without a memory plan needs them as much.
  const auto recv_after = host >= 0 ? host_sends_before(p, host)
                                    : std::vector<std::vector<std::uint32_t>>(p.nodes.size());
  p.parts.assign(devices, nullptr);
  for (std::size_t d = 0; d < devices; ++d)
    p.parts[d] = PartBuilder(p, static_cast<std::int32_t>(d), replica[d]).build(recv_after);
  plan_parts(p, placer, host, reuse, parallel_ops);
  for (std::size_t d = 0; d < devices; ++d)
    if (p.parts[d]) learn_part_decisions(p, d);
  p.reuse = reuse;
}

}  // namespace hetgraph::detail
