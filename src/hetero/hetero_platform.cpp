// SPDX-License-Identifier: Apache-2.0
// The heterogeneous platform: its Backend (capabilities and placement over the members) and
// its executable (parts on the members, crossings between them, one run across all). The
// design is in hetero.hpp.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "common/transfer.hpp"
#include "compiler/placement.hpp"
#include "hetero/calibration.hpp"
#include "hetero/hetero.hpp"
#include "hetgraph/error.hpp"
#include "opencl/executable.hpp"
#include "opencl/transfer.hpp"

namespace hetgraph {
namespace detail::hetero {

// ---- the cost table ----------------------------------------------------------------------------

void CostTable::add(const std::string& device, const std::string& signature, double us) {
  std::lock_guard lk(mu_);
  auto& [sum, n] = table_[{device, signature}];
  sum += us;
  ++n;
}

std::optional<double> CostTable::find(const std::string& device,
                                      const std::string& signature) const {
  std::lock_guard lk(mu_);
  auto it = table_.find({device, signature});
  if (it == table_.end()) return std::nullopt;
  return it->second.first / it->second.second;
}

// ---- crossings ---------------------------------------------------------------------------------

/// One value crossing from its device to one or more others, through pinned host memory (see
/// hetero.hpp). Kernels of the sending and receiving parts call it; a run arms it first.
class Crossing final : public TransferEndpoint, public cl::ClTransferEndpoint {
 public:
  Crossing(HeteroExecutable& exe, std::string what, std::size_t bytes, std::string from)
      : exe_(exe), what_(std::move(what)), from_(std::move(from)), bytes_(bytes) {}
  ~Crossing() override {
    if (host_ != nullptr) {
      try {
        cl::unmap_buffer(queue_.get(), staging_.get(), host_);
      } catch (...) {
        // Nothing to do about it while the executable goes away.
      }
    }
  }

  void add_receiver(int device, bool host) {
    for (const auto& r : receivers_)
      if (r->device == device) return;
    auto r = std::make_unique<Receiver>();
    r->device = device;
    r->host = host;
    receivers_.push_back(std::move(r));
  }
  /// After the parts exist: the staging buffer (pinned memory of `ctx`, mapped with `q`) and
  /// the context of each OpenCL receiver (for its user events).
  void bind(cl_context ctx, cl_command_queue q,
            const std::map<int, cl_context>& receiver_contexts) {
    clRetainCommandQueue(q);
    queue_ = cl::Queue(q);
    staging_ = cl::Mem(HG_CL_CREATE(clCreateBuffer, ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                    std::max<std::size_t>(bytes_, 4), nullptr));
    host_ = cl::map_buffer(q, staging_.get(), std::max<std::size_t>(bytes_, 4), nullptr,
                           "pinned staging for " + what_);
    for (auto& r : receivers_) {
      if (!r->host) r->ctx = receiver_contexts.at(r->device);
    }
  }
  /// A run begins: fresh user events, the host flag down.
  void arm() {
    host_state_.store(kPending, std::memory_order_relaxed);
    for (auto& r : receivers_) {
      if (r->host) continue;
      r->user = cl::Event(HG_CL_CREATE(clCreateUserEvent, r->ctx));
      r->set.store(false, std::memory_order_relaxed);
    }
  }
  /// A failed run: whatever has not been delivered is (as failed for the host: a recv that
  /// still waits throws; a device's recv copies what is there, and its run is abandoned).
  void release() { deliver(false); }

  // The CPU's side.
  void host_send(const void* src) override {
    std::memcpy(host_, src, bytes_);
    deliver(true);
  }
  void host_recv(void* dst) override {
    int st;
    while ((st = host_state_.load(std::memory_order_acquire)) == kPending)
      host_state_.wait(kPending, std::memory_order_acquire);
    if (st != kArrived) {
      throw PlatformError("value " + what_ + " did not arrive from " + from_ +
                          ": the command that sends it failed there");
    }
    std::memcpy(dst, host_, bytes_);
  }
  void commit() override { throw InternalError("a crossing asked to commit"); }

