// SPDX-License-Identifier: Apache-2.0
// Errors hetgraph throws for user mistakes and failed platform calls.
//
// Every error is a hetgraph::Error; the subclass says which layer rejected the request and the
// message names the node (user name or #id), the op and the shapes involved, or the file.
//
//   try {
//     auto cg = hetgraph::GraphCompiler().compile(g, {{"x", {4, 3}}}, {y});
//   } catch (const hetgraph::ShapeError& e) {
//     std::cerr << e.what() << '\n';   // node 'y' (#7, matmul): inner dimensions differ ...
//   }
#pragma once

#include <stdexcept>
#include <string>

namespace hetgraph {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Graph structure: illegal cycles, pruned or foreign nodes, assign misuse, empty graphs,
/// gradients that cannot be formed.
class GraphError : public Error {
 public:
  using Error::Error;
};

/// Shapes that do not fit an op (found by shape inference at compile time).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// Feeds passed to run(): unknown or missing names, wrong sizes or element types.
class FeedError : public Error {
 public:
  using Error::Error;
};

/// Platform failures: no device, a failed OpenCL/oneDNN call, a kernel failing at run time.
class PlatformError : public Error {
 public:
  using Error::Error;
};

/// Files and data: corrupt, truncated or missing IDX files, unwritable traces.
class DataError : public Error {
 public:
  using Error::Error;
};

/// Collectives across processes (hetgraph/distributed.hpp): a rank that failed, died or stopped
/// responding, a collective past its deadline, MPI errors. The message names the rank.
class CommunicationError : public Error {
 public:
  using Error::Error;
};

/// A broken invariant of hetgraph itself: a bug in the library, not in the caller's graph, data
/// or use (worth a report, with the message). The message starts with "internal: ".
///
///   } catch (const hetgraph::InternalError& e) { report_bug(e.what()); }
///   } catch (const hetgraph::Error& e) { fix_my_input(e.what()); }  // anything else
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& what) : Error("internal: " + what) {}
};

/// Misuse of an object's contract: a call on a moved-from object, calls on one compiled
/// graph from two threads at once, reading a value a failed run left invalid.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace hetgraph
