// SPDX-License-Identifier: Apache-2.0
// ONNX import of the neural-network ops (src/onnx/ops_nn.cpp: normalisation, pooling, RoiAlign,
// GridSample, Resize) and of the recurrent ones (src/onnx/ops_rnn.cpp).
#include <algorithm>
#include <array>
#include <cmath>

#include "common/executable.hpp"
#include "onnx_test_util.hpp"

namespace {

using namespace onnx_test;

// BatchNormalization in training mode (opset 15): normalised by the batch's statistics per
// channel (population variance), the running statistics moved towards them by momentum; against
// the formula in double, on every platform, and exported and imported back. The gradient of
// the summed output: the bias's is the count per channel, x's is 0 (a normalised channel sums
// to 0 whatever x is). Opset 9's training outputs stay unsupported.
TEST(OnnxImport, BatchNormTrainingModeUsesTheBatchStatistics) {
  Builder b(15);
  b.input("x", {2, 2, 1, 3}).output("y", {2, 2, 1, 3}).output("rm", {2}).output("rv", {2});
  b.floats("scale", {2}, {1.5f, -0.5f}).floats("bias", {2}, {0.25f, 2.0f});
  b.floats("mean", {2}, {0.5f, -1.0f}).floats("var", {2}, {2.0f, 0.5f});
  auto* n = b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm", "rv"});
  Builder::attr(n, "training_mode", std::int64_t{1});
  Builder::attr_f(n, "epsilon", 1e-2f);
  Builder::attr_f(n, "momentum", 0.75f);
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const std::vector<float> x{1, 2, 6, -1, 0, 4, 3, 3, 0, 2, 5, -2};
  const double scale[2] = {1.5, -0.5}, bias[2] = {0.25, 2.0}, mean0[2] = {0.5, -1.0},
               var0[2] = {2.0, 0.5};
  std::vector<float> want_y(12), want_rm(2), want_rv(2);
  for (std::size_t ch = 0; ch < 2; ++ch) {
    double mu = 0, v = 0;
    for (std::size_t nn = 0; nn < 2; ++nn)
      for (std::size_t w = 0; w < 3; ++w) mu += x[nn * 6 + ch * 3 + w] / 6.0;
    for (std::size_t nn = 0; nn < 2; ++nn)
      for (std::size_t w = 0; w < 3; ++w) v += std::pow(x[nn * 6 + ch * 3 + w] - mu, 2) / 6.0;
    for (std::size_t nn = 0; nn < 2; ++nn)
      for (std::size_t w = 0; w < 3; ++w) {
        const std::size_t at = nn * 6 + ch * 3 + w;
        want_y[at] = static_cast<float>((x[at] - mu) / std::sqrt(v + 1e-2) * scale[ch] + bias[ch]);
      }
    want_rm[ch] = static_cast<float>(mean0[ch] * 0.75 + mu * 0.25);
    want_rv[ch] = static_cast<float>(var0[ch] * 0.75 + v * 0.25);
  }
  const auto near = [](const std::vector<float>& got, const std::vector<float>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], tol) << k;
  };
  // variables: the initializers in order (scale, bias, mean, var)
  ASSERT_EQ(m.variables.size(), 4u);
  const std::vector<Node> d = gradients(reduce_sum(m.outputs[0]), {m.variables[1], m.inputs[0]});
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}});
      near(cg.read(model->outputs[0]), want_y, 1e-5);
      near(cg.read(model->outputs[1]), want_rm, 1e-6);
      near(cg.read(model->outputs[2]), want_rv, 1e-5);
    }
    CompiledGraph cg = GraphCompiler(pc.make()).compile(m.graph, m.input_shapes, d);
    cg.run({{"x", x}});
    EXPECT_EQ(cg.read(d[0]), (std::vector<float>{6, 6}));
    near(cg.read(d[1]), std::vector<float>(12, 0.0f), 1e-5);
  }
  Builder old(9);
  old.input("x", {2, 2, 1, 3}).output("y", {2, 2, 1, 3});
  for (const char* o : {"rm", "rv", "sm", "sv"}) old.output(o, {2});
  old.floats("scale", {2}, {1, 1}).floats("bias", {2}, {0, 0});
  old.floats("mean", {2}, {0, 0}).floats("var", {2}, {1, 1});
  old.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"},
           {"y", "rm", "rv", "sm", "sv"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { old.import(); }), "training mode");
}

// MaxPool's Indices (opset 12): the flat position in x of each window's maximum, the first in
// window order (ties, a NaN, windows in the padding), row-major or (storage_order 1) column-major
// over the image, 2-d and 1-d; MaxUnpool scatters the maxima back (a larger output_shape pads at
// the end). Against a direct reference on every platform, exported and imported back. Fed
// positions outside the unpooled shape are FeedErrors.
// GlobalAveragePool over a 2-d image is one average pooling with the image as its window (one
// pass; the blocked pooling kernel where the value is blocked), not a mean per axis; a 1-d
// image keeps its one mean. Both against the mean taken here in double, on every platform and
// exported and imported back.
TEST(OnnxImport, GlobalAveragePoolIsOneWindowOverTheImage) {
  Builder b(12);
  b.input("x", {2, 3, 5, 7}).input("v", {2, 3, 6});
  b.output("y", {2, 3, 1, 1}).output("w", {2, 3, 1});
  b.node("GlobalAveragePool", {"x"}, {"y"});
  b.node("GlobalAveragePool", {"v"}, {"w"});
  ho::Model m = b.import();
  int pools = 0, means = 0;
  for (std::uint32_t i = 0; i < m.graph.size(); ++i) {
    pools += m.graph.node(i).op_name() == "avg_pool2d";
    means += m.graph.node(i).op_name() == "reduce_mean";
  }
  EXPECT_EQ(pools, 1);
  EXPECT_EQ(means, 1);  // the 1-d image's
  const std::vector<float> x = testing_util::random_vec(2 * 3 * 5 * 7, 91),
                           v = testing_util::random_vec(2 * 3 * 6, 92);
  auto means_of = [](const std::vector<float>& a, std::size_t plane) {
    std::vector<double> out;
    for (std::size_t p = 0; p < a.size() / plane; ++p) {
      double sum = 0.0;
      for (std::size_t k = 0; k < plane; ++k) sum += a[p * plane + k];
      out.push_back(sum / static_cast<double>(plane));
    }
    return out;
  };
  const std::vector<double> want_y = means_of(x, 35), want_w = means_of(v, 6);
  run_everywhere(m, {{"x", x}, {"v", v}}, true, [&](CompiledGraph& cg, const ho::Model& mm) {
    const std::vector<float> y = cg.read(mm.outputs[0]), w = cg.read(mm.outputs[1]);
    ASSERT_EQ(y.size(), want_y.size());
    ASSERT_EQ(w.size(), want_w.size());
    for (std::size_t k = 0; k < y.size(); ++k) EXPECT_NEAR(y[k], want_y[k], 1e-6) << k;
    for (std::size_t k = 0; k < w.size(); ++k) EXPECT_NEAR(w[k], want_w[k], 1e-6) << k;
  });
}

