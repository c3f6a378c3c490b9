// The 512-bit kernels' (AVX-512BW and VNNI) full tile, MR rows x 4 panels, written with its
// accumulators named. GCC compiles the generic Tile<Ops, 4, 4>'s array of 16 zmm accumulators into
// a loop that copies every accumulator to another register and back each k-group, keeps one on
// the stack and zeroes the array with rep stos per tile (perf annotate of bench-decode); named,
// they stay in registers. Per k-group: 4 loads of B, MR broadcasts of A and 4 MR products.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/cpu/int_gemm_kernel.h"

namespace tern::cpu::int_gemm_internal {

template <class Ops>
inline typename Ops::A BroadcastCell(const uint8_t* a) {
  int32_t cell;
  std::memcpy(&cell, a, kCellBytes);
  return Ops::Broadcast(cell);
}

// One k-group of one A row into its 4 accumulators (the tile's 4 panels).
template <class Ops>
inline void RowStep4(const uint8_t* a, typename Ops::B b0, typename Ops::B b1, typename Ops::B b2,
                     typename Ops::B b3, typename Ops::Acc& c0, typename Ops::Acc& c1,
                     typename Ops::Acc& c2, typename Ops::Acc& c3) {
  const typename Ops::A av = BroadcastCell<Ops>(a);
  Ops::MulAdd(c0, av, b0);
  Ops::MulAdd(c1, av, b1);
  Ops::MulAdd(c2, av, b2);
  Ops::MulAdd(c3, av, b3);
}

// StoreTile's arithmetic for a tile whose 64 columns all lie inside C: each panel's column
// factors and bias loaded once for the MR rows, and no per-register bounds checks. A template on
// Ops, like everything here, so each ISA file compiles its own.
template <class Ops, int MR>
inline void StoreWholeTile4Panels(const KernelArgs& g, int64_t row, int64_t panel,
                                  const __m512i (&acc)[6][4]) {
  __m512 column[4], bias[4];
  const int64_t col = panel * kPanelCols;
  for (int p = 0; p < 4; ++p) {
    column[p] = g.column_unquant ? _mm512_loadu_ps(g.column_unquant + col + p * kPanelCols)
                                 : _mm512_set1_ps(1.f);
    bias[p] = g.bias ? _mm512_loadu_ps(g.bias + col + p * kPanelCols) : _mm512_setzero_ps();
  }
  for (int r = 0; r < MR; ++r) {
    float* c_row = g.c + (row + r) * g.ldc + col;
    const __m512 unquant = _mm512_set1_ps(g.row_unquant[row + r]);
    for (int p = 0; p < 4; ++p) {
      // maskz: GCC 12 warns about the unmasked form's undefined source register.
      const __m512 f = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xffff, acc[r][p]), unquant);
      // Times 1 when there are no column factors: the same bits as no product.
      _mm512_storeu_ps(c_row + p * kPanelCols, _mm512_add_ps(_mm512_mul_ps(f, column[p]), bias[p]));
    }
  }
}

