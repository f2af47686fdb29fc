// SPDX-License-Identifier: Apache-2.0
// A oneDNN primitive bound to the plain tensors of the arena, with the operands it wants in
// other layouts staged through the executor's scratch, and a kernel that runs the variant
// made for its team size. Only kernel files that use oneDNN include this.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "compiler/geometry.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/kernel.hpp"

namespace hetgraph::detail::cpu {

inline dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

inline dnnl::memory::desc plain_md(const dnnl::memory::dims& d, dnnl::memory::format_tag t) {
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, t);
}
/// A pooling's geometry as oneDNN takes it: ceil_mode's last window reaches past the end
/// padding, which oneDNN sees as more padding.
struct PoolDims {
  dnnl::memory::dims src, dst, strides, kernel, pad_l, pad_r;
};
inline PoolDims pool_dims(const ImageGeom& g) {
  const Window2d& w = g.win;
  return {{g.n, g.c, g.h, g.w},
          {g.n, g.c, g.oh, g.ow},
          {w.stride[0], w.stride[1]},
          {w.kernel[0], w.kernel[1]},
          {w.pad_begin[0], w.pad_begin[1]},
          {w.pad_end[0] + w.ceil_extra(0, g.h), w.pad_end[1] + w.ceil_extra(1, g.w)}};
}
/// A 4-d activation's memory in `l` (assign_layouts' layouts).
inline dnnl::memory::desc activation_md(const dnnl::memory::dims& d, ActivationLayout l) {
  using tag = dnnl::memory::format_tag;
  switch (l) {
    case ActivationLayout::nhwc:
      return plain_md(d, tag::nhwc);
    case ActivationLayout::nChw8c:
      return plain_md(d, tag::nChw8c);
    case ActivationLayout::nChw16c:
      return plain_md(d, tag::nChw16c);
    default:
      return plain_md(d, tag::nchw);
  }
}
/// The layout left to the primitive (it picks the fastest, often blocked).
inline dnnl::memory::desc any_md(const dnnl::memory::dims& d) {
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

/// One oneDNN primitive whose arguments live in the arena in plain layouts. An argument the
/// primitive wants in another layout gets a copy in the executor's scratch: inputs are
/// reordered into it before the primitive, outputs out of it afterwards. Scratch layout:
/// [scratchpad of the primitive or of a reorder (they never run at once)][staged copies...].
/// Everything is created up front; a run only sets scratch pointers and executes.
class DnnlCall {
 public:
  using memory = dnnl::memory;
  struct Arg {
    int id;             // DNNL_ARG_*
    memory::desc user;  // layout in the arena
    memory::desc prim;  // layout the primitive was created for
    const void* data;
    bool output = false;
    /// Outputs a sum post-op adds to: their value before the primitive runs, loaded from here
    /// (the same memory as `data` when the node runs in place, then in the same layout), laid
    /// out as `load_md` (zero: as `user`).
    const void* load = nullptr;
    memory::desc load_md{};
  };

  DnnlCall() = default;
  DnnlCall(dnnl::primitive prim, const memory::desc& scratchpad, const std::vector<Arg>& args)
      : prim_(std::move(prim)) {
    auto& eng = dnnl_engine();
    std::size_t pad = scratchpad.get_size();
    if (pad > 0) {
      pad_ = memory(scratchpad, eng, DNNL_MEMORY_NONE);
      args_.insert({DNNL_ARG_SCRATCHPAD, pad_});
    }
    for (const Arg& a : args) {
      memory user(a.user, eng, const_cast<void*>(a.data));
      const memory::desc load_md = a.load_md.is_zero() ? a.user : a.load_md;
      if (a.prim == a.user) {
        args_.insert({a.id, user});
        if (a.load != nullptr && load_md == a.user && a.load != a.data) {
          copies_.push_back({a.data, a.load, a.user.get_size()});
        } else if (a.load != nullptr && load_md != a.user) {  // never in place (the planner)
          Staged s;
          s.copy = user;
          s.output = true;
          load_into(s, load_md, a.load, pad);
          loads_.push_back(std::move(s));
        }
        continue;
      }
      Staged s;
      s.copy = memory(a.prim, eng, DNNL_MEMORY_NONE);
      s.output = a.output;
      const memory::desc& from = a.output ? a.prim : a.user;
      const memory::desc& to = a.output ? a.user : a.prim;
      const dnnl::reorder::primitive_desc rpd(eng, from, eng, to, user_scratchpad());
      s.reorder = dnnl::reorder(rpd);
      s.args = {{DNNL_ARG_FROM, a.output ? s.copy : user}, {DNNL_ARG_TO, a.output ? user : s.copy}};
      if (rpd.scratchpad_desc().get_size() > 0) {
        s.pad = memory(rpd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
        s.args.insert({DNNL_ARG_SCRATCHPAD, s.pad});
        pad = std::max(pad, rpd.scratchpad_desc().get_size());
      }
      if (a.load != nullptr) load_into(s, load_md, a.load, pad);  // into the staged copy
      args_.insert({a.id, s.copy});
      staged_.push_back(std::move(s));
    }
    std::size_t off = aligned(pad);
    for (Staged& s : staged_) {
      s.offset = off;
      off += aligned(s.copy.get_desc().get_size());
    }
    scratch_bytes_ = off;
  }

  void run(const ExecCtx& ctx) {
    auto* base = static_cast<std::byte*>(ctx.scratch);
    auto& st = dnnl_stream();
    if (pad_) pad_.set_data_handle(base);
    for (Staged& s : staged_) {
      s.copy.set_data_handle(base + s.offset);
      if (s.pad) s.pad.set_data_handle(base);
      if (!s.output) s.reorder.execute(st, s.args);
      if (s.load) s.load.execute(st, s.load_args);
    }
    for (const Copy& c : copies_) std::memcpy(const_cast<void*>(c.to), c.from, c.bytes);
    for (Staged& s : loads_) {
      if (s.pad) s.pad.set_data_handle(base);
      s.load.execute(st, s.load_args);
    }
    prim_.execute(st, args_);
    for (Staged& s : staged_) {
      if (s.output) s.reorder.execute(st, s.args);
    }
  }
  std::size_t scratch_bytes() const { return scratch_bytes_; }
  /// Operands copied to or from another layout at each run.
  std::size_t staged() const { return staged_.size(); }

 private:
  static std::size_t aligned(std::size_t n) { return (n + 63) / 64 * 64; }
  struct Staged;
  // A reorder of the value at `from` (laid out as `md`) into s.copy, run before the primitive.
  static void load_into(Staged& s, const memory::desc& md, const void* from, std::size_t& pad) {
    auto& eng = dnnl_engine();
    const dnnl::reorder::primitive_desc lpd(eng, md, eng, s.copy.get_desc(), user_scratchpad());
    s.load = dnnl::reorder(lpd);
    s.load_args = {{DNNL_ARG_FROM, memory(md, eng, const_cast<void*>(from))},
                   {DNNL_ARG_TO, s.copy}};
    if (lpd.scratchpad_desc().get_size() > 0) {
      if (!s.pad) s.pad = memory(lpd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
      s.load_args.insert({DNNL_ARG_SCRATCHPAD, s.pad});
      pad = std::max(pad, lpd.scratchpad_desc().get_size());
    }
  }
  struct Staged {
    memory copy, pad;
    dnnl::reorder reorder, load;
    std::unordered_map<int, memory> args, load_args;
    std::size_t offset = 0;
    bool output = false;
  };

  dnnl::primitive prim_;
  memory pad_;
  std::unordered_map<int, memory> args_;
  std::vector<Staged> staged_;
  struct Copy {
    const void* to;
    const void* from;
    std::size_t bytes;
  };
  std::vector<Copy> copies_;   // unstaged outputs loaded from elsewhere
  std::vector<Staged> loads_;  // unstaged outputs loaded from another layout
  std::size_t scratch_bytes_ = 0;
};

/// A kernel that runs the DnnlCall made for its team size.
class DnnlKernel : public CpuKernel {
 public:
  explicit DnnlKernel(TeamVariants<DnnlCall> calls) : calls_(std::move(calls)) {}
  void run(const ExecCtx& ctx) override { calls_.pick(ctx.nthreads).run(ctx); }
  std::size_t scratch_bytes() const override {
    std::size_t b = 0;
    for (const auto& [t, c] : calls_.all()) b = std::max(b, c.scratch_bytes());
    return b;
  }

 protected:
  TeamVariants<DnnlCall> calls_;
};

}  // namespace hetgraph::detail::cpu