  // An OpenCL device's side.
  cl::Event enqueue_send(cl_command_queue q, cl_mem src, std::span<const cl_event> wait) override {
    cl::Event ev;
    HG_CL(clEnqueueReadBuffer(q, src, CL_FALSE, 0, bytes_, host_, static_cast<cl_uint>(wait.size()),
                              wait.empty() ? nullptr : wait.data(), ev.out()));
    exe_.callbacks_.fetch_add(1, std::memory_order_acq_rel);
    const cl_int err = clSetEventCallback(ev.get(), CL_COMPLETE, &Crossing::sent, this);
    if (err != CL_SUCCESS) {
      callback_returned();
      cl::check(err, "clSetEventCallback", __FILE__, __LINE__, "send of " + what_);
    }
    return ev;
  }
  cl::Event enqueue_recv(cl_command_queue q, cl_mem dst, std::int32_t device,
                         std::span<const cl_event> wait) override {
    Receiver* r = nullptr;
    for (auto& x : receivers_)
      if (x->device == device) r = x.get();
    if (r == nullptr || !r->user) throw InternalError("recv of " + what_ + " without its event");
    std::vector<cl_event> wl(wait.begin(), wait.end());
    wl.push_back(r->user.get());
    cl::Event ev;
    HG_CL(clEnqueueWriteBuffer(q, dst, CL_FALSE, 0, bytes_, host_, static_cast<cl_uint>(wl.size()),
                               wl.data(), ev.out()));
    return ev;
  }

 private:
  static constexpr int kPending = 0, kArrived = 1, kFailed = 2;
  struct Receiver {
    int device = -1;
    bool host = false;
    cl_context ctx = nullptr;
    cl::Event user;  // this run's; set once (by the sender, or by release)
    std::atomic<bool> set{false};
  };

  // The sender is done (or failed, or the run is given up): tell every receiver, once.
  void deliver(bool ok) {
    for (auto& r : receivers_) {
      if (r->host) {
        int expected = kPending;
        if (host_state_.compare_exchange_strong(expected, ok ? kArrived : kFailed,
                                                std::memory_order_acq_rel)) {
          host_state_.notify_all();
        }
      } else if (r->user && !r->set.exchange(true, std::memory_order_acq_rel)) {
        clSetUserEventStatus(r->user.get(), CL_COMPLETE);
      }
    }
  }
  void callback_returned() {
    if (exe_.callbacks_.fetch_sub(1, std::memory_order_acq_rel) == 1) exe_.callbacks_.notify_all();
  }
  // The device's copy into host memory completed (or failed): runs in a driver thread.
  static void CL_CALLBACK sent(cl_event, cl_int status, void* self) {
    auto* c = static_cast<Crossing*>(self);
    c->deliver(status == CL_COMPLETE);
    c->callback_returned();
  }

  HeteroExecutable& exe_;
  std::string what_, from_;
  std::size_t bytes_;
  cl::Queue queue_;
  cl::Mem staging_;
  void* host_ = nullptr;
  std::vector<std::unique_ptr<Receiver>> receivers_;
  std::atomic<int> host_state_{kPending};
};

/// The CPU part's commit gate.
class CommitGate final : public TransferEndpoint {
 public:
  explicit CommitGate(HeteroExecutable& exe) : exe_(exe) {}
  void host_send(const void*) override { throw InternalError("the commit gate sends nothing"); }
  void host_recv(void*) override { throw InternalError("the commit gate receives nothing"); }
  void commit() override { exe_.commit_devices(); }

