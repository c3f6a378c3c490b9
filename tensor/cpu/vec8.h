// Eight floats in GCC's vector extension, and the exp the CPU kernels share, for the loops of
// TERN_MULTIVERSION functions (cpu_kernels.h): every helper is inlined into each clone, so it is
// AVX in the x86-64-v3 clone and two SSE registers in the default one. Include only from files
// whose callers of these helpers are such functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

// The helpers pass 32-byte vectors by value. They are inlined into each clone, so the warning
// that such a value's ABI differs without AVX does not apply (in the files that include this).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tern::cpu::vec8 {

using V8 = float __attribute__((vector_size(32)));
using V8i = int32_t __attribute__((vector_size(32)));
inline constexpr int kLanes = 8;
inline constexpr float kExpFloor = -87.3f;  // exp below it is under FLT_MIN: 0
inline constexpr float kInfinity = std::numeric_limits<float>::infinity();

[[gnu::always_inline]] inline V8 Load(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void Store(float* p, V8 v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline V8 Splat(float x) { return V8{} + x; }
[[gnu::always_inline]] inline V8 Bits(V8i v) {  // the same 32 bytes as floats
  V8 f;
  std::memcpy(&f, &v, sizeof f);
  return f;
}
[[gnu::always_inline]] inline V8i Bits(V8 v) {
  V8i i;
  std::memcpy(&i, &v, sizeof i);
  return i;
}
[[gnu::always_inline]] inline float Sum(V8 v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// (Sum(a), Sum(b), Sum(c), Sum(d)) with the same bits, in 6 shuffles and 3 vector adds instead of
// four scalar trees: each level adds neighbouring lanes as Sum's tree does.
using V4 = float __attribute__((vector_size(16)));
[[gnu::always_inline]] inline V4 Sum4(V8 a, V8 b, V8 c, V8 d) {
  // Lanes (a01 a23 b01 b23 | a45 a67 b45 b67), likewise for c, d.
  const V8 ab = __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14) +
                __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
  const V8 cd = __builtin_shufflevector(c, d, 0, 2, 8, 10, 4, 6, 12, 14) +
                __builtin_shufflevector(c, d, 1, 3, 9, 11, 5, 7, 13, 15);
  // (a0123 b0123 c0123 d0123 | a4567 b4567 c4567 d4567)
  const V8 abcd = __builtin_shufflevector(ab, cd, 0, 2, 8, 10, 4, 6, 12, 14) +
                  __builtin_shufflevector(ab, cd, 1, 3, 9, 11, 5, 7, 13, 15);
  return __builtin_shufflevector(abcd, abcd, 0, 1, 2, 3) +
         __builtin_shufflevector(abcd, abcd, 4, 5, 6, 7);
}

// exp(x) for x <= 0 as Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so
// n ln2 is exact), a degree-6 polynomial for exp(r), then 2^n into the exponent bits.
[[gnu::always_inline]] inline V8 Exp8(V8 x) {
  const V8i under = x < Splat(kExpFloor);  // -1 lanes: -inf and underflows
  x = under ? Splat(kExpFloor) : x;
  const V8i n = __builtin_convertvector(x * 1.44269504088896341f - 0.5f, V8i);  // round(x log2 e)
  const V8 nf = __builtin_convertvector(n, V8);
  const V8 r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
  V8 p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const V8 y = (p * r * r + r + 1.f) * Bits((n + 127) << 23);
  return Bits(~under & Bits(y));
}

// Every x[i] goes through Exp8 (the tail in a vector padded with -inf) and into lane i % 8 of
// the sum: an element's value and its place in the sum depend only on i, so keys masked at the
// end (a padded batch) leave the others' bits as they are without them.
[[gnu::always_inline]] inline float ExpShifted(float* x, int64_t n, float shift) {
  int64_t i = 0;
  V8 acc{};
  for (; i + kLanes <= n; i += kLanes) {
    const V8 e = Exp8(Load(x + i) - shift);
    Store(x + i, e);
    acc += e;
  }
  if (i < n) {
    float tail[kLanes];
    for (int l = 0; l < kLanes; ++l) tail[l] = i + l < n ? x[i + l] : -kInfinity;
    const V8 e = Exp8(Load(tail) - shift);
    Store(tail, e);
    std::memcpy(x + i, tail, (n - i) * sizeof(float));
    acc += e;
  }
  return Sum(acc);
}

// The sum ExpShifted returns, without writing x: the same bits.
[[gnu::always_inline]] inline float SumExpShifted(const float* x, int64_t n, float shift) {
  int64_t i = 0;
  V8 acc{};
  for (; i + kLanes <= n; i += kLanes) acc += Exp8(Load(x + i) - shift);
  if (i < n) {
    float tail[kLanes];
    for (int l = 0; l < kLanes; ++l) tail[l] = i + l < n ? x[i + l] : -kInfinity;
    acc += Exp8(Load(tail) - shift);
  }
  return Sum(acc);
}

}  // namespace tern::cpu::vec8
