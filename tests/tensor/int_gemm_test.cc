// The integer GEMM: every kernel this CPU runs against the exact scalar reference (bit for bit),
// the reference against the float product (quantization error only), and the overflow bound.
#include "tensor/cpu/int_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/cpu/int_gemm_kernel.h"

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

// Awkward shapes: m = 1, odd k, k and n off the 2/4 and 16-column blocks, tiny and wide; m
// around the row tiles (4 and 6 rows, and every leftover count after them).
const Shape3 kShapes[] = {{1, 1, 1},    {1, 3, 5},    {1, 64, 16},    {1, 257, 33},
                          {2, 31, 17},  {3, 130, 47}, {4, 512, 64},   {5, 100, 200},
                          {6, 40, 48},  {7, 6, 129},  {8, 256, 255},  {9, 33, 80},
                          {11, 90, 70}, {12, 64, 17}, {16, 1000, 31}, {33, 77, 65}};

// A packing with one scale for the whole matrix (no column scales).
std::unique_ptr<PackedIntMatrix> PerTensor(IntType type, const std::vector<float>& w, int64_t k,
                                           int64_t n, bool transposed) {
  std::vector<int16_t> q(k * n);
  const float scale = QuantizeWeightMatrix(type, w.data(), k, k * n, q.data());
  return std::make_unique<PackedIntMatrix>(type, q.data(), k, n, scale, transposed);
}

void ExpectKernelsMatchReference(IntType type, bool transposed, bool per_tensor = false) {
  std::mt19937 rng(7);
  for (const Shape3& s : kShapes) {
    std::vector<float> a = Random(s.m * s.k, rng), w = Random(s.k * s.n, rng, 0.1f);
    std::vector<float> bias = Random(s.n, rng);
    auto b = per_tensor ? PerTensor(type, w, s.k, s.n, transposed)
                        : PackedIntMatrix::FromFloat(type, w.data(), s.k, s.n, transposed);
    ASSERT_EQ(b->column_unquant() == nullptr, per_tensor);
    const int64_t ldc = s.n + 3;  // C rows wider than n: the kernels must stay inside n
    std::vector<float> want(s.m * ldc, -7.f);
    IntGemmReference(a.data(), s.m, *b, bias.data(), want.data(), ldc);
    for (IntGemmIsa isa : SupportedIntGemmIsas()) {
      for (const float* bias_ptr :
           {static_cast<const float*>(bias.data()), static_cast<const float*>(nullptr)}) {
        std::vector<float> ref(s.m * ldc, -7.f), got(s.m * ldc, -7.f);
        IntGemmReference(a.data(), s.m, *b, bias_ptr, ref.data(), ldc);
        IntGemmWithIsa(isa, a.data(), s.m, *b, bias_ptr, got.data(), ldc);
        ASSERT_EQ(0, std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)))
            << IntTypeName(type) << " " << IntGemmIsaName(isa) << " m=" << s.m << " k=" << s.k
            << " n=" << s.n << " bias=" << (bias_ptr != nullptr);
      }
    }
  }
}

TEST(IntGemmTest, Int16KernelsMatchReference) {
  ExpectKernelsMatchReference(IntType::kInt16, false);
}
TEST(IntGemmTest, Int8KernelsMatchReference) { ExpectKernelsMatchReference(IntType::kInt8, false); }
TEST(IntGemmTest, TransposedPackingMatchesReference) {
  ExpectKernelsMatchReference(IntType::kInt16, true);
  ExpectKernelsMatchReference(IntType::kInt8, true);
}
TEST(IntGemmTest, PerTensorScaleMatchesReference) {
  for (IntType type : {IntType::kInt16, IntType::kInt8}) {
    ExpectKernelsMatchReference(type, false, /*per_tensor=*/true);
    ExpectKernelsMatchReference(type, true, /*per_tensor=*/true);
  }
}

