// SPDX-License-Identifier: Apache-2.0
// The only translation unit that sees ONNX's protobuf classes: ModelProto / TensorProto in and
// out, onnx::checker, ONNX shape inference and function bodies from ONNX's schema registry.
#include <fcntl.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "common/float16.hpp"
#include "hetgraph/error.hpp"
#include "onnx/ir.hpp"

namespace hetgraph::onnx::ir {

namespace pb = ::onnx;
namespace fs = std::filesystem;

const char* elem_name(int elem) {
  switch (elem) {
    case kFloat:
      return "float";
    case kUint8:
      return "uint8";
    case kInt8:
      return "int8";
    case kUint16:
      return "uint16";
    case kInt16:
      return "int16";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case kString:
      return "string";
    case kBool:
      return "bool";
    case kFloat16:
      return "float16";
    case kDouble:
      return "double";
    case kUint32:
      return "uint32";
    case kUint64:
      return "uint64";
    case kComplex64:
      return "complex64";
    case kComplex128:
      return "complex128";
    case kBfloat16:
      return "bfloat16";
    default:
      return "undefined";
  }
}

bool is_integral(int elem) {
  switch (elem) {
    case kUint8:
    case kInt8:
    case kUint16:
    case kInt16:
    case kInt32:
    case kInt64:
    case kBool:
    case kUint32:
    case kUint64:
      return true;
    default:
      return false;
  }
}

// (kDouble too: ImportOptions::float64_as_float32 decides whether a model may have one.)
bool held_as_float(int elem) {
  return elem == kFloat || elem == kFloat16 || elem == kBfloat16 || elem == kDouble;
}

float round_to_elem(float v, int elem) {
  return elem == kFloat16    ? detail::round_to_float16(v)
         : elem == kBfloat16 ? detail::round_to_bfloat16(v)
                             : v;
}

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& why) {
  throw DataError(source + ": " + why);
}

template <class T>
std::vector<T> raw_values(const std::string& raw, std::size_t n, const std::string& what) {
  if (raw.size() != n * sizeof(T)) {
    throw DataError(what + ": raw data holds " + std::to_string(raw.size()) + " bytes, " +
                    std::to_string(n) + " elements need " + std::to_string(n * sizeof(T)));
  }
  std::vector<T> v(n);
  if (n) std::memcpy(v.data(), raw.data(), n * sizeof(T));
  return v;
}

// t's dims, copied to out.dims, and the element count they give. Checked as they are read: a
// negative dim, or a count past 2^40, fails before any value is read.
std::size_t read_dims(const pb::TensorProto& t, const std::string& source, Tensor& out) {
  std::int64_t n = 1;
  for (std::int64_t d : t.dims()) {
    if (d < 0) bad(source, "tensor '" + t.name() + "' has a negative dimension");
    out.dims.push_back(d);
    if (d != 0 && n > (std::int64_t{1} << 40) / d)
      bad(source, "tensor '" + t.name() + "' is too large");
    n *= d;
  }
  return static_cast<std::size_t>(n);
}

// A typed field (float_data, int32_data, ...) must hold one value per element; raw_data is
// checked by raw_values.
void check_count(int have, std::size_t count, const std::string& what) {
  if (static_cast<std::size_t>(have) != count) {
    throw DataError(what + " has " + std::to_string(have) + " values for its " +
                    std::to_string(count) + " elements");
  }
}

// The values of the types held as float (float, double, float16, bfloat16), from raw_data or
// their typed field, into out.f.
void read_float_values(const pb::TensorProto& t, std::size_t count, const std::string& what,
                       Tensor& out) {
  const bool raw = t.has_raw_data();
  if (t.data_type() == kFloat) {
    if (raw) {
      out.f = raw_values<float>(t.raw_data(), count, what);
    } else {
      check_count(t.float_data_size(), count, what);
      out.f.assign(t.float_data().begin(), t.float_data().end());
    }
  } else if (t.data_type() == kDouble) {
    if (raw) {
      for (double d : raw_values<double>(t.raw_data(), count, what))
        out.f.push_back(static_cast<float>(d));
    } else {
      check_count(t.double_data_size(), count, what);
      for (double d : t.double_data()) out.f.push_back(static_cast<float>(d));
    }
  } else {  // float16 and bfloat16, 16 bits each (in int32_data when not raw)
    const bool half = t.data_type() == kFloat16;
    if (raw) {
      for (std::uint16_t h : raw_values<std::uint16_t>(t.raw_data(), count, what))
        out.f.push_back(half ? detail::float16_value(h) : detail::bfloat16_value(h));
    } else {
      check_count(t.int32_data_size(), count, what);
      for (std::int32_t h : t.int32_data()) {
        const auto u = static_cast<std::uint16_t>(h);
        out.f.push_back(half ? detail::float16_value(u) : detail::bfloat16_value(u));
      }
    }
  }
}

