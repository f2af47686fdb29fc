// SPDX-License-Identifier: Apache-2.0
// End to end: examples/mnist_softmax on a small MNIST-format data set written by the test
// (classes distinguishable by which band of the image is bright), through its command line.
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "hetgraph/onnx.hpp"
#include "idx_files.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;

namespace {

void write_idx_gz(const fs::path& p, std::uint32_t magic, std::vector<std::uint32_t> dims,
                  const std::vector<std::uint8_t>& data) {
  testing_util::write_file(p, testing_util::idx_bytes(magic, dims, data), true);
}

void write_set(const fs::path& dir, const std::string& prefix, int n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(0, 60);
  std::vector<std::uint8_t> px(static_cast<std::size_t>(n) * 784),
      labels(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int cls = static_cast<int>(rng() % 10);
    labels[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(cls);
    for (int p = 0; p < 784; ++p) {
      const bool band = (p / 28) / 3 == cls;  // rows 3*cls .. 3*cls+2 are bright
      px[static_cast<std::size_t>(i) * 784 + static_cast<std::size_t>(p)] =
          static_cast<std::uint8_t>((band ? 180 : 0) + noise(rng));
    }
  }
  write_idx_gz(dir / (prefix + "-images-idx3-ubyte.gz"), 2051,
               {static_cast<std::uint32_t>(n), 28, 28}, px);
  write_idx_gz(dir / (prefix + "-labels-idx1-ubyte.gz"), 2049, {static_cast<std::uint32_t>(n)},
               labels);
}

struct Result {
  int status;
  std::string out, err;
};

// The example with `args`; under mpirun with `mpi` (its arguments) when given.
Result run(const std::string& args, const std::string& mpi = "") {
  const fs::path tmp = fs::temp_directory_path() / ("hetgraph_mnist_" + std::to_string(::getpid()));
  const std::string launch = mpi.empty() ? "" : std::string(HETGRAPH_MPIRUN) + " " + mpi + " ";
  const std::string cmd = launch + HETGRAPH_MNIST_EXAMPLE + " " + args + " >" + tmp.string() +
                          ".out 2>" + tmp.string() + ".err";
  const int status = std::system(cmd.c_str());
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  Result r{WEXITSTATUS(status), slurp(tmp.string() + ".out"), slurp(tmp.string() + ".err")};
  fs::remove(tmp.string() + ".out");
  fs::remove(tmp.string() + ".err");
  return r;
}

double field(const std::string& json, const std::string& key) {
  const std::regex re("\"" + key + "\":([-0-9.eE]+)");
  std::smatch m;
  if (!std::regex_search(json, m, re)) {
    ADD_FAILURE() << "no field " << key << " in " << json;
    return -1;
  }
  return std::stod(m[1]);
}

TEST(MnistExample, TrainsOnAGeneratedDataSet) {
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph_mnist_data_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_set(dir, "train", 2000, 1);
  write_set(dir, "t10k", 500, 2);
  const Result r = run("--data " + dir.string() + " --epochs 3 --batch 100 --lr 0.5 --json");
  fs::remove_all(dir);
  ASSERT_EQ(r.status, 0) << r.err;
  // a progress line per epoch on stderr
  EXPECT_NE(r.err.find("epoch  3/3"), std::string::npos) << r.err;
  const std::string last = r.out.substr(r.out.rfind('{'));
  for (const char* key : {"setup_s", "copy_s", "compute_s", "train_s", "final_loss",
                          "test_accuracy", "epochs", "batch", "lr"}) {
    EXPECT_GE(field(last, key), 0) << key;
  }
  EXPECT_NE(last.find("\"platform\":\"cpu\""), std::string::npos) << last;
  // The program names the device it ran on (Platform::description).
  EXPECT_NE(r.out.find("ran on " + hetgraph::Platform::cpu().description() + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(last.find("\"engine\":"), std::string::npos) << last;
  EXPECT_EQ(field(last, "epochs"), 3);
  EXPECT_EQ(field(last, "batch"), 100);
  EXPECT_GT(field(last, "test_accuracy"), 0.95);
  EXPECT_LT(field(last, "final_loss"), 0.5);
}

// --checkpoint after one epoch, then --load and one more epoch, ends exactly where two epochs
// straight do; --save writes an ONNX classifier that imports for any batch size and classifies
// like the program's own test pass.
TEST(MnistExample, CheckpointResumesAndSaveWritesOnnx) {
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph_mnist_ckpt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_set(dir, "train", 1000, 3);
  write_set(dir, "t10k", 200, 4);
  const std::string data = "--data " + dir.string() + " --batch 100 --lr 0.5 --json";
  const std::string ckpt = (dir / "state.ckpt").string(), model = (dir / "model.onnx").string();
  const Result straight = run(data + " --epochs 2");
  const Result first = run(data + " --epochs 1 --checkpoint " + ckpt);
  const Result resumed = run(data + " --epochs 1 --load " + ckpt + " --save " + model);
  ASSERT_EQ(straight.status, 0) << straight.err;
  ASSERT_EQ(first.status, 0) << first.err;
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resumed from checkpoint"), std::string::npos) << resumed.err;
  const std::string a = straight.out.substr(straight.out.rfind('{'));
  const std::string b = resumed.out.substr(resumed.out.rfind('{'));
  EXPECT_EQ(field(a, "final_loss"), field(b, "final_loss"));
  EXPECT_EQ(field(a, "test_accuracy"), field(b, "test_accuracy"));

  namespace ho = hetgraph::onnx;
  ho::Model m = ho::import(model, {.input_shapes = {{"x", {200, 784}}}});
  EXPECT_EQ(m.input_info[0].declared, (std::vector<std::int64_t>{-1, 784}));
  hetgraph::CompiledGraph cg = m.compile();
  const auto test = hetgraph::data::load_mnist(dir.string());
  std::vector<float> x(200 * 784);
  test.test.images(0, 200, x);
  cg.run({{"x", x}});
  const auto p = cg.read("probs");
  int correct = 0;
  for (int i = 0; i < 200; ++i) {
    const auto row = p.begin() + i * 10;
    correct +=
        std::max_element(row, row + 10) - row == test.test.labels[static_cast<std::size_t>(i)];
  }
  EXPECT_EQ(correct / 200.0, field(b, "test_accuracy"));
  // A damaged checkpoint stops the run with the file's name, before any training.
  std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << "HGCKPT";
  const Result bad = run(data + " --epochs 1 --load " + ckpt);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find(ckpt), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

// --optimizer and --shuffle: Adam with a seeded order trains as well as SGD, the same seed gives
// the same run bitwise and another seed another one; a checkpoint carries Adam's moments and
// step count, so one epoch, a checkpoint and one more epoch end where two epochs straight do;
// an SGD checkpoint fine-tunes with Adam.
TEST(MnistExample, OptimizersShuffleAndResume) {
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph_mnist_optim_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_set(dir, "train", 1000, 5);
  write_set(dir, "t10k", 200, 6);
  const std::string data = "--data " + dir.string() + " --batch 100 --json ";
  const std::string ckpt = (dir / "adam.ckpt").string();
  auto last = [](const Result& r) { return r.out.substr(r.out.rfind('{')); };
  const Result a = run(data + "--epochs 2 --optimizer adam --lr 0.01 --shuffle 3");
  const Result again = run(data + "--epochs 2 --optimizer adam --lr 0.01 --shuffle 3");
  const Result other = run(data + "--epochs 2 --optimizer adam --lr 0.01 --shuffle 4");
  const Result straight = run(data + "--epochs 2 --optimizer adamw --lr 0.01 --weight-decay 0.1");
  const Result first =
      run(data + "--epochs 1 --optimizer adamw --lr 0.01 --weight-decay 0.1 --checkpoint " + ckpt);
  const Result resumed =
      run(data + "--epochs 1 --optimizer adamw --lr 0.01 --weight-decay 0.1 --load " + ckpt);
  // Fine-tuning with Adam from a plain SGD checkpoint: W and b load, Adam's state starts fresh.
  const std::string sgd = (dir / "sgd.ckpt").string();
  const Result sgd_run = run(data + "--epochs 1 --checkpoint " + sgd);
  const Result tuned = run(data + "--epochs 1 --optimizer adam --lr 0.01 --load " + sgd);
  fs::remove_all(dir);
  for (const Result* r : {&a, &again, &other, &straight, &first, &resumed, &sgd_run, &tuned})
    ASSERT_EQ(r->status, 0) << r->err;
  EXPECT_NE(tuned.err.find("resumed from checkpoint " + sgd + " (W, b)"), std::string::npos)
      << tuned.err;
  EXPECT_NE(tuned.err.find("not in the checkpoint, starting fresh: W/"), std::string::npos)
      << tuned.err;
  EXPECT_GT(field(last(tuned), "test_accuracy"), field(last(sgd_run), "test_accuracy") - 0.05);
  EXPECT_NE(last(a).find("\"optimizer\":\"adam\""), std::string::npos) << last(a);
  EXPECT_EQ(field(last(a), "shuffle"), 3);
  EXPECT_GT(field(last(a), "test_accuracy"), 0.95);
  EXPECT_EQ(field(last(a), "final_loss"), field(last(again), "final_loss"));
  EXPECT_NE(field(last(a), "final_loss"), field(last(other), "final_loss"));
  EXPECT_EQ(field(last(straight), "final_loss"), field(last(resumed), "final_loss"));
  EXPECT_EQ(field(last(straight), "test_accuracy"), field(last(resumed), "test_accuracy"));
}

// The documentation's mpirun lines (docs/distributed.md) work as written, as root too: each
// carries --allow-run-as-root, and the one-machine line runs (on a small data set and one
// epoch) with both ranks.
TEST(MnistExample, DocumentedMpirunLinesRunAsWritten) {
  std::ifstream readme(std::string(HETGRAPH_SOURCE_DIR) + "/docs/distributed.md");
  std::vector<std::string> lines;
  for (std::string l; std::getline(readme, l);) {
    if (l.rfind("mpirun ", 0) == 0) lines.push_back(l);
  }
  ASSERT_GE(lines.size(), 3u);
  for (const std::string& l : lines)
    EXPECT_NE(l.find("--allow-run-as-root"), std::string::npos) << l;
  std::string line = lines[0];
  const std::string example = "build/examples/mnist_softmax";
  const auto at = line.find(example);
  ASSERT_NE(at, std::string::npos) << line;
  line.replace(at, example.size(), HETGRAPH_MNIST_EXAMPLE);
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph_mnist_readme_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_set(dir, "train", 400, 1);
  write_set(dir, "t10k", 100, 2);
  const std::string cmd = line + " --data " + dir.string() + " --epochs 1 --batch 100 > " +
                          (dir / "out").string() + " 2> " + (dir / "err").string();
  const int status = std::system(cmd.c_str());
  std::ifstream err(dir / "err");
  const std::string errors((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  EXPECT_EQ(WEXITSTATUS(status), 0) << cmd << "\n" << errors;
  EXPECT_EQ(errors.find("trains alone"), std::string::npos) << errors;  // two ranks, not one
}

// mpirun -np P mnist_softmax --data-parallel: each rank trains on its share of every batch and
// the run ends where the single-process one does (loss to float rounding: the gradient sums are
// grouped differently; see docs/distributed.md), with the same test accuracy; with SGD and with
// Adam.
TEST(MnistExample, DataParallelMatchesTheSingleProcessRun) {
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph_mnist_dp_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_set(dir, "train", 2000, 1);
  write_set(dir, "t10k", 500, 2);
  const std::string base = "--data " + dir.string() + " --epochs 3 --lr 0.5 --json";
  const std::string args = base + " --batch 100";
  const Result single = run(args);
  ASSERT_EQ(single.status, 0) << single.err;
  const std::string want = single.out.substr(single.out.rfind('{'));
  for (int ranks : {2, 4}) {
    const Result dp = run(args + " --data-parallel", "-np " + std::to_string(ranks));
    ASSERT_EQ(dp.status, 0) << dp.err;
    const std::string got = dp.out.substr(dp.out.rfind('{'));
    EXPECT_EQ(field(got, "ranks"), ranks);
    EXPECT_NEAR(field(got, "final_loss"), field(want, "final_loss"),
                1e-5 * field(want, "final_loss"))
        << ranks << " ranks";
    EXPECT_EQ(field(got, "test_accuracy"), field(want, "test_accuracy")) << ranks << " ranks";
    // Rank 0 alone prints: one result line.
    EXPECT_EQ(dp.out.find("test accuracy"), dp.out.rfind("test accuracy")) << dp.out;
  }
  // Adam (and every rule of minimize) averages the gradients the same way.
  const std::string adam =
      "--data " + dir.string() + " --epochs 3 --lr 0.01 --json --batch 100 --optimizer adam";
  const Result single_adam = run(adam);
  ASSERT_EQ(single_adam.status, 0) << single_adam.err;
  const Result dp_adam = run(adam + " --data-parallel", "-np 2");
  ASSERT_EQ(dp_adam.status, 0) << dp_adam.err;
  const std::string want_adam = single_adam.out.substr(single_adam.out.rfind('{')),
                    got_adam = dp_adam.out.substr(dp_adam.out.rfind('{'));
  EXPECT_NEAR(field(got_adam, "final_loss"), field(want_adam, "final_loss"),
              1e-5 * field(want_adam, "final_loss"));
  EXPECT_EQ(field(got_adam, "test_accuracy"), field(want_adam, "test_accuracy"));
  // Without a launcher MPI makes a world of one: the run trains alone and says so.
  const Result alone =
      run("--data " + dir.string() + " --epochs 1 --lr 0.5 --batch 100 --data-parallel");
  ASSERT_EQ(alone.status, 0) << alone.err;
  EXPECT_NE(alone.err.find("--data-parallel with one process"), std::string::npos) << alone.err;
  EXPECT_EQ(single.err.find("--data-parallel with one process"), std::string::npos);
  // A global batch the ranks cannot share equally: every rank refuses, naming the flag.
  const Result bad = run(base + " --batch 98 --data-parallel", "-np 4");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--batch 98 cannot be shared by 4 ranks"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

// Issue 46: ranks given different epochs, or data sets of different sizes, fail at once on
// every rank naming what differs (they waited the 600 s collective deadline before).
TEST(MnistExample, DataParallelRanksOutOfStepFailAtOnce) {
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph_mnist_step_" + std::to_string(::getpid()));
  fs::create_directories(dir / "small");
  fs::create_directories(dir / "large");
  write_set(dir / "small", "train", 600, 1);
  write_set(dir / "small", "t10k", 100, 2);
  write_set(dir / "large", "train", 800, 1);
  write_set(dir / "large", "t10k", 100, 2);
  // Two programs under one mpirun (MPMD): rank 0 runs the first, rank 1 the second.
  auto mpmd = [&](const std::string& rank0, const std::string& rank1) {
    const std::string common = " --batch 100 --threads 1 --data-parallel ";
    const auto t0 = std::chrono::steady_clock::now();
    const Result r = run(common + rank1, "-np 1 " + std::string(HETGRAPH_MNIST_EXAMPLE) + common +
                                             rank0 + " : -np 1");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 60.0) << "the ranks waited for a collective deadline\n" << r.err;
    EXPECT_NE(r.status, 0);
    return r;
  };
  const std::string small = "--data " + (dir / "small").string(),
                    large = "--data " + (dir / "large").string();
  const Result epochs = mpmd(small + " --epochs 3", small + " --epochs 2");
  EXPECT_NE(epochs.err.find("ranks disagree on --epochs: '3' on rank 0; '2' on rank 1"),
            std::string::npos)
      << epochs.err;
  const Result data = mpmd(small + " --epochs 1", large + " --epochs 1");
  EXPECT_NE(data.err.find("training images per rank: '300' on rank 0; '400' on rank 1"),
            std::string::npos)
      << data.err;
  EXPECT_NE(data.err.find("batches per epoch: '6' on rank 0; '8' on rank 1"), std::string::npos)
      << data.err;
  fs::remove_all(dir);
}

// Issue 13: the forward matmul on the OpenCL device, the rest (gradients, SGD) on the CPU, as
// one graph: the same accuracy as the CPU alone (the products differ in rounding only).
TEST(MnistExample, TrainsAcrossCpuAndOpenClToTheSameAccuracy) {
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph_mnist_hetero_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_set(dir, "train", 2000, 3);
  write_set(dir, "t10k", 500, 4);
  const std::string args = "--data " + dir.string() + " --epochs 3 --batch 100 --lr 0.5 --json";
  const Result cpu = run(args);
  const Result het = run(args + " --platform hetero");
  fs::remove_all(dir);
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  ASSERT_EQ(het.status, 0) << het.err;
  const std::string a = cpu.out.substr(cpu.out.rfind('{')), h = het.out.substr(het.out.rfind('{'));
  EXPECT_NE(h.find("\"platform\":\"heterogeneous\""), std::string::npos) << h;
  EXPECT_NE(h.find("\"engine\":\"heterogeneous (cpu + opencl:"), std::string::npos) << h;
  EXPECT_GT(field(h, "test_accuracy"), 0.95);
  EXPECT_NEAR(field(h, "test_accuracy"), field(a, "test_accuracy"), 0.004);
  EXPECT_NEAR(field(h, "final_loss"), field(a, "final_loss"), 1e-4 + 1e-3 * field(a, "final_loss"));
}

TEST(MnistExample, BadDataDirectoryAndArguments) {
  Result r = run("--data /nonexistent/mnist");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("/nonexistent/mnist"), std::string::npos) << r.err;
  r = run("--epochs");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--epochs: needs a value"), std::string::npos) << r.err;
  r = run("--bogus");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown option '--bogus'"), std::string::npos) << r.err;
}

// Every bad value is refused before anything runs: exit 2, the flag and the value on stderr
// (the program does not even look at --data). Before, 1e3 ran 1 epoch, 10abc batch 10 and nan
// trained to NaN with exit 0; -1 and 0 printed the usage alone.
TEST(MnistExample, BadValuesNameTheFlagAndTheValue) {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"--epochs 1e3", "--epochs: '1e3' is not an integer"},
      {"--batch 10abc", "--batch: '10abc' is not an integer"},
      {"--lr nan", "--lr: 'nan' is not a finite number"},
      {"--lr inf", "--lr: 'inf' is not a finite number"},
      {"--lr 0", "--lr: '0' is out of range (more than 0"},
      {"--lr -0.5", "--lr: '-0.5' is out of range"},
      {"--lr 1e39", "--lr: '1e39' is out of range"},
      {"--lr 0.1x", "--lr: '0.1x' is not a number"},
      {"--epochs -1", "--epochs: '-1' is out of range (from 1 to 1000000)"},
      {"--batch 0", "--batch: '0' is out of range"},
      {"--epochs 99999999999999999999", "--epochs: '99999999999999999999' is out of range"},
      {"--epochs ' 3'", "--epochs: ' 3' is not an integer"},
      {"--threads -2", "--threads: '-2' is out of range"},
      {"--executors 2x", "--executors: '' is not an integer"},
      {"--executors 0x1", "--executors: '0' is out of range"},
      {"--executors 99x1", "--executors: '99x1' is out of range (at most 64 executors)"},
      {"--executors 2", "--executors: '2' is not of the form NxT"},
      {"--platform gpu", "--platform: 'gpu' is not one of cpu, opencl"},
      {"--engine fast", "--engine: 'fast' is not one of sequential"},
      {"--epochs 3 --epochs 4", "--epochs: given twice"},
      {"--json=1", "--json: takes no value"},
      {"stray", "unexpected argument 'stray'"},
      {"--optimizer adamax", "--optimizer: 'adamax' is not one of sgd"},
      {"--weight-decay -1", "--weight-decay: '-1' is out of range"},
      {"--shuffle -3", "--shuffle: '-3' is out of range"},
  };
  for (const auto& c : cases) {
    const Result r = run(std::string("--data /nonexistent ") + c.args);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(std::string("mnist_softmax: ") + c.says), std::string::npos)
        << c.args << ": " << r.err;
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << c.args;
  }
  // --name=value works like --name value; --help prints the usage on stdout and exits 0.
  Result r = run("--data /nonexistent --epochs=2");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent"), std::string::npos) << r.err;
  r = run("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("usage: mnist_softmax"), std::string::npos) << r.out;
}

}  // namespace