 private:
  HeteroExecutable& exe_;
};

// ---- the executable ----------------------------------------------------------------------------

HeteroExecutable::HeteroExecutable(std::shared_ptr<const Plan> plan,
                                   const std::vector<Member>& members,
                                   std::shared_ptr<CostTable> costs, int profile_runs)
    : Executable(plan), members_(members), costs_(std::move(costs)), profile_runs_(profile_runs) {
  const Plan& p = *plan;
  parts_.resize(members_.size());
  gate_ = std::make_shared<CommitGate>(*this);
  // A crossing per send, named after the value it sends.
  std::map<std::uint32_t, std::shared_ptr<Crossing>> by_link;
  std::map<std::uint32_t, std::vector<int>> receivers;  // by link
  for (const PlanNode& n : p.nodes) {
    if (n.op != OpKind::Transfer) continue;
    const TransferLink& l = n.attrs.get<TransferLink>();
    if (l.role == TransferLink::Role::recv) receivers[l.link].push_back(l.to);
    if (l.role != TransferLink::Role::send) continue;
    const PlanNode& value = p.nodes[n.inputs[0]];
    auto c = std::make_shared<Crossing>(*this, value.label, l.bytes,
                                        members_[static_cast<std::size_t>(l.from)].name);
    by_link[l.link] = c;
    crossings_.push_back(std::move(c));
  }
  for (std::size_t d = 0; d < members_.size(); ++d) {
    if (members_[d].device.kind == Device::Kind::cpu) host_ = static_cast<int>(d);
    if (d >= p.parts.size() || !p.parts[d]) continue;
    Part& part = parts_[d];
    part.name = members_[d].name;
    part.plan = std::make_shared<Plan>(*p.parts[d]);
    for (PlanNode& n : part.plan->nodes) {
      if (n.op != OpKind::Transfer) continue;
      TransferLink l = n.attrs.get<TransferLink>();
      if (l.role == TransferLink::Role::commit) {
        l.endpoint = gate_;
      } else {
        const auto& c = by_link.at(l.link);
        if (l.role == TransferLink::Role::recv)
          c->add_receiver(static_cast<int>(d), static_cast<int>(d) == host_);
        l.endpoint = c;
      }
      n.attrs.set(std::move(l));
    }
  }
  for (std::size_t d = 0; d < members_.size(); ++d) {
    Part& part = parts_[d];
    if (!part.plan) continue;
    part.exe = members_[d].backend->instantiate(part.plan, nullptr);
    part.cl = dynamic_cast<cl::OpenClExecutable*>(part.exe.get());
    if (part.cl) part.cl->set_abort_hook([this] { release_all(); });
  }
  // Staging in the sender's context (pinned for its read-back) or the first receiving
  // device's (pinned for its write).
  std::map<int, cl_context> contexts;
  for (std::size_t d = 0; d < parts_.size(); ++d) {
    if (parts_[d].cl) contexts[static_cast<int>(d)] = parts_[d].cl->device().context();
  }
  for (const PlanNode& n : p.nodes) {
    if (n.op != OpKind::Transfer) continue;
    const TransferLink& l = n.attrs.get<TransferLink>();
    if (l.role != TransferLink::Role::send) continue;
    int at = parts_[static_cast<std::size_t>(l.from)].cl ? l.from : -1;
    for (int to : receivers[l.link]) {
      if (at < 0 && parts_[static_cast<std::size_t>(to)].cl) at = to;
    }
    if (at < 0) throw InternalError("a crossing between host parts");
    cl::Device& dev = parts_[static_cast<std::size_t>(at)].cl->device();
    by_link.at(l.link)->bind(dev.context(), dev.queue(false), contexts);
  }
  // The plan's nodes and their parts' indices.
  for (Part& part : parts_) {
    if (part.plan) part.global.assign(part.plan->nodes.size(), -1);
  }
  signature_.resize(p.nodes.size());
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    const PlanNode& n = p.nodes[i];
    if (n.device < 0 || n.local < 0) continue;
    parts_[static_cast<std::size_t>(n.device)].global[static_cast<std::size_t>(n.local)] = i;
    if (n.storage == Storage::Computed && n.op != OpKind::Transfer)
      signature_[i] = cost_signature(p, n);
  }
}

HeteroExecutable::~HeteroExecutable() {
  shutdown();  // an async run in flight ends before its parts go
  wait_callbacks();
}

HeteroExecutable::Part& HeteroExecutable::home(std::uint32_t node) {
  return parts_[static_cast<std::size_t>(plan().nodes[node].device)];
}
const HeteroExecutable::Part& HeteroExecutable::home(std::uint32_t node) const {
  return parts_[static_cast<std::size_t>(plan().nodes[node].device)];
}
std::uint32_t HeteroExecutable::local(std::uint32_t node) const {
  return static_cast<std::uint32_t>(plan().nodes[node].local);
}

void* HeteroExecutable::host_pointer(std::uint32_t node) {
  return home(node).exe->host_pointer(local(node));
}
void HeteroExecutable::copy_in(std::uint32_t node, const void* src, std::size_t bytes) {
  home(node).exe->copy_in(local(node), src, bytes);
}
void HeteroExecutable::copy_in_at(std::uint32_t node, std::size_t offset, const void* src,
                                  std::size_t bytes) {
  home(node).exe->copy_in_at(local(node), offset, src, bytes);
}
void HeteroExecutable::copy_out(std::uint32_t node, void* dst, std::size_t bytes) {
  home(node).exe->copy_out(local(node), dst, bytes);
}

std::string HeteroExecutable::kernel_name(std::uint32_t node) const {
  const PlanNode& n = plan().nodes[node];
  if (n.device < 0 || n.local < 0) return "none";
  return home(node).exe->kernel_name(local(node));
}

void HeteroExecutable::release_all() {
  for (const auto& c : crossings_) c->release();
}

void HeteroExecutable::wait_callbacks() {
  for (int v; (v = callbacks_.load(std::memory_order_acquire)) != 0;)
    callbacks_.wait(v, std::memory_order_acquire);
}

void HeteroExecutable::commit_devices() {
  // Every device's work before its commit point must have succeeded before any device writes
  // a variable: check them all, then enqueue their writers.
  for (cl::OpenClExecutable* c : started_) c->check_commit();
  for (cl::OpenClExecutable* c : started_) c->enqueue_commit();
  committed_ = true;
}

void HeteroExecutable::execute() {
  // The first run is warm-up (first touches of memory, thread teams starting): not profiled.
  const bool profile = runs_done_ > 0 && profiled_ < profile_runs_;
  ++runs_done_;
  if (profile) set_parts_recording(true);
  for (const auto& c : crossings_) c->arm();
  started_.clear();
  committed_ = false;
  std::exception_ptr err;
  for (Part& part : parts_) {
    if (!part.cl) continue;
    try {
      part.cl->start();
    } catch (...) {
      err = std::current_exception();  // the part gave its run up itself
      break;
    }
    started_.push_back(part.cl);
  }
  if (!err && host_ >= 0 && parts_[static_cast<std::size_t>(host_)].exe) {
    try {
      parts_[static_cast<std::size_t>(host_)].exe->execute();  // its gate commits the others
    } catch (...) {
      err = std::current_exception();
    }
  }
  if (!err && !committed_) {
    try {
      commit_devices();
    } catch (...) {
      err = std::current_exception();
    }
  }
  if (err) {
    release_all();
    for (cl::OpenClExecutable* c : started_) c->abandon();
  } else {
    for (cl::OpenClExecutable* c : started_) {
      try {
        c->complete();
      } catch (...) {
        if (!err) err = std::current_exception();
      }
    }
  }
  wait_callbacks();
  if (profile) {
    if (!err) {
      record_profile();
      ++profiled_;
    }
    set_parts_recording(tracing_);
  }
  if (err) std::rethrow_exception(err);
}

void HeteroExecutable::set_parts_recording(bool on) {
  for (Part& part : parts_) {
    if (part.exe) part.exe->set_recording(on);
  }
}

void HeteroExecutable::set_recording(bool on) {
  tracing_ = on;
  set_parts_recording(on);
}

void HeteroExecutable::record_profile() {
  for (std::size_t d = 0; d < parts_.size(); ++d) {
    const Part& part = parts_[d];
    if (!part.exe) continue;
    const std::string key = members_[d].device.str();
    for (const Event& e : part.exe->last_run_events()) {
      const std::int64_t g = part.global[e.node];
      if (g < 0 || signature_[static_cast<std::size_t>(g)].empty()) continue;
      costs_->add(key, signature_[static_cast<std::size_t>(g)],
                  static_cast<double>(e.end_ns - e.start_ns) * 1e-3);
    }
  }
}

std::vector<std::string> HeteroExecutable::lane_names() const {
  std::vector<std::string> lanes;
  for (const Part& part : parts_) {
    if (!part.exe) continue;
    for (const EngineReport::Lane& l : part.exe->engine_report().lanes)
      lanes.push_back(part.name + ": " + l.name);
  }
  return lanes;
}

std::vector<Executable::Event> HeteroExecutable::last_run_events() const {
  std::vector<Event> out;
  int lane0 = 0;
  for (const Part& part : parts_) {
    if (!part.exe) continue;
    for (Event e : part.exe->last_run_events()) {
      const std::int64_t g = part.global[e.node];
      if (g < 0) continue;
      e.node = static_cast<std::uint32_t>(g);
      e.lane += lane0;
      out.push_back(e);
    }
    lane0 += static_cast<int>(part.exe->engine_report().lanes.size());
  }
  return out;
}

void HeteroExecutable::add_trace_events(NodeSink& w, std::int64_t run) {
  w.set_lanes(lane_names());
  int lane0 = 0;
  for (Part& part : parts_) {
    if (!part.exe) continue;
    std::vector<Event> events = part.exe->last_run_events();
    for (Event& e : events) e.lane += lane0;
    // The part's own labels: its transfers, checks and commit gate are in no other plan.
    part.exe->add_node_events(w, events, run);
    lane0 += static_cast<int>(part.exe->engine_report().lanes.size());
  }
}

EngineReport HeteroExecutable::engine_report() const {
  EngineReport r = Executable::engine_report();
  const Plan& p = plan();
  EngineReport::Hetero h;
  std::string names;
  for (const Member& m : members_) {
    h.devices.push_back(m.name);
    names += (names.empty() ? "" : " + ") + m.name;
  }
  r.engine = "heterogeneous (" + names + ")";
  for (const Part& part : parts_) {
    if (!part.exe) continue;
    const EngineReport pr = part.exe->engine_report();
    for (const EngineReport::Lane& l : pr.lanes)
      r.lanes.push_back({part.name + ": " + l.name, l.threads});
    if (pr.cpu && !r.cpu) r.cpu = pr.cpu;
    if (pr.opencl && !r.opencl) r.opencl = pr.opencl;
  }
  for (const PlanNode& n : p.nodes) {
    if (n.device < 0 || n.op == OpKind::Transfer || n.fused_into >= 0) continue;
    if (n.storage == Storage::None && !n.has_work()) continue;
    h.nodes.push_back(
        {n.label, members_[static_cast<std::size_t>(n.device)].device.str(), n.placed_by});
  }
  if (p.placement) {
    h.transfers = p.placement->transfers;
    h.transfer_bytes = p.placement->transfer_bytes;
    h.estimated_us = p.placement->estimated_us;
    h.split_us = p.placement->split_us;
    h.single_device_us = p.placement->single_device_us;
    h.decision = p.placement->decision;
  }
  r.hetero = std::move(h);
  return r;
}

// ---- the platform ------------------------------------------------------------------------------

namespace {

class HeteroBackend final : public Backend, public Placer {
 public:
  HeteroBackend(std::vector<Member> members, HeteroOptions o)
      : members_(std::move(members)), opts_(std::move(o)), table_(std::make_shared<CostTable>()) {}

