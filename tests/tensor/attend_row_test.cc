// AttendRow, its vector exp, and the CPU's Attend op built on it against double-precision
// references.
#include "tensor/cpu/attend_row.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/arena.h"
#include "tensor/ops.h"

namespace tern::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Distance in units in the last place between two positive floats.
int64_t Ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

TEST(AttendRowTest, ExpIsWithinTwoUlpsAndZeroBelowTheFloor) {
  std::vector<float> x;
  for (float v = -90.f; v <= 0.f; v += 0.0137f) x.push_back(v);
  for (float v : {0.f, -0.f, -1e-30f, -0.5f * std::log(2.f), -87.29f, -87.31f, -100.f, -kInf}) {
    x.push_back(v);
  }
  for (int64_t n : {static_cast<int64_t>(x.size()), int64_t{7}, int64_t{1}, int64_t{0}}) {
    std::vector<float> y(x.begin(), x.begin() + n);
    const float shift = 0.25f;  // x - shift <= 0 throughout
    for (float& v : y) v += shift;
    std::vector<float> in = y;
    const float sum = ExpShiftedInPlace(y.data(), n, shift);
    double want_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float d = in[i] - shift;
      const double want = d < -87.3f ? 0.0 : std::exp(static_cast<double>(d));
      want_sum += want;
      if (want == 0.0 || want < std::numeric_limits<float>::min()) {
        EXPECT_EQ(y[i], 0.f) << "exp(" << d << ")";
      } else {
        EXPECT_LE(Ulps(y[i], static_cast<float>(want)), 2) << "exp(" << d << ") = " << y[i];
      }
    }
    EXPECT_NEAR(sum, want_sum, 1e-5 * std::max(1.0, want_sum)) << "n " << n;
  }
}

// softmax(scale q.k_t) v_t over the unmasked t < len, in double.
std::vector<double> Reference(const float* q, const float* k, const float* v, const float* mask,
                              int64_t len, int64_t dk, float scale) {
  std::vector<double> s(len), out(dk, 0.0);
  double best = -kInf, sum = 0;
  for (int64_t t = 0; t < len; ++t) {
    if (mask && mask[t] == 0.f) continue;
    double dot = 0;
    for (int64_t j = 0; j < dk; ++j) dot += static_cast<double>(q[j]) * k[t * dk + j];
    s[t] = dot * scale;
    best = std::max(best, s[t]);
  }
  if (best == -kInf) return out;
  for (int64_t t = 0; t < len; ++t) {
    s[t] = mask && mask[t] == 0.f ? 0.0 : std::exp(s[t] - best);
    sum += s[t];
  }
  for (int64_t t = 0; t < len; ++t)
    for (int64_t j = 0; j < dk; ++j) out[j] += s[t] / sum * v[t * dk + j];
  return out;
}

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& f : x) f = normal(rng);
  return x;
}

TEST(AttendRowTest, MatchesTheReferenceForAnyWidthLengthAndMask) {
  std::mt19937 rng(3);
  for (int64_t dk : {1, 5, 8, 16, 32, 40, 64, 72}) {
    for (int64_t len : {1, 2, 3, 9, 33, 70}) {
      for (int masking = 0; masking < 3; ++masking) {  // none, some keys, every key
        const std::vector<float> q = Random(dk, rng), k = Random(len * dk, rng),
                                 v = Random(len * dk, rng);
        std::vector<float> mask(len, 1.f), scores(len), out(dk, -7.f);
        for (int64_t t = 0; t < len; ++t) {
          if (masking == 2 || (masking == 1 && t % 3 == 1)) mask[t] = 0.f;
        }
        const float* m = masking == 0 ? nullptr : mask.data();
        const float scale = 1.f / std::sqrt(static_cast<float>(dk));
        AttendRow(q.data(), k.data(), v.data(), m, len, dk, scale, scores.data(), out.data());
        const std::vector<double> want = Reference(q.data(), k.data(), v.data(), m, len, dk, scale);
        for (int64_t j = 0; j < dk; ++j) {
          ASSERT_NEAR(out[j], want[j], 1e-5)
              << "dk " << dk << " len " << len << " masking " << masking << " column " << j;
        }
      }
    }
  }
}

