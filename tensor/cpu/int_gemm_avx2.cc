// Integer GEMM kernels for AVX2. int16: vpmaddwd. int8: vpmaddubsw needs an unsigned operand, so
// A's cell goes in as |a| and B's bytes take a's sign (vpsignb): |a| * sign(a) b = a b, and a pair
// sums to at most 2 * 127 * 127 < 2^15, so the int16 stage cannot saturate; vpmaddwd with ones
// then sums the pairs into int32.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/cpu/int_gemm_kernel.h"

namespace tern::cpu::int_gemm_internal {
namespace {

struct Avx2Base {
  static constexpr int kLanes = 8, kPanels = 1;
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
  static void Store(Acc acc, float unquant, const float* column, const float* bias, float* out) {
    const __m256 b = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(unquant));
    if (column) f = _mm256_mul_ps(f, _mm256_loadu_ps(column));
    _mm256_storeu_ps(out, _mm256_add_ps(f, b));
  }
};

struct Avx2Int16 : Avx2Base {
  static constexpr int kRows = 6;  // 12 accumulators, 2 of B, 1 of A: 15 of the 16 registers
  using A = __m256i;
  static A Broadcast(int32_t cell) { return _mm256_set1_epi32(cell); }
  static void MulAdd(Acc& acc, A a, B b) { acc = _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
};

// One k-group of one A row into its two accumulators (a panel's 16 columns).
inline void Int16RowStep(const uint8_t* a, __m256i b0, __m256i b1, __m256i& lo, __m256i& hi) {
  int32_t cell;
  std::memcpy(&cell, a, kCellBytes);
  const __m256i av = _mm256_set1_epi32(cell);
  lo = _mm256_add_epi32(lo, _mm256_madd_epi16(av, b0));
  hi = _mm256_add_epi32(hi, _mm256_madd_epi16(av, b1));
}

// The int16 6 x 16 tile with its 12 accumulators named: GCC spills the generic Tile's array at
// this size, and the named form runs about 10% faster at m >= 16 (bench-gemm). Per k-group: 2 loads
// of B, 6 broadcasts, 12 vpmaddwd and 12 vpaddd, in 15 of the 16 ymm registers.
void Int16Tile6(const KernelArgs& g, int64_t row, int64_t panel) {
  static_assert(Avx2Int16::kRows == 6 && Avx2Int16::kPanels == 1 && kPanelCols == 16);
  const __m256i i0 = InitAcc<Avx2Int16>(g, panel, 0), i1 = InitAcc<Avx2Int16>(g, panel, 1);
  __m256i c00 = i0, c01 = i1, c10 = i0, c11 = i1, c20 = i0, c21 = i1;
  __m256i c30 = i0, c31 = i1, c40 = i0, c41 = i1, c50 = i0, c51 = i1;
  const int64_t row_bytes = g.groups * kCellBytes;
  const uint8_t* a = g.a + row * row_bytes;
  const uint8_t* b = g.b + panel * g.groups * kPanelRowBytes;
  for (int64_t k = 0; k < g.groups; ++k, a += kCellBytes, b += kPanelRowBytes) {
    const __m256i b0 = Avx2Int16::LoadB(b), b1 = Avx2Int16::LoadB(b + 32);
    Int16RowStep(a, b0, b1, c00, c01);
    Int16RowStep(a + row_bytes, b0, b1, c10, c11);
    Int16RowStep(a + 2 * row_bytes, b0, b1, c20, c21);
    Int16RowStep(a + 3 * row_bytes, b0, b1, c30, c31);
    Int16RowStep(a + 4 * row_bytes, b0, b1, c40, c41);
    Int16RowStep(a + 5 * row_bytes, b0, b1, c50, c51);
  }
  const TileAcc<Avx2Int16> acc[6][1] = {{{c00, c01}}, {{c10, c11}}, {{c20, c21}},
                                        {{c30, c31}}, {{c40, c41}}, {{c50, c51}}};
  StoreTile<Avx2Int16, 6, 1>(g, row, panel, acc);
}

// The int16 4 x 16 tile, named likewise (the generic Tile<4, 1> kept one accumulator in memory,
// stored every k-group): 8 accumulators. Listed: over the tile's listed k-groups
// (KernelArgs::listed), for the products that skip A's zero groups.
template <bool kListed>
void Int16Tile4(const KernelArgs& g, int64_t row, int64_t panel) {
  static_assert(kListedRows == 4 && kPanelCols == 16);
  const __m256i i0 = InitAcc<Avx2Int16>(g, panel, 0), i1 = InitAcc<Avx2Int16>(g, panel, 1);
  __m256i c00 = i0, c01 = i1, c10 = i0, c11 = i1, c20 = i0, c21 = i1, c30 = i0, c31 = i1;
  const int64_t row_bytes = g.groups * kCellBytes;
  const uint8_t* a = g.a + row * row_bytes;
  const uint8_t* b = g.b + panel * g.groups * kPanelRowBytes;
  const TileGroups<kListed> groups(g, row);
  for (int64_t i = 0; i < groups.count; ++i) {
    const int64_t k = groups[i];
    const uint8_t* bk = b + k * kPanelRowBytes;
    const uint8_t* ak = a + k * kCellBytes;
    const __m256i b0 = Avx2Int16::LoadB(bk), b1 = Avx2Int16::LoadB(bk + 32);
    Int16RowStep(ak, b0, b1, c00, c01);
    Int16RowStep(ak + row_bytes, b0, b1, c10, c11);
    Int16RowStep(ak + 2 * row_bytes, b0, b1, c20, c21);
    Int16RowStep(ak + 3 * row_bytes, b0, b1, c30, c31);
  }
  const TileAcc<Avx2Int16> acc[4][1] = {{{c00, c01}}, {{c10, c11}}, {{c20, c21}}, {{c30, c31}}};
  StoreTile<Avx2Int16, 4, 1>(g, row, panel, acc);
}

// The rows after the last 6-row tile: 4 of them (a beam of 4) in the named 4-row tile.
void Int16Leftover(const KernelArgs& g, int64_t row, int64_t rows, int64_t panel) {
  if (rows == 4) return Int16Tile4<false>(g, row, panel);
  LeftoverTile<Avx2Int16, Avx2Int16::kRows, 1>(g, row, rows, panel);
}

struct Avx2Int8 : Avx2Base {
  static constexpr int kRows = 4;
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

int64_t ListNonZeroGroupsAvx2(const uint8_t* cells, int64_t rows, int64_t row_bytes, int64_t groups,
                              int32_t* list) {
  int64_t count = 0, k = 0;
  for (; k + 8 <= groups; k += 8) {  // 8 cells of every row, OR-ed, then one bit per group
    __m256i any = _mm256_setzero_si256();
    for (int64_t r = 0; r < rows; ++r) {
      any = _mm256_or_si256(any, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                     cells + r * row_bytes + k * kCellBytes)));
    }
    const __m256i zero = _mm256_cmpeq_epi32(any, _mm256_setzero_si256());
    uint32_t non_zero =
        ~static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(zero))) & 0xff;
    for (; non_zero != 0; non_zero &= non_zero - 1) {
      list[count++] = static_cast<int32_t>(k + __builtin_ctz(non_zero));
    }
  }
  return count + ListNonZeroGroupsScalar(cells + k * kCellBytes, rows, row_bytes, groups - k,
                                         list + count, static_cast<int32_t>(k));
}

