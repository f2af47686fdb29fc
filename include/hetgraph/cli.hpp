// SPDX-License-Identifier: Apache-2.0
// The command-line parser of every hetgraph program (hetgraph-run, the examples, hetgraph-bench,
// the soak), installed with the library for programs built on it. Strict: a value is taken whole
// (`--batch 10abc` is an error, not 10), integers have no exponent, numbers are range-checked, a
// flag may be given once, and every error names the flag and the value.
//
//   Args a;
//   hetgraph::cli::Parser p("mnist_softmax", "usage: mnist_softmax [--epochs N] ...");
//   p.integer("--epochs", a.epochs, 1, 1000000).real("--lr", a.lr, 0, 1e6, cli::Bound::open);
//   return hetgraph::cli::run_main(p, argc, argv, [&] { return train(a); });
//
// run_main prints `program: --batch: '10abc' is not an integer` and the usage on stderr and
// returns 2 for a command-line mistake, prints the usage on stdout and returns 0 for --help,
// and returns 1 with the message for any hetgraph::Error the body throws.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hetgraph/error.hpp"

namespace hetgraph::cli {

/// A command-line mistake; the message names the flag and the value.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Whether a real flag's lower limit is allowed (closed) or must be exceeded (open: lr > 0).
enum class Bound : std::uint8_t { closed, open };

/// Strict value parsers; each throws UsageError naming `flag` and `value`.
std::int64_t to_int(std::string_view flag, std::string_view value, std::int64_t min,
                    std::int64_t max);
/// Finite reals in [min, max] (or (min, max] with Bound::open).
double to_real(std::string_view flag, std::string_view value, double min, double max,
               Bound lower = Bound::closed);
/// "NxT": two integers in [min, max] each.
std::pair<int, int> to_int_pair(std::string_view flag, std::string_view value, char sep, int min,
                                int max);
/// --executors NxT: N executors (1-64) of T threads each (1-4096).
std::pair<int, int> to_executors(std::string_view flag, std::string_view value);

class Parser {
 public:
  Parser(std::string program, std::string usage);

  /// --name VALUE (or --name=VALUE) into `out`, range-checked.
  Parser& integer(std::string name, int& out, std::int64_t min, std::int64_t max);
  Parser& real(std::string name, double& out, double min, double max, Bound lower = Bound::closed);
  Parser& real(std::string name, float& out, double min, double max, Bound lower = Bound::closed);
  Parser& text(std::string name, std::string& out);
  /// One of `choices`.
  Parser& choice(std::string name, std::string& out, std::vector<std::string> choices);
  /// A comma-separated list of non-empty items.
  Parser& list(std::string name, std::vector<std::string>& out);
  /// Any value, checked by `parse` (which throws UsageError via the to_* helpers).
  Parser& custom(std::string name, std::function<void(std::string_view value)> parse);
  /// --name without a value sets `out` to `value`.
  Parser& flag(std::string name, bool& out, bool value = true);
  /// --name VALUE that may be given several times; `parse` sees each value in order.
  Parser& repeated(std::string name, std::function<void(std::string_view value)> parse);
  /// A required argument that is not an option (e.g. the model file), in order of
  /// declaration; `name` is what the usage calls it.
  Parser& positional(std::string name, std::string& out);

  /// Parses argv[1..argc). Throws UsageError. --help / -h stops parsing and sets help().
  void parse(int argc, const char* const* argv);
  bool help() const { return help_; }
  /// Whether `name` was given on the command line.
  bool given(std::string_view name) const;

  const std::string& program() const { return program_; }
  const std::string& usage() const { return usage_; }

 private:
  struct Option {
    std::string name;
    bool takes_value = true;
    std::function<void(std::string_view)> apply;
    bool seen = false;
    bool repeatable = false;
  };
  Parser& add(std::string name, bool takes_value, std::function<void(std::string_view)> apply);

  std::string program_, usage_;
  std::vector<Option> options_;
  std::vector<std::pair<std::string, std::string*>> positionals_;
  std::size_t positional_seen_ = 0;
  bool help_ = false;
};

/// Checks, before any work, that a program can write what `flag` names (a UsageError naming
/// the flag otherwise, rather than a failure after a whole run): an output folder, created
/// with its parents when missing, or a file whose folder exists.
void prepare_output_dir(std::string_view flag, const std::string& dir);
void check_output_file(std::string_view flag, const std::string& path);

/// Parses the command line and runs `body`: exit status 2 with the message and the usage on
/// stderr for a UsageError, 0 after printing the usage for --help, 1 with the message for a
/// hetgraph::Error or any other exception (none leaves the program), else what `body`
/// returns.
int run_main(Parser& parser, int argc, const char* const* argv, const std::function<int()>& body);

}  // namespace hetgraph::cli
