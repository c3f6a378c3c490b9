// Every differentiable op of graph/ against finite differences of a double-precision reference.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "gradient_check.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tern::graph::testing {
namespace {

// Reference matrix product: a (m,k) or (k,m)^T, b likewise; returns (m,n) row-major.
Vec RefMatMul(const Vec& a, const Vec& b, int m, int k, int n, bool ta, bool tb, double alpha) {
  Vec c(m * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p)
        s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = alpha * s;
    }
  return c;
}

TEST(OpsGradientTest, MatMulEveryTranspose) {
  const int m = 3, k = 4, n = 5;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CheckGradients(
          {ta ? Shape{k, m} : Shape{m, k}, tb ? Shape{n, k} : Shape{k, n}},
          [&](Graph&, const std::vector<Var>& in) { return MatMul(in[0], in[1], ta, tb, 0.5f); },
          [&](const std::vector<Vec>& x) { return RefMatMul(x[0], x[1], m, k, n, ta, tb, 0.5); });
    }
}

TEST(OpsGradientTest, BatchedMatMul) {
  const int b = 2, m = 3, k = 4, n = 2;
  for (bool tb : {false, true}) {
    CheckGradients(
        {{b, m, k}, tb ? Shape{b, n, k} : Shape{b, k, n}},
        [&](Graph&, const std::vector<Var>& in) { return MatMul(in[0], in[1], false, tb); },
        [&](const std::vector<Vec>& x) {
          Vec out;
          for (int i = 0; i < b; ++i) {
            Vec a(x[0].begin() + i * m * k, x[0].begin() + (i + 1) * m * k);
            Vec bb(x[1].begin() + i * k * n, x[1].begin() + (i + 1) * k * n);
            Vec c = RefMatMul(a, bb, m, k, n, false, tb, 1.0);
            out.insert(out.end(), c.begin(), c.end());
          }
          return out;
        });
  }
}

TEST(OpsGradientTest, LinearWithAndWithoutBiasOnRank3Input) {
  const int b = 2, t = 3, din = 4, dout = 3;
  CheckGradients(
      {{b, t, din}, {din, dout}, {dout}},
      [](Graph&, const std::vector<Var>& in) { return Linear(in[0], in[1], in[2]); },
      [&](const std::vector<Vec>& x) {
        Vec y = RefMatMul(x[0], x[1], b * t, din, dout, false, false, 1.0);
        for (int r = 0; r < b * t; ++r)
          for (int j = 0; j < dout; ++j) y[r * dout + j] += x[2][j];
        return y;
      });
  CheckGradients(
      {{b * t, din}, {din, dout}},
      [](Graph&, const std::vector<Var>& in) { return Linear(in[0], in[1], Var()); },
      [&](const std::vector<Vec>& x) {
        return RefMatMul(x[0], x[1], b * t, din, dout, false, false, 1.0);
      });
}

TEST(OpsGradientTest, LinearWithTransposedWeight) {
  const int rows = 3, din = 4, dout = 5;
  CheckGradients(
      {{rows, din}, {dout, din}, {dout}},
      [](Graph&, const std::vector<Var>& in) {
        return Linear(in[0], in[1], in[2], /*trans_w=*/true);
      },
      [&](const std::vector<Vec>& x) {
        Vec y = RefMatMul(x[0], x[1], rows, din, dout, false, true, 1.0);
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < dout; ++j) y[r * dout + j] += x[2][j];
        return y;
      });
}

TEST(OpsGradientTest, LinearWithReluWithAndWithoutBias) {
  const int rows = 5, din = 4, dout = 6;
  for (bool bias : {true, false}) {
    CheckGradients(
        bias ? std::vector<Shape>{{rows, din}, {din, dout}, {dout}}
             : std::vector<Shape>{{rows, din}, {din, dout}},
        [&](Graph&, const std::vector<Var>& in) {
          return Linear(in[0], in[1], bias ? in[2] : Var(), /*trans_w=*/false, /*relu=*/true);
        },
        [&](const std::vector<Vec>& x) {
          Vec y = RefMatMul(x[0], x[1], rows, din, dout, false, false, 1.0);
          for (int r = 0; r < rows; ++r)
            for (int j = 0; j < dout; ++j)
              y[r * dout + j] = std::max(0.0, y[r * dout + j] + (bias ? x[2][j] : 0.0));
          return y;
        });
  }
}

