// Divergence (issue 38, 3): a run whose cost stops being a finite number ends with an error after
// training.max_nonfinite_updates updates in a row, never saves the non-finite parameters, and
// leaves the last checkpoint saved before it as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "comm/in_process.h"
#include "common/error.h"
#include "common/file_io.h"
#include "configs/config_io.h"
#include "tests/data/test_corpus.h"
#include "trainer/checkpoint.h"
#include "trainer/trainer.h"

namespace tern::trainer {
namespace {

class DivergenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const data::testing::GeneratedCorpus train = data::testing::GenerateCorpus(200, 8, 3);
    data::testing::WriteLines(dir_.File("train.src"), train.src);
    data::testing::WriteLines(dir_.File("train.tgt"), train.tgt);
    WriteFileAtomic(dir_.File("vocab.spm"), data::testing::SmallVocab().serialized());
  }

  config::TrainConfig Config(const std::vector<std::string>& extra) const {
    config::TrainConfig c;
    std::string error;
    std::vector<std::string> overrides = {
        "model.emb_dim=16", "model.ffn_dim=32", "model.heads=2", "model.enc_depth=1",
        "model.dec_depth=1", "data.batch_tokens=200", "data.vocab_size=64", "training.threads=1",
        "training.disp_freq=2", "training.save_freq=1000", "optim.optimizer=sgd",
        "optim.learning_rate=0.01",
        // One rank's round inline: with overlap (auto) a busy machine can leave update 2 on
        // update 0's parameters, moving the update the costs stop being finite.
        "distributed.overlap=never", "data.train_src=" + dir_.File("train.src"),
        "data.train_tgt=" + dir_.File("train.tgt"), "data.vocab=" + dir_.File("vocab.spm")};
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    for (const std::string& a : overrides) {
      EXPECT_TRUE(config::ApplyOverride(a, &c, &error)) << a << ": " << error;
    }
    config::FillDefaults(&c);
    EXPECT_TRUE(config::Validate(c, &error)) << error;
    return c;
  }

  // The tern::Error message of the run, or "" when it finished.
  std::string Train(const config::TrainConfig& config, const std::string& budget) const {
    std::string message;
    comm::RunInProcess(1, [&](comm::Communicator& comm) {
      TrainerOptions options;
      options.model_dir = dir_.File("model");
      options.budget = Budget::Parse(budget);
      options.comm = &comm;
      try {
        trainer::Train(config, options);
      } catch (const Error& e) {
        message = e.what();
      }
    });
    return message;
  }

  data::testing::ScratchDir dir_;
};

TEST_F(DivergenceTest, ANonFiniteCostStopsTrainingWithoutSaving) {
  const std::string error = Train(Config({"optim.learning_rate=1e30"}), "40u");
  // Judged at the log points (every 2 updates here): after 10 or 11 updates in a row.
  EXPECT_NE(error.find("training diverged: the cost was not a finite number for 1"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("no checkpoint was saved"), std::string::npos) << error;
  EXPECT_FALSE(LoadLatestCheckpoint(dir_.File("model")).has_value());
  EXPECT_FALSE(FileExists(dir_.File("model") + "/model.tern"));
}

TEST_F(DivergenceTest, TheLimitIsConfigurable) {
  const std::string error =
      Train(Config({"optim.learning_rate=1e30", "training.max_nonfinite_updates=3"}), "40u");
  EXPECT_NE(error.find("for 3 updates in a row"), std::string::npos) << error;  // 3: at update 4
}

// The budget ends before the limit: the final checkpoint would hold NaN, so there is none.
TEST_F(DivergenceTest, NonFiniteParametersAreNeverSaved) {
  const std::string error = Train(Config({"optim.learning_rate=1e30"}), "6u");
  EXPECT_NE(error.find("training diverged: parameter '"), std::string::npos) << error;
  EXPECT_FALSE(LoadLatestCheckpoint(dir_.File("model")).has_value());
}

TEST_F(DivergenceTest, TheLastFiniteCheckpointIsKept) {
  ASSERT_EQ(Train(Config({}), "4u"), "");
  const std::string error = Train(Config({"optim.learning_rate=1e30"}), "40u");
  EXPECT_NE(error.find("checkpoint-4 holds the last parameters saved"), std::string::npos) << error;
  const std::optional<Checkpoint> kept = LoadLatestCheckpoint(dir_.File("model"));
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->state.update, 4);
  const float* p = kept->params.f32();
  for (int64_t i = 0; i < kept->params.numel(); ++i) ASSERT_TRUE(std::isfinite(p[i])) << i;
}

// Virtual workers (trainer/virtual_run.cc) watch worker 0's costs the same way and never save
// non-finite parameters either.
TEST_F(DivergenceTest, VirtualWorkersStopAndSaveNothing) {
  const std::vector<std::string> virtual_workers = {
      "optim.learning_rate=1e30", "distributed.strategy=async", "distributed.virtual_workers=3",
      "distributed.virtual_seconds_per_token=1e-5", "training.max_nonfinite_updates=3"};
  std::string error = Train(Config(virtual_workers), "40u");
  EXPECT_NE(error.find("training diverged: the cost was not a finite number for 3 updates"),
            std::string::npos)
      << error;
  EXPECT_FALSE(LoadLatestCheckpoint(dir_.File("model")).has_value());
  std::vector<std::string> short_run = virtual_workers;
  short_run.back() = "training.max_nonfinite_updates=1000";
  std::filesystem::remove_all(dir_.File("model"));
  error = Train(Config(short_run), "6u");
  EXPECT_NE(error.find("training diverged: parameter '"), std::string::npos) << error;
  EXPECT_FALSE(LoadLatestCheckpoint(dir_.File("model")).has_value());
}

}  // namespace
}  // namespace tern::trainer
