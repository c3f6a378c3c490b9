// Mixed precision on the CPU: float32 rounded to bf16 and fp16 as the GPU's conversions round
// (checked against the F16C instructions for fp16), their 16-bit patterns, and products with
// bf16/fp16 operands (rounded by Gemm or ahead by RoundOperand) equal float32 products of the
// rounded operands (to the order of the sums, with AVX512-BF16's kernel).
#include "tensor/low_precision.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/cpu/bf16_gemm.h"
#include "tensor/ops.h"
#include "tests/tensor/random_tensor.h"

namespace tern {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint32_t Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

TEST(LowPrecisionTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(RoundToBFloat16(1.f), 1.f);
  EXPECT_EQ(RoundToBFloat16(1.f + std::ldexp(1.f, -8)), 1.f);  // tie: the even one, down
  EXPECT_EQ(RoundToBFloat16(1.f + 3 * std::ldexp(1.f, -8)), 1.f + std::ldexp(1.f, -6));  // up
  EXPECT_EQ(RoundToBFloat16(1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -20)),
            1.f + std::ldexp(1.f, -7));  // past the tie
  EXPECT_EQ(RoundToBFloat16(-3.14159f), -3.140625f);
  EXPECT_EQ(Bits(RoundToBFloat16(-0.f)), Bits(-0.f));
  EXPECT_TRUE(std::isinf(RoundToBFloat16(std::numeric_limits<float>::max())));
  EXPECT_TRUE(std::isnan(RoundToBFloat16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(RoundToBFloat16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  // Every result has only bf16's 8 bits of significand.
  std::mt19937 rng(1);
  for (int i = 0; i < 100000; ++i) {
    const float x = FromBits(rng() & 0x7F7FFFFFu);  // finite, not past the largest bf16
    EXPECT_EQ(Bits(RoundToBFloat16(x)) & 0xFFFFu, 0u) << x;
  }
}

__attribute__((target("f16c"))) float HardwareHalf(float x) {
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT);
  return _mm_cvtss_f32(_mm_cvtph_ps(h));
}

TEST(LowPrecisionTest, Float16MatchesTheF16cInstructions) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  std::vector<float> values = {0.f,      -0.f,  1.f,      65504.f,    65519.99f, 65520.f,
                               -65520.f, 1e-8f, 2.98e-8f, 2.99e-8f,   5.96e-8f,  6.1e-5f,
                               6.09e-5f, 1e30f, -1e-30f,  1.0004883f, 1.0014648f};
  std::mt19937 rng(2);
  for (int i = 0; i < 400000; ++i) {
    // Exponents around half's range (2^-26 .. 2^17), any significand, either sign.
    const uint32_t exponent = 101 + rng() % 43;
    values.push_back(FromBits((rng() & 0x807FFFFFu) | (exponent << 23)));
  }
  values.push_back(std::numeric_limits<float>::infinity());
  int reported = 0;
  for (float x : values) {
    const float want = HardwareHalf(x), got = RoundToFloat16(x);
    if (Bits(want) != Bits(got) && reported++ < 5)
      ADD_FAILURE() << "x " << x << " (bits " << std::hex << Bits(x) << "): F16C " << want
                    << ", ours " << got;
  }
  EXPECT_TRUE(std::isnan(RoundToFloat16(std::numeric_limits<float>::quiet_NaN())));
}

__attribute__((target("f16c"))) uint16_t HardwareHalfBits(float x) {
  return static_cast<uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT), 0));
}

TEST(LowPrecisionTest, Float16BitsAreTheF16cInstructionsBits) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  std::mt19937 rng(3);
  int reported = 0;
  for (int i = 0; i < 400000; ++i) {
    const uint32_t exponent = 101 + rng() % 43;  // around half's range, subnormals and overflow
    const float x = FromBits((rng() & 0x807FFFFFu) | (exponent << 23));
    const uint16_t want = HardwareHalfBits(x), got = Float16Bits(x);
    if (want != got && reported++ < 5)
      ADD_FAILURE() << "x " << x << ": F16C " << std::hex << want << ", ours " << got;
  }
  EXPECT_EQ(Float16Bits(-0.f), 0x8000u);
  EXPECT_EQ(Float16Bits(std::numeric_limits<float>::infinity()), 0x7C00u);
  EXPECT_TRUE(std::isnan(FromFloat16Bits(Float16Bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(FromBFloat16Bits(BFloat16Bits(FromBits(0x7F800001u)))));  // not inf
}

// Every 16-bit pattern but NaN's reads back as a float that rounds to the same bits, and that
// float is what RoundTo gives: the stored operand holds exactly the rounded value.
TEST(LowPrecisionTest, SixteenBitPatternsRoundTrip) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float half = FromFloat16Bits(bits), bf16 = FromBFloat16Bits(bits);
    if (!std::isnan(half)) {
      ASSERT_EQ(Float16Bits(half), bits) << std::hex << h;
      ASSERT_EQ(Bits(RoundToFloat16(half)), Bits(half)) << std::hex << h;
    }
    if (!std::isnan(bf16)) {
      ASSERT_EQ(BFloat16Bits(bf16), bits) << std::hex << h;
      ASSERT_EQ(Bits(RoundToBFloat16(bf16)), Bits(bf16)) << std::hex << h;
    }
  }
}

