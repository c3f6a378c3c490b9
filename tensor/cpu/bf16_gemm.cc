// The bf16 GEMM's packing, dispatch and reference; the kernels are bf16_gemm_avx512bf16.cc and
// bf16_gemm_amx.cc.
#include "tensor/cpu/bf16_gemm.h"

#include <cpuid.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/cpu/bf16_gemm_kernel.h"
#include "tensor/cpu/int_gemm.h"
#include "tensor/low_precision.h"

namespace tern::cpu {
namespace {

using bf16_gemm_internal::KernelArgs;
using bf16_gemm_internal::kPanel;
using bf16_gemm_internal::PairCellsAvx512Bf16;
using bf16_gemm_internal::RowCellsAvx512Bf16;
using bf16_gemm_internal::TransposedCells16Avx512Bf16;

// Products smaller than this (multiply-adds) run on the calling thread.
constexpr double kParallelMacs = 1 << 20;

// 64-byte aligned storage, grown as needed and kept (one per calling thread).
class CellBuffer {
 public:
  CellBuffer() = default;
  CellBuffer(const CellBuffer&) = delete;
  CellBuffer& operator=(const CellBuffer&) = delete;
  ~CellBuffer() { std::free(data_); }
  uint32_t* Get(size_t cells) {
    if (cells > capacity_) {
      std::free(data_);
      capacity_ = std::max(cells, capacity_ * 2);
      data_ = static_cast<uint32_t*>(std::aligned_alloc(64, (capacity_ * 4 + 63) / 64 * 64));
      CHECK(data_ != nullptr) << "cannot allocate " << capacity_ * 4 << " bytes of bf16 cells";
    }
    return data_;
  }

