// Checkpoints (trainer/checkpoint.h): what a damaged, edited or incomplete checkpoint does on
// resume (issue 38, 2, 10 and 11), and the best-validation bookkeeping they carry.
#include "trainer/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"
#include "configs/config_io.h"
#include "tests/data/test_corpus.h"

namespace tern::trainer {
namespace {

// Issue 38, 3: a NaN validation cost was logged as "new best".
TEST(TrainingState, ANonFiniteCostIsNeverANewBest) {
  TrainingState s;
  EXPECT_FALSE(s.Improves(std::nan("")));
  EXPECT_FALSE(s.Improves(std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(s.Improves(5.0));
  s.best_valid = 5.0;
  EXPECT_TRUE(s.Improves(4.0));
  EXPECT_FALSE(s.Improves(6.0));
  EXPECT_FALSE(s.Improves(-std::numeric_limits<double>::infinity()));
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::FillDefaults(&config_);
    Checkpoint c;
    c.state.update = 7;
    c.state.epoch = 1;
    c.params = Tensor::Zeros({40});
    c.shard_states = {"shard0", "shard1"};
    c.worker_states = {"", ""};
    c.data_states = {"data0", "data1"};
    c.config_text = config::ToText(config_);
    c.config_hash = config::ConfigHash(config_);
    c.vocab_bytes = "vocab";
    SaveCheckpoint(dir_.path(), c, 1);
  }
  std::string Manifest() const { return dir_.File("checkpoint-7/manifest.txt"); }

  // Replaces `from` by `to` in the manifest, with its own checksum recomputed when `reseal`, as
  // a careful hand (or a bug) would.
  void EditManifest(const std::string& from, const std::string& to, bool reseal) {
    std::string text = ReadFile(Manifest());
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    if (reseal) {
      const size_t crc = text.rfind("manifest_crc: ");
      text = text.substr(0, crc) +
             "manifest_crc: " + std::to_string(Crc32(std::string_view(text).substr(0, crc))) + "\n";
    }
    WriteFileAtomic(Manifest(), text);
  }

  // The error loading the checkpoint gives ("" when it loads).
  std::string LoadError() const {
    try {
      LoadLatestCheckpoint(dir_.path());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  data::testing::ScratchDir dir_;
  config::TrainConfig config_;
};

TEST_F(CheckpointTest, ASavedCheckpointLoads) {
  ASSERT_EQ(LoadError(), "");
  const std::optional<Checkpoint> c = LoadLatestCheckpoint(dir_.path());
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->state.update, 7);
  EXPECT_EQ(c->shard_states.size(), 2u);
  EXPECT_EQ(c->data_states[1], "data1");
  EXPECT_EQ(config::ConfigHash(c->config), config::ConfigHash(config_));
}

TEST_F(CheckpointTest, TheExponentialAverageRoundTripsAndADamagedOneIsRefused) {
  EXPECT_FALSE(LoadLatestCheckpoint(dir_.path())->smoothed.defined());
  Checkpoint c = *LoadLatestCheckpoint(dir_.path());
  c.state.update = 8;
  c.smoothed = Tensor::Empty({40});
  for (int i = 0; i < 40; ++i) c.smoothed.f32()[i] = 0.5f * i;
  SaveCheckpoint(dir_.path(), c, 1);
  const std::optional<Checkpoint> back = LoadLatestCheckpoint(dir_.path());
  ASSERT_TRUE(back->smoothed.defined());
  EXPECT_EQ(back->smoothed.f32()[39], 19.5f);
  std::string bytes = ReadFile(dir_.File("checkpoint-8/smoothed.bin"));
  bytes[3] ^= 1;
  WriteFileAtomic(dir_.File("checkpoint-8/smoothed.bin"), bytes);
  EXPECT_NE(LoadError().find("smoothed.bin"), std::string::npos) << LoadError();
}

// Issue 38, 10: an edited update resumed silently at the edited update.
TEST_F(CheckpointTest, AnEditedManifestIsRefused) {
  EditManifest("update: 7", "update: 9", /*reseal=*/false);
  EXPECT_NE(LoadError().find("manifest.txt: damaged checkpoint manifest: checksum mismatch"),
            std::string::npos)
      << LoadError();
}

// Issue 38, 2: "ranks: 0" or "-1" aborted on resume, a malformed value gave "internal error:
// stoll". Resealed, so the field checks (not the checksum) must catch them.
TEST_F(CheckpointTest, OutOfRangeOrMalformedFieldsAreOneLine) {
  for (const std::string bad : {"ranks: 0", "ranks: -1", "ranks: two", "ranks: 99999999999"}) {
    SetUp();
    EditManifest("ranks: 2", bad, /*reseal=*/true);
    EXPECT_NE(LoadError().find("field 'ranks' is"), std::string::npos)
        << bad << ": " << LoadError();
  }
  SetUp();
  EditManifest("update: 7", "update: 7x", true);
  EXPECT_NE(LoadError().find("field 'update' is '7x'"), std::string::npos) << LoadError();
  SetUp();
  EditManifest("best_valid: 0", "best_valid: nan", true);
  EXPECT_NE(LoadError().find("field 'best_valid'"), std::string::npos) << LoadError();
  SetUp();
  EditManifest("data_state_1: ", "data_state_1: zz", true);
  EXPECT_NE(LoadError().find("not hexadecimal"), std::string::npos) << LoadError();
  SetUp();
  EditManifest("epoch: 1\n", "epoch: 1\nno colon here\n", true);
  EXPECT_NE(LoadError().find("malformed line"), std::string::npos) << LoadError();
}

// Issue 38, 10: editing the stored config (heads 8 -> 4) made tern-export write the edited model.
TEST_F(CheckpointTest, AnEditedConfigIsRefused) {
  const std::string path = dir_.File("checkpoint-7/config.pbtxt");
  std::string text = ReadFile(path);
  text.replace(text.find("heads: 8"), 8, "heads: 4");
  WriteFileAtomic(path, text);
  EXPECT_NE(LoadError().find("config.pbtxt: checksum mismatch"), std::string::npos) << LoadError();
}

TEST_F(CheckpointTest, CheckpointLatestMustNameACheckpoint) {
  WriteFileAtomic(dir_.File("checkpoint.latest"), "../../etc\n");
  EXPECT_NE(LoadError().find("not a checkpoint-<update> directory"), std::string::npos)
      << LoadError();
  WriteFileAtomic(dir_.File("checkpoint.latest"), "checkpoint-8\n");
  EXPECT_NE(LoadError().find("which has no manifest.txt"), std::string::npos) << LoadError();
}

// Issue 38, 11: kill -9 or a full disk left checkpoint-N.tmp.PID directories for good.
TEST_F(CheckpointTest, UnfinishedSavesAreRemoved) {
  MakeDirs(dir_.File("checkpoint-9.tmp.12345"));
  WriteFileAtomic(dir_.File("checkpoint-9.tmp.12345/params.bin"), "partial");
  MakeDirs(dir_.File("checkpoint-3.tmp.99"));
  RemoveUnfinishedCheckpoints(dir_.path());
  EXPECT_FALSE(FileExists(dir_.File("checkpoint-9.tmp.12345")));
  EXPECT_FALSE(FileExists(dir_.File("checkpoint-3.tmp.99")));
  EXPECT_TRUE(FileExists(dir_.File("checkpoint-7/manifest.txt")));
  // And a save removes those left before it.
  MakeDirs(dir_.File("checkpoint-5.tmp.1"));
  std::optional<Checkpoint> c = LoadLatestCheckpoint(dir_.path());
  c->state.update = 8;
  SaveCheckpoint(dir_.path(), *c, 1);
  EXPECT_FALSE(FileExists(dir_.File("checkpoint-5.tmp.1")));
  EXPECT_TRUE(FileExists(dir_.File("checkpoint-8/manifest.txt")));
}

// Issue 38, 10: a resume with another model.heads (the same parameter count) went on silently,
// and a change of strategy read one kind of shard as the other ("5709516628 parameters").
TEST(ResumeConfig, ArchitectureChangesAreRefusedNamingTheField) {
  config::TrainConfig saved;
  config::FillDefaults(&saved);
  for (const std::string change :
       {"model.heads=4", "model.emb_dim=256", "model.tied_embeddings=true", "model.arch=aan",
        "optim.optimizer=sgd", "distributed.strategy=async", "distributed.local_steps=4"}) {
    config::TrainConfig now = saved;
    std::string error;
    ASSERT_TRUE(config::ApplyOverride(change, &now, &error)) << error;
    const std::string field = change.substr(0, change.find('='));
    try {
      CheckResumeConfig(saved, now, "dir");
      ADD_FAILURE() << change << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dir: " + field + " is"), std::string::npos) << e.what();
    }
  }
}

TEST(ResumeConfig, LocalSgdKeepsItsStateKindButMayChangeH) {
  config::TrainConfig saved;
  config::FillDefaults(&saved);
  std::string error;
  ASSERT_TRUE(config::ApplyOverride("distributed.local_steps=4", &saved, &error)) << error;
  config::TrainConfig now = saved;
  ASSERT_TRUE(config::ApplyOverride("distributed.local_steps=8", &now, &error)) << error;
  EXPECT_EQ(CheckResumeConfig(saved, now, "dir").size(), 1u);
  ASSERT_TRUE(config::ApplyOverride("distributed.outer_momentum_delay=4", &now, &error)) << error;
  EXPECT_THROW(CheckResumeConfig(saved, now, "dir"), Error);
}

TEST(ResumeConfig, TrainingSettingsMayChangeAndAreListed) {
  config::TrainConfig saved;
  config::FillDefaults(&saved);
  config::TrainConfig now = saved;
  std::string error;
  for (const std::string change :
       {"optim.learning_rate=0.001", "training.after=2000u", "training.threads=2",
        "model.dropout=0.3", "distributed.tau=2"}) {
    ASSERT_TRUE(config::ApplyOverride(change, &now, &error)) << error;
  }
  const std::vector<config::FieldChange> changes = CheckResumeConfig(saved, now, "dir");
  ASSERT_EQ(changes.size(), 5u);
  EXPECT_EQ(changes[0].field, "model.dropout");
  EXPECT_EQ(changes[1].field, "optim.learning_rate");
  EXPECT_EQ(changes[1].after, "0.001");
}

// model.embedding_init only chose the starting values: a checkpoint written before the field
// existed (its config without it) resumes under the new default, as does a changed choice.
TEST(ResumeConfig, EmbeddingInitMayChange) {
  config::TrainConfig saved;
  config::FillDefaults(&saved);
  saved.mutable_model()->clear_embedding_init();
  config::TrainConfig now;
  config::FillDefaults(&now);
  EXPECT_EQ(CheckResumeConfig(saved, now, "dir").size(), 1u);
  saved.mutable_model()->set_embedding_init("glorot");
  EXPECT_EQ(CheckResumeConfig(saved, now, "dir").size(), 1u);
}

// A checkpoint written before model.positions and model.layer_norm_eps existed resumes under
// their defaults, which compute what it was trained with; another value is another model.
TEST(ResumeConfig, PositionsAndEpsilonAddedLaterAreNoChange) {
  config::TrainConfig saved;
  config::FillDefaults(&saved);
  saved.mutable_model()->clear_positions();
  saved.mutable_model()->clear_layer_norm_eps();
  config::TrainConfig now;
  config::FillDefaults(&now);
  EXPECT_TRUE(CheckResumeConfig(saved, now, "dir").empty());
  for (const std::string change : {"model.positions=vaswani", "model.layer_norm_eps=1e-5"}) {
    config::TrainConfig other = now;
    std::string error;
    ASSERT_TRUE(config::ApplyOverride(change, &other, &error)) << error;
    EXPECT_THROW(CheckResumeConfig(saved, other, "dir"), Error) << change;
  }
}

}  // namespace
}  // namespace tern::trainer
