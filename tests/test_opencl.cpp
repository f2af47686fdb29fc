// SPDX-License-Identifier: Apache-2.0
// OpenCL-specific behaviour: device choice, the out-of-order queue and its events, mapped
// memory, async runs, the program cache (in memory and on disk), CLBlast, and every error
// path. Op-by-op forward results against the reference run in test_ops on every platform;
// here gradient ops and the kernel variants test_ops does not reach are compared with the CPU.
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "compiler/graph_impl.hpp"
#include "opencl/device.hpp"
#include "opencl/executable.hpp"
#include "opencl/kernel_sources.hpp"
#include "opencl/program_cache.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using detail::cl::OpenClExecutable;
using testing_util::In;
namespace fs = std::filesystem;

namespace {

// Sets an environment variable for a scope (and restores it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A fresh empty directory under the system temp dir, removed at the end of the scope.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("hetgraph-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

OpenClExecutable& cl_exe(CompiledGraph& cg) {
  return dynamic_cast<OpenClExecutable&>(detail::executable_of(cg));
}
std::uint32_t plan_index(CompiledGraph& cg, Node n) {
  return detail::executable_of(cg).plan().index(n, "test");
}

// Device faults injected through the executable's test seam (OpenClExecutable::RunHook), in
// the next run only. fail_event: the node's event reads as failed with CL_OUT_OF_RESOURCES, as
// after a device fault. hold: the node waits on a user event that stays pending until
// complete(). enqueue_error: enqueueing the node throws, as a failed clEnqueue* would.
class Fault final : public OpenClExecutable::RunHook {
 public:
  enum class Kind { fail_event, hold, enqueue_error };
  Fault(std::uint32_t node, Kind kind) : node_(node), kind_(kind) {}
  /// Installs a fault on `node` of cg; the hook stays the executable's.
  static Fault& inject(CompiledGraph& cg, Node node, Kind kind) {
    auto f = std::make_unique<Fault>(plan_index(cg, node), kind);
    Fault& ref = *f;
    cl_exe(cg).set_run_hook(std::move(f));
    return ref;
  }

  void before_enqueue(cl_context ctx, std::uint32_t node, std::vector<cl_event>& wait) override {
    if (node != node_) return;
    failing_ = false;
    if (fired_) return;
    fired_ = true;
    switch (kind_) {
      case Kind::enqueue_error:
        detail::cl::check(CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel", __FILE__, __LINE__,
                          "injected by a test");
        break;
      case Kind::fail_event:
        failing_ = true;
        break;
      case Kind::hold:
        held_ = detail::cl::Event(HG_CL_CREATE(clCreateUserEvent, ctx));
        pending_ = true;
        wait.push_back(held_.get());
        break;
    }
  }
  cl_int event_status(std::uint32_t node, cl_int driver) override {
    return failing_ && node == node_ ? CL_OUT_OF_RESOURCES : driver;
  }
  void release() override { complete(true); }
  /// Completes (or, with `fail`, fails) the event a hold left pending.
  void complete(bool fail) {
    if (!pending_) return;
    pending_ = false;
    clSetUserEventStatus(held_.get(), fail ? CL_OUT_OF_RESOURCES : CL_COMPLETE);
  }

