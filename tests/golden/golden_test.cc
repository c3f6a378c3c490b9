// The golden model files (README.md here): .tern files of every format version and weight type
// this runtime reads, written once by earlier builds, must keep loading and translate their source
// lines to the same bytes, with scores within kScoreTolerance. A failure here means a change broke
// old model files or changed what the runtime computes; regenerating the files hides that, so it
// is allowed only with a format change (README.md).
#include "tests/golden/golden.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "inference/translator.h"

namespace tern::golden {
namespace {

// Scores may move with rounding (another BLAS kernel, a reordered sum): relative to the score.
constexpr float kScoreTolerance = 1e-4f;

struct GoldenFile {
  const char* name;  // under tests/golden/
  uint32_t version;  // what its header must say
  bool int16;        // linear layers' matrices stored as int16
};

void PrintTo(const GoldenFile& f, std::ostream* os) { *os << f.name; }

std::string GoldenPath(const std::string& name) {
  return std::string(TERN_GOLDEN_DIR) + "/" + name;
}

class GoldenModelTest : public ::testing::TestWithParam<GoldenFile> {};

TEST_P(GoldenModelTest, HeaderHoldsWhatTheFileIsNamedFor) {
  const GoldenFile& g = GetParam();
  const std::string bytes = ReadFile(GoldenPath(g.name));
  ASSERT_GE(bytes.size(), 12u);
  uint32_t version;
  std::memcpy(&version, bytes.data() + 8, 4);
  EXPECT_EQ(version, g.version);

  const std::unique_ptr<inference::ModelFile> file = inference::ModelFile::Open(GoldenPath(g.name));
  int quantized = 0, column_scales = 0;
  for (const inference::TensorEntry& e : file->table()) {
    if (e.dtype == inference::FileDType::kInt16) {
      ++quantized;
      // Version 1 has one scale per matrix; version 2's export writes 1 and the column scales.
      if (g.version == 1) {
        EXPECT_NE(e.scale, 1.f) << e.name;
      } else {
        EXPECT_TRUE(file->weights().ColumnScales(e.name).defined()) << e.name;
      }
    }
    if (e.name.ends_with(inference::kColumnScalesSuffix)) ++column_scales;
  }
  EXPECT_EQ(quantized > 0, g.int16);
  EXPECT_EQ(column_scales, g.int16 && g.version == 2 ? quantized : 0);
}

TEST_P(GoldenModelTest, TranslatesAsItDidWhenItWasMade) {
  const GoldenFile& g = GetParam();
  std::vector<std::string> source;
  for (std::string line; const char c : ReadFile(GoldenPath("source.txt"))) {
    if (c != '\n') {
      line += c;
    } else {
      source.push_back(line);
      line.clear();
    }
  }
  const std::string model = GoldenPath(g.name);
  const std::vector<ExpectedLine> expected =
      ParseExpected(ReadFile(ExpectedPath(model)), ExpectedPath(model));
  ASSERT_EQ(expected.size(), source.size());
  ASSERT_GT(source.size(), 0u);

  const auto out =
      inference::Translator::FromModelFile(model, GoldenTranslatorOptions())->Translate(source);
  ASSERT_EQ(out.size(), source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    ASSERT_EQ(out[i].size(), 1u);
    const inference::Translation& t = out[i][0];
    const ExpectedLine& e = expected[i];
    EXPECT_EQ(t.text, e.text) << "line " << i << " '" << source[i] << "' (it won by " << e.gap
                              << " in normalized score when the file was made)";
    EXPECT_NEAR(t.score, e.score, kScoreTolerance * std::max(1.f, std::abs(e.score)))
        << "line " << i;
    EXPECT_NEAR(t.normalized_score, e.normalized_score,
                kScoreTolerance * std::max(1.f, std::abs(e.normalized_score)))
        << "line " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, GoldenModelTest,
                         ::testing::Values(GoldenFile{"transformer_v1_float32.tern", 1, false},
                                           GoldenFile{"transformer_v1_int16.tern", 1, true},
                                           GoldenFile{"transformer_v2_float32.tern", 2, false},
                                           GoldenFile{"transformer_v2_int16.tern", 2, true},
                                           GoldenFile{"s2s_v2_float32.tern", 2, false}),
                         [](const ::testing::TestParamInfo<GoldenFile>& info) {
                           std::string name = info.param.name;
                           name = name.substr(0, name.size() - 5);  // without ".tern"
                           return name;
                         });

}  // namespace
}  // namespace tern::golden