// MR (1 to 6) rows x 4 panels: 4 MR accumulators, 4 of B and the broadcast, at most 29 of the 32
// zmm registers. Rows past MR are never touched (their accumulators are dead code). Listed: over
// the tile's listed k-groups only (KernelArgs::listed; MR is kListedRows, row a multiple of it).
template <class Ops, int MR, bool kListed = false>
void NamedTile4Panels(const KernelArgs& g, int64_t row, int64_t panel) {
  static_assert(Ops::kLanes == kPanelCols && MR >= 1 && MR <= 6);
  static_assert(!kListed || MR == kListedRows);
  using V = typename Ops::Acc;
  const V i0 = InitAcc<Ops>(g, panel, 0), i1 = InitAcc<Ops>(g, panel + 1, 0);
  const V i2 = InitAcc<Ops>(g, panel + 2, 0), i3 = InitAcc<Ops>(g, panel + 3, 0);
  V c00 = i0, c01 = i1, c02 = i2, c03 = i3, c10 = i0, c11 = i1, c12 = i2, c13 = i3;
  V c20 = i0, c21 = i1, c22 = i2, c23 = i3, c30 = i0, c31 = i1, c32 = i2, c33 = i3;
  V c40 = i0, c41 = i1, c42 = i2, c43 = i3, c50 = i0, c51 = i1, c52 = i2, c53 = i3;
  const int64_t row_bytes = g.groups * kCellBytes, panel_bytes = g.groups * kPanelRowBytes;
  const uint8_t* a0 = g.a + row * row_bytes;
  const uint8_t* b0p = g.b + panel * panel_bytes;
  const TileGroups<kListed> groups(g, row);
  for (int64_t i = 0; i < groups.count; ++i) {
    const int64_t k = groups[i];
    const uint8_t* a = a0 + k * kCellBytes;
    const uint8_t* b = b0p + k * kPanelRowBytes;
    const typename Ops::B b0 = Ops::LoadB(b), b1 = Ops::LoadB(b + panel_bytes);
    const typename Ops::B b2 = Ops::LoadB(b + 2 * panel_bytes);
    const typename Ops::B b3 = Ops::LoadB(b + 3 * panel_bytes);
    RowStep4<Ops>(a, b0, b1, b2, b3, c00, c01, c02, c03);
    if constexpr (MR > 1) RowStep4<Ops>(a + row_bytes, b0, b1, b2, b3, c10, c11, c12, c13);
    if constexpr (MR > 2) RowStep4<Ops>(a + 2 * row_bytes, b0, b1, b2, b3, c20, c21, c22, c23);
    if constexpr (MR > 3) RowStep4<Ops>(a + 3 * row_bytes, b0, b1, b2, b3, c30, c31, c32, c33);
    if constexpr (MR > 4) RowStep4<Ops>(a + 4 * row_bytes, b0, b1, b2, b3, c40, c41, c42, c43);
    if constexpr (MR > 5) RowStep4<Ops>(a + 5 * row_bytes, b0, b1, b2, b3, c50, c51, c52, c53);
  }
  const V named[6][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                         {c30, c31, c32, c33}, {c40, c41, c42, c43}, {c50, c51, c52, c53}};
  if ((panel + 4) * kPanelCols <= g.n) return StoreWholeTile4Panels<Ops, MR>(g, row, panel, named);
  TileAcc<Ops> acc[MR][4];
  for (int r = 0; r < MR; ++r) {
    for (int p = 0; p < 4; ++p) acc[r][p][0] = named[r][p];
  }
  StoreTile<Ops, MR, 4>(g, row, panel, acc);
}

// The rows < MR after a panel block's last full tile, in one named tile.
template <class Ops, int MR>
void NamedLeftover4Panels(const KernelArgs& g, int64_t row, int64_t rows, int64_t panel) {
  if constexpr (MR > 1) {
    if (rows == MR - 1) return NamedTile4Panels<Ops, MR - 1>(g, row, panel);
    NamedLeftover4Panels<Ops, MR - 1>(g, row, rows, panel);
  }
}

// The listed kernel (RunListedKernel) over blocks of 4 panels: each tile of kListedRows rows
// reads its listed groups once for 64 columns instead of once per panel.
template <class Ops>
void RunListedKernel4Panels(const KernelArgs& g) {
  int64_t panel = g.panel_begin;
  for (; panel + 4 <= g.panel_end; panel += 4) {
    int64_t row = 0;
    for (; row + kListedRows <= g.m; row += kListedRows) {
      NamedTile4Panels<Ops, kListedRows, true>(g, row, panel);
    }
    for (int p = 0; row < g.m && p < 4; ++p) {
      LeftoverTile<Ops, kListedRows, 1, true>(g, row, g.m - row, panel + p);
    }
  }
  KernelArgs rest = g;
  rest.panel_begin = panel;
  RunListedKernel<Ops>(rest);
}

// The kernel with the named tiles: kRows x 4 panels, then the leftover rows likewise.
template <class Ops>
void RunNamedKernel(const KernelArgs& g) {
  static_assert(Ops::kPanels == 4);
  if (g.listed) return RunListedKernel4Panels<Ops>(g);
  RunKernel<Ops, NamedTile4Panels<Ops, Ops::kRows>, NamedLeftover4Panels<Ops, Ops::kRows>>(g);
}

}  // namespace tern::cpu::int_gemm_internal
