// SPDX-License-Identifier: Apache-2.0
// The strict command-line parser every program shares (src/common/cli.hpp), the option tables
// of hetgraph-bench and hetgraph-opencl-figures, and the number parsing behind environment
// variables (src/util/parse.hpp). mnist_softmax's table runs end to end in
// test_mnist_example.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <new>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/options.hpp"
#include "examples/mnist_softmax/options.hpp"
#include "hetgraph/cli.hpp"
#include "hetgraph/error.hpp"
#include "tools/hetgraph-run/options.hpp"
#include "util/env.hpp"
#include "util/parse.hpp"

using hetgraph::cli::UsageError;

namespace {

// Parses `args` (split at spaces) with `p`; returns the UsageError message or "".
std::string parse(hetgraph::cli::Parser& p, const std::string& args) {
  std::vector<std::string> words{"prog"};
  std::size_t start = 0;
  while (start <= args.size() && !args.empty()) {
    const std::size_t sp = std::min(args.find(' ', start), args.size());
    words.push_back(args.substr(start, sp - start));
    start = sp + 1;
  }
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());
  try {
    p.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(NumberParsing, IntegersAreWholeDecimalAndInRange) {
  using hetgraph::detail::parse_int;
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-7"), -7);
  EXPECT_EQ(parse_int("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "+1", " 1", "1 ", "1e3", "10abc", "0x10", "1.0", "-",
                          "9223372036854775808", "4294967296:0"}) {
    EXPECT_FALSE(parse_int(bad).has_value()) << bad;
  }
  std::int64_t v = 0;
  EXPECT_EQ(hetgraph::detail::parse_int("99999999999999999999", v),
            hetgraph::detail::ParseStatus::out_of_range);
}

TEST(NumberParsing, RealsAreWhole) {
  double v = 0;
  using hetgraph::detail::parse_real;
  using hetgraph::detail::ParseStatus;
  EXPECT_EQ(parse_real("0.1", v), ParseStatus::ok);
  EXPECT_EQ(v, 0.1);
  EXPECT_EQ(parse_real("1e-3", v), ParseStatus::ok);
  EXPECT_EQ(v, 1e-3);
  EXPECT_EQ(parse_real("nan", v), ParseStatus::ok);  // callers reject it (to_real)
  EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(parse_real("1e999", v), ParseStatus::out_of_range);
  for (const char* bad : {"", "0.1x", " 1", "+1", "0x1p3", "1,5", "--1"})
    EXPECT_EQ(parse_real(bad, v), ParseStatus::malformed) << bad;
  EXPECT_EQ(hetgraph::detail::quote("a\nb'\xff"), "'a\\x0ab\\x27\\xff'");
}

// HETGRAPH_OPENCL_DEVICE: two plain indices. "-0:0" came from the env fuzz target (it parsed
// as 0:0).
TEST(Environment, DeviceSpecIsTwoPlainIndices) {
  using hetgraph::detail::parse_device_spec;
  EXPECT_EQ(parse_device_spec("0:0"), (std::pair{0, 0}));
  EXPECT_EQ(parse_device_spec("1:2147483647"), (std::pair{1, 2147483647}));
  for (const char* bad : {"-0:0", "0:-0", "4294967296:0", "2147483648:0", "0:0:0", ":", "0", ""})
    EXPECT_FALSE(parse_device_spec(bad).has_value()) << bad;
}

TEST(Environment, IntegersAndChoicesAreStrict) {
  using hetgraph::detail::env_choice;
  using hetgraph::detail::env_int;
  const char* name = "HETGRAPH_TEST_CLI_VALUE";
  unsetenv(name);
  EXPECT_EQ(env_int<hetgraph::Error>(name, 1, 10, 7), 7);
  EXPECT_EQ(env_choice<hetgraph::Error>(name, {"", "0", "force"}), "");
  const struct {
    const char* value;
    const char* message;
  } bad[] = {{"12abc", "HETGRAPH_TEST_CLI_VALUE='12abc' is not an integer"},
             {"1e3", "HETGRAPH_TEST_CLI_VALUE='1e3' is not an integer"},
             {"11", "HETGRAPH_TEST_CLI_VALUE='11' is out of range (from 1 to 10)"},
             {"99999999999999999999", "is out of range"}};
  for (const auto& b : bad) {
    setenv(name, b.value, 1);
    try {
      env_int<hetgraph::Error>(name, 1, 10, 7);
      ADD_FAILURE() << b.value;
    } catch (const hetgraph::Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.message), std::string::npos) << e.what();
    }
  }
  setenv(name, "3", 1);
  EXPECT_EQ(env_int<hetgraph::Error>(name, 1, 10, 7), 3);
  setenv(name, "yes", 1);
  EXPECT_THROW(env_choice<hetgraph::Error>(name, {"", "0", "force"}), hetgraph::Error);
  unsetenv(name);
}

