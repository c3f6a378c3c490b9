// Dropout's mask from a counter-based hash: element i is kept (scaled by 1 / keep_prob) when
// the high half of SplitMix64(key ^ i) is below keep_prob * 2^32. The scalar loops and an
// AVX-512 (F + DQ: 64-bit products) form, which gives the same bits; indexing.cc chooses.
#pragma once

#include <cstdint>

namespace tern::cpu::dropout_internal {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Keys {
  Keys(float keep_prob, uint64_t seed)
      : value(1.f / keep_prob),
        threshold(static_cast<uint64_t>(static_cast<double>(keep_prob) * 4294967296.0)),
        key(SplitMix64(seed)) {}
  // Element i of the mask: value with probability keep_prob, else 0.
  float operator()(int64_t i) const {
    return (SplitMix64(key ^ static_cast<uint64_t>(i)) >> 32) < threshold ? value : 0.f;
  }
  float value;
  uint64_t threshold, key;
};

// Elements [s, e): mask[i] = keys(i); out[i] = base[i] + x[i] * keys(i) (base null: without it).
void MaskScalar(const Keys& keys, int64_t s, int64_t e, float* mask);
void ApplyScalar(const Keys& keys, int64_t s, int64_t e, const float* x, const float* base,
                 float* out);
void MaskAvx512(const Keys& keys, int64_t s, int64_t e, float* mask);
void ApplyAvx512(const Keys& keys, int64_t s, int64_t e, const float* x, const float* base,
                 float* out);
// Whether the AVX-512 form runs here: AVX-512 F and DQ, and TERN_ISA not below AVX-512.
bool HasAvx512();

}  // namespace tern::cpu::dropout_internal
