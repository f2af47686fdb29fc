// SPDX-License-Identifier: Apache-2.0
// BatchOrder (data.hpp): file order or a per-epoch seeded shuffle, and Split::gather, which
// fills a batch from record ids. Shared by the examples that train on MNIST-format data.
#include <omp.h>

#include <numeric>

#include "hetgraph/data.hpp"
#include "hetgraph/error.hpp"

namespace hetgraph::data {

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): fully specified, so a seed gives the same order on
// every machine.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias (Lemire's multiply-and-reject).
  std::uint64_t below(std::uint64_t n) {
    for (;;) {
      const unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
      const auto low = static_cast<std::uint64_t>(m);
      if (low >= n || low >= (0 - n) % n) return static_cast<std::uint64_t>(m >> 64);
    }
  }
};

}  // namespace

BatchOrder::BatchOrder(std::int64_t records, std::int64_t batch, std::optional<std::uint64_t> seed)
    : records_(records), batch_(batch), seed_(seed) {
  if (batch <= 0) throw DataError("batch size " + std::to_string(batch) + " must be > 0");
  if (records < batch) {
    throw DataError("a batch of " + std::to_string(batch) + " exceeds the " +
                    std::to_string(records) + " records");
  }
  order_.resize(static_cast<std::size_t>(records));
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
}

void BatchOrder::start_epoch(int epoch) {
  if (!seed_) return;
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  // Each epoch's stream from (seed, epoch): epochs do not depend on one another, so a run
  // resumed at epoch e draws what the uninterrupted run drew.
  SplitMix64 rng{*seed_ ^ (static_cast<std::uint64_t>(epoch) * 0xD1B54A32D192ED03ull)};
  for (std::size_t i = order_.size(); i > 1; --i) {
    const std::size_t j = rng.below(i);
    std::swap(order_[i - 1], order_[j]);
  }
}

std::span<const std::int64_t> BatchOrder::batch(std::int64_t k) const {
  if (k < 0 || k >= batches()) {
    throw DataError("batch " + std::to_string(k) + " outside [0, " + std::to_string(batches()) +
                    ")");
  }
  return std::span<const std::int64_t>(order_).subspan(static_cast<std::size_t>(k * batch_),
                                                       static_cast<std::size_t>(batch_));
}

void Split::gather(std::span<const std::int64_t> ids, std::span<float> out,
                   std::span<std::int32_t> out_labels, int threads) const {
  const auto n = static_cast<std::int64_t>(ids.size());
  const std::int64_t size = image_size();
  if (out.size() != static_cast<std::size_t>(n * size) || out_labels.size() != ids.size()) {
    throw DataError("gather: " + std::to_string(n) + " records need " + std::to_string(n * size) +
                    " floats and " + std::to_string(n) + " labels, the outputs hold " +
                    std::to_string(out.size()) + " and " + std::to_string(out_labels.size()));
  }
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t id = ids[static_cast<std::size_t>(k)];
    if (id < 0 || id >= count) {
      throw DataError("gather: record " + std::to_string(id) + " (position " + std::to_string(k) +
                      ") outside [0, " + std::to_string(count) + ")");
    }
    out_labels[static_cast<std::size_t>(k)] = labels[static_cast<std::size_t>(id)];
  }
  const int team = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(team) if (n * size >= (1 << 16) && team > 1)
  for (std::int64_t k = 0; k < n; ++k) {
    const std::uint8_t* src = pixels.data() + ids[static_cast<std::size_t>(k)] * size;
    float* dst = out.data() + k * size;
    for (std::int64_t i = 0; i < size; ++i) dst[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
  }
}

}  // namespace hetgraph::data
