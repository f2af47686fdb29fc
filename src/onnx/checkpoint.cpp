// CompiledGraph::save / load: every variable of a compiled graph in one checkpoint file.
//
// Format, version 1 (all integers little-endian):
//   magic        8 bytes   "HGCKPT\0\n"
//   version      u32       1
//   count        u32       number of variables
//   count times:
//     name_len   u32       then name_len bytes of the variable's name (UTF-8)
//     dtype      u8        0 float32, 1 int32
//     rank       u8        0..4, then 2 zero bytes
//     dims       i64 x rank
//     data_len   u64       4 x elements
//     data_crc   u32       CRC-32 (zlib's) of the data
//     data       data_len bytes, row-major
//   file_crc     u32       CRC-32 of every byte before it
//   end          4 bytes   "HGND"
// Variables are written in the compiled plan's order; load() matches them by name.
#include <zlib.h>

#include <cstring>
#include <map>
#include <set>

#include "common/executable.hpp"
#include "hetgraph/compiler.hpp"
#include "hetgraph/error.hpp"
#include "onnx/atomic_file.hpp"

namespace hetgraph {

namespace {

constexpr char kMagic[8] = {'H', 'G', 'C', 'K', 'P', 'T', '\0', '\n'};
constexpr char kEnd[4] = {'H', 'G', 'N', 'D'};
constexpr std::uint32_t kVersion = 1;

std::uint32_t crc(std::uint32_t c, const void* p, std::size_t n) {
  // zlib's crc32 takes 32-bit lengths: feed big buffers in pieces.
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

/// Reads a checkpoint file, checking its structure as it goes.
class Reader {
 public:
  Reader(const std::string& path, std::string bytes) : path_(path), b_(std::move(bytes)) {}

  struct Entry {
    std::string name;
    DType dtype = DType::f32;
    Shape shape;
    std::size_t offset = 0, bytes = 0;  // of the data in the file
  };

  std::vector<Entry> parse() {
    constexpr std::size_t kHeader = 8 + 4 + 4, kTrailer = 4 + 4;
    if (b_.size() < 8 || std::memcmp(b_.data(), kMagic, 8) != 0)
      fail("not a hetgraph checkpoint (no HGCKPT header)");
    if (b_.size() < kHeader + kTrailer) fail("truncated: the file ends inside its header");
    at_ = 8;
    const auto version = get<std::uint32_t>("the header");
    if (version != kVersion) {
      fail("checkpoint format version " + std::to_string(version) +
           "; this hetgraph reads version " + std::to_string(kVersion));
    }
    const auto count = get<std::uint32_t>("the header");
    std::vector<Entry> out;
    std::set<std::string> seen;
    for (std::uint32_t k = 0; k < count; ++k) {
      const std::string where = "variable " + std::to_string(k);
      Entry e;
      const auto len = get<std::uint32_t>(where);
      need(len, where);
      e.name.assign(b_.data() + at_, len);
      at_ += len;
      const std::string var = "variable '" + e.name + "'";
      if (!seen.insert(e.name).second) fail(var + " appears twice");
      const auto dtype = get<std::uint8_t>(var);
      const auto rank = get<std::uint8_t>(var);
      get<std::uint16_t>(var);
      if (dtype > 1) fail(var + " has an unknown element type " + std::to_string(dtype));
      if (rank > Shape::kMaxRank) fail(var + " has rank " + std::to_string(rank));
      e.dtype = dtype == 0 ? DType::f32 : DType::i32;
      std::vector<std::int64_t> dims;
      for (int d = 0; d < rank; ++d) {
        const auto v = get<std::int64_t>(var);
        if (v < 0 || v > (std::int64_t{1} << 40))
          fail(var + " has an impossible dim " + std::to_string(v));
        dims.push_back(v);
      }
      e.shape = Shape(std::span<const std::int64_t>(dims));
      const auto data_len = get<std::uint64_t>(var);
      const auto data_crc = get<std::uint32_t>(var);
      if (data_len != static_cast<std::uint64_t>(e.shape.numel()) * 4) {
        fail(var + " of shape " + e.shape.str() + " declares " + std::to_string(data_len) +
             " data bytes");
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

  const char* data(const Entry& e) const { return b_.data() + e.offset; }
  [[noreturn]] void fail(const std::string& why) const { throw DataError(path_ + ": " + why); }

 private:
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

  std::string path_;
  std::string b_;
  std::size_t at_ = 0;
};

}  // namespace

void CompiledGraph::save(const std::string& path) const {
  detail::Executable& exe = detail::executable_of(*this);
  const detail::Plan& p = exe.plan();
  detail::write_file_atomically(path, [&](const auto& write) {
    std::uint32_t file_crc = 0;
    auto emit = [&](const void* data, std::size_t n) {
      file_crc = crc(file_crc, data, n);
      write(data, n);
    };
    std::string head(kMagic, 8);
    put_le<std::uint32_t>(head, kVersion);
    put_le<std::uint32_t>(head, static_cast<std::uint32_t>(p.variables.size()));
    emit(head.data(), head.size());
    std::vector<char> data;
    for (std::uint32_t i : p.variables) {
      const detail::PlanNode& n = p.nodes[i];
      const auto count = static_cast<std::size_t>(n.type.shape.numel());
      data.resize(count * 4);
      exe.read(i, data.data(), count, n.type.dtype, "save");
      std::string e;
      put_le<std::uint32_t>(e, static_cast<std::uint32_t>(n.name.size()));
      e += n.name;
      put_le<std::uint8_t>(e, n.type.dtype == DType::f32 ? 0 : 1);
      put_le<std::uint8_t>(e, static_cast<std::uint8_t>(n.type.shape.rank()));
      put_le<std::uint16_t>(e, 0);
      for (std::int64_t d : n.type.shape.dims()) put_le<std::int64_t>(e, d);
      put_le<std::uint64_t>(e, data.size());
      put_le<std::uint32_t>(e, crc(0, data.data(), data.size()));
      emit(e.data(), e.size());
      emit(data.data(), data.size());
    }
    std::string tail;
    put_le<std::uint32_t>(tail, file_crc);
    write(tail.data(), tail.size());
    write(kEnd, 4);
  });
}

void CompiledGraph::load(const std::string& path) {
  detail::Executable& exe = detail::executable_of(*this);
  const detail::Plan& p = exe.plan();
  Reader r(path, detail::read_file(path, "the checkpoint"));
  const auto entries = r.parse();
  // Everything is checked before any variable is written.
  std::map<std::string, std::uint32_t> vars;
  for (std::uint32_t i : p.variables) vars[p.nodes[i].name] = i;
  std::vector<std::pair<const Reader::Entry*, std::uint32_t>> writes;
  for (const auto& e : entries) {
    auto it = vars.find(e.name);
    if (it == vars.end())
      r.fail("variable '" + e.name + "' is not a variable of the compiled graph");
    const detail::PlanNode& n = p.nodes[it->second];
    if (n.type.shape != e.shape || n.type.dtype != e.dtype) {
      r.fail("variable '" + e.name + "' is " + std::string(dtype_name(e.dtype)) + " " +
             e.shape.str() + " in the file, " + std::string(dtype_name(n.type.dtype)) + " " +
             n.type.shape.str() + " in the graph");
    }
    writes.push_back({&e, it->second});
    vars.erase(it);
  }
  if (!vars.empty()) {
    std::string missing;
    for (const auto& [name, i] : vars) missing += (missing.empty() ? "'" : ", '") + name + "'";
    r.fail("the checkpoint lacks variable " + missing + " of the compiled graph");
  }
  for (const auto& [e, i] : writes) {
    exe.write(i, r.data(*e), static_cast<std::size_t>(e->shape.numel()), e->dtype, "load");
  }
}

}  // namespace hetgraph
