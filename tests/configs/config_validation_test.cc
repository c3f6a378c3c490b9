// Validate refuses, naming the field, every value that would otherwise crash, abort, hang or
// train to a broken result (issue 38's reproducers among them), and passes every preset.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "configs/config_io.h"
#include "configs/model_size.h"

namespace tern::config {
namespace {

// The bible-small preset's sizes with Tern's defaults for the rest, then `overrides`.
std::string ValidateWith(const std::string& overrides) {
  TrainConfig c;
  std::string error;
  const std::string base =
      "model.emb_dim=32;model.ffn_dim=64;model.heads=2;model.enc_depth=1;model.dec_depth=1;"
      "data.vocab_size=600;data.batch_tokens=600;";
  std::string all = base + overrides, item;
  for (size_t start = 0; start <= all.size();) {
    size_t end = all.find(';', start);
    if (end == std::string::npos) end = all.size();
    item = all.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    EXPECT_TRUE(ApplyOverride(item, &c, &error)) << item << ": " << error;
  }
  FillDefaults(&c);
  return Validate(c, &error) ? "" : error;
}

void ExpectRefused(const std::string& overrides, const std::string& field) {
  const std::string error = ValidateWith(overrides);
  EXPECT_NE(error.find(field), std::string::npos)
      << "'" << overrides << "' gave '" << error << "', wanted a message naming " << field;
}

TEST(ConfigValidation, TheBaseConfigPasses) { EXPECT_EQ(ValidateWith(""), ""); }

TEST(ConfigValidation, EveryPresetPasses) {
  int presets = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TERN_CONFIGS_DIR)) {
    if (entry.path().extension() != ".pbtxt") continue;
    TrainConfig c;
    std::string error;
    ASSERT_TRUE(LoadTrainConfig(entry.path().string(), &c, &error)) << error;
    FillDefaults(&c);
    EXPECT_TRUE(Validate(c, &error)) << entry.path() << ": " << error;
    ++presets;
  }
  EXPECT_GE(presets, 6);
}

// Issue 38, 1: heap corruption; 4 x emb_dim (the ffn_dim default) overflowed an int32 too.
TEST(ConfigValidation, HugeWidthIsRefusedBeforeAllocation) {
  ExpectRefused("model.emb_dim=1000000000;model.heads=1", "model.emb_dim");
  ExpectRefused("model.emb_dim=1000000000;model.heads=1;model.ffn_dim=0", "model.emb_dim");
}

// Issue 38, 2: a negative width passed and died on a CHECK.
TEST(ConfigValidation, NegativeFfnDimIsRefused) {
  ExpectRefused("model.ffn_dim=-5", "model.ffn_dim");
}

// Issue 38, 9: these trained and then failed at validation or export.
TEST(ConfigValidation, OddTransformerWidthIsRefused) {
  ExpectRefused("model.emb_dim=63;model.heads=3", "model.emb_dim must be even");
}

TEST(ConfigValidation, WidthTooSmallForPositionsIsRefused) {
  ExpectRefused("model.emb_dim=2;model.heads=1;model.ffn_dim=1", "model.emb_dim");
}

TEST(ConfigValidation, WidthNotAMultipleOfHeadsIsRefused) {
  ExpectRefused("model.emb_dim=30;model.heads=4", "model.heads");
  ExpectRefused("model.heads=-2", "model.heads");
}

TEST(ConfigValidation, GruModelsIgnoreHeads) {
  EXPECT_EQ(ValidateWith("model.arch=s2s;model.emb_dim=33;model.heads=8;model.rnn_dim=16"), "");
}

// Issue 38, 3: these trained to NaN and reported success.
TEST(ConfigValidation, NonFiniteOptimizerSettingsAreRefused) {
  ExpectRefused("optim.learning_rate=inf", "optim.learning_rate");
  ExpectRefused("optim.learning_rate=nan", "optim.learning_rate");
  ExpectRefused("optim.weight_decay=nan", "optim.weight_decay");
  ExpectRefused("optim.weight_decay=-1", "optim.weight_decay");
  ExpectRefused("optim.epsilon=-1e-8", "optim.epsilon");
  ExpectRefused("optim.beta1=nan", "optim.beta1");
  ExpectRefused("optim.cooldown_beta2=1", "optim.cooldown_beta2");
  ExpectRefused("model.dropout=nan", "model.dropout");
  ExpectRefused("model.clip_relu=inf", "model.clip_relu");
  ExpectRefused("optim.schedule=cyclic;optim.lr_min=1", "optim.lr_min");
}

// Issue 38, 6: 100000 threads hung (and ignored SIGTERM).
TEST(ConfigValidation, HugeThreadCountIsRefused) {
  ExpectRefused("training.threads=100000", "training.threads");
  EXPECT_EQ(ValidateWith("training.threads=64"), "");
}

// A sentence of data.max_length pieces needs one position more than it has pieces: one longer
// than the model's positions failed in the middle of training.
TEST(ConfigValidation, SentencesLongerThanThePositionsAreRefused) {
  ExpectRefused("data.max_length=256;model.max_length=256", "data.max_length");
  EXPECT_EQ(ValidateWith("data.max_length=255;model.max_length=256"), "");
}

TEST(ConfigValidation, CountsOutOfRangeAreRefused) {
  ExpectRefused("model.enc_depth=-1", "model.enc_depth");
  ExpectRefused("model.dec_depth=100000", "model.dec_depth");
  ExpectRefused("data.vocab_size=2000000000", "data.vocab_size");
  ExpectRefused("data.batch_tokens=1", "data.batch_tokens");
  ExpectRefused("data.maxi_batch=100000;data.batch_tokens=100000", "data.maxi_batch");
  ExpectRefused("data.prefetch=100000", "data.prefetch");
  ExpectRefused("data.shuffle_window=-1", "data.shuffle_window");
  ExpectRefused("training.disp_freq=-1", "training.disp_freq");
  ExpectRefused("training.valid_beam=100000", "training.valid_beam");
  ExpectRefused("training.keep_checkpoints=-3", "training.keep_checkpoints");
  ExpectRefused("training.max_nonfinite_updates=-1", "training.max_nonfinite_updates");
  ExpectRefused("optim.warmup_updates=-5", "optim.warmup_updates");
  ExpectRefused("optim.schedule=cyclic", "optim.cycle_updates");
}

// Every field in range, together still absurd: refused by the parameter count, naming the
// fields that size the model.
TEST(ConfigValidation, AbsurdModelSizeIsRefusedWithTheEstimate) {
  const std::string error = ValidateWith(
      "model.emb_dim=65536;model.heads=1;model.ffn_dim=1048576;data.vocab_size=1000000");
  EXPECT_NE(error.find("parameters"), std::string::npos) << error;
  EXPECT_NE(error.find("model.emb_dim 65536"), std::string::npos) << error;
}

TEST(ConfigValidation, MemoryBoundNamesTheEstimate) {
  TrainConfig c;
  FillDefaults(&c);
  std::string error;
  EXPECT_TRUE(CheckModelSize(c, 8000, 0, &error)) << error;
  EXPECT_FALSE(CheckModelSize(c, 8000, int64_t{1} << 20, &error));
  EXPECT_NE(error.find("GiB"), std::string::npos) << error;
  EXPECT_NE(error.find("data.batch_tokens"), std::string::npos) << error;
}

}  // namespace
}  // namespace tern::config
