#include "inference/serve/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace tern::inference::serve {

enum class Kind { kCounter, kGauge, kHistogram };

struct ServeMetrics::Family {
  std::string_view name;
  Kind kind;
  std::string_view help;
  std::vector<double> bounds;  // histograms
};

namespace {

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// A label set with one more label (le) appended.
std::string WithLe(const std::string& labels, double le) {
  const std::string le_label = "le=\"" + Number(le) + "\"";
  if (labels.empty()) return "{" + le_label + "}";
  return labels.substr(0, labels.size() - 1) + "," + le_label + "}";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(bounds_.size(), 0) {
  CHECK(std::is_sorted(bounds_.begin(), bounds_.end()));
}

void Histogram::Observe(double value) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  if (i < buckets_.size()) ++buckets_[i];
  ++count_;
  sum_ += value;
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t n = 0;
  for (size_t j = 0; j <= i && j < buckets_.size(); ++j) n += buckets_[j];
  return n;
}

std::string Labels(std::initializer_list<std::pair<std::string_view, std::string_view>> labels) {
  if (labels.size() == 0) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ",";
    out.append(name).append("=\"");
    for (char c : value) {  // the format's escapes
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += "\"";
  }
  return out + "}";
}

const ServeMetrics::Family& ServeMetrics::Describe(std::string_view family) {
  static const std::vector<double> kSeconds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                               1,     2.5,  5,     10,   30,  60};
  static const std::vector<double> kSentences = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  static const std::vector<Family> kFamilies = {
      {"tern_requests_total",
       Kind::kCounter,
       "HTTP requests answered, by endpoint and status.",
       {}},
      {"tern_request_seconds", Kind::kHistogram,
       "Time from a translation request's arrival to its answer, by model (status 200).", kSeconds},
      {"tern_queue_sentences", Kind::kGauge, "Sentences waiting to join a model's batch.", {}},
      {"tern_queue_tokens", Kind::kGauge, "Source tokens waiting to join a model's batch.", {}},
      {"tern_batch_sentences", Kind::kHistogram,
       "Sentences in a model's batch at each decoder step.", kSentences},
      {"tern_decoder_steps_total", Kind::kCounter, "Decoder steps run, by model.", {}},
      {"tern_batch_joins_total",
       Kind::kCounter,
       "Times waiting sentences joined a running batch (each runs the encoder on them), by model.",
       {}},
      {"tern_output_words_total",
       Kind::kCounter,
       "Words (space-separated) of the translations returned, by model.",
       {}},
      {"tern_words_per_second",
       Kind::kGauge,
       "Output words per second over the last ten seconds, by model.",
       {}},
      {"tern_sentences_cancelled_total",
       Kind::kCounter,
       "Sentences that left the queue or the batch unfinished, by model and reason.",
       {}},
      {"tern_model_load_seconds", Kind::kGauge, "Seconds the serving model file took to load.", {}},
      {"tern_model_reloads_total", Kind::kCounter, "Model reloads, by model and result.", {}},
      {"tern_ready", Kind::kGauge, "1 when the server accepts translations, else 0.", {}},
  };
  for (const Family& f : kFamilies) {
    if (f.name == family) return f;
  }
  LOG(FATAL) << "unknown metric family " << family;
  return kFamilies[0];
}

void ServeMetrics::AddCounter(std::string_view family, const std::string& labels, double delta) {
  CHECK(Describe(family).kind == Kind::kCounter) << family;
  std::lock_guard<std::mutex> lock(mutex_);
  values_[std::string(family)][labels] += delta;
}

void ServeMetrics::SetGauge(std::string_view family, const std::string& labels, double value) {
  CHECK(Describe(family).kind == Kind::kGauge) << family;
  std::lock_guard<std::mutex> lock(mutex_);
  values_[std::string(family)][labels] = value;
}

void ServeMetrics::Observe(std::string_view family, const std::string& labels, double value) {
  const Family& f = Describe(family);
  CHECK(f.kind == Kind::kHistogram) << family;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& series = histograms_[std::string(family)];
  auto it = series.find(labels);
  if (it == series.end()) it = series.emplace(labels, Histogram(f.bounds)).first;
  it->second.Observe(value);
}

void ServeMetrics::AddWords(const std::string& labels, int64_t words) {
  std::lock_guard<std::mutex> lock(mutex_);
  values_["tern_output_words_total"][labels] += static_cast<double>(words);
  recent_words_[labels].push_back({Clock::now(), words});
  UpdateWordRates();
}

void ServeMetrics::UpdateWordRates() {
  constexpr auto kWindow = std::chrono::seconds(10);
  const Clock::time_point now = Clock::now();
  for (auto& [labels, recent] : recent_words_) {
    while (!recent.empty() && now - recent.front().first > kWindow) recent.pop_front();
    int64_t words = 0;
    for (const auto& r : recent) words += r.second;
    values_["tern_words_per_second"][labels] =
        static_cast<double>(words) / std::chrono::duration<double>(kWindow).count();
  }
}

double ServeMetrics::Value(std::string_view family, const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto f = values_.find(std::string(family));
  if (f == values_.end()) return 0;
  auto v = f->second.find(labels);
  return v == f->second.end() ? 0 : v->second;
}

std::string ServeMetrics::Render() {
  std::lock_guard<std::mutex> lock(mutex_);
  UpdateWordRates();
  std::string out;
  auto header = [&](const Family& f) {
    static const char* kTypes[] = {"counter", "gauge", "histogram"};
    out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
    out.append("# TYPE ").append(f.name).append(" ");
    out.append(kTypes[static_cast<int>(f.kind)]).append("\n");
  };
  for (const auto& [name, series] : values_) {
    header(Describe(name));
    for (const auto& [labels, value] : series) {
      out.append(name).append(labels).append(" ").append(Number(value)).append("\n");
    }
  }
  for (const auto& [name, series] : histograms_) {
    header(Describe(name));
    for (const auto& [labels, h] : series) {
      for (size_t i = 0; i < h.bounds().size(); ++i) {
        out.append(name).append("_bucket").append(WithLe(labels, h.bounds()[i]));
        out.append(" ").append(std::to_string(h.cumulative(i))).append("\n");
      }
      out.append(name).append("_bucket").append(WithLe(labels, INFINITY));
      out.append(" ").append(std::to_string(h.count())).append("\n");
      out.append(name).append("_sum").append(labels).append(" ").append(Number(h.sum()));
      out.append("\n").append(name).append("_count").append(labels).append(" ");
      out.append(std::to_string(h.count())).append("\n");
    }
  }
  return out;
}

}  // namespace tern::inference::serve