TEST(OnnxImport, MaxPoolIndicesAndMaxUnpool) {
  Builder b(12);
  b.input("x", {2, 2, 3, 4}).input("v", {1, 2, 5}).input("z", {1, 1, 4, 4});
  b.output("y", {2, 2, 2, 2}).output("i", {2, 2, 2, 2}, 7).output("ic", {2, 2, 2, 2}, 7);
  b.output("vi", {1, 2, 2}, 7).output("u", {1, 1, 5, 6});
  b.int_tensor("shape", {4}, {1, 1, 5, 6});
  for (int order : {0, 1}) {
    auto* n = b.node("MaxPool", {"x"}, {order == 0 ? "y" : "yc", order == 0 ? "i" : "ic"});
    Builder::attr(n, "kernel_shape", std::vector<std::int64_t>{3, 3});
    Builder::attr(n, "strides", std::vector<std::int64_t>{2, 2});
    Builder::attr(n, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
    Builder::attr(n, "storage_order", std::int64_t{order});
  }
  auto* n1 = b.node("MaxPool", {"v"}, {"vy", "vi"});
  Builder::attr(n1, "kernel_shape", std::vector<std::int64_t>{2});
  Builder::attr(n1, "strides", std::vector<std::int64_t>{2});
  // z pooled 2 x 2 and unpooled into the 4 x 4 it came from, padded at the end to 5 x 6 (the
  // output_shape input, as ONNX's reference pads).
  for (const char* op : {"MaxPool", "MaxUnpool"}) {
    auto* n = std::string(op) == "MaxPool" ? b.node(op, {"z"}, {"zy", "zi"})
                                           : b.node(op, {"zy", "zi", "shape"}, {"u"});
    Builder::attr(n, "kernel_shape", std::vector<std::int64_t>{2, 2});
    Builder::attr(n, "strides", std::vector<std::int64_t>{2, 2});
  }
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  // Ties (3s), a NaN after a larger value, a plane of -inf.
  std::vector<float> x(48), v{1, 7, 7, 2, 5, -1, -3, -3, 0, 9}, z(16);
  for (std::size_t k = 0; k < 16; ++k) z[k] = static_cast<float>((k * 11) % 7);
  for (std::size_t k = 0; k < 48; ++k) x[k] = static_cast<float>((k * 7) % 5);
  x[6] = NAN;
  for (std::size_t k = 36; k < 48; ++k) x[k] = -INFINITY;
  // The reference: taps in window order, the first maximum, a NaN beating any number.
  std::vector<float> want_y, want_u(30, 0.0f);
  std::vector<std::int32_t> want_i, want_ic, want_vi;
  for (std::size_t q = 0; q < 4; ++q) {
    for (int oh = 0; oh < 2; ++oh) {
      for (int ow = 0; ow < 2; ++ow) {
        int bh = -1, bw = -1;
        float best = 0;
        for (int kh = 0; kh < 3; ++kh) {
          for (int kw = 0; kw < 3; ++kw) {
            const int h = oh * 2 - 1 + kh, w = ow * 2 - 1 + kw;
            if (h < 0 || h >= 3 || w < 0 || w >= 4) continue;
            const float val = x[q * 12 + static_cast<std::size_t>(h * 4 + w)];
            if (bh < 0 || (std::isnan(val) && !std::isnan(best)) ||
                (!std::isnan(best) && val > best)) {
              best = val;
              bh = h;
              bw = w;
            }
          }
        }
        want_y.push_back(best);
        want_i.push_back(static_cast<std::int32_t>(q * 12) + bh * 4 + bw);
        want_ic.push_back(static_cast<std::int32_t>(q * 12) + bh + bw * 3);
      }
    }
  }
  for (std::size_t q = 0; q < 2; ++q) {
    for (std::size_t o = 0; o < 2; ++o) {
      const std::size_t a = q * 5 + 2 * o;
      want_vi.push_back(static_cast<std::int32_t>(v[a + 1] > v[a] ? a + 1 : a));
    }
  }
  for (std::size_t oh = 0; oh < 2; ++oh) {
    for (std::size_t ow = 0; ow < 2; ++ow) {
      std::size_t best = oh * 8 + ow * 2;
      for (std::size_t t : {oh * 8 + ow * 2 + 1, oh * 8 + ow * 2 + 4, oh * 8 + ow * 2 + 5})
        if (z[t] > z[best]) best = t;
      want_u[(best / 4) * 6 + best % 4] = z[best];
    }
  }
  const auto same = [](const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      if (std::isnan(want[k])) {
        EXPECT_TRUE(std::isnan(got[k])) << k;
      } else {
        EXPECT_EQ(got[k], want[k]) << k;
      }
    }
  };
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"v", v}, {"z", z}});
      same(cg.read(model->outputs[0]), want_y);
      EXPECT_EQ(cg.read_i32(model->outputs[1]), want_i);
      EXPECT_EQ(cg.read_i32(model->outputs[2]), want_ic);
      EXPECT_EQ(cg.read_i32(model->outputs[3]), want_vi);
      EXPECT_EQ(cg.read(model->outputs[4]), want_u);
    }
  }
  // MaxUnpool with fed positions: in range they land (the default output shape: 4 x 4); 16 and
  // -1 are FeedErrors naming the node.
  Builder fed(11);
  fed.input("y", {1, 1, 2, 2}).input("i", {1, 1, 2, 2}, 7).output("u", {1, 1, 4, 4});
  auto* fu = fed.node("MaxUnpool", {"y", "i"}, {"u"});
  fu->set_name("unpool");
  Builder::attr(fu, "kernel_shape", std::vector<std::int64_t>{2, 2});
  Builder::attr(fu, "strides", std::vector<std::int64_t>{2, 2});
  ho::Model mf = fed.import();
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = mf.compile(GraphCompiler(pc.make()));
    cg.run({{"y", std::vector<float>{1, 2, 3, 4}}, {"i", std::vector<std::int32_t>{5, 2, 8, 15}}});
    std::vector<float> want(16, 0.0f);
    want[5] = 1;
    want[2] = 2;
    want[8] = 3;
    want[15] = 4;
    EXPECT_EQ(cg.read(mf.outputs[0]), want);
    for (std::int32_t bad : {16, -1}) {
      const std::string e = error_of<FeedError>([&] {
        cg.run({{"y", std::vector<float>{1, 2, 3, 4}},
                {"i", std::vector<std::int32_t>{0, bad, 1, 2}}});
      });
      EXPECT_CONTAINS(e, "unpool/MaxUnpool/indices");
    }
  }
}

