// The bf16 GEMM: the AVX512-BF16 kernel against its scalar definition bit for bit (every
// transpose, bf16 and float32 operands, odd k, alpha and beta, any thread count); the AMX kernel
// bit for bit where every sum is exact (small integers) and to float32 rounding elsewhere; the
// definition against the product of the rounded operands in double, and Gemm's bf16 products
// against the emulation.
#include "tensor/cpu/bf16_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "tensor/cpu/bf16_gemm_kernel.h"
#include "tensor/low_precision.h"
#include "tensor/ops.h"

namespace tern::cpu {
namespace {

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint16_t> Bf16Bits(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = BFloat16Bits(x[i]);
  return out;
}

struct Case {
  int64_t m, n, k;
};
// Rows around the 8-row tiles, columns off the 16-column panels, odd and even k, and products
// large enough to be split over threads.
const Case kCases[] = {{1, 1, 1},    {1, 17, 3},    {3, 40, 64},   {5, 31, 7},     {8, 16, 2},
                       {9, 129, 33}, {13, 70, 256}, {64, 300, 65}, {100, 48, 513}, {7, 20, 1030}};

TEST(Bf16GemmTest, KernelMatchesDefinitionBitForBit) {
  if (!HasBf16GemmKernel()) GTEST_SKIP() << "no AVX512-BF16 here";
  std::mt19937 rng(5);
  const int threads = NumThreads();
  for (const Case& s : kCases) {
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      const std::vector<float> a = Random(s.m * s.k, rng), b = Random(s.k * s.n, rng);
      const std::vector<uint16_t> a16 = Bf16Bits(a), b16 = Bf16Bits(b);
      const int64_t lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n, ldc = s.n + 5;
      for (bool bf16 : {false, true}) {
        const Bf16Operand oa{bf16 ? static_cast<const void*>(a16.data()) : a.data(), bf16, lda, ta};
        const Bf16Operand ob{bf16 ? static_cast<const void*>(b16.data()) : b.data(), bf16, ldb, tb};
        for (auto [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{0.5f, 1.f}}) {
          std::vector<float> want(s.m * ldc, 2.f), got(s.m * ldc, 2.f);
          Bf16GemmReference(oa, ob, s.m, s.n, s.k, alpha, beta, want.data(), ldc);
          for (int t : {1, 2}) {
            SetNumThreads(t);
            std::fill(got.begin(), got.end(), 2.f);
            Bf16GemmWith(Bf16Kernel::kAvx512Bf16, oa, ob, s.m, s.n, s.k, alpha, beta, got.data(),
                         ldc);
            for (size_t i = 0; i < want.size(); ++i) {
              ASSERT_EQ(0, std::memcmp(&want[i], &got[i], 4))
                  << "m" << s.m << " n" << s.n << " k" << s.k << " layout " << layout
                  << (bf16 ? " bf16" : " f32") << " beta " << beta << " threads " << t << " at "
                  << i << ": " << want[i] << " vs " << got[i];
            }
          }
        }
      }
    }
  }
  SetNumThreads(threads);
}

// Integers in [-3, 3]: every product and every sum of up to 2,000 of them is exact in float32,
// so any order of adds gives the same bits.
std::vector<float> SmallIntegers(int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-3, 3);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(dist(rng));
  return v;
}

