// Integer GEMM kernels for AVX-512BW. int16: vpmaddwd on 16 columns. int8: as AVX2 (|a| times B
// with a's sign, vpmaddubsw then vpmaddwd with ones), with the sign applied by a masked negate,
// since AVX-512 has no vpsignb.
#if defined(__x86_64__)
#include <immintrin.h>

#include "tensor/cpu/int_gemm_kernel.h"
#include "tensor/cpu/int_gemm_tile512.h"

namespace tern::cpu::int_gemm_internal {
namespace {

struct Avx512Base {
  static constexpr int kLanes = 16, kRows = 4, kPanels = 4;
  using Acc = __m512i;
  using B = __m512i;
  static Acc Init(const int32_t* offsets) {
    return offsets ? _mm512_loadu_si512(offsets) : _mm512_setzero_si512();
  }
  static B LoadB(const uint8_t* p) { return _mm512_load_si512(p); }
  static void Finish(Acc acc, int32_t* out) { _mm512_store_si512(out, acc); }
  static void Store(Acc acc, float unquant, const float* column, const float* bias, float* out) {
    const __m512 b = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    // maskz: GCC 12 warns about the unmasked form's undefined source register.
    __m512 f = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xffff, acc), _mm512_set1_ps(unquant));
    if (column) f = _mm512_mul_ps(f, _mm512_loadu_ps(column));
    _mm512_storeu_ps(out, _mm512_add_ps(f, b));
  }
};

struct Avx512bwInt16 : Avx512Base {
  using A = __m512i;
  static A Broadcast(int32_t cell) { return _mm512_set1_epi32(cell); }
  static void MulAdd(Acc& acc, A a, B b) { acc = _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)); }
};

struct Avx512bwInt8 : Avx512Base {
  struct A {
    __m512i abs;
    __mmask64 negative;
  };
  static A Broadcast(int32_t cell) {
    const __m512i a = _mm512_set1_epi32(cell);
    return {_mm512_abs_epi8(a), _mm512_movepi8_mask(a)};
  }
  static void MulAdd(Acc& acc, const A& a, B b) {
    const __m512i signed_b = _mm512_mask_sub_epi8(b, a.negative, _mm512_setzero_si512(), b);
    const __m512i pairs = _mm512_maddubs_epi16(a.abs, signed_b);
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
};

}  // namespace

void KernelAvx512bwInt16(const KernelArgs& g) { RunNamedKernel<Avx512bwInt16>(g); }
void KernelAvx512bwInt8(const KernelArgs& g) { RunNamedKernel<Avx512bwInt8>(g); }

}  // namespace tern::cpu::int_gemm_internal
#endif  // __x86_64__