TEST(Environment, FlagsAndRealsAreStrict) {
  using hetgraph::detail::env_flag;
  using hetgraph::detail::env_real;
  const char* name = "HETGRAPH_TEST_CLI_VALUE";
  unsetenv(name);
  EXPECT_FALSE(env_flag(name));
  EXPECT_EQ(env_real<hetgraph::Error>(name, 0, 100, 64), 64);
  for (const char* off : {"", "0"}) {
    setenv(name, off, 1);
    EXPECT_FALSE(env_flag(name)) << "'" << off << "'";
  }
  setenv(name, "1", 1);
  EXPECT_TRUE(env_flag(name));
  setenv(name, "2.5", 1);
  EXPECT_EQ(env_real<hetgraph::Error>(name, 0, 100, 64), 2.5);
  for (const char* bad : {"abc", "-1", "101", "nan", "1e400"}) {
    setenv(name, bad, 1);
    try {
      env_real<hetgraph::Error>(name, 0, 100, 64);
      ADD_FAILURE() << bad;
    } catch (const hetgraph::Error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string(name) + "='" + bad + "' is not a number from 0 to 100");
    }
  }
  unsetenv(name);
}

// Calls f(path relative to src/, text) for every .cpp and .hpp file under the library's src/:
// the scans below that hold the sources to a rule.
void for_each_library_source(
    const std::function<void(const std::string&, const std::string&)>& f) {
  const std::filesystem::path src = HETGRAPH_SOURCE_DIR "/src";
  for (const auto& e : std::filesystem::recursive_directory_iterator(src)) {
    const auto ext = e.path().extension();
    if (ext != ".cpp" && ext != ".hpp") continue;
    std::ifstream in(e.path());
    f(std::filesystem::relative(e.path(), src).string(),
      std::string{std::istreambuf_iterator<char>(in), {}});
  }
}

// Every variable the library reads is a row of kEnvironment, read through util/env.hpp: a
// call that names a variable outside the table, or a raw getenv, fails here.
TEST(Environment, TheLibraryReadsOnlyTheVariablesOfItsTable) {
  std::set<std::string> table;
  for (const auto& v : hetgraph::detail::kEnvironment) table.emplace(v.name);
  const std::regex read(
      R"re((getenv|env|env_value|env_flag|env_seconds|env_(int|real|choice)<[^>]*>)\("([A-Z][A-Z0-9_]*)")re");
  int reads = 0;
  for_each_library_source([&](const std::string& rel, const std::string& text) {
    for (std::sregex_iterator m(text.begin(), text.end(), read), end; m != end; ++m) {
      ++reads;
      EXPECT_TRUE(table.count((*m)[3].str()))
          << rel << " reads " << (*m)[3].str()
          << ", which is not in kEnvironment (src/util/env.hpp)";
    }
    // libhetgraph_omp_env runs before libgomp, built without the library's include path.
    if (text.find("getenv(") != std::string::npos) {
      EXPECT_TRUE(rel == "util/env.hpp" || rel == "common/omp_env.cpp")
          << rel << " calls getenv: read variables through util/env.hpp";
    }
  });
  EXPECT_GT(reads, 15) << "the pattern no longer finds the library's reads";
}

TEST(Environment, EveryVariableOfTheTableIsDocumented) {
  std::ifstream f(HETGRAPH_SOURCE_DIR "/docs/errors.md");
  const std::string readme{std::istreambuf_iterator<char>(f), {}};
  const auto start = readme.find("\n## Environment variables\n");
  ASSERT_NE(start, std::string::npos) << "docs/errors.md has no \"Environment variables\" section";
  const std::string section = readme.substr(start, readme.find("\n## ", start + 1) - start);
  std::size_t rows = 0;
  for (std::size_t at = section.find("\n| `"); at != std::string::npos;
       at = section.find("\n| `", at + 1))
    ++rows;
  for (const auto& v : hetgraph::detail::kEnvironment)
    EXPECT_NE(section.find("| `" + std::string(v.name) + "` |"), std::string::npos)
        << v.name << " is read by the library but not in docs/errors.md's table";
  EXPECT_EQ(rows, std::size(hetgraph::detail::kEnvironment))
      << "docs/errors.md's table lists a variable kEnvironment lacks";
}

