// SPDX-License-Identifier: Apache-2.0
// Matmul on OpenCL through CLBlast (row-major SGEMM with transposes; batches as a loop of GEMMs
// or one strided-batched GEMM, a rank-2 operand shared by the batch with stride 0).
//
// CLBlast takes a queue and returns an event but no wait list, and it may enqueue several
// kernels (padding/transposing copies around the main kernel) that it orders with its own
// events. So each GEMM node runs on an in-order side queue: a marker carrying the node's wait
// list goes first, which holds back everything after it on that queue, then CLBlast's
// commands; their last event is the node's. Nodes rotate over a few side queues so that
// independent GEMMs can still overlap.
#include <clblast.h>

#include <mutex>

#include "compiler/geometry.hpp"
#include "hetgraph/error.hpp"
#include "opencl/ops.hpp"

namespace hetgraph::detail::cl {

namespace {

// Batches up to this size run as a loop of plain GEMMs (one CLBlast program, warmed at compile
// time); larger ones as one strided-batched call.
constexpr std::int64_t kLoopBatches = 16;

std::string status_name(clblast::StatusCode s) {
  const int c = static_cast<int>(s);
  if (c > -1000) return error_name(c);  // CLBlast passes OpenCL errors through
  switch (s) {
    case clblast::StatusCode::kNotImplemented:
      return "kNotImplemented";
    case clblast::StatusCode::kInvalidDimension:
      return "kInvalidDimension";
    case clblast::StatusCode::kInvalidLeadDimA:
      return "kInvalidLeadDimA";
    case clblast::StatusCode::kInvalidLeadDimB:
      return "kInvalidLeadDimB";
    case clblast::StatusCode::kInvalidLeadDimC:
      return "kInvalidLeadDimC";
    case clblast::StatusCode::kInsufficientMemoryA:
      return "kInsufficientMemoryA";
    case clblast::StatusCode::kInsufficientMemoryB:
      return "kInsufficientMemoryB";
    case clblast::StatusCode::kInsufficientMemoryC:
      return "kInsufficientMemoryC";
    case clblast::StatusCode::kInsufficientMemoryTemp:
      return "kInsufficientMemoryTemp";
    case clblast::StatusCode::kInvalidBatchCount:
      return "kInvalidBatchCount";
    case clblast::StatusCode::kInvalidLocalMemUsage:
      return "kInvalidLocalMemUsage";
    case clblast::StatusCode::kDatabaseError:
      return "kDatabaseError";
    case clblast::StatusCode::kUnknownError:
      return "kUnknownError";
    case clblast::StatusCode::kUnexpectedError:
      return "kUnexpectedError";
    default:
      return "CLBlast status " + std::to_string(c);
  }
}

// One tiny call of each CLBlast routine hetgraph uses, once per device (context).
void warm(Device& dev, bool strided_batched) {
  static std::mutex mu;
  std::lock_guard lk(mu);
  const std::string key = strided_batched ? "clblast-sgemm-strided-batched" : "clblast-sgemm";
  if (!dev.first_use(key)) return;
  Mem buf(HG_CL_CREATE(clCreateBuffer, dev.context(), CL_MEM_READ_WRITE, 64, nullptr));
  cl_command_queue q = dev.gemm_queue(0);
  Event ev;
  const auto no = clblast::Transpose::kNo;
  const clblast::StatusCode s =
      strided_batched
          ? clblast::GemmStridedBatched<float>(clblast::Layout::kRowMajor, no, no, 1, 1, 1, 1.0f,
                                               buf.get(), 0, 1, 1, buf.get(), 2, 1, 1, 0.0f,
                                               buf.get(), 4, 1, 1, 2, &q, ev.out())
          : clblast::Gemm<float>(clblast::Layout::kRowMajor, no, no, 1, 1, 1, 1.0f, buf.get(), 0, 1,
                                 buf.get(), 1, 1, 0.0f, buf.get(), 2, 1, &q, ev.out());
  if (s != clblast::StatusCode::kSuccess) {
    throw PlatformError("preparing CLBlast on " + dev.label() + ": " + status_name(s) + " (" +
                        std::to_string(static_cast<int>(s)) + ")");
  }
  const cl_event e = ev.get();
  HG_CL(clWaitForEvents(1, &e));
}

class GemmOp final : public ClOp {
 public:
  explicit GemmOp(const OpArgs& a)
      : dev_(a.device),
        label_(a.node.label),
        queue_index_(a.index % a.device.gemm_queue_count()),
        queue_(a.device.gemm_queue(queue_index_)),
        g_(matmul_geom(a.in_shape(0), a.in_shape(1), a.node.attrs.trans_a, a.node.attrs.trans_b)) {
    a_ = a.in[0];
    b_ = a.in[1];
    c_ = a.out;
    // CLBlast builds its GEMM program on the first call in a context: make that happen now
    // (setup time) rather than in the first run.
    warm(a.device, g_.batch > kLoopBatches);
    // The temporary buffer CLBlast needs (bytes); the batch loop's later GEMMs start at an
    // offset, which can need more than the first.
    std::size_t temp = 0;
    for (std::int64_t b = 0; b < std::min<std::int64_t>(g_.batch, 2); ++b) {
      std::size_t t = 0;
      cl_command_queue q = queue_;
      const clblast::StatusCode s = clblast::GemmTempBufferSize<float>(
          clblast::Layout::kRowMajor, trans(g_.ta), trans(g_.tb), sz(g_.m), sz(g_.n), sz(g_.k),
          a_off(b), lda(), b_off(b), ldb(), c_off(b), sz(g_.n), &q, t);
      if (s != clblast::StatusCode::kSuccess) fail("GemmTempBufferSize", s);
      temp = std::max(temp, t);
    }
    if (temp > 0) {
      temp_ = Mem(HG_CL_CREATE(clCreateBuffer, dev_.context(), CL_MEM_READ_WRITE, temp, nullptr));
    }
  }

