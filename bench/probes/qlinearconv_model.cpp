// SPDX-License-Identifier: Apache-2.0
// Writes two ONNX models of one resnet-sized convolution (not part of the build): q.onnx, a
// QLinearConv of uint8 [1, 64, 56, 56] with int8 3x3 weights to 64 channels (pads 1), as ONNX
// Runtime's quantizer writes them, and f.onnx, the float Conv of the same geometry; and
// qm.onnx, a QLinearMatMul of uint8 [1, 128, 768] and int8 [768, 768] weights; and qdq.onnx,
// the convolution in ONNX Runtime's other format (QDQ: QuantizeLinear / DequantizeLinear around
// a float Conv, the weights int8 behind a DequantizeLinear). hetgraph-run
// times them: the quantized one computes exact int32 sums in float32 (a gather of patches and
// chunked products), so the pair shows what that costs against the float convolution.
//   g++ -O2 -std=c++20 -DONNX_ML=1 -DONNX_NAMESPACE=onnx -o /tmp/qgen
//       bench/probes/qlinearconv_model.cpp -lonnx_proto -lprotobuf
//   /tmp/qgen /tmp/q && build/tools/hetgraph-run /tmp/q/q.onnx --repeat 20 --json
//   /tmp/qgen /tmp/q 512 7 7 512    # channels, height, width, output channels
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

using Proto = ::onnx::ModelProto;
constexpr int kFloat = 1, kUint8 = 2, kInt8 = 3;  // ONNX element types

void value_info(::onnx::ValueInfoProto* v, const std::string& name, int elem,
                const std::vector<std::int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  for (auto d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

template <class T>
void initializer(::onnx::GraphProto* g, const std::string& name, int elem,
                 const std::vector<std::int64_t>& dims, const std::vector<T>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (auto d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

// An opset-13 model with one graph named `name`, and that graph.
::onnx::GraphProto* empty_model(Proto& m, const std::string& name) {
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name(name);
  return g;
}

// Scales and zero points as ONNX Runtime's quantizer leaves them (per tensor): uint8 for the
// activations `x` and `y`, int8 for the weights `w`.
void quantization(::onnx::GraphProto* g, const std::string& x, const std::string& w,
                  const std::string& y, float y_scale) {
  initializer(g, x + "s", kFloat, {}, std::vector<float>{0.02f});
  initializer(g, x + "z", kUint8, {}, std::vector<std::uint8_t>{128});
  initializer(g, w + "s", kFloat, {}, std::vector<float>{0.01f});
  initializer(g, w + "z", kInt8, {}, std::vector<std::int8_t>{0});
  initializer(g, y + "s", kFloat, {}, std::vector<float>{y_scale});
  initializer(g, y + "z", kUint8, {}, std::vector<std::uint8_t>{128});
}

struct Geometry {
  std::int64_t c = 64, h = 56, w = 56, oc = 64;
};

Proto model(bool quantized, const Geometry& geo) {
  constexpr std::int64_t n = 1, k = 3;
  const std::int64_t c = geo.c, h = geo.h, w = geo.w, oc = geo.oc;
  Proto m;
  auto* g = empty_model(m, "conv");
  std::mt19937 rng(1);
  auto* node = g->add_node();
  node->set_op_type(quantized ? "QLinearConv" : "Conv");
  for (const char* in : quantized
                            ? std::vector<const char*>{"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"}
                            : std::vector<const char*>{"x", "w"})
    node->add_input(in);
  node->add_output("y");
  auto* ks = node->add_attribute();
  ks->set_name("kernel_shape");
  ks->set_type(::onnx::AttributeProto::INTS);
  ks->add_ints(k);
  ks->add_ints(k);
  auto* pads = node->add_attribute();
  pads->set_name("pads");
  pads->set_type(::onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  const std::vector<std::int64_t> wd{oc, c, k, k};
  const auto wn = static_cast<std::size_t>(oc * c * k * k);
  if (quantized) {
    std::vector<std::int8_t> wq(wn);
    for (auto& v : wq) v = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
    initializer(g, "w", kInt8, wd, wq);
    quantization(g, "x", "w", "y", 0.5f);
  } else {
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> wf(wn);
    for (auto& v : wf) v = u(rng);
    initializer(g, "w", kFloat, wd, wf);
  }
  value_info(g->add_input(), "x", quantized ? kUint8 : kFloat, {n, c, h, w});
  value_info(g->add_output(), "y", quantized ? kUint8 : kFloat, {n, oc, h, w});
  return m;
}

// uint8 [1, 128, 768] x int8 [768, 768] weights, per-tensor scales and zero points.
Proto qmatmul() {
  constexpr std::int64_t m = 128, k = 768, n = 768;
  Proto p;
  auto* g = empty_model(p, "qmatmul");
  std::mt19937 rng(2);
  auto* node = g->add_node();
  node->set_op_type("QLinearMatMul");
  for (const char* in : {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}) node->add_input(in);
  node->add_output("y");
  std::vector<std::int8_t> b(static_cast<std::size_t>(k * n));
  for (auto& v : b) v = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
  initializer(g, "b", kInt8, {k, n}, b);
  quantization(g, "a", "b", "y", 2.0f);
  value_info(g->add_input(), "a", kUint8, {1, m, k});
  value_info(g->add_output(), "y", kUint8, {1, m, n});
  return p;
}

// The convolution of model() in QDQ form: float x quantized to uint8 and back, int8 weights
// dequantized, a float Conv.
Proto qdq_conv(const Geometry& geo) {
  constexpr std::int64_t n = 1, k = 3;
  Proto p;
  auto* g = empty_model(p, "qdq");
  std::mt19937 rng(1);
  const auto add = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    auto* node = g->add_node();
    node->set_op_type(op);
    for (const auto& i : in) node->add_input(i);
    node->add_output(out);
    return node;
  };
  std::vector<std::int8_t> wq(static_cast<std::size_t>(geo.oc * geo.c * k * k));
  for (auto& v : wq) v = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
  initializer(g, "w", kInt8, {geo.oc, geo.c, k, k}, wq);
  quantization(g, "x", "w", "y", 0.5f);
  add("QuantizeLinear", {"x", "xs", "xz"}, "xq");
  add("DequantizeLinear", {"xq", "xs", "xz"}, "xd");
  add("DequantizeLinear", {"w", "ws", "wz"}, "wd");
  auto* conv = add("Conv", {"xd", "wd"}, "y");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(::onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  value_info(g->add_input(), "x", kFloat, {n, geo.c, geo.h, geo.w});
  value_info(g->add_output(), "y", kFloat, {n, geo.oc, geo.h, geo.w});
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  Geometry geo;
  if (argc > 5)
    geo = {std::stoll(argv[2]), std::stoll(argv[3]), std::stoll(argv[4]), std::stoll(argv[5])};
  for (const bool q : {true, false}) {
    std::ofstream f(dir + (q ? "/q.onnx" : "/f.onnx"), std::ios::binary);
    model(q, geo).SerializeToOstream(&f);
  }
  std::ofstream f(dir + "/qm.onnx", std::ios::binary);
  qmatmul().SerializeToOstream(&f);
  std::ofstream d(dir + "/qdq.onnx", std::ios::binary);
  qdq_conv(geo).SerializeToOstream(&d);
}
