// SPDX-License-Identifier: Apache-2.0
// Compiling a graph for a platform and running it.
//
//   hetgraph::GraphCompiler compiler(hetgraph::Platform::cpu());
//   auto cg = compiler.compile(g, {{"x", {500, 784}}, {"y", {500, 10}}}, {loss, step});
//   std::span<float> xb = cg.mapped_input("x");   // the graph's own buffer: write in place
//   fill_batch(xb);
//   cg.run({{"x", xb}, {"y", labels}});             // xb is not copied: it is already there
//   float l = cg.read(loss)[0];
//
// compile() orders the graph, infers shapes, plans memory and instantiates the platform's
// kernels; a CompiledGraph then runs many times with new feeds. Variables keep their values
// in the compiled graph between runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hetgraph/graph.hpp"
#include "hetgraph/tensor.hpp"

namespace hetgraph {

class CompiledGraph;
class Platform;

/// How the CPU platform executes a compiled graph. All engines give bitwise identical results
/// for the same threads per executor.
enum class CpuEngine : std::uint8_t {
  sequential,     // one executor using all cores, nodes in topological order
  shared_queue,   // N executors pulling ready nodes from one global FIFO (TensorFlow style)
  critical_path,  // N pinned executors fed by a critical-path-first scheduler (Graphi)
  automatic,      // the default: the graph-width guideline's configuration first, then the
                  // profiler's search over executor x thread configurations and the
                  // sequential engine; the winner is kept in the tuning cache (below)
};
std::string_view engine_name(CpuEngine e);
/// "sequential", "shared-queue", "critical-path" or "auto"; throws PlatformError otherwise.
CpuEngine parse_engine(std::string_view name);

/// How the CPU platform runs compiled graphs. The defaults need no tuning: the automatic engine
/// measures the configurations on the first runs and keeps the fastest; its choice (with the
/// profiled levels) is stored per graph and machine in $XDG_CACHE_HOME/hetgraph (else
/// ~/.cache/hetgraph), so a later process runs it from its first run. HETGRAPH_TUNING_CACHE=0
/// turns the cache off.
///
///   hetgraph::CpuOptions o;                       // automatic
///   o.engine = hetgraph::CpuEngine::critical_path;
///   o.executors = 2; o.threads_per_executor = 1;  // a fixed configuration
///   auto platform = hetgraph::Platform::cpu(o);
struct CpuOptions {
  CpuEngine engine = CpuEngine::automatic;
  int threads = 0;               // sequential: team size; automatic: cores to use; 0: every
                                 // allowed core
  int executors = 0;             // parallel engines; 0: the graph-width guideline's choice
  int threads_per_executor = 0;  // 0: allowed cores / executors
  bool pin_threads = true;       // bind executor teams to their cores (hwloc; the calling
                                 // thread only for runs of a millisecond or more)
  /// automatic: while other processes hold some of the cores (measured over quarter-second
  /// windows, held for a second after), run on the cores left (the sequential engine with that
  /// many threads) instead of a team that would wait for its slowest, preempted thread; back to
  /// the chosen configuration when they are free. Runs of several compiled graphs of this
  /// process at once (from several threads) share the cores left the same way. Results then come
  /// from other thread counts: false (or HETGRAPH_ADAPT_TO_LOAD=0, or a fixed engine) keeps every
  /// run bitwise the same.
  bool adapt_to_load = true;
  /// The scheduler's constants and its experiments, for the benchmarks and tests that measure
  /// them; the defaults are the measured ones, and they may change or go without notice.
  ///
  ///   hetgraph::CpuOptions o;
  ///   o.experimental.inline_below_us = 0;  // every node goes through the scheduler
  struct Experimental {
    int ring_capacity = 16;        // critical_path: nodes queued per executor, at most
    double queue_us = 4.0;         // critical_path: an executor is given more nodes only while
                                   // their estimated work is below this (one node always)
    double inline_below_us = 2.0;  // nodes cheaper than this run in the thread that readied them
    int profile_runs = 3;          // runs profiled (after the first, which pays for page faults
                                   // and lazily made primitives) before levels use measured ones
    /// critical_path with teams of 2+ threads: each op kind's thread count is found by hill
    /// climbing on the first runs (1, 2, 4, ... threads while its largest instances get
    /// faster), and ops that run on one thread co-run side by side on the team's threads.
    /// automatic: also tries that configuration. Off by default: on the 2-core machine it was
    /// measured on (LSTM training, bench/results/2026-11-23-issue12-lstm.txt) it did not beat
    /// the best fixed configuration.
    bool per_op_threads = false;
  };
  Experimental experimental = {};
};

/// How a compiled graph is being executed: the lanes its work runs on (the tracks of its
/// traces), the graph's shape, and what only one platform has.
///
///   EngineReport r = cg.engine_report();
///   std::printf("%s on %zu lanes of %d threads\n", r.engine.c_str(), r.lanes.size(),
///               r.lanes[0].threads);
///   if (r.cpu && !r.cpu->search.empty()) { /* the automatic engine's measurements */ }
struct EngineReport {
  /// "sequential", "shared-queue", "critical-path", "auto", "opencl out-of-order queue", ...
  std::string engine;
  /// Where nodes run: a CPU executor (a team of threads) or an OpenCL command queue.
  struct Lane {
    std::string name;
    int threads = 1;  // the executor's team size; for a queue, the device's compute units
  };
  std::vector<Lane> lanes;
  int runs = 0;
  /// Graph-width statistics (heavy ops: products, convolutions, embedding lookups).
  /// avg_width: heavy ops / heavy levels (the guideline paper's measure); work_width: work /
  /// span over every node, each weighted by its estimated time.
  std::size_t nodes = 0, heavy_nodes = 0;
  int heavy_levels = 0, max_width = 0, avg_width = 1, work_width = 1;