TEST(IntGemmTest, ColumnScalesKeepNarrowColumnsPrecise) {
  // Columns whose ranges differ 100-fold: a per-tensor scale leaves the narrow ones few bits.
  std::mt19937 rng(11);
  const int64_t m = 4, k = 256, n = 64;
  std::vector<float> a = Random(m * k, rng), w = Random(k * n, rng);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; j += 2) w[i * n + j] *= 0.01f;
  }
  for (IntType type : {IntType::kInt16, IntType::kInt8}) {
    auto columns = PackedIntMatrix::FromFloat(type, w.data(), k, n, false);
    auto tensor = PerTensor(type, w, k, n, false);
    std::vector<float> c_col(m * n), c_tensor(m * n);
    IntGemm(a.data(), m, *columns, nullptr, c_col.data(), n);
    IntGemm(a.data(), m, *tensor, nullptr, c_tensor.data(), n);
    double err_col = 0, err_tensor = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; j += 2) {  // the narrow columns
        double exact = 0;
        for (int64_t kk = 0; kk < k; ++kk) exact += double{a[i * k + kk]} * w[kk * n + j];
        err_col = std::max(err_col, std::fabs(c_col[i * n + j] - exact));
        err_tensor = std::max(err_tensor, std::fabs(c_tensor[i * n + j] - exact));
      }
    }
    EXPECT_LT(err_col * 10, err_tensor) << IntTypeName(type);
  }
}

TEST(IntGemmTest, TransposedPackingHoldsTheSameMatrix) {
  std::mt19937 rng(3);
  const int64_t k = 37, n = 21;
  std::vector<float> w = Random(k * n, rng), wt(k * n);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) wt[j * k + i] = w[i * n + j];
  }
  for (IntType type : {IntType::kInt16, IntType::kInt8}) {
    auto b = PackedIntMatrix::FromFloat(type, w.data(), k, n, false);
    auto bt = PackedIntMatrix::FromFloat(type, wt.data(), k, n, true);
    EXPECT_EQ(b->scale(), bt->scale());
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(b->At(i, j), bt->At(i, j));
    }
  }
}

// The reference computes the float product up to quantization error.
TEST(IntGemmTest, ReferenceApproximatesFloatProduct) {
  std::mt19937 rng(11);
  const int64_t m = 4, k = 512, n = 96;
  std::vector<float> a = Random(m * k, rng), w = Random(k * n, rng, 0.05f);
  for (IntType type : {IntType::kInt16, IntType::kInt8}) {
    auto b = PackedIntMatrix::FromFloat(type, w.data(), k, n, false);
    std::vector<float> c(m * n);
    IntGemmReference(a.data(), m, *b, nullptr, c.data(), n);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0;
        for (int64_t kk = 0; kk < k; ++kk) exact += double(a[i * k + kk]) * w[kk * n + j];
        err += (c[i * n + j] - exact) * (c[i * n + j] - exact);
        norm += exact * exact;
      }
    }
    const double rel = std::sqrt(err / norm);
    EXPECT_LT(rel, type == IntType::kInt16 ? 2e-3 : 3e-2) << IntTypeName(type);
    EXPECT_GT(rel, 0.0) << "quantization should not be exact on random data";
  }
}

// The weights' int16 range leaves room for k terms at full activation magnitude.
TEST(IntGemmTest, Int16WeightRangeLeavesRoomForKTerms) {
  for (int64_t k : {1, 2, 3, 255, 256, 512, 1000, 1024, 2048, 4096, 32768}) {
    const int64_t wr = WeightQuantRange(IntType::kInt16, k);
    EXPECT_LE(k * wr * wr, std::numeric_limits<int32_t>::max()) << "k=" << k;
    EXPECT_GE(wr, 255) << "k=" << k;
  }
}

