// SPDX-License-Identifier: Apache-2.0
// MPI_COMM_WORLD through Open MPI: hetgraph::distributed::world(). Built into libhetgraph_mpi
// only, so the core library never needs an MPI runtime.
//
// Thread level. Every MPI call of the process is made by one communication thread, which
// initialises MPI (MPI_THREAD_FUNNELED: the thread that initialises is the only one that calls),
// starts the non-blocking collectives posted by the engines' communication lanes, polls them,
// sends heartbeats and finalises MPI at exit. Engines post from executor threads without ever
// touching MPI. The alternative, MPI_THREAD_MULTIPLE with executors calling MPI themselves, would
// take Open MPI's internal locks on every call, and libnbc's non-blocking collectives only
// progress inside MPI calls anyway: something has to keep calling MPI_Test while the executors
// compute. (PyTorch's MPI process group and Horovod's background thread do the same.) A program
// that initialised MPI itself must have asked for MPI_THREAD_MULTIPLE.
//
// Ordering. Collectives are matched per communicator in posting order, but graph nodes become
// ready in orders that differ between ranks: each channel (one per collective node) is its own
// communicator, duplicated with MPI_Comm_idup when the node is compiled.
//
// Failure. Errors return (MPI_ERRORS_RETURN) instead of aborting. While a collective waits:
//  - a rank not heard from for heartbeat_timeout_s fails it, naming the rank (heartbeats are
//    tiny messages each rank sends every other one every heartbeat_interval_s from this thread,
//    so a rank busy computing keeps sending them; a rank that died, hangs or left does not);
//  - a notice from a rank that gave up (its run failed, Communicator::abort) fails it at once,
//    with that rank's reason;
//  - a collective not complete after collective_timeout_s fails.
// After any of these the communicator is broken: everything later fails at once, and the
// process does not call MPI_Finalize at exit (it would wait for the ranks that are gone).
#include <mpi.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "util/env.hpp"
#include "distributed/comm.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {
namespace detail {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagHeartbeat = 1;
constexpr int kTagNotice = 2;
constexpr int kNoticeBytes = 2048;
// Poll intervals while something is in flight (libnbc's collectives progress only in MPI calls).
// Chosen by interleaved runs of hetgraph-dp-bench (mnist-softmax, lstm-small, wide-deep-train)
// with 2 ranks on this 2-core machine: nice 5 / 5 us / 50 us / 10 us beat the rest.
constexpr auto kPollMin = std::chrono::microseconds(5);
constexpr auto kPollMax = std::chrono::microseconds(50);
constexpr auto kSpin = std::chrono::microseconds(10);
constexpr int kNice = 5;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

Clock::duration from_seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// HETGRAPH_MPI_* overrides, read strictly: seconds in [0, 1e9], or a CommunicationError naming
// the variable and its value.
double env_seconds(const char* name, double fallback) {
  const std::string v = env_value(name);
  if (v.empty()) return fallback;
  double d = 0;
  if (parse_real(v, d) != ParseStatus::ok || !(d >= 0) || d > 1e9) {
    throw CommunicationError(std::string(name) + "=" + quote(v) +
                             " is not a number of seconds from 0 to 1e9");
  }
  return d;
}

// The failure detection must be able to tell a silent rank from a slow heartbeat.
void check(const distributed::WorldOptions& o) {
  auto bad = [](const std::string& what) { throw CommunicationError("world(): " + what); };
  if (!(o.heartbeat_interval_s >= 0.001 && o.heartbeat_interval_s <= 3600))
    bad("heartbeat_interval_s must lie in [0.001, 3600] s");
  if (!(o.heartbeat_timeout_s >= 2 * o.heartbeat_interval_s && o.heartbeat_timeout_s <= 1e9))
    bad("heartbeat_timeout_s (" + std::to_string(o.heartbeat_timeout_s) +
        " s) must be at least twice heartbeat_interval_s (" +
        std::to_string(o.heartbeat_interval_s) + " s)");
  if (!(o.collective_timeout_s >= 0 && o.collective_timeout_s <= 1e9))
    bad("collective_timeout_s must lie in [0, 1e9] s (0: none)");
}

class MpiChannel;

// One unit of work for the communication thread.
struct Job {
  enum class Type { collective, open, free, abort } type = Type::collective;
  CollectiveCall call;
  MPI_Comm comm = MPI_COMM_NULL;
  std::string label;  // the channel's (collective, open)
  CommDone* done = nullptr;
  std::uint64_t token = 0;
  std::shared_ptr<std::promise<MPI_Comm>> opened;  // shared: the waiter may leave first
  std::string why;                                 // abort
};

// Something in flight: a collective or a channel being opened.
struct Pending {
  MPI_Request req = MPI_REQUEST_NULL;
  Job job;
  MPI_Comm new_comm = MPI_COMM_NULL;  // open
  Clock::time_point deadline;
};

class MpiRuntime {
 public:
  explicit MpiRuntime(distributed::WorldOptions o) {
    o.heartbeat_timeout_s = env_seconds("HETGRAPH_MPI_HEARTBEAT_TIMEOUT", o.heartbeat_timeout_s);
    o.collective_timeout_s = env_seconds("HETGRAPH_MPI_COLLECTIVE_TIMEOUT", o.collective_timeout_s);
    check(o);
    interval_ = from_seconds(o.heartbeat_interval_s);
    heartbeat_timeout_ = from_seconds(o.heartbeat_timeout_s);
    collective_timeout_ = o.collective_timeout_s > 0 ? from_seconds(o.collective_timeout_s)
                                                     : Clock::duration::max() / 2;
    auto ready = std::make_shared<std::promise<void>>();
    auto started = ready->get_future();
    thread_ = std::thread([this, ready] { main(*ready); });
    try {
      started.get();
    } catch (...) {
      thread_.join();
      throw;
    }
  }

