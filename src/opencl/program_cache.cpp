// SPDX-License-Identifier: Apache-2.0
#include "opencl/program_cache.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "util/env.hpp"
#include "hetgraph/error.hpp"
#include "opencl/kernel_sources.hpp"

namespace hetgraph::detail::cl {

namespace fs = std::filesystem;

std::uint64_t fnv1a(std::string_view data, std::uint64_t h) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string cache_key(std::string_view source, std::string_view options, std::string_view device,
                      std::string_view driver) {
  // The source enters as two independent 64-bit hashes (length-salted), so an accidental
  // collision needs both to collide.
  const std::uint64_t h1 = fnv1a(source);
  const std::uint64_t h2 = fnv1a(source, 0x84222325cbf29ce4ull ^ source.size());
  std::string k = "hetgraph-cl-program-v1\nsource ";
  k += hex64(h1) + hex64(h2) + "\noptions " + std::string(options) + "\ndevice " +
       std::string(device) + "\ndriver " + std::string(driver) + "\n";
  return k;
}

// ---- disk cache ------------------------------------------------------------------------------

namespace {

constexpr char kMagic[8] = {'H', 'G', 'C', 'L', 'B', 'I', 'N', '1'};

std::string env(const char* name) {
  return env_value(name);
}

// HETGRAPH_CL_CACHE: unset or 1 (automatic), 0 (off) or force; anything else is a mistake.
std::string cache_mode() {
  return env_choice<PlatformError>("HETGRAPH_CL_CACHE", {"", "1", "0", "force"});
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}
template <class T>
bool take(std::string_view& in, T& v) {
  if (in.size() < sizeof(v)) return false;
  std::memcpy(&v, in.data(), sizeof(v));
  in.remove_prefix(sizeof(v));
  return true;
}

}  // namespace

std::string DiskCache::default_dir() {
  if (cache_mode() == "0") return {};
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/hetgraph";
  if (const std::string h = env("HOME"); !h.empty()) return h + "/.cache/hetgraph";
  return {};
}

std::string DiskCache::path_for(std::string_view key) const {
  return dir_ + "/" + hex64(fnv1a(key)) + ".clbin";
}

std::optional<std::vector<unsigned char>> DiskCache::load(std::string_view key) const {
  if (!enabled()) return std::nullopt;
  std::ifstream f(path_for(key), std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string all = ss.str();
  std::string_view in(all);
  if (in.size() < sizeof(kMagic) || std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0)
    return std::nullopt;
  in.remove_prefix(sizeof(kMagic));
  std::uint32_t klen = 0;
  if (!take(in, klen) || in.size() < klen || in.substr(0, klen) != key) return std::nullopt;
  in.remove_prefix(klen);
  std::uint64_t blen = 0, sum = 0;
  if (!take(in, blen) || blen == 0 || in.size() != blen + sizeof(sum)) return std::nullopt;
  const std::string_view bin = in.substr(0, blen);
  in.remove_prefix(blen);
  if (!take(in, sum) || sum != fnv1a(bin)) return std::nullopt;
  return std::vector<unsigned char>(bin.begin(), bin.end());
}

bool DiskCache::store(std::string_view key, std::span<const unsigned char> binary) const {
  if (!enabled() || binary.empty()) return false;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return false;
  const std::string_view bin(reinterpret_cast<const char*>(binary.data()), binary.size());
  std::string data(kMagic, sizeof(kMagic));
  put(data, static_cast<std::uint32_t>(key.size()));
  data += key;
  put(data, static_cast<std::uint64_t>(bin.size()));
  data += bin;
  put(data, fnv1a(bin));
  // Unique temporary name in the same directory, then an atomic rename over the final name.
  const std::string final_path = path_for(key);
  const std::string tmp = final_path + ".tmp." + std::to_string(::getpid()) + "." +
                          hex64(reinterpret_cast<std::uintptr_t>(&data));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f.write(data.data(), static_cast<std::streamsize>(data.size())) || !f.flush()) {
      f.close();
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

// ---- sources ---------------------------------------------------------------------------------

namespace {

// The text of kernels/<family>.cl; `file` is the name build logs give it (kernels/<family>.cl,
// or the path read), `origin` says where it came from (embedded, or the path).
std::string family_text(std::string_view family, std::string* file, std::string* origin) {
  const std::string dir = env("HETGRAPH_CL_KERNELS");
  if (!dir.empty()) {
    const std::string path = dir + "/" + std::string(family) + ".cl";
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    if (!f || !(ss << f.rdbuf())) {
      throw PlatformError("HETGRAPH_CL_KERNELS=" + dir + ": cannot read " + path +
                          " (unset the variable to use the kernels built into the library)");
    }
    *file = path;
    if (origin) *origin = path;
    return ss.str();
  }
  for (const EmbeddedKernel& k : embedded_kernels()) {
    if (k.family == family) {
      *file = "kernels/" + std::string(family) + ".cl";
      if (origin) *origin = "embedded " + *file;
      return std::string(k.source);
    }
  }
  throw PlatformError("no OpenCL kernel family '" + std::string(family) + "' in the library");
}

// `#line 1 "<file>"`: compilers' messages then name the file and its own line numbers.
std::string line_directive(const std::string& file) {
  std::string s = "#line 1 \"";
  for (char c : file) {
    if (c == '"' || c == '\\') s += '\\';
    if (c != '\n') s += c;
  }
  return s + "\"\n";
}

}  // namespace

// Every family is built behind kernels/prelude.cl (launch geometry, FP_CONTRACT OFF). Each part
// starts with a #line naming its file, so build logs point into our sources (PoCL otherwise
// names its temporary file, with the prelude's lines counted in).
std::string kernel_source(std::string_view family, std::string* origin) {
  std::string file;
  const std::string text = family_text(family, &file, origin);
  if (family == "prelude") return line_directive(file) + text;
  std::string prelude_file;
  const std::string prelude = family_text("prelude", &prelude_file, nullptr);
  return line_directive(prelude_file) + prelude + "\n" + line_directive(file) + text;
}

// ---- which program is which, for errors ----------------------------------------------------

namespace {
struct ProgramName {
  std::string family, origin;
};
std::mutex g_names_mu;
std::unordered_map<cl_program, ProgramName>& program_names() {
  static auto* m = new std::unordered_map<cl_program, ProgramName>();  // outlives every cache
  return *m;
}
}  // namespace

std::string failure_context(cl_program program, const char* kernel) {
  std::string s = "kernel '" + std::string(kernel ? kernel : "(null)") + "'";
  {
    std::lock_guard lk(g_names_mu);
    const auto it = program_names().find(program);
    if (it != program_names().end())
      s += " of family '" + it->second.family + "' (" + it->second.origin + ")";
  }
  std::size_t n = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &n) == CL_SUCCESS && n > 1) {
    std::string names(n, '\0');
    if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, n, names.data(), nullptr) ==
        CL_SUCCESS) {
      names.resize(names.find('\0') == std::string::npos ? n : names.find('\0'));
      for (char& c : names) c = c == ';' ? ' ' : c;
      if (names.size() > 300) names = names.substr(0, 300) + " ...";
      s += "; the program's kernels: " + names;
    }
  }
  return s;
}