// y = build(every parameter of store) on a training graph (seed 9), then backward from
// sum(y^2): y's values and the parameters' gradients, for holding a fused op to its parts.
struct ValuesAndGrads {
  std::vector<float> values, grads;
};
ValuesAndGrads RunOnce(ParamStore& store,
                       const std::function<Var(const std::vector<Var>&)>& build) {
  store.ZeroGrads();
  Arena arena;
  Graph g(&arena, /*training=*/true, /*seed=*/9);
  std::vector<Var> params;
  for (int i = 0; i < store.size(); ++i) params.push_back(g.Param(store, i));
  Var y = build(params);
  g.Backward(Sum(Mul(y, y)));
  return {y.value().ToVector(), store.grads_flat().ToVector()};
}

// The ReLU in Linear's pass (a feed-forward layer's first product) gives the bits of Linear, then
// Relu, forward and backward.
TEST(OpsGradientTest, LinearWithReluIsLinearThenReluBitForBit) {
  ParamStore store;
  store.Add("x", {7, 8}, Init::kNormal);
  store.Add("w", {8, 9}, Init::kNormal);
  store.Add("b", {9}, Init::kNormal);
  store.Finalize(Device::kCpu, 3);
  const ValuesAndGrads parts =
      RunOnce(store, [](const std::vector<Var>& p) { return Relu(Linear(p[0], p[1], p[2])); });
  const ValuesAndGrads fused = RunOnce(store, [](const std::vector<Var>& p) {
    return Linear(p[0], p[1], p[2], /*trans_w=*/false, /*relu=*/true);
  });
  EXPECT_EQ(fused.values, parts.values);
  EXPECT_EQ(fused.grads, parts.grads);
  int zeros = 0;
  for (float v : fused.values) zeros += v == 0.f;
  EXPECT_GT(zeros, 0) << "no unit cut by the ReLU: the test would not see its backward";
}

TEST(OpsGradientTest, AddMulScaleReshape) {
  CheckGradients(
      {{3, 4}, {3, 4}}, [](Graph&, const std::vector<Var>& in) { return Add(in[0], in[1]); },
      [](const std::vector<Vec>& x) {
        Vec y(12);
        for (int i = 0; i < 12; ++i) y[i] = x[0][i] + x[1][i];
        return y;
      });
  CheckGradients(
      {{3, 4}, {3, 4}}, [](Graph&, const std::vector<Var>& in) { return Mul(in[0], in[1]); },
      [](const std::vector<Vec>& x) {
        Vec y(12);
        for (int i = 0; i < 12; ++i) y[i] = x[0][i] * x[1][i];
        return y;
      });
  CheckGradients(
      {{3, 4}},
      [](Graph&, const std::vector<Var>& in) {
        return Scale(Reshape(in[0], {2, 6}), -1.5f);
      },
      [](const std::vector<Vec>& x) {
        Vec y(12);
        for (int i = 0; i < 12; ++i) y[i] = -1.5 * x[0][i];
        return y;
      });
}

TEST(OpsGradientTest, Activations) {
  auto check = [](auto op, auto f) {
    CheckGradients(
        {{5, 7}}, [&](Graph&, const std::vector<Var>& in) { return op(in[0]); },
        [&](const std::vector<Vec>& x) {
          Vec y(x[0].size());
          for (size_t i = 0; i < y.size(); ++i) y[i] = f(x[0][i]);
          return y;
        });
  };
  check([](Var v) { return Relu(v); }, [](double v) { return v > 0 ? v : 0; });
  check([](Var v) { return Tanh(v); }, [](double v) { return std::tanh(v); });
  check([](Var v) { return Sigmoid(v); }, [](double v) { return 1 / (1 + std::exp(-v)); });
  check([](Var v) { return Swish(v); }, [](double v) { return v / (1 + std::exp(-v)); });
  check([](Var v) { return Gelu(v); },
        [](double v) {
          return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        });
}

TEST(OpsGradientTest, DropoutScalesKeptUnitsAndIsIdentityAtInference) {
  ParamStore store;
  store.Add("x", {1000}, Init::kOnes);
  store.Finalize(Device::kCpu, 1);
  Arena arena;
  Graph g(&arena, /*training=*/true, /*seed=*/5);
  Var x = g.Param(store, 0);
  Var y = Dropout(x, 0.25f);
  g.Backward(Sum(y));
  int kept = 0;
  for (int i = 0; i < 1000; ++i) {
    float v = y.value().at(i);
    ASSERT_TRUE(v == 0.f || std::abs(v - 1 / 0.75f) < 1e-6);
    EXPECT_EQ(store.grad(0).at(i), v);  // d(sum)/dx = mask
    kept += v != 0.f;
  }
  EXPECT_NEAR(kept, 750, 60);
  Graph eval(&arena, /*training=*/false);
  Var x2 = eval.Param(store, 0);
  EXPECT_EQ(Dropout(x2, 0.25f).id(), x2.id());
}

