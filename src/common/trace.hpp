// SPDX-License-Identifier: Apache-2.0
// Chrome trace-event JSON (the format chrome://tracing and Perfetto open): complete events
// ("ph":"X", microsecond ts/dur) on one track (tid) per executor or queue, named by
// thread_name metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetgraph::detail {

class TraceWriter {
 public:
  /// Checks at once that `path` can be written (DataError otherwise).
  explicit TraceWriter(std::string path);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void set_lanes(const std::vector<std::string>& names);
  /// A complete event; times in nanoseconds on the steady clock.
  void add(const std::string& name, const std::string& category, int lane, std::int64_t start_ns,
           std::int64_t end_ns, const std::string& node_label, std::int64_t run,
           std::size_t in_bytes, std::size_t out_bytes);
  /// An event from outside the graph on a lane of its own (by name), numbered after the
  /// executors' lanes. An event that started before the trace's first one is clipped to it.
  void add_external(const std::string& lane, const std::string& name, std::int64_t start_ns,
                    std::int64_t end_ns);
  /// Writes the file (via a temporary and rename). Called again, rewrites it with all events.
  void flush();

 private:
  std::string path_;
  std::vector<std::string> lanes_;
  std::vector<std::string> external_;  // lanes of add_external, tid kExternalLane + index
  std::string events_;                 // comma-separated JSON objects
  std::int64_t origin_ns_ = -1;
};

std::string json_escape(const std::string& s);

}  // namespace hetgraph::detail
