// SPDX-License-Identifier: Apache-2.0
// The checkpoint file format (version 1), apart from compiled graphs so it can be tested and
// fuzzed on bytes alone. All integers little-endian:
//   magic        8 bytes   "HGCKPT\0\n"
//   version      u32       1
//   count        u32       number of variables
//   count times:
//     name_len   u32       then name_len bytes of the variable's name (UTF-8)
//     dtype      u8        0 float32, 1 int32
//     rank       u8        0..4, then 2 zero bytes
//     dims       i64 x rank
//     data_len   u64       4 x elements
//     data_crc   u32       CRC-32 (zlib's) of the data
//     data       data_len bytes, row-major
//   file_crc     u32       CRC-32 of every byte before it
//   end          4 bytes   "HGND"
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hetgraph::detail {

inline constexpr std::uint32_t kCheckpointVersion = 1;
/// The longest variable name a checkpoint holds (a reader allocates no more for one).
inline constexpr std::uint32_t kMaxCheckpointName = 1u << 20;

struct CheckpointEntry {
  std::string name;
  bool f32 = true;  // else int32
  std::vector<std::int64_t> dims;
  std::size_t offset = 0, bytes = 0;  // of the data within the file
};

/// What a reader's caller expects of each variable, asked as soon as its name, type and dims
/// are read and before its data is: throws (a DataError naming the file and the variable) to
/// refuse the file.
using CheckpointCheck = std::function<void(const CheckpointEntry&)>;

/// Checks a whole file and lists its variables; a DataError naming `path` (and the variable
/// where there is one) for anything truncated, corrupt or not a checkpoint.
std::vector<CheckpointEntry> parse_checkpoint(const std::string& bytes, const std::string& path,
                                              const CheckpointCheck& check = {});

struct CheckpointFile {
  std::string bytes;
  std::vector<CheckpointEntry> entries;  // their data within `bytes`
};
/// Reads and checks the checkpoint file `path`. Its header and the layout of every variable
/// (with `check`) are checked from the file itself before it is read whole: what is not a
/// regular file (a directory, /dev/zero, a FIFO), not a checkpoint, or holds variables `check`
/// refuses is a DataError before its data is read. Then as parse_checkpoint.
CheckpointFile read_checkpoint(const std::string& path, const CheckpointCheck& check);

/// Writes a checkpoint through `write`, piece by piece (variables need not be in memory at
/// once): header(count), then entry() for each variable, then trailer().
class CheckpointWriter {
 public:
  explicit CheckpointWriter(std::function<void(const void*, std::size_t)> write)
      : write_(std::move(write)) {}
  void header(std::uint32_t count);
  void entry(const std::string& name, bool f32, const std::vector<std::int64_t>& dims,
             const void* data, std::size_t bytes);
  void trailer();

 private:
  void emit(const void* data, std::size_t n);
  std::function<void(const void*, std::size_t)> write_;
  std::uint32_t crc_ = 0;
};

}  // namespace hetgraph::detail