// ---- program cache ---------------------------------------------------------------------------

ProgramCache::ProgramCache(cl_context ctx, cl_device_id dev, std::string device_name,
                           std::string driver, std::string options, bool driver_caches)
    : ctx_(ctx),
      dev_(dev),
      device_name_(std::move(device_name)),
      driver_(std::move(driver)),
      options_(std::move(options)),
      driver_caches_(driver_caches) {}

ProgramCache::~ProgramCache() {
  std::lock_guard lk(g_names_mu);
  for (const auto& [key, prog] : built_) program_names().erase(prog.get());
}

DiskCache ProgramCache::disk_cache() const {
  const std::string mode = cache_mode();
  if (mode == "0" || (driver_caches_ && mode != "force")) return DiskCache("");
  return DiskCache(DiskCache::default_dir());
}

ProgramStats ProgramCache::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

cl_program ProgramCache::get(std::string_view family) {
  std::string origin;
  const std::string source = kernel_source(family, &origin);
  return get_source(family, source, origin);
}

cl_program ProgramCache::get_source(std::string_view name, const std::string& source,
                                    std::string_view origin) {
  const std::string key = cache_key(source, options_, device_name_, driver_);
  std::lock_guard lk(mu_);
  if (auto it = built_.find(key); it != built_.end()) {
    ++stats_.memory_hits;
    return it->second.get();
  }
  const DiskCache disk = disk_cache();
  Program prog;
  if (auto bin = disk.load(key)) {
    try {
      prog = build_from_binary(*bin);
      ++stats_.binary_loads;
    } catch (const PlatformError&) {
      ++stats_.disk_rejects;  // stale or foreign binary: fall back to the source
    }
  }
  if (!prog) {
    prog = build_from_source(name, source, origin);
    ++stats_.source_builds;
    if (disk.enabled()) {
      std::size_t size = 0;
      if (clGetProgramInfo(prog.get(), CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) ==
              CL_SUCCESS &&
          size > 0) {
        std::vector<unsigned char> bin(size);
        unsigned char* ptr = bin.data();
        if (clGetProgramInfo(prog.get(), CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr) ==
                CL_SUCCESS &&
            disk.store(key, bin)) {
          ++stats_.disk_stores;
        }
      }
    }
  }
  cl_program raw = prog.get();
  built_.emplace(key, std::move(prog));
  std::lock_guard names_lk(g_names_mu);
  program_names()[raw] = {std::string(name), std::string(origin)};
  return raw;
}

