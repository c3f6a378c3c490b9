// Float GEMM kernel for AVX-512F: a panel row is one 16-float register; tiles of 8 rows x 2
// panels (16 accumulators of the 32 registers), shorter tiles wider.
#if defined(__x86_64__)
#include <immintrin.h>

#include "tensor/cpu/float_gemm_kernel.h"

namespace tern::cpu::float_gemm_internal {
namespace {

struct Avx512Ops {
  static constexpr int kLanes = 16, kTileRows = 8;
  static constexpr int Panels(int rows) { return rows >= 5 ? 2 : rows >= 3 ? 4 : 8; }
  using V = __m512;
  static V Zero() { return _mm512_setzero_ps(); }
  static V Load(const float* p) { return _mm512_load_ps(p); }
  static V LoadU(const float* p) { return _mm512_loadu_ps(p); }
  static V Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  // max(v, +0): +0 for NaN and -0, as the scalar v > 0 ? v : 0. maskz: GCC 12 warns about the
  // unmasked form's undefined source register.
  static V Relu(V v) { return _mm512_maskz_max_ps(0xffff, v, _mm512_setzero_ps()); }
  static void StoreU(float* p, V v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void KernelAvx512(const KernelArgs& g) { RunKernel<Avx512Ops>(g); }

}  // namespace tern::cpu::float_gemm_internal
#endif
