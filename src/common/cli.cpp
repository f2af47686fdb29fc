// SPDX-License-Identifier: Apache-2.0
#include "hetgraph/cli.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>

#include "util/parse.hpp"

namespace hetgraph::cli {

using detail::ParseStatus;
using detail::quote;

namespace {

std::string range_text(std::int64_t min, std::int64_t max) {
  if (max == std::numeric_limits<std::int64_t>::max()) return "at least " + std::to_string(min);
  return "from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string real_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

std::int64_t to_int(std::string_view flag, std::string_view value, std::int64_t min,
                    std::int64_t max) {
  std::int64_t v = 0;
  const ParseStatus st = detail::parse_int(value, v);
  if (st == ParseStatus::malformed) {
    throw UsageError(std::string(flag) + ": " + quote(value) + " is not an integer");
  }
  if (st == ParseStatus::out_of_range || v < min || v > max) {
    throw UsageError(std::string(flag) + ": " + quote(value) + " is out of range (" +
                     range_text(min, max) + ")");
  }
  return v;
}

double to_real(std::string_view flag, std::string_view value, double min, double max, Bound lower) {
  double v = 0;
  const ParseStatus st = detail::parse_real(value, v);
  if (st == ParseStatus::malformed) {
    throw UsageError(std::string(flag) + ": " + quote(value) + " is not a number");
  }
  if (st == ParseStatus::out_of_range || !std::isfinite(v)) {
    throw UsageError(std::string(flag) + ": " + quote(value) + " is not a finite number");
  }
  const bool low = lower == Bound::open ? !(v > min) : !(v >= min);
  if (low || v > max) {
    throw UsageError(std::string(flag) + ": " + quote(value) + " is out of range (" +
                     (lower == Bound::open ? "more than " : "at least ") + real_text(min) +
                     ", at most " + real_text(max) + ")");
  }
  return v;
}

std::pair<int, int> to_int_pair(std::string_view flag, std::string_view value, char sep, int min,
                                int max) {
  const auto parts = detail::split_pair(value, sep);
  if (!parts) {
    throw UsageError(std::string(flag) + ": " + quote(value) + " is not of the form N" + sep + "T");
  }
  return {static_cast<int>(to_int(flag, parts->first, min, max)),
          static_cast<int>(to_int(flag, parts->second, min, max))};
}

std::pair<int, int> to_executors(std::string_view flag, std::string_view value) {
  const auto et = to_int_pair(flag, value, 'x', 1, 4096);
  if (et.first > 64) {
    throw UsageError(std::string(flag) + ": " + quote(value) +
                     " is out of range (at most 64 executors)");
  }
  return et;
}

Parser::Parser(std::string program, std::string usage)
    : program_(std::move(program)), usage_(std::move(usage)) {}

Parser& Parser::add(std::string name, bool takes_value,
                    std::function<void(std::string_view)> apply) {
  options_.push_back({std::move(name), takes_value, std::move(apply), false});
  return *this;
}

Parser& Parser::integer(std::string name, int& out, std::int64_t min, std::int64_t max) {
  const std::string flag = name;
  return add(std::move(name), true, [flag, &out, min, max](std::string_view v) {
    out = static_cast<int>(to_int(flag, v, min, max));
  });
}

Parser& Parser::real(std::string name, double& out, double min, double max, Bound lower) {
  const std::string flag = name;
  return add(std::move(name), true, [flag, &out, min, max, lower](std::string_view v) {
    out = to_real(flag, v, min, max, lower);
  });
}

Parser& Parser::real(std::string name, float& out, double min, double max, Bound lower) {
  const std::string flag = name;
  // A float keeps what fits in a float: larger limits would round to infinity.
  max = std::min(max, static_cast<double>(std::numeric_limits<float>::max()));
  return add(std::move(name), true, [flag, &out, min, max, lower](std::string_view v) {
    out = static_cast<float>(to_real(flag, v, min, max, lower));
  });
}

Parser& Parser::text(std::string name, std::string& out) {
  return add(std::move(name), true, [&out](std::string_view v) { out = std::string(v); });
}

Parser& Parser::choice(std::string name, std::string& out, std::vector<std::string> choices) {
  const std::string flag = name;
  return add(std::move(name), true, [flag, &out, choices](std::string_view v) {
    for (const std::string& c : choices) {
      if (c == v) {
        out = c;
        return;
      }
    }
    std::string all;
    for (const std::string& c : choices) all += (all.empty() ? "" : ", ") + c;
    throw UsageError(flag + ": " + quote(v) + " is not one of " + all);
  });
}

Parser& Parser::list(std::string name, std::vector<std::string>& out) {
  const std::string flag = name;
  return add(std::move(name), true, [flag, &out](std::string_view v) {
    out.clear();
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = std::min(v.find(',', start), v.size());
      const std::string_view item = v.substr(start, comma - start);
      if (item.empty()) throw UsageError(flag + ": " + quote(v) + " has an empty item");
      out.emplace_back(item);
      if (comma == v.size()) break;
      start = comma + 1;
    }
  });
}

Parser& Parser::custom(std::string name, std::function<void(std::string_view)> parse) {
  return add(std::move(name), true, std::move(parse));
}

Parser& Parser::flag(std::string name, bool& out, bool value) {
  return add(std::move(name), false, [&out, value](std::string_view) { out = value; });
}

Parser& Parser::repeated(std::string name, std::function<void(std::string_view)> parse) {
  add(std::move(name), true, std::move(parse));
  options_.back().repeatable = true;
  return *this;
}

Parser& Parser::positional(std::string name, std::string& out) {
  positionals_.push_back({std::move(name), &out});
  return *this;
}

bool Parser::given(std::string_view name) const {
  for (const Option& o : options_) {
    if (o.name == name) return o.seen;
  }
  return false;
}

void Parser::parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i] ? argv[i] : "";
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      return;
    }
    // --name=value or --name value
    const std::size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string_view::npos;
    const std::string_view name = arg.substr(0, eq);
    Option* opt = nullptr;
    for (Option& o : options_) {
      if (o.name == name) opt = &o;
    }
    if (!opt && arg.rfind("-", 0) != 0 && positional_seen_ < positionals_.size()) {
      if (arg.empty()) throw UsageError(positionals_[positional_seen_].first + ": empty");
      *positionals_[positional_seen_++].second = std::string(arg);
      continue;
    }
    if (!opt) {
      throw UsageError(arg.rfind("-", 0) == 0 ? "unknown option " + quote(arg)
                                              : "unexpected argument " + quote(arg));
    }
    if (opt->seen && !opt->repeatable) throw UsageError(opt->name + ": given twice");
    opt->seen = true;
    if (!opt->takes_value) {
      if (eq != std::string_view::npos) throw UsageError(opt->name + ": takes no value");
      opt->apply({});
      continue;
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc && argv[i + 1]) {
      value = argv[++i];
    } else {
      throw UsageError(opt->name + ": needs a value");
    }
    opt->apply(value);
  }
  if (positional_seen_ < positionals_.size()) {
    throw UsageError(positionals_[positional_seen_].first + " is missing");
  }
}

