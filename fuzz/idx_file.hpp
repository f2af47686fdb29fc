// SPDX-License-Identifier: Apache-2.0
// The IDX fuzz targets' file: fuzz inputs go into one memory file (memfd) that read_idx opens
// by its /proc path, so no disk is touched.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "hetgraph/data.hpp"
#include "hetgraph/error.hpp"

namespace fuzz {

inline const std::string& write_memfd(const std::uint8_t* data, std::size_t size) {
  static const int fd = memfd_create("idx", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    std::abort();
  return path;
}

// read_idx must either return a file whose bytes match its dims or throw DataError.
inline void check_read(const std::string& path) {
  for (std::uint32_t magic : {hetgraph::data::kIdxImages, hetgraph::data::kIdxLabels}) {
    try {
      const hetgraph::data::IdxFile f = hetgraph::data::read_idx(path, magic);
      std::uint64_t count = 1;
      for (std::int64_t d : f.dims) count *= static_cast<std::uint64_t>(d);
      if (f.magic != magic || f.dims.size() != (magic & 0xff) || count != f.bytes.size())
        __builtin_trap();
    } catch (const hetgraph::DataError&) {
    }
  }
}

}  // namespace fuzz
