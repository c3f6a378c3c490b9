// The float GEMM's kernel, written once over an ISA's "Ops" (float_gemm_<isa>.cc define them with
// their intrinsics and instantiate RunKernel in a file compiled with that ISA's flags). All of it
// is templates on Ops, so each ISA file gets its own code.
//
// A tile is MR rows x NP panels: MR x NP x (16 / lanes) accumulators in registers; per k, the
// panels' row k is loaded once and each A row's value k broadcast into it. Rows go in blocks
// whose A stays in L2; within a block the panels go in turn, each pair of panels (a few KB to a
// few tens of KB) staying in cache while every row tile of the block passes over it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/cpu/float_gemm.h"

namespace tern::cpu::float_gemm_internal {

inline constexpr int kPanel = static_cast<int>(PackedFloatMatrix::kPanel);
// Bytes of A rows a block keeps in L2 while the panels pass.
inline constexpr int64_t kBlockBytes = 192 * 1024;

struct KernelArgs {
  const float* a;  // (m, lda)
  int64_t lda;
  const float* b;  // packed panels, (panels, k, 16)
  int64_t k;
  FloatEpilogue epilogue;
  float* c;  // (m, ldc)
  int64_t ldc, n;
  int64_t row_begin, row_end, panel_begin, panel_end;
};

// The epilogue on one value: the reference's expression, and the partial panels' store.
inline float Finish(float x, const FloatEpilogue& e, int64_t row, int64_t col) {
  if (e.bias) x = x + e.bias[col];
  if (e.residual) x = x + e.residual[row * e.ldr + col];
  return e.relu ? (x > 0.f ? x : 0.f) : x;
}

// The last panel's register that reaches past n: through memory, column by column.
template <class Ops>
void StorePartial(typename Ops::V v, const FloatEpilogue& e, int64_t row, int64_t col, int64_t n,
                  float* c_row) {
  alignas(64) float lanes[Ops::kLanes];
  Ops::StoreU(lanes, v);
  for (int64_t i = 0; col + i < n; ++i) c_row[col + i] = Finish(lanes[i], e, row, col + i);
}

// The loops over the tile's registers are unrolled in full (the pragmas), so that the compiler
// keeps the accumulators in registers instead of an array on the stack.
#define TERN_UNROLL _Pragma("GCC unroll 32")

template <class Ops, int MR, int NP>
void Tile(const KernelArgs& g, int64_t row, int64_t panel) {
  constexpr int kRegs = kPanel / Ops::kLanes;  // registers per panel row
  constexpr int kCols = NP * kRegs;
  using V = typename Ops::V;
  V acc[MR][kCols];
  TERN_UNROLL for (int r = 0; r < MR; ++r) {
    TERN_UNROLL for (int q = 0; q < kCols; ++q) acc[r][q] = Ops::Zero();
  }
  const int64_t k = g.k, lda = g.lda, panel_stride = g.k * kPanel;
  const float* a = g.a + row * lda;
  const float* b = g.b + panel * panel_stride;
  for (int64_t kk = 0; kk < k; ++kk) {
    V bv[kCols];
    TERN_UNROLL for (int p = 0; p < NP; ++p) {
      TERN_UNROLL for (int j = 0; j < kRegs; ++j) {
        bv[p * kRegs + j] = Ops::Load(b + p * panel_stride + kk * kPanel + j * Ops::kLanes);
      }
    }
    TERN_UNROLL for (int r = 0; r < MR; ++r) {
      const V av = Ops::Broadcast(a + r * lda + kk);
      TERN_UNROLL for (int q = 0; q < kCols; ++q) acc[r][q] = Ops::Fma(av, bv[q], acc[r][q]);
    }
  }
  const FloatEpilogue& e = g.epilogue;
  TERN_UNROLL for (int r = 0; r < MR; ++r) {
    float* c_row = g.c + (row + r) * g.ldc;
    const float* res_row = e.residual ? e.residual + (row + r) * e.ldr : nullptr;
    TERN_UNROLL for (int q = 0; q < kCols; ++q) {
      const int64_t col = (panel + q / kRegs) * kPanel + (q % kRegs) * Ops::kLanes;
      if (col + Ops::kLanes <= g.n) {
        V v = acc[r][q];
        if (e.bias) v = Ops::Add(v, Ops::LoadU(e.bias + col));
        if (res_row) v = Ops::Add(v, Ops::LoadU(res_row + col));
        if (e.relu) v = Ops::Relu(v);
        Ops::StoreU(c_row + col, v);
      } else if (col < g.n) {
        StorePartial<Ops>(acc[r][q], e, row + r, col, g.n, c_row);
      }
    }
  }
}
#undef TERN_UNROLL

// Tiles of MR rows over rows [r0, r1) (a multiple of MR) and every panel of g, NP = Ops::Panels(MR)
// panels at a time: fewer rows, more panels, so that a short tile still has enough independent
// accumulators to hide the multiply-add's latency.
template <class Ops, int MR>
void RowTiles(const KernelArgs& g, int64_t r0, int64_t r1) {
  constexpr int NP = Ops::Panels(MR);
  int64_t p = g.panel_begin;
  for (; p + NP <= g.panel_end; p += NP) {
    for (int64_t r = r0; r < r1; r += MR) Tile<Ops, MR, NP>(g, r, p);
  }
  for (; p < g.panel_end; ++p) {
    for (int64_t r = r0; r < r1; r += MR) Tile<Ops, MR, 1>(g, r, p);
  }
}

// One tile's height of `rows` < MR rows from r: the instance for that count.
template <class Ops, int MR>
void ShortRows(const KernelArgs& g, int64_t r, int rows) {
  if constexpr (MR > 0) {
    if (rows == MR) {
      RowTiles<Ops, MR>(g, r, r + MR);
    } else {
      ShortRows<Ops, MR - 1>(g, r, rows);
    }
  }
}

// Rows [row_begin, row_end) x panels [panel_begin, panel_end) of C, in tiles of Ops::kTileRows
// rows (and one shorter tile per row block).
template <class Ops>
void RunKernel(const KernelArgs& g) {
  constexpr int MR = Ops::kTileRows;
  const int64_t block =
      std::max<int64_t>(MR, kBlockBytes / (4 * std::max<int64_t>(1, g.k)) / MR * MR);
  for (int64_t r0 = g.row_begin; r0 < g.row_end; r0 += block) {
    const int64_t r1 = std::min(g.row_end, r0 + block);
    const int64_t full = r0 + (r1 - r0) / MR * MR;
    if (full > r0) RowTiles<Ops, MR>(g, r0, full);
    if (r1 > full) ShortRows<Ops, MR - 1>(g, full, static_cast<int>(r1 - full));
  }
}

// The kernels of float_gemm_<isa>.cc.
void KernelAvx2(const KernelArgs& g);
void KernelAvx512(const KernelArgs& g);

}  // namespace tern::cpu::float_gemm_internal
