// The bf16 GEMM kernel for AVX512-BF16: a tile of MR rows x NP panels of 16 columns keeps
// MR x NP accumulators; per pair of k, each panel's row of cells is loaded once and each A row's
// cell broadcast into vdpbf16ps. Rows go in blocks whose cells stay in L2 while the panels pass.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "tensor/cpu/avx512_lanes.h"
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
        if (g.bias != nullptr) v = _mm512_add_ps(v, _mm512_loadu_ps(g.bias + col));
        _mm512_storeu_ps(c_row + col, v);
      } else if (col < g.n) {
        alignas(64) float lanes[kPanel];
        _mm512_store_ps(lanes, acc[r][p]);
        for (int64_t i = 0; col + i < g.n; ++i) {
          c_row[col + i] =
              FinishBiased(lanes[i], g.alpha, g.beta, c_row + col + i, g.bias, col + i);
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

void RowCellsAvx512Bf16(const float* x, int64_t k, uint32_t* cells) {
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
    _mm512_storeu_si512(cells + i / 2, (__m512i)v);
  }
  if (i < k) {  // 1 to 31 left: the missing ones load as zeros, whose bits are 0
    const int64_t rest = k - i;
    const __m512 lo = _mm512_maskz_loadu_ps(Lanes16(rest), x + i);
    const __m512 hi = _mm512_maskz_loadu_ps(Lanes16(rest - 16), x + i + 16);
    const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_epi32(cells + i / 2, Lanes16((rest + 1) / 2), (__m512i)v);
  }
}

void PairCellsAvx512Bf16(const float* lo, const float* hi, int64_t count, uint32_t* cells) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = Lanes16(count - i);
    const __m256bh l = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, lo + i));
    // The maskz forms: GCC 12 warns of the others' undefined source as uninitialized.
    __m512i c = _mm512_maskz_cvtepu16_epi32(m, (__m256i)l);
    if (hi != nullptr) {
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, hi + i));
      const __m512i high = _mm512_maskz_cvtepu16_epi32(m, (__m256i)h);
      c = _mm512_or_si512(c, _mm512_maskz_slli_epi32(m, high, 16));
    }
    _mm512_mask_storeu_epi32(cells + i, m, c);
  }
}

namespace {

// The maskz forms throughout: GCC 12 warns of the others' undefined source as uninitialized.
constexpr __mmask16 kAll = 0xFFFF;

// 16 bf16 values of lo (and hi, or zeros) as 16 cells: lo in each low half.
inline __m512i Cells16(const uint16_t* lo, const uint16_t* hi, __mmask16 m) {
  __m512i c = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, lo));
  if (hi != nullptr) {
    const __m512i h = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, hi));
    c = _mm512_or_si512(c, _mm512_maskz_slli_epi32(m, h, 16));
  }
  return c;
}

// t[i] = lane i of every r[c] (lane c of t[i] is lane i of r[c]): a 16 x 16 transpose of 32-bit
// values. r is clobbered.
inline void Transpose16(__m512i* r, __m512i* t) {
  for (int c = 0; c < 16; c += 2) {  // 32-bit pairs within each 128-bit lane
    t[c] = _mm512_maskz_unpacklo_epi32(kAll, r[c], r[c + 1]);
    t[c + 1] = _mm512_maskz_unpackhi_epi32(kAll, r[c], r[c + 1]);
  }
  for (int c = 0; c < 16; c += 4) {  // 64-bit pairs: r[c + 4q + e]'s lane L holds column 4L + e
    r[c] = _mm512_maskz_unpacklo_epi64(0xFF, t[c], t[c + 2]);
    r[c + 1] = _mm512_maskz_unpackhi_epi64(0xFF, t[c], t[c + 2]);
    r[c + 2] = _mm512_maskz_unpacklo_epi64(0xFF, t[c + 1], t[c + 3]);
    r[c + 3] = _mm512_maskz_unpackhi_epi64(0xFF, t[c + 1], t[c + 3]);
  }
  for (int e = 0; e < 4; ++e) {  // 128-bit lanes: a 4 x 4 transpose of them
    const __m512i c0 = _mm512_maskz_shuffle_i32x4(kAll, r[e], r[4 + e], 0x88);
    const __m512i c1 = _mm512_maskz_shuffle_i32x4(kAll, r[e], r[4 + e], 0xDD);
    const __m512i c2 = _mm512_maskz_shuffle_i32x4(kAll, r[8 + e], r[12 + e], 0x88);
    const __m512i c3 = _mm512_maskz_shuffle_i32x4(kAll, r[8 + e], r[12 + e], 0xDD);
    t[e] = _mm512_maskz_shuffle_i32x4(kAll, c0, c2, 0x88);
    t[8 + e] = _mm512_maskz_shuffle_i32x4(kAll, c0, c2, 0xDD);
    t[4 + e] = _mm512_maskz_shuffle_i32x4(kAll, c1, c3, 0x88);
    t[12 + e] = _mm512_maskz_shuffle_i32x4(kAll, c1, c3, 0xDD);
  }
}

}  // namespace

void TransposedCells16Avx512Bf16(const uint16_t* x, int64_t ld, int64_t k, int64_t i0, int64_t j0,
                                 uint32_t* out, int64_t pairs) {
  __m512i r[16], t[16];
  for (int c = 0; c < 16; ++c) {  // r[c]: cell j0 + c of rows i0 .. i0 + 15
    const int64_t j = j0 + c;
    const uint16_t* lo = x + 2 * j * ld + i0;
    r[c] = Cells16(lo, 2 * j + 1 < k ? lo + ld : nullptr, kAll);
  }
  Transpose16(r, t);
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(out + (i0 + i) * pairs + j0, t[i]);
}

void PairPanelBf16(const uint16_t* x, int64_t ld, int64_t k, int64_t cols, uint32_t* panel) {
  const __mmask16 m = Lanes16(cols);
  const int64_t pairs = (k + 1) / 2;
  for (int64_t j = 0; j < pairs; ++j) {
    const uint16_t* lo = x + 2 * j * ld;
    _mm512_mask_storeu_epi32(panel + j * kPanel, m,
                             Cells16(lo, 2 * j + 1 < k ? lo + ld : nullptr, m));
  }
}

void TransposedPanelBf16(const uint16_t* x, int64_t ld, int64_t k, uint32_t* panel) {
  const int64_t full = k / 32 * 16;  // cells in whole groups of 16
  __m512i r[16], t[16];
  for (int64_t j0 = 0; j0 < full; j0 += 16) {
    for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_si512(x + c * ld + 2 * j0);
    Transpose16(r, t);
    for (int j = 0; j < 16; ++j) _mm512_storeu_si512(panel + (j0 + j) * kPanel, t[j]);
  }
  for (int c = 0; c < 16; ++c) {  // the last cells, the odd k's last one padded with a zero
    const uint16_t* col = x + c * ld;
    for (int64_t j = full; 2 * j < k; ++j)
      panel[j * kPanel + c] = col[2 * j] | (2 * j + 1 < k ? uint32_t{col[2 * j + 1]} << 16 : 0u);
  }
}

}  // namespace tern::cpu::bf16_gemm_internal
#endif
