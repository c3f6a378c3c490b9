// The bf16 GEMM kernel for AMX-BF16 (tdpbf16ps: a 16 x 16 tile of float sums gains the products
// of 16 rows by 16 cells of A and 16 cells by 16 columns of B in one instruction). It reads the
// cells the AVX-512 kernel's packers wrote: a tile of A is 16 rows of (m, pairs) cells, 16 cells
// wide (stride pairs); a tile of B is 16 consecutive cell rows of a 16-column panel (stride 16).
// Blocks of 2 x 2 tiles (32 rows x 2 panels) keep four tiles of sums; the last cells of k (fewer
// than 16) and the last rows of m (fewer than 16) come from zero-padded copies.
#if defined(__x86_64__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tensor/cpu/bf16_gemm_kernel.h"

namespace tern::cpu::bf16_gemm_internal {
namespace {

constexpr int64_t kTile = 16;  // rows of a tile, and cells of a tile row
constexpr int64_t kTileCells = kTile * kTile;

// Palette 1: eight tiles of 16 rows x 64 bytes. Tiles 0-3 hold sums (row tile r, panel p at
// 2r + p), 4-5 A's row tiles, 6-7 B's panels.
struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

constexpr TileConfig MakeTileConfig() {
  TileConfig config{};
  config.palette = 1;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kTile;
    config.colsb[t] = kTile * 4;
  }
  return config;
}

// A constant: GCC 12 drops the stores of a local configuration's rows and columns when
// _tile_loadconfig is its only reader outside the kernel's function (the tiles then fault).
constexpr TileConfig kTileConfig = MakeTileConfig();

}  // namespace

void AmxConfigure() { _tile_loadconfig(&kTileConfig); }

void AmxRelease() { _tile_release(); }

namespace {

// Where a block's operands come from: each row tile's cells (stride `a_stride` cells) and its
// last cells zero-padded (16 x 16), each panel's cells and its last cells likewise.
struct BlockOperands {
  const uint32_t* a[2];
  int64_t a_stride[2];
  const uint32_t* a_tail[2];
  const uint32_t* b[2];
  const uint32_t* b_tail[2];
};

template <int R, int P>
void Sums(const BlockOperands& o, int64_t full, bool tail, float (*sums)[kTileCells]) {
  _tile_zero(0);
  if constexpr (P == 2) _tile_zero(1);
  if constexpr (R == 2) _tile_zero(2);
  if constexpr (R == 2 && P == 2) _tile_zero(3);
  auto step = [&](const uint32_t* a0, int64_t s0, const uint32_t* a1, int64_t s1,
                  const uint32_t* b0, const uint32_t* b1) {
    _tile_loadd(4, a0, s0 * 4);
    _tile_loadd(6, b0, kTile * 4);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (P == 2) {
      _tile_loadd(7, b1, kTile * 4);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (R == 2) {
      _tile_loadd(5, a1, s1 * 4);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (P == 2) _tile_dpbf16ps(3, 5, 7);
    }
  };
  for (int64_t j = 0; j < full; j += kTile) {
    step(o.a[0] + j, o.a_stride[0], o.a[1] + j, o.a_stride[1], o.b[0] + j * kTile,
         o.b[1] + j * kTile);
  }
  if (tail) step(o.a_tail[0], kTile, o.a_tail[1], kTile, o.b_tail[0], o.b_tail[1]);
  _tile_stored(0, sums[0], kTile * 4);
  if constexpr (P == 2) _tile_stored(1, sums[1], kTile * 4);
  if constexpr (R == 2) _tile_stored(2, sums[2], kTile * 4);
  if constexpr (R == 2 && P == 2) _tile_stored(3, sums[3], kTile * 4);
}

// alpha * sums + beta * c (+ bias) into c's rows [row, row + rows) and the panel's columns
// below n.
template <bool kBeta, bool kBias>
void StoreRows(const KernelArgs& g, const float* sums, int64_t row, int64_t rows, int64_t col) {
  const __m512 alpha = _mm512_set1_ps(g.alpha), beta = _mm512_set1_ps(g.beta);
  const __m512 bias = kBias ? _mm512_loadu_ps(g.bias + col) : _mm512_setzero_ps();
  float* c = g.c + row * g.ldc + col;
  for (int64_t i = 0; i < rows; ++i, c += g.ldc) {
    __m512 v = _mm512_mul_ps(alpha, _mm512_load_ps(sums + i * kTile));
    if constexpr (kBeta) v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_loadu_ps(c)));
    if constexpr (kBias) v = _mm512_add_ps(v, bias);
    _mm512_storeu_ps(c, v);
  }
}

void Store(const KernelArgs& g, const float* sums, int64_t row, int64_t rows, int64_t panel) {
  const int64_t col = panel * kPanel, cols = std::min(kPanel, g.n - col);
  if (cols < kPanel) {
    for (int64_t i = 0; i < rows; ++i) {
      float* c = g.c + (row + i) * g.ldc + col;
      for (int64_t j = 0; j < cols; ++j)
        c[j] = FinishBiased(sums[i * kTile + j], g.alpha, g.beta, c + j, g.bias, col + j);
    }
  } else if (g.beta != 0.f) {
    g.bias ? StoreRows<true, true>(g, sums, row, rows, col)
           : StoreRows<true, false>(g, sums, row, rows, col);
  } else {
    g.bias ? StoreRows<false, true>(g, sums, row, rows, col)
           : StoreRows<false, false>(g, sums, row, rows, col);
  }
}

}  // namespace

