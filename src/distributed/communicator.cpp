// The communicator handle, the one-process communicator and the host-side collectives. No MPI
// here: the core library runs single-process without an MPI runtime.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/executable.hpp"
#include "distributed/comm.hpp"
#include "hetgraph/compiler.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {
namespace detail {

std::string_view collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::allreduce:
      return "allreduce";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::reduce:
      return "reduce";
    case CollectiveKind::allgather:
      return "allgather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
  }
  return "?";
}

namespace {

class SelfChannel final : public CommChannel {
 public:
  explicit SelfChannel(std::string label) : CommChannel(std::move(label)) {}
};

class SelfComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "self"; }
  std::unique_ptr<CommChannel> open_channel(std::string label) override {
    return std::make_unique<SelfChannel>(std::move(label));
  }
  void post(CommChannel& ch, const CollectiveCall& c, CommDone& done,
            std::uint64_t token) override {
    std::exception_ptr error;
    if (const std::string why = aborted(); !why.empty()) {
      error = std::make_exception_ptr(
          CommunicationError(ch.label() + ": the communicator was aborted: " + why));
    } else if (c.in != c.out) {
      // One rank: the sum, mean, broadcast, gather and scatter of a value is the value.
      std::memcpy(c.out, c.in, c.count * 4);
    }
    done.comm_done(token, error);
  }
  void abort(const std::string& why) override {
    std::lock_guard lk(mu_);
    if (why_.empty()) why_ = why.empty() ? "(no reason given)" : why;
  }
  CommChannel& host_channel() override { return host_; }

 private:
  std::string aborted() {
    std::lock_guard lk(mu_);
    return why_;
  }
  SelfChannel host_{"host collective"};
  std::mutex mu_;
  std::string why_;  // non-empty once aborted
};

}  // namespace

void CommWaiter::comm_done(std::uint64_t, std::exception_ptr error) {
  std::lock_guard lk(mu_);
  error_ = std::move(error);
  done_ = true;
  cv_.notify_all();
}

void CommWaiter::wait() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

void Comm::run_blocking(CommChannel& ch, const CollectiveCall& call) {
  CommWaiter w;
  post(ch, call, w, 0);
  w.wait();
}

std::shared_ptr<Comm> make_self_comm() {
  return std::make_shared<SelfComm>();
}

}  // namespace detail

namespace distributed {

using detail::CollectiveCall;
using detail::CollectiveKind;

Communicator::Communicator() : impl_(detail::make_self_comm()) {}

Communicator::Communicator(std::shared_ptr<detail::Comm> impl) : impl_(std::move(impl)) {
  if (!impl_) throw GraphError("Communicator: no communicator");
}

Communicator Communicator::self() {
  return Communicator();
}

int Communicator::rank() const {
  return impl_->rank();
}
int Communicator::size() const {
  return impl_->size();
}
int Communicator::local_size() const {
  return impl_->local_size();
}
std::string Communicator::name() const {
  return impl_->name();
}

void Communicator::allreduce(std::span<float> data, ReduceOp op) const {
  if (data.empty()) return;
  impl_->run_blocking(impl_->host_channel(), {.kind = CollectiveKind::allreduce,
                                              .op = op,
                                              .in = data.data(),
                                              .out = data.data(),
                                              .count = data.size()});
}

void Communicator::broadcast(std::span<float> data, int root) const {
  detail::check_root(*impl_, root, "Communicator::broadcast");
  if (data.empty()) return;
  impl_->run_blocking(impl_->host_channel(), {.kind = CollectiveKind::broadcast,
                                              .root = root,
                                              .in = data.data(),
                                              .out = data.data(),
                                              .count = data.size()});
}

void Communicator::barrier() const {
  float one = 1.0f;
  allreduce(std::span<float>(&one, 1));
}

void Communicator::abort(std::string_view why) const {
  impl_->abort(std::string(why));
}

void broadcast_variables(CompiledGraph& cg, const Communicator& comm, int root) {
  detail::check_root(*comm.impl(), root, "broadcast_variables");
  detail::Executable& exe = detail::executable_of(cg);
  const detail::Plan& p = exe.plan();
  std::vector<std::uint32_t> vars;
  std::size_t total = 0;
  for (std::uint32_t v : p.variables) {
    if (p.nodes[v].type.dtype != DType::f32) continue;
    vars.push_back(v);
    total += static_cast<std::size_t>(p.nodes[v].type.shape.numel());
  }
  if (total == 0 || comm.size() == 1) return;
  // One fused buffer: one collective instead of one per variable.
  std::vector<float> buf(total);
  std::size_t off = 0;
  for (std::uint32_t v : vars) {
    const auto n = static_cast<std::size_t>(p.nodes[v].type.shape.numel());
    if (comm.rank() == root) exe.read(v, buf.data() + off, n, DType::f32, "broadcast_variables");
    off += n;
  }
  comm.broadcast(buf, root);
  if (comm.rank() == root) return;
  off = 0;
  for (std::uint32_t v : vars) {
    const auto n = static_cast<std::size_t>(p.nodes[v].type.shape.numel());
    exe.write(v, buf.data() + off, n, DType::f32, "broadcast_variables");
    off += n;
  }
}

}  // namespace distributed
}  // namespace hetgraph
