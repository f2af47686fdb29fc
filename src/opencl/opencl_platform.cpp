// SPDX-License-Identifier: Apache-2.0
// The OpenCL platform: OpenClExecutable (see executable.hpp), its Backend, and the public
// Platform::opencl* functions.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "compiler/graph_stats.hpp"
#include "hetgraph/error.hpp"
#include "opencl/executable.hpp"

namespace hetgraph {
namespace detail::cl {

namespace {

std::atomic<bool> g_force_staged{false};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void sort_unique(std::vector<std::uint32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The kernels index with 32-bit ints (faster on GPUs): refuse larger tensors up front.
void refuse_wide_tensors(const Plan& p) {
  for (const PlanNode& node : p.nodes) {
    if (node.type.shape.numel() > INT_MAX) {
      throw PlatformError("node " + node.label + " of shape " + node.type.shape.str() +
                          " has more than 2^31-1 elements, more than the OpenCL kernels index");
    }
  }
}

}  // namespace

void OpenClExecutable::force_staged_inputs(bool on) {
  g_force_staged = on;
}

std::uint32_t OpenClExecutable::base_of(std::uint32_t node) const {
  const Plan& p = plan();
  while (p.nodes[node].storage == Storage::View) node = p.nodes[node].inputs[0];
  return node;
}

OpenClExecutable::OpenClExecutable(std::shared_ptr<const Plan> plan, std::shared_ptr<Device> dev,
                                   bool in_order, const std::shared_ptr<VariableStore::Impl>& store)
    : Executable(plan), dev_(std::move(dev)), q_(dev_->queue(in_order)), store_(store) {
  refuse_wide_tensors(*plan);
  if (store_) bind_store();
  allocate_buffers();
  map_inputs();
  plan_label_checks();
  make_ops();  // created now so a run only enqueues
  order_work();
  plan_waits();
  find_finals();
  mark_committed();
  find_input_readers();
  find_writers();
  ev_.resize(plan->nodes.size());
  initialize_state();
}

// The variables' blocks in the store, made on this device's context on first sight (host
// visible, as the host reads and writes variables).
void OpenClExecutable::bind_store() {
  const cl_context ctx = dev_->context();
  std::ostringstream where;
  where << dev_->label() << " (context " << static_cast<const void*>(ctx) << ")";
  VariableStore::Impl::Binding b = store_->bind(plan(), where.str(), [&](std::size_t bytes) {
    cl_int err = CL_SUCCESS;
    auto mem = std::make_shared<Mem>(
        clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, nullptr, &err));
    check(err, "clCreateBuffer", __FILE__, __LINE__,
          std::to_string(bytes) + " bytes for a variable of a VariableStore on " + dev_->label());
    return VariableStore::Impl::Block{{}, DType::f32, 0, mem->get(), mem};
  });
  stored_ = std::move(b.buffer);
  preset_ = std::move(b.preset);
}

// One cl_mem per planned buffer; host-visible ones where the host maps them.
void OpenClExecutable::allocate_buffers() {
  const Plan& p = plan();
  const std::size_t n = p.nodes.size();
  const cl_context ctx = dev_->context();
  std::vector<char> host_visible(p.buffer_bytes.size(), 0);
  for (const PlanNode& node : p.nodes) {
    if (node.buffer >= 0 && (node.storage == Storage::Input || node.fetched))
      host_visible[static_cast<std::size_t>(node.buffer)] = 1;
  }
  bufs_.resize(p.buffer_bytes.size());
  for (std::size_t b = 0; b < bufs_.size(); ++b) {
    if (!stored_.empty() && stored_[b] != nullptr) {
      const auto m = static_cast<cl_mem>(stored_[b]);
      clRetainMemObject(m);  // this executable's reference; the store keeps its own
      bufs_[b] = Mem(m);
      continue;
    }
    const cl_mem_flags flags = CL_MEM_READ_WRITE | (host_visible[b] ? CL_MEM_ALLOC_HOST_PTR : 0);
    cl_int err = CL_SUCCESS;
    bufs_[b] = Mem(clCreateBuffer(ctx, flags, p.buffer_bytes[b], nullptr, &err));
    if (err != CL_SUCCESS) {
      std::string users;
      for (const PlanNode& node : p.nodes) {
        if (node.buffer == static_cast<std::int32_t>(b) && users.size() < 200)
          users += (users.empty() ? "" : ", ") + node.label;
      }
      check(err, "clCreateBuffer", __FILE__, __LINE__,
            std::to_string(p.buffer_bytes[b]) + " bytes for " + users + " on " + dev_->label() +
                " (largest allocation " + std::to_string(dev_->max_alloc()) + " bytes)");
    }
  }
  mem_.assign(n, nullptr);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (p.nodes[i].buffer >= 0) mem_[i] = bufs_[static_cast<std::size_t>(p.nodes[i].buffer)].get();
  }
}

// Inputs: mapped for the caller; zero-copy when the mapping stays put across maps.
void OpenClExecutable::map_inputs() {
  const Plan& p = plan();
  const cl_context ctx = dev_->context();
  input_of_.assign(p.nodes.size(), -1);
  const bool staged = g_force_staged.load();
  for (std::uint32_t i : p.inputs) {
    InputBuf in;
    in.node = i;
    in.mem = mem_[i];
    in.bytes = p.buffer_bytes[static_cast<std::size_t>(p.nodes[i].buffer)];
    const std::string what = "input " + p.nodes[i].label;
    void* first = map_buffer(q_, in.mem, in.bytes, nullptr, what);
    unmap_buffer(q_, in.mem, first);
    in.host = map_buffer(q_, in.mem, in.bytes, nullptr, what);
    in.zero_copy = in.host == first && !staged;
    if (!in.zero_copy) {
      // The caller gets a pinned staging buffer that stays mapped; each run copies it over.
      unmap_buffer(q_, in.mem, in.host);
      in.mapped = false;
      in.staging = Mem(HG_CL_CREATE(clCreateBuffer, ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                    in.bytes, nullptr));
      in.host = map_buffer(q_, in.staging.get(), in.bytes, nullptr, "staging for " + what);
    }
    std::memset(in.host, 0, in.bytes);
    input_of_[i] = static_cast<std::int32_t>(inputs_.size());
    inputs_.push_back(std::move(in));
  }
}

// Int32 label checks: on the host for fed labels, on the device for computed ones.
void OpenClExecutable::plan_label_checks() {
  const Plan& p = plan();
  const std::size_t n = p.nodes.size();
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    if (!node.has_work()) continue;
    // One slot per index input, consecutive (embedding_concat has one per lookup).
    for (const IndexUse& u : index_uses(p, node)) {
      LabelCheck c;
      c.node = i;
      c.labels = node.inputs[u.input];
      c.embedding = op_def(node.op).index.what == "index";
      c.classes = u.bound;
      c.wraps = u.wraps;
      c.rows = p.nodes[c.labels].type.shape.numel();
      c.slot = static_cast<int>(labels_.size());
      c.on_host = p.nodes[base_of(c.labels)].storage == Storage::Input;
      labels_.push_back(c);
    }
  }
  checked_.assign(n, 0);
  for (const LabelCheck& c : labels_) checked_[c.node] = 1;
  device_checks_ =
      std::any_of(labels_.begin(), labels_.end(), [](const LabelCheck& c) { return !c.on_host; });
  if (!labels_.empty()) {
    status_ = Mem(HG_CL_CREATE(clCreateBuffer, dev_->context(), CL_MEM_READ_WRITE,
                               labels_.size() * sizeof(cl_int), nullptr));
  }
}

