#include "data/nbest.h"

#include <cerrno>
#include <cstdlib>

#include "common/error.h"
#include "data/metrics.h"

namespace tern::data {
namespace {

constexpr std::string_view kSeparator = " ||| ";

}  // namespace

NBestEntry ParseNBestLine(std::string_view line, std::string_view where) {
  const size_t first = line.find(kSeparator);
  const size_t second =
      first == std::string_view::npos ? first : line.find(kSeparator, first + kSeparator.size());
  if (second == std::string_view::npos) {
    Fail(where,
         ": not an n-best line 'LINE ||| TEXT ||| SCORE' (write it with tern-translate "
         "--n-best)");
  }
  NBestEntry entry;
  const std::string number(line.substr(0, first));
  char* end = nullptr;
  errno = 0;
  const long long index = std::strtoll(number.c_str(), &end, 10);
  if (number.empty() || *end != '\0' || errno != 0 || index < 0) {
    Fail(where, ": the line number '", number, "' is not a non-negative integer");
  }
  entry.line = index;
  entry.text =
      std::string(line.substr(first + kSeparator.size(), second - first - kSeparator.size()));
  std::string_view rest = line.substr(second + kSeparator.size());
  const std::string score(rest.substr(0, rest.find(kSeparator)));
  entry.score = std::strtof(score.c_str(), &end);
  if (score.empty() || *end != '\0') Fail(where, ": the score '", score, "' is not a number");
  return entry;
}

std::vector<std::string> SelectByBleu(const std::vector<NBestEntry>& entries,
                                      const std::vector<std::string>& references,
                                      std::vector<DistilledChoice>* choices) {
  const int64_t n = static_cast<int64_t>(references.size());
  std::vector<std::vector<const NBestEntry*>> by_line(n);
  for (const NBestEntry& e : entries) {
    if (e.line >= n) {
      Fail("n-best line ", e.line, " is past the ", n, " reference lines (do the n-best list ",
           "and the reference come from the same source?)");
    }
    by_line[e.line].push_back(&e);
  }
  std::vector<std::string> chosen(n);
  if (choices) choices->assign(n, DistilledChoice{});
  for (int64_t i = 0; i < n; ++i) {
    if (by_line[i].empty()) Fail("n-best list: no hypothesis for line ", i);
    const SentenceBleuScorer scorer(references[i]);
    double best = -1;
    int best_rank = 0;
    for (size_t r = 0; r < by_line[i].size(); ++r) {
      const double bleu = scorer.Score(by_line[i][r]->text).score;
      if (bleu > best) best = bleu, best_rank = static_cast<int>(r);
      if (r == 0 && choices) (*choices)[i].first_bleu = bleu;
    }
    chosen[i] = by_line[i][best_rank]->text;
    if (choices) {
      (*choices)[i].candidates = static_cast<int>(by_line[i].size());
      (*choices)[i].chosen_rank = best_rank;
      (*choices)[i].chosen_bleu = best;
    }
  }
  return chosen;
}

}  // namespace tern::data
