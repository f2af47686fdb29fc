// SPDX-License-Identifier: Apache-2.0
// One graph across the CPU and OpenCL devices (issue 13): pins and their errors, the capability
// query, HEFT's choices under fixed cost models, transfers at device boundaries, random DAGs
// with random placements against the all-CPU run, failures on either device leaving state
// unchanged, training across devices, asynchronous runs and traces.
//
// CTest runs this with POCL_DEVICES="pthread pthread basic": PoCL then offers two pthread
// devices, so there are three devices to place on and values cross between two OpenCL devices
// as well as to and from the CPU; and its "basic" device, which cannot be a member (its driver
// hangs on user events: pocl issue #1177).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "cpu/engine.hpp"
#include "hetero/hetero.hpp"
#include "hetgraph/autodiff.hpp"
#include "opencl/executable.hpp"
#include "random_dag.hpp"
#include "test_util.hpp"

using namespace hetgraph;
using Placement = HeteroOptions::Placement;
using testing_util::all_variables;

namespace {

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}
bool has(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

bool pocl_basic(const OpenClDevice& d) {
  return d.platform == "Portable Computing Language" && d.name.rfind("basic", 0) == 0;
}
// The OpenCL devices of this machine that can be members (CTest: PoCL's two pthread devices).
std::vector<Device> cl_devices() {
  std::vector<Device> out;
  for (const OpenClDevice& d : Platform::opencl_devices())
    if (!pocl_basic(d)) out.push_back(Device::opencl(d.platform_index, d.device_index));
  return out;
}
Platform cl_platform(const Device& d) {
  return Platform::opencl({.platform_index = d.platform_index, .device_index = d.device_index});
}

// Cost figures that make placement deterministic (no measuring): devices alike unless a test
// says otherwise, none sharing the host's cores unless asked.
DeviceCosts costs(double gflops = 50, bool shares = false) {
  return {.gflops = gflops,
          .gbytes_per_s = 10,
          .node_us = 5,
          .to_device_gbytes_per_s = 5,
          .from_device_gbytes_per_s = 5,
          .transfer_us = 20,
          .shares_host_cores = shares};
}

// CPU first (with `cpu`'s engine), then every OpenCL device (at most `max_cl`).
Platform hetero(Placement mode = Placement::first, std::size_t max_cl = 8,
                const CpuOptions& cpu = {}) {
  std::vector<Platform> members{Platform::cpu(cpu)};
  std::vector<DeviceCosts> c{costs()};
  for (const Device& d : cl_devices()) {
    if (members.size() > max_cl) break;
    members.push_back(cl_platform(d));
    c.push_back(costs());
  }
  return Platform::heterogeneous(members, {.placement = mode, .costs = c});
}

// Pins every node to a device of `h` drawn at random, but an optimizer's updates and state
// ("v0/adam", "v0/exp_avg", ...), which live with their variable.
void pin_at_random(Graph& g, const Platform& h, std::mt19937& rng) {
  for (std::uint32_t id = 0; id < g.size(); ++id) {
    const Device d = h.devices()[rng() % h.devices().size()];
    if (g.node(id).name().find('/') == std::string::npos) g.node(id).on(d);
  }
}

const detail::Plan& plan_of(const CompiledGraph& cg) {
  return detail::executable_of(cg).plan();
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
  }
}

// The placement of the node named `name` (its label starts "'name' (").
EngineReport::Hetero::Placed placed(const EngineReport& r, const std::string& name) {
  for (const auto& p : r.hetero->nodes)
    if (p.node.rfind("'" + name + "' (", 0) == 0) return p;
  ADD_FAILURE() << "no node named " << name << " in the report";
  return {};
}

// ---- pins, errors, the capability query -------------------------------------------------

TEST(Hetero, PinnedNodesRunWherePinnedAndMatchTheCpu) {
  const Device cl = cl_devices().at(0);
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {4, 3}, Initializer::uniform(-1, 1, 1));
  auto b = g.variable("b", {3}, Initializer::fill(0.1f));
  auto h = relu(matmul(x, W).on(cl).named("mm")).on(cl).named("h");
  Node y;
  {
    DeviceScope on_cpu(g, Device::cpu());
    y = softmax(h + b).named("y");
  }
  EXPECT_EQ(*g.find("y").device(), Device::cpu());
  EXPECT_FALSE(x.device().has_value());
  const std::vector<float> xv{1, 2, 3, 4, 5, 6, 7, 8};
  auto cg = GraphCompiler(hetero()).compile(g, {{"x", {2, 4}}}, {y, h});
  auto ref = GraphCompiler().compile(g, {{"x", {2, 4}}}, {y, h});
  cg.run({{"x", xv}});
  ref.run({{"x", xv}});
  expect_near(cg.read(y), ref.read(y), 1e-6, "y");
  expect_near(cg.read(h), ref.read(h), 1e-6, "h read from its device");
  const EngineReport r = cg.engine_report();
  ASSERT_TRUE(r.hetero.has_value());
  EXPECT_TRUE(has(r.engine, "heterogeneous")) << r.engine;
  const auto mm = placed(r, "mm");
  EXPECT_EQ(mm.device, cl.str());
  EXPECT_EQ(mm.reason, "pinned");
  EXPECT_EQ(placed(r, "y").device, "cpu");
  // x and W go to the device (read there only: they live there), h comes back: one crossing.
  EXPECT_EQ(placed(r, "x").device, cl.str());
  EXPECT_EQ(r.hetero->transfers, 1u);
  EXPECT_EQ(r.hetero->transfer_bytes, 2u * 3 * 4);
  // Lanes of both devices, in one report.
  bool cpu_lane = false, cl_lane = false;
  for (const auto& l : r.lanes) {
    cpu_lane = cpu_lane || l.name.rfind("cpu: ", 0) == 0;
    cl_lane = cl_lane || l.name.rfind(cl.str(), 0) == 0;
  }
  EXPECT_TRUE(cpu_lane && cl_lane);
  // The header's and README's loop: placement() is a value the range-for owns (a loop over
  // engine_report().hetero->nodes would read a destroyed temporary), and it is the report's.
  std::size_t i = 0;
  for (const auto& n : cg.placement()) {
    ASSERT_LT(i, r.hetero->nodes.size());
    EXPECT_EQ(n.node, r.hetero->nodes[i].node);
    EXPECT_EQ(n.device, r.hetero->nodes[i].device);
    EXPECT_EQ(n.reason, r.hetero->nodes[i++].reason);
  }
  EXPECT_EQ(i, r.hetero->nodes.size());
  EXPECT_TRUE(GraphCompiler().compile(g, {{"x", {2, 4}}}, {y}).placement().empty());
  // The mapped input is the device's own memory (the input lives there).
  auto xb = cg.mapped_input("x");
  std::copy(xv.begin(), xv.end(), xb.begin());
  cg.run({{"x", xb}});
  expect_near(cg.read(y), ref.read(y), 1e-6, "y from the mapped input");
}

