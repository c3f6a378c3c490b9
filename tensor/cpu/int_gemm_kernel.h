// The integer GEMM's inner kernel, written once over an ISA's "Ops" (int_gemm_<isa>.cc define
// them with their intrinsics and instantiate RunKernel in a file compiled with that ISA's flags).
// Everything here is a template on Ops, so each ISA file gets its own code and no inline function
// compiled with one ISA's flags can be picked up by another's caller.
//
// The kernel broadcasts one 32-bit cell of an A row (2 int16 or 4 int8 consecutive k) and
// multiplies it into a register of B's packed panel (the same k, kLanes consecutive columns),
// accumulating int32 per column: the layout that suits the decoder's small m. A tile is MR rows x
// NP panels of 16 columns; tiles go panel-block-major so a block of B stays in cache while every
// row of A passes over it.
#pragma once

#include <cstdint>
#include <cstring>

namespace tern::cpu::int_gemm_internal {

inline constexpr int kPanelCols = 16;
inline constexpr int kCellBytes = 4;  // one k-group of one column
inline constexpr int kPanelRowBytes = kPanelCols * kCellBytes;

struct KernelArgs {
  const uint8_t* a;  // (m, groups) cells of quantized A rows
  int64_t m;
  const float* row_unquant;     // (m) 1 / (row scale * weight scale)
  const float* column_unquant;  // (n) 1 / column scale, or null (a per-tensor scale only)
  const uint8_t* b;             // packed panels, (panels, groups, 64 bytes)
  int64_t groups;
  const int32_t* col_offsets;  // (panels * 16) initial accumulators, or null for zeros
  const float* bias;           // (n) or null
  float* c;                    // (m, ldc)
  int64_t ldc, n;
  int64_t panel_begin, panel_end;
  // Skipping A's zero cells (IntGemm's skip_zero_groups): rows go in tiles of kListedRows, and tile
  // t runs only over the k-groups listed[listed_begin[t]], ..., listed[listed_begin[t + 1] - 1],
  // those where some row of the tile has a non-zero cell. Null: every group, the dense tiles.
  const int32_t* listed = nullptr;
  const int64_t* listed_begin = nullptr;
};
inline constexpr int kListedRows = 4;  // a beam of 4: one sentence's hypotheses, alike

// Writes columns [col, col + count) of a C row from accumulators: float(acc) * unquant, times
// the column's factor when there are any, plus bias (0 when there is none). The expression the
// reference uses too, and Ops::Store's vector form of it (no FMA: these files build with
// -ffp-contract=off).
template <class Ops>
void StoreColumns(const int32_t* acc, int count, float unquant, const float* columns,
                  const float* bias, int64_t col, int64_t n, float* c_row) {
  for (int i = 0; i < count && col + i < n; ++i) {
    const float b = bias ? bias[col + i] : 0.f;
    float f = static_cast<float>(acc[i]) * unquant;
    if (columns) f = f * columns[col + i];
    c_row[col + i] = f + b;
  }
}

template <class Ops>
using TileAcc = typename Ops::Acc[kPanelCols / Ops::kLanes];  // one panel row's registers

// Writes a tile's accumulators to rows [row, row + MR) of C, panels [panel, panel + NP).
template <class Ops, int MR, int NP>
void StoreTile(const KernelArgs& g, int64_t row, int64_t panel, const TileAcc<Ops> (&acc)[MR][NP]) {
  constexpr int kRegs = kPanelCols / Ops::kLanes;
  for (int r = 0; r < MR; ++r) {
    float* c_row = g.c + (row + r) * g.ldc;
    const float unquant = g.row_unquant[row + r];
    for (int p = 0; p < NP; ++p) {
      for (int j = 0; j < kRegs; ++j) {
        const int64_t col = (panel + p) * kPanelCols + j * Ops::kLanes;
        if (col + Ops::kLanes <= g.n) {  // whole register: the vector store
          Ops::Store(acc[r][p][j], unquant, g.column_unquant ? g.column_unquant + col : nullptr,
                     g.bias ? g.bias + col : nullptr, c_row + col);
        } else {
          alignas(64) int32_t lanes[Ops::kLanes];
          Ops::Finish(acc[r][p][j], lanes);
          StoreColumns<Ops>(lanes, Ops::kLanes, unquant, g.column_unquant, g.bias, col, g.n, c_row);
        }
      }
    }
  }
}

// A panel's initial accumulator for register j: its column offsets, or zeros.
template <class Ops>
typename Ops::Acc InitAcc(const KernelArgs& g, int64_t panel, int j) {
  return Ops::Init(g.col_offsets ? g.col_offsets + panel * kPanelCols + j * Ops::kLanes : nullptr);
}

// The k-groups a tile of rows from `row` runs over: all of them, or (listed) the tile's listed ones
// (KernelArgs::listed; row is a multiple of kListedRows).
template <bool kListed>
struct TileGroups {
  TileGroups(const KernelArgs& g, int64_t row) {
    if constexpr (kListed) {
      const int64_t tile = row / kListedRows;
      list = g.listed + g.listed_begin[tile];
      count = g.listed_begin[tile + 1] - g.listed_begin[tile];
    } else {
      count = g.groups;
    }
  }
  int64_t operator[](int64_t i) const { return kListed ? list[i] : i; }
  const int32_t* list = nullptr;
  int64_t count;
};

// The generic tile, MR rows x NP panels. GCC keeps the accumulator array in registers for small
// tiles; an ISA whose best tile it spills or shuffles writes that tile out by hand
// (int_gemm_avx2.cc, int_gemm_tile512.h). Listed: over the tile's listed k-groups only
// (KernelArgs::listed; row is a multiple of kListedRows), so the same int32 sums without the
// products of zero cells.
template <class Ops, int MR, int NP, bool kListed = false>
void Tile(const KernelArgs& g, int64_t row, int64_t panel) {
  constexpr int kRegs = kPanelCols / Ops::kLanes;  // registers per panel row
  TileAcc<Ops> acc[MR][NP];
  for (int p = 0; p < NP; ++p) {
    for (int j = 0; j < kRegs; ++j) {
      const typename Ops::Acc init = InitAcc<Ops>(g, panel + p, j);
      for (int r = 0; r < MR; ++r) acc[r][p][j] = init;
    }
  }
  const uint8_t* b[NP];
  for (int p = 0; p < NP; ++p) b[p] = g.b + (panel + p) * g.groups * kPanelRowBytes;
  const uint8_t* a[MR];
  for (int r = 0; r < MR; ++r) a[r] = g.a + (row + r) * g.groups * kCellBytes;
  const TileGroups<kListed> groups(g, row);
  for (int64_t i = 0; i < groups.count; ++i) {
    const int64_t k = groups[i];
    typename Ops::B bv[NP][kRegs];
    for (int p = 0; p < NP; ++p) {
      for (int j = 0; j < kRegs; ++j) {
        bv[p][j] = Ops::LoadB(b[p] + k * kPanelRowBytes + j * Ops::kLanes * kCellBytes);
      }
    }
    for (int r = 0; r < MR; ++r) {
      int32_t cell;
      std::memcpy(&cell, a[r] + k * kCellBytes, kCellBytes);
      const typename Ops::A av = Ops::Broadcast(cell);
      for (int p = 0; p < NP; ++p) {
        for (int j = 0; j < kRegs; ++j) Ops::MulAdd(acc[r][p][j], av, bv[p][j]);
      }
    }
  }
  StoreTile<Ops, MR, NP>(g, row, panel, acc);
}

// The last `rows` (< R) rows of a panel block in one tile, so B's panel is read once for them.
template <class Ops, int R, int NP, bool kListed = false>
void LeftoverTile(const KernelArgs& g, int64_t row, int64_t rows, int64_t panel) {
  if constexpr (R > 1) {
    if (rows == R - 1) return Tile<Ops, R - 1, NP, kListed>(g, row, panel);
    LeftoverTile<Ops, R - 1, NP, kListed>(g, row, rows, panel);
  }
}

using TileFn = void (*)(const KernelArgs& g, int64_t row, int64_t panel);

// The listed kernel: per panel, tiles of kListedRows rows over their listed groups (ListedTile:
// the generic one unless the ISA brings its own).
template <class Ops, TileFn ListedTile = Tile<Ops, kListedRows, 1, true>>
void RunListedKernel(const KernelArgs& g) {
  for (int64_t panel = g.panel_begin; panel < g.panel_end; ++panel) {
    int64_t row = 0;
    for (; row + kListedRows <= g.m; row += kListedRows) ListedTile(g, row, panel);
    if (row < g.m) LeftoverTile<Ops, kListedRows, 1, true>(g, row, g.m - row, panel);
  }
}

// The leftover rows of a panel block (fewer than a full tile's) in one tile: LeftoverTile unless
// the ISA brings its own.
using LeftoverFn = void (*)(const KernelArgs& g, int64_t row, int64_t rows, int64_t panel);

// Rows [row, m) of one panel block in tiles of MR rows (FullTile), then the leftover rows.
template <class Ops, int MR, int NP, TileFn FullTile = Tile<Ops, MR, NP>,
          LeftoverFn Leftover = LeftoverTile<Ops, MR, NP>>
void PanelBlock(const KernelArgs& g, int64_t panel) {
  int64_t row = 0;
  for (; row + MR <= g.m; row += MR) FullTile(g, row, panel);
  if (row < g.m) Leftover(g, row, g.m - row, panel);
}

// FullTile: the kRows x kPanels tile, the generic one unless the ISA brings its own; likewise
// Leftover for the rows after the last full tile (4 of them for a beam of 4: the output layer's
// per-sentence products) and ListedTile for RunListedKernel.
template <class Ops, TileFn FullTile = Tile<Ops, Ops::kRows, Ops::kPanels>,
          LeftoverFn Leftover = LeftoverTile<Ops, Ops::kRows, Ops::kPanels>,
          TileFn ListedTile = Tile<Ops, kListedRows, 1, true>>
void RunKernel(const KernelArgs& g) {
  if (g.listed) return RunListedKernel<Ops, ListedTile>(g);
  int64_t panel = g.panel_begin;
  for (; panel + Ops::kPanels <= g.panel_end; panel += Ops::kPanels) {
    PanelBlock<Ops, Ops::kRows, Ops::kPanels, FullTile, Leftover>(g, panel);
  }
  for (; panel < g.panel_end; ++panel) PanelBlock<Ops, Ops::kRows, 1>(g, panel);
}

// Quantizing an A row (int_gemm.cc's QuantizeRow) in two passes, each with a scalar form and an
// AVX2 form that give the same bits, so the kernels' quantization can be vectorized while the
// reference stays scalar.
//
// Pass 1: max |x| (NaN ignored) and sum |x| in double, x[i] added into lane i % kSumLanes in order
// and the lanes reduced in one fixed tree (ReduceLanes).
inline constexpr int kSumLanes = 8;
struct RowStats {
  float max_abs;
  double sum_abs;
};
double ReduceLanes(const double* lanes);  // defined in int_gemm.cc, built without ISA flags
RowStats RowStatsScalar(const float* x, int64_t k);
RowStats RowStatsAvx2(const float* x, int64_t k);
// Pass 1 of an int8 row, which needs no sum: RowStatsAvx2(x, k).max_abs, without the sum's
// conversions to double.
float MaxAbsAvx2(const float* x, int64_t k);
// Pass 2: q[i] = clamp(nearbyint(x[i] * scale), -range, range), NaN to 0, written as int16
// (range 32767) or int8 (range 127) values.
void QuantizeValuesScalar(bool int16, const float* x, int64_t k, float scale, void* q);
void QuantizeValuesAvx2(bool int16, const float* x, int64_t k, float scale, void* q);

// Writes to list the groups g < groups where some of `rows` rows of cells (row_bytes apart) has a
// non-zero cell, in increasing order, as first + g; returns their count. Both forms give the same
// list.
int64_t ListNonZeroGroupsScalar(const uint8_t* cells, int64_t rows, int64_t row_bytes,
                                int64_t groups, int32_t* list, int32_t first = 0);
int64_t ListNonZeroGroupsAvx2(const uint8_t* cells, int64_t rows, int64_t row_bytes, int64_t groups,
                              int32_t* list);

// The per-ISA entry points (int_gemm_<isa>.cc); int16 and int8 take the same arguments.
void KernelSse2Int16(const KernelArgs& g);
void KernelSse2Int8(const KernelArgs& g);
void KernelAvx2Int16(const KernelArgs& g);
void KernelAvx2Int8(const KernelArgs& g);
void KernelAvx512bwInt16(const KernelArgs& g);
void KernelAvx512bwInt8(const KernelArgs& g);
void KernelAvx512vnniInt16(const KernelArgs& g);
void KernelAvx512vnniInt8(const KernelArgs& g);

}  // namespace tern::cpu::int_gemm_internal
