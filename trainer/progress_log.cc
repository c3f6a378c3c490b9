#include "trainer/progress_log.h"

#include <cstdarg>
#include <cstdio>

namespace tern::trainer {
namespace {

std::string Format(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return buffer;
}

std::string Prefix(int64_t epoch, int64_t update) {
  return Format("Ep. %lld : Up. %lld : ", static_cast<long long>(epoch),
                static_cast<long long>(update));
}

}  // namespace

std::string WithCommas(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out += ',';
    out += s[i];
  }
  return out;
}

std::string ProgressLine(const ProgressRecord& r) {
  float total = 0;
  for (float x : r.words_per_second) total += x;
  std::string line = Prefix(r.epoch, r.update) + "Sen. " + WithCommas(r.sentences) +
                     Format(" : Cost %.8f : Time %.2fs : %.2f words/s : L.r. %.4e", r.cost_per_word,
                            r.elapsed_seconds, total, r.learning_rate);
  if (r.words_per_second.size() > 1) {
    line += " : per rank";
    for (float x : r.words_per_second) line += Format(" %.0f", x);
  }
  if (r.sent_fraction) line += Format(" : sent %.4f", *r.sent_fraction);
  if (r.loss_scale)
    line += Format(" : loss scale %.9g (skipped %lld)", *r.loss_scale,
                   static_cast<long long>(r.skipped_steps));
  return line;
}

std::vector<std::string> ValidationLines(const ValidationRecord& r) {
  const std::string prefix = Prefix(r.epoch, r.update);
  std::vector<std::string> lines;
  lines.push_back(prefix + Format("valid ce-mean-words : %.5f : ", r.cross_entropy) +
                  (r.new_best ? "new best" : "stalled " + std::to_string(r.stalls) + " times"));
  if (r.bleu)
    lines.push_back(prefix + Format("valid bleu : %.2f : chrf : %.2f : time %.1fs : elapsed %.0fs",
                                    *r.bleu, r.chrf.value_or(0), r.translation_seconds,
                                    r.elapsed_seconds));
  if (r.staleness) lines.push_back(prefix + "staleness of shard 0 : " + *r.staleness);
  return lines;
}

}  // namespace tern::trainer