// Empty tensors across devices: what reads one is folded before placement, so nothing empty
// is computed or moved, whatever the pins say.
TEST(Hetero, EmptyTensorsFoldWhereverTheyArePinned) {
  const Device cl = cl_devices().at(0);
  Graph g;
  auto e = g.input("e"), x = g.input("x");
  auto h = exp(e).on(cl).named("h");                        // [0, 3] on the device
  auto y = concat({x, h}, 0).on(Device::cpu()).named("y");  // x alone
  auto s = reduce_sum(h, 0).on(cl).named("s");              // zeros
  auto cg = GraphCompiler(hetero()).compile(g, {{"e", {0, 3}}, {"x", {2, 3}}}, {h, y, s});
  const std::vector<float> xv{1, 2, 3, 4, 5, 6};
  cg.run({{"e", std::vector<float>{}}, {"x", xv}});
  EXPECT_TRUE(cg.read(h).empty());
  EXPECT_EQ(cg.read(y), xv);
  EXPECT_EQ(cg.read(s), std::vector<float>(3, 0.0f));
  EXPECT_EQ(cg.engine_report().hetero->transfers, 0u);
}

TEST(Hetero, PinErrorsNameTheNodeAndTheDevice) {
  Graph g;
  auto x = g.input("x");
  auto y = tanh(x).on(Device::opencl(7, 3)).named("t");
  std::string m = error_of<PlatformError>([&] {
    GraphCompiler(hetero()).compile(g, {{"x", {4}}}, {y});
  });
  EXPECT_TRUE(has(m, "'t'")) << m;
  EXPECT_TRUE(has(m, "opencl:7:3")) << m;
  EXPECT_TRUE(has(m, "not a device of this heterogeneous platform")) << m;
  // A view follows its input, but a pin to no device of the platform is a mistake all the
  // same (issue 46: it was dropped without a word).
  auto r = reshape(x, {2, 2}).on(Device::opencl(7, 3)).named("r");
  m = error_of<PlatformError>([&] { GraphCompiler(hetero()).compile(g, {{"x", {4}}}, {r}); });
  EXPECT_TRUE(has(m, "'r'")) << m;
  EXPECT_TRUE(has(m, "opencl:7:3")) << m;
  // Single-device platforms ignore pins.
  EXPECT_NO_THROW(GraphCompiler().compile(g, {{"x", {4}}}, {y}));

  // A device without a kernel for the node (OpenCL runs no fused matmul).
  const Device cl = cl_devices().at(0);
  Graph g2;
  auto a = g2.input("a");
  auto b = g2.input("b");
  detail::Attrs at;
  at.set(detail::MatmulEpilogue{});
  auto f = detail::make_op(detail::OpKind::FusedMatMul, {a, b}, at).named("fused").on(cl);
  m = error_of<PlatformError>([&] {
    GraphCompiler(hetero()).compile(g2, {{"a", {4, 4}}, {"b", {4, 4}}}, {f});
  });
  EXPECT_TRUE(has(m, "'fused'")) << m;
  EXPECT_TRUE(has(m, cl.str())) << m;
  EXPECT_TRUE(has(m, "has no kernel for it")) << m;

  // An optimizer's state lives where its variable does: one kernel writes both.
  Graph g3;
  auto W = g3.variable("W", {4}, Initializer::fill(1.0f)).on(cl);
  auto step = minimize(reduce_sum(W * g3.input("x")), {W}, Optimizer::adam());
  for (std::uint32_t id = 0; id < g3.size(); ++id)
    if (g3.node(id).name() == "W/exp_avg_sq") g3.node(id).on(Device::cpu());
  m = error_of<PlatformError>([&] { GraphCompiler(hetero()).compile(g3, {{"x", {4}}}, {step}); });
  EXPECT_TRUE(has(m, "optimizer state 'W/exp_avg_sq'")) << m;
  EXPECT_TRUE(has(m, "pinned to cpu")) << m;
  EXPECT_TRUE(has(m, "its variable 'W'")) << m;
  EXPECT_TRUE(has(m, cl.str())) << m;

  // OpenCL indices are checked when pinning.
  EXPECT_TRUE(has(error_of<GraphError>([&] { (void)x.on(Device::opencl(-1, 0)); }), ">= 0"));
}

TEST(Hetero, PlatformListsAreChecked) {
  EXPECT_TRUE(has(error_of<PlatformError>([] { (void)Platform::heterogeneous({}); }),
                  "no member platforms"));
  EXPECT_TRUE(has(error_of<PlatformError>([] {
                    (void)Platform::heterogeneous({Platform::cpu(), Platform::cpu()});
                  }),
                  "listed twice"));
  EXPECT_TRUE(has(error_of<PlatformError>([] {
                    (void)Platform::heterogeneous({hetero(), Platform::cpu()});
                  }),
                  "give each device's own platform"));
  EXPECT_TRUE(has(error_of<PlatformError>([] {
                    (void)Platform::heterogeneous({Platform::cpu()}, {.costs = {costs(), costs()}});
                  }),
                  "one per member"));
  for (const OpenClDevice& d : Platform::opencl_devices()) {
    if (!pocl_basic(d)) continue;
    const std::string m = error_of<PlatformError>([&] {
      (void)Platform::heterogeneous(
          {Platform::cpu(),
           Platform::opencl({.platform_index = d.platform_index, .device_index = d.device_index})});
    });
    EXPECT_TRUE(has(m, "pocl issue #1177")) << m;
  }
  const Platform h = hetero();
  EXPECT_EQ(h.devices().front(), Device::cpu());
  EXPECT_EQ(Platform::cpu().devices(), std::vector<Device>{Device::cpu()});
}

// Platform::description names the device a program ran on: the CPU's model (as /proc/cpuinfo
// gives it), its cores and the code path; an OpenCL device's index, name and platform; a
// heterogeneous platform's members in order.
TEST(Hetero, DescriptionsNameTheDevices) {
  std::string model = "unknown";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  const Platform cpu = Platform::cpu();
  const std::string c = cpu.description();
  EXPECT_EQ(c.rfind("cpu: " + model + ", ", 0), 0u) << c;
  EXPECT_TRUE(has(c, " cores, code path x86-64-v")) << c;
  const auto devices = cl_devices();
  if (devices.empty()) GTEST_SKIP() << "no OpenCL device";
  const Device d = devices.front();
  std::string name;
  for (const OpenClDevice& od : Platform::opencl_devices()) {
    if (od.platform_index == d.platform_index && od.device_index == d.device_index)
      name = od.name + " (" + od.platform + ", " + od.type + ")";
  }
  const std::string o = cl_platform(d).description();
  EXPECT_EQ(o, d.str() + ": " + name);
  const Platform both = Platform::heterogeneous({cpu, cl_platform(d)});
  EXPECT_EQ(both.description(), c + " + " + o);
}