  /// The CPU platform's engines.
  struct Cpu {
    /// The code path of hetgraph's own vector kernels, chosen at startup from what the CPU has
    /// ("x86-64-v3 (AVX2, FMA)"; HETGRAPH_MAX_CPU_ISA caps it). oneDNN chooses its own.
    std::string code_path;
    int executors = 1;
    int threads_per_executor = 1;
    bool levels_profiled = false;  // levels come from measured durations
    bool tuned = true;             // automatic: the configuration search is over
    int guideline_executors = 1;   // what the graph-width guideline chose
    struct Trial {
      int executors = 1, threads_per_executor = 1;
      double median_s = 0;
      int runs = 0;
      std::string engine = "critical-path";  // or "sequential": all cores, plan order
      bool per_op_threads = false;           // critical-path with per-op thread counts
    };
    std::vector<Trial> search;  // automatic: each configuration tried, in order
    /// What the automatic engine runs once its search is over (or a cached search says).
    struct Chosen {
      std::string engine = "critical-path";  // or "sequential"
      int executors = 1, threads_per_executor = 1;
      bool per_op_threads = false;
      bool from_cache = false;  // taken from the tuning cache: no search in this process
      /// Searched in this process: the load it ran beside, and whether its choice was cached.
      /// A search beside other processes that took over a fifth of the cores, whose sequential
      /// runs' caller got under 3/4 of its core or was preempted in them, measured them, not
      /// the graph: its choice is used but not cached.
      struct Load {
        double caller_share = 1;  // the caller's CPU time / wall time in the sequential runs
        long preempted = 0;       // its involuntary context switches in them
        double others_share = 0;  // other processes' share of the cores during the search
        bool busy = false;        // they said so: not cached
      };
      std::optional<Load> load;  // absent where the choice came from the cache
    };
    std::optional<Chosen> chosen;
    /// automatic with adapt_to_load: the threads of the last run where other processes held
    /// cores, or runs of other compiled graphs of this process overlapped it (it ran on its
    /// share of the cores left), 0 where it ran the chosen configuration.
    int load_threads = 0;
    /// Per-op thread counts (CpuOptions::Experimental::per_op_threads): each op kind's measured
    /// time of its largest instances at the thread counts its hill climb tried, and the count it
    /// runs with.
    struct OpThreads {
      std::string op;
      int threads = 1;
      std::vector<std::pair<int, double>> curve;  // (threads, microseconds per run)
    };
    std::vector<OpThreads> op_threads;
  };
  std::optional<Cpu> cpu;
  /// The OpenCL platform.
  struct OpenCl {
    std::string device;
    bool out_of_order = false;  // nodes may overlap on the device
    int compute_units = 1;
  };
  std::optional<OpenCl> opencl;
  /// A heterogeneous platform: where each node runs and why, and what crossing devices costs.
  struct Hetero {
    std::vector<std::string> devices;  // "cpu", "opencl:0:1 (pthread-...)", in member order
    struct Placed {
      std::string node;    // its label
      std::string device;  // Device::str()
      std::string reason;  // "pinned", "cost: ...", "capability: ...", "single device: ...", ...
    };
    std::vector<Placed> nodes;       // every node with a value or work, in plan order
    std::size_t transfers = 0;       // values crossing a device boundary in each run
    std::size_t transfer_bytes = 0;  // their bytes (once per receiving device)
    /// The cost model's makespan of the chosen placement, of HEFT's split, and of each device
    /// alone (where that device can run every unpinned node), in microseconds.
    double estimated_us = 0, split_us = 0;
    std::vector<std::pair<std::string, double>> single_device_us;
    std::string decision;  // why this placement (a split, or one device)
  };
  std::optional<Hetero> hetero;

  /// False while an automatic engine is still searching for its configuration.
  bool tuned() const { return !cpu || cpu->tuned; }
};

/// Where a compiled graph's runs spent their time, node by node (CompiledGraph::start_profile),
/// as ONNX Runtime's profiler reports it: time by op kind, and the nodes with their kernels and
/// shapes. Times are the kernels' own, from the same per-node events as traces; nodes without
/// a kernel (views, inputs) take none. Parallel engines and out-of-order queues overlap nodes:
/// shares are of the summed node time (node_s), not of the runs' wall time.
///
///   cg.start_profile();
///   for (int i = 0; i < 20; ++i) cg.run(feeds);
///   hetgraph::Profile p = cg.stop_profile();
///   std::fputs(p.table(10).c_str(), stdout);          // the top 10 nodes
///   for (const auto& op : p.ops) std::printf("%s %.1f%%\n", op.op.c_str(), 100 * op.share);
struct Profile {
  std::int64_t runs = 0;  // successful runs profiled (a failed run is left out)
  double node_s = 0;      // every node's time summed, over all the runs
  struct Op {
    std::string op;          // "matmul", "conv2d", ...
    int nodes = 0;           // nodes of this kind that ran
    std::int64_t calls = 0;  // their executions (runs x nodes)
    double total_s = 0;      // over all the runs
    double share = 0;        // of node_s
  };
  std::vector<Op> ops;  // by total_s, largest first
  struct Node {
    std::string name;  // the graph node's name, else its label
    std::string op;
    std::string kernel;               // CompiledGraph::kernel_name
    Shape shape;                      // its output's
    std::vector<Shape> input_shapes;  // of the inputs it reads
    std::int64_t calls = 0;
    double total_s = 0;
    double mean_s = 0;  // per call
    double share = 0;   // of node_s
  };
  std::vector<Node> nodes;  // by total_s, largest first

