// SPDX-License-Identifier: Apache-2.0
// The communicator handle, the one-process communicator and the host-side collectives. No MPI
// here: the core library runs single-process without an MPI runtime.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "common/executable.hpp"
#include "compiler/ops.hpp"
#include "distributed/comm.hpp"
#include "hetgraph/compiler.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph {
namespace detail {

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

std::shared_ptr<Comm> make_self_comm() {
  return std::make_shared<SelfComm>();
}

}  // namespace detail

namespace distributed {

using detail::CollectiveCall;
using detail::CollectiveKind;

Communicator::Communicator() : impl_(detail::make_self_comm()) {}

Communicator::Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {
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

namespace {

constexpr std::size_t kMaxAgreed = 32;

// FNV-1a: the same on every machine and standard library (std::hash is neither).
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// Allgather of int32 words on the host channel: every rank's `mine` in rank order.
std::vector<std::int32_t> allgather_words(detail::Comm& comm, std::vector<std::int32_t> mine) {
  std::vector<std::int32_t> all(mine.size() * static_cast<std::size_t>(comm.size()));
  comm.run_blocking(comm.host_channel(), {.kind = CollectiveKind::allgather,
                                          .dtype = DType::i32,
                                          .in = mine.data(),
                                          .out = all.data(),
                                          .count = all.size()});
  return all;
}

// "rank 1", "ranks 0, 2, 3" (the first 8, then how many more).
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < 8; ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) s += " and " + std::to_string(ranks.size() - 8) + " more";
  return s;
}

// Every rank's value grouped: "3 on ranks 0, 2; 2 on rank 1". Long values are shown around
// their first difference, so that two long lists differing at the end still look different.
std::string by_value(const std::vector<std::string>& values) {
  std::size_t diff = std::string::npos;  // first byte where some value differs from rank 0's
  for (const std::string& v : values) {
    std::size_t i = 0;
    while (i < v.size() && i < values[0].size() && v[i] == values[0][i]) ++i;
    if (v != values[0]) diff = std::min(diff, i);
  }
  constexpr std::size_t kShow = 80, kBefore = 24;
  const std::size_t from = diff != std::string::npos && diff > kBefore ? diff - kBefore : 0;
  std::map<std::string, std::vector<int>> groups;
  std::vector<std::string> order;
  for (std::size_t r = 0; r < values.size(); ++r) {
    const std::string& v = values[r];
    std::string shown =
        from ? "..." + v.substr(std::min(from, v.size()), kShow) : v.substr(0, kShow);
    if (v.size() > from + kShow) shown += "...";
    shown = "'" + shown + "'";
    if (!groups.contains(shown)) order.push_back(shown);
    groups[shown].push_back(static_cast<int>(r));
  }
  std::string s;
  for (const std::string& shown : order)
    s += (s.empty() ? "" : "; ") + shown + " on " + rank_list(groups[shown]);
  return s;
}

}  // namespace
}  // namespace distributed

