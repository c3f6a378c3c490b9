// tern-npz end to end: a .tern model exported to Marian's .npz and imported back translates the
// same through tern-translate; an archive re-saved by numpy.savez imports the same; bad input is
// one error line and exit code 1.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/file_io.h"
#include "configs/config_io.h"
#include "data/vocab.h"
#include "inference/format/model_file.h"
#include "inference/marian/model.h"
#include "inference/marian/names.h"
#include "inference/marian/npz.h"
#include "inference/marian/vocab.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

using data::kBosId;
using data::kEosId;
using data::kPadId;
using data::kUnkId;

class NpzProgramTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> corpus;
    const char* words[] = {"one", "two", "three", "blue", "sky", "sea", "ship", "sails", "far"};
    for (int i = 0; i < 200; ++i) {
      std::string s;
      for (int j = 0; j < 2 + i % 4; ++j) s += std::string(j ? " " : "") + words[(i + 4 * j) % 9];
      corpus.push_back(s);
    }
    data::VocabTrainOptions options;
    options.vocab_size = 40;
    vocab_ = new data::Vocab(data::Vocab::TrainFromSentences(corpus, options));
  }
  static void TearDownTestSuite() { delete vocab_; }

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tern_npz_program_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_ = testing::MakeTinyModel(
        {.tied = false, .pre_norm = true, .vocab = vocab_->size(), .eos_bias = 2.5f});
    WriteModelFile(Path("m.tern"), model_.config, vocab_->serialized(), model_.tensors);
    WriteFileAtomic(Path("in.txt"), "one blue ship\n\nsails far sea\nsky\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  static int Shell(const std::string& command) {
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Npz(const std::string& args) const {
    return std::string(TERN_NPZ_BIN) + " " + args + " 2> " + Path("err.txt");
  }
  // tern-translate's output for in.txt with `model`.
  std::string Translate(const std::string& model) const {
    const std::string out = Path("out.txt");
    EXPECT_EQ(Shell(std::string(TERN_TRANSLATE_BIN) + " --model " + model + " --beam 3 " +
                    "--threads 1 < " + Path("in.txt") + " > " + out),
              0);
    return ReadFile(out);
  }
  // The one line tern-npz wrote on stderr.
  std::string ErrorLine() const {
    std::string err = ReadFile(Path("err.txt"));
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    return err;
  }
  // Holds the two model files to the same config, vocabulary and bits.
  static void ExpectSameModel(const std::string& a_path, const std::string& b_path,
                              bool same_vocab_bytes = true) {
    auto a = ModelFile::Open(a_path), b = ModelFile::Open(b_path);
    EXPECT_EQ(config::ToText(b->config()), config::ToText(a->config()));
    if (same_vocab_bytes) {
      EXPECT_EQ(b->vocab(), a->vocab());
    }
    ASSERT_EQ(b->weights().size(), a->weights().size());
    for (const std::string& name : a->weights().Names()) {
      const Tensor& x = a->weights().Get(name);
      const Tensor& y = b->weights().Get(name, x.shape());
      EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.bytes()), 0) << name;
    }
  }

  static inline data::Vocab* vocab_ = nullptr;
  std::filesystem::path dir_;
  testing::TinyModel model_;
};

TEST_F(NpzProgramTest, ExportThenImportTranslatesTheSame) {
  ASSERT_EQ(Shell(Npz("export --model " + Path("m.tern") + " --out " + Path("m.npz") +
                      " --vocab-out " + Path("v.spm"))),
            0)
      << ReadFile(Path("err.txt"));
  ASSERT_EQ(Shell(Npz("import --npz " + Path("m.npz") + " --vocab " + Path("v.spm") + " --out " +
                      Path("back.tern"))),
            0)
      << ReadFile(Path("err.txt"));
  ExpectSameModel(Path("m.tern"), Path("back.tern"));
  const std::string expected = Translate(Path("m.tern"));
  EXPECT_EQ(std::count(expected.begin(), expected.end(), '\n'), 4);
  EXPECT_EQ(Translate(Path("back.tern")), expected);
}

