// Training on the GPU (training.device: cuda) against the same run on the CPU: a tiny
// Transformer (and AAN, s2s and devlin model) without dropout trained for 20 updates on a slice of
// the Bible corpus ends with parameters close to the CPU run's and the same dev cross-entropy, well
// below a uniform guess. Skips without a visible GPU, or without TERN_GPU_TEST_DATA (a folder with
// train.es/en and dev.es/en; scripts/gpu-bundle.sh packs one into gpu/data).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "comm/in_process.h"
#include "configs/config_io.h"
#include "tensor/allocator.h"
#include "trainer/checkpoint.h"
#include "trainer/trainer.h"

namespace tern::trainer {
namespace {

config::TrainConfig TinyConfig(const std::string& data, const std::string& vocab,
                               const std::string& device, const std::vector<std::string>& extra) {
  config::TrainConfig c;
  std::string error;
  const std::string text = R"(model { arch: "transformer" }
    optim { optimizer: "adam" learning_rate: 0.003 warmup_updates: 5 })";
  EXPECT_TRUE(config::ParseTrainConfig(text, "tiny", &c, &error)) << error;
  const std::vector<std::string> overrides = {"model.emb_dim=32",
                                              "model.ffn_dim=64",
                                              "model.heads=2",
                                              "model.enc_depth=1",
                                              "model.dec_depth=1",
                                              "model.dropout=0",
                                              "model.attention_dropout=0",
                                              "model.ffn_dropout=0",
                                              "data.train_src=" + data + "/train.es",
                                              "data.train_tgt=" + data + "/train.en",
                                              "data.valid_src=" + data + "/dev.es",
                                              "data.valid_tgt=" + data + "/dev.en",
                                              "data.vocab=" + vocab,
                                              "data.vocab_size=600",
                                              "data.batch_tokens=600",
                                              "training.threads=1",
                                              "training.disp_freq=10",
                                              "training.valid_freq=20",
                                              "training.save_freq=20",
                                              "training.valid_max_sentences=20",
                                              "training.device=" + device};
  for (const std::string& a : overrides) {
    EXPECT_TRUE(config::ApplyOverride(a, &c, &error)) << a << ": " << error;
  }
  for (const std::string& a : extra) {
    EXPECT_TRUE(config::ApplyOverride(a, &c, &error)) << a << ": " << error;
  }
  config::FillDefaults(&c);
  EXPECT_TRUE(config::Validate(c, &error)) << error;
  return c;
}

Checkpoint TrainAndLoad(const config::TrainConfig& config, const std::string& dir,
                        int updates = 20) {
  std::filesystem::remove_all(dir);
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    TrainerOptions options;
    options.model_dir = dir;
    options.budget = Budget::Parse(std::to_string(updates) + "u");
    options.comm = &comm;
    // The CPU run takes the GPU run's path: one rank without tau steps exactly (no overlap of
    // the async round with the next batch, which delays each update by one step).
    options.host_copy = true;
    options.strategy_on_device = true;
    Train(config, options);
  });
  std::optional<Checkpoint> c = LoadLatestCheckpoint(dir);
  if (!c) ADD_FAILURE() << "no checkpoint in " << dir;
  return c ? *c : Checkpoint();
}