// Rows that are not all peaks get more than the weights' bits (each row's scale is bounded by the
// sum of its magnitudes); the worst weights for such a row (every weight at full range with the
// sign of its activation) still accumulate inside int32 on every kernel, as the reference checks.
TEST(IntGemmTest, Int16RowScalesCannotOverflowWithAdversarialWeights) {
  for (int64_t k : {256, 1024, 4096}) {
    const int64_t n = 20;
    std::mt19937 rng(k);
    std::normal_distribution<float> gauss(0.f, 1.f);
    std::vector<float> a(2 * k);
    for (float& x : a) x = gauss(rng);
    for (int64_t kk = 0; kk < k; ++kk) a[k + kk] = kk % 7 == 0 ? 3.f : 0.01f;  // peaky row
    std::vector<float> w(k * n);
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < n; ++j) w[kk * n + j] = a[kk] < 0 ? -1.f : 1.f;
    }
    auto b = PackedIntMatrix::FromFloat(IntType::kInt16, w.data(), k, n, false);
    std::vector<float> ref(2 * n), got(2 * n);
    IntGemmReference(a.data(), 2, *b, nullptr, ref.data(), n);
    double exact = 0;
    for (int64_t kk = 0; kk < k; ++kk) exact += std::fabs(a[kk]);
    EXPECT_NEAR(ref[0], exact, 2e-4 * exact) << "k=" << k;
    for (IntGemmIsa isa : SupportedIntGemmIsas()) {
      IntGemmWithIsa(isa, a.data(), 2, *b, nullptr, got.data(), n);
      EXPECT_EQ(ref, got) << IntGemmIsaName(isa) << " k=" << k;
    }
  }
}

// All-maximal, same-sign inputs: the worst case for the accumulator, on every kernel.
TEST(IntGemmTest, WorstCaseMagnitudesMatchReference) {
  const int64_t m = 3, k = 4096, n = 40;
  std::vector<float> a(m * k, -1.f), w(k * n, -1.f);
  for (IntType type : {IntType::kInt16, IntType::kInt8}) {
    auto b = PackedIntMatrix::FromFloat(type, w.data(), k, n, false);
    std::vector<float> ref(m * n), got(m * n);
    IntGemmReference(a.data(), m, *b, nullptr, ref.data(), n);
    EXPECT_NEAR(ref[0], static_cast<float>(k), 1e-3f * k);
    for (IntGemmIsa isa : SupportedIntGemmIsas()) {
      IntGemmWithIsa(isa, a.data(), m, *b, nullptr, got.data(), n);
      EXPECT_EQ(ref, got) << IntTypeName(type) << " " << IntGemmIsaName(isa);
    }
  }
}

// Large enough to be split over the thread pool; the split must not change a bit.
TEST(IntGemmTest, ThreadedProductMatchesReference) {
  SetNumThreads(2);
  std::mt19937 rng(5);
  const int64_t m = 64, k = 384, n = 520;
  std::vector<float> a = Random(m * k, rng), w = Random(k * n, rng);
  for (IntType type : {IntType::kInt16, IntType::kInt8}) {
    auto b = PackedIntMatrix::FromFloat(type, w.data(), k, n, false);
    std::vector<float> ref(m * n), got(m * n);
    IntGemmReference(a.data(), m, *b, nullptr, ref.data(), n);
    IntGemm(a.data(), m, *b, nullptr, got.data(), n);
    EXPECT_EQ(ref, got) << IntTypeName(type);
  }
  SetNumThreads(1);
}

