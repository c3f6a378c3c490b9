// n-best lists as tern-translate --n-best writes them ("LINE ||| TEXT ||| SCORE ||| NORMALIZED"),
// and the choice sequence-level knowledge distillation makes from them (Kim & Rush 2016, as in
// Marian's WNMT 2018 system): per source line, the hypothesis with the best sentence-level BLEU
// against the reference. Lists from several teachers are simply concatenated: the pooled
// candidates of an ensemble of teachers are ranked the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::data {

struct NBestEntry {
  int64_t line = 0;  // 0-based index of the source line
  std::string text;
  float score = 0;  // the model's score (sum of log-probabilities)
};

// Parses one n-best line; tern::Error naming `where` (e.g. "teacher.nbest:12") when it is not
// "LINE ||| TEXT ||| SCORE" with optional further fields.
NBestEntry ParseNBestLine(std::string_view line, std::string_view where);

struct DistilledChoice {
  int candidates = 0;      // hypotheses seen for this line
  int chosen_rank = 0;     // 0-based position of the chosen one in its line's list (model order)
  double chosen_bleu = 0;  // its sentence BLEU
  double first_bleu = 0;   // sentence BLEU of the model's first hypothesis
};

// Chooses, for reference i, the candidate of line i with the highest sentence BLEU (exp
// smoothing, as sacrebleu.sentence_bleu); ties go to the earlier candidate. `entries` may come in
// any line order (lists of several teachers one after another). tern::Error naming the line when
// a reference line has no candidate or a candidate's line is past the references.
std::vector<std::string> SelectByBleu(const std::vector<NBestEntry>& entries,
                                      const std::vector<std::string>& references,
                                      std::vector<DistilledChoice>* choices = nullptr);

}  // namespace tern::data
