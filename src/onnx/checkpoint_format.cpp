#include "onnx/checkpoint_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "hetgraph/error.hpp"

namespace hetgraph::detail {

namespace {

constexpr char kMagic[8] = {'H', 'G', 'C', 'K', 'P', 'T', '\0', '\n'};
constexpr char kEnd[4] = {'H', 'G', 'N', 'D'};
constexpr int kMaxRank = 4;

std::uint32_t crc(std::uint32_t c, const void* p, std::size_t n) {
  // zlib's crc32 takes 32-bit lengths: big buffers go in pieces.
  const auto* b = static_cast<const Bytef*>(p);
  while (n > 0) {
    const std::size_t k = std::min<std::size_t>(n, 1u << 30);
    c = static_cast<std::uint32_t>(::crc32(c, b, static_cast<uInt>(k)));
    b += k;
    n -= k;
  }
  return c;
}

template <class T>
void put_le(std::string& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xFF));
}

/// Reads the file front to back, checking each field against what is left.
class Reader {
 public:
  Reader(const std::string& b, const std::string& path) : b_(b), path_(path) {}

  std::vector<CheckpointEntry> parse() {
    constexpr std::size_t kHeader = 8 + 4 + 4, kTrailer = 4 + 4;
    if (b_.size() < 8 || std::memcmp(b_.data(), kMagic, 8) != 0)
      fail("not a hetgraph checkpoint (no HGCKPT header)");
    if (b_.size() < kHeader + kTrailer) fail("truncated: the file ends inside its header");
    at_ = 8;
    const auto version = get<std::uint32_t>("the header");
    if (version != kCheckpointVersion) {
      fail("checkpoint format version " + std::to_string(version) +
           "; this hetgraph reads version " + std::to_string(kCheckpointVersion));
    }
    const auto count = get<std::uint32_t>("the header");
    std::vector<CheckpointEntry> out;
    std::set<std::string> seen;
    for (std::uint32_t k = 0; k < count; ++k) {
      const std::string where = "variable " + std::to_string(k);
      CheckpointEntry e;
      const auto len = get<std::uint32_t>(where);
      need(len, where);
      e.name.assign(b_.data() + at_, len);
      at_ += len;
      const std::string var = "variable '" + printable(e.name) + "'";
      if (!seen.insert(e.name).second) fail(var + " appears twice");
      const auto dtype = get<std::uint8_t>(var);
      const auto rank = get<std::uint8_t>(var);
      get<std::uint16_t>(var);
      if (dtype > 1) fail(var + " has an unknown element type " + std::to_string(dtype));
      if (rank > kMaxRank) fail(var + " has rank " + std::to_string(rank));
      e.f32 = dtype == 0;
      std::uint64_t numel = 1;
      for (int d = 0; d < rank; ++d) {
        const auto v = get<std::int64_t>(var);
        if (v < 0 || v > (std::int64_t{1} << 40))
          fail(var + " has an impossible dim " + std::to_string(v));
        e.dims.push_back(v);
        numel =
            std::min<std::uint64_t>(numel * static_cast<std::uint64_t>(v), std::uint64_t{1} << 62);
      }
      const auto data_len = get<std::uint64_t>(var);
      const auto data_crc = get<std::uint32_t>(var);
      if (data_len != numel * 4) {
        fail(var + " declares " + std::to_string(data_len) + " data bytes for " +
             std::to_string(numel) + " elements");
      }
      need(data_len, var);
      e.offset = at_;
      e.bytes = static_cast<std::size_t>(data_len);
      if (crc(0, b_.data() + at_, e.bytes) != data_crc)
        fail(var + " is corrupt: its data fails its CRC-32");
      at_ += e.bytes;
      out.push_back(std::move(e));
    }
    const std::size_t body = at_;
    const auto file_crc = get<std::uint32_t>("the trailer");
    need(4, "the trailer");
    if (std::memcmp(b_.data() + at_, kEnd, 4) != 0)
      fail("corrupt: no end marker after the last variable");
    at_ += 4;
    if (at_ != b_.size())
      fail("corrupt: " + std::to_string(b_.size() - at_) + " bytes after the end marker");
    if (crc(0, b_.data(), body) != file_crc) fail("corrupt: the file fails its CRC-32");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw DataError(path_ + ": " + why); }
  // A name from a damaged file, safe to print.
  static std::string printable(const std::string& s) {
    std::string out;
    for (char c : s.substr(0, 200))
      out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) ? '?' : c;
    return out;
  }
  void need(std::uint64_t n, const std::string& where) const {
    if (n > b_.size() - at_) fail("truncated: the file ends inside " + where);
  }
  template <class T>
  T get(const std::string& where) {
    need(sizeof(T), where);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(b_[at_ + i])) << (8 * i);
    at_ += sizeof(T);
    return static_cast<T>(v);
  }

  const std::string& b_;
  const std::string& path_;
  std::size_t at_ = 0;
};

}  // namespace

std::vector<CheckpointEntry> parse_checkpoint(const std::string& bytes, const std::string& path) {
  return Reader(bytes, path).parse();
}

void CheckpointWriter::emit(const void* data, std::size_t n) {
  crc_ = crc(crc_, data, n);
  write_(data, n);
}

void CheckpointWriter::header(std::uint32_t count) {
  std::string h(kMagic, 8);
  put_le<std::uint32_t>(h, kCheckpointVersion);
  put_le<std::uint32_t>(h, count);
  emit(h.data(), h.size());
}

void CheckpointWriter::entry(const std::string& name, bool f32,
                             const std::vector<std::int64_t>& dims, const void* data,
                             std::size_t bytes) {
  std::string e;
  put_le<std::uint32_t>(e, static_cast<std::uint32_t>(name.size()));
  e += name;
  put_le<std::uint8_t>(e, f32 ? 0 : 1);
  put_le<std::uint8_t>(e, static_cast<std::uint8_t>(dims.size()));
  put_le<std::uint16_t>(e, 0);
  for (std::int64_t d : dims) put_le<std::int64_t>(e, d);
  put_le<std::uint64_t>(e, bytes);
  put_le<std::uint32_t>(e, crc(0, data, bytes));
  emit(e.data(), e.size());
  emit(data, bytes);
}

void CheckpointWriter::trailer() {
  std::string t;
  put_le<std::uint32_t>(t, crc_);
  write_(t.data(), t.size());
  write_(kEnd, 4);
}

}  // namespace hetgraph::detail
