// SPDX-License-Identifier: Apache-2.0
// Loading MNIST-format data sets (IDX files, plain or gzip'd).
//
//   auto mnist = hetgraph::data::load_mnist("/usr/share/datasets/fashion-mnist");
//   mnist.train.images(0, 500, cg.mapped_input("x"));   // images 0..499 as floats in [0, 1]
//   const std::vector<std::int32_t>& ids = mnist.train.labels;  // count class ids
//
// Every problem (missing, truncated or corrupt file, wrong magic number, image/label count
// mismatch, label out of range, a shard that does not fit) is a hetgraph::DataError naming the
// file. Data-parallel jobs read each rank's shard:
//   auto mine = hetgraph::data::load_mnist(dir, 10, {.rank = r, .size = n, .block = 500});
//
// Batches in a seeded shuffled order, drawn anew every epoch (BatchOrder):
//   hetgraph::data::BatchOrder order(mnist.train.count, 500, /*seed=*/7);
//   for (int epoch = 1; epoch <= epochs; ++epoch) {
//     order.start_epoch(epoch);
//     for (std::int64_t k = 0; k < order.batches(); ++k)
//       mnist.train.gather(order.batch(k), cg.mapped_input("x"), cg.mapped_input_i32("y"));
//   }
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hetgraph::data {

/// An IDX file: big-endian dims after a magic number, then unsigned bytes.
struct IdxFile {
  std::uint32_t magic = 0;
  std::vector<std::int64_t> dims;   // as stored in the file
  std::vector<std::uint8_t> bytes;  // the records kept, in file order
  std::int64_t records = 0;         // records kept: dims[0], or a shard's part of it
};

inline constexpr std::uint32_t kIdxImages = 2051;  // 0x00000803: ubyte, 3 dims
inline constexpr std::uint32_t kIdxLabels = 2049;  // 0x00000801: ubyte, 1 dim

/// The records (images, labels) one process of a data-parallel job keeps. With `block` = 0 the
/// records are cut into `size` contiguous parts (sizes differ by one at most) and rank `rank`
/// keeps its part. With `block` = B (the global batch) the records go in blocks of B, each cut
/// into `size` equal parts, and rank `rank` keeps its part of every block: batch k of the rank
/// (B / size records) is its share of global batch k. A trailing partial block is dropped.
///
///   Shard{.rank = comm.rank(), .size = comm.size(), .block = 500}
struct Shard {
  int rank = 0, size = 1;
  std::int64_t block = 0;
};

/// Reads one IDX file (gzip'd or plain, detected from its content) and checks its magic
/// number against `expected_magic` and its length against its dims. Only the records (slices
/// along dimension 0) of `shard` are kept.
IdxFile read_idx(const std::string& path, std::uint32_t expected_magic, const Shard& shard = {});

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
  /// Writes the records `ids` (any order, repeats allowed) into `images` (ids.size() * rows *
  /// cols floats in [0, 1]) and `labels` (ids.size()). An id outside [0, count) or a wrong
  /// output size is a DataError.
  void gather(std::span<const std::int64_t> ids, std::span<float> images,
              std::span<std::int32_t> labels, int threads = 0) const;
};

/// The order in which a training loop visits `records` records, in batches of `batch`: file
/// order, or with a seed a shuffle drawn anew for every epoch, a function of (seed, epoch)
/// alone, the same on every machine and standard library (its own generator, SplitMix64,
/// and Fisher-Yates; std::shuffle's algorithm differs between libraries). Full batches only:
/// a trailing partial batch is left out of each epoch (with a shuffle, different records each
/// time). records < batch or batch <= 0 is a DataError.
class BatchOrder {
 public:
  BatchOrder(std::int64_t records, std::int64_t batch,
             std::optional<std::uint64_t> seed = std::nullopt);
  /// Full batches per epoch.
  std::int64_t batches() const { return records_ / batch_; }
  std::int64_t batch_size() const { return batch_; }
  bool shuffled() const { return seed_.has_value(); }
  /// Draws epoch `epoch`'s order (a no-op in file order).
  void start_epoch(int epoch);
  /// The record ids of batch k of the current epoch (k < batches()).
  std::span<const std::int64_t> batch(std::int64_t k) const;

 private:
  std::int64_t records_, batch_;
  std::optional<std::uint64_t> seed_;
  std::vector<std::int64_t> order_;
};

struct Mnist {
  Split train, test;
  int classes = 10;
};

/// Loads train-images/train-labels/t10k-images/t10k-labels from `dir`, accepting both the
/// `train-images-idx3-ubyte` and `train-images.idx3-ubyte` namings, with or without `.gz`.
/// Each split keeps the records of its shard (default: all).
Mnist load_mnist(const std::string& dir, int classes = 10, const Shard& train = {},
                 const Shard& test = {});

}  // namespace hetgraph::data