// A broken invariant of the library throws InternalError (which says "internal: "), never the
// base Error with that word in its message: callers tell our bugs from their mistakes by type.
TEST(PublicApi, BrokenInvariantsThrowInternalError) {
  const std::regex base(R"re((^|[^A-Za-z_:]|hetgraph::)Error\(\s*(std::string\()?"internal)re");
  int sites = 0;
  for_each_library_source([&](const std::string& rel, const std::string& text) {
    for (std::sregex_iterator m(text.begin(), text.end(), base), end; m != end; ++m)
      ADD_FAILURE() << rel << " throws Error(\"internal...\"): throw InternalError(\"...\")";
    for (std::size_t at = text.find("InternalError("); at != std::string::npos;
         at = text.find("InternalError(", at + 1))
      ++sites;
  });
  EXPECT_GT(sites, 20) << "the scan no longer finds the library's InternalError sites";
}

// The public headers name no internal type: internals reach the public handles through their
// opaque Impl classes, defined under src/ (graph_impl.hpp, executable.hpp, comm.hpp).
TEST(PublicApi, HeadersNameNoDetailType) {
  const std::filesystem::path include = HETGRAPH_SOURCE_DIR "/include/hetgraph";
  int headers = 0;
  for (const auto& e : std::filesystem::directory_iterator(include)) {
    if (e.path().extension() != ".hpp") continue;
    ++headers;
    std::ifstream f(e.path());
    std::size_t line_no = 0;
    for (std::string line; std::getline(f, line);) {
      ++line_no;
      EXPECT_TRUE(line.find("detail::") == std::string::npos &&
                  line.find("namespace detail") == std::string::npos)
          << "include/hetgraph/" << e.path().filename().string() << ":" << line_no
          << " names an internal type: " << line;
    }
  }
  EXPECT_GT(headers, 5) << "no public headers found under " << include;
}

TEST(Cli, ValuesRangesAndMessages) {
  int n = 5;
  double x = 1;
  float f = 1;
  std::string s, c = "a";
  std::vector<std::string> l;
  bool b = false;
  auto make = [&] {
    hetgraph::cli::Parser p("prog", "usage: prog");
    p.integer("--n", n, 1, 100)
        .real("--x", x, 0, 10, hetgraph::cli::Bound::open)
        .real("--f", f, 0, 1e300)
        .text("--s", s)
        .choice("--c", c, {"a", "b"})
        .list("--l", l)
        .flag("--b", b);
    return p;
  };
  {
    auto p = make();
    EXPECT_EQ(parse(p, "--n 7 --x=2.5 --f 1e3 --s hello --c b --l p,q --b"), "");
    EXPECT_EQ(n, 7);
    EXPECT_EQ(x, 2.5);
    EXPECT_EQ(f, 1000.0f);
    EXPECT_EQ(s, "hello");
    EXPECT_EQ(c, "b");
    EXPECT_EQ(l, (std::vector<std::string>{"p", "q"}));
    EXPECT_TRUE(b);
    EXPECT_TRUE(p.given("--n"));
  }
  const struct {
    const char* args;
    const char* message;
  } bad[] = {
      {"--n 1e2", "--n: '1e2' is not an integer"},
      {"--n 101", "--n: '101' is out of range (from 1 to 100)"},
      {"--n", "--n: needs a value"},
      {"--x 0", "--x: '0' is out of range (more than 0, at most 10)"},
      {"--x -nan", "--x: '-nan' is not a finite number"},
      {"--f 1e39", "--f: '1e39' is out of range (at least 0, at most 3.40282e+38)"},
      {"--c z", "--c: 'z' is not one of a, b"},
      {"--l p,,q", "--l: 'p,,q' has an empty item"},
      {"--l ", "--l: '' has an empty item"},
      {"--b --b", "--b: given twice"},
      {"--bx", "unknown option '--bx'"},
      {"-n 3", "unknown option '-n'"},
      {"x", "unexpected argument 'x'"},
  };
  for (const auto& t : bad) {
    auto p = make();
    EXPECT_EQ(parse(p, t.args), t.message) << t.args;
  }
  auto p = make();
  EXPECT_EQ(parse(p, "--help --n bad"), "");
  EXPECT_TRUE(p.help());
}