bool AmxPermitted() {
  // Linux hands a process AMX's tile state only when asked (ARCH_REQ_XCOMP_PERM for
  // XFEATURE_XTILEDATA); the grant covers all its threads.
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
}

void KernelAmxBf16(const KernelArgs& g) {
  AmxConfigure();
  KernelAmxBf16Configured(g);
  AmxRelease();
}

void KernelAmxBf16Configured(const KernelArgs& g) {
  const int64_t pairs = g.pairs, full = pairs / kTile * kTile, rest = pairs - full;
  const int64_t rows = g.row_end - g.row_begin, row_tiles = (rows + kTile - 1) / kTile;
  const int64_t panels = g.panel_end - g.panel_begin;
  const int64_t last_rows = rows - (row_tiles - 1) * kTile;
  if (rows <= 0 || panels <= 0) return;
  // Scratch: the last row tile's rows zero-padded to 16 (when fewer), each row tile's last cells
  // and each panel's last cells, zero-padded to 16 x 16.
  thread_local std::vector<uint32_t> scratch;
  const int64_t copy_cells = last_rows < kTile ? kTile * pairs : 0;
  const int64_t a_tails = rest ? row_tiles * kTileCells : 0,
                b_tails = rest ? panels * kTileCells : 0;
  scratch.assign(copy_cells + a_tails + b_tails, 0u);
  uint32_t* copy = scratch.data();
  uint32_t* a_tail = copy + copy_cells;
  uint32_t* b_tail = a_tail + a_tails;
  if (copy_cells) {
    std::memcpy(copy, g.a + (g.row_begin + (row_tiles - 1) * kTile) * pairs,
                last_rows * pairs * sizeof(uint32_t));
  }
  auto a_rows = [&](int64_t t, int64_t* stride) -> const uint32_t* {
    *stride = pairs;
    if (t == row_tiles - 1 && copy_cells) return copy;
    return g.a + (g.row_begin + t * kTile) * pairs;
  };
  if (rest) {
    for (int64_t t = 0; t < row_tiles; ++t) {
      int64_t stride;
      const uint32_t* a = a_rows(t, &stride);
      for (int64_t i = 0; i < kTile; ++i) {
        std::memcpy(a_tail + t * kTileCells + i * kTile, a + i * stride + full,
                    rest * sizeof(uint32_t));
      }
    }
    for (int64_t p = 0; p < panels; ++p) {
      std::memcpy(b_tail + p * kTileCells,
                  g.b + (g.panel_begin + p) * pairs * kPanel + full * kPanel,
                  rest * kPanel * sizeof(uint32_t));
    }
  }
  alignas(64) float sums[4][kTileCells];
  auto block = [&](int64_t t, int64_t p) {
    const int nr = t + 1 < row_tiles ? 2 : 1, np = p + 1 < panels ? 2 : 1;
    BlockOperands o;
    for (int r = 0; r < 2; ++r) {
      const int64_t tr = std::min(t + r, row_tiles - 1);
      o.a[r] = a_rows(tr, &o.a_stride[r]);
      o.a_tail[r] = a_tail + tr * kTileCells;
    }
    for (int q = 0; q < 2; ++q) {
      const int64_t pq = std::min(p + q, panels - 1);
      o.b[q] = g.b + (g.panel_begin + pq) * pairs * kPanel;
      o.b_tail[q] = b_tail + pq * kTileCells;
    }
    if (nr == 2 && np == 2) {
      Sums<2, 2>(o, full, rest != 0, sums);
    } else if (nr == 2) {
      Sums<2, 1>(o, full, rest != 0, sums);
    } else if (np == 2) {
      Sums<1, 2>(o, full, rest != 0, sums);
    } else {
      Sums<1, 1>(o, full, rest != 0, sums);
    }
    for (int r = 0; r < nr; ++r) {
      const int64_t row = g.row_begin + (t + r) * kTile;
      const int64_t n_rows = t + r == row_tiles - 1 ? last_rows : kTile;
      for (int q = 0; q < np; ++q) Store(g, sums[2 * r + q], row, n_rows, g.panel_begin + p + q);
    }
  };
  // Each block's sums take its k cells in the same order whichever loop is outer, so the order
  // changes no bit. The inner loop rereads the other operand for every block of the outer one:
  // the smaller operand is the one reread (an A of a 4,000-column gradient, 8 MB of cells,
  // streamed once instead of once per pair of panels).
  if (rows >= panels * kPanel) {
    for (int64_t t = 0; t < row_tiles; t += 2)
      for (int64_t p = 0; p < panels; p += 2) block(t, p);
  } else {
    for (int64_t p = 0; p < panels; p += 2)
      for (int64_t t = 0; t < row_tiles; t += 2) block(t, p);
  }
}

}  // namespace tern::cpu::bf16_gemm_internal
#endif
