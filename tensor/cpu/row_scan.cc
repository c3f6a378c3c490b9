#include "tensor/cpu/row_scan.h"

#include <cstring>
#include <limits>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/vec8.h"

namespace tern::cpu {

using namespace vec8;  // NOLINT: the vector helpers of every kernel here

TERN_MULTIVERSION float AddAndMax(const float* x, const float* bias, float* out, int64_t n) {
  // max = (max < v) ? v : max, lane by lane, as std::max(max, v) does: a NaN never replaces it.
  V8 m = Splat(-kInfinity);
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    V8 v = Load(x + c);
    if (bias != nullptr) v += Load(bias + c);
    if (out != nullptr) Store(out + c, v);
    m = m < v ? v : m;
  }
  float max = -kInfinity;
  for (int l = 0; l < kLanes; ++l) max = max < m[l] ? m[l] : max;
  for (; c < n; ++c) {
    const float v = bias != nullptr ? x[c] + bias[c] : x[c];
    if (out != nullptr) out[c] = v;
    max = max < v ? v : max;
  }
  if (max == 0.f) {  // the fold keeps the first zero it meets, of either sign
    for (c = 0; c < n; ++c) {
      const float v = bias != nullptr ? x[c] + bias[c] : x[c];
      if (v == 0.f) return v;
    }
  }
  return max;
}

TERN_MULTIVERSION int64_t FirstNotAtMost(const float* x, int64_t from, int64_t n, float floor) {
  const V8 f = Splat(floor);
  int64_t c = from;
  // Four vectors a test: the lanes where v <= floor fails, OR'ed, read as four 64-bit words.
  for (; c + 4 * kLanes <= n; c += 4 * kLanes) {
    const V8i hit = ~((Load(x + c) <= f) & (Load(x + c + 8) <= f) & (Load(x + c + 16) <= f) &
                      (Load(x + c + 24) <= f));
    uint64_t words[4];
    std::memcpy(words, &hit, sizeof words);
    if ((words[0] | words[1] | words[2] | words[3]) != 0) break;
  }
  for (; c < n; ++c) {
    if (!(x[c] <= floor)) return c;
  }
  return n;
}

}  // namespace tern::cpu
