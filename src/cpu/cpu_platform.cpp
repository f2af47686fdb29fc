// The CPU platform: one arena laid out by the memory plan, a kernel per node created at
// compile time, and an engine that runs them.
#include <sched.h>

#include <cstdlib>
#include <cstring>

#include "common/executable.hpp"
#include "cpu/engine.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {

std::string_view engine_name(CpuEngine e) {
  switch (e) {
    case CpuEngine::sequential:
      return "sequential";
  }
  return "?";
}

namespace detail::cpu {

int allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

namespace {

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::shared_ptr<const Plan> plan, const CpuOptions& opts)
      : Executable(plan), threads_(opts.threads > 0 ? opts.threads : allowed_cores()) {
    const Plan& p = *plan;
    const std::size_t bytes = std::max<std::size_t>(p.arena_bytes, 64);
    void* mem = nullptr;
    if (posix_memalign(&mem, 64, bytes) != 0) {
      throw PlatformError("cannot allocate the " + std::to_string(bytes) + "-byte arena");
    }
    arena_.reset(static_cast<std::byte*>(mem));
    std::memset(mem, 0, bytes);

    Program prog;
    prog.plan = plan;
    prog.kernels.assign(p.nodes.size(), nullptr);
    kernels_.resize(p.nodes.size());
    names_.assign(p.nodes.size(), "none");
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      const PlanNode& n = p.nodes[i];
      const bool work = n.storage == Storage::Computed || (n.op == OpKind::Assign && !n.elided);
      if (!work) continue;
      KernelArgs args{p, i, n, {}, {}, nullptr, n.type, threads_};
      for (std::size_t k = 0; k < n.inputs.size(); ++k) {
        const PlanNode& u = p.nodes[n.inputs[k]];
        args.in.push_back(n.reads_input(k) && u.buffer >= 0 ? arena_.get() + u.offset : nullptr);
        args.in_types.push_back(u.type);
      }
      // A copying assign writes into its variable.
      args.out = arena_.get() + (n.op == OpKind::Assign ? p.nodes[n.inputs[0]].offset : n.offset);
      kernels_[i] = create_kernel(args, names_[i]);
      prog.kernels[i] = kernels_[i].get();
      prog.scratch_bytes = std::max(prog.scratch_bytes, kernels_[i]->scratch_bytes());
    }
    engine_ = make_sequential_engine(prog, threads_);
    initialize_state();
  }

  ~CpuExecutable() override {
    try {
      wait();
    } catch (...) {
    }
  }

  std::string kernel_name(std::uint32_t node) const override { return std::string(names_[node]); }

 protected:
  void* host_pointer(std::uint32_t node) override {
    return arena_.get() + plan().nodes[node].offset;
  }
  void copy_in(std::uint32_t node, const void* src, std::size_t bytes) override {
    std::memcpy(host_pointer(node), src, bytes);
  }
  void copy_out(std::uint32_t node, void* dst, std::size_t bytes) override {
    std::memcpy(dst, host_pointer(node), bytes);
  }
  void execute() override { engine_->run(); }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  int threads_;
  std::unique_ptr<std::byte, Free> arena_;
  std::vector<std::unique_ptr<CpuKernel>> kernels_;
  std::vector<std::string_view> names_;
  std::unique_ptr<Engine> engine_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuOptions o) : opts_(o) {}
  std::string name() const override { return "cpu"; }
  ReuseMode reuse_mode() const override { return ReuseMode::sequential; }
  std::unique_ptr<Executable> instantiate(std::shared_ptr<const Plan> plan) override {
    return std::make_unique<CpuExecutable>(std::move(plan), opts_);
  }

 private:
  CpuOptions opts_;
};

}  // namespace
}  // namespace detail::cpu

Platform Platform::cpu(CpuOptions options) {
  if (options.threads < 0) throw PlatformError("CpuOptions.threads must be >= 0");
  return Platform(std::make_shared<detail::cpu::CpuBackend>(options));
}

}  // namespace hetgraph
