#include "tensor/cpu/attend_row.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/vec8.h"
#include "tensor/tensor.h"

namespace tern::cpu {
namespace {

using namespace vec8;  // NOLINT: the vector helpers of every kernel here

[[gnu::always_inline]] inline float Dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  V8 acc{};
  for (; i + kLanes <= n; i += kLanes) acc += Load(a + i) * Load(b + i);
  float s = Sum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Where key (or value) t of a row starts: rows in one (len, dk) block, or rows anywhere, found
// through a list of their indices (the KV cache's shared histories). The kernels below compute
// each score and output from the rows alone, so both give the same bits.
struct Contiguous {
  const float* base;
  int64_t dk;
  const float* operator()(int64_t t) const { return base + t * dk; }
};
struct Gathered {
  const float* base;
  const int32_t* index;
  int64_t stride;
  const float* operator()(int64_t t) const { return base + index[t] * stride; }
};

// scores[t] = scale * q . keys(t) for t < len. Four keys at a time, each in its own accumulator,
// so the products do not wait on one another; a key's score has the same bits in either loop.
template <class Rows>
[[gnu::always_inline]] inline void Scores(const float* q, Rows keys, int64_t len, int64_t dk,
                                          float scale, float* scores) {
  int64_t t = 0;
  if (dk % kLanes == 0) {
    for (; t + 4 <= len; t += 4) {
      const float *k0 = keys(t), *k1 = keys(t + 1), *k2 = keys(t + 2), *k3 = keys(t + 3);
      V8 a0{}, a1{}, a2{}, a3{};
      for (int64_t j = 0; j < dk; j += kLanes) {
        const V8 x = Load(q + j);
        a0 += x * Load(k0 + j);
        a1 += x * Load(k1 + j);
        a2 += x * Load(k2 + j);
        a3 += x * Load(k3 + j);
      }
      const V4 sums = Sum4(a0, a1, a2, a3) * scale;
      std::memcpy(scores + t, &sums, sizeof sums);
    }
  }
  for (; t < len; ++t) scores[t] = Dot(q, keys(t), dk) * scale;
}

// out[j] = inv * sum_t w[t] values(t)[j] for j < dk: in chunks of 32 columns with two keys in
// flight (8 independent accumulators), then 8 columns, then one.
template <class Rows>
[[gnu::always_inline]] inline void WeightedSum(const float* w, Rows values, int64_t len, int64_t dk,
                                               float inv, float* out) {
  int64_t j = 0;
  for (; j + 4 * kLanes <= dk; j += 4 * kLanes) {
    V8 a0{}, a1{}, a2{}, a3{}, b0{}, b1{}, b2{}, b3{};
    int64_t t = 0;
    for (; t + 2 <= len; t += 2) {
      const float* v = values(t) + j;
      const float* u = values(t + 1) + j;
      const V8 x = Splat(w[t]), y = Splat(w[t + 1]);
      a0 += x * Load(v), a1 += x * Load(v + 8), a2 += x * Load(v + 16), a3 += x * Load(v + 24);
      b0 += y * Load(u), b1 += y * Load(u + 8), b2 += y * Load(u + 16), b3 += y * Load(u + 24);
    }
    if (t < len) {
      const float* v = values(t) + j;
      const V8 x = Splat(w[t]);
      a0 += x * Load(v), a1 += x * Load(v + 8), a2 += x * Load(v + 16), a3 += x * Load(v + 24);
    }
    Store(out + j, (a0 + b0) * inv);
    Store(out + j + 8, (a1 + b1) * inv);
    Store(out + j + 16, (a2 + b2) * inv);
    Store(out + j + 24, (a3 + b3) * inv);
  }
  for (; j + kLanes <= dk; j += kLanes) {
    V8 a{};
    for (int64_t t = 0; t < len; ++t) a += Splat(w[t]) * Load(values(t) + j);
    Store(out + j, a * inv);
  }
  for (; j < dk; ++j) {
    float a = 0.f;
    for (int64_t t = 0; t < len; ++t) a += w[t] * values(t)[j];
    out[j] = a * inv;
  }
}

}  // namespace

TERN_MULTIVERSION float ExpShiftedInPlace(float* x, int64_t n, float shift) {
  return ExpShifted(x, n, shift);
}

TERN_MULTIVERSION float SumExpShifted(const float* x, int64_t n, float shift) {
  return vec8::SumExpShifted(x, n, shift);
}

namespace {

template <class Rows>
[[gnu::always_inline]] inline void AttendOne(const float* q, Rows keys, Rows values,
                                             const float* mask, int64_t len, int64_t dk,
                                             float scale, float* scores, float* out) {
  Scores(q, keys, len, dk, scale, scores);
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < len; ++t) {
    if (mask && mask[t] == 0.f) {
      scores[t] = -std::numeric_limits<float>::infinity();
    } else {
      best = std::max(best, scores[t]);
    }
  }
  if (best == -std::numeric_limits<float>::infinity()) {  // every key masked
    std::memset(out, 0, dk * sizeof(float));
    return;
  }
  const float sum = ExpShifted(scores, len, best);
  WeightedSum(scores, values, len, dk, 1.f / sum, out);
}

}  // namespace

