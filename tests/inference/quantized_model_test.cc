// Integer models: export to int16/int8, load and run through the integer GEMM, the bad-file cases
// of quantized tensors, and the float/integer auto-tuner.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"
#include "inference/format/export.h"
#include "inference/format/model_file.h"
#include "inference/transformer/transformer.h"
#include "tensor/arena.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

const std::string kVocab = "vocabulary bytes";

Tensor Ids(const std::vector<int32_t>& ids) {
  return Tensor::FromInts({1, static_cast<int64_t>(ids.size())}, ids);
}

// Logits (T, V) of one sentence pair.
std::vector<float> Logits(const Transformer& model) {
  const std::vector<int32_t> src = {5, 9, 12, 7, 3}, tgt = {2, 6, 7, 8, 9};
  Arena arena;
  Tensor mask = Tensor::FromVector({1, 5}, std::vector<float>(5, 1.f));
  return model.ForwardLogits(Ids(src), mask, Ids(tgt), arena).ToVector();
}

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * double(got[i] - want[i]);
    norm += want[i] * double(want[i]);
  }
  return std::sqrt(err / norm);
}

class QuantizedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tern_quantized_model_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_ = testing::MakeTinyModel({.tied = false, .pre_norm = true, .dim = 32, .ffn = 48});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Bytes(WeightType type) const {
    return SerializeModelFile(model_.config, kVocab, ConvertWeights(model_.tensors, type));
  }
  std::string Write(const std::string& bytes) const {
    const std::string path = (dir_ / "m.tern").string();
    WriteFileAtomic(path, bytes);
    return path;
  }
  std::string OpenError(const std::string& bytes) const {
    try {
      ModelFile::Open(Write(bytes));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  static void FixCrc(std::string* bytes) {
    uint32_t crc = Crc32(bytes->data(), bytes->size() - 4);
    std::memcpy(bytes->data() + bytes->size() - 4, &crc, 4);
  }
  // Byte offset of `name`'s scale field in the tensor table (name, dtype, rank, reserved, dims).
  static size_t ScaleField(const std::string& bytes, const std::string& name, int rank) {
    const size_t at = bytes.find(name);
    EXPECT_NE(at, std::string::npos);
    return at + name.size() + 4 + 8 * rank;
  }

  std::filesystem::path dir_;
  testing::TinyModel model_;
};

TEST_F(QuantizedModelTest, ExportQuantizesOnlyLinearWeightMatrices) {
  for (WeightType type : {WeightType::kInt16, WeightType::kInt8}) {
    auto file = ModelFile::Open(Write(Bytes(type)));
    int quantized = 0;
    for (const TensorEntry& e : file->table()) {
      const bool linear = IsLinearWeightName(e.name);
      EXPECT_EQ(e.dtype == FileDType::kFloat32, !linear) << e.name;
      if (linear) {
        ++quantized;
        EXPECT_GT(e.scale, 0.f);
        EXPECT_EQ(e.dtype, type == WeightType::kInt16 ? FileDType::kInt16 : FileDType::kInt8);
      } else {
        EXPECT_EQ(e.scale, 1.f) << e.name;
      }
    }
    EXPECT_EQ(quantized, 2 * 6 + 2 * 10);  // encoder 4+2, decoder 8+2, per layer, depth 2
  }
}

// The exported integer model computes the float model's function up to quantization error, and
// exactly what the same weights quantized at load compute.
TEST_F(QuantizedModelTest, IntegerModelsRunAndMatchQuantizationAtLoad) {
  const std::vector<float> want = Logits(Transformer(model_.config.model(), model_.weights));
  for (WeightType type : {WeightType::kInt16, WeightType::kInt8}) {
    auto file = ModelFile::Open(Write(Bytes(type)));
    Transformer exported(file->config().model(), file->weights());
    const std::vector<float> got = Logits(exported);
    const double err = RelativeError(got, want);
    EXPECT_LT(err, type == WeightType::kInt16 ? 2e-3 : 5e-2) << "type " << int(type);
    EXPECT_GT(err, 0.0) << "the integer path should not be the float one";

    LinearOptions at_load;
    at_load.quantize = type == WeightType::kInt16 ? cpu::IntType::kInt16 : cpu::IntType::kInt8;
    EXPECT_EQ(Logits(Transformer(model_.config.model(), model_.weights, at_load)), got);
  }
}

// An integer model's output layer stays float32 unless asked to run as integers too.
TEST_F(QuantizedModelTest, OutputLayerCanRunAsIntegers) {
  const std::vector<float> want = Logits(Transformer(model_.config.model(), model_.weights));
  auto file = ModelFile::Open(Write(Bytes(WeightType::kInt8)));
  const std::vector<float> mixed = Logits(Transformer(file->config().model(), file->weights()));
  LinearOptions integer_output;
  integer_output.integer_output_layer = true;
  const std::vector<float> integer =
      Logits(Transformer(file->config().model(), file->weights(), integer_output));
  EXPECT_NE(mixed, integer);
  EXPECT_LT(RelativeError(mixed, want), RelativeError(integer, want));
}

// skip_zero_activations marks each feed-forward block's second product (the ReLU's output is
// its input) and nothing else; skipping zero groups leaves the results as they were.
TEST_F(QuantizedModelTest, SkippingZeroActivationsKeepsTheLogits) {
  auto file = ModelFile::Open(Write(Bytes(WeightType::kInt16)));
  LinearOptions skip;
  skip.skip_zero_activations = true;
  const Transformer plain(file->config().model(), file->weights());
  const Transformer skipping(file->config().model(), file->weights(), skip);
  for (const DecoderLayerParams& layer : skipping.decoder_layers()) {
    EXPECT_TRUE(layer.ffn.w2.skip_zero_inputs);
    EXPECT_FALSE(layer.ffn.w1.skip_zero_inputs);
    EXPECT_FALSE(layer.self.wq.skip_zero_inputs);
  }
  EXPECT_FALSE(plain.decoder_layers()[0].ffn.w2.skip_zero_inputs);
  EXPECT_EQ(Logits(skipping), Logits(plain));
}

TEST_F(QuantizedModelTest, TruncatedOrCorruptedQuantizedTensorIsAClearError) {
  const std::string bytes = Bytes(WeightType::kInt16);
  const std::string truncated = OpenError(bytes.substr(0, bytes.size() - 200));
  EXPECT_NE(truncated.find("truncated"), std::string::npos) << truncated;
  auto file = ModelFile::Open(Write(bytes));
  for (const TensorEntry& e : file->table()) {
    if (e.dtype != FileDType::kInt16) continue;
    std::string bad = bytes;
    bad[e.offset + 3] ^= 0x40;
    const std::string error = OpenError(bad);
    EXPECT_NE(error.find("checksum"), std::string::npos) << error;
    // The same damage behind a recomputed checksum (a broken writer): a value out of range.
    int16_t big = 30000;
    std::memcpy(bad.data() + e.offset + 2, &big, 2);
    FixCrc(&bad);
    const std::string range = OpenError(bad);
    EXPECT_NE(range.find("outside"), std::string::npos) << range;
    EXPECT_NE(range.find(e.name), std::string::npos) << range;
    EXPECT_EQ(range.find('\n'), std::string::npos) << "one line: " << range;
    break;
  }
}

TEST_F(QuantizedModelTest, WrongScaleIsAClearError) {
  const std::string bytes = Bytes(WeightType::kInt8);
  const std::string name = "encoder_l1_self_Wq";
  for (float scale : {0.f, -2.f, std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
    std::string bad = bytes;
    std::memcpy(bad.data() + ScaleField(bad, name, 2), &scale, 4);
    FixCrc(&bad);
    const std::string error = OpenError(bad);
    EXPECT_NE(error.find("quantization scale"), std::string::npos) << scale << ": " << error;
    EXPECT_NE(error.find(name), std::string::npos) << error;
  }
}

TEST_F(QuantizedModelTest, ColumnScalesAreCheckedOnLoad) {
  const std::string name = "decoder_l2_ffn_W1";
  const std::string scales = name + kColumnScalesSuffix;
  const std::string bytes = Bytes(WeightType::kInt16);
  auto file = ModelFile::Open(Write(bytes));
  ASSERT_TRUE(file->weights().ColumnScales(name).defined());
  EXPECT_EQ(file->weights().ColumnScales(name).numel(), file->weights().Get(name).dim(1));
  for (const TensorEntry& e : file->table()) {
    if (e.name != scales) continue;
    for (float bad_scale : {0.f, -1.f, std::numeric_limits<float>::infinity()}) {
      std::string bad = bytes;
      std::memcpy(bad.data() + e.offset + 4 * 5, &bad_scale, 4);
      FixCrc(&bad);
      const std::string error = OpenError(bad);
      EXPECT_NE(error.find(scales + "' holds"), std::string::npos) << error;
      EXPECT_NE(error.find("at column 5"), std::string::npos) << error;
    }
  }
  // A scale vector without its matrix, or of the wrong length.
  std::vector<NamedTensor> tensors = ConvertWeights(model_.tensors, WeightType::kInt8);
  std::vector<NamedTensor> orphan = tensors, short_scales = tensors;
  orphan.push_back({"no_such_matrix@column_scales", Tensor::FromVector({2}, {1.f, 1.f})});
  EXPECT_NE(OpenError(SerializeModelFile(model_.config, kVocab, orphan)).find("no int16/int8"),
            std::string::npos);
  for (NamedTensor& t : short_scales) {
    if (t.name == scales) t.tensor = t.tensor.Slice(0, 3);
  }
  EXPECT_NE(OpenError(SerializeModelFile(model_.config, kVocab, short_scales))
                .find("one scale per column"),
            std::string::npos);
}

TEST_F(QuantizedModelTest, Version1FilesWithOneScalePerMatrixStillLoad) {
  // What tern-export wrote before column scales: a scale per matrix, format version 1.
  std::vector<NamedTensor> tensors;
  for (const NamedTensor& t : model_.tensors) {
    if (!IsLinearWeightName(t.name) || t.tensor.rank() != 2) {
      tensors.push_back(t);
      continue;
    }
    Tensor q = Tensor::Empty(t.tensor.shape(), DType::kInt16);
    const float scale = cpu::QuantizeWeightMatrix(cpu::IntType::kInt16, t.tensor.f32(),
                                                  t.tensor.dim(0), t.tensor.numel(), q.raw());
    tensors.push_back({t.name, q, scale});
  }
  std::string bytes = SerializeModelFile(model_.config, kVocab, tensors);
  const uint32_t version = 1;
  std::memcpy(bytes.data() + 8, &version, 4);
  FixCrc(&bytes);
  auto file = ModelFile::Open(Write(bytes));
  EXPECT_FALSE(file->weights().ColumnScales("decoder_l2_ffn_W1").defined());
  const std::vector<float> want = Logits(Transformer(model_.config.model(), model_.weights));
  EXPECT_LT(RelativeError(Logits(Transformer(file->config().model(), file->weights())), want),
            2e-3);
}

TEST_F(QuantizedModelTest, Int8ValueMinus128IsRefused) {
  std::string bytes = Bytes(WeightType::kInt8);
  auto file = ModelFile::Open(Write(bytes));
  for (const TensorEntry& e : file->table()) {
    if (e.dtype != FileDType::kInt8) continue;
    bytes[e.offset] = static_cast<char>(-128);
    FixCrc(&bytes);
    EXPECT_NE(OpenError(bytes).find("outside +-127"), std::string::npos) << OpenError(bytes);
    break;
  }
}

TEST_F(QuantizedModelTest, QuantizedEmbeddingIsRefusedByTheRuntime) {
  std::vector<NamedTensor> tensors = model_.tensors;
  for (NamedTensor& t : tensors) {
    if (t.name != "encoder_Wemb") continue;
    t.tensor = Tensor::Zeros(t.tensor.shape(), DType::kInt8);
    t.scale = 1.f;
  }
  // With its column scales, which a format 2 file must have, it gets past the reader.
  const int64_t columns = model_.weights.Get("encoder_Wemb").dim(1);
  tensors.push_back({std::string("encoder_Wemb") + kColumnScalesSuffix,
                     Tensor::FromVector({columns}, std::vector<float>(columns, 1.f))});
  auto file = ModelFile::Open(Write(SerializeModelFile(model_.config, kVocab, tensors)));
  try {
    Transformer model(file->config().model(), file->weights());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder_Wemb"), std::string::npos) << e.what();
  }
}

TEST(ProductTunerTest, SettlesOnTheFasterProductPerRowBucket) {
  ProductTuner tuner;
  for (int call = 0; call < 2 * (ProductTuner::kTrials + 1); ++call) {
    ASSERT_FALSE(tuner.Choice(3).has_value());
    const bool integer = tuner.UseInteger(3);
    tuner.Record(3, integer, integer ? 1e-3 : 2e-3);
    const bool other = tuner.UseInteger(60);
    tuner.Record(60, other, other ? 5e-3 : 1e-3);
  }
  ASSERT_TRUE(tuner.Choice(4).has_value());  // 3 and 4 share a bucket
  EXPECT_TRUE(*tuner.Choice(4));
  EXPECT_TRUE(tuner.UseInteger(3));
  ASSERT_TRUE(tuner.Choice(60).has_value());
  EXPECT_FALSE(*tuner.Choice(60));
  EXPECT_FALSE(tuner.UseInteger(64));
}

// With auto-tuning every product is the float or the integer one, whichever the tuner picks.
TEST_F(QuantizedModelTest, AutotunedModelGivesFloatOrIntegerResults) {
  auto file = ModelFile::Open(Write(Bytes(WeightType::kInt16)));
  const std::vector<float> integer = Logits(Transformer(file->config().model(), file->weights()));
  LinearOptions tune;
  tune.autotune = true;
  Transformer tuned(file->config().model(), file->weights(), tune);
  for (int i = 0; i < 2 * (ProductTuner::kTrials + 2); ++i) {
    const std::vector<float> got = Logits(tuned);
    EXPECT_LT(RelativeError(got, integer), 2e-3) << "call " << i;
  }
}

}  // namespace
}  // namespace tern::inference