// Trains the tiny config (plus the overrides `extra`) for 20 updates on the CPU and on the GPU
// and compares.
void ExpectGpuRunNearCpuRun(const std::vector<std::string>& extra) {
  const char* data = std::getenv("TERN_GPU_TEST_DATA");
  const std::string tmp = std::filesystem::temp_directory_path() / "tern-gpu-training-test";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  // The CPU run first: it trains the vocabulary, which the GPU run then shares.
  const std::string vocab = tmp + "/vocab.spm";
  const Checkpoint cpu = TrainAndLoad(TinyConfig(data, vocab, "cpu", extra), tmp + "/cpu");
  const Checkpoint gpu = TrainAndLoad(TinyConfig(data, vocab, "cuda", extra), tmp + "/gpu");
  ASSERT_TRUE(cpu.params.defined() && gpu.params.defined());
  ASSERT_EQ(cpu.params.numel(), gpu.params.numel());
  EXPECT_EQ(gpu.state.update, 20);
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < cpu.params.numel(); ++i) {
    diff += std::pow(double{cpu.params.f32()[i]} - gpu.params.f32()[i], 2);
    norm += std::pow(double{cpu.params.f32()[i]}, 2);
  }
  // Float sums in another order (cuBLAS, the GPU's reductions) drift apart over 20 Adam steps,
  // but stay a small fraction of the parameters.
  EXPECT_LT(std::sqrt(diff), 1e-2 * std::sqrt(norm));
  // Validation (on the host copy) after update 20: the GPU run learned what the CPU run did.
  EXPECT_LT(gpu.state.best_valid, 0.9 * std::log(600.0));
  EXPECT_NEAR(gpu.state.best_valid, cpu.state.best_valid, 0.02 * cpu.state.best_valid);
}

#define SKIP_WITHOUT_GPU_OR_DATA()                             \
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible"; \
  if (std::getenv("TERN_GPU_TEST_DATA") == nullptr) GTEST_SKIP() << "TERN_GPU_TEST_DATA not set"

TEST(GpuTrainingTest, TwentyUpdatesOnTheGpuEndNearTheCpuRun) {
  // One rank, plain: the optimizer steps on the GPU (ps::LocalStrategy); then with the gradient
  // clipped by its norm there (ClipByNorm: the norm never comes to the host).
  SKIP_WITHOUT_GPU_OR_DATA();
  ExpectGpuRunNearCpuRun({});
  ExpectGpuRunNearCpuRun({"optim.clip_norm=0.5"});
}

TEST(GpuTrainingTest, AOneGpuStepDoesNotWaitForTheGpu) {
  // The host waits for the GPU's queue as often in a run of 40 updates as in one of 20 (setup,
  // the final checkpoint): the steps in between, clipping included, never do. fp16's too: its
  // overflow check and loss scale stay on the GPU (a scale of 2^40 overflows now and then, so
  // some steps are skipped there).
  SKIP_WITHOUT_GPU_OR_DATA();
  const char* data = std::getenv("TERN_GPU_TEST_DATA");
  const std::string tmp = std::filesystem::temp_directory_path() / "tern-gpu-drain-test";
  for (const std::string precision : {"float32", "fp16"}) {
    std::filesystem::remove_all(tmp);
    std::filesystem::create_directories(tmp);
    const config::TrainConfig c =
        TinyConfig(data, tmp + "/vocab.spm", "cuda",
                   {"optim.clip_norm=0.5", "training.disp_freq=1000", "training.valid_freq=1000",
                    "training.save_freq=1000", "training.precision=" + precision,
                    "training.loss_scale=1099511627776", "training.loss_scale_window=3"});
    TrainAndLoad(c, tmp + "/warm", 2);  // trains the vocabulary, warms the device pool
    auto drains = [&](int updates) {
      const int64_t before = DeviceDrains();
      TrainAndLoad(c, tmp + "/run", updates);
      return DeviceDrains() - before;
    };
    const int64_t at20 = drains(20), at40 = drains(40);
    std::printf("%s: the host waited %lld times in a run of 20 updates, %lld in one of 40\n",
                precision.c_str(), static_cast<long long>(at20), static_cast<long long>(at40));
    EXPECT_GT(at20, 0) << precision << ": no wait counted at all: is the counter wired?";
    EXPECT_EQ(at40, at20) << precision << ": 20 more updates waited " << at40 - at20
                          << " more times";
  }
}

TEST(GpuTrainingTest, WithTauTheHostCopyPathAlsoEndsNearTheCpuRun) {
  // tau 2: async SGD on the host copy, gradients down and parameters up every update. Rounds
  // inline (overlap never): overlapped, a round's staleness depends on the machine's load, and a
  // run whose round came back one step late once ends 2% away from one whose did not.
  SKIP_WITHOUT_GPU_OR_DATA();
  ExpectGpuRunNearCpuRun({"distributed.tau=2", "distributed.overlap=never"});
}