// The AMX kernel against the definition, on every case, layout, operand type, alpha and beta and
// thread count: bit for bit where the sums are exact; elsewhere within both sides' float32
// rounding of the k products' sums (2k roundings of at most 2^-24 each, relative to the sum of
// the products' magnitudes). Cases beyond the AVX-512 kernel's: AMX's 16-row tiles and 16-cell
// steps, 2 x 2 blocks, and k's last cells fewer than 16.
TEST(Bf16GemmTest, AmxKernelMatchesTheDefinition) {
  if (!HasAmxBf16Kernel()) GTEST_SKIP() << "no AMX-BF16 here (or Linux withholds its tiles)";
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  cases.insert(cases.end(),
               {{16, 16, 32}, {17, 33, 34}, {32, 32, 64}, {47, 65, 95}, {90, 200, 128}});
  std::mt19937 rng(9);
  const int threads = NumThreads();
  for (bool exact : {true, false}) {
    for (const Case& s : cases) {
      for (int layout = 0; layout < 4; ++layout) {
        const bool ta = layout & 1, tb = layout & 2;
        const std::vector<float> a = exact ? SmallIntegers(s.m * s.k, rng) : Random(s.m * s.k, rng);
        const std::vector<float> b = exact ? SmallIntegers(s.k * s.n, rng) : Random(s.k * s.n, rng);
        const std::vector<uint16_t> a16 = Bf16Bits(a), b16 = Bf16Bits(b);
        const int64_t lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n, ldc = s.n + 5;
        for (bool bf16 : {false, true}) {
          const Bf16Operand oa{bf16 ? static_cast<const void*>(a16.data()) : a.data(), bf16, lda,
                               ta};
          const Bf16Operand ob{bf16 ? static_cast<const void*>(b16.data()) : b.data(), bf16, ldb,
                               tb};
          for (auto [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{0.5f, 1.f}}) {
            std::vector<float> want(s.m * ldc, 2.f), got(s.m * ldc, 2.f), first;
            Bf16GemmReference(oa, ob, s.m, s.n, s.k, alpha, beta, want.data(), ldc);
            for (int t : {1, 2}) {
              SetNumThreads(t);
              std::fill(got.begin(), got.end(), 2.f);
              Bf16GemmWith(Bf16Kernel::kAmx, oa, ob, s.m, s.n, s.k, alpha, beta, got.data(), ldc);
              if (first.empty()) first = got;
              ASSERT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * 4))
                  << "threads changed the bits, m" << s.m << " n" << s.n << " k" << s.k;
              for (int64_t i = 0; i < s.m; ++i) {
                for (int64_t j = 0; j < ldc; ++j) {
                  const int64_t at = i * ldc + j;
                  double magnitude = 0;
                  for (int64_t kk = 0; j < s.n && kk < s.k; ++kk) {
                    magnitude += std::abs(static_cast<double>(a[ta ? kk * lda + i : i * lda + kk]) *
                                          b[tb ? j * ldb + kk : kk * ldb + j]);
                  }
                  const double bound = exact ? 0 : alpha * (2.0 * s.k + 2) * 0x1p-24 * magnitude;
                  ASSERT_LE(std::abs(static_cast<double>(want[at]) - got[at]), bound)
                      << (exact ? "exact " : "") << "m" << s.m << " n" << s.n << " k" << s.k
                      << " layout " << layout << (bf16 ? " bf16" : " f32") << " beta " << beta
                      << " threads " << t << " at (" << i << ", " << j << "): " << want[at]
                      << " vs " << got[at];
                }
              }
            }
          }
        }
      }
    }
  }
  SetNumThreads(threads);
}

// The vector packers round float32 as BFloat16Bits does: to nearest even, overflow to infinity,
// NaNs quieted; denormals become zeros of their sign, which vdpbf16ps makes of a bf16 denormal.
TEST(Bf16GemmTest, PackersRoundAsBFloat16Bits) {
  if (!HasBf16GemmKernel()) GTEST_SKIP() << "no AVX512-BF16 here";
  const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00001u,
                              0x7F800001u, 0xFFA00000u, 0x7F7FFFFFu, 0x7F7F8000u, 0x3F808000u,
                              0x3F818000u, 0x3F807FFFu, 0x00000001u, 0x807FFFFFu, 0x00800000u,
                              0x3F800000u, 0xC0490FDBu};
  std::mt19937 rng(11);
  std::vector<float> x = Random(77, rng);
  for (size_t i = 0; i < std::size(special); ++i) std::memcpy(&x[3 * i + 1], &special[i], 4);
  auto want = [&](float v) -> uint32_t {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if ((bits & 0x7F800000u) == 0) return (bits >> 16) & 0x8000u;  // denormal: a signed zero
    return BFloat16Bits(v);
  };
  for (int64_t k = 1; k <= static_cast<int64_t>(x.size()); ++k) {
    std::vector<uint32_t> row((k + 1) / 2 + 1, 7u), pair(k + 1, 7u);
    bf16_gemm_internal::RowCellsAvx512Bf16(x.data(), k, row.data());
    for (int64_t j = 0; j < (k + 1) / 2; ++j) {
      const uint32_t hi = 2 * j + 1 < k ? want(x[2 * j + 1]) : 0u;
      ASSERT_EQ(want(x[2 * j]) | hi << 16, row[j]) << "k " << k << " cell " << j;
    }
    EXPECT_EQ(7u, row[(k + 1) / 2]) << "wrote past the cells, k " << k;
    bf16_gemm_internal::PairCellsAvx512Bf16(x.data(), x.data() + x.size() - k, k, pair.data());
    for (int64_t i = 0; i < k; ++i) {
      ASSERT_EQ(want(x[i]) | want(x[x.size() - k + i]) << 16, pair[i]) << "k " << k << " " << i;
    }
    EXPECT_EQ(7u, pair[k]) << "wrote past the cells, k " << k;
  }
}

