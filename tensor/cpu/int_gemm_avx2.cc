// Integer GEMM kernels for AVX2. int16: vpmaddwd. int8: vpmaddubsw needs an unsigned operand, so
// A's cell goes in as |a| and B's bytes take a's sign (vpsignb): |a| * sign(a) b = a b, and a pair
// sums to at most 2 * 127 * 127 < 2^15, so the int16 stage cannot saturate; vpmaddwd with ones
// then sums the pairs into int32.
#if defined(__x86_64__)
#include <immintrin.h>

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
  static void Store(Acc acc, float unquant, const float* bias, float* out) {
    const __m256 b = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(unquant));
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

void KernelAvx2Int16(const KernelArgs& g) { RunKernel<Avx2Int16>(g); }
void KernelAvx2Int8(const KernelArgs& g) { RunKernel<Avx2Int8>(g); }

}  // namespace tern::cpu::int_gemm_internal
#endif  // __x86_64__