TEST(GpuTrainingTest, MixedPrecisionOnTheTensorCoresEndsNearTheCpusEmulation) {
  // bf16 and fp16 (with loss scaling) products on the tensor cores against the CPU's rounding
  // of the same operands.
  SKIP_WITHOUT_GPU_OR_DATA();
  ExpectGpuRunNearCpuRun({"training.precision=bf16"});
  ExpectGpuRunNearCpuRun({"training.precision=fp16"});
}

TEST(GpuTrainingTest, TheAanAndGruModelsTrainOnTheGpuToo) {
  // Every architecture's graph on the GPU: the AAN decoder, Nematus' GRUs with layer
  // normalization and a deep transition, and Devlin's student with clipped ReLUs.
  SKIP_WITHOUT_GPU_OR_DATA();
  ExpectGpuRunNearCpuRun({"model.arch=aan"});
  ExpectGpuRunNearCpuRun({"model.arch=s2s", "model.rnn_dim=32", "model.layer_normalization=true",
                          "model.enc_cell_depth=2", "model.dec_cell_base_depth=3",
                          "model.rnn_dropout=0"});
  ExpectGpuRunNearCpuRun({"model.arch=devlin", "model.rnn_dim=32", "model.fc_depth=2",
                          "model.clip_relu=5", "model.rnn_dropout=0"});
}

TEST(GpuTrainingTest, TheDemoPresetLearnsOnTheGpu) {
  // configs/bible-small.pbtxt (TERN_GPU_DEMO_CONFIG) on the GPU for TERN_GPU_DEMO_UPDATES updates
  // of the whole training set in TERN_GPU_TEST_DATA, into TERN_GPU_DEMO_DIR; the log carries the
  // cost and dev cross-entropy lines to set beside the CPU demo's. Opt-in: minutes of GPU time
  // (gpu/run.sh runs it, then exports the model for the decoding benchmark).
  SKIP_WITHOUT_GPU_OR_DATA();
  const char* path = std::getenv("TERN_GPU_DEMO_CONFIG");
  const char* updates = std::getenv("TERN_GPU_DEMO_UPDATES");
  const char* dir = std::getenv("TERN_GPU_DEMO_DIR");
  if (path == nullptr || updates == nullptr || dir == nullptr) {
    GTEST_SKIP() << "TERN_GPU_DEMO_CONFIG, TERN_GPU_DEMO_UPDATES or TERN_GPU_DEMO_DIR not set";
  }
  const std::string data = std::getenv("TERN_GPU_TEST_DATA");
  config::TrainConfig c;
  std::string error;
  ASSERT_TRUE(config::LoadTrainConfig(path, &c, &error)) << error;
  for (const std::string& a :
       {"data.train_src=" + data + "/train.es", "data.train_tgt=" + data + "/train.en",
        "data.valid_src=" + data + "/dev.es", "data.valid_tgt=" + data + "/dev.en",
        std::string("training.device=cuda")}) {
    ASSERT_TRUE(config::ApplyOverride(a, &c, &error)) << a << ": " << error;
  }
  config::FillDefaults(&c);
  ASSERT_TRUE(config::Validate(c, &error)) << error;
  std::filesystem::remove_all(dir);
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    TrainerOptions options;
    options.model_dir = dir;
    options.budget = Budget::Parse(std::string(updates) + "u");
    options.comm = &comm;
    Train(c, options);
  });
  std::optional<Checkpoint> done = LoadLatestCheckpoint(dir);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->state.update, std::stoll(updates));
  // A uniform guess costs log(vocab) nats a word; a model that learned is far below.
  EXPECT_GT(done->state.best_valid, 0);
  EXPECT_LT(done->state.best_valid, 0.75 * std::log(static_cast<double>(c.data().vocab_size())));
}

}  // namespace
}  // namespace tern::trainer
