// Integer GEMM kernels for SSE2 (every x86-64 CPU). int16: pmaddwd. int8: SSE2 has no u8 x s8
// product, so B's bytes are widened to int16 and multiplied with pmaddwd; each column then holds
// two partial sums (k 0-1 and k 2-3 of a cell) until Finish adds them.
#if defined(__x86_64__)
#include <emmintrin.h>

#include "tensor/cpu/int_gemm_kernel.h"

namespace tern::cpu::int_gemm_internal {
namespace {

// out (4) = float(v) * unquant (* column) + bias (or + 0).
void StoreFloats(__m128i v, float unquant, const float* column, const float* bias, float* out) {
  const __m128 b = bias ? _mm_loadu_ps(bias) : _mm_setzero_ps();
  __m128 f = _mm_mul_ps(_mm_cvtepi32_ps(v), _mm_set1_ps(unquant));
  if (column) f = _mm_mul_ps(f, _mm_loadu_ps(column));
  _mm_storeu_ps(out, _mm_add_ps(f, b));
}

struct Sse2Int16 {
  static constexpr int kLanes = 4, kRows = 2, kPanels = 1;
  using Acc = __m128i;
  using A = __m128i;
  using B = __m128i;
  static Acc Init(const int32_t* offsets) {
    return offsets ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(offsets))
                   : _mm_setzero_si128();
  }
  static B LoadB(const uint8_t* p) { return _mm_load_si128(reinterpret_cast<const __m128i*>(p)); }
  static A Broadcast(int32_t cell) { return _mm_set1_epi32(cell); }
  static void MulAdd(Acc& acc, A a, B b) { acc = _mm_add_epi32(acc, _mm_madd_epi16(a, b)); }
  static void Finish(Acc acc, int32_t* out) {
    _mm_store_si128(reinterpret_cast<__m128i*>(out), acc);
  }
  static void Store(Acc acc, float unquant, const float* column, const float* bias, float* out) {
    StoreFloats(acc, unquant, column, bias, out);
  }
};

struct Sse2Int8 {
  static constexpr int kLanes = 4, kRows = 1, kPanels = 1;
  struct Acc {
    __m128i lo, hi;  // (column 0..1 | 2..3) x (k 0-1, k 2-3) partial sums
  };
  using A = __m128i;  // the cell's 4 values as int16, twice
  using B = __m128i;
  static Acc Init(const int32_t* offsets) {
    // Offsets are per column; put each in the first of its two partial sums.
    if (!offsets) return {_mm_setzero_si128(), _mm_setzero_si128()};
    return {_mm_set_epi32(0, offsets[1], 0, offsets[0]),
            _mm_set_epi32(0, offsets[3], 0, offsets[2])};
  }
  static B LoadB(const uint8_t* p) { return _mm_load_si128(reinterpret_cast<const __m128i*>(p)); }
  static A Broadcast(int32_t cell) {
    const __m128i bytes = _mm_cvtsi32_si128(cell);
    const __m128i words = _mm_srai_epi16(_mm_unpacklo_epi8(bytes, bytes), 8);  // sign-extend
    return _mm_unpacklo_epi64(words, words);
  }
  static void MulAdd(Acc& acc, A a, B b) {
    const __m128i sign = _mm_cmpgt_epi8(_mm_setzero_si128(), b);
    acc.lo = _mm_add_epi32(acc.lo, _mm_madd_epi16(_mm_unpacklo_epi8(b, sign), a));
    acc.hi = _mm_add_epi32(acc.hi, _mm_madd_epi16(_mm_unpackhi_epi8(b, sign), a));
  }
  // Per column, the sum of its two partial sums.
  static __m128i Reduce(const Acc& acc) {
    const __m128 lo = _mm_castsi128_ps(acc.lo), hi = _mm_castsi128_ps(acc.hi);
    const __m128i first = _mm_castps_si128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m128i second = _mm_castps_si128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm_add_epi32(first, second);
  }
  static void Finish(const Acc& acc, int32_t* out) {
    _mm_store_si128(reinterpret_cast<__m128i*>(out), Reduce(acc));
  }
  static void Store(const Acc& acc, float unquant, const float* column, const float* bias,
                    float* out) {
    StoreFloats(Reduce(acc), unquant, column, bias, out);
  }
};

}  // namespace

void KernelSse2Int16(const KernelArgs& g) { RunKernel<Sse2Int16>(g); }
void KernelSse2Int8(const KernelArgs& g) { RunKernel<Sse2Int8>(g); }

}  // namespace tern::cpu::int_gemm_internal
#endif  // __x86_64__
