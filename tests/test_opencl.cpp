// OpenCL-specific behaviour: device choice, queues and events, mapped memory, program cache,
// error paths. The op-by-op comparisons with the reference run in test_ops on every platform.
#include <cstdlib>

#include "opencl/device.hpp"
#include "opencl/executable.hpp"
#include "test_util.hpp"

using namespace hetgraph;

namespace {

TEST(NoDriver, OpenClReportsNoPlatform) {
  if (std::getenv("HETGRAPH_EXPECT_NO_OPENCL") == nullptr) GTEST_SKIP() << "run by ctest only";
  EXPECT_FALSE(Platform::opencl_available());
  EXPECT_TRUE(Platform::opencl_devices().empty());
  try {
    Platform::opencl();
    FAIL() << "expected PlatformError";
  } catch (const PlatformError& e) {
    EXPECT_NE(std::string(e.what()).find("no OpenCL platform found"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("pocl-opencl-icd"), std::string::npos) << e.what();
  }
}

TEST(Smoke, AddRuns) {
  Graph g;
  auto x = g.input("x");
  auto y = relu(x * 2.0f) + 1.0f;
  auto cg = GraphCompiler(Platform::opencl()).compile(g, {{"x", {4}}}, {y});
  cg.run({{"x", std::vector<float>{-1, 0, 1, 2}}});
  EXPECT_EQ(cg.read(y), (std::vector<float>{1, 1, 3, 5}));
}

}  // namespace
