// CPU kernels against naive double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/dropout_kernel.h"
#include "tensor/ops.h"
#include "tensor/threads.h"
#include "tests/tensor/random_tensor.h"

namespace tern {
namespace {

using testing::RandomTensor;

// The vectorized kernels' clone runs wherever the CPU has its features, not only on one CPU model
// (the "arch=haswell" clones ran nowhere but on Intel Haswell).
TEST(KernelsTest, MultiversionedKernelsRunTheirAvx2CloneOnAnAvx2Cpu) {
#if defined(__x86_64__)
  const std::string clone = cpu::MultiversionClone();
  if (clone == "none") GTEST_SKIP() << "built without clones";
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                  __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("movbe");
  EXPECT_EQ(clone, v3 ? "x86-64-v3" : "default");
#else
  GTEST_SKIP() << "not x86-64";
#endif
}

// OpenBLAS's generic core on a CPU it does not know is swapped for the core of the CPU's vector
// units; a core that already uses them, or one this does not rank, is kept.
TEST(KernelsTest, TheBlasGetsTheCoreOfTheCpusVectorUnits) {
  EXPECT_EQ(BetterBlasCore("Prescott", /*avx2_fma=*/true, /*avx512=*/true), "SkylakeX");
  EXPECT_EQ(BetterBlasCore("Prescott", true, false), "Haswell");
  EXPECT_EQ(BetterBlasCore("Sandybridge", true, false), "Haswell");
  EXPECT_EQ(BetterBlasCore("Haswell", true, true), "SkylakeX");
  EXPECT_EQ(BetterBlasCore("Prescott", false, false), "");
  EXPECT_EQ(BetterBlasCore("Haswell", true, false), "");
  EXPECT_EQ(BetterBlasCore("Zen", true, false), "");
  EXPECT_EQ(BetterBlasCore("SkylakeX", true, true), "");
  EXPECT_EQ(BetterBlasCore("SapphireRapids", true, true), "");
  EXPECT_EQ(BetterBlasCore("NewCoreOfSomeLaterRelease", true, true), "");
  EXPECT_EQ(BetterBlasCore("", true, true), "");  // another BLAS
}

TEST(KernelsTest, GemmAllTransposes) {
  SetNumThreads(2);
  const int m = 7, k = 13, n = 5;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, 2);
      Tensor c = Tensor::FromVector({m, n}, std::vector<float>(m * n, 1.f));
      Gemm(a, ta, b, tb, c, 2.f, 0.5f);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int p = 0; p < k; ++p)
            s += double(ta ? a.at(p * m + i) : a.at(i * k + p)) *
                 (tb ? b.at(j * k + p) : b.at(p * n + j));
          EXPECT_NEAR(c.at(i * n + j), 2 * s + 0.5, 1e-4);
        }
      }
    }
  }
}

TEST(KernelsTest, GemmBiasIsTheProductPlusTheBias) {
  // Rank-3 a times 2-D b, transposed b, bf16 inputs: the same as Gemm then AddBias, bit for bit.
  const Tensor a = RandomTensor({2, 3, 4}, 30), b = RandomTensor({5, 4}, 31),
               bias = RandomTensor({5}, 32);
  for (DType inputs : {DType::kFloat32, DType::kBFloat16}) {
    Tensor fused = Tensor::Empty({2, 3, 5}), expected = Tensor::Empty({6, 5});
    GemmBias(a, false, b, true, bias, fused, inputs);
    Gemm(a.Flatten2D(), false, b, true, expected, 1.f, 0.f, inputs);
    AddBias(expected, bias);
    for (int64_t i = 0; i < expected.numel(); ++i) EXPECT_EQ(fused.at(i), expected.at(i)) << i;
  }
}

TEST(KernelsTest, GemmBiasWithAResidualIsTheProductPlusBiasPlusTheResidual) {
  // A sublayer's output and its residual connection: the bits of GemmBias, then Add.
  const Tensor a = RandomTensor({2, 3, 4}, 33), b = RandomTensor({4, 5}, 34),
               bias = RandomTensor({5}, 35), residual = RandomTensor({2, 3, 5}, 36);
  for (DType inputs : {DType::kFloat32, DType::kBFloat16}) {
    Tensor fused = Tensor::Empty({2, 3, 5}), expected = Tensor::Empty({6, 5});
    GemmBias(a, false, b, false, bias, fused, inputs, residual);
    GemmBias(a.Flatten2D(), false, b, false, bias, expected, inputs);
    Add(residual.Flatten2D(), expected, expected);
    for (int64_t i = 0; i < expected.numel(); ++i) EXPECT_EQ(fused.at(i), expected.at(i)) << i;
  }
}

