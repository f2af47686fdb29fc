// SPDX-License-Identifier: Apache-2.0
// Attributes of a node. The few scalar fields (axis, keepdims, ...) mean one thing each, shared
// by the ops that document them; anything else is one typed payload per attribute kind (a
// scale factor, a slice range, a permutation, a 2-d window, a matmul epilogue, ...), read back
// with Attrs::get<T>(), which checks the kind: a node never reads another op's encoding by
// accident. A node that needs a second kind folds it into its first (a fused matmul's factor
// is MatmulEpilogue::alpha), since a node holds one payload.
//
//   Attrs at;
//   at.set(Permutation{{0, 2, 1}});
//   const Permutation& p = at.get<Permutation>();   // InternalError("...") if it is not one
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "hetgraph/distributed.hpp"
#include "hetgraph/error.hpp"
#include "hetgraph/tensor.hpp"

namespace hetgraph::detail {

enum class OpKind : std::uint8_t;
using Comm = distributed::Communicator::Impl;  // defined in compiler/comm.hpp

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

/// ONNX auto_pad: the padding derived from the input size (geometry.hpp, resolve_pads). SAME
/// pads so that the output has ceil(in / stride) rows, the odd one at the end (same_upper) or
/// the start (same_lower); valid pads nothing.
enum class AutoPadMode : std::uint8_t { none, same_upper, same_lower, valid };

/// Geometry of the 2-D sliding-window ops (conv2d, conv_transpose2d, max/avg pooling and their
/// gradients). Pairs are (height, width).
struct Window2d {
  static constexpr std::string_view kName = "2-d window";
  std::array<std::int64_t, 2> kernel{1, 1};  // pooling (convolutions take it from the weights)
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> pad_begin{0, 0};       // top, left
  std::array<std::int64_t, 2> pad_end{0, 0};         // bottom, right
  std::array<std::int64_t, 2> dilation{1, 1};        // 1 is a dense window
  bool count_include_pad = false;                    // avg pooling: divide by the whole window
  bool ceil_mode = false;                            // pooling: the output size rounds up
  std::int64_t groups = 1;                           // convolutions: channel groups
  std::array<std::int64_t, 2> output_padding{0, 0};  // conv_transpose2d: rows/columns added
  AutoPadMode auto_pad = AutoPadMode::none;          // pads from the input size instead
  bool exact = false;  // convolutions: no Winograd (Conv2dOptions::exact)
  friend bool operator==(const Window2d&, const Window2d&) = default;