// A shortlist's matrix: gathered columns (any order, repeated) give the full product's bits.
TEST(IntGemmTest, GatheredColumnsGiveTheFullProductsColumns) {
  std::mt19937 rng(13);
  const int64_t m = 6, k = 70, n = 75;
  std::vector<float> a = Random(m * k, rng), w = Random(k * n, rng, 0.2f), bias = Random(n, rng);
  const std::vector<int32_t> columns = {74, 0,  3,  3,  17, 16, 15, 40, 41, 42, 43,
                                        44, 45, 46, 47, 48, 49, 50, 51, 1,  2,  60};
  std::vector<float> gathered_bias;
  for (int32_t c : columns) gathered_bias.push_back(bias[c]);
  for (IntType type : {IntType::kInt16, IntType::kInt8}) {
    auto full = PackedIntMatrix::FromFloat(type, w.data(), k, n, /*transposed=*/true);
    std::unique_ptr<PackedIntMatrix> part;
    // A wider gather first, so the second reuses (and must fully overwrite) its storage.
    std::vector<int32_t> wide(n);
    for (int64_t j = 0; j < n; ++j) wide[j] = static_cast<int32_t>(n - 1 - j);
    full->GatherColumns(wide, &part);
    const PackedIntMatrix* storage = part.get();
    full->GatherColumns(columns, &part);
    EXPECT_EQ(part.get(), storage);
    ASSERT_EQ(part->n(), static_cast<int64_t>(columns.size()));
    for (IntGemmIsa isa : SupportedIntGemmIsas()) {
      std::vector<float> want(m * n), got(m * columns.size());
      IntGemmWithIsa(isa, a.data(), m, *full, bias.data(), want.data(), n);
      IntGemmWithIsa(isa, a.data(), m, *part, gathered_bias.data(), got.data(), columns.size());
      for (int64_t i = 0; i < m; ++i) {
        for (size_t j = 0; j < columns.size(); ++j) {
          ASSERT_EQ(want[i * n + columns[j]], got[i * columns.size() + j])
              << IntTypeName(type) << " " << IntGemmIsaName(isa) << " row " << i << " column "
              << columns[j];
        }
      }
    }
    EXPECT_DEATH(full->GatherColumns({0, static_cast<int32_t>(n)}, &part), "outside");
  }
}

// The AVX2 quantization passes against the scalar ones the reference uses: the same bits for
// every length (vector bodies and tails), scale, NaN, infinities and values past the range.
TEST(IntGemmTest, VectorQuantizationMatchesScalar) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  namespace ig = int_gemm_internal;
  std::mt19937 rng(11);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k <= 70; ++k) {
    std::vector<float> x = Random(k, rng, 3.f);
    if (k > 5) x[k / 2] = nan;
    if (k > 9) x[k / 3] = -inf;
    if (k > 20) x[k - 1] = 1e9f;
    if (k > 30) x[7] = -0.5f;  // a rounding tie
    const ig::RowStats want = ig::RowStatsScalar(x.data(), k), got = ig::RowStatsAvx2(x.data(), k);
    EXPECT_EQ(want.max_abs, got.max_abs) << "k=" << k;
    EXPECT_EQ(want.max_abs, ig::MaxAbsAvx2(x.data(), k)) << "k=" << k;
    EXPECT_EQ(0, std::memcmp(&want.sum_abs, &got.sum_abs, sizeof(double))) << "k=" << k;
    for (bool int16 : {true, false}) {
      for (float scale : {1.f, 0.37f, 4000.f}) {
        std::vector<int16_t> a(k + 1, 99), b(k + 1, 99);  // int8 values use the first half
        ig::QuantizeValuesScalar(int16, x.data(), k, scale, a.data());
        ig::QuantizeValuesAvx2(int16, x.data(), k, scale, b.data());
        EXPECT_EQ(a, b) << "k=" << k << " int16=" << int16 << " scale=" << scale;
      }
    }
  }
}

// A ReLU layer's output as the second product sees it: rows in beams of 4 alike (one pattern of
// zeros per beam, each row's own values), 3 of 4 k-pairs zero in the whole beam and a few more
// zeros per row; so a tile of 4 lists about a quarter of its groups.
std::vector<float> BeamsOfReluRows(int64_t m, int64_t k, std::mt19937& rng) {
  std::vector<float> a = Random(m * k, rng);
  std::uniform_int_distribution<int> die(0, 3);
  for (int64_t beam = 0; beam < m; beam += 4) {
    for (int64_t j = 0; j < k; j += 2) {
      const bool off = die(rng) != 0;
      for (int64_t r = beam; r < std::min(m, beam + 4); ++r) {
        for (int64_t jj = j; jj < std::min(k, j + 2); ++jj) {
          float& x = a[r * k + jj];
          x = off || x < -1.f ? 0.f : std::fabs(x);
        }
      }
    }
  }
  return a;
}