TEST(Bf16GemmTest, DefinitionIsTheProductOfRoundedOperands) {
  std::mt19937 rng(6);
  const int64_t m = 7, n = 19, k = 301;
  const std::vector<float> a = Random(m * k, rng), b = Random(k * n, rng);
  std::vector<float> c(m * n);
  Bf16GemmReference({a.data(), false, k, false}, {b.data(), false, n, false}, m, n, k, 1.f, 0.f,
                    c.data(), n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        sum += static_cast<double>(RoundToBFloat16(a[i * k + kk])) * RoundToBFloat16(b[kk * n + j]);
      }
      EXPECT_NEAR(c[i * n + j], sum, 1e-4 * (1 + std::abs(sum)));
    }
  }
}

// Gemm with bf16 inputs: the kernel where the CPU has it, else the emulation; the two agree to
// float32 rounding of the same exact products.
TEST(Bf16GemmTest, GemmWithBf16InputsMatchesTheEmulation) {
  std::mt19937 rng(7);
  const int64_t m = 33, n = 45, k = 130;
  const std::vector<float> av = Random(m * k, rng), bv = Random(n * k, rng);
  Tensor a = Tensor::Empty({m, k}), b = Tensor::Empty({n, k}), c = Tensor::Empty({m, n});
  std::memcpy(a.f32(), av.data(), av.size() * 4);
  std::memcpy(b.f32(), bv.data(), bv.size() * 4);
  Gemm(a, false, b, true, c, 1.f, 0.f, DType::kBFloat16);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        sum +=
            static_cast<double>(RoundToBFloat16(av[i * k + kk])) * RoundToBFloat16(bv[j * k + kk]);
      }
      EXPECT_NEAR(c.f32()[i * n + j], sum, 1e-4 * (1 + std::abs(sum)));
    }
  }
}

// A batch (a self-attention's products: one per sentence and head) configures the AMX tiles once;
// each entry keeps the bits of its own call, whatever the operands' layout and type.
TEST(Bf16GemmTest, ABatchHasTheBitsOfItsEntriesOneByOne) {
  if (!HasBf16GemmKernel()) GTEST_SKIP() << "no AVX512-BF16 here";
  std::mt19937 rng(21);
  constexpr int64_t kCount = 5;
  for (const Case& s : {Case{35, 35, 32}, Case{35, 32, 35}, Case{17, 40, 67}}) {
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      const int64_t ea = s.m * s.k, eb = s.k * s.n, ec = s.m * s.n;
      const std::vector<float> a = Random(kCount * ea, rng), b = Random(kCount * eb, rng);
      const std::vector<uint16_t> a16 = Bf16Bits(a), b16 = Bf16Bits(b);
      for (bool bf16 : {false, true}) {
        const Bf16Operand oa{bf16 ? static_cast<const void*>(a16.data()) : a.data(), bf16,
                             ta ? s.m : s.k, ta};
        const Bf16Operand ob{bf16 ? static_cast<const void*>(b16.data()) : b.data(), bf16,
                             tb ? s.k : s.n, tb};
        for (float beta : {0.f, 1.f}) {
          const std::vector<float> start = Random(kCount * ec, rng);
          std::vector<float> want = start, got = start;
          for (int64_t i = 0; i < kCount; ++i) {
            Bf16Gemm(Advance(oa, i * ea), Advance(ob, i * eb), s.m, s.n, s.k, 0.5f, beta,
                     want.data() + i * ec, s.n, /*serial=*/true);
          }
          Bf16GemmBatch(oa, ea, ob, eb, kCount, s.m, s.n, s.k, 0.5f, beta, got.data(), ec, s.n);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4))
              << "m" << s.m << " n" << s.n << " k" << s.k << " layout " << layout
              << (bf16 ? " bf16" : " f32") << " beta " << beta;
        }
      }
    }
  }
}

