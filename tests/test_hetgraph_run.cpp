// hetgraph-run end to end: a backend-test model run from its input files writes outputs that
// match the expected ones, on each platform; --json prints one line; mistakes and unsupported
// models exit with a message.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hetgraph/onnx.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace ho = hetgraph::onnx;

const std::string kData = "/usr/share/libonnx-testdata/data/";

struct Result {
  int status = -1;
  std::string out;
};

Result run(const std::string& args) {
  Result r;
  FILE* p = ::popen((std::string(HETGRAPH_RUN) + " " + args + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(HetgraphRun, OutputsMatchTheBackendTestOnEachPlatform) {
  const std::string t = kData + "pytorch-converted/test_Conv2d/";
  const fs::path dir = fs::temp_directory_path() / "hetgraph-run-test";
  std::vector<std::string> platforms{"cpu"};
  if (hetgraph::Platform::opencl_available() || testing_util::opencl_required())
    platforms.push_back("opencl");
  for (const std::string& p : platforms) {
    fs::remove_all(dir);
    const Result r =
        run(t + "model.onnx --platform " + p + " --repeat 3 --warmup 1 --input 0=" + t +
            "test_data_set_0/input_0.pb --output-dir " + dir.string());
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("latency   median"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("memory"), std::string::npos) << r.out;
    const ho::TensorData got = ho::read_tensor((dir / "3.pb").string());
    const ho::TensorData want = ho::read_tensor(t + "test_data_set_0/output_0.pb");
    ASSERT_EQ(got.shape, want.shape);
    for (std::size_t k = 0; k < want.f32.size(); ++k)
      EXPECT_NEAR(got.f32[k], want.f32[k], 1e-7 + 1e-3 * std::fabs(want.f32[k]));
  }
  fs::remove_all(dir);
}

TEST(HetgraphRun, JsonIsOneLine) {
  const Result r =
      run(kData + "node/test_lstm_defaults/model.onnx --json --repeat 2 --warmup 0 --engine auto");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  for (const char* key : {"\"median_s\":", "\"min_s\":", "\"max_s\":", "\"setup_s\":",
                          "\"planned_bytes\":", "\"inputs\":\"random\""}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  }
  // The process's peak RSS: at least the loaded libraries' pages (several MiB).
  const auto at = r.out.find("\"peak_rss_mib\":");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GT(std::stod(r.out.substr(at + 15)), 4.0) << r.out;
}

// --no-concat-in-place (CompileOptions::concat_in_place off) gives the same outputs: an
// inception-like block at batch 1, exported from a graph, its concat computed in place or copied.
TEST(HetgraphRun, ConcatInPlaceFlagKeepsTheOutputs) {
  using namespace hetgraph;
  Graph g;
  auto x = g.input("x");
  auto w1 = g.variable("w1", {8, 16, 1, 1}, Initializer::uniform(-1, 1, 1));
  auto w2 = g.variable("w2", {16, 16, 1, 1}, Initializer::uniform(-1, 1, 2));
  auto w3 = g.variable("w3", {8, 40, 1, 1}, Initializer::uniform(-1, 1, 3));
  Node y = conv2d(concat({relu(conv2d(x, w1)), relu(conv2d(x, w2)), tanh(x)}, 1), w3);
  const fs::path model = fs::temp_directory_path() / "hetgraph-run-concat.onnx";
  ho::export_model(g, std::vector<Node>{y}, {{"x", {1, 16, 5, 5}}}, model.string());
  std::string sums[2];
  for (int off = 0; off < 2; ++off) {
    const Result r = run(model.string() + " --json --repeat 1 --warmup 0 --engine sequential" +
                         (off ? " --no-concat-in-place" : ""));
    ASSERT_EQ(r.status, 0) << r.out;
    const auto at = r.out.find("\"checksum\":");
    ASSERT_NE(at, std::string::npos) << r.out;
    sums[off] = r.out.substr(at, r.out.find(',', at) - at);
  }
  EXPECT_EQ(sums[0], sums[1]);
  fs::remove(model);
}

TEST(HetgraphRun, MistakesAndUnsupportedModelsSayWhy) {
  Result r = run(kData + "node/test_abs/model.onnx --input nope=x.pb");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("no input 'nope'"), std::string::npos) << r.out;
  r = run("--repeat 3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("MODEL.onnx is missing"), std::string::npos) << r.out;
  r = run(kData + "node/test_top_k/model.onnx");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("TopK-11"), std::string::npos) << r.out;
  r = run("/nonexistent.onnx");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("/nonexistent.onnx"), std::string::npos) << r.out;
}

// Where the outputs and the trace go is checked before the model is even read: an
// --output-dir that cannot be made (a file, a folder under a file) or a --trace in a folder
// that does not exist is exit status 2 naming the flag, at once (before: an uncaught
// std::filesystem_error aborted the program after the whole run, and a bad --trace failed
// only after it).
TEST(HetgraphRun, OutputPlacesAreCheckedBeforeRunning) {
  const fs::path file = fs::temp_directory_path() / "hetgraph-run-not-a-folder";
  std::ofstream(file) << "x";
  const std::string model = kData + "node/test_abs/model.onnx";
  for (const std::string& args :
       {model + " --output-dir " + file.string(), model + " --output-dir " + file.string() + "/sub",
        "/nonexistent.onnx --output-dir " + file.string() + "/sub",
        model + " --trace /nonexistent/folder/trace.json"}) {
    SCOPED_TRACE(args);
    const Result r = run(args + " --repeat 1 --warmup 0");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(
        r.out.find(args.find("--trace") != std::string::npos ? "--trace: " : "--output-dir: "),
        std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("latency"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("/nonexistent.onnx"), std::string::npos) << r.out;
  }
  fs::remove(file);
}
}  // namespace