TEST(KernelsTest, GemmBiasWithAnActivationIsTheProductPlusBiasThenUnary) {
  // A feed-forward layer's first product and its activation: the bits of GemmBias, then Unary.
  const Tensor a = RandomTensor({2, 3, 4}, 37), b = RandomTensor({4, 5}, 38),
               bias = RandomTensor({5}, 39);
  for (UnaryOp f : {kRelu, kGelu}) {
    Tensor fused = Tensor::Empty({2, 3, 5}), expected = Tensor::Empty({6, 5});
    GemmBias(a, false, b, false, bias, fused, DType::kFloat32, Tensor(), f);
    GemmBias(a.Flatten2D(), false, b, false, bias, expected);
    Unary(f, expected, expected);
    for (int64_t i = 0; i < expected.numel(); ++i) EXPECT_EQ(fused.at(i), expected.at(i)) << i;
  }
}

TEST(KernelsTest, GemmBiasOfOneAAndABatchOfBIsEachProduct) {
  // A decoder step's queries, keys and values from one input: the bits of three GemmBias.
  const Tensor a = RandomTensor({4, 6}, 41), b = RandomTensor({3, 6, 5}, 42),
               bias = RandomTensor({3, 5}, 43), bt = RandomTensor({3, 5, 6}, 44);
  for (bool trans_b : {false, true}) {
    const Tensor& w = trans_b ? bt : b;
    Tensor fused = Tensor::Empty({3, 4, 5});
    GemmBias(a, false, w, trans_b, bias, fused);
    for (int64_t i = 0; i < 3; ++i) {
      Tensor one = Tensor::Empty({4, 5});
      GemmBias(a, false, w.Slice(i, i + 1).Reshape({w.dim(1), w.dim(2)}), trans_b,
               bias.Slice(i, i + 1).Reshape({5}), one);
      EXPECT_EQ(fused.Slice(i, i + 1).ToVector(), one.ToVector()) << "batch " << i;
    }
  }
}

TEST(KernelsDeathTest, GemmBiasTakesReluOrGeluWithoutAResidual) {
  const Tensor a = RandomTensor({6, 4}, 37), b = RandomTensor({4, 5}, 38),
               bias = RandomTensor({5}, 39);
  Tensor c = Tensor::Empty({6, 5});
  EXPECT_DEATH(
      GemmBias(a, false, b, false, bias, c, DType::kFloat32, RandomTensor({6, 5}, 40), kRelu),
      "without a residual");
  EXPECT_DEATH(GemmBias(a, false, b, false, bias, c, DType::kFloat32, Tensor(), kTanh),
               "relu or gelu");
}

TEST(KernelsTest, BatchedGemmMatchesPerBatch) {
  Tensor a = RandomTensor({6, 4, 8}, 3), b = RandomTensor({6, 5, 8}, 4);
  Tensor c = Tensor::Zeros({6, 4, 5});
  Gemm(a, false, b, true, c);
  for (int i = 0; i < 6; ++i) {
    Tensor ci = Tensor::Zeros({4, 5});
    Gemm(a.Slice(i, i + 1).Reshape({4, 8}), false, b.Slice(i, i + 1).Reshape({5, 8}), true, ci);
    for (int j = 0; j < 20; ++j) EXPECT_NEAR(c.at(i * 20 + j), ci.at(j), 1e-5);
  }
}

TEST(KernelsTest, SoftmaxMasksKeysAndFuture) {
  Tensor x = RandomTensor({2, 1, 3, 3}, 5), y = Tensor::Empty({2, 1, 3, 3});
  Tensor mask = Tensor::FromVector({2, 3}, {1, 1, 0, 1, 1, 1});
  Softmax(x, y, mask, /*causal=*/true, 0.5f);
  // batch 0, query 2: keys 0,1 valid (key 2 masked).
  double e0 = std::exp(0.5 * x.at(6)), e1 = std::exp(0.5 * x.at(7));
  EXPECT_NEAR(y.at(6), e0 / (e0 + e1), 1e-6);
  EXPECT_EQ(y.at(8), 0.f);
  // batch 1, query 0: only key 0.
  EXPECT_NEAR(y.at(9), 1.f, 1e-6);
  EXPECT_EQ(y.at(10), 0.f);
}

