// Row gather/scatter (embeddings), the (0,2,1,3) permutation that splits and merges attention
// heads, and dropout masks from a counter-based generator (deterministic for a seed, parallel).
#include <cstring>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/dropout_kernel.h"
#include "tensor/cpu/int_gemm.h"

namespace tern::cpu {

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

namespace dropout_internal {

void MaskScalar(const Keys& keys, int64_t s, int64_t e, float* mask) {
  for (int64_t i = s; i < e; ++i) mask[i] = keys(i);
}

void ApplyScalar(const Keys& keys, int64_t s, int64_t e, const float* x, const float* base,
                 float* out) {
  if (base != nullptr) {
    for (int64_t i = s; i < e; ++i) out[i] = base[i] + x[i] * keys(i);
  } else {
    for (int64_t i = s; i < e; ++i) out[i] = x[i] * keys(i);
  }
}

bool HasAvx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    const IntGemmIsa isa = ActiveIntGemmIsa();  // TERN_ISA below AVX-512 turns it off too
    return __builtin_cpu_supports("avx512dq") &&
           (isa == IntGemmIsa::kAvx512bw || isa == IntGemmIsa::kAvx512vnni);
  }();
  return has;
}

}  // namespace dropout_internal

using dropout_internal::ApplyAvx512;
using dropout_internal::ApplyScalar;
using dropout_internal::HasAvx512;
using dropout_internal::Keys;
using dropout_internal::MaskAvx512;
using dropout_internal::MaskScalar;

void DropoutMask(const Tensor& mask, float keep_prob, uint64_t seed) {
  float* pm = mask.f32();
  const Keys keys(keep_prob, seed);
  const bool vector = HasAvx512();
  ParallelFor(mask.numel(), 1 << 15, [&](int64_t s, int64_t e) {
    vector ? MaskAvx512(keys, s, e, pm) : MaskScalar(keys, s, e, pm);
  });
}

void Dropout(const Tensor& x, const Tensor& base, const Tensor& out, float keep_prob,
             uint64_t seed) {
  const float* px = x.f32();
  const float* pb = base.defined() ? base.f32() : nullptr;
  float* po = out.f32();
  const Keys keys(keep_prob, seed);
  const bool vector = HasAvx512();
  ParallelFor(x.numel(), 1 << 15, [&](int64_t s, int64_t e) {
    vector ? ApplyAvx512(keys, s, e, px, pb, po) : ApplyScalar(keys, s, e, px, pb, po);
  });
}

}  // namespace tern::cpu