TEST_F(NpzProgramTest, ArchiveResavedByNumpyImportsTheSame) {
  if (Shell("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with numpy is not installed";
  }
  ASSERT_EQ(Shell(Npz("export --model " + Path("m.tern") + " --out " + Path("m.npz") +
                      " --vocab-out " + Path("v.spm"))),
            0);
  // numpy.savez writes ZIP64 local headers and its own .npy headers: a file from Python.
  ASSERT_EQ(Shell("python3 -c \"import numpy as np; d = np.load('" + Path("m.npz") +
                  "'); np.savez('" + Path("numpy.npz") + "', **{k: d[k] for k in d.files})\""),
            0);
  ASSERT_NE(ReadFile(Path("numpy.npz")), ReadFile(Path("m.npz")));
  ASSERT_EQ(Shell(Npz("import --npz " + Path("numpy.npz") + " --vocab " + Path("v.spm") +
                      " --out " + Path("numpy.tern"))),
            0)
      << ReadFile(Path("err.txt"));
  ExpectSameModel(Path("m.tern"), Path("numpy.tern"));
}

TEST_F(NpzProgramTest, BadInputIsOneErrorLine) {
  ASSERT_EQ(Shell(Npz("export --model " + Path("m.tern") + " --out " + Path("m.npz"))), 0);
  const std::string npz = ReadFile(Path("m.npz"));
  WriteFileAtomic(Path("cut.npz"), npz.substr(0, npz.size() / 2));
  WriteFileAtomic(Path("v.spm"), vocab_->serialized());
  EXPECT_EQ(Shell(Npz("import --npz " + Path("cut.npz") + " --vocab " + Path("v.spm") + " --out " +
                      Path("x.tern"))),
            1);
  EXPECT_NE(ErrorLine().find("truncated"), std::string::npos);

  // A model of 3 more rows than the vocabulary has pieces.
  const testing::TinyModel wide = testing::MakeTinyModel({.vocab = vocab_->size() + 3});
  WriteModelFile(Path("wide.tern"), wide.config, vocab_->serialized(), wide.tensors);
  ASSERT_EQ(Shell(Npz("export --model " + Path("wide.tern") + " --out " + Path("wide.npz"))), 0);
  EXPECT_EQ(Shell(Npz("import --npz " + Path("wide.npz") + " --vocab " + Path("v.spm") + " --out " +
                      Path("x.tern"))),
            1);
  EXPECT_NE(ErrorLine().find("embedding rows"), std::string::npos);
  EXPECT_FALSE(FileExists(Path("x.tern")));

  EXPECT_EQ(Shell(Npz("import --npz " + Path("m.npz") + " --out " + Path("x.tern"))), 1);
  EXPECT_NE(ErrorLine().find("give one of --vocab"), std::string::npos);
  EXPECT_EQ(Shell(Npz("convert")), 1);
  EXPECT_NE(ErrorLine().find("unknown command 'convert'"), std::string::npos);
}

// Marian's forms of `rows` (Tern ids, first dim) in Marian's order: eos, unk, then ids 4...
std::string MarianRows(const std::string& data, int64_t rows, int64_t width) {
  std::string out;
  auto row = [&](int64_t r) { out += data.substr(r * width * 4, width * 4); };
  row(kEosId);
  row(kUnkId);
  for (int64_t r = 4; r < rows; ++r) row(r);
  return out;
}

TEST_F(NpzProgramTest, MarianVocabularyAndRowOrderImportWithTernIds) {
  // A Tern model as a Marian model implies it: pad and bos rows zero (Marian's decoder starts from
  // a zero vector), never chosen as output.
  testing::TinyModel m =
      testing::MakeTinyModel({.vocab = vocab_->size(), .eos_bias = 2.5f, .emb_scale = 1.f});
  const int64_t v = vocab_->size(), d = 16;
  for (int32_t id : {kPadId, kBosId}) {
    std::memset(m.weights.Get("Wemb").f32() + id * d, 0, d * sizeof(float));
    m.weights.Get("decoder_ff_logit_out_b").f32()[id] = -1e9f;
  }
  WriteModelFile(Path("z.tern"), m.config, vocab_->serialized(), m.tensors);

  // Its Marian form: the vocabulary with eos 0, unk 1, no pad or bos, and the rows in that order.
  const std::vector<SpmPiece> tern = SpmPieces(vocab_->serialized(), "tern vocabulary");
  std::vector<SpmPiece> marian = {tern[kEosId], tern[kUnkId]};
  marian.insert(marian.end(), tern.begin() + 4, tern.end());
  WriteFileAtomic(Path("marian.spm"), WithSpmPieces(vocab_->serialized(), marian, "test"));
  std::vector<NpyArray> arrays = ToMarianArrays(m.config.model(), m.weights);
  for (NpyArray& a : arrays) {
    if (a.name == "Wemb") {
      a.data = MarianRows(a.data, v, d);
      a.shape = {v - 2, d};
    } else if (a.name == "decoder_ff_logit_out_b") {
      a.data = MarianRows(a.data, v, 1);
      a.shape = {1, v - 2};
    } else if (a.name == kMarianConfigEntry) {
      const std::string from = "  - " + std::to_string(v) + "\n",
                        to = "  - " + std::to_string(v - 2) + "\n";
      for (size_t at; (at = a.data.find(from)) != std::string::npos;)
        a.data.replace(at, from.size(), to);
    }
  }
  WriteNpz(Path("marian.npz"), arrays);

  ASSERT_EQ(Shell(Npz("import --npz " + Path("marian.npz") + " --marian-vocab " +
                      Path("marian.spm") + " --out " + Path("back.tern"))),
            0)
      << ReadFile(Path("err.txt"));
  ExpectSameModel(Path("z.tern"), Path("back.tern"), /*same_vocab_bytes=*/false);
  const data::Vocab rebuilt =
      data::Vocab::FromSerialized(std::string(ModelFile::Open(Path("back.tern"))->vocab()));
  ASSERT_EQ(rebuilt.size(), vocab_->size());
  for (int32_t id = 0; id < rebuilt.size(); ++id) {
    EXPECT_EQ(rebuilt.IdToPiece(id), vocab_->IdToPiece(id)) << id;
  }
  EXPECT_EQ(Translate(Path("back.tern")), Translate(Path("z.tern")));

  EXPECT_EQ(Shell(Npz("import --npz " + Path("marian.npz") + " --marian-vocab " + Path("in.txt") +
                      " --out " + Path("x.tern"))),
            1);
  EXPECT_NE(ErrorLine().find("not a SentencePiece model"), std::string::npos);
}

}  // namespace
}  // namespace tern::inference