  std::string name() const override { return "heterogeneous"; }
  std::string description() const override {
    std::string s;
    for (const Member& m : members_) s += (s.empty() ? "" : " + ") + m.backend->description();
    return s;
  }
  // Unused: each part plans its memory in its own device's mode (split_devices).
  ReuseMode reuse_mode() const override { return ReuseMode::dag; }
  std::vector<Device> devices() const override {
    std::vector<Device> out;
    for (const Member& m : members_) out.push_back(m.device);
    return out;
  }
  const Placer* placer() const override { return this; }

  std::string unsupported(const Plan& p, const PlanNode& n) const override {
    if (n.op == OpKind::Transfer) return {};
    // Collectives and crossings were never made to work together (a collective's gradient
    // came out wrong across devices): refused, never silently wrong.
    if (op_def(n.op).communication) {
      return "collectives do not run on a heterogeneous platform yet (compile data-parallel "
             "graphs for the CPU or one OpenCL device)";
    }
    if (n.device >= 0)
      return members_[static_cast<std::size_t>(n.device)].backend->unsupported(p, n);
    if (n.pin) {
      for (const Member& m : members_)
        if (m.device == *n.pin) return m.backend->unsupported(p, n);
      return "it is pinned to " + n.pin->str() + ", which is not a device of this platform";
    }
    std::string all;
    for (const Member& m : members_) {
      std::string why = m.backend->unsupported(p, n);
      if (why.empty()) return {};
      all += (all.empty() ? "" : "; ") + m.name + ": " + why;
    }
    return all;
  }

