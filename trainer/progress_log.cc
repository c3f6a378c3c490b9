#include "trainer/progress_log.h"

#include <cmath>
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

namespace {

// JSON numbers: integers as they are; reals with enough digits to read back what was measured.
std::string Json(int64_t v) { return std::to_string(v); }
std::string Json(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no inf or nan
  return Format("%.9g", v);
}
std::string Json(float v) {  // a float's own digits, not its double's
  if (!std::isfinite(v)) return "null";
  return Format("%.7g", static_cast<double>(v));
}

std::string StalenessJson(const StalenessSummary& s) {
  return "{\"pushes\":" + Json(s.pushes) + ",\"mean\":" + Json(s.mean) +
         ",\"p50\":" + Json(int64_t{s.p50}) + ",\"p90\":" + Json(int64_t{s.p90}) +
         ",\"p99\":" + Json(int64_t{s.p99}) + ",\"max\":" + Json(s.max) + "}";
}

}  // namespace

std::string MetricsLine(const RankProgress& r) {
  std::string line =
      "{\"kind\":\"train\",\"rank\":" + Json(int64_t{r.rank}) + ",\"update\":" + Json(r.update) +
      ",\"epoch\":" + Json(r.epoch) + ",\"wall_s\":" + Json(r.elapsed_seconds) +
      ",\"sentences\":" + Json(r.sentences) + ",\"target_words\":" + Json(r.target_words) +
      ",\"cost\":" + Json(r.cost_per_word) + ",\"lr\":" + Json(r.learning_rate) +
      ",\"words_per_s\":" + Json(r.words_per_second);
  if (r.sent_fraction) line += ",\"sent_fraction\":" + Json(*r.sent_fraction);
  if (r.staleness) line += ",\"staleness\":" + StalenessJson(*r.staleness);
  line += ",\"bytes_pushed\":" + Json(r.bytes_pushed) +
          ",\"bytes_pulled\":" + Json(r.bytes_pulled) + ",\"cpu_s\":" + Json(r.cpu_seconds) + "}";
  return line;
}

std::string MetricsLine(const StartRecord& r) {
  std::string line = "{\"kind\":\"start\",\"update\":" + Json(r.update) +
                     ",\"wall_s\":" + Json(r.elapsed_seconds) +
                     ",\"ranks\":" + Json(int64_t{r.ranks});
  if (!r.products.empty()) line += ",\"products\":\"" + r.products + "\"";
  return line + "}";
}

std::string MetricsLine(const ValidationRecord& r) {
  std::string line = "{\"kind\":\"valid\",\"rank\":0,\"update\":" + Json(r.update) +
                     ",\"epoch\":" + Json(r.epoch) + ",\"wall_s\":" + Json(r.elapsed_seconds) +
                     ",\"sentences\":" + Json(r.sentences) +
                     ",\"target_words\":" + Json(r.target_words) +
                     ",\"dev_ce\":" + Json(r.cross_entropy);
  if (r.bleu) line += ",\"bleu\":" + Json(*r.bleu);
  if (r.chrf) line += ",\"chrf\":" + Json(*r.chrf);
  line += std::string(",\"new_best\":") + (r.new_best ? "true" : "false") +
          ",\"stalls\":" + Json(r.stalls) + ",\"translate_s\":" + Json(r.translation_seconds);
  if (r.staleness_summary) line += ",\"staleness\":" + StalenessJson(*r.staleness_summary);
  return line + "}";
}

}  // namespace tern::trainer