// A node no device but one can run goes there, whatever the placement prefers.
TEST(Hetero, NodesGoWhereAKernelTakesThem) {
  const Device cl = cl_devices().at(0);
  Graph g;
  auto a = g.input("a");
  auto b = g.input("b");
  detail::Attrs at;
  at.set(detail::MatmulEpilogue{});
  auto f = detail::make_op(detail::OpKind::FusedMatMul, {a, b}, at).named("fused");
  auto y = tanh(f).named("y");
  // The OpenCL device first: "first" would put everything there.
  auto p = Platform::heterogeneous({cl_platform(cl), Platform::cpu()},
                                   {.placement = Placement::first, .costs = {costs(), costs()}});
  auto cg = GraphCompiler(p).compile(g, {{"a", {3, 4}}, {"b", {4, 2}}}, {y});
  const auto ones = std::vector<float>(12, 0.5f), twos = std::vector<float>(8, 0.25f);
  cg.run({{"a", ones}, {"b", twos}});
  const EngineReport r = cg.engine_report();
  const auto pf = placed(r, "fused");
  EXPECT_EQ(pf.device, "cpu");
  EXPECT_TRUE(has(pf.reason, "capability")) << pf.reason;
  EXPECT_EQ(placed(r, "y").device, cl.str());
  expect_near(cg.read(y), std::vector<float>(6, std::tanh(0.5f)), 1e-6, "y");
}

// ---- HEFT under fixed cost models --------------------------------------------------------

// Two independent heavy branches joined at the end.
struct Branches {
  Graph g;
  Node out, left, right;
};
Branches branches() {
  Branches b;
  auto x = b.g.input("x");
  auto W1 = b.g.variable("W1", {256, 256}, Initializer::uniform(-0.05f, 0.05f, 1));
  auto W2 = b.g.variable("W2", {256, 256}, Initializer::uniform(-0.05f, 0.05f, 2));
  b.left = tanh(matmul(matmul(x, W1), W1)).named("left");
  b.right = tanh(matmul(matmul(x, W2), W2)).named("right");
  b.out = (b.left + b.right).named("out");
  return b;
}

TEST(Hetero, HeftSplitsIndependentBranchesAcrossDevicesThatCanOverlap) {
  const Device cl = cl_devices().at(0);
  Branches b = branches();
  auto p = Platform::heterogeneous({Platform::cpu(), cl_platform(cl)},
                                   {.placement = Placement::heft, .costs = {costs(), costs()}});
  auto cg = GraphCompiler(p).compile(b.g, {{"x", {256, 256}}}, {b.out});
  const EngineReport r = cg.engine_report();
  const std::string dl = placed(r, "left").device;
  const std::string dr = placed(r, "right").device;
  EXPECT_NE(dl, dr) << r.hetero->decision;
  EXPECT_TRUE(has(placed(r, "left").reason, "cost: finishes at"));
  EXPECT_LT(r.hetero->estimated_us,
            r.hetero->single_device_us.empty() ? 1e30 : r.hetero->single_device_us.front().second);
  auto ref = GraphCompiler().compile(b.g, {{"x", {256, 256}}}, {b.out});
  const auto xv = testing_util::random_vec(256 * 256, 3);
  cg.run({{"x", xv}});
  ref.run({{"x", xv}});
  expect_near(cg.read(b.out), ref.read(b.out), 1e-4, "out");
}

TEST(Hetero, AutomaticKeepsOneDeviceWhenSplittingCannotPay) {
  const Device cl = cl_devices().at(0);
  Branches b = branches();
  // The OpenCL device runs on the CPU's cores: nothing can overlap, a split only adds copies.
  auto shared = Platform::heterogeneous({Platform::cpu(), cl_platform(cl)},
                                        {.costs = {costs(), costs(50, true)}});
  auto cg = GraphCompiler(shared).compile(b.g, {{"x", {256, 256}}}, {b.out});
  EngineReport r = cg.engine_report();
  EXPECT_TRUE(has(r.hetero->decision, "single device")) << r.hetero->decision;
  EXPECT_EQ(r.hetero->transfers, 0u);
  for (const auto& n : r.hetero->nodes) EXPECT_EQ(n.device, r.hetero->nodes.front().device);

  // Devices that can overlap, but a transfer so dear that a split cannot gain 10%.
  DeviceCosts slow_link = costs();
  slow_link.transfer_us = 1e6;
  auto far =
      Platform::heterogeneous({Platform::cpu(), cl_platform(cl)}, {.costs = {costs(), slow_link}});
  r = GraphCompiler(far).compile(b.g, {{"x", {256, 256}}}, {b.out}).engine_report();
  EXPECT_TRUE(has(r.hetero->decision, "single device cpu")) << r.hetero->decision;

  // A much faster device takes everything it can.
  auto fast = Platform::heterogeneous({Platform::cpu(), cl_platform(cl)},
                                      {.costs = {costs(), costs(5000)}});
  r = GraphCompiler(fast).compile(b.g, {{"x", {256, 256}}}, {b.out}).engine_report();
  EXPECT_EQ(placed(r, "left").device, cl.str()) << r.hetero->decision;
}

// The model says device 0 is four times slower at products (on a GPU machine, measured).
TEST(Hetero, HeftPutsHeavyNodesOnTheFasterOfTwoOpenClDevices) {
  const auto cls = cl_devices();
  if (cls.size() < 2) GTEST_SKIP() << "needs two OpenCL devices (POCL_DEVICES=\"pthread pthread\")";
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {512, 512}, Initializer::uniform(-0.05f, 0.05f, 4));
  auto y = matmul(matmul(x, W), W).named("y");
  auto p = Platform::heterogeneous(
      {cl_platform(cls[0]), cl_platform(cls[1])},
      {.placement = Placement::heft, .costs = {costs(20, true), costs(80, true)}});
  auto cg = GraphCompiler(p).compile(g, {{"x", {512, 512}}}, {y});
  const EngineReport r = cg.engine_report();
  EXPECT_EQ(placed(r, "y").device, cls[1].str());
  const auto xv = testing_util::random_vec(512 * 512, 5);
  cg.run({{"x", xv}});
  auto ref = GraphCompiler().compile(g, {{"x", {512, 512}}}, {y});
  ref.run({{"x", xv}});
  expect_near(cg.read(y), ref.read(y), 1e-4, "y");
}