  std::unique_ptr<Executable> instantiate(
      std::shared_ptr<const Plan> plan,
      const std::shared_ptr<VariableStore::Impl>& store) override {
    // Each device's part would need the blocks of the variables it holds on its own device.
    if (store) {
      throw PlatformError(
          "a VariableStore serves the CPU or one OpenCL device: the heterogeneous platform does "
          "not take one (compile without CompileOptions::variables)");
    }
    return std::make_unique<HeteroExecutable>(std::move(plan), members_, table_,
                                              opts_.profile_runs);
  }

  // ---- Placer
  void place(Plan& p) const override {
    PlacementRequest r;
    r.mode = opts_.placement;
    r.min_split_gain = opts_.min_split_gain;
    const std::vector<DeviceCosts> costs = device_costs(p);
    r.estimates = !opts_.costs.empty() || needs_costs(p);
    for (std::size_t d = 0; d < members_.size(); ++d) {
      const Member& m = members_[d];
      r.devices.push_back(
          {m.device, m.name, costs[d], m.backend, m.device.kind == Device::Kind::cpu});
    }
    std::vector<std::string> keys;
    for (const Member& m : members_) keys.push_back(m.device.str());
    r.measured = [table = table_, keys](std::size_t d, const Plan& plan, const PlanNode& n) {
      return table->find(keys[d], cost_signature(plan, n));
    };
    place_devices(p, r);
  }
  std::size_t device_count() const override { return members_.size(); }
  ReuseMode reuse_mode(std::size_t d) const override { return members_[d].backend->reuse_mode(); }
  bool packs_arena(std::size_t d) const override { return members_[d].backend->packs_arena(); }
  int host_device() const override {
    for (std::size_t d = 0; d < members_.size(); ++d)
      if (members_[d].device.kind == Device::Kind::cpu) return static_cast<int>(d);
    return -1;
  }
  std::string device_name(std::size_t d) const override { return members_[d].name; }
  int kernel_threads(std::size_t d) const override { return members_[d].backend->kernel_threads(); }
  const Capabilities* capabilities(std::size_t d) const override { return members_[d].backend; }

