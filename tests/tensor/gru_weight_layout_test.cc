// The map from Tern's GRU parameters to cuDNN's weight space (tensor/gru_weight_layout.h), as pure
// functions on the host: every block lands where the layout says and comes back, the recurrent
// biases are zeros, and the packed weights put through cuDNN's formula give Tern's GRU.
#include "tensor/gru_weight_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace tern {
namespace {

struct TernWeights {
  int64_t in, d;
  std::vector<float> w, wx, u, ux, b, bx;  // (in, 2d), (in, d), (d, 2d), (d, d), (2d), (d)
  explicit TernWeights(int64_t in_, int64_t d_, uint32_t seed) : in(in_), d(d_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, 0.5f);
    auto fill = [&](std::vector<float>& v, int64_t n) {
      v.resize(n);
      for (float& x : v) x = dist(rng);
    };
    fill(w, in * 2 * d);
    fill(wx, in * d);
    fill(u, d * 2 * d);
    fill(ux, d * d);
    fill(b, 2 * d);
    fill(bx, d);
  }
  void Sources(const float* out[kGruSourceCount]) const {
    out[kGruW] = w.data();
    out[kGruWx] = wx.data();
    out[kGruU] = u.data();
    out[kGruUx] = ux.data();
    out[kGruB] = b.data();
    out[kGruBx] = bx.data();
    out[kGruZero] = nullptr;
  }
};

double Sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

TEST(GruWeightLayoutTest, TheCanonicalLayoutTilesItsSpace) {
  for (int dirs : {1, 2}) {
    const GruWeightLayout l = CanonicalGruWeightLayout(5, 3, dirs);
    EXPECT_EQ(l.size, dirs * (3 * 3 * 5 + 3 * 3 * 3 + 6 * 3));
    std::vector<int> covered(l.size, 0);
    for (const GruPackSegment& s : GruPackSegments(l))
      for (int64_t i = 0; i < s.rows * s.cols; ++i) ++covered[s.offset + i];
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }))
        << "every element of the space in exactly one block";
  }
}

TEST(GruWeightLayoutTest, PackingAndUnpackingRoundTripInAnyLayout) {
  // The CUDA path takes cuDNN's offsets as they come: a layout in another block order (here
  // reversed, with gaps) packs and unpacks the same.
  const int64_t in = 4, d = 3;
  GruWeightLayout shuffled = CanonicalGruWeightLayout(in, d, 2);
  int64_t at = 7;
  for (int dir = 1; dir >= 0; --dir)
    for (int id = 5; id >= 0; --id) {
      shuffled.bias[dir][id] = at;
      at += d + 1;
      shuffled.matrix[dir][id] = at;
      at += d * (id < 3 ? in : d) + 2;
    }
  shuffled.size = at;
  for (const GruWeightLayout& layout : {CanonicalGruWeightLayout(in, d, 2), shuffled}) {
    const TernWeights fw(in, d, 1), bw(in, d, 2);
    const float* sources[2][kGruSourceCount];
    fw.Sources(sources[0]);
    bw.Sources(sources[1]);
    const std::vector<GruPackSegment> segments = GruPackSegments(layout);
    std::vector<float> space(layout.size, 99.f);
    PackGruWeights(segments, sources, space.data());
    // W_r[j][k] = W[k][j], W_z[j][k] = W[k][d + j], W_n = Wx^T; R likewise from U, Ux.
    for (int64_t j = 0; j < d; ++j)
      for (int64_t k = 0; k < in; ++k) {
        EXPECT_EQ(space[layout.matrix[1][0] + j * in + k], bw.w[k * 2 * d + j]);
        EXPECT_EQ(space[layout.matrix[1][1] + j * in + k], bw.w[k * 2 * d + d + j]);
        EXPECT_EQ(space[layout.matrix[0][2] + j * in + k], fw.wx[k * d + j]);
      }
    for (int64_t j = 0; j < d; ++j) {
      EXPECT_EQ(space[layout.matrix[0][4] + j * d + 1], fw.u[1 * 2 * d + d + j]);
      EXPECT_EQ(space[layout.bias[0][1] + j], fw.b[d + j]);
      EXPECT_EQ(space[layout.bias[1][2] + j], bw.bx[j]);
      for (int id = 3; id < 6; ++id) EXPECT_EQ(space[layout.bias[0][id] + j], 0.f);
    }
    // Unpacking adds each block back into its parameter's gradient: twice the weights from a
    // gradient that held them already; the zero blocks go nowhere.
    TernWeights grads[2] = {fw, bw};
    float* targets[2][kGruSourceCount];
    for (int k = 0; k < 2; ++k) {
      targets[k][kGruW] = grads[k].w.data();
      targets[k][kGruWx] = grads[k].wx.data();
      targets[k][kGruU] = grads[k].u.data();
      targets[k][kGruUx] = grads[k].ux.data();
      targets[k][kGruB] = grads[k].b.data();
      targets[k][kGruBx] = grads[k].bx.data();
      targets[k][kGruZero] = nullptr;
    }
    UnpackGruWeightGrads(segments, space.data(), targets);
    for (int k = 0; k < 2; ++k) {
      const TernWeights& original = k == 0 ? fw : bw;
      for (size_t i = 0; i < original.w.size(); ++i) EXPECT_EQ(grads[k].w[i], 2 * original.w[i]);
      for (size_t i = 0; i < original.ux.size(); ++i) EXPECT_EQ(grads[k].ux[i], 2 * original.ux[i]);
      for (size_t i = 0; i < original.bx.size(); ++i) EXPECT_EQ(grads[k].bx[i], 2 * original.bx[i]);
    }
  }
}