// ONNX's RoiAlign reference (avg mode), per sample point, for the test below.
std::vector<float> roi_align_reference(const std::vector<float>& x, int n_img, int ch, int h, int w,
                                       const std::vector<float>& rois,
                                       const std::vector<std::int32_t>& ids, int oh, int ow,
                                       int ratio, float scale, bool half_pixel) {
  (void)n_img;
  std::vector<float> out;
  const int r_count = static_cast<int>(ids.size());
  for (int r = 0; r < r_count; ++r) {
    const float off = half_pixel ? 0.5f : 0.0f;
    const float sw = rois[r * 4] * scale - off, sh = rois[r * 4 + 1] * scale - off;
    float rw = rois[r * 4 + 2] * scale - off - sw, rh = rois[r * 4 + 3] * scale - off - sh;
    if (!half_pixel) rw = std::max(rw, 1.0f), rh = std::max(rh, 1.0f);
    const float bh = rh / static_cast<float>(oh), bw = rw / static_cast<float>(ow);
    const int gh = ratio > 0 ? ratio : static_cast<int>(std::ceil(rh / static_cast<float>(oh)));
    const int gw = ratio > 0 ? ratio : static_cast<int>(std::ceil(rw / static_cast<float>(ow)));
    for (int c = 0; c < ch; ++c) {
      const float* img = x.data() + (ids[r] * ch + c) * h * w;
      for (int ph = 0; ph < oh; ++ph) {
        for (int pw = 0; pw < ow; ++pw) {
          double acc = 0;
          for (int iy = 0; iy < gh; ++iy) {
            float y = sh + ph * bh + (iy + 0.5f) * bh / static_cast<float>(gh);
            for (int ix = 0; ix < gw; ++ix) {
              float xx = sw + pw * bw + (ix + 0.5f) * bw / static_cast<float>(gw);
              if (y < -1.0f || y > h || xx < -1.0f || xx > w) continue;
              float yy = std::max(y, 0.0f), xc = std::max(xx, 0.0f);
              int yl = static_cast<int>(yy), xl = static_cast<int>(xc), yh, xh;
              if (yl >= h - 1)
                yh = yl = h - 1, yy = static_cast<float>(yl);
              else
                yh = yl + 1;
              if (xl >= w - 1)
                xh = xl = w - 1, xc = static_cast<float>(xl);
              else
                xh = xl + 1;
              const float ly = yy - yl, lx = xc - xl, hy = 1 - ly, hx = 1 - lx;
              acc += hy * hx * img[yl * w + xl] + hy * lx * img[yl * w + xh] +
                     ly * hx * img[yh * w + xl] + ly * lx * img[yh * w + xh];
            }
          }
          out.push_back(static_cast<float>(acc / (gh * gw)));
        }
      }
    }
  }
  return out;
}