TEST(KernelsTest, CrossEntropyWithSmoothing) {
  const int v = 11;
  Tensor logits = RandomTensor({3, v}, 6);
  Tensor targets = Tensor::FromInts({3}, {2, 0, 7});
  Tensor loss = Tensor::Empty({3}), lse = Tensor::Empty({3});
  const float s = 0.1f;
  CrossEntropy(logits, targets, s, /*ignore_id=*/0, loss, lse);
  EXPECT_EQ(loss.at(1), 0.f);  // ignored row
  double z = 0;
  for (int k = 0; k < v; ++k) z += std::exp(double(logits.at(k)));
  double logz = std::log(z), mean_nll = 0;
  for (int k = 0; k < v; ++k) mean_nll += (logz - logits.at(k)) / v;
  EXPECT_NEAR(loss.at(0), (1 - s) * (logz - logits.at(2)) + s * mean_nll, 1e-5);
}

// Rows summed eight side by side for the smoothing term have each row's own Sum bits: a batch
// equals its rows one at a time (which take the single-row path), for row counts around eight,
// with an ignored row, on 1 and 2 threads.
TEST(KernelsTest, CrossEntropyOfABatchHasItsRowsBits) {
  const int threads = NumThreads();
  for (const int rows : {1, 7, 8, 9, 17, 40}) {
    for (const int64_t v : {5, 1000}) {
      Tensor logits = RandomTensor({rows, v}, 40 + rows, 4.f);
      std::vector<int32_t> ids(rows);
      for (int r = 0; r < rows; ++r) ids[r] = (r * 7 + 3) % static_cast<int32_t>(v);
      ids[rows / 2] = 0;  // ignored
      const Tensor targets = Tensor::FromInts({rows}, ids);
      for (int t : {1, 2}) {
        SetNumThreads(t);
        Tensor loss = Tensor::Empty({rows}), lse = Tensor::Empty({rows});
        CrossEntropy(logits, targets, 0.1f, /*ignore_id=*/0, loss, lse);
        for (int r = 0; r < rows; ++r) {
          Tensor one_loss = Tensor::Empty({1}), one_lse = Tensor::Empty({1});
          CrossEntropy(logits.Slice(r, r + 1), targets.Slice(r, r + 1), 0.1f, 0, one_loss, one_lse);
          ASSERT_EQ(0, std::memcmp(loss.f32() + r, one_loss.f32(), 4))
              << rows << " rows of " << v << ", row " << r << ", " << t
              << " threads: " << loss.at(r) << " vs " << one_loss.at(0);
        }
      }
    }
  }
  SetNumThreads(threads);
}

// Layer norm's backward sums eight rows side by side: a batch's dx has the bits of its rows one
// at a time (which take the one-row path), row counts around eight, accumulated or written, 1
// and 2 threads.
TEST(KernelsTest, LayerNormBackwardOfABatchHasItsRowsBits) {
  const int threads = NumThreads();
  const int64_t n = 45;
  const Tensor gamma = RandomTensor({n}, 90), beta = RandomTensor({n}, 91);
  for (const int rows : {1, 7, 8, 9, 19}) {
    const Tensor x = RandomTensor({rows, n}, 92 + rows), dy = RandomTensor({rows, n}, 93 + rows);
    const Tensor start = RandomTensor({rows, n}, 94);
    Tensor y = Tensor::Empty({rows, n}), mean = Tensor::Empty({rows}), rstd = Tensor::Empty({rows});
    LayerNorm(x, gamma, beta, y, mean, rstd, 1e-6f);
    for (const bool accumulate : {false, true}) {
      for (int t : {1, 2}) {
        SetNumThreads(t);
        Tensor dx = Tensor::Empty({rows, n});
        Copy(start, dx);
        LayerNormBackward(x, gamma, mean, rstd, dy, dx, Tensor(), Tensor(), accumulate);
        for (int r = 0; r < rows; ++r) {
          Tensor one = Tensor::Empty({1, n});
          Copy(start.Slice(r, r + 1), one);
          LayerNormBackward(x.Slice(r, r + 1), gamma, mean.Slice(r, r + 1), rstd.Slice(r, r + 1),
                            dy.Slice(r, r + 1), one, Tensor(), Tensor(), accumulate);
          ASSERT_EQ(0, std::memcmp(dx.f32() + r * n, one.f32(), n * sizeof(float)))
              << rows << " rows, row " << r << ", " << t << " threads"
              << (accumulate ? ", accumulated" : "");
        }
      }
    }
  }
  SetNumThreads(threads);
}