namespace {

// While a compiler runs for longer than HETGRAPH_LOG allows to pass in silence, one line on
// stderr says what the pause is: a cold driver cache (PoCL compiles each program family through
// LLVM, about 30 s for all of them) otherwise looks like a hang. HETGRAPH_LOG: unset or "info"
// (a line after 1 s), "verbose" (a line for every build from source), "quiet" (none).
class BuildNotice {
 public:
  BuildNotice(std::string_view name, const std::string& device) {
    const std::string level = env_choice<PlatformError>("HETGRAPH_LOG", {"", "info", "verbose", "quiet"});
    if (level == "quiet") return;
    line_ = "hetgraph: compiling OpenCL program '" + std::string(name) + "' for " + device +
            " (first use with a cold driver cache; later runs take it from the cache)\n";
    if (level == "verbose") {
      std::fputs(line_.c_str(), stderr);
      return;
    }
    watch_ = std::thread([this] {
      std::unique_lock lk(mu_);
      if (!cv_.wait_for(lk, std::chrono::seconds(1), [this] { return done_; }))
        std::fputs(line_.c_str(), stderr);
    });
  }
  ~BuildNotice() {
    if (!watch_.joinable()) return;
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_one();
    watch_.join();
  }
  BuildNotice(const BuildNotice&) = delete;
  BuildNotice& operator=(const BuildNotice&) = delete;

 private:
  std::string line_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watch_;
};

}  // namespace

Program ProgramCache::build_from_source(std::string_view name, const std::string& source,
                                        std::string_view origin) {
  const char* text = source.c_str();
  const std::size_t len = source.size();
  Program prog(HG_CL_CREATE(clCreateProgramWithSource, ctx_, 1, &text, &len));
  cl_int err = CL_SUCCESS;
  {
    const BuildNotice notice(name, device_name_);
    err = clBuildProgram(prog.get(), 1, &dev_, options_.c_str(), nullptr, nullptr);
  }
  if (err != CL_SUCCESS) {
    std::size_t n = 0;
    std::string log;
    if (clGetProgramBuildInfo(prog.get(), dev_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) ==
            CL_SUCCESS &&
        n > 1) {
      log.resize(n);
      clGetProgramBuildInfo(prog.get(), dev_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    throw PlatformError("building OpenCL program '" + std::string(name) + "' (" +
                        std::string(origin) + ") for " + device_name_ +
                        " failed: clBuildProgram: " + error_name(err) + " (" + std::to_string(err) +
                        "); options '" + options_ + "'; build log:\n" +
                        (log.empty() ? std::string("(empty)") : log));
  }
  return prog;
}

Program ProgramCache::build_from_binary(std::span<const unsigned char> binary) {
  const unsigned char* data = binary.data();
  const std::size_t len = binary.size();
  cl_int status = CL_SUCCESS;
  Program prog(HG_CL_CREATE(clCreateProgramWithBinary, ctx_, 1, &dev_, &len, &data, &status));
  check(status, "clCreateProgramWithBinary (binary status)", __FILE__, __LINE__);
  HG_CL(clBuildProgram(prog.get(), 1, &dev_, options_.c_str(), nullptr, nullptr));
  return prog;
}

}  // namespace hetgraph::detail::cl