// The check itself. A fixed-size record of hashes first (one allgather); only when it shows a
// difference, every rank (they all see it) gathers the full values to say what differs. Every
// check gathers the same record on the host channel, so two different checks meet each other
// (a rank compiling one more collective than another meets its broadcast_variables).
void detail::agree(Comm& comm, std::span<const distributed::Agreed> values,
                   const std::string& what) {
  using distributed::Agreed;
  using distributed::allgather_words;
  using distributed::by_value;
  using distributed::fnv1a;
  using distributed::kMaxAgreed;
  if (values.size() > kMaxAgreed) {
    throw UsageError(what + ": " + std::to_string(values.size()) + " values; at most " +
                     std::to_string(kMaxAgreed) + " per call");
  }
  if (comm.size() == 1) return;
  // [count, then name and value hashes (two words each) per value], zero-padded.
  std::vector<std::int32_t> rec(1 + 4 * kMaxAgreed, 0);
  rec[0] = static_cast<std::int32_t>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint64_t h[2] = {fnv1a(values[i].name), fnv1a(values[i].text)};
    std::memcpy(&rec[1 + 4 * i], h, sizeof h);
  }
  const std::size_t words = rec.size();
  const auto n = static_cast<std::size_t>(comm.size());
  const std::vector<std::int32_t> all = allgather_words(comm, rec);
  bool same = true;
  for (std::size_t r = 1; r < n && same; ++r)
    same = std::equal(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(words),
                      all.begin() + static_cast<std::ptrdiff_t>(r * words));
  if (same) return;

  // Names and values as "name\0value\0...", padded to the longest rank's length.
  std::string mine;
  auto printable = [](std::string t) {  // NUL separates the fields below
    std::replace(t.begin(), t.end(), '\0', ' ');
    return t;
  };
  for (const Agreed& v : values) mine += printable(v.name) + '\0' + printable(v.text) + '\0';
  const std::vector<std::int32_t> lengths =
      allgather_words(comm, {static_cast<std::int32_t>(mine.size())});
  const std::size_t longest =
      static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  const std::size_t w = (longest + 3) / 4;
  std::vector<std::int32_t> packed(w, 0);
  if (!mine.empty()) std::memcpy(packed.data(), mine.data(), mine.size());
  const std::vector<std::int32_t> texts = allgather_words(comm, std::move(packed));
  std::vector<std::vector<std::string>> fields(n);  // per rank: name, value, name, value, ...
  for (std::size_t r = 0; r < n; ++r) {
    const char* base = reinterpret_cast<const char*>(texts.data() + r * w);
    const std::string all_r(base, static_cast<std::size_t>(lengths[r]));
    for (std::size_t at = 0; at < all_r.size();) {
      const std::size_t end = std::min(all_r.find('\0', at), all_r.size());
      fields[r].push_back(all_r.substr(at, end - at));
      at = end + 1;
    }
  }
  std::string why;
  std::vector<std::string> names(n);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < fields[r].size(); i += 2)
      names[r] += (i ? ", " : "") + fields[r][i];
  }
  if (std::adjacent_find(names.begin(), names.end(), std::not_equal_to<>()) != names.end()) {
    why = "ranks are out of step, at different checks: " + by_value(names);
  } else {
    for (std::size_t i = 1; i < fields[0].size(); i += 2) {
      std::vector<std::string> v(n);
      for (std::size_t r = 0; r < n; ++r) v[r] = fields[r][i];
      if (std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end()) continue;
      why += (why.empty() ? "" : "; and on ") + fields[0][i - 1] + ": " + by_value(v);
    }
    why = "ranks disagree on " + why;
  }
  throw CommunicationError(what + ": " + why +
                           " (every rank of a data-parallel job must run "
                           "the same steps on equal shares)");
}

namespace distributed {
namespace {

std::string type_text(const detail::TensorType& t) {
  return std::string(dtype_name(t.dtype)) + " " + t.shape.str();
}

}  // namespace

void check_agreement(const Communicator& comm, std::span<const Agreed> values) {
  detail::agree(*detail::comm_of(comm), values, "check_agreement");
}

void broadcast_variables(CompiledGraph& cg, const Communicator& comm, int root) {
  detail::check_root(*detail::comm_of(comm), root, "broadcast_variables");
  detail::Executable& exe = detail::executable_of(cg);
  const detail::Plan& p = exe.plan();
  if (comm.size() > 1) {
    // Replicas of different graphs would exchange mismatched buffers below and at every step
    // (an MPI error at best, a hang until the collective deadline at worst): compare first.
    auto list = [&](const std::vector<std::uint32_t>& ids) {
      std::string s;
      for (std::uint32_t i : ids) {
        const detail::PlanNode& node = p.nodes[i];
        s += (s.empty() ? "" : ", ") + (node.name.empty() ? node.label : node.name) + " " +
             type_text(node.type);
      }
      return s;
    };
    std::vector<std::uint32_t> collectives;
    for (std::uint32_t i = 0; i < p.nodes.size(); ++i) {
      if (detail::op_def(p.nodes[i].op).communication) collectives.push_back(i);
    }
    std::string coll;
    for (std::uint32_t i : collectives) {
      coll += (coll.empty() ? "" : ", ") + std::string(detail::op_name(p.nodes[i].op)) + " " +
              type_text(p.nodes[i].type);
    }
    const Agreed graph[] = {{"the graph's variables", list(p.variables)},
                            {"the graph's inputs", list(p.inputs)},
                            {"the graph's collectives", coll}};
    detail::agree(*detail::comm_of(comm), graph, "broadcast_variables");
  }
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
