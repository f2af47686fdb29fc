// SPDX-License-Identifier: Apache-2.0
#include "onnx/checkpoint_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <set>

#include "hetgraph/error.hpp"
#include "hetgraph/tensor.hpp"
#include "util/atomic_file.hpp"

namespace hetgraph::detail {

namespace {

constexpr char kMagic[8] = {'H', 'G', 'C', 'K', 'P', 'T', '\0', '\n'};
constexpr char kEnd[4] = {'H', 'G', 'N', 'D'};
constexpr int kMaxRank = Shape::kMaxRank;  // files of rank-4 days read alike

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

/// Reads a checkpoint front to back, checking each field against what is left: from memory
/// (everything, checksums included) or from a file field by field (the layout only: the
/// data is skipped, so a file is judged by its header before much of it is read).
class Reader {
 public:
  Reader(const std::string& b, const std::string& path, const CheckpointCheck* check)
      : mem_(b.data()), size_(b.size()), path_(path), check_(check) {}
  Reader(const RegularFile& f, const std::string& path, const CheckpointCheck* check)
      : file_(&f), size_(f.size()), path_(path), check_(check) {}

  // The whole checkpoint, in file order: header, variables, trailer. Each step checks its
  // fields as it reads them, so a damaged file fails at its first bad field.
  std::vector<CheckpointEntry> parse() {
    const std::uint32_t count = header();
    std::vector<CheckpointEntry> out;
    std::set<std::string> seen;
    for (std::uint32_t k = 0; k < count; ++k) {
      CheckpointEntry e;
      const std::string var = name(k, seen, e);
      layout(var, e);
      data(var, element_count(var, e.dims), e);
      out.push_back(std::move(e));
    }
    trailer();
    return out;
  }

 private:
  // The header: magic, version and the variable count (returned). The file must be long
  // enough for a header and a trailer before any field is trusted.
  std::uint32_t header() {
    constexpr std::uint64_t kHeader = 8 + 4 + 4, kTrailer = 4 + 4;
    char magic[8] = {};
    if (size_ >= 8) fetch(magic, 8);
    if (size_ < 8 || std::memcmp(magic, kMagic, 8) != 0)
      fail("not a hetgraph checkpoint (no HGCKPT header)");
    if (size_ < kHeader + kTrailer) fail("truncated: the file ends inside its header");
    at_ = 8;
    const auto version = get<std::uint32_t>("the header");
    if (version != kCheckpointVersion) {
      fail("checkpoint format version " + std::to_string(version) +
           "; this hetgraph reads version " + std::to_string(kCheckpointVersion));
    }
    return get<std::uint32_t>("the header");
  }

  // Variable k's name, into e.name: bounded in length and unique (`seen` holds the names
  // before it). Returns how errors name the variable from here on.
  std::string name(std::uint32_t k, std::set<std::string>& seen, CheckpointEntry& e) {
    const std::string where = "variable " + std::to_string(k);
    const auto len = get<std::uint32_t>(where);
    if (len > kMaxCheckpointName) {
      fail(where + " has a name of " + std::to_string(len) + " bytes (at most " +
           std::to_string(kMaxCheckpointName) + ")");
    }
    need(len, where);
    e.name.resize(len);
    fetch(e.name.data(), len);
    at_ += len;
    const std::string var = "variable '" + printable(e.name) + "'";
    if (!seen.insert(e.name).second) fail(var + " appears twice");
    return var;
  }

  // The variable's element type, rank and dims (a 16-bit field, written 0, is skipped), into
  // e.f32 and e.dims.
  void layout(const std::string& var, CheckpointEntry& e) {
    const auto dtype = get<std::uint8_t>(var);
    const auto rank = get<std::uint8_t>(var);
    get<std::uint16_t>(var);
    if (dtype > 1) fail(var + " has an unknown element type " + std::to_string(dtype));
    if (rank > kMaxRank) fail(var + " has rank " + std::to_string(rank));
    e.f32 = dtype == 0;
    for (int d = 0; d < rank; ++d) {
      const auto v = get<std::int64_t>(var);
      if (v < 0 || v > (std::int64_t{1} << 40))
        fail(var + " has an impossible dim " + std::to_string(v));
      e.dims.push_back(v);
    }
  }

