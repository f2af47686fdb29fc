// SPDX-License-Identifier: Apache-2.0
#include "cpu/comm_lane.hpp"

#include "hetgraph/error.hpp"

namespace hetgraph::detail::cpu {

void AsyncKernel::run(const ExecCtx&) {
  CommWaiter d;
  start(d, 0);
  d.wait();
}

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

CommLane::CommLane(const Program& prog) {
  const std::size_t n = prog.kernels.size();
  async_.assign(n, nullptr);
  start_ns_.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (prog.kernels[i] == nullptr || !op_def(prog.plan->nodes[i].op).communication) continue;
    async_[i] = dynamic_cast<AsyncKernel*>(prog.kernels[i]);
    if (async_[i] != nullptr) ++count_;
  }
  finished_.reserve(count_);
}

void CommLane::start(std::uint32_t v) {
  // Written before the post: the communicator's hand-off orders it before comm_done reads it.
  start_ns_[v] = recording_ ? now_ns() : 0;
  try {
    async_[v]->start(*this, v);
  } catch (...) {
    comm_done(v, std::current_exception());
  }
}

void CommLane::abandon(std::uint32_t v, const std::string& why) {
  async_[v]->abandon(why);
}

void CommLane::comm_done(std::uint64_t token, std::exception_ptr error) {
  const auto v = static_cast<std::uint32_t>(token);
  // Everything under the lock: a taker needs it, so once this returns nobody here touches the
  // lane again, and the run (and the engine) may end.
  std::lock_guard lk(mu_);
  finished_.push_back({v, std::move(error), start_ns_[v], recording_ ? now_ns() : 0});
  ready_.fetch_add(1, std::memory_order_release);
  wake_.notify_all();
  if (notify_) notify_();
}

bool CommLane::take(Finished& f) {
  if (!has_finished()) return false;
  std::lock_guard lk(mu_);
  if (finished_.empty()) return false;
  f = std::move(finished_.back());
  finished_.pop_back();
  ready_.fetch_sub(1, std::memory_order_release);
  return true;
}

CommLane::Finished CommLane::wait() {
  // No spinning: the communicator's thread that will end the wait may share this core (one
  // rank per core), and would be the one kept waiting.
  Finished f;
  for (;;) {
    if (take(f)) return f;
    const std::uint32_t ticket = wake_.ticket();
    if (has_finished()) continue;
    wake_.wait(ticket);
  }
}

}  // namespace hetgraph::detail::cpu
