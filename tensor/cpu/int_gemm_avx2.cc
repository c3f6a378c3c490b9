// Integer GEMM kernels for AVX2. int16: vpmaddwd. int8: vpmaddubsw needs an unsigned operand, so
// A's cell goes in as |a| and B's bytes take a's sign (vpsignb): |a| * sign(a) b = a b, and a pair
// sums to at most 2 * 127 * 127 < 2^15, so the int16 stage cannot saturate; vpmaddwd with ones
// then sums the pairs into int32.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "tensor/cpu/int_gemm_kernel.h"

namespace tern::cpu::int_gemm_internal {
namespace {

struct Avx2Base {
  static constexpr int kLanes = 8, kRows = 4, kPanels = 1;
  using Acc = __m256i;
  using B = __m256i;
  static Acc Init(const int32_t* offsets) {
    return offsets ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets))
                   : _mm256_setzero_si256();
  }
  static B LoadB(const uint8_t* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  }
  static void Finish(Acc acc, int32_t* out) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), acc);
  }
  static void Store(Acc acc, float unquant, const float* column, const float* bias, float* out) {
    const __m256 b = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(unquant));
    if (column) f = _mm256_mul_ps(f, _mm256_loadu_ps(column));
    _mm256_storeu_ps(out, _mm256_add_ps(f, b));
  }
};

struct Avx2Int16 : Avx2Base {
  using A = __m256i;
  static A Broadcast(int32_t cell) { return _mm256_set1_epi32(cell); }
  static void MulAdd(Acc& acc, A a, B b) { acc = _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
};

struct Avx2Int8 : Avx2Base {
  struct A {
    __m256i abs, sign;
  };
  static A Broadcast(int32_t cell) {
    const __m256i a = _mm256_set1_epi32(cell);
    return {_mm256_sign_epi8(a, a), a};
  }
  static void MulAdd(Acc& acc, const A& a, B b) {
    const __m256i pairs = _mm256_maddubs_epi16(a.abs, _mm256_sign_epi8(b, a.sign));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};

}  // namespace

RowStats RowStatsAvx2(const float* x, int64_t k) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 max_abs = _mm256_setzero_ps();
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();  // lanes 0-3 and 4-7
  int64_t i = 0;
  for (; i + kSumLanes <= k; i += kSumLanes) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    max_abs = _mm256_max_ps(a, max_abs);  // the second operand when a is NaN: NaN is ignored
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
  }
  alignas(32) float maxes[kSumLanes];
  alignas(32) double lanes[kSumLanes];
  _mm256_store_ps(maxes, max_abs);
  _mm256_store_pd(lanes, lo);
  _mm256_store_pd(lanes + 4, hi);
  RowStats s{0.f, 0.0};
  for (float v : maxes) s.max_abs = std::max(s.max_abs, v);
  for (; i < k; ++i) {  // the tail, as RowStatsScalar adds it
    const float a = std::fabs(x[i]);
    s.max_abs = std::max(s.max_abs, a);
    lanes[i % kSumLanes] += a;
  }
  s.sum_abs = ReduceLanes(lanes);
  return s;
}

void QuantizeValuesAvx2(bool int16, const float* x, int64_t k, float scale, void* q) {
  const float range = int16 ? 32767.f : 127.f;
  const __m256 s = _mm256_set1_ps(scale), hi = _mm256_set1_ps(range), lo = _mm256_set1_ps(-range);
  auto quantize = [&](const float* p) {  // 8 values to int32, as QuantizeValuesScalar does
    const __m256 v =
        _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(p), s), _MM_FROUND_CUR_DIRECTION);
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    return _mm256_cvtps_epi32(_mm256_and_ps(clamped, _mm256_cmp_ps(v, v, _CMP_ORD_Q)));
  };
  int64_t i = 0;
  if (int16) {
    auto* out = static_cast<int16_t*>(q);
    for (; i + 16 <= k; i += 16) {
      // packs works within 128-bit halves: (a0-3 b0-3 | a4-7 b4-7); the permute restores order.
      const __m256i packed = _mm256_packs_epi32(quantize(x + i), quantize(x + i + 8));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_permute4x64_epi64(packed, 0xd8));
    }
    QuantizeValuesScalar(true, x + i, k - i, scale, out + i);
  } else {
    auto* out = static_cast<int8_t*>(q);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (; i + 32 <= k; i += 32) {
      const __m256i ab = _mm256_packs_epi32(quantize(x + i), quantize(x + i + 8));
      const __m256i cd = _mm256_packs_epi32(quantize(x + i + 16), quantize(x + i + 24));
      // Bytes in dwords a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7.
      const __m256i packed = _mm256_packs_epi16(ab, cd);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_permutevar8x32_epi32(packed, order));
    }
    QuantizeValuesScalar(false, x + i, k - i, scale, out + i);
  }
}

void KernelAvx2Int16(const KernelArgs& g) { RunKernel<Avx2Int16>(g); }
void KernelAvx2Int8(const KernelArgs& g) { RunKernel<Avx2Int8>(g); }

}  // namespace tern::cpu::int_gemm_internal
#endif  // __x86_64__
