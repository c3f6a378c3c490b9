// Comparing beam search results in the runtime's tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "inference/beam_search.h"

namespace tern::inference::testing {

// The same tokens, eos flags and number of hypotheses per sentence, scores within `tolerance`.
inline void ExpectSameHypotheses(const std::vector<std::vector<Hypothesis>>& a,
                                 const std::vector<std::vector<Hypothesis>>& b,
                                 const std::string& what, double tolerance = 1e-4) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what << " sentence " << i;
    for (size_t j = 0; j < a[i].size(); ++j) {
      EXPECT_EQ(a[i][j].tokens, b[i][j].tokens) << what << " sentence " << i << " hyp " << j;
      EXPECT_EQ(a[i][j].ended_with_eos, b[i][j].ended_with_eos) << what << " sentence " << i;
      EXPECT_NEAR(a[i][j].score, b[i][j].score, tolerance) << what << " sentence " << i;
    }
  }
}

// Greedy results: the same tokens per sentence, scores within `tolerance`.
inline void ExpectSameGreedy(const std::vector<Hypothesis>& a, const std::vector<Hypothesis>& b,
                             double tolerance = 1e-4) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "greedy sentence " << i;
    EXPECT_NEAR(a[i].score, b[i].score, tolerance) << "greedy sentence " << i;
  }
}

}  // namespace tern::inference::testing