  /// The printable report: a header line, time by op kind, then the `top` slowest nodes.
  std::string table(int top = 20) const;
  /// The same data as one JSON object (no newlines): {"runs":..,"node_s":..,"ops":[{"op":..,
  /// "nodes":..,"calls":..,"total_s":..,"share":..}],"nodes":[{"name":..,"op":..,"kernel":..,
  /// "shape":[..],"input_shapes":[[..]],"calls":..,"total_s":..,"mean_s":..,"share":..}]}.
  std::string json() const;
};

/// Which OpenCL device runs compiled graphs, and how.
struct OpenClOptions {
  /// -1 (both): HETGRAPH_OPENCL_DEVICE=platform:device if set, else the first GPU, else the
  /// first device of any type. Setting one index only takes 0 for the other.
  int platform_index = -1;
  int device_index = -1;
  /// true: one in-order queue, nodes run one at a time in dependency order (a serial run).
  /// false: an out-of-order queue where the device has one, so independent nodes may overlap.
  bool in_order = false;
};

/// One OpenCL device, as Platform::opencl_devices() lists it.
struct OpenClDevice {
  int platform_index = 0, device_index = 0;
  std::string platform;  // platform name, e.g. "Portable Computing Language"
  std::string name;      // device name
  std::string type;      // "GPU", "CPU", "accelerator", ...
};

/// What placement assumes of one device of a heterogeneous platform (measured when not given:
/// see HeteroOptions::costs). A node's estimated time is node_us + max(FLOPs / gflops,
/// bytes / gbytes_per_s); a value crossing to or from the device costs transfer_us plus its
/// bytes at the transfer rate, plus a host copy at the CPU's gbytes_per_s.
struct DeviceCosts {
  double gflops = 0;        // dense products (matmul, convolution)
  double gbytes_per_s = 0;  // memory-bound ops
  double node_us = 0;       // fixed cost of one node (launch, scheduling)
  double to_device_gbytes_per_s = 0, from_device_gbytes_per_s = 0;  // host <-> device (OpenCL)
  double transfer_us = 0;  // latency of one transfer, its synchronisation included
  /// Runs on the CPU's own cores (PoCL, or any OpenCL CPU device): never concurrent with the
  /// CPU, so placement only splits work for speed per node, never for overlap.
  bool shares_host_cores = false;
};

/// How a heterogeneous platform places nodes (Platform::heterogeneous).
struct HeteroOptions {
  enum class Placement : std::uint8_t {
    /// HEFT (heterogeneous earliest finish time list scheduling) over the cost model, unless
    /// one device alone is estimated within min_split_gain of the split: then that device.
    automatic,
    heft,   // HEFT's placement as it comes, whatever it gains
    first,  // every unpinned node on the first member that has a kernel for it
  };
  Placement placement = Placement::automatic;
  /// A split must be estimated this much faster (fraction) than the best single device.
  double min_split_gain = 0.1;
  /// Cost figures per member, in member order. Empty: measured once per process and device
  /// (a matmul, a streaming add, a chain of tiny nodes, transfers both ways), then refined by
  /// the per-op times that compiled graphs measure in their first runs (profile_runs).
  std::vector<DeviceCosts> costs;
  /// Runs of each compiled graph whose per-node times go into the platform's cost table, which
  /// later compiles on the same platform use in place of the static estimates.
  int profile_runs = 3;
};

/// Where compiled graphs run.
///
///   auto platform = hetgraph::Platform::opencl_available()
///                       ? hetgraph::Platform::opencl()  // or opencl({.device_index = 1})
///                       : hetgraph::Platform::cpu();
///   hetgraph::GraphCompiler compiler(platform);         // compile() and run() as anywhere
class Platform {
 public:
  static Platform cpu(CpuOptions options = {});
  /// The OpenCL platform on the device the options select. Throws PlatformError when no OpenCL
  /// driver is installed or the chosen device does not exist (the message lists the devices).
  static Platform opencl(OpenClOptions options = {});
  /// Whether Platform::opencl() with these options would find its device. Never throws.
  static bool opencl_available(OpenClOptions options = {}) noexcept;
  /// Every OpenCL device of every installed platform; empty when there is none.
  static std::vector<OpenClDevice> opencl_devices();
  /// One graph across several devices: the CPU and any number of OpenCL devices, each a
  /// single-device platform (its options apply to its part). Nodes pinned with Node::on or a
  /// DeviceScope run where pinned; the others are placed by `options` (HEFT by default), and
  /// nodes a device has no kernel for go to one that has. Values crossing devices are copied
  /// once per receiving device through pinned host memory, asynchronously; the devices run
  /// their parts concurrently. PlatformError for an empty list, a repeated device, or a member
  /// that is itself heterogeneous.
  ///
  ///   auto cpu = Platform::cpu();
  ///   auto gpu = Platform::opencl();
  ///   auto both = Platform::heterogeneous({cpu, gpu});
  ///   matmul(x, W).on(gpu.devices()[0]);          // or let placement decide
  ///   auto cg = GraphCompiler(both).compile(g, shapes, {loss, step});
  ///   for (const auto& n : cg.placement())
  ///     std::printf("%s on %s: %s\n", n.node.c_str(), n.device.c_str(), n.reason.c_str());
  static Platform heterogeneous(std::vector<Platform> members, HeteroOptions options = {});
  /// The devices this platform runs on: one for the CPU and OpenCL platforms; the members'
  /// for a heterogeneous one.
  std::vector<Device> devices() const;
  /// "cpu", "opencl" or "heterogeneous".
  std::string name() const;
  /// What it runs on, in words, for programs to say where they ran: "cpu: Intel(R) Xeon(R)
  /// Processor, 2 cores, code path x86-64-v4 (AVX-512)", "opencl:0:0: NVIDIA H200 (NVIDIA CUDA,
  /// GPU)"; a heterogeneous platform's members joined by " + ".
  ///
  ///   std::printf("running on %s\n", platform.description().c_str());
  std::string description() const;

  /// The platform's implementation: opaque, the library's own (src/common/executable.hpp).
  class Impl;

