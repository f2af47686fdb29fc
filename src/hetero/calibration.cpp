// SPDX-License-Identifier: Apache-2.0
// Device cost figures measured through hetgraph's own kernels (see calibration.hpp).
#include "hetero/calibration.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/executable.hpp"
#include "hetgraph/error.hpp"
#include "hetgraph/graph.hpp"
#include "opencl/executable.hpp"

namespace hetgraph::detail::hetero {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The fastest of a few timed runs (after warm-up): the machine's noise only ever adds.
template <class F>
double fastest(F&& f, int runs = 5) {
  f();
  f();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const double t0 = now_s();
    f();
    best = std::min(best, now_s() - t0);
  }
  return std::max(best, 1e-9);
}

double time_graph(const Platform& member, const Graph& g, const InputShapes& shapes,
                  std::initializer_list<Node> fetches,
                  std::optional<CompiledGraph>* keep = nullptr) {
  CompiledGraph cg = GraphCompiler(member).compile(g, shapes, fetches);
  std::vector<std::vector<float>> data;
  std::vector<FeedItem> feeds;
  data.reserve(shapes.size());
  for (const auto& [name, shape] : shapes) {
    data.emplace_back(static_cast<std::size_t>(shape.numel()), 0.5f);
    feeds.push_back({name, cg.mapped_input(name)});
  }
  for (std::size_t i = 0; i < feeds.size(); ++i) {
    auto buf = cg.mapped_input(feeds[i].name);
    std::copy(data[i].begin(), data[i].end(), buf.begin());
  }
  const double t = fastest([&] { cg.run(std::span<const FeedItem>(feeds)); });
  if (keep) keep->emplace(std::move(cg));
  return t;
}

// Pinned host memory <-> a device buffer, the way crossings move values.
void measure_transfers(cl::Device& dev, DeviceCosts& c) {
  const cl_context ctx = dev.context();
  const cl_command_queue q = dev.queue(false);
  constexpr std::size_t kBig = std::size_t{4} << 20;
  cl::Mem staging(
      HG_CL_CREATE(clCreateBuffer, ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, kBig, nullptr));
  cl::Mem buf(HG_CL_CREATE(clCreateBuffer, ctx, CL_MEM_READ_WRITE, kBig, nullptr));
  void* host = cl::map_buffer(q, staging.get(), kBig, nullptr, "calibration staging");
  std::memset(host, 1, kBig);
  auto copy = [&](bool to_device, std::size_t bytes) {
    cl::Event ev;
    if (to_device) {
      HG_CL(clEnqueueWriteBuffer(q, buf.get(), CL_FALSE, 0, bytes, host, 0, nullptr, ev.out()));
    } else {
      HG_CL(clEnqueueReadBuffer(q, buf.get(), CL_FALSE, 0, bytes, host, 0, nullptr, ev.out()));
    }
    // The completion reaches the host the way a crossing's does: through a callback.
    std::atomic<int> done{0};
    HG_CL(clSetEventCallback(
        ev.get(), CL_COMPLETE,
        [](cl_event, cl_int, void* p) {
          auto* d = static_cast<std::atomic<int>*>(p);
          d->store(1, std::memory_order_release);
          d->notify_all();
        },
        &done));
    HG_CL(clFlush(q));
    while (done.load(std::memory_order_acquire) == 0) done.wait(0, std::memory_order_acquire);
  };
  const double to = fastest([&] { copy(true, kBig); });
  const double from = fastest([&] { copy(false, kBig); });
  const double small =
      std::min(fastest([&] { copy(true, 64); }), fastest([&] { copy(false, 64); }));
  cl::unmap_buffer(q, staging.get(), host);
  c.transfer_us = small * 1e6;
  c.to_device_gbytes_per_s = static_cast<double>(kBig) / std::max(to - small, 1e-9) / 1e9;
  c.from_device_gbytes_per_s = static_cast<double>(kBig) / std::max(from - small, 1e-9) / 1e9;
}

DeviceCosts measure(const Platform& member) {
  DeviceCosts c;
  constexpr std::int64_t kM = 256;
  {
    Graph g;
    auto a = g.input("a");
    auto b = g.input("b");
    auto y = matmul(a, b);
    const double t = time_graph(member, g, {{"a", {kM, kM}}, {"b", {kM, kM}}}, {y});
    c.gflops = 2.0 * kM * kM * kM / t / 1e9;
  }
  std::optional<CompiledGraph> kept;
  {
    constexpr std::int64_t kN = std::int64_t{1} << 20;
    Graph g;
    auto a = g.input("a");
    auto b = g.input("b");
    auto y = a + b;
    const double t = time_graph(member, g, {{"a", {kN}}, {"b", {kN}}}, {y}, &kept);
    c.gbytes_per_s = 3.0 * 4 * kN / t / 1e9;
  }
  {
    constexpr int kChain = 32;
    Graph g;
    auto x = g.input("x");
    Node y = x;
    for (int i = 0; i < kChain; ++i) y = y + x;
    const double t = time_graph(member, g, {{"x", {16}}}, {y});
    c.node_us = t / kChain * 1e6;
  }
  if (kept) {
    if (auto* e = dynamic_cast<cl::OpenClExecutable*>(&executable_of(*kept))) {
      measure_transfers(e->device(), c);
      cl_device_type type = 0;
      HG_CL(clGetDeviceInfo(e->device().id(), CL_DEVICE_TYPE, sizeof(type), &type, nullptr));
      c.shares_host_cores = (type & CL_DEVICE_TYPE_CPU) != 0;
    }
  }
  return c;
}

}  // namespace

DeviceCosts measure_costs(const Platform& member) {
  static std::mutex mu;
  static std::map<std::string, DeviceCosts> cache;
  const std::vector<Device> devs = member.devices();
  const std::string key = (devs.empty() ? std::string("?") : devs[0].str()) + "/" + member.name();
  {
    std::lock_guard lk(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const DeviceCosts c = measure(member);
  std::lock_guard lk(mu);
  return cache.emplace(key, c).first->second;
}

}  // namespace hetgraph::detail::hetero
