// SPDX-License-Identifier: Apache-2.0
// IDX reading through zlib's gz* API, which reads gzip'd and plain files alike.
#include <omp.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>

#include "hetgraph/data.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::data {

namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}

// An IDX file read through zlib's gz* API, which reads gzip'd and plain files alike. Reads
// stop where asked: the header is checked before any data is read, and the data is inflated
// in chunks up to what the header promises, so a gzip bomb costs one byte past that.
class IdxReader {
 public:
  explicit IdxReader(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path_, ec)) throw DataError(path_ + ": no such file");
    f_.reset(gzopen(path_.c_str(), "rb"));
    if (!f_) throw DataError(path_ + ": cannot open");
    gzbuffer(f_.get(), 1 << 17);
  }

  // Reads up to n bytes; fewer only at the end of the data. Throws on corrupt gzip data.
  std::size_t read(void* dst, std::size_t n) {
    auto* out = static_cast<std::uint8_t*>(dst);
    std::size_t got = 0;
    while (got < n) {
      const unsigned ask = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 20));
      const int r = gzread(f_.get(), out + got, ask);
      if (r < 0) fail("corrupt gzip data");
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    return got;
  }

  // After a short read: gzread stops quietly at a truncated gzip stream; gzerror tells.
  void check_stream() {
    int code = 0;
    gzerror(f_.get(), &code);
    if (code != Z_OK && code != Z_STREAM_END) fail("corrupt or truncated gzip data");
  }

  // The file is plain (not gzip'd); valid once something was read.
  bool plain() { return gzdirect(f_.get()) == 1; }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what) {
    int code = 0;
    const char* msg = gzerror(f_.get(), &code);
    throw DataError(path_ + ": " + what + " (" + std::string(msg && *msg ? msg : "zlib error") +
                    ")");
  }

  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> f_;
};

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string s;
  for (std::int64_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// The data bytes, read in growing chunks: memory follows what the file really holds, never
// only what the header claims.
std::vector<std::uint8_t> read_data(IdxReader& in, std::size_t header, std::size_t count) {
  const std::string& path = in.path();
  if (in.plain()) {  // the size is known: check it before reading
    std::error_code ec;
    const auto size = static_cast<std::size_t>(std::filesystem::file_size(path, ec));
    if (!ec && size - header != count) {
      throw DataError(path + ": " + (size - header < count ? "truncated" : "trailing data") +
                      ": its dims need " + std::to_string(count) + " data bytes, the file has " +
                      std::to_string(size - header));
    }
  }
  std::vector<std::uint8_t> data;
  try {
    data.reserve(std::min<std::size_t>(count, 64u << 20));
    std::size_t have = 0;
    while (have < count) {
      const std::size_t chunk =
          std::min<std::size_t>(count - have, std::max<std::size_t>(have, 1u << 20));
      data.resize(have + chunk);
      const std::size_t got = in.read(data.data() + have, chunk);
      have += got;
      if (got < chunk) {
        in.check_stream();
        throw DataError(path + ": truncated: its dims need " + std::to_string(count) +
                        " data bytes, the file has " + std::to_string(have));
      }
    }
  } catch (const std::bad_alloc&) {
    throw DataError(path + ": out of memory holding its " + std::to_string(count) + " data bytes");
  }
  std::uint8_t extra = 0;
  if (in.read(&extra, 1) != 0) {
    throw DataError(path + ": trailing data: its dims need " + std::to_string(count) +
                    " data bytes, the file has more");
  }
  in.check_stream();
  return data;
}

}  // namespace

namespace {

// Keeps the records of `shard` (in place, in order) and returns how many there are.
std::int64_t keep_shard(const std::string& path, std::vector<std::uint8_t>& bytes,
                        std::int64_t count, const Shard& shard) {
  if (shard.size < 1 || shard.rank < 0 || shard.rank >= shard.size) {
    throw DataError(path + ": shard " + std::to_string(shard.rank) + " of " +
                    std::to_string(shard.size) + ": the rank must lie in [0, size)");
  }
  if (shard.size == 1 && shard.block == 0) return count;
  const std::size_t record = bytes.size() / static_cast<std::size_t>(count);
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  // [first, last) records kept
  if (shard.block == 0) {
    if (count < shard.size) {
      throw DataError(path + ": " + std::to_string(count) + " records cannot be shared by " +
                      std::to_string(shard.size) + " ranks");
    }
    ranges.push_back({count * shard.rank / shard.size, count * (shard.rank + 1) / shard.size});
  } else {
    if (shard.block < 0 || shard.block % shard.size != 0) {
      throw DataError(path + ": blocks of " + std::to_string(shard.block) +
                      " records cannot be cut into " + std::to_string(shard.size) + " equal parts");
    }
    if (count < shard.block) {
      throw DataError(path + ": " + std::to_string(count) + " records do not fill a block of " +
                      std::to_string(shard.block));
    }
    const std::int64_t part = shard.block / shard.size;
    for (std::int64_t b = 0; b + shard.block <= count; b += shard.block)
      ranges.push_back({b + shard.rank * part, b + (shard.rank + 1) * part});
  }
  std::size_t out = 0;
  std::int64_t kept = 0;
  for (const auto& [first, last] : ranges) {
    const std::size_t n = static_cast<std::size_t>(last - first) * record;
    std::memmove(bytes.data() + out, bytes.data() + static_cast<std::size_t>(first) * record, n);
    out += n;
    kept += last - first;
  }
  bytes.resize(out);
  bytes.shrink_to_fit();
  return kept;
}

}  // namespace