// RoiAlign against ONNX's reference algorithm: rois reaching outside the image, both
// coordinate modes, a fixed sampling grid and the adaptive one (rois known at import); a batch
// index outside the images is a FeedError naming it.
TEST(OnnxImport, RoiAlignMatchesTheReference) {
  const int n = 2, ch = 2, h = 5, w = 6;
  std::vector<float> x(n * ch * h * w);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.7f) * 3;
  const std::vector<float> rois{0.5f, 1.0f, 4.0f, 3.5f, -2.0f, -1.5f,
                                3.0f, 2.0f, 3.0f, 2.5f, 7.5f,  6.5f};
  const std::vector<std::int32_t> ids{1, 0, 1}, bad_ids{1, 2, 0};
  for (bool half_pixel : {true, false}) {
    for (int ratio : {2, 0}) {
      SCOPED_TRACE(std::to_string(half_pixel) + " ratio " + std::to_string(ratio));
      Builder b(16);
      b.input("x", {n, ch, h, w}).input("ids", {3}, 7).output("y", {3, ch, 3, 2});
      if (ratio > 0)
        b.input("rois", {3, 4});
      else
        b.floats("rois", {3, 4}, rois);
      auto* r = b.node("RoiAlign", {"x", "rois", "ids"}, {"y"});
      Builder::attr(r, "output_height", std::int64_t{3});
      Builder::attr(r, "output_width", std::int64_t{2});
      Builder::attr(r, "sampling_ratio", std::int64_t{ratio});
      Builder::attr_f(r, "spatial_scale", 0.75f);
      Builder::attr(r, "coordinate_transformation_mode",
                    std::string(half_pixel ? "half_pixel" : "output_half_pixel"));
      const ho::Model m = b.import();  // (these rois' adaptive grids are all 1 x 2)
      const auto want =
          roi_align_reference(x, n, ch, h, w, rois, ids, 3, 2, ratio, 0.75f, half_pixel);
      for (const auto& pc : testing_util::platforms()) {
        SCOPED_TRACE(pc.name);
        CompiledGraph cg = m.compile(GraphCompiler(pc.make()));
        std::vector<FeedItem> feeds{{"x", x}, {"ids", ids}};
        if (ratio > 0) feeds.push_back({"rois", rois});
        cg.run(feeds);
        const auto got = cg.read(m.outputs[0]);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5) << k;
        if (ratio > 0) {
          feeds[1] = {"ids", bad_ids};
          EXPECT_CONTAINS(error_of<FeedError>([&] { cg.run(feeds); }), "batch_indices");
        }
      }
    }
  }
  // Adaptive grids of different sizes would need shapes per roi: refused, not approximated.
  Builder b(16);
  b.input("x", {n, ch, h, w}).input("ids", {2}, 7).output("y", {2, ch, 1, 1});
  b.floats("rois", {2, 4}, {0, 0, 1, 1, 0, 0, 4, 4});
  b.node("RoiAlign", {"x", "rois", "ids"}, {"y"});
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] { b.import(); }),
                  "#0 (RoiAlign-16): rois whose adaptive sampling grids differ");
}

// GridSample on x = [[1, 2, 3], [4, 5, 6]] at grid points inside, between pixels, half outside
// and far outside (reflected twice), in each padding mode, bilinear and nearest (half to even):
// against values worked out by hand from PyTorch's grid_sample, on every platform, exported and
// imported back; the gradient reaches the grid (a variable here). Bad grids and modes are
// errors naming the node.
TEST(OnnxImport, GridSampleInterpolatesAndPads) {
  Builder b(16);
  b.input("x", {1, 1, 2, 3}).floats("grid", {1, 1, 4, 2}, {0, 0, 1, 1, -1, -1, 3, 0});
  const char* modes[][2] = {{"bilinear", "zeros"},
                            {"bilinear", "border"},
                            {"bilinear", "reflection"},
                            {"nearest", "zeros"}};
  for (const auto& [mode, pad] : modes) {
    const std::string y = std::string(mode) + "_" + pad;
    b.output(y, {1, 1, 1, 4});
    auto* n = b.node("GridSample", {"x", "grid"}, {y});
    Builder::attr(n, "mode", std::string(mode));
    Builder::attr(n, "padding_mode", std::string(pad));
  }
  ho::Model m = b.import();
  ASSERT_EQ(m.variables.size(), 1u);
  ho::Model back = round_trip(m);
  const std::vector<std::vector<float>> want{
      {3.5f, 1.5f, 0.25f, 0.0f}, {3.5f, 6, 1, 4.5f}, {3.5f, 6, 1, 2.5f}, {2, 0, 1, 0}};
  const Node d_grid = gradients(reduce_sum(m.outputs[0]), {m.variables[0]})[0];
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    CompiledGraph cg = GraphCompiler(pc.make()).compile(
        m.graph, m.input_shapes, {m.outputs[0], m.outputs[1], m.outputs[2], m.outputs[3], d_grid});
    const std::vector<float> x{1, 2, 3, 4, 5, 6};
    cg.run({{"x", x}});
    for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(cg.read(m.outputs[k]), want[k]) << k;
    // At the first point: x = 1 + 1.5 gx (3 pixels) and y = 0.5 + gy (2 rows); the value
    // rises by 1 per pixel and by 3 per row.
    const std::vector<float> g = cg.read(d_grid);
    EXPECT_FLOAT_EQ(g[0], 1.5f);
    EXPECT_FLOAT_EQ(g[1], 3.0f);
    CompiledGraph again = back.compile(GraphCompiler(pc.make()));
    again.run({{"x", x}});
    for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(again.read(back.outputs[k]), want[k]) << k;
  }
  Builder bad(16);
  bad.input("x", {1, 1, 2, 3}).input("grid", {2, 1, 4, 2}).output("y", {1, 1, 1, 4});
  bad.node("GridSample", {"x", "grid"}, {"y"});
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad.import({.check = false}); }), "GridSample");
  Builder odd(16);
  odd.input("x", {1, 1, 2, 3}).input("grid", {1, 1, 4, 2}).output("y", {1, 1, 1, 4});
  Builder::attr(odd.node("GridSample", {"x", "grid"}, {"y"}), "mode", std::string("area"));
  EXPECT_CONTAINS(error_of<ShapeError>([&] { odd.import({.check = false}); }), "mode must be");
}

