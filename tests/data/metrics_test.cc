// BLEU and chrF against hand-computed values, against figures sacrebleu 2.4.3 printed for fixed
// inputs, and (when python3 can import sacrebleu) against sacrebleu run live on a generated test
// set with unicode, punctuation, numbers, entities and empty lines.
#include "data/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/data/test_corpus.h"

namespace tern::data {
namespace {

using Lines = std::vector<std::string>;

TEST(Tokenize13aTest, SplitsLikeSacrebleu) {
  // Expected tokens printed by sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()(s).split().
  struct Case {
    std::string text;
    Lines tokens;
  };
  const std::vector<Case> cases = {
      {"Hello, world! It's 3.14 and 1,000-2 &amp; <tag>.",
       {"Hello", ",", "world", "!", "It's", "3.14", "and", "1,000", "-", "2", "&", "<", "tag", ">",
        "."}},
      {"a.,b (x)-y 5-3 e.g. U.S.A. \"quoted\"",
       {"a", ".", ",", "b", "(", "x", ")", "-y", "5", "-",  "3",      "e",
        ".", "g", ".", "U", ".", "S", ".", "A",  ".", "\"", "quoted", "\""}},
      {"&amp;lt; &quot;hi&quot; <skipped>ok", {"<", "\"", "hi", "\"", "ok"}},
      // U+00A0 and U+3000 are whitespace to Python's str.split(); «, ¡, ¿ are not split off.
      {"Él dijo: «¡hola!» — ¿qué tal?\u00a0fin\u3000末尾。",
       {"Él", "dijo", ":", "«¡hola", "!", "»", "—", "¿qué", "tal", "?", "fin", "末尾。"}},
      {"tab\there  two  spaces\u2009thin", {"tab", "here", "two", "spaces", "thin"}},
      {"", {}},
  };
  for (const Case& c : cases) EXPECT_EQ(Tokenize13a(c.text), c.tokens) << c.text;
}

TEST(BleuTest, HandComputedExample) {
  // hyp "the cat the cat", ref "the cat is here": 4 tokens each, so BP = 1.
  //   1-grams: the x2 (clipped to 1), cat x2 (clipped to 1)  -> 2/4 = 50%
  //   2-grams: "the cat" x2 (clipped to 1), "cat the"        -> 1/3 = 33.33%
  //   3-grams: 0/2, exp smoothing, first zero order: 100 / (2 * 2) = 25%
  //   4-grams: 0/1, second zero order:               100 / (4 * 1) = 25%
  //   BLEU = (50 * 100/3 * 25 * 25) ^ (1/4) = 31.947...
  const BleuStats stats = ComputeBleuStats("the cat the cat", "the cat is here");
  EXPECT_EQ(stats.hyp_len, 4);
  EXPECT_EQ(stats.ref_len, 4);
  EXPECT_EQ(stats.correct, (std::array<int64_t, 4>{2, 1, 0, 0}));
  EXPECT_EQ(stats.total, (std::array<int64_t, 4>{4, 3, 2, 1}));
  const BleuScore score = ScoreBleu(stats);
  EXPECT_NEAR(score.score, std::pow(50.0 * 100.0 / 3 * 25 * 25, 0.25), 1e-9);
  EXPECT_DOUBLE_EQ(score.precisions[2], 25.0);
  EXPECT_DOUBLE_EQ(score.brevity_penalty, 1.0);
  EXPECT_EQ(score.Format(),
            "BLEU = 31.95 50.0/33.3/25.0/25.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)");
}

TEST(BleuTest, BrevityPenaltyAndMissingOrders) {
  // hyp "the cat" against a 6-token reference: BP = exp(1 - 6/2) = exp(-2); no 3-grams or
  // 4-grams in the hypothesis, so corpus BLEU (no effective order) is 0, sentence BLEU (effective
  // order) is BP * 100.
  const BleuScore corpus = CorpusBleu({"the cat"}, {"the cat sat on the mat"});
  EXPECT_DOUBLE_EQ(corpus.brevity_penalty, std::exp(-2.0));
  EXPECT_EQ(corpus.score, 0.0);
  const BleuScore sentence = SentenceBleu("the cat", "the cat sat on the mat");
  EXPECT_NEAR(sentence.score, 100 * std::exp(-2.0), 1e-9);
}

TEST(ChrfTest, HandComputedExample) {
  // hyp "ab c" -> "abc" (whitespace removed), ref "abd".
  //   1-grams: a b c vs a b d: 2 matches, P = R = 2/3;  2-grams: ab bc vs ab bd: P = R = 1/2;
  //   3-grams: abc vs abd: 0;  orders 4..6: none on either side, left out.
  //   avg P = avg R = (2/3 + 1/2 + 0) / 3 = 7/18;  F2 = 5PR / (4P + R) = P = 38.888...
  const ChrfStats stats = ComputeChrfStats("ab c", "abd");
  EXPECT_EQ(stats.match, (std::array<int64_t, 6>{2, 1, 0, 0, 0, 0}));
  EXPECT_EQ(stats.hyp, (std::array<int64_t, 6>{3, 2, 1, 0, 0, 0}));
  EXPECT_NEAR(ScoreChrf(stats).score, 700.0 / 18, 1e-9);
  EXPECT_EQ(ScoreChrf(stats).Format(), "chrF2 = 38.89");
}

// Figures printed by sacrebleu 2.4.3 for these inputs:
//   python3 -c 'import sacrebleu; h, r = [...], [...];
//               print(sacrebleu.corpus_bleu(h, [r])); print(sacrebleu.corpus_chrf(h, [r]))'
// (score values: repr(BLEUScore.score), repr(CHRFScore.score)).
struct CorpusCase {
  const char* name;
  Lines hyps, refs;
  const char* bleu_line;
  double bleu;
  const char* chrf_line;
  double chrf;
};

const std::vector<CorpusCase>& CorpusCases() {
  static const auto* cases = new std::vector<CorpusCase>{
      {"identical",
       {"the cat sat on the mat"},
       {"the cat sat on the mat"},
       "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)",
       100.00000000000004,
       "chrF2 = 100.00",
       100.0},
      {"spanish",
       {"El niño comió una manzana roja en el jardín.", "¿Dónde está la biblioteca?"},
       {"El niño se comió la manzana roja del jardín.", "¿Dónde queda la biblioteca?"},
       "BLEU = 19.43 73.3/38.5/9.1/5.6 (BP = 1.000 ratio = 1.000 hyp_len = 15 ref_len = 15)",
       19.427446513842177,
       "chrF2 = 65.33",
       65.33441675532553},
      {"unicode",
       {"東京は日本の首都です。", "Ünïcödé façade naïve café — “quotes” 😀 test"},
       {"東京は日本の首都である。", "Unicode façade naive café — \"quotes\" 😀 test"},
       "BLEU = 12.84 55.6/28.6/8.3/5.0 (BP = 0.801 ratio = 0.818 hyp_len = 9 ref_len = 11)",
       12.841098204900362,
       "chrF2 = 52.69",
       52.69338041184686},
      {"with_empty_hypotheses",
       {"", "a b c d e", ""},
       {"x y z", "a b c d f", "w"},
       "BLEU = 30.05 80.0/75.0/66.7/50.0 (BP = 0.449 ratio = 0.556 hyp_len = 5 ref_len = 9)",
       30.048438849849045,
       "chrF2 = 41.23",
       41.233015322347505},
      {"all_hypotheses_empty",
       {"", ""},
       {"some words here", "more"},
       "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 4)",
       0.0,
       "chrF2 = 0.00",
       0.0},
      {"both_empty",
       {""},
       {""},
       "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)",
       0.0,
       "chrF2 = 0.00",
       0.0},
  };
  return *cases;
}

TEST(CorpusMetricsTest, MatchesSacrebleuFigures) {
  for (const CorpusCase& c : CorpusCases()) {
    const BleuScore bleu = CorpusBleu(c.hyps, c.refs);
    EXPECT_EQ(bleu.Format(), c.bleu_line) << c.name;
    EXPECT_NEAR(bleu.score, c.bleu, 1e-9) << c.name;
    const ChrfScore chrf = CorpusChrf(c.hyps, c.refs);
    EXPECT_EQ(chrf.Format(), c.chrf_line) << c.name;
    EXPECT_NEAR(chrf.score, c.chrf, 1e-9) << c.name;
  }
}

TEST(SentenceBleuTest, MatchesSacrebleuSmoothings) {
  // exp: repr(sacrebleu.sentence_bleu(h, [r]).score)
  // add1: repr(BLEU(smooth_method='add-k', smooth_value=1, effective_order=True)
  //            .sentence_score(h, [r]).score)
  // chrf: repr(sacrebleu.sentence_chrf(h, [r]).score)
  struct Case {
    const char* hyp;
    const char* ref;
    double exp, add_one, chrf;
  };
  const std::vector<Case> cases = {
      {"the cat the cat", "the cat is here", 31.947155212313625, 45.180100180492246,
       38.971861471861466},
      {"the cat", "the cat sat on the mat", 13.533528323661276, 13.533528323661276,
       27.25331540542631},
      {"a b c", "a b d", 55.03212081491043, 68.65890479690394, 38.888888888888886},
      {"", "a b", 0.0, 0.0, 0.0},
      {"x", "y", 0.0, 0.0, 0.0},
      {"El niño comió una manzana roja en el jardín.",
       "El niño se comió la manzana roja del jardín.", 15.106876986783844, 24.97217580553052,
       65.2617733310333},
  };
  for (const Case& c : cases) {
    EXPECT_NEAR(SentenceBleu(c.hyp, c.ref).score, c.exp, 1e-9) << c.hyp;
    EXPECT_NEAR(SentenceBleu(c.hyp, c.ref, BleuSmoothing::kAddK).score, c.add_one, 1e-9) << c.hyp;
    EXPECT_NEAR(SentenceChrf(c.hyp, c.ref).score, c.chrf, 1e-9) << c.hyp;
  }
}

TEST(SentenceBleuTest, ScorerRanksAnNbestListAgainstOneReference) {
  // Sequence-level distillation scores an n-best list against its one reference. Figures from
  // the sacrebleu cases above ("the cat the cat" vs "the cat is here").
  const SentenceBleuScorer exp("the cat is here");
  const SentenceBleuScorer add_one("the cat is here", BleuSmoothing::kAddK);
  EXPECT_NEAR(exp.Score("the cat the cat").score, 31.947155212313625, 1e-9);
  EXPECT_NEAR(add_one.Score("the cat the cat").score, 45.180100180492246, 1e-9);
  EXPECT_NEAR(exp.Score("the cat is here").score, 100.0, 1e-9);
  EXPECT_EQ(exp.Score("").score, 0.0);
  // Words the reference lacks still count in the totals, and never match.
  EXPECT_EQ(exp.Stats("a dog is here").total, (std::array<int64_t, 4>{4, 3, 2, 1}));
  EXPECT_EQ(exp.Stats("a dog is here").correct, (std::array<int64_t, 4>{2, 1, 0, 0}));
  EXPECT_EQ(exp.Stats("dog cat dog cat").correct, (std::array<int64_t, 4>{1, 0, 0, 0}));
}

TEST(CorpusMetricsTest, StatisticsAddUpOverSentences) {
  const CorpusCase& c = CorpusCases()[3];
  BleuStats bleu;
  ChrfStats chrf;
  for (size_t i = 0; i < c.hyps.size(); ++i) {
    bleu += ComputeBleuStats(c.hyps[i], c.refs[i]);
    chrf += ComputeChrfStats(c.hyps[i], c.refs[i]);
  }
  EXPECT_EQ(ScoreBleu(bleu).Format(), c.bleu_line);
  EXPECT_EQ(ScoreChrf(chrf).Format(), c.chrf_line);
}

TEST(Utf8Test, FindsTheFirstBadByte) {
  size_t offset = 0;
  EXPECT_TRUE(IsValidUtf8("façade 😀 東京"));
  EXPECT_FALSE(IsValidUtf8("ab\xC3(", &offset));
  EXPECT_EQ(offset, 2u);
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80", &offset));  // a UTF-16 surrogate
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF", &offset));      // overlong '/'
}

// ---- live cross-check with sacrebleu ----

bool SacrebleuAvailable() {
  return std::system("python3 -c 'import sacrebleu' >/dev/null 2>&1") == 0;
}

// A reference/hypothesis pair per line: the hypothesis is the reference with words dropped,
// replaced, duplicated or reordered, so every n-gram order sees partial matches.
void GenerateTestSet(int n, uint32_t seed, Lines* hyps, Lines* refs) {
  const Lines words = {"the",    "cat",  "sat",  "on",   "mat",   "niño",  "jardín", "über",
                       "Straße", "東京", "首都", "😀",    "3.14",  "1,000", "5-3",    "U.S.",
                       "&amp;",  "&lt;", "x&y",  "(a)",  "“q”",   "don't", "¿qué",   "hola!",
                       "e.g.",   "-",    "—",    "café", "naïve", ",",     ".",      "Ωμέγα"};
  std::mt19937 rng(seed);
  const auto pick = [&](size_t k) { return static_cast<size_t>(rng() % k); };
  for (int i = 0; i < n; ++i) {
    Lines ref;
    const size_t length = pick(5) == 0 ? 0 : 1 + pick(25);
    for (size_t w = 0; w < length; ++w) ref.push_back(words[pick(words.size())]);
    Lines hyp;
    for (const std::string& w : ref) {
      const size_t r = pick(10);
      if (r == 0) continue;                                  // drop
      if (r == 1) hyp.push_back(words[pick(words.size())]);  // replace
      if (r == 2) hyp.push_back(w);                          // duplicate
      if (r != 1) hyp.push_back(w);
    }
    if (hyp.size() > 2 && pick(4) == 0) std::swap(hyp[0], hyp[hyp.size() - 1]);
    const auto join = [&](const Lines& tokens) {
      std::string line;
      for (size_t k = 0; k < tokens.size(); ++k) {
        // Mostly spaces; sometimes no space (glued) or a non-ASCII space.
        const size_t r = pick(20);
        if (k > 0) line += r == 0 ? "" : r == 1 ? "\u00a0" : r == 2 ? "\u3000" : " ";
        line += tokens[k];
      }
      return line;
    };
    refs->push_back(join(ref));
    hyps->push_back(join(hyp));
  }
}

std::string RunCommand(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  pclose(pipe);
  return output;
}

TEST(SacrebleuCrossCheckTest, GeneratedTestSetMatchesLiveSacrebleu) {
  if (!SacrebleuAvailable()) GTEST_SKIP() << "python3 cannot import sacrebleu";
  Lines hyps, refs;
  GenerateTestSet(400, 20261122, &hyps, &refs);
  testing::ScratchDir dir;
  testing::WriteLines(dir.File("hyp.txt"), hyps);
  testing::WriteLines(dir.File("ref.txt"), refs);
  // Lines are read back with "\n" split, not readlines(): U+2028 and friends are line breaks to
  // Python's str.splitlines() but not to tern-score.
  std::ofstream(dir.File("score.py")) << R"(import sys
from sacrebleu.metrics import BLEU, CHRF
read = lambda p: open(p, encoding='utf-8', newline='\n').read().split('\n')[:-1]
hyps, refs = read(sys.argv[1]), read(sys.argv[2])
print(BLEU().corpus_score(hyps, [refs]))
print(CHRF().corpus_score(hyps, [refs]))
exp = BLEU(effective_order=True)
add1 = BLEU(smooth_method='add-k', smooth_value=1, effective_order=True)
chrf = CHRF()
for h, r in zip(hyps, refs):
    print(repr(exp.sentence_score(h, [r]).score), repr(add1.sentence_score(h, [r]).score),
          repr(chrf.sentence_score(h, [r]).score))
)";
  std::istringstream out(RunCommand("python3 " + dir.File("score.py") + " " + dir.File("hyp.txt") +
                                    " " + dir.File("ref.txt") + " 2>/dev/null"));
  std::string bleu_line, chrf_line;
  ASSERT_TRUE(std::getline(out, bleu_line));
  ASSERT_TRUE(std::getline(out, chrf_line));
  EXPECT_EQ(CorpusBleu(hyps, refs).Format(), bleu_line);
  EXPECT_EQ(CorpusChrf(hyps, refs).Format(), chrf_line);
  // The generated set is neither trivially good nor trivially bad.
  EXPECT_GT(CorpusBleu(hyps, refs).score, 20);
  EXPECT_LT(CorpusBleu(hyps, refs).score, 90);
  int mismatches = 0;
  for (size_t i = 0; i < hyps.size(); ++i) {
    double exp = -1, add_one = -1, chrf = -1;
    ASSERT_TRUE(out >> exp >> add_one >> chrf) << "sacrebleu output ended at line " << i;
    const bool same =
        std::fabs(SentenceBleu(hyps[i], refs[i]).score - exp) < 1e-9 &&
        std::fabs(SentenceBleu(hyps[i], refs[i], BleuSmoothing::kAddK).score - add_one) < 1e-9 &&
        std::fabs(SentenceChrf(hyps[i], refs[i]).score - chrf) < 1e-9;
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << "line " << i << ": hyp \"" << hyps[i] << "\" ref \"" << refs[i]
                    << "\": sacrebleu " << exp << " " << add_one << " " << chrf << ", ours "
                    << SentenceBleu(hyps[i], refs[i]).score << " "
                    << SentenceBleu(hyps[i], refs[i], BleuSmoothing::kAddK).score << " "
                    << SentenceChrf(hyps[i], refs[i]).score;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace tern::data
