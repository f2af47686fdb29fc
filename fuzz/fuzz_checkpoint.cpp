// SPDX-License-Identifier: Apache-2.0
// The checkpoint reader on raw file bytes: it either lists variables whose data lies inside
// the file (names unique, sizes matching their dims) or throws DataError; reading the bytes
// from a file (header and layout first, then whole) agrees with reading them from memory.
// Then the writer, on the same bytes: a save interrupted at a byte the input chooses leaves
// the previous file and no temporary, and two saves to one path at once leave one of them,
// whole.
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "hetgraph/error.hpp"
#include "onnx/checkpoint_format.hpp"
#include "util/atomic_file.hpp"

namespace {

using hetgraph::detail::write_file_atomically;

std::string scratch_dir() {
  static const std::string dir = [] {
    // tmpfs where there is one: each input fsyncs a few files.
    char t[] = "/dev/shm/hetgraph-fuzz-ckpt-XXXXXX";
    char u[] = "/tmp/hetgraph-fuzz-ckpt-XXXXXX";
    if (::mkdtemp(t) != nullptr) return std::string(t);
    if (::mkdtemp(u) == nullptr) __builtin_trap();
    return std::string(u);
  }();
  // Gone when the fuzzer exits.
  static const struct Remove {
    ~Remove() {
      std::remove((dir + "/f.ckpt").c_str());
      ::rmdir(dir.c_str());
    }
  } remove;
  return dir;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Writes `bytes` through write_file_atomically in pieces; throws after `stop` bytes when
// stop < bytes.size() (a save failing half-way, as a kill would leave it but for the cleanup).
void save(const std::string& path, const std::string& bytes, std::size_t stop) {
  write_file_atomically(path, [&](const auto& write) {
    for (std::size_t at = 0; at < bytes.size(); at += 7) {
      if (at >= stop) throw std::runtime_error("interrupted");
      write(bytes.data() + at, std::min<std::size_t>(7, bytes.size() - at));
    }
  });
}

bool temporaries_left(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  bool found = false;
  while (const dirent* e = ::readdir(d))
    found = found || std::string(e->d_name).find(".tmp.") != std::string::npos;
  ::closedir(d);
  return found;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  bool parsed = false;
  std::vector<hetgraph::detail::CheckpointEntry> entries;
  try {
    entries = hetgraph::detail::parse_checkpoint(bytes, "fuzz.ckpt");
    parsed = true;
    std::set<std::string> names;
    for (const auto& e : entries) {
      std::uint64_t n = 1;
      for (auto d : e.dims) n *= static_cast<std::uint64_t>(d);
      if (e.dims.size() > 4 || e.bytes != n * 4 || e.offset + e.bytes > size ||
          !names.insert(e.name).second) {
        __builtin_trap();
      }
    }
  } catch (const hetgraph::DataError&) {
  }

  const std::string dir = scratch_dir(), path = dir + "/f.ckpt";
  // The same bytes from a file: the same verdict and the same variables.
  {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    try {
      const auto f = hetgraph::detail::read_checkpoint(path, [](const auto&) {});
      if (!parsed || f.entries.size() != entries.size() || f.bytes != bytes) __builtin_trap();
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (f.entries[i].name != entries[i].name || f.entries[i].offset != entries[i].offset)
          __builtin_trap();
      }
    } catch (const hetgraph::DataError&) {
      if (parsed) __builtin_trap();
    }
  }
  // A save that fails after `stop` bytes leaves the previous file and no temporary.
  const std::string previous = "previous";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << previous;
  const std::size_t stop = size > 0 ? data[0] % (size + 1) : 0;
  try {
    save(path, bytes, stop);
    if (slurp(path) != bytes) __builtin_trap();
  } catch (const std::runtime_error&) {
    if (slurp(path) != previous) __builtin_trap();
  }
  if (temporaries_left(dir)) __builtin_trap();
  // Two saves to one path at once: both succeed, the file is one of them.
  const std::string other = bytes + "/other";
  std::thread t([&] { save(path, other, other.size()); });
  save(path, bytes, bytes.size());
  t.join();
  const std::string now = slurp(path);
  if ((now != bytes && now != other) || temporaries_left(dir)) __builtin_trap();
  return 0;
}