 private:
  std::uint32_t node_;
  Kind kind_;
  bool fired_ = false, failing_ = false, pending_ = false;
  detail::cl::Event held_;
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<float> one_hot(int rows, int classes, int shift = 0) {
  std::vector<float> v(static_cast<std::size_t>(rows * classes), 0.0f);
  for (int r = 0; r < rows; ++r)
    v[static_cast<std::size_t>(r * classes + (r * 3 + shift) % classes)] = 1.0f;
  return v;
}

// Runs fetches on CPU and OpenCL (planner on and off each, bitwise equal per platform) and
// requires them to agree within tolerance.
void expect_cpu_and_opencl_agree(const Graph& g, const std::vector<In>& ins,
                                 const std::vector<Node>& fetches, double rtol, double atol,
                                 const std::string& what) {
  const testing_util::PlatformCase cpu{
      "cpu", [] { return Platform::cpu({.engine = CpuEngine::sequential, .threads = 1}); }};
  const testing_util::PlatformCase ocl{"opencl", [] { return Platform::opencl(); }};
  const auto want = testing_util::run_checked(cpu, g, ins, fetches);
  const auto got = testing_util::run_checked(ocl, g, ins, fetches);
  for (std::size_t i = 0; i < fetches.size(); ++i) {
    std::vector<double> w(want[i].begin(), want[i].end());
    testing_util::expect_close(got[i], ref::Array(Shape{static_cast<std::int64_t>(w.size())}, w),
                               rtol, atol, what + " fetch " + std::to_string(i));
  }
}

In rand_in(const std::string& name, Shape s, std::uint32_t seed, float lo = -1, float hi = 1) {
  return {name, s, testing_util::random_vec(static_cast<std::size_t>(s.numel()), seed, lo, hi)};
}

// ---- devices -----------------------------------------------------------------------------

TEST(NoDriver, OpenClReportsNoPlatform) {
  if (std::getenv("HETGRAPH_EXPECT_NO_OPENCL") == nullptr) GTEST_SKIP() << "run by ctest only";
  EXPECT_FALSE(Platform::opencl_available());
  EXPECT_TRUE(Platform::opencl_devices().empty());
  const std::string msg = message_of([] { Platform::opencl(); });
  EXPECT_TRUE(contains(msg, "no OpenCL platform found")) << msg;
  EXPECT_TRUE(contains(msg, "pocl-opencl-icd")) << msg;
}

TEST(Devices, ListedAndChosen) {
  const auto devs = Platform::opencl_devices();
  ASSERT_FALSE(devs.empty());
  EXPECT_TRUE(Platform::opencl_available());
  EXPECT_EQ(Platform::opencl().name(), "opencl");
  EXPECT_FALSE(devs[0].name.empty());
  EXPECT_FALSE(Platform::opencl_available({.platform_index = 99}));
}

TEST(Devices, ExplicitChoiceAndClearErrors) {
  {
    ScopedEnv env("HETGRAPH_OPENCL_DEVICE", "0:0");
    EXPECT_NO_THROW(Platform::opencl());
  }
  // 4294967296:0 once wrapped to 0:0 (a long cast to int); spaces, signs and hex are refused.
  for (const char* bad :
       {"zero", "0", "0:", ":1", "0:0:0", "-1:0", "4294967296:0", "0:4294967296", "2147483648:0",
        " 0:0", "0:0 ", "+0:0", "0x0:0", "0:0\n", "1e0:0", "-0:0", "0:-0"}) {
    ScopedEnv env("HETGRAPH_OPENCL_DEVICE", bad);
    const std::string msg = message_of([] { Platform::opencl(); });
    EXPECT_TRUE(contains(msg, "is not platform:device")) << bad << ": " << msg;
    EXPECT_TRUE(contains(msg, "0:0")) << "lists the devices: " << msg;
  }
  {
    ScopedEnv env("HETGRAPH_OPENCL_DEVICE", "7:3");
    const std::string msg = message_of([] { Platform::opencl(); });
    EXPECT_TRUE(contains(msg, "OpenCL device 7:3 (from HETGRAPH_OPENCL_DEVICE) does not exist"))
        << msg;
    EXPECT_TRUE(contains(msg, Platform::opencl_devices()[0].name)) << msg;
  }
  // Options win over the environment.
  ScopedEnv env("HETGRAPH_OPENCL_DEVICE", "7:3");
  EXPECT_NO_THROW(Platform::opencl({.platform_index = 0, .device_index = 0}));
  const std::string msg = message_of([] { Platform::opencl({.device_index = 42}); });
  EXPECT_TRUE(contains(msg, "OpenCL device 0:42 (from OpenClOptions) does not exist")) << msg;
}

TEST(Devices, QueueModes) {
  Graph g;
  auto x = g.input("x");
  auto y = exp(x);
  auto ooo = GraphCompiler(Platform::opencl()).compile(g, {{"x", {3}}}, {y});
  auto ino = GraphCompiler(Platform::opencl({.in_order = true})).compile(g, {{"x", {3}}}, {y});
  const auto& dev = cl_exe(ooo).device();
  EXPECT_EQ(cl_exe(ooo).out_of_order(), dev.out_of_order_supported());
  EXPECT_FALSE(cl_exe(ino).out_of_order());
  if (dev.is_pocl()) {
    EXPECT_TRUE(dev.out_of_order_supported()) << "PoCL 3 has out-of-order queues";
  }
}

// ---- the out-of-order queue and events -------------------------------------------------------

// N branches log(x @ y + 2) summed by a binary tree: wide, with buffer reuse between levels.
struct WideGraph {
  Graph g;
  Node out;
  std::vector<Node> leaves;
  explicit WideGraph(int n) {
    auto x = g.input("x"), y = g.input("y");
    std::vector<Node> level;
    for (int i = 0; i < n; ++i) {
      leaves.push_back(log(matmul(x, y) + static_cast<float>(2 + i % 5)));
      level.push_back(leaves.back());
    }
    while (level.size() > 1) {
      std::vector<Node> next;
      for (std::size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(level[i] + level[i + 1]);
      if (level.size() % 2) next.push_back(level.back());
      level = next;
    }
    out = level[0];
  }
};

TEST(Events, WideGraphOutOfOrderEqualsSerialRun) {
  WideGraph w(48);
  const InputShapes shapes{{"x", {20, 10}}, {"y", {10, 20}}};
  const auto xv = testing_util::random_vec(200, 1, 0, 1),
             yv = testing_util::random_vec(200, 2, 0, 1);
  auto serial = GraphCompiler(Platform::opencl({.in_order = true})).compile(w.g, shapes, {w.out});
  auto ooo = GraphCompiler(Platform::opencl()).compile(w.g, shapes, {w.out});
  EXPECT_LT(ooo.planned_bytes(), ooo.naive_bytes()) << "buffers are reused between levels";
  serial.run({{"x", xv}, {"y", yv}});
  const auto want = serial.read(w.out);
  for (int rep = 0; rep < 5; ++rep) {
    ooo.run({{"x", xv}, {"y", yv}});
    ASSERT_TRUE(testing_util::bitwise_equal(ooo.read(w.out), want)) << "run " << rep;
  }
  // and the CPU agrees within float tolerance
  auto cpu = GraphCompiler(Platform::cpu()).compile(w.g, shapes, {w.out});
  cpu.run({{"x", xv}, {"y", yv}});
  const auto c = cpu.read(w.out);
  testing_util::expect_close(want, ref::Array(Shape{400}, std::vector<double>(c.begin(), c.end())),
                             1e-5, 1e-5, "wide graph vs cpu");
}

TEST(Events, RecordedScheduleRespectsDependencies) {
  // Device timestamps of a wide graph on the out-of-order queue: every node with work runs
  // once, and none starts before the nodes it depends on have ended.
  WideGraph w(24);
  const InputShapes shapes{{"x", {20, 10}}, {"y", {10, 20}}};
  const auto xv = testing_util::random_vec(200, 5, 0, 1),
             yv = testing_util::random_vec(200, 6, 0, 1);
  auto cg = GraphCompiler(Platform::opencl()).compile(w.g, shapes, {w.out});
  detail::executable_of(cg).record_events(true);
  const auto& p = detail::executable_of(cg).plan();
  for (int run = 0; run < 3; ++run) {
    cg.run({{"x", xv}, {"y", yv}});
    std::vector<int> seen(p.nodes.size(), 0);
    std::vector<std::int64_t> start(p.nodes.size(), -1), end(p.nodes.size(), -1);
    for (const auto& e : detail::executable_of(cg).last_run_events()) {
      ++seen[e.node];
      start[e.node] = e.start_ns;
      end[e.node] = e.end_ns;
      EXPECT_LE(e.start_ns, e.end_ns);
      EXPECT_LT(e.lane, 1 + static_cast<int>(cl_exe(cg).device().gemm_queue_count()));
    }
    int kernels = 0;
    for (std::size_t i = 0; i < p.nodes.size(); ++i) {
      const bool work = p.nodes[i].storage == detail::Storage::Computed;
      ASSERT_EQ(seen[i], work ? 1 : 0) << p.nodes[i].label;
      kernels += work;
      if (!work) continue;
      for (std::uint32_t d : p.nodes[i].deps) {
        if (seen[d]) {
          EXPECT_GE(start[i], end[d]) << p.nodes[i].label << " after " << p.nodes[d].label;
        }
      }
    }
    EXPECT_EQ(kernels, 24 * 3 + 23);  // matmul, add, log per branch; the sum tree
  }
  // The same events as a Chrome trace, one track per queue.
  TempDir dir;
  const std::string path = (dir.path() / "trace.json").string();
  cg.start_trace(path);
  cg.run({{"x", xv}, {"y", yv}});
  cg.stop_trace();
  std::ifstream f(path);
  const std::string json((std::istreambuf_iterator<char>(f)), {});
  EXPECT_TRUE(contains(json, "OpenCL queue")) << json.substr(0, 300);
  EXPECT_TRUE(contains(json, "CLBlast queue 0"));
  EXPECT_TRUE(contains(json, "\"ph\":\"X\""));
}

TEST(Events, RandomDagsMatchTheSerialRun) {
  // Random DAGs of elementwise ops and reductions with heavy buffer reuse.
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    Graph g;
    std::vector<Node> nodes = {g.input("a"), g.input("b")};
    for (int i = 0; i < 60; ++i) {
      auto pick = [&] { return nodes[rng() % nodes.size()]; };
      switch (rng() % 6) {
        case 0:
          nodes.push_back(pick() + pick());
          break;
        case 1:
          nodes.push_back(pick() * 0.5f - pick());
          break;
        case 2:
          nodes.push_back(tanh(pick()));
          break;
        case 3:
          nodes.push_back(softmax(pick()));
          break;
        case 4:
          nodes.push_back(pick() - reduce_mean(pick(), 1, true));
          break;
        default:
          nodes.push_back(sigmoid(pick()) * pick());
          break;
      }
    }
    std::vector<Node> fetches = {nodes.back(), nodes[nodes.size() / 2]};
    const InputShapes shapes{{"a", {16, 33}}, {"b", {16, 33}}};
    const auto av = testing_util::random_vec(16 * 33, seed),
               bv = testing_util::random_vec(16 * 33, seed + 100);
    auto serial = GraphCompiler(Platform::opencl({.in_order = true})).compile(g, shapes, fetches);
    auto ooo = GraphCompiler(Platform::opencl()).compile(g, shapes, fetches);
    serial.run({{"a", av}, {"b", bv}});
    for (int rep = 0; rep < 3; ++rep) {
      ooo.run({{"a", av}, {"b", bv}});
      for (const Node& f : fetches)
        ASSERT_TRUE(testing_util::bitwise_equal(ooo.read(f), serial.read(f))) << "seed " << seed;
    }
  }
}

TEST(Events, AssignsRunAfterEveryReaderOfTheStep) {
  // c is read by three nodes before the step's copying assign overwrites it, one of them the
  // new value of d (which its own assign copies in after d's readers). Exact arithmetic:
  // every step must see the previous step's c and d.
  Graph g;
  auto c = g.variable("c", {64}, Initializer::fill(1.0f));
  auto d = g.variable("d", {64}, Initializer::fill(2.0f));
  auto r1 = c * 3.0f;
  auto r2 = reduce_sum(c + d, kAllAxes);
  auto step = group({assign(c, d * 2.0f + 1.0f), assign(d, d + c)});
  for (bool in_order : {false, true}) {
    auto cg =
        GraphCompiler(Platform::opencl({.in_order = in_order})).compile(g, {}, {r1, r2, step});
    double cv = 1, dv = 2;
    for (int i = 0; i < 6; ++i) {
      cg.run();
      ASSERT_EQ(cg.read(r1)[0], static_cast<float>(3 * cv)) << "step " << i;
      ASSERT_EQ(cg.read(r2)[0], static_cast<float>(64 * (cv + dv))) << "step " << i;
      const double nc = 2 * dv + 1, nd = dv + cv;
      cv = nc;
      dv = nd;
      ASSERT_EQ(cg.read(c)[0], static_cast<float>(cv)) << "step " << i;
      ASSERT_EQ(cg.read(d)[0], static_cast<float>(dv)) << "step " << i;
    }
  }
  // Assigning a variable to itself copies nothing.
  Graph g2;
  auto v = g2.variable("v", {3}, Initializer::fill(4.0f));
  auto keep = assign(v, v);
  auto cg2 = GraphCompiler(Platform::opencl()).compile(g2, {}, {keep});
  cg2.run();
  EXPECT_EQ(cg2.read(v), std::vector<float>(3, 4.0f));
}

TEST(Events, CyclicOrderingIsAnError) {
  // Swapping two variables: each assign must wait for the other's read, which no order
  // satisfies.
  Graph g;
  auto a = g.variable("a", {2}, Initializer::fill(1.0f));
  auto b = g.variable("b", {2}, Initializer::fill(2.0f));
  auto swap = group({assign(a, b), assign(b, a)});
  const std::string msg =
      message_of([&] { GraphCompiler(Platform::opencl()).compile(g, {}, {swap}); });
  EXPECT_TRUE(contains(msg, "cannot be ordered")) << msg;
  EXPECT_TRUE(contains(msg, "assign")) << msg;
}

TEST(Events, ConcurrentGraphsOnOneDevice) {
  WideGraph w(8);
  const InputShapes shapes{{"x", {20, 10}}, {"y", {10, 20}}};
  const auto xv = testing_util::random_vec(200, 3, 0, 1),
             yv = testing_util::random_vec(200, 4, 0, 1);
  const Platform p = Platform::opencl();
  auto ref_cg = GraphCompiler(p).compile(w.g, shapes, {w.out});
  ref_cg.run({{"x", xv}, {"y", yv}});
  const auto want = ref_cg.read(w.out);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      auto cg = GraphCompiler(p).compile(w.g, shapes, {w.out});
      for (int i = 0; i < 10; ++i) {
        cg.run({{"x", xv}, {"y", yv}});
        if (!testing_util::bitwise_equal(cg.read(w.out), want)) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// ---- mapped memory and async runs ------------------------------------------------------------

struct Softmax {
  Graph g;
  Node x, y, W, b, p, loss;
  Softmax() {
    x = g.input("x");
    y = g.input("y");
    W = g.variable("W", {32, 10}, Initializer::normal(0, 0.3f, 7));
    b = g.variable("b", {10}, Initializer::fill(0.1f));
    p = softmax(matmul(x, W) + b);
    loss = reduce_mean(cross_entropy(p, y));
  }
  InputShapes shapes(int batch) const { return {{"x", {batch, 32}}, {"y", {batch, 10}}}; }
};

TEST(MappedMemory, InputsAreTheDevicesOwnBuffers) {
  Softmax m;
  auto cg = GraphCompiler(Platform::opencl()).compile(m.g, m.shapes(50), {m.loss, m.p});
  auto& exe = cl_exe(cg);
  if (exe.device().is_pocl()) {
    EXPECT_EQ(exe.zero_copy_inputs(), 2u);
  }
  const auto xv = testing_util::random_vec(50 * 32, 5), yv = one_hot(50, 10);
  cg.run({{"x", xv}, {"y", yv}});
  const auto copied = cg.read(m.loss);
  const auto bytes = detail::executable_of(cg).feed_bytes_copied();

  std::span<float> xb = cg.mapped_input("x"), yb = cg.mapped_input("y");
  std::copy(xv.begin(), xv.end(), xb.begin());
  std::copy(yv.begin(), yv.end(), yb.begin());
  for (int i = 0; i < 3; ++i) {
    cg.run({{"x", xb}, {"y", yb}});
    EXPECT_EQ(detail::executable_of(cg).feed_bytes_copied(), bytes)
        << "mapped feeds are not copied";
    EXPECT_EQ(cg.read(m.loss), copied);
    EXPECT_EQ(cg.mapped_input("x").data(), xb.data()) << "the mapping stays put across runs";
  }
  // A new batch written in place is what the next run sees.
  const auto xv2 = testing_util::random_vec(50 * 32, 6);
  std::copy(xv2.begin(), xv2.end(), xb.begin());
  cg.run({{"x", xb}, {"y", yb}});
  auto cpu = GraphCompiler(Platform::cpu()).compile(m.g, m.shapes(50), {m.loss});
  cpu.run({{"x", xv2}, {"y", yv}});
  EXPECT_NEAR(cg.read(m.loss)[0], cpu.read(m.loss)[0], 1e-5);
  EXPECT_EQ(cg.read(m.x), xv2) << "inputs read back as fed";
}

TEST(MappedMemory, StagedInputsGiveTheSameResults) {
  Softmax m;
  const auto xv = testing_util::random_vec(40 * 32, 8), yv = one_hot(40, 10);
  auto direct = GraphCompiler(Platform::opencl()).compile(m.g, m.shapes(40), {m.loss, m.p});
  OpenClExecutable::force_staged_inputs(true);
  auto staged = GraphCompiler(Platform::opencl()).compile(m.g, m.shapes(40), {m.loss, m.p});
  OpenClExecutable::force_staged_inputs(false);
  EXPECT_EQ(cl_exe(staged).zero_copy_inputs(), 0u);
  direct.run({{"x", xv}, {"y", yv}});
  std::span<float> xb = staged.mapped_input("x"), yb = staged.mapped_input("y");
  std::copy(xv.begin(), xv.end(), xb.begin());
  std::copy(yv.begin(), yv.end(), yb.begin());
  for (int i = 0; i < 2; ++i) {
    staged.run({{"x", xb}, {"y", yb}});
    EXPECT_TRUE(testing_util::bitwise_equal(staged.read(m.p), direct.read(m.p)));
    EXPECT_EQ(staged.mapped_input("x").data(), xb.data());
  }
  staged.run({{"x", xv}, {"y", yv}});  // copied feeds land in the staging buffer
  EXPECT_TRUE(testing_util::bitwise_equal(staged.read(m.p), direct.read(m.p)));
}

TEST(Async, RunReturnsAndWaitFinishes) {
  Softmax m;
  auto cg = GraphCompiler(Platform::opencl()).compile(m.g, m.shapes(64), {m.loss, m.p});
  const auto xv = testing_util::random_vec(64 * 32, 9), yv = one_hot(64, 10);
  cg.run({{"x", xv}, {"y", yv}});
  const auto sync = cg.read(m.p);
  cg.run_async({{"x", xv}, {"y", yv}});
  cg.wait();
  EXPECT_TRUE(testing_util::bitwise_equal(cg.read(m.p), sync));
  cg.run_async({{"x", xv}, {"y", yv}});
  EXPECT_TRUE(testing_util::bitwise_equal(cg.read(m.p), sync)) << "a read waits for its node";
  EXPECT_EQ(cg.read(m.x), xv) << "an input read waits for its map";
  cg.wait();
  cg.run_async({{"x", xv}, {"y", yv}});
  cg.write(m.b, std::vector<float>(10, 0.0f));  // a write waits for the whole run
  cg.wait();
  EXPECT_EQ(cg.read(m.b), std::vector<float>(10, 0.0f));
  cg.run_async({{"x", xv}, {"y", yv}});
  cg.run_async({{"x", xv}, {"y", yv}});  // waits for the first
  cg.wait();
  // Destroying a graph with a run in flight is safe.
  auto other = GraphCompiler(Platform::opencl()).compile(m.g, m.shapes(64), {m.loss});
  other.run_async({{"x", xv}, {"y", yv}});
}

TEST(Async, AReadWaitsOnlyForItsNode) {
  // Two independent branches; the second is held back by a pending event. Reading the first
  // must not wait for it (it would hang), reading the second must.
  Graph g;
  auto x = g.input("x");
  auto a = exp(x) + 1.0f;
  auto b = tanh(x) * 2.0f;
  auto cg = GraphCompiler(Platform::opencl()).compile(g, {{"x", {100}}}, {a, b});
  const auto xv = testing_util::random_vec(100, 10);
  cg.run({{"x", xv}});
  const auto wa = cg.read(a), wb = cg.read(b);
  Fault& hold = Fault::inject(cg, b, Fault::Kind::hold);
  cg.run_async({{"x", xv}});
  EXPECT_EQ(cg.read(a), wa);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    hold.complete(false);
  });
  EXPECT_EQ(cg.read(b), wb);  // waits for the release
  release.join();
  cg.wait();
}

// ---- failures during a run -------------------------------------------------------------------

TEST(Failures, DeviceErrorsReachRunAndWaitAndRecompilingWorks) {
  Softmax m;
  const Platform p = Platform::opencl();
  auto cg = GraphCompiler(p).compile(m.g, m.shapes(32), {m.loss, m.p});
  const auto xv = testing_util::random_vec(32 * 32, 11), yv = one_hot(32, 10);
  cg.run({{"x", xv}, {"y", yv}});
  const auto good = cg.read(m.p);
  std::span<float> xb = cg.mapped_input("x");

  Fault::inject(cg, m.p, Fault::Kind::fail_event);
  std::string msg = message_of([&] { cg.run({{"x", xv}, {"y", yv}}); });
  EXPECT_TRUE(contains(msg, "failed on OpenCL device")) << msg;
  EXPECT_TRUE(contains(msg, "softmax")) << msg;
  EXPECT_TRUE(contains(msg, "CL_")) << msg;

  Fault::inject(cg, m.p, Fault::Kind::fail_event);
  cg.run_async({{"x", xv}, {"y", yv}});
  EXPECT_THROW(cg.wait(), PlatformError);

  Fault::inject(cg, m.p, Fault::Kind::enqueue_error);
  msg = message_of([&] { cg.run({{"x", xv}, {"y", yv}}); });
  EXPECT_TRUE(contains(msg, "clEnqueueNDRangeKernel failed: CL_OUT_OF_RESOURCES (-5)")) << msg;
  EXPECT_TRUE(contains(msg, "softmax")) << msg;

  // The same graph still runs (PoCL keeps its context), its input stays mapped where it was,
  // and the platform compiles again (on a fresh context after a device error).
  EXPECT_EQ(cg.mapped_input("x").data(), xb.data());
  cg.run({{"x", xv}, {"y", yv}});
  EXPECT_TRUE(testing_util::bitwise_equal(cg.read(m.p), good));
  auto again = GraphCompiler(p).compile(m.g, m.shapes(32), {m.loss, m.p});
  again.run({{"x", xv}, {"y", yv}});
  EXPECT_TRUE(testing_util::bitwise_equal(again.read(m.p), good));
}

TEST(Failures, BadClassIdsAreFeedErrors) {
  // Fed labels are checked on the host before the run (nothing changes); computed labels on
  // the device (reported after the run). Both name the node, the row and the id.
  Graph g;
  auto x = g.input("x");
  auto ids = g.input("ids", DType::i32);
  auto W = g.variable("W", {6, 5}, Initializer::fill(0.1f));
  auto logits = matmul(x, W);
  auto fed = reduce_mean(cross_entropy(softmax(logits), ids));
  auto computed = cross_entropy(softmax(slice(logits, 0, 1, 4)), slice(ids, 0, 1, 4));
  auto step = assign(W, W - fed * 0.01f);
  auto cg = GraphCompiler(Platform::opencl())
                .compile(g, {{"x", {4, 6}}, {"ids", {4}}}, {fed, computed, step});
  const auto xv = testing_util::random_vec(24, 12);
  const auto w0 = cg.read(W);
  std::string msg = message_of([&] {
    cg.run({{"x", xv}, {"ids", std::vector<std::int32_t>{0, 4, 1, 5}}});
  });
  EXPECT_TRUE(contains(msg, "class id 5 at row 3 is outside [0, 5)")) << msg;
  EXPECT_EQ(cg.read(W), w0) << "the failed step changed nothing";

  // Row 0 is fine for the fed labels (slice drops it): only the computed check sees row 2.
  auto cg2 =
      GraphCompiler(Platform::opencl()).compile(g, {{"x", {4, 6}}, {"ids", {4}}}, {computed});
  msg = message_of([&] { cg2.run({{"x", xv}, {"ids", std::vector<std::int32_t>{0, 1, 2, -7}}}); });
  EXPECT_TRUE(contains(msg, "class id -7 at row 2 is outside [0, 5)")) << msg;
  // The gradient of softmax + cross-entropy checks its ids too.
  auto grad = detail::make_op(detail::OpKind::SoftmaxXentGrad,
                              {reduce_sum(x, 1), softmax(logits), slice(ids, 0, 0, 4)});
  auto cg3 = GraphCompiler(Platform::opencl()).compile(g, {{"x", {4, 6}}, {"ids", {4}}}, {grad});
  msg = message_of([&] { cg3.run({{"x", xv}, {"ids", std::vector<std::int32_t>{0, 9, 2, 1}}}); });
  EXPECT_TRUE(contains(msg, "class id 9 at row 1 is outside [0, 5)")) << msg;

  // Good ids afterwards: all three graphs run and agree with the CPU.
  const std::vector<std::int32_t> good = {0, 4, 1, 3};
  auto cpu = GraphCompiler(Platform::cpu())
                 .compile(g, {{"x", {4, 6}}, {"ids", {4}}}, {fed, computed, grad});
  cpu.run({{"x", xv}, {"ids", good}});
  cg2.run({{"x", xv}, {"ids", good}});
  cg3.run({{"x", xv}, {"ids", good}});
  cg.run({{"x", xv}, {"ids", good}});
  EXPECT_NEAR(cg2.read(computed)[1], cpu.read(computed)[1], 1e-6);
  const auto gc = cg3.read(grad), gcpu = cpu.read(grad);
  for (std::size_t i = 0; i < gc.size(); ++i) EXPECT_NEAR(gc[i], gcpu[i], 1e-6);
}

TEST(Failures, BuffersTheDeviceCannotHold) {
  Graph g;
  auto x = g.input("x");
  auto y = x * 2.0f;
  const auto& dev = *detail::cl::Device::get({});
  // Larger than the device's largest allocation (2 GiB on PoCL), within the kernels' range.
  const std::int64_t n = static_cast<std::int64_t>(dev.max_alloc() / 4) + 1024;
  if (n > INT_MAX) GTEST_SKIP() << "device allocations above 8 GiB";
  std::string msg = message_of([&] {
    GraphCompiler(Platform::opencl()).compile(g, {{"x", {n}}}, {y});
  });
  EXPECT_TRUE(contains(msg, "clCreateBuffer failed: CL_INVALID_BUFFER_SIZE")) << msg;
  EXPECT_TRUE(contains(msg, "largest allocation")) << msg;
  msg = message_of([&] {
    GraphCompiler(Platform::opencl()).compile(g, {{"x", {3, 1 << 30}}}, {y});
  });
  EXPECT_TRUE(contains(msg, "more than 2^31-1 elements")) << msg;
  auto ok = GraphCompiler(Platform::opencl()).compile(g, {{"x", {2}}}, {y});
  ok.run({{"x", std::vector<float>{1, 2}}});
  EXPECT_EQ(ok.read(y), (std::vector<float>{2, 4}));
}

// ---- the checking macro ----------------------------------------------------------------------

TEST(Errors, EveryCallIsCheckedAndNamed) {
  EXPECT_EQ(detail::cl::error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
  EXPECT_EQ(detail::cl::error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
  EXPECT_EQ(detail::cl::error_name(-4242), "CL error -4242");
  const std::string msg = message_of([] { HG_CL(clReleaseMemObject(nullptr)); });
  EXPECT_TRUE(contains(msg, "clReleaseMemObject failed: CL_INVALID_MEM_OBJECT (-38)")) << msg;
  EXPECT_TRUE(contains(msg, "tests/test_opencl.cpp:")) << msg;
  const auto& dev = *detail::cl::Device::get({});
  const std::string msg2 = message_of(
      [&] { HG_CL_CREATE(clCreateBuffer, dev.context(), CL_MEM_READ_WRITE, 0, nullptr); });
  EXPECT_TRUE(contains(msg2, "clCreateBuffer failed: CL_INVALID_BUFFER_SIZE")) << msg2;
  detail::cl::Kernel k(HG_CL_CREATE(
      clCreateKernel, detail::cl::Device::get({})->programs().get("elementwise"), "add_ff"));
  const std::string msg3 = message_of([&] { detail::cl::set_args(k.get(), char{1}); });
  EXPECT_TRUE(contains(msg3, "clSetKernelArg failed")) << msg3;
  EXPECT_TRUE(contains(msg3, "kernel add_ff, argument 0")) << msg3;
}

// ---- kernels ---------------------------------------------------------------------------------

TEST(Kernels, GemmThroughClblast) {
  Graph g;
  auto a = g.input("a"), b = g.input("b");
  auto c = matmul(a, b, false, true);
  auto cg = GraphCompiler(Platform::opencl()).compile(g, {{"a", {7, 5}}, {"b", {3, 5}}}, {c});
  EXPECT_EQ(cg.kernel_name(c), "clblast_gemm");
  EXPECT_EQ(cg.kernel_name(a), "none");
  // Strided-batched CLBlast for large batches (a loop of GEMMs below 17), with a shared
  // operand.
  Graph g2;
  auto p = g2.input("p"), q = g2.input("q"), r = g2.input("r");
  auto big = matmul(p, q, true, false);
  auto shared = matmul(q, r, true, true);
  expect_cpu_and_opencl_agree(
      g2, {rand_in("p", {20, 6, 4}, 21), rand_in("q", {20, 6, 5}, 22), rand_in("r", {3, 6}, 23)},
      {big, shared}, 1e-5, 1e-5, "strided batched matmul");
}

TEST(Kernels, VariantsTheOpSuiteDoesNotReach) {
  Graph g;
  auto x = g.input("x"), y = g.input("y"), z = g.input("z");
  auto xent_rows = cross_entropy(softmax(x), y);  // >= 64 classes: a work-group per row
  auto strided_sm = softmax(z, 1);                // a long strided axis
  auto strided_lsm = log_softmax(z, 1);
  auto all_max = reduce_max(z, kAllAxes);  // parts, then a combine
  auto few_long = reduce_sum(z, 1);        // few outputs over a long strided axis
  expect_cpu_and_opencl_agree(g,
                              {rand_in("x", {6, 300}, 24, -3, 3),
                               {"y", {6, 300}, one_hot(6, 300)},
                               rand_in("z", {2, 3000, 3}, 25)},
                              {xent_rows, strided_sm, strided_lsm, all_max, few_long}, 1e-5, 1e-6,
                              "variants");
}

TEST(Kernels, GradientOpsAgreeWithTheCpu) {
  using detail::make_op;
  using detail::OpKind;
  auto with = [](OpKind k, std::initializer_list<Node> in, int axis = 0, bool keep = false,
                 bool mean = false) {
    detail::Attrs at;
    at.axis = axis;
    at.keepdims = keep;
    at.mean = mean;
    return make_op(k, in, at);
  };
  auto band = [](OpKind k, std::initializer_list<Node> in, int axis, auto payload) {
    detail::Attrs at;
    at.axis = axis;
    at.set(payload);
    return make_op(k, in, at);
  };
  Graph g;
  auto a = g.input("a"), b = g.input("b");  // [5, 70]
  auto s = g.input("s");                    // [3, 70]
  auto r = g.input("r");                    // [5]
  auto t = g.input("t");                    // [2, 5, 70]
  auto ids = g.input("ids", DType::i32);    // [5]
  std::vector<Node> f;
  f.push_back(with(OpKind::ReluGrad, {a, b}));
  f.push_back(with(OpKind::SigmoidGrad, {a, sigmoid(b)}));
  f.push_back(with(OpKind::TanhGrad, {a, tanh(b)}));
  f.push_back(with(OpKind::SoftmaxGrad, {a, softmax(b)}, -1));    // rows kernel (70)
  f.push_back(with(OpKind::SoftmaxGrad, {a, softmax(b, 0)}, 0));  // strided lines
  f.push_back(with(OpKind::LogSoftmaxGrad, {a, log_softmax(b)}, -1));
  f.push_back(with(OpKind::LogSoftmaxGrad, {t, log_softmax(t, 1)}, 1));
  f.push_back(with(OpKind::CrossEntropyGrad, {r, softmax(b), softmax(a)}));
  f.push_back(with(OpKind::SoftmaxXentGrad, {r, softmax(b), softmax(a)}));
  f.push_back(with(OpKind::CrossEntropyGrad, {r, softmax(b), ids}));
  f.push_back(with(OpKind::SoftmaxXentGrad, {r, softmax(b), ids}));
  f.push_back(with(OpKind::ReduceMaxGrad, {reduce_max(a, 1), a, reduce_max(a, 1)}, 1));
  f.push_back(
      with(OpKind::ReduceMaxGrad, {reduce_max(t, 1, true), t, reduce_max(t, 1, true)}, 1, true));
  f.push_back(
      with(OpKind::ReduceMaxGrad, {reduce_sum(a, kAllAxes), a, reduce_max(a, kAllAxes)}, kAllAxes));
  f.push_back(with(OpKind::Expand, {r, a}, 1, false, false));
  f.push_back(with(OpKind::Expand, {reduce_sum(t, 1, true), t}, 1, true, true));
  f.push_back(with(OpKind::Expand, {reduce_sum(a, kAllAxes), a}, kAllAxes, false, true));
  f.push_back(make_op(OpKind::SumTo, {t, reduce_sum(a, 0)}));        // [2, 5, 70] -> [70]
  f.push_back(make_op(OpKind::SumTo, {a, reduce_sum(a, 1, true)}));  // rows: [5, 70] -> [5, 1]
  f.push_back(make_op(OpKind::SumTo, {a, reduce_sum(a, 0, true)}));
  f.push_back(make_op(OpKind::SumTo, {t, reduce_sum(reduce_sum(t, 0, true), 2, true)}));
  f.push_back(make_op(OpKind::SumTo, {t, reduce_sum(t, kAllAxes)}));
  f.push_back(band(OpKind::SliceGrad, {slice(b, 1, 3, 40), b}, 1, detail::SliceRange{3, 40}));
  f.push_back(band(OpKind::SliceGrad, {slice(t, 0, 1, 2), t}, 0, detail::SliceRange{1, 2}));
  f.push_back(band(OpKind::ConcatGrad, {concat({a, s}, 0), a, s}, 0, detail::PieceIndex{1}));
  f.push_back(band(OpKind::ConcatGrad, {concat({a, b}, 1), a, b}, 1, detail::PieceIndex{0}));
  f.push_back(make_op(OpKind::GradSeed, {reduce_sum(a, kAllAxes)}));
  {
    detail::Attrs at;  // two pieces of b's axis 1, out of order, with gaps
    at.axis = 1;
    at.set(detail::SliceRanges{{{40, 70}, {3, 20}}});
    f.push_back(make_op(OpKind::SliceGradN, {b, slice(a, 1, 40, 70), slice(b, 1, 3, 20)}, at));
  }
  const std::vector<In> ins = {rand_in("a", {5, 70}, 31), rand_in("b", {5, 70}, 32),
                               rand_in("s", {3, 70}, 33), rand_in("r", {5}, 34),
                               rand_in("t", {2, 5, 70}, 35)};
  hetgraph::InputShapes shapes;
  std::vector<FeedItem> feeds;
  for (const In& in : ins) {
    shapes.push_back({in.name, in.shape});
    feeds.push_back({in.name, in.values});
  }
  shapes.push_back({"ids", {5}});
  const std::vector<std::int32_t> idv = {3, 0, 69, 12, 40};
  feeds.push_back({"ids", idv});
  std::vector<std::vector<float>> res[2];
  for (int plat = 0; plat < 2; ++plat) {
    for (bool planned : {false, true}) {
      auto cg =
          GraphCompiler(plat == 0 ? Platform::cpu({.engine = CpuEngine::sequential, .threads = 1})
                                  : Platform::opencl(),
                        {.plan_memory = planned})
              .compile(g, shapes, f);
      cg.run(std::span<const FeedItem>(feeds));
      std::vector<std::vector<float>> out;
      for (const Node& n : f) out.push_back(cg.read(n));
      if (planned && plat == 1) {
        for (std::size_t i = 0; i < f.size(); ++i)
          EXPECT_TRUE(testing_util::bitwise_equal(out[i], res[1][i])) << "planner, fetch " << i;
      }
      res[plat] = out;
    }
  }
  for (std::size_t i = 0; i < f.size(); ++i) {
    std::vector<double> w(res[0][i].begin(), res[0][i].end());
    testing_util::expect_close(res[1][i], ref::Array(Shape{static_cast<std::int64_t>(w.size())}, w),
                               2e-5, 1e-6, "gradient op " + f[i].label());
  }
}

// ---- program cache ---------------------------------------------------------------------------

TEST(ProgramCache, EachProgramIsBuiltOncePerContext) {
  Softmax m;
  auto dev = detail::cl::Device::get({});
  GraphCompiler(Platform::opencl()).compile(m.g, m.shapes(8), {m.loss});
  const auto before = dev->programs().stats();
  GraphCompiler(Platform::opencl()).compile(m.g, m.shapes(16), {m.loss});
  const auto after = dev->programs().stats();
  EXPECT_EQ(after.source_builds, before.source_builds) << "second compile built nothing";
  EXPECT_EQ(after.binary_loads, before.binary_loads);
  EXPECT_GT(after.memory_hits, before.memory_hits);
}

TEST(DiskCache, RoundTripKeysAndCorruption) {
  TempDir dir;
  const detail::cl::DiskCache cache(dir.str());
  // A fake device: the key logic does not need a real one.
  const std::string key = detail::cl::cache_key("kernel void k() {}", "-cl-std=CL1.2",
                                                "FakeGPU 9000", "fake-driver 1.2.3");
  const std::vector<unsigned char> bin = {1, 2, 3, 4, 5, 250, 0, 7};
  EXPECT_FALSE(cache.load(key).has_value());
  ASSERT_TRUE(cache.store(key, bin));
  EXPECT_EQ(cache.load(key), bin);
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().extension(), ".clbin") << "no temporary file left: " << e.path();
  // Any part of the key changes the entry.
  for (const std::string& other : {detail::cl::cache_key("kernel void k() { }", "-cl-std=CL1.2",
                                                         "FakeGPU 9000", "fake-driver 1.2.3"),
                                   detail::cl::cache_key("kernel void k() {}", "-cl-std=CL2.0",
                                                         "FakeGPU 9000", "fake-driver 1.2.3"),
                                   detail::cl::cache_key("kernel void k() {}", "-cl-std=CL1.2",
                                                         "FakeGPU 9001", "fake-driver 1.2.3"),
                                   detail::cl::cache_key("kernel void k() {}", "-cl-std=CL1.2",
                                                         "FakeGPU 9000", "fake-driver 1.2.4")}) {
    EXPECT_FALSE(cache.load(other).has_value());
  }
  // Corruption of any kind is a miss.
  const std::string path = cache.path_for(key);
  std::string data;
  {
    std::ifstream f(path, std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto write = [&](const std::string& d) { std::ofstream(path, std::ios::binary) << d; };
  write(data.substr(0, data.size() - 3));
  EXPECT_FALSE(cache.load(key).has_value()) << "truncated";
  std::string flipped = data;
  flipped[data.size() - 12] ^= 0x40;  // a byte of the binary: checksum mismatch
  write(flipped);
  EXPECT_FALSE(cache.load(key).has_value()) << "flipped byte";
  write("HGCLBIN0" + data.substr(8));
  EXPECT_FALSE(cache.load(key).has_value()) << "wrong magic";
  write("");
  EXPECT_FALSE(cache.load(key).has_value()) << "empty";
  ASSERT_TRUE(cache.store(key, bin));  // a store replaces a bad file
  EXPECT_EQ(cache.load(key), bin);
  // Disabled and unwritable caches do nothing and never throw.
  EXPECT_FALSE(detail::cl::DiskCache("").store(key, bin));
  EXPECT_FALSE(detail::cl::DiskCache("").load(key).has_value());
  EXPECT_FALSE(detail::cl::DiskCache("/proc/hetgraph-no-such-dir").store(key, bin));
}

TEST(DiskCache, LocationFromTheEnvironment) {
  {
    ScopedEnv x("XDG_CACHE_HOME", "/tmp/xdg-test");
    EXPECT_EQ(detail::cl::DiskCache::default_dir(), "/tmp/xdg-test/hetgraph");
    ScopedEnv off("HETGRAPH_CL_CACHE", "0");
    EXPECT_EQ(detail::cl::DiskCache::default_dir(), "");
  }
  ScopedEnv x("XDG_CACHE_HOME", nullptr);
  ScopedEnv h("HOME", "/home/someone");
  EXPECT_EQ(detail::cl::DiskCache::default_dir(), "/home/someone/.cache/hetgraph");
}

TEST(DiskCache, ProgramsComeBackFromDisk) {
  auto dev = detail::cl::Device::get({});
  TempDir dir;
  ScopedEnv xdg("XDG_CACHE_HOME", dir.str().c_str());
  auto fresh = [&] {
    return detail::cl::ProgramCache(dev->context(), dev->id(), dev->info().name, dev->info().driver,
                                    dev->programs().options(), dev->is_pocl());
  };
  std::string origin;
  const std::string src = detail::cl::kernel_source("movement", &origin);
  EXPECT_TRUE(contains(origin, "embedded")) << origin;
  if (dev->is_pocl()) {
    // PoCL caches compiled kernels itself: skipped unless forced.
    EXPECT_FALSE(fresh().disk_cache().enabled());
  }
  ScopedEnv force("HETGRAPH_CL_CACHE", "force");
  {
    auto pc = fresh();
    ASSERT_TRUE(pc.disk_cache().enabled());
    pc.get_source("movement", src, origin);
    EXPECT_EQ(pc.stats().source_builds, 1);
    EXPECT_EQ(pc.stats().disk_stores, 1);
  }
  {
    auto pc = fresh();
    cl_program prog = pc.get_source("movement", src, origin);
    EXPECT_EQ(pc.stats().binary_loads, 1) << "built from the cached binary";
    EXPECT_EQ(pc.stats().source_builds, 0);
    detail::cl::Kernel k(HG_CL_CREATE(clCreateKernel, prog, "copy_band"));
    EXPECT_TRUE(k);
  }
  {
    // A well-formed entry with a binary the driver refuses: rebuilt from source, replaced.
    const std::string key =
        detail::cl::cache_key(src, dev->programs().options(), dev->info().name, dev->info().driver);
    ASSERT_TRUE(fresh().disk_cache().store(key, std::vector<unsigned char>(64, 0x5a)));
    auto pc = fresh();
    pc.get_source("movement", src, origin);
    EXPECT_EQ(pc.stats().disk_rejects, 1);
    EXPECT_EQ(pc.stats().source_builds, 1);
    EXPECT_EQ(pc.stats().disk_stores, 1);
    auto again = fresh();
    again.get_source("movement", src, origin);
    EXPECT_EQ(again.stats().binary_loads, 1);
  }
  ScopedEnv off("HETGRAPH_CL_CACHE", "0");
  EXPECT_FALSE(fresh().disk_cache().enabled());
}

// A build from source says so on stderr (HETGRAPH_LOG=verbose: every one; the default: only one
// that takes over a second, such as a cold PoCL cache's); quiet says nothing. A warm rebuild
// (the driver's cache holds the program) takes under a second.
TEST(ProgramCache, BuildsFromSourceSayWhatThePauseIs) {
  auto dev = detail::cl::Device::get({});
  auto fresh = [&] {
    return detail::cl::ProgramCache(dev->context(), dev->id(), dev->info().name, dev->info().driver,
                                    dev->programs().options(), dev->is_pocl());
  };
  ScopedEnv off("HETGRAPH_CL_CACHE", "0");
  std::string origin;
  const std::string src = detail::cl::kernel_source("movement", &origin);
  for (const char* level : {"verbose", "quiet", "info"}) {
    ScopedEnv log("HETGRAPH_LOG", level);
    auto pc = fresh();
    testing::internal::CaptureStderr();
    const auto t0 = std::chrono::steady_clock::now();
    pc.get_source("movement", src, origin);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(pc.stats().source_builds, 1) << level;
    const bool said = contains(err, "compiling OpenCL program 'movement' for " + dev->info().name);
    if (std::string(level) == "verbose") {
      EXPECT_TRUE(said) << err;
    } else if (std::string(level) == "quiet") {
      EXPECT_EQ(err, "");
    } else {
      // The third build of the same program: the driver's cache is warm.
      EXPECT_LT(s, 1.0) << "a warm build";
      if (s < 0.9) {
        EXPECT_FALSE(said) << err;
      }
    }
  }
  ScopedEnv bad("HETGRAPH_LOG", "loud");
  EXPECT_THROW(fresh().get_source("movement", src, origin), PlatformError);
}

// The embedded kernels written to `dir` (for HETGRAPH_CL_KERNELS), with `from` replaced by
// `to` in elementwise.cl when given.
void write_kernels(const TempDir& dir, const std::string& from = {}, const std::string& to = {}) {
  for (const auto& k : detail::cl::embedded_kernels()) {
    std::string text(k.source);
    if (k.family == "elementwise" && !from.empty()) {
      const auto at = text.find(from);
      ASSERT_NE(at, std::string::npos);
      text.replace(at, from.size(), to);
    }
    std::ofstream(dir.path() / (std::string(k.family) + ".cl")) << text;
  }
}

TEST(KernelSources, LoadedFromADirectoryAndBuildErrorsCarryTheLog) {
  TempDir dir;
  write_kernels(dir, "BINARY(add, a + b)", "BINARY(add, a + b + 1.0f)");  // add gives a + b + 1
  Graph g;
  auto x = g.input("x");
  auto y = x + x;
  {
    ScopedEnv env("HETGRAPH_CL_KERNELS", dir.str().c_str());
    auto cg = GraphCompiler(Platform::opencl()).compile(g, {{"x", {3}}}, {y});
    cg.run({{"x", std::vector<float>{1, 2, 3}}});
    EXPECT_EQ(cg.read(y), (std::vector<float>{3, 5, 7}));
  }
  {
    std::ofstream(dir.path() / "elementwise.cl") << "kernel void broken(global float* x) {\n"
                                                    "  x[0] = undeclared_thing;\n}\n";
    ScopedEnv env("HETGRAPH_CL_KERNELS", dir.str().c_str());
    const std::string msg = message_of([&] {
      GraphCompiler(Platform::opencl()).compile(g, {{"x", {3}}}, {y});
    });
    EXPECT_TRUE(contains(msg, "building OpenCL program 'elementwise'")) << msg;
    EXPECT_TRUE(contains(msg, (dir.path() / "elementwise.cl").string())) << msg;
    EXPECT_TRUE(contains(msg, "CL_BUILD_PROGRAM_FAILURE")) << msg;
    EXPECT_TRUE(contains(msg, "build log")) << msg;
    EXPECT_TRUE(contains(msg, "undeclared_thing")) << msg;
  }
  {
    fs::remove(dir.path() / "elementwise.cl");
    ScopedEnv env("HETGRAPH_CL_KERNELS", dir.str().c_str());
    const std::string msg = message_of([&] {
      GraphCompiler(Platform::opencl()).compile(g, {{"x", {3}}}, {y});
    });
    EXPECT_TRUE(contains(msg, "cannot read")) << msg;
  }
  // Back to the embedded kernels: the context is still good.
  auto cg = GraphCompiler(Platform::opencl()).compile(g, {{"x", {3}}}, {y});
  cg.run({{"x", std::vector<float>{1, 2, 3}}});
  EXPECT_EQ(cg.read(y), (std::vector<float>{2, 4, 6}));
}

// A family without the kernel an op asks for: the error names the kernel, the family and the
// file it was read from, and lists what the file has (before: CL_INVALID_KERNEL_NAME alone).
// The file's first kernel is renamed (the list is cut after 300 characters, and every new
// elementwise op lengthens it); the comment keeps the text the platform's capability check
// looks for, as a kernel defined under a misspelt macro would, so compile reaches the program.
TEST(KernelSources, AMissingKernelNamesItsFamilyAndFile) {
  TempDir dir;
  write_kernels(dir, "UNARY(neg_f32, -v)", "UNARY(minus_f32, -v)  // not UNARY(neg_f32, -v)");
  Graph g;
  auto x = g.input("x");
  auto y = -x;
  ScopedEnv env("HETGRAPH_CL_KERNELS", dir.str().c_str());
  const std::string msg = message_of([&] {
    GraphCompiler(Platform::opencl()).compile(g, {{"x", {3}}}, {y});
  });
  EXPECT_TRUE(contains(msg, "clCreateKernel failed: CL_INVALID_KERNEL_NAME")) << msg;
  EXPECT_TRUE(contains(msg, "kernel 'neg_f32' of family 'elementwise'")) << msg;
  EXPECT_TRUE(contains(msg, (dir.path() / "elementwise.cl").string())) << msg;
  EXPECT_TRUE(contains(msg, "minus_f32")) << "lists the kernels there: " << msg;
}

// Build logs name our files with their own line numbers, the prelude's included (before: a
// broken prelude was reported against the family, at lines of PoCL's temporary file).
TEST(KernelSources, BuildLogsPointIntoOurFiles) {
  TempDir dir;
  write_kernels(dir);
  Graph g;
  auto x = g.input("x");
  auto y = x + x;
  auto build_error = [&] {
    ScopedEnv env("HETGRAPH_CL_KERNELS", dir.str().c_str());
    return message_of([&] { GraphCompiler(Platform::opencl()).compile(g, {{"x", {3}}}, {y}); });
  };
  {
    std::ofstream(dir.path() / "elementwise.cl") << "kernel void broken(global float* x) {\n"
                                                    "  x[0] = undeclared_thing;\n}\n";
    const std::string msg = build_error();
    EXPECT_TRUE(contains(msg, (dir.path() / "elementwise.cl").string() + ":2:")) << msg;
  }
  {
    std::ofstream(dir.path() / "elementwise.cl")
        << "kernel void fine(global float* x) { x[0] = 1; }\n";
    std::ofstream(dir.path() / "prelude.cl") << "// prelude\n#define OK 1\nthis is not C;\n";
    const std::string msg = build_error();
    EXPECT_TRUE(contains(msg, (dir.path() / "prelude.cl").string() + ":3:")) << msg;
    EXPECT_FALSE(contains(msg, (dir.path() / "elementwise.cl").string() + ":")) << msg;
  }
  // The embedded sources name the files of the source tree.
  std::string origin;
  const std::string src = detail::cl::kernel_source("movement", &origin);
  EXPECT_EQ(origin, "embedded kernels/movement.cl");
  EXPECT_EQ(src.rfind("#line 1 \"kernels/prelude.cl\"\n", 0), 0u) << src.substr(0, 80);
  EXPECT_TRUE(contains(src, "\n#line 1 \"kernels/movement.cl\"\n"));
}

TEST(DiskCache, AnUnknownModeIsAnError) {
  ScopedEnv env("HETGRAPH_CL_CACHE", "yes");
  const std::string msg = message_of([] { detail::cl::DiskCache::default_dir(); });
  EXPECT_TRUE(contains(msg, "HETGRAPH_CL_CACHE='yes' is not one of 1, 0, force")) << msg;
}

}  // namespace