  /// Input rows/columns one window spans along dim d (0: height, 1: width).
  std::int64_t extent(int d) const {
    const auto i = static_cast<std::size_t>(d);
    return (kernel[i] - 1) * dilation[i] + 1;
  }
  /// Output size along dim d for an input of size `in` (at least 1 once shapes are checked);
  /// pads as resolved (geometry.hpp).
  std::int64_t out_size(int d, std::int64_t in) const {
    const auto i = static_cast<std::size_t>(d);
    const std::int64_t span = in + pad_begin[i] + pad_end[i] - extent(d);
    return (ceil_mode ? (span + stride[i] - 1) / stride[i] : span / stride[i]) + 1;
  }
  /// Rows/columns the last window of ceil_mode reaches past the end padding (0 otherwise).
  std::int64_t ceil_extra(int d, std::int64_t in) const {
    const auto i = static_cast<std::size_t>(d);
    const std::int64_t reach = (out_size(d, in) - 1) * stride[i] + extent(d);
    return std::max<std::int64_t>(0, reach - (in + pad_begin[i] + pad_end[i]));
  }
};

// The payloads of what were Attrs::alpha and beta, one per meaning. Their defaults are those
// scalars' (alpha 1, beta 0): see Attrs::get_or_default.

/// scale: factor * x.
struct ScaleFactor {
  static constexpr std::string_view kName = "scale factor";
  float factor = 1.0f;
  friend bool operator==(const ScaleFactor&, const ScaleFactor&) = default;
};

/// layer_norm (compiler-made, fuse_layer_norm): the epsilon added to the variance.
struct LayerNormEps {
  static constexpr std::string_view kName = "layer norm epsilon";
  float eps = 1e-5f;
  friend bool operator==(const LayerNormEps&, const LayerNormEps&) = default;
};

/// lstm_cell, lstm_hidden (compiler-made, fuse_lstm_cells): which quarter of the gate
/// pre-activations G [B, 4H] (columns [k * H, (k + 1) * H)) is the input, forget, cell and output
/// gate. lstm_cell reads i, f and g; lstm_hidden reads o.
struct LstmGates {
  static constexpr std::string_view kName = "lstm gates";
  std::int8_t i = 0, f = 2, g = 3, o = 1;  // ONNX's order i, o, f, c
  friend bool operator==(const LstmGates&, const LstmGates&) = default;
};

/// gru_hidden (compiler-made, fuse_gru_cells): which third of the input and recurrent
/// projections X, Rc [B, 3H] (columns [k * H, (k + 1) * H)) is the update, reset and new gate.
struct GruGates {
  static constexpr std::string_view kName = "gru gates";
  std::int8_t z = 0, r = 1, h = 2;  // ONNX's order z, r, h
  friend bool operator==(const GruGates&, const GruGates&) = default;
};

/// lstm_sequence and gru_sequence (compiler-made, fuse_recurrent_sequences): `steps` steps of
/// one direction in one node. Step s reads rows [x_row(s), x_row(s) + B) of the input
/// projection P, x_row(s) = first_row + s * B, or first_row - s * B where `reverse` (a reverse
/// direction reads the projection backwards). The gates are as lstm_cell's (`lstm`) or
/// gru_hidden's (`gru`); a GRU's recurrent product has a bias where `bias`.
struct SequenceSpec {
  static constexpr std::string_view kName = "recurrent sequence";
  LstmGates lstm;
  GruGates gru;
  std::int64_t steps = 0, first_row = 0;
  bool reverse = false, bias = false;
  friend bool operator==(const SequenceSpec&, const SequenceSpec&) = default;
};

/// channel_affine (compiler-made, fuse_channel_affine): whether a relu follows the affine map.
struct ChannelAffineAct {
  static constexpr std::string_view kName = "channel affine activation";
  bool relu = false;
  friend bool operator==(const ChannelAffineAct&, const ChannelAffineAct&) = default;
};

/// attention (compiler-made, fuse_attention): the scaling of the scores S = Q K^T and the
/// shape a mask is added in. S is multiplied by `scale` (divided where `divide`: exports
/// divide by sqrt(d), and the quotient rounds differently from a product by its inverse),
/// after the product, or on Q before it where `scale_q` (torchvision's ViT scales Q).
/// `mask_dims`: with a mask input, the scores' dims as the mask's add saw them (the product
/// may have run on a view of them with the leading dims merged); empty otherwise.
struct AttentionSpec {
  static constexpr std::string_view kName = "attention";
  float scale = 1.0f;
  bool divide = false;
  bool scale_q = false;
  bool trans_k = false;  // input 1 is K [.., Tk, d] read transposed, not K^T [.., d, Tk]
  /// > 0: the transposes around the block folded in: q, k and v are [.., T, heads, d] as the
  /// projections wrote them (k read transposed), the result [.., Tq, heads, dv] as the output
  /// projection reads it, where the nodes moved the heads axis before T and back.
  std::int64_t heads = 0;
  std::vector<std::int64_t> mask_dims;
  friend bool operator==(const AttentionSpec&, const AttentionSpec&) = default;
};

/// axpby: a * x + b * y.
struct AxpbyCoeffs {
  static constexpr std::string_view kName = "axpby coefficients";
  float a = 1.0f, b = 0.0f;
  friend bool operator==(const AxpbyCoeffs&, const AxpbyCoeffs&) = default;
};

/// leaky_relu, leaky_relu_grad: the slope below 0. The builders always set it; a node made
/// without one (a test's bare node) gets ONNX's and PyTorch's default.
struct LeakySlope {
  static constexpr std::string_view kName = "leaky slope";
  float slope = 0.01f;
  friend bool operator==(const LeakySlope&, const LeakySlope&) = default;
};

/// clip, clip_grad: the bounds (an infinite one bounds nothing; lo > hi gives hi). Without one
/// (a test's bare node) nothing is bounded.
struct ClipRange {
  static constexpr std::string_view kName = "clip range";
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  friend bool operator==(const ClipRange&, const ClipRange&) = default;
};

/// fused_matmul (made by the fusion pass): epilogue(alpha-scaled for scale) of the product,
/// optionally accumulated into the third input. A plain matmul has no factor (alpha 1).
struct MatmulEpilogue {
  static constexpr std::string_view kName = "matmul epilogue";
  bool has_op = false;  // an elementwise op applied to the product
  OpKind op{};          // that op (exp, log, relu, scale, ...) when has_op
  bool accumulate = false;
  float alpha = 1.0f;  // a folded scale's factor (op is scale); 1 otherwise
  /// With accumulate: the added input is a bias, one value per column ([N]), added to every
  /// row (a Linear layer's or Gemm's) instead of a value of the result's shape.
  bool bias = false;
  /// Not empty: the result is the product viewed in these dims (the reshape between an
  /// imported 3-d MatMul's 2-d product and its bias add), the same elements in the same order.
  std::vector<std::int64_t> view;
  friend bool operator==(const MatmulEpilogue&, const MatmulEpilogue&) = default;
};

/// fused_conv2d (made by the conv fusion passes): the convolution's window, then what follows
/// it as oneDNN post-ops: plus the bias (its own input), plus a same-shape residual (sum
/// post-op, its last input), then an elementwise op (relu, clip, leaky_relu or sigmoid, with
/// the parameters its own node held: a LeakySlope or a ClipRange).
struct ConvEpilogue {
  static constexpr std::string_view kName = "convolution epilogue";
  Window2d window;
  bool bias = false;        // inputs (x, w, b, ...)
  bool accumulate = false;  // last input r: y = conv + b + r, before the op
  bool has_op = false;
  OpKind op{};
  LeakySlope leaky;  // op is leaky_relu
  ClipRange clip;    // op is clip
  friend bool operator==(const ConvEpilogue&, const ConvEpilogue&) = default;
};

/// dropout: the drop probability and the seed of its masks (src/compiler/dropout_mask.hpp).
struct DropoutMask {
  static constexpr std::string_view kName = "dropout mask";
  float p = 0.5f;
  std::uint64_t seed = 0;
  friend bool operator==(const DropoutMask&, const DropoutMask&) = default;
};

/// scatter_elements: how an update combines with the element it lands on.
struct ScatterMode {
  static constexpr std::string_view kName = "scatter mode";
  ScatterReduction reduction = ScatterReduction::none;
  friend bool operator==(const ScatterMode&, const ScatterMode&) = default;
};

/// cumsum: whether each element leaves itself out, and whether the sums run from the back.
struct ScanMode {
  static constexpr std::string_view kName = "scan mode";
  bool exclusive = false, reverse = false;
  friend bool operator==(const ScanMode&, const ScanMode&) = default;
};

/// top_k: how many indices each line keeps, and which end of the order they come from.
struct TopKSpec {
  static constexpr std::string_view kName = "top k";
  std::int64_t k = 1;
  bool largest = true;
  friend bool operator==(const TopKSpec&, const TopKSpec&) = default;
};

/// slice_grad_n: the [begin, end) range along the node's axis of each placed gradient.
struct SliceRanges {
  static constexpr std::string_view kName = "slice ranges";
  std::vector<std::array<std::int64_t, 2>> ranges;
  friend bool operator==(const SliceRanges&, const SliceRanges&) = default;
};

// The payloads of what were Attrs::begin and end (defaults 0: Attrs::get_or_default).

/// slice, slice_grad: the [begin, end) range along the node's axis (negative values count
/// from the back).
struct SliceRange {
  static constexpr std::string_view kName = "slice range";
  std::int64_t begin = 0, end = 0;
  friend bool operator==(const SliceRange&, const SliceRange&) = default;
};

/// concat_grad: which piece of the concat (its input `piece`) the gradient is for.
struct PieceIndex {
  static constexpr std::string_view kName = "piece index";
  std::int64_t piece = 0;
  friend bool operator==(const PieceIndex&, const PieceIndex&) = default;
};

/// maximum_grad, minimum_grad: the input (0: a, 1: b) whose share of g the node is.
struct InputChoice {
  static constexpr std::string_view kName = "input choice";
  std::int64_t input = 0;
  friend bool operator==(const InputChoice&, const InputChoice&) = default;
};

/// embedding_update (fuse_sparse_update): v + scale * (the looked-up rows' summed gradient),
/// scale being the SGD step's axpby b; and where in its gradient input the lookup's rows start
/// (GradientBand; fuse_embedding_concat moves it off 0).
struct EmbeddingStep {
  static constexpr std::string_view kName = "embedding step";
  float scale = 1.0f;
  std::int64_t band = 0;
  friend bool operator==(const EmbeddingStep&, const EmbeddingStep&) = default;
};

/// cast: the element type of the result.
struct TargetType {
  static constexpr std::string_view kName = "target type";
  DType dtype = DType::f32;
  friend bool operator==(const TargetType&, const TargetType&) = default;
};

/// strided_slice: ONNX Slice's starts, ends, axes and steps, as given (negative values count
/// from the back; out-of-range starts and ends clamp). Empty axes: 0, 1, ...; empty steps: 1s.
/// geometry.hpp normalises them against a shape (strided_slice_geom).
struct SliceSpec {
  static constexpr std::string_view kName = "slice spec";
  std::vector<std::int64_t> starts, ends, axes, steps;
  friend bool operator==(const SliceSpec&, const SliceSpec&) = default;
};

/// pad: elements added before and after each axis (one pair per axis of the input; negative
/// values crop) and how they are filled.
struct PadSpec {
  static constexpr std::string_view kName = "pad spec";
  enum class Mode : std::uint8_t { constant, reflect, edge };
  Mode mode = Mode::constant;
  float value = 0.0f;  // constant mode's fill
  std::vector<std::int64_t> begin, end;
  friend bool operator==(const PadSpec&, const PadSpec&) = default;
};

/// Collectives (allreduce, broadcast, reduce, allgather, reduce_scatter): among whom, with which
/// reduction, from or to which root.
struct Collective {
  static constexpr std::string_view kName = "collective";
  std::shared_ptr<Comm> comm;
  distributed::ReduceOp op = distributed::ReduceOp::sum;
  int root = 0;
  friend bool operator==(const Collective&, const Collective&) = default;
};

/// optimizer_update: the rule and its hyper-parameters (PyTorch's definitions; see
/// include/hetgraph/autodiff.hpp). The learning rate and the step count are graph values (the
/// node's inputs), not attributes, so schedules need no recompilation.
struct OptimizerRule {
  static constexpr std::string_view kName = "optimizer rule";
  enum class Kind : std::uint8_t { sgd, momentum, nesterov, adam, adamw, rmsprop, adagrad };
  Kind kind = Kind::sgd;
  float momentum = 0.0f, dampening = 0.0f;  // momentum, nesterov
  float beta1 = 0.9f, beta2 = 0.999f;       // adam, adamw
  float alpha = 0.99f;                      // rmsprop: decay of the square average
  float eps = 1e-8f;                        // adam, adamw, rmsprop, adagrad
  float weight_decay = 0.0f;                // adamw: decoupled; the others: added to the gradient
  std::int64_t band = 0;  // sparse_optimizer_update: the gradient's first column (GradientBand)
  friend bool operator==(const OptimizerRule&, const OptimizerRule&) = default;