 private:
  // The given figures; else measured ones where placement depends on them (HEFT with some
  // node unpinned), zeros otherwise (estimates then only order the nodes).
  bool needs_costs(const Plan& p) const {
    if (opts_.placement == HeteroOptions::Placement::first) return false;
    return std::any_of(p.nodes.begin(), p.nodes.end(),
                       [](const PlanNode& n) { return n.storage == Storage::Computed && !n.pin; });
  }
  std::vector<DeviceCosts> device_costs(const Plan& p) const {
    if (!opts_.costs.empty()) return opts_.costs;
    if (!needs_costs(p)) return std::vector<DeviceCosts>(members_.size());
    std::vector<DeviceCosts> out;
    for (const Member& m : members_) out.push_back(measure_costs(m.platform));
    return out;
  }

  std::vector<Member> members_;
  HeteroOptions opts_;
  std::shared_ptr<CostTable> table_;
};

std::optional<OpenClDevice> describe(const Device& d) {
  for (const OpenClDevice& o : Platform::opencl_devices()) {
    if (o.platform_index == d.platform_index && o.device_index == d.device_index) return o;
  }
  return std::nullopt;
}

std::string member_name(const Device& d) {
  if (d.kind == Device::Kind::cpu) return "cpu";
  const auto o = describe(d);
  return o ? d.str() + " (" + o->name + ")" : d.str();
}

// PoCL's "basic" driver (named "cpu-minimal" from PoCL 5) hangs in clSetUserEventStatus when
// a command waits on the event (pocl issue #1177, still in Debian 12's PoCL 3.1): values reach
// a device that way, so the device cannot be a member.
bool takes_user_events(const Device& d) {
  if (d.kind == Device::Kind::cpu) return true;
  const auto o = describe(d);
  if (!o || o->platform != "Portable Computing Language") return true;
  return o->name.rfind("basic", 0) != 0 && o->name.rfind("cpu-minimal", 0) != 0;
}

}  // namespace
}  // namespace detail::hetero