// A layer built in a DeviceScope, trained by minimize() outside any scope: its gradients, its
// optimizer states and updates run on the layer's device (issue 50: they ran on the CPU unless
// minimize() was in the scope too), and the step equals the CPU's. A scope around minimize()
// still decides for what it encloses.
TEST(Hetero, APinnedLayerTrainsWhereItRuns) {
  const Device cl = cl_devices().at(0);
  Graph g;
  auto x = g.input("x"), t = g.input("t", DType::i32);
  Node W, b, h;
  {
    DeviceScope on_cl(g, cl);
    W = g.variable("W", {4, 3}, Initializer::uniform(-1, 1, 1));
    b = g.variable("b", {3}, Initializer::fill(0.1f));
    h = relu(matmul(x, W).named("mm") + b).named("h");
  }
  auto loss = reduce_mean(cross_entropy(softmax(h), t)).named("loss");
  auto step = minimize(loss, {W, b}, Optimizer::adam(0.1f));
  for (std::uint32_t id = 0; id < g.size(); ++id) {
    const Node n = g.node(id);
    const std::string& name = n.name();
    if (name.rfind("W/", 0) == 0 || name.rfind("b/", 0) == 0) {  // states and updates
      EXPECT_EQ(n.device(), std::optional<Device>(cl)) << name;
    }
  }
  const InputShapes shapes{{"x", {2, 4}}, {"t", {2}}};
  auto cg = GraphCompiler(hetero()).compile(g, shapes, {loss, step});
  auto ref = GraphCompiler().compile(g, shapes, {loss, step});
  const std::vector<float> xv{1, -2, 3, 4, 5, 6, -7, 8};
  const std::vector<std::int32_t> tv{2, 0};
  for (int i = 0; i < 3; ++i) {
    cg.run({{"x", xv}, {"t", tv}});
    ref.run({{"x", xv}, {"t", tv}});
  }
  expect_near(cg.read(W), ref.read(W), 1e-5, "W after 3 steps");
  const EngineReport r = cg.engine_report();
  int relu_grads = 0;
  for (const auto& p : r.hetero->nodes) {
    if (p.node.find("(relu_grad)") == std::string::npos) continue;
    ++relu_grads;
    EXPECT_EQ(p.device, cl.str()) << p.node << ": " << p.reason;
  }
  EXPECT_EQ(relu_grads, 1);
  for (const char* update : {"W/adam", "b/adam"})
    EXPECT_EQ(placed(r, update).device, cl.str()) << update;
  Graph g2;
  auto W2 = g2.variable("W", {3}).on(cl);
  Node step2;
  {
    DeviceScope on_cpu(g2, Device::cpu());
    step2 = minimize(reduce_sum(W2 * W2), {W2}, Optimizer::adam(0.1f));
  }
  EXPECT_EQ(g2.find("W/exp_avg").device(), std::optional<Device>(Device::cpu()));
}

// ---- transfers ---------------------------------------------------------------------------------

TEST(Hetero, AValueCrossesToADeviceOnceHoweverManyReadItThere) {
  const Device cl = cl_devices().at(0);
  Graph g;
  auto x = g.input("x");
  auto h = tanh(x).named("h");  // CPU
  Node sum;
  {
    DeviceScope s(g, cl);
    sum = (exp(h) + sqrt(h * h) + h * 2.0f + neg(h)).named("sum");
  }
  auto cg = GraphCompiler(hetero(Placement::first, 1)).compile(g, {{"x", {64}}}, {sum});
  const EngineReport r = cg.engine_report();
  EXPECT_EQ(r.hetero->transfers, 1u) << "h is read 5 times on the device";
  int sends = 0, recvs = 0;
  for (const auto& n : plan_of(cg).nodes) {
    if (n.op != detail::OpKind::Transfer) continue;
    (n.attrs.get<detail::TransferLink>().role == detail::TransferLink::Role::send ? sends
                                                                                  : recvs)++;
  }
  EXPECT_EQ(sends, 1);
  EXPECT_EQ(recvs, 1);
  const auto xv = testing_util::random_vec(64, 9);
  cg.run({{"x", xv}});
  auto ref = GraphCompiler().compile(g, {{"x", {64}}}, {sum});
  ref.run({{"x", xv}});
  expect_near(cg.read(sum), ref.read(sum), 1e-5, "sum");
}

TEST(Hetero, ValuesCrossBetweenTwoOpenClDevicesAndTheCpu) {
  const auto cls = cl_devices();
  if (cls.size() < 2) GTEST_SKIP() << "needs two OpenCL devices (POCL_DEVICES=\"pthread pthread\")";
  Graph g;
  auto x = g.input("x");
  auto a = tanh(x).on(cls[0]).named("a");
  auto b = (a * a).on(cls[1]).named("b");             // device 0 -> device 1
  auto c = (b + a).on(Device::cpu()).named("c");      // both devices -> CPU
  auto d = sqrt(c * c + 1.0f).on(cls[0]).named("d");  // CPU -> device 0
  auto cg = GraphCompiler(hetero()).compile(g, {{"x", {1000}}}, {d, b});
  auto ref = GraphCompiler().compile(g, {{"x", {1000}}}, {d, b});
  for (int run = 0; run < 5; ++run) {
    const auto xv = testing_util::random_vec(1000, 20 + static_cast<std::uint32_t>(run));
    cg.run({{"x", xv}});
    ref.run({{"x", xv}});
    expect_near(cg.read(d), ref.read(d), 1e-5, "d");
    expect_near(cg.read(b), ref.read(b), 1e-5, "b");
  }
  EXPECT_GE(cg.engine_report().hetero->transfers, 4u);
}

// ---- each part gets what its device alone gets ------------------------------------------------

// Parallel-op fusion (independent small nodes as one parallel_group) forms in the CPU's part as
// on the CPU alone, with the CPU member's threads; the OpenCL part forms none.
TEST(Hetero, TheCpuPartFormsTheParallelGroupsTheCpuAloneForms) {
  const Device cl = cl_devices().at(0);
  Graph g;
  auto x = g.input("x");
  std::vector<Node> outs;
  for (int i = 0; i < 8; ++i) {
    auto w = g.variable("w" + std::to_string(i), {96, 96}, Initializer::uniform(-1, 1, 1 + i));
    DeviceScope on(g, i < 4 || i % 2 ? Device::cpu() : cl);
    outs.push_back(tanh(matmul(x, w)));
  }
  auto members = [](const detail::Plan* p) {
    std::size_t m = 0;
    if (p)
      for (const auto& n : p->nodes)
        if (n.op == detail::OpKind::ParallelGroup) m += n.members.size();
    return m;
  };
  const InputShapes shapes{{"x", {96, 96}}};
  // (the sequential engine: the automatic one forms no groups)
  const Platform cpu2 = Platform::cpu({.engine = CpuEngine::sequential, .threads = 2});
  auto h = Platform::heterogeneous({cpu2, cl_platform(cl)}, {.costs = {costs(), costs()}});
  auto het = GraphCompiler(h).compile(g, shapes, outs);
  auto alone = GraphCompiler(cpu2).compile(g, shapes, outs);
  auto off = GraphCompiler(h, {.experimental = {.parallel_ops = false}}).compile(g, shapes, outs);
  const detail::Plan& hp = plan_of(het);
  ASSERT_EQ(hp.parts.size(), 2u);
  EXPECT_EQ(members(hp.parts[0].get()), 6u);  // the six products on the CPU
  EXPECT_EQ(members(hp.parts[1].get()), 0u);
  EXPECT_EQ(members(plan_of(off).parts[0].get()), 0u);
  EXPECT_EQ(members(&plan_of(alone)), 8u);
  const auto xv = testing_util::random_vec(96 * 96, 3);
  for (CompiledGraph* cg : {&het, &alone, &off}) cg->run({{"x", xv}});
  for (int i = 0; i < 8; ++i) {
    expect_near(het.read(outs[i]), alone.read(outs[i]), 1e-5, "product " + std::to_string(i));
    // The CPU's products are the same kernels, grouped or not: the same bits.
    if (i < 4 || i % 2) {
      EXPECT_TRUE(testing_util::bitwise_equal(het.read(outs[i]), off.read(outs[i])));
    }
  }
}

// ---- random DAGs, random placements -------------------------------------------------------

