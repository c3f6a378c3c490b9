// BLEU and chrF as sacrebleu 2.4.3 computes them. Every step mirrors a line of sacrebleu
// (tokenizers/tokenizer_13a.py, tokenizer_re.py, metrics/bleu.py, metrics/chrf.py,
// metrics/helpers.py), down to the order of floating-point operations, so the printed figures
// agree digit for digit. N-grams are counted with sorted vectors of fixed-size keys rather than
// hash maps of strings: distillation scores many sentences.
#include "data/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <utility>

#include "common/error.h"
#include "common/thread_pool.h"
#include "data/corpus.h"

namespace tern::data {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Decodes one code point at text[*pos], advancing *pos; an invalid byte gives U+FFFD and
// advances by one.
char32_t DecodeOne(std::string_view text, size_t* pos, bool* valid) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(*pos);
  int length = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if (lead < 0x80) {
    ++*pos;
    *valid = true;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, cp = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, cp = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, cp = lead & 0x07, min = 0x10000;
  }
  bool ok = length > 0 && *pos + length <= text.size();
  for (int i = 1; ok && i < length; ++i) {
    const unsigned char c = byte(*pos + i);
    ok = (c & 0xC0) == 0x80;
    cp = (cp << 6) | (c & 0x3F);
  }
  ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
  *valid = ok;
  if (!ok) {
    ++*pos;
    return kReplacement;
  }
  *pos += length;
  return cp;
}

// Python's str.isspace(), which str.split() splits on.
bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's s.split(): the non-empty runs between whitespace, as views into `text`.
std::vector<std::string_view> SplitPythonWhitespace(std::string_view text) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  size_t start = std::string_view::npos;
  while (pos < text.size()) {
    const size_t here = pos;
    bool valid;
    const char32_t c = DecodeOne(text, &pos, &valid);
    if (IsPythonSpace(c)) {
      if (start != std::string_view::npos) words.push_back(text.substr(start, here - start));
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = here;
    }
  }
  if (start != std::string_view::npos) words.push_back(text.substr(start));
  return words;
}

