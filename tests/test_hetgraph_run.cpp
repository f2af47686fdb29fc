// SPDX-License-Identifier: Apache-2.0
// hetgraph-run end to end: a backend-test model run from its input files writes outputs that
// match the expected ones, on each platform; --json prints one line; mistakes and unsupported
// models exit with a message.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

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
  FILE* p = ::popen((testing_util::build_program("tools/hetgraph-run") + " " + args + " 2>&1").c_str(), "r");
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
    // Latency in a unit that keeps it readable (this model runs in microseconds or
    // milliseconds, never "0.000004 s").
    EXPECT_TRUE(std::regex_search(r.out, std::regex("latency   median [0-9.]+ (us|ms)  min ")))
        << r.out;
    EXPECT_NE(r.out.find("memory"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\ndevice    " + p), std::string::npos) << r.out;  // the device, named
    const ho::TensorData got = ho::read_tensor((dir / "3.pb").string());
    const ho::TensorData want = ho::read_tensor(t + "test_data_set_0/output_0.pb");
    ASSERT_EQ(got.shape, want.shape);
    // The report shows the output's first values, as written to the file.
    std::string first;
    for (std::size_t k = 0; k < 6; ++k) {
      char b[32];
      std::snprintf(b, sizeof b, "%s%.6g", k ? " " : "", static_cast<double>(got.f32[k]));
      first += b;
    }
    first += " ... (" + std::to_string(got.f32.size()) + " values)";
    EXPECT_NE(r.out.find("\n          " + first + "\n"), std::string::npos) << first << "\n"
                                                                            << r.out;
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
                          "\"planned_bytes\":", "\"inputs\":\"random\"", "\"device\":\"cpu: "}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  }
  // The process's peak RSS: at least the loaded libraries' pages (several MiB).
  const auto at = r.out.find("\"peak_rss_mib\":");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GT(std::stod(r.out.substr(at + 15)), 4.0) << r.out;
}