// raw_data of the integer types narrower than 64 bits (and bool), widened into out.i.
void read_small_raw(const pb::TensorProto& t, std::size_t count, const std::string& what,
                    Tensor& out) {
  switch (t.data_type()) {
    case kInt32:
      for (auto v : raw_values<std::int32_t>(t.raw_data(), count, what)) out.i.push_back(v);
      break;
    case kInt16:
      for (auto v : raw_values<std::int16_t>(t.raw_data(), count, what)) out.i.push_back(v);
      break;
    case kUint16:
      for (auto v : raw_values<std::uint16_t>(t.raw_data(), count, what)) out.i.push_back(v);
      break;
    case kInt8:
      for (auto v : raw_values<std::int8_t>(t.raw_data(), count, what)) out.i.push_back(v);
      break;
    default:
      for (auto v : raw_values<std::uint8_t>(t.raw_data(), count, what)) out.i.push_back(v);
      break;
  }
}

// The values of the integer types (bool included), from raw_data or their typed field, into
// out.i as int64 (uint64 values past INT64_MAX wrap to negative ones).
void read_int_values(const pb::TensorProto& t, std::size_t count, const std::string& what,
                     Tensor& out) {
  const bool raw = t.has_raw_data();
  if (t.data_type() == kInt64) {
    if (raw) {
      out.i = raw_values<std::int64_t>(t.raw_data(), count, what);
    } else {
      check_count(t.int64_data_size(), count, what);
      out.i.assign(t.int64_data().begin(), t.int64_data().end());
    }
  } else if (t.data_type() == kUint32 || t.data_type() == kUint64) {
    if (raw) {
      if (t.data_type() == kUint32) {
        for (auto v : raw_values<std::uint32_t>(t.raw_data(), count, what)) out.i.push_back(v);
      } else {
        for (auto v : raw_values<std::uint64_t>(t.raw_data(), count, what))
          out.i.push_back(static_cast<std::int64_t>(v));
      }
    } else {
      check_count(t.uint64_data_size(), count, what);
      for (auto v : t.uint64_data()) out.i.push_back(static_cast<std::int64_t>(v));
    }
  } else if (raw) {  // int32, int16, int8, uint16, uint8, bool
    read_small_raw(t, count, what, out);
  } else {
    check_count(t.int32_data_size(), count, what);
    out.i.assign(t.int32_data().begin(), t.int32_data().end());
  }
}

// A TensorProto as a Tensor: the header (name, type, dims), then the values by element type.
Tensor from_proto(const pb::TensorProto& t, const std::string& source) {
  Tensor out;
  out.name = t.name();
  out.elem = t.data_type();
  const std::size_t count = read_dims(t, source, out);
  const std::string what = source + ": tensor '" + t.name() + "'";
  if (t.data_location() == pb::TensorProto::EXTERNAL) {
    bad(source, "tensor '" + t.name() + "' keeps its data in an external file that was not read");
  }
  switch (t.data_type()) {
    case kFloat:
    case kDouble:
    case kFloat16:
    case kBfloat16:
      read_float_values(t, count, what, out);
      break;
    case kInt64:
    case kInt32:
    case kInt16:
    case kInt8:
    case kUint16:
    case kUint8:
    case kBool:
    case kUint32:
    case kUint64:
      read_int_values(t, count, what, out);
      break;
    default:
      // Strings, complex numbers: kept without values; the importer says they are unsupported.
      break;
  }
  return out;
}