// The fused rounding and row sums (a bias's gradient from the output layer's) have the bits of
// RoundOperand and then SumRows onto sums already there: widths around the 256-column split, 1
// and 2 threads, and fp16 (which takes the two passes).
TEST(KernelsTest, RoundOperandSumRowsIsRoundOperandThenSumRows) {
  const int threads = NumThreads();
  for (const DType type : {DType::kBFloat16, DType::kFloat16}) {
    for (const auto& [rows, cols] : {std::pair{1, 1}, std::pair{3, 255}, std::pair{17, 257},
                                     std::pair{64, 1030}, std::pair{200, 4000}}) {
      const Tensor x = RandomTensor({rows, cols}, rows + cols, 3.f);
      const Tensor start = RandomTensor({cols}, 9);
      for (int t : {1, 2}) {
        SetNumThreads(t);
        Tensor want_bits = Tensor::Empty({rows, cols}, type);
        Tensor got_bits = Tensor::Empty({rows, cols}, type);
        Tensor want_sums = Tensor::Empty({cols}), got_sums = Tensor::Empty({cols});
        Copy(start, want_sums);
        Copy(start, got_sums);
        RoundOperand(x, want_bits);
        SumRows(x, want_sums, 1.f);
        RoundOperandSumRows(x, got_bits, got_sums);
        ASSERT_EQ(0, std::memcmp(want_bits.raw(), got_bits.raw(), want_bits.bytes()))
            << DTypeName(type) << " " << rows << "x" << cols << ", " << t << " threads";
        ASSERT_EQ(0, std::memcmp(want_sums.raw(), got_sums.raw(), want_sums.bytes()))
            << DTypeName(type) << " " << rows << "x" << cols << ", " << t << " threads";
      }
    }
  }
  SetNumThreads(threads);
}

TEST(KernelsTest, LayerNormNormalizes) {
  Tensor x = RandomTensor({4, 32}, 7), y = Tensor::Empty({4, 32});
  Tensor g = Tensor::FromVector({32}, std::vector<float>(32, 1.f)), b = Tensor::Zeros({32});
  Tensor mean = Tensor::Empty({4}), rstd = Tensor::Empty({4});
  LayerNorm(x, g, b, y, mean, rstd, 1e-6f);
  for (int r = 0; r < 4; ++r) {
    double mu = 0, var = 0;
    for (int i = 0; i < 32; ++i) mu += y.at(r * 32 + i) / 32;
    for (int i = 0; i < 32; ++i) var += std::pow(y.at(r * 32 + i) - mu, 2) / 32;
    EXPECT_NEAR(mu, 0, 1e-5);
    EXPECT_NEAR(var, 1, 1e-3);
  }
}

TEST(KernelsTest, PermuteIsItsOwnInverseAndGatherScatterAgree) {
  Tensor x = RandomTensor({2, 3, 4, 5}, 8), y = Tensor::Empty({2, 4, 3, 5}),
         z = Tensor::Empty(x.shape());
  Permute0213(x, y);
  Permute0213(y, z);
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(x.at(i), z.at(i));
  EXPECT_EQ(y.at(((1 * 4 + 2) * 3 + 1) * 5 + 3), x.at(((1 * 3 + 1) * 4 + 2) * 5 + 3));

  Tensor table = RandomTensor({5, 3}, 9), ids = Tensor::FromInts({4}, {4, 0, 4, 2});
  Tensor out = Tensor::Empty({4, 3}), dtable = Tensor::Zeros({5, 3});
  GatherRows(table, ids, out, 2.f);
  EXPECT_EQ(out.at(3 * 3 + 1), 2.f * table.at(2 * 3 + 1));
  ScatterAddRows(out, ids, dtable, 1.f);
  EXPECT_FLOAT_EQ(dtable.at(4 * 3), 4.f * table.at(4 * 3));
  EXPECT_EQ(dtable.at(1 * 3), 0.f);
}

