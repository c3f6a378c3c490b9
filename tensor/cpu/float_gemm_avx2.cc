// Float GEMM kernel for AVX2 with FMA: a panel row is two 8-float registers; tiles of 6 rows x 1
// panel (12 accumulators, 2 panel registers and a broadcast of the 16), shorter tiles wider.
#if defined(__x86_64__)
#include <immintrin.h>

#include "tensor/cpu/float_gemm_kernel.h"

namespace tern::cpu::float_gemm_internal {
namespace {

struct Avx2Ops {
  static constexpr int kLanes = 8, kTileRows = 6;
  static constexpr int Panels(int rows) { return rows >= 3 ? 1 : rows == 2 ? 2 : 3; }
  using V = __m256;
  static V Zero() { return _mm256_setzero_ps(); }
  static V Load(const float* p) { return _mm256_load_ps(p); }
  static V LoadU(const float* p) { return _mm256_loadu_ps(p); }
  static V Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  // max(v, +0): +0 for NaN and -0, as the scalar v > 0 ? v : 0.
  static V Relu(V v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }
  static void StoreU(float* p, V v) { _mm256_storeu_ps(p, v); }
};

}  // namespace

void KernelAvx2(const KernelArgs& g) { RunKernel<Avx2Ops>(g); }

}  // namespace tern::cpu::float_gemm_internal
#endif
