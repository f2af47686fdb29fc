// SPDX-License-Identifier: Apache-2.0
// End to end: examples/fashion_cnn on a few hundred Fashion-MNIST images (Debian's
// dataset-fashion-mnist, scripts/install-deps.sh): the loss falls and the test accuracy ends
// far above chance (0.1); bad sizes are errors naming the option.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "test_util.hpp"

namespace fs = std::filesystem;

namespace {

struct Result {
  int status;
  std::string out, err;
};

Result run(const std::string& args) {
  const std::string tmp =
      (fs::temp_directory_path() / ("hetgraph_fashion_" + std::to_string(::getpid()))).string();
  const std::string cmd =
      std::string(HETGRAPH_FASHION_EXAMPLE) + " " + args + " >" + tmp + ".out 2>" + tmp + ".err";
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::stringstream ss;
    ss << std::ifstream(p).rdbuf();
    fs::remove(p);
    return ss.str();
  };
  std::string out = slurp(tmp + ".out");
  return {WEXITSTATUS(status), std::move(out), slurp(tmp + ".err")};
}

// Every value of `key` in the JSON lines of `out`, in order.
std::vector<double> fields(const std::string& out, const std::string& key) {
  const std::regex re("\"" + key + "\":([-0-9.eE]+)");
  std::vector<double> v;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    v.push_back(std::stod((*it)[1]));
  }
  return v;
}

}  // namespace

TEST(FashionCnnExample, LearnsOnASubset) {
  const Result r = run("--train 600 --test 500 --epochs 3 --batch 50 --pipeline on --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto loss = fields(r.out, "mean_loss"), acc = fields(r.out, "test_accuracy");
  ASSERT_EQ(loss.size(), 3u) << r.out;
  ASSERT_EQ(acc.size(), 3u) << r.out;
  EXPECT_LT(loss[2], loss[0]) << r.out;
  EXPECT_GT(acc[2], 0.5) << r.out;  // chance is 0.1; this subset reaches about 0.7
  EXPECT_NE(r.out.find("ran on cpu: "), std::string::npos) << r.out;  // the device, named
}

TEST(FashionCnnExample, SizesAreCheckedWithTheirNames) {
  Result r = run("--train 100000 --epochs 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--train 100000"), std::string::npos) << r.err;
  r = run("--train 40 --test 500 --batch 50 --epochs 1");  // a batch larger than the data
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("batch of 50"), std::string::npos) << r.err;
}
