// The output layer's row scans against scalar loops: every length around the vector widths, NaNs
// and infinities, with and without a bias.
#include "tensor/cpu/row_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tern::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> RandomRow(int64_t n, std::mt19937* rng) {
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(*rng);
  return x;
}

TEST(RowScanTest, AddAndMaxIsTheScalarFold) {
  std::mt19937 rng(5);
  for (int64_t n = 0; n <= 70; ++n) {
    for (bool with_bias : {false, true}) {
      std::vector<float> x = RandomRow(n, &rng), bias = RandomRow(n, &rng);
      if (n > 3) x[n / 2] = kNaN;   // passed over by std::max(max, v)
      if (n > 5) x[n - 2] = -kInf;  // a masked column
      std::vector<float> out(n, 123.f);
      const float max = AddAndMax(x.data(), with_bias ? bias.data() : nullptr, out.data(), n);
      float want = -kInf;
      for (int64_t c = 0; c < n; ++c) {
        const float v = with_bias ? x[c] + bias[c] : x[c];
        want = std::max(want, v);
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(out[c])) << "n " << n << " c " << c;
        } else {
          EXPECT_EQ(out[c], v) << "n " << n << " c " << c;
        }
      }
      EXPECT_EQ(max, want) << "n " << n << " bias " << with_bias;
      EXPECT_EQ(AddAndMax(x.data(), with_bias ? bias.data() : nullptr, nullptr, n), want);
    }
  }
}

// A zero maximum has the sign the fold gives it, the first zero's, wherever the zeros fall among
// the vector lanes (the softmaxes subtract the maximum: -0 and +0 give -0 - x and +0 - x).
TEST(RowScanTest, AZeroMaximumHasTheFoldsSign) {
  for (int64_t n = 1; n <= 40; ++n) {
    for (int64_t first = 0; first < n; ++first) {
      for (float zero : {0.f, -0.f}) {
        std::vector<float> x(n, -1.f);
        x[first] = zero;
        for (int64_t c = first + 1; c < n; c += 3) x[c] = -zero;
        if (n > 4) x[(first + 2) % n] = kNaN;
        float want = -kInf;
        for (float v : x) want = std::max(want, v);
        const float got = AddAndMax(x.data(), nullptr, nullptr, n);
        EXPECT_EQ(std::signbit(want), std::signbit(got)) << "n " << n << " first zero " << first;
        EXPECT_EQ(want, got);
      }
    }
  }
}

TEST(RowScanTest, FirstNotAtMostFindsTheFirstLargerOrNaN) {
  std::mt19937 rng(7);
  for (int64_t n = 0; n <= 100; n += 3) {
    std::vector<float> x = RandomRow(n, &rng);
    for (float floor : {-kInf, -1.f, 2.f, 6.f, kInf}) {
      for (int64_t from = 0; from <= n; from += 5) {
        int64_t want = from;
        while (want < n && x[want] <= floor) ++want;
        EXPECT_EQ(FirstNotAtMost(x.data(), from, n, floor), want)
            << "n " << n << " floor " << floor << " from " << from;
      }
    }
  }
  // One column above an otherwise low row, at every place: found exactly there.
  for (int64_t at = 0; at < 77; ++at) {
    std::vector<float> x(77, -5.f);
    x[at] = -4.f;
    EXPECT_EQ(FirstNotAtMost(x.data(), 0, 77, -4.5f), at);
    EXPECT_EQ(FirstNotAtMost(x.data(), 0, 77, -4.f), 77) << "equal to the floor is not above it";
    x[at] = kNaN;
    EXPECT_EQ(FirstNotAtMost(x.data(), 0, 77, -4.5f), at) << "NaN, as the scalar test lets through";
  }
}

}  // namespace
}  // namespace tern::cpu
