// SPDX-License-Identifier: Apache-2.0
#include "common/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "hetgraph/error.hpp"
#include "util/atomic_file.hpp"

namespace hetgraph::detail {

namespace {
// Executor and queue lanes count from 0; lanes from outside the graph come after them.
constexpr std::size_t kExternalLane = 1000;
}  // namespace

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\t':
        o += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o;
}

TraceWriter::TraceWriter(std::string path) : path_(std::move(path)) {
  // Checked now rather than found at stop_trace, without opening the file: opening a FIFO
  // waits for a reader, and a device or folder is never replaced (write_target).
  try {
    const std::string target = write_target(path_);
    const auto slash = target.find_last_of('/');
    const std::string dir =
        slash == std::string::npos ? "." : (slash == 0 ? "/" : target.substr(0, slash));
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      throw DataError(path_ + ": " + std::strerror(errno));
  } catch (const DataError& e) {
    throw DataError(std::string("trace: cannot write ") + e.what());
  }
}

TraceWriter::~TraceWriter() {
  try {
    flush();
  } catch (...) {
    // A destructor cannot report it; stop_trace() does.
  }
}

void TraceWriter::set_lanes(const std::vector<std::string>& names) {
  if (names.size() > lanes_.size()) lanes_ = names;
}

void TraceWriter::add(const std::string& name, const std::string& category, int lane,
                      std::int64_t start_ns, std::int64_t end_ns, const std::string& node_label,
                      std::int64_t run, std::size_t in_bytes, std::size_t out_bytes) {
  if (origin_ns_ < 0) origin_ns_ = start_ns;
  char times[96];
  std::snprintf(times, sizeof times, "\"ts\":%.3f,\"dur\":%.3f",
                static_cast<double>(start_ns - origin_ns_) * 1e-3,
                static_cast<double>(end_ns - start_ns) * 1e-3);
  if (!events_.empty()) events_ += ",\n";
  events_ += "{\"name\":\"" + json_escape(name) + "\",\"cat\":\"" + json_escape(category) +
             "\",\"ph\":\"X\"," + times + ",\"pid\":1,\"tid\":" + std::to_string(lane) +
             ",\"args\":{\"node\":\"" + json_escape(node_label) + "\",\"op\":\"" +
             json_escape(category) + "\",\"run\":" + std::to_string(run) +
             ",\"in_bytes\":" + std::to_string(in_bytes) +
             ",\"out_bytes\":" + std::to_string(out_bytes) + "}}";
}

void TraceWriter::add_external(const std::string& lane, const std::string& name,
                               std::int64_t start_ns, std::int64_t end_ns) {
  std::size_t i = 0;
  while (i < external_.size() && external_[i] != lane) ++i;
  if (i == external_.size()) external_.push_back(lane);
  if (origin_ns_ >= 0) start_ns = std::max(start_ns, origin_ns_);
  end_ns = std::max(end_ns, start_ns);
  add(name, "external", static_cast<int>(kExternalLane + i), start_ns, end_ns, name, -1, 0, 0);
}

void TraceWriter::flush() {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"hetgraph\"}}";
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(i) +
           ",\"args\":{\"name\":\"" + json_escape(lanes_[i]) + "\"}}";
  }
  for (std::size_t i = 0; i < external_.size(); ++i) {
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" +
           std::to_string(kExternalLane + i) + ",\"args\":{\"name\":\"" +
           json_escape(external_[i]) + "\"}}";
  }
  if (!events_.empty()) out += ",\n" + events_;
  out += "\n]}\n";
  // A temporary of its own per write (two graphs tracing to one file shared PATH.tmp, and
  // one's rename failed or the file mixed both), renamed whole over the file.
  try {
    write_file_atomically(path_, [&](const auto& put) { put(out.data(), out.size()); });
  } catch (const DataError& e) {
    throw DataError(std::string("trace: cannot write ") + e.what());
  }
}

}  // namespace hetgraph::detail