// A ClOp per node with device work, from the op registry, over programs built once per family.
void OpenClExecutable::make_ops() {
  const Plan& p = plan();
  const std::size_t n = p.nodes.size();
  ops_.resize(n);
  names_.assign(n, "none");
  std::map<std::string, cl_program, std::less<>> programs;
  auto program = [&](std::string_view family) {
    auto it = programs.find(family);
    if (it == programs.end())
      it = programs.emplace(std::string(family), dev_->programs().get(family)).first;
    return it->second;
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    if (!node.has_work()) continue;
    OpArgs args{p, i, node, {}, {}, nullptr, node.type, *dev_, program, status_.get(), -1};
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const std::uint32_t u = node.inputs[k];
      args.in.push_back(node.reads_input(k) ? mem_[u] : nullptr);
      args.in_types.push_back(p.nodes[u].type);
    }
    args.out = mem_[p.output_of(i)];       // an assign: its variable
    for (const LabelCheck& c : labels_) {  // the first of the node's slots
      if (c.node == i && args.status_slot < 0) args.status_slot = c.slot;
    }
    ops_[i] = op_registry().create(args, node.op, node.label, false, names_[i]);
  }
}

// The work nodes in plan order, and the commit point among them.
void OpenClExecutable::order_work() {
  const Plan& p = plan();
  // Plan order respects every dependency (assign ordering included), so enqueueing in it
  // makes every wait one on an earlier event.
  work_.clear();
  for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
    if (ops_[i]) work_.push_back(i);
    if (p.nodes[i].commit) commit_ = i;
  }
  // Writers of variables (after the commit point) are enqueued only once everything before
  // it completed and was checked: they need no events from before it.
  if (commit_ >= 0) {
    phase1_ = static_cast<std::size_t>(
        std::lower_bound(work_.begin(), work_.end(), static_cast<std::uint32_t>(commit_)) -
        work_.begin());
  } else {
    phase1_ = work_.size();
  }
}