IdxFile read_idx(const std::string& path, std::uint32_t expected_magic, const Shard& shard) {
  IdxReader in(path);
  std::uint8_t word[4];
  if (const std::size_t n = in.read(word, 4); n < 4) {
    in.check_stream();
    throw DataError(path + ": truncated: no IDX header (" + std::to_string(n) + " bytes)");
  }
  IdxFile f;
  f.magic = be32(word);
  if (f.magic != expected_magic) {
    throw DataError(path + ": magic number " + std::to_string(f.magic) + ", expected " +
                    std::to_string(expected_magic) +
                    (expected_magic == kIdxImages ? " (images)" : " (labels)"));
  }
  const std::size_t ndims = f.magic & 0xff;
  const std::size_t header = 4 + 4 * ndims;
  // The product of the dims must be a size this process can hold (it is also the data's
  // length): checked before it is multiplied, so it cannot wrap.
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max());
  std::uint64_t count = 1;
  bool overflow = false;
  for (std::size_t d = 0; d < ndims; ++d) {
    if (in.read(word, 4) < 4) {
      in.check_stream();
      throw DataError(path + ": truncated: header needs " + std::to_string(header) + " bytes");
    }
    const std::uint32_t v = be32(word);
    if (v == 0) throw DataError(path + ": dimension " + std::to_string(d) + " is 0");
    f.dims.push_back(v);
    overflow = overflow || count > kMax / v;
    if (!overflow) count *= v;
  }
  if (overflow) {
    throw DataError(path + ": dimensions " + dims_text(f.dims) +
                    " overflow: their product is more than 2^63-1 bytes");
  }
  f.bytes = read_data(in, header, static_cast<std::size_t>(count));
  f.records = keep_shard(path, f.bytes, f.dims[0], shard);
  return f;
}

void Split::images(std::int64_t first, std::int64_t n, std::span<float> out, int threads) const {
  if (first < 0 || n < 0 || first > count || n > count - first) {  // no overflow
    throw DataError("images [" + std::to_string(first) + ", " + std::to_string(first) + " + " +
                    std::to_string(n) + ") outside [0, " + std::to_string(count) + ")");
  }
  const std::size_t len = static_cast<std::size_t>(n * image_size());
  if (out.size() != len) {
    throw DataError("images: output holds " + std::to_string(out.size()) + " floats, " +
                    std::to_string(n) + " images need " + std::to_string(len));
  }
  const std::uint8_t* src = pixels.data() + first * image_size();
  float* dst = out.data();
  // Memory-bound: both cores help for a batch (a model's threads have just read `out`, so
  // parts of it sit in each core's cache).
  const int team = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for simd schedule(static) num_threads(team) if (len >= (1u << 16) && team > 1)
  for (std::size_t i = 0; i < len; ++i) dst[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
}

namespace {

std::string find_file(const std::string& dir, const std::string& stem, const std::string& kind) {
  // train-images-idx3-ubyte, train-images.idx3-ubyte, each with or without .gz
  std::vector<std::string> tried;
  for (const char* sep : {"-", "."}) {
    for (const char* ext : {"", ".gz"}) {
      const std::string p = dir + "/" + stem + sep + kind + ext;
      if (std::filesystem::exists(p)) return p;
      tried.push_back(p);
    }
  }
  std::string msg = "MNIST data not found: none of";
  for (const auto& t : tried) msg += " " + t;
  throw DataError(msg + " exists");
}

Split load_split(const std::string& dir, const std::string& prefix, int classes,
                 const Shard& shard) {
  const std::string ip = find_file(dir, prefix + "-images", "idx3-ubyte");
  const std::string lp = find_file(dir, prefix + "-labels", "idx1-ubyte");
  IdxFile images = read_idx(ip, kIdxImages, shard);
  const IdxFile labels = read_idx(lp, kIdxLabels, shard);
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(ip + " holds " + std::to_string(images.dims[0]) + " images but " + lp +
                    " holds " + std::to_string(labels.dims[0]) + " labels");
  }
  Split s;
  s.count = images.records;
  s.rows = images.dims[1];
  s.cols = images.dims[2];
  s.pixels = std::move(images.bytes);
  s.labels.resize(labels.bytes.size());
  for (std::size_t i = 0; i < labels.bytes.size(); ++i) {
    if (labels.bytes[i] >= classes) {
      throw DataError(lp + ": label " + std::to_string(labels.bytes[i]) + " at index " +
                      std::to_string(i) + " is outside [0, " + std::to_string(classes) + ")");
    }
    s.labels[i] = labels.bytes[i];
  }
  return s;
}

}  // namespace

Mnist load_mnist(const std::string& dir, int classes, const Shard& train, const Shard& test) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw DataError(dir + ": no such directory");
  Mnist m;
  m.classes = classes;
  m.train = load_split(dir, "train", classes, train);
  m.test = load_split(dir, "t10k", classes, test);
  if (m.train.rows != m.test.rows || m.train.cols != m.test.cols) {
    throw DataError(dir + ": train images are " + std::to_string(m.train.rows) + "x" +
                    std::to_string(m.train.cols) + " but test images " +
                    std::to_string(m.test.rows) + "x" + std::to_string(m.test.cols));
  }
  return m;
}

}  // namespace hetgraph::data