  /// State tensors per variable (velocity; first and second moments; square average; sum).
  int states() const {
    switch (kind) {
      case Kind::sgd:
        return 0;
      case Kind::adam:
      case Kind::adamw:
        return 2;
      default:
        return 1;
    }
  }
  /// Whether the update reads the step count (Adam's bias corrections).
  bool uses_step() const { return kind == Kind::adam || kind == Kind::adamw; }
  /// Input layout of optimizer_update: (variable, gradient, learning rate[, step], states...).
  int first_state() const { return uses_step() ? 4 : 3; }
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

/// embedding_concat (fuse_embedding_concat): per piece of the concat, whether it is a lookup
/// (two inputs: table, indices) or a value copied as it is (one input).
struct LookupPieces {
  static constexpr std::string_view kName = "lookup pieces";
  std::vector<std::uint8_t> lookup;
  friend bool operator==(const LookupPieces&, const LookupPieces&) = default;

  /// For each lookup piece, in order: its table input and its indices input.
  std::vector<std::pair<std::size_t, std::size_t>> lookups() const {
    std::vector<std::pair<std::size_t, std::size_t>> r;
    std::size_t k = 0;
    for (std::uint8_t l : lookup) {
      if (l != 0) r.push_back({k, k + 1});
      k += l != 0 ? 2 : 1;
    }
    return r;
  }
};

struct Attrs {
  int axis = 0;  // reductions, softmax, slice, concat (kAllAxes: all)
  bool keepdims = false;
  bool trans_a = false, trans_b = false;  // matmul
  bool mean = false;                      // expand: divide by the reduced count
  bool last_index = false;                // argmax / argmin: ties give the last index
  std::variant<std::monostate, Permutation, ReshapeTarget, Window2d, MatmulEpilogue, SliceRanges,
               TargetType, SliceSpec, PadSpec, Collective, TransferLink, OptimizerRule,
               ConvEpilogue, LookupPieces, DropoutMask, ScatterMode, ScanMode, TopKSpec, SliceRange,
               PieceIndex, InputChoice, EmbeddingStep, ScaleFactor, AxpbyCoeffs, LeakySlope,
               ClipRange, LayerNormEps, LstmGates, GruGates, SequenceSpec, ChannelAffineAct,
               AttentionSpec>
      payload;

