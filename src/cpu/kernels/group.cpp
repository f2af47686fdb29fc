// SPDX-License-Identifier: Apache-2.0
// parallel_group (fuse_parallel_ops): the member nodes' kernels side by side, one thread each,
// taken in turns by the team's threads. A member's result does not depend on which thread runs
// it or on the team's size (each runs alone at one thread). Errors are caught per member (none
// may leave an OpenMP region) and the first member's, in plan order, is rethrown.
#include <omp.h>

#include <exception>

#include "cpu/engine.hpp"
#include "cpu/kernel.hpp"

namespace hetgraph::detail::cpu {

namespace {

class GroupKernel final : public CpuKernel {
 public:
  GroupKernel(std::vector<CpuKernel*> members, std::vector<const PlanNode*> nodes, int max_threads)
      : members_(std::move(members)), nodes_(std::move(nodes)), max_threads_(max_threads) {
    for (const CpuKernel* k : members_)
      member_scratch_ = std::max(member_scratch_, k->scratch_bytes());
    member_scratch_ = (member_scratch_ + 63) / 64 * 64;
  }

  void run(const ExecCtx& ctx) override {
    const auto count = static_cast<std::int64_t>(members_.size());
    const int nt =
        static_cast<int>(std::min<std::int64_t>(std::min(ctx.nthreads, max_threads_), count));
    std::vector<std::exception_ptr> errors(members_.size());
    auto one = [&](std::int64_t k, int t) {
      ExecCtx c;
      c.nthreads = 1;
      c.executor = ctx.executor;
      c.scratch =
          member_scratch_ ? static_cast<std::byte*>(ctx.scratch) + t * member_scratch_ : nullptr;
      c.scratch_bytes = member_scratch_;
      try {
        run_kernel(*members_[static_cast<std::size_t>(k)], c, *nodes_[static_cast<std::size_t>(k)]);
      } catch (...) {
        errors[static_cast<std::size_t>(k)] = std::current_exception();
      }
    };
    if (nt <= 1) {
      for (std::int64_t k = 0; k < count; ++k) one(k, 0);
    } else {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
      for (std::int64_t k = 0; k < count; ++k) one(k, omp_get_thread_num());
    }
    for (const std::exception_ptr& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

  std::size_t scratch_bytes() const override {
    return member_scratch_ * static_cast<std::size_t>(max_threads_);
  }

 private:
  std::vector<CpuKernel*> members_;
  std::vector<const PlanNode*> nodes_;
  int max_threads_;
  std::size_t member_scratch_ = 0;
};

// The members' kernels exist already: the platform makes groups last.
std::unique_ptr<CpuKernel> make_group(const KernelArgs& a) {
  if (a.kernels == nullptr) return nullptr;
  std::vector<CpuKernel*> members;
  std::vector<const PlanNode*> nodes;
  for (std::uint32_t m : a.node.members) {
    if (m >= a.kernels->size() || !(*a.kernels)[m]) return nullptr;
    members.push_back((*a.kernels)[m].get());
    nodes.push_back(&a.plan.nodes[m]);
  }
  int threads = a.max_threads;
  for (int t : a.team_sizes) threads = std::max(threads, t);
  return std::make_unique<GroupKernel>(std::move(members), std::move(nodes), threads);
}

}  // namespace

void register_group_kernels(KernelRegistry& r) {
  // Its own reference: it only calls the members' kernels (each the one the registry chose).
  r.add(OpKind::ParallelGroup, {"members_side_by_side", nullptr, make_group, true});
}

}  // namespace hetgraph::detail::cpu
