// What bf16_gemm.cc hands the AVX512-BF16 kernel (bf16_gemm_avx512bf16.cc, compiled with that
// ISA's flags).
#pragma once

#include <cstdint>

namespace tern::cpu::bf16_gemm_internal {

inline constexpr int64_t kPanel = 16;  // columns of a B panel: one 512-bit register of cells

struct KernelArgs {
  const uint32_t* a;  // (m, pairs) cells of A's rows
  const uint32_t* b;  // (panels, pairs, 16) cells of B's columns
  int64_t pairs;      // k / 2, rounded up (an odd k's last cell pads with a zero)
  float alpha, beta;
  float* c;  // (m, ldc)
  int64_t ldc, n;
  int64_t row_begin, row_end, panel_begin, panel_end;
};

// alpha * acc + beta * c for one value: the reference's expression, and the partial panels'.
inline float Finish(float acc, float alpha, float beta, const float* c) {
  const float v = alpha * acc;
  return beta == 0.f ? v : v + beta * *c;
}

void KernelAvx512Bf16(const KernelArgs& g);

}  // namespace tern::cpu::bf16_gemm_internal
