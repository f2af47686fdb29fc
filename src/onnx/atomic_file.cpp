#include "onnx/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
}  // namespace

void write_file_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, std::size_t)>&)>& write) {
  // One temporary name per process: a save killed half-way leaves only this file behind, and
  // the next save of the same process starts it over.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw DataError(path + ": cannot create " + tmp + ": " + errno_text());
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
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw DataError(path + ": cannot rename " + tmp + " over it: " + err);
  }
  // The rename is durable once the directory entry is.
  const int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
  // In blocks, not through istreambuf_iterator a byte at a time: checkpoints are as large as
  // their models. The size is a hint only (the file may change while it is read).
  std::string bytes;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<std::size_t>(st.st_size));
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

}  // namespace hetgraph::detail