// The values of t as little-endian T, raw_data's layout.
template <class T>
std::string raw_as(const Tensor& t) {
  std::vector<T> v(t.i.begin(), t.i.end());
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

void to_proto(const Tensor& t, pb::TensorProto& p) {
  p.set_name(t.name);
  p.set_data_type(t.elem);
  for (std::int64_t d : t.dims) p.add_dims(d);
  const auto n = static_cast<std::size_t>(t.numel());
  std::string raw;
  switch (t.elem) {
    case kFloat:
      raw.assign(reinterpret_cast<const char*>(t.f.data()), n * 4);
      break;
    case kFloat16:
    case kBfloat16: {  // (held as float values of the type)
      std::vector<std::uint16_t> h(n);
      for (std::size_t k = 0; k < n; ++k) {
        h[k] = t.elem == kFloat16
                   ? detail::float16_bits(t.f[k])
                   : static_cast<std::uint16_t>(
                         std::bit_cast<std::uint32_t>(detail::round_to_bfloat16(t.f[k])) >> 16);
      }
      raw.assign(reinterpret_cast<const char*>(h.data()), n * 2);
      break;
    }
    case kDouble: {  // (held as float values)
      const std::vector<double> d(t.f.begin(), t.f.end());
      raw.assign(reinterpret_cast<const char*>(d.data()), d.size() * sizeof(double));
      break;
    }
    case kInt64:
    case kUint64:
      raw = raw_as<std::int64_t>(t);
      break;
    case kInt32:
    case kUint32:
      raw = raw_as<std::int32_t>(t);
      break;
    case kInt16:
    case kUint16:
      raw = raw_as<std::int16_t>(t);
      break;
    case kInt8:
    case kUint8:
    case kBool:
      raw = raw_as<std::int8_t>(t);
      break;
    default:
      throw InternalError("writing ONNX tensors of type " + std::string(elem_name(t.elem)));
  }
  p.set_raw_data(raw);
}

ValueInfo from_proto(const pb::ValueInfoProto& v) {
  ValueInfo out;
  out.name = v.name();
  if (!v.type().has_tensor_type()) {
    // A sequence of tensors: the element type of its tensors.
    if (v.type().has_sequence_type() && v.type().sequence_type().elem_type().has_tensor_type())
      out.elem = v.type().sequence_type().elem_type().tensor_type().elem_type();
    out.non_tensor = v.type().has_sequence_type()        ? "sequence"
                     : v.type().has_optional_type()      ? "optional"
                     : v.type().has_map_type()           ? "map"
                     : v.type().has_sparse_tensor_type() ? "sparse tensor"
                                                         : "untyped";
    return out;
  }
  const auto& tt = v.type().tensor_type();
  out.elem = tt.elem_type();
  out.has_shape = tt.has_shape();
  for (const auto& d : tt.shape().dim()) {
    Dim dim;
    if (d.has_dim_value()) dim.value = d.dim_value();
    if (d.has_dim_param()) dim.param = d.dim_param();
    out.dims.push_back(dim);
  }
  return out;
}

void to_proto(const ValueInfo& v, pb::ValueInfoProto& p) {
  p.set_name(v.name);
  auto* tt = p.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(v.elem);
  if (!v.has_shape) return;
  auto* s = tt->mutable_shape();
  for (const Dim& d : v.dims) {
    auto* pd = s->add_dim();
    if (d.value >= 0)
      pd->set_dim_value(d.value);
    else if (!d.param.empty())
      pd->set_dim_param(d.param);
  }
}

using Opsets = std::map<std::string, std::int64_t>;
Graph from_proto(const pb::GraphProto& g, const Opsets& opsets, const std::string& source,
                 const std::string& where, std::vector<std::string>* ops);

/// `opsets` given: a body (GRAPH attribute) is converted, its nodes under those opsets and
/// labelled after `where` (the node that holds it); otherwise it is kept as kOther.
Attr from_proto(const pb::AttributeProto& a, const std::string& source,
                const Opsets* opsets = nullptr, const std::string& where = "",
                std::vector<std::string>* ops = nullptr) {
  Attr out;
  switch (a.type()) {
    case pb::AttributeProto::FLOAT:
      out.kind = Attr::kFloatA;
      out.f = a.f();
      break;
    case pb::AttributeProto::INT:
      out.kind = Attr::kIntA;
      out.i = a.i();
      break;
    case pb::AttributeProto::STRING:
      out.kind = Attr::kStringA;
      out.s = a.s();
      break;
    case pb::AttributeProto::TENSOR:
      out.kind = Attr::kTensorA;
      out.t = std::make_shared<const Tensor>(from_proto(a.t(), source));
      break;
    case pb::AttributeProto::FLOATS:
      out.kind = Attr::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case pb::AttributeProto::INTS:
      out.kind = Attr::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case pb::AttributeProto::STRINGS:
      out.kind = Attr::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case pb::AttributeProto::GRAPH:
      if (opsets != nullptr) {
        out.kind = Attr::kGraphA;
        out.g = std::make_shared<const Graph>(
            from_proto(a.g(), *opsets, source, where + " " + a.name(), ops));
        break;
      }
      [[fallthrough]];
    default:
      out.kind = Attr::kOther;
      out.other = pb::AttributeProto::AttributeType_Name(a.type());
      break;
  }
  return out;
}

void to_proto(const Graph& g, pb::GraphProto& p);

void to_proto(const std::string& name, const Attr& a, pb::AttributeProto& p) {
  p.set_name(name);
  switch (a.kind) {
    case Attr::kFloatA:
      p.set_type(pb::AttributeProto::FLOAT);
      p.set_f(a.f);
      break;
    case Attr::kIntA:
      p.set_type(pb::AttributeProto::INT);
      p.set_i(a.i);
      break;
    case Attr::kStringA:
      p.set_type(pb::AttributeProto::STRING);
      p.set_s(a.s);
      break;
    case Attr::kTensorA:
      p.set_type(pb::AttributeProto::TENSOR);
      to_proto(*a.t, *p.mutable_t());
      break;
    case Attr::kFloats:
      p.set_type(pb::AttributeProto::FLOATS);
      for (float f : a.floats) p.add_floats(f);
      break;
    case Attr::kInts:
      p.set_type(pb::AttributeProto::INTS);
      for (std::int64_t i : a.ints) p.add_ints(i);
      break;
    case Attr::kStrings:
      p.set_type(pb::AttributeProto::STRINGS);
      for (const auto& s : a.strings) p.add_strings(s);
      break;
    case Attr::kGraphA:
      p.set_type(pb::AttributeProto::GRAPH);
      to_proto(*a.g, *p.mutable_g());
      break;
    default:
      throw InternalError("writing an ONNX attribute of kind " + std::to_string(a.kind));
  }
}

// Calls f on every tensor of g that may keep its data in an external file: its initializers
// and the tensors of its nodes' attributes and of the bodies in them (ONNX's external-data
// helper moves those out too).
template <class F>
void for_each_tensor(pb::GraphProto& g, F&& f) {
  for (auto& t : *g.mutable_initializer()) f(t);
  for (auto& s : *g.mutable_sparse_initializer()) {
    f(*s.mutable_values());
    f(*s.mutable_indices());
  }
  for (auto& n : *g.mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) f(*a.mutable_t());
      for (auto& t : *a.mutable_tensors()) f(t);
      if (a.has_sparse_tensor()) {
        f(*a.mutable_sparse_tensor()->mutable_values());
        f(*a.mutable_sparse_tensor()->mutable_indices());
      }
      for (auto& s : *a.mutable_sparse_tensors()) {
        f(*s.mutable_values());
        f(*s.mutable_indices());
      }
      if (a.has_g()) for_each_tensor(*a.mutable_g(), f);
      for (auto& b : *a.mutable_graphs()) for_each_tensor(b, f);
    }
  }
}

