// Options from a DataConfig, and LoadOrTrainVocab training once then loading.
#include "data/data_options.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "common/file_io.h"
#include "tests/data/test_corpus.h"

namespace tern::data {
namespace {

using testing::ScratchDir;

TEST(DataOptionsTest, FillsFromConfig) {
  config::DataConfig data;
  data.set_train_src("a.de");
  data.set_train_tgt("a.en");
  data.set_valid_src("v.de");
  data.set_valid_tgt("v.en");
  data.set_max_length(50);
  data.set_on_bad_line("error");
  data.set_batch_tokens(1000);
  data.set_maxi_batch(7);
  data.set_shuffle_window(5000);
  BatcherOptions train = BatcherOptionsFromConfig(data, 17, 1, 4);
  EXPECT_EQ(train.corpus.src_path, "a.de");
  EXPECT_EQ(train.corpus.tgt_path, "a.en");
  EXPECT_EQ(train.corpus.max_length, 50);
  EXPECT_EQ(train.corpus.on_bad_line, BadLinePolicy::kError);
  EXPECT_EQ(train.batch_tokens, 1000);
  EXPECT_EQ(train.maxi_batch, 7);
  EXPECT_TRUE(train.streaming);
  EXPECT_EQ(train.shuffle_window, 5000);
  EXPECT_EQ(train.seed, 17u);
  EXPECT_EQ(train.rank, 1);
  EXPECT_EQ(train.num_ranks, 4);

  data.set_shuffle_window(0);
  EXPECT_FALSE(BatcherOptionsFromConfig(data, 17, 0, 1).streaming);

  BatcherOptions valid = ValidationBatcherOptionsFromConfig(data);
  EXPECT_EQ(valid.corpus.src_path, "v.de");
  EXPECT_FALSE(valid.shuffle);
  EXPECT_EQ(valid.max_epochs, 1);

  data.set_on_bad_line("maybe");
  EXPECT_THROW(BatcherOptionsFromConfig(data, 17, 0, 1), Error);
  data.set_on_bad_line("skip");
  EXPECT_THROW(BatcherOptionsFromConfig(data, 17, 4, 4), Error);
}

TEST(DataOptionsTest, LoadOrTrainVocabTrainsOnceThenLoads) {
  ScratchDir dir;
  testing::GeneratedCorpus corpus = testing::GenerateCorpus(200, 6, 8);
  testing::WriteLines(dir.File("a.de"), corpus.src);
  testing::WriteLines(dir.File("a.en"), corpus.tgt);
  config::DataConfig data;
  data.set_train_src(dir.File("a.de"));
  data.set_train_tgt(dir.File("a.en"));
  data.set_vocab(dir.File("vocab.spm"));
  data.set_vocab_size(70);
  Vocab trained = LoadOrTrainVocab(data, 1);
  ASSERT_TRUE(FileExists(dir.File("vocab.spm")));
  Vocab loaded = LoadOrTrainVocab(data, 2);  // a different seed would train another: not used
  EXPECT_EQ(loaded.serialized(), trained.serialized());
  EXPECT_EQ(loaded.Decode(loaded.Encode(corpus.tgt[0])), corpus.tgt[0]);
}

}  // namespace
}  // namespace tern::data