TERN_MULTIVERSION void AttendRow(const float* q, const float* keys, const float* values,
                                 const float* mask, int64_t len, int64_t dk, float scale,
                                 float* scores, float* out) {
  AttendOne(q, Contiguous{keys, dk}, Contiguous{values, dk}, mask, len, dk, scale, scores, out);
}

TERN_MULTIVERSION void AttendRowGathered(const float* q, const float* keys, const float* values,
                                         const int32_t* index, int64_t stride, int64_t len,
                                         int64_t dk, float scale, float* scores, float* out) {
  AttendOne(q, Gathered{keys, index, stride}, Gathered{values, index, stride}, /*mask=*/nullptr,
            len, dk, scale, scores, out);
}

namespace {

// Per sentence, its keys up to the last unmasked one (scratch, kept between calls).
std::vector<int64_t>& KeyLengths() {
  thread_local std::vector<int64_t> lengths;
  return lengths;
}

}  // namespace

void Attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
            const Tensor& kv_rows, bool causal, float scale, const Tensor& out) {
  const int64_t b = q.dim(0), h = q.dim(1), tq = q.dim(2), dk = q.dim(3);
  const int64_t held = k.dim(0), tk = k.dim(2);
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
  const float* mask = key_mask.defined() ? key_mask.f32() : nullptr;
  const int32_t* rows = kv_rows.defined() ? kv_rows.i32() : nullptr;
  float* po = out.f32();
  for (int64_t bi = 0; rows && bi < b; ++bi) {
    CHECK(rows[bi] >= 0 && rows[bi] < held)
        << "Attend: kv_rows[" << bi << "] = " << rows[bi] << " of " << held << " sentences";
  }
  auto kv_of = [rows](int64_t bi) -> int64_t { return rows ? rows[bi] : bi; };
  // A sentence's keys end at its last unmasked one: the padding after it would only add zero
  // weights, so leaving it out keeps every bit (AttendRow) and saves its products.
  std::vector<int64_t>& keys = KeyLengths();
  keys.assign(b, tk);
  for (int64_t bi = 0; mask && bi < b; ++bi) {
    const float* m = mask + kv_of(bi) * tk;
    while (keys[bi] > 0 && m[keys[bi] - 1] == 0.f) --keys[bi];
  }
  ParallelFor(b * h, GrainRows(2 * tq * tk * dk), [&](int64_t bh0, int64_t bh1) {
    thread_local std::vector<float> scores;  // scratch, kept between calls
    scores.resize(tk);
    for (int64_t bh = bh0; bh < bh1; ++bh) {
      const int64_t bi = bh / h, hi = bh % h, kv = (kv_of(bi) * h + hi) * tk * dk;
      for (int64_t i = 0; i < tq; ++i) {
        AttendRow(pq + (bh * tq + i) * dk, pk + kv, pv + kv, mask ? mask + kv_of(bi) * tk : nullptr,
                  causal ? std::min(keys[bi], i + 1) : keys[bi], dk, scale, scores.data(),
                  po + ((bi * tq + i) * h + hi) * dk);
      }
    }
  });
}

}  // namespace tern::cpu