 private:
  explicit Platform(std::shared_ptr<Impl> b) : backend_(std::move(b)) {}
  std::shared_ptr<Impl> backend_;
};

/// Variables several compiled graphs hold in common: graphs compiled with the same store
/// (CompileOptions::variables) keep one copy of each variable of the same name, shape and
/// type, so what one graph's runs (or write() and load()) change, the others read at once,
/// with nothing copied. A training graph and the inference graph of the same model, or a
/// DynamicGraph's plans, share their weights so:
///
///   hetgraph::VariableStore weights;
///   hetgraph::CompileOptions o;
///   o.variables = weights;
///   hetgraph::GraphCompiler compiler(hetgraph::Platform::cpu(), o);
///   auto train = compiler.compile(g, {{"x", {500, 784}}, {"y", {500}}}, {loss, step});
///   auto infer = compiler.compile(g, {{"x", {1, 784}}}, {probs});  // the same W and b
///   train.run(feeds);       // a step: W and b change
///   infer.run({{"x", one}});  // reads the stepped W and b
///
/// The first graph compiled with a store puts its variables there, initialised; a later one
/// finds them there and starts from their current values (a variable it names with another
/// shape or type is a ShapeError), and adds any others it has. A store lives while a graph
/// compiled with it or a copy of the handle does. It holds memory of one platform: the CPU's,
/// or one OpenCL device's (another is a PlatformError; heterogeneous platforms do not take
/// one). Graphs sharing a store must not run at the same time: one run's writes would race the
/// other's reads.
class VariableStore {
 public:
  /// A new, empty store; copies of the handle are the same store.
  VariableStore();
  /// No store: each graph holds its own variables (CompileOptions' default).
  static VariableStore none();
  explicit operator bool() const { return impl_ != nullptr; }
  /// Variables it holds, and their bytes (0 for none()).
  std::size_t size() const;
  std::size_t bytes() const;
  struct Impl;
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  explicit VariableStore(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

/// What compile() does to a graph. The fields are the choices a user makes: memory planning,
/// fusion (off: every node runs as written) and Winograd convolutions (latency before memory
/// and rounding). `experimental` holds the switches that turn one optimisation off to measure
/// it against its absence (the benchmarks' A/B runs, the tests' oracles): their defaults are
/// the measured best, and they may change or go without notice.
///
///   CompileOptions o;
///   o.plan_memory = false;                 // one buffer per node
///   o.experimental.conv_post_ops = false;  // compare with the unfused convolutions
///   auto cg = GraphCompiler(Platform::cpu(), o).compile(g, shapes, {y});
struct CompileOptions {
  /// Liveness-based buffer reuse and in-place ops. Off: one buffer per node (the test oracle
  /// for the planner: results must be bitwise identical).
  bool plan_memory = true;
  /// Rewrites such as folding an elementwise op or an accumulation into a matmul, or an
  /// embedding gradient into its table's SGD step (where the platform supports them). Off:
  /// every node runs as written.
  bool fuse = true;
  /// With `experimental.blocked_layouts`, on the CPU: where 3x3 stride-1 convolutions
  /// (16-channel multiples in and out) carry at least half of a graph's convolution work and no
  /// concat joins channels, activations stay in oneDNN's nChw16c layout and those convolutions
  /// run its Winograd kernels (F(4x4, 3x3), F(2x2, 3x3)): 1.6-2.5x faster than its direct
  /// kernels on 64 to 512 channels here, resnet18 0.80-0.86x ONNX Runtime's latency instead of
  /// 0.99-1.04x, but at 1.12-1.53x its peak memory (transformed weights are up to 4x the plain
  /// ones, and the batch-32 scratchpad is 67 MB): bench/README.md, "CNN inference". So it is off by
  /// default. Results differ from the direct kernels' by rounding (about 1e-6 of the largest
  /// output). oneDNN 2.6 has these kernels with AVX-512 only: on other CPUs the option does
  /// nothing.
  ///
  ///   CompileOptions o;
  ///   o.winograd_convs = true;  // latency before memory (hetgraph-run --winograd)
  bool winograd_convs = false;
  /// Where the variables live: in a store shared with other graphs (VariableStore), or, by
  /// default, in this graph's own memory.
  VariableStore variables = VariableStore::none();
  /// One switch per optimisation, on by default where it was measured to pay. The passes they
  /// gate are named in docs/ARCHITECTURE.md's pass table.
  struct Experimental {
    /// With `fuse`: a convolution's bias, residual add (ResNet) and relu / clip / leaky_relu /
    /// sigmoid run inside the convolution as oneDNN post-ops on the CPU (passes
    /// fuse_conv_residual, fuse_conv_epilogue). Off: those run as nodes of their own.
    ///
    ///   CompileOptions o;
    ///   o.experimental.conv_post_ops = false;  // e.g. to compare with the fused plan
    ///   auto cg = GraphCompiler(Platform::cpu(), o).compile(g, shapes, {y});
    bool conv_post_ops = true;
    /// With `fuse`: x * sigmoid(x) (two nodes, as ONNX exports SiLU / Swish: EfficientNet)
    /// becomes one silu node (pass fuse_silu), which a convolution before it then takes as a
    /// post-op too. Off: the sigmoid and the product run as nodes of their own.
    bool silu_nodes = true;
    /// With `fuse`: LayerNorm over the last axis as ONNX exports before opset 17 write it (two
    /// means, sub, pow, add eps, sqrt, div, mul gamma, add beta: BERT, ViT, GPT-2, ConvNeXt)
    /// becomes one layer_norm node, one kernel on each platform (pass fuse_layer_norm). Its
    /// results equal the nine nodes' within float rounding. Off: the nine nodes.
    bool layer_norm_nodes = true;
    /// With `fuse`: GELU as exports before opset 20 write it (x * 0.5 * (1 + erf(x / sqrt 2)),
    /// five nodes: BERT, ViT, ConvNeXt) becomes one gelu node, and its tanh form (0.5 x (1 +
    /// tanh(sqrt(2 / pi) (x + 0.044715 x^3))), eight nodes: GPT-2) one gelu_tanh node (pass
    /// fuse_gelu). Results equal the nodes' within float rounding. Off: the nodes.
    bool gelu_nodes = true;
    /// With `fuse`: the attention block, matmul(softmax(q kt / c + mask), v) over the last
    /// axis with the scale and mask optional (BERT, ViT, GPT-2 exports), becomes one attention
    /// node, one kernel on each platform (pass fuse_attention) that keeps each block of scores
    /// in cache. Results equal the nodes' within float rounding. Off: the nodes.
    bool attention_nodes = true;
    /// With `attention_nodes`: the transposes that move the heads axis before the sequence
    /// axis and back around the block (q, k and v in, the result out) fold into the attention
    /// node, which then reads and writes the projections' [.., T, H, d] values with strides
    /// instead of four copies running. Off: the transposes run as nodes.
    bool attention_transposes = true;
    /// With `fuse`: an inference BatchNormalization the importer could not fold into a
    /// convolution (a product with a per-channel scale, a sum with a per-channel shift) and a
    /// relu after it become one channel_affine node (pass fuse_channel_affine): DenseNet's
    /// normalisation before each layer. Its results equal the nodes' bitwise. Off: the nodes.
    bool channel_affine = true;
    /// With `fuse`: an LSTM step's elementwise tail (the gates' sigmoids and tanhs, the new
    /// cell and hidden states: fourteen nodes as ONNX's LSTM unrolls) becomes two nodes,
    /// lstm_cell and lstm_hidden, one kernel each on each platform (pass fuse_lstm_cells).
    /// Results equal the decomposed nodes' within float rounding (bitwise where those run the
    /// same sigmoid and tanh: on OpenCL, and on the CPU below 4096 elements a gate, where
    /// larger ones go to oneDNN's). Off: the fourteen nodes.
    bool lstm_cells = true;
    /// With `fuse`: a GRU step with linear_before_reset (PyTorch's export) after its two
    /// products (two sigmoids, a tanh, the gates' sums and the blend with the previous state:
    /// seventeen nodes as ONNX's GRU unrolls) becomes one gru_hidden node (pass
    /// fuse_gru_cells). Results equal the decomposed nodes' within float rounding (bitwise
    /// where those run the same sigmoid and tanh). Off: the seventeen nodes.
    bool gru_cells = true;
    /// With `fuse`: a chain of the steps above (lstm_cells, gru_cells), each reading its rows
    /// of one input projection and h_prev R^T as ONNX's LSTM and GRU unroll a direction (the
    /// products and sums read by nothing else), becomes one lstm_sequence or gru_sequence node
    /// (pass fuse_recurrent_sequences), where the platform has a kernel for it (the CPU, for hidden
    /// sizes of whole 16s): its threads stay in one parallel region for every step, each
    /// computing the gates of its own hidden units from its own rows of R (which stay in its
    /// core's cache) and meeting the others once a step. The product sums in another order
    /// than oneDNN's, so results differ from the chain's within float rounding; they are the
    /// same bits for any thread count. Off: the chain's nodes.
    bool recurrent_sequences = true;
    /// With `fuse`, on the CPU: a product's bias add (one value per column: a Linear layer's,
    /// Gemm's, an imported 3-d MatMul's through the reshape back from its 2-d product) runs in
    /// the product's epilogue pass instead of as a node of its own (pass
    /// fuse_matmul_accumulate). Off: the add is a node.
    bool matmul_bias = true;
    /// On the CPU, a value passed from one convolution to others stays in the layout oneDNN's
    /// convolutions compute in (channels-last or blocked) instead of being reordered to NCHW
    /// and back (pass assign_layouts). Off: every value between nodes is plain NCHW.
    bool blocked_layouts = true;
    /// With `blocked_layouts`, where that layout is channels-last: max pooling, channel concat
    /// and reductions over a spatial axis (keeping dims) take and give it too, so inception
    /// blocks (googlenet) keep it from convolution to convolution and a global average pool
    /// reads the last convolution's value as it is; so do average pooling (where oneDNN has a
    /// jit kernel for the layer in the layout) and a batch norm that could not fold into a
    /// convolution (channel_affine), so DenseNet's blocks run without reorders. Off: only
    /// values passed from convolutions to convolutions keep it.
    bool layouts_through_pool_concat = true;
    /// With `blocked_layouts`: grouped and depthwise convolutions (MobileNets, MnasNet,
    /// EfficientNet, ResNeXt, RegNet) take and give that layout too, where oneDNN has a fast
    /// kernel for the layer in it (asked at compile time, layer by layer), so an inverted
    /// residual block runs without reorders around its depthwise convolution. Off: only
    /// convolutions of one group keep it.
    bool grouped_conv_layouts = true;
    /// With `blocked_layouts`, on the CPU's automatic engine, for a graph that does not write
    /// its variables and has at least 5e7 multiply-adds of convolutions: the layout search.
    /// Which layout is fastest depends on the model, not only on the CPU (here channels-last
    /// for ShuffleNet and ConvNeXt, nChw16c for DenseNet and ResNet-50 at batch 8, nChw8c for
    /// the MobileNets, RegNet and EfficientNet, whose channel counts are multiples of 8 but not
    /// of 16: 5-14% apart; bench/README.md, "The layout search"). compile() plans the graph once
    /// per layout oneDNN has fast kernels for, and where the plans differ, times each on zero
    /// inputs (a few interleaved runs on the sequential engine) and keeps the fastest; the
    /// choice goes to the tuning cache, so a later process compiles the graph once. Results
    /// differ between layouts by rounding only. CompileReport::conv_layout says what was
    /// chosen. Off: the platform's layout (conv_layout), as before.
    bool layout_search = true;
    /// With `blocked_layouts`, on CPUs with AVX2 and FMA: 3x3 stride-1 convolutions (one group,
    /// channels in 8s) between blocked or channels-last values run hetgraph's own Winograd
    /// kernels, with the bias, residual and relu / leaky_relu / clip epilogue: F(4x4, 3x3) where
    /// the result is at least 28x28 and its transformed weights (4x the plain ones) are no larger
    /// than the layer's image and result, else F(2x2, 3x3) (16/9 of the weights) where the batch
    /// has at least 16 output tiles of 2x2 (AVX2) or 192 tiles of the kernel's size (AVX-512,
    /// where oneDNN's direct kernels are stronger; docs/engines.md). They take 0.4-0.75x the
    /// time of oneDNN's direct kernels on resnet18's and googlenet's layers on AVX2
    /// (bench/history.md, issue 18), 0.40-1.09x on a Zen 4 with AVX-512; the transformed weights
    /// replace the direct kernel's reordered copy. Results differ from the direct kernels' by
    /// rounding (up to a few 1e-5 of the largest output with F(4x4)). Off: oneDNN's direct
    /// kernels.
    ///
    ///   CompileOptions o;
    ///   o.experimental.own_winograd = false;  // e.g. to compare with the direct kernels
    bool own_winograd = true;
    /// Parallel-op fusion: independent small nodes of one kind (26 embedding lookups, many
    /// small products) run as one node whose kernel runs them side by side on the team's
    /// threads. Only where kernels get several threads (CPU engines with teams of 2+).
    bool parallel_ops = true;
    /// With `fuse`: embedding lookups read only by a concat along the last axis (wide & deep's
    /// 26 tables) run as one node that gathers every table's rows straight into the concat's
    /// buffer (pass fuse_embedding_concat), on every platform. Off: one node per lookup and
    /// the concat.
    ///
    ///   CompileOptions o;
    ///   o.experimental.grouped_embeddings = false;  // e.g. to compare with the fused plan
    bool grouped_embeddings = true;
    /// With `fuse`: independent products of few rows that share their right operand (x_t @ W
    /// for every step of a sequence at batch 1) run as one product of the stacked left operands,
    /// sliced back out (pass stack_shared_products), on every platform, where W is at least 64
    /// times one product's own data (there one GEMM measured 1.06-1.7x faster than the products
    /// one by one; below, slower). Off: one node per product.
    ///
    ///   CompileOptions o;
    ///   o.experimental.stacked_products = false;  // e.g. to compare with the stacked plan
    bool stacked_products = true;
    /// With `plan_memory`, on platforms that lay values out in one arena (the CPU): a concat
    /// whose inputs lie one after another in its output (batch 1 along channels, plain or
    /// blocked: googlenet's inception blocks) has them computed straight into it and copies
    /// nothing (pass concat_in_place). A concat whose inputs begin a later one's (DenseNet: each
    /// layer concatenates every feature so far) is then a view of the start of that one's
    /// memory. Off: every concat copies its inputs.
    ///
    ///   CompileOptions o;
    ///   o.experimental.concat_in_place = false;  // e.g. to compare with the copying plan
    bool concat_in_place = true;
    /// With `plan_memory`, into one arena (the CPU): a slice whose range is one run of its
    /// input's memory (an LSTM's or GRU's rows of one step in the input projection of all
    /// steps) reads that memory where it lies instead of copying it (pass slice_views). Off:
    /// every slice copies.
    bool slice_views = true;
    /// On the CPU, a product whose right operand does not change within a run (an imported
    /// model's weights, a variable) keeps it packed in oneDNN's blocked layout, repacked only
    /// after the host writes it, and runs oneDNN's brgemm matmul on it: unpacked, oneDNN packs
    /// it at every call (an LSTM step's [1, 256] x [256, 1024] product: 22 us, 5 us packed),
    /// and its GEMM driver does likewise. A Linear layer's product and bias add (matmul_bias)
    /// run as one such primitive, which adds the bias as it writes, where oneDNN has its
    /// brgemm matmul on this CPU (AVX-512). Off: the plain operand at every call.
    bool packed_weights = true;
  };
  Experimental experimental = {};
};

/// Data for one input at run(): a view of the caller's memory, copied into the graph unless
/// it is the graph's own mapped buffer. Floats and int32 are viewed; a braced list is viewed
/// for the call it is written in; doubles are converted to float (held by the Feed).
///   cg.run({{"x", {0.5f, 1.5f}}, {"ids", {3, 1}}});   // f32 and int32 inputs
///   std::vector<double> xs = ...;  cg.run({{"x", xs}});
class Feed {
 public:
  Feed(std::span<const float> v) : data_(v.data()), count_(v.size()), dtype_(DType::f32) {}
  Feed(std::span<float> v) : Feed(std::span<const float>(v)) {}
  Feed(const std::vector<float>& v) : Feed(std::span<const float>(v)) {}
  Feed(std::initializer_list<float> v) : Feed(std::span<const float>(v.begin(), v.size())) {}
  Feed(std::span<const std::int32_t> v) : data_(v.data()), count_(v.size()), dtype_(DType::i32) {}
  Feed(std::span<std::int32_t> v) : Feed(std::span<const std::int32_t>(v)) {}
  Feed(const std::vector<std::int32_t>& v) : Feed(std::span<const std::int32_t>(v)) {}
  Feed(std::initializer_list<std::int32_t> v)
      : Feed(std::span<const std::int32_t>(v.begin(), v.size())) {}
  Feed(std::span<const double> v) : Feed(converted(v)) {}
  Feed(const std::vector<double>& v) : Feed(std::span<const double>(v)) {}
  Feed(std::initializer_list<double> v) : Feed(std::span<const double>(v.begin(), v.size())) {}
  /// Any other contiguous range (std::array, a C array, ...) of those element types; another
  /// element type is a compile-time error saying which ones a feed takes.
  template <class R>
  requires requires(const R& r) {
    std::data(r);
    std::size(r);
  }
  Feed(const R& r) : Feed(of(std::data(r), std::size(r))) {}  // NOLINT: implicit, as above

  const void* data() const { return data_; }
  std::size_t count() const { return count_; }
  DType dtype() const { return dtype_; }

 private:
  static std::span<const float> of(const float* p, std::size_t n) { return {p, n}; }
  static std::span<const std::int32_t> of(const std::int32_t* p, std::size_t n) { return {p, n}; }
  static std::span<const double> of(const double* p, std::size_t n) { return {p, n}; }
  template <class T>
  static std::span<const float> of(const T*, std::size_t) {
    static_assert(sizeof(T) == 0,
                  "hetgraph::Feed takes float, std::int32_t or double values: convert the data "
                  "(an int64 index vector to int32, ...) before feeding it");
    return {};
  }
  explicit Feed(std::shared_ptr<const std::vector<float>> owned)
      : data_(owned->data()), count_(owned->size()), dtype_(DType::f32), owned_(std::move(owned)) {}
  static std::shared_ptr<const std::vector<float>> converted(std::span<const double> v) {
    return std::make_shared<const std::vector<float>>(v.begin(), v.end());
  }

  const void* data_;
  std::size_t count_;
  DType dtype_;
  std::shared_ptr<const std::vector<float>> owned_;  // doubles converted to float
};

struct FeedItem {
  std::string_view name;
  Feed value;
};

using InputShapes = std::vector<std::pair<std::string, Shape>>;

/// What compile() did: sizes, memory plan and which kernel each node got.
struct CompileReport {
  std::size_t nodes = 0;          // after pruning
  std::size_t planned_bytes = 0;  // arena size with the memory plan
  std::size_t live_bytes = 0;     // peak of bytes live at once in plan order: the least arena
  std::size_t naive_bytes = 0;    // one buffer per node
  std::size_t buffers = 0;        // distinct buffers in the plan
  std::size_t in_place = 0;       // nodes written over one of their inputs
  double setup_s = 0.0;           // wall time of compile()
  /// Wall time of each compiler pass, in order ("build" first), then of the platform's
  /// instantiation ("instantiate": memory and kernels).
  std::vector<std::pair<std::string, double>> pass_seconds;
  /// The layout convolutions pass their values in ("nchw", "nhwc", "nChw8c", "nChw16c"), and
  /// what the layout search timed (CompileOptions::experimental.layout_search): each layout's
  /// median seconds per run; empty where nothing was timed (no search, or the tuning cache's
  /// choice).
  std::string conv_layout = "nchw";
  std::vector<std::pair<std::string, double>> layout_seconds;
};

/// A run started by CompiledGraph::run_async. wait() finishes it (in the thread that started
/// it) and rethrows its error; done() polls it from that thread and finishes it once it has
/// ended, so a polling loop ends without a wait(). A default-constructed or moved-from handle
/// has no run.
///
///   RunHandle h = cg.run_async({{"x", batch}});
///   while (!h.done()) prepare_next_batch();   // overlaps the run
///   h.wait();                                 // this run's error, if it failed
/// How CompiledGraph::load matches a checkpoint to the graph.
struct LoadOptions {
  /// true: the file must hold exactly the graph's variables. false: variables only the file
  /// holds are skipped and variables only the graph holds keep their values (fine-tuning with
  /// another optimizer: an SGD checkpoint into a graph trained with Adam); LoadReport says
  /// which. A variable both hold must match in type and shape either way.
  bool strict = true;
};

/// What a load did, by variable name (sorted).
struct LoadReport {
  std::vector<std::string> loaded;        // the graph's variables set from the file
  std::vector<std::string> not_in_graph;  // the file's variables the graph lacks: skipped
  std::vector<std::string> not_in_file;   // the graph's variables the file lacks: unchanged
};

class RunHandle {
 public:
  RunHandle() = default;
  RunHandle(RunHandle&&) noexcept;
  RunHandle& operator=(RunHandle&&) noexcept;
  ~RunHandle();
  /// Finishes the run if it is still in flight; rethrows its error (each time it is called).
  void wait();
  /// Whether the run has finished (without waiting); a run that has ended is finished here
  /// (its error, if any, stays for wait()). From the thread that started it (UsageError
  /// otherwise).
  bool done() const;

  /// The run's state: opaque, the library's own (src/common/executable.hpp).
  struct Impl;

 private:
  friend class CompiledGraph;
  explicit RunHandle(std::shared_ptr<Impl> s);
  std::shared_ptr<Impl> state_;
};

/// A graph compiled for a platform, run many times.
///
/// Contract:
/// - One thread at a time. A call on a compiled graph while another thread uses it (a run in
///   flight, or any other call) throws UsageError; it never races. A thread that started a
///   run with run_async keeps the graph until the run is waited for (a later run, a read or a
///   write of a value the run computes finish it first).
/// - A run that throws (or an asynchronous run that fails) leaves every variable and input
///   exactly as it was before the run, on every engine and platform: fed data is validated
///   before any kernel runs, and variables are only written once every other node of the run
///   has succeeded. Values the failed run would have computed are not readable (UsageError)
///   until a run succeeds or they are written.
/// - The error of an asynchronous run reaches its handle's wait(), and CompiledGraph::wait()
///   while it is the latest run; starting another run does not report it.
/// - Every call on a moved-from compiled graph throws UsageError.
/// - Destroying (or assigning over) a compiled graph while another thread is in a call on it
///   waits for that call to end; calls that start meanwhile throw UsageError.
class CompiledGraph {
 public:
  CompiledGraph(CompiledGraph&&) noexcept;
  CompiledGraph& operator=(CompiledGraph&&) noexcept;
  ~CompiledGraph();

  /// Runs once. Every input must be fed; a feed that is the input's mapped buffer is not
  /// copied. Errors raised by kernels are rethrown here.
  void run(std::initializer_list<FeedItem> feeds = {});
  void run(std::span<const FeedItem> feeds);
  /// Starts a run and returns; feeds are consumed before it returns. A run_async while this
  /// thread's previous one is in flight first finishes that one (its error stays with its
  /// handle).
  RunHandle run_async(std::initializer_list<FeedItem> feeds = {});
  RunHandle run_async(std::span<const FeedItem> feeds);
  /// Finishes the latest run if it is in flight and rethrows its error if it failed (once).
  void wait();

  /// Values after the last run (variables: their current values). A node whose buffer the
  /// memory planner reused is not readable: fetch it at compile time to keep it.
  std::vector<float> read(Node n) const;
  std::vector<float> read(std::string_view name) const;
  void read(Node n, std::span<float> out) const;
  std::vector<std::int32_t> read_i32(Node n) const;
  std::vector<std::int32_t> read_i32(std::string_view name) const;
  /// Overwrites a node's value: inputs and variables persist, computed nodes until the next
  /// run recomputes them. Constants cannot be written.
  void write(Node n, std::span<const float> data);
  void write(std::string_view name, std::span<const float> data);
  void write_i32(Node n, std::span<const std::int32_t> data);

  /// The input's own buffer, for writing inputs in place (no copy at run()).
  std::span<float> mapped_input(std::string_view name);
  std::span<std::int32_t> mapped_input_i32(std::string_view name);

  /// Engine, executor configuration, graph-width statistics and (auto) the search table.
  /// Returned by value: keep it in a variable before iterating one of its members
  /// (`for (auto& n : cg.engine_report().hetero->nodes)` would iterate a destroyed temporary).
  EngineReport engine_report() const;
  /// Where each node with a value or work runs and why, in plan order (a heterogeneous
  /// platform's EngineReport::Hetero::nodes; empty on a single-device platform). A value that a
  /// range-for owns:
  ///   for (const auto& n : cg.placement()) std::printf("%s on %s\n", n.node.c_str(), n.device.c_str());
  std::vector<EngineReport::Hetero::Placed> placement() const;
  /// Records every following run as Chrome trace-event JSON (one track per executor), written
  /// to `path` by stop_trace() or when the graph is destroyed. Opens in Perfetto.
  void start_trace(const std::string& path);
  void stop_trace();
  /// While a trace is recorded: an event that happened outside the graph (an input pipeline
  /// filling the next batch) on a lane of its own named `lane`, below the executors' lanes.
  /// Times in nanoseconds of std::chrono::steady_clock. Without a trace, nothing happens.
  ///   cg.trace_event("input pipeline", "fill batch 3", t0_ns, t1_ns);
  void trace_event(const std::string& lane, const std::string& name, std::int64_t start_ns,
                   std::int64_t end_ns);
  /// Profiles every following successful run (Profile): start_profile() begins afresh,
  /// profile() is the profile so far (profiling goes on), stop_profile() ends it and returns
  /// it. profile() or stop_profile() without a profile being recorded is a UsageError. Works
  /// beside a trace, from the same per-node events, on every platform.
  ///   cg.start_profile(); cg.run(feeds); std::puts(cg.stop_profile().table().c_str());
  void start_profile();
  Profile profile() const;
  Profile stop_profile();

  Shape shape(Node n) const;
  Shape shape(std::string_view name) const;
  /// Name of the kernel implementation chosen for a node (e.g. "dnnl_matmul").
  std::string kernel_name(Node n) const;
  /// The compiled plan in Graphviz's DOT language: a node per node that runs or holds memory
  /// after the passes (its name or #index, op, shape and kernel; nodes fused into another
  /// are left out), an edge per input. Beside Graph::to_dot, it shows what the rewrites made.
  ///   std::ofstream("plan.dot") << cg.to_dot();
  std::string to_dot() const;
  const CompileReport& report() const;
  std::size_t planned_bytes() const { return report().planned_bytes; }
  std::size_t naive_bytes() const { return report().naive_bytes; }

  /// Checkpoints: every variable of the compiled graph (names, shapes, types, values) in one
  /// file, format version 1 (described in src/onnx/checkpoint.cpp and docs/training.md), with a
  /// CRC-32 per variable and one over the file. save() writes a temporary file, fsyncs it and
  /// renames it over `path`: a process killed while saving leaves the previous checkpoint intact.
  /// load() checks everything first (format, version, checksums, and that the file holds
  /// exactly this graph's variables with the same shapes and types, or with {.strict = false}
  /// those both hold): a truncated, corrupt or mismatching file is a DataError naming the file
  /// and the variable, and changes nothing.
  ///   cg.save("model.ckpt");   ...   resumed.load("model.ckpt");
  ///   LoadReport r = adam_graph.load("sgd.ckpt", {.strict = false});  // r.not_in_file: "W/m"..
  void save(const std::string& path) const;
  LoadReport load(const std::string& path, const LoadOptions& options = {});

  /// The platform's executable: opaque, the library's own (src/common/executable.hpp).
  class Impl;

 private:
  friend class GraphCompiler;
  friend class DynamicGraph;  // carries variables between its plans
  explicit CompiledGraph(std::unique_ptr<Impl> exe);
  /// The executable; UsageError naming `what` on a moved-from compiled graph.
  Impl& live(std::string_view what) const;
  std::unique_ptr<Impl> exe_;
};

class GraphCompiler {
 public:
  explicit GraphCompiler(Platform platform = Platform::cpu(), CompileOptions options = {});

  /// Compiles the part of `graph` that `fetches` need, for the given input shapes.
  /// `fetches` are the nodes to read after a run plus the assigns/groups to execute; when
  /// empty, every node without consumers is fetched.
  CompiledGraph compile(const Graph& graph, const InputShapes& input_shapes,
                        std::span<const Node> fetches) const;
  CompiledGraph compile(const Graph& graph, const InputShapes& input_shapes,
                        std::initializer_list<Node> fetches = {}) const;
  /// The same, and the compiled variables' values move out of `graph` into the compiled
  /// graph's memory instead of being copied: a large model's weights are not held twice while
  /// it compiles (and glibc gets the pages back as each variable is copied in). `graph` keeps
  /// its nodes (Node handles still name what to read) but those variables no longer have
  /// values: compiling or exporting it again is a GraphError naming them. A compile that
  /// throws leaves the graph its values.
  ///   auto cg = GraphCompiler(Platform::cpu()).compile(std::move(g), shapes, {y});
  CompiledGraph compile(Graph&& graph, const InputShapes& input_shapes,
                        std::span<const Node> fetches) const;
  CompiledGraph compile(Graph&& graph, const InputShapes& input_shapes,
                        std::initializer_list<Node> fetches = {}) const;

  const Platform& platform() const { return platform_; }
  const CompileOptions& options() const { return options_; }

 private:
  CompiledGraph compile(const Graph& graph, const InputShapes& input_shapes,
                        std::span<const Node> fetches, bool take_values) const;
  Platform platform_;
  CompileOptions options_;
};

}  // namespace hetgraph
