// SPDX-License-Identifier: Apache-2.0
// Writing a file so that readers see the old content or the new one, never a mix: the bytes
// go to a temporary file in the same directory, which is flushed to disk (fsync) and renamed
// over the target; the directory is synced so the rename itself survives a crash.
//
// Each write has a temporary of its own, `<target>.tmp.<pid>.<nonce>`: writes to one target at
// once (threads of one process, or processes) never share one; each renames a whole file, and
// the last rename wins. The pid in the name says whose a temporary is: a write removes the
// temporaries of its target whose process no longer runs (saves killed half-way), never one of
// a running process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace hetgraph::detail {

/// Where write_file_atomically(path) writes: `path`, or the file a link at `path` leads to
/// (the link is kept). A DataError naming `path` when that exists and is not a regular file (a
/// directory, a device such as /dev/null, a FIFO, a socket): it is never replaced.
std::string write_target(const std::string& path);

/// `write` receives a function that appends bytes to the temporary file. Any failure is a
/// DataError naming `path`; the temporary file is removed and `path` is left as it was.
void write_file_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, std::size_t)>&)>& write);

/// Removes the temporaries of writes to `path` whose process is gone (best effort: errors are
/// ignored). write_file_atomically calls it before each write; returns how many it removed.
int remove_orphaned_temporaries(const std::string& path);

/// The whole file; a DataError naming it when it cannot be read, or when it is a directory or
/// a device (whose reads never end: /dev/zero).
std::string read_file(const std::string& path, const std::string& what);

/// A regular file opened for reading, closed with the object.
class RegularFile {
 public:
  /// DataError naming `path` and `what` when it cannot be opened or is not a regular file (a
  /// directory, a device, a FIFO: nothing whose size is known before it is read).
  RegularFile(const std::string& path, const std::string& what);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  std::uint64_t size() const { return size_; }
  /// Exactly `n` bytes from byte `at`; a DataError naming the file when they cannot be read
  /// (the file shrank since it was opened).
  void read_at(std::uint64_t at, void* dst, std::size_t n) const;

 private:
  std::string path_, what_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace hetgraph::detail
