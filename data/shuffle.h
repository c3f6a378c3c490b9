// Deterministic shuffling. Every shuffle in the data pipeline draws from a stream derived from
// (seed, epoch, stage, index) by SplitMix64, so the random state at any point of an epoch is a
// pure function of the run's seed and the position: a saved position restores it exactly, on any
// machine (std::shuffle's algorithm is left to each standard library, so it is not used).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tern::data {

// SplitMix64: tiny, fully specified, passes BigCrush.
class Rng {
 public:
  explicit Rng(uint64_t state) : state_(state) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); the modulo bias is below n / 2^64.
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

// The seed of one shuffle: stages keep the corpus, window and batch-order streams apart.
inline uint64_t DeriveSeed(uint64_t seed, uint64_t epoch, uint64_t stage, uint64_t index) {
  Rng rng(seed);
  uint64_t s = rng.Next();
  for (uint64_t v : {epoch, stage, index}) s = Rng(s ^ (v * 0xD6E8FEB86659FD93ull)).Next();
  return s;
}

// Fisher-Yates.
template <typename T>
void Shuffle(std::vector<T>* items, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = items->size(); i > 1; --i) {
    size_t j = static_cast<size_t>(rng.Below(i));
    std::swap((*items)[i - 1], (*items)[j]);
  }
}

}  // namespace tern::data
