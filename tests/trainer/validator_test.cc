// Validation in a GPU run (trainer/validator.h): the dev set's translations are decoded on the
// GPU, where the parameters live, with the hypotheses and scores of the host's decoder; the
// cross-entropy is the host's. Runs on the emulated GPU (TERN_EMULATE_GPU=1) or a real one;
// skips without either.
#include "trainer/validator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "configs/config_io.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/data/test_corpus.h"

namespace tern::trainer {
namespace {

config::TrainConfig TinyConfig(const data::testing::ScratchDir& dir) {
  config::TrainConfig c;
  std::string error;
  EXPECT_TRUE(config::ParseTrainConfig(R"(model { arch: "transformer" })", "tiny", &c, &error));
  for (const std::string& a : std::vector<std::string>{
           "model.emb_dim=32", "model.ffn_dim=64", "model.heads=2", "model.enc_depth=1",
           "model.dec_depth=1", "training.valid_beam=4", "training.valid_max_sentences=24",
           "data.valid_src=" + dir.File("dev.src"), "data.valid_tgt=" + dir.File("dev.tgt")}) {
    EXPECT_TRUE(config::ApplyOverride(a, &c, &error)) << a << ": " << error;
  }
  config::FillDefaults(&c);
  return c;
}

TEST(ValidatorTest, AGpuRunTranslatesOnTheGpuAsTheHostDoes) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible (nor TERN_EMULATE_GPU=1)";
  data::testing::ScratchDir dir;
  const data::testing::GeneratedCorpus dev = data::testing::GenerateCorpus(24, 8, 11);
  data::testing::WriteLines(dir.File("dev.src"), dev.src);
  data::testing::WriteLines(dir.File("dev.tgt"), dev.tgt);
  const config::TrainConfig config = TinyConfig(dir);
  const data::Vocab& vocab = data::testing::SmallVocab();
  auto model = models::CreateModel(config.model(), vocab.size());
  graph::ParamStore host, gpu;
  model->AddParams(&host);
  model->AddParams(&gpu);
  host.Finalize(Device::kCpu, 7);
  gpu.Finalize(Device::kCuda, 7);
  Copy(host.values_flat(), gpu.values_flat());
  Arena host_arena(Device::kCpu), gpu_arena(Device::kCuda);

  Validator validator(config, vocab);
  const ValidationResult on_host = validator.Run(*model, host, &host_arena, host);
  const ValidationResult on_gpu = validator.Run(*model, gpu, &gpu_arena, host);
  EXPECT_EQ(on_host.translated_on, Device::kCpu);
  EXPECT_EQ(on_gpu.translated_on, Device::kCuda);
  ASSERT_TRUE(on_host.has_bleu && on_gpu.has_bleu);
  ASSERT_EQ(on_host.hypotheses.size(), 24u);
  ASSERT_EQ(on_gpu.hypotheses.size(), 24u);
  // An untrained model's scores nearly tie now and then: on a real GPU (other sums) a few
  // hypotheses may differ; on the emulated one (the CPU's kernels) none do.
  int same = 0, words = 0;
  for (size_t i = 0; i < 24; ++i) {
    same += on_host.hypotheses[i] == on_gpu.hypotheses[i];
    words += !on_host.hypotheses[i].empty();
  }
  EXPECT_GT(words, 12) << "the untrained model translated almost nothing: a weak comparison";
  EXPECT_GE(same, 22) << "of 24 hypotheses";
  EXPECT_NEAR(on_gpu.cross_entropy, on_host.cross_entropy, 1e-3 * on_host.cross_entropy);
  EXPECT_GT(on_host.cross_entropy, 0);
}

// A dev sentence longer than the Transformer's positions failed the first validation, after
// training had run; it is refused at start-up, naming the file and line.
TEST(ValidatorTest, ADevSentenceBeyondThePositionsIsRefusedAtStartUp) {
  data::testing::ScratchDir dir;
  const data::testing::GeneratedCorpus dev = data::testing::GenerateCorpus(24, 8, 11);
  data::testing::WriteLines(dir.File("dev.src"), dev.src);
  data::testing::WriteLines(dir.File("dev.tgt"), dev.tgt);
  config::TrainConfig config = TinyConfig(dir);
  Validator fits(config, data::testing::SmallVocab());  // 256 positions
  config.mutable_model()->set_max_length(5);
  try {
    Validator validator(config, data::testing::SmallVocab());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dev.src:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("longer than the Transformer's positions"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tern::trainer
