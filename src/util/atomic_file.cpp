// SPDX-License-Identifier: Apache-2.0
#include "util/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>

#include "hetgraph/error.hpp"

namespace hetgraph::detail {

namespace {
std::string errno_text() {
  return std::strerror(errno);
}
std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
std::string base_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What a path that is not a regular file is, for messages.
std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "it is a directory";
  if (S_ISCHR(m)) return "it is a character device, not a file";
  if (S_ISBLK(m)) return "it is a block device, not a file";
  if (S_ISFIFO(m)) return "it is a FIFO, not a file";
  if (S_ISSOCK(m)) return "it is a socket, not a file";
  return "it is not a regular file";
}

// A name no other write uses: the pid tells whose it is (remove_orphaned_temporaries), the
// nonce tells the writes of one process apart, and a later process that gets the same pid
// apart from a dead one (its nonces come from another seed).
std::string temporary_name(const std::string& path) {
  static const std::uint64_t seed = [] {
    std::random_device rd;
    return (std::uint64_t{rd()} << 32) ^ rd() ^
           static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  static std::atomic<std::uint64_t> sequence{0};
  // splitmix64 of distinct inputs: distinct outputs (it is a bijection).
  std::uint64_t z = seed + (sequence.fetch_add(1) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  char nonce[17];
  std::snprintf(nonce, sizeof nonce, "%016llx", static_cast<unsigned long long>(z));
  return path + ".tmp." + std::to_string(::getpid()) + "." + nonce;
}

// The pid of a temporary's name after `<target>.tmp.` ("<pid>.<nonce>", or "<pid>" as
// hetgraph before 2026-12 named them); -1 when it is not one.
pid_t temporary_pid(std::string_view rest) {
  std::size_t i = 0;
  pid_t pid = 0;
  while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9' && i < 9) {
    pid = pid * 10 + (rest[i] - '0');
    ++i;
  }
  if (i == 0 || pid <= 0) return -1;
  if (i == rest.size()) return pid;
  if (rest[i] != '.' || i + 1 == rest.size()) return -1;
  for (std::size_t k = i + 1; k < rest.size(); ++k) {
    if (!std::isxdigit(static_cast<unsigned char>(rest[k]))) return -1;
  }
  return pid;
}
}  // namespace

int remove_orphaned_temporaries(const std::string& path) {
  const std::string base = base_of(path);
  if (base.empty()) return 0;
  const std::string dir = dir_of(path), prefix = base + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  const pid_t me = ::getpid();
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) continue;
    const pid_t pid = temporary_pid(name.substr(prefix.size()));
    // Our own are writes in flight (a failed write removes its temporary itself). Another
    // process's are orphans only when it is gone: EPERM means it runs as another user.
    if (pid < 0 || pid == me) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    const std::string full = dir + "/" + std::string(name);
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::unlink(full.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

std::string write_target(const std::string& path) {
  // An empty path wrote a temporary ".tmp.<pid>.<nonce>" in the working folder, and failed
  // naming it.
  if (path.empty()) throw DataError("cannot write a file at an empty path");
  std::string target = path;
  // A link is kept and what it leads to replaced: renaming over the link itself would put a
  // file where /dev/stdout's link was.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      target = real;
      std::free(real);
    }
  }
  // Only a regular file is replaced: a rename over /dev/null (saved to by root) would put a
  // file in the device's place, over a FIFO or a socket one where a reader waits.
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw DataError(path + ": cannot write a file there: " + kind_of(st.st_mode));
  return target;
}

void write_file_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, std::size_t)>&)>& write) {
  const std::string target = write_target(path);
  // The space of saves killed half-way comes back before this one needs its own.
  remove_orphaned_temporaries(target);
  const std::string tmp = temporary_name(target);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {  // the folder: missing, not a folder, not writable (the temporary is ours)
    throw DataError(path + ": cannot create a file in " + dir_of(target) + ": " + errno_text());
  }
  auto fail = [&](const std::string& what) {
    const std::string err = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw DataError(path + ": " + what + ": " + err);
  };
  try {
    write([&](const void* data, std::size_t n) {
      const char* p = static_cast<const char*>(data);
      while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0) {
          if (errno == EINTR) continue;
          fail("write failed");
        }
        p += w;
        n -= static_cast<std::size_t>(w);
      }
    });
  } catch (const DataError&) {
    throw;
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::fsync(fd) != 0) fail("fsync failed");
  if (::close(fd) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw DataError(path + ": close failed: " + err);
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw DataError(path + ": cannot rename " + tmp + " over it: " + err);
  }
  // The rename is durable once the directory entry is.
  const int dfd = ::open(dir_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string read_file(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(path + ": cannot open " + what + ": " + errno_text());
  // Closed on every way out, an allocation that throws included.
  const struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw DataError(path + ": cannot read " + what + ": " + errno_text());
  // A device reads without end (/dev/zero until memory runs out); pipes are fine.
  if (S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
    throw DataError(path + ": cannot read " + what + ": " + kind_of(st.st_mode));
  // In blocks, not through istreambuf_iterator a byte at a time: checkpoints are as large as
  // their models. The size is a hint only (the file may change while it is read).
  std::string bytes;
  if (st.st_size > 0) bytes.reserve(static_cast<std::size_t>(st.st_size));
  char block[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, block, sizeof block);
    if (n > 0) {
      bytes.append(block, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      throw DataError(path + ": cannot read " + what + ": " + errno_text());
    }
  }
  return bytes;
}

RegularFile::RegularFile(const std::string& path, const std::string& what)
    : path_(path), what_(what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (regular files ignore it).
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw DataError(path + ": cannot open " + what + ": " + errno_text());
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const std::string err = errno_text();
    ::close(fd_);
    throw DataError(path + ": cannot read " + what + ": " + err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw DataError(path + ": cannot read " + what + ": " + kind_of(st.st_mode));
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
  ::close(fd_);
}

void RegularFile::read_at(std::uint64_t at, void* dst, std::size_t n) const {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw DataError(path_ + ": cannot read " + what_ + ": " + errno_text());
    if (r == 0) {
      throw DataError(path_ + ": " + what_ +
                      " became shorter while it was read (another program is writing it in "
                      "place)");
    }
    p += r;
    at += static_cast<std::uint64_t>(r);
    n -= static_cast<std::size_t>(r);
  }
}

}  // namespace hetgraph::detail
