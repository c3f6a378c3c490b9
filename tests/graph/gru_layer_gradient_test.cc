// graph::GruLayer (a whole GRU layer as one op: cuDNN's on a GPU, the host reference of
// tensor/cpu/gru_layer.cc here) against a double-precision GRU over the masked sequence, forward
// and every input's gradient, one and two directions, with and without padding. Where a GPU with
// cuDNN is visible CheckGradients builds the same graph there too (cuDNN against the CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/graph/gradient_check.h"

namespace tern::graph::testing {
namespace {

// models/rnn_layers.h's GRU over x (len, batch, in) with each direction's w, wx, u, ux, b, bx at
// p[1 + 6 k ...]: column b runs steps[b] positions; a padded position repeats the left-to-right
// state and keeps the right-to-left one at 0.
Vec LayerReference(const std::vector<Vec>& p, int64_t len, int64_t batch, int64_t in, int64_t d,
                   int dirs, const std::vector<int32_t>& steps) {
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  const int64_t width = dirs * d;
  Vec y(len * batch * width, 0.0);
  for (int k = 0; k < dirs; ++k) {
    const Vec &w = p[1 + 6 * k], &wx = p[2 + 6 * k], &u = p[3 + 6 * k], &ux = p[4 + 6 * k];
    const Vec &b = p[5 + 6 * k], &bx = p[6 + 6 * k];
    for (int64_t col = 0; col < batch; ++col) {
      Vec s(d, 0.0), next(d);
      for (int64_t i = 0; i < steps[col]; ++i) {
        const int64_t t = k == 0 ? i : steps[col] - 1 - i;
        const double* x = &p[0][(t * batch + col) * in];
        for (int64_t j = 0; j < d; ++j) {
          double ar = b[j], az = b[d + j], ah = bx[j], ur = 0, uz = 0, uh = 0;
          for (int64_t e = 0; e < in; ++e) {
            ar += x[e] * w[e * 2 * d + j];
            az += x[e] * w[e * 2 * d + d + j];
            ah += x[e] * wx[e * d + j];
          }
          for (int64_t e = 0; e < d; ++e) {
            ur += s[e] * u[e * 2 * d + j];
            uz += s[e] * u[e * 2 * d + d + j];
            uh += s[e] * ux[e * d + j];
          }
          const double r = sigmoid(ar + ur), z = sigmoid(az + uz), h = std::tanh(ah + r * uh);
          next[j] = z * s[j] + (1 - z) * h;
        }
        s = next;
        for (int64_t j = 0; j < d; ++j) y[(t * batch + col) * width + k * d + j] = s[j];
      }
      if (k == 0)
        for (int64_t t = steps[col]; t < len; ++t)
          for (int64_t j = 0; j < d; ++j) y[(t * batch + col) * width + j] = s[j];
    }
  }
  return y;
}

TEST(GruLayerGradientTest, OneOpGivesTheMaskedStepsFunctionAndGradients) {
  ScopedGruLayerMode reference(GruLayerMode::kReference);
  if (CudaAvailable() && !WholeGruLayers(Device::kCuda))
    GTEST_SKIP() << "a GPU without cuDNN: no whole GRU layer to compare there";
  const int64_t len = 4, batch = 3, in = 3, d = 2;
  for (int dirs : {1, 2}) {
    for (bool masked : {false, true}) {
      const std::vector<int32_t> steps =
          masked ? std::vector<int32_t>{4, 2, 1} : std::vector<int32_t>(batch, len);
      Tensor mask, lengths;
      if (masked) {
        std::vector<float> m(len * batch);
        for (int64_t t = 0; t < len; ++t)
          for (int64_t b = 0; b < batch; ++b) m[t * batch + b] = t < steps[b] ? 1.f : 0.f;
        mask = Tensor::FromVector({len, batch}, m);
        lengths = Tensor::FromInts({batch}, steps);
      }
      std::vector<Shape> shapes = {{len, batch, in}};
      for (int k = 0; k < dirs; ++k)
        for (const Shape& s :
             {Shape{in, 2 * d}, Shape{in, d}, Shape{d, 2 * d}, Shape{d, d}, Shape{2 * d}, Shape{d}})
          shapes.push_back(s);
      SCOPED_TRACE(::testing::Message()
                   << dirs << " direction(s), " << (masked ? "" : "not ") << "masked");
      CheckGradients(
          shapes,
          [&](Graph& g, const std::vector<Var>& p) {
            std::vector<GruLayerParams> directions;
            for (int k = 0; k < dirs; ++k) {
              const Var* q = &p[1 + 6 * k];
              directions.push_back({q[0], q[1], q[2], q[3], q[4], q[5]});
            }
            return GruLayer(p[0], directions, OnDevice(g, mask), lengths);
          },
          [&](const std::vector<Vec>& p) {
            return LayerReference(p, len, batch, in, d, dirs, steps);
          },
          {.init_std = 0.5f});
    }
  }
}

}  // namespace
}  // namespace tern::graph::testing