TEST(Hetero, RandomDagsWithRandomPlacementsMatchTheCpu) {
  const Platform h = hetero();
  const std::size_t devices = h.devices().size();
  std::mt19937 rng(13);
  int runs = 0;
  for (int d = 0; d < 40; ++d) {
    auto dag = testing_util::random_dag(rng, 2 + static_cast<int>(rng() % 120), d % 4);
    for (std::uint32_t id = 0; id < dag.graph.size(); ++id) {
      const std::size_t k = rng() % devices;
      dag.graph.node(id).on(h.devices()[k]);
    }
    auto cg = GraphCompiler(h).compile(dag.graph, testing_util::random_dag_shapes(), dag.sinks);
    auto ref = GraphCompiler().compile(dag.graph, testing_util::random_dag_shapes(), dag.sinks);
    ref.run(testing_util::random_dag_feeds());
    for (int r = 0; r < 3; ++r) {
      cg.run(testing_util::random_dag_feeds());
      ++runs;
      for (const Node& s : dag.sinks) {
        expect_near(cg.read(s), ref.read(s), 1e-5, "dag " + std::to_string(d) + " " + s.label());
      }
    }
  }
  EXPECT_EQ(runs, 120);
}

// The same graph, placement and threads give the same bits.
TEST(Hetero, RunsAreBitwiseReproducible) {
  const Platform h = hetero();
  std::mt19937 rng(5);
  auto dag = testing_util::random_dag(rng, 80, 0);
  for (std::uint32_t id = 0; id < dag.graph.size(); ++id)
    dag.graph.node(id).on(h.devices()[rng() % h.devices().size()]);
  auto a = GraphCompiler(h).compile(dag.graph, testing_util::random_dag_shapes(), dag.sinks);
  auto b = GraphCompiler(h).compile(dag.graph, testing_util::random_dag_shapes(), dag.sinks);
  a.run(testing_util::random_dag_feeds());
  b.run(testing_util::random_dag_feeds());
  b.run(testing_util::random_dag_feeds());
  for (const Node& s : dag.sinks) EXPECT_TRUE(testing_util::bitwise_equal(a.read(s), b.read(s)));
}

// ---- training and failures ---------------------------------------------------------------------

std::vector<std::vector<float>> read_all(const CompiledGraph& cg, const std::vector<Node>& vs) {
  std::vector<std::vector<float>> out;
  for (const Node& v : vs) out.push_back(cg.read(v));
  return out;
}

// Every second graph steps with another optimizer rule, whose update and state (one or two
// variables per variable) live with the variable.
TEST(Hetero, TrainingAcrossDevicesMatchesTheCpu) {
  const Platform h = hetero();
  std::mt19937 rng(21);
  const auto xv = testing_util::random_vec(16, 5);
  const char* rules[] = {"momentum", "nesterov", "adam", "adamw", "rmsprop", "adagrad"};
  for (int gi = 0; gi < 12; ++gi) {
    const Optimizer opt = Optimizer::named(rules[gi / 2 % 6], 0.01f, gi % 4 == 1 ? 1e-3f : 0.0f);
    testing_util::Training t = testing_util::random_training(rng, gi % 2 ? &opt : nullptr);
    pin_at_random(t.g, h, rng);
    auto cg = GraphCompiler(h).compile(t.g, {{"x", {4, 4}}}, t.fetches);
    auto ref = GraphCompiler().compile(t.g, {{"x", {4, 4}}}, t.fetches);
    for (int step = 0; step < 5; ++step) {
      cg.run({{"x", xv}});
      ref.run({{"x", xv}});
    }
    const auto got = read_all(cg, t.vars), want = read_all(ref, t.vars);
    for (std::size_t v = 0; v < got.size(); ++v)
      expect_near(got[v], want[v], 1e-4, "graph " + std::to_string(gi) + " " + t.vars[v].label());
  }
}

// HEFT places unpinned training graphs with every optimizer rule: each update lands with its
// variable, and the steps match the CPU's.
TEST(Hetero, HeftPlacesOptimizerUpdatesWithTheirVariables) {
  std::vector<DeviceCosts> c{costs()};
  std::vector<Platform> members{Platform::cpu()};
  for (const Device& d : cl_devices()) {
    members.push_back(cl_platform(d));
    c.push_back(costs(200));  // faster: HEFT puts work there
  }
  const Platform h = Platform::heterogeneous(members, {.placement = Placement::heft, .costs = c});
  std::mt19937 rng(23);
  const auto xv = testing_util::random_vec(16, 8);
  const char* rules[] = {"momentum", "nesterov", "adam", "adamw", "rmsprop", "adagrad"};
  int crossing = 0;
  for (int gi = 0; gi < 12; ++gi) {
    SCOPED_TRACE("graph " + std::to_string(gi));
    const Optimizer opt = Optimizer::named(rules[gi % 6], 0.01f);
    testing_util::Training t = testing_util::random_training(rng, &opt);
    auto cg = GraphCompiler(h).compile(t.g, {{"x", {4, 4}}}, t.fetches);
    auto ref = GraphCompiler().compile(t.g, {{"x", {4, 4}}}, t.fetches);
    for (int step = 0; step < 4; ++step) {
      cg.run({{"x", xv}});
      ref.run({{"x", xv}});
    }
    const auto got = all_variables(cg), want = all_variables(ref);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t v = 0; v < got.size(); ++v)
      expect_near(got[v], want[v], 1e-4, "variable " + std::to_string(v));
    const EngineReport r = cg.engine_report();
    std::map<std::string, std::string> where;
    for (const auto& n : r.hetero->nodes) where[n.node.substr(0, n.node.find(" ("))] = n.device;
    for (const auto& [node, device] : where) {
      const auto slash = node.find('/');
      if (slash == std::string::npos) continue;  // "'v0/adam'" and its state follow "'v0'"
      EXPECT_EQ(device, where.at(node.substr(0, slash) + "'")) << node;
    }
    crossing += r.hetero->transfers > 0;
  }
  EXPECT_GT(crossing, 0);  // some graphs do split
}

// Issue 46: a fed index out of range names the user's lookup, as on the CPU, wherever the
// lookup and its table are placed. With the lookup on a device, the indices reach it through a
// transfer and the host did not check them for it: the optimizer update on the CPU, which the
// user never named, was named instead. Nothing changes.
TEST(Hetero, AFedIndexOutOfRangeNamesTheUsersLookup) {
  const Device cl = cl_devices().at(0);
  const std::vector<std::int32_t> bad{3, 7, 30, 19, 0, 7};
  for (int where = 0; where < 4; ++where) {
    SCOPED_TRACE(where);
    Graph g;
    auto ids = g.input("ids", DType::i32);
    auto E = g.variable("E", {20, 4}, Initializer::uniform(-1, 1, 5));
    if (where & 1) E.on(cl);
    auto lookup = embedding(E, ids).named("lookup");
    if (where & 2) lookup.on(cl);
    auto loss = reduce_sum(tanh(lookup)).named("loss");
    auto step = minimize(loss, {E}, Optimizer::named("sgd", 0.1f));
    auto cg = GraphCompiler(hetero()).compile(g, {{"ids", {6}}}, {loss, step});
    const auto before = cg.read(E);
    const std::string m = error_of<FeedError>([&] { cg.run({{"ids", bad}}); });
    EXPECT_TRUE(has(m, "node 'lookup'")) << m;
    EXPECT_TRUE(has(m, "index 30 at position 2")) << m;
    EXPECT_EQ(cg.read(E), before);
  }
}