 private:
  uint32_t* data_ = nullptr;
  size_t capacity_ = 0;
};

// A transposed operand packs this many rows at a time: their cells' cache lines stay in L1
// while each pair of source rows adds one cell to every one of them (all m rows at once
// thrashed the cache when m was a 32,000-word vocabulary).
constexpr int64_t kTransposeRows = 64;

// Element (i, kk) of an operand seen as (rows, k): op(a) for A; for B, op(b) transposed (its
// column i, row kk), so that both pack the same way.
uint32_t Bits(const Bf16Operand& x, bool transposed, int64_t i, int64_t kk) {
  const int64_t index = transposed ? kk * x.ld + i : i * x.ld + kk;
  return x.bf16 ? static_cast<const uint16_t*>(x.data)[index]
                : BFloat16Bits(static_cast<const float*>(x.data)[index]);
}

// Cell (i, j) of a (rows, k) view: elements 2j (low half) and 2j + 1 (high), 0 past k.
uint32_t Cell(const Bf16Operand& x, bool transposed, int64_t i, int64_t j, int64_t k) {
  const uint32_t lo = Bits(x, transposed, i, 2 * j);
  const uint32_t hi = 2 * j + 1 < k ? Bits(x, transposed, i, 2 * j + 1) : 0u;
  return lo | (hi << 16);
}

// A float32 A's rows [r0, r1) as (m, pairs) cells, rounded by the kernel's ISA. Stored (k, m),
// a row is a column: two source rows give a pair of cells for kTransposeRows rows at a time.
void PackFloatARows(const Bf16Operand& a, int64_t r0, int64_t r1, int64_t k, uint32_t* out) {
  const float* base = static_cast<const float*>(a.data);
  const int64_t pairs = (k + 1) / 2;
  if (!a.transposed) {
    for (int64_t i = r0; i < r1; ++i) RowCellsAvx512Bf16(base + i * a.ld, k, out + i * pairs);
    return;
  }
  uint32_t cells[kTransposeRows];
  for (int64_t i0 = r0; i0 < r1; i0 += kTransposeRows) {
    const int64_t rows = std::min(r1 - i0, kTransposeRows);
    for (int64_t j = 0; j < pairs; ++j) {
      const float* lo = base + 2 * j * a.ld + i0;
      PairCellsAvx512Bf16(lo, 2 * j + 1 < k ? lo + a.ld : nullptr, rows, cells);
      for (int64_t i = 0; i < rows; ++i) out[(i0 + i) * pairs + j] = cells[i];
    }
  }
}

// A float32 B's panel of columns [c0, c0 + cols): column c's cell j at panel[j * 16 + c - c0].
// Stored (k, n), a pair of source rows is a row of the panel; stored (n, k), a column is a
// source row, packed a chunk of its cells at a time.
void PackFloatPanel(const Bf16Operand& b, int64_t c0, int64_t cols, int64_t k, uint32_t* panel) {
  const float* base = static_cast<const float*>(b.data);
  const int64_t pairs = (k + 1) / 2;
  if (!b.transposed) {
    for (int64_t j = 0; j < pairs; ++j) {
      const float* lo = base + 2 * j * b.ld + c0;
      PairCellsAvx512Bf16(lo, 2 * j + 1 < k ? lo + b.ld : nullptr, cols, panel + j * kPanel);
    }
    return;
  }
  constexpr int64_t kChunk = 256;  // cells
  uint32_t cells[kChunk];
  for (int64_t c = 0; c < cols; ++c) {
    const float* row = base + (c0 + c) * b.ld;
    for (int64_t j0 = 0; j0 < pairs; j0 += kChunk) {
      const int64_t n = std::min(kChunk, pairs - j0);
      RowCellsAvx512Bf16(row + 2 * j0, std::min(2 * kChunk, k - 2 * j0), cells);
      for (int64_t j = 0; j < n; ++j) panel[(j0 + j) * kPanel + c] = cells[j];
    }
  }
}

// A cell from two bf16 values: lo in the low half.
inline uint32_t Pair(uint16_t lo, uint16_t hi) { return lo | (static_cast<uint32_t>(hi) << 16); }

// A's rows [r0, r1) as (m, pairs) cells. bf16 rows are their own cells (a row's pairs are
// adjacent); a transposed bf16 A interleaves two source rows; float32 rounds through Cell.
void PackARows(const Bf16Operand& a, int64_t r0, int64_t r1, int64_t k, uint32_t* out) {
  const int64_t pairs = (k + 1) / 2;
  if (!a.bf16) {
    PackFloatARows(a, r0, r1, k, out);
    return;
  }
  const uint16_t* base = static_cast<const uint16_t*>(a.data);
  if (!a.transposed) {
    for (int64_t i = r0; i < r1; ++i) {
      const uint16_t* row = base + i * a.ld;
      std::memcpy(out + i * pairs, row, (k / 2) * sizeof(uint32_t));
      if (k % 2) out[i * pairs + pairs - 1] = row[k - 1];
    }
    return;
  }
  // Blocks of 16 rows x 16 cells transposed in registers, 256 rows at a time so that each source
  // row is read in runs of 512 bytes; the edges cell by cell.
  constexpr int64_t kRun = 256;
  const int64_t full_pairs = pairs / 16 * 16;
  for (int64_t i1 = r0; i1 < r1; i1 += kRun) {
    const int64_t i2 = std::min(r1, i1 + kRun), full_rows = i1 + (i2 - i1) / 16 * 16;
    for (int64_t j0 = 0; j0 < full_pairs; j0 += 16) {
      for (int64_t i0 = i1; i0 < full_rows; i0 += 16)
        TransposedCells16Avx512Bf16(base, a.ld, k, i0, j0, out, pairs);
    }
    for (int64_t j = 0; j < pairs; ++j) {
      const uint16_t* lo = base + 2 * j * a.ld;
      const uint16_t* hi = 2 * j + 1 < k ? lo + a.ld : nullptr;
      for (int64_t i = j < full_pairs ? full_rows : i1; i < i2; ++i)
        out[i * pairs + j] = Pair(lo[i], hi ? hi[i] : 0);
    }
  }
}

void PackA(const Bf16Operand& a, int64_t m, int64_t k, uint32_t* out, bool serial) {
  auto part = [&](int64_t r0, int64_t r1) { PackARows(a, r0, r1, k, out); };
  if (serial) {
    part(0, m);
  } else {
    ParallelFor(m, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k)), part);
  }
}

