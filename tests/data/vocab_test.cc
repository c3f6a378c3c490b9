// The SentencePiece vocabulary: special ids, raw-text round trip, determinism, serialization,
// and clear errors for missing or corrupt model files.
#include "data/vocab.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "common/file_io.h"
#include "configs/config_io.h"
#include "tests/data/test_corpus.h"

namespace tern::data {
namespace {

using testing::ScratchDir;

TEST(VocabTest, TrainsFromFilesWithFixedSpecialIdsAndRoundTrips) {
  ScratchDir dir;
  testing::GeneratedCorpus corpus = testing::GenerateCorpus(300, 8, 11);
  testing::WriteLines(dir.File("train.de.gz"), corpus.src, /*gzip=*/true);
  testing::WriteLines(dir.File("train.en"), corpus.tgt);
  const std::string model = dir.File("sub/vocab.spm");
  Vocab vocab = Vocab::Train({dir.File("train.de.gz"), dir.File("train.en")}, 80, model);
  EXPECT_TRUE(FileExists(model));
  EXPECT_LE(vocab.size(), 80);
  EXPECT_GT(vocab.size(), 40);
  EXPECT_EQ(vocab.IdToPiece(kPadId), "<pad>");
  EXPECT_EQ(vocab.IdToPiece(kUnkId), "<unk>");
  EXPECT_EQ(vocab.IdToPiece(kBosId), "<s>");
  EXPECT_EQ(vocab.IdToPiece(kEosId), "</s>");

  for (int i = 0; i < 50; ++i) {
    for (const std::string& text : {corpus.src[i], corpus.tgt[i]}) {
      std::vector<int32_t> ids = vocab.Encode(text);
      ASSERT_FALSE(ids.empty());
      for (int32_t id : ids) {
        EXPECT_GT(id, kEosId);  // no specials, and every character is covered (no <unk>)
        EXPECT_LT(id, vocab.size());
      }
      EXPECT_EQ(vocab.Decode(ids), text);
    }
  }
  // Joint vocabulary: both languages' words are in it as whole pieces or short splits.
  EXPECT_LE(vocab.Encode("Straße").size(), 3u);
  EXPECT_LE(vocab.Encode("house").size(), 3u);
  // Specials decode to nothing.
  std::vector<int32_t> ids = vocab.Encode("das Haus.");
  std::vector<int32_t> framed = {kBosId};
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.push_back(kEosId);
  framed.push_back(kPadId);
  EXPECT_EQ(vocab.Decode(framed), "das Haus.");
  // A character never seen in training is <unk>.
  EXPECT_EQ(vocab.Encode("\xe6\x97\xa5")[1], kUnkId);
}

TEST(VocabTest, TrainingIsDeterministicAndSerializationRoundTrips) {
  testing::GeneratedCorpus corpus = testing::GenerateCorpus(300, 8, 5);
  std::vector<std::string> sentences = corpus.src;
  sentences.insert(sentences.end(), corpus.tgt.begin(), corpus.tgt.end());
  VocabTrainOptions options;
  options.vocab_size = 60;
  Vocab a = Vocab::TrainFromSentences(sentences, options);
  Vocab b = Vocab::TrainFromSentences(sentences, options);
  EXPECT_EQ(a.serialized(), b.serialized());

  Vocab c = Vocab::FromSerialized(a.serialized());
  EXPECT_EQ(c.size(), a.size());
  EXPECT_EQ(c.Encode(corpus.src[3]), a.Encode(corpus.src[3]));

  Vocab moved = std::move(c);
  EXPECT_EQ(moved.Decode(moved.Encode("die Tür öffnet.")), "die Tür öffnet.");
}

TEST(VocabTest, SamplesDownToMaxSentences) {
  ScratchDir dir;
  testing::GeneratedCorpus corpus = testing::GenerateCorpus(2000, 8, 9);
  testing::WriteLines(dir.File("a"), corpus.src);
  VocabTrainOptions options;
  options.vocab_size = 50;
  options.max_sentences = 200;
  Vocab a = Vocab::Train({dir.File("a")}, options, dir.File("a.spm"));
  Vocab b = Vocab::Train({dir.File("a")}, options, dir.File("b.spm"));
  EXPECT_EQ(a.serialized(), b.serialized());
  EXPECT_EQ(ReadFile(dir.File("a.spm")), a.serialized());
}

TEST(VocabTest, MissingOrCorruptModelIsAClearError) {
  ScratchDir dir;
  try {
    Vocab::Load(dir.File("missing.spm"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.spm does not exist"), std::string::npos)
        << e.what();
  }
  {
    std::ofstream out(dir.File("corrupt.spm"), std::ios::binary);
    out << "this is not a model";
  }
  try {
    Vocab::Load(dir.File("corrupt.spm"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt.spm is not a SentencePiece model"),
              std::string::npos)
        << e.what();
  }
}

// Issue 38, 12: training a vocabulary on an all-whitespace corpus died inside SentencePiece
// (exit 255).
TEST(VocabTest, AllBlankTrainingTextIsAClearError) {
  ScratchDir dir;
  testing::WriteLines(dir.File("blank"), {" ", "\t\t", "", "   \xc2\xa0"});
  try {
    Vocab::Train({dir.File("blank")}, 64, dir.File("v.spm"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable lines"), std::string::npos) << e.what();
  }
}

TEST(VocabTest, LoadsWhatTrainWrote) {
  ScratchDir dir;
  const Vocab& small = testing::SmallVocab();
  WriteFileAtomic(dir.File("v.spm"), small.serialized());
  Vocab loaded = Vocab::Load(dir.File("v.spm"));
  EXPECT_EQ(loaded.serialized(), small.serialized());
  EXPECT_EQ(loaded.Encode("das grüne Haus."), small.Encode("das grüne Haus."));
}

// Regression: linking libsentencepiece (which bundles protobuf 3.14) next to libprotobuf 3.21
// aborted every program at start-up. Both protobufs are used here in one process.
TEST(VocabTest, WorksNextToTheSystemProtobuf) {
  config::TrainConfig config;
  std::string error;
  ASSERT_TRUE(config::ParseTrainConfig("data { vocab_size: 64 batch_tokens: 100 }", "inline",
                                       &config, &error))
      << error;
  const Vocab& vocab = testing::SmallVocab();
  Vocab copy = Vocab::FromSerialized(vocab.serialized());
  EXPECT_EQ(copy.Decode(copy.Encode("die Stadt.")), "die Stadt.");
  EXPECT_EQ(config.data().vocab_size(), 64);
  EXPECT_NE(config::ToText(config).find("batch_tokens: 100"), std::string::npos);
}

}  // namespace
}  // namespace tern::data
