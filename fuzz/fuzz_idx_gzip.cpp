// SPDX-License-Identifier: Apache-2.0
// The IDX reader on gzip'd files whose inflated content is the fuzz input: header and data
// checks behind the inflation, which raw mutations of gzip bytes rarely get past.
#include <zlib.h>

#include <vector>

#include "idx_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> gz(compressBound(static_cast<uLong>(size)) + 64);
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = gz.data();
  z.avail_out = static_cast<uInt>(gz.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  gz.resize(z.total_out);
  deflateEnd(&z);
  fuzz::check_read(fuzz::write_memfd(gz.data(), gz.size()));
  return 0;
}