// Attend (B, H, Tq, dk) -> (B, Tq, H, dk): each query row is AttendRow's, heads merged.
TEST(AttendRowTest, AttendGivesTheReference) {
  std::mt19937 rng(5);
  const int64_t b = 2, h = 3, dk = 24;
  for (int64_t tq : {1, 4, 8, 13}) {
    for (bool causal : {false, true}) {
      const int64_t tk = causal ? tq : 11;
      Arena arena;
      Tensor q = arena.Alloc({b, h, tq, dk}), k = arena.Alloc({b, h, tk, dk}),
             v = arena.Alloc({b, h, tk, dk}), mask = arena.Alloc({b, tk});
      for (const Tensor* t : {&q, &k, &v}) {
        const std::vector<float> x = Random(t->numel(), rng);
        std::memcpy(t->f32(), x.data(), x.size() * sizeof(float));
      }
      for (int64_t i = 0; i < b * tk; ++i) mask.f32()[i] = (i % tk) < tk - 1 - i / tk ? 1.f : 0.f;
      const float scale = 1.f / std::sqrt(static_cast<float>(dk));
      Tensor got = arena.Alloc({b, tq, h, dk});
      Attend(q, k, v, mask, Tensor(), causal, scale, got);
      for (int64_t bi = 0; bi < b; ++bi) {
        for (int64_t hi = 0; hi < h; ++hi) {
          const int64_t bh = bi * h + hi;
          for (int64_t i = 0; i < tq; ++i) {
            const std::vector<double> want = Reference(
                q.f32() + (bh * tq + i) * dk, k.f32() + bh * tk * dk, v.f32() + bh * tk * dk,
                mask.f32() + bi * tk, causal ? i + 1 : tk, dk, scale);
            for (int64_t j = 0; j < dk; ++j) {
              ASSERT_NEAR(got.f32()[((bi * tq + i) * h + hi) * dk + j], want[j], 1e-5)
                  << "tq " << tq << " causal " << causal << " b " << bi << " head " << hi
                  << " query " << i;
            }
          }
        }
      }
    }
  }
}

// With kv_rows, query sentence i attends to sentence kv_rows[i] of a larger k, v, mask: the
// bits of Attend over those sentences gathered first. The masks end at different keys, so
// each sentence's trailing padding is cut at its own length.
TEST(AttendRowTest, AttendFollowsTheSentenceMap) {
  std::mt19937 rng(6);
  const int64_t held = 4, h = 2, tq = 4, tk = 9, dk = 16;
  const std::vector<int32_t> map = {3, 0, 2};
  const int64_t b = static_cast<int64_t>(map.size());
  Arena arena;
  Tensor q = arena.Alloc({b, h, tq, dk}), k = arena.Alloc({held, h, tk, dk}),
         v = arena.Alloc({held, h, tk, dk}), mask = arena.Alloc({held, tk});
  for (const Tensor* t : {&q, &k, &v}) {
    const std::vector<float> x = Random(t->numel(), rng);
    std::memcpy(t->f32(), x.data(), x.size() * sizeof(float));
  }
  for (int64_t i = 0; i < held * tk; ++i) mask.f32()[i] = (i % tk) < tk - 2 * (i / tk) ? 1.f : 0.f;
  Tensor gk = arena.Alloc({b, h, tk, dk}), gv = arena.Alloc({b, h, tk, dk}),
         gm = arena.Alloc({b, tk});
  for (int64_t i = 0; i < b; ++i) {
    std::memcpy(gk.f32() + i * h * tk * dk, k.f32() + map[i] * h * tk * dk, h * tk * dk * 4);
    std::memcpy(gv.f32() + i * h * tk * dk, v.f32() + map[i] * h * tk * dk, h * tk * dk * 4);
    std::memcpy(gm.f32() + i * tk, mask.f32() + map[i] * tk, tk * 4);
  }
  Tensor want = arena.Alloc({b, tq, h, dk}), got = arena.Alloc({b, tq, h, dk});
  Attend(q, gk, gv, gm, Tensor(), false, 0.25f, want);
  Attend(q, k, v, mask, Tensor::FromInts({b}, map), false, 0.25f, got);
  EXPECT_EQ(got.ToVector(), want.ToVector());
}

// A sentence padded in a batch (more keys, masked) gets the bits it gets alone: the exp of each
// score and its place in the sum do not depend on how many keys follow it. Regression: the tail
// of a row went through std::exp and a scalar sum, so the same keys summed differently once
// padding moved them into the vector loop, and translations depended on the batch.
TEST(AttendRowTest, PaddedKeysLeaveTheOthersBitsAlone) {
  std::mt19937 rng(9);
  const int64_t dk = 32;
  for (int64_t len : {1, 5, 7, 8, 11, 16}) {
    const std::vector<float> q = Random(dk, rng), k = Random(len * dk, rng),
                             v = Random(len * dk, rng);
    std::vector<float> scores(len), alone(dk);
    AttendRow(q.data(), k.data(), v.data(), nullptr, len, dk, 0.2f, scores.data(), alone.data());
    for (int64_t padded : {len + 1, len + 3, len + 9, 2 * len + 8}) {
      std::vector<float> kp = k, vp = v, mask(padded, 0.f), sp(padded), out(dk);
      const std::vector<float> junk = Random((padded - len) * dk, rng);
      kp.insert(kp.end(), junk.begin(), junk.end());
      vp.insert(vp.end(), junk.begin(), junk.end());
      std::fill(mask.begin(), mask.begin() + len, 1.f);
      AttendRow(q.data(), kp.data(), vp.data(), mask.data(), padded, dk, 0.2f, sp.data(),
                out.data());
      ASSERT_EQ(0, std::memcmp(alone.data(), out.data(), dk * sizeof(float)))
          << "len " << len << " padded to " << padded;
    }
  }
}

}  // namespace
}  // namespace tern::cpu