// The same for indices computed in the run (not fed): wherever they are computed and wherever
// the lookup and its table are, an index out of range names the user's lookup, never a node
// autodiff or the compiler made (an OpenCL part checked its embedding gradient or the sparse
// update's 'check indices of' first, and named that). Nothing changes, and the graph runs on.
TEST(Hetero, AComputedIndexOutOfRangeNamesTheUsersLookup) {
  const Device cl = cl_devices().at(0);
  const std::vector<float> bad{3, 7, 30, 19, 0, 7}, good{3, 7, 1, 19, 0, 7};
  for (int where = 0; where < 8; ++where) {
    for (const char* opt : {"sgd", "adagrad"}) {
      SCOPED_TRACE(std::to_string(where) + " " + opt);
      Graph g;
      auto f = g.input("f");
      auto ids = cast(f, DType::i32).named("ids");  // computed
      if (where & 4) ids.on(cl);
      auto E = g.variable("E", {20, 4}, Initializer::uniform(-1, 1, 5));
      if (where & 1) E.on(cl);
      auto lookup = embedding(E, ids).named("lookup");
      if (where & 2) lookup.on(cl);
      auto loss = reduce_sum(tanh(lookup)).named("loss");
      auto step = minimize(loss, {E}, Optimizer::named(opt, 0.1f));
      auto cg = GraphCompiler(hetero()).compile(g, {{"f", {6}}}, {loss, step});
      const auto before = cg.read(E);
      const std::string m = error_of<FeedError>([&] { cg.run({{"f", bad}}); });
      EXPECT_TRUE(has(m, "node 'lookup'")) << m;
      EXPECT_TRUE(has(m, "index 30 at position 2")) << m;
      EXPECT_FALSE(has(m, "check indices")) << m;
      EXPECT_EQ(cg.read(E), before);
      cg.run({{"f", good}});
      EXPECT_NE(cg.read(E), before);
    }
  }
}

// An embedding table trained with sgd or adagrad through minimize, the lookup on the CPU and
// the backward pass where the table is: the update fuses with the table's gradient into a
// sparse one (only the rows looked up change) on either device, and trains as the CPU alone.
TEST(Hetero, SparseOptimizerUpdatesRunOnTheTablesDevice) {
  const Platform h = hetero();
  const std::vector<Device> devices = h.devices();
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const Device& at = devices[d];
    for (const char* rule : {"sgd", "adagrad"}) {
      SCOPED_TRACE(std::string(rule) + " on " + at.str());
      Graph g;
      auto ids = g.input("ids", DType::i32);
      auto E = g.variable("E", {20, 4}, Initializer::uniform(-1, 1, 5)).on(at);
      auto loss = reduce_sum(tanh(embedding(E, ids).on(Device::cpu()))).on(Device::cpu());
      Node step;
      {
        DeviceScope scope(g, at);  // the backward pass and the update where the table is
        step = minimize(loss, {E}, Optimizer::named(rule, 0.1f));
      }
      const InputShapes shapes{{"ids", {6}}};
      auto cg = GraphCompiler(h).compile(g, shapes, {loss, step});
      auto ref = GraphCompiler().compile(g, shapes, {loss, step});
      const std::vector<std::int32_t> idv{3, 7, 3, 19, 0, 7};
      for (int i = 0; i < 3; ++i) {
        cg.run({{"ids", idv}});
        ref.run({{"ids", idv}});
      }
      expect_near(cg.read(E), ref.read(E), 1e-5, "E");
      auto& het = dynamic_cast<detail::hetero::HeteroExecutable&>(detail::executable_of(cg));
      int sparse = 0;
      for (const detail::PlanNode& n : het.part(d)->plan().nodes)
        sparse += n.op == detail::OpKind::SparseOptimizerUpdate;
      EXPECT_EQ(sparse, 1) << "the sparse update on " << at.str();
    }
  }
}

// Variables and optimizer state that live on the devices are saved from there and loaded back
// there: a graph loaded from a checkpoint takes the same next steps, bit for bit, and the CPU
// alone loads the same state.
TEST(Hetero, CheckpointsOfTrainingAcrossDevicesResumeBitwise) {
  const Platform h = hetero();
  std::mt19937 rng(22);
  const auto xv = testing_util::random_vec(16, 6);
  const std::string path = ::testing::TempDir() + "hetero-" + std::to_string(::getpid()) + ".ckpt";
  for (int gi = 0; gi < 8; ++gi) {
    SCOPED_TRACE("graph " + std::to_string(gi));
    const Optimizer opt = Optimizer::named(gi % 2 ? "adam" : "momentum", 0.01f);
    testing_util::Training t = testing_util::random_training(rng, &opt);
    pin_at_random(t.g, h, rng);
    auto compile = [&](const Platform& p) {
      return GraphCompiler(p).compile(t.g, {{"x", {4, 4}}}, t.fetches);
    };
    auto a = compile(h);
    for (int step = 0; step < 3; ++step) a.run({{"x", xv}});
    a.save(path);
    auto b = compile(h);
    b.run({{"x", xv}});  // a state the load must replace
    b.load(path);
    auto cpu = compile(Platform::cpu());
    cpu.load(path);
    EXPECT_EQ(read_all(cpu, t.vars), read_all(a, t.vars));
    for (int step = 0; step < 3; ++step) {
      a.run({{"x", xv}});
      b.run({{"x", xv}});
      EXPECT_EQ(a.read(t.fetches[0]), b.read(t.fetches[0])) << "loss of step " << step;
    }
    EXPECT_EQ(read_all(a, t.vars), read_all(b, t.vars));
  }
  std::remove(path.c_str());
}

std::string g_fail;
void fail_labelled(const detail::PlanNode& n) {
  if (n.label == g_fail) throw PlatformError("injected failure in " + n.label);
}
// An OpenCL part's node fails: its command reads as failed, or its enqueue throws.
class FailOnDevice final : public detail::cl::OpenClExecutable::RunHook {
 public:
  FailOnDevice(std::uint32_t node, bool at_enqueue) : node_(node), at_enqueue_(at_enqueue) {}
  void before_enqueue(cl_context, std::uint32_t node, std::vector<cl_event>&) override {
    if (at_enqueue_ && node == node_)
      throw PlatformError("clEnqueueNDRangeKernel failed: CL_OUT_OF_RESOURCES (injected)");
  }
  cl_int event_status(std::uint32_t node, cl_int driver) override {
    return !at_enqueue_ && node == node_ ? CL_OUT_OF_RESOURCES : driver;
  }

 private:
  std::uint32_t node_;
  bool at_enqueue_;
};