// B's panel p: (pairs, 16) cells, column c of the panel being column p * 16 + c of op(b), zero
// past n. bf16 B: two rows interleaved (stored (k, n)), or a column's adjacent pairs (stored
// (n, k)); float32 through Cell.
void PackPanel(const Bf16Operand& b, int64_t p, int64_t k, int64_t n, uint32_t* panel) {
  const int64_t pairs = (k + 1) / 2, c0 = p * kPanel, cols = std::min(kPanel, n - c0);
  if (cols < kPanel) std::memset(panel, 0, pairs * kPanel * sizeof(uint32_t));
  if (!b.bf16) {
    PackFloatPanel(b, c0, cols, k, panel);
    return;
  }
  const uint16_t* base = static_cast<const uint16_t*>(b.data);
  if (!b.transposed) {
    bf16_gemm_internal::PairPanelBf16(base + c0, b.ld, k, cols, panel);
    return;
  }
  if (cols == kPanel) {
    bf16_gemm_internal::TransposedPanelBf16(base + c0 * b.ld, b.ld, k, panel);
    return;
  }
  for (int64_t c = 0; c < cols; ++c) {
    const uint16_t* col = base + (c0 + c) * b.ld;
    for (int64_t j = 0; j < k / 2; ++j) {
      uint32_t cell;
      std::memcpy(&cell, col + 2 * j, sizeof cell);
      panel[j * kPanel + c] = cell;
    }
    if (k % 2) panel[(pairs - 1) * kPanel + c] = col[k - 1];
  }
}

void PackB(const Bf16Operand& b, int64_t k, int64_t n, uint32_t* out, bool serial) {
  const int64_t pairs = (k + 1) / 2, panels = (n + kPanel - 1) / kPanel;
  auto part = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) PackPanel(b, p, k, n, out + p * pairs * kPanel);
  };
  if (serial) {
    part(0, panels);
  } else {
    ParallelFor(panels, 1, part);
  }
}

bool CpuHasBf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

// CPUID leaf 7's EDX: AMX-BF16 is bit 22, AMX-TILE bit 24 (read directly: clang 14's
// __builtin_cpu_supports knows neither name).
bool CpuHasAmxBf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (edx >> 22 & 1u) && (edx >> 24 & 1u);
}

// bf16 bits as float, denormals as zero (vdpbf16ps' DAZ).
float FromBits(uint32_t h) {
  if ((h & 0x7F80u) == 0) h &= 0x8000u;
  const uint32_t bits = h << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// A denormal sum flushed to zero (vdpbf16ps' FTZ).
float FlushDenormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.f, x) : x;
}

}  // namespace

bool HasBf16GemmKernel() {
  static const bool has = [] {
    const IntGemmIsa isa = ActiveIntGemmIsa();  // TERN_ISA below AVX-512 turns it off too
    return CpuHasBf16() && (isa == IntGemmIsa::kAvx512bw || isa == IntGemmIsa::kAvx512vnni);
  }();
  return has;
}

const char* Bf16KernelName(Bf16Kernel kernel) {
  return kernel == Bf16Kernel::kAmx ? "AMX-BF16" : "AVX512-BF16";
}

bool HasAmxBf16Kernel() {
  static const bool has =
      HasBf16GemmKernel() && CpuHasAmxBf16() && bf16_gemm_internal::AmxPermitted();
  return has;
}

Bf16Kernel ActiveBf16Kernel() {
  static const Bf16Kernel kernel = [] {
    const char* env = std::getenv("TERN_AMX");
    const bool off = env != nullptr && std::string(env) == "0";
    return HasAmxBf16Kernel() && !off ? Bf16Kernel::kAmx : Bf16Kernel::kAvx512Bf16;
  }();
  return kernel;
}

void Bf16Gemm(const Bf16Operand& a, const Bf16Operand& b, int64_t m, int64_t n, int64_t k,
              float alpha, float beta, float* c, int64_t ldc, bool serial, const float* bias) {
  Bf16GemmWith(ActiveBf16Kernel(), a, b, m, n, k, alpha, beta, c, ldc, serial, bias);
}