  template <class T>
  bool has() const {
    return std::holds_alternative<T>(payload);
  }
  /// The payload of kind T; InternalError when the node holds another kind (a bug).
  template <class T>
  const T& get() const {
    if (const T* p = std::get_if<T>(&payload)) return *p;
    throw InternalError("attributes read as a " + std::string(T::kName) + " hold " +
                        payload_name());
  }
  /// The payload of kind T, or T's defaults where the node holds none: those are what such a
  /// node read when these attributes were loose scalars (alpha 1, beta 0, begin and end 0), so
  /// a node made without its payload (detail::make_op) runs as it did. InternalError when the
  /// node holds another kind.
  template <class T>
  T get_or_default() const {
    if (std::holds_alternative<std::monostate>(payload)) return T{};
    return get<T>();
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

/// The window of a convolution or pooling node: its Window2d, or a fused convolution's.
inline const Window2d& window2d(const Attrs& a) {
  if (const auto* e = std::get_if<ConvEpilogue>(&a.payload)) return e->window;
  return a.get<Window2d>();
}

/// The two float parameters an elementwise kernel is handed (OpenCL's take them for every op):
/// scale {factor, 0}, axpby {a, b}, leaky_relu {slope, 0}, clip {lo, hi}; other ops {1, 0}.
inline std::array<float, 2> elementwise_params(const Attrs& a) {
  if (const auto* s = std::get_if<ScaleFactor>(&a.payload)) return {s->factor, 0.0f};
  if (const auto* c = std::get_if<AxpbyCoeffs>(&a.payload)) return {c->a, c->b};
  if (const auto* l = std::get_if<LeakySlope>(&a.payload)) return {l->slope, 0.0f};
  if (const auto* r = std::get_if<ClipRange>(&a.payload)) return {r->lo, r->hi};
  return {1.0f, 0.0f};
}

/// The first gradient column a sparse table step reads (GradientBand): 0 unless
/// fuse_embedding_concat pointed it into a concat's gradient.
inline std::int64_t gradient_band_begin(const Attrs& a) {
  if (const auto* r = std::get_if<OptimizerRule>(&a.payload)) return r->band;
  if (const auto* e = std::get_if<EmbeddingStep>(&a.payload)) return e->band;
  return 0;
}

}  // namespace hetgraph::detail
