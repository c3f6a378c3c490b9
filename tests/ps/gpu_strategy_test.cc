// The strategies' GPU paths against their CPU runs (skipped without a GPU):
// - Sync SGD where the parameters live on the GPU: SyncSgd over NCCL (a world of one GPU)
//   against SyncSgd on the CPU over the in-process communicator, with tau accumulation and
//   clipping. The device path makes its buffers on the GPU, sums tau gradients there, reduces
//   and gathers over NCCL and steps the shard's optimizer on the GPU, and never waits for the
//   GPU: the collectives and the clip's squared norm stay on its stream.
// - Sync local SGD on the GPU against the CPU.
// - Async SGD with its shard on the GPU (StrategyOptions::shard_device) against the shard on
//   the CPU, with local-optimizer warm-up, dense and dropped pushes, and a save and load.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "comm/in_process.h"
#include "comm/nccl_communicator.h"
#include "ps/strategy.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/ps/test_vectors.h"

namespace tern::ps {
namespace {

using testing::Adam;
using testing::RandomVector;
using testing::View;

StepInfo Info(int64_t update) {
  StepInfo info;
  info.update = update;
  info.options.learning_rate = 1e-2f;
  info.options.beta1 = 0.9f;
  info.options.beta2 = 0.98f;
  return info;
}

class SyncSgdNcclTest : public ::testing::TestWithParam<bool> {};

TEST_P(SyncSgdNcclTest, EqualsTheCpuRun) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  if (!comm::NcclAvailable()) GTEST_SKIP() << "no NCCL (not in this build, or the GPU is emulated)";
  const bool clip = GetParam();
  const int64_t n = 10007;
  StrategyOptions options;
  options.tau = 2;
  options.clip_norm = clip ? 1.f : 0.f;
  comm::InProcessWorld world(1);
  std::vector<float> cpu_params = RandomVector(n, 1);
  std::vector<float> init = cpu_params;
  auto cpu = MakeStrategy("sync", options, Adam(), world.rank(0), n);
  cpu->Init(View(cpu_params));

  auto nccl = comm::MakeNcclCommunicator(world.rank(0), 0);
  Tensor gpu_params = Tensor::Empty(Shape{n}, DType::kFloat32, Device::kCuda);
  Tensor gpu_grads = Tensor::Empty(Shape{n}, DType::kFloat32, Device::kCuda);
  Copy(View(init), gpu_params);
  auto gpu = MakeStrategy("sync", options, Adam(), nccl.get(), n);
  gpu->Init(gpu_params);

  int64_t drains = 0;
  for (int step = 1; step <= 7; ++step) {
    std::vector<float> g = RandomVector(n, 100 + step);
    Copy(View(g), gpu_grads);
    const StepResult a = cpu->Step(View(g), View(cpu_params), Info(step));
    const int64_t before = DeviceDrains();
    const StepResult b = gpu->Step(gpu_grads, gpu_params, Info(step));
    drains += DeviceDrains() - before;
    ASSERT_EQ(a.params_changed, b.params_changed) << "step " << step;
  }
  EXPECT_EQ(drains, 0) << "a sync step waited for the GPU";
  cpu->Flush(View(cpu_params), Info(7));  // the odd mini-batch of the last tau group
  gpu->Flush(gpu_params, Info(7));
  const std::vector<float> back = gpu_params.ToVector();
  // Without clipping every operation is the CPU's, rounded alike: the same bits. With it the
  // squared norm is summed in another order, so the scale may differ in the last bits.
  int64_t differ = 0;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    differ += back[i] != cpu_params[i];
    worst = std::max(worst, std::abs(static_cast<double>(back[i]) - cpu_params[i]));
  }
  if (!clip) {
    EXPECT_EQ(differ, 0) << "largest difference " << worst;
  } else {
    EXPECT_LT(worst, 1e-5) << differ << " values differ";
  }
  EXPECT_EQ(cpu->SaveShardState().size(), gpu->SaveShardState().size());
  int64_t moved = 0;
  for (int64_t i = 0; i < n; ++i) moved += back[i] != init[i];
  EXPECT_GT(moved, n / 2) << "the parameters hardly moved: was anything stepped?";
}

