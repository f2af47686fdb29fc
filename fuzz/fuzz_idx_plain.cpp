// SPDX-License-Identifier: Apache-2.0
// The IDX reader on raw file bytes: plain IDX files, and gzip streams when the input starts
// with gzip's magic (truncated, corrupt, concatenated members, bombs).
#include "idx_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::check_read(fuzz::write_memfd(data, size));
  return 0;
}
