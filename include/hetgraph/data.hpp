// Loading MNIST-format data sets (IDX files, plain or gzip'd).
//
//   auto mnist = hetgraph::data::load_mnist("/usr/share/datasets/fashion-mnist");
//   mnist.train.images(0, 500, cg.mapped_input("x"));   // images 0..499 as floats in [0, 1]
//   mnist.train.labels;                                  // count class ids
//
// Every problem (missing, truncated or corrupt file, wrong magic number, image/label count
// mismatch, label out of range) is a hetgraph::DataError naming the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hetgraph::data {

/// An IDX file: big-endian dims after a magic number, then unsigned bytes.
struct IdxFile {
  std::uint32_t magic = 0;
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> bytes;
};

inline constexpr std::uint32_t kIdxImages = 2051;  // 0x00000803: ubyte, 3 dims
inline constexpr std::uint32_t kIdxLabels = 2049;  // 0x00000801: ubyte, 1 dim

/// Reads one IDX file (gzip'd or plain, detected from its content) and checks its magic
/// number against `expected_magic` and its length against its dims.
IdxFile read_idx(const std::string& path, std::uint32_t expected_magic);

struct Split {
  std::int64_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols, as stored
  std::vector<std::int32_t> labels;  // count, each in [0, classes)

  std::int64_t image_size() const { return rows * cols; }
  /// Writes images [first, first + n) into `out` (n * rows * cols floats) scaled to [0, 1].
  /// Converting from the bytes reads a quarter of the memory a float copy of the set would.
  /// `threads`: OpenMP threads for the conversion (0: OpenMP's default). Next to a compiled
  /// graph with several executors, pass its executor team size (EngineReport::
  /// threads_per_executor): extra threads would spin on cores pinned executors own.
  void images(std::int64_t first, std::int64_t n, std::span<float> out, int threads = 0) const;
};

struct Mnist {
  Split train, test;
  int classes = 10;
};

/// Loads train-images/train-labels/t10k-images/t10k-labels from `dir`, accepting both the
/// `train-images-idx3-ubyte` and `train-images.idx3-ubyte` namings, with or without `.gz`.
Mnist load_mnist(const std::string& dir, int classes = 10);

}  // namespace hetgraph::data
