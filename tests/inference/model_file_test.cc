// The .tern model file: round trip, and one clear error for each kind of bad file.
#include "inference/format/model_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"
#include "configs/config_io.h"
#include "inference/format/export.h"
#include "inference/transformer/transformer.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tern_model_file_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_ = testing::MakeTinyModel({.tied = false, .pre_norm = true});
    bytes_ = SerializeModelFile(model_.config, kVocab, model_.tensors);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Write(const std::string& name, const std::string& bytes) const {
    WriteFileAtomic(Path(name), bytes);
    return Path(name);
  }
  // The error of opening `bytes` as a model file ("" when it opens).
  std::string OpenError(const std::string& bytes) const {
    try {
      ModelFile::Open(Write("bad.tern", bytes));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  // Recomputes the trailer checksum after a patch, so the parser sees the patched field.
  static void FixCrc(std::string* bytes) {
    uint32_t crc = Crc32(bytes->data(), bytes->size() - 4);
    std::memcpy(bytes->data() + bytes->size() - 4, &crc, 4);
  }
  // Offset of the first tensor's table entry: after the fixed header, arch, config and vocab.
  size_t FirstEntryOffset() const {
    const std::string text = config::ToText(model_.config);
    return 24 + 4 + std::strlen("transformer") + 4 + 8 + text.size() + 8 + kVocab.size() + 4;
  }

  static inline const std::string kVocab = std::string("spm\0model\xff bytes", 16);
  std::filesystem::path dir_;
  testing::TinyModel model_;
  std::string bytes_;
};

TEST_F(ModelFileTest, RoundTripKeepsConfigVocabularyAndTensorsAligned) {
  WriteModelFile(Path("m.tern"), model_.config, kVocab, model_.tensors);
  std::unique_ptr<ModelFile> file = ModelFile::Open(Path("m.tern"));
  EXPECT_EQ(file->arch(), "transformer");
  EXPECT_EQ(file->arch_revision(), ArchRevision("transformer"));
  EXPECT_EQ(config::ToText(file->config()), config::ToText(model_.config));
  EXPECT_EQ(std::string(file->vocab()), kVocab);
  ASSERT_EQ(file->table().size(), model_.tensors.size());
  ASSERT_EQ(file->weights().size(), model_.tensors.size());
  for (const NamedTensor& t : model_.tensors) {
    const Tensor& read = file->weights().Get(t.name, t.tensor.shape());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read.raw()) % kModelTensorAlignment, 0u) << t.name;
    EXPECT_EQ(read.ToVector(), t.tensor.ToVector()) << t.name;
  }
  for (const TensorEntry& e : file->table()) {
    EXPECT_EQ(e.dtype, FileDType::kFloat32);
    EXPECT_EQ(e.scale, 1.f);
    EXPECT_EQ(e.offset % kModelTensorAlignment, 0u);
  }
  // The weights run: a Transformer builds from the mapped views.
  Transformer model(file->config().model(), file->weights());
  EXPECT_EQ(model.vocab_size(), 29);
}

TEST_F(ModelFileTest, TruncatedFileSaysTruncated) {
  for (size_t keep : {bytes_.size() - 1, bytes_.size() / 2, size_t{30}}) {
    std::string error = OpenError(bytes_.substr(0, keep));
    EXPECT_NE(error.find("truncated"), std::string::npos) << keep << ": " << error;
    EXPECT_NE(error.find("bad.tern"), std::string::npos) << error;
  }
}

TEST_F(ModelFileTest, FlippedByteIsAChecksumError) {
  for (size_t at : {size_t{40}, FirstEntryOffset() + 2, bytes_.size() - 100, bytes_.size() - 2}) {
    std::string bad = bytes_;
    bad[at] ^= 0x10;
    std::string error = OpenError(bad);
    EXPECT_NE(error.find("checksum"), std::string::npos) << at << ": " << error;
  }
}

TEST_F(ModelFileTest, NewerVersionIsRefusedByName) {
  std::string bad = bytes_;
  uint32_t version = kModelFormatVersion + 1;
  std::memcpy(bad.data() + 8, &version, 4);
  std::string error = OpenError(bad);
  EXPECT_NE(error.find("version 2"), std::string::npos) << error;
  EXPECT_NE(error.find("newer"), std::string::npos) << error;
}

TEST_F(ModelFileTest, NewerArchitectureRevisionIsRefused) {
  std::string bad = bytes_;
  uint32_t revision = ArchRevision("transformer") + 1;
  std::memcpy(bad.data() + 24 + 4 + std::strlen("transformer"), &revision, 4);
  FixCrc(&bad);
  EXPECT_NE(OpenError(bad).find("revision 2 is newer"), std::string::npos) << OpenError(bad);
}

TEST_F(ModelFileTest, WrongMagicOrEmptyFileIsNotAModelFile) {
  std::string bad = bytes_;
  bad[0] = 'X';
  EXPECT_NE(OpenError(bad).find("not a Tern model file"), std::string::npos) << OpenError(bad);
  EXPECT_NE(OpenError("").find("not a Tern model file"), std::string::npos) << OpenError("");
}

