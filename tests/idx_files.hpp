// SPDX-License-Identifier: Apache-2.0
// Writing IDX files (the MNIST format) for tests: header bytes and plain or gzip'd files.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

namespace testing_util {

/// An IDX file's bytes: big-endian magic number and dims, then the data.
inline std::vector<std::uint8_t> idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims,
                                           const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> out;
  auto put = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
  };
  put(magic);
  for (auto d : dims) put(d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline void write_file(const std::filesystem::path& p, const std::vector<std::uint8_t>& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
}

}  // namespace testing_util
