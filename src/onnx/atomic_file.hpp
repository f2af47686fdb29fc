// Writing a file so that readers see the old content or the new one, never a mix: the bytes
// go to a temporary file in the same directory, which is flushed to disk (fsync) and renamed
// over the target; the directory is synced so the rename itself survives a crash.
#pragma once

#include <functional>
#include <string>

namespace hetgraph::detail {

/// `write` receives a function that appends bytes to the temporary file. Any failure is a
/// DataError naming `path`; the temporary file is removed and `path` is left as it was.
void write_file_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, std::size_t)>&)>& write);

/// The whole file; a DataError naming it when it cannot be read.
std::string read_file(const std::string& path, const std::string& what);

}  // namespace hetgraph::detail
