// n-best parsing and the sequence-level distillation choice (data/nbest.h).
#include "data/nbest.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "data/metrics.h"

namespace tern::data {
namespace {

TEST(NBestTest, ParsesTernTranslateLines) {
  NBestEntry e = ParseNBestLine("12 ||| and God said ||| -3.25 ||| -0.81", "x:1");
  EXPECT_EQ(e.line, 12);
  EXPECT_EQ(e.text, "and God said");
  EXPECT_FLOAT_EQ(e.score, -3.25f);
  // No normalized score, and an empty hypothesis, are both fine.
  e = ParseNBestLine("0 |||  ||| -1", "x:2");
  EXPECT_EQ(e.text, "");
  EXPECT_FLOAT_EQ(e.score, -1.f);
}

TEST(NBestTest, BadLinesNameTheirPlace) {
  for (const char* bad :
       {"just text", "x ||| text ||| 1", "-1 ||| t ||| 1", "3 ||| t ||| abc", "3 ||| t"}) {
    try {
      ParseNBestLine(bad, "teacher.nbest:7");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("teacher.nbest:7"), std::string::npos) << e.what();
    }
  }
}

TEST(NBestTest, ChoosesTheBestSentenceBleuPerLine) {
  const std::vector<std::string> refs = {"the cat sat on the mat", "in the beginning was the word"};
  // Lines interleaved, as when two teachers' lists are pooled; model order within a line kept.
  const std::vector<NBestEntry> entries = {
      {0, "a dog stood", -1.f},
      {1, "in the beginning was the word", -2.f},
      {0, "the cat sat on a mat", -1.5f},
      {1, "at first there was speech", -1.f},
      {0, "the cat sat on the mat", -4.f},
  };
  std::vector<DistilledChoice> choices;
  const std::vector<std::string> chosen = SelectByBleu(entries, refs, &choices);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0], "the cat sat on the mat");
  EXPECT_EQ(chosen[1], "in the beginning was the word");
  EXPECT_EQ(choices[0].candidates, 3);
  EXPECT_EQ(choices[0].chosen_rank, 2);
  EXPECT_DOUBLE_EQ(choices[0].chosen_bleu, 100.0);
  EXPECT_DOUBLE_EQ(choices[0].first_bleu, SentenceBleu("a dog stood", refs[0]).score);
  EXPECT_EQ(choices[1].chosen_rank, 0);
}

TEST(NBestTest, TiesGoToTheEarlierCandidate) {
  const std::vector<NBestEntry> entries = {{0, "x y", -1.f}, {0, "y x", -2.f}};
  EXPECT_EQ(SelectByBleu(entries, {"z"})[0], "x y");
}

TEST(NBestTest, MissingOrExtraLinesAreErrors) {
  EXPECT_THROW(SelectByBleu({{0, "a", 0.f}}, {"a", "b"}), Error);  // no candidate for line 1
  EXPECT_THROW(SelectByBleu({{0, "a", 0.f}, {2, "b", 0.f}}, {"a", "b"}), Error);
}

}  // namespace
}  // namespace tern::data
