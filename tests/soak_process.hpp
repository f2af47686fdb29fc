// SPDX-License-Identifier: Apache-2.0
// Child processes for hetgraph-soak's drivers: spawned with their output on a pipe that the
// driver reads line by line (poll, no threads), so that a child that crashes, hangs or is
// killed on purpose never takes the driver with it.
//
//   soak::Child c = soak::spawn({soak::self_path(), "--worker", ...});
//   std::vector<std::string> lines;
//   while (c.read_lines(lines, timeout_ms)) { ... }   // false at end of output
//   const int status = c.wait();                      // waitpid's status
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace soak {

using Clock = std::chrono::steady_clock;

/// Seconds between two time points.
inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// This program's path (/proc/self/exe): workers are this program again.
std::string self_path();

struct SpawnOptions {
  bool merge_stderr = false;     // the child's stderr on the pipe too (else the driver's stderr)
  bool new_group = false;        // a process group of its own (mpirun: kill it with its children)
  std::vector<std::string> env;  // NAME=VALUE added to the environment
};

class Child {
 public:
  Child() = default;
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  /// Kills (SIGKILL) and reaps a child still running.
  ~Child();

  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }
  bool running() const { return pid_ > 0; }
  /// Whether its output has ended (the pipe is closed).
  bool eof() const { return fd_ < 0; }

  /// Appends to `lines` the complete lines readable now (after waiting up to `timeout_ms` for
  /// some, -1: forever); false once the output has ended (a last unterminated line included).
  bool read_lines(std::vector<std::string>& lines, int timeout_ms);
  /// Reads what is available without waiting: for a driver that polled fd() itself.
  bool read_available(std::vector<std::string>& lines);
  /// Sends `sig` to the child (its group with SpawnOptions::new_group).
  void signal(int sig) const;
  /// Waits for the child to end; waitpid's status. Closes the pipe.
  int wait();

 private:
  friend Child spawn(const std::vector<std::string>&, const SpawnOptions&);
  void reset();
  pid_t pid_ = -1;
  int fd_ = -1;
  bool group_ = false;
  std::string partial_;
};

/// Starts `args[0]` (a path, or a name looked up in PATH) with `args`; throws hetgraph::Error
/// when it cannot.
Child spawn(const std::vector<std::string>& args, const SpawnOptions& options = {});

/// "signal 9", "exit status 1": what waitpid's status says.
std::string describe_status(int status);

/// A JSON string literal of `s` (quotes and escapes).
std::string json_string(const std::string& s);

}  // namespace soak