// --profile: the timed runs' time by op kind and the slowest nodes, as a table or (with
// --json) in the JSON line; the automatic engine's search and the warm-up are not in it.
TEST(HetgraphRun, ProfileTableAndJson) {
  const std::string model = kData + "pytorch-converted/test_Conv2d/model.onnx";
  Result r = run(model + " --profile --repeat 3 --warmup 1 --engine sequential");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("latency   median"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("profile   3 runs, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not of wall time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nop kind "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nconv2d "), std::string::npos) << r.out;  // an op line
  EXPECT_NE(r.out.find(" nodes "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("] -> ["), std::string::npos) << r.out;  // a node's shapes
  r = run(model + " --profile --json --repeat 3 --warmup 1 --engine auto");
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  const fs::path line = fs::temp_directory_path() / "hetgraph-run-profile.json";
  std::ofstream(line) << r.out;
  const std::string check =
      "python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); p=d['profile'];"
      "assert p['runs']==3, p['runs']; assert p['ops'] and p['nodes'];"
      "assert all(n['calls']==3 and n['kernel'] for n in p['nodes']), p['nodes'];"
      "assert abs(sum(o['share'] for o in p['ops'])-1)<1e-6\" " +
      line.string();
  EXPECT_EQ(std::system(check.c_str()), 0) << r.out;
  fs::remove(line);
}

// --no-concat-in-place (CompileOptions::Experimental::concat_in_place off) gives the same outputs:
// an inception-like block at batch 1, exported from a graph, its concat computed in place or
// copied.
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
  const fs::path fifo = fs::temp_directory_path() / "hetgraph-run-trace.fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string model = kData + "node/test_abs/model.onnx";
  const fs::path copy = fs::temp_directory_path() / "hetgraph-run-model-copy.onnx";
  fs::copy_file(model, copy, fs::copy_options::overwrite_existing);
  for (const std::string& args :
       {model + " --output-dir " + file.string(), model + " --output-dir " + file.string() + "/sub",
        "/nonexistent.onnx --output-dir " + file.string() + "/sub",
        model + " --trace /nonexistent/folder/trace.json",
        // Issue 46, second probe: a FIFO passed the check and the trace then waited for a
        // reader for ever (a device or a link to one would have been replaced by a file).
        model + " --trace " + fifo.string(),
        // Two arguments swapped: the trace replaced the model being run (a copy here).
        copy.string() + " --trace " + copy.string()}) {
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
  EXPECT_EQ(ho::import(copy.string()).ops, std::vector<std::string>{"Abs"});  // still the model
  fs::remove(file);
  fs::remove(fifo);
  fs::remove(copy);
}

// Outputs whose names are one file name once made safe ("a/b" and "a_b") are written to files
// of their own (issue 46, second probe: the second overwrote the first, and both were listed as
// written there).
TEST(HetgraphRun, OutputsWhoseFileNamesMeetAreEachWritten) {
  using namespace hetgraph;
  Graph g;
  auto x = g.input("x");
  auto a = tanh(x), b = -x;
  const fs::path model = fs::temp_directory_path() / "hetgraph-run-names.onnx";
  const fs::path dir = fs::temp_directory_path() / "hetgraph-run-names";
  ho::export_model(g, std::vector<Node>{a, b}, {{"x", {3}}}, model.string(),
                   {.output_names = {"a/b", "a_b"}});
  fs::remove_all(dir);
  const Result r = run(model.string() + " --repeat 1 --warmup 0 --output-dir " + dir.string());
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u) << r.out;
  const ho::TensorData first = ho::read_tensor((dir / files[0]).string());
  const ho::TensorData second = ho::read_tensor((dir / files[1]).string());
  EXPECT_NE(first.f32, second.f32);  // tanh(x) and -x, one in each
  for (const std::string& f : files) EXPECT_NE(r.out.find(f), std::string::npos) << r.out;
  fs::remove_all(dir);
  fs::remove(model);
}

// A model with a dynamic dim runs at each --shape given for it, one report each, in one process
// (the k-th --shape of every input makes the k-th run; one given once serves every run).
TEST(HetgraphRun, SeveralShapesRunInOneProcess) {
  using namespace hetgraph;
  Graph g;
  auto x = g.input("x"), w = g.input("w");
  auto y = relu(x) * w;
  const fs::path model = fs::temp_directory_path() / "hetgraph-run-dynamic.onnx";
  ho::export_model(g, std::vector<Node>{y}, {{"x", {2, 3}}, {"w", {3}}}, model.string());
  ::onnx::ModelProto m;
  {
    std::ifstream in(model, std::ios::binary);
    ASSERT_TRUE(m.ParseFromIstream(&in));
  }
  for (auto* v : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)})
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  {
    std::ofstream out(model, std::ios::binary | std::ios::trunc);
    ASSERT_TRUE(m.SerializeToOstream(&out));
  }
  const std::string args = model.string() + " --repeat 2 --warmup 0 --shape w=3 ";
  const Result r = run(args + "--shape x=2x3 --shape x=5x3 --shape x=1x3");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* want :
       {"shapes    w=[3], x=[2, 3]\n", "shapes    w=[3], x=[5, 3]\n", "shapes    w=[3], x=[1, 3]\n",
        "output    output_0 [5, 3] float", "output    output_0 [1, 3] float"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in " << r.out;
  }
  std::size_t reports = 0;
  for (std::size_t at = r.out.find("\nlatency "); at != std::string::npos;
       at = r.out.find("\nlatency ", at + 1))
    ++reports;
  EXPECT_EQ(reports, 3u) << r.out;
  const Result json = run(args + "--shape x=2x3 --shape x=4x3 --json");
  ASSERT_EQ(json.status, 0) << json.out;
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '\n'), 2) << json.out;
  const Result files = run(args + "--shape x=2x3 --shape x=4x3 --output-dir /tmp/x");
  EXPECT_NE(files.status, 0);
  EXPECT_NE(files.out.find("not with --input or --output-dir"), std::string::npos) << files.out;
  fs::remove(model);
}