TEST(Cli, BenchOptions) {
  {
    bench::Options o;
    auto p = bench::bench_parser(o);
    EXPECT_EQ(parse(p, "--workload a,b --engine critical-path --executors 2x1 --repeat 3 --no-pin"),
              "");
    EXPECT_EQ(o.workloads, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(o.executors, 2);
    EXPECT_EQ(o.threads_per_executor, 1);
    EXPECT_EQ(o.repeat, 3);
    EXPECT_FALSE(o.pin);
    EXPECT_NO_THROW(bench::check_bench_options(o));
  }
  {
    bench::Options o;
    auto p = bench::bench_parser(o);
    EXPECT_EQ(parse(p, "--workload a --platform hetero --devices cpu,opencl:0:1 --placement heft"),
              "");
    EXPECT_EQ(o.devices, (std::vector<std::string>{"cpu", "opencl:0:1"}));
    EXPECT_EQ(o.placement, "heft");
    EXPECT_NO_THROW(bench::check_bench_options(o));
  }
  {
    bench::Options o;
    auto p = bench::bench_parser(o);
    EXPECT_EQ(parse(p, "--workload a --replay-cores 64 --replay-profile f.json --time-scale 4"),
              "");
    EXPECT_EQ(o.replay_cores, 64);
    EXPECT_EQ(o.replay_profile, "f.json");
    EXPECT_EQ(o.time_scale, 4);
    EXPECT_NO_THROW(bench::check_bench_options(o));
  }
  for (const char* args :
       {"--workload x --replay-cores 0", "--workload x --replay-cores 65",
        "--workload x --replay-cores 4 --time-scale -1", "--workload x --repeat 0",
        "--workload x --repeat 2.5", "--workload x --warmup -1", "--workload x --executors 2x0",
        "--workload x --executors autox", "--workload x --inline-below-us nan",
        "--workload x --platform tpu", "--workload",
        "--workload x --platform hetero --placement best"}) {
    bench::Options o;
    auto p = bench::bench_parser(o);
    EXPECT_NE(parse(p, args), "") << args;
  }
  for (const char* args :
       {"", "--workload x --engine in-order", "--workload x --platform opencl --engine auto",
        "--workload x --platform hetero --engine in-order",
        "--workload x --platform hetero --devices cpu,gpu",
        "--workload x --platform hetero --devices cpu,opencl:1",
        "--workload x --platform hetero --devices opencl:0:1x",
        "--workload x --platform opencl --replay-cores 4", "--workload x --replay-profile f.json",
        "--workload x --platform hetero --record-profile f.json"}) {
    bench::Options o;
    auto p = bench::bench_parser(o);
    ASSERT_EQ(parse(p, args), "") << args;
    EXPECT_THROW(bench::check_bench_options(o), UsageError) << args;
  }
  bench::FigureOptions f;
  auto p = bench::figures_parser(f);
  EXPECT_EQ(parse(p, "--repeat 0x5"), "--repeat: '0x5' is not an integer");
}

TEST(Cli, PositionalAndRepeatedArguments) {
  std::string file;
  std::vector<std::string> seen;
  auto make = [&] {
    file.clear();
    seen.clear();
    hetgraph::cli::Parser p("prog", "usage");
    p.positional("FILE", file).repeated("--in", [&](std::string_view v) { seen.emplace_back(v); });
    return p;
  };
  auto p = make();
  EXPECT_EQ(parse(p, "--in a m.onnx --in=b"), "");
  EXPECT_EQ(file, "m.onnx");
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
  p = make();
  EXPECT_EQ(parse(p, "--in a"), "FILE is missing");
  p = make();
  EXPECT_EQ(parse(p, "m.onnx other"), "unexpected argument 'other'");
  // An empty word is no file name (found by fuzz_cli: hetgraph-run took "" as its model).
  p = make();
  const char* argv[] = {"prog", ""};
  EXPECT_THROW(p.parse(2, argv), hetgraph::cli::UsageError);
  EXPECT_EQ(file, "");
}

TEST(Cli, HetgraphRunOptions) {
  hgrun::Options o;
  auto p = hgrun::parser(o);
  EXPECT_EQ(parse(p, "m.onnx --input x=a.pb --input y=b.pb --shape z=1x3x8 --engine auto --json"),
            "");
  EXPECT_EQ(o.model, "m.onnx");
  ASSERT_EQ(o.inputs.size(), 2u);
  EXPECT_EQ(o.inputs[1].first, "y");
  EXPECT_EQ(o.inputs[1].second, "b.pb");
  ASSERT_EQ(o.shapes.size(), 1u);
  EXPECT_EQ(o.shapes[0].second, (std::vector<std::int64_t>{1, 3, 8}));
  EXPECT_NO_THROW(hetgraph::tool::check_engine_flags(o));
  EXPECT_FALSE(o.budgets.float64_as_float32);
  {
    hgrun::Options d;
    auto pd = hgrun::parser(d);
    ASSERT_EQ(parse(pd, "m.onnx --float64-as-float32"), "");
    EXPECT_TRUE(d.budgets.float64_as_float32);
  }
  for (const char* args : {"", "m.onnx --input x=", "m.onnx --input =a", "m.onnx --shape z=1x0",
                           "m.onnx --shape z=1xx2", "m.onnx --shape z=1x2x3x4x5x1x1x1x1",
                           "m.onnx --repeat 0", "m.onnx --json --json"}) {
    hgrun::Options q;
    auto pq = hgrun::parser(q);
    EXPECT_NE(parse(pq, args), "") << args;
  }
  hgrun::Options q;
  auto pq = hgrun::parser(q);
  ASSERT_EQ(parse(pq, "m.onnx --platform opencl --engine critical-path"), "");
  EXPECT_THROW(hetgraph::tool::check_engine_flags(q), UsageError);
}

TEST(Cli, MnistOptions) {
  mnist::Args a;
  auto p = mnist::parser(a);
  EXPECT_EQ(parse(p, "--epochs 3 --batch 100 --lr 0.5 --executors 2x1 --engine auto"), "");
  EXPECT_EQ(a.epochs, 3);
  EXPECT_EQ(a.batch, 100);
  EXPECT_EQ(a.lr, 0.5f);
  EXPECT_EQ(a.executors, 2);
  EXPECT_EQ(a.engine, "auto");
}

// No exception leaves a program: a standard one (an allocation, a file system call) is a
// message and exit status 1, like a hetgraph::Error (before, it escaped run_main and the
// program aborted).
TEST(Cli, StandardExceptionsDoNotLeaveAProgram) {
  const char* argv[] = {"prog"};
  const std::vector<std::pair<std::function<int()>, std::string>> bodies{
      {[]() -> int { throw std::runtime_error("boom"); }, "prog: boom"},
      {[]() -> int { throw std::bad_alloc(); }, "prog: out of memory"},
      {[]() -> int {
         std::filesystem::create_directories("/proc/hetgraph-no/such");
         return 0;
       },
       "/proc/hetgraph-no"},
      {[]() -> int { throw 42; }, "prog: failed with an unknown exception"}};
  for (const auto& [body, message] : bodies) {
    hetgraph::cli::Parser p("prog", "usage: prog");
    testing::internal::CaptureStderr();
    const int status = hetgraph::cli::run_main(p, 1, argv, body);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(status, 1) << err;
    EXPECT_NE(err.find(message), std::string::npos) << err;
  }
}

// Output folders and files are checked before a program works: made when missing, refused by
// flag when they cannot be made or written.
TEST(Cli, OutputPlacesAreCheckedUpFront) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("hetgraph-cli-out-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  EXPECT_NO_THROW(hetgraph::cli::prepare_output_dir("--out", (dir / "a" / "b").string()));
  EXPECT_TRUE(fs::is_directory(dir / "a" / "b"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "a" / "b"), fs::directory_iterator()), 0);
  std::ofstream(dir / "file") << "x";
  const auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no UsageError";
  };
  for (const fs::path& bad : {dir / "file", dir / "file" / "sub"}) {
    const std::string m =
        message([&] { hetgraph::cli::prepare_output_dir("--out", bad.string()); });
    EXPECT_NE(m.find("--out: cannot create the folder '" + bad.string() + "'"), std::string::npos)
        << m;
  }
  EXPECT_NO_THROW(hetgraph::cli::check_output_file("--save", (dir / "model.onnx").string()));
  EXPECT_FALSE(fs::exists(dir / "model.onnx"));
  EXPECT_NE(message([&] {
              hetgraph::cli::check_output_file("--save", (dir / "no" / "m.onnx").string());
            }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(message([&] {
              hetgraph::cli::check_output_file("--save", (dir / "file" / "m.onnx").string());
            }).find("is not a folder"),
            std::string::npos);
  EXPECT_NE(message([&] {
              hetgraph::cli::check_output_file("--save", dir.string());
            }).find("is a folder, not a file"),
            std::string::npos);
  EXPECT_NE(message([&] {
              hetgraph::cli::check_output_file("--save", "/proc/self/m.onnx");
            }).find("--save: cannot write in '/proc/self'"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
