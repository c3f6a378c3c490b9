// Row gather/scatter (embeddings), the (0,2,1,3) permutation that splits and merges attention
// heads, and dropout masks from a counter-based generator (deterministic for a seed, parallel).
#include <cstring>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::cpu {
namespace {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void GatherRows(const Tensor& table, const Tensor& ids, const Tensor& out, float scale) {
  const int64_t d = table.cols(), vocab = table.rows();
  const float* pt = table.f32();
  const int32_t* pi = ids.i32();
  float* po = out.f32();
  ParallelFor(ids.numel(), GrainRows(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      CHECK(pi[r] >= 0 && pi[r] < vocab) << "id " << pi[r] << " outside table of " << vocab;
      const float* src = pt + static_cast<int64_t>(pi[r]) * d;
      float* dst = po + r * d;
      for (int64_t i = 0; i < d; ++i) dst[i] = scale * src[i];
    }
  });
}

void GatherAppend(const Tensor& past, const Tensor& ids, int64_t skip, const Tensor& next,
                  const Tensor& out) {
  const int64_t rows = out.dim(0), a = out.dim(1), t1 = out.dim(2), c = out.dim(3);
  const int64_t t0 = past.defined() ? past.dim(2) : 0, kept = past.defined() ? t0 - skip : 0;
  const int64_t past_rows = past.defined() ? past.dim(0) : 0;
  const int32_t* pi = ids.defined() ? ids.i32() : nullptr;
  const float* pn = next.defined() ? next.f32() : nullptr;
  float* po = out.f32();
  ParallelFor(rows * a, GrainRows(t1 * c), [&](int64_t s, int64_t e) {
    for (int64_t ra = s; ra < e; ++ra) {
      const int64_t r = ra / a, h = ra % a;
      float* dst = po + ra * t1 * c;
      const int64_t from = pi ? pi[r] : r;
      int64_t t = 0;
      if (kept > 0 && from >= 0) {
        CHECK_LT(from, past_rows) << "GatherAppend: id outside past";
        std::memcpy(dst, past.f32() + ((from * a + h) * t0 + skip) * c, kept * c * sizeof(float));
        t = kept;
      }
      if (pn) {
        std::memset(dst + t * c, 0, (kept - t) * c * sizeof(float));
        std::memcpy(dst + kept * c, pn + ra * c, c * sizeof(float));
        t = kept + 1;
      }
      std::memset(dst + t * c, 0, (t1 - t) * c * sizeof(float));
    }
  });
}

void ScatterAddRows(const Tensor& dout, const Tensor& ids, const Tensor& dtable, float scale) {
  const int64_t d = dtable.cols();
  const float* pd = dout.f32();
  const int32_t* pi = ids.i32();
  float* pt = dtable.f32();
  // Parallel over columns: rows may repeat, columns never collide.
  ParallelFor(d, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < ids.numel(); ++r) {
      float* dst = pt + static_cast<int64_t>(pi[r]) * d;
      const float* src = pd + r * d;
      for (int64_t i = c0; i < c1; ++i) dst[i] += scale * src[i];
    }
  });
}

void Permute0213(const Tensor& in, const Tensor& out, bool accumulate) {
  const int64_t a = in.dim(0), b = in.dim(1), c = in.dim(2), d = in.dim(3);
  const float* pi = in.f32();
  float* po = out.f32();
  ParallelFor(a * b, GrainRows(c * d), [&](int64_t s, int64_t e) {
    for (int64_t ab = s; ab < e; ++ab) {
      const int64_t ia = ab / b, ib = ab % b;
      for (int64_t ic = 0; ic < c; ++ic) {
        const float* src = pi + ((ia * b + ib) * c + ic) * d;
        float* dst = po + ((ia * c + ic) * b + ib) * d;
        if (accumulate) {
          for (int64_t i = 0; i < d; ++i) dst[i] += src[i];
        } else {
          std::memcpy(dst, src, d * sizeof(float));
        }
      }
    }
  });
}

namespace {

// Element i of the mask for (keep_prob, seed): 1 / keep_prob with probability keep_prob, else 0.
struct DropoutKeys {
  DropoutKeys(float keep_prob, uint64_t seed)
      : value(1.f / keep_prob),
        threshold(static_cast<uint64_t>(static_cast<double>(keep_prob) * 4294967296.0)),
        key(SplitMix64(seed)) {}
  float operator()(int64_t i) const {
    return (SplitMix64(key ^ static_cast<uint64_t>(i)) >> 32) < threshold ? value : 0.f;
  }
  float value;
  uint64_t threshold, key;
};

}  // namespace

void DropoutMask(const Tensor& mask, float keep_prob, uint64_t seed) {
  float* pm = mask.f32();
  const DropoutKeys m(keep_prob, seed);
  ParallelFor(mask.numel(), 1 << 15, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) pm[i] = m(i);
  });
}

void Dropout(const Tensor& x, const Tensor& base, const Tensor& out, float keep_prob,
             uint64_t seed) {
  const float* px = x.f32();
  const float* pb = base.defined() ? base.f32() : nullptr;
  float* po = out.f32();
  const DropoutKeys m(keep_prob, seed);
  ParallelFor(x.numel(), 1 << 15, [&](int64_t s, int64_t e) {
    if (pb != nullptr) {
      for (int64_t i = s; i < e; ++i) po[i] = pb[i] + px[i] * m(i);
    } else {
      for (int64_t i = s; i < e; ++i) po[i] = px[i] * m(i);
    }
  });
}

}  // namespace tern::cpu
