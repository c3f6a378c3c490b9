// The packed float GEMM: every kernel this CPU runs against the scalar reference (bit for bit,
// with every epilogue), the reference against a double-precision product, the packings, and
// the independence of a row's bits from the rows beside it and the thread count.
#include "tensor/cpu/float_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/thread_pool.h"

namespace tern::cpu {
namespace {

std::vector<float> Random(int64_t n, std::mt19937& rng, float scale = 1.f) {
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Shape3 {
  int64_t m, k, n;
};

// m around the tiles (6 and 8 rows and every leftover), n off the 16-column panels and odd panel
// counts, k = 1 and odd; and a row block's worth (k 1000 x 200 rows spans several blocks).
const Shape3 kShapes[] = {{1, 1, 1},      {1, 3, 5},    {1, 64, 16},    {1, 257, 33}, {2, 31, 17},
                          {3, 130, 47},   {4, 512, 64}, {5, 100, 200},  {6, 40, 48},  {7, 6, 129},
                          {8, 256, 255},  {9, 33, 80},  {11, 90, 70},   {12, 64, 17}, {13, 20, 96},
                          {16, 1000, 31}, {33, 77, 65}, {200, 1000, 40}};

void ExpectBitsEqual(const std::vector<float>& want, const std::vector<float>& got,
                     const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&want[i], &got[i], sizeof(float)))
        << what << " at " << i << ": " << want[i] << " vs " << got[i];
  }
}

TEST(FloatGemmTest, KernelsMatchReferenceBitForBit) {
  if (SupportedFloatGemmIsas().empty()) GTEST_SKIP() << "no AVX2+FMA here";
  std::mt19937 rng(11);
  for (const Shape3& s : kShapes) {
    for (bool transposed : {false, true}) {
      const int64_t lda = s.k + 2, ldc = s.n + 3, ldr = s.n + 1;  // strides wider than the rows
      std::vector<float> a = Random(s.m * lda, rng), w = Random(s.k * s.n, rng, 0.1f);
      std::vector<float> bias = Random(s.n, rng), residual = Random(s.m * ldr, rng);
      const PackedFloatMatrix b(w.data(), s.k, s.n, transposed);
      for (int variant = 0; variant < 4; ++variant) {
        FloatEpilogue e;
        if (variant & 1) e.bias = bias.data();
        if (variant & 2) {
          e.residual = residual.data();
          e.ldr = ldr;
        }
        e.relu = variant == 1 || variant == 3;
        std::vector<float> want(s.m * ldc, -7.f);
        FloatGemmReference(a.data(), s.m, lda, b, e, want.data(), ldc);
        for (IntGemmIsa isa : SupportedFloatGemmIsas()) {
          std::vector<float> got(s.m * ldc, -7.f);  // the columns past n must stay -7
          FloatGemmWithIsa(isa, a.data(), s.m, lda, b, e, got.data(), ldc);
          ExpectBitsEqual(want, got,
                          std::string(IntGemmIsaName(isa)) + " m" + std::to_string(s.m) + " k" +
                              std::to_string(s.k) + " n" + std::to_string(s.n) + " variant " +
                              std::to_string(variant) + (transposed ? " transposed" : ""));
        }
      }
    }
  }
}

TEST(FloatGemmTest, ReferenceIsTheProduct) {
  std::mt19937 rng(3);
  const int64_t m = 5, k = 300, n = 37;
  std::vector<float> a = Random(m * k, rng), w = Random(k * n, rng), bias = Random(n, rng);
  const PackedFloatMatrix b(w.data(), k, n, false);
  FloatEpilogue e;
  e.bias = bias.data();
  e.relu = true;
  std::vector<float> c(m * n);
  FloatGemmReference(a.data(), m, k, b, e, c.data(), n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias[j];
      for (int64_t kk = 0; kk < k; ++kk) sum += static_cast<double>(a[i * k + kk]) * w[kk * n + j];
      EXPECT_NEAR(c[i * n + j], std::max(sum, 0.0), 1e-4 * (1 + std::abs(sum)));
    }
  }
}

TEST(FloatGemmTest, PackRowsIsTheTransposedPackingOfThoseRows) {
  std::mt19937 rng(5);
  const int64_t vocab = 50, k = 24;
  std::vector<float> table = Random(vocab * k, rng);
  const std::vector<int32_t> rows = {7, 3, 3, 49, 0, 12, 33, 34, 35, 36, 1, 2, 4, 5, 6, 8, 9, 10};
  std::vector<float> gathered;
  for (int32_t r : rows) gathered.insert(gathered.end(), &table[r * k], &table[(r + 1) * k]);
  const int64_t n = static_cast<int64_t>(rows.size());
  const PackedFloatMatrix want(gathered.data(), k, n, /*transposed=*/true);
  PackedFloatMatrix got(table.data(), k, vocab, true);  // larger first: storage reused
  got.PackRows(table.data(), k, rows.data(), n);
  ASSERT_EQ(got.k(), k);
  ASSERT_EQ(got.n(), n);
  for (int64_t i = 0; i < got.panels() * k * PackedFloatMatrix::kPanel; ++i) {
    ASSERT_EQ(want.data()[i], got.data()[i]) << i;  // zero padding included
  }
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(got.At(5, j), table[rows[j] * k + 5]);
}

// A row's bits do not depend on the rows around it or on the threads: the same sentence gives
// the same translation in any batch.
TEST(FloatGemmTest, RowsIndependentOfBatchAndThreads) {
  if (!HasFloatGemmKernel()) GTEST_SKIP() << "no float GEMM kernel here";
  std::mt19937 rng(9);
  const int64_t m = 77, k = 256, n = 300;
  std::vector<float> a = Random(m * k, rng), w = Random(k * n, rng, 0.1f);
  const PackedFloatMatrix b(w.data(), k, n, false);
  std::vector<float> all(m * n), one(n);
  const int threads = NumThreads();
  SetNumThreads(2);
  FloatGemm(a.data(), m, k, b, FloatEpilogue(), all.data(), n);
  SetNumThreads(1);
  for (int64_t i : {0, 5, 41, 76}) {
    FloatGemm(a.data() + i * k, 1, k, b, FloatEpilogue(), one.data(), n);
    ExpectBitsEqual(std::vector<float>(all.begin() + i * n, all.begin() + (i + 1) * n), one,
                    "row " + std::to_string(i));
  }
  SetNumThreads(threads);
}

}  // namespace
}  // namespace tern::cpu