// Whether `p` (a resolved path) is `dir` (resolved) or lies below it.
bool inside(const fs::path& p, const fs::path& dir) {
  const fs::path rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != ".." && !rel.is_absolute();
}

/// The external data files of one model. A location is a path relative to the model's folder,
/// and the file it names is read only when its real path (symlinks resolved: a link in the
/// folder, a linked folder on the way, a chain of links) lies inside the folder's real path,
/// and only when it is a regular file (a FIFO would block the import, a device never end).
/// Reads add up to at most the sizes of the distinct files read: tensors claiming one file's
/// bytes many times over cannot make the import allocate more than the files hold.
class ExternalData {
 public:
  ExternalData(const std::string& source, const std::string& base_dir)
      : source_(source), base_dir_(base_dir) {}

  std::string read(const pb::TensorProto& t, const std::string& location, std::int64_t offset,
                   std::int64_t length) {
    const std::string tensor = "tensor '" + t.name() + "': external data '" + location + "'";
    if (real_dir_.empty()) {
      std::error_code ec;
      real_dir_ = fs::canonical(base_dir_, ec);
      if (ec) bad(source_, tensor + ": cannot resolve the model's folder: " + ec.message());
    }
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(fs::path(base_dir_) / location, ec);
    if (ec) bad(source_, tensor + ": cannot resolve " + location + ": " + ec.message());
    if (!inside(real, real_dir_) || real == real_dir_) {
      bad(source_, tensor + " is " + real.string() + ", outside the model's folder " +
                       real_dir_.string() +
                       " (external data must stay inside it; symlinks are resolved)");
    }
    // Opened without blocking (a FIFO), and not through a link swapped in since it was
    // resolved; what was opened is checked again below.
    const int fd = ::open(real.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      bad(source_, tensor + ": cannot open " + real.string() + ": " + std::strerror(errno));
    }
    const struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    // The path of the file actually opened (a folder on the way may have been swapped for a
    // link since it was resolved).
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    const fs::path opened = fs::read_symlink(proc, ec);
    if (!ec && (!inside(opened, real_dir_) || opened == real_dir_)) {
      bad(source_, tensor + " is " + opened.string() + ", outside the model's folder " +
                       real_dir_.string() + " (it changed while it was opened)");
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      bad(source_, tensor + ": " + real.string() + " is not a regular file");
    }
    const std::int64_t file_size = st.st_size;
    if (length < 0 && offset >= 0 && offset <= file_size) length = file_size - offset;
    if (offset < 0 || length < 0 || offset > file_size || length > file_size - offset) {
      bad(source_, tensor + ": bytes [" + std::to_string(offset) + ", +" + std::to_string(length) +
                       ") lie outside " + real.string() + " (" + std::to_string(file_size) +
                       " bytes)");
    }
    if (sizes_.emplace(real.string(), file_size).second) budget_ += file_size;
    if (length > budget_ - read_) {
      bad(source_, tensor + ": the model's external data reads " + std::to_string(read_ + length) +
                       " bytes from files of " + std::to_string(budget_) +
                       " bytes in all: tensors may not claim the same bytes over and over");
    }
    read_ += length;
    std::string raw(static_cast<std::size_t>(length), '\0');
    std::size_t done = 0;
    while (done < raw.size()) {
      const ssize_t n = ::pread(fd, raw.data() + done, raw.size() - done,
                                static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        bad(source_, tensor + ": cannot read " + real.string() + ": " +
                         (n < 0 ? std::strerror(errno) : "the file is shorter than it was"));
      }
      done += static_cast<std::size_t>(n);
    }
    return raw;
  }