// Unary's tanh, sigmoid and GELU are vectorized rational approximations: within 2e-6 of the
// library's functions over the range that matters and beyond, saturated at the ends, NaN kept.
TEST(KernelsTest, UnaryActivationsAreWithinTwoMillionthsOfTheLibrarys) {
  std::vector<float> values;
  for (float v = -12.f; v <= 12.f; v += 0.001f) values.push_back(v);
  values.push_back(1e-30f);
  const int64_t n = static_cast<int64_t>(values.size());
  const Tensor x = Tensor::FromVector({n}, values);
  Tensor y = Tensor::Empty({n});
  auto gelu = [](double v) {
    return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  };
  for (UnaryOp op : {kTanh, kSigmoid, kGelu, kSwish}) {
    Unary(op, x, y);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = values[i];
      const double expected = op == kTanh      ? std::tanh(v)
                              : op == kSigmoid ? 1 / (1 + std::exp(-v))
                              : op == kSwish   ? v / (1 + std::exp(-v))
                                               : gelu(v);
      const double error = std::fabs(y.at(i) - expected) / std::max(1.0, std::fabs(v));
      ASSERT_FALSE(std::isnan(error)) << "op " << op << " at " << v;
      worst = std::max(worst, error);
    }
    EXPECT_LT(worst, 2e-6) << "op " << op;
  }
  // Saturated at the ends; NaN stays NaN (a diverging run must not be hidden).
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor ends = Tensor::FromVector({3}, {inf, -inf, std::numeric_limits<float>::quiet_NaN()});
  Tensor out = Tensor::Empty({3});
  Unary(kTanh, ends, out);
  EXPECT_EQ(out.at(0), 1.f);
  EXPECT_EQ(out.at(1), -1.f);
  Unary(kSigmoid, ends, out);
  EXPECT_EQ(out.at(0), 1.f);
  EXPECT_EQ(out.at(1), 0.f);
  for (UnaryOp op : {kTanh, kSigmoid, kGelu, kSwish}) {
    Unary(op, ends, out);
    EXPECT_TRUE(std::isnan(out.at(2))) << "op " << op << ": NaN must stay NaN";
  }
}

// ClipByNorm scales a vector longer than the clip to the clip's length and leaves a shorter one
// (and zeros) as they are: optim::ClipScale's factor, applied where the vector lives.
TEST(KernelsTest, ClipByNormScalesOnlyWhatIsLongerThanTheClip) {
  Tensor x = Tensor::FromVector({3}, {3.f, 0.f, 4.f});  // norm 5
  ClipByNorm(x, 10.f);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{3.f, 0.f, 4.f}));
  ClipByNorm(x, 1.f);
  EXPECT_NEAR(x.at(0), 0.6f, 1e-7);
  EXPECT_NEAR(x.at(2), 0.8f, 1e-7);
  Tensor zeros = Tensor::Zeros({5});
  ClipByNorm(zeros, 1.f);
  EXPECT_EQ(zeros.ToVector(), std::vector<float>(5, 0.f));
  // A long one, summed in blocks: the result's norm is the clip.
  Tensor big = RandomTensor({100003}, 33);
  ClipByNorm(big, 2.f);
  EXPECT_NEAR(std::sqrt(SumSquares(big)), 2.0, 1e-5);
}

// SumSquares' definition: float sums of blocks of 4,096 in order, added into a double in block
// order. Eight blocks at a time give the same chains, so the same bits, for any length (whole
// groups of eight blocks, a remainder of blocks and a last partial block).
TEST(KernelsTest, SumSquaresIsItsBlockDefinitionBitForBit) {
  for (int64_t n :
       {0, 1, 4095, 4096, 8 * 4096, 8 * 4096 + 1, 9 * 4096 - 3, 17 * 4096 + 5, 1441792}) {
    const Tensor x = RandomTensor({n}, 40 + static_cast<int>(n % 97));
    const float* p = x.f32();
    double want = 0;
    for (int64_t s = 0; s < n; s += 4096) {
      float part = 0;
      for (int64_t i = s; i < std::min(n, s + 4096); ++i) part += p[i] * p[i];
      want += part;
    }
    const double got = SumSquares(x);
    EXPECT_EQ(0, std::memcmp(&want, &got, sizeof want)) << n << ": " << want << " vs " << got;
  }
}

