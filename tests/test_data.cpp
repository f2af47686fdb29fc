// SPDX-License-Identifier: Apache-2.0
// The IDX / MNIST loader on files the tests write: both namings, plain and gzip'd, and every
// way a file can be wrong.
#include <zlib.h>

#include <climits>
#include <filesystem>
#include <fstream>

#include "hetgraph/data.hpp"
#include "hetgraph/error.hpp"
#include "idx_files.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using hetgraph::DataError;
using namespace hetgraph::data;

namespace {

using testing_util::idx_bytes;
using testing_util::write_file;

// The first four ids of BatchOrder(1000, 100, seed 7) in epoch 1.
const std::vector<std::int64_t> kPinnedSeed7Epoch1 = {476, 532, 846, 121};

// `members` gzip members of `bytes` each inflating to zeros, appended to `out`: a gzip bomb
// (zlib reads concatenated members as one stream).
void append_zero_members(std::vector<std::uint8_t>& out, std::size_t bytes, int members) {
  const std::vector<std::uint8_t> zeros(bytes, 0);
  uLongf cap = compressBound(static_cast<uLong>(bytes)) + 64;
  std::vector<std::uint8_t> gz(cap);
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = const_cast<Bytef*>(zeros.data());
  z.avail_in = static_cast<uInt>(bytes);
  z.next_out = gz.data();
  z.avail_out = static_cast<uInt>(cap);
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  gz.resize(z.total_out);
  deflateEnd(&z);
  for (int i = 0; i < members; ++i) out.insert(out.end(), gz.begin(), gz.end());
}

// The bytes of `plain` as one gzip member.
std::vector<std::uint8_t> gzip(const std::vector<std::uint8_t>& plain) {
  std::vector<std::uint8_t> out(compressBound(static_cast<uLong>(plain.size())) + 64);
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  z.next_in = const_cast<Bytef*>(plain.data());
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hetgraph_idx_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A complete tiny data set: n train and m test images of 2x3 pixels.
  void write_set(const std::string& sep, bool gz, int n = 5, int m = 3) {
    const std::string ext = gz ? ".gz" : "";
    for (auto [prefix, count] : {std::pair{"train", n}, std::pair{"t10k", m}}) {
      std::vector<std::uint8_t> pixels(static_cast<std::size_t>(count * 6)),
          labels(static_cast<std::size_t>(count));
      for (std::size_t i = 0; i < pixels.size(); ++i)
        pixels[i] = static_cast<std::uint8_t>(i * 37 % 256);
      for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::uint8_t>(i % 10);
      write_file(dir_ / (std::string(prefix) + "-images" + sep + "idx3-ubyte" + ext),
                 idx_bytes(kIdxImages, {static_cast<std::uint32_t>(count), 2, 3}, pixels), gz);
      write_file(dir_ / (std::string(prefix) + "-labels" + sep + "idx1-ubyte" + ext),
                 idx_bytes(kIdxLabels, {static_cast<std::uint32_t>(count)}, labels), gz);
    }
  }

  template <class F>
  void expect_data_error(F&& f, std::initializer_list<std::string> parts) {
    try {
      f();
      ADD_FAILURE() << "no DataError";
    } catch (const DataError& e) {
      for (const auto& p : parts)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }

  fs::path dir_;
};

TEST_F(DataTest, LoadsBothNamingsPlainAndGzip) {
  for (const std::string sep : {"-", "."}) {
    for (bool gz : {false, true}) {
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      write_set(sep, gz);
      const Mnist m = load_mnist(dir_.string());
      EXPECT_EQ(m.train.count, 5);
      EXPECT_EQ(m.test.count, 3);
      EXPECT_EQ(m.train.rows, 2);
      EXPECT_EQ(m.train.cols, 3);
      ASSERT_EQ(m.train.pixels.size(), 30u);
      std::vector<float> imgs(30);
      m.train.images(0, 5, imgs);
      EXPECT_FLOAT_EQ(imgs[1], 37.0f / 255.0f);
      EXPECT_FLOAT_EQ(imgs[7], (7 * 37 % 256) / 255.0f);
      std::vector<float> two(12);
      m.train.images(3, 2, two);
      EXPECT_FLOAT_EQ(two[0], (18 * 37 % 256) / 255.0f);
      EXPECT_EQ(m.train.labels, (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
      for (float p : imgs) {
        EXPECT_GE(p, 0.0f);
        EXPECT_LE(p, 1.0f);
      }
      expect_data_error([&] { m.train.images(4, 2, two); }, {"outside [0, 5)"});
      // first + n would overflow (undefined behaviour before the check was rewritten)
      expect_data_error([&] { m.train.images(INT64_MAX, 2, two); }, {"outside [0, 5)"});
      expect_data_error([&] { m.train.images(2, INT64_MAX, two); }, {"outside [0, 5)"});
      expect_data_error([&] { m.train.images(0, 1, two); }, {"holds 12", "need 6"});
    }
  }
}

TEST_F(DataTest, MissingDirectoryOrFiles) {
  expect_data_error([&] { load_mnist((dir_ / "nope").string()); }, {"nope", "no such directory"});
  expect_data_error([&] { load_mnist(dir_.string()); },
                    {"train-images-idx3-ubyte", "train-images.idx3-ubyte.gz"});
}

TEST_F(DataTest, WrongMagicNumber) {
  write_set("-", false);
  write_file(dir_ / "train-labels-idx1-ubyte",
             idx_bytes(kIdxImages, {5, 1, 1}, std::vector<std::uint8_t>(5)), false);
  expect_data_error([&] { load_mnist(dir_.string()); },
                    {"train-labels-idx1-ubyte", "magic number 2051", "expected 2049"});
}

TEST_F(DataTest, TruncatedAndTrailingData) {
  write_set("-", false);
  write_file(dir_ / "train-images-idx3-ubyte",
             idx_bytes(kIdxImages, {5, 2, 3}, std::vector<std::uint8_t>(29)), false);
  expect_data_error([&] { load_mnist(dir_.string()); },
                    {"train-images-idx3-ubyte", "truncated", "30", "29"});
  write_file(dir_ / "train-images-idx3-ubyte",
             idx_bytes(kIdxImages, {5, 2, 3}, std::vector<std::uint8_t>(31)), false);
  expect_data_error([&] { load_mnist(dir_.string()); }, {"trailing data"});
  write_file(dir_ / "train-images-idx3-ubyte", {0, 0, 8, 3, 0, 0}, false);
  expect_data_error([&] { load_mnist(dir_.string()); }, {"truncated", "header"});
}

TEST_F(DataTest, CorruptOrTruncatedGzip) {
  write_set("-", true);
  const fs::path p = dir_ / "t10k-images-idx3-ubyte.gz";
  std::ifstream in(p, std::ios::binary);
  std::vector<char> gz((std::istreambuf_iterator<char>(in)), {});
  in.close();
  std::vector<std::uint8_t> cut(gz.begin(),
                                gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2));
  write_file(p, cut, false);
  expect_data_error([&] { load_mnist(dir_.string()); }, {"t10k-images-idx3-ubyte.gz"});
  std::vector<std::uint8_t> garbled(gz.begin(), gz.end());
  for (std::size_t i = 12; i < garbled.size(); ++i) garbled[i] ^= 0x5a;
  write_file(p, garbled, false);
  expect_data_error([&] { load_mnist(dir_.string()); }, {"t10k-images-idx3-ubyte.gz"});
}

TEST_F(DataTest, CountMismatchAndLabelRange) {
  write_set("-", false);
  write_file(dir_ / "train-labels-idx1-ubyte", idx_bytes(kIdxLabels, {4}, {0, 1, 2, 3}), false);
  expect_data_error([&] { load_mnist(dir_.string()); }, {"5 images", "4 labels"});
  write_file(dir_ / "train-labels-idx1-ubyte", idx_bytes(kIdxLabels, {5}, {0, 1, 12, 3, 4}), false);
  expect_data_error([&] { load_mnist(dir_.string()); },
                    {"train-labels-idx1-ubyte", "label 12", "index 2"});
}

// Dimensions whose product wraps around 2^64 (2^31 * 2^31 * 4 = 0 mod 2^64) once passed as
// a file of 0 data bytes, with a Split claiming 2^31 images.
TEST_F(DataTest, DimensionsWhoseProductOverflowsAreRejected) {
  const fs::path p = dir_ / "wrap-idx3-ubyte";
  write_file(p, idx_bytes(kIdxImages, {0x80000000u, 0x80000000u, 4}, {}), false);
  expect_data_error([&] { read_idx(p.string(), kIdxImages); },
                    {"wrap-idx3-ubyte", "2147483648x2147483648x4", "overflow"});
  write_file(p, idx_bytes(kIdxImages, {0xffffffffu, 0xffffffffu, 0xffffffffu}, {1, 2, 3}), true);
  expect_data_error([&] { read_idx(p.string(), kIdxImages); }, {"overflow"});
}

// A header promising more than the file holds fails as truncated without setting aside the
// promised size first (2^40 bytes here), plain or gzip'd.
TEST_F(DataTest, HugeHeaderOverATinyFileFailsWithoutReservingIt) {
  const fs::path p = dir_ / "huge-idx3-ubyte";
  for (bool gz : {false, true}) {
    write_file(p, idx_bytes(kIdxImages, {1u << 20, 1u << 10, 1u << 10}, {1, 2, 3}), gz);
    testing_util::reset_peak_rss();
    const long before = testing_util::peak_rss_kib();
    expect_data_error([&] { read_idx(p.string(), kIdxImages); },
                      {"huge-idx3-ubyte", "truncated", "1099511627776"});
    EXPECT_LT(testing_util::peak_rss_kib() - before, 64 * 1024) << "KiB, gzip " << gz;
  }
}

// A gzip bomb: a valid 5x2x3 header and its 30 bytes, then 1 GiB of zeros in 2 MB of gzip.
// The reader stops one byte past what the header promises instead of inflating it all.
TEST_F(DataTest, GzipBombStopsAtWhatTheHeaderPromises) {
  const fs::path p = dir_ / "bomb-idx3-ubyte.gz";
  std::vector<std::uint8_t> file =
      gzip(idx_bytes(kIdxImages, {5, 2, 3}, std::vector<std::uint8_t>(30, 7)));
  append_zero_members(file, 64u << 20, 16);
  ASSERT_LT(file.size(), 4u << 20);
  write_file(p, file, false);
  testing_util::reset_peak_rss();
  const long before = testing_util::peak_rss_kib();
  expect_data_error([&] { read_idx(p.string(), kIdxImages); },
                    {"bomb-idx3-ubyte.gz", "trailing data", "30 data bytes"});
  EXPECT_LT(testing_util::peak_rss_kib() - before, 64 * 1024) << "KiB";
}

// Data-parallel shards: with blocks of 4 (the global batch) over 2 ranks, rank r keeps records
// [4b + 2r, 4b + 2r + 2) of every whole block b; the trailing partial block goes. Without blocks
// the records are cut into contiguous parts. Each rank gets exactly its share, in file order.
TEST_F(DataTest, ShardsKeepEachRanksPartOfEveryBlock) {
  write_set("-", true, 10, 7);  // image i's pixels start at i * 6 * 37 % 256; label i % 10
  for (int r = 0; r < 2; ++r) {
    const Mnist m =
        load_mnist(dir_.string(), 10, {.rank = r, .size = 2, .block = 4}, {.rank = r, .size = 2});
    const std::vector<int> train =
        r == 0 ? std::vector<int>{0, 1, 4, 5} : std::vector<int>{2, 3, 6, 7};
    const std::vector<int> test = r == 0 ? std::vector<int>{0, 1, 2} : std::vector<int>{3, 4, 5, 6};
    ASSERT_EQ(m.train.count, 4);
    ASSERT_EQ(m.test.count, static_cast<std::int64_t>(test.size()));
    for (std::size_t k = 0; k < train.size(); ++k) {
      EXPECT_EQ(m.train.labels[k], train[k] % 10) << "rank " << r;
      EXPECT_EQ(m.train.pixels[k * 6], static_cast<std::uint8_t>(train[k] * 6 * 37 % 256));
    }
    for (std::size_t k = 0; k < test.size(); ++k) EXPECT_EQ(m.test.labels[k], test[k] % 10);
  }
  const IdxFile whole = read_idx((dir_ / "train-labels-idx1-ubyte.gz").string(), kIdxLabels);
  EXPECT_EQ(whole.records, 10);
  const IdxFile part = read_idx((dir_ / "train-labels-idx1-ubyte.gz").string(), kIdxLabels,
                                {.rank = 1, .size = 2, .block = 4});
  EXPECT_EQ(part.records, 4);
  EXPECT_EQ(part.dims[0], 10) << "dims stay as stored";
}

TEST_F(DataTest, ShardsThatDoNotFitAreDataErrors) {
  write_set("-", false, 10, 3);
  expect_data_error([&] { load_mnist(dir_.string(), 10, {.rank = 2, .size = 2}); },
                    {"train-images", "rank must lie in [0, size)"});
  expect_data_error([&] { load_mnist(dir_.string(), 10, {.rank = 0, .size = 3, .block = 4}); },
                    {"blocks of 4", "3 equal parts"});
  expect_data_error([&] { load_mnist(dir_.string(), 10, {.rank = 0, .size = 2, .block = 12}); },
                    {"10 records do not fill a block of 12"});
  expect_data_error([&] { load_mnist(dir_.string(), 10, {}, {.rank = 0, .size = 4}); },
                    {"t10k-images", "3 records cannot be shared by 4 ranks"});
}

// BatchOrder: file order is 0, 1, 2, ...; a seed gives a permutation per epoch that depends on
// (seed, epoch) only, so two runs (or a resumed one) see the same batches.
TEST(BatchOrderTest, FileOrderAndSeededShufflesPerEpoch) {
  BatchOrder plain(10, 3);
  EXPECT_EQ(plain.batches(), 3);
  plain.start_epoch(1);
  EXPECT_EQ(std::vector<std::int64_t>(plain.batch(1).begin(), plain.batch(1).end()),
            (std::vector<std::int64_t>{3, 4, 5}));
  auto epoch = [](std::uint64_t seed, int e) {
    BatchOrder o(1000, 100, seed);
    o.start_epoch(e);
    std::vector<std::int64_t> all;
    for (std::int64_t k = 0; k < o.batches(); ++k)
      all.insert(all.end(), o.batch(k).begin(), o.batch(k).end());
    return all;
  };
  const auto a = epoch(7, 1);
  std::vector<std::int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(a, epoch(7, 1));
  EXPECT_NE(a, epoch(7, 2));
  EXPECT_NE(a, epoch(8, 1));
  // Pinned: the shuffle is specified (SplitMix64 + Fisher-Yates), not the standard library's.
  EXPECT_EQ(std::vector<std::int64_t>(a.begin(), a.begin() + 4), kPinnedSeed7Epoch1);
  EXPECT_THROW(BatchOrder(5, 6), DataError);
  EXPECT_THROW(BatchOrder(5, 0), DataError);
  EXPECT_THROW((void)plain.batch(3), DataError);
}

TEST_F(DataTest, GatherFillsABatchFromRecordIds) {
  write_set("-", false);  // 5 training images of 6 pixels, pixel i = i * 37 % 256, label i % 10
  const Mnist m = load_mnist(dir_.string());
  std::vector<float> x(18);
  std::vector<std::int32_t> y(3);
  const std::vector<std::int64_t> ids{4, 0, 4};
  m.train.gather(ids, x, y);
  EXPECT_EQ(y, (std::vector<std::int32_t>{4, 0, 4}));
  for (std::size_t k = 0; k < 3; ++k) {
    for (std::size_t p = 0; p < 6; ++p) {
      const std::size_t i = static_cast<std::size_t>(ids[k]) * 6 + p;
      EXPECT_EQ(x[k * 6 + p], static_cast<float>(i * 37 % 256) * (1.0f / 255.0f));
    }
  }
  const std::vector<std::int64_t> bad{1, 5, 0};
  expect_data_error([&] { m.train.gather(bad, x, y); }, {"record 5", "position 1"});
  std::vector<float> small(4);
  expect_data_error([&] { m.train.gather(ids, small, y); }, {"18 floats"});
}

}  // namespace