 private:
  const std::string& source_;
  const std::string& base_dir_;
  fs::path real_dir_;
  std::map<std::string, std::int64_t> sizes_;  // distinct files read, and their sizes
  std::int64_t budget_ = 0, read_ = 0;
};

/// Reads tensors kept in external files into the model (the checker and everything after it
/// see ordinary tensors: it never looks for files itself). Locations must stay inside the
/// model's directory (ExternalData).
void load_external_data(pb::ModelProto& m, const std::string& base_dir, const std::string& source) {
  ExternalData files(source, base_dir);
  for_each_tensor(*m.mutable_graph(), [&](pb::TensorProto& t) {
    if (t.data_location() != pb::TensorProto::EXTERNAL) return;
    std::string location;
    std::int64_t offset = 0, length = -1;
    // A number is all digits: stoll alone read "12abc" as 12 and "0x10" as 0.
    const auto number = [&](const std::string& key, const std::string& v) {
      std::int64_t x = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
        bad(source, "tensor '" + t.name() + "': bad external data " + key + " '" +
                        v.substr(0, 100) + "' (not an integer)");
      }
      return x;
    };
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = number(kv.key(), kv.value());
      else if (kv.key() == "length")
        length = number(kv.key(), kv.value());
    }
    if (location.empty() || location.front() == '/' || location.find("..") != std::string::npos ||
        location.find('\0') != std::string::npos) {
      bad(source, "tensor '" + t.name() + "': external data location '" + location +
                      "' must be a file name relative to the model");
    }
    if (base_dir.empty()) {
      bad(source, "tensor '" + t.name() +
                      "' keeps its data in an external file; load the model from a path");
    }
    t.set_raw_data(files.read(t, location, offset, length));
    t.clear_external_data();
    t.set_data_location(pb::TensorProto::DEFAULT);
  });
}

/// ONNX 1.12's shape inference divides by strides and dilations without checking them (a
/// stride of 0 is a SIGFPE in convPoolShapeInference): such models are refused first.
void check_window_attributes(const pb::GraphProto& g, const std::string& source) {
  static const char* const kWindowOps[] = {"Conv",    "ConvTranspose", "ConvInteger", "QLinearConv",
                                           "MaxPool", "AveragePool",   "LpPool",      "MaxUnpool"};
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_window_attributes(a.g(), source);  // bodies are inferred too
    }
    if (std::none_of(std::begin(kWindowOps), std::end(kWindowOps),
                     [&](const char* op) { return n.op_type() == op; }))
      continue;
    for (const auto& a : n.attribute()) {
      const bool positive =
          a.name() == "strides" || a.name() == "dilations" || a.name() == "kernel_shape";
      if (!positive && a.name() != "pads") continue;
      for (std::int64_t v : a.ints()) {
        if (positive ? v < 1 : v < 0) {
          bad(source, "node '" + n.name() + "' (" + n.op_type() + ") has " + a.name() + " " +
                          std::to_string(v) +
                          (positive ? " (they must be at least 1)" : " (pads are never negative)"));
        }
      }
    }
  }
}

std::string node_label(const pb::NodeProto& n, std::size_t index, int since) {
  const std::string op = n.op_type() + "-" + std::to_string(since);
  if (n.name().empty()) return "#" + std::to_string(index) + " (" + op + ")";
  return "'" + n.name() + "' (" + op + ")";
}

const pb::OpSchema* schema_of(const std::string& domain, const std::string& op,
                              std::int64_t opset) {
  if (opset <= 0) return nullptr;
  return pb::OpSchemaRegistry::Schema(op, static_cast<int>(opset), domain);
}

/// One node of a graph (the model's or a body) under `opsets`; `where` names the body.
Node from_proto(const pb::NodeProto& n, std::size_t index, const Opsets& opsets,
                const std::string& source, const std::string& where,
                std::vector<std::string>* ops) {
  if (ops) ops->push_back(n.op_type());
  Node node;
  node.op = n.op_type();
  node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
  node.name = n.name();
  auto it = opsets.find(node.domain);
  node.opset = it == opsets.end() ? 0 : it->second;
  const pb::OpSchema* s = schema_of(node.domain, node.op, node.opset);
  node.since = s ? s->SinceVersion() : 0;
  node.label = (where.empty() ? "" : where + ": ") + node_label(n, index, node.since);
  node.inputs.assign(n.input().begin(), n.input().end());
  node.outputs.assign(n.output().begin(), n.output().end());
  for (const auto& a : n.attribute())
    node.attrs[a.name()] = from_proto(a, source, &opsets, node.label, ops);
  return node;
}