// The two halves a distributed step uses (the ranks' sums are all-reduced between them): the
// squared norm lands in a tensor, and the clip reads it there. A squared norm that is not finite
// drops the update (factor 0), as optim::ClipScale does on the host.
TEST(KernelsTest, ClipToNormTakesTheSquaredNormFromATensor) {
  Tensor x = Tensor::FromVector({3}, {3.f, 0.f, 4.f});
  Tensor sq = Tensor::Empty({1});
  SumSquaresTo(x, sq);
  EXPECT_EQ(sq.at(0), 25.f);
  ClipToNorm(x, sq, 10.f);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{3.f, 0.f, 4.f}));
  sq.f32()[0] = 100.f;  // as if the other ranks added 75: the norm is 10, not 5
  ClipToNorm(x, sq, 5.f);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{1.5f, 0.f, 2.f}));
  for (float bad : {INFINITY, NAN}) {
    Tensor y = Tensor::FromVector({2}, {1.f, -2.f});
    sq.f32()[0] = bad;
    ClipToNorm(y, sq, 5.f);
    EXPECT_EQ(y.ToVector(), (std::vector<float>{0.f, -0.f})) << bad;
  }
  SumSquaresTo(Tensor::Empty({0}), sq);
  EXPECT_EQ(sq.at(0), 0.f);
}

TEST(KernelsTest, DivideRowsDividesEachRowByItsOwnDivisor) {
  Tensor x = RandomTensor({3, 1, 70}, 13), y = Tensor::Empty(x.shape());
  Copy(x, y);
  const std::vector<float> divisors = {1.f, 3.f, 7.f};
  DivideRows(y, Tensor::FromVector({3}, divisors));
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t i = 0; i < 70; ++i) EXPECT_EQ(y.at(r * 70 + i), x.at(r * 70 + i) / divisors[r]);
  }
}

TEST(KernelsTest, ClampBoundsEveryElement) {
  Tensor x = Tensor::FromVector({5}, {-2.f, -0.5f, 0.25f, 0.5f, 3.f});
  Clamp(x, 0.f, 0.5f);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{0.f, 0.f, 0.25f, 0.5f, 0.5f}));
}

// GruCell against the update written out in double, with inputs per row and broadcast (a
// transition cell's bias row), with and without a row mask.
TEST(KernelsTest, GruCellFollowsTheGruUpdate) {
  const int64_t rows = 3, d = 5;
  const Tensor su_rz = RandomTensor({rows, 2 * d}, 20), su_h = RandomTensor({rows, d}, 21),
               s = RandomTensor({rows, d}, 22), mask = Tensor::FromVector({rows}, {1.f, 0.f, .5f});
  for (int64_t in_rows : {rows, int64_t{1}}) {
    const Tensor in_rz = RandomTensor({in_rows, 2 * d}, 23), in_h = RandomTensor({in_rows, d}, 24);
    for (bool masked : {false, true}) {
      Tensor out = Tensor::Empty({rows, d});
      GruCell(in_rz, in_h, su_rz, su_h, s, masked ? mask : Tensor(), out);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = in_rows == 1 ? 0 : r;
        for (int64_t j = 0; j < d; ++j) {
          auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
          const double gr = sigmoid(in_rz.at(i * 2 * d + j) + su_rz.at(r * 2 * d + j));
          const double z = sigmoid(in_rz.at(i * 2 * d + d + j) + su_rz.at(r * 2 * d + d + j));
          const double h = std::tanh(in_h.at(i * d + j) + gr * su_h.at(r * d + j));
          const double sj = s.at(r * d + j), m = masked ? mask.at(r) : 1.0;
          const double expected = sj + m * (h + z * (sj - h) - sj);
          EXPECT_NEAR(out.at(r * d + j), expected, 1e-5) << "row " << r << " column " << j;
        }
      }
    }
  }
}

TEST(KernelsTest, AdditiveAttentionScoresFollowTheirDefinition) {
  const int64_t batch = 2, beam = 3, len = 4, c = 6;
  const Tensor q = RandomTensor({batch * beam, c}, 25), mapped = RandomTensor({batch, len, c}, 26),
               u = RandomTensor({c}, 27);
  Tensor scores = Tensor::Empty({batch * beam, len});
  AdditiveAttentionScores(q, mapped, u, scores);
  for (int64_t r = 0; r < batch * beam; ++r) {
    for (int64_t t = 0; t < len; ++t) {
      double expected = 0;
      for (int64_t j = 0; j < c; ++j) {
        expected +=
            std::tanh(mapped.at(((r / beam) * len + t) * c + j) + q.at(r * c + j)) * u.at(j);
      }
      EXPECT_NEAR(scores.at(r * len + t), expected, 5e-5) << "row " << r << " position " << t;
    }
  }
}

