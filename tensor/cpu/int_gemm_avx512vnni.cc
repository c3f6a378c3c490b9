// Integer GEMM kernels for AVX-512 VNNI. int16: vpdpwssd (multiply pairs and accumulate in one
// instruction). int8: vpdpbusd multiplies unsigned by signed bytes and sums four products straight
// into int32 (no int16 stage to saturate), so A's cell is shifted to unsigned (a + 128, a sign-bit
// flip) and the accumulators start at -128 * column sum of B to take the shift back out.
#if defined(__x86_64__)
#include <immintrin.h>

#include "tensor/cpu/int_gemm_kernel.h"
#include "tensor/cpu/int_gemm_tile512.h"

namespace tern::cpu::int_gemm_internal {
namespace {

struct Avx512vnniBase {
  static constexpr int kLanes = 16, kRows = 6, kPanels = 4;
  using Acc = __m512i;
  using A = __m512i;
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

struct Avx512vnniInt16 : Avx512vnniBase {
  static A Broadcast(int32_t cell) { return _mm512_set1_epi32(cell); }
  static void MulAdd(Acc& acc, A a, B b) { acc = _mm512_dpwssd_epi32(acc, a, b); }
};

struct Avx512vnniInt8 : Avx512vnniBase {
  static A Broadcast(int32_t cell) {
    return _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(cell) ^ 0x80808080u));
  }
  static void MulAdd(Acc& acc, A a, B b) { acc = _mm512_dpbusd_epi32(acc, a, b); }
};

}  // namespace

void KernelAvx512vnniInt16(const KernelArgs& g) { RunNamedKernel<Avx512vnniInt16>(g); }
void KernelAvx512vnniInt8(const KernelArgs& g) { RunNamedKernel<Avx512vnniInt8>(g); }

}  // namespace tern::cpu::int_gemm_internal
#endif  // __x86_64__