namespace {

// Bf16GemmWith's product; `configured`: the AMX tiles are already configured on this thread
// (Bf16GemmBatch), so the product runs serially on them.
void Product(Bf16Kernel kernel, const Bf16Operand& a, const Bf16Operand& b, int64_t m, int64_t n,
             int64_t k, float alpha, float beta, float* c, int64_t ldc, bool serial,
             const float* bias, bool configured) {
  if (m == 0 || n == 0) return;
  const int64_t pairs = std::max<int64_t>(1, (k + 1) / 2), panels = (n + kPanel - 1) / kPanel;
  thread_local CellBuffer a_cells, b_cells;
  // A bf16 A stored (m, k) with even k and no gaps between rows is its own cells: the kernel
  // reads it where it is instead of a copy.
  const bool a_is_cells = a.bf16 && !a.transposed && k > 0 && k % 2 == 0 && a.ld == k &&
                          reinterpret_cast<uintptr_t>(a.data) % alignof(uint32_t) == 0;
  uint32_t* pa = a_is_cells ? nullptr : a_cells.Get(m * pairs);
  uint32_t* pb = b_cells.Get(panels * pairs * kPanel);
  if (k == 0) {  // zero cells: the product is 0
    std::memset(pa, 0, m * pairs * 4);
    std::memset(pb, 0, panels * pairs * kPanel * 4);
  } else {
    if (!a_is_cells) PackA(a, m, k, pa, serial);
    PackB(b, k, n, pb, serial);
  }
  const uint32_t* cells_a = a_is_cells ? static_cast<const uint32_t*>(a.data) : pa;
  KernelArgs g{cells_a, pb, pairs, alpha, beta, c, ldc, n, 0, m, 0, panels, bias};
  const bool amx = kernel == Bf16Kernel::kAmx;
  if (configured) {
    bf16_gemm_internal::KernelAmxBf16Configured(g);
    return;
  }
  auto run = amx ? bf16_gemm_internal::KernelAmxBf16 : bf16_gemm_internal::KernelAvx512Bf16;
  const int threads = NumThreads();
  if (serial || threads == 1 || static_cast<double>(m) * n * k < kParallelMacs) {
    run(g);
    return;
  }
  // Panels in pairs, else rows in the kernel's tiles (8 rows; AMX's blocks of 32).
  const int64_t pair_count = (panels + 1) / 2, tile = amx ? 32 : 8;
  if (pair_count >= 2 * threads || m < 2 * tile) {
    ParallelFor(pair_count, 1, [&](int64_t p0, int64_t p1) {
      KernelArgs part = g;
      part.panel_begin = 2 * p0;
      part.panel_end = std::min(2 * p1, panels);
      run(part);
    });
  } else {
    ParallelFor((m + tile - 1) / tile, 1, [&](int64_t t0, int64_t t1) {
      KernelArgs part = g;
      part.row_begin = tile * t0;
      part.row_end = std::min(tile * t1, m);
      run(part);
    });
  }
}

}  // namespace

void Bf16GemmWith(Bf16Kernel kernel, const Bf16Operand& a, const Bf16Operand& b, int64_t m,
                  int64_t n, int64_t k, float alpha, float beta, float* c, int64_t ldc, bool serial,
                  const float* bias) {
  CHECK(CpuHasBf16()) << "Bf16Gemm needs AVX512-BF16";
  CHECK(kernel != Bf16Kernel::kAmx || HasAmxBf16Kernel()) << "no AMX-BF16 kernel here";
  Product(kernel, a, b, m, n, k, alpha, beta, c, ldc, serial, bias, /*configured=*/false);
}

void Bf16GemmBatch(const Bf16Operand& a, int64_t stride_a, const Bf16Operand& b, int64_t stride_b,
                   int64_t count, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                   float* c, int64_t stride_c, int64_t ldc) {
  CHECK(CpuHasBf16()) << "Bf16GemmBatch needs AVX512-BF16";
  const Bf16Kernel kernel = ActiveBf16Kernel();
  const bool amx = kernel == Bf16Kernel::kAmx;
  if (amx) bf16_gemm_internal::AmxConfigure();
  for (int64_t i = 0; i < count; ++i) {
    Product(kernel, Advance(a, i * stride_a), Advance(b, i * stride_b), m, n, k, alpha, beta,
            c + i * stride_c, ldc, /*serial=*/true, nullptr, /*configured=*/amx);
  }
  if (amx) bf16_gemm_internal::AmxRelease();
}

void Bf16GemmReference(const Bf16Operand& a, const Bf16Operand& b, int64_t m, int64_t n, int64_t k,
                       float alpha, float beta, float* c, int64_t ldc, const float* bias) {
  const int64_t pairs = (k + 1) / 2;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int64_t p = 0; p < pairs; ++p) {
        const uint32_t x = Cell(a, a.transposed, i, p, k), y = Cell(b, !b.transposed, j, p, k);
        acc = FlushDenormal(acc + FromBits(x >> 16) * FromBits(y >> 16));  // the high pair first
        acc = FlushDenormal(acc + FromBits(x & 0xFFFFu) * FromBits(y & 0xFFFFu));
      }
      c[i * ldc + j] = bf16_gemm_internal::FinishBiased(acc, alpha, beta, c + i * ldc + j, bias, j);
    }
  }
}

}  // namespace tern::cpu