// A sublayer's dropout and residual connection in one pass: the bits of Add(x, Dropout(f)),
// values and gradients, and Add itself at inference.
TEST(OpsGradientTest, DropoutAddIsAddOfDropoutBitForBit) {
  ParamStore store;
  store.Add("x", {6, 50}, Init::kNormal);
  store.Add("f", {6, 50}, Init::kNormal);
  store.Finalize(Device::kCpu, 4);
  const ValuesAndGrads parts =
      RunOnce(store, [](const std::vector<Var>& p) { return Add(p[0], Dropout(p[1], 0.3f)); });
  const ValuesAndGrads fused =
      RunOnce(store, [](const std::vector<Var>& p) { return DropoutAdd(p[0], p[1], 0.3f); });
  EXPECT_EQ(fused.values, parts.values);
  EXPECT_EQ(fused.grads, parts.grads);
  int dropped = 0;
  for (int i = 0; i < 300; ++i) dropped += fused.grads[300 + i] == 0.f;
  EXPECT_GT(dropped, 30) << "f's gradient must be cut where its units were dropped";
  Arena arena;
  Graph eval(&arena, /*training=*/false);
  Var x = eval.Param(store, 0), f = eval.Param(store, 1);
  EXPECT_EQ(DropoutAdd(x, f, 0.3f).value().ToVector(), Add(x, f).value().ToVector());
}

Vec RefLayerNorm(const std::vector<Vec>& x, int rows, int n, double eps) {
  Vec y(rows * n);
  for (int r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int i = 0; i < n; ++i) mu += x[0][r * n + i] / n;
    for (int i = 0; i < n; ++i) var += std::pow(x[0][r * n + i] - mu, 2) / n;
    for (int i = 0; i < n; ++i)
      y[r * n + i] = (x[0][r * n + i] - mu) / std::sqrt(var + eps) * x[1][i] + x[2][i];
  }
  return y;
}

TEST(OpsGradientTest, LayerNorm) {
  CheckGradients(
      {{2, 3, 6}, {6}, {6}},
      [](Graph&, const std::vector<Var>& in) { return LayerNorm(in[0], in[1], in[2], 1e-6f); },
      [](const std::vector<Vec>& x) { return RefLayerNorm(x, 6, 6, 1e-6); });
}

TEST(OpsGradientTest, SoftmaxPlainMaskedAndCausal) {
  CheckGradients(
      {{4, 5}}, [](Graph&, const std::vector<Var>& in) { return Softmax(in[0]); },
      [](const std::vector<Vec>& x) {
        Vec y(20);
        for (int r = 0; r < 4; ++r) {
          double z = 0;
          for (int k = 0; k < 5; ++k) z += std::exp(x[0][r * 5 + k]);
          for (int k = 0; k < 5; ++k) y[r * 5 + k] = std::exp(x[0][r * 5 + k]) / z;
        }
        return y;
      });
  // (batch 2, heads 2, tq 3, tk 3), batch 1 has its last key masked, causal, scale 0.5.
  Tensor mask = Tensor::FromVector({2, 3}, {1, 1, 1, 1, 1, 0});
  CheckGradients(
      {{2, 2, 3, 3}},
      [&](Graph& g, const std::vector<Var>& in) {
        return Softmax(in[0], OnDevice(g, mask), /*causal=*/true, 0.5f);
      },
      [&](const std::vector<Vec>& x) {
        Vec y(36, 0.0);
        for (int r = 0; r < 12; ++r) {
          int b = r / 6, q = r % 3;
          double z = 0;
          for (int k = 0; k <= q; ++k)
            if (mask.at(b * 3 + k) != 0) z += std::exp(0.5 * x[0][r * 3 + k]);
          for (int k = 0; k <= q; ++k)
            if (mask.at(b * 3 + k) != 0) y[r * 3 + k] = std::exp(0.5 * x[0][r * 3 + k]) / z;
        }
        return y;
      });
}

TEST(OpsGradientTest, SplitAndMergeHeads) {
  const int b = 2, t = 3, h = 2, dk = 2;
  CheckGradients(
      {{b, t, h * dk}}, [](Graph&, const std::vector<Var>& in) { return SplitHeads(in[0], 2); },
      [&](const std::vector<Vec>& x) {
        Vec y(b * t * h * dk);
        for (int ib = 0; ib < b; ++ib)
          for (int it = 0; it < t; ++it)
            for (int ih = 0; ih < h; ++ih)
              for (int d = 0; d < dk; ++d)
                y[((ib * h + ih) * t + it) * dk + d] = x[0][((ib * t + it) * h + ih) * dk + d];
        return y;
      });
  CheckGradients(
      {{b * h, t, dk}}, [](Graph&, const std::vector<Var>& in) { return MergeHeads(in[0], 2); },
      [&](const std::vector<Vec>& x) {
        Vec y(b * t * h * dk);
        for (int ib = 0; ib < b; ++ib)
          for (int it = 0; it < t; ++it)
            for (int ih = 0; ih < h; ++ih)
              for (int d = 0; d < dk; ++d)
                y[((ib * t + it) * h + ih) * dk + d] = x[0][((ib * h + ih) * t + it) * dk + d];
        return y;
      });
}