using testing::RandomTensor;

Tensor Rounded(const Tensor& x, DType type) {
  Tensor out = Tensor::Empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) out.f32()[i] = RoundTo(type, x.f32()[i]);
  return out;
}

// The float product of the rounded operands: exactly the BLAS's (the emulation), or on a CPU with
// AVX512-BF16 a bf16 product from its own kernel (cpu/bf16_gemm.h, whose bits its own test
// checks), which sums the same exact products in another order.
void ExpectProduct(const Tensor& got, const Tensor& want, DType type, const std::string& what) {
  if (type != DType::kBFloat16 || !cpu::HasBf16GemmKernel()) {
    EXPECT_EQ(got.ToVector(), want.ToVector()) << what;
    return;
  }
  const std::vector<float> g = got.ToVector(), w = want.ToVector();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(g[i], w[i], 1e-4f * (1.f + std::abs(w[i]))) << what << " at " << i;
  }
}

class MixedGemmTest : public ::testing::TestWithParam<DType> {};

TEST_P(MixedGemmTest, EqualsTheFloatProductOfRoundedOperands) {
  const DType type = GetParam();
  const int m = 33, k = 70, n = 41;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, 2);
      Tensor mixed = RandomTensor({m, n}, 3), want = RandomTensor({m, n}, 3),
             plain = RandomTensor({m, n}, 3);
      Gemm(a, ta, b, tb, mixed, 1.5f, 0.5f, type);
      Gemm(Rounded(a, type), ta, Rounded(b, type), tb, want, 1.5f, 0.5f);
      Gemm(a, ta, b, tb, plain, 1.5f, 0.5f);
      ExpectProduct(mixed, want, type, "mixed " + std::to_string(ta) + std::to_string(tb));
      EXPECT_NE(mixed.ToVector(), plain.ToVector()) << "the operands were not rounded";
      // Operands rounded ahead (RoundOperand), one or both, give the same product.
      Tensor a16 = Tensor::Empty(a.shape(), type), b16 = Tensor::Empty(b.shape(), type);
      RoundOperand(a, a16);
      RoundOperand(b, b16);
      Tensor ahead = RandomTensor({m, n}, 3), one_ahead = RandomTensor({m, n}, 3);
      const int64_t before = OperandRoundings();
      Gemm(a16, ta, b16, tb, ahead, 1.5f, 0.5f, type);
      EXPECT_EQ(OperandRoundings(), before) << "an operand rounded ahead was rounded again";
      Gemm(a, ta, b16, tb, one_ahead, 1.5f, 0.5f, type);
      EXPECT_EQ(OperandRoundings(), before + a.numel());
      ExpectProduct(ahead, want, type, "ahead " + std::to_string(ta) + std::to_string(tb));
      ExpectProduct(one_ahead, want, type, "one ahead " + std::to_string(ta) + std::to_string(tb));
      EXPECT_EQ(ahead.ToVector(), mixed.ToVector()) << "rounded ahead or in the product: the same";
    }
  }
  // Batched, and a rank-3 operand times a matrix.
  Tensor a = RandomTensor({4, 9, 17}, 4), b = RandomTensor({4, 17, 6}, 5);
  Tensor mixed = Tensor::Zeros({4, 9, 6}), want = Tensor::Zeros({4, 9, 6});
  Gemm(a, false, b, false, mixed, 1.f, 0.f, type);
  Gemm(Rounded(a, type), false, Rounded(b, type), false, want);
  ExpectProduct(mixed, want, type, "batched");
  Tensor w = RandomTensor({6, 17}, 6);
  Tensor flat = Tensor::Zeros({4, 9, 6}), flat_want = Tensor::Zeros({4, 9, 6});
  Gemm(a, false, w, true, flat, 1.f, 0.f, type);
  Gemm(Rounded(a, type), false, Rounded(w, type), true, flat_want);
  ExpectProduct(flat, flat_want, type, "rank 3 by a matrix");
  Tensor a16 = Tensor::Empty(a.shape(), type), w16 = Tensor::Empty(w.shape(), type),
         b16 = Tensor::Empty(b.shape(), type);
  RoundOperand(a, a16);
  RoundOperand(w, w16);
  RoundOperand(b, b16);
  Tensor flat_ahead = Tensor::Zeros({4, 9, 6}), batched_ahead = Tensor::Zeros({4, 9, 6});
  Gemm(a16, false, w16, true, flat_ahead, 1.f, 0.f, type);
  Gemm(a16, false, b16, false, batched_ahead, 1.f, 0.f, type);
  EXPECT_EQ(flat_ahead.ToVector(), flat.ToVector());
  EXPECT_EQ(batched_ahead.ToVector(), mixed.ToVector());
}

INSTANTIATE_TEST_SUITE_P(Types, MixedGemmTest, ::testing::Values(DType::kBFloat16, DType::kFloat16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace tern