// A bias in the epilogue has the bits of the product followed by AddBias (c + bias, column by
// column), for each kernel and the definition, partial panels and tiles, beta 0 and 1, one and
// two threads; and GemmBias with bf16 inputs, which hands its bias to the kernel, the bits of
// Gemm and then AddBias.
TEST(Bf16GemmTest, BiasEpilogueHasTheBitsOfAddBiasAfterTheProduct) {
  if (!HasBf16GemmKernel()) GTEST_SKIP() << "no AVX512-BF16 here";
  std::vector<Bf16Kernel> kernels{Bf16Kernel::kAvx512Bf16};
  if (HasAmxBf16Kernel()) kernels.push_back(Bf16Kernel::kAmx);
  std::mt19937 rng(12);
  const int threads = NumThreads();
  for (const Case& s : {Case{5, 31, 7}, Case{17, 33, 34}, Case{47, 65, 95}, Case{90, 200, 128}}) {
    const std::vector<float> a = Random(s.m * s.k, rng), b = Random(s.k * s.n, rng);
    const std::vector<float> bias = Random(s.n, rng);
    const int64_t ldc = s.n + 3;
    const Bf16Operand oa{a.data(), false, s.k, false}, ob{b.data(), false, s.k, true};
    for (float beta : {0.f, 1.f}) {
      std::vector<float> start = Random(s.m * ldc, rng);
      std::vector<float> want = start;
      Bf16GemmReference(oa, ob, s.m, s.n, s.k, 1.f, beta, want.data(), ldc);
      std::vector<float> reference = start;
      Bf16GemmReference(oa, ob, s.m, s.n, s.k, 1.f, beta, reference.data(), ldc, bias.data());
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) want[i * ldc + j] += bias[j];
      ASSERT_EQ(0, std::memcmp(want.data(), reference.data(), want.size() * 4)) << "definition";
      for (Bf16Kernel kernel : kernels) {
        for (int t : {1, 2}) {
          SetNumThreads(t);
          std::vector<float> plain = start, biased = start;
          Bf16GemmWith(kernel, oa, ob, s.m, s.n, s.k, 1.f, beta, plain.data(), ldc);
          Bf16GemmWith(kernel, oa, ob, s.m, s.n, s.k, 1.f, beta, biased.data(), ldc, false,
                       bias.data());
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) plain[i * ldc + j] += bias[j];
          ASSERT_EQ(0, std::memcmp(plain.data(), biased.data(), plain.size() * 4))
              << Bf16KernelName(kernel) << " m" << s.m << " n" << s.n << " k" << s.k << " beta "
              << beta << " threads " << t;
        }
      }
    }
  }
  SetNumThreads(threads);
  const int64_t m = 40, n = 70, k = 48;
  Tensor x = Tensor::Empty({m, k}), w = Tensor::Empty({n, k}), bias = Tensor::Empty({n});
  for (const Tensor& t : {x, w, bias}) {
    const std::vector<float> v = Random(t.numel(), rng);
    std::memcpy(t.f32(), v.data(), v.size() * 4);
  }
  Tensor fused = Tensor::Empty({m, n}), separate = Tensor::Empty({m, n});
  GemmBias(x, false, w, true, bias, fused, DType::kBFloat16, Tensor(), kNoActivation);
  Gemm(x, false, w, true, separate, 1.f, 0.f, DType::kBFloat16);
  AddBias(separate, bias);
  EXPECT_EQ(0, std::memcmp(fused.f32(), separate.f32(), m * n * 4));
}

}  // namespace
}  // namespace tern::cpu
