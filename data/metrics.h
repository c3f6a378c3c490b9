// BLEU and chrF, computed the way sacrebleu 2.4.3 computes them by default, so a score Tern
// prints is the score a paper would report:
//  - BLEU: "13a" tokenization (mteval-v13a), case-sensitive, n-grams up to 4, one reference,
//    corpus-level sufficient statistics, brevity penalty, "exp" smoothing (it only matters when
//    some order has no match at all), no effective order (sacrebleu.corpus_bleu).
//  - chrF: character n-grams up to 6, no word n-grams (chrF, not chrF++), beta = 2, whitespace
//    removed, corpus-level statistics, no epsilon smoothing (sacrebleu.corpus_chrf).
// Format() gives sacrebleu's own text ("BLEU = 12.34 45.6/18.9/9.1/4.5 (BP = 1.000 ratio = 1.012
// hyp_len = 1234 ref_len = 1219)", "chrF2 = 45.67"); tests/data/metrics_test.cc checks the
// numbers against sacrebleu itself.
//
// Sentence-level BLEU (SentenceBleu) is sacrebleu.sentence_bleu: effective order on (orders with
// no n-gram in the hypothesis are left out of the mean) and "exp" smoothing by default. Sequence-
// level distillation ranks n-best lists with it; BleuSmoothing::kAddK with value 1 gives the
// add-one ("Lin and Och") variant instead, identical to sacrebleu's smooth_method="add-k".
//
// Text is UTF-8; chrF counts Unicode code points, and whitespace is what Python's str.split()
// splits on. Invalid UTF-8 bytes count as U+FFFD each (tern-score refuses them instead).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tern::data {

// sacrebleu's "13a" tokenizer: unescapes &quot; &amp; &lt; &gt;, splits off punctuation (a
// period or comma only when not between digits, a dash only after a digit) and whitespace.
std::vector<std::string> Tokenize13a(std::string_view line);

inline constexpr int kBleuMaxOrder = 4;

// BLEU's sufficient statistics; they add up over sentences.
struct BleuStats {
  int64_t hyp_len = 0;  // tokens
  int64_t ref_len = 0;
  std::array<int64_t, kBleuMaxOrder> correct{};  // clipped n-gram matches, [n - 1]
  std::array<int64_t, kBleuMaxOrder> total{};    // hypothesis n-grams, [n - 1]

  BleuStats& operator+=(const BleuStats& other);
};

// The statistics of one hypothesis against one reference (both untokenized).
BleuStats ComputeBleuStats(std::string_view hypothesis, std::string_view reference);

enum class BleuSmoothing {
  kNone,   // an order with no match makes the score 0
  kFloor,  // such an order's precision counts smooth_value matches (default 0.1)
  kAddK,   // add smooth_value (default 1) to matches and totals of orders 2..4
  kExp,    // the k-th order with no match counts 1 / 2^k matches (mteval-v13a, sacrebleu default)
};

struct BleuOptions {
  BleuSmoothing smoothing = BleuSmoothing::kExp;
  double smooth_value = -1;      // < 0: the method's default (floor 0.1, add-k 1)
  bool effective_order = false;  // true: leave orders with no hypothesis n-gram out of the mean
};

struct BleuScore {
  double score = 0;                                // 0..100
  std::array<double, kBleuMaxOrder> precisions{};  // percent, smoothed, [n - 1]
  double brevity_penalty = 0;
  double ratio = 0;  // hyp_len / ref_len, 0 when ref_len is 0
  int64_t hyp_len = 0;
  int64_t ref_len = 0;

  // sacrebleu's line: "BLEU = 12.34 45.6/18.9/9.1/4.5 (BP = 1.000 ratio = 1.012 hyp_len = 1234
  // ref_len = 1219)".
  std::string Format() const;
};

// The score from summed statistics (sacrebleu's BLEU.compute_bleu).
BleuScore ScoreBleu(const BleuStats& stats, const BleuOptions& options = {});

// sacrebleu.corpus_bleu(hypotheses, [references]) with its defaults.
// REQUIRES: hypotheses.size() == references.size().
BleuScore CorpusBleu(const std::vector<std::string>& hypotheses,
                     const std::vector<std::string>& references);

// sacrebleu.sentence_bleu(hypothesis, [reference], smooth_method=...): effective order on.
BleuScore SentenceBleu(std::string_view hypothesis, std::string_view reference,
                       BleuSmoothing smoothing = BleuSmoothing::kExp);

// Scores many hypotheses against one reference (an n-best list in sequence-level distillation):
// the reference is tokenized and its n-grams counted once. Score(h) == SentenceBleu(h, ref, s).
class SentenceBleuScorer {
 public:
  explicit SentenceBleuScorer(std::string_view reference,
                              BleuSmoothing smoothing = BleuSmoothing::kExp);

  BleuScore Score(std::string_view hypothesis) const;
  BleuStats Stats(std::string_view hypothesis) const;

 private:
  std::unordered_map<std::string, uint32_t> vocab_;  // reference token -> id
  std::array<std::vector<std::pair<uint64_t, uint64_t>>, kBleuMaxOrder> ref_ngrams_;  // sorted
  int64_t ref_len_ = 0;
  BleuSmoothing smoothing_;
};

inline constexpr int kChrfCharOrder = 6;
inline constexpr int kChrfBeta = 2;

// chrF's sufficient statistics per character n-gram order [n - 1]; they add up over sentences.
struct ChrfStats {
  std::array<int64_t, kChrfCharOrder> hyp{};    // hypothesis n-grams (0 if the reference has none)
  std::array<int64_t, kChrfCharOrder> ref{};    // reference n-grams
  std::array<int64_t, kChrfCharOrder> match{};  // clipped matches

  ChrfStats& operator+=(const ChrfStats& other);
};

ChrfStats ComputeChrfStats(std::string_view hypothesis, std::string_view reference);

struct ChrfScore {
  double score = 0;  // 0..100

  std::string Format() const;  // "chrF2 = 45.67"
};

ChrfScore ScoreChrf(const ChrfStats& stats);

// sacrebleu.corpus_chrf(hypotheses, [references]) with its defaults.
// REQUIRES: hypotheses.size() == references.size().
ChrfScore CorpusChrf(const std::vector<std::string>& hypotheses,
                     const std::vector<std::string>& references);

// sacrebleu.sentence_chrf(hypothesis, [reference]).
ChrfScore SentenceChrf(std::string_view hypothesis, std::string_view reference);

// Whether `text` is valid UTF-8; on failure *error_offset is the first bad byte's offset.
bool IsValidUtf8(std::string_view text, size_t* error_offset = nullptr);

// Splits text into lines as sacrebleu reads a file (tern-score's input): at '\n', a trailing '\r'
// dropped, no empty line after a final newline. tern::Error naming `what` and the line when one is
// not valid UTF-8.
std::vector<std::string> SplitScoredLines(std::string_view text, const std::string& what);

}  // namespace tern::data