// Resize: nearest of int64 (gathers only: 2^24 + 1 stays exact), tf_crop_and_resize's
// extrapolation outside the region, exported and imported back; bad scales are errors.
TEST(OnnxImport, ResizeGathersAndWeighsEachAxis) {
  Builder b;
  b.input("i", {1, 1, 2, 2}, 7).input("x", {1, 1, 1, 4});
  b.output("up", {1, 1, 4, 6}, 7).output("crop", {1, 1, 1, 3});
  b.floats("scales", {4}, {1, 1, 2, 3}).floats("roi", {8}, {0, 0, 0, -0.5f, 1, 1, 1, 1.5f});
  b.ints("sizes", {1, 1, 1, 3});
  b.node("Resize", {"i", "", "scales"}, {"up"});
  auto* crop = b.node("Resize", {"x", "roi", "", "sizes"}, {"crop"});
  Builder::attr(crop, "mode", std::string("linear"));
  Builder::attr(crop, "coordinate_transformation_mode", std::string("tf_crop_and_resize"));
  Builder::attr_f(crop, "extrapolation_value", 10.0f);
  ho::Model m = b.import();
  ho::Model back = round_trip(m);
  const std::vector<std::int32_t> i{16777217, 2, 3, 4};
  std::vector<std::int32_t> up;
  for (int r = 0; r < 4; ++r)  // each element a 2 x 3 block
    for (int col = 0; col < 6; ++col)
      up.push_back(i[static_cast<std::size_t>(r / 2 * 2 + col / 3)]);
  for (const auto& pc : testing_util::platforms()) {
    SCOPED_TRACE(pc.name);
    for (ho::Model* model : {&m, &back}) {
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"i", i}, {"x", std::vector<float>{1, 2, 3, 4}}});
      EXPECT_EQ(cg.read_i32(model->outputs[0]), up);
      // source x = 3 o - 1.5: -1.5 and 4.5 fall outside [0, 3]; 1.5 is halfway from 2 to 3
      EXPECT_EQ(cg.read(model->outputs[1]), (std::vector<float>{10, 2.5f, 10}));
    }
  }
  auto bad = [](std::vector<float> scales, const std::string& mode) {
    Builder e;
    e.input("i", {1, 2}, 7).output("y", {1, 4}, 7);
    e.floats("s", {static_cast<std::int64_t>(scales.size())}, scales);
    Builder::attr(e.node("Resize", {"i", "", "s"}, {"y"}), "mode", mode);
    e.import();
  };
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad({1, 2, 2}, "nearest"); }), "scales must give 2");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    bad({1, -2}, "nearest");
                  }),
                  "scales must be positive");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { bad({1, INFINITY}, "nearest"); }), "and finite");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    bad({1, 1e12f}, "nearest");
                  }),
                  "an output dim of");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    bad({1, 0.25f}, "nearest");
                  }),
                  "an output dim of 0");
  EXPECT_CONTAINS(error_of<ho::UnsupportedError>([&] {
                    bad({1, 2}, "linear");
                  }),
                  "linear resizing of integers");
}

// GRU with linear_before_reset 1 (PyTorch's export) runs one recurrent product of the three
// gates on R itself (fixed between runs: the CPU keeps it packed), and 0 the spec's two; both
// equal a direct evaluation of ONNX's equations with biases and an initial state, on every
// platform, with the CPU's packed weights on and off.
TEST(OnnxImport, GruMatchesTheSpecWithEitherReset) {
  constexpr int kSeq = 5, kBatch = 2, kIn = 3, kH = 4;
  const auto x = testing_util::random_vec(kSeq * kBatch * kIn, 31);
  const auto W = testing_util::random_vec(3 * kH * kIn, 32),
             R = testing_util::random_vec(3 * kH * kH, 33);
  const auto B = testing_util::random_vec(6 * kH, 34),
             h0 = testing_util::random_vec(kBatch * kH, 35);
  for (const int lbr : {1, 0}) {
    SCOPED_TRACE("linear_before_reset " + std::to_string(lbr));
    // ONNX: z = s(Xt Wz + Ht-1 Rz + Wbz + Rbz), r likewise, h~ = tanh(Xt Wh + (r . (Ht-1 Rh +
    // Rbh)) + Wbh) with lbr 1, tanh(Xt Wh + (r . Ht-1) Rh + Rbh + Wbh) with 0; H = (1-z) h~ + z H.
    std::vector<double> h(h0.begin(), h0.end());
    std::vector<float> want;
    for (int t = 0; t < kSeq; ++t) {
      std::vector<double> next(kBatch * kH);
      for (int b = 0; b < kBatch; ++b) {
        auto xw = [&](int gate, int j) {
          double v = B[gate * kH + j];
          for (int k = 0; k < kIn; ++k)
            v += static_cast<double>(x[(t * kBatch + b) * kIn + k]) * W[(gate * kH + j) * kIn + k];
          return v;
        };
        auto hr = [&](const std::vector<double>& hv, int gate, int j) {
          double v = 0;
          for (int k = 0; k < kH; ++k) v += hv[b * kH + k] * R[(gate * kH + j) * kH + k];
          return v;
        };
        auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
        std::vector<double> z(kH), r(kH);
        for (int j = 0; j < kH; ++j) {
          z[j] = sig(xw(0, j) + hr(h, 0, j) + B[3 * kH + j]);
          r[j] = sig(xw(1, j) + hr(h, 1, j) + B[4 * kH + j]);
        }
        std::vector<double> rh(kBatch * kH, 0.0);
        for (int k = 0; k < kH; ++k) rh[b * kH + k] = r[k] * h[b * kH + k];
        for (int j = 0; j < kH; ++j) {
          const double cand = lbr ? std::tanh(xw(2, j) + r[j] * (hr(h, 2, j) + B[5 * kH + j]))
                                  : std::tanh(xw(2, j) + hr(rh, 2, j) + B[5 * kH + j]);
          next[b * kH + j] = (1 - z[j]) * cand + z[j] * h[b * kH + j];
        }
      }
      h = next;
    }
    for (double v : h) want.push_back(static_cast<float>(v));
    Builder bld;
    bld.input("x", {kSeq, kBatch, kIn}).input("h0", {1, kBatch, kH}).output("h", {1, kBatch, kH});
    bld.floats("W", {1, 3 * kH, kIn}, W)
        .floats("R", {1, 3 * kH, kH}, R)
        .floats("B", {1, 6 * kH}, B);
    auto* n = bld.node("GRU", {"x", "W", "R", "B", "", "h0"}, {"", "h"});
    Builder::attr(n, "hidden_size", std::int64_t{kH});
    Builder::attr(n, "linear_before_reset", std::int64_t{lbr});
    ho::Model m = bld.import();
    for (const auto& pc : testing_util::platforms()) {
      for (const bool packed : {true, false}) {
        SCOPED_TRACE(pc.name + (packed ? " packed" : ""));
        CompileOptions o;
        o.experimental.packed_weights = packed;
        CompiledGraph cg = m.compile(GraphCompiler(pc.make(), o));
        cg.run({{"x", x}, {"h0", h0}});
        const std::vector<float> got = cg.read(m.outputs[0]);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6) << i;
      }
    }
  }
}