// What each work node waits for.
void OpenClExecutable::plan_waits() {
  const Plan& p = plan();
  const std::size_t n = p.nodes.size();
  // done[i]: the work nodes (and inputs, whose event is their unmap or upload) whose events
  // mark node i's value as complete.
  std::vector<std::vector<std::uint32_t>> done(n);
  waits_.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const PlanNode& node = p.nodes[i];
    if (node.commit) continue;  // done[commit] stays empty
    if (ops_[i] || node.storage == Storage::Input) {
      done[i] = {i};
    } else if (node.storage == Storage::View) {
      done[i] = done[node.inputs[0]];
    } else if (node.storage == Storage::None) {  // groups, elided assigns
      for (std::uint32_t d : node.deps)
        done[i].insert(done[i].end(), done[d].begin(), done[d].end());
      sort_unique(done[i]);
    }
    if (ops_[i]) {
      for (std::uint32_t d : node.deps)
        waits_[i].insert(waits_[i].end(), done[d].begin(), done[d].end());
      sort_unique(waits_[i]);
    }
  }
}

// The work nodes no other one waits for: the events a run (or its first phase) ends with.
void OpenClExecutable::find_finals() {
  const std::size_t n = plan().nodes.size();
  std::vector<char> waited(n, 0), waited1(n, 0);
  for (std::size_t k = 0; k < work_.size(); ++k) {
    for (std::uint32_t w : waits_[work_[k]]) {
      waited[w] = 1;
      if (k < phase1_) waited1[w] = 1;
    }
  }
  for (std::size_t k = 0; k < work_.size(); ++k) {
    if (!waited[work_[k]]) finals_.push_back(work_[k]);
    if (k < phase1_ && !waited1[work_[k]]) finals1_.push_back(work_[k]);
  }
}

// A host access of what a writer writes waits for the whole run (the commit included).
void OpenClExecutable::mark_committed() {
  const Plan& p = plan();
  committed_by_.assign(p.nodes.size(), 0);
  for (std::size_t k = phase1_; k < work_.size(); ++k) {
    const std::uint32_t w = work_[k];
    committed_by_[w] = committed_by_[p.output_of(w)] = 1;
    for (std::uint32_t v : p.nodes[w].written_inputs()) committed_by_[v] = 1;
    if (p.nodes[w].into_variable >= 0)
      committed_by_[static_cast<std::size_t>(p.nodes[w].into_variable)] = 1;
  }
}

// Readers of each input's buffer (directly or through views), for the map after them.
void OpenClExecutable::find_input_readers() {
  const Plan& p = plan();
  for (std::uint32_t i : work_) {
    const PlanNode& node = p.nodes[i];
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      if (!node.reads_input(k)) continue;
      const std::int32_t in = input_of_[base_of(node.inputs[k])];
      if (in >= 0) inputs_[static_cast<std::size_t>(in)].readers.push_back(i);
    }
  }
  for (InputBuf& in : inputs_) sort_unique(in.readers);
}

