// SPDX-License-Identifier: Apache-2.0
#include "soak_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "hetgraph/error.hpp"

extern char** environ;

namespace soak {

std::string self_path() {
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) throw hetgraph::Error("cannot find this program (/proc/self/exe)");
  return std::string(self, static_cast<std::size_t>(len));
}

Child::Child(Child&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      fd_(std::exchange(o.fd_, -1)),
      group_(o.group_),
      partial_(std::move(o.partial_)) {}

Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    reset();
    pid_ = std::exchange(o.pid_, -1);
    fd_ = std::exchange(o.fd_, -1);
    group_ = o.group_;
    partial_ = std::move(o.partial_);
  }
  return *this;
}

Child::~Child() {
  reset();
}

void Child::reset() {
  if (pid_ > 0) {
    signal(SIGKILL);
    wait();
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  partial_.clear();
}

bool Child::read_available(std::vector<std::string>& lines) {
  if (fd_ < 0) return false;
  char chunk[8192];
  for (;;) {
    const ssize_t n = read(fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {  // end of output (or an error reading it: the same to the driver)
      if (!partial_.empty()) lines.push_back(std::move(partial_));
      partial_.clear();
      close(fd_);
      fd_ = -1;
      return false;
    }
    partial_.append(chunk, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
      lines.push_back(partial_.substr(start, nl - start));
    partial_.erase(0, start);
  }
}

bool Child::read_lines(std::vector<std::string>& lines, int timeout_ms) {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  const int ready = poll(&p, 1, timeout_ms);
  if (ready <= 0) return true;  // nothing yet (or EINTR)
  return read_available(lines);
}

void Child::signal(int sig) const {
  if (pid_ <= 0) return;
  if (group_) ::kill(-pid_, sig);
  ::kill(pid_, sig);
}

int Child::wait() {
  int status = 0;
  if (pid_ > 0) {
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  return status;
}

Child spawn(const std::vector<std::string>& args, const SpawnOptions& options) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), options.env.begin(), options.env.end());
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw hetgraph::Error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  if (options.merge_stderr) posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (options.new_group) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  Child c;
  const int err = posix_spawnp(&c.pid_, args[0].c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    c.pid_ = -1;
    throw hetgraph::Error("cannot start " + args[0] + ": " + std::strerror(err));
  }
  // Non-blocking: a driver with several children reads each as far as it goes.
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  c.fd_ = fds[0];
  c.group_ = options.new_group;
  return c;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace soak
