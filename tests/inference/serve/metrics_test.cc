// The server's metrics in the Prometheus text format: families with HELP and TYPE lines,
// escaped labels, cumulative histogram buckets, and the words/s window.
#include "inference/serve/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace tern::inference::serve {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndHistogramsInTheTextFormat) {
  ServeMetrics m;
  m.AddCounter("tern_requests_total", Labels({{"endpoint", "/v1/translate"}, {"status", "200"}}));
  m.AddCounter("tern_requests_total", Labels({{"endpoint", "/v1/translate"}, {"status", "200"}}));
  m.SetGauge("tern_ready", "", 1);
  m.Observe("tern_request_seconds", Labels({{"model", "a\"b"}}), 0.02);
  m.Observe("tern_request_seconds", Labels({{"model", "a\"b"}}), 3);
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE tern_requests_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tern_requests_total{endpoint=\"/v1/translate\",status=\"200\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE tern_ready gauge\ntern_ready 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE tern_request_seconds histogram\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tern_request_seconds_bucket{model=\"a\\\"b\",le=\"0.01\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tern_request_seconds_bucket{model=\"a\\\"b\",le=\"0.025\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tern_request_seconds_bucket{model=\"a\\\"b\",le=\"+Inf\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tern_request_seconds_count{model=\"a\\\"b\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("tern_request_seconds_sum{model=\"a\\\"b\"} 3.02\n"), std::string::npos)
      << text;
  EXPECT_EQ(
      m.Value("tern_requests_total", Labels({{"endpoint", "/v1/translate"}, {"status", "200"}})),
      2);
}

TEST(MetricsTest, WordsPerSecondOverTheLastTenSeconds) {
  ServeMetrics m;
  const std::string labels = Labels({{"model", "x"}});
  m.AddWords(labels, 50);
  m.AddWords(labels, 30);
  m.Render();
  EXPECT_EQ(m.Value("tern_output_words_total", labels), 80);
  EXPECT_DOUBLE_EQ(m.Value("tern_words_per_second", labels), 8);
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Histogram h({1, 2, 4});
  for (double v : {0.5, 1.0, 1.5, 3.0, 10.0}) h.Observe(v);
  EXPECT_EQ(h.cumulative(0), 2u);  // le 1: 0.5 and 1
  EXPECT_EQ(h.cumulative(1), 3u);
  EXPECT_EQ(h.cumulative(2), 4u);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_DOUBLE_EQ(h.sum(), 16.0);
}

}  // namespace
}  // namespace tern::inference::serve