// Fails the test and ends the process if not destroyed within `seconds`: a hang must not hold
// the suite up until ctest's timeout, and nothing can stop a thread blocked in a run.
class Watchdog {
 public:
  Watchdog(std::string what, int seconds) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock lk(mu_);
      if (!cv_.wait_for(lk, std::chrono::seconds(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "FAILED: %s did not finish within %d s (hung)\n", what_.c_str(),
                     seconds);
        std::fflush(stderr);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// A value that crosses to the CPU is received by a kernel that blocks its thread until the
// value arrives. A device may run its commands in order (its GEMM queue is in-order), so the
// command that sends the value can wait behind one that needs a value the CPU sends: the CPU
// must send that before it starts the recv, or the thread the recv blocks may be the one that
// would have sent it. Random training graphs, nodes placed at random, every CPU engine; the
// runs once hung (engine auto, 2 of 3 times).
TEST(Hetero, RandomPlacementsNeverHangOnAnyCpuEngine) {
  if (cl_devices().empty()) GTEST_SKIP() << "no OpenCL device";
  struct Config {
    const char* name;
    CpuEngine engine;
    int executors, threads;
    bool plan_memory;
  };
  const Config configs[] = {
      {"sequential", CpuEngine::sequential, 0, 0, true},
      {"critical-path 1x1", CpuEngine::critical_path, 1, 1, true},
      {"critical-path 2x1", CpuEngine::critical_path, 2, 1, true},
      {"critical-path 2x1, no memory plan", CpuEngine::critical_path, 2, 1, false},
      {"shared-queue 2x1", CpuEngine::shared_queue, 2, 1, true},
      {"auto", CpuEngine::automatic, 0, 0, true}};
  const auto xv = testing_util::random_vec(16, 7);
  for (const Config& c : configs) {
    CpuOptions co;
    co.engine = c.engine;
    co.executors = c.executors;
    co.threads_per_executor = c.threads;
    const Platform h = hetero(Placement::automatic, 8, co);
    CompileOptions opts;
    opts.plan_memory = c.plan_memory;
    std::mt19937 rng(21);  // graph 7 hung with engine auto
    for (int gi = 0; gi < 16; ++gi) {
      testing_util::Training t = testing_util::random_training(rng);
      for (std::uint32_t id = 0; id < t.g.size(); ++id)
        t.g.node(id).on(h.devices()[rng() % h.devices().size()]);
      const std::string what = std::string(c.name) + ", graph " + std::to_string(gi);
      Watchdog dog(what, 60);
      auto cg = GraphCompiler(h, opts).compile(t.g, {{"x", {4, 4}}}, t.fetches);
      for (int step = 0; step < 4; ++step) cg.run({{"x", xv}});
      EXPECT_TRUE(std::isfinite(cg.read(t.fetches[0])[0])) << what;
    }
  }
}

// Random graphs of many ops (tests/random_dag: broadcasts, reductions, softmax, matmul,
// slices, concats, gathers, casts, where) on the CPU's parallel engines with every pass, on
// OpenCL, and across devices with nodes placed at random: the values of an unfused, unplanned
// sequential run, and bitwise the same in a second run.
TEST(Hetero, RandomGraphsOfManyOpsMatchTheUnfusedCpuEverywhere) {
  const std::vector<float> xv = testing_util::random_vec(16, 1),
                           yv = testing_util::random_vec(16, 2);
  const InputShapes shapes{{"x", {4, 4}}, {"y", {4, 4}}};
  const std::vector<FeedItem> feeds{{"x", xv}, {"y", yv}};
  CompileOptions plain;
  plain.fuse = false;
  plain.plan_memory = false;
  plain.experimental.parallel_ops = false;
  CpuOptions seq, cp, sq;
  seq.engine = CpuEngine::sequential;
  cp.engine = CpuEngine::critical_path;
  cp.executors = 2;
  cp.threads_per_executor = 1;
  sq.engine = CpuEngine::shared_queue;
  sq.executors = 1;
  sq.threads_per_executor = 2;
  const bool cl = !cl_devices().empty();
  for (int seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    std::vector<Node> sinks;
    Graph g = testing_util::random_op_graph(rng, 10 + static_cast<int>(rng() % 40), sinks);
    std::vector<std::vector<float>> want;
    {
      auto ref = GraphCompiler(Platform::cpu(seq), plain).compile(g, shapes, sinks);
      ref.run(feeds);
      for (const Node& s : sinks) want.push_back(ref.read(s));
    }
    std::vector<std::pair<std::string, Platform>> platforms{
        {"cpu critical-path 2x1", Platform::cpu(cp)}, {"cpu shared-queue 1x2", Platform::cpu(sq)}};
    if (cl) platforms.push_back({"opencl", cl_platform(cl_devices()[0])});
    if (cl && seed % 2 == 0) {
      const Platform h = hetero();
      for (std::uint32_t id = 0; id < g.size(); ++id)
        g.node(id).on(h.devices()[rng() % h.devices().size()]);
      platforms.push_back({"hetero", h});
    }
    for (const auto& [name, p] : platforms) {
      SCOPED_TRACE(name);
      auto cg = GraphCompiler(p).compile(g, shapes, sinks);
      std::vector<std::vector<float>> first;
      for (int run = 0; run < 2; ++run) {
        cg.run(feeds);
        for (std::size_t s = 0; s < sinks.size(); ++s) {
          const auto got = cg.read(sinks[s]);
          if (run == 0) {
            expect_near(got, want[s], 1e-4, "sink " + std::to_string(s));
            first.push_back(got);
          } else {
            EXPECT_TRUE(testing_util::bitwise_equal(got, first[s])) << "sink " << s;
          }
        }
      }
    }
  }
}

TEST(Hetero, AFailureOnEitherDeviceReachesRunAndChangesNothing) {
  const Platform h = hetero();
  std::mt19937 rng(31);
  const auto xv = testing_util::random_vec(16, 6);
  int injected_cpu = 0, injected_cl = 0;
  // The last three graphs step with optimizers whose state is written after the commit point
  // too.
  const char* rules[] = {"adam", "rmsprop", "nesterov"};
  for (int gi = 0; gi < 6; ++gi) {
    const Optimizer opt = Optimizer::named(rules[gi % 3], 0.01f);
    testing_util::Training t = testing_util::random_training(rng, gi >= 3 ? &opt : nullptr);
    pin_at_random(t.g, h, rng);
    auto cg = GraphCompiler(h).compile(t.g, {{"x", {4, 4}}}, t.fetches);
    auto ref = GraphCompiler(h).compile(t.g, {{"x", {4, 4}}}, t.fetches);
    auto& het = dynamic_cast<detail::hetero::HeteroExecutable&>(detail::executable_of(cg));
    // Fallible nodes: work before the commit point of any part (transfers and gates too).
    std::vector<std::pair<std::size_t, std::uint32_t>> fallible;  // (device, part index)
    for (std::size_t d = 0; d < h.devices().size(); ++d) {
      detail::Executable* part = het.part(d);
      if (!part) continue;
      const detail::Plan& pp = part->plan();
      for (std::uint32_t i = 0; i < pp.nodes.size(); ++i)
        if (pp.nodes[i].has_work() && !pp.nodes[i].writes_variable()) fallible.push_back({d, i});
    }
    for (int r = 0; r < 8; ++r) {
      const auto before = all_variables(cg);
      const auto [d, victim] = fallible[rng() % fallible.size()];
      detail::Executable* part = het.part(d);
      auto* cl = dynamic_cast<detail::cl::OpenClExecutable*>(part);
      if (cl) {
        cl->set_run_hook(std::make_unique<FailOnDevice>(victim, rng() % 2 == 0));
        ++injected_cl;
      } else {
        g_fail = part->plan().nodes[victim].label;
        detail::cpu::set_kernel_fault_hook(fail_labelled);
        ++injected_cpu;
      }
      EXPECT_THROW(cg.run({{"x", xv}}), PlatformError) << part->plan().nodes[victim].label;
      detail::cpu::set_kernel_fault_hook(nullptr);
      if (cl) cl->set_run_hook(nullptr);
      ASSERT_EQ(all_variables(cg), before)
          << "a run failing at " << part->plan().nodes[victim].label << " changed state";
      cg.run({{"x", xv}});
      ref.run({{"x", xv}});
      ASSERT_EQ(all_variables(cg), all_variables(ref));
    }
  }
  EXPECT_GT(injected_cpu, 5);
  EXPECT_GT(injected_cl, 5);
}

// ---- asynchronous runs, traces, the one-thread contract -----------------------------------

TEST(Hetero, AsyncRunsTracesAndTheOneThreadContract) {
  const Device cl = cl_devices().at(0);
  Graph g;
  auto x = g.input("x");
  auto a = tanh(x).on(cl).named("a");
  auto b = (a * 3.0f).named("b");
  auto c = (sqrt(b * b) + a).on(cl).named("c");
  auto cg = GraphCompiler(hetero()).compile(g, {{"x", {4096}}}, {c});
  auto ref = GraphCompiler().compile(g, {{"x", {4096}}}, {c});
  const auto xv = testing_util::random_vec(4096, 3);
  ref.run({{"x", xv}});
  const std::string path = ::testing::TempDir() + "hetero_trace.json";
  cg.start_trace(path);
  RunHandle run = cg.run_async({{"x", xv}});
  std::string other;
  std::thread t([&] { other = error_of<UsageError>([&] { (void)cg.read(c); }); });
  t.join();
  EXPECT_TRUE(has(other, "in use by another thread")) << other;
  run.wait();
  expect_near(cg.read(c), ref.read(c), 1e-5, "c");
  cg.run({{"x", xv}});
  cg.stop_trace();
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string json = ss.str();
  // Every device's lanes in one timeline, the transfers among the events.
  EXPECT_TRUE(has(json, "\"cpu: ")) << json.substr(0, 400);
  EXPECT_TRUE(has(json, "\"" + cl.str())) << json.substr(0, 400);
  EXPECT_TRUE(has(json, "send 'a'")) << json.substr(0, 400);
  EXPECT_TRUE(has(json, "recv 'a'")) << json.substr(0, 400);
}

// Measured per-op times go into the platform's table: a later compile uses them.
TEST(Hetero, ProfiledTimesReplaceTheStaticEstimates) {
  const Device cl = cl_devices().at(0);
  // A model that thinks every node is free anywhere: on a tie HEFT keeps the first device.
  const DeviceCosts free{.gflops = 1e9, .gbytes_per_s = 1e9, .node_us = 1e-3};
  auto p = Platform::heterogeneous(
      {Platform::cpu(), cl_platform(cl)},
      {.placement = Placement::heft, .costs = {free, free}, .profile_runs = 2});
  Graph g;
  auto x = g.input("x");
  Node y = x;
  for (int i = 0; i < 6; ++i) y = tanh(y * 1.5f);
  y = y.named("y");
  auto cg = GraphCompiler(p).compile(g, {{"x", {65536}}}, {y});
  EXPECT_EQ(placed(cg.engine_report(), "y").device, "cpu");
  const auto xv = testing_util::random_vec(65536, 1);
  for (int r = 0; r < 4; ++r) cg.run({{"x", xv}});
  // The CPU's times are measured now, the device's still free: everything moves there, and
  // the reasons quote the CPU's measured time.
  const EngineReport r = GraphCompiler(p).compile(g, {{"x", {65536}}}, {y}).engine_report();
  const auto py = placed(r, "y");
  EXPECT_EQ(py.device, cl.str()) << py.reason;
  EXPECT_TRUE(has(py.reason, "on cpu")) << py.reason;
  EXPECT_GT(r.hetero->single_device_us.empty() ? 0.0 : r.hetero->single_device_us[0].second, 1.0);
}

// Without cost figures the platform measures its devices once (real kernels) and places.
TEST(Hetero, MeasuredCostsPlaceAutomatically) {
  const Device cl = cl_devices().at(0);
  auto p = Platform::heterogeneous({Platform::cpu(), cl_platform(cl)});
  Branches b = branches();
  auto cg = GraphCompiler(p).compile(b.g, {{"x", {256, 256}}}, {b.out});
  const EngineReport r = cg.engine_report();
  EXPECT_GT(r.hetero->estimated_us, 0);
  EXPECT_FALSE(r.hetero->decision.empty());
  const auto xv = testing_util::random_vec(256 * 256, 3);
  cg.run({{"x", xv}});
  auto ref = GraphCompiler().compile(b.g, {{"x", {256, 256}}}, {b.out});
  ref.run({{"x", xv}});
  expect_near(cg.read(b.out), ref.read(b.out), 1e-4, "out");
}

// Profiles of a heterogeneous graph: each part's nodes by its own plan (transfers among them),
// every node once per run, synchronous and asynchronous runs alike.
TEST(HeteroProfile, EveryPartsNodesCountEveryRun) {
  const std::vector<Device> cls = cl_devices();
  if (cls.empty()) GTEST_SKIP() << "no OpenCL device that can be a member";
  Graph g;
  const Node x = g.input("x");
  const Node w1 = g.variable("w1", {256, 256}, Initializer::uniform(-0.1f, 0.1f, 1));
  const Node b1 = g.variable("b1", {256}, Initializer::uniform(-0.1f, 0.1f, 2));
  const Node w2 = g.variable("w2", {256, 16}, Initializer::uniform(-0.1f, 0.1f, 3));
  const Node y = softmax(matmul(relu(add(matmul(x, w1), b1)), w2));
  auto cg = GraphCompiler(Platform::heterogeneous({Platform::cpu(), cl_platform(cls[0])}))
                .compile(g, {{"x", {128, 256}}}, {y});
  const std::vector<float> xv = testing_util::random_vec(128 * 256, 4);
  cg.start_profile();
  cg.run({{"x", xv}});
  cg.run_async({{"x", xv}});  // collected when the run is finished
  const Profile p = cg.profile();
  EXPECT_EQ(p.runs, 2);
  double share = 0;
  for (const Profile::Op& op : p.ops) share += op.share;
  EXPECT_NEAR(share, 1.0, 1e-9);
  for (const Profile::Node& n : p.nodes) {
    EXPECT_FALSE(n.kernel.empty()) << n.name;
    EXPECT_EQ(n.calls, 2) << n.name;
  }
  EXPECT_FALSE(p.nodes.empty());
}

}  // namespace