  // The element count of `dims`, checked dim by dim before anything wraps: a product past
  // 2^61 elements (a tensor's limit) would wrap its byte count to a small number.
  std::uint64_t element_count(const std::string& var, const std::vector<std::int64_t>& dims) {
    std::uint64_t numel = 1;
    bool overflow = false;
    for (std::int64_t v : dims)
      overflow = overflow || __builtin_mul_overflow(numel, static_cast<std::uint64_t>(v), &numel);
    if ((overflow || numel > (std::uint64_t{1} << 61)) &&
        std::find(dims.begin(), dims.end(), 0) == dims.end()) {
      fail(var + " has dims " + dims_text(dims) +
           ": more than 2^61 elements, more than a tensor may hold");
    }
    if (overflow) numel = 0;  // a zero dim: no elements
    return numel;
  }

  // The variable's data: its length (4 bytes per element) and CRC-32, the caller's check of
  // the entry, then the data itself (its place into e.offset; its CRC checked from memory).
  void data(const std::string& var, std::uint64_t numel, CheckpointEntry& e) {
    const auto data_len = get<std::uint64_t>(var);
    const auto data_crc = get<std::uint32_t>(var);
    if (data_len != numel * 4) {
      fail(var + " declares " + std::to_string(data_len) + " data bytes for " +
           std::to_string(numel) + " elements");
    }
    e.bytes = static_cast<std::size_t>(data_len);
    // What the caller expects of the variable, before its data is read.
    if (check_ != nullptr && *check_) (*check_)(e);
    need(data_len, var);
    e.offset = static_cast<std::size_t>(at_);
    if (mem_ != nullptr && crc(0, mem_ + at_, e.bytes) != data_crc)
      fail(var + " is corrupt: its data fails its CRC-32");
    at_ += e.bytes;
  }

  // The trailer: the CRC-32 of everything before it, the end marker, and nothing after.
  void trailer() {
    const std::uint64_t body = at_;
    const auto file_crc = get<std::uint32_t>("the trailer");
    need(4, "the trailer");
    char end[4];
    fetch(end, 4);
    if (std::memcmp(end, kEnd, 4) != 0) fail("corrupt: no end marker after the last variable");
    at_ += 4;
    if (at_ != size_)
      fail("corrupt: " + std::to_string(size_ - at_) + " bytes after the end marker");
    if (mem_ != nullptr && crc(0, mem_, static_cast<std::size_t>(body)) != file_crc)
      fail("corrupt: the file fails its CRC-32");
  }

  [[noreturn]] void fail(const std::string& why) const { throw DataError(path_ + ": " + why); }
  // A name from a damaged file, safe to print.
  static std::string printable(const std::string& s) {
    std::string out;
    for (char c : s.substr(0, 200))
      out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) ? '?' : c;
    return out;
  }
  static std::string dims_text(const std::vector<std::int64_t>& dims) {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }
  void need(std::uint64_t n, const std::string& where) const {
    if (n > size_ - at_) fail("truncated: the file ends inside " + where);
  }
  // n bytes at at_ (need() checked them).
  void fetch(void* dst, std::size_t n) const {
    if (mem_ != nullptr)
      std::memcpy(dst, mem_ + at_, n);
    else
      file_->read_at(at_, dst, n);
  }
  template <class T>
  T get(const std::string& where) {
    need(sizeof(T), where);
    unsigned char b[sizeof(T)];
    fetch(b, sizeof(T));
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    at_ += sizeof(T);
    return static_cast<T>(v);
  }

  const char* mem_ = nullptr;
  const RegularFile* file_ = nullptr;
  std::uint64_t size_ = 0;
  const std::string& path_;
  const CheckpointCheck* check_ = nullptr;
  std::uint64_t at_ = 0;
};

}  // namespace

std::vector<CheckpointEntry> parse_checkpoint(const std::string& bytes, const std::string& path,
                                              const CheckpointCheck& check) {
  return Reader(bytes, path, &check).parse();
}

CheckpointFile read_checkpoint(const std::string& path, const CheckpointCheck& check) {
  const RegularFile f(path, "the checkpoint");
  // The header and every variable's layout first, from the file: /dev/zero, a huge file or
  // one of another graph is refused before it is read whole.
  Reader(f, path, &check).parse();
  CheckpointFile out;
  try {
    out.bytes.resize(static_cast<std::size_t>(f.size()));
  } catch (const std::bad_alloc&) {
    throw DataError(path + ": cannot hold the checkpoint's " + std::to_string(f.size()) +
                    " bytes in memory");
  }
  f.read_at(0, out.bytes.data(), out.bytes.size());
  // Everything again on the bytes held, checksums included (the file may have changed).
  out.entries = Reader(out.bytes, path, &check).parse();
  return out;
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
