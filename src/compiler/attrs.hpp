// Attributes of a node. The scalar fields are shared by the ops that document them; anything
// structured is one typed payload per attribute kind (a permutation, a reshape target, a 2-d
// window, a matmul epilogue, slice ranges), read back with Attrs::get<T>(), which checks the
// kind: a node never reads another op's encoding by accident.
//
//   Attrs at;
//   at.set(Permutation{{0, 2, 1}});
//   const Permutation& p = at.get<Permutation>();   // Error("internal: ...") if it is not one
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hetgraph/error.hpp"

namespace hetgraph::detail {

enum class OpKind : std::uint8_t;

/// transpose: output axis i is input axis perm[i]; empty swaps the last two axes.
struct Permutation {
  static constexpr std::string_view kName = "permutation";
  std::vector<std::int64_t> perm;
  friend bool operator==(const Permutation&, const Permutation&) = default;
};

/// reshape: the target dims; one may be -1 (inferred from the element count).
struct ReshapeTarget {
  static constexpr std::string_view kName = "reshape target";
  std::vector<std::int64_t> dims;
  friend bool operator==(const ReshapeTarget&, const ReshapeTarget&) = default;
};

/// Geometry of the 2-D sliding-window ops (conv2d, max/avg pooling and their gradients).
/// Pairs are (height, width).
struct Window2d {
  static constexpr std::string_view kName = "2-d window";
  std::array<std::int64_t, 2> kernel{1, 1};  // pooling (conv2d takes it from the weights)
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> pad_begin{0, 0};  // top, left
  std::array<std::int64_t, 2> pad_end{0, 0};    // bottom, right
  std::array<std::int64_t, 2> dilation{1, 1};   // conv2d: 1 is a dense kernel
  bool count_include_pad = false;               // avg pooling: divide by the whole window
  friend bool operator==(const Window2d&, const Window2d&) = default;

  /// Input rows/columns one window spans along dim d (0: height, 1: width).
  std::int64_t extent(int d) const {
    const auto i = static_cast<std::size_t>(d);
    return (kernel[i] - 1) * dilation[i] + 1;
  }
  /// Output size along dim d for an input of size `in` (at least 1 once shapes are checked).
  std::int64_t out_size(int d, std::int64_t in) const {
    const auto i = static_cast<std::size_t>(d);
    return (in + pad_begin[i] + pad_end[i] - extent(d)) / stride[i] + 1;
  }
};

/// fused_matmul (made by the fusion pass): epilogue(alpha-scaled for scale) of the product,
/// optionally accumulated into the third input.
struct MatmulEpilogue {
  static constexpr std::string_view kName = "matmul epilogue";
  bool has_op = false;  // an elementwise op applied to the product
  OpKind op{};          // that op (exp, log, relu, scale, ...) when has_op
  bool accumulate = false;
  friend bool operator==(const MatmulEpilogue&, const MatmulEpilogue&) = default;
};

/// slice_grad_n: the [begin, end) range along the node's axis of each placed gradient.
struct SliceRanges {
  static constexpr std::string_view kName = "slice ranges";
  std::vector<std::array<std::int64_t, 2>> ranges;
  friend bool operator==(const SliceRanges&, const SliceRanges&) = default;
};

class TransferEndpoint;  // the runtime's side of a crossing: src/common/transfer.hpp

/// transfer (made by insert_transfers on heterogeneous platforms): its role at a device
/// boundary. A send (on the producer's device) hands the value to the host; a recv (on a
/// consumer's device) takes it into that device's memory; the commit gate (on the CPU part)
/// lets the CPU's writers of variables run once every other device's work before its commit
/// point succeeded. The endpoint is the heterogeneous executable's, set when it instantiates
/// the part: kernels call it.
struct TransferLink {
  static constexpr std::string_view kName = "transfer";
  enum class Role : std::uint8_t { send, recv, commit };
  Role role = Role::send;
  std::uint32_t link = 0;           // which crossing: its send and its recvs share the number
  std::size_t bytes = 0;            // the value's
  std::int32_t from = -1, to = -1;  // devices (recv: to is its own; send: to is -1)
  std::shared_ptr<TransferEndpoint> endpoint;
  friend bool operator==(const TransferLink&, const TransferLink&) = default;
};

struct Attrs {
  float alpha = 1.0f;  // scale factor, axpby a
  float beta = 0.0f;   // axpby b
  int axis = 0;        // reductions, softmax, slice, concat (kAllAxes: all)
  bool keepdims = false;
  bool trans_a = false, trans_b = false;  // matmul
  bool mean = false;                      // expand: divide by the reduced count
  std::int64_t begin = 0, end = 0;        // slice / slice_grad; concat_grad: the piece
  std::variant<std::monostate, Permutation, ReshapeTarget, Window2d, MatmulEpilogue, SliceRanges,
               TransferLink>
      payload;

  template <class T>
  bool has() const {
    return std::holds_alternative<T>(payload);
  }
  /// The payload of kind T; an internal Error when the node holds another kind (a bug).
  template <class T>
  const T& get() const {
    if (const T* p = std::get_if<T>(&payload)) return *p;
    throw Error("internal: attributes read as a " + std::string(T::kName) + " hold " +
                payload_name());
  }
  template <class T>
  Attrs& set(T value) {
    payload = std::move(value);
    return *this;
  }
  std::string payload_name() const {
    return std::visit(
        [](const auto& v) -> std::string {
          if constexpr (requires { std::decay_t<decltype(v)>::kName; })
            return std::string(std::decay_t<decltype(v)>::kName);
          else
            return "nothing";
        },
        payload);
  }

  friend bool operator==(const Attrs&, const Attrs&) = default;
};

}  // namespace hetgraph::detail