TEST(KernelsTest, GatherAppendFollowsItsDefinition) {
  const int64_t rows = 3, a = 2, t0 = 5, c = 3, skip = 2, t1 = 6;  // kept 3, next at 3, zeros
  Tensor past = RandomTensor({4, a, t0, c}, 10), next = RandomTensor({rows, a, c}, 11);
  Tensor ids = Tensor::FromInts({rows}, {3, -1, 0});
  Tensor out = RandomTensor({rows, a, t1, c}, 12);
  GatherAppend(past, ids, skip, next, out);
  const int32_t from[] = {3, -1, 0};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < a; ++h) {
      for (int64_t t = 0; t < t1; ++t) {
        for (int64_t j = 0; j < c; ++j) {
          float expected = 0.f;
          if (t < t0 - skip && from[r] >= 0) {
            expected = past.at(((from[r] * a + h) * t0 + skip + t) * c + j);
          } else if (t == t0 - skip) {
            expected = next.at((r * a + h) * c + j);
          }
          EXPECT_EQ(out.at(((r * a + h) * t1 + t) * c + j), expected)
              << "r " << r << " h " << h << " t " << t << " j " << j;
        }
      }
    }
  }
  // Without ids or next: a copy padded with zeros; without past: next then zeros.
  Tensor padded = RandomTensor({4, a, t0 + 2, c}, 13);
  GatherAppend(past, Tensor(), 0, Tensor(), padded);
  EXPECT_EQ(padded.at(((3 * a + 1) * (t0 + 2) + 4) * c + 2),
            past.at(((3 * a + 1) * t0 + 4) * c + 2));
  EXPECT_EQ(padded.at(((3 * a + 1) * (t0 + 2) + 5) * c + 2), 0.f);
  Tensor fresh = RandomTensor({rows, a, 2, c}, 14);
  GatherAppend(Tensor(), Tensor(), 0, next, fresh);
  EXPECT_EQ(fresh.at(((2 * a + 1) * 2 + 0) * c + 1), next.at((2 * a + 1) * c + 1));
  EXPECT_EQ(fresh.at(((2 * a + 1) * 2 + 1) * c + 1), 0.f);
}

// Dropout makes DropoutMask's mask on the fly: the bits of Mul by the stored mask, forward and in
// place, and (within a rounding) accumulated into a gradient.
TEST(KernelsTest, DropoutIsTheProductWithDropoutMasksMask) {
  const Tensor x = RandomTensor({3, 1000}, 60), base = RandomTensor({3, 1000}, 61);
  Tensor mask = Tensor::Empty(x.shape());
  DropoutMask(mask, 0.8f, 7);
  Tensor want = Tensor::Empty(x.shape()), got = Tensor::Empty(x.shape());
  Mul(x, mask, want);
  Dropout(x, got, 0.8f, 7);
  EXPECT_EQ(got.ToVector(), want.ToVector());
  Tensor acc_want = Tensor::FromVector(base.shape(), base.ToVector()),
         acc_got = Tensor::FromVector(base.shape(), base.ToVector());
  Mul(x, mask, acc_want, /*accumulate=*/true);
  Dropout(x, acc_got, 0.8f, 7, /*base=*/acc_got);
  for (int64_t i = 0; i < x.numel(); ++i) {  // a fused multiply-add may round once, not twice
    EXPECT_NEAR(acc_got.at(i), acc_want.at(i), 1e-6f * (1.f + std::fabs(acc_want.at(i)))) << i;
  }
  Tensor in_place = Tensor::FromVector(x.shape(), x.ToVector());
  Dropout(in_place, in_place, 0.8f, 7);
  EXPECT_EQ(in_place.ToVector(), want.ToVector());
  Tensor with_base = Tensor::Empty(x.shape()), sum = Tensor::Empty(x.shape());
  Dropout(x, with_base, 0.8f, 7, /*base=*/base);
  Add(base, want, sum);
  EXPECT_EQ(with_base.ToVector(), sum.ToVector()) << "base + x * m: a residual connection";
  Dropout(x, got, 0.8f, 8);
  EXPECT_NE(got.ToVector(), want.ToVector()) << "another seed, another mask";
}