// Python's s.replace(from, to): every non-overlapping occurrence, left to right.
void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s->find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(*s, pos, hit - pos).append(to);
  }
  if (pos == 0) return;
  out.append(*s, pos, std::string::npos);
  *s = std::move(out);
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// tokenizer_re.py's first rule: [\{-\~\[-\` -\&\(-\+\:-\@\/], i.e. ASCII punctuation except
// ' , - . (which later rules handle or keep).
bool IsSplitPunct(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// re.sub of a two-character pattern: at each position, if (first, second) match, emit the
// replacement and skip both; otherwise copy one byte. Non-ASCII bytes only ever match [^0-9],
// so working on UTF-8 bytes gives the same text as Python working on code points.
template <typename Match, typename Emit>
std::string SubPairs(const std::string& s, Match match, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      emit(&out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// An n-gram as a fixed-size key so that n-grams of one order sort and compare cheaply.
using NgramKey = std::pair<uint64_t, uint64_t>;

// Sums min(hyp count, ref count) over distinct n-grams; both vectors sorted.
int64_t ClippedMatches(const std::vector<NgramKey>& hyp, const std::vector<NgramKey>& ref) {
  int64_t matches = 0;
  size_t i = 0, j = 0;
  while (i < hyp.size()) {
    size_t hyp_end = i;
    while (hyp_end < hyp.size() && hyp[hyp_end] == hyp[i]) ++hyp_end;
    while (j < ref.size() && ref[j] < hyp[i]) ++j;
    size_t ref_end = j;
    while (ref_end < ref.size() && ref[ref_end] == hyp[i]) ++ref_end;
    matches += static_cast<int64_t>(std::min(hyp_end - i, ref_end - j));
    i = hyp_end;
    j = ref_end;
  }
  return matches;
}

// Word n-grams of order n over token ids (each id < 2^32, up to 4 per key).
std::vector<NgramKey> WordNgrams(const std::vector<uint32_t>& ids, int n) {
  std::vector<NgramKey> keys;
  for (size_t i = 0; i + n <= ids.size(); ++i) {
    uint64_t words[4] = {0, 0, 0, 0};
    for (int k = 0; k < n; ++k) words[k] = ids[i + k] + 1ull;  // 0 means "no word"
    keys.emplace_back(words[0] << 32 | words[1], words[2] << 32 | words[3]);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Character n-grams of order n (up to 6 code points of 21 bits each).
std::vector<NgramKey> CharNgrams(const std::u32string& chars, int n) {
  std::vector<NgramKey> keys;
  for (size_t i = 0; i + n <= chars.size(); ++i) {
    uint64_t halves[2] = {0, 0};
    for (int k = 0; k < n; ++k) {
      halves[k / 3] |= static_cast<uint64_t>(chars[i + k] + 1) << (21 * (k % 3));
    }
    keys.emplace_back(halves[0], halves[1]);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// The code points of `text` with Python-whitespace removed (''.join(line.split())).
std::u32string CharsWithoutSpace(std::string_view text) {
  std::u32string chars;
  size_t pos = 0;
  while (pos < text.size()) {
    bool valid;
    const char32_t c = DecodeOne(text, &pos, &valid);
    if (!IsPythonSpace(c)) chars += c;
  }
  return chars;
}

// sacrebleu.utils.my_log: log with log(0) floored.
double MyLog(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

bool IsBlank(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    bool valid;
    if (!IsPythonSpace(DecodeOne(text, &pos, &valid))) return false;
  }
  return true;
}

std::vector<std::string> Tokenize13a(std::string_view line) {
  std::string s(line);
  ReplaceAll(&s, "<skipped>", "");
  ReplaceAll(&s, "-\n", "");
  ReplaceAll(&s, "\n", " ");
  if (s.find('&') != std::string::npos) {
    ReplaceAll(&s, "&quot;", "\"");
    ReplaceAll(&s, "&amp;", "&");
    ReplaceAll(&s, "&lt;", "<");
    ReplaceAll(&s, "&gt;", ">");
  }
  std::string padded;
  padded.reserve(s.size() * 2 + 2);
  padded += ' ';
  for (char c : s) {
    if (IsSplitPunct(c)) {
      padded += ' ';
      padded += c;
      padded += ' ';
    } else {
      padded += c;
    }
  }
  padded += ' ';
  const auto is_period_comma = [](char c) { return c == '.' || c == ','; };
  // ([^0-9])([\.,]) -> "\1 \2 "
  s = SubPairs(
      padded, [&](char a, char b) { return !IsDigit(a) && is_period_comma(b); },
      [](std::string* out, char a, char b) {
        *out += {a, ' ', b, ' '};
      });
  // ([\.,])([^0-9]) -> " \1 \2"
  s = SubPairs(
      s, [&](char a, char b) { return is_period_comma(a) && !IsDigit(b); },
      [](std::string* out, char a, char b) {
        *out += {' ', a, ' ', b};
      });
  // ([0-9])(-) -> "\1 \2 "
  s = SubPairs(
      s, [](char a, char b) { return IsDigit(a) && b == '-'; },
      [](std::string* out, char a, char b) {
        *out += {a, ' ', b, ' '};
      });
  std::vector<std::string> tokens;
  for (std::string_view word : SplitPythonWhitespace(s)) tokens.emplace_back(word);
  return tokens;
}

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  hyp_len += other.hyp_len;
  ref_len += other.ref_len;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    correct[n] += other.correct[n];
    total[n] += other.total[n];
  }
  return *this;
}

namespace {

// Hypothesis statistics against reference n-grams already counted.
BleuStats StatsAgainst(const std::vector<uint32_t>& hyp_ids,
                       const std::array<std::vector<NgramKey>, kBleuMaxOrder>& ref_ngrams,
                       int64_t ref_len) {
  BleuStats stats;
  stats.hyp_len = static_cast<int64_t>(hyp_ids.size());
  stats.ref_len = ref_len;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    const std::vector<NgramKey> hyp_ngrams = WordNgrams(hyp_ids, n);
    stats.total[n - 1] = static_cast<int64_t>(hyp_ngrams.size());
    if (!hyp_ngrams.empty()) stats.correct[n - 1] = ClippedMatches(hyp_ngrams, ref_ngrams[n - 1]);
  }
  return stats;
}

std::vector<uint32_t> AddToVocab(const std::vector<std::string>& tokens,
                                 std::unordered_map<std::string, uint32_t>* vocab) {
  std::vector<uint32_t> ids;
  ids.reserve(tokens.size());
  for (const std::string& t : tokens) {
    ids.push_back(vocab->emplace(t, static_cast<uint32_t>(vocab->size())).first->second);
  }
  return ids;
}

}  // namespace

BleuStats ComputeBleuStats(std::string_view hypothesis, std::string_view reference) {
  return SentenceBleuScorer(reference).Stats(hypothesis);
}

SentenceBleuScorer::SentenceBleuScorer(std::string_view reference, BleuSmoothing smoothing)
    : smoothing_(smoothing) {
  const std::vector<uint32_t> ids = AddToVocab(Tokenize13a(reference), &vocab_);
  ref_len_ = static_cast<int64_t>(ids.size());
  for (int n = 1; n <= kBleuMaxOrder; ++n) ref_ngrams_[n - 1] = WordNgrams(ids, n);
}

BleuStats SentenceBleuScorer::Stats(std::string_view hypothesis) const {
  // A token the reference lacks can only be in n-grams that match nothing, so all such tokens
  // may share one id.
  constexpr uint32_t kNotInReference = 0xFFFFFFFE;
  std::vector<uint32_t> ids;
  for (const std::string& token : Tokenize13a(hypothesis)) {
    const auto it = vocab_.find(token);
    ids.push_back(it == vocab_.end() ? kNotInReference : it->second);
  }
  return StatsAgainst(ids, ref_ngrams_, ref_len_);
}

BleuScore SentenceBleuScorer::Score(std::string_view hypothesis) const {
  BleuOptions options;
  options.smoothing = smoothing_;
  options.effective_order = true;
  return ScoreBleu(Stats(hypothesis), options);
}

BleuScore ScoreBleu(const BleuStats& stats, const BleuOptions& options) {
  BleuScore result;
  result.hyp_len = stats.hyp_len;
  result.ref_len = stats.ref_len;
  result.ratio = stats.ref_len ? static_cast<double>(stats.hyp_len) / stats.ref_len : 0.0;
  const double sys_len = static_cast<double>(stats.hyp_len);
  const double ref_len = static_cast<double>(stats.ref_len);
  if (stats.hyp_len < stats.ref_len) {
    result.brevity_penalty = stats.hyp_len > 0 ? std::exp(1 - ref_len / sys_len) : 0.0;
  } else {
    result.brevity_penalty = 1.0;
  }
  if (std::all_of(stats.correct.begin(), stats.correct.end(), [](int64_t c) { return c == 0; })) {
    return result;
  }
  double smooth_value = options.smooth_value;
  if (smooth_value < 0) smooth_value = options.smoothing == BleuSmoothing::kAddK ? 1.0 : 0.1;
  double smooth_mteval = 1.0;
  int eff_order = kBleuMaxOrder;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    double correct = static_cast<double>(stats.correct[n - 1]);
    double total = static_cast<double>(stats.total[n - 1]);
    if (options.smoothing == BleuSmoothing::kAddK && n > 1) {
      correct += smooth_value;
      total += smooth_value;
    }
    if (total == 0) break;
    if (options.effective_order) eff_order = n;
    double& precision = result.precisions[n - 1];
    if (correct == 0) {
      if (options.smoothing == BleuSmoothing::kExp) {
        smooth_mteval *= 2;
        precision = 100. / (smooth_mteval * total);
      } else if (options.smoothing == BleuSmoothing::kFloor) {
        precision = 100. * smooth_value / total;
      }
    } else {
      precision = 100. * correct / total;
    }
  }
  double log_sum = 0;
  for (int n = 0; n < eff_order; ++n) log_sum += MyLog(result.precisions[n]);
  result.score = result.brevity_penalty * std::exp(log_sum / eff_order);
  return result;
}

std::string BleuScore::Format() const {
  char line[256];
  std::snprintf(line, sizeof(line),
                "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld "
                "ref_len = %lld)",
                score, precisions[0], precisions[1], precisions[2], precisions[3], brevity_penalty,
                ratio, static_cast<long long>(hyp_len), static_cast<long long>(ref_len));
  return line;
}

namespace {

// Sums per-sentence statistics computed in parallel; integer sums, so the result does not
// depend on the thread count.
template <typename Stats, typename Compute>
Stats SumOverCorpus(const std::vector<std::string>& hypotheses,
                    const std::vector<std::string>& references, Compute compute) {
  CHECK_EQ(hypotheses.size(), references.size()) << "one reference per hypothesis";
  std::vector<Stats> per_sentence(hypotheses.size());
  ParallelFor(static_cast<int64_t>(hypotheses.size()), 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) per_sentence[i] = compute(hypotheses[i], references[i]);
  });
  Stats sum;
  for (const Stats& s : per_sentence) sum += s;
  return sum;
}

}  // namespace

BleuScore CorpusBleu(const std::vector<std::string>& hypotheses,
                     const std::vector<std::string>& references) {
  return ScoreBleu(SumOverCorpus<BleuStats>(hypotheses, references, ComputeBleuStats));
}

BleuScore SentenceBleu(std::string_view hypothesis, std::string_view reference,
                       BleuSmoothing smoothing) {
  return SentenceBleuScorer(reference, smoothing).Score(hypothesis);
}

ChrfStats& ChrfStats::operator+=(const ChrfStats& other) {
  for (int n = 0; n < kChrfCharOrder; ++n) {
    hyp[n] += other.hyp[n];
    ref[n] += other.ref[n];
    match[n] += other.match[n];
  }
  return *this;
}

ChrfStats ComputeChrfStats(std::string_view hypothesis, std::string_view reference) {
  const std::u32string hyp = CharsWithoutSpace(hypothesis);
  const std::u32string ref = CharsWithoutSpace(reference);
  ChrfStats stats;
  for (int n = 1; n <= kChrfCharOrder; ++n) {
    const std::vector<NgramKey> hyp_ngrams = CharNgrams(hyp, n);
    const std::vector<NgramKey> ref_ngrams = CharNgrams(ref, n);
    // sacrebleu counts the hypothesis n-grams only where the reference has some of that order.
    stats.hyp[n - 1] = ref_ngrams.empty() ? 0 : static_cast<int64_t>(hyp_ngrams.size());
    stats.ref[n - 1] = static_cast<int64_t>(ref_ngrams.size());
    stats.match[n - 1] = ClippedMatches(hyp_ngrams, ref_ngrams);
  }
  return stats;
}

ChrfScore ScoreChrf(const ChrfStats& stats) {
  const int factor = kChrfBeta * kChrfBeta;
  double avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int n = 0; n < kChrfCharOrder; ++n) {
    if (stats.hyp[n] > 0 && stats.ref[n] > 0) {
      avg_prec += static_cast<double>(stats.match[n]) / static_cast<double>(stats.hyp[n]);
      avg_rec += static_cast<double>(stats.match[n]) / static_cast<double>(stats.ref[n]);
      ++effective_order;
    }
  }
  ChrfScore result;
  if (effective_order == 0) return result;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec != 0) {
    double score = (1 + factor) * avg_prec * avg_rec;
    score /= ((factor * avg_prec) + avg_rec);
    result.score = 100 * score;
  }
  return result;
}

std::string ChrfScore::Format() const {
  char line[64];
  std::snprintf(line, sizeof(line), "chrF%d = %.2f", kChrfBeta, score);
  return line;
}

ChrfScore CorpusChrf(const std::vector<std::string>& hypotheses,
                     const std::vector<std::string>& references) {
  return ScoreChrf(SumOverCorpus<ChrfStats>(hypotheses, references, ComputeChrfStats));
}

ChrfScore SentenceChrf(std::string_view hypothesis, std::string_view reference) {
  return ScoreChrf(ComputeChrfStats(hypothesis, reference));
}

bool IsValidUtf8(std::string_view text, size_t* error_offset) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t here = pos;
    bool valid;
    DecodeOne(text, &pos, &valid);
    if (!valid) {
      if (error_offset) *error_offset = here;
      return false;
    }
  }
  return true;
}

std::vector<std::string> SplitScoredLines(std::string_view text, const std::string& what) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t bad = 0;
    if (!IsValidUtf8(line, &bad)) {
      Fail(what, " line ", lines.size() + 1, " is not valid UTF-8 (byte ", bad + 1,
           "); convert it with iconv -t UTF-8");
    }
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

}  // namespace tern::data
