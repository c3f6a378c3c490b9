// What bf16_gemm.cc hands its kernels (bf16_gemm_avx512bf16.cc and bf16_gemm_amx.cc, each compiled
// with its ISA's flags).
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
  const float* bias = nullptr;  // (n): added to each row after alpha and beta, or none
};

// alpha * acc + beta * c for one value: the reference's expression, and the partial panels'.
inline float Finish(float acc, float alpha, float beta, const float* c) {
  const float v = alpha * acc;
  return beta == 0.f ? v : v + beta * *c;
}
// Finish, then column j's bias where there is one (AddBias's sum, so the same bits as a product
// followed by AddBias).
inline float FinishBiased(float acc, float alpha, float beta, const float* c, const float* bias,
                          int64_t j) {
  const float v = Finish(acc, alpha, beta, c);
  return bias == nullptr ? v : v + bias[j];
}

void KernelAvx512Bf16(const KernelArgs& g);
// The AMX-BF16 kernel (bf16_gemm_amx.cc), on the same cells; it needs AmxPermitted() first.
void KernelAmxBf16(const KernelArgs& g);
// The tiles' configuration (palette 1, eight 16 x 64-byte tiles) loaded for the calling thread,
// and released.
void AmxConfigure();
void AmxRelease();
// KernelAmxBf16 on tiles the calling thread configured (AmxConfigure): a batch of products
// configures them once.
void KernelAmxBf16Configured(const KernelArgs& g);
// Asks Linux for the process's AMX tile state; false where it refuses (no AMX, an old kernel).
bool AmxPermitted();

// float32 operands to cells with vcvtne2ps2bf16, which rounds as BFloat16Bits does (to nearest
// even, NaNs quieted the same way) but reads denormals as zeros: the kernel's vdpbf16ps reads a
// bf16 denormal as a zero anyway, so the products are the same bits.
// Cells of one row of k floats: cells[j] = bits(x[2j]) | bits(x[2j + 1]) << 16, 0 past k.
void RowCellsAvx512Bf16(const float* x, int64_t k, uint32_t* cells);
// Cells of two rows side by side: cells[i] = bits(lo[i]) | bits(hi[i]) << 16 (hi null: 0).
void PairCellsAvx512Bf16(const float* lo, const float* hi, int64_t count, uint32_t* cells);
// A bf16 operand stored (k, m) (leading dimension ld) as (m, pairs) cells, rows [i0, i0 + 16)
// and cells [j0, j0 + 16) of them: cell (i, j) = x[2j][i] | x[2j + 1][i] << 16 (0 past k), as a
// 16 x 16 transpose in registers.
void TransposedCells16Avx512Bf16(const uint16_t* x, int64_t ld, int64_t k, int64_t i0, int64_t j0,
                                 uint32_t* out, int64_t pairs);

// A bf16 B stored (k, n), leading dimension ld, x at its panel's first column: the panel's
// (pairs, 16) cells of `cols` columns, cell (j, c) = x[2j][c] | x[2j + 1][c] << 16 (0 past k);
// columns from cols on are left as they are.
void PairPanelBf16(const uint16_t* x, int64_t ld, int64_t k, int64_t cols, uint32_t* panel);
// A bf16 B stored (n, k), x at its panel's first column (a stored row): the panel's (pairs, 16)
// cells of 16 whole columns, cell (j, c) = x[c][2j] | x[c][2j + 1] << 16 (0 past k).
void TransposedPanelBf16(const uint16_t* x, int64_t ld, int64_t k, uint32_t* panel);

}  // namespace tern::cpu::bf16_gemm_internal