// Skipping A's zero groups gives the dense kernels' bits (and the reference's), on every ISA and
// type, for awkward shapes: m off the 4-row tiles, k off the groups, n off the panels.
TEST(IntGemmTest, SkippingZeroGroupsGivesTheSameBits) {
  std::mt19937 rng(17);
  for (IntType type : {IntType::kInt16, IntType::kInt8}) {
    for (const Shape3& s : kShapes) {
      const std::vector<float> a = BeamsOfReluRows(s.m, s.k, rng), w = Random(s.k * s.n, rng, 0.1f);
      const std::vector<float> bias = Random(s.n, rng);
      auto b = PackedIntMatrix::FromFloat(type, w.data(), s.k, s.n, false);
      const int64_t ldc = s.n + 3;
      std::vector<float> want(s.m * ldc, -7.f);
      IntGemmReference(a.data(), s.m, *b, bias.data(), want.data(), ldc);
      for (IntGemmIsa isa : SupportedIntGemmIsas()) {
        std::vector<float> got(s.m * ldc, -7.f);
        IntGemmWithIsa(isa, a.data(), s.m, *b, bias.data(), got.data(), ldc,
                       /*skip_zero_groups=*/true);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << IntTypeName(type) << " " << IntGemmIsaName(isa) << " m=" << s.m << " k=" << s.k
            << " n=" << s.n;
      }
    }
  }
}

// The lists the listed tiles run over: the groups with a non-zero cell in some row, in order;
// the AVX2 form gives the scalar one's.
TEST(IntGemmTest, ZeroGroupListsHoldTheNonZeroGroups) {
  namespace ig = int_gemm_internal;
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2");
  std::mt19937 rng(19);
  for (int64_t groups : {0, 1, 7, 8, 9, 31, 64, 100}) {
    for (int64_t rows = 1; rows <= 4; ++rows) {
      const int64_t row_bytes = groups * ig::kCellBytes + 4;  // rows apart by more than a row
      std::vector<uint8_t> cells(rows * row_bytes + 32, 0);
      std::vector<int32_t> want;
      for (int64_t g = 0; g < groups; ++g) {
        if (rng() % 3 != 0) continue;
        cells[(rng() % rows) * row_bytes + g * ig::kCellBytes + rng() % 4] = 1 + rng() % 255;
        want.push_back(static_cast<int32_t>(g));
      }
      std::vector<int32_t> got(groups + 1, -1);
      got.resize(ig::ListNonZeroGroupsScalar(cells.data(), rows, row_bytes, groups, got.data()));
      EXPECT_EQ(got, want) << "groups=" << groups << " rows=" << rows;
      if (!avx2) continue;
      std::vector<int32_t> vec(groups + 1, -1);
      vec.resize(ig::ListNonZeroGroupsAvx2(cells.data(), rows, row_bytes, groups, vec.data()));
      EXPECT_EQ(vec, want) << "groups=" << groups << " rows=" << rows;
    }
  }
}

TEST(IntGemmTest, IsaNamesParseOrFailClearly) {
  for (IntGemmIsa isa : SupportedIntGemmIsas()) {
    EXPECT_EQ(ParseIntGemmIsa(IntGemmIsaName(isa)), isa);
  }
  EXPECT_EQ(ParseIntGemmIsa("sse2"), IntGemmIsa::kSse2);
  try {
    ParseIntGemmIsa("avx9000");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not known"), std::string::npos) << e.what();
  }
  const std::vector<IntGemmIsa> supported = SupportedIntGemmIsas();
  if (supported.back() != IntGemmIsa::kAvx512vnni) {
    try {
      ParseIntGemmIsa("avx512vnni");
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not support"), std::string::npos) << e.what();
    }
  }
}

TEST(IntGemmTest, ZeroRowsGiveTheBias) {
  const int64_t k = 10, n = 5;
  std::vector<float> a(2 * k, 0.f), w(k * n, 0.5f), bias = {1, 2, 3, 4, 5}, c(2 * n);
  auto b = PackedIntMatrix::FromFloat(IntType::kInt8, w.data(), k, n, false);
  IntGemm(a.data(), 2, *b, bias.data(), c.data(), n);
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(c[j], bias[j]);
}

}  // namespace
}  // namespace tern::cpu
