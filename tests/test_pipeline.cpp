// SPDX-License-Identifier: Apache-2.0
// The input pipeline (BatchLoader): the batches of the synchronous path bit for bit, shuffles
// fixed by the seed, errors, clean shutdown when a training loop throws, and its trace lane.
// Threaded: also runs under ThreadSanitizer (make test-tsan).
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "hetgraph/hetgraph.hpp"
#include "idx_files.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace hetgraph;
using namespace hetgraph::data;

namespace {

// A split of `count` 28x28 images with pseudo-random bytes and labels.
Split synthetic(std::int64_t count) {
  Split s;
  s.count = count;
  s.rows = s.cols = 28;
  s.pixels.resize(static_cast<std::size_t>(count * 784));
  std::uint32_t x = 12345;
  for (auto& p : s.pixels) {
    x = x * 1664525u + 1013904223u;
    p = static_cast<std::uint8_t>(x >> 24);
  }
  for (std::int64_t i = 0; i < count; ++i)
    s.labels.push_back(static_cast<std::int32_t>(i * 7 % 10));
  return s;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Every batch of `epochs` epochs from the loader against the synchronous path: Split::images
// and the labels in file order, Split::gather of BatchOrder's ids with a seed.
void expect_synchronous_batches(const Split& s, std::int64_t B, std::optional<std::uint64_t> seed,
                                bool background) {
  BatchLoader loader(s, B, {.seed = seed, .background = background});
  BatchOrder order(s.count, B, seed);
  std::vector<float> want(static_cast<std::size_t>(B * 784));
  std::vector<std::int32_t> want_labels(static_cast<std::size_t>(B));
  for (int epoch = 1; epoch <= 2; ++epoch) {
    loader.start_epoch(epoch);
    order.start_epoch(epoch);
    ASSERT_EQ(loader.batches(), order.batches());
    for (std::int64_t k = 0; k < loader.batches(); ++k) {
      const Batch b = loader.next();
      if (seed) {
        s.gather(order.batch(k), want, want_labels);
      } else {
        s.images(k * B, B, want);
        std::copy_n(s.labels.begin() + k * B, B, want_labels.begin());
      }
      ASSERT_EQ(b.index, k);
      ASSERT_TRUE(same_bits(b.images, want)) << "epoch " << epoch << " batch " << k;
      ASSERT_TRUE(
          std::equal(b.labels.begin(), b.labels.end(), want_labels.begin(), want_labels.end()));
    }
  }
}

}  // namespace

TEST(Pipeline, FileOrderIsTheSynchronousPath) {
  const Split s = synthetic(1000);
  expect_synchronous_batches(s, 64, std::nullopt, true);
  expect_synchronous_batches(s, 64, std::nullopt, false);
}

TEST(Pipeline, ShuffleIsTheSynchronousPath) {
  const Split s = synthetic(1000);
  expect_synchronous_batches(s, 100, 7, true);
  expect_synchronous_batches(s, 100, 7, false);
}

TEST(Pipeline, ShuffleIsFixedBySeedAndEpoch) {
  const Split s = synthetic(600);
  auto first_labels = [&](std::uint64_t seed, int epoch) {
    BatchLoader l(s, 50, {.seed = seed});
    l.start_epoch(epoch);
    std::vector<float> all;
    for (std::int64_t k = 0; k < l.batches(); ++k) {
      const Batch b = l.next();
      all.insert(all.end(), b.images.begin(), b.images.end());
    }
    return all;
  };
  const auto a = first_labels(3, 1);
  EXPECT_TRUE(same_bits(a, first_labels(3, 1)));
  EXPECT_FALSE(same_bits(a, first_labels(4, 1)));
  EXPECT_FALSE(same_bits(a, first_labels(3, 2)));
}

TEST(Pipeline, Errors) {
  const Split s = synthetic(100);
  EXPECT_THROW(BatchLoader(s, 101), DataError);  // batch larger than the data
  EXPECT_THROW(BatchLoader(s, 0), DataError);
  BatchLoader l(s, 40);
  EXPECT_THROW(l.next(), UsageError);  // before start_epoch
  l.start_epoch(1);
  l.next();
  l.next();
  EXPECT_THROW(l.next(), UsageError);  // two full batches of 40 in 100 records
  l.start_epoch(2);                    // a new epoch starts over
  EXPECT_EQ(l.next().index, 0);
}

TEST(Pipeline, BadAndShortFilesAreDataErrors) {
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph_pipeline_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::uint8_t> px(3 * 784, 1), lb(3, 2);
  for (const char* split : {"train", "t10k"}) {
    testing_util::write_file(dir / (std::string(split) + "-labels-idx1-ubyte"),
                             testing_util::idx_bytes(kIdxLabels, {3}, lb), false);
  }
  // Short: the header promises 3 images, the file holds 2.
  testing_util::write_file(
      dir / "train-images-idx3-ubyte",
      testing_util::idx_bytes(kIdxImages, {3, 28, 28}, std::vector<std::uint8_t>(2 * 784, 1)),
      false);
  testing_util::write_file(dir / "t10k-images-idx3-ubyte",
                           testing_util::idx_bytes(kIdxImages, {3, 28, 28}, px), false);
  try {
    load_mnist(dir.string());
    ADD_FAILURE() << "a short file loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("train-images-idx3-ubyte"), std::string::npos) << e.what();
  }
  // Bad: a labels magic number where the images belong.
  testing_util::write_file(dir / "train-images-idx3-ubyte",
                           testing_util::idx_bytes(kIdxLabels, {3, 28, 28}, px), false);
  EXPECT_THROW(load_mnist(dir.string()), DataError);
  // Good, but the batch is larger than the data.
  testing_util::write_file(dir / "train-images-idx3-ubyte",
                           testing_util::idx_bytes(kIdxImages, {3, 28, 28}, px), false);
  const Mnist m = load_mnist(dir.string());
  EXPECT_THROW(BatchLoader(m.train, 4), DataError);
  fs::remove_all(dir);
}

TEST(Pipeline, OptionsForAGraph) {
  Graph g;
  auto x = g.input("x");
  auto y = reduce_mean(x * x);
  CompiledGraph cg = GraphCompiler(Platform::cpu({.threads = 1})).compile(g, {{"x", {4, 4}}}, {y});
  const LoaderOptions on = loader_options(cg, 5, Background::on);
  EXPECT_TRUE(on.background);
  EXPECT_EQ(on.threads, 1);
  EXPECT_EQ(on.seed, std::optional<std::uint64_t>(5));
  const LoaderOptions off = loader_options(cg, std::nullopt, Background::off);
  EXPECT_FALSE(off.background);
  EXPECT_EQ(off.threads, 1);  // the graph's one thread
  // One compute thread leaves a core free wherever there are two.
  EXPECT_EQ(loader_options(cg, std::nullopt).background, std::thread::hardware_concurrency() > 1);
  const Split s = synthetic(100);
  EXPECT_TRUE(BatchLoader(s, 10, on).background());
  EXPECT_FALSE(BatchLoader(s, 10, off).background());
}

// A training loop that throws mid-epoch (a bad feed, then an error of the caller's own)
// unwinds through the loader while it fills the next batch: no hang, nothing leaked (ASan).
TEST(Pipeline, CleanShutdownWhenARunThrows) {
  const Split s = synthetic(640);
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {784, 10});
  auto loss = reduce_mean(matmul(x, W));
  CompiledGraph cg = GraphCompiler(Platform::cpu()).compile(g, {{"x", {64, 784}}}, {loss});
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      BatchLoader loader(s, 32);  // a batch of 32 rows: the graph takes 64
      loader.start_epoch(1);
      for (std::int64_t k = 0; k < loader.batches(); ++k) {
        const Batch b = loader.next();
        if (attempt == 1 && k == 3) throw std::runtime_error("the caller's error");
        if (attempt == 0) cg.run({{"x", b.images}});
      }
      ADD_FAILURE() << "the loop did not throw";
    } catch (const FeedError&) {
      EXPECT_EQ(attempt, 0);
    } catch (const std::runtime_error&) {
      EXPECT_EQ(attempt, 1);
    }
  }
  // The graph is untouched and usable.
  BatchLoader loader(s, 64);
  loader.start_epoch(1);
  cg.run({{"x", loader.next().images}});
}

