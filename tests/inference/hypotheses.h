// Comparing beam search results in the runtime's tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "inference/search/beam_search.h"
#include "tensor/allocator.h"

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

// A GPU search waits for the GPU once a step (the step's best columns come down in one copy);
// the step's ids and masks, a batch's sources, the rows kept when sentences finish and, with
// top-up batching, the map of the sentences a refill joins go up without a wait, and the position
// encodings are on the GPU already. Checked on a warm search, for each beam width, plain and
// topped up (2 places).
// With an ensemble, the members' mean is made on the GPU too.
inline void ExpectOneWaitPerStep(const DecoderModel& model,
                                 const std::vector<std::vector<int32_t>>& sources,
                                 const std::vector<int>& beams,
                                 const std::vector<const DecoderModel*>& ensemble = {}) {
  for (int beam : beams) {
    for (bool top_up : {false, true}) {
      BeamSearch warm(model, {.beam_size = beam, .fused_output = true}, ensemble);
      auto search = [&] { top_up ? warm.SearchTopUp(sources, 2) : warm.Search(sources); };
      search();
      const int64_t steps = warm.decoder_steps(), drains = DeviceDrains();
      search();
      EXPECT_LE(DeviceDrains() - drains, warm.decoder_steps() - steps)
          << "beam " << beam << (top_up ? ", topped up" : "") << ": "
          << warm.decoder_steps() - steps << " steps";
    }
  }
}

}  // namespace tern::inference::testing