  int lane() const override { return 1 + static_cast<int>(queue_index_); }

  Event enqueue(cl_command_queue, std::span<const cl_event> wait, Event* first) override {
    Event ev;
    cl_command_queue q = queue_;
    if (!wait.empty()) {
      HG_CL(
          clEnqueueMarkerWithWaitList(q, static_cast<cl_uint>(wait.size()), wait.data(), nullptr));
    }
    if (g_.batch > kLoopBatches) {
      const clblast::StatusCode s = clblast::GemmStridedBatched<float>(
          clblast::Layout::kRowMajor, trans(g_.ta), trans(g_.tb), sz(g_.m), sz(g_.n), sz(g_.k),
          1.0f, a_, 0, lda(), g_.a_batched ? sz(g_.m * g_.k) : 0, b_, 0, ldb(),
          g_.b_batched ? sz(g_.k * g_.n) : 0, 0.0f, c_, 0, sz(g_.n), sz(g_.m * g_.n), sz(g_.batch),
          &q, ev.out());
      if (s != clblast::StatusCode::kSuccess) fail("GemmStridedBatched", s);
    } else {
      // In order on q: the last GEMM's event completes after all of them.
      for (std::int64_t b = 0; b < g_.batch; ++b) {
        Event e;
        const clblast::StatusCode s =
            clblast::Gemm<float>(clblast::Layout::kRowMajor, trans(g_.ta), trans(g_.tb), sz(g_.m),
                                 sz(g_.n), sz(g_.k), 1.0f, a_, a_off(b), lda(), b_, b_off(b), ldb(),
                                 0.0f, c_, c_off(b), sz(g_.n), &q, e.out(), temp_.get());
        if (s != clblast::StatusCode::kSuccess) fail("Gemm", s);
        if (b == 0 && first != nullptr && g_.batch > 1) *first = e;
        ev = std::move(e);
      }
    }
    // The side queue is not the one the executable flushes: submit now.
    HG_CL(clFlush(q));
    return ev;
  }

 private:
  static clblast::Transpose trans(bool t) {
    return t ? clblast::Transpose::kYes : clblast::Transpose::kNo;
  }
  static std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }
  std::size_t lda() const { return sz(g_.ta ? g_.m : g_.k); }
  std::size_t ldb() const { return sz(g_.tb ? g_.k : g_.n); }
  std::size_t a_off(std::int64_t b) const { return g_.a_batched ? sz(b * g_.m * g_.k) : 0; }
  std::size_t b_off(std::int64_t b) const { return g_.b_batched ? sz(b * g_.k * g_.n) : 0; }
  std::size_t c_off(std::int64_t b) const { return sz(b * g_.m * g_.n); }
  [[noreturn]] void fail(const char* what, clblast::StatusCode s) const {
    throw PlatformError("node " + label_ + ": clblast::" + what + " failed: " + status_name(s) +
                        " (" + std::to_string(static_cast<int>(s)) + ")");
  }

  Device& dev_;
  std::string label_;
  std::size_t queue_index_;
  cl_command_queue queue_;
  MatmulGeom g_;
  cl_mem a_ = nullptr, b_ = nullptr, c_ = nullptr;
  Mem temp_;
};

std::unique_ptr<ClOp> make_gemm(const OpArgs& a) {
  return std::make_unique<GemmOp>(a);
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  r.add(OpKind::MatMul, {"clblast_gemm", nullptr, make_gemm});
}

}  // namespace hetgraph::detail::cl