Platform Platform::heterogeneous(std::vector<Platform> members, HeteroOptions options) {
  if (members.empty()) {
    throw PlatformError(
        "Platform::heterogeneous: no member platforms (give the CPU and OpenCL platforms to run "
        "on)");
  }
  if (!(options.min_split_gain >= 0 && options.min_split_gain < 1)) {
    throw PlatformError("HeteroOptions.min_split_gain must be in [0, 1)");
  }
  if (options.profile_runs < 0) throw PlatformError("HeteroOptions.profile_runs must be >= 0");
  if (!options.costs.empty() && options.costs.size() != members.size()) {
    throw PlatformError("HeteroOptions.costs has " + std::to_string(options.costs.size()) +
                        " entries for " + std::to_string(members.size()) +
                        " members (one per member, in order, or none)");
  }
  std::vector<detail::hetero::Member> ms;
  int cpus = 0;
  for (std::size_t k = 0; k < members.size(); ++k) {
    detail::Backend& b = detail::backend_of(members[k]);
    const std::vector<Device> devs = b.devices();
    if (devs.size() != 1) {
      throw PlatformError("Platform::heterogeneous: member " + std::to_string(k) + " (" + b.name() +
                          ") runs on " + std::to_string(devs.size()) +
                          " devices; give each device's own platform");
    }
    for (const auto& m : ms) {
      if (m.device == devs[0]) {
        throw PlatformError("Platform::heterogeneous: device " + devs[0].str() +
                            " is listed twice");
      }
    }
    if (!detail::hetero::takes_user_events(devs[0])) {
      throw PlatformError("Platform::heterogeneous: OpenCL device " +
                          detail::hetero::member_name(devs[0]) +
                          " cannot be a member: PoCL's basic driver hangs when a command waits "
                          "for a user event (pocl issue #1177), which is how values reach a "
                          "device; use PoCL's pthread driver (POCL_DEVICES=\"pthread pthread\" "
                          "gives two devices)");
    }
    cpus += devs[0].kind == Device::Kind::cpu;
    ms.push_back({members[k], &b, devs[0], detail::hetero::member_name(devs[0])});
  }
  if (cpus > 1) throw PlatformError("Platform::heterogeneous: more than one CPU platform");
  return Platform(
      std::make_shared<detail::hetero::HeteroBackend>(std::move(ms), std::move(options)));
}

}  // namespace hetgraph
