// SPDX-License-Identifier: Apache-2.0
// The communicator interface's own pieces (compiler/comm.hpp): names and blocking waits, which
// need no implementation of a communicator.
#include "compiler/comm.hpp"

namespace hetgraph::detail {

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

}  // namespace hetgraph::detail

// Comm is distributed::Communicator::Impl: defined where that class is (namespace hetgraph).
void hetgraph::detail::Comm::run_blocking(detail::CommChannel& ch,
                                          const detail::CollectiveCall& call) {
  detail::CommWaiter w;
  post(ch, call, w, 0);
  w.wait();
}
