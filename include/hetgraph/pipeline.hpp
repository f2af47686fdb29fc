// SPDX-License-Identifier: Apache-2.0
// An input pipeline: batches of an MNIST-format split (data.hpp), in file order or a seeded
// shuffle (BatchOrder), converted to floats by a background thread while the previous step
// runs, so loading overlaps compute.
//
//   auto mnist = hetgraph::data::load_mnist("/usr/share/datasets/fashion-mnist");
//   hetgraph::data::BatchLoader loader(mnist.train, 500, {.seed = 7});   // no seed: file order
//   // or, in the background only where cg's executors leave a core free:
//   //   BatchLoader loader(mnist.train, 500, hetgraph::data::loader_options(cg, 7));
//   loader.trace_into(cg);        // its fills on a lane of cg's trace ("input pipeline")
//   for (int epoch = 1; epoch <= epochs; ++epoch) {
//     loader.start_epoch(epoch);  // draws the epoch's order and starts filling batch 0
//     for (std::int64_t k = 0; k < loader.batches(); ++k) {
//       const hetgraph::data::Batch b = loader.next();  // batch k; batch k + 1 starts filling
//       cg.run({{"x", b.images}, {"y", b.labels}});
//     }
//   }
//
// Double buffered: two slots of page-aligned host memory, one the caller reads (until its next
// call of next() or start_epoch()) while the loader fills the other. A slot is fed to run(),
// which copies it into the graph's mapped input buffer (on OpenCL the pinned staging buffer)
// before any kernel starts: a memcpy of the batch, a fraction of the conversion the thread
// takes off the step (it reads bytes and writes floats; bench/README.md has the figures).
//
// The batches are bitwise those of the synchronous path (Split::images and the labels in file
// order, Split::gather of BatchOrder's ids with a seed). A batch larger than the split is a
// DataError (from BatchOrder); an error in the loader's thread is rethrown by next(). The
// destructor stops the thread after the fill under way (a few milliseconds): a training loop
// that throws unwinds without waiting for the epoch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "hetgraph/data.hpp"

namespace hetgraph {
class CompiledGraph;
}

namespace hetgraph::data {

/// A batch in one of the loader's slots, valid until the loader's next next() or start_epoch().
struct Batch {
  std::int64_t index = 0;                // position in the epoch
  std::span<const float> images;         // batch * rows * cols floats in [0, 1]
  std::span<const std::int32_t> labels;  // batch class ids
};

struct LoaderOptions {
  /// The shuffle seed (BatchOrder): none visits the records in file order.
  std::optional<std::uint64_t> seed;
  /// false: next() fills the batch in the calling thread (no overlap; the reference path).
  bool background = true;
  /// OpenMP threads converting one batch. One by default: the loader runs next to a graph
  /// whose executors own the other cores.
  int threads = 1;
};

enum class Background : std::uint8_t { automatic, on, off };

/// Options for a loader feeding `cg`: `on` fills in the loader's thread (one converting
/// thread), `off` in next() with the team of cg's first executor (more threads would spin on
/// cores the other executors own), `automatic` picks `on` only if cg's executors leave a core
/// of this machine free. A loader's thread sharing a core with spinning executors is kept off
/// the CPU until the run ends and makes steps slower (bench/README.md, "Input pipeline").
///   BatchLoader loader(split, 100, loader_options(cg, /*seed=*/7));
LoaderOptions loader_options(const CompiledGraph& cg, std::optional<std::uint64_t> seed,
                             Background mode = Background::automatic);

/// Seconds, summed since construction.
struct LoaderStats {
  double fill_s = 0;  // converting batches (in the loader's thread when background)
  double wait_s = 0;  // next() waiting for a batch not yet filled (the step's data stall)
  std::int64_t batches = 0;
};

class BatchLoader {
 public:
  /// Batches of `batch` records of `split` (which must outlive the loader). Full batches
  /// only, as BatchOrder: batch <= 0 or larger than the split is a DataError.
  BatchLoader(const Split& split, std::int64_t batch, LoaderOptions options = {});
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  std::int64_t batches() const;
  std::int64_t batch_size() const;
  /// Whether a background thread fills the batches (LoaderOptions::background).
  bool background() const;
  /// Draws epoch `epoch`'s order and starts filling its first batch. Batches of the previous
  /// epoch not yet taken are dropped.
  void start_epoch(int epoch);
  /// The epoch's next batch (UsageError past the last one or before start_epoch); starts
  /// filling the one after it.
  Batch next();
  /// While `cg` records a trace (CompiledGraph::start_trace), each fill appears on a lane of
  /// its own named `lane`, next to the executors that run the previous step.
  void trace_into(CompiledGraph& cg, std::string lane = "input pipeline");
  LoaderStats stats() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace hetgraph::data
