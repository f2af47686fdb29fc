// SPDX-License-Identifier: Apache-2.0
// One registry shape for every platform (after oneDNN's implementation lists): per op, an
// ordered list of candidate kernels, each with a reject function that says why it does not
// take a node (or null) and a maker. The first candidate that accepts a node and makes a
// kernel wins. HETGRAPH_LOG_KERNELS=1 prints every rejection with its reason.
//
//   KernelRegistry<KernelArgs, CpuKernel> r("CPU");
//   r.add(OpKind::MatMul, {"dnnl_sgemm", reject_sgemm, make_sgemm});
//   r.add(OpKind::MatMul, {"reference", nullptr, make_reference, .reference = true});
//   r.unsupported(args, label);               // "" or why no candidate takes the node
//   auto k = r.create(args, label, false, chosen);  // or PlatformError with every reason
//
// Reject functions see the node's types and attributes only: unsupported() runs them at
// compile time, before any memory exists (Args' pointers are null then).
#pragma once

#include <array>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ops.hpp"
#include "hetgraph/error.hpp"
#include "util/env.hpp"

namespace hetgraph::detail {

template <class Args, class Kernel>
class KernelRegistry {
 public:
  struct Candidate {
    std::string_view name;
    const char* (*reject)(const Args&) = nullptr;  // null: takes every node
    /// May return null: the library could not create it for these shapes (the next one tries).
    std::unique_ptr<Kernel> (*make)(const Args&) = nullptr;
    /// Written plainly and independently of the fast candidates: their test oracle.
    bool reference = false;
  };

  explicit KernelRegistry(std::string_view platform) : platform_(platform) {}

  void add(OpKind op, Candidate c) { list(op).push_back(c); }
  /// Ahead of the candidates already registered (a faster path for some shapes).
  void add_first(OpKind op, Candidate c) {
    auto& l = list(op);
    l.insert(l.begin(), c);
  }
  const std::vector<Candidate>& candidates(OpKind op) const {
    return lists_[static_cast<std::size_t>(op)];
  }
  std::string_view platform() const { return platform_; }

  /// Why no candidate takes the node: empty when one does.
  std::string unsupported(const Args& a, OpKind op) const {
    const auto& l = candidates(op);
    if (l.empty())
      return "no " + std::string(platform_) + " kernel for op '" + std::string(op_name(op)) + "'";
    std::string reasons;
    for (const Candidate& c : l) {
      const char* why = c.reject ? c.reject(a) : nullptr;
      if (why == nullptr) return {};
      reasons += (reasons.empty() ? "" : "; ") + std::string(c.name) + ": " + why;
    }
    return "no " + std::string(platform_) + " kernel for op '" + std::string(op_name(op)) +
           "' takes it (" + reasons + ")";
  }

  /// Makes the kernel of the first candidate that takes the node (only the reference
  /// candidates when `reference_only`); throws PlatformError naming the node and every reason.
  std::unique_ptr<Kernel> create(const Args& a, OpKind op, std::string_view label,
                                 bool reference_only, std::string_view& chosen) const {
    static const bool log = env_flag("HETGRAPH_LOG_KERNELS");
    std::string reasons;
    for (const Candidate& c : candidates(op)) {
      if (reference_only && !c.reference) continue;
      const char* why = c.reject ? c.reject(a) : nullptr;
      std::unique_ptr<Kernel> k;
      if (why == nullptr) {
        k = c.make(a);
        if (!k) why = "the library could not create it for these shapes";
      }
      if (k) {
        chosen = c.name;
        return k;
      }
      reasons += (reasons.empty() ? "" : "; ") + std::string(c.name) + ": " + why;
      if (log) std::cerr << "hetgraph: " << label << ": " << c.name << " rejected: " << why << '\n';
    }
    throw PlatformError(
        "no " + std::string(platform_) + " kernel for node " + std::string(label) +
        (reasons.empty() ? std::string(" (none registered)") : " (" + reasons + ")"));
  }

  /// The op kinds that have candidates but whose last one is not a reference.
  std::vector<OpKind> lists_without_reference() const {
    std::vector<OpKind> out;
    for (int i = 0; i < kNumOps; ++i) {
      const auto& l = lists_[static_cast<std::size_t>(i)];
      if (!l.empty() && !l.back().reference) out.push_back(static_cast<OpKind>(i));
    }
    return out;
  }

 private:
  std::vector<Candidate>& list(OpKind op) { return lists_[static_cast<std::size_t>(op)]; }

  std::string_view platform_;
  std::array<std::vector<Candidate>, kNumOps> lists_;
};

}  // namespace hetgraph::detail
