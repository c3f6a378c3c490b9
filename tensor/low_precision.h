// Float32 rounded to bfloat16 or IEEE half precision and read back as float32, round to nearest
// even, the way the GPU's conversions (__float2bfloat16_rn, __float2half_rn) round. The CPU's
// mixed-precision products (Gemm with bf16/fp16 inputs) use them to round their operands, so a
// CPU run computes what a GPU's tensor cores are given.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/tensor.h"

namespace tern {

inline float RoundToBFloat16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return x;  // NaN stays NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);             // to nearest, ties to even; may carry to inf
  bits &= 0xFFFF0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

inline float RoundToFloat16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint32_t sign = bits & 0x80000000u, abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return x;  // NaN
  if (abs >= 0x477FF000u) {         // >= 65520 rounds past the largest half, 65504: infinity
    const uint32_t inf = sign | 0x7F800000u;
    std::memcpy(&x, &inf, 4);
    return x;
  }
  if (abs < 0x38800000u) {  // below 2^-14: half's subnormals, multiples of 2^-24
    const float scaled = std::nearbyint(std::fabs(x) * 16777216.f);  // exact scaling, RNE
    return std::copysign(scaled / 16777216.f, x);
  }
  // Normal: keep 10 of float's 23 mantissa bits, to nearest even.
  uint32_t r = abs + 0xFFFu + ((abs >> 13) & 1u);
  r = (r & 0xFFFFE000u) | sign;
  std::memcpy(&x, &r, 4);
  return x;
}

// x rounded to `type` (kBFloat16 or kFloat16); kFloat32 returns x.
inline float RoundTo(DType type, float x) {
  if (type == DType::kBFloat16) return RoundToBFloat16(x);
  if (type == DType::kFloat16) return RoundToFloat16(x);
  return x;
}

// The 16 bits of bfloat16 and IEEE half precision, as stored in a kBFloat16 or kFloat16 tensor:
// x rounded as above, and back. NaN stays a (quiet) NaN.
inline uint16_t BFloat16Bits(float x) {
  uint32_t bits;
  const float r = RoundToBFloat16(x);
  std::memcpy(&bits, &r, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float FromBFloat16Bits(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

inline uint16_t Float16Bits(float x) {
  const float r = RoundToFloat16(x);  // exactly a half's value (or an infinity, or NaN)
  uint32_t bits;
  std::memcpy(&bits, &r, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u;
  if (abs == 0x7F800000u) return sign | 0x7C00u;
  if (abs < 0x38800000u) {  // zero or subnormal: a whole number of 2^-24
    return sign | static_cast<uint16_t>(std::fabs(r) * 16777216.f);
  }
  return sign | static_cast<uint16_t>((((abs >> 23) - 112u) << 10) | ((abs >> 13) & 0x3FFu));
}

inline float FromFloat16Bits(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal
    const float x = static_cast<float>(mantissa) / 16777216.f;
    return sign != 0 ? -x : x;
  }
  const uint32_t bits = exponent == 31 ? sign | 0x7F800000u | (mantissa << 13)
                                       : sign | ((exponent + 112u) << 23) | (mantissa << 13);
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

}  // namespace tern
