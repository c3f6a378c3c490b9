// trainer/progress_log.h: the lines users and scripts read, in Marian's format.
#include "trainer/progress_log.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tern::trainer {
namespace {

TEST(ProgressLogTest, CommasGroupThousands) {
  EXPECT_EQ(WithCommas(0), "0");
  EXPECT_EQ(WithCommas(999), "999");
  EXPECT_EQ(WithCommas(1000), "1,000");
  EXPECT_EQ(WithCommas(21344), "21,344");
  EXPECT_EQ(WithCommas(5709516628), "5,709,516,628");
  EXPECT_EQ(WithCommas(-123456), "-123,456");
}

TEST(ProgressLogTest, AProgressLineIsMarians) {
  ProgressRecord r;
  r.epoch = 1;
  r.update = 500;
  r.sentences = 21344;
  r.cost_per_word = 5.123456784;
  r.elapsed_seconds = 240.123;
  r.words_per_second = {2390.11f};
  r.learning_rate = 1.1859e-3f;
  EXPECT_EQ(ProgressLine(r),
            "Ep. 1 : Up. 500 : Sen. 21,344 : Cost 5.12345678 : Time 240.12s : 2390.11 words/s : "
            "L.r. 1.1859e-03");
  r.words_per_second = {1000.f, 1500.4f};
  r.sent_fraction = 0.01f;
  r.loss_scale = 32768.f;
  r.skipped_steps = 3;
  EXPECT_EQ(ProgressLine(r),
            "Ep. 1 : Up. 500 : Sen. 21,344 : Cost 5.12345678 : Time 240.12s : 2500.40 words/s : "
            "L.r. 1.1859e-03 : per rank 1000 1500 : sent 0.0100 : loss scale 32768 (skipped 3)");
}

TEST(ProgressLogTest, ValidationLinesCarryBleuAndStalenessWhenThereAreAny) {
  ValidationRecord v;
  v.epoch = 2;
  v.update = 1000;
  v.cross_entropy = 4.812341;
  v.new_best = true;
  std::vector<std::string> lines = ValidationLines(v);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "Ep. 2 : Up. 1000 : valid ce-mean-words : 4.81234 : new best");
  v.new_best = false;
  v.stalls = 2;
  v.bleu = 6.1234;
  v.chrf = 28.4;
  v.translation_seconds = 12.34;
  v.elapsed_seconds = 600.4;
  v.staleness = "0:10 1:5";
  lines = ValidationLines(v);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "Ep. 2 : Up. 1000 : valid ce-mean-words : 4.81234 : stalled 2 times");
  EXPECT_EQ(lines[1],
            "Ep. 2 : Up. 1000 : valid bleu : 6.12 : chrf : 28.40 : time 12.3s : elapsed 600s");
  EXPECT_EQ(lines[2], "Ep. 2 : Up. 1000 : staleness of shard 0 : 0:10 1:5");
}

TEST(ProgressLogTest, MetricsLinesAreOneJsonObjectEach) {
  RankProgress r;
  r.rank = 1;
  r.update = 50;
  r.epoch = 1;
  r.elapsed_seconds = 12.5;
  r.sentences = 300;
  r.target_words = 9000;
  r.cost_per_word = 5.25;
  r.learning_rate = 1e-3f;
  r.words_per_second = 1500.f;
  r.bytes_pushed = 1024;
  r.bytes_pulled = 2048;
  r.cpu_seconds = 3.5;
  EXPECT_EQ(MetricsLine(r),
            "{\"kind\":\"train\",\"rank\":1,\"update\":50,\"epoch\":1,\"wall_s\":12.5,"
            "\"sentences\":300,\"target_words\":9000,\"cost\":5.25,\"lr\":0.001,"
            "\"words_per_s\":1500,\"bytes_pushed\":1024,\"bytes_pulled\":2048,\"cpu_s\":3.5}");
  r.sent_fraction = 0.01f;
  r.staleness = StalenessSummary{10, 1.5, 1, 3, 4, 7};
  const std::string line = MetricsLine(r);
  EXPECT_NE(line.find(",\"sent_fraction\":0.01,"), std::string::npos) << line;
  EXPECT_NE(line.find(",\"staleness\":{\"pushes\":10,\"mean\":1.5,\"p50\":1,\"p90\":3,"
                      "\"p99\":4,\"max\":7},"),
            std::string::npos)
      << line;
  r.cost_per_word = std::nan("");
  EXPECT_NE(MetricsLine(r).find("\"cost\":null,"), std::string::npos) << "JSON has no nan";

  ValidationRecord v;
  v.epoch = 2;
  v.update = 500;
  v.cross_entropy = 4.8125;
  v.new_best = true;
  v.elapsed_seconds = 300;
  v.sentences = 20000;
  v.target_words = 600000;
  EXPECT_EQ(MetricsLine(v),
            "{\"kind\":\"valid\",\"rank\":0,\"update\":500,\"epoch\":2,\"wall_s\":300,"
            "\"sentences\":20000,\"target_words\":600000,\"dev_ce\":4.8125,\"new_best\":true,"
            "\"stalls\":0,\"translate_s\":0}");
  v.bleu = 12.5;
  v.chrf = 40.25;
  EXPECT_NE(MetricsLine(v).find("\"dev_ce\":4.8125,\"bleu\":12.5,\"chrf\":40.25,"),
            std::string::npos);
  EXPECT_EQ(MetricsLine(StartRecord{600, 321.5, 2, ""}),
            "{\"kind\":\"start\",\"update\":600,\"wall_s\":321.5,\"ranks\":2}");
  EXPECT_EQ(MetricsLine(StartRecord{0, 0, 4, "bf16 AMX-BF16"}),
            "{\"kind\":\"start\",\"update\":0,\"wall_s\":0,\"ranks\":4,"
            "\"products\":\"bf16 AMX-BF16\"}");
}

}  // namespace
}  // namespace tern::trainer
