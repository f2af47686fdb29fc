// IDX reading through zlib's gz* API, which reads gzip'd and plain files alike.
#include <omp.h>
#include <zlib.h>

#include <filesystem>
#include <memory>

#include "hetgraph/data.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::data {

namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw DataError(path + ": no such file");
  }
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw DataError(path + ": cannot open");
  std::vector<std::uint8_t> out;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const int n = gzread(f.get(), chunk, sizeof(chunk));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f.get(), &code);
      throw DataError(path + ": corrupt gzip data (" + std::string(msg ? msg : "zlib error") + ")");
    }
    if (n == 0) break;
    out.insert(out.end(), chunk, chunk + n);
  }
  // gzread stops quietly at a truncated gzip stream; gzerror tells.
  int code = 0;
  const char* msg = gzerror(f.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    throw DataError(path + ": corrupt or truncated gzip data (" +
                    std::string(msg ? msg : "zlib error") + ")");
  }
  return out;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}

}  // namespace

IdxFile read_idx(const std::string& path, std::uint32_t expected_magic) {
  const std::vector<std::uint8_t> raw = read_all(path);
  if (raw.size() < 4)
    throw DataError(path + ": truncated: no IDX header (" + std::to_string(raw.size()) + " bytes)");
  IdxFile f;
  f.magic = be32(raw.data());
  if (f.magic != expected_magic) {
    throw DataError(path + ": magic number " + std::to_string(f.magic) + ", expected " +
                    std::to_string(expected_magic) +
                    (expected_magic == kIdxImages ? " (images)" : " (labels)"));
  }
  const std::size_t ndims = f.magic & 0xff;
  const std::size_t header = 4 + 4 * ndims;
  if (raw.size() < header)
    throw DataError(path + ": truncated: header needs " + std::to_string(header) + " bytes");
  std::size_t count = 1;
  for (std::size_t d = 0; d < ndims; ++d) {
    const std::uint32_t v = be32(raw.data() + 4 + 4 * d);
    if (v == 0) throw DataError(path + ": dimension " + std::to_string(d) + " is 0");
    f.dims.push_back(v);
    count *= v;
  }
  const std::size_t data = raw.size() - header;
  if (data != count) {
    throw DataError(path + ": " + (data < count ? "truncated" : "trailing data") +
                    ": its dims need " + std::to_string(count) + " data bytes, the file has " +
                    std::to_string(data));
  }
  f.bytes.assign(raw.begin() + static_cast<std::ptrdiff_t>(header), raw.end());
  return f;
}

void Split::images(std::int64_t first, std::int64_t n, std::span<float> out, int threads) const {
  if (first < 0 || n < 0 || first + n > count) {
    throw DataError("images [" + std::to_string(first) + ", " + std::to_string(first + n) +
                    ") outside [0, " + std::to_string(count) + ")");
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

Split load_split(const std::string& dir, const std::string& prefix, int classes) {
  const std::string ip = find_file(dir, prefix + "-images", "idx3-ubyte");
  const std::string lp = find_file(dir, prefix + "-labels", "idx1-ubyte");
  const IdxFile images = read_idx(ip, kIdxImages);
  const IdxFile labels = read_idx(lp, kIdxLabels);
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(ip + " holds " + std::to_string(images.dims[0]) + " images but " + lp +
                    " holds " + std::to_string(labels.dims[0]) + " labels");
  }
  Split s;
  s.count = images.dims[0];
  s.rows = images.dims[1];
  s.cols = images.dims[2];
  s.pixels = images.bytes;
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

Mnist load_mnist(const std::string& dir, int classes) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw DataError(dir + ": no such directory");
  Mnist m;
  m.classes = classes;
  m.train = load_split(dir, "train", classes);
  m.test = load_split(dir, "t10k", classes);
  if (m.train.rows != m.test.rows || m.train.cols != m.test.cols) {
    throw DataError(dir + ": train images are " + std::to_string(m.train.rows) + "x" +
                    std::to_string(m.train.cols) + " but test images " +
                    std::to_string(m.test.rows) + "x" + std::to_string(m.test.cols));
  }
  return m;
}

}  // namespace hetgraph::data