// The import's budgets (ImportOptions) are flags of hetgraph-run (issue 46: there was no way to
// raise them from the command line): a model over one fails naming the flag that raises it,
// and raising it lets the model import and run.
TEST(HetgraphRun, ImportBudgetsAreFlagsTheirErrorsName) {
  // y = x + ConstantOfShape([256]) * 1.5, x [256]: 2 ONNX nodes, an input of 1 KiB, a constant
  // of 1 KiB built at import.
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("budgets");
  for (auto* v : {g->add_input(), g->add_output()}) {
    v->set_name(v == &g->input(0) ? "x" : "y");
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(1);
    tt->mutable_shape()->add_dim()->set_dim_value(256);
  }
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(7);
  shape->add_dims(1);
  shape->add_int64_data(256);
  auto* c = g->add_node();
  c->set_op_type("ConstantOfShape");
  c->add_input("shape");
  c->add_output("c");
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(1);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_float_data(1.5f);
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->add_input("x");
  add->add_input("c");
  add->add_output("y");
  const fs::path model = fs::temp_directory_path() / "hetgraph-run-budgets.onnx";
  std::ofstream(model, std::ios::binary) << m.SerializeAsString();
  struct Budget {
    std::string flag, low, high;
  };
  for (const Budget& b :
       {Budget{"--max-import-nodes", "1", "2"}, Budget{"--max-import-host-bytes", "512", "4096"},
        Budget{"--max-import-tensor-bytes", "512", "1024"},
        Budget{"--max-import-seconds", "1e-9", "100"}}) {
    SCOPED_TRACE(b.flag);
    Result r = run(model.string() + " --repeat 1 --warmup 0 " + b.flag + " " + b.low);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find(b.flag + " raises it"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("latency"), std::string::npos) << r.out;
    r = run(model.string() + " --repeat 1 --warmup 0 " + b.flag + " " + b.high);
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("latency"), std::string::npos) << r.out;
  }
  // At the default budget: a Loop of 2^21 iterations, refused before it is unrolled.
  ::onnx::ModelProto loop = m;
  auto* lg = loop.mutable_graph();
  lg->clear_node();
  lg->clear_initializer();
  auto* n = lg->add_initializer();
  n->set_name("n");
  n->set_data_type(7);
  n->add_int64_data(std::int64_t{1} << 21);
  auto* l = lg->add_node();
  l->set_op_type("Loop");
  for (const char* in : {"n", "", "x"}) l->add_input(in);
  l->add_output("y");
  auto* body_attr = l->add_attribute();
  body_attr->set_name("body");
  body_attr->set_type(::onnx::AttributeProto::GRAPH);
  auto* body = body_attr->mutable_g();
  body->set_name("body");
  const std::pair<const char*, int> ins[] = {{"i", 7}, {"cond", 9}, {"v", 1}};
  for (const auto& [name, elem] : ins) {
    auto* v = body->add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  const std::pair<const char*, int> outs[] = {{"cond_out", 9}, {"v_out", 1}};
  for (const auto& [name, elem] : outs) {
    auto* v = body->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  auto* id = body->add_node();
  id->set_op_type("Identity");
  id->add_input("cond");
  id->add_output("cond_out");
  auto* relu = body->add_node();
  relu->set_op_type("Relu");
  relu->add_input("v");
  relu->add_output("v_out");
  std::ofstream(model, std::ios::binary | std::ios::trunc) << loop.SerializeAsString();
  const Result r = run(model.string() + " --repeat 1 --warmup 0");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--max-import-nodes raises it"), std::string::npos) << r.out;
  // The flags are in the usage.
  const Result help = run("--help");
  for (const char* flag : {"--max-import-nodes", "--max-import-host-bytes",
                           "--max-import-tensor-bytes", "--max-import-seconds"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  fs::remove(model);
}
}  // namespace