Graph from_proto(const pb::GraphProto& g, const Opsets& opsets, const std::string& source,
                 const std::string& where, std::vector<std::string>* ops) {
  if (g.sparse_initializer_size() > 0) bad(source, "sparse initializers are not supported");
  Graph out;
  out.name = g.name();
  for (const auto& v : g.input()) out.inputs.push_back(from_proto(v));
  for (const auto& v : g.output()) out.outputs.push_back(from_proto(v));
  for (const auto& t : g.initializer()) out.initializers.push_back(from_proto(t, source));
  for (int k = 0; k < g.node_size(); ++k)
    out.nodes.push_back(
        from_proto(g.node(k), static_cast<std::size_t>(k), opsets, source, where, ops));
  return out;
}

pb::NodeProto to_proto(const Node& n);

void to_proto(const Graph& g, pb::GraphProto& p) {
  p.set_name(g.name);
  for (const auto& v : g.inputs) to_proto(v, *p.add_input());
  for (const auto& v : g.outputs) to_proto(v, *p.add_output());
  for (const auto& t : g.initializers) to_proto(t, *p.add_initializer());
  for (const auto& n : g.nodes) *p.add_node() = to_proto(n);
}

pb::NodeProto to_proto(const Node& n) {
  pb::NodeProto p;
  p.set_op_type(n.op);
  p.set_domain(n.domain);
  p.set_name(n.name);
  for (const auto& i : n.inputs) p.add_input(i);
  for (const auto& o : n.outputs) p.add_output(o);
  for (const auto& [name, a] : n.attrs) {
    if (a.kind != Attr::kOther && a.kind != Attr::kNone) to_proto(name, a, *p.add_attribute());
  }
  return p;
}

pb::TypeProto to_proto(const TypeInfo& t) {
  pb::TypeProto p;
  auto* tt = p.mutable_tensor_type();
  tt->set_elem_type(t.elem);
  if (t.has_shape) {
    auto* s = tt->mutable_shape();
    for (std::int64_t d : t.dims) {
      if (d >= 0)
        s->add_dim()->set_dim_value(d);
      else
        s->add_dim();
    }
  }
  return p;
}

}  // namespace

// Applies f to every value name of g and of the bodies in it.
void rename_values(Graph& g, const std::function<std::string(const std::string&)>& f) {
  for (ValueInfo& v : g.inputs) v.name = f(v.name);
  for (ValueInfo& v : g.outputs) v.name = f(v.name);
  for (Tensor& t : g.initializers) t.name = f(t.name);
  for (Node& n : g.nodes) {
    for (std::string& i : n.inputs) i = f(i);
    for (std::string& o : n.outputs) o = f(o);
    for (auto& a : n.attrs) {
      if (a.second.kind != Attr::kGraphA) continue;
      auto inner = std::make_shared<Graph>(*a.second.g);
      rename_values(*inner, f);
      a.second.g = inner;
    }
  }
}

bool has_function(const std::string& domain, const std::string& op, int since) {
  const pb::OpSchema* s = schema_of(domain, op, since);
  return s && s->SinceVersion() == since && (s->HasFunction() || s->HasContextDependentFunction());
}