INSTANTIATE_TEST_SUITE_P(Clip, SyncSgdNcclTest, ::testing::Bool());

// Sync local SGD on the GPU (inner Adam steps, the round's start and the outer Nesterov step
// there, NCCL's collectives) against the CPU: the same bits, the same inner optimizer state, and
// no wait for the GPU.
TEST(SyncLocalSgdNcclTest, EqualsTheCpuRun) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  if (!comm::NcclAvailable()) GTEST_SKIP() << "no NCCL (not in this build, or the GPU is emulated)";
  const int64_t n = 10007;
  StrategyOptions options;
  options.local_sgd = true;
  options.tau = 3;
  comm::InProcessWorld world(1);
  std::vector<float> cpu_params = RandomVector(n, 1);
  std::vector<float> init = cpu_params;
  auto cpu = MakeStrategy("sync", options, Adam(), world.rank(0), n);
  cpu->Init(View(cpu_params));
  auto nccl = comm::MakeNcclCommunicator(world.rank(0), 0);
  Tensor gpu_params = Tensor::Empty(Shape{n}, DType::kFloat32, Device::kCuda);
  Tensor gpu_grads = Tensor::Empty(Shape{n}, DType::kFloat32, Device::kCuda);
  Copy(View(init), gpu_params);
  auto gpu = MakeStrategy("sync", options, Adam(), nccl.get(), n);
  gpu->Init(gpu_params);
  int64_t drains = 0;
  for (int step = 1; step <= 7; ++step) {
    std::vector<float> g = RandomVector(n, 100 + step);
    Copy(View(g), gpu_grads);
    const StepResult a = cpu->Step(View(g), View(cpu_params), Info(step));
    const int64_t before = DeviceDrains();
    const StepResult b = gpu->Step(gpu_grads, gpu_params, Info(step));
    drains += DeviceDrains() - before;
    ASSERT_EQ(a.pushed, b.pushed) << "step " << step;
  }
  EXPECT_EQ(drains, 0) << "a local SGD step waited for the GPU";
  cpu->Flush(View(cpu_params), Info(7));  // the round of the 7th mini-batch alone
  gpu->Flush(gpu_params, Info(7));
  EXPECT_EQ(gpu_params.ToVector(), cpu_params);
  EXPECT_EQ(gpu->SaveWorkerState(), cpu->SaveWorkerState());
  EXPECT_EQ(gpu->SaveShardState(), cpu->SaveShardState());
  EXPECT_NE(cpu_params, init);
}

// Runs async SGD on one rank for `steps` mini-batches with the shard on `device`; returns the
// parameters and the shard's saved state.
std::pair<std::vector<float>, std::string> AsyncRun(Device device, int steps) {
  const int64_t n = 5003;
  StrategyOptions options;
  options.overlap = false;
  options.local_optimizer_updates = 3;
  options.drop_rate = 0.5f;
  options.drop_warmup = 4;
  options.shard_device = device;
  std::vector<float> params = RandomVector(n, 1);
  std::string state;
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    auto s = MakeStrategy("async", options, Adam(), &comm, n);
    s->Init(View(params));
    for (int step = 1; step <= steps; ++step) {
      std::vector<float> g = RandomVector(n, 200 + step);
      s->Step(View(g), View(params), Info(step));
    }
    s->Flush(View(params), Info(steps));
    state = s->SaveShardState();
    s->Finish();
    s.reset();
    // A shard loaded from that state saves the same bytes (one strategy per communicator at a
    // time: their server threads would take each other's messages).
    auto t = MakeStrategy("async", options, Adam(), &comm, n);
    t->Init(View(params));
    t->LoadShardState(state);
    EXPECT_EQ(t->SaveShardState(), state);
    t->Finish();
  });
  return {params, state};
}

TEST(AsyncShardOnGpuTest, EqualsTheShardOnTheCpu) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const auto [cpu_params, cpu_state] = AsyncRun(Device::kCpu, 9);
  const auto [gpu_params, gpu_state] = AsyncRun(Device::kCuda, 9);
  // Adam's update on the GPU rounds as the CPU's does: the same bits.
  EXPECT_EQ(cpu_params, gpu_params);
  EXPECT_EQ(cpu_state, gpu_state);
}

}  // namespace
}  // namespace tern::ps