TEST(OpsGradientTest, EmbeddingWithRepeatedIds) {
  Tensor ids = Tensor::FromInts({2, 3}, {4, 0, 4, 2, 2, 1});
  CheckGradients(
      {{5, 3}},
      [&](Graph& g, const std::vector<Var>& in) { return Embedding(in[0], OnDevice(g, ids), 2.f); },
      [&](const std::vector<Vec>& x) {
        Vec y;
        for (int r = 0; r < 6; ++r)
          for (int d = 0; d < 3; ++d) y.push_back(2.0 * x[0][ids.i32()[r] * 3 + d]);
        return y;
      });
}

TEST(OpsGradientTest, CrossEntropyWithSmoothingAndIgnoredRows) {
  const int rows = 4, v = 6;
  Tensor targets = Tensor::FromInts({rows}, {3, 0, 5, 1});  // row 1 ignored (id 0)
  CheckGradients(
      {{2, 2, v}},
      [&](Graph& g, const std::vector<Var>& in) {
        return CrossEntropy(in[0], OnDevice(g, targets), 0.1f, 0);
      },
      [&](const std::vector<Vec>& x) {
        Vec loss(rows, 0.0);
        for (int r = 0; r < rows; ++r) {
          int t = targets.i32()[r];
          if (t == 0) continue;
          double z = 0;
          for (int k = 0; k < v; ++k) z += std::exp(x[0][r * v + k]);
          double lz = std::log(z), mean = 0;
          for (int k = 0; k < v; ++k) mean += (lz - x[0][r * v + k]) / v;
          loss[r] = 0.9 * (lz - x[0][r * v + t]) + 0.1 * mean;
        }
        return loss;
      });
}

TEST(OpsGradientTest, SumReducesToAScalar) {
  CheckGradients(
      {{3, 5}}, [](Graph&, const std::vector<Var>& in) { return Sum(in[0]); },
      [](const std::vector<Vec>& x) {
        double s = 0;
        for (double v : x[0]) s += v;
        return Vec{s};
      });
}

// Where a GPU is visible every check above also ran the graph there (gradient_check.cc's
// CompareOnGpu); this says so in the test log.
TEST(OpsGradientTest, OnAGpuTheSameGraphGivesTheCpusValuesAndGradients) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const int before = GpuComparisons();
  CheckGradients(
      {{3, 4}, {4, 5}}, [](Graph&, const std::vector<Var>& in) { return MatMul(in[0], in[1]); },
      [](const std::vector<Vec>& x) { return RefMatMul(x[0], x[1], 3, 4, 5, false, false, 1.0); });
  EXPECT_EQ(GpuComparisons(), before + 1);
}

TEST(OpsGradientTest, GradientsAccumulateOverSharedInputs) {
  // y = x @ x^T uses x twice: both paths must add up.
  CheckGradients(
      {{3, 4}},
      [](Graph&, const std::vector<Var>& in) { return MatMul(in[0], in[0], false, true); },
      [](const std::vector<Vec>& x) { return RefMatMul(x[0], x[0], 3, 4, 3, false, true, 1.0); });
}

}  // namespace
// The backward pass gives each node's gradient back to the arena once it is consumed, so a long
// chain keeps about two gradients alive instead of one per node, and the result is unchanged.
TEST(OpsGradientTest, BackwardKeepsOnlyTheLiveGradients) {
  ParamStore store;
  store.Add("x", {1000}, Init::kOnes);
  store.Finalize(Device::kCpu, 1);
  Arena arena(Device::kCpu, 1 << 20);
  Graph g(&arena, /*training=*/true);
  Var y = g.Param(store, 0);
  for (int i = 0; i < 30; ++i) y = Scale(y, 1.01f);
  Var loss = Sum(y);
  const size_t forward = arena.used_bytes();
  g.Backward(loss);
  EXPECT_LT(arena.high_water_bytes() - forward, 4 * 4000u);  // 30 gradients would be 120 kB
  const float want = std::pow(1.01f, 30);
  for (int i = 0; i < 1000; i += 111) EXPECT_NEAR(store.grad(0).at(i), want, 1e-4f);
}

}  // namespace tern::graph::testing
