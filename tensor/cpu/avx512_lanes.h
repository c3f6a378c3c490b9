// The AVX-512 kernels' tail mask, for the files built with AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tern::cpu {

// The first n of 16 lanes: none for n <= 0, all for n >= 16.
inline __mmask16 Lanes16(int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace tern::cpu