TEST_F(ModelFileTest, AbsurdSizesAreCaughtBeforeUse) {
  struct Patch {
    size_t offset;
    uint64_t value;
    int bytes;
    const char* expect;
  };
  const size_t entry = FirstEntryOffset();
  const size_t name_len = model_.tensors[0].name.size();
  const size_t rank = model_.tensors[0].tensor.rank();
  const size_t dims = entry + 4 + name_len + 4;
  const size_t offset_field = dims + 8 * rank + 4;
  const std::vector<Patch> patches = {
      {24, 0xffffffffu, 4, "architecture name too long"},
      {24 + 4 + 11 + 4, 1ull << 60, 8, "config"},                // config length
      {entry - 4, 0x7fffffffu, 4, "tensor count"},               // tensor count
      {entry, 1u << 30, 4, "name of"},                           // name length
      {dims, 1ull << 62, 8, "absurd shape"},                     // first dim
      {dims, static_cast<uint64_t>(-5), 8, "absurd shape"},      // negative dim
      {offset_field, 1ull << 50, 8, "outside the file"},         // data offset
      {offset_field, 64, 8, "overlaps the header"},              // offset into the header
      {offset_field + 8, 12345, 8, "does not match its shape"},  // data size
      {entry + 4 + name_len, 9, 1, "dtype"},                     // unknown dtype code
  };
  for (const Patch& p : patches) {
    std::string bad = bytes_;
    std::memcpy(bad.data() + p.offset, &p.value, p.bytes);
    FixCrc(&bad);
    std::string error = OpenError(bad);
    EXPECT_NE(error.find(p.expect), std::string::npos) << "patch at " << p.offset << ": " << error;
    EXPECT_NE(error.find("corrupted"), std::string::npos) << error;
  }
}

// Issue 38, 3: one NaN in Wemb made every translation empty, with exit 0.
TEST_F(ModelFileTest, NonFiniteWeightsAreRefusedNamingTheTensor) {
  std::vector<NamedTensor> tensors = model_.tensors;
  for (NamedTensor& t : tensors) {
    if (t.name == "decoder_Wemb") {
      std::vector<float> values = t.tensor.ToVector();
      values[7] = std::nanf("");
      t.tensor = Tensor::FromVector(t.tensor.shape(), values);
    }
  }
  const std::string error = OpenError(SerializeModelFile(model_.config, kVocab, tensors));
  EXPECT_NE(error.find("model parameter 'decoder_Wemb' holds nan at element 7"), std::string::npos)
      << error;
}

// Issue 38, 14 (a crafted file, its checksum recomputed): two tensors on the same bytes loaded.
TEST_F(ModelFileTest, OverlappingTensorsAreRefused) {
  const size_t entry = FirstEntryOffset();
  const size_t name_len = model_.tensors[0].name.size();
  const size_t offset_field = entry + 4 + name_len + 4 + 8 * model_.tensors[0].tensor.rank() + 4;
  // The second entry's offset, set to the first's.
  const size_t second = offset_field + 16;
  const size_t second_name = model_.tensors[1].name.size();
  const size_t second_offset =
      second + 4 + second_name + 4 + 8 * model_.tensors[1].tensor.rank() + 4;
  std::string bad = bytes_;
  std::memcpy(bad.data() + second_offset, bad.data() + offset_field, 8);
  FixCrc(&bad);
  EXPECT_NE(OpenError(bad).find("overlap"), std::string::npos) << OpenError(bad);
}

// Issue 38, 14: a format 2 int8 matrix without its column scales loaded, and ran with the
// per-tensor scale alone.
TEST_F(ModelFileTest, AQuantizedMatrixWithoutColumnScalesIsRefused) {
  std::vector<NamedTensor> tensors = ConvertWeights(model_.tensors, WeightType::kInt8);
  EXPECT_EQ(OpenError(SerializeModelFile(model_.config, kVocab, tensors)), "");
  std::erase_if(tensors, [](const NamedTensor& t) {
    return t.name == std::string("encoder_l1_ffn_W1") + kColumnScalesSuffix;
  });
  const std::string error = OpenError(SerializeModelFile(model_.config, kVocab, tensors));
  EXPECT_NE(error.find("int8 matrix 'encoder_l1_ffn_W1' has no"), std::string::npos) << error;
}

// A million heads or a huge max_length in the embedded config (a crafted file) reached the
// decoder.
TEST_F(ModelFileTest, AnEmbeddedConfigOutOfRangeIsRefused) {
  config::TrainConfig c = model_.config;
  c.mutable_model()->set_max_length(2000000000);
  const std::string error = OpenError(SerializeModelFile(c, kVocab, model_.tensors));
  EXPECT_NE(error.find("embedded config: model.max_length"), std::string::npos) << error;
}

TEST_F(ModelFileTest, MissingFileNamesThePath) {
  try {
    ModelFile::Open(Path("nope.tern"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.tern"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern::inference
