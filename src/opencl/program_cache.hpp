// SPDX-License-Identifier: Apache-2.0
// Building OpenCL programs once. ProgramCache keeps each program built for a context, keyed by
// its source and build options; DiskCache keeps program binaries on disk across processes,
// keyed by source hash, build options, device name and driver version. Drivers that cache
// compiled kernels themselves (PoCL) skip the disk cache.
//
//   ProgramCache& pc = device.programs();
//   cl_program p = pc.get("elementwise");   // built from source the first time, then cached
//
// Environment: HETGRAPH_CL_KERNELS=<dir> loads <dir>/<family>.cl instead of the copies embedded
// in the library (kernel development); HETGRAPH_CL_CACHE=0 disables the disk cache,
// HETGRAPH_CL_CACHE=force uses it even on drivers that cache by themselves (to test it there);
// the cache lives in $XDG_CACHE_HOME/hetgraph or ~/.cache/hetgraph. Any other value of
// HETGRAPH_CL_CACHE (than unset, 1, 0, force) is a PlatformError naming it.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "opencl/cl.hpp"

namespace hetgraph::detail::cl {

/// 64-bit FNV-1a: a stable hash for cache keys (not for security).
std::uint64_t fnv1a(std::string_view data, std::uint64_t h = 0xcbf29ce484222325ull);
std::string hex64(std::uint64_t v);

/// The text that identifies one program binary.
std::string cache_key(std::string_view source, std::string_view options, std::string_view device,
                      std::string_view driver);

/// Program binaries on disk, one file per key. Files are written to a temporary name and
/// renamed into place, so readers never see a partial file; a file that does not parse, has
/// another key or a wrong checksum is a miss. Never throws: a cache that cannot be read or
/// written only costs a source build.
class DiskCache {
 public:
  /// An empty dir disables the cache.
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}
  /// $XDG_CACHE_HOME/hetgraph, else $HOME/.cache/hetgraph; empty when HETGRAPH_CL_CACHE=0 or
  /// neither variable is set.
  static std::string default_dir();

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  std::string path_for(std::string_view key) const;
  std::optional<std::vector<unsigned char>> load(std::string_view key) const;
  bool store(std::string_view key, std::span<const unsigned char> binary) const;

 private:
  std::string dir_;
};

/// The source of a kernel family ("elementwise" -> kernels/elementwise.cl): embedded at build
/// time, or read from $HETGRAPH_CL_KERNELS when set, behind kernels/prelude.cl. `origin` says
/// which ("embedded kernels/elementwise.cl" or the path read). Each part starts with a #line
/// naming its file, so build logs give our files' own line numbers.
std::string kernel_source(std::string_view family, std::string* origin = nullptr);

struct ProgramStats {
  int source_builds = 0;  // clBuildProgram from source
  int binary_loads = 0;   // built from a disk-cache binary
  int memory_hits = 0;    // found already built for this context
  int disk_stores = 0;    // binaries written to the disk cache
  int disk_rejects = 0;   // cached binaries the driver refused (then built from source)
};

/// Where the disk cache applies: ask on each build (the environment may change).
enum class DiskPolicy : std::uint8_t { automatic, never, always };

class ProgramCache {
 public:
  /// `driver_caches`: the driver keeps its own binary cache (PoCL), so the disk cache is
  /// skipped unless HETGRAPH_CL_CACHE=force.
  ProgramCache(cl_context ctx, cl_device_id dev, std::string device_name, std::string driver,
               std::string options, bool driver_caches);
  ~ProgramCache();
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  /// The program of a kernel family, built once per (source, options) for this context.
  /// Build failures throw PlatformError carrying the build log.
  cl_program get(std::string_view family);
  /// The same for explicit source text (`name` appears in errors).
  cl_program get_source(std::string_view name, const std::string& source, std::string_view origin);

  ProgramStats stats() const;
  const std::string& options() const { return options_; }
  /// The disk cache this context would use now (disabled when it does not apply).
  DiskCache disk_cache() const;

 private:
  Program build_from_source(std::string_view name, const std::string& source,
                            std::string_view origin);
  Program build_from_binary(std::span<const unsigned char> binary);

  cl_context ctx_;
  cl_device_id dev_;
  std::string device_name_, driver_, options_;
  bool driver_caches_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Program> built_;  // key: cache_key of source and options
  ProgramStats stats_;
};

}  // namespace hetgraph::detail::cl