std::vector<Node> function_body(const Node& n, const std::vector<TypeInfo>& input_types, int serial,
                                const std::string& source) {
  const pb::OpSchema* s = schema_of(n.domain, n.op, n.opset);
  if (!s) return {};
  const pb::NodeProto np = to_proto(n);
  pb::FunctionProto body;
  if (s->HasFunction()) {
    body = *s->GetFunction();
  } else if (s->HasContextDependentFunction()) {
    std::vector<pb::TypeProto> types;
    for (const TypeInfo& t : input_types) types.push_back(to_proto(t));
    pb::FunctionBodyBuildContextImpl ctx(np, types);
    try {
      if (!s->BuildContextDependentFunction(ctx, body)) body.Clear();
    } catch (const std::exception&) {
      body.Clear();
    }
  }
  std::int64_t opset = n.opset;
  for (const auto& o : body.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  // Formal names -> the caller's names; values the body makes get names of their own.
  std::unordered_map<std::string, std::string> rename;
  for (int i = 0; i < body.input_size(); ++i)
    rename[body.input(i)] =
        static_cast<std::size_t>(i) < n.inputs.size() ? n.inputs[static_cast<std::size_t>(i)] : "";
  for (int i = 0; i < body.output_size(); ++i)
    rename[body.output(i)] = static_cast<std::size_t>(i) < n.outputs.size()
                                 ? n.outputs[static_cast<std::size_t>(i)]
                                 : "";
  const std::string prefix = (n.outputs.empty() ? n.name : n.outputs[0]) + "::" + n.op + "_" +
                             std::to_string(serial) + "::";
  auto mapped = [&](const std::string& name) {
    if (name.empty()) return name;
    auto it = rename.find(name);
    return it != rename.end() ? it->second : prefix + name;
  };
  std::unordered_map<std::string, const pb::AttributeProto*> given;
  for (const auto& a : np.attribute()) given[a.name()] = &a;
  const Opsets body_opsets{{"", opset}};
  std::vector<Node> out;
  for (const pb::NodeProto& b : body.node()) {
    Node node;
    node.op = b.op_type();
    node.domain = b.domain() == "ai.onnx" ? "" : b.domain();
    node.name = n.name + "::" + (b.name().empty() ? b.op_type() : b.name());
    node.opset = node.domain.empty() ? opset : 0;
    const pb::OpSchema* bs = schema_of(node.domain, node.op, node.opset);
    node.since = bs ? bs->SinceVersion() : 0;
    node.label = "'" + node.name + "' (" + node.op + "-" + std::to_string(node.since) + ")";
    for (const auto& i : b.input()) node.inputs.push_back(mapped(i));
    for (const auto& o : b.output()) node.outputs.push_back(mapped(o));
    for (const auto& a : b.attribute()) {
      // Attributes that refer to the caller's take its value, or the schema's default.
      const pb::AttributeProto* v = &a;
      if (!a.ref_attr_name().empty()) {
        auto it = given.find(a.ref_attr_name());
        const auto d = s->attributes().find(a.ref_attr_name());
        if (it != given.end())
          v = it->second;
        else if (d != s->attributes().end() && d->second.default_value.type() != 0)
          v = &d->second.default_value;
        else
          continue;
      }
      Attr attr = from_proto(*v, source, &body_opsets, node.label);
      // A body (Range's Loop) reads the function's values by their formal names: every name
      // in it is renamed as the function's own are (its locals consistently, so they stay
      // apart).
      if (attr.kind == Attr::kGraphA) {
        auto g = std::make_shared<Graph>(*attr.g);
        rename_values(*g, mapped);
        attr.g = g;
      }
      node.attrs[a.name()] = std::move(attr);
    }
    out.push_back(std::move(node));
  }
  return out;
}

std::vector<TypeInfo> infer_output_types(const Model& m,
                                         const std::map<std::string, TypeInfo>& inputs) {
  pb::ModelProto p;
  p.set_ir_version(m.ir_version);
  for (const auto& [domain, version] : m.opsets) {
    auto* o = p.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
  auto* g = p.mutable_graph();
  for (const auto& [name, t] : inputs) {
    auto* v = g->add_input();
    v->set_name(name);
    *v->mutable_type() = to_proto(t);
  }
  // Initializers by type only, except small integer ones (shapes, axes) whose values shape
  // inference reads.
  for (const Tensor& t : m.graph.initializers) {
    if (is_integral(t.elem) && t.numel() <= 64) {
      to_proto(t, *g->add_initializer());
      continue;
    }
    auto* v = g->add_input();
    v->set_name(t.name);
    *v->mutable_type() = to_proto(TypeInfo{t.elem, t.dims, true});
  }
  for (const Node& n : m.graph.nodes) *g->add_node() = to_proto(n);
  for (const ValueInfo& o : m.graph.outputs) {
    auto* v = g->add_output();
    v->set_name(o.name);
  }
  try {
    // Data propagation follows Shape -> Gather -> Concat into Reshape, as the importer does.
    const pb::ShapeInferenceOptions options(false, 0, true);
    pb::shape_inference::InferShapes(p, pb::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception&) {
    return {};
  }
  std::unordered_map<std::string, const pb::TypeProto*> types;
  for (const auto& v : p.graph().value_info()) types[v.name()] = &v.type();
  for (const auto& v : p.graph().output()) types[v.name()] = &v.type();
  std::vector<TypeInfo> out;
  for (const ValueInfo& o : m.graph.outputs) {
    TypeInfo t;
    auto it = types.find(o.name);
    if (it != types.end() && it->second->has_tensor_type()) {
      const auto& tt = it->second->tensor_type();
      t.elem = tt.elem_type();
      t.has_shape = tt.has_shape();
      for (const auto& d : tt.shape().dim())
        t.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    out.push_back(t);
  }
  return out;
}

namespace {

void parse_proto(pb::ModelProto& m, const void* data, std::size_t size, const std::string& source) {
  if (size > static_cast<std::size_t>(INT_MAX)) {
    bad(source, "models larger than 2 GiB must keep their tensors as external data");
  }
  if (size == 0 || !m.ParseFromArray(data, static_cast<int>(size))) {
    bad(source, "not an ONNX model (the file does not parse as an ONNX ModelProto)");
  }
}

// Checks and converts a parsed model. Each initializer's protobuf copy is freed as soon as it
// is converted, so the weights exist about twice at the peak, not three times.
Model convert_model(pb::ModelProto& m, const std::string& source, const std::string& base_dir,
                    bool check) {
  if (!m.has_graph()) bad(source, "the model has no graph");
  load_external_data(m, base_dir, source);
  if (check) {
    try {
      pb::checker::check_model(m);
    } catch (const std::exception& e) {
      bad(source, std::string("onnx::checker rejects the model: ") + e.what());
    }
  }
  check_window_attributes(m.graph(), source);

  Model out;
  out.source = source;
  out.ir_version = m.ir_version();
  out.producer_name = m.producer_name();
  out.producer_version = m.producer_version();
  out.doc = m.doc_string();
  for (const auto& o : m.opset_import()) {
    out.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  }
  const pb::GraphProto& g = m.graph();
  out.graph.name = g.name();
  for (const auto& v : g.input()) out.graph.inputs.push_back(from_proto(v));
  for (const auto& v : g.output()) out.graph.outputs.push_back(from_proto(v));
  for (int k = 0; k < g.initializer_size(); ++k) {
    pb::TensorProto& t = *m.mutable_graph()->mutable_initializer(k);
    out.graph.initializers.push_back(from_proto(t, source));
    std::string().swap(*t.mutable_raw_data());  // clear() would keep the capacity
    google::protobuf::RepeatedField<float>().Swap(t.mutable_float_data());
  }
  if (g.sparse_initializer_size() > 0) bad(source, "sparse initializers are not supported");
  for (int k = 0; k < g.node_size(); ++k) {
    out.graph.nodes.push_back(
        from_proto(g.node(k), static_cast<std::size_t>(k), out.opsets, source, "", &out.ops));
  }
  return out;
}

}  // namespace

Model parse_model(const void* data, std::size_t size, const std::string& source,
                  const std::string& base_dir, bool check) {
  pb::ModelProto m;
  parse_proto(m, data, size, source);
  return convert_model(m, source, base_dir, check);
}

Model parse_model(std::string&& bytes, const std::string& source, const std::string& base_dir,
                  bool check) {
  pb::ModelProto m;
  parse_proto(m, bytes.data(), bytes.size(), source);
  std::string().swap(bytes);
  return convert_model(m, source, base_dir, check);
}

std::string serialize_model(const Model& m) {
  pb::ModelProto p;
  p.set_ir_version(m.ir_version);
  p.set_producer_name(m.producer_name);
  p.set_producer_version(m.producer_version);
  if (!m.doc.empty()) p.set_doc_string(m.doc);
  for (const auto& [domain, version] : m.opsets) {
    auto* o = p.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
  to_proto(m.graph, *p.mutable_graph());
  try {
    pb::checker::check_model(p);
  } catch (const std::exception& e) {
    throw InternalError(std::string("the exported model fails onnx::checker: ") + e.what());
  }
  std::string bytes;
  if (!p.SerializeToString(&bytes)) throw InternalError("the exported model does not serialise");
  return bytes;
}

Tensor parse_tensor(const void* data, std::size_t size, const std::string& source) {
  pb::TensorProto t;
  if (size > static_cast<std::size_t>(INT_MAX) || !t.ParseFromArray(data, static_cast<int>(size))) {
    bad(source, "not an ONNX TensorProto");
  }
  if (!pb::TensorProto::DataType_IsValid(t.data_type()) || t.data_type() == kUndefined) {
    bad(source, "tensor has no valid element type");
  }
  return from_proto(t, source);
}

std::string read_regular_file(const std::string& path, const std::string& what,
                              std::int64_t max_bytes, const std::string& too_large) {
  // Opened without blocking: a FIFO would block the open itself.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw DataError(path + ": cannot open " + what + ": " + std::strerror(errno));
  const struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw DataError(path + ": " + what + " is not a regular file");
  }
  if (st.st_size > max_bytes) {
    throw DataError(path + ": " + what + " is " + std::to_string(st.st_size) +
                    " bytes, more than the " + std::to_string(max_bytes) + " it may have" +
                    (too_large.empty() ? "" : ": " + too_large));
  }
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DataError(path + ": cannot read " + what + ": " + std::strerror(errno));
    if (n == 0) break;  // shorter than it was: what is there is parsed (and refused if cut)
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

std::string serialize_tensor(const Tensor& t) {
  pb::TensorProto p;
  to_proto(t, p);
  std::string bytes;
  if (!p.SerializeToString(&bytes)) throw InternalError("a tensor does not serialise");
  return bytes;
}

}  // namespace hetgraph::onnx::ir
