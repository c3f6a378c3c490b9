// Dropout's mask, eight 64-bit hashes a vector (dropout_kernel.h); -ffp-contract=off keeps
// base + x * mask two roundings, as the scalar loop's.
#if defined(__x86_64__)
#include <immintrin.h>

#include "tensor/cpu/avx512_lanes.h"
#include "tensor/cpu/dropout_kernel.h"

namespace tern::cpu::dropout_internal {
namespace {

// x >> n in each 64-bit lane (the maskz form: GCC 12 warns of the other's undefined source).
template <int N>
inline __m512i Shr(__m512i x) {
  return _mm512_maskz_srli_epi64(0xFF, x, N);
}

// SplitMix64 of eight lanes.
inline __m512i Hash(__m512i x) {
  x = _mm512_add_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0x9e3779b97f4a7c15ull)));
  x = _mm512_xor_si512(x, Shr<30>(x));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0xbf58476d1ce4e5b9ull)));
  x = _mm512_xor_si512(x, Shr<27>(x));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0x94d049bb133111ebull)));
  return _mm512_xor_si512(x, Shr<31>(x));
}

// The mask of elements i .. i + 15: keys.value where kept, else 0.
inline __m512 Mask16(const Keys& keys, int64_t i) {
  const __m512i key = _mm512_set1_epi64(static_cast<int64_t>(keys.key));
  const __m512i threshold = _mm512_set1_epi64(static_cast<int64_t>(keys.threshold));
  const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i lo = _mm512_add_epi64(_mm512_set1_epi64(i), lanes);
  const __m512i hi = _mm512_add_epi64(lo, _mm512_set1_epi64(8));
  const __mmask8 keep_lo =
      _mm512_cmplt_epu64_mask(Shr<32>(Hash(_mm512_xor_si512(key, lo))), threshold);
  const __mmask8 keep_hi =
      _mm512_cmplt_epu64_mask(Shr<32>(Hash(_mm512_xor_si512(key, hi))), threshold);
  const __mmask16 keep = static_cast<__mmask16>(keep_lo | (keep_hi << 8));
  return _mm512_maskz_mov_ps(keep, _mm512_set1_ps(keys.value));
}

}  // namespace

void MaskAvx512(const Keys& keys, int64_t s, int64_t e, float* mask) {
  for (int64_t i = s; i < e; i += 16)
    _mm512_mask_storeu_ps(mask + i, Lanes16(e - i), Mask16(keys, i));
}

void ApplyAvx512(const Keys& keys, int64_t s, int64_t e, const float* x, const float* base,
                 float* out) {
  for (int64_t i = s; i < e; i += 16) {
    const __mmask16 m = Lanes16(e - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), Mask16(keys, i));
    if (base != nullptr) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, base + i), v);
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

}  // namespace tern::cpu::dropout_internal
#endif