  ~MpiRuntime() { shutdown(); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_size() const { return local_size_; }

  void submit(Job j) {
    {
      std::lock_guard lk(mu_);
      if (!stopped_) {
        jobs_.push_back(std::move(j));
        cv_.notify_one();
        return;
      }
    }
    // After finalisation nothing can run: report it from here.
    const std::string msg = j.label + ": MPI was already finalized (the process is exiting)";
    if (j.type == Job::Type::collective)
      j.done->comm_done(j.token, std::make_exception_ptr(CommunicationError(msg)));
    if (j.type == Job::Type::open)
      j.opened->set_exception(std::make_exception_ptr(CommunicationError(msg)));
  }

  MPI_Comm open(const std::string& label) {
    auto p = std::make_shared<std::promise<MPI_Comm>>();
    auto f = p->get_future();
    Job j;
    j.type = Job::Type::open;
    j.label = label;
    j.opened = p;
    submit(std::move(j));
    return f.get();
  }

  /// Stops the thread: MPI_Finalize unless the communicator is broken (then the other ranks may
  /// be gone and finalisation would wait for them forever).
  void shutdown() {
    {
      std::lock_guard lk(mu_);
      if (stopped_) return;
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  // ---- the communication thread -------------------------------------------------------------
  void main(std::promise<void>& ready) {
    // Precise sleeps while polling (the default 50 us of timer slack would add to every poll).
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    // A little below the executors: with one rank per core this thread shares its core with an
    // executor, and its frequent wake-ups while polling would otherwise preempt the compute it
    // is meant to overlap. When the executor waits, the core is this thread's alone.
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kNice);
    try {
      init();
    } catch (...) {
      std::lock_guard lk(mu_);
      stopped_ = true;
      ready.set_exception(std::current_exception());
      return;
    }
    ready.set_value();
    loop();
    finalize();
  }

  void init() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
      int provided = 0;
      MPI_Query_thread(&provided);
      if (provided != MPI_THREAD_MULTIPLE) {
        throw CommunicationError(
            "MPI was initialised by the program without MPI_THREAD_MULTIPLE: hetgraph makes its "
            "MPI calls from its own communication thread, concurrently with the program's");
      }
      owns_mpi_ = false;
    } else {
      int provided = 0;
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      if (rc != MPI_SUCCESS) throw CommunicationError("MPI_Init_thread failed: " + mpi_error(rc));
      if (provided < MPI_THREAD_FUNNELED) {
        throw CommunicationError("this MPI offers no MPI_THREAD_FUNNELED (provided level " +
                                 std::to_string(provided) + ")");
      }
      owns_mpi_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm node = MPI_COMM_NULL;  // the ranks that share this machine's memory
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
      MPI_Comm_size(node, &local_size_);
      MPI_Comm_free(&node);
    }
    // Channels are duplicated from data_; heartbeats and notices travel on control_.
    if (MPI_Comm_dup(MPI_COMM_WORLD, &data_) != MPI_SUCCESS ||
        MPI_Comm_dup(MPI_COMM_WORLD, &control_) != MPI_SUCCESS) {
      throw CommunicationError("MPI_Comm_dup of MPI_COMM_WORLD failed");
    }
    MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    const auto now = Clock::now();
    const auto n = static_cast<std::size_t>(size_);
    last_heard_.assign(n, now);
    hb_send_.assign(n, MPI_REQUEST_NULL);
    hb_recv_.assign(n, MPI_REQUEST_NULL);
    hb_in_.assign(n, 0);
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) post_heartbeat_recv(p);
    }
    MPI_Irecv(notice_in_, kNoticeBytes, MPI_CHAR, MPI_ANY_SOURCE, kTagNotice, control_,
              &notice_recv_);
    next_heartbeat_ = now;
  }

  void loop() {
    auto backoff = std::chrono::microseconds(0);
    std::vector<Job> batch;
    for (;;) {
      {
        std::unique_lock lk(mu_);
        if (jobs_.empty() && !stopping_) {
          // In flight: poll again soon (sooner after progress); idle: until the next heartbeat.
          // Broken (below): nothing to poll or send, only jobs to fail.
          const auto wake = pending_.empty() ? next_heartbeat_ : Clock::now() + backoff;
          const auto pred = [&] { return !jobs_.empty() || stopping_; };
          if (broken_.empty())
            cv_.wait_until(lk, std::min(wake, next_heartbeat_), pred);
          else
            cv_.wait(lk, pred);
        }
        if (stopping_ && jobs_.empty()) return;
        batch.assign(std::make_move_iterator(jobs_.begin()), std::make_move_iterator(jobs_.end()));
        jobs_.clear();
      }
      bool progress = !batch.empty();
      for (Job& j : batch) start(std::move(j));
      batch.clear();
      // Broken: no MPI call from now on. Collectives that failed are still in flight in MPI (it
      // cannot cancel them) and their buffers may already be freed by the graphs that owned
      // them: any call that drives MPI's progress (a heartbeat's test) could receive a peer's
      // data into freed memory (seen: SIGSEGV in opal_convertor_unpack under MPI_Test). Later
      // jobs fail in start() without MPI; the other ranks see this one fall silent.
      if (!broken_.empty()) continue;
      progress |= poll();
      // Right after something moved the next step is likely close (the partner's message, the
      // next collective): poll without sleeping for a few microseconds first, since a wake-up
      // from a sleep costs more than that on these machines.
      for (auto until = Clock::now() + kSpin;
           !progress && !pending_.empty() && backoff <= kPollMin && Clock::now() < until;) {
        progress = poll();
      }
      heartbeats();
      check_failures();
      // Polls get sparser while nothing moves, up to kPollMax: a collective's end is seen at
      // most that late, and a thread sharing a core with an executor takes little of it.
      backoff = progress ? kPollMin : std::min(std::max(backoff * 2, kPollMin), kPollMax);
    }
  }

  void start(Job j) {
    switch (j.type) {
      case Job::Type::abort:
        give_up(j.why);
        return;
      case Job::Type::free:
        if (j.comm != MPI_COMM_NULL && broken_.empty()) MPI_Comm_free(&j.comm);
        return;
      case Job::Type::open:
        if (!broken_.empty()) {
          j.opened->set_exception(
              std::make_exception_ptr(CommunicationError(j.label + ": " + broken_)));
          return;
        }
        break;
      case Job::Type::collective:
        if (!broken_.empty()) {
          j.done->comm_done(j.token,
                            std::make_exception_ptr(CommunicationError(j.label + ": " + broken_)));
          return;
        }
        break;
    }
    Pending p;
    p.deadline = Clock::now() + collective_timeout_;
    int rc = MPI_SUCCESS;
    const char* what = "";
    if (j.type == Job::Type::open) {
      what = "MPI_Comm_idup";
      rc = MPI_Comm_idup(data_, &p.new_comm, &p.req);
    } else {
      rc = start_collective(j, p.req, what);
    }
    p.job = std::move(j);
    if (rc != MPI_SUCCESS) {
      finish(p, std::make_exception_ptr(
                    CommunicationError(p.job.label + ": " + what + " failed: " + mpi_error(rc))));
      return;
    }
    pending_.push_back(std::move(p));
  }

  int start_collective(const Job& j, MPI_Request& req, const char*& what) {
    const CollectiveCall& c = j.call;
    if (c.count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      what = "a collective of more than 2^31-1 elements";
      return MPI_ERR_COUNT;
    }
    const int n = static_cast<int>(c.count);
    const bool in_place = c.in == c.out;
    const MPI_Datatype type = c.dtype == DType::i32 ? MPI_INT : MPI_FLOAT;
    switch (c.kind) {
      case CollectiveKind::allreduce:
        what = "MPI_Iallreduce";
        return MPI_Iallreduce(in_place ? MPI_IN_PLACE : c.in, c.out, n, MPI_FLOAT, MPI_SUM, j.comm,
                              &req);
      case CollectiveKind::broadcast:
        what = "MPI_Ibcast";
        if (rank_ == c.root && !in_place) std::memcpy(c.out, c.in, c.count * 4);
        return MPI_Ibcast(c.out, n, type, c.root, j.comm, &req);
      case CollectiveKind::reduce:
        what = "MPI_Ireduce";
        return MPI_Ireduce(in_place && rank_ == c.root ? MPI_IN_PLACE : c.in, c.out, n, MPI_FLOAT,
                           MPI_SUM, c.root, j.comm, &req);
      case CollectiveKind::allgather:
        what = "MPI_Iallgather";
        return MPI_Iallgather(c.in, n / size_, type, c.out, n / size_, type, j.comm, &req);
      case CollectiveKind::reduce_scatter:
        what = "MPI_Ireduce_scatter_block";
        return MPI_Ireduce_scatter_block(c.in, c.out, n, MPI_FLOAT, MPI_SUM, j.comm, &req);
    }
    return MPI_ERR_OTHER;
  }

  // After a collective completes: the mean's division, the zeros of a reduce off its root.
  void finish_values(const CollectiveCall& c) const {
    if (moves_only(c.kind)) return;
    float* out = static_cast<float*>(c.out);
    if (c.kind == CollectiveKind::reduce && rank_ != c.root) {
      std::fill(out, out + c.count, 0.0f);
    } else if (c.op == distributed::ReduceOp::mean && size_ > 1) {
      const float inv = 1.0f / static_cast<float>(size_);
      for (std::size_t i = 0; i < c.count; ++i) out[i] *= inv;
    }
  }

  void finish(Pending& p, std::exception_ptr error) {
    Job& j = p.job;
    if (j.type == Job::Type::open) {
      if (error) {
        j.opened->set_exception(error);
      } else {
        MPI_Comm_set_errhandler(p.new_comm, MPI_ERRORS_RETURN);
        j.opened->set_value(p.new_comm);
      }
      return;
    }
    if (!error) finish_values(j.call);
    j.done->comm_done(j.token, error);
  }

  bool poll() {
    bool progress = false;
    for (std::size_t i = 0; i < pending_.size();) {
      int flag = 0;
      const int rc = MPI_Test(&pending_[i].req, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || flag) {
        Pending p = std::move(pending_[i]);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        progress = true;
        if (rc != MPI_SUCCESS) {
          const std::string why = p.job.label + ": MPI failed: " + mpi_error(rc);
          finish(p, std::make_exception_ptr(CommunicationError(why)));
          break_all("a collective failed earlier (" + why + ")");
        } else {
          finish(p, nullptr);
        }
        continue;
      }
      ++i;
    }
    // A notice from a rank that gave up.
    if (notice_recv_ != MPI_REQUEST_NULL) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Test(&notice_recv_, &flag, &st) == MPI_SUCCESS && flag) {
        int len = 0;
        MPI_Get_count(&st, MPI_CHAR, &len);
        const std::string text(notice_in_, static_cast<std::size_t>(std::max(0, len)));
        break_all("rank " + std::to_string(st.MPI_SOURCE) + " failed: " + text);
        progress = true;
      }
    }
    return progress;
  }

  void post_heartbeat_recv(int p) {
    MPI_Irecv(&hb_in_[static_cast<std::size_t>(p)], 1, MPI_INT, p, kTagHeartbeat, control_,
              &hb_recv_[static_cast<std::size_t>(p)]);
  }

  void heartbeats() {
    const auto now = Clock::now();
    for (int p = 0; p < size_; ++p) {
      const auto k = static_cast<std::size_t>(p);
      if (p == rank_ || hb_recv_[k] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      if (MPI_Test(&hb_recv_[k], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        hb_recv_[k] = MPI_REQUEST_NULL;  // the link is gone: the rank stays silent
      } else if (flag) {
        last_heard_[k] = now;
        post_heartbeat_recv(p);
      }
    }
    if (now < next_heartbeat_) return;
    next_heartbeat_ = now + interval_;
    for (int p = 0; p < size_; ++p) {
      const auto k = static_cast<std::size_t>(p);
      if (p == rank_) continue;
      int flag = 1;
      if (hb_send_[k] != MPI_REQUEST_NULL &&
          MPI_Test(&hb_send_[k], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        continue;
      // One heartbeat in flight per peer: a peer that does not take them gets no pile-up.
      if (flag) MPI_Isend(&hb_out_, 1, MPI_INT, p, kTagHeartbeat, control_, &hb_send_[k]);
    }
  }

  void check_failures() {
    if (pending_.empty()) return;
    const auto now = Clock::now();
    std::string silent;
    double longest = 0;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const auto quiet = now - last_heard_[static_cast<std::size_t>(p)];
      if (quiet > heartbeat_timeout_) {
        silent += (silent.empty() ? "" : ", ") + std::to_string(p);
        longest = std::max(longest, seconds(quiet));
      }
    }
    if (!silent.empty()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f", longest);
      break_all((silent.find(',') == std::string::npos ? "rank " : "ranks ") + silent +
                " stopped responding: no heartbeat for " + buf +
                " s (the process died, hangs, or left the job)");
      return;
    }
    for (std::size_t i = 0; i < pending_.size();) {
      if (now < pending_[i].deadline) {
        ++i;
        continue;
      }
      Pending p = std::move(pending_[i]);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f", seconds(collective_timeout_));
      const std::string why = p.job.label + ": not complete after " + buf +
                              " s, though every rank still answers heartbeats (every rank must "
                              "run the same graphs, in the same order)";
      finish(p, std::make_exception_ptr(CommunicationError(why)));
      break_all("a collective timed out earlier (" + why + ")");
    }
  }

  // Fails everything in flight with `why` (prefixed by each one's label) and everything later.
  // Requests in flight are left to MPI: a collective cannot be cancelled.
  void break_all(const std::string& why) {
    if (broken_.empty()) broken_ = why;
    std::vector<Pending> failed;
    failed.swap(pending_);
    for (Pending& p : failed)
      finish(p, std::make_exception_ptr(CommunicationError(p.job.label + ": " + broken_)));
  }

  void give_up(const std::string& why) {
    if (!broken_.empty()) return;  // already broken: the others know or found out themselves
    const std::string text = why.substr(0, kNoticeBytes);
    notice_out_ = text;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Isend(notice_out_.data(), static_cast<int>(notice_out_.size()), MPI_CHAR, p,
                    kTagNotice, control_, &r) == MPI_SUCCESS)
        notices_.push_back(r);
    }
    break_all("this rank gave up: " + text);
  }

  void finalize() {
    // Notices must leave before the process does: give them a moment.
    // (Broken: no MPI call, as in loop(); a notice of give_up() left in its MPI_Isend, which
    // sends a message this small at once.)
    const auto until = Clock::now() + std::chrono::seconds(2);
    while (broken_.empty() && !notices_.empty() && Clock::now() < until) {
      int all = 0;
      if (MPI_Testall(static_cast<int>(notices_.size()), notices_.data(), &all,
                      MPI_STATUSES_IGNORE) != MPI_SUCCESS ||
          all)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    {
      std::lock_guard lk(mu_);
      stopped_ = true;
    }
    if (broken_.empty()) poll();  // a notice that arrived meanwhile: the job failed
    const bool healthy = broken_.empty();
    break_all("MPI was finalized (the process is exiting)");
    if (!owns_mpi_ || !healthy) return;
    // A clean exit. Heartbeats between ranks that exit too may stay unmatched: receives are
    // cancelled, sends left to complete on their own.
    auto cancel = [](MPI_Request& r) {
      if (r == MPI_REQUEST_NULL) return;
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    };
    for (MPI_Request& r : hb_recv_) cancel(r);
    cancel(notice_recv_);
    for (MPI_Request& r : hb_send_) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
    MPI_Comm_free(&data_);
    MPI_Comm_free(&control_);
    MPI_Finalize();
  }

  // ---- state --------------------------------------------------------------------------------
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;                      // guarded by mu_
  bool stopping_ = false;                     // guarded by mu_
  bool stopped_ = false;                      // guarded by mu_
  int rank_ = 0, size_ = 1, local_size_ = 1;  // set before the constructor returns
  Clock::duration interval_{}, heartbeat_timeout_{}, collective_timeout_{};
  // the communication thread's own
  bool owns_mpi_ = true;
  MPI_Comm data_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL;
  std::vector<Pending> pending_;
  std::string broken_;  // why everything fails from now on; empty while healthy
  std::vector<Clock::time_point> last_heard_;
  std::vector<MPI_Request> hb_send_, hb_recv_;
  std::vector<int> hb_in_;
  int hb_out_ = 1;
  Clock::time_point next_heartbeat_;
  char notice_in_[kNoticeBytes] = {};
  MPI_Request notice_recv_ = MPI_REQUEST_NULL;
  std::string notice_out_;
  std::vector<MPI_Request> notices_;
};

class MpiChannel final : public CommChannel {
 public:
  MpiChannel(std::shared_ptr<MpiRuntime> rt, std::string label)
      : CommChannel(std::move(label)), rt_(std::move(rt)) {
    comm_ = rt_->open(this->label());
  }
  ~MpiChannel() override {
    Job j;
    j.type = Job::Type::free;
    j.comm = comm_;
    j.label = label();
    rt_->submit(std::move(j));
  }
  MPI_Comm comm() const { return comm_; }

 private:
  std::shared_ptr<MpiRuntime> rt_;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

class MpiComm final : public Comm {
 public:
  explicit MpiComm(std::shared_ptr<MpiRuntime> rt)
      : rt_(std::move(rt)), host_(rt_, "host collective (Communicator)") {}

  int rank() const override { return rt_->rank(); }
  int size() const override { return rt_->size(); }
  int local_size() const override { return rt_->local_size(); }
  std::string name() const override {
    return "MPI_COMM_WORLD (rank " + std::to_string(rank()) + " of " + std::to_string(size()) + ")";
  }
  std::unique_ptr<CommChannel> open_channel(std::string label) override {
    // A rank compiling more collectives than another would wait in MPI_Comm_idup until the
    // deadline; as an agreement check it meets the other's next one and both fail at once.
    const distributed::Agreed at[] = {{"compiling a collective", std::string()}};
    agree(*this, at, label);
    return std::make_unique<MpiChannel>(rt_, std::move(label));
  }
  void post(CommChannel& ch, const CollectiveCall& call, CommDone& done,
            std::uint64_t token) override {
    Job j;
    j.type = Job::Type::collective;
    j.call = call;
    j.comm = static_cast<MpiChannel&>(ch).comm();
    j.label = ch.label();
    j.done = &done;
    j.token = token;
    rt_->submit(std::move(j));
  }
  void abort(const std::string& why) override {
    Job j;
    j.type = Job::Type::abort;
    j.why = why;
    rt_->submit(std::move(j));
  }
  CommChannel& host_channel() override { return host_; }
  MpiRuntime& runtime() { return *rt_; }

 private:
  std::shared_ptr<MpiRuntime> rt_;
  MpiChannel host_;
};

// The world communicator of the process, finalised when the process exits.
struct World {
  std::mutex mu;
  std::shared_ptr<MpiRuntime> runtime;
  std::shared_ptr<MpiComm> comm;
  ~World() {
    if (runtime) runtime->shutdown();
  }
};

}  // namespace
}  // namespace detail

namespace distributed {

Communicator world(const WorldOptions& options) {
  static detail::World w;
  std::lock_guard lk(w.mu);
  if (!w.comm) {
    auto rt = std::make_shared<detail::MpiRuntime>(options);
    w.comm = std::make_shared<detail::MpiComm>(rt);
    w.runtime = std::move(rt);
  }
  return Communicator(w.comm);
}

}  // namespace distributed
}  // namespace hetgraph