// An imported LSTM (bidirectional, no initial state: its first step has no recurrent product,
// Y_c wanted) and a GRU (linear_before_reset, initial state) with a hidden size of whole
// panels: each direction's steps run as one lstm_sequence or gru_sequence node on the CPU
// (recurrent_sequences), the outputs those of the steps' nodes within float rounding.
TEST(OnnxImport, RecurrentDirectionsRunAsOneSequenceNodeEach) {
  constexpr int kSeq = 5, kBatch = 3, kIn = 8, kH = 16;
  for (const bool lstm : {true, false}) {
    SCOPED_TRACE(lstm ? "LSTM" : "GRU");
    const int gates = lstm ? 4 : 3, dirs = lstm ? 2 : 1;
    Builder b;
    b.input("x", {kSeq, kBatch, kIn}).output("y", {kSeq, dirs, kBatch, kH});
    b.output("h", {dirs, kBatch, kH});
    if (lstm) b.output("c", {dirs, kBatch, kH});
    b.floats("W", {dirs, gates * kH, kIn},
             testing_util::random_vec(dirs * gates * kH * kIn, 11, -0.5f, 0.5f));
    b.floats("R", {dirs, gates * kH, kH},
             testing_util::random_vec(dirs * gates * kH * kH, 12, -0.3f, 0.3f));
    b.floats("B", {dirs, 2 * gates * kH}, testing_util::random_vec(dirs * 2 * gates * kH, 13));
    ::onnx::NodeProto* n = nullptr;
    if (lstm) {
      n = b.node("LSTM", {"x", "W", "R", "B"}, {"y", "h", "c"});
      auto* a = n->add_attribute();
      a->set_name("direction");
      a->set_type(::onnx::AttributeProto::STRING);
      a->set_s("bidirectional");
    } else {
      b.floats("h0", {1, kBatch, kH}, testing_util::random_vec(kBatch * kH, 14));
      n = b.node("GRU", {"x", "W", "R", "B", "", "h0"}, {"y", "h"});
      Builder::attr(n, "linear_before_reset", std::int64_t{1});
    }
    Builder::attr(n, "hidden_size", std::int64_t{kH});
    ho::Model m = b.import();
    const std::vector<float> x = testing_util::random_vec(kSeq * kBatch * kIn, 15, -2, 2);
    std::vector<std::vector<float>> out[2];
    for (const bool on : {false, true}) {
      CompileOptions o;
      o.experimental.recurrent_sequences = on;
      CompiledGraph cg = m.compile(GraphCompiler(Platform::cpu(), o));
      int sequences = 0;
      for (const auto& node : detail::executable_of(cg).plan().nodes) {
        sequences += node.fused_into < 0 && (node.op == detail::OpKind::LstmSequence ||
                                             node.op == detail::OpKind::GruSequence);
      }
      EXPECT_EQ(sequences, on ? dirs : 0);
      cg.run({{"x", x}});
      for (const Node& y : m.outputs) out[on].push_back(cg.read(y));
    }
    for (std::size_t k = 0; k < out[0].size(); ++k) {
      ASSERT_EQ(out[1][k].size(), out[0][k].size());
      for (std::size_t i = 0; i < out[0][k].size(); ++i)
        EXPECT_NEAR(out[1][k][i], out[0][k][i], 2e-5) << "output " << k << ", element " << i;
    }
  }
}

TEST(OnnxImport, BidirectionalLstmDirectionsAreIndependentChains) {
  // Two directions, 6 steps: the graph is at least two wide, so parallel engines overlap them.
  Builder b;
  constexpr int kSeq = 6, kBatch = 2, kIn = 3, kH = 4;
  b.input("x", {kSeq, kBatch, kIn}).output("y", {kSeq, 2, kBatch, kH}).output("h", {2, kBatch, kH});
  b.floats("W", {2, 4 * kH, kIn}, testing_util::random_vec(2 * 4 * kH * kIn, 1));
  b.floats("R", {2, 4 * kH, kH}, testing_util::random_vec(2 * 4 * kH * kH, 2));
  auto* n = b.node("LSTM", {"x", "W", "R"}, {"y", "h"});
  auto* a = n->add_attribute();
  a->set_name("direction");
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s("bidirectional");
  Builder::attr(n, "hidden_size", std::int64_t{kH});
  ho::Model m = b.import();
  EXPECT_EQ(m.output_info[0].shape, (Shape{kSeq, 2, kBatch, kH}));
  CompiledGraph cg = m.compile(GraphCompiler(Platform::cpu(
      {.engine = CpuEngine::critical_path, .executors = 2, .threads_per_executor = 1})));
  EXPECT_GE(cg.engine_report().max_width, 2);
}

}  // namespace