// A host access waits for the last writer of the node's buffer in the run: the node itself
// for computed values; for a variable, its copying assign, or the op computed in place over it.
void OpenClExecutable::find_writers() {
  const Plan& p = plan();
  const std::size_t n = p.nodes.size();
  writer_.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t b = base_of(i);
    if (ops_[b]) writer_[i] = {b};
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    if (ops_[i] && p.output_of(i) != i) writer_[p.output_of(i)] = {i};
    if (ops_[i])
      for (std::uint32_t v : p.nodes[i].written_inputs()) writer_[v] = {i};
    const std::int64_t var = p.nodes[i].into_variable;
    if (var >= 0) writer_[static_cast<std::size_t>(var)] = writer_[i];
  }
}

OpenClExecutable::~OpenClExecutable() {
  // Work in flight uses this executable's buffers: let it finish (its error stays with its
  // handle).
  if (hook_) hook_->release();
  if (in_flight_ && abort_hook_) abort_hook_();
  shutdown();
  if (in_flight_) settle_all();
}

std::size_t OpenClExecutable::zero_copy_inputs() const {
  return static_cast<std::size_t>(
      std::count_if(inputs_.begin(), inputs_.end(), [](const InputBuf& b) { return b.zero_copy; }));
}

std::string OpenClExecutable::kernel_name(std::uint32_t node) const {
  return std::string(names_[node]);
}

EngineReport OpenClExecutable::engine_report() const {
  EngineReport r = Executable::engine_report();
  r.engine = out_of_order() ? "opencl out-of-order queue" : "opencl in-order queue";
  r.runs = runs_;
  const int units = static_cast<int>(dev_->compute_units());
  for (const std::string& lane : lane_names()) r.lanes.push_back({lane, units});
  r.opencl = EngineReport::OpenCl{dev_->label(), out_of_order(), units};
  return r;
}

std::vector<std::string> OpenClExecutable::lane_names() const {
  std::vector<std::string> lanes = {"OpenCL queue (" + dev_->info().name + ")"};
  for (std::size_t k = 0; k < dev_->gemm_queue_count(); ++k)
    lanes.push_back("CLBlast queue " + std::to_string(k));
  return lanes;
}

// ---- host access ---------------------------------------------------------------------------

void* OpenClExecutable::host_pointer(std::uint32_t node) {
  return inputs_[static_cast<std::size_t>(input_of_[node])].host;
}

void OpenClExecutable::copy_in(std::uint32_t node, const void* src, std::size_t bytes) {
  if (in_flight_) settle_all();  // a write must not race the run that may still read it
  const std::uint32_t b = base_of(node);
  if (input_of_[b] >= 0) {
    std::memcpy(inputs_[static_cast<std::size_t>(input_of_[b])].host, src, bytes);
    return;
  }
  write_buffer(q_, mem_[node], 0, bytes, src);
}

void OpenClExecutable::copy_out(std::uint32_t node, void* dst, std::size_t bytes) {
  const std::uint32_t b = base_of(node);
  if (input_of_[b] >= 0) {
    std::memcpy(dst, inputs_[static_cast<std::size_t>(input_of_[b])].host, bytes);
    return;
  }
  // settle_for_access has waited for the node's writer; nothing else writes this buffer.
  read_buffer(q_, mem_[node], 0, bytes, dst);
}

void OpenClExecutable::settle_for_access(std::uint32_t node) {
  if (!in_flight_) return;
  if (committed_by_[base_of(node)] || committed_by_[node]) {
    finish_inflight();  // written after the commit point: the run's end decides
    return;
  }
  std::vector<cl_event> evs;
  const std::uint32_t b = base_of(node);
  if (input_of_[b] >= 0) {
    const InputBuf& in = inputs_[static_cast<std::size_t>(input_of_[b])];
    if (in.remap) evs.push_back(in.remap.get());
  }
  for (std::uint32_t w : writer_[node]) {
    if (ev_[w]) evs.push_back(ev_[w].get());
  }
  if (evs.empty()) return;
  if (clWaitForEvents(static_cast<cl_uint>(evs.size()), evs.data()) != CL_SUCCESS) {
    finish_inflight();  // the value was not computed: the run failed (its wait() reports it)
  }
}

// ---- runs ----------------------------------------------------------------------------------

void OpenClExecutable::execute() {
  launch();
  finish();
}

void OpenClExecutable::launch_async() {
  launch();
}