RowStats RowStatsAvx2(const float* x, int64_t k) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 max_abs = _mm256_setzero_ps();
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();  // lanes 0-3 and 4-7
  int64_t i = 0;
  for (; i + kSumLanes <= k; i += kSumLanes) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    max_abs = _mm256_max_ps(a, max_abs);  // the second operand when a is NaN: NaN is ignored
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
  }
  alignas(32) float maxes[kSumLanes];
  alignas(32) double lanes[kSumLanes];
  _mm256_store_ps(maxes, max_abs);
  _mm256_store_pd(lanes, lo);
  _mm256_store_pd(lanes + 4, hi);
  RowStats s{0.f, 0.0};
  for (float v : maxes) s.max_abs = std::max(s.max_abs, v);
  for (; i < k; ++i) {  // the tail, as RowStatsScalar adds it
    const float a = std::fabs(x[i]);
    s.max_abs = std::max(s.max_abs, a);
    lanes[i % kSumLanes] += a;
  }
  s.sum_abs = ReduceLanes(lanes);
  return s;
}

float MaxAbsAvx2(const float* x, int64_t k) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {  // the second operand when a is NaN: NaN is ignored
    m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), m0);
    m1 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i + 8), abs_mask), m1);
  }
  alignas(32) float maxes[8];
  _mm256_store_ps(maxes, _mm256_max_ps(m0, m1));
  float max_abs = 0.f;
  for (float v : maxes) max_abs = std::max(max_abs, v);
  for (; i < k; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
  return max_abs;
}

void QuantizeValuesAvx2(bool int16, const float* x, int64_t k, float scale, void* q) {
  const float range = int16 ? 32767.f : 127.f;
  const __m256 s = _mm256_set1_ps(scale), hi = _mm256_set1_ps(range), lo = _mm256_set1_ps(-range);
  auto quantize = [&](const float* p) {  // 8 values to int32, as QuantizeValuesScalar does
    const __m256 v =
        _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(p), s), _MM_FROUND_CUR_DIRECTION);
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    return _mm256_cvtps_epi32(_mm256_and_ps(clamped, _mm256_cmp_ps(v, v, _CMP_ORD_Q)));
  };
  int64_t i = 0;
  if (int16) {
    auto* out = static_cast<int16_t*>(q);
    for (; i + 16 <= k; i += 16) {
      // packs works within 128-bit halves: (a0-3 b0-3 | a4-7 b4-7); the permute restores order.
      const __m256i packed = _mm256_packs_epi32(quantize(x + i), quantize(x + i + 8));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_permute4x64_epi64(packed, 0xd8));
    }
    QuantizeValuesScalar(true, x + i, k - i, scale, out + i);
  } else {
    auto* out = static_cast<int8_t*>(q);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (; i + 32 <= k; i += 32) {
      const __m256i ab = _mm256_packs_epi32(quantize(x + i), quantize(x + i + 8));
      const __m256i cd = _mm256_packs_epi32(quantize(x + i + 16), quantize(x + i + 24));
      // Bytes in dwords a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7.
      const __m256i packed = _mm256_packs_epi16(ab, cd);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_permutevar8x32_epi32(packed, order));
    }
    QuantizeValuesScalar(false, x + i, k - i, scale, out + i);
  }
}

void KernelAvx2Int16(const KernelArgs& g) {
  RunKernel<Avx2Int16, Int16Tile6, Int16Leftover, Int16Tile4<true>>(g);
}
void KernelAvx2Int8(const KernelArgs& g) { RunKernel<Avx2Int8>(g); }

}  // namespace tern::cpu::int_gemm_internal
#endif  // __x86_64__