TEST(GruWeightLayoutTest, CudnnsFormulaOnThePackedWeightsIsTernsGru) {
  // One step from a random state: cuDNN's GRU (gate order reset, update, new; (hidden, input)
  // matrices; two biases per gate) over the packed space against models/rnn_layers.h's formula
  // over Tern's parameters.
  const int64_t in = 5, d = 4;
  const TernWeights p(in, d, 7);
  const GruWeightLayout layout = CanonicalGruWeightLayout(in, d, 1);
  const float* sources[2][kGruSourceCount] = {};
  p.Sources(sources[0]);
  std::vector<float> space(layout.size);
  PackGruWeights(GruPackSegments(layout), sources, space.data());
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<double> x(in), s(d);
  for (double& v : x) v = dist(rng);
  for (double& v : s) v = dist(rng);
  for (int64_t j = 0; j < d; ++j) {
    // cuDNN's, from the space.
    double a[3], rec[3];
    for (int g = 0; g < 3; ++g) {
      a[g] = space[layout.bias[0][g] + j];
      rec[g] = space[layout.bias[0][3 + g] + j];
      for (int64_t k = 0; k < in; ++k) a[g] += space[layout.matrix[0][g] + j * in + k] * x[k];
      for (int64_t k = 0; k < d; ++k) rec[g] += space[layout.matrix[0][3 + g] + j * d + k] * s[k];
    }
    const double r = Sigmoid(a[0] + rec[0]), z = Sigmoid(a[1] + rec[1]);
    const double n = std::tanh(a[2] + r * rec[2]);
    const double cudnn = (1 - z) * n + z * s[j];
    // Tern's: r, z = sigmoid(x W + b + s U); h = tanh(x Wx + bx + r (s Ux)); s' = z s + (1 - z) h.
    double xw_r = p.b[j], xw_z = p.b[d + j], su_r = 0, su_z = 0, xwx = p.bx[j], sux = 0;
    for (int64_t k = 0; k < in; ++k) {
      xw_r += x[k] * p.w[k * 2 * d + j];
      xw_z += x[k] * p.w[k * 2 * d + d + j];
      xwx += x[k] * p.wx[k * d + j];
    }
    for (int64_t k = 0; k < d; ++k) {
      su_r += s[k] * p.u[k * 2 * d + j];
      su_z += s[k] * p.u[k * 2 * d + d + j];
      sux += s[k] * p.ux[k * d + j];
    }
    const double tr = Sigmoid(xw_r + su_r), tz = Sigmoid(xw_z + su_z);
    const double h = std::tanh(xwx + tr * sux);
    const double tern = tz * s[j] + (1 - tz) * h;
    EXPECT_NEAR(cudnn, tern, 1e-6) << "unit " << j;
  }
}

}  // namespace
}  // namespace tern