// The loader's fills appear on a lane of their own in the graph's trace, and the fill of batch
// k + 1 runs while the graph computes step k.
TEST(Pipeline, FillsOnTheirOwnTraceLaneOverlapRuns) {
  const Split s = synthetic(20 * 64);
  Graph g;
  auto x = g.input("x");
  auto W = g.variable("W", {784, 784});
  auto h = matmul(x, W);
  for (int i = 0; i < 3; ++i) h = matmul(tanh(h), W);
  auto loss = reduce_mean(h);
  // One compute thread: on a 2-core machine the loader's thread then has a core of its own
  // (with every core computing, spinning executors can starve it until the run ends).
  CompiledGraph cg =
      GraphCompiler(Platform::cpu({.threads = 1})).compile(g, {{"x", {64, 784}}}, {loss});
  // One traced pass of 3 epochs: (fills, fills that overlap a run).
  auto traced = [&](int attempt) {
    const fs::path path =
        fs::temp_directory_path() / ("hetgraph_pipeline_trace_" + std::to_string(::getpid()) + "_" +
                                     std::to_string(attempt) + ".json");
    BatchLoader loader(s, 64);
    cg.start_trace(path.string());
    loader.trace_into(cg);
    for (int epoch = 1; epoch <= 3; ++epoch) {
      loader.start_epoch(epoch);
      for (std::int64_t k = 0; k < loader.batches(); ++k) cg.run({{"x", loader.next().images}});
    }
    cg.stop_trace();
    std::stringstream text;
    text << std::ifstream(path).rdbuf();
    if (!::testing::Test::HasFailure()) fs::remove(path);
    const std::string t = text.str();
    EXPECT_NE(t.find("\"tid\":1000,\"args\":{\"name\":\"input pipeline\"}"), std::string::npos);
    // Events as (tid, start, end) in microseconds.
    struct Ev {
      int tid;
      double ts, end;
    };
    std::vector<Ev> ev;
    for (std::size_t at = t.find("\"ph\":\"X\""); at != std::string::npos;
         at = t.find("\"ph\":\"X\"", at + 1)) {
      Ev e{};
      std::sscanf(t.c_str() + at, "\"ph\":\"X\",\"ts\":%lf,\"dur\":%lf,\"pid\":1,\"tid\":%d", &e.ts,
                  &e.end, &e.tid);
      e.end += e.ts;
      ev.push_back(e);
    }
    int fills = 0, overlapping = 0;
    for (const Ev& f : ev) {
      if (f.tid != 1000) continue;
      ++fills;
      for (const Ev& n : ev) {
        if (n.tid != 1000 && n.ts < f.end && f.ts < n.end) {
          ++overlapping;
          break;
        }
      }
    }
    EXPECT_EQ(fills, 60);
    return overlapping;
  };
  // Nearly all fills overlap a run on an idle machine; one shows they run alongside. Under
  // ctest -j2 the other test's threads can keep the loader's thread off the CPU for a whole
  // pass (seen once), so a pass without any is tried again, up to 5 times: a loader that
  // filled synchronously would fail every one.
  int overlapping = 0;
  for (int attempt = 0; attempt < 5 && overlapping == 0; ++attempt) overlapping = traced(attempt);
  EXPECT_GE(overlapping, 1);
}