// The AVX-512 mask is the scalar one bit for bit: every offset and length around the 16 lanes,
// with and without a base, x holding infinities, NaNs and signed zeros.
TEST(KernelsTest, DropoutVectorFormEqualsTheScalarLoops) {
  namespace di = cpu::dropout_internal;
  if (!di::HasAvx512()) GTEST_SKIP() << "no AVX-512 F and DQ here (or TERN_ISA below it)";
  std::vector<float> x = RandomTensor({200}, 62).ToVector(),
                     base = RandomTensor({200}, 63).ToVector();
  x[3] = std::numeric_limits<float>::infinity();
  x[20] = -std::numeric_limits<float>::infinity();
  x[37] = std::numeric_limits<float>::quiet_NaN();
  x[50] = -0.f;
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (auto [keep, seed] : {std::pair{0.8f, uint64_t{7}}, std::pair{0.5f, ~uint64_t{0}},
                            std::pair{0.999f, uint64_t{12345}}}) {
    const di::Keys keys(keep, seed);
    for (int64_t s : {0, 1, 15, 16, 17}) {
      for (int64_t e : {s, s + 1, s + 15, s + 16, s + 33, int64_t{200}}) {
        if (e > 200) continue;
        std::vector<float> want(200, 9.f), got(200, 9.f);
        di::MaskScalar(keys, s, e, want.data());
        di::MaskAvx512(keys, s, e, got.data());
        ASSERT_TRUE(same_bits(want, got)) << "mask " << s << ".." << e;
        const float* const bases[] = {nullptr, base.data()};
        for (const float* b : bases) {
          std::fill(want.begin(), want.end(), 9.f);
          std::fill(got.begin(), got.end(), 9.f);
          di::ApplyScalar(keys, s, e, x.data(), b, want.data());
          di::ApplyAvx512(keys, s, e, x.data(), b, got.data());
          ASSERT_TRUE(same_bits(want, got)) << "apply " << s << ".." << e << (b ? " base" : "");
        }
      }
    }
  }
}

// Adam's vectorized loops (an AVX-512 clone and the baseline) give the scalar formula's bits.
TEST(KernelsTest, AdamUpdateIsTheScalarFormulaBitForBit) {
  const int64_t n = 10007;
  const std::vector<float> p0 = RandomTensor({n}, 70).ToVector(),
                           g = RandomTensor({n}, 71).ToVector(),
                           m0 = RandomTensor({n}, 72).ToVector();
  std::vector<float> v0 = RandomTensor({n}, 73).ToVector();
  for (float& x : v0) x = x * x;
  const AdamArgs a{
      0.003f, 0.9f, 0.98f, 1e-9f, 0.5f, 0.003f * 0.01f, 1.f / (1.f - 0.9f), 1.f / (1.f - 0.98f)};
  std::vector<float> p = p0, m = m0, v = v0;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * a.grad_scale;
    m[i] = a.beta1 * m[i] + (1.f - a.beta1) * gi;
    v[i] = a.beta2 * v[i] + (1.f - a.beta2) * gi * gi;
    p[i] =
        p[i] - (a.learning_rate * (m[i] * a.inv_bc1) / (std::sqrt(v[i] * a.inv_bc2) + a.epsilon) +
                a.decay * p[i]);
  }
  Tensor tp = Tensor::FromVector({n}, p0), tg = Tensor::FromVector({n}, g),
         tm = Tensor::FromVector({n}, m0), tv = Tensor::FromVector({n}, v0);
  std::vector<float> copy(n);
  cpu::AdamUpdate(tp, tg, tm, tv, a, Tensor(), copy.data());
  for (auto [want, got] : {std::pair{&p, tp.ToVector()}, std::pair{&m, tm.ToVector()},
                           std::pair{&v, tv.ToVector()}, std::pair{&p, copy}}) {
    ASSERT_EQ(0, std::memcmp(want->data(), got.data(), n * sizeof(float)));
  }
}

TEST(KernelsTest, DropoutMaskIsDeterministicWithTheRightRate) {
  Tensor a = Tensor::Empty({100000}), b = Tensor::Empty({100000});
  DropoutMask(a, 0.9f, 42);
  DropoutMask(b, 0.9f, 42);
  int64_t kept = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_EQ(a.at(i), b.at(i));
    kept += a.at(i) != 0.f;
  }
  EXPECT_NEAR(kept / 100000.0, 0.9, 0.01);
}

}  // namespace
}  // namespace tern
