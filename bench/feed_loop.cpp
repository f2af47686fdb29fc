// SPDX-License-Identifier: Apache-2.0
// An imported model run through run(feeds) (its input copied in at each run), as the Python
// module and most C++ callers run a graph; hetgraph-run feeds through mapped inputs instead.
// Prints one JSON line: the median and fastest of RUNS runs after 20 (the engine's search).
//   feed_loop MODEL_DIR RUNS      (MODEL_DIR: a folder of bench/models/export_models.py)
// Built against two libhetgraph builds for a before/after (bench/feed_loop_ab.sh), e.g.:
//   g++ -std=c++20 -O2 -I OLD/include -I OLD/build/include bench/feed_loop.cpp -o feed_old \
//       OLD/build/libhetgraph.so.0 -Wl,-rpath,OLD/build
// -DNEW: the layout search off (CompileOptions::experimental.layout_search, newer than the
// feed fix this measured), so that only the feed path differs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <hetgraph/hetgraph.hpp>
#include <hetgraph/onnx.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  namespace ho = hetgraph::onnx;
  const std::string dir = argv[1];
  const int runs = std::stoi(argv[2]);
  ho::Model m = ho::import(dir + "/model.onnx");
  hetgraph::CompileOptions o;
#ifdef NEW
  o.experimental.layout_search = false;  // the feed fix alone
#endif
  hetgraph::CompiledGraph cg = m.compile(hetgraph::GraphCompiler(hetgraph::Platform::cpu(), o));
  ho::TensorData x = ho::read_tensor(dir + "/x.pb");
  std::vector<double> t;
  for (int i = 0; i < runs + 20; ++i) {  // 20 first: the engine's search
    const auto t0 = std::chrono::steady_clock::now();
    cg.run({{"x", x.f32}});
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  t.erase(t.begin(), t.begin() + 20);
  std::sort(t.begin(), t.end());
  std::printf("{\"model\":\"%s\",\"runs\":%d,\"median_s\":%.9g,\"min_s\":%.9g}\n", dir.c_str(),
              runs, t[t.size() / 2], t[0]);
}
