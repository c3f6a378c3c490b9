// The server's figures, in the Prometheus text exposition format (version 0.0.4): counters,
// gauges and histograms, each family with one label set per series. Thread-safe: the HTTP
// threads and every model's scheduler update them, /metrics renders them.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tern::inference::serve {

// Fixed upper bounds, cumulative counts as Prometheus defines them (le="+Inf" is the count).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  const std::vector<double>& bounds() const { return bounds_; }
  // Observations at or below bounds()[i] (i < bounds().size()).
  uint64_t cumulative(size_t i) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> buckets_;  // observations in (bounds[i-1], bounds[i]]
  uint64_t count_ = 0;
  double sum_ = 0;
};

// A label set written as Prometheus writes it, e.g. {model="en-de",status="200"}; built by Labels.
std::string Labels(std::initializer_list<std::pair<std::string_view, std::string_view>> labels);

class ServeMetrics {
 public:
  // The families' names and help lines are fixed here (tern_...); `labels` is from Labels().
  void AddCounter(std::string_view family, const std::string& labels, double delta = 1);
  void SetGauge(std::string_view family, const std::string& labels, double value);
  void Observe(std::string_view family, const std::string& labels, double value);
  // Output words of a model's translations: tern_output_words_total, and tern_words_per_second
  // over the ten seconds before each Render.
  void AddWords(const std::string& labels, int64_t words);
  // The value of a counter or gauge series (0 when never set), for tests and words/s.
  double Value(std::string_view family, const std::string& labels) const;
  // Every family that has a series, in the text format.
  std::string Render();

 private:
  struct Family;
  static const Family& Describe(std::string_view family);  // CHECKs that the family is known
  mutable std::mutex mutex_;
  std::map<std::string, std::map<std::string, double>> values_;         // GUARDED_BY(mutex_)
  std::map<std::string, std::map<std::string, Histogram>> histograms_;  // GUARDED_BY(mutex_)
  using Clock = std::chrono::steady_clock;
  // Per label set, (time, words) of the last ten seconds. GUARDED_BY(mutex_)
  std::map<std::string, std::deque<std::pair<Clock::time_point, int64_t>>> recent_words_;
  void UpdateWordRates();  // REQUIRES: mutex_ held
};

}  // namespace tern::inference::serve