namespace {

// A file created and removed in `dir`: whether this process can write there (permissions,
// read-only file systems, root's exemptions all answer for themselves).
void probe_writable(std::string_view flag, const std::string& value, const std::string& dir) {
  const std::string probe = dir + "/.hetgraph-probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw UsageError(std::string(flag) + ": cannot write in " + quote(dir, 200) +
                     (dir == value ? "" : " (for " + quote(value, 200) + ")") + ": " +
                     std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void prepare_output_dir(std::string_view flag, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw UsageError(std::string(flag) + ": cannot create the folder " + quote(dir, 200) + ": " +
                     (ec ? ec.message() : std::string("it is not a folder")));
  }
  probe_writable(flag, dir, dir);
}

void check_output_file(std::string_view flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty() || path.back() == '/' || fs::is_directory(path, ec)) {
    throw UsageError(std::string(flag) + ": " + quote(path, 200) + " is a folder, not a file");
  }
  // An existing device, FIFO or socket (a link to one too: /dev/stdout) is refused: writers
  // replace the file whole, and must not put one where /dev/null was, nor wait on a FIFO.
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    throw UsageError(std::string(flag) + ": " + quote(path, 200) +
                     " is not a regular file (a device, FIFO or socket); give a file's path");
  }
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (!fs::is_directory(dir, ec)) {
    throw UsageError(std::string(flag) + ": " + quote(path, 200) + ": the folder " +
                     quote(dir, 200) +
                     (fs::exists(dir, ec) ? " is not a folder" : " does not exist"));
  }
  probe_writable(flag, path, dir);
}

int run_main(Parser& parser, int argc, const char* const* argv, const std::function<int()>& body) {
  const char* program = parser.program().c_str();
  // No exception leaves a program: a standard one (an allocation, a file system call) is
  // reported like a hetgraph::Error, not an abort with a core dump.
  try {
    try {
      parser.parse(argc, argv);
    } catch (const UsageError& e) {
      std::fprintf(stderr, "%s: %s\n%s\n", program, e.what(), parser.usage().c_str());
      return 2;
    }
    if (parser.help()) {
      std::printf("%s\n", parser.usage().c_str());
      return 0;
    }
    return body();
  } catch (const UsageError& e) {  // a check the body makes on the arguments
    std::fprintf(stderr, "%s: %s\n%s\n", program, e.what(), parser.usage().c_str());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory\n", program);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "%s: failed with an unknown exception\n", program);
    return 1;
  }
}

}  // namespace hetgraph::cli