namespace {

// 3-d images (NCDHW): Conv (groups, strides, dilations, asymmetric pads, bias), ConvTranspose
// (strides, pads, output padding, dilation) and MaxPool / AveragePool (with and without the
// padding counted) against direct loops over the definitions, on every platform, and
// exported (as the 2-d work they import to) and imported back.
using D5 = std::array<std::int64_t, 5>;
struct Win3 {
  std::array<std::int64_t, 3> k, s, d, pb, pe;
};
std::size_t at5(const D5& dims, std::int64_t n, std::int64_t c, std::int64_t z, std::int64_t h,
                std::int64_t w) {
  return static_cast<std::size_t>((((n * dims[1] + c) * dims[2] + z) * dims[3] + h) * dims[4] + w);
}
D5 window_out(const D5& dx, std::int64_t channels, const Win3& v) {
  D5 dy{dx[0], channels, 0, 0, 0};
  for (int i = 0; i < 3; ++i)
    dy[i + 2] = (dx[i + 2] + v.pb[i] + v.pe[i] - ((v.k[i] - 1) * v.d[i] + 1)) / v.s[i] + 1;
  return dy;
}
// Calls f(out index, input index or -1 for padding) for every tap of every window.
template <class F>
void each_tap(const D5& dx, const D5& dy, const Win3& v, F f) {
  for (std::int64_t n = 0; n < dy[0]; ++n)
    for (std::int64_t c = 0; c < dy[1]; ++c)
      for (std::int64_t z = 0; z < dy[2]; ++z)
        for (std::int64_t h = 0; h < dy[3]; ++h)
          for (std::int64_t w = 0; w < dy[4]; ++w)
            for (std::int64_t a = 0; a < v.k[0]; ++a)
              for (std::int64_t b = 0; b < v.k[1]; ++b)
                for (std::int64_t e = 0; e < v.k[2]; ++e) {
                  const std::int64_t iz = z * v.s[0] + a * v.d[0] - v.pb[0],
                                     ih = h * v.s[1] + b * v.d[1] - v.pb[1],
                                     iw = w * v.s[2] + e * v.d[2] - v.pb[2];
                  const bool in =
                      iz >= 0 && iz < dx[2] && ih >= 0 && ih < dx[3] && iw >= 0 && iw < dx[4];
                  f(at5(dy, n, c, z, h, w),
                    in ? static_cast<std::int64_t>(at5(dx, n, c, iz, ih, iw)) : -1);
                }
}
std::vector<std::int64_t> pads_of(const Win3& v) {
  return {v.pb[0], v.pb[1], v.pb[2], v.pe[0], v.pe[1], v.pe[2]};
}
std::vector<Dim> dims_of(const D5& d) {
  return {d[0], d[1], d[2], d[3], d[4]};
}

TEST(OnnxImport, ThreeDImagesConvolveAndPoolAsTheReference) {
  const D5 dx{2, 4, 5, 6, 7};
  const std::vector<float> x = testing_util::random_vec(2 * 4 * 5 * 6 * 7, 31);
  // Conv: 6 outputs, 2 groups, kernel 3x2x3.
  const Win3 cv{{3, 2, 3}, {2, 1, 2}, {2, 1, 1}, {1, 0, 1}, {1, 1, 0}};
  const D5 dwc{6, 2, 3, 2, 3};
  const std::vector<float> wc = testing_util::random_vec(6 * 2 * 3 * 2 * 3, 32),
                           bc = testing_util::random_vec(6, 33);
  const D5 dyc = window_out(dx, 6, cv);
  std::vector<float> yc(static_cast<std::size_t>(dyc[0] * dyc[1] * dyc[2] * dyc[3] * dyc[4]));
  for (std::int64_t n = 0; n < dyc[0]; ++n)
    for (std::int64_t oc = 0; oc < 6; ++oc)
      for (std::int64_t z = 0; z < dyc[2]; ++z)
        for (std::int64_t h = 0; h < dyc[3]; ++h)
          for (std::int64_t w = 0; w < dyc[4]; ++w) {
            double acc = bc[static_cast<std::size_t>(oc)];
            for (std::int64_t ic = 0; ic < 2; ++ic)
              for (std::int64_t a = 0; a < 3; ++a)
                for (std::int64_t b = 0; b < 2; ++b)
                  for (std::int64_t e = 0; e < 3; ++e) {
                    const std::int64_t iz = z * 2 + a * 2 - 1, ih = h + b, iw = w * 2 + e - 1;
                    if (iz < 0 || iz >= 5 || ih < 0 || ih >= 6 || iw < 0 || iw >= 7) continue;
                    acc += double{x[at5(dx, n, (oc / 3) * 2 + ic, iz, ih, iw)]} *
                           wc[at5(dwc, oc, ic, a, b, e)];
                  }
            yc[at5(dyc, n, oc, z, h, w)] = static_cast<float>(acc);
          }
  // ConvTranspose: 4 channels in, 3 out, kernel 3x2x2, stride 2x2x1, dilation 1x1x2.
  const D5 dxt{1, 4, 3, 4, 3}, dwt{4, 3, 3, 2, 2};
  const std::vector<float> xt = testing_util::random_vec(4 * 3 * 4 * 3, 34),
                           wt = testing_util::random_vec(4 * 3 * 3 * 2 * 2, 35),
                           bt = testing_util::random_vec(3, 36);
  const std::array<std::int64_t, 3> st{2, 2, 1}, dt{1, 1, 2}, pbt{1, 0, 0}, pet{0, 1, 0},
      opt{1, 0, 0};
  D5 dyt{1, 3, 0, 0, 0};
  for (int i = 0; i < 3; ++i)
    dyt[i + 2] = st[i] * (dxt[i + 2] - 1) + opt[i] + (dwt[i + 2] - 1) * dt[i] + 1 - pbt[i] - pet[i];
  std::vector<double> acc(static_cast<std::size_t>(3 * dyt[2] * dyt[3] * dyt[4]));
  for (std::int64_t c = 0; c < 4; ++c)
    for (std::int64_t z = 0; z < 3; ++z)
      for (std::int64_t h = 0; h < 4; ++h)
        for (std::int64_t w = 0; w < 3; ++w)
          for (std::int64_t o = 0; o < 3; ++o)
            for (std::int64_t a = 0; a < 3; ++a)
              for (std::int64_t b = 0; b < 2; ++b)
                for (std::int64_t e = 0; e < 2; ++e) {
                  const std::int64_t oz = z * 2 + a - 1, oh = h * 2 + b, ow = w + e * 2;
                  if (oz < 0 || oz >= dyt[2] || oh < 0 || oh >= dyt[3] || ow < 0 || ow >= dyt[4])
                    continue;
                  acc[at5(dyt, 0, o, oz, oh, ow)] +=
                      double{xt[at5(dxt, 0, c, z, h, w)]} * wt[at5(dwt, c, o, a, b, e)];
                }
  std::vector<float> yt(acc.size());
  for (std::size_t k = 0; k < acc.size(); ++k)
    yt[k] = static_cast<float>(acc[k] + bt[k / static_cast<std::size_t>(dyt[2] * dyt[3] * dyt[4])]);
  // Pooling.
  const Win3 mp{{2, 3, 2}, {2, 1, 2}, {1, 1, 2}, {1, 1, 0}, {0, 1, 1}};
  const Win3 ap{{3, 2, 2}, {1, 2, 2}, {1, 1, 1}, {1, 0, 1}, {1, 0, 0}};
  const D5 dym = window_out(dx, 4, mp), dya = window_out(dx, 4, ap);
  const auto count = [](const D5& d) {
    return static_cast<std::size_t>(d[0] * d[1] * d[2] * d[3] * d[4]);
  };
  std::vector<float> ym(count(dym), -INFINITY), ya(count(dya)), yai(count(dya));
  std::vector<int> seen(count(dya));
  each_tap(dx, dym, mp, [&](std::size_t o, std::int64_t i) {
    if (i >= 0) ym[o] = std::max(ym[o], x[static_cast<std::size_t>(i)]);
  });
  each_tap(dx, dya, ap, [&](std::size_t o, std::int64_t i) {
    if (i >= 0) {
      ya[o] += x[static_cast<std::size_t>(i)];
      ++seen[o];
    }
  });
  for (std::size_t o = 0; o < ya.size(); ++o) {
    yai[o] = ya[o] / 12.0f;  // the whole 3x2x2 window
    ya[o] /= static_cast<float>(seen[o]);
  }

  Builder b(11);
  b.input("x", dims_of(dx)).input("xt", dims_of(dxt));
  b.output("yc", dims_of(dyc)).output("yt", dims_of(dyt)).output("ym", dims_of(dym));
  b.output("ya", dims_of(dya)).output("yai", dims_of(dya));
  b.floats("wc", {6, 2, 3, 2, 3}, wc).floats("bc", {6}, bc);
  b.floats("wt", {4, 3, 3, 2, 2}, wt).floats("bt", {3}, bt);
  using I = std::vector<std::int64_t>;
  auto* conv = b.node("Conv", {"x", "wc", "bc"}, {"yc"});
  Builder::attr(conv, "group", std::int64_t{2});
  Builder::attr(conv, "strides", I{2, 1, 2});
  Builder::attr(conv, "dilations", I{2, 1, 1});
  Builder::attr(conv, "pads", pads_of(cv));
  auto* convt = b.node("ConvTranspose", {"xt", "wt", "bt"}, {"yt"});
  Builder::attr(convt, "strides", I{2, 2, 1});
  Builder::attr(convt, "dilations", I{1, 1, 2});
  Builder::attr(convt, "pads", I{1, 0, 0, 0, 1, 0});
  Builder::attr(convt, "output_padding", I{1, 0, 0});
  auto* maxp = b.node("MaxPool", {"x"}, {"ym"});
  Builder::attr(maxp, "kernel_shape", I{2, 3, 2});
  Builder::attr(maxp, "strides", I{2, 1, 2});
  Builder::attr(maxp, "dilations", I{1, 1, 2});
  Builder::attr(maxp, "pads", pads_of(mp));
  for (int include : {0, 1}) {
    auto* avg = b.node("AveragePool", {"x"}, {include ? "yai" : "ya"});
    Builder::attr(avg, "kernel_shape", I{3, 2, 2});
    Builder::attr(avg, "strides", I{1, 2, 2});
    Builder::attr(avg, "pads", pads_of(ap));
    Builder::attr(avg, "count_include_pad", std::int64_t{include});
  }
  const ho::Model m = b.import();
  const ho::Model back = round_trip(m);
  const auto close = [](const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k)
      ASSERT_NEAR(got[k], want[k], 1e-4f * (1.0f + std::fabs(want[k]))) << k;
  };
  for (const auto& pc : testing_util::platforms()) {
    for (const ho::Model* model : {&m, &back}) {
      SCOPED_TRACE(pc.name + (model == &m ? "" : ", exported and imported back"));
      CompiledGraph cg = model->compile(GraphCompiler(pc.make()));
      cg.run({{"x", x}, {"xt", xt}});
      close(cg.read("yc"), yc);
      close(cg.read("yt"), yt);
      close(cg.read("ym"), ym);
      close(cg.read("ya"), ya);
      close(cg.read("yai"), yai);
      EXPECT_EQ(cg.shape("yt"), Shape(std::span<const std::int64_t>(dyt)));
    }
  }
}

}  // namespace
