// The bf16 GEMM kernel for AVX512-BF16: a tile of MR rows x NP panels of 16 columns keeps
// MR x NP accumulators; per pair of k, each panel's row of cells is loaded once and each A row's
// cell broadcast into vdpbf16ps. Rows go in blocks whose cells stay in L2 while the panels pass.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "tensor/cpu/bf16_gemm_kernel.h"

namespace tern::cpu::bf16_gemm_internal {
namespace {

constexpr int kTileRows = 8;
constexpr int64_t kBlockBytes = 192 * 1024;

// Panels per tile of `rows` rows: fewer rows, more panels, enough independent sums to hide the
// latency.
constexpr int Panels(int rows) { return rows >= 5 ? 2 : rows >= 3 ? 4 : 8; }

#define TERN_UNROLL _Pragma("GCC unroll 32")

template <int MR, int NP>
void Tile(const KernelArgs& g, int64_t row, int64_t panel) {
  __m512 acc[MR][NP];
  TERN_UNROLL for (int r = 0; r < MR; ++r) {
    TERN_UNROLL for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  const int64_t pairs = g.pairs, stride = pairs * kPanel;
  const uint32_t* a = g.a + row * pairs;
  const uint32_t* b = g.b + panel * stride;
  for (int64_t j = 0; j < pairs; ++j) {
    __m512bh bv[NP];
    TERN_UNROLL for (int p = 0; p < NP; ++p) {
      bv[p] = (__m512bh)_mm512_load_si512(b + p * stride + j * kPanel);
    }
    TERN_UNROLL for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * pairs + j]));
      TERN_UNROLL for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_dpbf16_ps(acc[r][p], av, bv[p]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(g.alpha), beta = _mm512_set1_ps(g.beta);
  TERN_UNROLL for (int r = 0; r < MR; ++r) {
    float* c_row = g.c + (row + r) * g.ldc;
    TERN_UNROLL for (int p = 0; p < NP; ++p) {
      const int64_t col = (panel + p) * kPanel;
      if (col + kPanel <= g.n) {
        __m512 v = _mm512_mul_ps(alpha, acc[r][p]);
        if (g.beta != 0.f) v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_loadu_ps(c_row + col)));
        _mm512_storeu_ps(c_row + col, v);
      } else if (col < g.n) {
        alignas(64) float lanes[kPanel];
        _mm512_store_ps(lanes, acc[r][p]);
        for (int64_t i = 0; col + i < g.n; ++i) {
          c_row[col + i] = Finish(lanes[i], g.alpha, g.beta, c_row + col + i);
        }
      }
    }
  }
}
#undef TERN_UNROLL

template <int MR>
void RowTiles(const KernelArgs& g, int64_t r0, int64_t r1) {
  constexpr int NP = Panels(MR);
  int64_t p = g.panel_begin;
  for (; p + NP <= g.panel_end; p += NP) {
    for (int64_t r = r0; r < r1; r += MR) Tile<MR, NP>(g, r, p);
  }
  for (; p < g.panel_end; ++p) {
    for (int64_t r = r0; r < r1; r += MR) Tile<MR, 1>(g, r, p);
  }
}

template <int MR>
void ShortRows(const KernelArgs& g, int64_t r, int rows) {
  if constexpr (MR > 0) {
    if (rows == MR) {
      RowTiles<MR>(g, r, r + MR);
    } else {
      ShortRows<MR - 1>(g, r, rows);
    }
  }
}

}  // namespace

void KernelAvx512Bf16(const KernelArgs& g) {
  const int64_t block = std::max<int64_t>(
      kTileRows, kBlockBytes / (4 * std::max<int64_t>(1, g.pairs)) / kTileRows * kTileRows);
  for (int64_t r0 = g.row_begin; r0 < g.row_end; r0 += block) {
    const int64_t r1 = std::min(g.row_end, r0 + block);
    const int64_t full = r0 + (r1 - r0) / kTileRows * kTileRows;
    if (full > r0) RowTiles<kTileRows>(g, r0, full);
    if (r1 > full) ShortRows<kTileRows - 1>(g, full, static_cast<int>(r1 - full));
  }
}

}  // namespace tern::cpu::bf16_gemm_internal
#endif