std::exception_ptr OpenClExecutable::finish_async() {
  if (async_error_) return std::exchange(async_error_, nullptr);
  try {
    finish();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// Without waiting: whether every event in `evs` has completed (or failed).
namespace {
bool all_complete(const std::vector<cl_event>& evs) {
  for (cl_event e : evs) {
    cl_int st = CL_COMPLETE;
    if (clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, nullptr) !=
        CL_SUCCESS)
      continue;  // finish() reports what went wrong
    if (st > CL_COMPLETE) return false;
  }
  return true;
}
}  // namespace

bool OpenClExecutable::async_finished() {
  if (!in_flight_ || async_error_) return true;
  std::vector<cl_event> evs;
  if (status_reset_) evs.push_back(status_reset_.get());
  try {
    // The writers of variables wait for the host's check of everything before them: a run
    // polled and never waited for must still get there.
    if (!committed_) {
      for (std::uint32_t i : finals1_) {
        if (ev_[i]) evs.push_back(ev_[i].get());
      }
      if (!all_complete(evs)) return false;
      commit();
      evs.clear();
      if (status_reset_) evs.push_back(status_reset_.get());
    }
  } catch (...) {
    async_error_ = std::current_exception();  // the commit refused the run: it is over
    return true;
  }
  for (std::uint32_t i : finals_) {
    if (ev_[i]) evs.push_back(ev_[i].get());
  }
  for (const InputBuf& in : inputs_) {
    if (in.remap) evs.push_back(in.remap.get());
  }
  return all_complete(evs);
}

std::string OpenClExecutable::label_error(const LabelCheck& c, const std::string& value,
                                          std::int64_t row) const {
  const std::string node = "node " + plan().nodes[c.node].index_label() + ": ";
  const std::string range =
      "[" + std::to_string(c.wraps ? -c.classes : 0) + ", " + std::to_string(c.classes) + ")";
  if (c.wraps) {  // gather and the elements ops: the CPU platform's wording
    const bool scatter = plan().nodes[c.node].op == OpKind::ScatterElements;
    return node + (value.empty() ? "an index" : "index " + value) + " at position " +
           std::to_string(row) + " of the indices " + plan().nodes[c.labels].type.shape.str() +
           " is outside " + range + ", the size of the " + (scatter ? "scattered" : "gathered") +
           " axis";
  }
  if (c.embedding) {  // the CPU platform's wording (check_indices: its node names what it checks)
    const bool table = plan().nodes[c.node].op != OpKind::CheckIndices;
    return node + (value.empty() ? "an index" : "index " + value) + " at position " +
           std::to_string(row) + " of the indices " + plan().nodes[c.labels].type.shape.str() +
           " is outside " + (table ? "the table's rows " : "") + range;
  }
  return node + (value.empty() ? "a class id" : "class id " + value) + " at row " +
         std::to_string(row) + " is outside " + range;
}

void OpenClExecutable::enqueue_input_unmaps() {
  for (InputBuf& in : inputs_) {
    cl::Event& ev = ev_[in.node];
    if (in.zero_copy) {
      // Kernels may use the buffer only once the host mapping is gone.
      HG_CL(clEnqueueUnmapMemObject(q_, in.mem, in.host, 0, nullptr, ev.out()));
      in.mapped = false;
    } else {
      HG_CL(clEnqueueWriteBuffer(q_, in.mem, CL_FALSE, 0, in.bytes, in.host, 0, nullptr, ev.out()));
    }
  }
}

void OpenClExecutable::enqueue_input_remaps() {
  std::vector<cl_event> wl;
  for (InputBuf& in : inputs_) {
    if (!in.zero_copy) continue;
    wl.clear();
    for (std::uint32_t r : in.readers) {
      if (ev_[r]) wl.push_back(ev_[r].get());
    }
    if (wl.empty()) wl.push_back(ev_[in.node].get());  // no reader: after the unmap
    cl_int err = CL_SUCCESS;
    void* ptr =
        clEnqueueMapBuffer(q_, in.mem, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, 0, in.bytes,
                           static_cast<cl_uint>(wl.size()), wl.data(), in.remap.out(), &err);
    check(err, "clEnqueueMapBuffer", __FILE__, __LINE__, "input " + plan().nodes[in.node].label);
    in.mapped = true;
    if (ptr != in.host) {
      throw PlatformError("clEnqueueMapBuffer: the driver moved the mapping of input " +
                          plan().nodes[in.node].label + " between runs");
    }
  }
}

void OpenClExecutable::launch() {
  // Fed labels were checked on the host before the run (Executable::feed).
  ++runs_;
  committed_ = commit_ < 0;
  for (cl::Event& e : ev_) e.reset();
  for (InputBuf& in : inputs_) in.remap.reset();
  status_reset_.reset();
  if (recording_) first_.assign(ev_.size(), {});
  in_flight_ = true;
  run_t0_ns_ = steady_ns();
  try {
    if (device_checks_) {
      const cl_int none = INT_MAX;
      HG_CL(clEnqueueFillBuffer(q_, status_.get(), &none, sizeof(none), 0,
                                labels_.size() * sizeof(none), 0, nullptr, status_reset_.out()));
    }
    enqueue_input_unmaps();
    enqueue_work(0, phase1_);
    if (committed_) enqueue_input_remaps();  // else after the writers, at the commit
    HG_CL(clFlush(q_));
  } catch (...) {
    release_waiters();  // nothing may wait forever on a test's or another device's event
    settle_each();
    restore_maps();
    in_flight_ = false;
    throw;
  }
}

void OpenClExecutable::enqueue_work(std::size_t from, std::size_t to) {
  std::vector<cl_event> wl;
  for (std::size_t k = from; k < to; ++k) {
    const std::uint32_t i = work_[k];
    wl.clear();
    for (std::uint32_t w : waits_[i]) {
      if (ev_[w]) wl.push_back(ev_[w].get());
    }
    if (checked_[i] && status_reset_) wl.push_back(status_reset_.get());
    try {
      if (hook_) hook_->before_enqueue(dev_->context(), i, wl);
      ev_[i] = ops_[i]->enqueue(q_, wl, recording_ ? &first_[i] : nullptr);
    } catch (const PlatformError& e) {
      const PlanNode& node = plan().nodes[i];
      throw PlatformError("node " + node.label + " (" + std::string(op_name(node.op)) +
                          "): " + e.what());
    }
  }
}

std::string OpenClExecutable::first_failure(std::size_t upto) const {
  for (std::size_t k = 0; k < upto; ++k) {
    const std::uint32_t i = work_[k];
    if (!ev_[i]) continue;
    cl_int st = CL_COMPLETE;
    HG_CL(
        clGetEventInfo(ev_[i].get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, nullptr));
    if (hook_) st = hook_->event_status(i, st);
    if (st < 0) {
      const PlanNode& node = plan().nodes[i];
      return "node " + node.label + " (" + std::string(op_name(node.op)) + ") failed on " +
             dev_->label() + ": " + error_name(st) + " (" + std::to_string(st) + ")";
    }
  }
  return {};
}

void OpenClExecutable::check_device_labels() {
  if (!device_checks_) return;
  std::vector<cl_int> bad(labels_.size());
  read_buffer(q_, status_.get(), 0, bad.size() * sizeof(cl_int), bad.data());
  for (const LabelCheck& c : labels_) {
    const cl_int row = bad[static_cast<std::size_t>(c.slot)];
    if (c.on_host || row == INT_MAX) continue;
    std::string value;
    if (!plan().nodes[c.labels].clobbered) {  // still readable: name the offending value
      cl_int v = 0;
      read_buffer(q_, mem_[c.labels], static_cast<std::size_t>(row) * sizeof(cl_int), sizeof(v),
                  &v);
      value = std::to_string(v);
    }
    throw FeedError(label_error(c, value, row));
  }
}

// The commit: everything before the commit point has completed without a failure and with
// valid labels; only then are the writers of variables enqueued. A failure here leaves every
// variable as it was.
void OpenClExecutable::commit() {
  check_commit();
  enqueue_commit();
}

void OpenClExecutable::check_commit() {
  std::vector<cl_event> evs;
  for (std::uint32_t i : finals1_) {
    if (ev_[i]) evs.push_back(ev_[i].get());
  }
  if (status_reset_) evs.push_back(status_reset_.get());
  bool ok =
      evs.empty() || clWaitForEvents(static_cast<cl_uint>(evs.size()), evs.data()) == CL_SUCCESS;
  if (!ok) settle_each();
  std::string failure = first_failure(phase1_);
  if (failure.empty() && !ok) failure = "a command before the commit point failed";
  try {
    if (!failure.empty()) {
      dev_->mark_broken();
      throw PlatformError(failure +
                          "; no variable was changed (compile the graph again to "
                          "continue)");
    }
    check_device_labels();
    // A collective that failed (another rank gave up) fails the run before any variable is
    // written, like a device fault.
    for (std::size_t k = 0; k < phase1_; ++k) ops_[work_[k]]->after_run();
  } catch (...) {
    abandon();
    throw;
  }
}

void OpenClExecutable::enqueue_commit() {
  if (committed_ || !in_flight_) return;
  try {
    enqueue_work(phase1_, work_.size());
    enqueue_input_remaps();
    HG_CL(clFlush(q_));
  } catch (...) {
    abandon();
    throw;
  }
  committed_ = true;
}

void OpenClExecutable::abandon() {
  if (!in_flight_) return;
  release_waiters();
  settle_each();
  in_flight_ = false;
  try {
    restore_maps();
  } catch (...) {
    // A mapping lost for good: the next run's unmap reports it.
  }
}

bool OpenClExecutable::settle_all() {
  std::vector<cl_event> evs;
  for (std::uint32_t i : finals_) {
    if (ev_[i]) evs.push_back(ev_[i].get());
  }
  for (const InputBuf& in : inputs_) {
    if (in.remap) evs.push_back(in.remap.get());
  }
  if (status_reset_) evs.push_back(status_reset_.get());
  if (evs.empty() || clWaitForEvents(static_cast<cl_uint>(evs.size()), evs.data()) == CL_SUCCESS) {
    return true;  // every other event of the run precedes one of these
  }
  settle_each();
  return false;
}

void OpenClExecutable::settle_each() {
  // Each event on its own: after a failure a wait on many may return before all are done, and
  // nothing may still be running when the buffers are touched again.
  auto wait_one = [](const cl::Event& e) {
    if (!e) return;
    const cl_event raw = e.get();
    clWaitForEvents(1, &raw);
  };
  for (const cl::Event& e : ev_) wait_one(e);
  for (const InputBuf& in : inputs_) wait_one(in.remap);
  wait_one(status_reset_);
}

void OpenClExecutable::restore_maps() {
  for (InputBuf& in : inputs_) {
    if (!in.zero_copy) continue;
    cl_int st = CL_COMPLETE;
    if (in.remap) {
      clGetEventInfo(in.remap.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, nullptr);
    }
    if (in.mapped && st == CL_COMPLETE) continue;
    // The map after the run did not happen (it waited on a failed command): map again.
    void* ptr = map_buffer(q_, in.mem, in.bytes, nullptr, "input " + plan().nodes[in.node].label);
    in.mapped = true;
    in.remap.reset();
    if (ptr != in.host) {
      throw PlatformError("clEnqueueMapBuffer: the driver moved the mapping of input " +
                          plan().nodes[in.node].label + " after a failed run");
    }
  }
}

void OpenClExecutable::finish() {
  if (!in_flight_) return;
  if (!committed_) commit();
  const bool ok = settle_all();
  in_flight_ = false;
  // The first node, in plan order, whose command failed.
  const std::string failure = ok && !hook_ ? std::string() : first_failure(work_.size());
  restore_maps();
  if (recording_ && failure.empty()) collect_events();
  if (!failure.empty()) {
    // A device fault may have cost the context: later compiles get a fresh one.
    dev_->mark_broken();
    // Without a commit point nothing was written to variables; with one, the check before it
    // passed, so the fault hit a write of a variable itself.
    throw PlatformError(failure + (commit_ < 0 ? "; the run did not complete and changed no "
                                                 "variable (compile the graph again to continue)"
                                               : "; the fault hit the writes of variables, which "
                                                 "may be partly updated (compile the graph again "
                                                 "and restore them)"));
  }
  // With a commit point the work before it was checked there.
  for (std::size_t k = commit_ < 0 ? 0 : phase1_; k < work_.size(); ++k)
    ops_[work_[k]]->after_run();
  if (commit_ < 0) check_device_labels();  // with a commit point, checked before it
}

// ---- traces --------------------------------------------------------------------------------

void OpenClExecutable::collect_events() {
  last_events_.clear();
  // The device clock against the host's: the run's first command was queued just after
  // run_t0_ns_ (profiling times are readable once a command is complete, as all are now).
  const cl_event anchor = status_reset_      ? status_reset_.get()
                          : !inputs_.empty() ? ev_[inputs_[0].node].get()
                          : !work_.empty()   ? ev_[work_[0]].get()
                                             : nullptr;
  cl_ulong queued = 0;
  if (anchor != nullptr) {
    HG_CL(clGetEventProfilingInfo(anchor, CL_PROFILING_COMMAND_QUEUED, sizeof(queued), &queued,
                                  nullptr));
  }
  clock_offset_ns_ = run_t0_ns_ - static_cast<std::int64_t>(queued);
  auto when = [&](const cl::Event& e, cl_profiling_info what) {
    cl_ulong t = 0;
    HG_CL(clGetEventProfilingInfo(e.get(), what, sizeof(t), &t, nullptr));
    return static_cast<std::int64_t>(t) + clock_offset_ns_;
  };
  for (std::uint32_t i : work_) {
    const cl::Event& start = first_[i] ? first_[i] : ev_[i];
    last_events_.push_back({i, ops_[i]->lane(), when(start, CL_PROFILING_COMMAND_START),
                            when(ev_[i], CL_PROFILING_COMMAND_END)});
  }
}

void OpenClExecutable::add_trace_events(NodeSink& w, std::int64_t run) {
  w.set_lanes(lane_names());
  add_node_events(w, last_events_, run);
}

// ---- backend -------------------------------------------------------------------------------

namespace {

class OpenClBackend final : public Backend {
 public:
  OpenClBackend(std::shared_ptr<Device> dev, bool in_order)
      : dev_(std::move(dev)), in_order_(in_order) {}
  std::string name() const override { return "opencl"; }
  std::string description() const override {
    const DeviceInfo& i = dev_->info();
    return "opencl:" + std::to_string(i.platform_index) + ":" + std::to_string(i.device_index) +
           ": " + i.name + " (" + i.platform_name + ", " + type_name(i.type) + ")";
  }
  // Nodes run in any order the events allow: buffers may only be reused between nodes the
  // dependencies order.
  ReuseMode reuse_mode() const override { return ReuseMode::dag; }
  std::string unsupported(const Plan& p, const PlanNode& n) const override {
    if (!n.has_work()) return {};
    std::shared_ptr<Device> dev;
    {
      std::lock_guard lk(mu_);
      dev = dev_;
    }
    OpArgs args{p, 0, n, {}, {}, nullptr, n.type, *dev, nullptr, nullptr, -1};
    for (std::uint32_t u : n.inputs) {
      args.in.push_back(nullptr);
      args.in_types.push_back(p.nodes[u].type);
    }
    return op_registry().unsupported(args, n.op);
  }
  std::unique_ptr<Executable> instantiate(
      std::shared_ptr<const Plan> plan,
      const std::shared_ptr<VariableStore::Impl>& store) override {
    std::shared_ptr<Device> dev;
    {
      std::lock_guard lk(mu_);
      if (dev_->broken()) {  // a device fault earlier: continue on a fresh context
        OpenClOptions o;
        o.platform_index = dev_->info().platform_index;
        o.device_index = dev_->info().device_index;
        dev_ = Device::get(o);
      }
      dev = dev_;
    }
    return std::make_unique<OpenClExecutable>(std::move(plan), std::move(dev), in_order_, store);
  }
  std::vector<hetgraph::Device> devices() const override {
    std::lock_guard lk(mu_);
    return {hetgraph::Device::opencl(dev_->info().platform_index, dev_->info().device_index)};
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<Device> dev_;
  bool in_order_;
};

}  // namespace
}  // namespace detail::cl

Platform Platform::opencl(OpenClOptions options) {
  auto dev = detail::cl::Device::get(options);
  return Platform(std::make_shared<detail::cl::OpenClBackend>(std::move(dev), options.in_order));
}

bool Platform::opencl_available(OpenClOptions options) noexcept {
  try {
    detail::cl::choose_device(options);
    return true;
  } catch (...) {
    return false;
  }
}

std::vector<OpenClDevice> Platform::opencl_devices() {
  std::vector<OpenClDevice> out;
  try {
    for (const auto& d : detail::cl::enumerate_devices()) {
      out.push_back({d.platform_index, d.device_index, d.platform_name, d.name,
                     detail::cl::type_name(d.type)});
    }
  } catch (const PlatformError&) {
    // no platform installed: no devices
  }
  return out;
}

}  // namespace hetgraph
